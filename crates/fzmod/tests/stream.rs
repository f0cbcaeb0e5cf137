//! Streamed chunked archives (docs/FORMAT.md §8.5): their frames are the chunks of the
//! seekable archive of the same array; the file reader (through the trailer), the pipe reader
//! (frames in order) and the in-memory decode give the seekable decode's values; region decode
//! reads a streamed file; a relative bound needs its range; and every truncation or damage is a
//! typed error or the right values.

mod common;

use common::*;
use fzmod::archive::source::{CountingSource, FileSource};
use fzmod::backend::Backend;
use fzmod::{Buffer, ChunkOptions, DType, Decoder, ErrorBound, ErrorKind, ErrorMode, Pipeline, RunOptions};
use fzmod::{StreamCompressor, StreamDecoder, StreamOptions};
use std::io::Read;
use std::ops::Range;

/// A smooth field with noise, a NaN here and there when `specials`.
fn field(n: usize, specials: bool) -> Vec<f64> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|i| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let noise = ((state >> 40) as f64 / (1u64 << 24) as f64 - 0.5) * 0.01;
            if specials && i % 613 == 7 {
                return f64::NAN;
            }
            let x = i as f64;
            (x * 0.011).sin() * 7.0 + (x * 0.0009).cos() * 2.0 + noise
        })
        .collect()
}

fn buffer(values: &[f64], dtype: DType) -> Buffer {
    match dtype {
        DType::F32 => Buffer::F32(values.iter().map(|&v| v as f32).collect()),
        _ => Buffer::F64(values.to_vec()),
    }
}

fn pipeline(preset: &str, shape: &[usize], dtype: DType, bound: ErrorBound) -> Pipeline {
    let mut p = fzmod::preset(preset, shape).unwrap();
    p.set_error_bound(bound).unwrap();
    p.set_input_dtype(dtype).unwrap();
    p.finalize().unwrap();
    p
}

fn options(chunk: &[usize], range: Option<Option<(f64, f64)>>, slab_bytes: u64) -> StreamOptions {
    StreamOptions { chunks: ChunkOptions::shape(chunk), range, run: RunOptions::default(), slab_bytes, max_memory: 0 }
}

/// The streamed archive of `input`, fed slab by slab from its little-endian bytes.
fn streamed(p: &Pipeline, input: &Buffer, shape: &[usize], opts: &StreamOptions) -> fzmod::Result<Vec<u8>> {
    let bytes = input.to_le_bytes();
    let mut reader = &bytes[..];
    let mut s = StreamCompressor::new(p, &Backend::Cpu, input.dtype(), shape, opts, Vec::new())?;
    while s.write_slab_from(&mut reader)? {}
    let done = s.finish()?;
    assert_eq!(done.archive_len, done.out.len() as u64);
    Ok(done.out)
}

/// The range the in-memory chunked writer resolves a rel bound from: the whole input's.
fn whole_range(p: &Pipeline, input: &Buffer, shape: &[usize]) -> Option<(f64, f64)> {
    p.quantizer_value_range(input.view(), shape).unwrap()
}

/// The streamed archive of `input` by the library's whole streamed compression, read from a
/// seekable cursor (a first pass for a rel bound) or once, as from a pipe.
fn compress_stream(
    p: &Pipeline,
    input: &Buffer,
    shape: &[usize],
    opts: &StreamOptions,
    seekable: bool,
) -> fzmod::Result<(Vec<u8>, Vec<fzmod::StreamProgress>)> {
    let bytes = input.to_le_bytes();
    let mut cursor = std::io::Cursor::new(&bytes[..]);
    let mut once = Trickle(&bytes);
    let source = if seekable { fzmod::StreamInput::Seekable(&mut cursor) } else { fzmod::StreamInput::Once(&mut once) };
    let mut seen = Vec::new();
    let done = fzmod::compress_stream(p, &Backend::Cpu, input.dtype(), shape, opts, source, Vec::new(), &mut |e| {
        seen.push(e)
    })?;
    Ok((done.out, seen))
}

