//! The level order of the `codes` port (docs/FORMAT.md 6.17, "Code order"): the codes grouped
//! by level and by the set of axes at an odd multiple of the level stride, coarsest first,
//! each group in C order of its own lattice. In 3-D the passes along different axes have very
//! different error distributions (a time or height axis against two horizontal ones); grouped,
//! each pass fills whole chunks of its own, which chunk-local coders (Bitshuffle and RZE per
//! 16 KiB) and the zero runs RZE removes after Huffman exploit. The permutation depends on
//! the grid alone; device.cu `ip_level_position` computes the same position per point.

use super::rows::Row;
#[cfg(test)]
use super::rows::{strided_copy, strided_scatter};
use super::walk::Geometry;

/// Groups of a grid with `levels` levels: the anchors, then per level (coarsest first) the
/// seven non-empty axis sets (bit k = axis k at an odd multiple of the stride), ascending.
pub fn num_groups(levels: usize) -> usize {
    1 + 7 * levels
}

/// Group `k`'s lattice: per axis (first coordinate, step).
fn lattice(g: &Geometry, k: usize) -> [(usize, usize); 3] {
    if k == 0 {
        return [(0, g.anchor); 3];
    }
    let level = (k - 1) / 7; // 0 = coarsest, stride A/2
    let mask = (k - 1) % 7 + 1;
    let s = g.anchor >> (level + 1);
    std::array::from_fn(|a| (if mask >> a & 1 == 1 { s } else { 0 }, 2 * s))
}

/// Points of a lattice axis of extent `n`.
fn axis_count(n: usize, (first, step): (usize, usize)) -> usize {
    if n > first {
        (n - 1 - first) / step + 1
    } else {
        0
    }
}

/// Start of every group in the level-ordered codes, and the total (n) last (the device
/// kernel's table).
pub fn group_offsets(g: &Geometry) -> Vec<u64> {
    let mut offsets = vec![0u64];
    for k in 0..num_groups(g.levels()) {
        let lat = lattice(g, k);
        let size: usize = (0..3).map(|a| axis_count(g.dims[a], lat[a])).product();
        offsets.push(offsets[k] + size as u64);
    }
    offsets
}

#[cfg(test)]
/// Visit the grid in level order a row at a time: `f(first, step, count)` for the elements
/// first, first + step, … (count of them, along x).
fn for_each_row_in_level_order(g: &Geometry, mut f: impl FnMut(usize, usize, usize)) {
    let [sz, sy, _] = g.strides();
    for k in 0..num_groups(g.levels()) {
        let [lz, ly, lx] = lattice(g, k);
        let (cz, cy, cx) = (axis_count(g.dims[0], lz), axis_count(g.dims[1], ly), axis_count(g.dims[2], lx));
        if cx == 0 {
            continue;
        }
        for z in 0..cz {
            for y in 0..cy {
                f((lz.0 + z * lz.1) * sz + (ly.0 + y * ly.1) * sy + lx.0, lx.1, cx);
            }
        }
    }
}

/// Natural order → level order (the reference of [`LevelRows`]).
#[cfg(test)]
pub fn to_level_order(codes: &[u16], g: &Geometry) -> Vec<u16> {
    let mut out = vec![0u16; codes.len()];
    let mut at = 0;
    for_each_row_in_level_order(g, |first, step, count| {
        strided_copy(&mut out[at..at + count], &codes[first..], step);
        at += count;
    });
    out
}

/// Level order → natural order (`codes` holds the grid's n codes).
#[cfg(test)]
pub fn from_level_order(codes: &[u16], g: &Geometry) -> Vec<u16> {
    let mut out = vec![0u16; codes.len()];
    let mut at = 0;
    for_each_row_in_level_order(g, |first, step, count| {
        strided_scatter(&mut out[first..], &codes[at..at + count], step);
        at += count;
    });
    out
}

