//! Mask on the device (kernels in device.cu): the forward is four passes over tiles of 4096
//! elements (the bitmap of the mask, the values copied and their partial ranges; the run
//! starts; the run bytes; the segment and the fills) around three scans of per-tile counts.
//! The partial ranges travel with the values ([`FiniteRange`]), so that a quantizing stage
//! after the Mask resolves a relative bound without reading them again. The inverse validates the
//! segment on the host with the CPU's own parser (a mask is small), then restores the masked
//! runs by binary search (in place when nothing else holds the values) and scatters the
//! exceptions.

use super::{cpu, Decoded, Mask};
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, tile_loop_grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
    FiniteRange, THREADS,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{Error, Result};
use cudarc::driver::PushKernelArg;

/// The program for one element type.
pub(crate) fn program(real: DType) -> Program {
    Program::new(include_str!("device.cu"), format!("#define MASK_F64 {}\n", u8::from(real == DType::F64)))
}

/// Elements per tile of the forward kernels (`MASK_TILE` in device.cu).
const TILE: u64 = 4096;

/// Thread blocks of the bitmap pass at most: every one of its tiles is a full load, so a grid
/// of many waves keeps enough tiles in flight on every SM (2048 blocks, under two waves of an
/// H100, left the second one half empty), while its partial ranges stay few for fz_resolve.
const BITMAP_BLOCKS: u64 = 16384;

/// First guess at the segment's size: a run's varint per 8 elements (levitus_temp's land
/// needs one per 44, a padded edge chunk one); exceptions (masked values other than the
/// restore value) are rare, and a run that needs more room is repeated with the exact size.
fn segment_guess(n: usize) -> usize {
    n / 8 + 4096
}

/// First guess at the run starts (R + 1 entries): masks are runs of land or missing points
/// (levitus_temp's land: a run per 44 elements), not every other element; a run that finds
/// more is repeated with the exact count.
fn starts_guess(n: usize) -> usize {
    n / 32 + 4096
}

/// u64 words as the little-endian bytes an upload takes.
fn le_words(words: impl Iterator<Item = u64>) -> Vec<u8> {
    words.flat_map(u64::to_le_bytes).collect()
}

impl Mask {
    /// The predicate as device.cu's `masked` takes it: flag bits and the fill's bits.
    fn device_predicate(&self) -> (u32, u64) {
        let p = self.predicate();
        (u32::from(p.flags()), p.fill.unwrap_or(0))
    }
}

