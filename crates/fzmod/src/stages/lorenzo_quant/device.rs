//! LorenzoQuant on the device (kernels in device.cu, compiled after the Quantizer's): bound
//! resolution, pre-quantization, tiled deltas and codes, then the two outlier lists written
//! in index order by the Quantizer's list machinery (`write_lists`, in the smaller layout);
//! the inverse parses the (small) channel with the CPU's own parser.

use super::{cpu, CodeMapping, LorenzoQuant, Resolved, Tile};
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, tile_loop_grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
    Slot, THREADS,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use crate::shape::Grid;
use crate::stages::quantizer::channel::Run;
use crate::stages::quantizer::device::{
    channel_guess, layout_of, resolve, run_triples, write_lists, ListArgs, OutlierList, TILE,
};
use cudarc::driver::{DeviceRepr, PushKernelArg};

/// Threads per list tile (`Q_THREADS`).
const TILE_THREADS: u64 = 256;

/// `struct KeptDeltas` of device.cu, passed by value: where the second pass keeps the deltas
/// without a code, in rank order of their `unfit` bits.
#[repr(C)]
#[derive(Clone, Copy)]
struct KeptDeltas {
    unfit: u64,
    unfit_base: u64,
    deltas: u64,
    capacity: u64,
}

const _: () = assert!(std::mem::size_of::<KeptDeltas>() == 32);
// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for KeptDeltas {}

/// Unfit words per rank group (`LQ_RANK_WORDS`).
const RANK_WORDS: usize = 8;

/// Room for kept deltas before the first run: one per 64 elements (real fields have far
/// fewer); a run that finds more repeats with room for all of them.
fn kept_deltas_guess(n: usize) -> usize {
    (n / 64).max(1024)
}
/// Outlier lists (`LQ_DELTAS`, `LQ_VALUES`), in channel order.
const LISTS: [u32; 2] = [0, 1];

pub(crate) fn program(real: DType) -> Program {
    Program::new(
        concat!(include_str!("../quantizer/device.cu"), include_str!("device.cu")),
        format!("#define REAL_F64 {}\n", u8::from(real == DType::F64)),
    )
}

/// `struct Geometry` of device.cu: grid and tile extents.
#[repr(C)]
#[derive(Clone, Copy)]
struct Geometry {
    dims: [u64; 3],
    tile: [u64; 3],
}

const _: () = assert!(std::mem::size_of::<Geometry>() == 48);

/// Largest tile (elements) whose inverse runs in shared memory (`LQ_TILE_MAX`), and that
/// kernel's threads per tile (`LQ_TILE_THREADS`).
const TILE_MAX: u64 = 4096;
const INVERSE_THREADS: u64 = 256;
/// Most tiles one thread block of that kernel takes (`LQ_GROUP`).
const GROUP: u64 = 64;
/// Most rows of a tile the band kernels take (`LQ_BAND_ROWS`), and their threads per block
/// (`LQ_BAND_THREADS`).
const BAND_ROWS: u64 = 16;
const BAND_THREADS: u64 = 256;
/// Threads per block of `lq_predict` (a warp per tile).
const PREDICT_THREADS: u64 = 256;

// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for Geometry {}

impl Geometry {
    fn new(grid: Grid, tile: Tile) -> Geometry {
        Geometry { dims: grid.dims.map(|d| d as u64), tile: tile.0.map(|t| t as u64) }
    }

    /// Whether `lq_band_forward` and `lq_band_inverse` serve these tiles: one element deep in
    /// z, rows of a power of two up to a warp (`tx`), columns up to `LQ_BAND_ROWS`.
    fn banded(&self) -> bool {
        let [tz, ty, tx] = self.tile;
        tz == 1 && ty <= BAND_ROWS && tx.is_power_of_two() && tx <= 32
    }

