//! The rules every front end (CLI, Python, numcodecs, Zarr, zarrs, HDF5) shares, implemented
//! once: what a bound given in parts means (`ErrorBound::from_parts`, beside the type in
//! stage.rs, so that TOML stage tables follow it too), how backend names are spelled, when a
//! reconstruction breaks its archive's guarantee, and the names under which an archive's facts
//! are reported. Front ends translate their own syntax into these calls and never restate a
//! default.

use crate::archive::{ErrorMode, Header};
use crate::backend::BackendChoice;
use crate::error::{Error, Result};
use crate::metrics::Quality;
use crate::stage::ErrorBound;
use serde::Serialize;
use std::str::FromStr;

/// The bound a pipeline runs with when no front end and no pipeline names one.
pub const DEFAULT_BOUND: ErrorBound = ErrorBound { mode: ErrorMode::Rel, value: 1e-3 };

/// The preset a front end uses when the caller names neither a preset nor a pipeline.
pub const DEFAULT_PRESET: &str = "cuszp2";

impl FromStr for ErrorMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ErrorMode::parse(s)
    }
}

impl BackendChoice {
    /// The spelling front ends accept and print.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
        }
    }
}

impl FromStr for BackendChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "cuda" | "gpu" => Ok(BackendChoice::Cuda),
            _ => Err(Error::InvalidArgument(format!("unknown backend '{s}' (expected auto, cpu or cuda)"))),
        }
    }
}

/// Whether a reconstruction keeps the guarantee its archive states.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// The absolute error every finite element must meet (0 for lossless archives).
    pub guaranteed_abs_error: f64,
    pub max_abs_error: f64,
    pub max_error_index: usize,
    /// NaN/±Inf originals that did not come back bit-identical.
    pub special_value_mismatches: usize,
}

impl Verdict {
    /// Judge `quality` against the archive's guarantee (`guaranteed_abs_error`, what
    /// `archived_abs_bound` gives; `None` means a
    /// lossless archive, which must reproduce every value exactly).
    pub fn judge(quality: &Quality, guaranteed_abs_error: Option<f64>) -> Verdict {
        Verdict {
            guaranteed_abs_error: guaranteed_abs_error.unwrap_or(0.0),
            max_abs_error: quality.max_abs_error,
            max_error_index: quality.max_error_index,
            special_value_mismatches: quality.special_mismatches,
        }
    }

    pub fn within_bound(&self) -> bool {
        self.max_abs_error <= self.guaranteed_abs_error && self.special_value_mismatches == 0
    }

    /// Why the reconstruction breaks the guarantee, if it does (`shape` places the element).
    pub fn violation(&self, shape: &[usize]) -> Option<String> {
        (!self.within_bound()).then(|| {
            format!(
                "BOUND VIOLATED: max error {:e} at {:?} > bound {:e}, {} NaN/Inf values changed",
                self.max_abs_error,
                position(self.max_error_index, shape),
                self.guaranteed_abs_error,
                self.special_value_mismatches
            )
        })
    }
}

/// The C-order position of flat index `i` in `shape`.
pub fn position(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut at = vec![0; shape.len()];
    for (slot, &d) in at.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = i % d;
            i /= d;
        }
    }
    at
}

/// An archive's facts under the names every front end reports them (CLI `inspect --json` and
/// `--json` reports, Python `inspect()` and `report()`); docs/FORMAT.md, "Reported facts".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArchiveFacts {
    /// `major.minor` of the container format.
    pub format_version: String,
    /// numpy's name of the element type (`float32`, `float64`).
    pub dtype: &'static str,
    /// C order, slowest dimension first.
    pub shape: Vec<u64>,
    pub num_elements: u64,
    pub original_bytes: u64,
    pub compressed_bytes: u64,
    pub ratio: f64,
    pub bits_per_value: f64,
    /// Empty for a custom pipeline.
    pub preset: String,
    /// `abs` or `rel`, as requested.
    pub error_mode: &'static str,
    /// The requested bound, in `error_mode`'s terms.
    pub error_bound: f64,
    /// The absolute error every value is guaranteed to meet; `None` for lossless archives.
    pub abs_bound: Option<f64>,
    /// The pipeline's archive would have been larger than the input, which is stored as is.
    pub stored_raw: bool,
    pub stages: Vec<StageFacts>,
}

/// One stage of an archive's pipeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageFacts {
    pub name: String,
    /// The stage type's TOML name (`unknown#ID` for a type this build does not know).
    #[serde(rename = "type")]
    pub type_name: String,
}

