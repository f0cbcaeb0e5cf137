//! Never much bigger than the input: when a pipeline's archive is larger than the raw input
//! (bounds near float precision, noise), the input is stored losslessly instead, as a
//! one-stage Store pipeline (docs/FORMAT.md 6.12). The header keeps the requested bound, mode
//! and preset, so `inspect` and reports show what was asked for and that it was stored.

use crate::archive::{self, Header, InputRef, SegmentEntry, StageRecord};
use crate::element::{DType, View};
use crate::error::Result;
use crate::graph::Pipeline;
use crate::stages::store::{self, Store};

/// The smaller of `archive` (what `pipeline` made of `input`) and the archive that stores
/// `input` as it is (ties keep `archive`). Only floating-point inputs (what users compress)
/// fall back; pipelines over integer inputs (stage tests, lossless experiments) keep their
/// archive. Every entry point and backend ends here, so the decision is the same everywhere.
pub(crate) fn smaller_of(pipeline: &Pipeline, archive: Vec<u8>, input: View, shape: &[usize]) -> Result<Vec<u8>> {
    if archive.len() <= input.byte_len() || !matches!(input.dtype(), DType::F32 | DType::F64) {
        return Ok(archive);
    }
    let stored = store_raw(pipeline, input, shape)?;
    Ok(if stored.len() < archive.len() { stored } else { archive })
}

/// An archive with the pipeline's header fields (bound, mode, preset) whose only stage stores
/// `input`; the values are written once, straight into their place.
fn store_raw(pipeline: &Pipeline, input: View, shape: &[usize]) -> Result<Vec<u8>> {
    let stage = Store::new(input.dtype())?;
    let header = Header {
        stages: vec![StageRecord {
            type_id: store::KIND.id,
            name: "store".into(),
            param_version: store::KIND.param_version,
            params: stage.record(input.len()),
            inputs: vec![InputRef::External],
        }],
        segments: vec![SegmentEntry { stage: 0, port: 0, dtype: input.dtype(), offset: 0, len: 0, crc32c: 0 }],
        ..pipeline.header(input.dtype(), shape, Vec::new(), std::iter::empty())
    };
    archive::write_with(header, &[input.byte_len()], |slots| {
        if cfg!(target_endian = "little") {
            slots[0].copy_from_slice(input.native_bytes());
        } else {
            slots[0].copy_from_slice(&input.to_buffer()?.to_le_bytes());
        }
        Ok(vec![None])
    })
}

/// Did compression fall back to storing the input as it is?
pub fn is_stored_raw(header: &Header) -> bool {
    header.chunking.is_none() && matches!(header.stages.as_slice(), [only] if only.type_id == store::KIND.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Buffer, ErrorBound, ErrorMode};

    /// Uniform noise in [-1, 1): nothing a predictor can exploit.
    fn noise(n: usize) -> Vec<f32> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    #[test]
    fn an_archive_larger_than_the_input_becomes_a_stored_copy() {
        let mut v = noise(10_000);
        v[3] = f32::from_bits(0x7fc0_0bad);
        v[4] = -0.0;
        v[5] = f32::from_bits(1);
        let input = Buffer::F32(v.clone());
        let mut p = crate::preset("cuszp2", &[10_000]).unwrap();
        p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 1e-9).unwrap()).unwrap();
        let archive = p.compress(&input, &[10_000]).unwrap();
        assert!(archive.len() <= input.byte_len() + 256, "{} bytes for {}", archive.len(), input.byte_len());
        let decoded = crate::decompress(&archive).unwrap();
        assert!(is_stored_raw(&decoded.header));
        assert_eq!((decoded.header.preset.as_str(), decoded.header.error_bound), ("cuszp2", 1e-9));
        let Buffer::F32(back) = decoded.data else { unreachable!() };
        assert!(back.iter().zip(&v).all(|(a, b)| a.to_bits() == b.to_bits()), "not bit-identical");
    }

    #[test]
    fn a_compressible_input_keeps_its_pipeline() {
        let v: Vec<f32> = (0..10_000).map(|i| (i as f32 * 0.01).sin()).collect();
        let mut p = crate::preset("cuszp2", &[10_000]).unwrap();
        p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap()).unwrap();
        let archive = p.compress(&Buffer::F32(v), &[10_000]).unwrap();
        assert!(!is_stored_raw(&crate::inspect(&archive).unwrap()));
    }
}
