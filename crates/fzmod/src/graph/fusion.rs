//! The fusion contract (CUDA): a rule, beside the stages it fuses, recognises a pipeline or a
//! decode plan and runs it as fused kernels whose bytes equal the unfused path's. The executor
//! offers every pipeline to the registry's rules before walking it stage by stage. It lives
//! with the graph types a rule reads, below the stages that implement it and above the device
//! contract it uses.

use super::{DecodePlan, Decompressed, Pipeline};
use crate::archive::Header;
use crate::backend::cuda::device::DeviceBuffer;
use crate::backend::cuda::CudaDevice;
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Result};

/// A compress prepared on the device: `kernels` enqueues the work (repeatable, for timing),
/// `finish` synchronises once and returns the archive.
pub trait CompressJob {
    fn kernels(&mut self) -> Result<()>;
    fn finish(&mut self) -> Result<Vec<u8>>;
    /// How the pipeline ran (fusion rule, stages that ran on the CPU).
    fn notes(&self) -> Vec<String>;
}

/// A decompress prepared on the device, like [`CompressJob`].
pub trait DecompressJob {
    fn kernels(&mut self) -> Result<()>;
    /// Synchronise, check the result and download it straight into `dst` (native bytes of
    /// exactly the header's elements: the caller's memory, no staging copy).
    fn finish_into(&mut self, dst: &mut [u8]) -> Result<()>;
    /// The header of the archive being decoded.
    fn header(&self) -> &Header;
    fn notes(&self) -> Vec<String>;
}

/// Finish a decompress into a new host buffer.
pub fn finish(job: &mut dyn DecompressJob) -> Result<Decompressed> {
    let header = job.header().clone();
    let n = usize::try_from(header.num_elements()?).map_err(|_| corrupt!("{:?} elements", header.shape))?;
    let mut data = Buffer::zeroed(header.dtype, n)?;
    job.finish_into(data.native_bytes_mut())?;
    Ok(Decompressed { header, data, backend: "cuda" })
}

/// Where a compress reads the pipeline input: host memory (uploaded by the job) or the
/// caller's device memory. Both take the same path through the rules and the executor, so a
/// device-resident array gets the bytes the same array gets from host memory.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Host(View<'a>),
    Device { buffer: &'a DeviceBuffer, len: usize },
}

impl<'a> Source<'a> {
    /// A device buffer whose length is known on the host.
    pub fn device(buffer: &'a DeviceBuffer) -> Result<Source<'a>> {
        Ok(Source::Device { buffer, len: buffer.known_len()? })
    }

    pub fn dtype(&self) -> DType {
        match self {
            Source::Host(v) => v.dtype(),
            Source::Device { buffer, .. } => buffer.dtype,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Source::Host(v) => v.len(),
            Source::Device { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn byte_len(&self) -> usize {
        self.len() * self.dtype().size()
    }

    /// Put the input at device address `dst`: an upload, or a copy on the device.
    pub fn copy_to(&self, dev: &CudaDevice, dst: u64) -> Result<()> {
        match self {
            Source::Host(v) => dev.upload_to(v.native_bytes(), dst),
            Source::Device { buffer, .. } => dev.copy_on_device(buffer.ptr(dev.stream()), dst, self.byte_len()),
        }
    }
}

/// A fusion rule: recognises a pipeline (by its concrete stages, which the rule lives beside)
/// and runs it as fused kernels whose archive bytes equal the unfused path's.
pub trait FusionRule: Sync {
    fn name(&self) -> &'static str;
    /// `Ok(None)` when the rule does not apply to this pipeline and input.
    fn compress<'a>(
        &self,
        dev: &'a CudaDevice,
        pipeline: &'a Pipeline,
        input: Source<'a>,
        shape: &[usize],
    ) -> Result<Option<Box<dyn CompressJob + 'a>>>;
    /// `Ok(None)` when the rule does not apply to this archive.
    fn decompress<'a>(
        &self,
        dev: &'a CudaDevice,
        plan: DecodePlan<'a>,
    ) -> Result<std::result::Result<Box<dyn DecompressJob + 'a>, DecodePlan<'a>>>;
}
