//! The choice estimate's passes along z and y on parity sub-grids. The estimate predicts from
//! the original values, which never change, so a block's points at level stride s can be
//! copied once into eight sub-grids by the parity of each coordinate / s. A point odd along
//! the pass axis then finds its stencil lines in the sub-grid even along that axis, at the
//! same place in the other two axes: whole runs of rows (along z, whole planes) are plain
//! slices. This replaces five strided copies per point and a call per short row by one copy
//! per point and a few long loops; the costs are the same integers (rows.rs computes every
//! point's cost as before, and integer sums do not depend on the grouping).

use super::rows::{form, line_shifts, slice_costs, strided_copy};
use super::walk::{neighbours, Geometry, Real};

/// One parity class of a block's points at one level, in C order.
struct Sub<T> {
    v: Vec<T>,
    /// Extent per axis. Along z and y it reaches the block's far face (coordinate lo + A,
    /// where inside the array: the stencils of the block read it); along x it stops at the
    /// block's end (x passes do not use the sub-grids).
    dims: [usize; 3],
    /// Extent per axis of the block's own points (without the far face).
    inner: [usize; 3],
}

/// The eight parity classes of one block at one level, index pz·4 + py·2 + px. Reused across
/// blocks and levels.
pub struct ParityGrids<T> {
    subs: [Sub<T>; 8],
    /// The block's low corner, level stride, and the grid.
    lo: [usize; 3],
    s: usize,
    geometry: Option<Geometry>,
}

impl<T: Real> ParityGrids<T> {
    pub fn new() -> Self {
        let sub = || Sub { v: Vec::new(), dims: [0; 3], inner: [0; 3] };
        ParityGrids { subs: std::array::from_fn(|_| sub()), lo: [0; 3], s: 1, geometry: None }
    }

    /// Split the points of the block [lo, hi) at level stride `s` (and its far faces along z
    /// and y) by parity. lo is a multiple of A and A / s is even, so a coordinate's parity in
    /// the block is its parity in the grid.
    pub fn extract(&mut self, x: &[T], g: &Geometry, s: usize, lo: [usize; 3], hi: [usize; 3]) {
        (self.lo, self.s, self.geometry) = (lo, s, Some(*g));
        let st = g.strides();
        // Points per axis: up to the far face, and within the block.
        let far: [usize; 3] = std::array::from_fn(|k| ((lo[k] + g.anchor).min(g.dims[k] - 1) - lo[k]) / s + 1);
        let own: [usize; 3] = std::array::from_fn(|k| (hi[k] - lo[k] - 1) / s + 1);
        for (c, sub) in self.subs.iter_mut().enumerate() {
            let p = [c >> 2 & 1, c >> 1 & 1, c & 1];
            // Of m points, ⌈m / 2⌉ are even and ⌊m / 2⌋ odd.
            let count = |m: usize, k: usize| (m + 1 - p[k]) / 2;
            sub.dims = [count(far[0], 0), count(far[1], 1), count(own[2], 2)];
            sub.inner = std::array::from_fn(|k| count(own[k], k));
            let [nz, ny, nx] = sub.dims;
            sub.v.resize(nz * ny * nx, T::ZERO);
            // Plane by plane and row by row: no division per row (as many cycles as copying a
            // short row).
            for (z, plane) in sub.v.chunks_exact_mut((ny * nx).max(1)).enumerate().take(nz) {
                let plane_first = (lo[0] + (2 * z + p[0]) * s) * st[0] + lo[2] + p[2] * s;
                for (y, out) in plane.chunks_exact_mut(nx.max(1)).enumerate() {
                    let first = plane_first + (lo[1] + (2 * y + p[1]) * s) * st[1];
                    strided_copy(out, &x[first..], 2 * s);
                }
            }
        }
    }

    /// The summed costs per kind of predicting class `odd` (odd along `axis`, 0 or 1) along
    /// `axis` from its even counterpart, over the block's own points.
    pub fn costs(&self, odd: usize, axis: usize, recip: T) -> [u64; 3] {
        let bit = 4 >> axis;
        let (c, e) = (&self.subs[odd], &self.subs[odd & !bit]);
        let mut sums = [0u64; 3];
        self.form_runs(axis, c.dims[axis], |f, r0, r1| {
            let shifts = line_shifts(f);
            each_run(c, e, axis, r0, r1, |at, len, even_at: &dyn Fn(isize) -> usize| {
                let lines = shifts.map(|j| &e.v[even_at(j)..even_at(j) + len]);
                for (sum, k) in sums.iter_mut().zip(slice_costs(lines, &c.v[at..at + len], recip, f)) {
                    *sum += k;
                }
            });
        });
        sums
    }

    /// The runs [r0, r1) of odd indices along `axis` (of `count`) that share a stencil form.
    fn form_runs(&self, axis: usize, count: usize, mut f: impl FnMut(u32, usize, usize)) {
        let g = self.geometry.expect("extract first");
        let form_at = |r: usize| {
            let (has_a, has_c, has_d) =
                neighbours(self.lo[axis] + (2 * r + 1) * self.s, self.s, g.dims[axis], g.anchor);
            form(has_a, has_c, has_d)
        };
        let mut r0 = 0;
        while r0 < count {
            let f0 = form_at(r0);
            let r1 = (r0 + 1..count).find(|&r| form_at(r) != f0).unwrap_or(count);
            f(f0, r0, r1);
            r0 = r1;
        }
    }
}

/// The contiguous runs of class `c`'s own points with index r0..r1 along `axis` (0 or 1):
/// `f(start in c, length, start in e of the line shifted by j along axis)`. Rows are whole
/// along x; along z the planes are one run when they have no far-face row.
fn each_run<T>(
    c: &Sub<T>,
    e: &Sub<T>,
    axis: usize,
    r0: usize,
    r1: usize,
    mut f: impl FnMut(usize, usize, &dyn Fn(isize) -> usize),
) {
    let nx = c.dims[2];
    if axis == 0 {
        let plane = c.dims[1] * nx;
        let shifted = |z: usize| move |j: isize| z.wrapping_add_signed(j) * plane;
        if c.inner[1] == c.dims[1] {
            f(r0 * plane, (r1 - r0) * plane, &shifted(r0));
        } else {
            for z in r0..r1 {
                f(z * plane, c.inner[1] * nx, &shifted(z));
            }
        }
        return;
    }
    for z in 0..c.inner[0] {
        let shifted = |j: isize| (z * e.dims[1] + r0.wrapping_add_signed(j)) * nx;
        f((z * c.dims[1] + r0) * nx, (r1 - r0) * nx, &shifted);
    }
}
