//! ANS on the device (kernels in device.cu): histogram, normalisation and encoding are three
//! launches with no host synchronisation (the probabilities never leave the device); the
//! encoder places each block by a decoupled look-back. The inverse checks the probabilities
//! and builds the decode table on the host, places the blocks by a scan of their sizes on the
//! device, and decodes one block per warp (the decoder makes the CPU's checks of the word
//! counts: error flags, read after the run).

use super::{cpu, Ans};
use crate::backend::cuda::device::{
    block_offsets, first_guess, grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Warps (ANS blocks) per thread block (`ANS_WARPS`) and the most thread blocks a launch uses.
const WARPS: u64 = 4;
const MAX_BLOCKS: u64 = 1 << 15;
/// Thread blocks of the histogram (each loops over its share).
const HISTOGRAM_BLOCKS: u64 = 1024;

pub(crate) fn program() -> Program {
    Program::new(include_str!("device.cu"), String::new())
}

/// One warp per ANS block, at most [`MAX_BLOCKS`] thread blocks (they loop).
fn warp_grid(nblocks: u64) -> cudarc::driver::LaunchConfig {
    grid(nblocks.div_ceil(WARPS).min(MAX_BLOCKS) * WARPS * 32, WARPS * 32)
}

impl DeviceStage for Ans {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("ANS takes one input".into())) };
        let n = x.known_len()?;
        let nblocks = n.div_ceil(cpu::BLOCK);
        // The head, then room for half the symbols first (the worst case, every block raw,
        // grows in a repeated run).
        let head = if n == 0 { 0 } else { cpu::head_len(nblocks) };
        let (out, out_len) = run.alloc_dynamic(DType::U8, first_guess(n, head, head + n))?;
        let record = self.record(n);
        let record: crate::backend::cuda::device::PendingRecord = Box::new(move |_| Ok(record));
        if n == 0 {
            // The length slot starts at zero: an empty segment.
            return Ok(DeviceForwarded { outputs: vec![out], record });
        }
        let counts = run.alloc(DType::U64, 256)?;
        run.zero(&counts)?;
        let table = run.alloc(DType::U32, 256)?;
        // The ticket counter, then one look-back word per block, zeroed.
        let state = run.alloc(DType::U64, nblocks + 1)?;
        run.zero(&state)?;
        let program = program();
        let (histogram, normalise, encode) = (
            run.kernel(&program, "ans_histogram")?,
            run.kernel(&program, "ans_normalise")?,
            run.kernel(&program, "ans_encode")?,
        );
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, nb, bits) = (n as u64, nblocks as u64, self.prob_bits);
        let histogram_blocks = (n64.div_ceil(4 * 256)).clamp(1, HISTOGRAM_BLOCKS);
        // SAFETY: argument lists match device.cu; `counts` holds 256 u64, `table` 256 u32,
        // `state` nblocks + 1 u64 (zeroed), `out` at least the head (blocks past its capacity
        // are not written), and `out_len` is a live u64 slot.
        unsafe {
            s.launch_builder(&histogram)
                .arg(&p(x))
                .arg(&n64)
                .arg(&p(&counts))
                .launch(grid(histogram_blocks * 256, 256))
                .map_err(device_error)?;
            s.launch_builder(&normalise)
                .arg(&p(&counts))
                .arg(&bits)
                .arg(&p(&out))
                .arg(&p(&table))
                .launch(grid(256, 256))
                .map_err(device_error)?;
            s.launch_builder(&encode)
                .arg(&p(x))
                .arg(&n64)
                .arg(&nb)
                .arg(&bits)
                .arg(&p(&table))
                .arg(&p(&state))
                .arg(&p(&out))
                .arg(&out_len)
                .arg(&(out.len.capacity() as u64))
                .launch(warp_grid(nb))
                .map_err(device_error)?;
        }
        Ok(DeviceForwarded { outputs: vec![out], record })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let n = self.recorded_len()?;
        let [seg] = outputs else { return Err(Error::Pipeline("ANS inverse takes one buffer".into())) };
        let seg_len = seg.known_len()?;
        let out = run.alloc(DType::U8, n)?;
        if n == 0 {
            if seg_len != 0 {
                return Err(corrupt!("ANS: {seg_len} bytes for an empty input"));
            }
            return Ok(vec![out]);
        }
        let nblocks = n.div_ceil(cpu::BLOCK);
        let head_len = cpu::head_len(nblocks);
        if head_len > seg_len {
            return Err(corrupt!("ANS: {n} bytes need a {head_len} byte head, the segment has {seg_len}"));
        }
        // The probabilities are checked on the host. The blocks are placed by a scan on the
        // device, which also makes the checks of their word counts: on the host, that work
        // ran before the first kernel and left the device idle (0.3 ms for 18 k blocks).
        let probs = cpu::read_probs(&run.download(seg, cpu::PROBS_BYTES)?, self.prob_bits)?;
        let table: Vec<u8> = cpu::decode_table(&probs).iter().flat_map(|t| t.to_le_bytes()).collect();
        let table = run.upload(DType::U32, &table)?;
        let program = program();
        let offsets = block_offsets(run, &program, "ans_block_sizes", seg, n as u64, nblocks as u64)?;
        // Raised by the kernel, read once after the run (no synchronisation here).
        let err = run.error_flag("ANS: a block does not decode to its states and words".into())?;
        let table_err = run.error_flag(format!(
            "ANS: the word counts of {nblocks} blocks do not place them in the {seg_len} byte segment"
        ))?;
        let decode = run.kernel(&program, "ans_decode")?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, nb, bits, seg64) = (n as u64, nblocks as u64, self.prob_bits, seg_len as u64);
        // SAFETY: argument list matches device.cu; `offsets` holds nblocks + 1 sums, the
        // decoder reads no block that leaves `seg`, `table` holds 2^bits entries and `out` n bytes.
        unsafe {
            s.launch_builder(&decode)
                .arg(&p(seg))
                .arg(&p(&offsets))
                .arg(&seg64)
                .arg(&n64)
                .arg(&nb)
                .arg(&bits)
                .arg(&p(&table))
                .arg(&p(&out))
                .arg(&err)
                .arg(&table_err)
                .launch(warp_grid(nb))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}
