//! CPU reference of the Interpolation stage: level bounds, the per-point quantizer, the
//! deterministic per-level choice, and the level-by-level encoder and decoder. Every
//! per-point step is a pure function a CUDA kernel mirrors; the drivers only fix the visiting
//! order, which does not change any value (points of one pass are independent).

use super::order::LevelRows;
use super::parity::ParityGrids;
#[cfg(target_arch = "x86_64")]
use super::rows::has_avx512;
use super::rows::{row_iter, rows, strided_copy, strided_scatter, Lines, Row};
use super::slabs::Slabs;
use super::walk::{passes, Choice, Geometry, Kind, Pass, Real};
use crate::archive::{Reader, Writer};
use crate::element::zeroed_vec;
use crate::error::{corrupt, Result};
use rayon::prelude::*;

/// Half bin width and its reciprocal (0.5 / step; 0 when the step is 0) of one level.
#[derive(Clone, Copy, Debug)]
pub struct LevelStep<T> {
    pub step: T,
    pub recip: T,
}

/// The level bounds eb_ℓ = abs_bound / min(α^(ℓ−1), β), computed in f64 (α^(ℓ−1) by
/// repeated multiplication from 1), each turned into the element type's half bin width.
/// Index ℓ − 1: entry 0 is the finest level.
pub fn level_steps<T: Real>(abs_bound: f64, alpha: f64, beta: f64, levels: usize) -> Vec<LevelStep<T>> {
    let mut power = 1.0f64;
    (0..levels)
        .map(|l| {
            if l > 0 {
                power *= alpha;
            }
            let step = T::at_most(abs_bound / power.min(beta));
            let recip = if step.to_f64() > 0.0 { T::half_recip(step) } else { T::ZERO };
            LevelStep { step, recip }
        })
        .collect()
}

/// The value a point contributes to later predictions: itself, or 0 when it is not finite
/// (a NaN would otherwise turn every point predicted from it into an outlier).
#[inline]
pub fn feed<T: Real>(v: T) -> T {
    if v.is_finite() {
        v
    } else {
        T::ZERO
    }
}

/// Quantize the prediction error of `x` against `p`: `Some((q, r))` with |q| < radius and the
/// reconstruction r = p + (q·step)·2 within `abs_bound` of x (checked in f64): the rounded
/// code, or its neighbour on x's side when rounding put r just outside. `None`: an outlier.
#[inline]
pub fn quantize_point<T: Real>(x: T, p: T, lv: LevelStep<T>, radius: u32, abs_bound: f64) -> Option<(i32, T)> {
    let e = x - p;
    // Range check before any float → integer conversion (NaN fails it).
    if (e * lv.recip).to_f64().abs().partial_cmp(&f64::from(radius)) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    let xf = x.to_f64();
    let within = |q: i32| {
        let r = p + T::reconstruct(q, lv.step);
        (q.unsigned_abs() < radius && r.is_finite() && (xf - r.to_f64()).abs() <= abs_bound).then_some(r)
    };
    let q = e.quantize(lv.recip);
    if let Some(r) = within(q) {
        return Some((q, r));
    }
    let side = if xf < (p + T::reconstruct(q, lv.step)).to_f64() { q - 1 } else { q + 1 };
    within(side).map(|r| (side, r))
}

/// The cost of a point in the choice estimate: the bit length of |q| (0 for q = 0), 21 when
/// the error does not quantize into 2^20 bins or is not finite. Integer, so sums are exact in
/// any order. [`cost_field`] less the exponent field of 1/2.
#[inline(always)]
pub fn point_cost<T: Real>(x: T, p: T, recip: T) -> u32 {
    (cost_field(x, p, recip).into() - u64::from(T::HALF_FIELD)) as u32
}