impl ArchiveFacts {
    /// Describe a parsed archive of `compressed_bytes` bytes.
    pub fn of(header: &Header, compressed_bytes: usize) -> ArchiveFacts {
        let num_elements = header.num_elements().unwrap_or(0);
        let original_bytes = num_elements.saturating_mul(header.dtype.size() as u64);
        let compressed_bytes = compressed_bytes as u64;
        ArchiveFacts {
            format_version: format!("{}.{}", header.version.0, header.version.1),
            dtype: header.dtype.toml_name(),
            shape: header.shape.clone(),
            num_elements,
            original_bytes,
            compressed_bytes,
            ratio: original_bytes as f64 / compressed_bytes.max(1) as f64,
            bits_per_value: 8.0 * compressed_bytes as f64 / num_elements.max(1) as f64,
            preset: header.preset.clone(),
            error_mode: header.error_mode.name(),
            error_bound: header.error_bound,
            abs_bound: crate::archived_abs_bound(header),
            stored_raw: crate::is_stored_raw(header),
            stages: header
                .stages
                .iter()
                .map(|s| StageFacts {
                    name: s.name.clone(),
                    type_name: crate::stages::kind_by_id(s.type_id)
                        .map_or_else(|_| format!("unknown#{}", s.type_id), |k| k.name.to_string()),
                })
                .collect(),
        }
    }
}

/// How a reconstruction compares with its original, under the shared report names.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QualityFacts {
    /// `None` when the original has no finite value.
    pub value_min: Option<f64>,
    pub value_max: Option<f64>,
    pub max_abs_error: f64,
    pub max_error_index: usize,
    /// `None` for a constant field or an exact reconstruction (PSNR undefined or infinite).
    pub psnr_db: Option<f64>,
    pub nrmse: f64,
    pub special_value_mismatches: usize,
    pub within_bound: bool,
}

impl QualityFacts {
    pub fn of(quality: &Quality, verdict: &Verdict) -> QualityFacts {
        let finite = quality.value_min <= quality.value_max;
        QualityFacts {
            value_min: finite.then_some(quality.value_min),
            value_max: finite.then_some(quality.value_max),
            max_abs_error: quality.max_abs_error,
            max_error_index: quality.max_error_index,
            psnr_db: (quality.value_range() > 0.0 && quality.mse > 0.0).then_some(quality.psnr_db),
            nrmse: quality.nrmse,
            special_value_mismatches: quality.special_mismatches,
            within_bound: verdict.within_bound(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(mode: ErrorMode, value: f64) -> ErrorBound {
        ErrorBound::new(mode, value).unwrap()
    }

    #[test]
    fn a_bare_value_is_relative_and_a_bare_mode_needs_a_matching_pipeline_bound() {
        let preset = Some(b(ErrorMode::Rel, 1e-3));
        assert_eq!(ErrorBound::from_parts(None, Some(0.5), None).unwrap(), Some(b(ErrorMode::Rel, 0.5)));
        assert_eq!(
            ErrorBound::from_parts(Some(ErrorMode::Abs), Some(0.5), preset).unwrap(),
            Some(b(ErrorMode::Abs, 0.5))
        );
        assert_eq!(ErrorBound::from_parts(Some(ErrorMode::Rel), None, preset).unwrap(), preset);
        assert_eq!(ErrorBound::from_parts(None, None, preset).unwrap(), preset);
        assert_eq!(ErrorBound::from_parts(None, None, None).unwrap(), None);
        let err = ErrorBound::from_parts(Some(ErrorMode::Abs), None, preset).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("without a value"));
        assert!(ErrorBound::from_parts(Some(ErrorMode::Abs), None, None).is_err());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(ErrorBound::from_parts(None, Some(bad), preset).is_err(), "{bad}");
        }
    }

    #[test]
    fn backend_names_round_trip() {
        for c in [BackendChoice::Auto, BackendChoice::Cpu, BackendChoice::Cuda] {
            assert_eq!(c.name().parse::<BackendChoice>().unwrap(), c);
        }
        assert_eq!("GPU".parse::<BackendChoice>().unwrap(), BackendChoice::Cuda);
        assert!("tpu".parse::<BackendChoice>().is_err());
    }

    #[test]
    fn the_verdict_needs_every_element_within_and_special_values_exact() {
        let q = |err: f64, special: usize| Quality {
            value_min: 0.0,
            value_max: 1.0,
            max_abs_error: err,
            max_error_index: 7,
            mse: 0.0,
            psnr_db: f64::INFINITY,
            nrmse: 0.0,
            special_mismatches: special,
        };
        assert!(Verdict::judge(&q(0.01, 0), Some(0.01)).within_bound());
        assert!(!Verdict::judge(&q(0.010001, 0), Some(0.01)).within_bound());
        assert!(!Verdict::judge(&q(0.0, 1), Some(0.01)).within_bound());
        assert!(!Verdict::judge(&q(1e-30, 0), None).within_bound());
        let why = Verdict::judge(&q(0.5, 0), Some(0.01)).violation(&[2, 5]).unwrap();
        assert!(why.contains("[1, 2]"), "{why}");
    }
}
