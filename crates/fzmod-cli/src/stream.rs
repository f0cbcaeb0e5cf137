//! `compress --stream` and the decode of streamed archives (docs/FORMAT.md §8.5): the array
//! goes through slab by slab, so memory stays about one slab of values (plus its compressed
//! chunks) whatever the array's size, from a file or a pipe to a file or a pipe.

use crate::io::{self, shown, Sink};
use crate::progress::Progress;
use crate::report::Report;
use crate::{Job, Output};
use anyhow::{bail, Context, Result};
use fzmod::backend::Backend;
use fzmod::{DType, Decoder, StreamDecoder, StreamInput, StreamOptions, StreamPass, StreamProgress};
use std::fs::File;
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

/// `compress --stream`: header, then slab by slab, then the trailer, written as they come
/// (the library's [`fzmod::compress_stream`]; for a `rel` bound without `--range`, a regular
/// file gets its first pass there, and a pipe is refused).
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
    let chunks = crate::chunk_options(job, &shape)?.unwrap_or_default();
    let range = job.range.as_deref().map(parse_range).transpose()?.map(Some);
    let options = StreamOptions { chunks, range, run: job.fusion.into(), slab_bytes: 0, max_memory };
    let start = Instant::now();
    let sink = dest.sink()?;
    let mut file;
    let mut stdin;
    let source = if io::is_regular_file(input) {
        file = File::open(input).with_context(|| format!("cannot read {}", shown(input)))?;
        StreamInput::Seekable(&mut file)
    } else {
        stdin = io::open_input(input)?;
        StreamInput::Once(&mut stdin)
    };
    let mut bar: Option<(StreamPass, Progress)> = None;
    let mut progress = |p: StreamProgress| {
        if bar.as_ref().map(|b| b.0) != Some(p.pass) {
            if let Some((_, old)) = bar.take() {
                old.finish();
            }
            let (verb, total) = match p.pass {
                StreamPass::Range => ("range pass", p.rows_total),
                StreamPass::Compress => ("compress", p.chunks_total),
            };
            bar = Some((p.pass, Progress::new(verb, total, out.progress, out.quiet)));
        }
        if let Some((pass, b)) = bar.as_mut() {
            b.update(if *pass == StreamPass::Range { p.rows } else { p.chunks }, p.bytes);
        }
    };
    let done = fzmod::compress_stream(&pipeline, &backend, dtype, &shape, &options, source, sink, &mut progress)
        .map_err(|e| match e {
            fzmod::Error::RangeNeeded(_) => anyhow::anyhow!(
                "a relative bound on a stream from {} needs the value range before the first chunk is written: \
                 give --range MIN,MAX, or an absolute bound (-m abs -e VALUE)",
                shown(input)
            ),
            e => anyhow::Error::new(e).context(format!("compressing {}", shown(input))),
        })?;
    if let Some((_, b)) = bar {
        b.finish();
    }
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