/// Where the codes of the rows of a level's passes lie in level order, so the CPU drivers
/// write and read them there directly: no permutation of the whole array (a pass over it
/// that cost ~7 % of a decode of the small ncep field) and contiguous runs in place of
/// strided copies.
pub struct LevelRows {
    anchor: usize,
    /// Per group: its start, and its lattice's points along y and x.
    groups: Vec<(usize, usize, usize)>,
}

impl LevelRows {
    pub fn new(g: &Geometry) -> LevelRows {
        let offsets = group_offsets(g);
        let groups = (0..num_groups(g.levels()))
            .map(|k| {
                let lat = lattice(g, k);
                (offsets[k] as usize, axis_count(g.dims[1], lat[1]), axis_count(g.dims[2], lat[2]))
            })
            .collect();
        LevelRows { anchor: g.anchor, groups }
    }

    /// The level-order position of the point (z, y, x) (each a multiple of `s`, one an odd
    /// one) of the level with stride `s`, whose x is odd (`x_odd`) or not: its group's start,
    /// then its rank in the group's lattice, whose index along an axis is coordinate / 2s.
    /// Shifts, as s is a power of two (divisions per row were a tenth of a small decode).
    #[inline]
    fn position(&self, s: usize, [z, y, x]: [usize; 3], x_odd: usize) -> usize {
        let sh = s.trailing_zeros();
        let level = (self.anchor.trailing_zeros() - sh) as usize - 1;
        let mask = (z >> sh & 1) | (y >> sh & 1) << 1 | x_odd << 2;
        let (at, cy, cx) = self.groups[1 + 7 * level + mask - 1];
        at + ((z >> (sh + 1)) * cy + (y >> (sh + 1))) * cx + (x >> (sh + 1))
    }

    /// The runs of a row of a pass at level stride `s`: with step 2s its points share the
    /// parity of x, one group, one run `(start, start)`; with step s (x0 = 0) the points at
    /// even k (x even) run from the first start, those at odd k from the second.
    #[inline]
    fn runs(&self, s: usize, row: &Row) -> (usize, usize) {
        let [z, y] = row.zy;
        if row.step == 2 * s {
            let at = self.position(s, [z, y, row.x0], row.x0 >> s.trailing_zeros() & 1);
            return (at, at);
        }
        debug_assert!(row.step == s && row.x0 == 0);
        (self.position(s, [z, y, 0], 0), self.position(s, [z, y, s], 1))
    }

    /// Where the codes of `row` (level stride `s`) start in the level order when they are
    /// one run there (a row of step 2s), else `None`.
    #[inline]
    pub fn run(&self, s: usize, row: &Row) -> Option<usize> {
        (row.step == 2 * s).then(|| self.runs(s, row).0)
    }

    /// The codes of `row` (level stride `s`) from the level-ordered `codes` into `dst`.
    pub fn read(&self, s: usize, row: &Row, codes: &[u16], dst: &mut [u16]) {
        let (even, odd) = self.runs(s, row);
        if row.step == 2 * s {
            dst.copy_from_slice(&codes[even..even + dst.len()]);
            return;
        }
        let (pairs, last) = dst.as_chunks_mut::<2>();
        for (i, p) in pairs.iter_mut().enumerate() {
            *p = [codes[even + i], codes[odd + i]];
        }
        if let [d] = last {
            *d = codes[even + pairs.len()];
        }
    }

    /// The codes `src` of `row` (level stride `s`) into their places in the level-ordered `codes`.
    pub fn write(&self, s: usize, row: &Row, src: &[u16], codes: &mut [u16]) {
        let (even, odd) = self.runs(s, row);
        if row.step == 2 * s {
            codes[even..even + src.len()].copy_from_slice(src);
            return;
        }
        let (pairs, last) = src.as_chunks::<2>();
        for (i, p) in pairs.iter().enumerate() {
            codes[even + i] = p[0];
            codes[odd + i] = p[1];
        }
        if let [c] = last {
            codes[even + pairs.len()] = *c;
        }
    }
}

