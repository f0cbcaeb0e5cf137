//! The run layer: compress and decompress dispatched to a backend. Every entry point (the
//! free functions, [`crate::Compressor`], [`Decoder`], the CLI, the bindings) ends here, so
//! the same input and pipeline take the same decisions (fusion, stored-raw fallback) and give
//! the same bytes, and every archive is parsed and checked once, by [`DecodePlan`].

use crate::archive::Header;
use crate::backend::Backend;
use crate::element::{Buffer, Element, View};
use crate::error::{Error, Result};
#[cfg(feature = "cuda")]
use crate::executor;
use crate::graph::{DecodeLimits, DecodePlan, Decompressed, Pipeline};
use std::borrow::Cow;

/// How a pipeline runs on a device backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Let fusion rules replace matching sub-graphs (same bytes, fewer passes). Off runs
    /// every stage's own kernels.
    pub fusion: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { fusion: true }
    }
}

impl Pipeline {
    /// Compress `input` (C-order `shape`) into archive bytes on the CPU (the reference).
    pub fn compress(&self, input: &Buffer, shape: &[usize]) -> Result<Vec<u8>> {
        self.compress_view(&Backend::Cpu, input.view(), shape, RunOptions::default())
    }

    /// Compress on a chosen backend with the default options (fusion on).
    pub fn compress_on(&self, backend: &Backend, input: &Buffer, shape: &[usize]) -> Result<Vec<u8>> {
        self.compress_with(backend, input, shape, RunOptions::default())
    }

    /// Compress on a chosen backend. The archive bytes are the same on every backend and with
    /// fusion on or off.
    pub fn compress_with(
        &self,
        backend: &Backend,
        input: &Buffer,
        shape: &[usize],
        opts: RunOptions,
    ) -> Result<Vec<u8>> {
        self.compress_view(backend, input.view(), shape, opts)
    }

    /// Compress borrowed memory. The device path uploads straight from it; the CPU reference
    /// path takes one owned copy (its stages consume their inputs).
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub(crate) fn compress_view(
        &self,
        backend: &Backend,
        input: View,
        shape: &[usize],
        opts: RunOptions,
    ) -> Result<Vec<u8>> {
        let p = self.finalized()?;
        p.check_input(input, shape)?;
        let archive = match backend {
            Backend::Cpu => p.compress_checked(input, shape, opts.fusion)?,
            #[cfg(feature = "cuda")]
            Backend::Cuda(dev) => {
                let mut job = executor::compress_job(dev, &p, executor::Source::Host(input), shape, opts.fusion)?;
                job.kernels()?;
                job.finish()?
            }
        };
        crate::fallback::smaller_of(&p, archive, input, shape)
    }

    /// This pipeline, validated (borrowed when it already is: a `Compressor` finalizes once).
    pub(crate) fn finalized(&self) -> Result<Cow<'_, Pipeline>> {
        if self.is_finalized() {
            return Ok(Cow::Borrowed(self));
        }
        let mut p = self.clone();
        p.finalize()?;
        Ok(Cow::Owned(p))
    }
}

impl<'a> DecodePlan<'a> {
    /// Parse and validate archive bytes under the default [`DecodeLimits`].
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        DecodePlan::new_with_limits(bytes, &DecodeLimits::default())
    }

    /// Parse and validate archive bytes against this build's stage registry; refuse a decode
    /// that would need more memory than `limits` allow, before any stage runs.
    pub fn new_with_limits(bytes: &'a [u8], limits: &DecodeLimits) -> Result<Self> {
        DecodePlan::with_registry(bytes, limits, crate::stages::ALL)
    }
}

/// Decode archive bytes on the CPU: a pure function of the bytes and the stage registry.
pub fn decompress(bytes: &[u8]) -> Result<Decompressed> {
    DecodePlan::new(bytes)?.run_cpu()
}

/// Decompress on a chosen backend with the default options.
pub fn decompress_on(backend: &Backend, archive: &[u8]) -> Result<Decompressed> {
    decompress_with(backend, archive, RunOptions::default())
}

/// Decompress on a chosen backend. The archive is validated once, by the same front end
/// ([`DecodePlan`]) whichever backend then runs it.
pub fn decompress_with(backend: &Backend, archive: &[u8], opts: RunOptions) -> Result<Decompressed> {
    run_plan(backend, DecodePlan::new(archive)?, opts)
}

