//! The default chunk shape (`--chunk auto`; docs/FORMAT.md §8.4): a writer's choice, any
//! shape decodes. Aligned slabs for arrays under [`LARGE_ARRAY_BYTES`], near-cubic boxes for
//! larger ones (region reads), with the measurements behind each rule in docs/PERFORMANCE.md.

/// Default bytes of input per chunk (`--chunk auto`): large enough that a chunk's own header
/// and alignment cost well under 1 % of its archive, small enough for fine region reads.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Arrays of at least this many bytes (64 default chunks) are *large*: their default chunks
/// hold at most 1/320 of the array, so a box of 1 % shaped like the array that straddles two
/// chunks along each of three dimensions (8 chunks) reads at most 2.5 % of the archive and
/// decodes 1/40 of what a full decode does (the targets: ≤ 5 % read, ≥ 30× faster,
/// with room for the fixed cost of a run).
pub const LARGE_ARRAY_BYTES: usize = 256 << 20;
const LARGE_ARRAY_CHUNKS: usize = 320;
/// The smallest default chunk target of a large array: below it the chunks' own headers and
/// restarting predictors cost more ratio (docs/PERFORMANCE.md, "Streamed and chunked archives").
const MIN_LARGE_CHUNK_BYTES: usize = 1 << 20;

/// Bytes of input a default chunk of an array of `total` bytes aims at (it holds between
/// half of that and that): [`DEFAULT_CHUNK_BYTES`], or for a large array
/// ([`LARGE_ARRAY_BYTES`]) 1/320 of it, kept within 1 MiB..=4 MiB.
pub fn default_chunk_bytes(total: usize) -> usize {
    if total < LARGE_ARRAY_BYTES {
        return DEFAULT_CHUNK_BYTES;
    }
    (total / LARGE_ARRAY_CHUNKS).clamp(MIN_LARGE_CHUNK_BYTES, DEFAULT_CHUNK_BYTES)
}

/// Split chunk extents are multiples of this (where the array allows): the tiles and blocks of
/// the stages (TiledLorenzo 4×4×4 and 8×8, coder blocks of 32 and 64 elements) then end at
/// chunk edges, instead of zero-padding a partial tile in every chunk (66 planes of 4×4×4
/// tiles cost cuszp3 2.7 % of its ratio; docs/PERFORMANCE.md, "Chunk shapes that keep the ratio").
pub const CHUNK_ALIGN: usize = 8;

/// Default chunk extents (`--chunk auto`): boxes of at most [`default_chunk_bytes`].
///
/// Arrays under [`LARGE_ARRAY_BYTES`] are cut into **slabs** along the slowest dimensions,
/// the fastest ones kept whole: a chunk is then (nearly) a contiguous run of the array, so 1-D
/// predictors and block coders see the same rows as unchunked, and N-D predictors lose only
/// one plane of context per chunk. Large arrays get near-cubic boxes instead (a 1 % box must
/// read few of them; slabs would cross the whole box). Either way split extents are
/// multiples of [`CHUNK_ALIGN`] where the array allows.
///
/// This is the shape for a pipeline without an anchored predictor; `Pipeline::default_chunk_shape`
/// gives the one a pipeline's chunked archives get.
pub fn default_chunk_shape(shape: &[usize], elem: usize) -> Vec<usize> {
    chunk_shape_for(shape, elem, None)
}

/// [`default_chunk_shape`] for a pipeline whose predictor has the anchor stride `anchor`
/// ([`crate::stage::Stage::chunk_anchor`]): the boxes of a large array (of at most three
/// dimensions) then close its segments (see [`close_segments`]).
pub(crate) fn chunk_shape_for(shape: &[usize], elem: usize, anchor: Option<usize>) -> Vec<usize> {
    let total = shape.iter().try_fold(elem.max(1), |a, &n| a.checked_mul(n)).unwrap_or(usize::MAX);
    let target = (default_chunk_bytes(total) / elem.max(1)).max(1);
    if total < LARGE_ARRAY_BYTES {
        return slab_chunk_shape(shape, target);
    }
    let c = cubic_chunk_shape(shape, target);
    match anchor {
        Some(a) if shape.len() <= 3 => close_segments(c, shape, a),
        _ => c,
    }
}

/// Slabs of at most `target` elements: walking from the slowest dimension, the first one
/// whose rows (the faster dimensions whole) fit at least [`CHUNK_ALIGN`] times is cut into
/// equal aligned pieces; a slower one whose rows do not fit that often keeps
/// [`CHUNK_ALIGN`] of them (at most its extent) and the next dimension is cut as well.
fn slab_chunk_shape(shape: &[usize], target: usize) -> Vec<usize> {
    let mut c = shape.to_vec();
    if shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n)).is_some_and(|n| n <= target) {
        return c;
    }
    let mut target = target;
    for d in 0..shape.len() {
        let inner = shape[d + 1..].iter().try_fold(1usize, |a, &n| a.checked_mul(n)).unwrap_or(usize::MAX);
        let rows = target / inner.max(1);
        if rows >= shape[d] {
            break;
        }
        if rows >= CHUNK_ALIGN || d + 1 == shape.len() {
            c[d] = equal_aligned_pieces(shape[d], rows.max(1));
            break;
        }
        c[d] = CHUNK_ALIGN.min(shape[d]);
        target = (target / c[d]).max(1);
    }
    c
}

