//! CPU reference of LorenzoQuant. The per-element steps are small pure functions (the
//! Quantizer's [`Float::bin`], [`lorenzo_delta`], [`CodeMapping::encode`] / [`CodeMapping::decode`]) so a
//! CUDA kernel can mirror them one to one; the drivers around them only decide which rows a
//! rayon task owns, never an order, so the bytes do not depend on the thread count.

use super::{CodeMapping, Tile};
use crate::archive::{Reader, Writer};
use crate::element::{map_in_place, mapped_vec, zeroed_vec};
use crate::error::{corrupt, Result};
use crate::stages::quantizer::channel::{self, Layout, Run};
use crate::stages::quantizer::cpu::{codes_or_outliers_inline, Float};
use rayon::prelude::*;

/// Elements per parallel work item of the inverse.
const TASK_ELEMS: usize = 1 << 16;

/// Lorenzo prediction error at one element from its 2×2×2 neighbourhood: `n[dz][dy][dx]` is
/// the pre-quantized value `dz, dy, dx` steps behind along z, y, x (0 where that neighbour
/// lies outside the tile). Inclusion–exclusion, wrapping i32 (the inverse wraps the same way,
/// so the round trip is exact).
#[inline]
pub fn lorenzo_delta(n: [[[i32; 2]; 2]; 2]) -> i32 {
    let plane = |m: [[i32; 2]; 2]| m[0][0].wrapping_sub(m[0][1]).wrapping_sub(m[1][0]).wrapping_add(m[1][1]);
    plane(n[0]).wrapping_sub(plane(n[1]))
}

/// Output of [`forward`].
pub struct Forward {
    pub codes: Vec<u16>,
    /// Delta-outlier list then value-outlier list (docs/FORMAT.md, "LorenzoQuant"), both in
    /// `layout`.
    pub outliers: Vec<u8>,
    pub layout: Layout,
    pub num_delta_outliers: u64,
    pub num_value_outliers: u64,
}

/// Dual quantization of `x` over the grid `dims = [z, y, x]` in tiles of `tile`, band by
/// band ([`Bands`]): every read of the pre-quantized values stays inside a tile, so a band of
/// whole tiles is pre-quantized, predicted and delta-coded row by row while its rows are still
/// in cache, in a scratch of the band's size instead of an array of the input's.
pub fn forward<T: Float>(x: &[T], dims: [usize; 3], tile: Tile, mapping: CodeMapping, abs_bound: f64) -> Forward {
    let geometry = Geometry { dims, tile, mapping, step: T::at_most(abs_bound), abs_bound };
    let bands = Bands::of(dims, tile);
    // A task is whole bands (a 1-D array's are one tile each).
    let task = bands.elems * (TASK_ELEMS / bands.elems).max(1);
    let mut codes: Vec<u16> = zeroed_vec(x.len());
    let per_band: Vec<BandOutliers> = codes
        .par_chunks_mut(task)
        .zip(x.par_chunks(task))
        .enumerate()
        .map_init(Vec::new, |p, (k, (out, x))| {
            let geometry = Geometry { dims: bands.dims_of(x.len()), ..geometry };
            band_forward(x, k * task, geometry, p, out)
        })
        .collect();
    joined(codes, per_band, std::mem::size_of::<T>())
}

/// How a grid is cut into bands of whole tiles, each a grid of its own that starts on a tile
/// corner: slabs of `tz` planes; in a single plane, bands of `ty` rows; in a single row, `tx`
/// elements.
#[derive(Clone, Copy)]
pub(super) struct Bands {
    dims: [usize; 3],
    pub tile: Tile,
    /// Elements per band (at least one).
    pub elems: usize,
}

impl Bands {
    pub fn of(dims: [usize; 3], tile: Tile) -> Bands {
        let ([nz, ny, nx], [tz, ty, tx]) = (dims, tile.0);
        let elems = if nz > 1 {
            tz.min(nz) * ny * nx
        } else if ny > 1 {
            ty.min(ny) * nx
        } else {
            tx.min(nx)
        };
        Bands { dims, tile, elems: elems.max(1) }
    }

    /// The grid of `elems` elements from the start of a band (whole bands but at the grid's
    /// end).
    pub fn dims_of(&self, elems: usize) -> [usize; 3] {
        match self.dims {
            [1, 1, _] => [1, 1, elems],
            [1, _, nx] => [1, elems / nx, nx],
            [_, ny, nx] => [elems / (ny * nx), ny, nx],
        }
    }
}

