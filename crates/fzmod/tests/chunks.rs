//! Chunked archives (docs/FORMAT.md §8): every preset round-trips within its bound, region
//! decode equals the slice of a full decode, the bytes do not depend on the thread count,
//! every index class decodes the same values, a region reads only its chunks, and damaged
//! archives give errors, never panics.

mod common;

use common::*;
use fzmod::archive::index::IndexClass;
use fzmod::archive::source::{ArchiveSource, CountingSource};
use fzmod::backend::Backend;
use fzmod::{Buffer, ChunkOptions, Decoder, ErrorBound, ErrorMode, RunOptions};
use std::ops::Range;

/// A smooth 3-D field with some noise and a few special values.
fn field(shape: &[usize], specials: bool) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|i| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let noise = ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.01;
            let x = i as f32;
            if specials && i % 997 == 5 {
                return f32::NAN;
            }
            (x * 0.013).sin() * 10.0 + (x * 0.0007).cos() * 3.0 + noise
        })
        .collect()
}

fn compress_chunked(preset: &str, data: &[f32], shape: &[usize], chunk: &[usize], bound: ErrorBound) -> Vec<u8> {
    let mut p = fzmod::preset(preset, shape).unwrap();
    p.set_error_bound(bound).unwrap();
    p.compress_chunked(
        &Backend::Cpu,
        &Buffer::F32(data.to_vec()),
        shape,
        &ChunkOptions::shape(chunk),
        RunOptions::default(),
    )
    .unwrap()
}

/// The first `n` values of the shipped field (the golden archives' input).
fn navy_uwnd(n: usize) -> Vec<f32> {
    let Buffer::F32(v) = load(&repo_root().join("data/navy_uwnd_132x73x144.f32")).data else { unreachable!() };
    v[..n].to_vec()
}

fn slice(full: &[f32], shape: &[usize], region: &[Range<u64>]) -> Vec<f32> {
    let mut out = Vec::new();
    let (d0, d1, d2) = (region[0].clone(), region[1].clone(), region[2].clone());
    for z in d0 {
        for y in d1.clone() {
            for x in d2.clone() {
                out.push(full[(z as usize * shape[1] + y as usize) * shape[2] + x as usize]);
            }
        }
    }
    out
}

fn f32s(b: &Buffer) -> Vec<f32> {
    match b {
        Buffer::F32(v) => v.clone(),
        _ => panic!("not f32"),
    }
}

#[test]
fn every_preset_round_trips_and_regions_equal_slices_of_the_full_decode() {
    let shape = [9usize, 37, 53];
    let data = field(&shape, false);
    let original = Buffer::F32(data.clone());
    let mut state = 7u64;
    for preset in fzmod::PRESETS.iter().map(|p| p.name) {
        for bound in [ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap(), ErrorBound::new(ErrorMode::Abs, 0.05).unwrap()] {
            let archive = compress_chunked(preset, &data, &shape, &[4, 16, 20], bound);
            assert_eq!(&archive[8..10], &[2, 0], "{preset}: chunked archives are format 2");
            let full = fzmod::decompress(&archive).unwrap();
            let what = format!("{preset} {bound:?}");
            assert_within(&original, &full.data, expected_abs_bound(&original, bound), &what);
            let header = fzmod::inspect(&archive).unwrap();
            assert!(!header.stages.is_empty(), "{what}: inspect shows the pipeline");
            let full = f32s(&full.data);
            let mut regions = vec![
                shape.iter().map(|&n| 0..n as u64).collect::<Vec<_>>(),
                vec![8..9, 36..37, 52..53],
                vec![0..1, 0..1, 0..1],
                vec![3..5, 15..17, 19..21],
            ];
            regions.extend((0..6).map(|_| random_box(&shape, &mut state)));
            for region in regions {
                let got = fzmod::decompress_region(&archive, &region).unwrap();
                let want = slice(&full, &shape, &region);
                assert_eq!(
                    f32s(&got.data).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{what} region {region:?}"
                );
            }
        }
    }
}

