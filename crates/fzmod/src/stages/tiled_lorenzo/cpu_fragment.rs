//! TiledLorenzo as a fragment of a fused CPU region (cpu_fragment.rs). No prediction crosses
//! a tile, so a band of the grid whose tiles make a contiguous run of the tile-major output
//! (slabs of `tz` planes; in a single plane, bands of `ty` rows; in a single row, `tx`
//! elements) is a grid of its own: each block is cut along bands and runs cpu.rs's forward
//! and inverse over its own grid, on its core.

use super::{cpu, Tile, TiledLorenzo};
use crate::cpu_fragment::{nothing, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::{corrupt, Result};
use crate::shape::Grid;

/// How a grid is cut into bands: its elements per band, and the tile-major elements a band's
/// tiles take.
#[derive(Clone, Copy)]
struct Bands {
    grid: Grid,
    tile: Tile,
    elems: usize,
    padded: usize,
}

impl Bands {
    fn of(grid: Grid, tile: Tile) -> Bands {
        let ([nz, ny, nx], [tz, ty, tx]) = (grid.dims, tile.0);
        let (elems, tiles) = if nz > 1 {
            (tz * ny * nx, ny.div_ceil(ty) * nx.div_ceil(tx))
        } else if ny > 1 {
            (ty * nx, nx.div_ceil(tx))
        } else {
            (tx, 1)
        };
        Bands { grid, tile, elems, padded: tiles * tile.elems() }
    }

    /// The grid of `elems` elements from the start of a band (whole bands but at the grid's
    /// end).
    fn grid_of(&self, elems: usize) -> Grid {
        let [_, ny, nx] = self.grid.dims;
        let dims = match self.grid.dims {
            [1, 1, _] => [1, 1, elems],
            [1, _, _] => [1, elems / nx, nx],
            _ => [elems / (ny * nx), ny, nx],
        };
        Grid { dims, ..self.grid }
    }
}

impl TiledLorenzo {
    /// The bands of the whole input `whole`: the recorded grid's (inverse), else the array's
    /// (forward); `None` where the input is not that grid (the stage walk reports it).
    fn bands(&self, whole: Extent) -> Option<Bands> {
        let grid = self.grid.unwrap_or_else(|| Grid::from_shape(whole.shape));
        let fits = grid.len().checked_mul(4) == Some(whole.input_len) && !grid.is_empty();
        fits.then(|| Bands::of(grid, self.tile_for(grid)))
    }
}

impl CpuFragment for TiledLorenzo {
    fn grain(&self, whole: Extent) -> Option<usize> {
        Some(self.bands(whole)?.elems * 4)
    }

    fn is_coder(&self) -> bool {
        false
    }

    /// Whole bands' tiles; a partial band at the end is padded to whole tiles.
    fn output_len(&self, whole: Extent, input: usize) -> usize {
        self.bands(whole).map_or(0, |b| (input / 4).div_ceil(b.elems) * b.padded * 4)
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        // The region cut its blocks along these bands (`grain`): they exist.
        let bands = self.bands(whole).ok_or_else(|| corrupt!("TiledLorenzo: no bands in {whole:?}"))?;
        Ok(Box::new(Blocks { stage: self, bands }))
    }

    fn stated_input_len(&self) -> Option<usize> {
        self.grid?.len().checked_mul(4)
    }

    fn inverse_blocks<'s>(&'s self, _: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let whole = Extent { shape: &[], input_len: self.stated_input_len().unwrap_or(0) };
        let bands = self.bands(whole).ok_or_else(|| corrupt!("TiledLorenzo: no bands in its recorded grid"))?;
        Ok(Box::new(Blocks { stage: self, bands }))
    }
}

/// The stage's bands, a block of them at a time.
struct Blocks<'s> {
    stage: &'s TiledLorenzo,
    bands: Bands,
}

impl BlockForward for Blocks<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let out = out.bytes_mut();
        let grid = self.bands.grid_of(input.len() / 4);
        // Only a grid that does not fill its tiles leaves padding, which must be 0.
        if out.len() != input.len() {
            out.fill(0);
        }
        cpu::forward_into(
            bytemuck::cast_slice(input),
            grid,
            self.bands.tile,
            self.stage.delta,
            bytemuck::cast_slice_mut(out),
        );
        nothing()
    }

    fn finish(self: Box<Self>, _: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        Ok((vec![None], self.stage.record(self.bands.tile, self.bands.grid)))
    }
}

impl BlockInverse for Blocks<'_> {
    fn block(&self, _: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        let grid = self.bands.grid_of(out.len() / 4);
        let tile = self.bands.tile;
        cpu::inverse_into(bytemuck::cast_slice(output), grid, tile, self.stage.delta, bytemuck::cast_slice_mut(out));
        Ok(nothing())
    }
}
