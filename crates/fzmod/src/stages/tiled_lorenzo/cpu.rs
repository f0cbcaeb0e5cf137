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

/// Natural order → tile-major deltas (padding positions are 0).
pub fn forward(q: &[i32], grid: Grid, tile: Tile, delta: bool) -> Vec<i32> {
    let mut out = zeroed_vec(padded_len(grid, tile).expect("grid from a real buffer"));
    let te = tile.elems();
    out.par_chunks_mut(te * TILES_PER_TASK).enumerate().for_each(|(task, slots)| {
        forward_tiles(q, grid, tile, delta, task * TILES_PER_TASK, slots);
    });
    out
}

/// [`forward`] on one core into `out` (zeroed, of the padded length): a fused region's block
/// (cpu_fragment.rs), whose tiles are those of its own grid. Row by row, as [`inverse`] goes:
/// each natural row puts its `tx`-runs into the tiles along x (reading the input once, in
/// order, where a tile at a time reads `ty` rows apart), with the predictions of
/// [`forward_tile`]. A second form of the same map: the region tests hold it to the tile walk.
pub(crate) fn forward_into(q: &[i32], grid: Grid, tile: Tile, delta: bool, out: &mut [i32]) {
    let [_, ny, nx] = grid.dims;
    if nx == 0 {
        return;
    }
    let [_, nty, ntx] = tile_counts(grid, tile);
    let [_, ty, tx] = tile.0;
    let te = tile.elems();
    let mut at = RowAt::of(0, grid, tile);
    for (r, row) in q.chunks_exact(nx).enumerate() {
        // The row above in the tile, else the row in the plane before, else none.
        let above = match (at.ly, at.lz) {
            (1.., _) => Some(&q[(r - 1) * nx..][..nx]),
            (0, 1..) => Some(&q[(r - ny) * nx..][..nx]),
            (0, 0) => None,
        };
        let first = (at.tile_z * nty + at.tile_y) * ntx * te + (at.lz * ty + at.ly) * tx;
        let slots = &mut out[first..];
        let whole = match tx {
            4 => forward_whole_runs::<4>(row, above, delta, te, slots),
            8 => forward_whole_runs::<8>(row, above, delta, te, slots),
            _ => 0,
        };
        for (i, run) in row[whole..].chunks(tx).enumerate() {
            let x0 = whole + i * tx;
            let start = above.map_or(0, |a| a[x0]);
            forward_run(run, start, delta, &mut slots[x0 / tx * te..][..run.len()]);
        }
        at = at.next(grid, tile);
    }
}

/// The whole runs of `TX` elements at the start of `row` into their slots (each `te` after
/// the one before, from the start of `slots`); how many elements they cover.
#[inline(always)]
fn forward_whole_runs<const TX: usize>(
    row: &[i32],
    above: Option<&[i32]>,
    delta: bool,
    te: usize,
    slots: &mut [i32],
) -> usize {
    let (runs, _) = row.as_chunks::<TX>();
    for (i, run) in runs.iter().enumerate() {
        let slot: &mut [i32; TX] = (&mut slots[i * te..][..TX]).try_into().expect("TX elements");
        forward_run(run, above.map_or(0, |a| a[i * TX]), delta, slot);
    }
    runs.len() * TX
}

/// One run into its slot: copied, or its deltas, the first from `start` (the element above
/// it in the tile, or in the plane before, or 0).
#[inline(always)]
fn forward_run(run: &[i32], start: i32, delta: bool, slot: &mut [i32]) {
    if !delta {
        // An element loop, not `copy_from_slice`: see `Runs::run`.
        slot.iter_mut().zip(run).for_each(|(o, &v)| *o = v);
        return;
    }
    let mut prev = start;
    for (o, &v) in slot.iter_mut().zip(run) {
        *o = v.wrapping_sub(prev);
        prev = v;
    }
}

/// The tiles from tile-major index `first` on into their slots `slots` (zeroed).
fn forward_tiles(q: &[i32], grid: Grid, tile: Tile, delta: bool, first: usize, slots: &mut [i32]) {
    let [_, nty, ntx] = tile_counts(grid, tile);
    for (k, slot) in slots.chunks_mut(tile.elems()).enumerate() {
        let t = first + k;
        let (tz, ty, tx) = (t / (nty * ntx), (t / ntx) % nty, t % ntx);
        forward_tile(q, grid, tile, delta, [tz * tile.0[0], ty * tile.0[1], tx * tile.0[2]], slot);
    }
}

/// The tile at origin `[z0, y0, x0]` into its slot.
fn forward_tile(q: &[i32], grid: Grid, tile: Tile, delta: bool, [z0, y0, x0]: [usize; 3], slot: &mut [i32]) {
    let [nz, ny, nx] = grid.dims;
    let [tz, ty, tx] = tile.0;
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
                runs.row(piece, RowAt::of(first, grid, tile), k * TILES_PER_TASK, None);
            });
        });
    });
    out
}

/// [`inverse`] on one core into `out` (the grid's elements) from the tile-major `d`: a fused
/// region's block (cpu_fragment.rs), whose tiles are those of its own grid.
pub(crate) fn inverse_into(d: &[i32], grid: Grid, tile: Tile, delta: bool, out: &mut [i32]) {
    if grid.dims[2] > 0 {
        Runs { d, grid, tile, delta }.rows(out, 0);
    }
}