#[test]
fn unchunked_regions_are_slices_and_bad_regions_are_refused() {
    let shape = [6usize, 20, 30];
    let data = field(&shape, true);
    let archive = fzmod::compress(&data, &shape, "cuszp2", ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap()).unwrap();
    assert_eq!(&archive[8..12], &[1, 0, 0, 0], "unchunked archives stay format 1.0");
    let full = f32s(&fzmod::decompress(&archive).unwrap().data);
    let region = vec![1..4, 5..6, 0..30];
    let got = f32s(&fzmod::decompress_region(&archive, &region).unwrap().data);
    let want = slice(&full, &shape, &region);
    assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    for bad in [vec![0..1, 0..1], vec![0..1, 0..1, 0..31], vec![2..2, 0..1, 0..1]] {
        let e = fzmod::decompress_region(&archive, &bad).unwrap_err();
        assert_eq!(e.kind(), fzmod::ErrorKind::InvalidArgument, "{bad:?}: {e}");
    }
    let s = [6u64, 20, 30];
    assert_eq!(fzmod::parse_region("1:4, 5, :", &s).unwrap(), region);
    assert_eq!(fzmod::parse_region("-2:,::1,-30:-1", &s).unwrap(), vec![4..6, 0..20, 0..29]);
    for (text, needle) in [
        ("1:4,5", "3 dimensions"),
        ("1:4,5,0:31", "31"),
        ("4:4,0:1,0:1", "empty"),
        ("0:6:2,0:1,0:1", "step 2"),
        ("a:b,0:1,0:1", "'a'"),
        ("6,0:1,0:1", "index"),
    ] {
        let e = fzmod::parse_region(text, &s).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn bytes_do_not_depend_on_the_thread_count() {
    let shape = [8usize, 40, 64];
    let data = field(&shape, true);
    let bound = ErrorBound::new(ErrorMode::Rel, 1e-4).unwrap();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| compress_chunked("cuszp3-outlier", &data, &shape, &[3, 17, 64], bound))
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(3));
}

#[test]
fn every_index_class_decodes_the_same_values() {
    let shape = [4usize, 64, 64];
    let data = field(&shape, false);
    let mut p = fzmod::preset("cuszp2", &shape).unwrap();
    p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap()).unwrap();
    let input = Buffer::F32(data);
    let mut decoded = Vec::new();
    for class in [IndexClass::Verbatim, IndexClass::Hybrid4, IndexClass::Hybrid8 { d: 3 }, IndexClass::Implicit] {
        let opts = ChunkOptions { chunk_shape: vec![1, 32, 64], index: vec![class] };
        match p.compress_chunked(&Backend::Cpu, &input, &shape, &opts, RunOptions::default()) {
            Ok(archive) => {
                assert_eq!(fzmod::inspect(&archive).unwrap().chunking.unwrap().index.class(), class);
                decoded.push(f32s(&fzmod::decompress(&archive).unwrap().data));
            }
            // Implicit holds only chunks of one size.
            Err(e) => assert_eq!(class, IndexClass::Implicit, "{e}"),
        }
    }
    assert!(decoded.len() >= 3);
    assert!(decoded.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn a_region_reads_only_the_chunks_it_needs() {
    let shape = [16usize, 64, 64];
    let data = field(&shape, false);
    let archive =
        compress_chunked("cuszp2", &data, &shape, &[4, 16, 16], ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap());
    let bytes: &[u8] = &archive;
    let counting = CountingSource::new(&bytes);
    let region = vec![4..8, 16..32, 16..32];
    let got = Decoder::new(Backend::Cpu).region_from(&counting, &region).unwrap();
    let full = f32s(&fzmod::decompress(&archive).unwrap().data);
    assert_eq!(f32s(&got.data), slice(&full, &shape, &region));
    let read = counting.bytes_read();
    assert!(read * 20 < bytes.len() as u64, "read {read} of {} bytes for 1 of 64 chunks", bytes.len());
    assert_eq!(counting.len(), bytes.len() as u64);
}

#[test]
fn damaged_chunked_archives_give_errors_or_the_right_values() {
    let shape = [4usize, 24, 24];
    let data = field(&shape, false);
    let bound = ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap();
    let archive = compress_chunked("cuszp2", &data, &shape, &[2, 12, 24], bound);
    let good = f32s(&fzmod::decompress(&archive).unwrap().data);
    let region = vec![1..3, 5..17, 0..24];
    let check = |bytes: &[u8], what: &str| {
        if let Ok(d) = fzmod::decompress(bytes) {
            assert_eq!(f32s(&d.data), good, "{what}: a damaged archive decoded to other values");
        }
        let _ = fzmod::decompress_region(bytes, &region);
        let _ = fzmod::inspect(bytes);
    };
    for len in 0..archive.len() {
        check(&archive[..len], &format!("truncated to {len}"));
    }
    // Header fields (the chunk grid, the bound, the index) changed and re-sealed, so the
    // checks behind the CRC see them.
    let crc_at = header_crc_at(&archive);
    for at in 16..crc_at {
        for flip in [0x01u8, 0x02, 0x10, 0x80, 0xff] {
            let mut bad = archive.clone();
            bad[at] ^= flip;
            reseal_header(&mut bad, crc_at);
            check(&bad, &format!("re-sealed header byte {at} ^ {flip:#x}"));
        }
    }
    let header_end = 256.min(archive.len());
    for at in (0..archive.len()).filter(|&i| i < header_end || i % 7 == 0) {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = archive.clone();
            bad[at] ^= flip;
            check(&bad, &format!("byte {at} ^ {flip:#x}"));
        }
    }
}