/// The forward's result from its `codes` and its bands' outliers in index order, values of
/// `value_bytes` each.
pub(super) fn joined(codes: Vec<u16>, per_band: Vec<BandOutliers>, value_bytes: usize) -> Forward {
    let (mut values, mut deltas) = (Vec::new(), Vec::new());
    for (v, d) in per_band {
        values.extend(v);
        deltas.extend(d);
    }
    let (outliers, layout) = channel::smaller(|w, layout| write_channel(w, &deltas, &values, value_bytes, layout));
    Forward {
        codes,
        outliers,
        layout,
        num_delta_outliers: deltas.len() as u64,
        num_value_outliers: values.len() as u64,
    }
}

/// Whole bands ([`Bands`]) from element `base` on: row by row, pre-quantize (the Quantizer's
/// codes; values that cannot be quantized within the bound are value outliers), give each value
/// outlier its prediction ([`predict_value_outliers`]), then the row's deltas ([`row_deltas`])
/// and codes. Every row a row reads comes before it in the band and is final by then. `p` is
/// scratch. Returns the band's value outliers and delta outliers, in index order. On AVX2 the
/// row loops run twice as wide (the same operations).
pub(super) fn band_forward<T: Float>(
    x: &[T],
    base: usize,
    geometry: Geometry<T>,
    p: &mut Vec<i32>,
    out: &mut [u16],
) -> BandOutliers {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { band_forward_avx2(x, base, geometry, p, out) };
    }
    band_forward_inline(x, base, geometry, p, out)
}

/// What a band's forward needs: its grid, the tile, code mapping, the pre-quantization's step
/// and bound.
#[derive(Clone, Copy)]
pub(super) struct Geometry<T> {
    pub dims: [usize; 3],
    pub tile: Tile,
    pub mapping: CodeMapping,
    pub step: T,
    pub abs_bound: f64,
}

/// Value outliers (index, raw bits) and delta outliers (index, delta) of a band.
pub(super) type BandOutliers = (Vec<(u64, u64)>, Vec<(u64, i32)>);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn band_forward_avx2<T: Float>(
    x: &[T],
    base: usize,
    geometry: Geometry<T>,
    p: &mut Vec<i32>,
    out: &mut [u16],
) -> BandOutliers {
    band_forward_inline(x, base, geometry, p, out)
}

/// [`band_forward`] for the target's baseline features (or the caller's, inlined).
#[inline(always)]
fn band_forward_inline<T: Float>(
    x: &[T],
    base: usize,
    g: Geometry<T>,
    p: &mut Vec<i32>,
    out: &mut [u16],
) -> BandOutliers {
    let nx = g.dims[2].max(1);
    // Every element is written before it is read: stale values from the last band may stay
    // (no clearing pass); the scratch keeps its pages across bands.
    p.resize(x.len(), 0);
    let (mut values, mut deltas) = (Vec::new(), Vec::new());
    let (mut c, mut d) = (vec![0i32; nx], vec![0i32; nx]);
    for (row, (xr, out)) in x.chunks(nx).zip(out.chunks_mut(nx)).enumerate() {
        let found = codes_or_outliers_inline(xr, &mut p[row * nx..(row + 1) * nx], row * nx, g.step, g.abs_bound);
        if !found.is_empty() {
            predict_value_outliers(p, found.iter().map(|&(j, _)| j), g.dims, g.tile);
            values.extend(found.iter().map(|&(j, v)| ((base + j) as u64, v.bits())));
        }
        row_deltas(p, g.dims, g.tile, row, &mut c, &mut d);
        // Out-of-range deltas are rare: a branch-free loop notes them, and only a row that
        // has some walks again to list them in index order.
        if encode_row(g.mapping, &d, out) {
            let listed = d.iter().enumerate().filter(|&(_, &v)| g.mapping.encode(v).is_none());
            deltas.extend(listed.map(|(xi, &v)| ((base + row * nx + xi) as u64, v)));
        }
    }
    (values, deltas)
}

/// Give every value outlier (`at`: indices into the band `p`, in index order) the p of its
/// Lorenzo prediction, so its delta is 0 and a masked region (land, NaN) costs the coder
/// nothing but its edges: with p = 0 each edge would be a jump of the field's whole
/// magnitude. The inverse overwrites these elements, so only the encoder's bytes depend on the
/// choice (docs/FORMAT.md 6.5, `outlier_format` 3 and 4). Every neighbour a prediction reads
/// comes before the element in index order and is final by then; the band starts on a tile
/// corner, so band coordinates lie in the tiles as the grid's do.
fn predict_value_outliers(
    p: &mut [i32],
    at: impl Iterator<Item = usize>,
    [_, ny, nx]: [usize; 3],
    Tile([tz, ty, tx]): Tile,
) {
    for j in at {
        let has = [(j / (nx * ny)) % tz != 0, (j / nx % ny) % ty != 0, (j % nx) % tx != 0];
        let n = std::array::from_fn(|dz| {
            std::array::from_fn(|dy| {
                std::array::from_fn(|dx| {
                    let inside = (dz == 0 || has[0]) && (dy == 0 || has[1]) && (dx == 0 || has[2]);
                    if dz + dy + dx == 0 || !inside {
                        0
                    } else {
                        p[j - dz * ny * nx - dy * nx - dx]
                    }
                })
            })
        });
        // The delta with the element itself taken as 0 is minus its prediction.
        p[j] = lorenzo_delta(n).wrapping_neg();
    }
}

