//! The CPU encoder and decoder on all cores. The grid is cut into slabs of A lines (A the
//! anchor stride) along its slowest axis of more than one point; slab k computes lines
//! [kA, kA + A] in a buffer of its own and keeps lines [kA, kA + A). Its closing face, line
//! kA + A, is the next slab's first line and is computed by both alike, as the device's
//! anchor boxes are: the face lies on the anchor grid along that axis, so its points are
//! predicted along the other axes from points of the face alone, and a stencil along the axis
//! never leaves its anchor segment. Every point gets the serial walk's value, so the bytes do
//! not depend on the number of threads (tested against the serial walk).

use super::cpu::{wait_in_place, Levels};
use super::walk::{Geometry, Real};
use crate::element::zeroed_vec;
use rayon::prelude::*;

/// How a grid is cut: along `axis`, whose lines are `line` elements long (every axis before
/// it has extent 1, so a run of lines is contiguous), `A` lines a slab.
pub(super) struct Slabs {
    axis: usize,
    line: usize,
    anchor: usize,
}

/// One slab: its first element in the whole grid, its own grid (closing face included) and
/// the number of elements it keeps.
struct Slab {
    first: usize,
    grid: Geometry,
    kept: usize,
}

impl Slabs {
    /// The cut of `g` when it pays: more than one thread, codes in element order (level
    /// order interleaves the slabs' codes) and at least two slabs.
    pub fn for_threads(g: &Geometry, level_order: bool) -> Option<Slabs> {
        if level_order || rayon::current_num_threads() < 2 {
            return None;
        }
        // z, else y; a 1-D grid is one line.
        let axis = (0..2).find(|&a| g.dims[a] > 1)?;
        (g.dims[axis] > g.anchor).then(|| Slabs { axis, line: g.strides()[axis], anchor: g.anchor })
    }

    /// Elements a slab keeps (the last keeps fewer).
    fn kept(&self) -> usize {
        self.anchor * self.line
    }

    fn slab(&self, g: &Geometry, k: usize) -> Slab {
        let (lo, n) = (k * self.anchor, g.dims[self.axis]);
        let mut dims = g.dims;
        dims[self.axis] = (lo + self.anchor + 1).min(n) - lo;
        let kept = ((lo + self.anchor).min(n) - lo) * self.line;
        Slab { first: lo * self.line, grid: Geometry { dims, anchor: self.anchor }, kept }
    }

    /// Anchors of the whole grid before slab `k`'s first line (the anchors of the lines of a
    /// slab are a contiguous run of the anchor grid's C order).
    fn anchors_before(&self, g: &Geometry, k: usize) -> usize {
        k * g.anchors_per_axis()[self.axis + 1..].iter().product::<usize>()
    }

    /// [`Levels::encode`] of every slab in parallel: the codes in element order and the
    /// outliers' indices (each slab's in its visiting order).
    pub fn encode<T: Real>(&self, x: &[T], g: &Geometry, levels: Levels<T>) -> (Vec<u16>, Vec<usize>) {
        let mut codes = zeroed_vec(x.len());
        let outliers: Vec<Vec<usize>> = codes
            .par_chunks_mut(self.kept())
            .enumerate()
            .map(|(k, kept_codes)| {
                let slab = self.slab(g, k);
                let mut slab_codes = vec![levels.q.code(0); slab.grid.len()];
                let x = &x[slab.first..slab.first + slab.grid.len()];
                let mut outliers = levels.encode(x, &slab.grid, &mut slab_codes, None);
                kept_codes.copy_from_slice(&slab_codes[..slab.kept]);
                // The closing face's outliers are the next slab's.
                outliers.retain(|&i| i < slab.kept);
                outliers.iter_mut().for_each(|i| *i += slab.first);
                outliers
            })
            .collect();
        (codes, outliers.concat())
    }

    /// [`Levels::decode`] of every slab in parallel (codes in element order): the values
    /// before the anchors' and outliers' bits are put back.
    pub fn decode<T: Real>(
        &self,
        codes: &[u16],
        g: &Geometry,
        levels: Levels<T>,
        anchors: &[T],
        outliers: &[(usize, T)],
    ) -> Vec<T> {
        let mut w: Vec<T> = zeroed_vec(codes.len());
        w.par_chunks_mut(self.kept()).enumerate().for_each(|(k, kept)| {
            let slab = self.slab(g, k);
            let mut slab_w: Vec<T> = zeroed_vec(slab.grid.len());
            wait_in_place(&slab.grid, &mut slab_w, &anchors[self.anchors_before(g, k)..], outliers, slab.first);
            levels.decode(&codes[slab.first..slab.first + slab.grid.len()], &slab.grid, &mut slab_w, None);
            kept.copy_from_slice(&slab_w[..slab.kept]);
        });
        w
    }
}
