//! The embedding API: borrowed slices in, archive bytes out, and back into caller memory;
//! a reusable [`Compressor`]; and device-resident entry points for GPU-native callers.

use crate::archive::Header;
use crate::backend::{Backend, BackendChoice};
use crate::element::{Element, View};
use crate::error::Result;
use crate::graph::Pipeline;
use crate::run::{Decoder, RunOptions};
use crate::stage::ErrorBound;

/// A finalized pipeline bound to a backend, reused across calls.
///
/// Compiled kernels, the device workspace and the pinned transfer buffers belong to the
/// process-wide device and stay warm between calls. A `Compressor` is `Send + Sync`: share it
/// across threads freely; calls on one GPU are ordered by its stream (they overlap with host
/// work, not with each other), and calls on the CPU run in parallel.
#[derive(Clone, Debug)]
pub struct Compressor {
    /// Finalized once, here; every call borrows it.
    pipeline: Pipeline,
    decoder: Decoder,
    opts: RunOptions,
}

impl Compressor {
    /// Use `pipeline` (its error bound must be set) on `backend`.
    pub fn new(mut pipeline: Pipeline, backend: Backend) -> Result<Self> {
        pipeline.finalize()?;
        Ok(Compressor { pipeline, decoder: Decoder::new(backend), opts: RunOptions::default() })
    }

    /// A preset for arrays of `shape` and element type `T`, with `bound`, on the backend
    /// `choice` selects (`Auto`: the GPU when usable).
    pub fn preset<T: Element>(name: &str, shape: &[usize], bound: ErrorBound, choice: BackendChoice) -> Result<Self> {
        let mut pipeline = crate::preset(name, shape)?;
        pipeline.set_error_bound(bound)?;
        pipeline.set_input_dtype(T::DTYPE)?;
        Compressor::new(pipeline, Backend::select(choice)?.0)
    }

    /// The same compressor with other run options (e.g. fusion off).
    pub fn with_options(self, opts: RunOptions) -> Self {
        Compressor { opts, decoder: self.decoder.with_options(opts), ..self }
    }

    pub fn backend(&self) -> &Backend {
        self.decoder.backend()
    }

    /// Compress borrowed values (C order, `shape` slowest first). The GPU path uploads from
    /// `data` directly; nothing is copied on the host.
    pub fn compress<T: Element>(&self, data: &[T], shape: &[usize]) -> Result<Vec<u8>> {
        self.pipeline.compress_view(self.backend(), View::of(data), shape, self.opts)
    }

    /// Compress borrowed values as a chunked archive (docs/FORMAT.md §8) for region decode:
    /// chunks compress in parallel on the CPU, one after another on a GPU (the same device
    /// path as [`Compressor::compress`]); the bytes do not depend on the thread count.
    pub fn compress_chunked<T: Element>(
        &self,
        data: &[T],
        shape: &[usize],
        chunks: &crate::chunking::ChunkOptions,
    ) -> Result<Vec<u8>> {
        self.pipeline.compress_chunked_view(self.backend(), View::of(data), shape, chunks, self.opts)
    }

    /// Decode an archive into `out`, which must hold exactly its elements, of its type.
    pub fn decompress_into<T: Element>(&self, archive: &[u8], out: &mut [T]) -> Result<Header> {
        self.decoder.decompress_into(archive, out)
    }
}

/// Compress borrowed values with a preset on the CPU (the reference; see [`Compressor`] for
/// the GPU and for reuse).
pub fn compress<T: Element>(data: &[T], shape: &[usize], preset: &str, bound: ErrorBound) -> Result<Vec<u8>> {
    Compressor::preset::<T>(preset, shape, bound, BackendChoice::Cpu)?.compress(data, shape)
}

/// Decode an archive into caller memory on the CPU.
pub fn decompress_into<T: Element>(archive: &[u8], out: &mut [T]) -> Result<Header> {
    Decoder::new(Backend::Cpu).decompress_into(archive, out)
}

#[cfg(feature = "cuda")]
mod device_resident {
    use super::*;
    use crate::backend::cuda::device::DeviceBuffer;
    use crate::error::Error;
    use crate::executor::{self, Source};

    impl Compressor {
        /// Compress values already in device memory: the same path as host input (fusion
        /// rules included) and the same bytes; only the archive crosses the host link, and
        /// the input too in the rare case that storing it as is wins. Needs a CUDA backend.
        pub fn compress_device(&self, input: &DeviceBuffer, shape: &[usize]) -> Result<Vec<u8>> {
            let Backend::Cuda(dev) = self.backend() else {
                return Err(Error::BackendUnavailable("device-resident input needs the CUDA backend".into()));
            };
            let source = Source::device(input)?;
            // The host path's checks (shape, dimensions, emptiness), the same refusals.
            self.pipeline.check_input_len(source.len(), shape)?;
            let mut job = executor::compress_job(dev, &self.pipeline, source, shape, self.opts.fusion)?;
            job.kernels()?;
            let archive = job.finish()?;
            drop(job);
            if archive.len() <= source.byte_len() {
                return Ok(archive);
            }
            let host = dev.to_host(input)?;
            crate::fallback::smaller_of(&self.pipeline, archive, host.view(), shape)
        }

        /// Decode an archive into a new device buffer (validated like every decode).
        pub fn decompress_device(&self, archive: &[u8]) -> Result<(DeviceBuffer, Header)> {
            self.decoder.decompress_device(archive)
        }
    }

    impl Decoder {
        /// Decode an archive into a new device buffer (validated like every decode, under
        /// this decoder's limits). Needs a CUDA backend.
        pub fn decompress_device(&self, archive: &[u8]) -> Result<(DeviceBuffer, Header)> {
            let Backend::Cuda(dev) = self.backend() else {
                return Err(Error::BackendUnavailable("device-resident output needs the CUDA backend".into()));
            };
            let plan = self.plan(archive)?;
            if plan.chunked.is_some() {
                return Err(Error::InvalidArgument(
                    "a chunked archive decodes into host memory (decompress / region); device-resident \
                     output of chunked archives is not supported yet"
                        .into(),
                ));
            }
            executor::decompress_device(dev, plan)
        }
    }
}