/// The channel: the delta list (values `varint zigzag(δ)`), then the value list (raw bits).
fn write_channel(w: &mut Writer, deltas: &[(u64, i32)], values: &[(u64, u64)], value_bytes: usize, layout: Layout) {
    channel::write_list(w, deltas, layout, |w, d| w.varint(u64::from(zigzag32(d))));
    channel::write_list(w, values, layout, |w, bits| w.bytes.extend_from_slice(&bits.to_le_bytes()[..value_bytes]));
}

/// The Lorenzo deltas ([`lorenzo_delta`]) of grid row `row` (= z · ny + y) into `d`, row-wise
/// so the loops are branch-free and vectorize: `c = A − B − C + D` from the rows that feed it
/// (A the row itself, B the row above, C the row in the plane before, D the row above that;
/// one in another tile counts as 0), then `d[x] = c[x] − c[x − 1]`, where a tile's first
/// column has no left neighbour and keeps `c[x]`. `c` is scratch; both are `nx` long.
#[inline(always)]
fn row_deltas(p: &[i32], [_, ny, nx]: [usize; 3], Tile([tz, ty, tx]): Tile, row: usize, c: &mut [i32], d: &mut [i32]) {
    let (z, y) = (row / ny, row % ny);
    let line = |dz: usize, dy: usize| {
        let r = (z - dz) * ny + (y - dy);
        &p[r * nx..(r + 1) * nx]
    };
    let a = line(0, 0);
    match (!y.is_multiple_of(ty), !z.is_multiple_of(tz)) {
        (false, false) => c.copy_from_slice(a),
        (true, false) => {
            for ((c, &a), &b) in c.iter_mut().zip(a).zip(line(0, 1)) {
                *c = a.wrapping_sub(b);
            }
        }
        (false, true) => {
            for ((c, &a), &b) in c.iter_mut().zip(a).zip(line(1, 0)) {
                *c = a.wrapping_sub(b);
            }
        }
        (true, true) => {
            let (b, cz, dd) = (line(0, 1), line(1, 0), line(1, 1));
            for ((((c, &a), &b), &cz), &dd) in c.iter_mut().zip(a).zip(b).zip(cz).zip(dd) {
                *c = a.wrapping_sub(b).wrapping_sub(cz).wrapping_add(dd);
            }
        }
    }
    d[0] = c[0];
    for ((d, &c), &left) in d[1..].iter_mut().zip(&c[1..]).zip(&c[..]) {
        *d = c.wrapping_sub(left);
    }
    for xi in (tx..nx).step_by(tx) {
        d[xi] = c[xi];
    }
}

/// `out[i]` = the code of `d[i]`, 0 where it has none; returns whether some have none. One
/// monomorphic, branch-free loop per mapping (the per-element `match` would not vectorize).
#[inline(always)]
fn encode_row(mapping: CodeMapping, d: &[i32], out: &mut [u16]) -> bool {
    #[inline(always)]
    fn each(d: &[i32], out: &mut [u16], code: impl Fn(i32) -> (u16, bool)) -> bool {
        // Or-ed in 32-bit lanes: a usize count would widen the vectors to 64-bit lanes.
        let mut misses = 0u32;
        for (o, &v) in out.iter_mut().zip(d) {
            let (c, ok) = code(v);
            *o = if ok { c } else { 0 };
            misses |= u32::from(!ok);
        }
        misses != 0
    }
    match mapping {
        CodeMapping::SignMagnitude => {
            each(d, out, |v| (v.unsigned_abs() as u16 | (u16::from(v < 0) << 15), v.unsigned_abs() < 1 << 15))
        }
        CodeMapping::Zigzag => each(d, out, |v| (((v << 1) ^ (v >> 31)) as u16, (-(1 << 15)..1 << 15).contains(&v))),
        CodeMapping::Radius(r) => each(d, out, |v| (v.wrapping_add(r as i32) as u16, v.unsigned_abs() < r)),
    }
}