/// A reader that hands out a few bytes at a time, as a pipe does.
struct Trickle<'a>(&'a [u8]);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.0.len()).min(1000);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// Decode through the pipe reader, slab by slab, into little-endian bytes.
fn pipe_decode(archive: &[u8], slab_bytes: u64) -> fzmod::Result<Vec<u8>> {
    let d = StreamDecoder::new(Trickle(archive), Decoder::new(Backend::Cpu))?;
    let mut d = d.with_slab_bytes(slab_bytes)?;
    let mut out = Vec::new();
    let mut next_row = 0;
    while let Some(slab) = d.next_slab()? {
        assert_eq!(slab.rows.start, next_row, "slabs come in order");
        next_row = slab.rows.end;
        out.extend_from_slice(&slab.data.le_bytes());
    }
    assert_eq!(d.chunks_done(), d.num_chunks());
    Ok(out)
}

/// The chunk archives of a chunked archive (seekable or streamed), in order.
fn frames(archive: &[u8]) -> Vec<Vec<u8>> {
    let parsed = fzmod::archive::parse(archive).unwrap();
    let c = parsed.header.chunking.as_ref().unwrap();
    (0..c.index.len())
        .map(|i| {
            let (start, len) = c.chunk_span(i, parsed.data_len).unwrap();
            let at = parsed.data_start + start as usize;
            fzmod::archive::chunked::chunk_archive(&archive[at..at + len as usize], i).unwrap().to_vec()
        })
        .collect()
}

