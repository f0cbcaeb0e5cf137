//! Row-wise prediction for the CPU drivers. The points of a pass that share z and y form a
//! row; along it the stencil's neighbour flags are constant (pass axis z or y) or repeat with
//! the anchor segment (pass axis x), so a row splits into runs of one flag set, and each run is
//! a loop without per-point branches or divisions. Every value is the one
//! [`super::walk::predict`] gives, operation for operation (the same [`stencil`]); only the
//! visiting order differs, which changes nothing (points of one pass never read each other).

use super::cpu::point_cost;
use super::walk::{neighbours, stencil, Geometry, Kind, Pass, Real};

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
/// ascending: the points of [`super::walk::walk`], row by row.
#[inline]
pub fn rows(g: &Geometry, pass: &Pass, lo: [usize; 3], hi: [usize; 3], mut f: impl FnMut(&Row)) {
    let st = g.strides();
    let x0 = lo[2] + pass.start[2];
    if x0 >= hi[2] {
        return;
    }
    let count = (hi[2] - x0).div_ceil(pass.step[2]);
    let mut z = lo[0] + pass.start[0];
    while z < hi[0] {
        let mut y = lo[1] + pass.start[1];
        while y < hi[1] {
            f(&Row { first: z * st[0] + y * st[1] + x0, step: pass.step[2], count, zy: [z, y], x0 });
            y += pass.step[1];
        }
        z += pass.step[0];
    }
}

/// `count` consecutive points of a row, `first + k·step`, whose neighbours along the pass
/// axis (offset `o`) exist as `has` says (a = −3o, c = +o, d = +3o).
#[derive(Clone, Copy, Debug)]
struct Run {
    first: usize,
    step: usize,
    count: usize,
    o: usize,
    has: (bool, bool, bool),
}

/// The runs of a row in order (level stride `s`, interpolated along `axis`).
#[inline]
fn runs(g: &Geometry, axis: usize, s: usize, row: &Row, mut f: impl FnMut(Run)) {
    if axis < 2 {
        let has = neighbours(row.zy[axis], s, g.dims[axis], g.anchor);
        let o = s * g.strides()[axis];
        return f(Run { first: row.first, step: row.step, count: row.count, o, has });
    }
    // Along x the row's points are x0 + 2s·k; an anchor segment [base, base + A] holds
    // m = A / 2s of them. In a segment whose right anchor lies in the array only the first
    // point lacks a and only the last lacks d; other segments (the array's last, cut short, or
    // of one point) go point by point.
    let (n, a, m) = (g.dims[2], g.anchor, g.anchor / (2 * s));
    let row_base = row.first - row.x0;
    let end = row.x0 + row.step * row.count;
    let run = |x: usize, count: usize, has| Run { first: row_base + x, step: 2 * s, count, o: s, has };
    let mut base = row.x0 - s;
    while base + s < end {
        if base + a < n && m > 1 {
            f(run(base + s, 1, (false, true, true)));
            if m > 2 {
                f(run(base + 3 * s, m - 2, (true, true, true)));
            }
            f(run(base + a - s, 1, (true, true, false)));
        } else {
            let mut x = base + s;
            while x < (base + a).min(end) {
                f(run(x, 1, neighbours(x, s, n, a)));
                x += 2 * s;
            }
        }
        base += a;
    }
}

/// The predictions of a row's points from `w` (level stride `s`, interpolated along `axis`)
/// into `out`, replacing its contents.
pub fn predict_row<T: Real>(g: &Geometry, w: &[T], kind: Kind, axis: usize, s: usize, row: &Row, out: &mut Vec<T>) {
    out.clear();
    runs(g, axis, s, row, |r| {
        // Each arm names its kind: the stencil only tells the kinds apart with all four points.
        match (kind, r.has) {
            (_, (_, false, _)) => predict_run::<T, false, false, false>(w, Kind::Linear, r, out),
            (Kind::Linear, _) | (_, (false, true, false)) => {
                predict_run::<T, false, true, false>(w, Kind::Linear, r, out)
            }
            (_, (false, true, true)) => predict_run::<T, false, true, true>(w, Kind::Cubic, r, out),
            (_, (true, true, false)) => predict_run::<T, true, true, false>(w, Kind::Cubic, r, out),
            (Kind::Cubic, _) => predict_run::<T, true, true, true>(w, Kind::Cubic, r, out),
            (Kind::Natural, _) => predict_run::<T, true, true, true>(w, Kind::Natural, r, out),
        }
    });
}