/// [`point_cost`] plus the exponent field of 1/2 (which a sum subtracts once per point at
/// its end), in the element's own width: the estimate's loops are a third of a small
/// field's encode, and this is the fewest vector operations per point found.
///
/// q is `Float::quantize`'s code: t = trunc(y), y = e·recip + 0.5, less one when y < 0. So
/// |q| = ⌊y⌋ for y ≥ 0 and ⌊1 − y⌋ for y < 0, and its bit length is the exponent of y or 1 − y
/// (both exact below 2^22) less that of 1/2 when z = y or 1 − y is at least 1/2, else 0. No
/// float → integer conversion and no branch: loops vectorise. y is never −0 (−1/2 + 1/2 =
/// +0), so z is positive or NaN.
///
/// z is clamped to [1/2, 2^20] before its exponent is read: below 1/2 the cost is 0, from
/// 2^20 on (where |d| < 2^20 fails) 21, the cap. The clamp is two selects in the operand order
/// of x86's max and min, which return their second operand when either is NaN: a NaN z
/// passes the first and becomes 2^20 at the second, cost 21 as an error that is not finite
/// must be (+Inf is above 2^20). Each is one instruction, where the exponent's saturating
/// subtraction, minimum and narrowing to 32 bits were four.
#[inline(always)]
pub fn cost_field<T: Real>(x: T, p: T, recip: T) -> T::Field {
    let (half, cap) = (T::lit(0.5), T::lit(1048576.0));
    let d = (x - p) * recip;
    let y = d + half;
    let z = if y >= T::ZERO { y } else { T::lit(1.0) - y };
    let z = if half > z { half } else { z };
    let z = if z < cap { z } else { cap };
    z.exponent_field()
}

/// Anchor blocks sampled by the choice estimate: every S-th block in C order, S = max(1,
/// ⌊blocks / 64⌋).
pub fn sampled_blocks(g: &Geometry) -> impl Iterator<Item = Block> + '_ {
    let [_, by, bx] = g.blocks_per_axis();
    let total: usize = g.blocks_per_axis().iter().product();
    let stride = (total / 64).max(1);
    (0..total).step_by(stride).map(move |b| {
        let lo = [b / (by * bx) * g.anchor, b / bx % by * g.anchor, b % bx * g.anchor];
        (lo, std::array::from_fn(|k| (lo[k] + g.anchor).min(g.dims[k])))
    })
}

/// Per level (coarsest first), the candidate of least summed cost on the sampled blocks,
/// predicting from the original values; ties go to the earlier candidate.
pub fn select<T: Real>(x: &[T], g: &Geometry, steps: &[LevelStep<T>]) -> Vec<Choice> {
    let blocks: Vec<_> = sampled_blocks(g).collect();
    (1..=g.levels())
        .rev()
        .map(|l| {
            let costs = level_costs(x, g, 1 << (l - 1), steps[l - 1].recip, &blocks);
            let best = (0..costs.len()).min_by_key(|&k| (costs[k], k)).expect("candidates");
            Choice::CANDIDATES[best]
        })
        .collect()
}

/// The choice estimate's buffers, reused across the blocks a thread takes.
struct Scratch<T> {
    lines: Lines<T>,
    v: Vec<T>,
    parity: ParityGrids<T>,
}

impl<T: Real> Default for Scratch<T> {
    fn default() -> Self {
        Scratch { lines: Lines::new(), v: Vec::new(), parity: ParityGrids::new() }
    }
}

/// Parity classes (pz·4 + py·2 + px) and the axis they are predicted along, per group of
/// [`level_costs`]: a point with one odd coordinate is predicted along that axis in both
/// sweep orders; with two or three, along the first odd axis of the order.
const SHARED: [(usize, usize); 2] = [(0b100, 0), (0b010, 1)];
const Z_FIRST_OWN: [(usize, usize); 1] = [(0b110, 1)];
const X_FIRST_OWN: [(usize, usize); 4] = [(0b011, 1), (0b110, 0), (0b101, 0), (0b111, 0)];

/// The summed [`point_cost`] of every candidate (in [`Choice::CANDIDATES`] order) at the
/// level of stride `s`. A point with exactly one coordinate an odd multiple of s is predicted
/// along that axis in both sweep orders, from the same original values, so it costs the same
/// in both: such points are predicted once and counted for both orders. Passes along z and y
/// run on parity sub-grids (parity.rs); the points odd along x, all predicted along x in the
/// z-first order, row by row. The sums are integers, so the grouping changes no total.
pub fn level_costs<T: Real>(x: &[T], g: &Geometry, s: usize, recip: T, blocks: &[Block]) -> [u64; 6] {
    // The sampled blocks on all cores, each with its own buffers; integer sums, so the
    // totals (and the choices) do not depend on how the blocks are shared out.
    let sums = blocks
        .par_iter()
        .map_init(Scratch::default, |scratch, &(lo, hi)| block_costs(x, g, s, recip, scratch, lo, hi))
        .reduce(|| [[0; 3]; 3], |a, b| std::array::from_fn(|k| std::array::from_fn(|j| a[k][j] + b[k][j])));
    // CANDIDATES order: kind-major, z-first before x-first.
    std::array::from_fn(|i| sums[0][i / 2] + sums[1 + i % 2][i / 2])
}

