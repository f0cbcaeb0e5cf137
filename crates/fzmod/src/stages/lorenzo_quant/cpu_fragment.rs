//! LorenzoQuant as a fragment of a fused CPU region (cpu_fragment.rs). No prediction reads
//! outside its tile, so a band of the grid that starts on a tile corner (slabs of `tz` planes;
//! in a single plane, bands of `ty` rows; in a single row, `tx` elements) is a grid of its
//! own: each block runs cpu.rs's band forward or its inverse over its own grid, and the
//! outlier lists are joined (forward) or looked up (inverse) in index order.

use super::cpu::{self, BandOutliers, Bands, Geometry};
use super::{CodeMapping, LorenzoQuant, Resolved, Tile};
use crate::archive::ErrorMode;
use crate::cpu_fragment::{nothing, sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Error, Result};
use crate::shape::Grid;
use crate::stage::ErrorBound;
use crate::stages::quantizer::channel::Run;
use crate::stages::quantizer::cpu::{finite_min_max, map_codes_into, Float};
use crate::stages::quantizer::{check_resolved, resolve_abs_bound};

thread_local! {
    /// A thread's pre-quantized values (forward) or sums (inverse) of its current block.
    static SCRATCH: std::cell::Cell<Vec<i32>> = const { std::cell::Cell::new(Vec::new()) };
}

impl LorenzoQuant {
    /// The grid of the whole input `whole` (the recorded one in an inverse, else the array's)
    /// and its bands; `None` where the input is not that grid (the stage walk reports it).
    fn bands(&self, whole: Extent) -> Option<(Grid, Bands)> {
        let (grid, tile) = match self.resolved {
            Some(r) => (r.grid, r.tile),
            None => {
                let n = whole.input_len / self.input.size();
                let grid = Grid::for_stage(whole.shape, n, "LorenzoQuant").ok()?;
                (grid, self.tile.unwrap_or_else(|| Tile::default_for(grid.ndim)))
            }
        };
        let fits = grid.len().checked_mul(self.input.size()) == Some(whole.input_len) && !grid.is_empty();
        fits.then(|| (grid, Bands::of(grid.dims, tile)))
    }
}

impl CpuFragment for LorenzoQuant {
    fn grain(&self, whole: Extent) -> Option<usize> {
        Some(self.bands(whole)?.1.elems * self.input.size())
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn output_len(&self, _: Extent, input: usize) -> usize {
        input / self.input.size() * 2
    }

    fn reads_whole_input(&self) -> bool {
        self.bound.is_none_or(|b| b.mode == ErrorMode::Rel)
    }

    fn forward_blocks<'s>(&'s self, input: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        let bound = ErrorBound::required(self.bound)?;
        // The region cut its blocks along these bands (`grain`): they exist.
        let (grid, bands) = self.bands(whole).ok_or_else(|| corrupt!("LorenzoQuant: no bands in {whole:?}"))?;
        match self.input {
            DType::F32 => Ok(Box::new(Quantize::<f32>::new(self, bound, grid, bands, input)?)),
            _ => Ok(Box::new(Quantize::<f64>::new(self, bound, grid, bands, input)?)),
        }
    }

    fn stated_input_len(&self) -> Option<usize> {
        self.resolved?.grid.len().checked_mul(self.input.size())
    }

    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("LorenzoQuant inverse needs a decoded record".into()))?;
        let channel =
            segments.get(1).copied().flatten().ok_or_else(|| corrupt!("LorenzoQuant outlier channel missing"))?;
        let bands = Bands::of(r.grid.dims, r.tile);
        match self.input {
            DType::F32 => Ok(Box::new(Reconstruct::new(self.mapping, r, r.step as f32, bands, channel)?)),
            _ => Ok(Box::new(Reconstruct::new(self.mapping, r, r.step, bands, channel)?)),
        }
    }
}

/// The forward on values of type `T`, its bound resolved over the whole input.
struct Quantize<'s, T> {
    stage: &'s LorenzoQuant,
    bound: ErrorBound,
    range: Option<(f64, f64)>,
    grid: Grid,
    bands: Bands,
    geometry: Geometry<T>,
}

impl<'s, T: Float> Quantize<'s, T> {
    fn new(stage: &'s LorenzoQuant, bound: ErrorBound, grid: Grid, bands: Bands, input: View<'s>) -> Result<Self> {
        let x: &[T] = bytemuck::try_cast_slice(input.native_bytes())
            .map_err(|_| Error::Pipeline("LorenzoQuant region input is not its type".into()))?;
        let range = match bound.mode {
            ErrorMode::Abs => None,
            ErrorMode::Rel => finite_min_max(x),
        };
        let abs_bound = resolve_abs_bound(bound, range);
        // Refuse before quantizing, as the stage walk does.
        check_resolved("LorenzoQuant", stage.input, bound, range, abs_bound, T::at_most(abs_bound).to_f64())?;
        let (dims, tile, mapping, step) = (grid.dims, bands.tile, stage.mapping, T::at_most(abs_bound));
        Ok(Quantize { stage, bound, range, grid, bands, geometry: Geometry { dims, tile, mapping, step, abs_bound } })
    }
}