    /// Thread blocks of `lq_band_forward` and `lq_band_inverse`: a row of blocks across x
    /// per band of `ty` rows.
    fn band_blocks(&self) -> u64 {
        let [nz, ny, nx] = self.dims;
        nz * ny.div_ceil(self.tile[1]) * nx.div_ceil(BAND_THREADS)
    }

    /// Tiles covering the grid (`lq_predict` runs a warp per tile).
    fn tiles(&self) -> u64 {
        (0..3).map(|a| self.dims[a].div_ceil(self.tile[a])).product()
    }

    /// Threads of lq_prefix along `axis` (0 = x, 1 = y, 2 = z): one per tile segment of a line.
    fn segments(&self, axis: usize) -> u64 {
        let [nz, ny, nx] = self.dims;
        let seg = |d: u64, t: u64| d.div_ceil(t);
        match axis {
            0 => nz * ny * seg(nx, self.tile[2]),
            1 => nz * seg(ny, self.tile[1]) * nx,
            _ => seg(nz, self.tile[0]) * ny * nx,
        }
    }
}

impl CodeMapping {
    /// (mapping, radius) as the kernels take them.
    fn device_args(self) -> (u32, u32) {
        (u32::from(self.code()), self.radius())
    }
}

impl DeviceStage for LorenzoQuant {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let bound = self.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let [x] = inputs else { return Err(Error::Pipeline("LorenzoQuant takes one input".into())) };
        let n = x.known_len()?;
        let grid_shape = Grid::for_stage(&run.shape, n, "LorenzoQuant")?;
        let tile = self.tile.unwrap_or_else(|| Tile::default_for(grid_shape.ndim));
        let geometry = Geometry::new(grid_shape, tile);
        // lq_prequant's flag for lq_predict: any value outlier (a zeroed slot).
        let any_outlier = if geometry.banded() { 0 } else { run.slot()?.1 };
        let program = program(self.input);
        let k = |name| run.kernel(&program, name);
        let (count, starts, export) = (k("lq_list_count")?, k("q_tile_starts")?, k("lq_export")?);
        let params = resolve(run, &program, x, bound)?;
        let codes = run.alloc(DType::U16, n)?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, (mapping, radius)) = (n as u64, self.mapping.device_args());
        let elementwise = grid(n64, u64::from(THREADS));
        let ntiles = (n64).div_ceil(TILE).max(1);
        // Which tiles hold entries of each list (lq_mark), for lq_list_count.
        let tile_any = run.alloc(DType::U32, ntiles as usize)?;
        run.zero(&tile_any)?;
        // One bit per element whose delta has no code (lq_mark_unfit): the only deltas kept.
        let nwords = n.div_ceil(32).max(1);
        let unfit = run.alloc(DType::U32, nwords)?;
        run.zero(&unfit)?;
        // Pre-quantized values, where the tiles are not flat bands (pass 3 reads them again).
        let mut p_values = None;
        if geometry.banded() {
            // SAFETY: argument list matches device.cu; every buffer holds n elements.
            unsafe {
                s.launch_builder(&k("lq_band_forward")?)
                    .arg(&p(x))
                    .arg(&p(&params))
                    .arg(&geometry)
                    .arg(&mapping)
                    .arg(&radius)
                    .arg(&p(&codes))
                    .arg(&p(&tile_any))
                    .arg(&p(&unfit))
                    .launch(grid(geometry.band_blocks() * BAND_THREADS, BAND_THREADS))
                    .map_err(device_error)?;
            }
        } else {
            let p_values = p_values.insert(run.alloc(DType::I32, n)?);
            // SAFETY: argument lists match device.cu; every buffer holds n elements, the
            // slot is a live u64.
            unsafe {
                s.launch_builder(&k("lq_prequant")?)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&p(&params))
                    .arg(&p(p_values))
                    .arg(&any_outlier)
                    .arg(&p(&tile_any))
                    .launch(elementwise)
                    .map_err(device_error)?;
                // A warp per tile gives the value outliers their prediction.
                s.launch_builder(&k("lq_predict")?)
                    .arg(&p(x))
                    .arg(&p(&params))
                    .arg(&geometry)
                    .arg(&any_outlier)
                    .arg(&p(p_values))
                    .launch(grid(geometry.tiles() * 32, PREDICT_THREADS))
                    .map_err(device_error)?;
                s.launch_builder(&k("lq_delta")?)
                    .arg(&p(p_values))
                    .arg(&geometry)
                    .arg(&mapping)
                    .arg(&radius)
                    .arg(&p(&codes))
                    .arg(&p(&tile_any))
                    .arg(&p(&unfit))
                    .launch(elementwise)
                    .map_err(device_error)?;
            }
        }
        // The kept deltas: ranks from the unfit bits per group of words, then a pass that
        // writes them.
        let groups = nwords.div_ceil(RANK_WORDS);
        let unfit_counts = run.alloc(DType::U32, groups)?;
        let unfit_base = run.alloc(DType::U64, groups + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(groups as u64))?;
        let (nw, ng) = (nwords as u64, groups as u64);
        // SAFETY: argument list matches device.cu; `unfit` holds nwords words, `unfit_counts`
        // a count per group of RANK_WORDS of them.
        unsafe {
            s.launch_builder(&k("lq_unfit_counts")?)
                .arg(&p(&unfit))
                .arg(&nw)
                .arg(&p(&unfit_counts))
                .launch(grid(ng, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&unfit_counts), ng, p(&partials), p(&unfit_base))?;
        drop((unfit_counts, partials));
        let add = k("fz_add_u64")?;
        let keep = k(if p_values.is_none() { "lq_band_keep" } else { "lq_delta_keep" })?;
        let (deltas, deltas_len) = run.alloc_dynamic(DType::I32, kept_deltas_guess(n))?;
        let kept = KeptDeltas {
            unfit: p(&unfit),
            unfit_base: p(&unfit_base),
            deltas: p(&deltas),
            capacity: deltas.len.capacity() as u64,
        };
        // SAFETY: argument lists match device.cu; `unfit_base` holds groups + 1 offsets, the
        // kept deltas are written below `capacity` only, `x` and `p_values` hold n elements.
        unsafe {
            s.launch_builder(&add)
                .arg(&(p(&unfit_base) + 8 * ng))
                .arg(&0u64)
                .arg(&deltas_len)
                .launch(grid(1, 1))
                .map_err(device_error)?;
            match &p_values {
                None => s
                    .launch_builder(&keep)
                    .arg(&p(x))
                    .arg(&p(&params))
                    .arg(&geometry)
                    .arg(&mapping)
                    .arg(&radius)
                    .arg(&p(&unfit))
                    .arg(&kept)
                    .arg(&deltas_len)
                    .launch(grid(geometry.band_blocks() * BAND_THREADS, BAND_THREADS)),
                Some(p_values) => s
                    .launch_builder(&keep)
                    .arg(&p(p_values))
                    .arg(&geometry)
                    .arg(&kept)
                    .arg(&deltas_len)
                    .launch(elementwise),
            }
            .map_err(device_error)?;
        }
        drop(p_values);
        let mut counts: Vec<Slot> = Vec::new();
        let mut lists = Vec::new();
        for list in LISTS {
            let tile_count = run.alloc(DType::U32, ntiles as usize)?;
            let tile_next = run.alloc(DType::U64, ntiles as usize)?;
            let (count_slot, count_at) = run.slot()?;
            // SAFETY: argument lists match device.cu; the tile arrays hold ntiles entries.
            unsafe {
                s.launch_builder(&count)
                    .arg(&list)
                    .arg(&mapping)
                    .arg(&radius)
                    .arg(&p(&unfit))
                    .arg(&p(x))
                    .arg(&p(&params))
                    .arg(&n64)
                    .arg(&ntiles)
                    .arg(&p(&tile_any))
                    .arg(&p(&tile_count))
                    .arg(&p(&tile_next))
                    .launch(tile_loop_grid(ntiles, TILE_THREADS))
                    .map_err(device_error)?;
                s.launch_builder(&starts)
                    .arg(&p(&tile_next))
                    .arg(&p(&tile_count))
                    .arg(&ntiles)
                    .arg(&count_at)
                    .launch(grid(1024, 1024))
                    .map_err(device_error)?;
            }
            counts.push(count_slot);
            let args = ListArgs {
                x: p(x),
                params: p(&params),
                unfit: p(&unfit),
                unfit_base: p(&unfit_base),
                deltas: p(&deltas),
                deltas_capacity: kept.capacity,
                entries: count_at,
                list,
                mapping,
                radius,
                pad: 0,
            };
            lists.push(OutlierList { prefix: "lq", args, tile_count, tile_next, n, ntiles });
        }
        let guess = channel_guess(n, self.input.size());
        let (channel, layout_slot, held) = write_lists(run, &program, lists, guess)?;
        let (abs_slot, abs_at) = run.slot()?;
        let (step_slot, step_at) = run.slot()?;
        // SAFETY: argument list matches device.cu; every address is a live u64.
        unsafe {
            s.launch_builder(&export)
                .arg(&p(&params))
                .arg(&abs_at)
                .arg(&step_at)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        drop(held);
        let stage = self.clone();
        Ok(DeviceForwarded {
            outputs: vec![codes, channel],
            record: Box::new(move |sc| {
                let resolved = Resolved {
                    abs_bound: sc.f64(abs_slot),
                    step: sc.f64(step_slot),
                    tile,
                    grid: grid_shape,
                    num_delta_outliers: sc.u64(counts[0]),
                    num_value_outliers: sc.u64(counts[1]),
                    layout: layout_of(sc.u64(layout_slot)),
                };
                stage.record(bound, None, &resolved)
            }),
        })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("LorenzoQuant inverse needs a decoded record".into()))?;
        let [codes, channel] = outputs else {
            return Err(Error::Pipeline("LorenzoQuant inverse needs codes and outliers".into()));
        };
        let n = codes.known_len()?;
        if n != r.grid.len() {
            return Err(corrupt!("LorenzoQuant: {n} codes for grid {:?}", r.grid.dims));
        }
        // The channel is small: parse it with the CPU's own validating parser.
        let bytes = run.download(channel, channel.known_len()?)?;
        let counts = (r.num_delta_outliers, r.num_value_outliers);
        // Values as raw bits, as fz_scatter_runs takes them.
        let bits = |d: Run<i32>| Run { start: d.start, len: d.len, value: u64::from(d.value as u32) };
        let (deltas, values): (Vec<Run<u64>>, Vec<Run<u64>>) = if self.input == DType::F32 {
            let (d, v) = cpu::parse_channel::<f32>(&bytes, counts, n, r.layout)?;
            let v = v.into_iter().map(|r| Run { start: r.start, len: r.len, value: u64::from(r.value.to_bits()) });
            (d.into_iter().map(bits).collect(), v.collect())
        } else {
            let (d, v) = cpu::parse_channel::<f64>(&bytes, counts, n, r.layout)?;
            let v = v.into_iter().map(|r| Run { start: r.start, len: r.len, value: r.value.to_bits() });
            (d.into_iter().map(bits).collect(), v.collect())
        };
        let program = program(self.input);
        let k = |name| run.kernel(&program, name);
        let out = run.alloc(self.input, n)?;
        let geometry = Geometry::new(r.grid, r.tile);
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let ((mapping, radius), n64) = (self.mapping.device_args(), n as u64);
        let (nd, nv) = (deltas.len() as u64, values.len() as u64);
        let threads = u64::from(THREADS);
        // Bands of flat tiles read the codes themselves unless delta outliers patch them; every
        // other case sums an i32 copy of the deltas.
        let d = if geometry.banded() && nd == 0 {
            None
        } else {
            let d = run.alloc(DType::I32, n)?;
            let delta_runs = run.upload(DType::U64, &run_triples(&deltas))?;
            // SAFETY: argument lists match device.cu; `d` holds n elements and every outlier
            // run was checked against n by the parser.
            unsafe {
                s.launch_builder(&k("lq_codes_to_deltas")?)
                    .arg(&p(codes))
                    .arg(&n64)
                    .arg(&mapping)
                    .arg(&radius)
                    .arg(&p(&d))
                    .launch(grid(n64, threads))
                    .map_err(device_error)?;
                if nd > 0 {
                    // A warp per run.
                    s.launch_builder(&k("lq_scatter_delta_runs")?)
                        .arg(&p(&delta_runs))
                        .arg(&nd)
                        .arg(&p(&d))
                        .launch(grid(nd.min(1 << 20) * 32, threads))
                        .map_err(device_error)?;
                }
            }
            Some(d)
        };
        // SAFETY: argument lists match device.cu; `d` (where allocated) and `out` hold n
        // elements, and the band kernel reads `codes` (n elements) only when `d` is absent.
        unsafe {
            if geometry.banded() {
                let (from_codes, from_deltas) = d.as_ref().map_or((p(codes), 0), |d| (0, p(d)));
                s.launch_builder(&k("lq_band_inverse")?)
                    .arg(&from_codes)
                    .arg(&from_deltas)
                    .arg(&mapping)
                    .arg(&radius)
                    .arg(&geometry)
                    .arg(&r.step)
                    .arg(&p(&out))
                    .launch(grid(geometry.band_blocks() * BAND_THREADS, BAND_THREADS))
                    .map_err(device_error)?;
            } else if geometry.tile.iter().product::<u64>() <= TILE_MAX {
                let d = d.as_ref().expect("deltas are summed when not banded");
                let tiles: u64 = (0..3).map(|a| geometry.dims[a].div_ceil(geometry.tile[a])).product();
                // A thread block takes a group of tiles (`LQ_GROUP`, at most TILE_MAX elements).
                let group = (TILE_MAX / geometry.tile.iter().product::<u64>()).clamp(1, GROUP);
                s.launch_builder(&k("lq_tile_inverse")?)
                    .arg(&p(d))
                    .arg(&geometry)
                    .arg(&r.step)
                    .arg(&p(&out))
                    .launch(grid(tiles.div_ceil(group) * INVERSE_THREADS, INVERSE_THREADS))
                    .map_err(device_error)?;
            } else {
                let d = d.as_ref().expect("deltas are summed when not banded");
                let prefix = k("lq_prefix")?;
                for axis in 0..3u32 {
                    s.launch_builder(&prefix)
                        .arg(&p(d))
                        .arg(&geometry)
                        .arg(&axis)
                        .launch(grid(geometry.segments(axis as usize), threads))
                        .map_err(device_error)?;
                }
                s.launch_builder(&k("lq_reconstruct")?)
                    .arg(&p(d))
                    .arg(&n64)
                    .arg(&r.step)
                    .arg(&p(&out))
                    .launch(grid(n64, threads))
                    .map_err(device_error)?;
            }
            if nv > 0 {
                let value_runs = run.upload(DType::U64, &run_triples(&values))?;
                // A warp per run.
                s.launch_builder(&k("fz_scatter_runs")?)
                    .arg(&p(&value_runs))
                    .arg(&nv)
                    .arg(&p(&out))
                    .launch(grid(nv.min(1 << 20) * 32, threads))
                    .map_err(device_error)?;
            }
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_segments_cover_every_tile_line() {
        let g = Geometry::new(Grid { dims: [5, 7, 33], ndim: 3 }, Tile([2, 3, 8]));
        assert_eq!(g.segments(0), 5 * 7 * 5);
        assert_eq!(g.segments(1), 5 * 3 * 33);
        assert_eq!(g.segments(2), 3 * 7 * 33);
        assert_eq!(CodeMapping::Radius(512).device_args(), (2, 512));
        assert_eq!(CodeMapping::Zigzag.device_args(), (1, 0));
    }
}
