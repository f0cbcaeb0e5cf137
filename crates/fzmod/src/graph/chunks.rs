//! Decoding chunked archives (docs/FORMAT.md §8), whole or a region: the header and its chunk
//! index are checked once, then only the chunks a region intersects are read (bounded reads
//! from an [`ArchiveSource`]), each checked against the header (type, shape, preset, bound)
//! and decoded by a backend's [`ChunkRunner`], and the parts inside the region copied out.

use super::DecodePlan;
use crate::archive::chunked::{self, Chunking};
use crate::archive::source::ArchiveSource;
use crate::archive::{self, Head, Header};
use crate::element::Buffer;
use crate::error::{corrupt, Error, Result};
use std::ops::Range;

/// Decodes one chunk archive: plans it (under the decoder's limits) and runs the plan.
pub trait ChunkRunner: Sync {
    fn plan<'a>(&self, chunk: &'a [u8]) -> Result<DecodePlan<'a>>;
    fn run(&self, plan: DecodePlan<'_>) -> Result<Buffer>;
    /// Run a chunk's plan straight into `dst`, which holds exactly its elements' bytes.
    fn run_into(&self, plan: DecodePlan<'_>, dst: &mut [u8]) -> Result<()>;
    /// Whether chunks may decode at the same time (the CPU: yes; a GPU: one after another).
    fn parallel(&self) -> bool;
    /// `work(runner, k)` for every k in `0..count`, each on a runner it may use alone: at once
    /// on the CPU, on a GPU's lanes; the error of the smallest k that failed.
    fn each(&self, count: usize, work: &(dyn Fn(&dyn ChunkRunner, usize) -> Result<()> + Sync)) -> Result<()>;
    /// Most bytes one decode may hold (the region's output is checked against it).
    fn max_memory(&self) -> u64;
}

/// Read and check the header of an archive in `source`: its length must be the archive's.
pub fn open(source: &dyn ArchiveSource) -> Result<Head> {
    let pre = source.read_at(0, archive::PREAMBLE_BYTES.min(source.len() as usize))?;
    let header_len = archive::header_len(&pre)?;
    if header_len as u64 > source.len() {
        return Err(Error::Truncated(format!("header announces {header_len} bytes, archive has {}", source.len())));
    }
    let head = archive::parse_head(&source.read_at(0, header_len)?)?;
    // A streamed archive's index is in its trailer (docs/FORMAT.md §8.5).
    let head = chunked::resolve_stream(head, source)?;
    let total = head.archive_len()?;
    if source.len() < total {
        return Err(Error::Truncated(format!("archive is {} bytes, header announces {total}", source.len())));
    }
    if source.len() > total {
        return Err(corrupt!("{} trailing bytes after the archive", source.len() - total));
    }
    let padding = source.read_at(header_len as u64, head.data_start as usize - header_len)?;
    if padding.iter().any(|&b| b != 0) {
        return Err(corrupt!("non-zero padding after the header"));
    }
    Ok(head)
}

/// Check a region against a shape: same rank, every range non-empty and inside.
pub fn check_region(region: &[Range<u64>], shape: &[u64]) -> Result<()> {
    if region.len() != shape.len() {
        return Err(Error::InvalidArgument(format!(
            "region has {} dimensions, the array {} (shape {shape:?})",
            region.len(),
            shape.len()
        )));
    }
    for (d, (r, &n)) in region.iter().zip(shape).enumerate() {
        if r.start >= r.end {
            return Err(Error::InvalidArgument(format!("region {}:{} of dimension {d} is empty", r.start, r.end)));
        }
        if r.end > n {
            return Err(Error::InvalidArgument(format!(
                "region {}:{} of dimension {d} reaches past its extent {n}",
                r.start, r.end
            )));
        }
    }
    Ok(())
}

/// Copy the box of `extent` at `src_origin` of a C-order array `src` (shape `src_shape`,
/// elements of `elem` bytes) to `dst_origin` of `dst` (shape `dst_shape`).
#[allow(clippy::too_many_arguments)]
pub fn copy_box(
    src: &[u8],
    src_shape: &[u64],
    src_origin: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_origin: &[u64],
    extent: &[u64],
    elem: usize,
) {
    let nd = extent.len();
    if nd == 0 {
        dst[..elem].copy_from_slice(&src[..elem]);
        return;
    }
    let strides = |shape: &[u64]| {
        let mut s = vec![1u64; nd];
        for d in (0..nd - 1).rev() {
            s[d] = s[d + 1] * shape[d + 1];
        }
        s
    };
    let (ss, ds) = (strides(src_shape), strides(dst_shape));
    let row = extent[nd - 1] as usize * elem;
    let rows: u64 = extent[..nd - 1].iter().product();
    let mut at = vec![0u64; nd - 1];
    for _ in 0..rows {
        let mut s = src_origin[nd - 1];
        let mut t = dst_origin[nd - 1];
        for d in 0..nd - 1 {
            s += (src_origin[d] + at[d]) * ss[d];
            t += (dst_origin[d] + at[d]) * ds[d];
        }
        let (s, t) = (s as usize * elem, t as usize * elem);
        dst[t..t + row].copy_from_slice(&src[s..s + row]);
        for d in (0..nd - 1).rev() {
            at[d] += 1;
            if at[d] < extent[d] {
                break;
            }
            at[d] = 0;
        }
    }
}

/// The elements of a C-order array of `shape` that the box of `extent` at `origin` covers,
/// when they are one run: the dimensions after some k whole, those before it of extent 1.
pub fn contiguous_run(shape: &[u64], origin: &[u64], extent: &[u64]) -> Option<Range<u64>> {
    let whole_from = (0..=shape.len()).rev().take_while(|&d| d == shape.len() || extent[d] == shape[d]).last()?;
    if extent[..whole_from.saturating_sub(1)].iter().any(|&e| e != 1) {
        return None;
    }
    let start = origin.iter().zip(shape).fold(0u64, |a, (&o, &n)| a * n + o);
    Some(start..start + extent.iter().product::<u64>())
}

/// The chunks a region intersects, in C order over the chunk grid.
fn chunks_in(c: &Chunking, shape: &[u64], region: &[Range<u64>]) -> Vec<u64> {
    let grid = c.grid(shape);
    let lo: Vec<u64> = region.iter().zip(&c.chunk_shape).map(|(r, &e)| r.start / e).collect();
    let hi: Vec<u64> = region.iter().zip(&c.chunk_shape).map(|(r, &e)| (r.end - 1) / e + 1).collect();
    let mut out = Vec::new();
    let mut at = lo.clone();
    loop {
        out.push(at.iter().zip(&grid).fold(0u64, |a, (&g, &n)| a * n + g));
        let mut d = at.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            at[d] += 1;
            if at[d] < hi[d] {
                break;
            }
            at[d] = lo[d];
        }
    }
}

