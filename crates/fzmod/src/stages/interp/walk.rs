//! The level structure shared by encoder, decoder and the cost estimate: which points a
//! level's passes predict, which neighbours a stencil may read, and the stencils themselves
//! in their exact operation order (docs/FORMAT.md 6.17). Kept free of quantization so a CUDA
//! kernel can mirror each function one to one.

use crate::stages::quantizer::cpu::Float;
use std::ops::{Add, Mul, Sub};

/// Element arithmetic the stencils need, on top of the quantizer's [`Float`].
pub(crate) trait Real: Float + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> {
    /// A small integer or a power-of-two fraction, exact in both types.
    fn lit(v: f32) -> Self;
    /// True IEEE division (the natural spline's /40; never a reciprocal multiply).
    fn div(self, d: Self) -> Self;
    /// The integer the choice estimate sums a point's exponent field in: as wide as the
    /// element (u32 for f32, u64 for f64), so a vector of fields needs no narrowing.
    type Field: Copy + Default + Add<Output = Self::Field> + Into<u64>;
    /// The exponent field of 1/2: for v ≥ 1/2, ⌊log2 v⌋ + 1 = exponent field − this.
    const HALF_FIELD: u32;
    /// For positive v: its exponent field, read from the bits.
    fn exponent_field(self) -> Self::Field;
}

impl Real for f32 {
    #[inline]
    fn lit(v: f32) -> Self {
        v
    }
    #[inline]
    fn div(self, d: Self) -> Self {
        self / d
    }
    type Field = u32;
    const HALF_FIELD: u32 = 126;
    #[inline]
    fn exponent_field(self) -> u32 {
        self.to_bits() >> 23
    }
}

impl Real for f64 {
    #[inline]
    fn lit(v: f32) -> Self {
        f64::from(v)
    }
    #[inline]
    fn div(self, d: Self) -> Self {
        self / d
    }
    type Field = u64;
    const HALF_FIELD: u32 = 1022;
    #[inline]
    fn exponent_field(self) -> u64 {
        self.to_bits() >> 52
    }
}

/// The interpolator of one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// (b + c) / 2.
    Linear = 0,
    /// Not-a-knot cubic spline (SZ3): (−a + 9b + 9c − d) / 16.
    Cubic = 1,
    /// Natural cubic spline (QoZ, cuSZ-i): (−3a + 23b + 23c − 3d) / 40.
    Natural = 2,
}

/// One level's recorded choice: interpolator and sweep order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub kind: Kind,
    /// `false`: sweep z, y, x (slowest axis first); `true`: x, y, z.
    pub reverse: bool,
}

impl Choice {
    /// Candidates in tie-break order (the first of equal cost wins).
    pub const CANDIDATES: [Choice; 6] = [
        Choice { kind: Kind::Linear, reverse: false },
        Choice { kind: Kind::Linear, reverse: true },
        Choice { kind: Kind::Cubic, reverse: false },
        Choice { kind: Kind::Cubic, reverse: true },
        Choice { kind: Kind::Natural, reverse: false },
        Choice { kind: Kind::Natural, reverse: true },
    ];

    /// The record byte: kind in bits 0–1, order in bit 2.
    pub fn byte(self) -> u8 {
        self.kind as u8 | u8::from(self.reverse) << 2
    }

    pub fn from_byte(b: u8) -> Option<Choice> {
        let kind = match b & 3 {
            0 => Kind::Linear,
            1 => Kind::Cubic,
            2 => Kind::Natural,
            _ => return None,
        };
        (b >> 3 == 0).then_some(Choice { kind, reverse: b & 4 != 0 })
    }

    /// The axes in sweep order.
    pub fn order(self) -> [usize; 3] {
        if self.reverse {
            [2, 1, 0]
        } else {
            [0, 1, 2]
        }
    }
}

/// Grid extents (z, y, x) and the anchor stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub dims: [usize; 3],
    /// Anchor stride A, a power of two ≥ 2; levels = log2(A).
    pub anchor: usize,
}

impl Geometry {
    pub fn levels(&self) -> usize {
        self.anchor.trailing_zeros() as usize
    }

    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element strides of z, y, x.
    pub fn strides(&self) -> [usize; 3] {
        [self.dims[1] * self.dims[2], self.dims[2], 1]
    }

    /// Anchor points per axis: ⌊(n − 1) / A⌋ + 1 (0 for an empty axis).
    pub fn anchors_per_axis(&self) -> [usize; 3] {
        self.dims.map(|n| if n == 0 { 0 } else { (n - 1) / self.anchor + 1 })
    }

    pub fn num_anchors(&self) -> usize {
        self.anchors_per_axis().iter().product()
    }

    /// Anchor blocks per axis: ⌈n / A⌉.
    pub fn blocks_per_axis(&self) -> [usize; 3] {
        self.dims.map(|n| n.div_ceil(self.anchor))
    }

    /// The element index of every anchor, in C order of the anchor grid.
    pub fn for_each_anchor(&self, mut f: impl FnMut(usize)) {
        let [az, ay, ax] = self.anchors_per_axis();
        let [sz, sy, _] = self.strides();
        let a = self.anchor;
        for z in 0..az {
            for y in 0..ay {
                for x in 0..ax {
                    f(z * a * sz + y * a * sy + x * a);
                }
            }
        }
    }
}

/// Which stencil points exist for the point at coordinate `i` (an odd multiple of `s`) along
/// an axis of extent `n`: neighbours must lie in the anchor segment [⌊i/A⌋·A, ⌊i/A⌋·A + A]
/// and inside the array. Returns (a = i−3s, c = i+s, d = i+3s); b = i−s always exists.
#[inline]
pub fn neighbours(i: usize, s: usize, n: usize, anchor: usize) -> (bool, bool, bool) {
    // A mask, as A is a power of two: a division per row was a visible share of a decode.
    let base = i & !(anchor - 1);
    let end = (base + anchor).min(n - 1);
    (i >= base + 3 * s, i + s <= end, i + 3 * s <= end)
}

