//! Row-wise prediction for the CPU drivers. The points of a pass that share z and y form a
//! row. A row's stencil inputs are gathered into contiguous lines (a = i−3s, b = i−s,
//! c = i+s, d = i+3s along the pass axis) with the stencil form saying which of them exist:
//! one form for a whole row along z or y; along x the four-point form except at the anchor
//! segment ends, which are listed and recomputed in their own form. The prediction is then a
//! loop over plain slices, without branches, so LLVM vectorises it (AVX2 where the CPU has
//! it). Every value is the one [`stencil`] (and so `walk::predict`) gives, operation for
//! operation; a form computed from a neighbour that does not exist is never the one selected. Only the visiting order differs
//! from `walk::walk`, which changes nothing (points of one pass never read each other).

use super::cpu::{cost_field, point_cost};
use super::walk::{neighbours, Geometry, Kind, Pass, Real};

/// The points of one row of a pass: element indices `first + k·step`, k < count; `zy` its z
/// and y coordinates, `x0` the x coordinate of the first point.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub first: usize,
    pub step: usize,
    pub count: usize,
    pub zy: [usize; 2],
    pub x0: usize,
}

impl Row {
    /// The element indices of the row's points, in order.
    #[inline]
    pub fn indices(&self) -> impl Iterator<Item = usize> {
        (self.first..).step_by(self.step).take(self.count)
    }
}

/// Visit the rows of `pass` inside the box [lo, hi) (lo a multiple of A per axis), z, y
/// ascending: the points of `walk::walk`, row by row.
#[inline]
pub fn rows(g: &Geometry, pass: &Pass, lo: [usize; 3], hi: [usize; 3], mut f: impl FnMut(&Row)) {
    for row in row_iter(g, pass, lo, hi) {
        f(&row);
    }
}

/// The rows [`rows`] visits, as an iterator: a loop over it keeps its body in the caller's
/// function (and its target features), where a closure is a function of its own.
#[inline(always)]
pub fn row_iter(g: &Geometry, pass: &Pass, lo: [usize; 3], hi: [usize; 3]) -> RowIter {
    let x0 = lo[2] + pass.start[2];
    let y0 = lo[1] + pass.start[1];
    // No points along x: no rows (z starts at the end).
    let z = if x0 < hi[2] && y0 < hi[1] { lo[0] + pass.start[0] } else { hi[0] };
    let count = if x0 < hi[2] { (hi[2] - x0).div_ceil(pass.step[2]) } else { 0 };
    RowIter { strides: g.strides(), step: pass.step, z, y: y0, y0, hi, x0, count }
}

/// See [`row_iter`]: z, y ascending, the nested loops of [`rows`] as a state.
pub struct RowIter {
    strides: [usize; 3],
    step: [usize; 3],
    z: usize,
    y: usize,
    y0: usize,
    hi: [usize; 3],
    x0: usize,
    count: usize,
}

impl Iterator for RowIter {
    type Item = Row;

    #[inline(always)]
    fn next(&mut self) -> Option<Row> {
        if self.z >= self.hi[0] {
            return None;
        }
        let (z, y, st) = (self.z, self.y, self.strides);
        self.y += self.step[1];
        if self.y >= self.hi[1] {
            self.y = self.y0;
            self.z += self.step[0];
        }
        Some(Row {
            first: z * st[0] + y * st[1] + self.x0,
            step: self.step[2],
            count: self.count,
            zy: [z, y],
            x0: self.x0,
        })
    }
}

/// Which stencil form a point takes (see [`stencil`]): only b; (b + c)/2; the one-sided cubic
/// without a; the one without d; the kind's four-point form.
const ONLY_B: u32 = 0;
const LINEAR: u32 = 1;
const NO_A: u32 = 2;
const NO_D: u32 = 3;
const FOUR: u32 = 4;

/// The form for neighbour flags (a, c, d), as [`stencil`] picks it for a non-linear kind.
#[inline]
pub fn form(has_a: bool, has_c: bool, has_d: bool) -> u32 {
    match (has_c, has_a, has_d) {
        (false, _, _) => ONLY_B,
        (true, false, false) => LINEAR,
        (true, false, true) => NO_A,
        (true, true, false) => NO_D,
        (true, true, true) => FOUR,
    }
}