/// Check a chunk's own header against the chunked header: every fact stated twice agrees.
pub(crate) fn check_chunk(outer: &Header, c: &Chunking, i: u64, extent: &[u64], plan: &DecodePlan<'_>) -> Result<()> {
    let h = &plan.header;
    let why = if h.dtype != outer.dtype {
        format!("holds {} values, the archive {}", h.dtype, outer.dtype)
    } else if h.shape != extent {
        format!("has shape {:?}, its box {extent:?}", h.shape)
    } else if h.preset != outer.preset {
        format!("names preset '{}', the archive '{}'", h.preset, outer.preset)
    } else if h.error_mode != c.chunk_mode || h.error_bound.to_bits() != c.chunk_bound.to_bits() {
        format!(
            "has bound {} {:e}, the chunk index {} {:e}",
            h.error_mode.name(),
            h.error_bound,
            c.chunk_mode.name(),
            c.chunk_bound
        )
    } else if !(plan.guaranteed_abs_bound().is_none()
        || plan.guaranteed_abs_bound().map(f64::to_bits) == c.guaranteed_abs_bound().map(f64::to_bits))
    {
        format!("guarantees {:?}, the archive {:?}", plan.guaranteed_abs_bound(), c.guaranteed_abs_bound())
    } else {
        return Ok(());
    };
    Err(corrupt!("chunk {i} {why}"))
}

