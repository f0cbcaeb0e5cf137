//! Repeated, timed runs for `fzmod bench` (a benchmark, never a test); the dispatch itself is
//! the run layer's (`run.rs`).

#[cfg(feature = "cuda")]
use crate::backend::cuda::CudaDevice;
use crate::backend::Backend;
use crate::chunking::ChunkOptions;
use crate::element::Buffer;
#[cfg(feature = "cuda")]
use crate::element::View;
use crate::error::Result;
#[cfg(feature = "cuda")]
use crate::executor;
#[cfg(feature = "cuda")]
use crate::graph::DecodePlan;
use crate::graph::Pipeline;
use crate::run::{Decoder, RunOptions};
use std::time::Instant;

/// Calls of the end-to-end measurement (median).
#[cfg(feature = "cuda")]
const END_TO_END_CALLS: usize = 5;

/// End to end: the median of [`END_TO_END_CALLS`] calls (one call scatters), each returning
/// its own wall time (what it checks after the call is not timed) and phase line.
#[cfg(feature = "cuda")]
fn median_call(mut call: impl FnMut() -> Result<(f64, String)>) -> Result<(f64, String)> {
    let mut calls = (0..END_TO_END_CALLS).map(|_| call()).collect::<Result<Vec<_>>>()?;
    calls.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(calls.swap_remove(calls.len() / 2))
}

/// Timings of `runs` compress and decompress calls after one warm-up of each.
pub struct BenchTiming {
    pub compress_seconds: Vec<f64>,
    pub decompress_seconds: Vec<f64>,
    pub archive_bytes: usize,
    /// Output of the last decompress, to measure the error.
    pub decoded: Buffer,
    /// How the times were taken.
    pub method: &'static str,
    /// Median compress and decompress including host↔device transfers (device backends):
    /// host array in, archive bytes out, and back into a reused host array.
    pub end_to_end_seconds: Option<(f64, f64)>,
    /// Device memory high-water marks (device backends).
    pub peak_device: Option<PeakDevice>,
    /// How the device ran the pipeline (fusion rule, stages on the CPU).
    pub notes: Vec<String>,
}

/// Peak device memory of the compress calls and of the decompress calls, each measured alone
/// (the workspace a compress keeps is released before the decompress calls).
#[derive(Clone, Copy, Debug)]
pub struct PeakDevice {
    pub compress: u64,
    pub decompress: u64,
}

impl Pipeline {
    /// Time compress and decompress on `backend`.
    pub fn bench_on(
        &self,
        backend: &Backend,
        input: &Buffer,
        shape: &[usize],
        runs: usize,
        opts: RunOptions,
    ) -> Result<BenchTiming> {
        let p = self.finalized()?;
        p.check_input(input.view(), shape)?;
        match backend {
            #[cfg(feature = "cuda")]
            Backend::Cuda(dev) => bench_cuda(dev, &p, input.view(), shape, runs, opts),
            Backend::Cpu => bench_cpu(&p, input, shape, runs, opts),
        }
    }
}

impl Pipeline {
    /// Time chunked archives (docs/FORMAT.md §8) on `backend`, wall clock: compress from the
    /// host array to archive bytes, decompress into a reused host array, as an application
    /// calls them (on a GPU the chunks' transfers and kernels overlap on its lanes). Every
    /// timed archive must equal the first.
    pub fn bench_chunked_on(
        &self,
        backend: &Backend,
        input: &Buffer,
        shape: &[usize],
        chunks: &ChunkOptions,
        runs: usize,
        opts: RunOptions,
    ) -> Result<BenchTiming> {
        let archive = self.compress_chunked(backend, input, shape, chunks, opts)?;
        let decoder = Decoder::new(backend.clone()).with_options(opts);
        let mut decoded = Buffer::zeroed(input.dtype(), input.len())?;
        decoder.run_into_bytes(decoder.plan(&archive)?, decoded.native_bytes_mut())?;
        let (mut comp, mut decomp) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        for _ in 0..runs {
            let t = Instant::now();
            let again = self.compress_chunked(backend, input, shape, chunks, opts)?;
            comp.push(t.elapsed().as_secs_f64());
            if again != archive {
                return Err(crate::error::Error::Pipeline("two chunked compressions of the same input differ".into()));
            }
            let t = Instant::now();
            decoder.run_into_bytes(decoder.plan(&archive)?, decoded.native_bytes_mut())?;
            decomp.push(t.elapsed().as_secs_f64());
        }
        let plan = decoder.plan(&archive)?;
        let grid = plan.header.chunking.as_ref().map(|c| (c.chunk_shape.clone(), c.num_chunks(&plan.header.shape)));
        let (chunk_shape, count) = grid.unwrap_or_default();
        Ok(BenchTiming {
            compress_seconds: comp,
            decompress_seconds: decomp,
            archive_bytes: archive.len(),
            decoded,
            method: "wall clock, whole call, chunked archive from and into host memory",
            end_to_end_seconds: None,
            peak_device: None,
            notes: vec![format!("chunks {chunk_shape:?}, {} of them", count.unwrap_or(0))],
        })
    }
}

