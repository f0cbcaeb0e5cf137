//! A whole streamed compression from a reader: for a `rel` bound without a stated range, the
//! first pass over the array that finds it (when the input can be read twice), then the
//! slabs, then the trailer; and the decode of any archive from a reader into a writer. The
//! CLI's `compress --stream` and the Python streaming API are thin callers of these.

use super::{Finished, StreamCompressor, StreamDecoder, StreamOptions, STREAM_SLAB_BYTES};
use crate::archive::{self, Header};
use crate::backend::Backend;
use crate::chunking::merge_ranges;
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::graph::Pipeline;
use crate::run::Decoder;
use crate::ErrorMode;
use std::io::{Read, Seek, SeekFrom, Write};

/// A reader that can also seek (what a second pass over the input needs).
pub trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

/// Where a streamed compression reads its array: little-endian values in C order.
pub enum StreamInput<'a> {
    /// Read once, front to back (a pipe, a socket): a `rel` bound needs
    /// [`StreamOptions::range`], else [`Error::RangeNeeded`].
    Once(&'a mut dyn Read),
    /// Read from its current position. A `rel` bound without a stated range gets a first
    /// pass over the array for it, after which the input is sought back; an input that
    /// cannot seek after all (a pipe opened as a file) is [`Error::RangeNeeded`].
    Seekable(&'a mut dyn ReadSeek),
}

/// Which pass a streamed compression is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamPass {
    /// The first pass of a `rel` bound: reading the array for its value range.
    Range,
    /// Reading the array slab by slab and writing its chunks.
    Compress,
}

/// How far a streamed compression got: given at the start of each pass and after each slab.
#[derive(Clone, Copy, Debug)]
pub struct StreamProgress {
    pub pass: StreamPass,
    /// Rows of dimension 0 read in this pass, of `rows_total`.
    pub rows: u64,
    pub rows_total: u64,
    /// Bytes of the array read in this pass.
    pub bytes: u64,
    /// Chunks written (0 in the range pass), of `chunks_total`.
    pub chunks: u64,
    pub chunks_total: u64,
}

/// Compress the array of `shape` and `dtype` read from `input` into a streamed archive
/// (docs/FORMAT.md §8.5) written to `out`, in memory bounded by one slab. A `rel` bound is
/// resolved from [`StreamOptions::range`] when given, else from a first pass over a
/// [`StreamInput::Seekable`] input (the range the in-memory chunked writer finds, so the
/// frames are its chunks). `progress` hears of each pass's start and of every slab.
#[allow(clippy::too_many_arguments)]
pub fn compress_stream<W: Write>(
    pipeline: &Pipeline,
    backend: &Backend,
    dtype: DType,
    shape: &[usize],
    options: &StreamOptions,
    input: StreamInput<'_>,
    out: W,
    progress: &mut dyn FnMut(StreamProgress),
) -> Result<Finished<W>> {
    let p = pipeline.finalized()?;
    let rel = p.error_bound().is_some_and(|b| b.mode == ErrorMode::Rel);
    let mut options = options.clone();
    let input: &mut dyn Read = match input {
        StreamInput::Seekable(r) if rel && options.range.is_none() => {
            let start = r.stream_position().map_err(|e| {
                Error::RangeNeeded(format!(
                    "a relative bound needs the value range before the first chunk is written, and the input \
                     cannot be read twice ({e}): state the range or use an absolute bound"
                ))
            })?;
            options.range = Some(first_pass(&p, dtype, shape, r, progress)?);
            r.seek(SeekFrom::Start(start))?;
            r
        }
        StreamInput::Seekable(r) => r,
        StreamInput::Once(r) => r,
    };
    let mut s = StreamCompressor::new(&p, backend, dtype, shape, &options, out)?;
    let (rows_total, row_bytes) = rows_of(shape, dtype);
    let (mut rows, chunks_total) = (0u64, s.num_chunks());
    let mut report = |rows: u64, chunks: u64| {
        let pass = StreamPass::Compress;
        progress(StreamProgress { pass, rows, rows_total, bytes: rows * row_bytes, chunks, chunks_total });
    };
    report(0, 0);
    while let Some(next) = s.next_slab_shape() {
        s.write_slab_from(input)?;
        rows += next[0] as u64;
        report(rows, s.chunks_done());
    }
    s.finish()
}

