//! The filter's `cd_values`, version 1 (u32 words):
//!
//! | word | meaning | written by |
//! |---|---|---|
//! | 0 | layout version (1) | the user (`fzmod.h5.Fzmod`) |
//! | 1 | preset id ([`PRESET_IDS`]) | the user |
//! | 2 | error mode: 0 abs, 1 rel (relative to the value range of each chunk) | the user |
//! | 3, 4 | error bound, f64 bits, low word then high word | the user |
//! | 5 | element type, fzmod's code: 8 float32, 9 float64 | `set_local`, from the dataset |
//! | 6 | number of chunk dimensions n (1–16) | `set_local`, from the dataset |
//! | 7 .. 7+n | chunk shape, C order | `set_local`, from the dataset |
//!
//! The user's words say how to compress; the rest describe the data and are taken from the
//! dataset when it is created, so they cannot disagree with it (a user-written element type
//! once made an int32 dataset come back as zeros).

use fzmod::{DType, ErrorBound, ErrorMode};
use std::ffi::c_uint;

/// This layout's version (word 0).
pub const LAYOUT_VERSION: c_uint = 1;
/// The words the user writes (version, preset, mode, bound).
pub const SETTINGS_WORDS: usize = 5;
const HEADER_WORDS: usize = 7;
/// Most chunk dimensions the layout carries.
pub const MAX_DIMS: usize = 16;

/// Preset ids, fixed forever: a file written with id 1 means cuszp2 in every later build.
pub const PRESET_IDS: [(c_uint, &str); 11] = [
    (0, "cuszp"),
    (1, "cuszp2"),
    (2, "cuszp3-fixed"),
    (3, "cuszp3-plain"),
    (4, "cuszp3-outlier"),
    (5, "fzgpu"),
    (6, "pfpl"),
    (7, "mans"),
    (8, "cusz"),
    (9, "interp"),
    (10, "interp-fast"),
];

/// How to compress: the user's words.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub preset: &'static str,
    pub bound: ErrorBound,
}

/// What the encoder needs: the settings and the dataset's element type and chunk shape.
#[derive(Debug, PartialEq)]
pub struct FilterParams {
    pub settings: Settings,
    pub dtype: DType,
    pub chunk_shape: Vec<usize>,
}

impl Settings {
    /// Read the user's words (any words after them are ignored: `set_local` rewrites them).
    pub fn decode(cd: &[c_uint]) -> Result<Settings, String> {
        if cd.len() < SETTINGS_WORDS {
            return Err(format!(
                "{} cd_values, expected at least {SETTINGS_WORDS} (write them with fzmod.h5.Fzmod)",
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
        Ok(Settings { preset, bound })
    }

    /// The user's words of these settings.
    pub fn encode(&self) -> Result<Vec<c_uint>, String> {
        let preset = PRESET_IDS
            .iter()
            .find(|(_, name)| *name == self.preset)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("preset '{}' has no HDF5 id", self.preset))?;
        let bits = self.bound.value.to_bits();
        Ok(vec![LAYOUT_VERSION, preset, c_uint::from(self.bound.mode.code()), bits as c_uint, (bits >> 32) as c_uint])
    }
}

impl FilterParams {
    /// Read complete `cd_values` (as `set_local` leaves them), refusing anything outside the
    /// layout.
    pub fn decode(cd: &[c_uint]) -> Result<FilterParams, String> {
        let settings = Settings::decode(cd)?;
        if cd.len() < HEADER_WORDS {
            return Err(format!("{} cd_values lack the dataset's element type and chunk shape", cd.len()));
        }
        let dtype = match u8::try_from(cd[5]).ok().and_then(DType::from_code) {
            Some(d @ (DType::F32 | DType::F64)) => d,
            _ => return Err(format!("element type code {} is not float32 (8) or float64 (9)", cd[5])),
        };
        let ndim = cd[6] as usize;
        if ndim == 0 || ndim > MAX_DIMS || cd.len() != HEADER_WORDS + ndim {
            return Err(format!("{ndim} chunk dimensions in {} cd_values", cd.len()));
        }
        let chunk_shape = cd[HEADER_WORDS..].iter().map(|&d| d as usize).collect();
        Ok(FilterParams { settings, dtype, chunk_shape })
    }

    /// The complete `cd_values` of these parameters (what `set_local` stores).
    pub fn encode(&self) -> Result<Vec<c_uint>, String> {
        if self.chunk_shape.is_empty() || self.chunk_shape.len() > MAX_DIMS {
            return Err(format!("{} chunk dimensions (the filter takes 1 to {MAX_DIMS})", self.chunk_shape.len()));
        }
        let mut cd = self.settings.encode()?;
        cd.push(c_uint::from(self.dtype.code()));
        cd.push(self.chunk_shape.len() as c_uint);
        for &d in &self.chunk_shape {
            cd.push(c_uint::try_from(d).map_err(|_| format!("chunk dimension {d} exceeds 2^32"))?);
        }
        Ok(cd)
    }
}