/// `out[i]` = the delta of code `codes[i]`, on the calling core; one monomorphic loop per
/// mapping, on AVX2 in its wider lanes.
pub(super) fn decode_codes(mapping: CodeMapping, codes: &[u16], out: &mut [i32]) {
    #[inline(always)]
    fn each(codes: &[u16], out: &mut [i32], delta: impl Fn(u16) -> i32) {
        for (o, &c) in out.iter_mut().zip(codes) {
            *o = delta(c);
        }
    }
    #[inline(always)]
    fn by_mapping(mapping: CodeMapping, codes: &[u16], out: &mut [i32]) {
        match mapping {
            CodeMapping::SignMagnitude => each(codes, out, |c| CodeMapping::SignMagnitude.decode(c)),
            CodeMapping::Zigzag => each(codes, out, |c| CodeMapping::Zigzag.decode(c)),
            CodeMapping::Radius(r) => each(codes, out, |c| CodeMapping::Radius(r).decode(c)),
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn by_mapping_avx2(mapping: CodeMapping, codes: &[u16], out: &mut [i32]) {
        by_mapping(mapping, codes, out)
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { by_mapping_avx2(mapping, codes, out) };
    }
    by_mapping(mapping, codes, out)
}

fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

fn unzigzag32(u: u32) -> i32 {
    ((u >> 1) as i32) ^ -((u & 1) as i32)
}

/// Delta-outlier runs and value-outlier runs of the channel.
pub type Channel<T> = (Vec<Run<i32>>, Vec<Run<T>>);

/// Parse the outlier channel of `n` elements, every run checked; shared with the device
/// inverse, which patches the parsed runs in on the device.
pub fn parse_channel<T: Float>(outliers: &[u8], counts: (u64, u64), n: usize, layout: Layout) -> Result<Channel<T>> {
    const WHAT: &str = "LorenzoQuant outlier channel";
    let mut r = Reader::new(outliers, WHAT);
    let deltas = channel::read_list(&mut r, counts.0, n, layout, WHAT, |r| {
        let u = u32::try_from(r.varint()?).map_err(|_| corrupt!("LorenzoQuant outlier delta exceeds 32 bits"))?;
        Ok(unzigzag32(u))
    })?;
    let values = channel::read_list(&mut r, counts.1, n, layout, WHAT, T::read_le)?;
    r.finish()?;
    Ok((deltas, values))
}

/// Inverse: codes → deltas (outliers patched in) → tile prefix sums → values.
pub fn inverse<T: Float>(
    codes: &[u16],
    outliers: &[u8],
    (counts, layout): ((u64, u64), Layout),
    dims: [usize; 3],
    tile: Tile,
    mapping: CodeMapping,
    step: T,
) -> Result<Vec<T>> {
    let (deltas, values) = parse_channel::<T>(outliers, counts, codes.len(), layout)?;
    // One monomorphic map per code mapping (no `match` per element), into fresh memory with
    // no clearing pass first (decode_codes, the fused blocks' form, writes a cleared buffer:
    // 7 % slower here).
    let mut p: Vec<i32> = match mapping {
        CodeMapping::SignMagnitude => mapped_vec(codes, TASK_ELEMS, |c| CodeMapping::SignMagnitude.decode(c)),
        CodeMapping::Zigzag => mapped_vec(codes, TASK_ELEMS, |c| CodeMapping::Zigzag.decode(c)),
        CodeMapping::Radius(r) => mapped_vec(codes, TASK_ELEMS, |c| CodeMapping::Radius(r).decode(c)),
    };
    for r in deltas {
        p[r.start..r.start + r.len].fill(r.value);
    }
    tile_prefix_sums(&mut p, dims, tile);
    // f32 values go into the sums' own memory: a fresh array would cost its page clearing.
    let mut out: Vec<T> = match bytemuck::try_cast_vec::<i32, T>(p) {
        Ok(mut v) => {
            map_in_place(&mut v, TASK_ELEMS, |x| T::reconstruct(bytemuck::cast::<T, i32>(x), step));
            v
        }
        Err((_, p)) => mapped_vec(&p, TASK_ELEMS, |q| T::reconstruct(q, step)),
    };
    for r in values {
        out[r.start..r.start + r.len].fill(r.value);
    }
    Ok(out)
}

/// Inverse of the tiled Lorenzo delta, in place: prefix sums along x, then y, then z, each
/// restarting at tile boundaries. Bands of whole tiles ([`Bands`]) are independent: tasks of
/// whole bands run in parallel (a 1-D array's bands are one tile each).
fn tile_prefix_sums(d: &mut [i32], dims: [usize; 3], tile: Tile) {
    let bands = Bands::of(dims, tile);
    let task = bands.elems * (TASK_ELEMS / bands.elems).max(1);
    d.par_chunks_mut(task).for_each(|d| block_prefix_sums(d, bands.dims_of(d.len()), tile));
}

/// [`tile_prefix_sums`] of a grid that starts on a tile corner (a task, or a block of a fused
/// region), on the calling core. Along x and y in one pass: a band of `ty` rows is summed row
/// by row (x), each row then adding the one before it (y) while both are in cache.
pub(super) fn block_prefix_sums(d: &mut [i32], [_, ny, nx]: [usize; 3], Tile([tz, ty, tx]): Tile) {
    for plane in d.chunks_mut(nx * ny) {
        plane.chunks_mut(nx * ty).for_each(|band| xy_sums(band, nx, tx));
    }
    d.chunks_mut(nx * ny * tz).for_each(|band| z_sums(band, nx * ny));
}

/// The sums along x and y of a band of rows `nx` long in tiles `tx` wide.
fn xy_sums(band: &mut [i32], nx: usize, tx: usize) {
    #[cfg(target_arch = "x86_64")]
    if tx.is_multiple_of(8) && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { band_sums_avx2(band, nx, tx) };
    }
    band_sums(band, nx, tx, |seg| {
        let mut acc = 0i32;
        for v in seg {
            acc = acc.wrapping_add(*v);
            *v = acc;
        }
    })
}

/// The sums along z of a band of planes of `plane` elements: each adds the one before it.
fn z_sums(band: &mut [i32], plane: usize) {
    for z in 1..band.len() / plane {
        let (prev, cur) = band.split_at_mut(z * plane);
        for (c, p) in cur[..plane].iter_mut().zip(&prev[(z - 1) * plane..]) {
            *c = c.wrapping_add(*p);
        }
    }
}

/// [`band_sums`] with the x segments (a multiple of 8 long) as vector scans, and the adds of
/// the row above in AVX2's lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn band_sums_avx2(band: &mut [i32], nx: usize, tx: usize) {
    use crate::stages::prefix_sum::avx2::scan;
    band_sums(band, nx, tx, |seg| scan(bytemuck::cast_slice_mut(seg), |v| v, |v| v))
}

