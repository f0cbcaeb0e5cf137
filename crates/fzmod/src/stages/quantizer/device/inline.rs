//! The PFPL inline-word mode on the device (`qi_*` kernels in device.cu): words per element,
//! escaped values ranked per tile by a scan, so the channel holds them in index order.

use super::{channel_guess, program, Encoding, TILE};
use crate::backend::cuda::device::{exclusive_scan, grid, scan_partials_len, DeviceBuffer, DeviceRun, PendingRecord};
use crate::backend::cuda::device_error;
use crate::element::DType;
use crate::error::{corrupt, Result};
use crate::stage::ErrorBound;
use crate::stages::quantizer::channel::Layout;
use crate::stages::quantizer::{Quantizer, Resolved};
use cudarc::driver::PushKernelArg;

/// Threads per tile kernel (`Q_THREADS`).
const TILE_THREADS: u64 = 256;

/// Channel bytes to reserve: an f32 value escapes only when its bits equal the escape word (a
/// NaN), so a small buffer almost always does; f64 outliers are as common as the indexed kind.
fn inline_channel_guess(n: usize, real: DType) -> usize {
    if real == DType::F32 {
        4096
    } else {
        channel_guess(n, real.size())
    }
}

/// Tiles of `n` elements (at least one, so the scans always have an item).
pub(super) fn tiles(n: usize) -> u64 {
    (n as u64).div_ceil(TILE).max(1)
}

impl Quantizer {
    /// The escape channel and the record after the words (at `words`, or on chip in a fused
    /// region: `None`, and the channel kernel quantizes the escaping tiles again).
    pub(super) fn inline_channel(
        &self,
        run: &mut DeviceRun,
        x: u64,
        words: Option<u64>,
        enc: Encoding,
        bound: ErrorBound,
    ) -> Result<(DeviceBuffer, PendingRecord)> {
        let Encoding { params, tile_count, n, ntiles, .. } = enc;
        let program = program(self.input);
        let (write, export) = (run.kernel(&program, "qi_write_channel")?, run.kernel(&program, "qi_export")?);
        let offsets = run.alloc(DType::U64, ntiles as usize + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(ntiles))?;
        let (channel, channel_len) = run.alloc_dynamic(DType::U8, inline_channel_guess(n, self.input))?;
        let (outliers_slot, outliers_at) = run.slot()?;
        let (abs_slot, abs_at) = run.slot()?;
        let (step_slot, step_at) = run.slot()?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, cap, words) = (n as u64, channel.len.capacity() as u64, words.unwrap_or(0));
        exclusive_scan(run, &program, p(&tile_count), ntiles, p(&partials), p(&offsets))?;
        let total_at = p(&offsets) + 8 * ntiles;
        // SAFETY: argument lists match device.cu; `x` (and `words`, unless null) hold n
        // elements, the tile arrays ntiles (+ 1) entries; nothing is written past `cap` bytes.
        unsafe {
            s.launch_builder(&write)
                .arg(&x)
                .arg(&words)
                .arg(&p(&params))
                .arg(&n64)
                .arg(&p(&tile_count))
                .arg(&p(&offsets))
                .arg(&p(&channel))
                .arg(&cap)
                .launch(grid(ntiles * TILE_THREADS, TILE_THREADS))
                .map_err(device_error)?;
            s.launch_builder(&export)
                .arg(&p(&params))
                .arg(&total_at)
                .arg(&abs_at)
                .arg(&step_at)
                .arg(&outliers_at)
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
                layout: Layout::Indexed,
            };
            stage.record(bound, None, &resolved)
        });
        Ok((channel, record))
    }

    /// The exclusive scan of per-tile escape counts (ntiles + 1 offsets, the last the total).
    pub(super) fn escape_offsets(
        &self,
        run: &DeviceRun,
        tile_count: &DeviceBuffer,
        ntiles: u64,
    ) -> Result<DeviceBuffer> {
        let offsets = run.alloc(DType::U64, ntiles as usize + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(ntiles))?;
        let s = run.stream();
        exclusive_scan(run, &program(self.input), tile_count.ptr(s), ntiles, partials.ptr(s), offsets.ptr(s))?;
        Ok(offsets)
    }

    /// Scan per-tile escape counts and check their total against the record and the channel
    /// (as cpu.rs's reconstruct_inline does); returns the scanned offsets.
    fn checked_escape_offsets(
        &self,
        run: &DeviceRun,
        tile_count: &DeviceBuffer,
        ntiles: u64,
        channel_bytes: u64,
        r: Resolved,
    ) -> Result<DeviceBuffer> {
        let offsets = self.escape_offsets(run, tile_count, ntiles)?;
        let escapes = run.read_u64(&offsets, ntiles as usize)?;
        if escapes != r.num_outliers || escapes.checked_mul(self.input.size() as u64) != Some(channel_bytes) {
            return Err(corrupt!(
                "Quantizer: {escapes} escapes, {} outliers, {channel_bytes} channel bytes",
                r.num_outliers
            ));
        }
        Ok(offsets)
    }

    /// Inverse: the escapes are counted and checked against the record and the channel (as
    /// cpu.rs's reconstruct_inline does) before any word is decoded.
    pub(super) fn inverse_inline(
        &self,
        run: &mut DeviceRun,
        words: &DeviceBuffer,
        channel: &DeviceBuffer,
        r: Resolved,
    ) -> Result<Vec<DeviceBuffer>> {
        let n = words.known_len()?;
        let channel_bytes = channel.known_len()? as u64;
        let program = program(self.input);
        let (count, decode) = (run.kernel(&program, "qi_count")?, run.kernel(&program, "qi_decode")?);
        let ntiles = tiles(n);
        let tile_count = run.alloc(DType::U32, ntiles as usize)?;
        let out = run.alloc(self.input, n)?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let n64 = n as u64;
        let tile_grid = grid(ntiles * TILE_THREADS, TILE_THREADS);
        // SAFETY: argument lists match device.cu; `words` holds n words.
        unsafe {
            s.launch_builder(&count)
                .arg(&p(words))
                .arg(&n64)
                .arg(&p(&tile_count))
                .launch(tile_grid)
                .map_err(device_error)?;
        }
        let offsets = self.checked_escape_offsets(run, &tile_count, ntiles, channel_bytes, r)?;
        // SAFETY: every escape's rank lies below `escapes`, whose values the channel holds.
        unsafe {
            s.launch_builder(&decode)
                .arg(&p(words))
                .arg(&n64)
                .arg(&r.step)
                .arg(&p(&offsets))
                .arg(&p(channel))
                .arg(&p(&out))
                .launch(tile_grid)
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_every_element_and_at_least_one() {
        assert_eq!(tiles(0), 1);
        assert_eq!(tiles(TILE as usize), 1);
        assert_eq!(tiles(TILE as usize + 1), 2);
        assert_eq!(inline_channel_guess(1 << 20, DType::F32), 4096);
        assert!(inline_channel_guess(1 << 20, DType::F64) >= (1 << 20) / 16 * 8);
    }
}
