//! The filter's `cd_values`, version 1 (u32 words; `fzmod.h5.Fzmod` in the Python package
//! writes the same layout):
//!
//! | word | meaning |
//! |---|---|
//! | 0 | layout version (1) |
//! | 1 | preset id ([`PRESET_IDS`]) |
//! | 2 | error mode: 0 abs, 1 rel (relative to the value range of each chunk) |
//! | 3, 4 | error bound, f64 bits, low word then high word |
//! | 5 | element type, fzmod's code: 8 float32, 9 float64 |
//! | 6 | number of chunk dimensions n (1–16) |
//! | 7 .. 7+n | chunk shape, C order |
//!
//! HDF5 hands a filter only bytes; the shape and type would come from `set_local`, which
//! needs libhdf5's symbols, so the writer puts them here.

use fzmod::{DType, ErrorBound, ErrorMode};
use std::ffi::c_uint;

/// This layout's version (word 0).
pub const LAYOUT_VERSION: c_uint = 1;
const HEADER_WORDS: usize = 7;
const MAX_DIMS: usize = 16;

/// Preset ids, fixed forever: a file written with id 1 means cuszp2 in every later build.
pub const PRESET_IDS: [(c_uint, &str); 5] =
    [(0, "cuszp"), (1, "cuszp2"), (2, "cuszp3-fixed"), (3, "cuszp3-plain"), (4, "cuszp3-outlier")];

/// What the encoder needs, read from `cd_values`.
#[derive(Debug, PartialEq)]
pub struct FilterParams {
    pub preset: &'static str,
    pub bound: ErrorBound,
    pub dtype: DType,
    pub chunk_shape: Vec<usize>,
}

impl FilterParams {
    /// Read `cd_values`, refusing anything outside the layout.
    pub fn decode(cd: &[c_uint]) -> Result<FilterParams, String> {
        if cd.len() < HEADER_WORDS {
            return Err(format!(
                "{} cd_values, expected at least {HEADER_WORDS} (write them with fzmod.h5.Fzmod)",
                cd.len()
            ));
        }
        if cd[0] != LAYOUT_VERSION {
            return Err(format!("cd_values layout {} is not supported (this build reads {LAYOUT_VERSION})", cd[0]));
        }
        let preset = PRESET_IDS
            .iter()
            .find(|(id, _)| *id == cd[1])
            .map(|(_, name)| *name)
            .ok_or_else(|| format!("unknown preset id {}", cd[1]))?;
        let mode = ErrorMode::from_code(u8::try_from(cd[2]).map_err(|_| format!("bad mode {}", cd[2]))?)
            .map_err(|e| e.to_string())?;
        let value = f64::from_bits(u64::from(cd[3]) | (u64::from(cd[4]) << 32));
        let bound = ErrorBound::new(mode, value).map_err(|e| e.to_string())?;
        let dtype = match u8::try_from(cd[5]).ok().and_then(DType::from_code) {
            Some(d @ (DType::F32 | DType::F64)) => d,
            _ => return Err(format!("element type code {} is not float32 (8) or float64 (9)", cd[5])),
        };
        let ndim = cd[6] as usize;
        if ndim == 0 || ndim > MAX_DIMS || cd.len() != HEADER_WORDS + ndim {
            return Err(format!("{ndim} chunk dimensions in {} cd_values", cd.len()));
        }
        let chunk_shape = cd[HEADER_WORDS..].iter().map(|&d| d as usize).collect();
        Ok(FilterParams { preset, bound, dtype, chunk_shape })
    }

    /// The `cd_values` of these parameters (what the Python helper writes).
    pub fn encode(&self) -> Result<Vec<c_uint>, String> {
        let preset = PRESET_IDS
            .iter()
            .find(|(_, name)| *name == self.preset)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("preset '{}' has no HDF5 id", self.preset))?;
        let bits = self.bound.value.to_bits();
        let mut cd = vec![
            LAYOUT_VERSION,
            preset,
            c_uint::from(self.bound.mode.code()),
            bits as c_uint,
            (bits >> 32) as c_uint,
            c_uint::from(self.dtype.code()),
            self.chunk_shape.len() as c_uint,
        ];
        for &d in &self.chunk_shape {
            cd.push(c_uint::try_from(d).map_err(|_| format!("chunk dimension {d} exceeds 2^32"))?);
        }
        Ok(cd)
    }
}
