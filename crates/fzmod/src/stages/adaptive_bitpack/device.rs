//! AdaptiveBitpack on the device (kernels in device.cu): block codes, a deterministic scan of
//! the payload sizes, then every block's payload at its offset.

use super::{AdaptiveBitpack, Layout};
use crate::backend::cuda::device::{
    exclusive_scan, first_guess, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
    THREADS,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Warps (coder blocks) per thread block (`AB_WARPS`).
const WARPS: u64 = 4;

pub(crate) fn program(input: DType, layout: Layout) -> Program {
    let defines = format!("#define CODE_I16 {}\n#define LAYOUT {}\n", u8::from(input == DType::I16), layout.code());
    Program::new(include_str!("device.cu"), defines)
}

impl AdaptiveBitpack {
    /// Worst-case payload of one block: the raw first magnitude, a sign region and every plane.
    fn max_block_bytes(&self) -> usize {
        let rate = self.input.size() * 8;
        rate / 8 + (self.block_size as usize).div_ceil(8) * (rate + 1)
    }
}

impl DeviceStage for AdaptiveBitpack {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [v] = inputs else { return Err(Error::Pipeline("AdaptiveBitpack takes one input".into())) };
        let n = v.known_len()?;
        let b = self.block_size as usize;
        let nblocks = n.div_ceil(b);
        let meta_len = nblocks * self.layout.meta_bytes();
        let worst = meta_len + nblocks * self.max_block_bytes();
        let (out, out_len) = run.alloc_dynamic(DType::U8, first_guess(n * self.input.size(), meta_len, worst))?;
        let cost = run.alloc(DType::U32, nblocks)?;
        let offsets = run.alloc(DType::U64, nblocks + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(nblocks as u64))?;
        let program = program(self.input, self.layout);
        let (choose, write) = (run.kernel(&program, "ab_choose")?, run.kernel(&program, "ab_write")?);
        let s = run.stream().clone();
        let p = |x: &DeviceBuffer| x.ptr(&s);
        let (n64, b64, nb, ml, capacity) =
            (n as u64, b as u64, nblocks as u64, meta_len as u64, out.len.capacity() as u64);
        // SAFETY: argument lists match device.cu; `out` holds the metadata, and `ab_write`
        // writes no block whose payload ends past `capacity`.
        unsafe {
            s.launch_builder(&choose)
                .arg(&p(v))
                .arg(&n64)
                .arg(&b64)
                .arg(&p(&out))
                .arg(&p(&cost))
                .launch(grid(nb * 32, WARPS * 32))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&cost), nb, p(&partials), p(&offsets))?;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&write)
                .arg(&p(v))
                .arg(&n64)
                .arg(&b64)
                .arg(&p(&offsets))
                .arg(&p(&out))
                .arg(&ml)
                .arg(&capacity)
                .launch(grid(nb * 32, WARPS * 32))
                .map_err(device_error)?;
        }
        // The archived length: metadata plus the scanned payload total.
        let total_at = p(&offsets) + 8 * nb;
        let add = run.kernel(&program, "fz_add_u64")?;
        // SAFETY: both addresses are live u64 slots.
        unsafe {
            s.launch_builder(&add).arg(&total_at).arg(&ml).arg(&out_len).launch(grid(1, 1)).map_err(device_error)?
        };
        let record = self.record(n);
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let n = self
            .num_elements
            .ok_or_else(|| Error::Pipeline("AdaptiveBitpack inverse needs a decoded record".into()))?;
        let [bytes] = outputs else { return Err(Error::Pipeline("AdaptiveBitpack inverse takes one buffer".into())) };
        let len = bytes.known_len()?;
        let nblocks = n.div_ceil(u64::from(self.block_size));
        // Every block costs at least one metadata byte: n is bounded by the bytes we hold.
        if nblocks > len as u64 {
            return Err(corrupt!("AdaptiveBitpack: {n} elements need more than {len} bytes"));
        }
        if n == 0 {
            return Ok(vec![run.alloc(self.input, 0)?]);
        }
        let meta_len = nblocks.checked_mul(self.layout.meta_bytes() as u64).filter(|&m| m <= len as u64);
        let meta_len =
            meta_len.ok_or_else(|| corrupt!("AdaptiveBitpack: metadata for {nblocks} blocks exceeds {len} bytes"))?;
        let program = program(self.input, self.layout);
        let (costs, decode) = (run.kernel(&program, "ab_costs")?, run.kernel(&program, "ab_decode")?);
        let cost = run.alloc(DType::U32, nblocks as usize)?;
        let offsets = run.alloc(DType::U64, nblocks as usize + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(nblocks))?;
        let err = run.alloc(DType::U32, 1)?;
        run.zero(&err)?;
        let s = run.stream().clone();
        let p = |x: &DeviceBuffer| x.ptr(&s);
        let b64 = u64::from(self.block_size);
        // SAFETY: argument lists match device.cu; the metadata lies inside `bytes`.
        unsafe {
            s.launch_builder(&costs)
                .arg(&p(bytes))
                .arg(&nblocks)
                .arg(&b64)
                .arg(&p(&cost))
                .arg(&p(&err))
                .launch(grid(nblocks, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&cost), nblocks, p(&partials), p(&offsets))?;
        // Decoding reads at the scanned offsets: check them against the payload first.
        let total = run.read_u64(&offsets, nblocks as usize)?;
        let flag = run.download(&err, 1)?;
        if flag != [0, 0, 0, 0] || total != len as u64 - meta_len {
            return Err(corrupt!(
                "AdaptiveBitpack: blocks need {total} payload bytes, segment has {} (or a block is invalid)",
                len as u64 - meta_len
            ));
        }
        let out = run.alloc(self.input, n as usize)?;
        // SAFETY: every block's payload lies inside the segment (checked above).
        unsafe {
            s.launch_builder(&decode)
                .arg(&p(bytes))
                .arg(&meta_len)
                .arg(&p(&offsets))
                .arg(&n)
                .arg(&b64)
                .arg(&p(&out))
                .arg(&p(&err))
                .launch(grid(nblocks * 32, WARPS * 32))
                .map_err(device_error)?;
        }
        if run.download(&err, 1)? != [0, 0, 0, 0] {
            return Err(corrupt!(
                "AdaptiveBitpack: a magnitude does not fit {}, or a zero has a sign (non-canonical)",
                self.input
            ));
        }
        Ok(vec![out])
    }
}
