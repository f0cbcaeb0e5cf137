//! Bitshuffle on the device (kernels in device.cu): the same block layout; blocks up to 16 KiB
//! are shuffled in shared memory by one thread block each, larger ones by one thread per
//! 8-element group and element byte.

use super::Bitshuffle;
use crate::backend::cuda::device::{grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, THREADS};
use crate::backend::cuda::region::{Code, ForwardPart, Fragment, Geometry, InversePart, Region};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

static SOURCE: &str = include_str!("device.cu");

pub(crate) fn program() -> Program {
    Program::new(SOURCE, String::new())
}

/// Largest block (bytes) shuffled in shared memory (`BS_STAGE`), and that kernel's threads per
/// block (`BS_THREADS`).
const STAGE_BYTES: u64 = 16384;
const STAGE_THREADS: u64 = 256;

impl Bitshuffle {
    /// `len` bytes of `input` shuffled (or unshuffled) into `out`.
    fn launch(&self, run: &DeviceRun, input: &DeviceBuffer, out: &DeviceBuffer, len: u64, inverse: bool) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let s = run.stream();
        let (width, block, inverse) = (u32::from(self.element_width), u64::from(self.block_bytes), u32::from(inverse));
        // Blocks that fit shared memory are shuffled there, one thread block each.
        let (f, launch) = if block <= STAGE_BYTES {
            (run.kernel(&program(), "bs_blocks")?, grid(len.div_ceil(block) * STAGE_THREADS, STAGE_THREADS))
        } else {
            (run.kernel(&program(), "bs_run")?, grid(len.div_ceil(8), u64::from(THREADS)))
        };
        // SAFETY: argument lists match device.cu; both buffers hold `len` bytes.
        unsafe {
            s.launch_builder(&f)
                .arg(&input.ptr(s))
                .arg(&out.ptr(s))
                .arg(&len)
                .arg(&width)
                .arg(&block)
                .arg(&inverse)
                .launch(launch)
                .map_err(device_error)?;
        }
        Ok(())
    }
}

impl DeviceStage for Bitshuffle {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("Bitshuffle takes one input".into())) };
        if let Some(alone) = Region::alone(self, false) {
            return alone.forward_alone(run, x, DType::U8);
        }
        let len = x.known_len()? * self.data_type.size();
        let out = run.alloc(DType::U8, len)?;
        self.launch(run, x, &out, len as u64, false)?;
        let record = self.record();
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let [bytes] = outputs else { return Err(Error::Pipeline("Bitshuffle inverse takes one buffer".into())) };
        let len = bytes.known_len()?;
        let size = self.data_type.size();
        if !len.is_multiple_of(size) {
            return Err(corrupt!("Bitshuffle: {len} bytes are not whole {} elements", self.data_type));
        }
        if let Some(alone) = Region::alone(self, true) {
            return alone.inverse_alone(run, outputs, self.data_type);
        }
        let out = run.alloc(self.data_type, len / size)?;
        self.launch(run, bytes, &out, len as u64, true)?;
        Ok(vec![out])
    }
}

impl Fragment for Bitshuffle {
    fn sources(&self) -> Vec<&'static str> {
        vec![SOURCE]
    }

    fn geometry(&self) -> Option<Geometry> {
        (u64::from(self.block_bytes) <= STAGE_BYTES).then(|| Geometry {
            in_width: self.data_type.size(),
            out_width: 1,
            same_count: false,
            granule: self.block_bytes as usize,
            coder: false,
        })
    }

    fn forward_code(&self) -> Code {
        self.code(false)
    }

    fn inverse_code(&self) -> Code {
        self.code(true)
    }

    fn forward(&self, _run: &mut DeviceRun, _input: Option<&DeviceBuffer>, _n: usize) -> Result<ForwardPart> {
        Ok(ForwardPart::fixed(self.record()))
    }

    fn inverse(&self, _run: &mut DeviceRun, _outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        Ok(InversePart::fixed())
    }
}

impl Bitshuffle {
    fn code(&self, inverse: bool) -> Code {
        let (block, width) = (self.block_bytes, self.element_width);
        format!("bs_tile($in, $out, $bytes, {block}u, {width}u, {}u)", u32::from(inverse))
    }
}