/// The four neighbour lines of a run (a missing one reads as b, as in `predict`), each of the
/// run's span, and the run's own points.
#[inline(always)]
fn lines<T: Real, const A: bool, const C: bool, const D: bool>(w: &[T], r: Run) -> [&[T]; 5] {
    let span = (r.count - 1) * r.step + 1;
    let at = |i: usize| &w[i..][..span];
    let b = at(r.first - r.o);
    let c = if C { at(r.first + r.o) } else { b };
    let a = if A { at(r.first - 3 * r.o) } else { b };
    let d = if D { at(r.first + 3 * r.o) } else { b };
    [a, b, c, d, at(r.first)]
}

/// One run of predictions with its flags as constants, so the stencil's branches fold away.
#[inline(always)]
fn predict_run<T: Real, const A: bool, const C: bool, const D: bool>(w: &[T], kind: Kind, r: Run, out: &mut Vec<T>) {
    let [a, b, c, d, _] = lines::<T, A, C, D>(w, r);
    let st = r.step;
    let points = a.iter().step_by(st).zip(b.iter().step_by(st)).zip(c.iter().step_by(st).zip(d.iter().step_by(st)));
    out.extend(points.map(|((&a, &b), (&c, &d))| stencil(kind, (A, C, D), a, b, c, d)));
}

/// The kinds in the order of [`row_costs`].
pub const KINDS: [Kind; 3] = [Kind::Linear, Kind::Cubic, Kind::Natural];

/// Summed [`point_cost`] of a row's points under each of [`KINDS`], predicted
/// from `x` itself (the choice estimate). One pass over the row serves all three kinds.
pub fn row_costs<T: Real>(g: &Geometry, x: &[T], axis: usize, s: usize, row: &Row, recip: T) -> [u64; 3] {
    let mut sum = [0u64; 3];
    runs(g, axis, s, row, |r| {
        let c = match r.has {
            (_, false, _) => cost_run::<T, false, false, false>(x, r, recip),
            (false, true, false) => cost_run::<T, false, true, false>(x, r, recip),
            (false, true, true) => cost_run::<T, false, true, true>(x, r, recip),
            (true, true, false) => cost_run::<T, true, true, false>(x, r, recip),
            (true, true, true) => cost_run::<T, true, true, true>(x, r, recip),
        };
        for k in 0..3 {
            sum[k] += c[k];
        }
    });
    sum
}

#[inline(always)]
fn cost_run<T: Real, const A: bool, const C: bool, const D: bool>(x: &[T], r: Run, recip: T) -> [u64; 3] {
    let [a, b, c, d, v] = lines::<T, A, C, D>(x, r);
    let st = r.step;
    let points = a.iter().step_by(st).zip(b.iter().step_by(st)).zip(c.iter().step_by(st).zip(d.iter().step_by(st)));
    let mut sum = [0u64; 3];
    for (((&a, &b), (&c, &d)), &v) in points.zip(v.iter().step_by(st)) {
        // Kinds that predict alike here give the same expression, computed once.
        let has = (A, C, D);
        sum[0] += point_cost(v, stencil(Kind::Linear, has, a, b, c, d), recip);
        sum[1] += point_cost(v, stencil(Kind::Cubic, has, a, b, c, d), recip);
        sum[2] += point_cost(v, stencil(Kind::Natural, has, a, b, c, d), recip);
    }
    sum
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
                for l in 1..=g.levels() {
                    let s = 1 << (l - 1);
                    for choice in Choice::CANDIDATES {
                        for pass in passes(s, choice) {
                            for &(lo, hi) in &boxes {
                                let mut reference = Vec::new();
                                walk(&g, &pass, lo, hi, |idx, i| {
                                    reference.push((idx, predict(&g, &w, choice.kind, pass.axis, s, idx, i)))
                                });
                                let mut got = Vec::new();
                                let mut p = Vec::new();
                                let mut costs = [0u64; 3];
                                rows(&g, &pass, lo, hi, |row| {
                                    predict_row(&g, &w, choice.kind, pass.axis, s, row, &mut p);
                                    got.extend(row.indices().zip(p.iter().copied()));
                                    let c = row_costs(&g, &w, pass.axis, s, row, 0.25);
                                    costs.iter_mut().zip(c).for_each(|(a, b)| *a += b);
                                });
                                let bits =
                                    |v: &[(usize, f32)]| v.iter().map(|&(i, p)| (i, p.to_bits())).collect::<Vec<_>>();
                                assert_eq!(bits(&got), bits(&reference), "{dims:?} A={anchor} s={s} {choice:?} {lo:?}");
                                for (k, kind) in KINDS.into_iter().enumerate() {
                                    let mut want = 0;
                                    walk(&g, &pass, lo, hi, |idx, i| {
                                        want += point_cost(w[idx], predict(&g, &w, kind, pass.axis, s, idx, i), 0.25)
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
}
