//! # fzmod
//!
//! Modular, error-bounded compression pipelines for scientific floating-point arrays.
//! A pipeline is a graph of stages (quantizer → predictor → coder); compressing yields a
//! self-describing `.fzm` archive (docs/FORMAT.md) in which every value is within the
//! requested bound; decoding is a pure function of the archive bytes.
//!
//! Borrowed slices in, caller memory out (CPU here; [`Compressor`] picks the GPU when asked
//! and keeps its kernels and buffers warm across calls):
//!
//! ```
//! use fzmod::{ErrorBound, ErrorMode};
//! let data: Vec<f64> = (0..10_000).map(|i| (i as f64 * 1e-3).cos()).collect();
//! let bound = ErrorBound::new(ErrorMode::Rel, 1e-4).unwrap();
//! let archive = fzmod::compress(&data, &[100, 100], "cuszp3-outlier", bound).unwrap();
//! let mut back = vec![0.0f64; data.len()];
//! fzmod::decompress_into(&archive, &mut back).unwrap();
//! assert!(data.iter().zip(&back).all(|(a, b)| (a - b).abs() <= 1e-4 * 2.0));
//! ```
//!
//! The pipeline API underneath:
//!
//! ```
//! use fzmod::{Buffer, ErrorBound, ErrorMode};
//! let data: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.01).sin()).collect();
//! let mut pipeline = fzmod::preset("cuszp2", &[4096]).unwrap();
//! pipeline.set_error_bound(ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap()).unwrap();
//! let archive = pipeline.compress(&Buffer::F32(data.clone()), &[4096]).unwrap();
//! let back = fzmod::decompress(&archive).unwrap();
//! let Buffer::F32(values) = back.data else { unreachable!() };
//! assert!(data.iter().zip(&values).all(|(a, b)| (a - b).abs() as f64 <= 1e-3));
//! ```

mod api;
pub mod archive;
pub mod backend;
mod bench;
mod chunking;
pub mod config;
pub mod cpu_fragment;
pub mod element;
pub mod error;
#[cfg(feature = "cuda")]
mod executor;
mod fallback;
pub mod graph;
pub mod metrics;
mod params;
pub mod policy;
mod run;
pub mod shape;
pub mod stage;
pub mod stages;
pub mod stream;

pub use api::{compress, decompress_into, Compressor};
pub use archive::{ErrorMode, Header};
pub use bench::{BenchTiming, PeakDevice};
pub use chunking::{
    decompress_region, default_chunk_bytes, default_chunk_shape, merge_ranges, parse_chunk_shape, parse_region,
    ChunkOptions, CHUNK_ALIGN, DEFAULT_CHUNK_BYTES, LARGE_ARRAY_BYTES,
};
pub use config::{from_toml, masked_preset, preset, to_toml, with_mask, MaskSpec, PRESETS};
pub use element::{Buffer, DType, Element, View};
pub use error::{Error, ErrorKind, Result};
pub use fallback::is_stored_raw;
pub use graph::{DecodeLimits, Decompressed, Pipeline};
pub use metrics::{compare, Quality};
pub use policy::{ArchiveFacts, QualityFacts, Verdict, DEFAULT_BOUND, DEFAULT_PRESET};
pub use run::{decompress, decompress_on, decompress_with, Decoder, RunOptions};
pub use shape::parse_shape;
pub use stage::{ErrorBound, Stage};
pub use stream::{
    compress_stream, decompress_stream, StreamCompressor, StreamDecoder, StreamInput, StreamOptions, StreamPass,
    StreamProgress,
};

/// The absolute bound the reconstruction of an archive guarantees (what reports print), from
/// the first stage record that states one and agrees with the header; `None` when the
/// pipeline is exact or a record does not decode. [`graph::DecodePlan::guaranteed_abs_bound`]
/// gives the same for a validated archive.
pub fn archived_abs_bound(header: &Header) -> Option<f64> {
    if let Some(c) = &header.chunking {
        return c.guaranteed_abs_bound();
    }
    for rec in &header.stages {
        let kind = stages::kind_by_id(rec.type_id).ok()?;
        let s = (kind.from_record)(rec.param_version, &rec.params).ok()?;
        if let Some(bound) = s.recorded_abs_bound() {
            return s.check_header(header).ok().map(|()| bound);
        }
    }
    None
}

/// Parse and verify an archive's header without decoding the data. For a chunked archive
/// the header's `stages` are those of its first chunk (the pipeline every chunk ran).
pub fn inspect(archive: &[u8]) -> Result<Header> {
    let parsed = archive::parse(archive)?;
    let mut header = parsed.header;
    if let Some(c) = &header.chunking {
        let (start, len) = c.chunk_span(0, parsed.data_len)?;
        let at = parsed.data_start + start as usize;
        let first = archive::chunked::chunk_archive(&archive[at..at + len as usize], 0)?;
        header.stages = archive::parse(first)?.header.stages;
    }
    Ok(header)
}