/// A golden chunked archive (tests/golden/, format 2.0): written once (FZMOD_BLESS=1) and
/// decoded to the same values forever, whole and by region.
#[test]
fn the_golden_chunked_archive_decodes_to_its_recorded_values() {
    let shape = [4usize, 73, 144];
    let (archive, decoded) = golden("v2.0_chunked_cuszp2_3d.fzm", || {
        let data = navy_uwnd(shape.iter().product());
        compress_chunked("cuszp2", &data, &shape, &[2, 40, 72], ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap())
    });
    let full = f32s(&decoded.data);
    for region in [vec![1..3, 30..50, 60..100], vec![0..4, 0..73, 0..144], vec![3..4, 72..73, 143..144]] {
        let got = f32s(&fzmod::decompress_region(&archive, &region).unwrap().data);
        assert_eq!(got, slice(&full, &shape, &region), "{region:?}");
    }
}

/// A golden chunked archive for each of the other index classes (the one above is hybrid8):
/// each class is its own decode path of the chunk index, so each has bytes that must decode
/// to the same values forever, whole and by region. Implicit holds chunks of one size only:
/// a constant field makes them.
#[test]
fn golden_chunked_archives_of_every_index_class_decode_forever() {
    let shape = [4usize, 73, 144];
    // (file, preset, index class, whether the field is constant)
    let cases = [
        ("v2.0_chunked_verbatim_pfpl_3d.fzm", "pfpl", IndexClass::Verbatim, false),
        ("v2.0_chunked_hybrid4_fzgpu_3d.fzm", "fzgpu", IndexClass::Hybrid4, false),
        ("v2.0_chunked_implicit_cuszp3-fixed_3d.fzm", "cuszp3-fixed", IndexClass::Implicit, true),
    ];
    for (file, preset, class, constant) in cases {
        let (archive, decoded) = golden(file, || {
            let n = shape.iter().product();
            let data = if constant { vec![2.5f32; n] } else { navy_uwnd(n) };
            let mut p = fzmod::preset(preset, &shape).unwrap();
            p.set_error_bound(ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap()).unwrap();
            let opts = ChunkOptions { chunk_shape: vec![2, 40, 72], index: vec![class] };
            p.compress_chunked(&Backend::Cpu, &Buffer::F32(data), &shape, &opts, RunOptions::default()).unwrap()
        });
        assert_eq!(fzmod::inspect(&archive).unwrap().chunking.unwrap().index.class(), class, "{file}");
        let full = f32s(&decoded.data);
        for region in [vec![1..3, 30..50, 60..100], vec![3..4, 72..73, 143..144]] {
            let got = f32s(&fzmod::decompress_region(&archive, &region).unwrap().data);
            assert_eq!(got, slice(&full, &shape, &region), "{file} {region:?}");
        }
    }
}