/// Decode `region` (the whole array when `None`) of the chunked archive `head` in `source`.
pub fn decode(
    head: &Head,
    source: &dyn ArchiveSource,
    region: Option<&[Range<u64>]>,
    runner: &dyn ChunkRunner,
) -> Result<Buffer> {
    let header = &head.header;
    let c = header.chunking.as_ref().ok_or_else(|| corrupt!("not a chunked archive"))?;
    let shape = &header.shape;
    let whole: Vec<Range<u64>> = shape.iter().map(|&n| 0..n).collect();
    let region = region.unwrap_or(&whole);
    check_region(region, shape)?;
    let out_shape: Vec<u64> = region.iter().map(|r| r.end - r.start).collect();
    let n = out_shape.iter().try_fold(1u64, |a, &e| a.checked_mul(e)).ok_or_else(|| corrupt!("region overflows"))?;
    let elem = header.dtype.size();
    let bytes = n.checked_mul(elem as u64).filter(|&b| b <= runner.max_memory()).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "the region holds {n} {} values, above the decode limit of {} bytes (--max-memory, DecodeLimits)",
            header.dtype,
            runner.max_memory()
        ))
    })?;
    let mut out = Buffer::zeroed(header.dtype, bytes as usize / elem)?;
    let wanted = chunks_in(c, shape, region);
    let decode_one = |i: u64| with_chunk(head, source, i, runner, |plan| Ok((i, runner.run(plan)?)));
    let mut place = |i: u64, data: &Buffer| {
        let (origin, extent) = c.chunk_box(shape, i);
        let lo: Vec<u64> = origin.iter().zip(region).map(|(&o, r)| o.max(r.start)).collect();
        let hi: Vec<u64> = origin.iter().zip(&extent).zip(region).map(|((&o, &e), r)| (o + e).min(r.end)).collect();
        let part: Vec<u64> = lo.iter().zip(&hi).map(|(&l, &h)| h - l).collect();
        let src_origin: Vec<u64> = lo.iter().zip(&origin).map(|(&l, &o)| l - o).collect();
        let dst_origin: Vec<u64> = lo.iter().zip(region).map(|(&l, r)| l - r.start).collect();
        copy_box(
            data.native_bytes(),
            &extent,
            &src_origin,
            out.native_bytes_mut(),
            &out_shape,
            &dst_origin,
            &part,
            elem,
        );
    };
    if runner.parallel() {
        use rayon::prelude::*;
        // Batches of a few chunks per thread: decoded chunks wait for their copy at most
        // one batch long.
        let batch = rayon::current_num_threads().max(1) * 2;
        for group in wanted.chunks(batch) {
            let decoded = group.par_iter().map(|&i| decode_one(i)).collect::<Result<Vec<_>>>()?;
            for (i, data) in &decoded {
                place(*i, data);
            }
        }
    } else {
        for &i in &wanted {
            let (i, data) = decode_one(i)?;
            place(i, &data);
        }
    }
    Ok(out)
}

/// Decode the whole chunked archive `head` in `source` into `out` (the array's native bytes).
/// When the chunks are runs of the array (slabs; ranges of a 1-D array), each decodes
/// straight into its place, chunks at once (see [`ChunkRunner::each`]); other grids go
/// through [`decode`] and one copy.
pub fn decode_into(head: &Head, source: &dyn ArchiveSource, out: &mut [u8], runner: &dyn ChunkRunner) -> Result<()> {
    let header = &head.header;
    let c = header.chunking.as_ref().ok_or_else(|| corrupt!("not a chunked archive"))?;
    let shape = &header.shape;
    let elem = header.dtype.size() as u64;
    let count = c.num_chunks(shape).ok_or_else(|| corrupt!("the chunk grid overflows"))?;
    let runs: Option<Vec<Range<u64>>> = (0..count)
        .map(|i| {
            let (origin, extent) = c.chunk_box(shape, i);
            contiguous_run(shape, &origin, &extent)
        })
        .collect();
    let tiled = |runs: &Vec<Range<u64>>| {
        runs.windows(2).all(|w| w[0].end == w[1].start)
            && runs.first().is_some_and(|r| r.start == 0)
            && runs.last().is_some_and(|r| r.end.checked_mul(elem) == Some(out.len() as u64))
    };
    let Some(runs) = runs.filter(tiled) else {
        let data = decode(head, source, None, runner)?;
        if data.native_bytes().len() != out.len() {
            return Err(Error::InvalidArgument(format!(
                "a destination of {} bytes for {} decoded bytes",
                out.len(),
                data.native_bytes().len()
            )));
        }
        crate::element::copy_on_all_cores(out, data.native_bytes());
        return Ok(());
    };
    let mut rest = out;
    let places: Vec<std::sync::Mutex<Option<&mut [u8]>>> = runs
        .iter()
        .map(|r| {
            let (place, after) = std::mem::take(&mut rest).split_at_mut(((r.end - r.start) * elem) as usize);
            rest = after;
            std::sync::Mutex::new(Some(place))
        })
        .collect();
    runner.each(places.len(), &|runner, k| {
        let place = places[k].lock().ok().and_then(|mut p| p.take());
        let dst = place.ok_or_else(|| Error::Pipeline(format!("chunk {k} was handed out twice")))?;
        with_chunk(head, source, k as u64, runner, |plan| runner.run_into(plan, dst))
    })
}

