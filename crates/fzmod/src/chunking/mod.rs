//! Chunked compression and region decode (docs/FORMAT.md §8): the array is cut into boxes,
//! each compressed by the same pipeline into an archive of its own (on the CPU in parallel,
//! on a GPU one after another through the same device path), and indexed so a reader decodes
//! only the chunks a region needs.
//!
//! Bounds. An `abs` bound is every chunk's bound. A `rel` bound is resolved **once**, over
//! the value range the pipeline's first quantizing stage sees of the whole array, into an
//! absolute bound that every chunk gets: the archive obeys the user's bound exactly as an
//! unchunked one would, and chunks stay independent (a chunk's own range never enters).

use crate::archive::chunked::{self, Chunking};
use crate::archive::index::IndexClass;
use crate::archive::source::ArchiveSource;
use crate::archive::{self, ErrorMode, InputRef};
use crate::backend::Backend;
use crate::element::{Buffer, View};
use crate::error::{Error, Result};
use crate::graph::chunks::{self as decode_chunks, ChunkRunner};
use crate::graph::{DecodePlan, Decompressed, Pipeline};
use crate::run::{Decoder, RunOptions};
use crate::stage::{ErrorBound, ForwardContext};
use crate::stages::quantizer::cpu::finite_min_max;
use std::ops::Range;

mod shape;
pub use shape::{default_chunk_bytes, default_chunk_shape, CHUNK_ALIGN, DEFAULT_CHUNK_BYTES, LARGE_ARRAY_BYTES};

/// How to cut an array into chunks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Chunk extents in C order (one per dimension); empty: [`Pipeline::default_chunk_shape`].
    pub chunk_shape: Vec<usize>,
    /// Index classes to try, cheapest first; empty: implicit, hybrid8, hybrid4, verbatim.
    pub index: Vec<IndexClass>,
}

impl ChunkOptions {
    /// Chunks of the given shape, the index chosen automatically.
    pub fn shape(chunk_shape: &[usize]) -> ChunkOptions {
        ChunkOptions { chunk_shape: chunk_shape.to_vec(), index: Vec::new() }
    }
}

/// Parse a chunk shape: `auto` (empty: the pipeline's default, `Pipeline::default_chunk_shape`),
/// or extents such as `1024x1024` / `64,64,64` (one per dimension, each ≥ 1; extents past the
/// array's are cut to it).
pub fn parse_chunk_shape(text: &str, shape: &[usize]) -> Result<Vec<usize>> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(Vec::new());
    }
    let c =
        crate::shape::parse_shape(text).map_err(|e| Error::InvalidArgument(format!("chunk shape '{text}': {e}")))?;
    if c.len() != shape.len() {
        return Err(Error::InvalidArgument(format!(
            "chunk shape '{text}' has {} dimensions, the array {} (shape {shape:?})",
            c.len(),
            shape.len()
        )));
    }
    Ok(c.iter().zip(shape).map(|(&c, &n)| c.min(n)).collect())
}

