//! Interpolation on the device (kernels in device.cu, compiled after the Quantizer's): bound
//! resolution, level bounds, the per-level choice from the sampled costs, anchors, then every
//! level of each anchor box in one thread block's shared memory where a box fits (1-D, 2-D
//! and small 3-D grids), else one kernel per level and pass over the whole grid (the CPU's own
//! walk, values in global memory), then the outlier list in index order after the anchors.
//! No host synchronisation in forward: the choices reach the record through scalar slots. The inverse parses the side port with the
//! CPU's own validating parser and replays the levels with the recorded choices. Level-ordered
//! codes (order.rs) are permuted by one kernel after the encoder and before the decoder.

use super::walk::{passes, Choice, Geometry as Walk};
use super::{cpu, order, Interpolation, Resolved};
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, tile_loop_grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
    THREADS,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use crate::shape::Grid;
use crate::stages::quantizer::device::{channel_guess, resolve, TILE};
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

/// Threads per list tile (`Q_THREADS`), per cost block (`IP_COST_THREADS`); candidates.
const TILE_THREADS: u64 = 256;
const COST_THREADS: u64 = 256;
const CANDIDATES: u64 = 6;

pub(crate) fn program(real: DType) -> Program {
    Program::new(
        concat!(include_str!("../quantizer/device.cu"), include_str!("device.cu")),
        format!("#define REAL_F64 {}\n", u8::from(real == DType::F64)),
    )
}

/// `struct IGeom` of device.cu: grid extents (z, y, x) and the anchor stride.
#[repr(C)]
#[derive(Clone, Copy)]
struct IGeom {
    dims: [u64; 3],
    anchor: u64,
}

const _: () = assert!(std::mem::size_of::<IGeom>() == 32);

// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for IGeom {}

impl IGeom {
    fn new(g: &Walk) -> IGeom {
        IGeom { dims: g.dims.map(|d| d as u64), anchor: g.anchor as u64 }
    }
}

/// Points of pass `j` of the level with stride `s` under `choice` on the whole grid (the
/// lattice walk.rs `walk` visits).
fn pass_points(g: &Walk, s: usize, choice: Choice, j: usize) -> u64 {
    let p = passes(s, choice)[j];
    (0..3)
        .map(|a| {
            let n = g.dims[a];
            if n > p.start[a] {
                ((n - p.start[a] - 1) / p.step[a] + 1) as u64
            } else {
                0
            }
        })
        .product()
}

/// Threads a forward pass launches before the choice is known: the larger of the two sweep
/// orders' counts (the kind does not change the lattice).
fn pass_launch(g: &Walk, s: usize, j: usize) -> u64 {
    [false, true]
        .map(|reverse| pass_points(g, s, Choice { kind: super::Kind::Linear, reverse }, j))
        .into_iter()
        .max()
        .unwrap_or(0)
}

/// Sampled anchor blocks of the choice estimate (cpu.rs sampled_blocks): (stride, count).
fn sampling(g: &Walk) -> (u64, u64) {
    let total: u64 = g.blocks_per_axis().iter().map(|&b| b as u64).product();
    let stride = (total / 64).max(1);
    (stride, total.div_ceil(stride))
}

/// Dynamic shared memory the box kernels may take: 48 KiB without an opt-in, less their
/// static pass table (36 × 76 bytes).
const BOX_SHARED_LIMIT: u64 = 44 << 10;
/// Threads per box kernel block (`IP_BOX_THREADS`).
const BOX_THREADS: u64 = 128;

/// The box kernels' launch, where a closed anchor box of the grid (extent min(A, n − 1) + 1
/// per axis) fits in shared memory: one block per anchor box, the box's values and codes as
/// dynamic shared memory. `None`: the levels run pass by pass over the whole grid.
fn box_launch(g: &Walk, real: DType) -> Option<LaunchConfig> {
    let boxes: u64 = g.blocks_per_axis().iter().map(|&b| b as u64).product();
    // The box's values and its u16 codes, rows of x padded to a multiple of 8 elements
    // (device.cu IBox::pitch).
    let ext = g.dims.map(|n| n.saturating_sub(1).min(g.anchor) as u64 + 1);
    let volume = ext[0] * ext[1] * ext[2].next_multiple_of(8);
    let bytes = volume * (real.size() as u64 + 2);
    (boxes > 0 && boxes <= u64::from(u32::MAX) && bytes <= BOX_SHARED_LIMIT).then_some(LaunchConfig {
        grid_dim: (boxes as u32, 1, 1),
        block_dim: (BOX_THREADS as u32, 1, 1),
        shared_mem_bytes: bytes as u32,
    })
}

