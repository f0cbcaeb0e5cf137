//! The Quantizer on the device (kernels in device.cu): value range, bound resolution, codes
//! and the outlier channel, byte for byte as cpu.rs writes them.

use super::{cpu, Quantizer, Resolved};

mod fragment;
mod inline;
use crate::archive::ErrorMode;
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, PendingRecord,
    THREADS,
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

/// device.cu, one static so that a fused region includes it once.
static SOURCE: &str = include_str!("device.cu");

/// The `#define` that selects the element type of device.cu.
fn real_define(real: DType) -> String {
    format!("#define REAL_F64 {}\n", u8::from(real == DType::F64))
}

/// The quantizer's standalone program for one element type.
pub(crate) fn program(real: DType) -> Program {
    Program::new(SOURCE, real_define(real))
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

/// A forward between the codes and the outlier channel: the resolved parameters and each
/// outlier tile's statistics (`tile_next` only for indexed outliers).
pub(super) struct Encoding {
    pub params: DeviceBuffer,
    pub tile_count: DeviceBuffer,
    pub tile_next: Option<DeviceBuffer>,
    pub n: usize,
    pub ntiles: u64,
}

impl Quantizer {
    /// Resolve the bound on `x` and allocate the tile statistics.
    pub(super) fn begin(&self, run: &DeviceRun, x: &DeviceBuffer, bound: ErrorBound) -> Result<Encoding> {
        let n = x.known_len()?;
        let ntiles = (n as u64).div_ceil(TILE).max(1);
        let params = resolve(run, &program(self.input), x, bound)?;
        let tile_count = run.alloc(DType::U32, ntiles as usize)?;
        let tile_next = if self.inline_outliers { None } else { Some(run.alloc(DType::U64, ntiles as usize)?) };
        Ok(Encoding { params, tile_count, tile_next, n, ntiles })
    }

    /// The outlier channel and the record, after the codes: the channel kernels read the
    /// input (at device address `x`) again, only in tiles that have outliers.
    pub(super) fn channel(
        &self,
        run: &mut DeviceRun,
        x: u64,
        words: Option<u64>,
        enc: Encoding,
        bound: ErrorBound,
    ) -> Result<(DeviceBuffer, PendingRecord)> {
        if self.inline_outliers {
            return self.inline_channel(run, x, words, enc, bound);
        }
        let program = program(self.input);
        let k = |name| run.kernel(&program, name);
        let (starts, sizes, write, export) =
            (k("q_tile_starts")?, k("q_entry_sizes")?, k("q_write_channel")?, k("q_export")?);
        let Encoding { params, tile_count, tile_next, n, ntiles } = enc;
        let tile_next = tile_next.ok_or_else(|| Error::Device("indexed outliers without tile_next".into()))?;
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
        // SAFETY: argument lists match device.cu; `x` holds n elements, the tile arrays ntiles
        // (+ 1) entries; the channel kernel writes nothing past `cap`.
        unsafe {
            s.launch_builder(&starts)
                .arg(&p(&tile_next))
                .arg(&p(&tile_count))
                .arg(&ntiles)
                .arg(&outliers_at)
                .launch(grid(1024, 1024))
                .map_err(device_error)?;
            s.launch_builder(&sizes)
                .arg(&x)
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
                .arg(&x)
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
        let record: PendingRecord = Box::new(move |sc| {
            let resolved = Resolved {
                abs_bound: sc.f64(abs_slot),
                step: sc.f64(step_slot),
                num_elements: n as u64,
                num_outliers: sc.u64(outliers_slot),
            };
            stage.record(bound, None, &resolved)
        });
        Ok((channel, record))
    }
}

impl Quantizer {
    /// The indexed outliers of `channel` as device lists (index, value bits) and their count:
    /// the channel is small, so the CPU's own validating parser reads it.
    fn outlier_list(
        &self,
        run: &DeviceRun,
        channel: &DeviceBuffer,
        n: usize,
    ) -> Result<(DeviceBuffer, DeviceBuffer, u64)> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
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
        let as_bytes = |v: &[u64]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let count = index.len() as u64;
        Ok((run.upload(DType::U64, &as_bytes(&index))?, run.upload(DType::U64, &as_bytes(&bits))?, count))
    }

    /// Put the indexed outliers back into `out` (after its codes were reconstructed).
    fn scatter_outliers(
        &self,
        run: &DeviceRun,
        index: &DeviceBuffer,
        bits: &DeviceBuffer,
        count: u64,
        out: u64,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let scatter = run.kernel(&program(self.input), "fz_scatter_outliers")?;
        let s = run.stream();
        // SAFETY: argument list matches device.cu; every index was checked against the output's
        // length by the parser.
        unsafe {
            s.launch_builder(&scatter)
                .arg(&index.ptr(s))
                .arg(&bits.ptr(s))
                .arg(&count)
                .arg(&out)
                .launch(grid(count, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        Ok(())
    }
}

impl DeviceStage for Quantizer {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let bound = self.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let [x] = inputs else { return Err(Error::Pipeline("Quantizer takes one input".into())) };
        let enc = self.begin(run, x, bound)?;
        let program = program(self.input);
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let n64 = enc.n as u64;
        let tile_grid = grid(enc.ntiles * 256, 256);
        let codes = if self.inline_outliers {
            let words = run.alloc(DType::U32, enc.n)?;
            let encode = run.kernel(&program, "qi_encode")?;
            // SAFETY: argument list matches device.cu; `words` holds n elements, the tile
            // counts ntiles.
            unsafe {
                s.launch_builder(&encode)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&p(&enc.params))
                    .arg(&p(&words))
                    .arg(&p(&enc.tile_count))
                    .launch(tile_grid)
                    .map_err(device_error)?;
            }
            words
        } else {
            let codes = run.alloc(DType::I32, enc.n)?;
            let encode = run.kernel(&program, "q_encode")?;
            let tile_next = enc.tile_next.as_ref().ok_or_else(|| Error::Device("no tile_next".into()))?;
            // SAFETY: argument list matches device.cu; `codes` holds n elements, the tile
            // arrays ntiles.
            unsafe {
                s.launch_builder(&encode)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&p(&enc.params))
                    .arg(&p(&codes))
                    .arg(&p(&enc.tile_count))
                    .arg(&p(tile_next))
                    .launch(tile_grid)
                    .map_err(device_error)?;
            }
            codes
        };
        let words = self.inline_outliers.then(|| p(&codes));
        let (channel, record) = self.channel(run, p(x), words, enc, bound)?;
        Ok(DeviceForwarded { outputs: vec![codes, channel], record })
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
        let (index, bits, count) = self.outlier_list(run, channel, n)?;
        let decode = run.kernel(&program(self.input), "q_decode")?;
        let out = run.alloc(self.input, n)?;
        let s = run.stream().clone();
        let n64 = n as u64;
        // SAFETY: argument list matches device.cu; `codes` and `out` hold n elements.
        unsafe {
            s.launch_builder(&decode)
                .arg(&codes.ptr(&s))
                .arg(&n64)
                .arg(&r.step)
                .arg(&out.ptr(&s))
                .launch(grid(n64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        self.scatter_outliers(run, &index, &bits, count, out.ptr(&s))?;
        Ok(vec![out])
    }
}
