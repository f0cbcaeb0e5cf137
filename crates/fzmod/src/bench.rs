//! Repeated, timed runs of a pipeline for `fzmod bench` (a benchmark, never a test), and
//! the backend dispatch of compress/decompress.

#[cfg(feature = "cuda")]
use crate::backend::cuda;
use crate::backend::Backend;
use crate::element::Buffer;
use crate::error::Result;
use crate::graph::{self, Pipeline};
use std::time::Instant;

/// Timings of `runs` compress and decompress calls after one warm-up of each.
pub struct BenchTiming {
    pub compress_seconds: Vec<f64>,
    pub decompress_seconds: Vec<f64>,
    pub archive_bytes: usize,
    /// Output of the last decompress, to measure the error.
    pub decoded: Buffer,
    /// How the times were taken.
    pub method: &'static str,
    /// One compress including host↔device transfers (device backends only).
    pub end_to_end_seconds: Option<f64>,
    pub peak_device_bytes: Option<u64>,
}

impl Pipeline {
    /// Time compress and decompress on `backend` (the CPU for pipelines it cannot run).
    pub fn bench_on(&self, backend: &Backend, input: &Buffer, shape: &[usize], runs: usize) -> Result<BenchTiming> {
        let mut p = self.clone();
        p.finalize()?;
        match backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(dev) if cuda::supports(&p).is_none() => match bench_cuda(dev, &p, input, shape, runs) {
                Err(crate::error::Error::BackendUnavailable(_)) => bench_cpu(&p, input, shape, runs),
                other => other,
            },
            _ => bench_cpu(&p, input, shape, runs),
        }
    }

    /// Compress on a chosen backend (archive bytes are the same on every backend). Pipelines
    /// the backend cannot run go to the CPU (see [`Backend::fallback_reason`]; a few limits,
    /// such as a tile that differs from the coder block, only show with the input's shape).
    pub fn compress_on(&self, backend: &Backend, input: &Buffer, shape: &[usize]) -> Result<Vec<u8>> {
        let mut p = self.clone();
        p.finalize()?;
        match backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(dev) if cuda::supports(&p).is_none() => match cuda::compress(dev, &p, input, shape) {
                Err(crate::error::Error::BackendUnavailable(_)) => p.compress(input, shape),
                other => other,
            },
            _ => p.compress(input, shape),
        }
    }
}

/// Decompress on a chosen backend; archives of pipelines it cannot run decode on the CPU.
pub fn decompress_on(backend: &Backend, archive: &[u8]) -> Result<graph::Decompressed> {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda(dev) => match cuda::decompress(dev, archive) {
            Err(crate::error::Error::BackendUnavailable(_)) => graph::decompress(archive),
            other => other,
        },
        _ => graph::decompress(archive),
    }
}

fn bench_cpu(p: &Pipeline, input: &Buffer, shape: &[usize], runs: usize) -> Result<BenchTiming> {
    let archive = p.compress(input, shape)?;
    let mut decoded = graph::decompress(&archive)?.data;
    let (mut comp, mut decomp) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let t = Instant::now();
        let a = p.compress(input, shape)?;
        comp.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        decoded = graph::decompress(&a)?.data;
        decomp.push(t.elapsed().as_secs_f64());
    }
    Ok(BenchTiming {
        compress_seconds: comp,
        decompress_seconds: decomp,
        archive_bytes: archive.len(),
        decoded,
        method: "wall clock, whole call, data in host memory",
        end_to_end_seconds: None,
        peak_device_bytes: None,
    })
}

#[cfg(feature = "cuda")]
fn bench_cuda(
    dev: &cuda::CudaDevice,
    p: &Pipeline,
    input: &Buffer,
    shape: &[usize],
    runs: usize,
) -> Result<BenchTiming> {
    use crate::error::Error;
    // Warm-up: compiles the kernels and sizes the workspace.
    let archive = cuda::compress(dev, p, input, shape)?;
    let start = Instant::now();
    let again = cuda::compress(dev, p, input, shape)?;
    let end_to_end = start.elapsed().as_secs_f64();
    if again != archive {
        return Err(Error::Device("two GPU compressions of the same input differ".into()));
    }
    let mut run = cuda::DeviceCompress::new(dev, p, input, shape)?;
    let comp = (0..runs).map(|_| dev.time(|| run.kernels())).collect::<Result<Vec<_>>>()?;
    // `cuda::compress` may have stored the input raw instead (crate::fallback); so may this.
    if crate::fallback::smaller_of(run.finish()?, input)? != archive {
        return Err(Error::Device("a timed GPU compression differs".into()));
    }
    drop(run);
    let mut dec = cuda::DeviceDecompress::new(dev, &archive)?;
    let decomp = (0..runs).map(|_| dev.time(|| dec.kernels())).collect::<Result<Vec<_>>>()?;
    let decoded = dec.finish()?.data;
    Ok(BenchTiming {
        compress_seconds: comp,
        decompress_seconds: decomp,
        archive_bytes: archive.len(),
        decoded,
        method: "CUDA events around all kernels of one call, input already on the device",
        end_to_end_seconds: Some(end_to_end),
        peak_device_bytes: Some(dev.peak_workspace_bytes()),
    })
}
