//! The Rust side of bench/overhead.py: the library called directly, as a Rust program would
//! (the embedding API: a `Compressor` built once, compressing a borrowed slice), timed like
//! the Python side.
//!
//!     cargo run --release -p fzmod-python --example baseline -- FIELD.f32 ROWSxCOLS RUNS
//!
//! Prints one JSON line: per-call process CPU time (mean over RUNS, after a warm-up) and the
//! fastest wall time, for compress and decompress (preset cuszp2, rel 1e-3, CPU backend).

use std::time::Instant;

/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`: the clock Python's `time.process_time` reads.
fn process_cpu_seconds() -> f64 {
    #[repr(C)]
    struct Timespec {
        seconds: i64,
        nanoseconds: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut t = Timespec { seconds: 0, nanoseconds: 0 };
    // SAFETY: a valid clock id and a valid out-pointer.
    let status = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    assert_eq!(status, 0, "clock_gettime failed");
    t.seconds as f64 + t.nanoseconds as f64 * 1e-9
}

/// Mean CPU seconds per call and fastest wall seconds of `runs` calls after one warm-up.
fn time_calls(runs: usize, mut call: impl FnMut()) -> (f64, f64) {
    call();
    let mut fastest = f64::INFINITY;
    let cpu_start = process_cpu_seconds();
    for _ in 0..runs {
        let start = Instant::now();
        call();
        fastest = fastest.min(start.elapsed().as_secs_f64());
    }
    ((process_cpu_seconds() - cpu_start) / runs as f64, fastest)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, shape, runs] = args.as_slice() else {
        return Err("usage: baseline FIELD.f32 ROWSxCOLS RUNS".into());
    };
    let shape = fzmod::parse_shape(shape)?;
    let runs: usize = runs.parse()?;
    let input = fzmod::Buffer::from_le_bytes(fzmod::DType::F32, &std::fs::read(path)?)?;
    let values = <f32 as fzmod::Element>::slice(&input).ok_or("not f32")?;
    let bound = fzmod::ErrorBound::new(fzmod::ErrorMode::Rel, 1e-3)?;
    let compressor = fzmod::Compressor::preset::<f32>("cuszp2", &shape, bound, fzmod::backend::BackendChoice::Cpu)?;
    let archive = compressor.compress(values, &shape)?;
    let (compress_cpu, compress_wall) = time_calls(runs, || {
        std::hint::black_box(compressor.compress(values, &shape).expect("compress"));
    });
    let (decompress_cpu, decompress_wall) = time_calls(runs, || {
        std::hint::black_box(fzmod::decompress(&archive).expect("decompress"));
    });
    println!(
        "{{\"compress_cpu\": {compress_cpu}, \"compress_wall\": {compress_wall}, \
         \"decompress_cpu\": {decompress_cpu}, \"decompress_wall\": {decompress_wall}}}"
    );
    Ok(())
}