/// One band's sums along x (`segment_sums` of each `tx` run of a row) and y (each row adds
/// the one before it, while both are in cache).
#[inline(always)]
fn band_sums(band: &mut [i32], nx: usize, tx: usize, segment_sums: impl Fn(&mut [i32])) {
    for y in 0..band.len() / nx {
        let (prev, cur) = band.split_at_mut(y * nx);
        let row = &mut cur[..nx];
        row.chunks_mut(tx).for_each(&segment_sums);
        if y > 0 {
            for (c, p) in row.iter_mut().zip(&prev[(y - 1) * nx..]) {
                *c = c.wrapping_add(*p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::quantizer::cpu::codes_or_outliers;
    use proptest::prelude::*;

    /// One value through the pre-quantization pass (`recip` is the step's, as `forward`
    /// derives it): `Some(p)`, or `None` for a value-outlier.
    fn prequantize(x: f32, recip: f32, step: f32, abs_bound: f64) -> Option<i32> {
        assert_eq!(recip, f32::half_recip(step));
        let mut p = [0];
        let outliers = codes_or_outliers(&[x], &mut p, 0, step, abs_bound);
        if outliers.is_empty() {
            Some(p[0])
        } else {
            None
        }
    }

    fn round_trip(x: &[f32], dims: [usize; 3], tile: Tile, mapping: CodeMapping, b: f64) -> Vec<f32> {
        let f = forward(x, dims, tile, mapping, b);
        let step = f32::at_most(b);
        let counts = ((f.num_delta_outliers, f.num_value_outliers), f.layout);
        inverse(&f.codes, &f.outliers, counts, dims, tile, mapping, step).unwrap()
    }

    fn check(x: &[f32], y: &[f32], b: f64) {
        for (a, c) in x.iter().zip(y) {
            if a.is_finite() {
                assert!((f64::from(*a) - f64::from(*c)).abs() <= b, "{a} vs {c}");
            } else {
                assert_eq!(a.to_bits(), c.to_bits());
            }
        }
    }

    /// The forward of before the bands (main at c55cc88, less its parallel split): the whole
    /// grid pre-quantized, value outliers predicted in index order over the whole grid, then
    /// per row [`row_deltas`] and [`encode_row`]. The reference of the banded [`forward`].
    fn reference_forward(x: &[f32], dims: [usize; 3], tile: Tile, mapping: CodeMapping, abs_bound: f64) -> Forward {
        let (step, nx) = (f32::at_most(abs_bound), dims[2].max(1));
        let mut p = vec![0i32; x.len()];
        let found = codes_or_outliers(x, &mut p, 0, step, abs_bound);
        let values: Vec<(u64, u64)> = found.iter().map(|&(i, v)| (i as u64, v.bits())).collect();
        predict_value_outliers(&mut p, found.iter().map(|&(i, _)| i), dims, tile);
        let mut codes = vec![0u16; x.len()];
        let mut deltas = Vec::new();
        let (mut c, mut d) = (vec![0i32; nx], vec![0i32; nx]);
        for (row, out) in codes.chunks_mut(nx).enumerate() {
            row_deltas(&p, dims, tile, row, &mut c, &mut d);
            encode_row(mapping, &d, out);
            let listed = d.iter().enumerate().filter(|&(_, &v)| mapping.encode(v).is_none());
            deltas.extend(listed.map(|(xi, &v)| ((row * nx + xi) as u64, v)));
        }
        let (outliers, layout) = channel::smaller(|w, layout| write_channel(w, &deltas, &values, 4, layout));
        Forward {
            codes,
            outliers,
            layout,
            num_delta_outliers: deltas.len() as u64,
            num_value_outliers: values.len() as u64,
        }
    }

    proptest! {
        /// The banded forward gives the reference's codes and outlier channel on 1-D, 2-D and
        /// 3-D grids of odd sizes, any tile (larger than the grid too), and values with NaN,
        /// ±Inf, huge values (value outliers) and jumps (delta outliers).
        #[test]
        fn banded_forward_matches_the_reference(
            nz in 1usize..7, ny in 1usize..20, nx in 1usize..70,
            t in (1usize..9, 1usize..20, 1usize..40), m in 0u8..3, seed in any::<u64>(), density in 0u64..8,
        ) {
            let n = nz * ny * nx;
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3.0e38, -1e10, 5000.0, -5000.0];
            let x: Vec<f32> = (0..n)
                .map(|i| {
                    if next() % 64 < density {
                        specials[(next() % 7) as usize]
                    } else {
                        (i as f32 * 0.37).sin() * 40.0 + (next() % 100) as f32 * 0.01
                    }
                })
                .collect();
            let mapping = [CodeMapping::SignMagnitude, CodeMapping::Zigzag, CodeMapping::Radius(512)][m as usize];
            let (dims, tile) = ([nz, ny, nx], Tile([t.0, t.1, t.2]));
            let (got, want) = (forward(&x, dims, tile, mapping, 0.01), reference_forward(&x, dims, tile, mapping, 0.01));
            prop_assert_eq!(got.codes, want.codes);
            prop_assert_eq!(got.outliers, want.outliers);
            prop_assert_eq!(got.layout, want.layout);
            prop_assert_eq!(
                (got.num_delta_outliers, got.num_value_outliers),
                (want.num_delta_outliers, want.num_value_outliers)
            );
        }
    }

    proptest! {
        /// The tiles' prefix sums (the vector form where tx is a multiple of 8) against the
        /// definition: each element the wrapping sum of its tile's deltas up to it in z, y, x.
        #[test]
        fn tile_prefix_sums_match_the_definition(
            nz in 1usize..5, ny in 1usize..12, nx in 1usize..80,
            t in (1usize..4, 1usize..5, prop_oneof![Just(8usize), Just(16), Just(32), 1usize..12]), seed in any::<u64>(),
        ) {
            let dims = [nz, ny, nx];
            let d: Vec<i32> = (0..(nz * ny * nx) as u64).map(|i| (i.wrapping_mul(seed | 1) >> 33) as i32).collect();
            let mut got = d.clone();
            tile_prefix_sums(&mut got, dims, Tile([t.0, t.1, t.2]));
            let at = |z: usize, y: usize, x: usize| (z * ny + y) * nx + x;
            for (z, y, x) in (0..nz).flat_map(|z| (0..ny).flat_map(move |y| (0..nx).map(move |x| (z, y, x)))) {
                let (z0, y0, x0) = (z / t.0 * t.0, y / t.1 * t.1, x / t.2 * t.2);
                let want = (z0..=z)
                    .flat_map(|zz| (y0..=y).flat_map(move |yy| (x0..=x).map(move |xx| (zz, yy, xx))))
                    .fold(0i32, |a, (zz, yy, xx)| a.wrapping_add(d[at(zz, yy, xx)]));
                prop_assert_eq!(got[at(z, y, x)], want, "({}, {}, {})", z, y, x);
            }
        }
    }

    proptest! {
        #[test]
        fn bound_holds_for_any_grid_tile_and_mapping(
            nz in 1usize..4, ny in 1usize..12, nx in 1usize..40,
            t in (1usize..5, 1usize..6, 1usize..9), m in 0u8..3, seed in any::<u64>(), scale in 1.0f32..1e6,
        ) {
            let n = nz * ny * nx;
            let x: Vec<f32> = (0..n as u64)
                .map(|i| ((i.wrapping_mul(seed | 1) >> 40) as f32 / 16777216.0 - 0.5) * scale)
                .collect();
            let mapping = [CodeMapping::SignMagnitude, CodeMapping::Zigzag, CodeMapping::Radius(3)][m as usize];
            let b = 1e-3 * f64::from(scale);
            let y = round_trip(&x, [nz, ny, nx], Tile([t.0, t.1, t.2]), mapping, b);
            check(&x, &y, b);
        }
    }

    proptest! {
        /// Outliers in runs (masked regions) and alone: every value comes back (the outliers
        /// bit for bit), and each value outlier's delta is 0, its prediction (no delta outlier
        /// there, its code the mapping's code of 0).
        #[test]
        fn value_outliers_in_runs_and_alone_take_their_prediction(
            nz in 1usize..4, ny in 1usize..12, nx in 1usize..40,
            t in (1usize..5, 1usize..6, 1usize..9), m in 0u8..3, seed in any::<u64>(), density in 0u64..=16,
        ) {
            let n = nz * ny * nx;
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let specials = [f32::from_bits(0x7fc0_0bad), f32::INFINITY, f32::NEG_INFINITY, 3.0e38, -1e10];
            let mut x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 40.0 + (next() % 100) as f32 * 0.01).collect();
            let mut i = 0;
            while i < n {
                // Runs of 1..=24 outliers, as often as `density` / 16 (16: all outliers).
                let run = 1 + (next() % 24) as usize;
                if next() % 16 < density {
                    let v = specials[(next() % 5) as usize];
                    x[i..(i + run).min(n)].fill(v);
                }
                i += run;
            }
            let mapping = [CodeMapping::SignMagnitude, CodeMapping::Zigzag, CodeMapping::Radius(40)][m as usize];
            let (dims, tile, b) = ([nz, ny, nx], Tile([t.0, t.1, t.2]), 0.05);
            let f = forward(&x, dims, tile, mapping, b);
            let deltas = parse_channel::<f32>(&f.outliers, (f.num_delta_outliers, f.num_value_outliers), n, f.layout)
                .unwrap()
                .0;
            let zero = mapping.encode(0).unwrap();
            for (k, v) in x.iter().enumerate() {
                if !v.is_finite() || v.abs() > 1e9 {
                    prop_assert_eq!(f.codes[k], zero, "outlier {}", k);
                    prop_assert!(!deltas.iter().any(|r| (r.start..r.start + r.len).contains(&k)));
                }
            }
            check(&x, &round_trip(&x, dims, tile, mapping, b), b);
        }
    }

    #[test]
    fn specials_and_huge_deltas_are_lossless() {
        let nan = f32::from_bits(0x7fc0_1234);
        // 1e9 overflows the pre-quantized integer; ±1000 / 0.02 = ±50000 overflows a u16 code.
        let x = [0.0, 1e9, nan, f32::INFINITY, -1e9, 3.0e38, -0.0, 1000.0, f32::NEG_INFINITY, -1000.0];
        let f = forward(&x, [1, 1, x.len()], Tile([1, 1, 4]), CodeMapping::SignMagnitude, 1e-2);
        assert_eq!((f.num_value_outliers, f.num_delta_outliers), (6, 2));
        let y = round_trip(&x, [1, 1, x.len()], Tile([1, 1, 4]), CodeMapping::SignMagnitude, 1e-2);
        check(&x, &y, 1e-2);
        assert_eq!(y[6].to_bits(), 0, "−0.0 quantizes to +0.0 within the bound");
    }

    #[test]
    fn a_value_on_a_bin_edge_takes_the_neighbouring_bin() {
        // trinidad_dem at rel 1e-4 (b = 1e-4 · (max − min)): x · (0.5 / h) is exactly 5040.5
        // in f32, rounds up to 5041, and (5041 · h) · 2 misses x by more than b; bin 5040 keeps
        // it (the value FZ-GPU and PFPL quantize there too).
        let b = 1e-4 * (14176.16015625 - 4457.52001953125);
        let x = 9_797.36_f32;
        assert_eq!(f64::from(x), 9797.3603515625);
        let (step, recip) = (f32::at_most(b), f32::half_recip(f32::at_most(b)));
        assert_eq!(x.quantize(recip), 5041);
        assert!((f64::from(x) - f64::from(f32::reconstruct(5041, step))).abs() > b);
        assert_eq!(prequantize(x, recip, step, b), Some(5040));
        let f = forward(&[x; 5], [1, 1, 5], Tile([1, 1, 4]), CodeMapping::SignMagnitude, b);
        assert_eq!(f.num_value_outliers, 0);
        check(&[x; 5], &round_trip(&[x; 5], [1, 1, 5], Tile([1, 1, 4]), CodeMapping::SignMagnitude, b), b);
    }

    proptest! {
        #[test]
        fn prequantize_keeps_the_bound_and_fails_only_when_both_bins_do(
            bits in any::<u32>(), b in 1e-6f64..1e3,
        ) {
            let x = f32::from_bits(bits);
            let (step, recip) = (f32::at_most(b), f32::half_recip(f32::at_most(b)));
            let err = |p: i32| (f64::from(x) - f64::from(f32::reconstruct(p, step))).abs();
            match prequantize(x, recip, step, b) {
                Some(p) => prop_assert!(x.is_finite() && err(p) <= b),
                None => {
                    let p = x.quantize(recip);
                    prop_assert!(!x.is_finite() || [p.wrapping_sub(1), p, p.wrapping_add(1)].iter().all(|&q| err(q) > b));
                }
            }
        }
    }

    proptest! {
        /// The row-wise deltas against the per-element definition ([`lorenzo_delta`] over the
        /// 2×2×2 neighbourhood, a neighbour in another tile 0), on wrapping-range values.
        #[test]
        fn row_deltas_match_the_per_element_definition(
            nz in 1usize..5, ny in 1usize..10, nx in 1usize..40,
            t in (1usize..5, 1usize..6, 1usize..9), seed in any::<u32>(),
        ) {
            let dims = [nz, ny, nx];
            let tile = Tile([t.0, t.1, t.2]);
            let p: Vec<i32> = (0..(nz * ny * nx) as u32).map(|i| (i ^ seed).wrapping_mul(seed | 1) as i32).collect();
            let (mut c, mut d) = (vec![0; nx], vec![0; nx]);
            for row in 0..nz * ny {
                row_deltas(&p, dims, tile, row, &mut c, &mut d);
                let (z, y) = (row / ny, row % ny);
                for (xi, &got) in d.iter().enumerate() {
                    let has = [z % t.0 != 0, y % t.1 != 0, xi % t.2 != 0];
                    let n = std::array::from_fn(|dz| {
                        std::array::from_fn(|dy| {
                            std::array::from_fn(|dx| {
                                let inside = (dz == 0 || has[0]) && (dy == 0 || has[1]) && (dx == 0 || has[2]);
                                if inside { p[((z - dz) * ny + y - dy) * nx + xi - dx] } else { 0 }
                            })
                        })
                    });
                    prop_assert_eq!(got, lorenzo_delta(n), "row {} x {}", row, xi);
                }
            }
        }
    }

    #[test]
    fn encode_row_matches_the_mapping() {
        let mut d: Vec<i32> = (-70000..70000).collect();
        d.extend([i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1]);
        for m in [CodeMapping::SignMagnitude, CodeMapping::Zigzag, CodeMapping::Radius(512), CodeMapping::Radius(32768)]
        {
            let mut out = vec![1u16; d.len()];
            let misses = encode_row(m, &d, &mut out);
            assert_eq!(misses, d.iter().any(|&v| m.encode(v).is_none()), "{m:?}");
            for (&v, &c) in d.iter().zip(&out) {
                assert_eq!(c, m.encode(v).unwrap_or(0), "{m:?} {v}");
            }
            assert!(!encode_row(m, &[0, 1, -1], &mut out[..3]), "{m:?}");
        }
    }

    #[test]
    fn delta_of_a_plane_vanishes_inside_tiles() {
        let n = [[[5, 4], [4, 3]], [[4, 3], [3, 2]]]; // p = 2 + x + y + z around (1, 1, 1)
        assert_eq!(lorenzo_delta(n), 0);
        assert_eq!(lorenzo_delta([[[7, 0], [0, 0]], [[0, 0], [0, 0]]]), 7);
    }

    #[test]
    fn mappings_invert() {
        for m in [CodeMapping::SignMagnitude, CodeMapping::Zigzag, CodeMapping::Radius(512)] {
            for d in -40000..40000 {
                if let Some(c) = m.encode(d) {
                    assert_eq!(m.decode(c), d, "{m:?} {d}");
                }
            }
        }
        assert_eq!(CodeMapping::SignMagnitude.encode(-3), Some(0x8003));
        assert_eq!(CodeMapping::SignMagnitude.encode(32768), None);
        assert_eq!(CodeMapping::Zigzag.encode(-32768), Some(65535));
        assert_eq!(CodeMapping::Radius(512).encode(511), Some(1023));
        assert_eq!(CodeMapping::Radius(512).encode(-512), None);
    }

    #[test]
    fn truncated_channel_is_an_error() {
        let x = [f32::NAN, 1.0, 1e9, 2.0];
        let f = forward(&x, [1, 1, 4], Tile([1, 1, 4]), CodeMapping::Zigzag, 1e-3);
        for cut in 0..f.outliers.len() {
            let counts = ((f.num_delta_outliers, f.num_value_outliers), f.layout);
            let r =
                inverse(&f.codes, &f.outliers[..cut], counts, [1, 1, 4], Tile([1, 1, 4]), CodeMapping::Zigzag, 1e-3f32);
            assert!(r.is_err());
        }
    }
}