/// The extent of the fewest equal pieces of `n` of at most `most` each, rounded up to a
/// multiple of [`CHUNK_ALIGN`] when `most` allows (the last piece takes the rest).
fn equal_aligned_pieces(n: usize, most: usize) -> usize {
    let align = if most >= CHUNK_ALIGN { CHUNK_ALIGN } else { 1 };
    let most = most / align * align;
    n.div_ceil(n.div_ceil(most)).next_multiple_of(align)
}

/// The array's shape with its largest extent halved (the first of equal extents; rounding up,
/// to a multiple of [`CHUNK_ALIGN`] above it) until a box holds at most `target` elements.
fn cubic_chunk_shape(shape: &[usize], target: usize) -> Vec<usize> {
    let mut c = shape.to_vec();
    while c.iter().product::<usize>() > target {
        let (d, _) = c.iter().enumerate().max_by_key(|&(i, &e)| (e, std::cmp::Reverse(i))).expect("a dimension");
        let half = c[d].div_ceil(2);
        // Strictly smaller for every extent > 1: above CHUNK_ALIGN rounding adds < CHUNK_ALIGN.
        c[d] = if c[d] > 2 * CHUNK_ALIGN { half.next_multiple_of(CHUNK_ALIGN) } else { half };
    }
    c
}