/// An anchor block of the estimate: its first and one-past-last coordinates.
pub type Block = ([usize; 3], [usize; 3]);

/// One sampled block's part of [`level_costs`]: per kind, [shared, z-first own, x-first own].
fn block_costs<T: Real>(
    x: &[T],
    g: &Geometry,
    s: usize,
    recip: T,
    scratch: &mut Scratch<T>,
    lo: [usize; 3],
    hi: [usize; 3],
) -> [[u64; 3]; 3] {
    let Scratch { lines, v, parity } = scratch;
    let odd = |c: usize| c / s % 2 == 1;
    let mut sums = [[0u64; 3]; 3];
    let add = |sum: &mut [u64; 3], c: [u64; 3]| sum.iter_mut().zip(c).for_each(|(a, b)| *a += b);
    let x_pass = Pass { axis: 2, start: [0, 0, s], step: [s, s, 2 * s] };
    parity.extract(x, g, s, lo, hi);
    for (group, classes) in [&SHARED[..], &Z_FIRST_OWN, &X_FIRST_OWN].into_iter().enumerate() {
        for &(class, axis) in classes {
            add(&mut sums[group], parity.costs(class, axis, recip));
        }
    }
    rows(g, &x_pass, lo, hi, |row| {
        lines.gather(g, x, 2, s, row);
        v.resize(row.count, T::ZERO);
        strided_copy(v, &x[row.first..], row.step);
        // x is the only odd coordinate where z and y are even.
        let group = if odd(row.zy[0]) || odd(row.zy[1]) { 1 } else { 0 };
        add(&mut sums[group], lines.costs(v, recip));
    });
    sums
}

/// Output of [`forward`].
pub struct Encoded {
    pub codes: Vec<u16>,
    /// Anchors, then the outlier list (docs/FORMAT.md 6.17).
    pub side: Vec<u8>,
    pub num_outliers: u64,
    pub choices: Vec<Choice>,
}

/// The quantization parameters shared by both directions.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub radius: u32,
    /// Code mapping: `false` radius (q + radius, outlier 0), `true` zigzag (outlier 2·radius − 1).
    pub zigzag: bool,
    pub abs_bound: f64,
    pub alpha: f64,
    pub beta: f64,
}

impl Params {
    /// The u16 code of a level code q (|q| < radius).
    #[inline]
    pub fn code(&self, q: i32) -> u16 {
        if self.zigzag {
            ((q << 1) ^ (q >> 31)) as u16
        } else {
            (q + self.radius as i32) as u16
        }
    }

    /// The code that marks an outlier.
    #[inline]
    pub fn outlier_code(&self) -> u16 {
        if self.zigzag {
            (2 * self.radius - 1) as u16
        } else {
            0
        }
    }

    /// Inverse of [`Params::code`]; total (any code other than the marker decodes to some q).
    #[inline]
    pub fn level_code(&self, c: u16) -> i32 {
        if self.zigzag {
            i32::from(c >> 1) ^ -i32::from(c & 1)
        } else {
            i32::from(c) - self.radius as i32
        }
    }
}

/// One row's values, codes and reconstructions, contiguous: the per-point quantization and
/// reconstruction run as plain loops over them (vectorised, AVX2 where the CPU has it) and
/// reach the grid through one strided copy each. Reused across rows. The buffers run to a
/// multiple of [`ROW_PAD`] points, zero past the row's end: the vector loop then covers the
/// whole row, with no scalar remainder (whose branch on each point's test took a third of
/// the quantization on the short rows of small fields: 24 points along x in ncep).
struct RowCodes<T> {
    x: Vec<T>,
    codes: Vec<u16>,
    w: Vec<T>,
}