#[test]
fn streamed_archives_decode_like_the_seekable_archive_of_the_same_data() {
    let abs = ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap();
    // (shape, chunk shape, element type): 1-D to 4-D, edge chunks cut by the array, one chunk.
    let cases: [(&[usize], &[usize], DType); 7] = [
        (&[1000], &[128], DType::F32),
        (&[37, 53], &[8, 20], DType::F32),
        (&[37, 53], &[37, 53], DType::F64),
        (&[9, 17, 23], &[4, 8, 23], DType::F32),
        (&[9, 17, 23], &[2, 17, 5], DType::F64),
        (&[5, 6, 7, 8], &[2, 3, 7, 5], DType::F32),
        (&[1, 1, 300], &[1, 1, 64], DType::F32),
    ];
    let dir = std::env::temp_dir().join(format!("fzmod-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut state = 17u64;
    for (shape, chunk, dtype) in cases {
        let what = format!("{shape:?} in chunks {chunk:?} ({dtype})");
        let input = buffer(&field(shape.iter().product(), false), dtype);
        let p = pipeline("cuszp2", shape, dtype, abs);
        let seekable = p
            .compress_chunked(&Backend::Cpu, &input, shape, &ChunkOptions::shape(chunk), RunOptions::default())
            .unwrap();
        let expected = fzmod::decompress(&seekable).unwrap().data.to_le_bytes();
        // Small slabs (one grid step) and the default (the whole array here): the same bytes.
        let one_step = streamed(&p, &input, shape, &options(chunk, None, 1)).unwrap();
        assert_eq!(one_step, streamed(&p, &input, shape, &options(chunk, None, 0)).unwrap(), "{what}");
        assert_eq!(u16::from_le_bytes([one_step[10], one_step[11]]), 1, "{what}: streamed archives are 2.1");
        assert_eq!(frames(&one_step), frames(&seekable), "{what}: the frames are the seekable chunks");
        let whole = fzmod::decompress(&one_step).unwrap();
        assert_eq!(whole.data.to_le_bytes(), expected, "{what}: in-memory decode");
        for slab_bytes in [1, 0] {
            assert_eq!(pipe_decode(&one_step, slab_bytes).unwrap(), expected, "{what}: pipe reader");
        }
        let path = dir.join("a.fzm");
        std::fs::write(&path, &one_step).unwrap();
        let file = FileSource::new(std::fs::File::open(&path).unwrap()).unwrap();
        let decoder = Decoder::new(Backend::Cpu);
        let full: Vec<Range<u64>> = shape.iter().map(|&n| 0..n as u64).collect();
        assert_eq!(decoder.region_from(&file, &full).unwrap().data.to_le_bytes(), expected, "{what}: file reader");
        for _ in 0..4 {
            let region = random_box(shape, &mut state);
            let want = fzmod::decompress_region(&seekable, &region).unwrap().data;
            let got = decoder.region_from(&file, &region).unwrap().data;
            assert_eq!(got, want, "{what}: region {region:?} of a streamed file");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_region_of_a_streamed_file_reads_only_its_chunks() {
    let shape = [16usize, 64, 64];
    let input = buffer(&field(shape.iter().product(), false), DType::F32);
    let p = pipeline("cuszp2", &shape, DType::F32, ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap());
    let archive = streamed(&p, &input, &shape, &options(&[4, 16, 16], None, 0)).unwrap();
    let bytes = archive.as_slice();
    let counting = CountingSource::new(&bytes);
    let region = [5..7, 20..30, 33..40];
    let got = Decoder::new(Backend::Cpu).region_from(&counting, &region).unwrap();
    let full = fzmod::decompress(&archive).unwrap();
    assert_eq!(got.data, fzmod::graph::slice(&full.data, &full.header.shape, &region).unwrap());
    // 1 chunk of 64 (plus header and trailer).
    assert!(counting.bytes_read() * 20 < archive.len() as u64, "read {} of {}", counting.bytes_read(), archive.len());
}

#[test]
fn a_relative_bound_from_a_first_pass_gives_the_seekable_frames_and_needs_its_range() {
    let shape = [12usize, 30, 40];
    let rel = ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap();
    for masked in [false, true] {
        let input = buffer(&field(shape.iter().product(), true), DType::F32);
        let mut p = if masked {
            fzmod::masked_preset("cuszp2", &shape, fzmod::MaskSpec::nan_and(None)).unwrap()
        } else {
            fzmod::preset("cuszp2", &shape).unwrap()
        };
        p.set_error_bound(rel).unwrap();
        p.set_input_dtype(DType::F32).unwrap();
        p.finalize().unwrap();
        let chunk = [5usize, 30, 16];
        let seekable = p
            .compress_chunked(&Backend::Cpu, &input, &shape, &ChunkOptions::shape(&chunk), RunOptions::default())
            .unwrap();
        let range = whole_range(&p, &input, &shape);
        let archive = streamed(&p, &input, &shape, &options(&chunk, Some(range), 1)).unwrap();
        assert_eq!(frames(&archive), frames(&seekable), "masked {masked}");
        let err = streamed(&p, &input, &shape, &options(&chunk, None, 1)).unwrap_err();
        assert!(matches!(err, fzmod::Error::RangeNeeded(_)) && err.kind() == ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("value range"), "{err}");
        // The library's whole streamed compression: a seekable input gets a first pass (in
        // parts of whole rows) and the same archive; a pipe without a range is RangeNeeded.
        let (from_file, seen) = compress_stream(&p, &input, &shape, &options(&chunk, None, 1), true).unwrap();
        assert_eq!(from_file, archive, "masked {masked}");
        let passes: Vec<_> = seen.iter().map(|e| e.pass).collect();
        let switch = passes.iter().position(|&s| s == fzmod::StreamPass::Compress).unwrap();
        assert!(switch > 0 && passes[..switch].iter().all(|&s| s == fzmod::StreamPass::Range), "{passes:?}");
        assert!(passes[switch..].iter().all(|&s| s == fzmod::StreamPass::Compress), "{passes:?}");
        let last = seen.last().unwrap();
        assert_eq!((last.rows, last.chunks), (shape[0] as u64, last.chunks_total));
        assert_eq!(last.bytes, input.byte_len() as u64);
        let err = compress_stream(&p, &input, &shape, &options(&chunk, None, 1), false).unwrap_err();
        assert!(matches!(err, fzmod::Error::RangeNeeded(_)), "{err}");
        let (piped, _) = compress_stream(&p, &input, &shape, &options(&chunk, Some(range), 1), false).unwrap();
        assert_eq!(piped, archive, "masked {masked}");
        // A stated range the values leave is refused, not silently widened.
        let (lo, hi) = range.unwrap();
        let narrow = Some(Some((lo, lo + (hi - lo) / 2.0)));
        let err = streamed(&p, &input, &shape, &options(&chunk, narrow, 1)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
}

#[test]
fn streamed_bytes_do_not_depend_on_the_thread_count() {
    let shape = [20usize, 33, 40];
    let input = buffer(&field(shape.iter().product(), true), DType::F32);
    let p = pipeline("cuszp3-outlier", &shape, DType::F32, ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap());
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| streamed(&p, &input, &shape, &options(&[3, 17, 40], None, 1 << 14)).unwrap())
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(3));
}

/// Where the trailer's index record lies: `(start, record length)`.
fn trailer(archive: &[u8]) -> (usize, usize) {
    let n = archive.len();
    let record_len = u64::from_le_bytes(archive[n - 16..n - 8].try_into().unwrap()) as usize;
    (n - 16 - record_len, record_len)
}

fn reseal_trailer(bad: &mut [u8]) {
    let (start, len) = trailer(bad);
    let crc = crc32c::crc32c(&bad[start..start + len]);
    let n = bad.len();
    bad[n - 8..n - 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn damaged_streams_give_typed_errors_or_the_right_values() {
    let shape = [6usize, 20, 24];
    let input = buffer(&field(shape.iter().product(), false), DType::F32);
    let p = pipeline("cuszp2", &shape, DType::F32, ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap());
    let archive = streamed(&p, &input, &shape, &options(&[2, 10, 24], None, 1)).unwrap();
    let good = fzmod::decompress(&archive).unwrap().data.to_le_bytes();
    let region = [1..4, 3..17, 0..24];
    let good_region = fzmod::decompress_region(&archive, &region).unwrap().data;
    // Both readers: an error, or exactly the right values.
    let check = |bytes: &[u8], what: &str| {
        if let Ok(d) = fzmod::decompress(bytes) {
            assert_eq!(d.data.to_le_bytes(), good, "{what}: in memory");
        }
        if let Ok(d) = pipe_decode(bytes, 1) {
            assert_eq!(d, good, "{what}: pipe reader");
        }
        if let Ok(d) = fzmod::decompress_region(bytes, &region) {
            assert_eq!(d.data, good_region, "{what}: region");
        }
        let _ = fzmod::inspect(bytes);
    };
    // Every truncation, the missing trailer included, is an error for every reader.
    for len in 0..archive.len() {
        let cut = &archive[..len];
        assert!(fzmod::decompress(cut).is_err(), "truncated to {len}: decoded");
        assert!(pipe_decode(cut, 1).is_err(), "truncated to {len}: pipe reader decoded");
        assert!(fzmod::decompress_region(cut, &region).is_err(), "truncated to {len}: region decoded");
    }
    let (start, record_len) = trailer(&archive);
    let no_trailer = &archive[..start];
    for e in [fzmod::decompress(no_trailer).unwrap_err(), pipe_decode(no_trailer, 1).unwrap_err()] {
        assert!(matches!(e, fzmod::Error::Truncated(_)), "{e}");
    }
    // Bytes after the trailer.
    let mut longer = archive.clone();
    longer.extend_from_slice(&[0; 64]);
    assert!(fzmod::decompress(&longer).is_err() && pipe_decode(&longer, 1).is_err());
    // A trailer pointing anywhere: every stated record length but the true one.
    let n = archive.len();
    for stated in
        [0u64, 1, 7, record_len as u64 - 1, record_len as u64 + 1, record_len as u64 + 64, (n - 16) as u64, u64::MAX]
    {
        let mut bad = archive.clone();
        bad[n - 16..n - 8].copy_from_slice(&stated.to_le_bytes());
        for e in [fzmod::decompress(&bad).unwrap_err(), pipe_decode(&bad, 1).unwrap_err()] {
            assert_eq!(e.kind(), ErrorKind::CorruptArchive, "{stated}: {e}");
        }
    }
    // The trailer's index changed and its CRC re-sealed: offsets that miss the frames.
    for at in start..start + record_len {
        for flip in [0x01u8, 0x04, 0x40, 0xff] {
            let mut bad = archive.clone();
            bad[at] ^= flip;
            reseal_trailer(&mut bad);
            check(&bad, &format!("re-sealed trailer byte {at} ^ {flip:#x}"));
        }
    }
    // Header fields (grid, bound, the empty index, the data length) changed and re-sealed.
    let crc_at = header_crc_at(&archive);
    for at in 8..crc_at {
        for flip in [0x01u8, 0x02, 0x10, 0x80, 0xff] {
            let mut bad = archive.clone();
            bad[at] ^= flip;
            reseal_header(&mut bad, crc_at);
            check(&bad, &format!("re-sealed header byte {at} ^ {flip:#x}"));
        }
    }
    // Any single byte.
    for at in (0..archive.len()).filter(|&i| i < 128 || i % 5 == 0 || i >= start) {
        for flip in [0x01u8, 0x80] {
            let mut bad = archive.clone();
            bad[at] ^= flip;
            check(&bad, &format!("byte {at} ^ {flip:#x}"));
        }
    }
    // A seekable archive is not a stream: the pipe reader says so.
    let seekable = p
        .compress_chunked(&Backend::Cpu, &input, &shape, &ChunkOptions::shape(&[2, 10, 24]), RunOptions::default())
        .unwrap();
    assert_eq!(pipe_decode(&seekable, 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

/// A golden streamed archive (tests/golden/, format 2.1): written once (FZMOD_BLESS=1) and
/// decoded to the same values forever, by every reader; its frames are the chunks of the
/// seekable golden of the same data, chunking and bound.
#[test]
fn the_golden_streamed_archive_decodes_to_its_recorded_values() {
    let shape = [4usize, 73, 144];
    let (archive, decoded) = golden("v2.1_streamed_cuszp2_3d.fzm", || {
        let all = load(&repo_root().join("data/navy_uwnd_132x73x144.f32"));
        let Buffer::F32(v) = all.data else { unreachable!() };
        let input = Buffer::F32(v[..shape.iter().product::<usize>()].to_vec());
        let p = pipeline("cuszp2", &shape, DType::F32, ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap());
        let range = whole_range(&p, &input, &shape);
        streamed(&p, &input, &shape, &options(&[2, 40, 72], Some(range), 1)).unwrap()
    });
    assert_eq!(pipe_decode(&archive, 1).unwrap(), decoded.data.to_le_bytes());
    let seekable = std::fs::read(repo_root().join("tests/golden/v2.0_chunked_cuszp2_3d.fzm")).unwrap();
    assert_eq!(frames(&archive), frames(&seekable));
    assert_eq!(fzmod::decompress(&seekable).unwrap().data, decoded.data);
    for region in [vec![1..3, 30..50, 60..100], vec![3..4, 72..73, 143..144]] {
        let got = fzmod::decompress_region(&archive, &region).unwrap().data;
        assert_eq!(got, fzmod::graph::slice(&decoded.data, &decoded.header.shape, &region).unwrap(), "{region:?}");
    }
}

/// The library's decode from a reader into a writer: a streamed archive slab by slab (from a
/// pipe), any other whole; the values of the in-memory decode, and typed errors when cut.
#[test]
fn decompress_stream_writes_the_values_of_any_archive() {
    let shape = [9usize, 17, 23];
    let input = buffer(&field(shape.iter().product(), true), DType::F32);
    let p = pipeline("cuszp2", &shape, DType::F32, ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap());
    let streamed = streamed(&p, &input, &shape, &options(&[2, 8, 23], None, 1)).unwrap();
    let whole = p.compress(&input, &shape).unwrap();
    for archive in [&streamed, &whole] {
        let want = fzmod::decompress(archive).unwrap();
        let mut slabs = 0;
        let (header, out) =
            fzmod::decompress_stream(&mut Trickle(archive), Decoder::new(Backend::Cpu), Vec::new(), &mut |_, _, _| {
                slabs += 1
            })
            .unwrap();
        assert_eq!((header.shape, out), (want.header.shape, want.data.to_le_bytes()));
        assert_eq!(slabs > 0, archive == &streamed, "slab progress only for a streamed archive");
        for cut in [3, archive.len() / 2, archive.len() - 1] {
            let err = fzmod::decompress_stream(
                &mut &archive[..cut],
                Decoder::new(Backend::Cpu),
                Vec::new(),
                &mut |_, _, _| {},
            )
            .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::CorruptArchive, "cut at {cut}: {err}");
        }
    }
}

/// A streamed header whose shape, [1, 2^32, 2^32], holds more values than 64 bits count
/// (its chunk grid is one chunk, so the grid's own checked product passed): refused as
/// corrupt by every reader. The pipe reader multiplied the rows' extents unchecked: a panic
/// with overflow checks (as in the stream fuzz target), without them a slab size wrapped to
/// 0 bytes that passed the memory check.
#[test]
fn a_shape_whose_values_overflow_64_bits_is_refused() {
    let shape = [1, 1 << 32, 1 << 32];
    let archive = chunked_header(&shape, &shape, 0, None);
    let e = StreamDecoder::new(archive.as_slice(), Decoder::new(Backend::Cpu)).err();
    assert!(matches!(&e, Some(fzmod::Error::Corrupt(m)) if m.contains("overflows")), "{e:?}");
    for e in [fzmod::inspect(&archive).err(), fzmod::decompress(&archive).err()] {
        assert_eq!(e.map(|e| e.kind()), Some(ErrorKind::CorruptArchive));
    }
}