/// Extents of `c` that cut `shape` and hold at least one anchor segment become `k·a + 1`
/// (`k = ⌊extent / a⌋`): a chunk's last plane is then an anchor plane of an interpolation of
/// stride `a` and closes its last segment, which a chunk of `k·a` planes leaves open, predicted
/// from one side only (a 512³ field: interp keeps 0.925× its ratio at 64³ chunks, 0.990× at
/// 65³; docs/PERFORMANCE.md, "Chunk shapes that keep the ratio"). A box grows by at most one
/// plane per dimension; slabs cut one dimension only and are left as they are.
fn close_segments(mut c: Vec<usize>, shape: &[usize], a: usize) -> Vec<usize> {
    for (c, &n) in c.iter_mut().zip(shape) {
        if *c < n && *c >= a.max(1) {
            *c = *c / a * a + 1;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_chunks_shrink_for_large_arrays_only() {
        let bytes = |c: &[usize]| c.iter().product::<usize>() * 4;
        assert_eq!(default_chunk_shape(&[100, 100], 4), [100, 100]);
        // 512 MiB: 1/320 of it is 1.6 MiB, so 1 MiB boxes; a 1 % box straddling two chunks per
        // dimension reads 8 of them, 1.6 % of the array.
        let c = default_chunk_shape(&[512, 512, 512], 4);
        assert_eq!(c, [64, 64, 64]);
        assert!(8 * bytes(&c) * 40 <= 512 << 20);
        // 1 GiB: 3.2 MiB, so 2 MiB boxes; from 1.25 GiB up, the 4 MiB boxes again.
        assert_eq!(default_chunk_shape(&[512, 512, 1024], 4), [64, 64, 128]);
        assert_eq!(default_chunk_shape(&[1024, 1024, 1024], 4), [64, 128, 128]);
        assert_eq!(default_chunk_bytes(LARGE_ARRAY_BYTES - 1), DEFAULT_CHUNK_BYTES);
        assert_eq!(default_chunk_bytes(LARGE_ARRAY_BYTES), MIN_LARGE_CHUNK_BYTES);
        assert_eq!(default_chunk_bytes(usize::MAX), DEFAULT_CHUNK_BYTES);
    }

    /// Whether every extent of `c` cut from `shape` is whole or a multiple of CHUNK_ALIGN.
    fn aligned(c: &[usize], shape: &[usize]) -> bool {
        c.iter().zip(shape).all(|(&c, &n)| c == n || c % CHUNK_ALIGN == 0)
    }

    #[test]
    fn default_chunks_of_smaller_arrays_are_aligned_slabs() {
        let target = DEFAULT_CHUNK_BYTES / 4;
        // The fields of docs/PERFORMANCE.md, "Chunk shapes that keep the ratio": the fastest
        // dimensions whole, the slowest cut into equal pieces of a multiple of 8 (the old
        // halving gave 541×1080, 601×1201 and 132×73×72: short rows, partial tiles).
        assert_eq!(default_chunk_shape(&[2161, 4320], 4), [224, 4320]);
        assert_eq!(default_chunk_shape(&[1201, 2401], 4), [408, 2401]);
        assert_eq!(default_chunk_shape(&[132, 73, 144], 4), [72, 73, 144]);
        // Planes larger than an eighth of a chunk: 8 of them, the next dimension cut too.
        assert_eq!(default_chunk_shape(&[20, 1000, 1000], 4), [8, 128, 1000]);
        assert_eq!(default_chunk_shape(&[3, 4000, 4000], 4), [3, 80, 4000]);
        // Rows longer than a chunk: all (fewer than 8) rows of shorter pieces.
        assert_eq!(default_chunk_shape(&[2, 3_000_000], 4), [2, 500_000]);
        for shape in [
            vec![2161, 4320],
            vec![1201, 2401],
            vec![132, 73, 144],
            vec![20, 1000, 1000],
            vec![3, 4000, 4000],
            vec![2, 18, 640, 1280],
            vec![50_000_000],
            vec![7, 9, 11],
            vec![1, 1, 40_000_000],
        ] {
            let c = default_chunk_shape(&shape, 4);
            assert!(c.iter().product::<usize>() <= target, "{shape:?} -> {c:?} holds more than a chunk");
            assert!(aligned(&c, &shape), "{shape:?} -> {c:?} is not aligned");
            // Slabs: the dimensions after the last one cut are whole, those before it are
            // whole or hold CHUNK_ALIGN rows.
            let Some(last) = c.iter().zip(&shape).rposition(|(c, n)| c < n) else { continue };
            assert_eq!(c[last + 1..], shape[last + 1..], "{shape:?} -> {c:?} cuts a fast dimension");
            assert!(c[..last].iter().zip(&shape).all(|(&c, &n)| c == n || c == CHUNK_ALIGN), "{shape:?} -> {c:?}");
            // Equal pieces, as few as the chunk size allows along the last dimension cut.
            let rows = c.iter().enumerate().filter(|&(d, _)| d != last).map(|(_, &e)| e).product::<usize>();
            let most = target / rows;
            let most = if most >= CHUNK_ALIGN { most / CHUNK_ALIGN * CHUNK_ALIGN } else { most };
            assert_eq!(shape[last].div_ceil(c[last]), shape[last].div_ceil(most), "{shape:?} -> {c:?}");
        }
    }

    #[test]
    fn default_chunks_of_large_arrays_are_aligned_boxes() {
        for shape in [[1000, 1000, 1000], [300, 700, 900], [2048, 1024, 1024], [17, 3000, 3001]] {
            let c = default_chunk_shape(&shape, 4);
            let total = shape.iter().product::<usize>() * 4;
            assert!(c.iter().product::<usize>() * 4 <= default_chunk_bytes(total), "{shape:?} -> {c:?}");
            assert!(aligned(&c, &shape), "{shape:?} -> {c:?} is not aligned");
        }
        assert_eq!(default_chunk_shape(&[1000, 1000, 1000], 4), [64, 128, 128]);
    }

    #[test]
    fn anchored_predictors_get_boxes_that_close_their_segments() {
        // Large arrays: every cut extent k·64 + 1, whole extents kept.
        assert_eq!(chunk_shape_for(&[512, 512, 512], 4, Some(64)), [65, 65, 65]);
        assert_eq!(chunk_shape_for(&[1024, 1024, 1024], 4, Some(64)), [65, 129, 129]);
        assert_eq!(chunk_shape_for(&[1000, 1000, 1000], 4, Some(64)), [65, 129, 129]);
        for shape in [[512, 512, 512], [300, 700, 900], [2048, 1024, 1024], [17, 3000, 3001], [40, 129, 70_000]] {
            let plain = default_chunk_shape(&shape, 4);
            let c = chunk_shape_for(&shape, 4, Some(64));
            for ((&c, &p), &n) in c.iter().zip(&plain).zip(&shape) {
                assert!(c == n || c < 64 || c % 64 == 1, "{shape:?} -> {c:?}");
                assert!(c <= p + 1 && c <= n, "{shape:?} -> {c:?} grows more than a plane");
            }
        }
        // Smaller arrays keep their slabs: only one dimension is cut.
        assert_eq!(chunk_shape_for(&[2161, 4320], 4, Some(64)), default_chunk_shape(&[2161, 4320], 4));
        // Through the pipelines: only the interpolation presets have an anchor.
        let cube = [512, 512, 512];
        for name in crate::PRESETS.iter().map(|p| p.name) {
            let p = crate::preset(name, &cube).unwrap();
            let want = if name.starts_with("interp") { [65, 65, 65] } else { [64, 64, 64] };
            assert_eq!(p.default_chunk_shape(&cube, 4), want, "{name}");
        }
        // Four dimensions fold into three for the predictor: the boxes stay as they are.
        assert_eq!(chunk_shape_for(&[4, 256, 512, 512], 4, Some(64)), default_chunk_shape(&[4, 256, 512, 512], 4));
    }
}
