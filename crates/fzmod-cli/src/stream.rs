//! `compress --stream` and the decode of streamed archives (docs/FORMAT.md §8.5): the array
//! goes through slab by slab, so memory stays about one slab of values (plus its compressed
//! chunks) whatever the array's size, from a file or a pipe to a file or a pipe.

use crate::io::{self, shown, Sink};
use crate::progress::Progress;
use crate::report::Report;
use crate::{Job, Output};
use anyhow::{bail, Context, Result};
use fzmod::backend::Backend;
use fzmod::{Buffer, DType, Decoder, ErrorMode, Pipeline, StreamCompressor, StreamDecoder, StreamOptions};
use std::io::Read;
use std::path::Path;
use std::time::Instant;

/// Parse `--range MIN,MAX` (finite, MIN ≤ MAX).
fn parse_range(text: &str) -> Result<(f64, f64)> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [lo, hi] = parts.as_slice() else { bail!("--range {text}: expected MIN,MAX") };
    let (lo, hi): (f64, f64) = (lo.parse().context("--range: MIN")?, hi.parse().context("--range: MAX")?);
    if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
        bail!("--range {text}: MIN and MAX must be finite numbers with MIN ≤ MAX");
    }
    Ok((lo, hi))
}

/// The value range a `rel` bound is resolved from: `--range`, or a first pass over a regular
/// file (exactly the range the in-memory chunked writer finds, so the frames are its chunks).
fn value_range(
    p: &Pipeline,
    input: &Path,
    job: &Job,
    dtype: DType,
    shape: &[usize],
    out: &Output,
) -> Result<Option<Option<(f64, f64)>>> {
    if !p.error_bound().is_some_and(|b| b.mode == ErrorMode::Rel) {
        return Ok(None);
    }
    if let Some(text) = &job.range {
        return Ok(Some(Some(parse_range(text)?)));
    }
    if !io::is_regular_file(input) {
        bail!(
            "a relative bound on a stream from {} needs the value range before the first chunk is written: \
             give --range MIN,MAX, or an absolute bound (-m abs -e VALUE)",
            shown(input)
        );
    }
    let row: usize = shape[1..].iter().product::<usize>() * dtype.size();
    let rows = ((fzmod::stream::STREAM_SLAB_BYTES as usize) / row.max(1)).max(1);
    let mut reader = io::open_input(input)?;
    let mut range = None;
    let mut progress = Progress::new("range pass", shape[0].div_ceil(rows) as u64, out.progress, out.quiet);
    for (k, start) in (0..shape[0]).step_by(rows).enumerate() {
        let mut part_shape = shape.to_vec();
        part_shape[0] = rows.min(shape[0] - start);
        let mut part = Buffer::zeroed(dtype, part_shape.iter().product())?;
        reader.read_exact(part.native_bytes_mut()).with_context(|| format!("cannot read {}", shown(input)))?;
        part.from_le_in_place();
        range = fzmod::merge_ranges(range, p.quantizer_value_range(part.view(), &part_shape)?);
        progress.update(k as u64 + 1, ((start + part_shape[0]) * row) as u64);
    }
    progress.finish();
    Ok(Some(range))
}

/// `compress --stream`: header, then slab by slab, then the trailer, written as they come.
pub fn compress(
    input: &Path,
    job: &Job,
    out: &Output,
    dest: &io::Destination,
    json: Option<&io::Destination>,
    max_memory: u64,
) -> Result<()> {
    let dtype = DType::parse(&job.dtype).context("--dtype")?;
    let shape = fzmod::parse_shape(&job.shape).with_context(|| format!("--shape {}", job.shape))?;
    io::check_size(input, dtype, &shape)?;
    let pipeline = crate::job_pipeline(job, &job.preset, job.error_bound, &shape)?;
    let (backend, note) = Backend::select(job.backend)?;
    let chunks = crate::chunk_options(job, &shape, dtype)?.unwrap_or_default();
    let range = value_range(&pipeline, input, job, dtype, &shape, out)?;
    let options = StreamOptions { chunks, range, run: job.fusion.into(), slab_bytes: 0 };
    let start = Instant::now();
    let sink = dest.sink()?;
    let mut s = StreamCompressor::new(&pipeline, &backend, dtype, &shape, &options, sink)
        .with_context(|| format!("compressing {}", shown(input)))?;
    io::within_limit(
        "one slab of the stream (the chunk extent along the first dimension × the others)",
        s.max_slab_bytes(),
        max_memory,
    )?;
    let mut reader = io::open_input(input)?;
    let mut progress = Progress::new("compress", s.num_chunks(), out.progress, out.quiet);
    let row_bytes = (shape[1..].iter().product::<usize>() * dtype.size()) as u64;
    let mut rows = 0u64;
    loop {
        let next = s.next_slab_shape();
        if !s.write_slab_from(&mut reader).with_context(|| format!("compressing {}", shown(input)))? {
            break;
        }
        rows += next.map_or(0, |n| n[0] as u64);
        progress.update(s.chunks_done(), rows * row_bytes);
    }
    progress.finish();
    let done = s.finish().with_context(|| format!("compressing {}", shown(input)))?;
    let mut r = Report::new(&done.header, done.archive_len as usize, shown(input));
    (r.backend, r.backend_note) = (backend.name().into(), note);
    r.compress_seconds = Some(start.elapsed().as_secs_f64());
    out.finish_streamed(&r, dest, done.out, json)
}

/// Decode a streamed archive into `dest` slab by slab.
#[allow(clippy::too_many_arguments)]
pub fn decompress(
    source: Box<dyn Read>,
    input: &Path,
    decoder: Decoder,
    note: String,
    out: &Output,
    dest: &io::Destination,
    json: Option<&io::Destination>,
) -> Result<()> {
    let what = || format!("decompressing archive {}", shown(input));
    let backend = decoder.backend().name();
    let start = Instant::now();
    let mut d = StreamDecoder::new(source, decoder).with_context(what)?;
    let mut sink: Sink = dest.sink()?;
    let mut progress = Progress::new("decompress", d.num_chunks(), out.progress, out.quiet);
    let mut bytes = 0u64;
    while let Some(slab) = d.next_slab().with_context(what)? {
        let data = slab.data.le_bytes();
        std::io::Write::write_all(&mut sink, &data).with_context(|| format!("cannot write {}", dest_name(dest)))?;
        bytes += data.len() as u64;
        progress.update(d.chunks_done(), bytes);
    }
    progress.finish();
    let mut r = Report::new(d.header(), d.bytes_read() as usize, shown(input));
    r.backend = backend.into();
    r.backend_note = note;
    r.decompress_seconds = Some(start.elapsed().as_secs_f64());
    out.finish_streamed(&r, dest, sink, json)
}

fn dest_name(dest: &io::Destination) -> &'static str {
    if dest.is_stdout() {
        "standard output"
    } else {
        "the output"
    }
}