/// Rows of dimension 0 and bytes per row of an array.
fn rows_of(shape: &[usize], dtype: DType) -> (u64, u64) {
    let row: usize = shape[1..].iter().product();
    (shape[0] as u64, (row * dtype.size()) as u64)
}

/// The finite value range the first quantizing stage of `p` sees of the array in `input`
/// (`None`: no finite value), read in parts of about [`STREAM_SLAB_BYTES`] (whole rows).
fn first_pass(
    p: &Pipeline,
    dtype: DType,
    shape: &[usize],
    input: &mut dyn Read,
    progress: &mut dyn FnMut(StreamProgress),
) -> Result<Option<(f64, f64)>> {
    if shape.is_empty() {
        return Err(Error::InvalidArgument("a streamed array needs at least one dimension".into()));
    }
    let (rows_total, row_bytes) = rows_of(shape, dtype);
    let step = (STREAM_SLAB_BYTES / row_bytes.max(1)).max(1);
    let report = |progress: &mut dyn FnMut(StreamProgress), rows: u64| {
        let pass = StreamPass::Range;
        progress(StreamProgress { pass, rows, rows_total, bytes: rows * row_bytes, chunks: 0, chunks_total: 0 });
    };
    report(progress, 0);
    let mut range = None;
    let mut start = 0;
    while start < rows_total {
        let mut part_shape = shape.to_vec();
        part_shape[0] = step.min(rows_total - start) as usize;
        let mut part = Buffer::zeroed(dtype, part_shape.iter().product())?;
        let want = part.byte_len();
        let got = super::write::read_full(input, part.native_bytes_mut())?;
        if got != want {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the input ended {got} bytes into rows from {start} of the value-range pass"),
            )));
        }
        part.from_le_in_place();
        range = merge_ranges(range, p.quantizer_value_range(part.view(), &part_shape)?);
        start += part_shape[0] as u64;
        report(progress, start);
    }
    Ok(range)
}

/// Decode the archive read from `input` into `out` (little-endian values, C order) and return
/// its header. A streamed archive (format 2.1) is decoded slab by slab in memory bounded by
/// one slab, from any reader; any other archive is read whole (under the decoder's
/// `max_memory`) and decoded at once. `progress` hears `(chunks done, chunks in all, bytes
/// written)` after each slab of a streamed archive.
pub fn decompress_stream<W: Write>(
    input: &mut dyn Read,
    decoder: Decoder,
    mut out: W,
    progress: &mut dyn FnMut(u64, u64, u64),
) -> Result<(Header, W)> {
    let max = decoder.limits().max_memory;
    let mut head = Vec::new();
    input.take(archive::PREAMBLE_BYTES as u64).read_to_end(&mut head)?;
    let header_len = archive::header_len(&head)?;
    if header_len as u64 > max {
        return Err(corrupt!("a header of {header_len} bytes"));
    }
    input.take((header_len - head.len()) as u64).read_to_end(&mut head)?;
    let streamed = archive::parse_head(&head)?.is_streamed();
    // The reader below reads the header again, from the bytes already taken.
    let mut input = std::io::Cursor::new(head).chain(input);
    if !streamed {
        let mut bytes = Vec::new();
        (&mut input).take(max.saturating_add(1)).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(Error::InvalidArgument(format!(
                "the archive is longer than the decode limit of {max} bytes (DecodeLimits)"
            )));
        }
        let decoded = decoder.decompress(&bytes)?;
        out.write_all(&decoded.data.le_bytes())?;
        out.flush()?;
        return Ok((decoded.header, out));
    }
    let mut d = StreamDecoder::new(input, decoder)?;
    let mut written = 0u64;
    while let Some(slab) = d.next_slab()? {
        let bytes = slab.data.le_bytes();
        out.write_all(&bytes)?;
        written += bytes.len() as u64;
        progress(d.chunks_done(), d.num_chunks(), written);
    }
    out.flush()?;
    Ok((d.header().clone(), out))
}