/// Parse a region in numpy's slice syntax, one item per dimension, C order:
/// `10:20,0:73,5:100`; `:` is the whole extent, `a:` and `:b` are open ends, `7` is the
/// single index 7 (the dimension is kept, of extent 1), negative numbers count from the end,
/// and a step other than 1 is refused. Every range must be non-empty and inside the shape.
pub fn parse_region(text: &str, shape: &[u64]) -> Result<Vec<Range<u64>>> {
    let bad = |item: &str, why: String| Error::InvalidArgument(format!("region item '{item}': {why}"));
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    if items.len() != shape.len() {
        return Err(Error::InvalidArgument(format!(
            "region '{text}' has {} items, the array {} dimensions (shape {shape:?})",
            items.len(),
            shape.len()
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for (d, (item, &n)) in items.iter().zip(shape).enumerate() {
        let index = |s: &str, default: u64| -> Result<u64> {
            if s.is_empty() {
                return Ok(default);
            }
            let v: i128 = s.parse().map_err(|_| bad(item, format!("'{s}' is not an integer")))?;
            let v = if v < 0 { v + i128::from(n) } else { v };
            if v < 0 || v > i128::from(n) {
                return Err(bad(item, format!("{s} lies outside 0..={n}, the extent of dimension {d}")));
            }
            Ok(v as u64)
        };
        let parts: Vec<&str> = item.split(':').map(str::trim).collect();
        let range = match parts.as_slice() {
            [one] => {
                let i = index(one, 0)?;
                if one.is_empty() || i >= n {
                    return Err(bad(item, format!("index outside 0..{n}, the extent of dimension {d}")));
                }
                i..i + 1
            }
            [a, b] => index(a, 0)?..index(b, n)?,
            [a, b, step] => {
                if !(step.is_empty() || step.parse::<i64>() == Ok(1)) {
                    return Err(bad(item, format!("step {step}: only contiguous boxes (step 1) are supported")));
                }
                index(a, 0)?..index(b, n)?
            }
            _ => return Err(bad(item, "expected start:stop".into())),
        };
        if range.start >= range.end {
            return Err(bad(item, format!("the range {}..{} of dimension {d} is empty", range.start, range.end)));
        }
        out.push(range);
    }
    Ok(out)
}

fn view_range(v: View) -> Result<Option<(f64, f64)>> {
    if let Some(x) = v.typed::<f32>() {
        return Ok(finite_min_max(x));
    }
    if let Some(x) = v.typed::<f64>() {
        return Ok(finite_min_max(x));
    }
    Err(Error::InvalidArgument(format!("a relative bound needs f32 or f64 values, got {}", v.dtype())))
}

/// The finite value range the first quantizing stage of `p` sees of the whole `input`: the
/// input itself, or the output of the stage before it (a Mask) when that one reads the input.
pub(crate) fn quantizer_range(p: &Pipeline, input: View, shape: &[usize]) -> Result<Option<(f64, f64)>> {
    let nodes = p.nodes();
    let Some(q) = nodes.iter().position(|n| n.stage.error_bound().is_some()) else {
        return Ok(None);
    };
    match nodes[q].inputs.as_slice() {
        [Some(InputRef::External)] => view_range(input),
        [Some(InputRef::Stage { stage, port })]
            if matches!(nodes[*stage].inputs.as_slice(), [Some(InputRef::External)]) =>
        {
            let ctx = ForwardContext { shape };
            let out = nodes[*stage].stage.forward_borrowed(input, &ctx).map_err(|e| e.in_stage(&nodes[*stage].name))?;
            let b = out.outputs.get(*port).ok_or_else(|| Error::Pipeline("missing output".into()))?;
            view_range(b.view())
        }
        _ => Err(Error::InvalidArgument(format!(
            "a relative bound over chunks needs the quantizing stage '{}' to read the input or a stage \
             that does; give an absolute bound",
            nodes[q].name
        ))),
    }
}

/// The bound each chunk gets (see the module documentation), for a pipeline whose first
/// quantizing stage sees values in `range` (`None`: no finite value, or no such stage).
pub(crate) fn chunk_bound(
    p: &Pipeline,
    range: impl FnOnce() -> Result<Option<(f64, f64)>>,
) -> Result<(ErrorMode, f64)> {
    let Some(bound) = p.error_bound() else {
        return Ok((ErrorMode::Abs, 0.0));
    };
    if bound.mode == ErrorMode::Abs {
        return Ok((ErrorMode::Abs, bound.value));
    }
    // As the Quantizer resolves it (docs/FORMAT.md 6.1).
    let b = match range()? {
        None => 0.0,
        Some((lo, hi)) if (hi - lo).is_finite() => bound.value * (hi - lo),
        Some((lo, hi)) => bound.value * hi - bound.value * lo,
    };
    // A constant array: every chunk is constant too, and its own relative bound is exact.
    Ok(if b == 0.0 { (ErrorMode::Rel, bound.value) } else { (ErrorMode::Abs, b) })
}

/// Union of two finite value ranges (`None`: no finite value).
pub fn merge_ranges(a: Option<(f64, f64)>, b: Option<(f64, f64)>) -> Option<(f64, f64)> {
    match (a, b) {
        (Some((l1, h1)), Some((l2, h2))) => Some((l1.min(l2), h1.max(h2))),
        (a, b) => a.or(b),
    }
}

/// The grid of a chunked archive of `shape` (chunk shape checked and cut to the array; the
/// index still empty) and the pipeline every chunk runs: `p` with the chunk bound.
pub(crate) fn chunk_plan(
    p: &Pipeline,
    shape: &[usize],
    elem: usize,
    chunks: &ChunkOptions,
    bound: (ErrorMode, f64),
) -> Result<(Chunking, Pipeline)> {
    if shape.is_empty() {
        return Err(Error::InvalidArgument("chunking needs an array of at least one dimension".into()));
    }
    let chunk_shape =
        if chunks.chunk_shape.is_empty() { p.default_chunk_shape(shape, elem) } else { chunks.chunk_shape.clone() };
    if chunk_shape.len() != shape.len() || chunk_shape.contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "chunk shape {chunk_shape:?} does not suit the shape {shape:?} (one extent ≥ 1 per dimension)"
        )));
    }
    let chunk_shape: Vec<u64> = chunk_shape.iter().zip(shape).map(|(&c, &n)| c.min(n) as u64).collect();
    let (chunk_mode, chunk_bound) = bound;
    let mut cp: Pipeline = p.clone();
    if chunk_mode == ErrorMode::Abs && chunk_bound > 0.0 {
        cp.set_error_bound(ErrorBound::new(ErrorMode::Abs, chunk_bound)?)?;
    }
    cp.finalize()?;
    let index = archive::index::BlockIndex::build(IndexClass::Verbatim, &[])?;
    Ok((Chunking { chunk_shape, chunk_mode, chunk_bound, index, streamed: false }, cp))
}