/// The multiple of points the row buffers of [`RowCodes`] run to: whole iterations of the
/// vectorised loop (four vectors of f64, two of f32 with AVX2).
const ROW_PAD: usize = 16;

impl<T: Real> RowCodes<T> {
    fn new() -> Self {
        RowCodes { x: Vec::new(), codes: Vec::new(), w: Vec::new() }
    }

    /// The values of row `r` of `x`, zero-padded (see [`RowCodes`]). Inlined into the
    /// encoder's pass, whose vector width its copies then take.
    #[inline(always)]
    fn load(&mut self, x: &[T], r: &Row) {
        self.x.resize(r.count.next_multiple_of(ROW_PAD), T::ZERO);
        let (row, pad) = self.x.split_at_mut(r.count);
        strided_copy(row, &x[r.first..], r.step);
        pad.fill(T::ZERO);
    }

    /// Codes and reconstructions of the loaded values against the predictions `p` (the
    /// row's, zero-padded here) by the fast test alone: the rounded code when its
    /// reconstruction is within `accept` in T (which proves [`quantize_point`]'s f64 check, so
    /// both give the same code and value), else the outlier code as a placeholder for
    /// [`quantize_point`]. Returns whether it placed any. A padded point (x = p = 0) gets
    /// level code 0 and, for a finite step, passes (accept ≥ 0); where it does not, the flag
    /// only costs the row's real points a second look. Its code is never written. Inlined
    /// into the caller's pass (and its target features).
    #[inline(always)]
    fn quantize_padded(&mut self, p: &mut Vec<T>, r: &Row, lv: LevelStep<T>, accept: T, q: Params) -> bool {
        p.truncate(r.count);
        p.resize(self.x.len(), T::ZERO);
        self.quantize_inline(p, lv, accept, q)
    }

    #[inline(always)]
    fn quantize_inline(&mut self, p: &[T], lv: LevelStep<T>, accept: T, q: Params) -> bool {
        let n = self.x.len();
        self.codes.resize(n, 0);
        self.w.resize(n, T::ZERO);
        let (x, p, codes, w) = (&self.x[..n], &p[..n], &mut self.codes[..n], &mut self.w[..n]);
        // A flag, not a count: a 64-bit counter halves the vector width.
        let mut fails = false;
        for k in 0..n {
            let c = (x[k] - p[k]).quantize(lv.recip);
            let r = p[k] + T::reconstruct(c, lv.step);
            let ok = c.unsigned_abs() < q.radius && x[k].close_to(r, accept);
            codes[k] = if ok { q.code(c) } else { q.outlier_code() };
            w[k] = r;
            fails |= !ok;
        }
        fails
    }
}

/// The encoder's row predictions run to a multiple of this many bytes of points (32 f64, 64
/// f32): whole iterations of their vectorised loops, four AVX-512 vectors (see
/// [`Lines::predict_row_then`]). The points past the row are dropped.
const PREDICT_PAD: usize = 256;

/// What one pass of the encoder needs besides the values: the pass, its level's stride,
/// interpolator and half bin width, where a row's codes go in the level order, if there.
struct EncodePass<'a, T> {
    pass: Pass,
    s: usize,
    kind: Kind,
    lv: LevelStep<T>,
    level_rows: Option<&'a LevelRows>,
    q: Params,
}

/// What the encoder writes: the reconstructions, the codes and the outliers' indices.
struct EncodeOut<'a, T> {
    w: &'a mut [T],
    codes: &'a mut [u16],
    outliers: Vec<usize>,
}

/// The encoder's buffers, reused across rows and passes: the stencil lines, a row's
/// predictions and its values, codes and reconstructions.
struct EncodeScratch<T> {
    lines: Lines<T>,
    p: Vec<T>,
    row: RowCodes<T>,
}

/// A function that encodes one pass: [`encode_pass`] or, in the tests, its portable form.
type EncodePassFn<T> = fn(&Geometry, &[T], &mut EncodeOut<T>, &EncodePass<T>, &mut EncodeScratch<T>);

