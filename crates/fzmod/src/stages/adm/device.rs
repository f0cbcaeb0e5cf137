//! ADM on the device (kernels in device.cu): a measuring pass writes the code bytes, the side
//! table and each block's payload size; a deterministic scan places the payloads; a second pass
//! writes them. No host synchronisation. The inverse places the payloads by a scan of their
//! lengths on the device and decodes one block per warp; the decoder makes cpu.rs
//! payload_starts's checks of the length bytes (error flags, read after the run).

use super::{cpu, Adm};
use crate::backend::cuda::device::{
    block_offsets, exclusive_scan, first_guess, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun,
    DeviceStage,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Warps (ADM blocks) per thread block (`ADM_WARPS`) and the most thread blocks a launch uses.
const WARPS: u64 = 4;
const MAX_BLOCKS: u64 = 1 << 16;

pub(crate) fn program(input: DType) -> Program {
    let (t, bytes) = if input == DType::U32 { ("unsigned int", 4) } else { ("unsigned short", 2) };
    Program::new(include_str!("device.cu"), format!("#define ADM_T {t}\n#define ADM_BYTES {bytes}\n"))
}

/// One warp per ADM block, grid-stride beyond [`MAX_BLOCKS`] thread blocks.
fn warp_grid(nblocks: u64) -> cudarc::driver::LaunchConfig {
    grid(nblocks.div_ceil(WARPS).min(MAX_BLOCKS) * WARPS * 32, WARPS * 32)
}

impl DeviceStage for Adm {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("ADM takes one input".into())) };
        let n = x.known_len()?;
        let word = self.input.size();
        let nblocks = n.div_ceil(cpu::BLOCK);
        let table = cpu::table_len(nblocks, word);
        let codes = run.alloc(DType::U8, n)?;
        // The table, then room for half the words' bytes first (the worst case, every block
        // raw, grows in a repeated run).
        let (side, side_len) = run.alloc_dynamic(DType::U8, first_guess(n * word, table, table + n * word))?;
        let record = self.record(n);
        let record: crate::backend::cuda::device::PendingRecord = Box::new(move |_| Ok(record));
        if nblocks == 0 {
            // The length slot starts at zero: an empty side stream.
            return Ok(DeviceForwarded { outputs: vec![codes, side], record });
        }
        let sizes = run.alloc(DType::U32, nblocks)?;
        let offsets = run.alloc(DType::U64, nblocks + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(nblocks as u64))?;
        let program = program(self.input);
        let (measure, payload) = (run.kernel(&program, "adm_measure")?, run.kernel(&program, "adm_payload")?);
        let add = run.kernel(&program, "fz_add_u64")?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, nb, table64) = (n as u64, nblocks as u64, table as u64);
        // SAFETY: argument lists match device.cu; `codes` holds n bytes, `side` at least the
        // table (payloads past its capacity are not written), `sizes` nblocks and `offsets`
        // nblocks + 1 entries.
        unsafe {
            s.launch_builder(&measure)
                .arg(&p(x))
                .arg(&n64)
                .arg(&nb)
                .arg(&p(&codes))
                .arg(&p(&side))
                .arg(&p(&sizes))
                .launch(warp_grid(nb))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&sizes), nb, p(&partials), p(&offsets))?;
        let total_at = p(&offsets) + 8 * nb;
        // SAFETY: as above; `total_at` and `side_len` are live u64 slots.
        unsafe {
            s.launch_builder(&payload)
                .arg(&p(x))
                .arg(&n64)
                .arg(&nb)
                .arg(&p(&offsets))
                .arg(&p(&side))
                .arg(&table64)
                .arg(&(side.len.capacity() as u64))
                .launch(warp_grid(nb))
                .map_err(device_error)?;
            s.launch_builder(&add)
                .arg(&total_at)
                .arg(&table64)
                .arg(&side_len)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        Ok(DeviceForwarded { outputs: vec![codes, side], record })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let n = self.recorded_len()?;
        let [codes, side] = outputs else { return Err(Error::Pipeline("ADM inverse takes two buffers".into())) };
        if codes.known_len()? != n {
            return Err(corrupt!("ADM: {} code bytes for {n} words", codes.known_len()?));
        }
        let word = self.input.size();
        let nblocks = n.div_ceil(cpu::BLOCK);
        let table = cpu::table_len(nblocks, word);
        let side_len = side.known_len()?;
        if table > side_len {
            return Err(corrupt!("ADM: {n} words need a {table} byte table, the side stream has {side_len}"));
        }
        let out = run.alloc(self.input, n)?;
        if nblocks == 0 {
            return Ok(vec![out]);
        }
        // Host work here runs while the kernels before it do: placing 146 k payloads of a
        // 75 M-word input on the host (1 ms) left the device idle, so the device scans them.
        let program = program(self.input);
        let offsets = block_offsets(run, &program, "adm_payload_lens", side, n as u64, nblocks as u64)?;
        // Raised by the kernel, read once after the run (no synchronisation here).
        let err = run.error_flag("ADM: a block's signals do not match its code bytes".into())?;
        let table_err = run.error_flag(format!(
            "ADM: the length bytes of {nblocks} blocks do not place their payloads in the {side_len} byte side stream"
        ))?;
        let decode = run.kernel(&program, "adm_decode")?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, nb, table64, side64) = (n as u64, nblocks as u64, table as u64, side_len as u64);
        // SAFETY: argument list matches device.cu; the kernel reads no payload that leaves
        // `side` (its side_len bytes), `offsets` holds nblocks + 1 sums, `codes` n bytes and
        // `out` n words.
        unsafe {
            s.launch_builder(&decode)
                .arg(&p(codes))
                .arg(&p(side))
                .arg(&p(&offsets))
                .arg(&table64)
                .arg(&side64)
                .arg(&n64)
                .arg(&nb)
                .arg(&p(&out))
                .arg(&err)
                .arg(&table_err)
                .launch(warp_grid(nb))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}
