//! CPU reference of TiledLorenzo (cuSZp3's tiled prediction; layout in docs/FORMAT.md).

use super::Tile;
use crate::element::zeroed_vec;
use crate::shape::Grid;
use rayon::prelude::*;

/// Tiles per parallel work item.
const TILES_PER_TASK: usize = 256;

/// Number of tiles along each axis `[z, y, x]`.
fn tile_counts(grid: Grid, tile: Tile) -> [usize; 3] {
    [0, 1, 2].map(|a| grid.dims[a].div_ceil(tile.0[a]))
}

/// Length of the tile-major output, `None` on overflow.
pub fn padded_len(grid: Grid, tile: Tile) -> Option<usize> {
    tile_counts(grid, tile).iter().try_fold(tile.elems(), |a, &n| a.checked_mul(n))
}

/// Visit every tile: `f(tile origin [z, y, x], tile-major slot of the tile)`.
fn for_each_tile(out: &mut [i32], grid: Grid, tile: Tile, f: impl Fn([usize; 3], &mut [i32]) + Sync) {
    let te = tile.elems();
    let [_, nty, ntx] = tile_counts(grid, tile);
    out.par_chunks_mut(te * TILES_PER_TASK).enumerate().for_each(|(task, chunk)| {
        for (k, slot) in chunk.chunks_mut(te).enumerate() {
            let t = task * TILES_PER_TASK + k;
            let (tz, ty, tx) = (t / (nty * ntx), (t / ntx) % nty, t % ntx);
            f([tz * tile.0[0], ty * tile.0[1], tx * tile.0[2]], slot);
        }
    });
}

/// Natural order → tile-major deltas (padding positions are 0).
pub fn forward(q: &[i32], grid: Grid, tile: Tile, delta: bool) -> Vec<i32> {
    let mut out = zeroed_vec(padded_len(grid, tile).expect("grid from a real buffer"));
    let [nz, ny, nx] = grid.dims;
    let [tz, ty, tx] = tile.0;
    for_each_tile(&mut out, grid, tile, |[z0, y0, x0], slot| {
        let width = tx.min(nx - x0);
        for lz in 0..tz.min(nz - z0) {
            for ly in 0..ty.min(ny - y0) {
                let at = ((z0 + lz) * ny + (y0 + ly)) * nx + x0;
                let (row, o) = (&q[at..at + width], &mut slot[(lz * ty + ly) * tx..][..width]);
                if !delta {
                    o.copy_from_slice(row);
                    continue;
                }
                // A row's first element is predicted from the row above in the tile, else
                // from the plane before, else from 0; the others from their left neighbour.
                let first = match (ly, lz) {
                    (1.., _) => q[at - nx],
                    (0, 1..) => q[at - nx * ny],
                    (0, 0) => 0,
                };
                o[0] = row[0].wrapping_sub(first);
                for ((o, &v), &left) in o[1..].iter_mut().zip(&row[1..]).zip(row) {
                    *o = v.wrapping_sub(left);
                }
            }
        }
    });
    out
}

/// Tile-major deltas → natural order. Padding deltas are never read into real elements.
///
/// One pass: each natural row (z, y) takes `tx`-runs from the tiles along x and, with deltas,
/// sums them up as it goes; a run's first element adds the element above it in the tile, or
/// the one in the plane before (both already in `out`): the predictions of `forward`. Rows
/// depend on earlier rows of their tile only, so the parallel units hold whole tiles: slabs of
/// `tz` planes, bands of `ty` rows where tz is 1, pieces of rows where tiles are single runs.
pub fn inverse(d: Vec<i32>, grid: Grid, tile: Tile, delta: bool) -> Vec<i32> {
    let [tz, ty, tx] = tile.0;
    let [_, ny, nx] = grid.dims;
    let mut out = zeroed_vec(grid.len());
    if nx == 0 || ny == 0 {
        return out;
    }
    let runs = Runs { d: &d, grid, tile, delta };
    let slab = tz * ny;
    out.par_chunks_mut(slab * nx).enumerate().for_each(|(zs, slab_rows)| {
        if tz > 1 {
            return runs.rows(slab_rows, zs * slab);
        }
        slab_rows.par_chunks_mut(ty * nx).enumerate().for_each(|(b, band)| {
            let first = zs * slab + b * ty;
            if ty > 1 {
                return runs.rows(band, first);
            }
            // Tiles of one row: every run stands alone.
            band.par_chunks_mut(tx * TILES_PER_TASK).enumerate().for_each(|(k, piece)| {
                runs.row(piece, first, k * TILES_PER_TASK, None);
            });
        });
    });
    out
}

/// The deltas of [`inverse`] and their layout.
struct Runs<'a> {
    d: &'a [i32],
    grid: Grid,
    tile: Tile,
    delta: bool,
}