/// The prediction at a point from its line neighbours (docs/FORMAT.md 6.17, exact order):
/// every form is computed, one is selected.
#[inline(always)]
pub fn stencil<T: Real>(kind: Kind, case: u32, a: T, b: T, c: T, d: T) -> T {
    let linear = (b + c) * T::lit(0.5);
    if kind == Kind::Linear {
        return if case == ONLY_B { b } else { linear };
    }
    let four = match kind {
        Kind::Cubic => ((b + c) * T::lit(9.0) - (a + d)) * T::lit(0.0625),
        _ => ((b + c) * T::lit(23.0) - (a + d) * T::lit(3.0)).div(T::lit(40.0)),
    };
    let no_a = (b * T::lit(3.0) + c * T::lit(6.0) - d) * T::lit(0.125);
    let no_d = (b * T::lit(6.0) + c * T::lit(3.0) - a) * T::lit(0.125);
    let p = if case == FOUR { four } else { no_d };
    let p = if case == NO_A { no_a } else { p };
    let p = if case == LINEAR { linear } else { p };
    if case == ONLY_B {
        b
    } else {
        p
    }
}

/// `$body` with `$s` bound to [`stencil`] for `$kind` and `$form` as a closure in which both
/// are constants: one monomorphic loop per (kind, form), each with its own constants (a
/// runtime kind or form inside a row loop would not vectorise).
macro_rules! with_stencil {
    ($kind:expr, $form:expr, |$s:ident| $body:expr) => {
        match $kind {
            Kind::Linear => with_stencil!(@form Kind::Linear, $form, |$s| $body),
            Kind::Cubic => with_stencil!(@form Kind::Cubic, $form, |$s| $body),
            Kind::Natural => with_stencil!(@form Kind::Natural, $form, |$s| $body),
        }
    };
    (@form $kind:expr, $form:expr, |$s:ident| $body:expr) => {
        match $form {
            ONLY_B => with_stencil!(@let $kind, ONLY_B, |$s| $body),
            LINEAR => with_stencil!(@let $kind, LINEAR, |$s| $body),
            NO_A => with_stencil!(@let $kind, NO_A, |$s| $body),
            NO_D => with_stencil!(@let $kind, NO_D, |$s| $body),
            _ => with_stencil!(@let $kind, FOUR, |$s| $body),
        }
    };
    (@let $kind:expr, $form:expr, |$s:ident| $body:expr) => {{
        let $s = |a, b, c, d| stencil($kind, $form, a, b, c, d);
        $body
    }};
}

/// Where the lines a, b, c, d of a point at odd index r along an axis lie among the even
/// indices (r − 1, r, r + 1, r + 2), as offsets from r, under form `f`; a line the form does
/// not read points at b (r itself), which always exists.
pub fn line_shifts(f: u32) -> [isize; 4] {
    let uses = |forms: &[u32]| forms.contains(&f);
    [
        if uses(&[NO_D, FOUR]) { -1 } else { 0 },
        0,
        if f == ONLY_B { 0 } else { 1 },
        if uses(&[NO_A, FOUR]) { 2 } else { 0 },
    ]
}

/// Whether the CPU has x86-64-v4's AVX-512 subsets (F, BW, DQ, VL). The encoder's and the
/// choice estimate's loops are compiled for them too: vectors twice as wide as AVX2's, the
/// same IEEE operations lane by lane (no contraction to FMA in Rust), so the same codes and
/// sums; on the small ncep field 8–17 % more compress speed (interleaved runs, one core). The decoder stays on AVX2,
/// where its AVX-512 form measured no faster.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

