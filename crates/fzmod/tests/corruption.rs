//! Corruption that reaches the decoders: every byte of every stage record and every segment
//! of every golden archive is mutated, the CRCs are recomputed (so the checksums do not stop
//! it, as they stop every raw flip in golden.rs), and the archive is decoded. Each mutation
//! must give an error or a decode of the header's shape — never a panic, a hang, or an
//! allocation larger than the format's worst legitimate expansion (docs/FORMAT.md §3).

mod common;

use common::reseal::{fix_crcs, layout};

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counts each thread's live heap bytes and their peak, so the memory of one decode (run on
/// its own one-thread pool) can be bounded. Frees on other threads only make counts smaller.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let _ = LIVE.try_with(|live| {
                live.set(live.get() + layout.size());
                let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
            });
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(layout.size())));
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Run `f` and return its result with the heap it used at its peak on this thread.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let value = f();
    (value, PEAK.with(Cell::get) - before)
}

/// Worst legitimate expansion (docs/FORMAT.md §3): ~12 KiB of live decode memory per archive
/// byte (rate-0 AdaptiveBitpack blocks to i32 codes, then f64 values), plus a fixed allowance
/// for the decoder's own bookkeeping and the thread pool.
const BYTES_PER_ARCHIVE_BYTE: usize = 12 * 1024;
const FIXED_ALLOWANCE: usize = 16 << 20;

/// The distinct values a byte is mutated to: XOR 0x01, 0x80, 0xFF, and set to 0x00, 0xFF.
/// Bulk payload bytes (`sampled`: past a segment's first 2 KiB, where the block metadata and
/// outlier varints live, and before its last 64 bytes) get one of them, rotating with the
/// position `i`, which keeps the sweep within CI's time on 2 cores.
fn mutations(original: u8, sampled: bool, i: usize) -> Vec<u8> {
    let mut values = vec![original ^ 0x01, original ^ 0x80, original ^ 0xff, 0x00, 0xff];
    if sampled {
        values = vec![values[i % values.len()]];
    }
    values.retain(|&v| v != original);
    values.sort_unstable();
    values.dedup();
    values
}

/// Abort the whole run if the sweep stops making progress: a hang must fail, not stall CI.
fn watchdog(progress: &'static AtomicU64, current: &'static [Mutex<String>]) {
    std::thread::spawn(move || {
        let mut last = u64::MAX;
        loop {
            std::thread::sleep(Duration::from_secs(20));
            let now = progress.load(Relaxed);
            if now == last {
                for what in current {
                    eprintln!("corruption sweep hung on: {}", what.lock().map(|w| w.clone()).unwrap_or_default());
                }
                std::process::exit(1);
            }
            last = now;
        }
    });
}

/// What one share of the sweep saw.
#[derive(Default)]
struct Tally {
    decodes: u64,
    decoded_ok: u64,
    /// Largest decode memory peak per archive byte.
    worst_ratio: f64,
    failures: Vec<String>,
}

static PROGRESS: AtomicU64 = AtomicU64::new(0);
static CURRENT: [Mutex<String>; 2] = [Mutex::new(String::new()), Mutex::new(String::new())];

/// Mutate the bytes `i` with `i % shares == share` of one archive's records and segments.
fn sweep(name: &str, archive: &[u8], share: usize, shares: usize, tally: &mut Tally) {
    let l = layout(archive);
    let elements = fzmod::inspect(archive).unwrap().num_elements().unwrap();
    let cap = BYTES_PER_ARCHIVE_BYTE * archive.len() + FIXED_ALLOWANCE;
    let records = l.records.iter().map(|r| ("record", r.clone()));
    let targets = records.chain(l.segments.iter().map(|(r, _)| ("segment", r.clone())));
    let mut bad = archive.to_vec();
    for (part, range) in targets {
        let (start, end) = (range.start, range.end);
        for i in range.filter(|i| i % shares == share) {
            let bulk = part == "segment" && i >= start + 2048 && i + 64 < end;
            for value in mutations(archive[i], bulk, i) {
                bad[i] = value;
                fix_crcs(&mut bad, &l);
                let what = format!("{name}: {part} byte {i} {:#04x} -> {value:#04x}", archive[i]);
                *CURRENT[share].lock().unwrap() = what.clone();
                let (outcome, used) =
                    measured(|| std::panic::catch_unwind(|| fzmod::decompress(&bad).map(|d| d.data.len() as u64)));
                tally.worst_ratio = tally.worst_ratio.max(used as f64 / archive.len() as f64);
                tally.decodes += 1;
                PROGRESS.fetch_add(1, Relaxed);
                match outcome {
                    Err(_) => tally.failures.push(format!("{what}: panicked")),
                    Ok(Ok(len)) if len != elements => {
                        tally.failures.push(format!("{what}: decoded {len} values, header says {elements}"))
                    }
                    Ok(Ok(_)) => tally.decoded_ok += 1,
                    Ok(Err(_)) => {}
                }
                if used > cap {
                    tally.failures.push(format!("{what}: decode used {used} bytes of memory, cap {cap}"));
                }
            }
            bad[i] = archive[i];
        }
    }
    fix_crcs(&mut bad, &l);
    assert_eq!(bad, archive, "{name}: the CRC fixer changed an intact archive");
}