fn bench_cpu(p: &Pipeline, input: &Buffer, shape: &[usize], runs: usize, opts: RunOptions) -> Result<BenchTiming> {
    let cpu = Backend::Cpu;
    let archive = p.compress_with(&cpu, input, shape, opts)?;
    let mut decoded = crate::run::decompress_with(&cpu, &archive, opts)?.data;
    let (mut comp, mut decomp) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let t = Instant::now();
        let a = p.compress_with(&cpu, input, shape, opts)?;
        comp.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        decoded = crate::run::decompress_with(&cpu, &a, opts)?.data;
        decomp.push(t.elapsed().as_secs_f64());
    }
    // Which stages ran block by block (the decode's regions are the same chains).
    let notes = match opts.fusion {
        true => p
            .cpu_regions()
            .iter()
            .map(|r| {
                format!(
                    "CPU region: {}",
                    p.nodes()[r.start..r.end].iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(" + ")
                )
            })
            .collect(),
        false => vec!["CPU regions off: every stage over the whole array".to_string()],
    };
    Ok(BenchTiming {
        compress_seconds: comp,
        decompress_seconds: decomp,
        archive_bytes: archive.len(),
        decoded,
        method: "wall clock, whole call, data in host memory",
        end_to_end_seconds: None,
        peak_device: None,
        notes,
    })
}

#[cfg(feature = "cuda")]
fn bench_cuda(
    dev: &CudaDevice,
    p: &Pipeline,
    input: View,
    shape: &[usize],
    runs: usize,
    opts: RunOptions,
) -> Result<BenchTiming> {
    use crate::error::Error;
    // A warm-up compiles the kernels and sizes the workspace; each timed call is split into
    // its host phases (the notes say where end-to-end time goes).
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let whole = |input: View| -> Result<(Vec<u8>, f64, String)> {
        let t = Instant::now();
        let mut job = executor::compress_job(dev, p, executor::Source::Host(input), shape, opts.fusion)?;
        let upload = ms(t);
        job.kernels()?;
        dev.synchronize()?;
        let device = ms(t) - upload;
        let archive = job.finish()?;
        let seconds = t.elapsed().as_secs_f64();
        let phases = format!(
            "end-to-end compress: upload {upload:.3} ms, device work {device:.3} ms, sizes + downloads + assembly {:.3} ms",
            seconds * 1e3 - upload - device
        );
        Ok((archive, seconds, phases))
    };
    let (archive, _, _) = whole(input)?;
    dev.reset_peak();
    let (compress_e2e, compress_phases) = median_call(|| {
        let (again, seconds, phases) = whole(input)?;
        if again != archive {
            return Err(Error::Device("two GPU compressions of the same input differ".into()));
        }
        Ok((seconds, phases))
    })?;
    let mut job = executor::compress_job(dev, p, executor::Source::Host(input), shape, opts.fusion)?;
    let mut notes = job.notes();
    let comp = (0..runs).map(|_| dev.time(|| job.kernels())).collect::<Result<Vec<_>>>()?;
    if job.finish()? != archive {
        return Err(Error::Device("a timed GPU compression differs".into()));
    }
    drop(job);
    let peak_compress = dev.peak_device_bytes();
    dev.release_workspace()?;
    dev.reset_peak();
    // Decode into the caller's memory, as an application reusing its output array does (a
    // fresh array's page faults would cost more than the link).
    let mut out = crate::element::zeroed_vec::<u8>(input.native_bytes().len());
    let mut decode = || -> Result<(f64, String)> {
        let t = Instant::now();
        let plan = DecodePlan::new(&archive)?;
        let validate = ms(t);
        let mut job = executor::decompress_job(dev, plan, opts.fusion)?;
        let upload = ms(t) - validate;
        job.kernels()?;
        dev.synchronize()?;
        let device = ms(t) - validate - upload;
        job.finish_into(&mut out)?;
        let seconds = t.elapsed().as_secs_f64();
        Ok((seconds, format!(
            "end-to-end decompress: validate {validate:.3} ms, upload {upload:.3} ms, device work {device:.3} ms, download {:.3} ms",
            seconds * 1e3 - validate - upload - device
        )))
    };
    decode()?;
    let (decompress_e2e, decompress_phases) = median_call(decode)?;
    let mut job = executor::decompress_job(dev, DecodePlan::new(&archive)?, opts.fusion)?;
    // The decode's own path where it differs (its regions: a decode plan partitions apart).
    for note in job.notes() {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes.extend([compress_phases, decompress_phases]);
    let decomp = (0..runs).map(|_| dev.time(|| job.kernels())).collect::<Result<Vec<_>>>()?;
    let decoded = executor::finish(job.as_mut())?.data;
    Ok(BenchTiming {
        compress_seconds: comp,
        decompress_seconds: decomp,
        archive_bytes: archive.len(),
        decoded,
        method: "CUDA events around all kernels of one call, input already on the device",
        end_to_end_seconds: Some((compress_e2e, decompress_e2e)),
        peak_device: Some(PeakDevice { compress: peak_compress, decompress: dev.peak_device_bytes() }),
        notes,
    })
}
