//! The Quantizer on the device (kernels in device.cu): value range, bound resolution, codes
//! and the outlier channel, byte for byte as cpu.rs writes them.

use super::{cpu, Quantizer, Resolved};

mod inline;
use crate::archive::ErrorMode;
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, THREADS,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::stage::ErrorBound;
use cudarc::driver::PushKernelArg;

/// Bytes of `struct Params` in device.cu (static_assert there).
pub(crate) const PARAMS_BYTES: usize = 40;
/// Elements per outlier tile (`Q_TILE`) and warps per block of the tile walks.
pub(crate) const TILE: u64 = 2048;
const WALK_WARPS: u64 = 4;
/// Thread blocks of the value-range pass.
const MINMAX_BLOCKS: u32 = 1056;

/// The quantizer's standalone program for one element type.
pub(crate) fn program(real: DType) -> Program {
    Program::new(include_str!("device.cu"), format!("#define REAL_F64 {}\n", u8::from(real == DType::F64)))
}

/// First guess at the outlier channel's size: a sixteenth of the input (real fields have far
/// fewer outliers); a run that needs more is repeated with the exact size.
pub(crate) fn channel_guess(n: usize, value_bytes: usize) -> usize {
    (n / 16 * (value_bytes + 1)).max(4096)
}

/// The bound resolution every mode starts with: the finite value range when the bound is
/// relative, then `Params` (abs bound, step, reciprocal, f32 margins) on the device.
pub(crate) fn resolve(run: &DeviceRun, program: &Program, x: &DeviceBuffer, bound: ErrorBound) -> Result<DeviceBuffer> {
    let n64 = x.known_len()? as u64;
    let (minmax, resolve) = (run.kernel(program, "fz_minmax")?, run.kernel(program, "fz_resolve")?);
    let params = run.alloc(DType::U8, PARAMS_BYTES)?;
    let pmin = run.alloc(DType::F64, MINMAX_BLOCKS as usize)?;
    let pmax = run.alloc(DType::F64, MINMAX_BLOCKS as usize)?;
    let s = run.stream();
    let p = |b: &DeviceBuffer| b.ptr(s);
    let relative = u32::from(bound.mode == ErrorMode::Rel);
    let parts = if relative == 1 { MINMAX_BLOCKS } else { 0 };
    // SAFETY: argument lists match device.cu; `x` holds n64 elements, the partial ranges
    // MINMAX_BLOCKS each, `params` one Params.
    unsafe {
        if relative == 1 {
            s.launch_builder(&minmax)
                .arg(&p(x))
                .arg(&n64)
                .arg(&p(&pmin))
                .arg(&p(&pmax))
                .launch(grid(u64::from(parts) * 256, 256))
                .map_err(device_error)?;
        }
        s.launch_builder(&resolve)
            .arg(&p(&pmin))
            .arg(&p(&pmax))
            .arg(&parts)
            .arg(&relative)
            .arg(&bound.value)
            .arg(&p(&params))
            .launch(grid(32, 32))
            .map_err(device_error)?;
    }
    Ok(params)
}

