//! Difference on the device (kernels in device.cu after words.cu): a per-element forward and a
//! scan-based inverse whose result does not depend on how the scan is split.

use super::Difference;
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, THREADS,
};
use crate::backend::cuda::region::{Code, ForwardPart, Fragment, Geometry, InversePart};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{Error, Result};
use cudarc::driver::PushKernelArg;

/// Chunks (words) the one-pass inverse takes: at most `DIFF_CHUNK_MAX`, and enough to keep its
/// `DIFF_THREADS` threads busy; other chunks go through the global scan.
const CHUNK_MIN: u64 = 256;
const CHUNK_MAX: u64 = 8192;
const CHUNK_THREADS: u64 = 256;

pub(crate) fn program() -> Program {
    Program::new(concat!(include_str!("../words.cu"), include_str!("device.cu")), String::new())
}

/// device.cu alone (a fused region includes words.cu once, before it).
pub(crate) static SOURCE: &str = include_str!("device.cu");

impl Difference {
    /// Elements per chunk as the kernels take it (the whole array when unchunked).
    fn device_chunk(&self, n: usize) -> u64 {
        match self.chunk_elems() {
            0 => n.max(1) as u64,
            c => c as u64,
        }
    }
}

impl DeviceStage for Difference {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("Difference takes one input".into())) };
        let n = x.known_len()?;
        let out = run.alloc(self.output_type(), n)?;
        let f = run.kernel(&program(), "diff_forward")?;
        let s = run.stream();
        let (n64, bits, chunk, op) = (n as u64, 8 * self.input.size() as u32, self.device_chunk(n), self.map.code());
        let op = u32::from(op);
        // SAFETY: argument list matches device.cu; both buffers hold n words of `bits`.
        unsafe {
            s.launch_builder(&f)
                .arg(&x.ptr(s))
                .arg(&out.ptr(s))
                .arg(&n64)
                .arg(&bits)
                .arg(&chunk)
                .arg(&op)
                .launch(grid(n64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        let record = self.record();
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let [d] = outputs else { return Err(Error::Pipeline("Difference inverse takes one buffer".into())) };
        let n = d.known_len()?;
        let program = program();
        let (n64, bits, chunk) = (n as u64, 8 * self.input.size() as u32, self.device_chunk(n));
        let op = u32::from(self.map.code());
        if (CHUNK_MIN..=CHUNK_MAX).contains(&chunk) {
            let out = run.alloc(self.input, n)?;
            let s = run.stream().clone();
            let f = run.kernel(&program, "diff_inverse_chunks")?;
            // SAFETY: argument list matches device.cu; `d` and `out` hold n words.
            unsafe {
                s.launch_builder(&f)
                    .arg(&d.ptr(&s))
                    .arg(&out.ptr(&s))
                    .arg(&n64)
                    .arg(&bits)
                    .arg(&chunk)
                    .arg(&op)
                    .launch(grid(n64.div_ceil(chunk) * CHUNK_THREADS, CHUNK_THREADS))
                    .map_err(device_error)?;
            }
            return Ok(vec![out]);
        }
        let (undo, finish) = (run.kernel(&program, "diff_undo")?, run.kernel(&program, "diff_finish")?);
        let wide = run.alloc(DType::U32, n)?;
        let sums = run.alloc(DType::U64, n + 1)?;
        let partials = run.alloc(DType::U64, scan_partials_len(n as u64))?;
        let out = run.alloc(self.input, n)?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        // SAFETY: argument lists match device.cu; `wide` and `out` hold n words, `sums` n + 1.
        unsafe {
            s.launch_builder(&undo)
                .arg(&p(d))
                .arg(&p(&wide))
                .arg(&n64)
                .arg(&bits)
                .arg(&op)
                .launch(grid(n64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        exclusive_scan(run, &program, p(&wide), n64, p(&partials), p(&sums))?;
        // SAFETY: as above.
        unsafe {
            s.launch_builder(&finish)
                .arg(&p(&sums))
                .arg(&p(&out))
                .arg(&n64)
                .arg(&bits)
                .arg(&chunk)
                .launch(grid(n64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

impl Fragment for Difference {
    fn sources(&self) -> Vec<&'static str> {
        vec![crate::stages::words::device::SOURCE, SOURCE]
    }

    fn geometry(&self) -> Option<Geometry> {
        // Unchunked differences run over the whole array: not tile-local.
        let w = self.input.size();
        (self.chunk_elems() > 0).then(|| Geometry {
            in_width: w,
            out_width: w,
            same_count: true,
            granule: self.chunk_elems() * w,
            coder: false,
        })
    }

    fn forward_code(&self) -> Code {
        self.code("diff_tile_forward($in, $out, $bytes", ")")
    }

    fn inverse_code(&self) -> Code {
        self.code("diff_tile_inverse($in, $out, $bytes", ", $scratch)")
    }

    fn forward(&self, _run: &mut DeviceRun, _input: Option<&DeviceBuffer>, _n: usize) -> Result<ForwardPart> {
        Ok(ForwardPart::fixed(self.record()))
    }

    fn inverse(&self, _run: &mut DeviceRun, _outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        Ok(InversePart::fixed())
    }
}

impl Difference {
    /// A fragment call: `head`, then the word width, chunk and map, then `tail`.
    fn code(&self, head: &str, tail: &str) -> Code {
        let (bits, chunk, op) = (8 * self.input.size(), self.chunk_elems(), self.map.code());
        format!("{head}, {bits}u, {chunk}u, {op}u{tail}")
    }
}
