//! Repeated, timed runs of a pipeline for `fzmod bench` (a benchmark, never a test).

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
    /// Time compress and decompress on `backend`.
    pub fn bench_on(&self, backend: &Backend, input: &Buffer, shape: &[usize], runs: usize) -> Result<BenchTiming> {
        let mut p = self.clone();
        p.finalize()?;
        match backend {
            Backend::Cpu => {
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
        }
    }

    /// Compress on a chosen backend (archive bytes are the same on every backend).
    pub fn compress_on(&self, backend: &Backend, input: &Buffer, shape: &[usize]) -> Result<Vec<u8>> {
        match backend {
            Backend::Cpu => self.compress(input, shape),
        }
    }
}

/// Decompress on a chosen backend.
pub fn decompress_on(backend: &Backend, archive: &[u8]) -> Result<graph::Decompressed> {
    match backend {
        Backend::Cpu => graph::decompress(archive),
    }
}