impl<T: Float> BlockForward for Quantize<'_, T> {
    fn block(&self, at: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let x: &[T] = bytemuck::cast_slice(input);
        let geometry = Geometry { dims: self.bands.dims_of(x.len()), ..self.geometry };
        let codes: &mut [u16] = bytemuck::cast_slice_mut(out.bytes_mut());
        let base = at / std::mem::size_of::<T>();
        let mut p = SCRATCH.take();
        let outliers: BandOutliers = cpu::band_forward(x, base, geometry, &mut p, codes);
        SCRATCH.set(p);
        Box::new(outliers)
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        // The codes are the region's: only the outliers are joined here.
        let f = cpu::joined(Vec::new(), sides_of::<BandOutliers>(sides), std::mem::size_of::<T>());
        let resolved = Resolved {
            abs_bound: self.geometry.abs_bound,
            step: self.geometry.step.to_f64(),
            tile: self.bands.tile,
            grid: self.grid,
            num_delta_outliers: f.num_delta_outliers,
            num_value_outliers: f.num_value_outliers,
            layout: f.layout,
        };
        let record = self.stage.record(self.bound, self.range, &resolved)?;
        Ok((vec![None, Some(Buffer::U8(f.outliers))], record))
    }
}

/// The inverse into values of type `T`, the outlier channel parsed (and checked) whole
/// before any block.
struct Reconstruct<T> {
    mapping: CodeMapping,
    step: T,
    bands: Bands,
    deltas: Vec<Run<i32>>,
    values: Vec<Run<T>>,
}

impl<T: Float> Reconstruct<T> {
    fn new(mapping: CodeMapping, r: Resolved, step: T, bands: Bands, channel: &[u8]) -> Result<Self> {
        let counts = (r.num_delta_outliers, r.num_value_outliers);
        let (deltas, values) = cpu::parse_channel::<T>(channel, counts, r.grid.len(), r.layout)?;
        Ok(Reconstruct { mapping, step, bands, deltas, values })
    }
}

impl<T: Float> BlockInverse for Reconstruct<T> {
    fn block(&self, at: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        let codes: &[u16] = bytemuck::cast_slice(output);
        let values: &mut [T] = bytemuck::cast_slice_mut(out);
        let base = at / std::mem::size_of::<T>();
        let mut p = SCRATCH.take();
        p.resize(codes.len(), 0);
        cpu::decode_codes(self.mapping, codes, &mut p);
        patch(&mut p, &self.deltas, base);
        cpu::block_prefix_sums(&mut p, self.bands.dims_of(codes.len()), self.bands.tile);
        let step = self.step;
        map_codes_into(&p, values, &|q| T::reconstruct(q, step), &|_| false);
        patch(values, &self.values, base);
        SCRATCH.set(p);
        Ok(nothing())
    }
}

/// The parts of `runs` (in increasing order, without overlap) that fall on `out`, the
/// elements from `base` on.
fn patch<V: Copy>(out: &mut [V], runs: &[Run<V>], base: usize) {
    let end = base + out.len();
    let first = runs.partition_point(|r| r.start + r.len <= base);
    for r in runs[first..].iter().take_while(|r| r.start < end) {
        let (from, to) = (r.start.max(base), (r.start + r.len).min(end));
        out[from - base..to - base].fill(r.value);
    }
}

#[cfg(test)]
mod tests {
    use super::patch;
    use crate::graph::cpu_region::tests::fused_as_walked;
    use crate::stages::quantizer::channel::Run;

    #[test]
    fn lorenzo_quant_fuses_as_walked() {
        fused_as_walked(&crate::config::preset("fzgpu", &[1]).unwrap());
        // A tile that does not divide a region block, other code mappings.
        let coded = |quantizer: &str| {
            let coder = r#"
                [[stage]]
                name = "c"
                type = "BitplaneRZE"
                inputs = [{ from = "q", port = "codes" }]
            "#;
            fused_as_walked(&crate::config::from_toml(&format!("{quantizer}{coder}")).unwrap());
        };
        coded(
            r#"
            [[stage]]
            name = "q"
            type = "LorenzoQuant"
            tile_x = 100
            code_mapping = "zigzag"
        "#,
        );
        coded(
            r#"
            [[stage]]
            name = "q"
            type = "LorenzoQuant"
            tile_x = 7
            code_mapping = "radius"
            quant_radius = 3
        "#,
        );
    }

    #[test]
    fn patches_take_the_part_of_each_run_on_the_block() {
        let runs = [
            Run { start: 2, len: 3, value: 7 },
            Run { start: 9, len: 1, value: 8 },
            Run { start: 10, len: 6, value: 9 },
        ];
        for base in 0..18 {
            for len in 0..8 {
                let mut got = vec![0; len];
                patch(&mut got, &runs, base);
                let mut whole = vec![0; 24];
                patch(&mut whole, &runs, 0);
                assert_eq!(got, whole[base..base + len], "block {base}..{}", base + len);
            }
        }
    }
}