/// The prediction at a point from its line neighbours (docs/FORMAT.md 6.17, exact order): the
/// reference form, as device.cu writes it; the CPU computes all forms of a row and selects
/// (rows.rs, tested against this).
#[cfg(test)]
pub fn stencil<T: Real>(kind: Kind, has: (bool, bool, bool), a: T, b: T, c: T, d: T) -> T {
    let (has_a, has_c, has_d) = has;
    if !has_c {
        return b;
    }
    if kind == Kind::Linear || !(has_a || has_d) {
        return (b + c) * T::lit(0.5);
    }
    match (has_a, has_d) {
        (true, true) if kind == Kind::Cubic => ((b + c) * T::lit(9.0) - (a + d)) * T::lit(0.0625),
        (true, true) => ((b + c) * T::lit(23.0) - (a + d) * T::lit(3.0)).div(T::lit(40.0)),
        (false, _) => (b * T::lit(3.0) + c * T::lit(6.0) - d) * T::lit(0.125),
        (true, false) => (b * T::lit(6.0) + c * T::lit(3.0) - a) * T::lit(0.125),
    }
}

/// One pass of a level: the axis interpolated, and per axis the first coordinate and step
/// of the points it predicts.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    pub axis: usize,
    pub start: [usize; 3],
    pub step: [usize; 3],
}

/// The passes of the level with stride `s` under `choice`: pass k interpolates along
/// order[k] at odd multiples of s; axes swept before it at multiples of s, after it at
/// multiples of 2s.
pub fn passes(s: usize, choice: Choice) -> [Pass; 3] {
    let order = choice.order();
    std::array::from_fn(|k| {
        let mut start = [0; 3];
        let mut step = [2 * s; 3];
        for &a in &order[..k] {
            step[a] = s;
        }
        start[order[k]] = s;
        Pass { axis: order[k], start, step }
    })
}

/// Visit every point of `pass` inside the box [lo, hi) (lo a multiple of A per axis),
/// z, y, x ascending: `f(element index, coordinate along the pass axis)`. The reference
/// order; the CPU drivers visit the same points row by row (rows.rs, tested against this).
#[cfg(test)]
pub fn walk(g: &Geometry, pass: &Pass, lo: [usize; 3], hi: [usize; 3], mut f: impl FnMut(usize, usize)) {
    let st = g.strides();
    let a = pass.axis;
    let mut z = lo[0] + pass.start[0];
    while z < hi[0] {
        let mut y = lo[1] + pass.start[1];
        while y < hi[1] {
            let row = z * st[0] + y * st[1];
            let mut x = lo[2] + pass.start[2];
            while x < hi[2] {
                let coord = [z, y, x][a];
                f(row + x, coord);
                x += pass.step[2];
            }
            y += pass.step[1];
        }
        z += pass.step[0];
    }
}

/// Predict the point `idx` (coordinate `i` along `pass.axis`) from the values in `w`: the
/// reference of one point (device.cu's form); the CPU drivers predict whole rows (rows.rs,
/// tested against this).
#[cfg(test)]
pub fn predict<T: Real>(g: &Geometry, w: &[T], kind: Kind, axis: usize, s: usize, idx: usize, i: usize) -> T {
    let n = g.dims[axis];
    let o = s * g.strides()[axis];
    let has = neighbours(i, s, n, g.anchor);
    let b = w[idx - o];
    let c = if has.1 { w[idx + o] } else { b };
    let a = if has.0 { w[idx - 3 * o] } else { b };
    let d = if has.2 { w[idx + 3 * o] } else { b };
    stencil(kind, has, a, b, c, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_is_an_anchor_or_predicted_exactly_once() {
        for dims in [[1, 1, 37], [3, 5, 7], [9, 17, 33], [1, 40, 1], [5, 1, 6]] {
            for anchor in [2, 4, 8, 16] {
                for choice in Choice::CANDIDATES {
                    let g = Geometry { dims, anchor };
                    let mut seen = vec![0u8; g.len()];
                    g.for_each_anchor(|i| seen[i] += 1);
                    for l in (1..=g.levels()).rev() {
                        for p in passes(1 << (l - 1), choice) {
                            walk(&g, &p, [0; 3], dims, |i, _| seen[i] += 1);
                        }
                    }
                    assert!(seen.iter().all(|&c| c == 1), "{dims:?} A={anchor} {choice:?}");
                }
            }
        }
    }

    #[test]
    fn stencils_reproduce_low_order_polynomials() {
        let f = |x: f64| 2.0 + 3.0 * x;
        let has = (true, true, true);
        for kind in [Kind::Linear, Kind::Cubic, Kind::Natural] {
            assert_eq!(stencil(kind, has, f(-3.0), f(-1.0), f(1.0), f(3.0)), f(0.0));
        }
        let q = |x: f64| 1.0 + x * x;
        assert_eq!(stencil(Kind::Cubic, (false, true, true), 0.0, q(-1.0), q(1.0), q(3.0)), q(0.0));
        assert_eq!(stencil(Kind::Cubic, (true, true, false), q(-3.0), q(-1.0), q(1.0), 0.0), q(0.0));
    }

    #[test]
    fn choice_bytes_round_trip() {
        for c in Choice::CANDIDATES {
            assert_eq!(Choice::from_byte(c.byte()), Some(c));
        }
        assert_eq!(Choice::from_byte(3), None);
        assert_eq!(Choice::from_byte(8), None);
    }
}