/// Read chunk `i`, plan it, check it against the chunked header, and hand the plan to `f`.
fn with_chunk<T>(
    head: &Head,
    source: &dyn ArchiveSource,
    i: u64,
    runner: &dyn ChunkRunner,
    f: impl FnOnce(DecodePlan<'_>) -> Result<T>,
) -> Result<T> {
    let header = &head.header;
    let c = header.chunking.as_ref().ok_or_else(|| corrupt!("not a chunked archive"))?;
    let (start, len) = c.chunk_span(i, head.data_len)?;
    let span = source.read_at(head.data_start + start, len as usize)?;
    let inner = chunked::chunk_archive(&span, i)?;
    let plan = runner.plan(inner).map_err(|e| in_chunk(e, i))?;
    let (_, extent) = c.chunk_box(&header.shape, i);
    check_chunk(header, c, i, &extent, &plan)?;
    f(plan).map_err(|e| in_chunk(e, i))
}

pub(crate) fn in_chunk(e: Error, i: u64) -> Error {
    match e {
        Error::Corrupt(m) => Error::Corrupt(format!("chunk {i}: {m}")),
        Error::Truncated(m) => Error::Truncated(format!("chunk {i}: {m}")),
        Error::Checksum { what, stored, computed } => {
            Error::Checksum { what: format!("chunk {i}, {what}"), stored, computed }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_runs_are_the_boxes_copy_box_moves_in_one_piece() {
        let shape = [4u64, 3, 5];
        let src: Vec<u8> = (0..60).collect();
        let mut boxes = 0;
        for origin in [[0u64, 0, 0], [1, 0, 0], [2, 1, 0], [3, 2, 1], [1, 1, 2]] {
            for extent in [[1u64, 1, 1], [1, 1, 4], [1, 2, 5], [2, 3, 5], [1, 3, 5], [3, 1, 5], [2, 2, 2]] {
                if origin.iter().zip(&extent).zip(&shape).any(|((&o, &e), &n)| o + e > n) {
                    continue;
                }
                boxes += 1;
                let mut part = vec![0u8; extent.iter().product::<u64>() as usize];
                copy_box(&src, &shape, &origin, &mut part, &extent, &[0, 0, 0], &extent, 1);
                let run = contiguous_run(&shape, &origin, &extent);
                // A box is one run exactly when its elements are consecutive in the array.
                let consecutive = part.windows(2).all(|w| w[1] == w[0] + 1);
                assert_eq!(run.is_some(), consecutive, "origin {origin:?} extent {extent:?}");
                if let Some(r) = run {
                    assert_eq!(part, src[r.start as usize..r.end as usize], "origin {origin:?} extent {extent:?}");
                }
            }
        }
        assert!(boxes > 20);
        assert_eq!(contiguous_run(&[7], &[2], &[5]), Some(2..7));
    }

    #[test]
    fn copy_box_moves_a_sub_box() {
        // 3×4 source, copy its [1..3, 1..3] into a 2×2 destination.
        let src: Vec<u8> = (0..12).collect();
        let mut dst = vec![0u8; 4];
        copy_box(&src, &[3, 4], &[1, 1], &mut dst, &[2, 2], &[0, 0], &[2, 2], 1);
        assert_eq!(dst, [5, 6, 9, 10]);
    }
}