/// The summed [`point_cost`] per kind of [`KINDS`] of the points `v` when every point takes
/// form `f` from the lines a, b, c, d: [`Lines::costs`] for lines that are already contiguous
/// slices (AVX-512 or AVX2 where the CPU has it; the same sums either way).
pub fn slice_costs<T: Real>(lines: [&[T]; 4], v: &[T], recip: T, f: u32) -> [u64; 3] {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has these AVX-512 subsets.
        return unsafe { slice_costs_avx512(lines, v, recip, f) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { slice_costs_avx2(lines, v, recip, f) };
    }
    form_costs(lines, v, recip, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn slice_costs_avx2<T: Real>(lines: [&[T]; 4], v: &[T], recip: T, f: u32) -> [u64; 3] {
    form_costs(lines, v, recip, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
fn slice_costs_avx512<T: Real>(lines: [&[T]; 4], v: &[T], recip: T, f: u32) -> [u64; 3] {
    form_costs(lines, v, recip, f)
}

/// A row's stencil inputs: per point its form and the lines a, b, c, d (a neighbour that does
/// not exist holds some finite value or other; its form never reads it). Reused across rows.
pub struct Lines<T> {
    /// The form of every point when the row has one (a pass along z or y), else `edges`.
    uniform: Option<u32>,
    /// Along x: the points (index, form) whose form is not the four-point one, the ends of
    /// the anchor segments; every other point takes the four-point form.
    edges: Vec<(usize, u32)>,
    /// What `edges` was computed for (level stride, first x, points, extent, anchor): rows of
    /// a pass along x share it.
    case_of: (usize, usize, usize, usize, usize),
    /// Along x the four lines are one lattice shifted (b of point k + 1 is c of point k):
    /// `even[k..]` is a, `even[k + 1..]` b and so on; other axes fill a, b, c, d.
    even: Vec<T>,
    lines: [Vec<T>; 4],
    along_x: bool,
    len: usize,
}

impl<T: Real> Lines<T> {
    pub fn new() -> Self {
        Lines {
            uniform: None,
            edges: Vec::new(),
            case_of: (0, 0, 0, 0, 0),
            even: Vec::new(),
            lines: Default::default(),
            along_x: false,
            len: 0,
        }
    }

    /// Gather row `row` of a pass along `axis` at level stride `s` from `w`.
    #[inline(always)]
    pub fn gather(&mut self, g: &Geometry, w: &[T], axis: usize, s: usize, row: &Row) {
        self.gather_padded(g, w, axis, s, row, 1)
    }

    /// [`Lines::gather`], along x with lines of the row's points rounded up to a multiple of
    /// `pad` (zeros past the lattice's end): see [`Lines::predict_row_then`].
    #[inline(always)]
    fn gather_padded(&mut self, g: &Geometry, w: &[T], axis: usize, s: usize, row: &Row, pad: usize) {
        let n = row.count;
        self.along_x = axis == 2;
        if axis < 2 {
            self.len = n;
            let (has_a, has_c, has_d) = neighbours(row.zy[axis], s, g.dims[axis], g.anchor);
            self.uniform = Some(form(has_a, has_c, has_d));
            let o = s * g.strides()[axis];
            let wanted = [has_a, true, has_c, has_d];
            for ((line, want), at) in self.lines.iter_mut().zip(wanted).zip([-3, -1, 1, 3]) {
                line.resize(n, T::ZERO);
                if want {
                    let from = row.first.wrapping_add_signed(at * o as isize);
                    strided_copy(line, &w[from..], row.step);
                }
            }
            return;
        }
        // Points x0 + 2s·k; the lattice x0 − 3s + 2s·j (j < n + 3) holds every neighbour.
        let (nx, a) = (g.dims[2], g.anchor);
        let row_base = row.first - row.x0;
        self.uniform = None;
        if self.case_of != (s, row.x0, n, nx, a) {
            self.case_of = (s, row.x0, n, nx, a);
            self.edges.clear();
            self.edges.extend((0..n).filter_map(|k| {
                let x = row.x0 + 2 * s * k;
                let base = x & !(a - 1);
                let end = (base + a).min(nx - 1);
                let f = form(x - base >= 3 * s, x + s <= end, x + 3 * s <= end);
                (f != FOUR).then_some((k, f))
            }));
        }
        // The lattice's in-array part: j from j0 (x ≥ 0) to j1 (x < nx).
        // (x0 = lo + s, so j = 1 is x = lo − 2s + 2s ≥ 0.)
        let j0 = usize::from(row.x0 < 3 * s);
        // ⌈·/2s⌉ as a shift (s is a power of two), not a division per row.
        let j1 = ((nx + 5 * s - 1 - row.x0) >> (s.trailing_zeros() + 1)).min(n + 3);
        // Only the lattice points outside the array are zeroed (clearing the whole line
        // first was a memset per row).
        self.len = n.next_multiple_of(pad);
        self.even.resize(self.len + 3, T::ZERO);
        let from = row_base + row.x0 + 2 * s * j0 - 3 * s;
        strided_copy(&mut self.even[j0..j1], &w[from..], 2 * s);
        self.even[..j0].fill(T::ZERO);
        self.even[j1..].fill(T::ZERO);
    }

    /// The predictions of row `row` of a pass along `axis` at level stride `s` under `kind`
    /// into `out`. Along z and y with a row step of 1 or 2 (the finest levels, most of the
    /// points) the stencil's lines are read in place: they are rows of `w` at ±s and ±3s
    /// along the axis, strided as the row is. Otherwise gathered first. The same values
    /// either way (the same [`stencil`] on the same operands). AVX2 where the CPU has it (the
    /// encoder and decoder inline [`Lines::predict_row_then`] into their AVX2 passes; this
    /// dispatched form holds the AVX2 code to the portable one in the tests).
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub fn predict_row(
        &mut self,
        g: &Geometry,
        w: &[T],
        axis: usize,
        s: usize,
        row: &Row,
        kind: Kind,
        out: &mut Vec<T>,
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.predict_row_avx2(g, w, axis, s, row, kind, out) };
        }
        self.predict_row_inline(g, w, axis, s, row, kind, out)
    }

    #[cfg(all(test, target_arch = "x86_64"))]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    fn predict_row_avx2(
        &mut self,
        g: &Geometry,
        w: &[T],
        axis: usize,
        s: usize,
        row: &Row,
        kind: Kind,
        out: &mut Vec<T>,
    ) {
        self.predict_row_inline(g, w, axis, s, row, kind, out)
    }

    /// [`Lines::predict_row`] for the target's baseline features (or the caller's, inlined).
    #[cfg(test)]
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn predict_row_inline(
        &mut self,
        g: &Geometry,
        w: &[T],
        axis: usize,
        s: usize,
        row: &Row,
        kind: Kind,
        out: &mut Vec<T>,
    ) {
        self.predict_row_then(g, w, axis, s, row, kind, out, 1, |p, _| p)
    }

    /// `then(prediction k, k)` for each point k of the row into `out`: the decoder adds the
    /// point's reconstructed error in the same loop as the prediction. Inlined into the
    /// caller (the decoder runs whole passes in one AVX2 function).
    ///
    /// With `pad` > 1 `out` may run on past the row's points to a multiple of `pad`, with
    /// predictions from whatever lies there (`then` must take any k below that; the encoder
    /// drops them). LLVM vectorises these loops four vectors at a time with a scalar
    /// remainder: on rows shorter than that (24 points along x in ncep_hgt500, 49 at most;
    /// 32 f64 with AVX-512) every point went through the remainder. Along x the lattice is
    /// padded with zeros; in place, the rows of `w` are read on where `w` goes on.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn predict_row_then(
        &mut self,
        g: &Geometry,
        w: &[T],
        axis: usize,
        s: usize,
        row: &Row,
        kind: Kind,
        out: &mut Vec<T>,
        pad: usize,
        then: impl Fn(T, usize) -> T + Copy,
    ) {
        if axis == 2 || !matches!(row.step, 1 | 2) {
            self.gather_padded(g, w, axis, s, row, pad);
            return self.predict_then(kind, out, then);
        }
        let (has_a, has_c, has_d) = neighbours(row.zy[axis], s, g.dims[axis], g.anchor);
        let o = (s * g.strides()[axis]) as isize;
        let b = &w[row.first - o as usize..];
        // A line the form does not read is given as b.
        let line = |has: bool, at: isize| if has { &w[row.first.wrapping_add_signed(at * o)..] } else { b };
        let lines = [line(has_a, -3), b, line(has_c, 1), line(has_d, 3)];
        let padded = row.count.next_multiple_of(pad);
        // Padded only where every line holds the padded row (not at the end of `w`).
        let within = lines.iter().all(|l| l.len() > (padded - 1) * row.step);
        out.resize(if within { padded } else { row.count }, T::ZERO);
        predict_in_place_inline(lines, row.step, kind, form(has_a, has_c, has_d), out, then);
    }

    /// The lines a, b, c, d, each of the row's length.
    #[inline(always)]
    pub fn abcd(&self) -> [&[T]; 4] {
        let n = self.len;
        if self.along_x {
            std::array::from_fn(|k| &self.even[k..k + n])
        } else {
            std::array::from_fn(|k| &self.lines[k][..n])
        }
    }

    /// The predictions of the gathered row under `kind` into `out` (the portable form, which
    /// the tests hold the dispatched row predictions to).
    #[cfg(test)]
    fn predict_inline(&self, kind: Kind, out: &mut Vec<T>) {
        self.predict_then(kind, out, |p, _| p)
    }

    /// `then(prediction k, k)` of the gathered row's points under `kind` into `out`.
    #[inline(always)]
    fn predict_then(&self, kind: Kind, out: &mut Vec<T>, then: impl Fn(T, usize) -> T + Copy) {
        // Every element is written below: no clearing.
        out.resize(self.len, T::ZERO);
        let lines = self.abcd();
        // One loop per kind and form, each with its constants.
        match self.uniform {
            // Along x the form changes only at segment ends: the four-point form for all (a
            // third of the work of computing every form and selecting), then the ends
            // recomputed in their own form.
            None => with_stencil!(kind, FOUR, |four| {
                predict_one(lines, out, four, then);
                let [a, b, c, d] = lines;
                for &(k, f) in &self.edges {
                    out[k] = then(stencil(kind, f, a[k], b[k], c[k], d[k]), k);
                }
            }),
            Some(f) => with_stencil!(kind, f, |form| predict_one(lines, out, form, then)),
        }
    }

    /// Summed [`point_cost`] of the gathered row's points `v` under each of [`KINDS`] (the
    /// choice estimate): one loop over the row for all kinds, without storing predictions;
    /// it vectorises, on AVX2 twice as wide as on the baseline target, on AVX-512 four times.
    /// Every form computes the same IEEE operations on the same operands (no contraction to
    /// FMA in Rust), so the same sums.
    pub fn costs(&self, v: &[T], recip: T) -> [u64; 3] {
        #[cfg(target_arch = "x86_64")]
        if has_avx512() {
            // SAFETY: the CPU has these AVX-512 subsets.
            return unsafe { self.costs_avx512(v, recip) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.costs_avx2(v, recip) };
        }
        self.costs_portable(v, recip)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    fn costs_avx512(&self, v: &[T], recip: T) -> [u64; 3] {
        self.costs_portable(v, recip)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn costs_avx2(&self, v: &[T], recip: T) -> [u64; 3] {
        self.costs_portable(v, recip)
    }

    /// [`Lines::costs`] for the target's baseline features (or the caller's, inlined).
    #[inline(always)]
    fn costs_portable(&self, v: &[T], recip: T) -> [u64; 3] {
        let lines = self.abcd();
        let v = &v[..self.len];
        let Some(f) = self.uniform else {
            // Along x: the four-point form for all, then each segment end's cost replaced by
            // its own form's (integer sums: exact in any order).
            let mut sums = form_costs(lines, v, recip, FOUR);
            let [a, b, c, d] = lines;
            for &(k, f) in &self.edges {
                edge_costs(&mut sums, [a[k], b[k], c[k], d[k]], v[k], recip, f);
            }
            return sums;
        };
        form_costs(lines, v, recip, f)
    }
}

/// Replace in `sums` (per kind of [`KINDS`]) the four-point cost of the point `v` by its cost
/// in its own form `f` (not the four-point one), from its line neighbours `abcd`. The kinds
/// share what they can, as [`form_costs`]: linear predicts (b + c)/2 in every form but
/// [`ONLY_B`], so its cost changes only there; the cubic kinds differ only in the four-point
/// form, so the own form is predicted once (the segment ends are a third of the x rows' costs
/// on short rows, each computed scalar).
#[inline(always)]
fn edge_costs<T: Real>(sums: &mut [u64; 3], [a, b, c, d]: [T; 4], v: T, recip: T, f: u32) {
    let cost = |p: T| u64::from(point_cost(v, p, recip));
    if f == ONLY_B {
        sums[0] = sums[0] + cost(b) - cost(stencil(Kind::Linear, FOUR, a, b, c, d));
    }
    let own = cost(stencil(Kind::Cubic, f, a, b, c, d));
    sums[1] = sums[1] + own - cost(stencil(Kind::Cubic, FOUR, a, b, c, d));
    sums[2] = sums[2] + own - cost(stencil(Kind::Natural, FOUR, a, b, c, d));
}

/// The summed [`point_cost`] per kind of [`KINDS`] when every point takes form `f`. Only the
/// four-point form differs between the cubic kinds, and only it and the one-sided ones from
/// linear: the other forms predict once for several kinds.
#[inline(always)]
fn form_costs<T: Real>(lines: [&[T]; 4], v: &[T], recip: T, f: u32) -> [u64; 3] {
    let one = |kind| move |a, b, c, d| [stencil(kind, f, a, b, c, d)];
    match f {
        ONLY_B | LINEAR => [cost_sums(lines, v, recip, one(Kind::Linear))[0]; 3],
        NO_A | NO_D => {
            let [linear] = cost_sums(lines, v, recip, one(Kind::Linear));
            let [cubic] = cost_sums(lines, v, recip, one(Kind::Cubic));
            [linear, cubic, cubic]
        }
        _ => cost_sums(lines, v, recip, |a, b, c, d| KINDS.map(|kind| stencil(kind, FOUR, a, b, c, d))),
    }
}

/// The summed [`point_cost`] of the points `v` against each of the `K` predictions `p` makes
/// from a point's line neighbours.
#[inline(always)]
fn cost_sums<T: Real, const K: usize>(
    [a, b, c, d]: [&[T]; 4],
    v: &[T],
    recip: T,
    p: impl Fn(T, T, T, T) -> [T; K],
) -> [u64; K] {
    let mut total = [0u64; K];
    // Sums of exponent fields in the element's width (a u32 sum of f32 fields, at most 2^8
    // each, holds 2^20 points), each point's field of 1/2 taken off per run.
    for lo in (0..v.len()).step_by(1 << 20) {
        let hi = (lo + (1 << 20)).min(v.len());
        let (a, b, c, d, v) = (&a[lo..hi], &b[lo..hi], &c[lo..hi], &d[lo..hi], &v[lo..hi]);
        let mut sums = [T::Field::default(); K];
        for k in 0..v.len() {
            let p = p(a[k], b[k], c[k], d[k]);
            for j in 0..K {
                sums[j] = sums[j] + cost_field(v[k], p[j], recip);
            }
        }
        for j in 0..K {
            total[j] += sums[j].into() - u64::from(T::HALF_FIELD) * v.len() as u64;
        }
    }
    total
}

/// The kinds in the order of [`Lines::costs`].
pub const KINDS: [Kind; 3] = [Kind::Linear, Kind::Cubic, Kind::Natural];

/// [`Lines::predict_row_then`]'s loops: `out[k]` from the lines' elements k·step (step 1
/// or 2), one loop per kind and form.
#[inline(always)]
fn predict_in_place_inline<T: Real>(
    lines: [&[T]; 4],
    step: usize,
    kind: Kind,
    f: u32,
    out: &mut [T],
    then: impl Fn(T, usize) -> T + Copy,
) {
    if step == 1 {
        with_stencil!(kind, f, |form| predict_one(lines, out, form, then))
    } else {
        with_stencil!(kind, f, |form| predict_every_2nd(lines, out, form, then))
    }
}

/// `out[k] = then(f(a[2k], b[2k], c[2k], d[2k]), k)`: whole pairs (which vectorise as
/// shuffles, as [`grouped_copy`]), then the last point, whose pair the lines may end inside.
#[inline(always)]
fn predict_every_2nd<T: Real>(
    lines: [&[T]; 4],
    out: &mut [T],
    f: impl Fn(T, T, T, T) -> T,
    then: impl Fn(T, usize) -> T,
) {
    let Some(last) = out.len().checked_sub(1) else { return };
    let [a, b, c, d] = lines.map(|l| l[..last * 2].as_chunks::<2>().0);
    for k in 0..last {
        out[k] = then(f(a[k][0], b[k][0], c[k][0], d[k][0]), k);
    }
    let [a, b, c, d] = lines.map(|l| l[last * 2]);
    out[last] = then(f(a, b, c, d), last);
}

/// `out[k] = then(f(a[k], b[k], c[k], d[k]), k)`.
#[inline(always)]
fn predict_one<T: Real>(
    [a, b, c, d]: [&[T]; 4],
    out: &mut [T],
    f: impl Fn(T, T, T, T) -> T,
    then: impl Fn(T, usize) -> T,
) {
    let n = out.len();
    let (a, b, c, d) = (&a[..n], &b[..n], &c[..n], &d[..n]);
    for k in 0..n {
        out[k] = then(f(a[k], b[k], c[k], d[k]), k);
    }
}

/// `dst[k] = src[k·step]` for every k of `dst`.
#[inline(always)]
pub fn strided_copy<T: Copy>(dst: &mut [T], src: &[T], step: usize) {
    match step {
        1 => dst.copy_from_slice(&src[..dst.len()]),
        // The finest levels (most of the points): whole groups vectorise as shuffles.
        2 => grouped_copy::<T, 2>(dst, src),
        4 => grouped_copy::<T, 4>(dst, src),
        _ => {
            for (d, s) in dst.iter_mut().zip(src.iter().step_by(step)) {
                *d = *s;
            }
        }
    }
}

/// `dst[k·step] = src[k]` for every k of `src` (the inverse of [`strided_copy`]).
#[inline(always)]
pub fn strided_scatter<T: Copy>(dst: &mut [T], src: &[T], step: usize) {
    match step {
        1 => dst[..src.len()].copy_from_slice(src),
        2 => grouped_scatter::<T, 2>(dst, src),
        4 => grouped_scatter::<T, 4>(dst, src),
        _ => {
            for (d, s) in dst.iter_mut().step_by(step).zip(src) {
                *d = *s;
            }
        }
    }
}

/// [`strided_scatter`] with a constant step `S`, as [`grouped_copy`].
#[inline(always)]
fn grouped_scatter<T: Copy, const S: usize>(dst: &mut [T], src: &[T]) {
    let Some(last) = src.len().checked_sub(1) else { return };
    let (groups, _) = dst[..last * S].as_chunks_mut::<S>();
    for (g, s) in groups.iter_mut().zip(&src[..last]) {
        g[0] = *s;
    }
    dst[last * S] = src[last];
}

/// [`strided_copy`] with a constant step `S`: the first of every whole group of S, then the
/// last point, whose group `src` may end inside.
#[inline(always)]
fn grouped_copy<T: Copy, const S: usize>(dst: &mut [T], src: &[T]) {
    let Some(last) = dst.len().checked_sub(1) else { return };
    let (groups, _) = src[..last * S].as_chunks::<S>();
    for (d, g) in dst[..last].iter_mut().zip(groups) {
        *d = g[0];
    }
    dst[last] = src[last * S];
}

#[cfg(test)]
mod tests {
    use super::super::cpu::sampled_blocks;
    use super::super::walk::{passes, predict, walk, Choice};
    use super::*;

    /// Rows visit walk's points in walk's order, and every row prediction and cost is the
    /// point-wise reference's, bit for bit, on every level, pass, kind and box.
    #[test]
    fn rows_are_the_reference_walk_and_stencil() {
        for dims in [[1, 1, 37], [3, 5, 7], [9, 17, 33], [1, 40, 1], [5, 1, 6], [2, 70, 131], [1, 1, 300]] {
            for anchor in [2, 4, 8, 16, 64] {
                let g = Geometry { dims, anchor };
                let w: Vec<f32> = (0..g.len()).map(|i| ((i * 7919 % 1013) as f32 * 0.37).sin() * 50.0).collect();
                let boxes: Vec<_> = std::iter::once(([0; 3], dims)).chain(sampled_blocks(&g)).collect();
                let (mut lines, mut p, mut v) = (Lines::new(), Vec::new(), Vec::new());
                for l in 1..=g.levels() {
                    let s = 1 << (l - 1);
                    for choice in Choice::CANDIDATES {
                        for pass in passes(s, choice) {
                            for &(lo, hi) in &boxes {
                                let mut reference = Vec::new();
                                walk(&g, &pass, lo, hi, |idx, i| {
                                    reference.push((idx, predict(&g, &w, choice.kind, pass.axis, s, idx, i).to_bits()))
                                });
                                let (mut got, mut costs) = (Vec::new(), [0u64; 3]);
                                rows(&g, &pass, lo, hi, |row| {
                                    // Read in place (z and y rows of step 1 and 2) or gathered.
                                    let mut in_place = Vec::new();
                                    // Dispatched (AVX2 where the CPU has it) and portable.
                                    lines.predict_row(&g, &w, pass.axis, s, row, choice.kind, &mut in_place);
                                    let mut portable = Vec::new();
                                    lines.predict_row_inline(&g, &w, pass.axis, s, row, choice.kind, &mut portable);
                                    lines.gather(&g, &w, pass.axis, s, row);
                                    lines.predict_inline(choice.kind, &mut p);
                                    for q in [&in_place, &portable] {
                                        assert_eq!(p.len(), q.len());
                                        assert!(p.iter().zip(q).all(|(a, b)| a.to_bits() == b.to_bits()));
                                    }
                                    got.extend(row.indices().zip(p.iter().map(|p| p.to_bits())));
                                    v.resize(row.count, 0.0);
                                    strided_copy(&mut v, &w[row.first..], row.step);
                                    let c = lines.costs(&v, 0.25);
                                    assert_eq!(c, lines.costs_portable(&v, 0.25));
                                    costs.iter_mut().zip(c).for_each(|(a, b)| *a += b);
                                });
                                assert_eq!(got, reference, "{dims:?} A={anchor} s={s} {choice:?} {lo:?}");
                                for (k, kind) in KINDS.into_iter().enumerate() {
                                    let mut want = 0;
                                    walk(&g, &pass, lo, hi, |idx, i| {
                                        want += u64::from(point_cost(
                                            w[idx],
                                            predict(&g, &w, kind, pass.axis, s, idx, i),
                                            0.25,
                                        ))
                                    });
                                    assert_eq!(costs[k], want, "{dims:?} A={anchor} s={s} {kind:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Every step, every length, destinations that end inside the last point's group or past
    /// it; the other elements stay as they were.
    #[test]
    fn strided_scatter_puts_every_value_step_apart() {
        for step in 1..=6 {
            for n in 0..=16 {
                for extra in 0..step {
                    let src: Vec<u32> = (0..n as u32).collect();
                    let mut dst = vec![u32::MAX; (n.max(1) - 1) * step + 1 + extra];
                    strided_scatter(&mut dst, &src, step);
                    let expected =
                        |i: usize| if i.is_multiple_of(step) && i / step < n { (i / step) as u32 } else { u32::MAX };
                    assert!(dst.iter().enumerate().all(|(i, &d)| d == expected(i)), "step {step} n {n}");
                }
            }
        }
    }

    /// Every step, every length, sources that end inside the last point's group or past it.
    #[test]
    fn strided_copy_takes_every_step_th_value() {
        let src: Vec<u32> = (0..100).collect();
        for step in 1..=6 {
            for n in 0..=16 {
                for extra in 0..step {
                    let src = &src[..(n.max(1) - 1) * step + 1 + extra];
                    let mut dst = vec![u32::MAX; n];
                    strided_copy(&mut dst, src, step);
                    assert!(dst.iter().enumerate().all(|(k, &d)| d == (k * step) as u32), "step {step} n {n}");
                }
            }
        }
    }
}