/// Encode one pass row by row: predictions, codes and reconstructions, the points the fast
/// test did not accept through the full quantizer, the row's codes into place. The whole
/// pass is one AVX2 function where the CPU has it, as [`decode_pass`]: on the short rows of
/// a small field a dispatch and call per step of every row cost as much as its arithmetic.
fn encode_pass<T: Real>(
    g: &Geometry,
    x: &[T],
    out: &mut EncodeOut<T>,
    e: &EncodePass<T>,
    scratch: &mut EncodeScratch<T>,
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has these AVX-512 subsets.
        return unsafe { encode_pass_avx512(g, x, out, e, scratch) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { encode_pass_avx2(g, x, out, e, scratch) };
    }
    encode_pass_inline(g, x, out, e, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn encode_pass_avx2<T: Real>(
    g: &Geometry,
    x: &[T],
    out: &mut EncodeOut<T>,
    e: &EncodePass<T>,
    scratch: &mut EncodeScratch<T>,
) {
    encode_pass_inline(g, x, out, e, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
fn encode_pass_avx512<T: Real>(
    g: &Geometry,
    x: &[T],
    out: &mut EncodeOut<T>,
    e: &EncodePass<T>,
    scratch: &mut EncodeScratch<T>,
) {
    encode_pass_inline(g, x, out, e, scratch)
}

#[inline(always)]
fn encode_pass_inline<T: Real>(
    g: &Geometry,
    x: &[T],
    out: &mut EncodeOut<T>,
    e: &EncodePass<T>,
    scratch: &mut EncodeScratch<T>,
) {
    let EncodeScratch { lines, p, row } = scratch;
    let (s, q, lv) = (e.s, e.q, e.lv);
    let accept = T::accept(q.abs_bound);
    for r in row_iter(g, &e.pass, [0; 3], g.dims) {
        let r = &r;
        lines.predict_row_then(g, out.w, e.pass.axis, s, r, e.kind, p, PREDICT_PAD / size_of::<T>(), |p, _| p);
        row.load(x, r);
        let fails = row.quantize_padded(p, r, lv, accept, q);
        scatter_apart(&mut out.w[r.first..], &row.w[..r.count], r.step);
        if fails {
            requantize_row(x, p, r, lv, q, row, out);
        }
        let row_codes = &row.codes[..r.count];
        match e.level_rows {
            Some(lr) => lr.write(s, r, row_codes, out.codes),
            None => strided_scatter(&mut out.codes[r.first..], row_codes, r.step),
        }
    }
}

/// [`strided_scatter`] of a row's reconstructions in the encoder: out of line (for the
/// target's baseline features) where the points lie apart. Inlined into the AVX-512 pass,
/// LLVM made steps 2 and 4 scatter instructions, which took 1.5× the time of plain stores
/// on this development machine's AMD EPYC (rows of 24 and 49 f64, a microbenchmark).
#[inline(always)]
fn scatter_apart<T: Copy>(dst: &mut [T], src: &[T], step: usize) {
    #[inline(never)]
    fn apart<T: Copy>(dst: &mut [T], src: &[T], step: usize) {
        strided_scatter(dst, src, step)
    }
    if step == 1 {
        strided_scatter(dst, src, step)
    } else {
        apart(dst, src, step)
    }
}

/// The points of row `r` the fast test did not accept (their placeholder is the outlier
/// code): the full quantizer, or the outlier list. Rare, so kept out of the pass's loop.
#[inline(never)]
fn requantize_row<T: Real>(
    x: &[T],
    p: &[T],
    r: &Row,
    lv: LevelStep<T>,
    q: Params,
    row: &mut RowCodes<T>,
    out: &mut EncodeOut<T>,
) {
    for (k, idx) in r.indices().enumerate() {
        if row.codes[k] != q.outlier_code() {
            continue;
        }
        match quantize_point(x[idx], p[k], lv, q.radius, q.abs_bound) {
            Some((code, v)) => {
                row.codes[k] = q.code(code);
                out.w[idx] = v;
            }
            // The placeholder code stays: it is the outlier code.
            None => {
                out.outliers.push(idx);
                out.w[idx] = feed(x[idx]);
            }
        }
    }
}

/// What one pass of the decoder reads besides the values: the pass, its level's stride and
/// interpolator, the codes and where a row's codes lie among them.
struct DecodePass<'a> {
    pass: Pass,
    s: usize,
    kind: Kind,
    codes: &'a [u16],
    level_rows: Option<&'a LevelRows>,
    q: Params,
}

/// The decoder's buffers, reused across rows and passes: the stencil lines, a row's codes
/// (where they are not one run of the level order) and its values.
struct DecodeScratch<T> {
    lines: Lines<T>,
    codes: Vec<u16>,
    w: Vec<T>,
}

/// Decode one pass into `w` with its level's half bin width `step`, row by row: the row's
/// codes, then predictions and reconstructions in one loop, scattered into place. The whole
/// pass is one AVX2 function where the CPU has it: rows are short (24 points along x in the
/// ncep field), and a dispatch and call per step of every row cost more than its arithmetic.
fn decode_pass<T: Real>(g: &Geometry, w: &mut [T], d: &DecodePass, step: T, scratch: &mut DecodeScratch<T>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { decode_pass_avx2(g, w, d, step, scratch) };
    }
    decode_pass_inline(g, w, d, step, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn decode_pass_avx2<T: Real>(g: &Geometry, w: &mut [T], d: &DecodePass, step: T, scratch: &mut DecodeScratch<T>) {
    decode_pass_inline(g, w, d, step, scratch)
}

#[inline(always)]
fn decode_pass_inline<T: Real>(g: &Geometry, w: &mut [T], d: &DecodePass, step: T, scratch: &mut DecodeScratch<T>) {
    let DecodeScratch { lines, codes: row_codes, w: row_w } = scratch;
    let (s, q, marker) = (d.s, d.q, d.q.outlier_code());
    for r in row_iter(g, &d.pass, [0; 3], g.dims) {
        let r = &r;
        // A row of step 2s has its codes in one run of the level order: read in place.
        let codes = match d.level_rows {
            Some(lr) => match lr.run(s, r) {
                Some(at) => &d.codes[at..at + r.count],
                None => {
                    row_codes.resize(r.count, 0);
                    lr.read(s, r, d.codes, row_codes);
                    &row_codes[..]
                }
            },
            None => {
                row_codes.resize(r.count, 0);
                strided_copy(row_codes, &d.codes[r.first..], r.step);
                &row_codes[..]
            }
        };
        // An outlier's reconstruction is some value or other, replaced below.
        let reconstruct = |p: T, k: usize| p + T::reconstruct(q.level_code(codes[k]), step);
        lines.predict_row_then(g, w, d.pass.axis, s, r, d.kind, row_w, 1, reconstruct);
        // A fold, not `contains`: branch-free, it vectorises.
        if codes.iter().fold(false, |any, &c| any | (c == marker)) {
            // An outlier's value waits in place (see inverse): it feeds as itself.
            for (k, idx) in r.indices().enumerate().filter(|&(k, _)| codes[k] == marker) {
                row_w[k] = feed(w[idx]);
            }
        }
        strided_scatter(&mut w[r.first..], row_w, r.step);
    }
}

/// Encode `x` on grid `g`; `choices` (coarsest first) or, when `None`, the estimate's. The
/// codes leave in level order (order.rs) when `level_order`, else in element order; with
/// several threads and element order, slab by slab on all of them (slabs.rs).
pub fn forward<T: Real>(x: &[T], g: &Geometry, q: Params, choices: Option<Vec<Choice>>, level_order: bool) -> Encoded {
    let steps = level_steps::<T>(q.abs_bound, q.alpha, q.beta, g.levels());
    let choices = choices.unwrap_or_else(|| select(x, g, &steps));
    let mut side = Writer::default();
    g.for_each_anchor(|i| x[i].write_le(&mut side));
    let levels = Levels { q, steps: &steps, choices: &choices };
    let (codes, mut outliers) = match Slabs::for_threads(g, level_order) {
        Some(slabs) => slabs.encode(x, g, levels),
        None => {
            // The anchors' codes (first in level order) stay code(0).
            let mut codes = vec![q.code(0); x.len()];
            let level_rows = level_order.then(|| LevelRows::new(g));
            let outliers = levels.encode(x, g, &mut codes, level_rows.as_ref());
            (codes, outliers)
        }
    };
    outliers.sort_unstable();
    let mut next = 0;
    for &i in &outliers {
        side.varint((i - next) as u64);
        x[i].write_le(&mut side);
        next = i + 1;
    }
    Encoded { codes, side: side.bytes, num_outliers: outliers.len() as u64, choices }
}

/// What every level of a walk over a grid needs: the quantization, each level's half bin
/// width (finest first) and its choice (coarsest first).
#[derive(Clone, Copy)]
pub(super) struct Levels<'a, T> {
    pub q: Params,
    pub steps: &'a [LevelStep<T>],
    pub choices: &'a [Choice],
}

impl<T: Real> Levels<'_, T> {
    /// The encoder's levels over grid `g`: the codes of every predicted point into `codes`
    /// (in level order through `level_rows`, else element order); returns the outliers'
    /// indices in visiting order.
    pub fn encode(&self, x: &[T], g: &Geometry, codes: &mut [u16], level_rows: Option<&LevelRows>) -> Vec<usize> {
        self.encode_with(x, g, codes, level_rows, encode_pass)
    }

    /// [`Levels::encode`] with the passes run by `pass` (the tests hold the dispatched passes
    /// to the portable ones).
    fn encode_with(
        &self,
        x: &[T],
        g: &Geometry,
        codes: &mut [u16],
        level_rows: Option<&LevelRows>,
        pass_fn: EncodePassFn<T>,
    ) -> Vec<usize> {
        let mut w: Vec<T> = zeroed_vec(x.len());
        g.for_each_anchor(|i| w[i] = feed(x[i]));
        let mut scratch = EncodeScratch { lines: Lines::new(), p: Vec::new(), row: RowCodes::new() };
        let mut out = EncodeOut { w: &mut w, codes, outliers: Vec::new() };
        for (k, l) in (1..=g.levels()).rev().enumerate() {
            let (s, lv, choice) = (1 << (l - 1), self.steps[l - 1], self.choices[k]);
            for pass in passes(s, choice) {
                let e = EncodePass { pass, s, kind: choice.kind, lv, level_rows, q: self.q };
                pass_fn(g, x, &mut out, &e, &mut scratch);
            }
        }
        out.outliers
    }

    /// The decoder's levels over grid `g` into `w`, whose anchors and outlier values are in
    /// place; `codes` in level order through `level_rows`, else element order.
    pub fn decode(&self, codes: &[u16], g: &Geometry, w: &mut [T], level_rows: Option<&LevelRows>) {
        let mut scratch = DecodeScratch { lines: Lines::new(), codes: Vec::new(), w: Vec::new() };
        for (k, l) in (1..=g.levels()).rev().enumerate() {
            let (s, lv, choice) = (1 << (l - 1), self.steps[l - 1], self.choices[k]);
            for pass in passes(s, choice) {
                let d = DecodePass { pass, s, kind: choice.kind, codes, level_rows, q: self.q };
                decode_pass(g, w, &d, lv.step, &mut scratch);
            }
        }
    }
}

/// The side port parsed: anchor values (anchor-grid C order) and (index, value) outliers.
pub type Side<T> = (Vec<T>, Vec<(usize, T)>);

/// Parse the side port of grid `g`, every outlier index checked (increasing, inside the grid).
pub fn parse_side<T: Real>(side: &[u8], num_outliers: u64, g: &Geometry) -> Result<Side<T>> {
    let mut r = Reader::new(side, "Interpolation side channel");
    let n = g.len() as u64;
    let anchors = (0..g.num_anchors()).map(|_| T::read_le(&mut r)).collect::<Result<Vec<T>>>()?;
    // Each entry takes at least two bytes: never reserve more than the channel can hold.
    let mut list = Vec::with_capacity((num_outliers as usize).min(r.remaining() / 2));
    let mut next = 0u64;
    for k in 0..num_outliers {
        let index = r.varint()?.checked_add(next).filter(|&i| i < n);
        let index = index.ok_or_else(|| corrupt!("Interpolation outlier {k} lies outside {n} elements"))?;
        list.push((index as usize, T::read_le(&mut r)?));
        next = index + 1;
    }
    r.finish()?;
    Ok((anchors, list))
}

/// Decode: replay the levels with the recorded choices, the codes in level order (order.rs)
/// when `level_order`, else in element order. Total on any codes (a corrupted code decodes
/// to some value); the side channel is checked.
pub fn inverse<T: Real>(
    codes: &[u16],
    side: &[u8],
    num_outliers: u64,
    g: &Geometry,
    q: Params,
    choices: &[Choice],
    level_order: bool,
) -> Result<Vec<T>> {
    if codes.len() != g.len() || choices.len() != g.levels() {
        return Err(corrupt!(
            "Interpolation: {} codes, {} level choices for grid {:?}",
            codes.len(),
            choices.len(),
            g.dims
        ));
    }
    let (anchors, outliers) = parse_side::<T>(side, num_outliers, g)?;
    let steps = level_steps::<T>(q.abs_bound, q.alpha, q.beta, g.levels());
    let levels = Levels { q, steps: &steps, choices };
    let mut w = match Slabs::for_threads(g, level_order) {
        Some(slabs) => slabs.decode(codes, g, levels, &anchors, &outliers),
        None => {
            let mut w: Vec<T> = zeroed_vec(codes.len());
            wait_in_place(g, &mut w, &anchors, &outliers, 0);
            levels.decode(codes, g, &mut w, level_order.then(|| LevelRows::new(g)).as_ref());
            w
        }
    };
    // Non-finite values fed predictions as 0; put their bits back.
    let mut k = 0;
    g.for_each_anchor(|i| {
        w[i] = anchors[k];
        k += 1;
    });
    for (i, v) in outliers {
        w[i] = v;
    }
    Ok(w)
}

/// Before the decoder's levels, on grid `g` whose element 0 is element `first` of the whole
/// grid: the anchors fed in (`anchors` from this grid's first anchor on) and the outlier values
/// that lie in it, each waiting in place to be read only after its own point was visited.
pub(super) fn wait_in_place<T: Real>(g: &Geometry, w: &mut [T], anchors: &[T], outliers: &[(usize, T)], first: usize) {
    let (from, end) = (outliers.partition_point(|&(i, _)| i < first), first + w.len());
    for &(i, v) in outliers[from..].iter().take_while(|&&(i, _)| i < end) {
        w[i - first] = v;
    }
    let mut k = 0;
    g.for_each_anchor(|i| {
        w[i] = feed(anchors[k]);
        k += 1;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level's codes, reconstructions and outliers of the encoder as dispatched (AVX-512
    /// or AVX2 where the CPU has them) are the portable build's, in both code orders, on f32
    /// and f64 fields with outliers (spikes beyond a small radius, NaN, ±Inf) and every choice.
    #[test]
    fn dispatched_encode_passes_are_the_portable_ones() {
        fn check<T: Real>(x: &[T], g: &Geometry, q: Params) {
            let steps = level_steps::<T>(q.abs_bound, q.alpha, q.beta, g.levels());
            for choice in Choice::CANDIDATES {
                let choices = vec![choice; g.levels()];
                let levels = Levels { q, steps: &steps, choices: &choices };
                let level_rows = LevelRows::new(g);
                for lr in [None, Some(&level_rows)] {
                    let run = |pass_fn: EncodePassFn<T>| {
                        let mut codes = vec![q.code(0); x.len()];
                        let outliers = levels.encode_with(x, g, &mut codes, lr, pass_fn);
                        (codes, outliers)
                    };
                    let (fast, portable) = (run(encode_pass), run(encode_pass_inline));
                    assert!(!portable.1.is_empty(), "{:?} has outliers", g.dims);
                    assert_eq!(fast, portable, "{:?} A={} {choice:?}", g.dims, g.anchor);
                }
            }
        }
        for (dims, anchor) in [([9, 17, 33], 8), ([2, 70, 131], 16), ([1, 1, 300], 4), ([5, 29, 49], 64)] {
            let g = Geometry { dims, anchor };
            let x: Vec<f64> = (0..g.len())
                .map(|i| match i % 97 {
                    5 => 1e6,
                    41 => f64::NAN,
                    60 => f64::INFINITY,
                    _ => ((i * 7919 % 1013) as f64 * 0.37).sin() * 50.0,
                })
                .collect();
            let q = Params { radius: 8, zigzag: false, abs_bound: 0.05, alpha: 1.25, beta: 2.0 };
            check(&x, &g, q);
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            check(&x32, &g, Params { zigzag: true, ..q });
        }
    }
}
