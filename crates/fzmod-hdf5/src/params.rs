//! The filter's `cd_values` (u32 words). Layout version 1 (no mask):
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
//! Layout version 2 (a Mask stage in front of the preset, docs/FORMAT.md 6.16) inserts three
//! user words after word 4, so the dataset's words start at 8:
//!
//! | word | meaning |
//! |---|---|
//! | 0 | layout version (2) |
//! | 1–4 | as version 1 (with `rel`: relative to the unmasked values of each chunk) |
//! | 5 | mask flags: 1 NaN, 2 ±Inf, 4 the fill value (at least one set) |
//! | 6, 7 | fill value, f64 bits, low word then high word (0 without flag 4) |
//! | 8 .. | element type, n, chunk shape, as words 5 .. of version 1 |
//!
//! Writers use version 1 when nothing is masked, so files without a mask stay readable by
//! builds that only know version 1.
//!
//! The user's words say how to compress; the rest describe the data and are taken from the
//! dataset when it is created, so they cannot disagree with it (a user-written element type
//! once made an int32 dataset come back as zeros).

use fzmod::{DType, ErrorBound, ErrorMode, MaskSpec};
use std::ffi::c_uint;

/// The layout without a mask (word 0).
pub const LAYOUT_VERSION: c_uint = 1;
/// The layout with a mask.
pub const LAYOUT_VERSION_MASKED: c_uint = 2;
/// The words the user writes without a mask (version, preset, mode, bound).
pub const SETTINGS_WORDS: usize = 5;
/// The words the user writes with a mask (and the most any layout has).
pub const MAX_SETTINGS_WORDS: usize = 8;
const MASK_NAN: c_uint = 1;
const MASK_INF: c_uint = 2;
const MASK_FILL: c_uint = 4;
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
    /// What a Mask stage in front of the preset masks (empty: no Mask stage).
    pub mask: MaskSpec,
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
        Settings::decode_len(cd).map(|(s, _)| s)
    }

    /// The settings and how many words they take.
    fn decode_len(cd: &[c_uint]) -> Result<(Settings, usize), String> {
        let words = match cd.first() {
            Some(&LAYOUT_VERSION) => SETTINGS_WORDS,
            Some(&LAYOUT_VERSION_MASKED) => MAX_SETTINGS_WORDS,
            Some(v) => {
                return Err(format!(
                "cd_values layout {v} is not supported (this build reads {LAYOUT_VERSION} and {LAYOUT_VERSION_MASKED})"
            ))
            }
            None => 0,
        };
        if cd.len() < words.max(SETTINGS_WORDS) {
            return Err(format!(
                "{} cd_values, expected at least {} (write them with fzmod.h5.Fzmod)",
                cd.len(),
                words.max(SETTINGS_WORDS)
            ));
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
        let mut mask = MaskSpec::default();
        if words == MAX_SETTINGS_WORDS {
            let flags = cd[5];
            if flags == 0 || flags & !(MASK_NAN | MASK_INF | MASK_FILL) != 0 {
                return Err(format!("mask flags {flags:#x} in cd_values word 5"));
            }
            let fill = f64::from_bits(u64::from(cd[6]) | (u64::from(cd[7]) << 32));
            if flags & MASK_FILL == 0 && fill.to_bits() != 0 {
                return Err("a fill value in cd_values without the fill flag".into());
            }
            if flags & MASK_FILL != 0 && fill.is_nan() {
                return Err("a NaN fill value in cd_values (NaN is mask flag 1)".into());
            }
            mask = MaskSpec {
                nan: flags & MASK_NAN != 0,
                inf: flags & MASK_INF != 0,
                fill: (flags & MASK_FILL != 0).then_some(fill),
            };
        }
        Ok((Settings { preset, bound, mask }, words))
    }

    /// The user's words of these settings.
    pub fn encode(&self) -> Result<Vec<c_uint>, String> {
        let preset = PRESET_IDS
            .iter()
            .find(|(_, name)| *name == self.preset)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("preset '{}' has no HDF5 id", self.preset))?;
        let bits = self.bound.value.to_bits();
        let mut cd =
            vec![LAYOUT_VERSION, preset, c_uint::from(self.bound.mode.code()), bits as c_uint, (bits >> 32) as c_uint];
        let mask = self.mask;
        if mask.fill.is_some_and(f64::is_nan) {
            return Err("a NaN fill value: mask NaN instead".into());
        }
        if !mask.is_empty() {
            cd[0] = LAYOUT_VERSION_MASKED;
            let flag = |on: bool, f: c_uint| if on { f } else { 0 };
            cd.push(flag(mask.nan, MASK_NAN) | flag(mask.inf, MASK_INF) | flag(mask.fill.is_some(), MASK_FILL));
            let fill = mask.fill.map_or(0, f64::to_bits);
            cd.extend([fill as c_uint, (fill >> 32) as c_uint]);
        }
        Ok(cd)
    }
}

impl FilterParams {
    /// Read complete `cd_values` (as `set_local` leaves them), refusing anything outside the
    /// layout.
    pub fn decode(cd: &[c_uint]) -> Result<FilterParams, String> {
        let (settings, words) = Settings::decode_len(cd)?;
        let header_words = words + 2;
        if cd.len() < header_words {
            return Err(format!("{} cd_values lack the dataset's element type and chunk shape", cd.len()));
        }
        let dtype = match u8::try_from(cd[words]).ok().and_then(DType::from_code) {
            Some(d @ (DType::F32 | DType::F64)) => d,
            _ => return Err(format!("element type code {} is not float32 (8) or float64 (9)", cd[words])),
        };
        let ndim = cd[words + 1] as usize;
        if ndim == 0 || ndim > MAX_DIMS || cd.len() != header_words + ndim {
            return Err(format!("{ndim} chunk dimensions in {} cd_values", cd.len()));
        }
        let chunk_shape = cd[header_words..].iter().map(|&d| d as usize).collect();
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