/// Compress chunks `ids` of the array `shape` from `src`, the part of the array that starts
/// at row `row0` of dimension 0 (shape `src_shape`), each into an archive of its own with
/// `cp`: in parallel on the CPU, on a GPU's lanes (one chunk's upload, another's kernels and
/// a third's download at once); collected in order, so the bytes do not depend on either.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compress_chunks(
    cp: &Pipeline,
    backend: &Backend,
    grid: &Chunking,
    shape: &[u64],
    src: View,
    src_shape: &[u64],
    row0: u64,
    ids: Range<u64>,
    opts: RunOptions,
) -> Result<Vec<Vec<u8>>> {
    let elem = src.dtype().size();
    let one = |backend: &Backend, i: u64| -> Result<Vec<u8>> {
        let (mut origin, extent) = grid.chunk_box(shape, i);
        origin[0] -= row0;
        let dims: Vec<usize> = extent.iter().map(|&e| e as usize).collect();
        let compress = |part: View| {
            cp.compress_view(backend, part, &dims, opts).map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("chunk {i}: {m}")),
                e => e,
            })
        };
        // A chunk that is one run of the source (a slab, a range of a 1-D array) is read in
        // place; any other box is gathered first.
        if let Some(run) = decode_chunks::contiguous_run(src_shape, &origin, &extent) {
            return compress(src.slice(run.start as usize..run.end as usize));
        }
        let mut part = Buffer::zeroed(src.dtype(), dims.iter().product())?;
        let zero = vec![0; extent.len()];
        let bytes = part.native_bytes_mut();
        decode_chunks::copy_box(src.native_bytes(), src_shape, &origin, bytes, &extent, &zero, &extent, elem);
        compress(part.view())
    };
    match backend {
        Backend::Cpu => {
            use rayon::prelude::*;
            ids.into_par_iter().map(|i| one(backend, i)).collect()
        }
        #[cfg(feature = "cuda")]
        Backend::Cuda(dev) => {
            let count = (ids.end - ids.start) as usize;
            dev.in_lanes(count, |lane, k| one(&Backend::Cuda(lane.clone()), ids.start + k as u64))
        }
    }
}

impl Pipeline {
    /// The chunk shape (`--chunk auto`, [`ChunkOptions`] without one) of this pipeline's
    /// chunked archives of `shape` with elements of `elem` bytes: [`default_chunk_shape`], its
    /// boxes closing the segments of an anchored predictor (docs/FORMAT.md §8.4).
    pub fn default_chunk_shape(&self, shape: &[usize], elem: usize) -> Vec<usize> {
        let ndim = shape.iter().filter(|&&n| n > 1).count().clamp(1, 3);
        shape::chunk_shape_for(shape, elem, self.chunk_anchor(ndim))
    }

    /// The finite value range (min, max) the first quantizing stage of this pipeline sees of
    /// `input` (C-order `shape`): the values themselves, or those a Mask in front leaves
    /// unmasked; `None` when there is no finite value or no quantizing stage. Ranges of parts
    /// of an array combine with [`merge_ranges`] into the range of the whole, which is how a
    /// streamed `rel` bound is resolved from a first pass (docs/FORMAT.md §8.5).
    pub fn quantizer_value_range(&self, input: View, shape: &[usize]) -> Result<Option<(f64, f64)>> {
        let p = self.finalized()?;
        p.check_input(input, shape)?;
        if p.error_bound().is_none() {
            return Ok(None);
        }
        quantizer_range(&p, input, shape)
    }

    /// Compress `input` (C-order `shape`) as a chunked archive (docs/FORMAT.md §8) on
    /// `backend`: chunks compress in parallel on the CPU, one after another on a GPU; the
    /// bytes are the same for any thread count.
    pub fn compress_chunked(
        &self,
        backend: &Backend,
        input: &Buffer,
        shape: &[usize],
        chunks: &ChunkOptions,
        opts: RunOptions,
    ) -> Result<Vec<u8>> {
        self.compress_chunked_view(backend, input.view(), shape, chunks, opts)
    }