#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
fn run_plan(backend: &Backend, plan: DecodePlan, opts: RunOptions) -> Result<Decompressed> {
    if plan.chunked.is_some() {
        // Chunk by chunk through this backend's own path (docs/FORMAT.md §8).
        let header = plan.header.clone();
        let mut data = Buffer::zeroed(header.dtype, header.num_elements()? as usize)?;
        Decoder::new(backend.clone()).with_options(opts).run_into_bytes(plan, data.native_bytes_mut())?;
        return Ok(Decompressed { header, data, backend: backend.name() });
    }
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda(dev) => {
            let mut job = executor::decompress_job(dev, plan, opts.fusion)?;
            job.kernels()?;
            executor::finish(job.as_mut())
        }
        Backend::Cpu => plan.with_cpu_fusion(opts.fusion).run_cpu(),
    }
}

/// Decodes archives on one backend, under memory limits: into caller memory
/// ([`Decoder::decompress_into`]) or into a new buffer. Cheap to build and `Send + Sync`.
///
/// A caller that needs the header before the data (to check its destination, as the CLI and
/// the bindings do) takes the [`Decoder::plan`] and runs it: the archive is still parsed and
/// checked once.
#[derive(Clone, Debug)]
pub struct Decoder {
    backend: Backend,
    opts: RunOptions,
    limits: DecodeLimits,
}

impl Decoder {
    pub fn new(backend: Backend) -> Decoder {
        Decoder { backend, opts: RunOptions::default(), limits: DecodeLimits::default() }
    }

    /// The same decoder with other run options (e.g. fusion off).
    pub fn with_options(self, opts: RunOptions) -> Decoder {
        Decoder { opts, ..self }
    }

    /// The same decoder under other memory limits.
    pub fn with_limits(self, limits: DecodeLimits) -> Decoder {
        Decoder { limits, ..self }
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// `work(decoder, k)` for every k in `0..count`, each with a decoder it may use alone: at
    /// once on the CPU's pool, on a GPU's lanes (docs/ARCHITECTURE.md, "GPU lanes"). Results
    /// in k's order; the error is the smallest failing k's.
    pub(crate) fn map_chunks<T: Send>(
        &self,
        count: usize,
        work: impl Fn(&Decoder, usize) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        match &self.backend {
            Backend::Cpu => crate::error::at_once(count, |k| work(self, k)),
            #[cfg(feature = "cuda")]
            Backend::Cuda(dev) => dev
                .in_lanes(count, |lane, k| work(&Decoder { backend: Backend::Cuda(lane.clone()), ..self.clone() }, k)),
        }
    }

    /// The memory limits this decoder plans under.
    pub fn limits(&self) -> DecodeLimits {
        self.limits
    }

    /// Parse and check an archive under this decoder's limits.
    pub fn plan<'a>(&self, archive: &'a [u8]) -> Result<DecodePlan<'a>> {
        DecodePlan::new_with_limits(archive, &self.limits)
    }

    /// Decode an archive into a new buffer.
    pub fn decompress(&self, archive: &[u8]) -> Result<Decompressed> {
        self.run(self.plan(archive)?)
    }

    /// Run a checked plan into a new buffer.
    pub fn run(&self, plan: DecodePlan) -> Result<Decompressed> {
        run_plan(&self.backend, plan, self.opts)
    }

    /// Decode an archive into `out`, which must hold exactly its elements, of its type. The
    /// archive is parsed and checked once; the GPU downloads straight into `out`.
    pub fn decompress_into<T: Element>(&self, archive: &[u8], out: &mut [T]) -> Result<Header> {
        self.run_into(self.plan(archive)?, out)
    }

    /// Run a checked plan into `out` (see [`Decoder::decompress_into`]).
    pub fn run_into<T: Element>(&self, plan: DecodePlan, out: &mut [T]) -> Result<Header> {
        let n = plan.header.num_elements()?;
        if plan.header.dtype != T::DTYPE || n != out.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "the archive holds {n} {} values (shape {:?}); the destination holds {} {}",
                plan.header.dtype,
                plan.header.shape,
                out.len(),
                T::DTYPE
            )));
        }
        self.run_into_bytes(plan, bytemuck::cast_slice_mut(out))
    }

    /// Run a checked plan into `out`, the native bytes of exactly its elements (checked by the
    /// caller): an unchunked one on this backend, a chunked one chunk by chunk, each decoded
    /// straight into its place where the chunks are runs of the array.
    pub(crate) fn run_into_bytes(&self, plan: DecodePlan, out: &mut [u8]) -> Result<Header> {
        if let Some(c) = plan.chunked {
            let header = plan.header.clone();
            crate::chunking::run_chunked_into(&self.clone().with_limits(c.limits), plan, out)?;
            return Ok(header);
        }
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(dev) => {
                let mut job = executor::decompress_job(dev, plan, self.opts.fusion)?;
                job.kernels()?;
                job.finish_into(out)?;
                Ok(job.header().clone())
            }
            Backend::Cpu => plan.with_cpu_fusion(self.opts.fusion).run_cpu_into(out),
        }
    }
}
