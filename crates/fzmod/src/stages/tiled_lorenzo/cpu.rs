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
pub fn inverse(mut d: Vec<i32>, grid: Grid, tile: Tile, delta: bool) -> Vec<i32> {
    let [tz, ty, tx] = tile.0;
    if delta {
        for_each_tile(&mut d, grid, tile, |_, slot| {
            // Row by row, the same predictions as `forward`: the first element adds the one
            // above (or in the plane before), then a prefix sum runs along the row.
            for r in 0..tz * ty {
                let (before, rest) = slot.split_at_mut(r * tx);
                let row = &mut rest[..tx];
                let (ly, lz) = (r % ty, r / ty);
                let first = match (ly, lz) {
                    (1.., _) => before[(r - 1) * tx],
                    (0, 1..) => before[(r - ty) * tx],
                    (0, 0) => 0,
                };
                let mut acc = first;
                for v in row {
                    acc = acc.wrapping_add(*v);
                    *v = acc;
                }
            }
        });
    }
    // Gather rows: natural row (z, y) takes `tx`-runs from the tiles along x.
    let [_, ny, nx] = grid.dims;
    let [_, nty, ntx] = tile_counts(grid, tile);
    let te = tile.elems();
    let mut out = zeroed_vec(grid.len());
    if nx == 0 {
        return out;
    }
    out.par_chunks_mut(nx).enumerate().for_each(|(r, row)| {
        let (z, y) = (r / ny, r % ny);
        let (tile_z, lz, tile_y, ly) = (z / tz, z % tz, y / ty, y % ty);
        for (tile_x, run) in row.chunks_mut(tx).enumerate() {
            let t = (tile_z * nty + tile_y) * ntx + tile_x;
            let start = t * te + (lz * ty + ly) * tx;
            // An element loop, not `copy_from_slice`: runs are a few elements long, and a
            // library memmove call per run cost more than the copy.
            let len = run.len();
            for (o, &v) in run.iter_mut().zip(&d[start..start + len]) {
                *o = v;
            }
        }
    });
    out
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
    fn matches_the_seed_definition_on_one_tile() {
        // 2×3 grid, one 2×4 tile: x>0 from left, x=0 from above, origin vs 0, padding 0.
        let grid = Grid { dims: [1, 2, 3], ndim: 2 };
        let q = vec![5, 7, 4, 9, 1, 1];
        let d = forward(&q, grid, Tile([1, 2, 4]), true);
        assert_eq!(d, vec![5, 2, -3, 0, 4, -8, 0, 0]);
    }
}