impl DeviceStage for Quantizer {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let bound = self.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let [x] = inputs else { return Err(Error::Pipeline("Quantizer takes one input".into())) };
        if self.inline_outliers {
            return self.forward_inline(run, x, bound);
        }
        let n = x.known_len()?;
        let program = program(self.input);
        let k = |name| run.kernel(&program, name);
        let (encode, starts, sizes, write, export) =
            (k("q_encode")?, k("q_tile_starts")?, k("q_entry_sizes")?, k("q_write_channel")?, k("q_export")?);
        let ntiles = (n as u64).div_ceil(TILE).max(1);
        let codes = run.alloc(DType::I32, n)?;
        let params = resolve(run, &program, x, bound)?;
        let tile_count = run.alloc(DType::U32, ntiles as usize)?;
        let tile_next = run.alloc(DType::U64, ntiles as usize)?;
        let tile_bytes = run.alloc(DType::U32, ntiles as usize)?;
        let offsets = run.alloc(DType::U64, ntiles as usize + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(ntiles))?;
        let (channel, channel_len) = run.alloc_dynamic(DType::U8, channel_guess(n, self.input.size()))?;
        let (outliers_slot, outliers_at) = run.slot()?;
        let (abs_slot, abs_at) = run.slot()?;
        let (step_slot, step_at) = run.slot()?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, cap) = (n as u64, channel.len.capacity() as u64);
        // SAFETY: argument lists match device.cu; every buffer was sized above for n elements
        // and ntiles tiles; the channel kernel writes nothing past `cap`.
        unsafe {
            s.launch_builder(&encode)
                .arg(&p(x))
                .arg(&n64)
                .arg(&p(&params))
                .arg(&p(&codes))
                .arg(&p(&tile_count))
                .arg(&p(&tile_next))
                .launch(grid(ntiles * 256, 256))
                .map_err(device_error)?;
            s.launch_builder(&starts)
                .arg(&p(&tile_next))
                .arg(&p(&tile_count))
                .arg(&ntiles)
                .arg(&outliers_at)
                .launch(grid(1024, 1024))
                .map_err(device_error)?;
            s.launch_builder(&sizes)
                .arg(&p(x))
                .arg(&n64)
                .arg(&p(&params))
                .arg(&p(&tile_count))
                .arg(&p(&tile_next))
                .arg(&ntiles)
                .arg(&p(&tile_bytes))
                .launch(grid(ntiles * 32, WALK_WARPS * 32))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&tile_bytes), ntiles, p(&partials), p(&offsets))?;
        let total_at = p(&offsets) + 8 * ntiles;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&write)
                .arg(&p(x))
                .arg(&n64)
                .arg(&p(&params))
                .arg(&p(&tile_count))
                .arg(&p(&tile_next))
                .arg(&ntiles)
                .arg(&p(&offsets))
                .arg(&p(&channel))
                .arg(&cap)
                .launch(grid(ntiles * 32, WALK_WARPS * 32))
                .map_err(device_error)?;
            s.launch_builder(&export)
                .arg(&p(&params))
                .arg(&total_at)
                .arg(&abs_at)
                .arg(&step_at)
                .arg(&channel_len)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        let stage = self.clone();
        Ok(DeviceForwarded {
            outputs: vec![codes, channel],
            record: Box::new(move |sc| {
                let resolved = Resolved {
                    abs_bound: sc.f64(abs_slot),
                    step: sc.f64(step_slot),
                    num_elements: n as u64,
                    num_outliers: sc.u64(outliers_slot),
                };
                stage.record(bound, None, &resolved)
            }),
        })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
        let [codes, channel] = outputs else {
            return Err(Error::Pipeline("Quantizer inverse needs codes and outliers".into()));
        };
        let n = codes.known_len()?;
        if n as u64 != r.num_elements {
            return Err(crate::error::corrupt!("Quantizer: {n} codes for {} elements", r.num_elements));
        }
        if self.inline_outliers {
            return self.inverse_inline(run, codes, channel, r);
        }
        // The channel is small: parse it with the CPU's own validating parser.
        let bytes = run.download(channel, channel.known_len()?)?;
        let (index, bits): (Vec<u64>, Vec<u64>) = if self.input == DType::F32 {
            cpu::parse_outliers::<f32>(&bytes, r.num_outliers, n)?
                .into_iter()
                .map(|(i, v)| (i as u64, u64::from(v.to_bits())))
                .unzip()
        } else {
            cpu::parse_outliers::<f64>(&bytes, r.num_outliers, n)?
                .into_iter()
                .map(|(i, v)| (i as u64, v.to_bits()))
                .unzip()
        };
        let program = program(self.input);
        let (decode, scatter) = (run.kernel(&program, "q_decode")?, run.kernel(&program, "fz_scatter_outliers")?);
        let out = run.alloc(self.input, n)?;
        let s = run.stream().clone();
        let (n64, count) = (n as u64, index.len() as u64);
        let as_bytes = |v: &[u64]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let (index, bits) = (run.upload(DType::U64, &as_bytes(&index))?, run.upload(DType::U64, &as_bytes(&bits))?);
        // SAFETY: argument lists match device.cu; `out` holds n elements and every outlier
        // index was checked against n by the parser.
        unsafe {
            s.launch_builder(&decode)
                .arg(&codes.ptr(&s))
                .arg(&n64)
                .arg(&r.step)
                .arg(&out.ptr(&s))
                .launch(grid(n64, u64::from(THREADS)))
                .map_err(device_error)?;
            if count > 0 {
                s.launch_builder(&scatter)
                    .arg(&index.ptr(&s))
                    .arg(&bits.ptr(&s))
                    .arg(&count)
                    .arg(&out.ptr(&s))
                    .launch(grid(count, u64::from(THREADS)))
                    .map_err(device_error)?;
            }
        }
        Ok(vec![out])
    }
}