/// The level-order position of element `idx`, point by point (device.cu's form).
#[cfg(test)]
pub fn position(g: &Geometry, offsets: &[u64], idx: usize) -> u64 {
    let [sz, sy, _] = g.strides();
    let c = [idx / sz, idx % sz / sy, idx % sy];
    let low = c.map(|v| if v == 0 { g.anchor } else { (1 << v.trailing_zeros()).min(g.anchor) });
    let s = low.into_iter().min().expect("three axes");
    let k = if s == g.anchor {
        0
    } else {
        let mask: usize = (0..3).map(|a| usize::from(low[a] == s) << a).sum();
        let level = (g.anchor / s).trailing_zeros() as usize - 1;
        1 + 7 * level + mask - 1
    };
    let lat = lattice(g, k);
    let rank = (0..3).fold(0usize, |r, a| r * axis_count(g.dims[a], lat[a]) + (c[a] - lat[a].0) / lat[a].1);
    offsets[k] + rank as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_order_is_a_permutation_that_round_trips() {
        for dims in [[1, 1, 37], [3, 5, 7], [9, 17, 33], [1, 40, 1], [5, 1, 6], [0, 3, 3], [65, 29, 49]] {
            for anchor in [2, 4, 8, 64] {
                let g = Geometry { dims, anchor };
                let n = g.len();
                let codes: Vec<u16> = (0..n).map(|i| (i * 7919 % 65521) as u16).collect();
                let ordered = to_level_order(&codes, &g);
                assert_eq!(from_level_order(&ordered, &g), codes, "{dims:?} A={anchor}");
                let offsets = group_offsets(&g);
                assert_eq!(offsets.last().copied(), Some(n as u64));
                let mut seen = vec![false; n];
                for (i, &code) in codes.iter().enumerate() {
                    let p = position(&g, &offsets, i) as usize;
                    assert_eq!(ordered[p], code, "{dims:?} A={anchor} element {i}");
                    assert!(!std::mem::replace(&mut seen[p], true));
                }
            }
        }
    }

    /// Every row of every pass of every candidate order reads and writes the codes that the
    /// whole-array permutation puts at its points.
    #[test]
    fn level_rows_are_the_permutation() {
        use super::super::rows::rows;
        use super::super::walk::{passes, Choice};
        for dims in [[1, 1, 37], [3, 5, 7], [9, 17, 33], [1, 40, 1], [5, 1, 6], [65, 29, 49], [6, 7, 8]] {
            for anchor in [2, 4, 8, 64] {
                let g = Geometry { dims, anchor };
                let natural: Vec<u16> = (0..g.len()).map(|i| (i * 7919 % 65521) as u16).collect();
                let ordered = to_level_order(&natural, &g);
                let lr = LevelRows::new(&g);
                let mut written = vec![0u16; g.len()];
                g.for_each_anchor(|i| written[position(&g, &group_offsets(&g), i) as usize] = natural[i]);
                for l in (1..=g.levels()).rev() {
                    let s = 1 << (l - 1);
                    for choice in [Choice::CANDIDATES[0], Choice::CANDIDATES[1]] {
                        for pass in passes(s, choice) {
                            rows(&g, &pass, [0; 3], dims, |row| {
                                let want: Vec<u16> = row.indices().map(|i| natural[i]).collect();
                                let mut got = vec![0; row.count];
                                lr.read(s, row, &ordered, &mut got);
                                assert_eq!(got, want, "{dims:?} A={anchor} s={s} {choice:?} {row:?}");
                                if !choice.reverse {
                                    lr.write(s, row, &want, &mut written);
                                }
                            });
                        }
                    }
                }
                assert_eq!(written, ordered, "{dims:?} A={anchor}");
            }
        }
    }

    #[test]
    fn anchors_come_first_and_the_finest_pass_last() {
        let g = Geometry { dims: [5, 9, 9], anchor: 4 };
        let offsets = group_offsets(&g);
        assert_eq!(position(&g, &offsets, 0), 0);
        assert_eq!(offsets[1], g.num_anchors() as u64);
        // (1, 1, 1): every axis odd at stride 1, the last group.
        assert_eq!(position(&g, &offsets, 81 + 9 + 1), offsets[offsets.len() - 2]);
    }
}