impl Runs<'_> {
    /// Natural rows `first..` (`rows` holds whole rows, in order, starting a tile's first row).
    fn rows(&self, rows: &mut [i32], first: usize) {
        let [tz, ty, _] = self.tile.0;
        let [_, ny, nx] = self.grid.dims;
        for i in 0..rows.len() / nx {
            let r = first + i;
            let (before, rest) = rows.split_at_mut(i * nx);
            // The row above in the tile, else the row in the plane before, else none.
            let above = match ((r % ny) % ty, (r / ny) % tz) {
                (1.., _) => Some(&before[before.len() - nx..]),
                (0, 1..) => Some(&before[before.len() - nx * ny..]),
                (0, 0) => None,
            };
            self.row(&mut rest[..nx], r, 0, above);
        }
    }

    /// Tiles `tile_x0..` of natural row `r` into `row` (from the start of tile `tile_x0`).
    #[inline]
    fn row(&self, row: &mut [i32], r: usize, tile_x0: usize, above: Option<&[i32]>) {
        let [tz, ty, tx] = self.tile.0;
        let [_, nty, ntx] = tile_counts(self.grid, self.tile);
        let (z, y) = (r / self.grid.dims[1], r % self.grid.dims[1]);
        let (tile_z, lz, tile_y, ly) = (z / tz, z % tz, y / ty, y % ty);
        let te = self.tile.elems();
        for (tile_x, run) in (tile_x0..).zip(row.chunks_mut(tx)) {
            let t = (tile_z * nty + tile_y) * ntx + tile_x;
            let start = t * te + (lz * ty + ly) * tx;
            let src = &self.d[start..start + run.len()];
            if !self.delta {
                // An element loop, not `copy_from_slice`: runs are a few elements long, and a
                // library memmove call per run cost more than the copy.
                run.iter_mut().zip(src).for_each(|(o, &v)| *o = v);
                continue;
            }
            let mut acc = above.map_or(0, |a| a[tile_x * tx]);
            for (o, &v) in run.iter_mut().zip(src) {
                acc = acc.wrapping_add(v);
                *o = acc;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(nz in 1usize..7, ny in 1usize..13, nx in 1usize..21,
                      tz in 1usize..5, ty in 1usize..9, tx in 1usize..9,
                      delta in any::<bool>(), seed in any::<u32>()) {
            let grid = Grid { dims: [nz, ny, nx], ndim: 3 };
            let tile = Tile([tz, ty, tx]);
            let q: Vec<i32> = (0..grid.len() as u32).map(|i| i.wrapping_mul(seed | 1) as i32 >> 3).collect();
            let d = forward(&q, grid, tile, delta);
            prop_assert_eq!(d.len(), padded_len(grid, tile).unwrap());
            prop_assert_eq!(inverse(d, grid, tile, delta), q);
        }
    }

    proptest! {
        /// The row-wise forward against the per-element definition: left neighbour inside a
        /// tile row, else the element above, else the one in the plane before, else 0.
        #[test]
        fn forward_matches_the_definition(nz in 1usize..6, ny in 1usize..11, nx in 1usize..19,
                                          tz in 1usize..5, ty in 1usize..9, tx in 1usize..9, seed in any::<u32>()) {
            let grid = Grid { dims: [nz, ny, nx], ndim: 3 };
            let tile = Tile([tz, ty, tx]);
            let q: Vec<i32> = (0..grid.len() as u32).map(|i| i.wrapping_mul(seed | 1) as i32 >> 5).collect();
            let d = forward(&q, grid, tile, true);
            let at = |z: usize, y: usize, x: usize| q[(z * ny + y) * nx + x];
            let [_, nty, ntx] = tile_counts(grid, tile);
            for (z, y, x) in (0..nz).flat_map(|z| (0..ny).flat_map(move |y| (0..nx).map(move |x| (z, y, x)))) {
                let pred = match (x % tx, y % ty, z % tz) {
                    (1.., _, _) => at(z, y, x - 1),
                    (0, 1.., _) => at(z, y - 1, x),
                    (0, 0, 1..) => at(z - 1, y, x),
                    (0, 0, 0) => 0,
                };
                let t = ((z / tz) * nty + y / ty) * ntx + x / tx;
                let slot = t * tile.elems() + ((z % tz) * ty + y % ty) * tx + x % tx;
                prop_assert_eq!(d[slot], at(z, y, x).wrapping_sub(pred));
            }
        }
    }

    #[test]
    fn long_rows_of_single_run_tiles_round_trip() {
        // Tiles of one row split a row into several parallel pieces (TILES_PER_TASK tiles each).
        for (dims, tile) in [([1, 3, 5000], [1, 1, 7]), ([2, 2, 2100], [1, 1, 4]), ([1, 1, 70_000], [1, 1, 64])] {
            let grid = Grid { dims, ndim: 3 };
            let q: Vec<i32> = (0..grid.len() as u32).map(|i| i.wrapping_mul(0x9e37_79b9) as i32 >> 7).collect();
            for delta in [false, true] {
                assert_eq!(inverse(forward(&q, grid, Tile(tile), delta), grid, Tile(tile), delta), q);
            }
        }
    }

    #[test]
    fn matches_the_seed_definition_on_one_tile() {
        // 2×3 grid, one 2×4 tile: x>0 from left, x=0 from above, origin vs 0, padding 0.
        let grid = Grid { dims: [1, 2, 3], ndim: 2 };
        let q = vec![5, 7, 4, 9, 1, 1];
        let d = forward(&q, grid, Tile([1, 2, 4]), true);
        assert_eq!(d, vec![5, 2, -3, 0, 4, -8, 0, 0]);
    }
}