/// The deltas of [`inverse`] and their layout.
struct Runs<'a> {
    d: &'a [i32],
    grid: Grid,
    tile: Tile,
    delta: bool,
}

/// Where a natural row lies in the tiling: tile and offset along z and y.
#[derive(Clone, Copy)]
struct RowAt {
    y: usize,
    tile_z: usize,
    lz: usize,
    tile_y: usize,
    ly: usize,
}

impl RowAt {
    /// Natural row `r` (z · ny + y).
    fn of(r: usize, grid: Grid, tile: Tile) -> RowAt {
        let [tz, ty, _] = tile.0;
        let (z, y) = (r / grid.dims[1], r % grid.dims[1]);
        RowAt { y, tile_z: z / tz, lz: z % tz, tile_y: y / ty, ly: y % ty }
    }

    /// The row after this one, by counting (a division per row cost more than its run sums).
    fn next(self, grid: Grid, tile: Tile) -> RowAt {
        let [tz, ty, _] = tile.0;
        let mut at = RowAt { y: self.y + 1, ly: self.ly + 1, ..self };
        if at.ly == ty {
            (at.ly, at.tile_y) = (0, at.tile_y + 1);
        }
        if at.y == grid.dims[1] {
            (at.y, at.ly, at.tile_y, at.lz) = (0, 0, 0, at.lz + 1);
            if at.lz == tz {
                (at.lz, at.tile_z) = (0, at.tile_z + 1);
            }
        }
        at
    }
}

impl Runs<'_> {
    /// Natural rows `first..` (`rows` holds whole rows, in order, starting a tile's first row).
    fn rows(&self, rows: &mut [i32], first: usize) {
        let [_, ny, nx] = self.grid.dims;
        let mut at = RowAt::of(first, self.grid, self.tile);
        for i in 0..rows.len() / nx {
            let (before, rest) = rows.split_at_mut(i * nx);
            // The row above in the tile, else the row in the plane before, else none.
            let above = match (at.ly, at.lz) {
                (1.., _) => Some(&before[before.len() - nx..]),
                (0, 1..) => Some(&before[before.len() - nx * ny..]),
                (0, 0) => None,
            };
            self.row(&mut rest[..nx], at, 0, above);
            at = at.next(self.grid, self.tile);
        }
    }

    /// Tiles `tile_x0..` of the natural row at `at` into `row` (from the start of tile `tile_x0`).
    #[inline]
    fn row(&self, row: &mut [i32], at: RowAt, tile_x0: usize, above: Option<&[i32]>) {
        let [_, ty, tx] = self.tile.0;
        let [_, nty, ntx] = tile_counts(self.grid, self.tile);
        // The run of tile `tile_x0` in the tile-major deltas; each next tile's is `te` on.
        let first = ((at.tile_z * nty + at.tile_y) * ntx + tile_x0) * self.tile.elems() + (at.lz * ty + at.ly) * tx;
        // cuSZp3's tile widths with whole runs of a known length (unrolled sums, no loop per
        // run); any other width, and a row's last partial run, run element by element.
        let whole = match tx {
            4 => self.whole_runs::<4>(row, first, above),
            8 => self.whole_runs::<8>(row, first, above),
            _ => 0,
        };
        let at = first + whole / tx * self.tile.elems();
        self.runs(&mut row[whole..], at, above.map(|a| &a[whole..]));
    }

    /// The whole runs of `TX` elements at the start of `row`; how many elements they cover.
    #[inline(always)]
    fn whole_runs<const TX: usize>(&self, row: &mut [i32], first: usize, above: Option<&[i32]>) -> usize {
        let te = self.tile.elems();
        let (runs, _) = row.as_chunks_mut::<TX>();
        for (i, run) in runs.iter_mut().enumerate() {
            let src: &[i32; TX] = self.d[first + i * te..][..TX].try_into().expect("TX elements");
            self.run(run, src, above.map_or(0, |a| a[i * TX]));
        }
        runs.len() * TX
    }

    /// Runs of any width (the last may be partial) at the start of `row`, the first at `at`.
    fn runs(&self, row: &mut [i32], mut at: usize, above: Option<&[i32]>) {
        let tx = self.tile.0[2];
        for (i, run) in row.chunks_mut(tx).enumerate() {
            let src = &self.d[at..at + run.len()];
            at += self.tile.elems();
            self.run(run, src, above.map_or(0, |a| a[i * tx]));
        }
    }

    /// One run from its deltas `src`: copied, or summed up from `start` (the element above it
    /// in the tile, or in the plane before, or 0).
    #[inline(always)]
    fn run(&self, run: &mut [i32], src: &[i32], start: i32) {
        if !self.delta {
            // An element loop, not `copy_from_slice`: runs are a few elements long, and a
            // library memmove call per run cost more than the copy.
            run.iter_mut().zip(src).for_each(|(o, &v)| *o = v);
            return;
        }
        let mut acc = start;
        for (o, &v) in run.iter_mut().zip(src) {
            acc = acc.wrapping_add(v);
            *o = acc;
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