impl DeviceStage for Mask {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("Mask takes one input".into())) };
        let n = x.known_len()?;
        let program = program(self.input);
        let k = |name| run.kernel(&program, name);
        let (bitmap_k, first, starts_k, run_bytes, write, unfill) = (
            k("mask_bitmap")?,
            k("mask_first")?,
            k("mask_starts")?,
            k("mask_run_bytes")?,
            k("mask_write")?,
            k("mask_unfill")?,
        );
        let (n64, tiles) = (n as u64, (n as u64).div_ceil(TILE).max(1));
        // The fills go into the input itself where the job owns it (and are undone when the
        // walk ends), else into a copy.
        let in_place = run.may_overwrite(x);
        let values = if in_place {
            // SAFETY: the pipeline input the job uploaded, alive for the whole walk.
            unsafe { DeviceBuffer::borrowed(self.input, x.ptr(run.stream()), n) }
        } else {
            run.alloc(self.input, n)?
        };
        let bitmap = run.alloc(DType::U32, (tiles * TILE / 32) as usize)?;
        let tile_loop = tile_loop_grid(tiles, TILE / 32);
        let bitmap_grid = grid(tiles.min(BITMAP_BLOCKS) * TILE / 32, TILE / 32);
        // The values' partial ranges: one per block of the bitmap pass, and mask_first's for
        // an input masked throughout.
        let parts = u64::from(bitmap_grid.grid_dim.0) + 1;
        let range = run.alloc(DType::F64, 2 * parts as usize)?;
        // Per tile: boundaries, exception bytes, run bytes; and their exclusive scans.
        let per_tile = |dtype, extra| run.alloc(dtype, tiles as usize + extra);
        let (bounds, exceptions, runs) = (per_tile(DType::U32, 0)?, per_tile(DType::U32, 0)?, per_tile(DType::U32, 0)?);
        let (bound_off, exc_off, run_off) =
            (per_tile(DType::U64, 1)?, per_tile(DType::U64, 1)?, per_tile(DType::U64, 1)?);
        let partials = run.alloc(DType::U64, scan_partials_len(tiles))?;
        let (starts, starts_len) = run.alloc_dynamic(DType::U64, starts_guess(n))?;
        let (segment, segment_len) = run.alloc_dynamic(DType::U8, segment_guess(n))?;
        let (runs_slot, runs_at) = run.slot()?;
        let (restore_slot, restore_at) = run.slot()?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (cap, (flags, fill)) = (segment.len.capacity() as u64, self.device_predicate());
        let starts_cap = starts.len.capacity() as u64;
        // SAFETY: argument lists match device.cu; the bitmap holds a word per 32 elements of
        // every tile, the per-tile buffers `tiles` (+ 1) entries; nothing is written past
        // `starts_cap` entries of `starts` or `cap` bytes of `segment`, and the slots are live.
        unsafe {
            s.launch_builder(&bitmap_k)
                .arg(&p(x))
                .arg(&n64)
                .arg(&tiles)
                .arg(&flags)
                .arg(&fill)
                .arg(&p(&bitmap))
                .arg(&p(&bounds))
                .arg(&if in_place { 0 } else { p(&values) })
                .arg(&p(&range))
                .launch(bitmap_grid)
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&bounds), tiles, p(&partials), p(&bound_off))?;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&first)
                .arg(&p(x))
                .arg(&n64)
                .arg(&p(&bitmap))
                .arg(&p(&bound_off))
                .arg(&tiles)
                .arg(&p(&starts))
                .arg(&starts_cap)
                .arg(&starts_len)
                .arg(&runs_at)
                .arg(&restore_at)
                .arg(&p(&range))
                .arg(&parts)
                .launch(grid(32, 32))
                .map_err(device_error)?;
            s.launch_builder(&starts_k)
                .arg(&p(x))
                .arg(&n64)
                .arg(&tiles)
                .arg(&p(&bitmap))
                .arg(&p(&bound_off))
                .arg(&restore_at)
                .arg(&p(&starts))
                .arg(&starts_cap)
                .arg(&p(&exceptions))
                .launch(tile_loop)
                .map_err(device_error)?;
            s.launch_builder(&run_bytes)
                .arg(&n64)
                .arg(&tiles)
                .arg(&p(&bitmap))
                .arg(&p(&bound_off))
                .arg(&p(&starts))
                .arg(&starts_cap)
                .arg(&p(&runs))
                .launch(tile_loop)
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&exceptions), tiles, p(&partials), p(&exc_off))?;
        exclusive_scan(run, &program, p(&runs), tiles, p(&partials), p(&run_off))?;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&write)
                .arg(&p(x))
                .arg(&n64)
                .arg(&tiles)
                .arg(&p(&bitmap))
                .arg(&p(&bound_off))
                .arg(&p(&starts))
                .arg(&starts_cap)
                .arg(&p(&run_off))
                .arg(&p(&exc_off))
                .arg(&restore_at)
                .arg(&p(&values))
                .arg(&p(&segment))
                .arg(&cap)
                .arg(&segment_len)
                .launch(tile_loop)
                .map_err(device_error)?;
        }
        if in_place {
            let x_at = p(x);
            let kept = [bitmap, bound_off, run_off, exc_off, segment.share()];
            run.undo_at_walk_end(Box::new(move |run| {
                let s = run.stream();
                let [bitmap, bound_off, run_off, exc_off, segment] = kept.each_ref().map(|b| b.ptr(s));
                // SAFETY: as above; `kept` holds the buffers until the kernel is enqueued
                // (their frees are ordered after it on the stream).
                unsafe {
                    s.launch_builder(&unfill)
                        .arg(&x_at)
                        .arg(&n64)
                        .arg(&tiles)
                        .arg(&bitmap)
                        .arg(&bound_off)
                        .arg(&starts_cap)
                        .arg(&run_off)
                        .arg(&exc_off)
                        .arg(&restore_at)
                        .arg(&segment)
                        .arg(&cap)
                        .launch(tile_loop)
                        .map_err(device_error)?;
                }
                Ok(())
            }));
        }
        let stage = self.clone();
        let count = u32::try_from(parts).map_err(|_| Error::InvalidArgument(format!("Mask: {n} elements")))?;
        let values = values.with_finite_range(FiniteRange { parts: range, count });
        Ok(DeviceForwarded {
            outputs: vec![values, segment],
            record: Box::new(move |sc| {
                let d = Decoded { num_elements: n64, num_runs: sc.u64(runs_slot), restore: sc.u64(restore_slot) };
                Ok(stage.record(&d))
            }),
        })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let d = self.decoded.ok_or_else(|| Error::Pipeline("Mask inverse needs a decoded record".into()))?;
        let [values, segment] = outputs else {
            return Err(Error::Pipeline("Mask inverse needs values and the mask".into()));
        };
        let n = values.known_len()?;
        if n as u64 != d.num_elements {
            return Err(crate::error::corrupt!("Mask: {n} values for {} elements", d.num_elements));
        }
        // The mask is small: parse and validate it with the CPU's own parser.
        let bytes = run.download(segment, segment.known_len()?)?;
        let p = self.predicate();
        let parsed = match self.input {
            DType::F32 => cpu::parse::<f32>(&bytes, d.num_elements, d.num_runs, d.restore, &p)?,
            _ => cpu::parse::<f64>(&bytes, d.num_elements, d.num_runs, d.restore, &p)?,
        };
        let program = program(self.input);
        // Values nothing else holds take the masked values in place (a field without a mask
        // costs no pass at all); others are copied with them put back.
        let out = if run.may_consume(values) {
            fill_runs_in_place(run, &program, &parsed.masked, d.restore, values)?;
            values.share()
        } else {
            restore_into_copy(run, &program, self.input, &parsed.masked, d.restore, values)?
        };
        if !parsed.exceptions.is_empty() {
            scatter_exceptions(run, &program, &parsed.exceptions, &out)?;
        }
        Ok(vec![out])
    }
}