/// Decoding into the caller's array: slabs (each chunk straight into its place) and boxes
/// (through one copy) give the values of a decode into a new buffer; a damaged chunk gives
/// the same error either way, and the wrong destination is refused before anything runs.
#[test]
fn decoding_into_the_callers_array_equals_a_new_buffer() {
    let shape = [24usize, 40, 72];
    let data = field(&shape, true);
    let bound = ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap();
    for (preset, chunk) in
        [("cuszp2", [3, 40, 72]), ("pfpl", [1, 17, 72]), ("fzgpu", [8, 16, 24]), ("cusz", [24, 40, 72])]
    {
        let archive = compress_chunked(preset, &data, &shape, &chunk, bound);
        let expected = f32s(&fzmod::decompress(&archive).unwrap().data);
        let decoder = Decoder::new(Backend::Cpu);
        let mut out = vec![f32::MAX; data.len()];
        decoder.decompress_into(&archive, &mut out).unwrap();
        assert!(out.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()), "{preset} {chunk:?}");
        let mut short = vec![0f32; data.len() - 1];
        assert!(decoder.decompress_into(&archive, &mut short).is_err(), "{preset}: a short destination");
        for at in [archive.len() / 2, archive.len() - 100] {
            let mut bad = archive.clone();
            bad[at] ^= 0x10;
            let into = decoder.decompress_into(&bad, &mut out).err().map(|e| e.to_string());
            let fresh = decoder.decompress(&bad).err().map(|e| e.to_string());
            assert!(into.is_some(), "{preset}: a damaged byte at {at} decoded");
            assert_eq!(into, fresh, "{preset}: byte {at}");
        }
    }
}

/// An f32 array of `n` elements in chunks of one, its index implicit (one unit per chunk):
/// the header of a seekable archive (the index in it, no data), or of a streamed one followed
/// by a trailer holding that index and nothing else.
fn implicit_index_archive(n: u64, streamed: bool) -> Vec<u8> {
    let mut record = vec![IndexClass::Implicit.code()];
    varint(&mut record, n); // blocks
    varint(&mut record, 1); // units per block
    if !streamed {
        return chunked_header(&[n], &[1], n * 64, Some((n, &record)));
    }
    let mut archive = chunked_header(&[n], &[1], 0, None);
    archive.extend_from_slice(&record);
    archive.extend_from_slice(&(record.len() as u64).to_le_bytes());
    archive.extend_from_slice(&crc32c::crc32c(&record).to_le_bytes());
    archive.extend_from_slice(b"FZMI");
    archive
}

/// An implicit chunk index is three fields whatever its block count: a header (or trailer)
/// stating 2^40 chunks is checked in constant time and the missing data refused. Found while
/// fuzzing (reproduced with the decode target): the check walked the blocks one by one, and
/// a 100-byte archive kept `inspect` and `decompress` busy for hours.
#[test]
fn a_huge_implicit_chunk_index_is_refused_without_walking_its_blocks() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for streamed in [false, true] {
            let archive = implicit_index_archive(1 << 40, streamed);
            let errors = [
                fzmod::inspect(&archive).err(),
                fzmod::decompress(&archive).err(),
                fzmod::decompress_region(&archive, std::slice::from_ref(&(5..9))).err(),
            ];
            for e in errors {
                // Past the index checks: the seekable header's data is missing, the trailer's
                // index does not place the frames where they are.
                match e {
                    Some(fzmod::Error::Truncated(_)) if !streamed => {}
                    Some(fzmod::Error::Corrupt(m)) if streamed && m.contains("places the frames") => {}
                    e => panic!("streamed: {streamed}: {e:?}"),
                }
            }
        }
        done.send(()).unwrap();
    });
    let outcome = finished.recv_timeout(std::time::Duration::from_secs(60));
    assert!(outcome.is_ok(), "an implicit index of 2^40 chunks was not refused within a minute (or panicked)");
}