#[test]
fn mutated_records_and_segments_with_fixed_crcs_decode_or_fail_cleanly() {
    watchdog(&PROGRESS, &CURRENT);
    // Panics are caught and reported with their mutation; keep the default hook quiet.
    std::panic::set_hook(Box::new(|_| {}));
    let mut goldens: Vec<_> = std::fs::read_dir(common::repo_root().join("tests/golden"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fzm"))
        // The re-sealer re-parses format 1 layouts; chunked (2.x) goldens have their own
        // mutation sweep in tests/chunks.rs (re-sealed headers, truncations, byte flips).
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("v1.")))
        .map(|p| (p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    goldens.sort();
    assert!(goldens.len() >= 7, "expected the golden archives, found {}", goldens.len());

    let started = Instant::now();
    let shares = CURRENT.len();
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..shares)
            .map(|share| {
                let goldens = &goldens;
                scope.spawn(move || {
                    // Each share decodes on its own one-thread pool: small archives decode
                    // faster without waking a pool, and the memory peak is this thread's.
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
                    pool.install(|| {
                        let mut tally = Tally::default();
                        for (name, archive) in goldens {
                            sweep(name, archive, share, shares, &mut tally);
                        }
                        tally
                    })
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let _ = std::panic::take_hook();
    let decodes: u64 = tallies.iter().map(|t| t.decodes).sum();
    let decoded_ok: u64 = tallies.iter().map(|t| t.decoded_ok).sum();
    let worst_ratio = tallies.iter().map(|t| t.worst_ratio).fold(0.0, f64::max);
    let failures: Vec<&String> = tallies.iter().flat_map(|t| &t.failures).collect();
    eprintln!(
        "corruption sweep: {decodes} mutated archives in {:.1} s, {decoded_ok} decoded to the header's shape, \
         the rest were errors; peak decode memory {worst_ratio:.1} bytes per archive byte",
        started.elapsed().as_secs_f64()
    );
    assert!(worst_ratio >= 1.0, "the allocation counter saw no decode memory: the cap checks nothing");
    let first: Vec<&str> = failures.iter().take(20).map(|f| f.as_str()).collect();
    assert!(failures.is_empty(), "{} bad outcomes, first ones:\n{}", failures.len(), first.join("\n"));
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 512, ..Default::default() })]

    /// Several bytes mutated at once anywhere in the records and segments, CRCs fixed: an
    /// error or a decode of the header's shape, never a panic.
    #[test]
    fn random_multi_byte_mutations_with_fixed_crcs_never_panic(
        golden in 0usize..64,
        edits in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY), 1..8),
    ) {
        let mut paths: Vec<_> = std::fs::read_dir(common::repo_root().join("tests/golden"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "fzm"))
        // The re-sealer re-parses format 1 layouts; chunked (2.x) goldens have their own
        // mutation sweep in tests/chunks.rs (re-sealed headers, truncations, byte flips).
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("v1.")))
            .collect();
        paths.sort();
        let archive = std::fs::read(&paths[golden % paths.len()]).unwrap();
        let l = layout(&archive);
        let mutable: Vec<usize> =
            l.records.iter().cloned().chain(l.segments.iter().map(|(r, _)| r.clone())).flatten().collect();
        let mut bad = archive.clone();
        for (at, value) in &edits {
            bad[mutable[at % mutable.len()]] = *value;
        }
        fix_crcs(&mut bad, &l);
        let elements = fzmod::inspect(&bad).unwrap().num_elements().unwrap();
        match std::panic::catch_unwind(|| fzmod::decompress(&bad).map(|d| d.data.len() as u64)) {
            Err(_) => proptest::prop_assert!(false, "{:?} {edits:?}: panicked", paths[golden % paths.len()]),
            Ok(Ok(len)) => proptest::prop_assert_eq!(len, elements),
            Ok(Err(_)) => {}
        }
    }
}