/// The restore value into every masked run of `values` (runs inside it, checked by the
/// parser), one thread per masked element; nothing when no element is masked.
fn fill_runs_in_place(
    run: &DeviceRun,
    program: &Program,
    masked: &[(u64, u64)],
    restore: u64,
    values: &DeviceBuffer,
) -> Result<()> {
    let mut first = Vec::with_capacity(masked.len());
    let mut total = 0u64;
    for &(start, end) in masked {
        first.push(total);
        total += end - start;
    }
    if total == 0 {
        return Ok(());
    }
    let mstart = run.upload(DType::U64, &le_words(masked.iter().map(|r| r.0)))?;
    let first = run.upload(DType::U64, &le_words(first.into_iter()))?;
    let fill = run.kernel(program, "mask_fill_runs")?;
    let s = run.stream();
    let runs = masked.len() as u64;
    // SAFETY: argument list matches device.cu; every run lies inside the values (checked by
    // the parser), and `first` has one entry per run.
    unsafe {
        s.launch_builder(&fill)
            .arg(&mstart.ptr(s))
            .arg(&first.ptr(s))
            .arg(&runs)
            .arg(&total)
            .arg(&restore)
            .arg(&values.ptr(s))
            .launch(grid(total, u64::from(THREADS)))
            .map_err(device_error)?;
    }
    Ok(())
}

/// A copy of `values` with the restore value in every masked run (runs checked by the parser).
fn restore_into_copy(
    run: &DeviceRun,
    program: &Program,
    dtype: DType,
    masked: &[(u64, u64)],
    restore: u64,
    values: &DeviceBuffer,
) -> Result<DeviceBuffer> {
    let n = values.known_len()?;
    let mstart = run.upload(DType::U64, &le_words(masked.iter().map(|r| r.0)))?;
    let mend = run.upload(DType::U64, &le_words(masked.iter().map(|r| r.1)))?;
    let kernel = run.kernel(program, "mask_restore")?;
    let out = run.alloc(dtype, n)?;
    let s = run.stream();
    let (n64, runs) = (n as u64, masked.len() as u64);
    // SAFETY: argument list matches device.cu; `out` and `values` hold n elements, every run
    // was checked against n by the parser.
    unsafe {
        s.launch_builder(&kernel)
            .arg(&values.ptr(s))
            .arg(&n64)
            .arg(&mstart.ptr(s))
            .arg(&mend.ptr(s))
            .arg(&runs)
            .arg(&restore)
            .arg(&out.ptr(s))
            .launch(grid(n64, u64::from(THREADS)))
            .map_err(device_error)?;
    }
    Ok(out)
}

/// The exceptions' own bits (masked values other than the restore value) into `out`; every
/// index was checked against its length by the parser.
fn scatter_exceptions(run: &DeviceRun, program: &Program, exceptions: &[(u64, u64)], out: &DeviceBuffer) -> Result<()> {
    let index = run.upload(DType::U64, &le_words(exceptions.iter().map(|e| e.0)))?;
    let bits = run.upload(DType::U64, &le_words(exceptions.iter().map(|e| e.1)))?;
    let scatter = run.kernel(program, "mask_scatter")?;
    let s = run.stream();
    let count = exceptions.len() as u64;
    // SAFETY: argument list matches device.cu; `index` and `bits` hold `count` entries.
    unsafe {
        s.launch_builder(&scatter)
            .arg(&index.ptr(s))
            .arg(&bits.ptr(s))
            .arg(&count)
            .arg(&out.ptr(s))
            .launch(grid(count, u64::from(THREADS)))
            .map_err(device_error)?;
    }
    Ok(())
}