    pub(crate) fn compress_chunked_view(
        &self,
        backend: &Backend,
        input: View,
        shape: &[usize],
        chunks: &ChunkOptions,
        opts: RunOptions,
    ) -> Result<Vec<u8>> {
        let p = self.finalized()?;
        p.check_input(input, shape)?;
        let bound = chunk_bound(&p, || quantizer_range(&p, input, shape))?;
        let (mut grid, cp) = chunk_plan(&p, shape, input.dtype().size(), chunks, bound)?;
        let shape64: Vec<u64> = shape.iter().map(|&n| n as u64).collect();
        let n = grid.num_chunks(&shape64).ok_or_else(|| Error::InvalidArgument("too many chunks".into()))?;
        let archives = compress_chunks(&cp, backend, &grid, &shape64, input, &shape64, 0, 0..n, opts)?;
        let lens: Vec<usize> = archives.iter().map(Vec::len).collect();
        let (index, data_len) = chunked::build_index(&lens, shape.len(), &chunks.index)?;
        grid.index = index;
        Ok(archive::write_chunked(chunked_header(&p, input.dtype(), shape, grid), &archives, data_len))
    }
}

/// The header of a chunked archive of `shape` written by `p`, with `grid`.
pub(crate) fn chunked_header(
    p: &Pipeline,
    dtype: crate::element::DType,
    shape: &[usize],
    grid: Chunking,
) -> archive::Header {
    let mut header = p.header(dtype, shape, Vec::new(), std::iter::empty());
    header.stages.clear();
    header.version = (chunked::CHUNKED_MAJOR, grid.minor());
    header.chunking = Some(grid);
    header
}

/// Decodes chunks on a decoder's backend: in parallel on the CPU, one after another on a GPU.
struct BackendChunks<'d>(&'d Decoder);

impl ChunkRunner for BackendChunks<'_> {
    fn plan<'a>(&self, chunk: &'a [u8]) -> Result<DecodePlan<'a>> {
        self.0.plan(chunk)
    }
    fn run(&self, plan: DecodePlan<'_>) -> Result<Buffer> {
        self.0.run(plan).map(|d| d.data)
    }
    fn run_into(&self, plan: DecodePlan<'_>, dst: &mut [u8]) -> Result<()> {
        self.0.run_into_bytes(plan, dst).map(drop)
    }
    fn parallel(&self) -> bool {
        matches!(self.0.backend(), Backend::Cpu)
    }
    fn each(&self, count: usize, work: &(dyn Fn(&dyn ChunkRunner, usize) -> Result<()> + Sync)) -> Result<()> {
        self.0.map_chunks(count, |decoder, k| work(&BackendChunks(decoder), k)).map(drop)
    }
    fn max_memory(&self) -> u64 {
        self.0.limits().max_memory
    }
}

/// Decode a whole chunked plan on the decoder's backend into `out` (its native bytes; the
/// caller checked its length).
pub(crate) fn run_chunked_into(decoder: &Decoder, plan: DecodePlan<'_>, out: &mut [u8]) -> Result<()> {
    let c = plan.chunked.ok_or_else(|| Error::Pipeline("not a chunked plan".into()))?;
    decode_chunks::decode_into(&c.head(&plan.header), &c.bytes, out, &BackendChunks(decoder))
}

impl Decoder {
    /// Decode the box `region` (one range per dimension, C order) of an archive. Of a chunked
    /// archive only the chunks the region intersects are read and decoded; an unchunked one
    /// is decoded whole and sliced. The result's data holds the region's elements in C order
    /// (its shape: the ranges' lengths); its header is the archive's.
    pub fn region(&self, archive: &[u8], region: &[Range<u64>]) -> Result<Decompressed> {
        self.region_from(&archive, region)
    }

    /// [`Decoder::region`] reading only what it needs from `source` (e.g. a
    /// [`archive::source::FileSource`]): the header, then each chunk the region intersects.
    pub fn region_from(&self, source: &dyn ArchiveSource, region: &[Range<u64>]) -> Result<Decompressed> {
        let head = decode_chunks::open(source)?;
        decode_chunks::check_region(region, &head.header.shape)?;
        if head.header.chunking.is_some() {
            let data = decode_chunks::decode(&head, source, Some(region), &BackendChunks(self))?;
            return Ok(Decompressed { header: head.header, data, backend: self.backend().name() });
        }
        let bytes = source.read_at(0, source.len() as usize)?;
        let decoded = self.decompress(&bytes)?;
        let data = crate::graph::slice(&decoded.data, &decoded.header.shape, region)?;
        Ok(Decompressed { data, ..decoded })
    }
}

/// Decode the box `region` of an archive on the CPU (see [`Decoder::region`]).
pub fn decompress_region(archive: &[u8], region: &[Range<u64>]) -> Result<Decompressed> {
    Decoder::new(Backend::Cpu).region(archive, region)
}