/// `codes` permuted between element and level order (order.rs) by `ip_code_order`:
/// `inverse` false gives the level order of natural codes, true the natural order back.
fn permute_codes(
    run: &mut DeviceRun,
    program: &Program,
    codes: &DeviceBuffer,
    g: &Walk,
    inverse: bool,
) -> Result<DeviceBuffer> {
    let n = g.len();
    let out = run.alloc(DType::U16, n)?;
    let offsets: Vec<u8> = order::group_offsets(g).iter().flat_map(|o| o.to_le_bytes()).collect();
    let offsets = run.upload(DType::U64, &offsets)?;
    let kernel = run.kernel(program, "ip_code_order")?;
    let s = run.stream().clone();
    let (geom, inverse) = (IGeom::new(g), u32::from(inverse));
    if n > 0 {
        // SAFETY: argument list matches device.cu; codes and out hold n elements, offsets the
        // 1 + 7·levels group starts and n.
        unsafe {
            s.launch_builder(&kernel)
                .arg(&codes.ptr(&s))
                .arg(&out.ptr(&s))
                .arg(&geom)
                .arg(&offsets.ptr(&s))
                .arg(&inverse)
                .launch(grid(n as u64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
    }
    drop(offsets);
    Ok(out)
}

/// The choices the export kernel packed into two words, 8 per word, level 0 in the low byte.
fn unpack_choices(lo: u64, hi: u64, levels: usize) -> Result<Vec<Choice>> {
    (0..levels)
        .map(|k| {
            let word = if k < 8 { lo } else { hi };
            let b = (word >> (8 * (k % 8))) as u8;
            Choice::from_byte(b).ok_or_else(|| Error::Device(format!("Interpolation: device choice byte {b:#x}")))
        })
        .collect()
}

impl DeviceStage for Interpolation {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let bound = crate::stage::ErrorBound::required(self.bound)?;
        let [x] = inputs else { return Err(Error::Pipeline("Interpolation takes one input".into())) };
        let n = x.known_len()?;
        let grid_shape = Grid::for_stage(&run.shape, n, "Interpolation")?;
        let anchor = self.anchor.unwrap_or_else(|| super::default_anchor(grid_shape.ndim));
        let g = Walk { dims: grid_shape.dims, anchor };
        let levels = g.levels();
        let geom = IGeom::new(&g);
        let program = program(self.input);
        let k = |name| run.kernel(&program, name);
        let boxes = box_launch(&g, self.input);
        let (level_steps, costs_k, select, anchors_k, encode, encode_box, count, starts, bytes, export) = (
            k("ip_level_steps")?,
            k("ip_costs")?,
            k("ip_select")?,
            k("ip_anchors")?,
            k("ip_encode_pass")?,
            k("ip_encode_box")?,
            k("ip_list_count")?,
            k("q_tile_starts")?,
            k("ip_list_bytes")?,
            k("ip_export")?,
        );
        let params = resolve(run, &program, x, bound)?;
        let lsteps = run.alloc(DType::F64, 2 * levels)?;
        let costs = run.alloc(DType::U64, levels * CANDIDATES as usize)?;
        run.zero(&costs)?;
        let choices = run.alloc(DType::U32, levels)?;
        let any_outlier = run.alloc(DType::U32, 1)?;
        run.zero(&any_outlier)?;
        // Reconstructed values in global memory only for the pass-by-pass walk.
        let w = if boxes.is_none() { Some(run.alloc(self.input, n)?) } else { None };
        let codes = run.alloc(DType::U16, n)?;
        let num_anchors = g.num_anchors() as u64;
        let anchor_bytes = num_anchors * self.input.size() as u64;
        let guess = anchor_bytes as usize + channel_guess(n, self.input.size());
        let (side, side_len) = run.alloc_dynamic(DType::U8, guess)?;
        let ntiles = (n as u64).div_ceil(TILE).max(1);
        let tile_count = run.alloc(DType::U32, ntiles as usize)?;
        let tile_next = run.alloc(DType::U64, ntiles as usize)?;
        let tile_bytes = run.alloc(DType::U32, ntiles as usize)?;
        let offsets = run.alloc(DType::U64, ntiles as usize + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(ntiles))?;
        let (outliers_slot, outliers_at) = run.slot()?;
        let (abs_slot, abs_at) = run.slot()?;
        let (step_slot, step_at) = run.slot()?;
        let (lo_slot, lo_at) = run.slot()?;
        let (hi_slot, hi_at) = run.slot()?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, levels32, cap) = (n as u64, levels as u32, side.len.capacity() as u64);
        let (radius, zigzag) = (self.radius, u32::from(self.zigzag));
        let q = self.params(0.0);
        let (code0, marker) = (q.code(0), q.outlier_code());
        let (block_stride, samples) = sampling(&g);
        let threads = u64::from(THREADS);
        let w_ptr = w.as_ref().map_or(0, &p);
        // SAFETY: argument lists match device.cu; x, w (when allocated) and codes hold n
        // elements, a box launch covers the grid's anchor boxes with their shared bytes,
        // lsteps 2 × levels, costs levels × 6, choices levels, the tile arrays ntiles (+ 1);
        // the anchor kernel writes anchor_bytes ≤ the side's capacity and the list kernel
        // nothing past it.
        unsafe {
            s.launch_builder(&level_steps)
                .arg(&p(&params))
                .arg(&levels32)
                .arg(&self.alpha)
                .arg(&self.beta)
                .arg(&p(&lsteps))
                .launch(grid(1, 1))
                .map_err(device_error)?;
            if samples > 0 && levels > 0 && n > 0 {
                let mut cfg = grid(samples * COST_THREADS, COST_THREADS);
                cfg.grid_dim.1 = levels32 * CANDIDATES as u32;
                s.launch_builder(&costs_k)
                    .arg(&p(x))
                    .arg(&geom)
                    .arg(&block_stride)
                    .arg(&levels32)
                    .arg(&p(&lsteps))
                    .arg(&p(&costs))
                    .launch(cfg)
                    .map_err(device_error)?;
            }
            s.launch_builder(&select)
                .arg(&p(&costs))
                .arg(&levels32)
                .arg(&p(&choices))
                .launch(grid(1, 1))
                .map_err(device_error)?;
            if num_anchors > 0 {
                s.launch_builder(&anchors_k)
                    .arg(&p(x))
                    .arg(&geom)
                    .arg(&num_anchors)
                    .arg(&code0)
                    .arg(&w_ptr)
                    .arg(&p(&codes))
                    .arg(&p(&side))
                    .launch(grid(num_anchors, threads))
                    .map_err(device_error)?;
            }
            if let Some(cfg) = boxes {
                s.launch_builder(&encode_box)
                    .arg(&p(x))
                    .arg(&p(&codes))
                    .arg(&geom)
                    .arg(&p(&choices))
                    .arg(&levels32)
                    .arg(&p(&lsteps))
                    .arg(&p(&params))
                    .arg(&radius)
                    .arg(&zigzag)
                    .arg(&code0)
                    .arg(&p(&any_outlier))
                    .launch(cfg)
                    .map_err(device_error)?;
            }
            let pass_by_pass = if boxes.is_some() { 0 } else { levels };
            for (k, l) in (1..=pass_by_pass).rev().enumerate() {
                let st = 1usize << (l - 1);
                let (k32, s64) = (k as u32, st as u64);
                for j in 0..3u32 {
                    let points = pass_launch(&g, st, j as usize);
                    if points == 0 {
                        continue;
                    }
                    s.launch_builder(&encode)
                        .arg(&p(x))
                        .arg(&w_ptr)
                        .arg(&p(&codes))
                        .arg(&geom)
                        .arg(&p(&choices))
                        .arg(&k32)
                        .arg(&j)
                        .arg(&s64)
                        .arg(&p(&lsteps))
                        .arg(&levels32)
                        .arg(&p(&params))
                        .arg(&radius)
                        .arg(&zigzag)
                        .arg(&p(&any_outlier))
                        .launch(grid(points, threads))
                        .map_err(device_error)?;
                }
            }
        }
        let tile_grid = tile_loop_grid(ntiles, TILE_THREADS);
        let list_bytes = |write: u32| {
            // SAFETY: as above.
            unsafe {
                s.launch_builder(&bytes)
                    .arg(&p(&codes))
                    .arg(&marker)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&p(&any_outlier))
                    .arg(&p(&tile_count))
                    .arg(&p(&tile_next))
                    .arg(&ntiles)
                    .arg(&p(&tile_bytes))
                    .arg(&anchor_bytes)
                    .arg(&p(&offsets))
                    .arg(&p(&side))
                    .arg(&cap)
                    .arg(&write)
                    .launch(tile_grid)
                    .map(|_| ())
                    .map_err(device_error)
            }
        };
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&count)
                .arg(&p(&codes))
                .arg(&marker)
                .arg(&n64)
                .arg(&ntiles)
                .arg(&p(&any_outlier))
                .arg(&p(&tile_count))
                .arg(&p(&tile_next))
                .launch(tile_grid)
                .map_err(device_error)?;
            s.launch_builder(&starts)
                .arg(&p(&tile_next))
                .arg(&p(&tile_count))
                .arg(&ntiles)
                .arg(&outliers_at)
                .launch(grid(1024, 1024))
                .map_err(device_error)?;
        }
        list_bytes(0)?;
        exclusive_scan(run, &program, p(&tile_bytes), ntiles, p(&partials), p(&offsets))?;
        list_bytes(1)?;
        let total_at = p(&offsets) + 8 * ntiles;
        // SAFETY: argument list matches device.cu; every address is a live u64.
        unsafe {
            s.launch_builder(&export)
                .arg(&p(&params))
                .arg(&p(&choices))
                .arg(&levels32)
                .arg(&total_at)
                .arg(&anchor_bytes)
                .arg(&abs_at)
                .arg(&step_at)
                .arg(&lo_at)
                .arg(&hi_at)
                .arg(&side_len)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        // Every buffer a launch above reads lives until here (stream-ordered frees after).
        drop((lsteps, costs, choices, any_outlier, w, tile_count, tile_next, tile_bytes, offsets, partials, params));
        let level_order = self.order.is_level(&grid_shape);
        let codes = if level_order { permute_codes(run, &program, &codes, &g, false)? } else { codes };
        let stage = self.clone();
        Ok(DeviceForwarded {
            outputs: vec![codes, side],
            record: Box::new(move |sc| {
                let resolved = Resolved {
                    abs_bound: sc.f64(abs_slot),
                    step: sc.f64(step_slot),
                    anchor,
                    grid: grid_shape,
                    choices: unpack_choices(sc.u64(lo_slot), sc.u64(hi_slot), levels)?,
                    num_outliers: sc.u64(outliers_slot),
                    level_order,
                };
                stage.record(bound, None, &resolved)
            }),
        })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let r = self
            .resolved
            .as_ref()
            .ok_or_else(|| Error::Pipeline("Interpolation inverse needs a decoded record".into()))?;
        let [codes, side] = outputs else {
            return Err(Error::Pipeline("Interpolation inverse needs codes and side".into()));
        };
        let n = codes.known_len()?;
        let g = Walk { dims: r.grid.dims, anchor: r.anchor };
        if n != g.len() || r.choices.len() != g.levels() {
            return Err(corrupt!("Interpolation: {n} codes, {} level choices for grid {:?}", r.choices.len(), g.dims));
        }
        // The side port (anchors and outliers) is parsed with the CPU's own validating parser.
        let bytes = run.download(side, side.known_len()?)?;
        let q = self.params(r.abs_bound);
        let (anchor_bytes, outliers, steps): (Vec<u8>, Vec<(u64, u64)>, Vec<f64>) = if self.input == DType::F32 {
            let (a, o) = cpu::parse_side::<f32>(&bytes, r.num_outliers, &g)?;
            let steps = cpu::level_steps::<f32>(q.abs_bound, q.alpha, q.beta, g.levels());
            (
                a.iter().flat_map(|v| v.to_le_bytes()).collect(),
                o.into_iter().map(|(i, v)| (i as u64, u64::from(v.to_bits()))).collect(),
                steps.iter().map(|l| f64::from(l.step)).collect(),
            )
        } else {
            let (a, o) = cpu::parse_side::<f64>(&bytes, r.num_outliers, &g)?;
            let steps = cpu::level_steps::<f64>(q.abs_bound, q.alpha, q.beta, g.levels());
            (
                a.iter().flat_map(|v| v.to_le_bytes()).collect(),
                o.into_iter().map(|(i, v)| (i as u64, v.to_bits())).collect(),
                steps.iter().map(|l| l.step).collect(),
            )
        };
        let program = program(self.input);
        let natural = if r.level_order { Some(permute_codes(run, &program, codes, &g, true)?) } else { None };
        let codes = natural.as_ref().unwrap_or(codes);
        let k = |name| run.kernel(&program, name);
        let (scatter, mark, put_anchors, decode, decode_box) = (
            k("fz_scatter_outliers")?,
            k("ip_mark_outliers")?,
            k("ip_put_anchors")?,
            k("ip_decode_pass")?,
            k("ip_decode_box")?,
        );
        let num_anchors = g.num_anchors() as u64;
        let anchors = run.upload(self.input, &anchor_bytes)?;
        let as_bytes = |v: &mut dyn Iterator<Item = u64>| v.flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let index = run.upload(DType::U64, &as_bytes(&mut outliers.iter().map(|o| o.0)))?;
        let bits = run.upload(DType::U64, &as_bytes(&mut outliers.iter().map(|o| o.1)))?;
        let count = outliers.len() as u64;
        let out = run.alloc(self.input, n)?;
        // Which elements the list stores (device.cu ip_stored): a marker without an entry
        // decodes as 0, as on the CPU, which starts from zeros.
        let stored = if count > 0 {
            let bitmap = run.alloc(DType::U32, n.div_ceil(32))?;
            run.zero(&bitmap)?;
            Some(bitmap)
        } else {
            None
        };
        let geom = IGeom::new(&g);
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (radius, zigzag) = (self.radius, u32::from(self.zigzag));
        let threads = u64::from(THREADS);
        let stored_ptr = stored.as_ref().map_or(0, &p);
        let scatter_outliers = || {
            if count == 0 {
                return Ok(());
            }
            // SAFETY: argument list matches device.cu; every index was checked against n by
            // the parser.
            unsafe {
                s.launch_builder(&scatter)
                    .arg(&p(&index))
                    .arg(&p(&bits))
                    .arg(&count)
                    .arg(&p(&out))
                    .launch(grid(count, threads))
                    .map(|_| ())
                    .map_err(device_error)
            }
        };
        let anchors_into_out = |fed: u32| {
            if num_anchors == 0 {
                return Ok(());
            }
            // SAFETY: argument list matches device.cu; `anchors` holds num_anchors values and
            // every anchor index lies inside the grid.
            unsafe {
                s.launch_builder(&put_anchors)
                    .arg(&p(&anchors))
                    .arg(&geom)
                    .arg(&num_anchors)
                    .arg(&fed)
                    .arg(&p(&out))
                    .launch(grid(num_anchors, threads))
                    .map(|_| ())
                    .map_err(device_error)
            }
        };
        // cpu.rs inverse: outliers wait in place, anchors fed, the levels, then the raw bits
        // of anchors and outliers.
        scatter_outliers()?;
        if count > 0 {
            // SAFETY: argument list matches device.cu; every index was checked against n by
            // the parser, and the bitmap holds n bits.
            unsafe {
                s.launch_builder(&mark)
                    .arg(&p(&index))
                    .arg(&count)
                    .arg(&stored_ptr)
                    .launch(grid(count, threads))
                    .map_err(device_error)?;
            }
        }
        anchors_into_out(1)?;
        let boxes = box_launch(&g, self.input);
        if let Some(cfg) = boxes {
            // Every level of every anchor box in one launch.
            let choices: Vec<u8> = r.choices.iter().flat_map(|c| u32::from(c.byte()).to_le_bytes()).collect();
            let choices = run.upload(DType::U32, &choices)?;
            let level_steps =
                run.upload(DType::F64, &steps.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
            let levels32 = g.levels() as u32;
            // SAFETY: argument list matches device.cu; codes and out hold n elements, the
            // choices and steps one per level, the launch covers every anchor box with its
            // shared bytes.
            unsafe {
                s.launch_builder(&decode_box)
                    .arg(&p(codes))
                    .arg(&p(&out))
                    .arg(&stored_ptr)
                    .arg(&geom)
                    .arg(&p(&choices))
                    .arg(&levels32)
                    .arg(&p(&level_steps))
                    .arg(&radius)
                    .arg(&zigzag)
                    .launch(cfg)
                    .map_err(device_error)?;
            }
        }
        let pass_by_pass = if boxes.is_some() { 0 } else { g.levels() };
        for (k, l) in (1..=pass_by_pass).rev().enumerate() {
            let st = 1usize << (l - 1);
            let choice = r.choices[k];
            let (byte, s64, step) = (u32::from(choice.byte()), st as u64, steps[l - 1]);
            for j in 0..3u32 {
                let points = pass_points(&g, st, choice, j as usize);
                if points == 0 {
                    continue;
                }
                // SAFETY: argument list matches device.cu; codes and out hold n elements.
                unsafe {
                    s.launch_builder(&decode)
                        .arg(&p(codes))
                        .arg(&p(&out))
                        .arg(&stored_ptr)
                        .arg(&geom)
                        .arg(&byte)
                        .arg(&j)
                        .arg(&s64)
                        .arg(&step)
                        .arg(&radius)
                        .arg(&zigzag)
                        .launch(grid(points, threads))
                        .map_err(device_error)?;
                }
            }
        }
        anchors_into_out(0)?;
        scatter_outliers()?;
        drop((anchors, index, bits, stored, natural));
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::super::walk::walk;
    use super::*;

    #[test]
    fn pass_counts_are_the_walks() {
        for dims in [[1, 1, 37], [3, 5, 7], [9, 17, 33], [1, 40, 1], [5, 1, 6], [0, 3, 3]] {
            for anchor in [2, 4, 8, 64] {
                let g = Walk { dims, anchor };
                for l in 1..=g.levels() {
                    let s = 1 << (l - 1);
                    for j in 0..3 {
                        let mut most = 0;
                        for choice in Choice::CANDIDATES {
                            let mut seen = 0u64;
                            walk(&g, &passes(s, choice)[j], [0; 3], dims, |_, _| seen += 1);
                            assert_eq!(pass_points(&g, s, choice, j), seen, "{dims:?} A={anchor} {choice:?}");
                            most = most.max(seen);
                        }
                        assert_eq!(pass_launch(&g, s, j), most);
                    }
                }
            }
        }
    }

    #[test]
    fn sampling_matches_the_cpu_blocks() {
        for dims in [[1, 1, 50_000], [1, 300, 299], [40, 40, 40], [0, 1, 1], [130, 1, 1]] {
            for anchor in [2, 64, 1024] {
                let g = Walk { dims, anchor };
                let (stride, count) = sampling(&g);
                let cpu: Vec<_> = cpu::sampled_blocks(&g).collect();
                assert_eq!(cpu.len() as u64, count, "{dims:?} A={anchor}");
                let [_, by, bx] = g.blocks_per_axis();
                for (k, (lo, _)) in cpu.iter().enumerate() {
                    let b = k * stride as usize;
                    assert_eq!(*lo, [b / (by * bx) * anchor, b / bx % by * anchor, b % bx * anchor]);
                }
            }
        }
    }

    #[test]
    fn choices_unpack_as_packed() {
        let choices: Vec<Choice> = (0..12).map(|k| Choice::CANDIDATES[(k * 5) % 6]).collect();
        let mut words = [0u64; 2];
        for (k, c) in choices.iter().enumerate() {
            words[k / 8] |= u64::from(c.byte()) << (8 * (k % 8));
        }
        assert_eq!(unpack_choices(words[0], words[1], 12).unwrap(), choices);
        assert!(unpack_choices(3, 0, 1).is_err());
    }
}
