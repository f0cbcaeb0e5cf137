//! BitplaneRZE on the device (kernels in device.cu, a warp per chunk): flags and kept-word
//! counts per chunk (no transpose), a deterministic scan, then the header, start positions and
//! kept blocks. The inverse checks the lengths on the host ([`cpu::layout`]) and the metadata
//! on the device, raising an error flag where [`cpu::check`] would fail: no read-back.

use super::{cpu, BitplaneRze, MAX_CODES};
use crate::backend::cuda::device::{
    exclusive_scan, first_guess, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Threads per block (`BP_THREADS`) of every kernel; each works a warp per chunk.
const THREADS: u64 = 256;

pub(crate) fn program() -> Program {
    Program::new(include_str!("device.cu"), String::new())
}

/// The archive's largest size for `n` codes: metadata and every chunk kept whole.
fn worst_case(n: usize) -> usize {
    cpu::metadata_len(n) + 4 * cpu::CHUNK_WORDS * cpu::num_chunks(n)
}

impl DeviceStage for BitplaneRze {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [codes] = inputs else { return Err(Error::Pipeline("BitplaneRZE takes one input".into())) };
        let n = codes.known_len()?;
        if n > MAX_CODES {
            return Err(Error::InvalidArgument(format!("BitplaneRZE holds at most {MAX_CODES} codes")));
        }
        let nchunks = cpu::num_chunks(n);
        let (out, out_len) = run.alloc_dynamic(DType::U8, first_guess(2 * n, cpu::metadata_len(n), worst_case(n)))?;
        let counts = run.alloc(DType::U32, nchunks)?;
        let offsets = run.alloc(DType::U64, nchunks + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(nchunks as u64))?;
        let program = program();
        let (count, encode) = (run.kernel(&program, "bp_count")?, run.kernel(&program, "bp_encode")?);
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, nc, cap) = (n as u64, nchunks as u64, out.len.capacity() as u64);
        // SAFETY: argument lists match device.cu; `counts` and `offsets` hold nchunks (+ 1)
        // entries and the kernels write nothing past `cap` bytes of `out`.
        unsafe {
            s.launch_builder(&count)
                .arg(&p(codes))
                .arg(&n64)
                .arg(&nc)
                .arg(&p(&counts))
                .arg(&p(&out))
                .arg(&cap)
                .launch(grid(nc * 32, THREADS))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&counts), nc, p(&partials), p(&offsets))?;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&encode)
                .arg(&p(codes))
                .arg(&n64)
                .arg(&nc)
                .arg(&p(&offsets))
                .arg(&p(&out))
                .arg(&cap)
                .arg(&out_len)
                .launch(grid(nc * 32, THREADS))
                .map_err(device_error)?;
        }
        let record = Self::record(n);
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let n = self.num_codes.ok_or_else(|| Error::Pipeline("BitplaneRZE inverse needs a decoded record".into()))?;
        let n = usize::try_from(n).ok().filter(|&n| n <= MAX_CODES);
        let n = n.ok_or_else(|| corrupt!("BitplaneRZE code count out of range"))?;
        let [archive] = outputs else { return Err(Error::Pipeline("BitplaneRZE inverse takes one buffer".into())) };
        let len = archive.known_len()?;
        let (nchunks, stream_words) = cpu::layout(len, n)?;
        let bad = run.error_flag(format!(
            "BitplaneRZE: the header, flags or chunk starts do not describe {n} codes in {len} bytes"
        ))?;
        let (_, words_sum) = run.slot()?;
        let out = run.alloc(DType::U16, n)?;
        let program = program();
        let (decode, check_total) = (run.kernel(&program, "bp_decode")?, run.kernel(&program, "bp_check_total")?);
        let s = run.stream();
        let (n64, nc, sw) = (n as u64, nchunks as u64, stream_words as u64);
        // SAFETY: argument lists match device.cu; `len` covers the header, flags and starts
        // (cpu::layout), the kernel reads only blocks that lie in the bitstream's `sw` words,
        // and `out` holds n codes.
        unsafe {
            s.launch_builder(&decode)
                .arg(&archive.ptr(s))
                .arg(&n64)
                .arg(&nc)
                .arg(&sw)
                .arg(&out.ptr(s))
                .arg(&words_sum)
                .arg(&bad)
                .launch(grid(nc * 32, THREADS))
                .map_err(device_error)?;
            s.launch_builder(&check_total)
                .arg(&words_sum)
                .arg(&sw)
                .arg(&bad)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_bounds_incompressible_codes() {
        for n in [0usize, 1, 2048, 2049, 10_000] {
            let codes: Vec<u16> = (0..n as u32).map(|i| (i.wrapping_mul(0x9e37_79b9) >> 7) as u16 | 0x8001).collect();
            assert!(cpu::encode(&codes).len() <= worst_case(n), "{n}");
        }
        assert_eq!(worst_case(2048), cpu::HEADER_BYTES + 36 + 4096);
    }
}
