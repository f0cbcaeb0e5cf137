//! Golden archives (tests/golden/): written once by format 1.0 and decoded, bit for bit,
//! forever. Every truncation and every single-byte corruption must give an error or the
//! correct values, never a panic.
//!
//! A missing golden is written only when FZMOD_BLESS=1; an existing one is never rewritten.

mod common;

use common::*;
use fzmod::{Buffer, ErrorBound, ErrorMode, MaskSpec};
use std::path::PathBuf;

const PLANE: usize = 73 * 144;

struct Golden {
    file: &'static str,
    preset: &'static str,
    shape: &'static [usize],
    /// First element taken from data/navy_uwnd_132x73x144.f32.
    start: usize,
    bound: (ErrorMode, f64),
    f64: bool,
    specials: bool,
    /// A land band of this fill value, masked (with NaN) by a Mask stage in front of the
    /// preset (`fzmod::masked_preset`) when `mask_land`, else left to the preset's outliers.
    land: Option<f32>,
    mask_land: bool,
    /// The pipeline (a TOML file in tests/golden/) that wrote the golden when the preset has
    /// changed since: the current encoder must still write its bytes through that pipeline.
    pipeline: Option<&'static str>,
}

const GOLDENS: [Golden; 24] = [
    Golden {
        file: "v1.0_cuszp_1d.fzm",
        preset: "cuszp",
        shape: &[4096],
        start: 0,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cuszp2_2d.fzm",
        preset: "cuszp2",
        shape: &[73, 144],
        start: 0,
        bound: (ErrorMode::Abs, 1e-2),
        f64: false,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cuszp3-fixed_2d.fzm",
        preset: "cuszp3-fixed",
        shape: &[73, 144],
        start: PLANE,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cuszp3-plain_3d.fzm",
        preset: "cuszp3-plain",
        shape: &[2, 73, 144],
        start: 0,
        bound: (ErrorMode::Rel, 1e-4),
        f64: false,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cuszp3-outlier_2d_specials.fzm",
        preset: "cuszp3-outlier",
        shape: &[73, 144],
        start: 2 * PLANE,
        bound: (ErrorMode::Abs, 1e-3),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cuszp2_f64.fzm",
        preset: "cuszp2",
        shape: &[73, 144],
        start: 3 * PLANE,
        bound: (ErrorMode::Abs, 1e-3),
        f64: true,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    // A bound far below the data's precision: the pipeline's archive would exceed the input,
    // so the writer falls back to a one-stage Store archive (docs/FORMAT.md 6.12).
    Golden {
        file: "v1.0_store_fallback.fzm",
        preset: "cuszp2",
        shape: &[73, 144],
        start: 4 * PLANE,
        bound: (ErrorMode::Abs, 1e-9),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_fzgpu_2d_specials.fzm",
        preset: "fzgpu",
        shape: &[73, 144],
        start: 4 * PLANE,
        bound: (ErrorMode::Abs, 1e-2),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_pfpl_2d_specials.fzm",
        preset: "pfpl",
        shape: &[73, 144],
        start: 5 * PLANE,
        bound: (ErrorMode::Abs, 1e-3),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_pfpl_f64.fzm",
        preset: "pfpl",
        shape: &[73, 144],
        start: 6 * PLANE,
        bound: (ErrorMode::Rel, 1e-4),
        f64: true,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cusz_2d_specials.fzm",
        preset: "cusz",
        shape: &[73, 144],
        start: 7 * PLANE,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    // Written by the build that added ADM and ANS (format 1.0 plus stage ids 19 and 20).
    Golden {
        file: "v1.0_mans_2d_specials.fzm",
        preset: "mans",
        shape: &[73, 144],
        start: 7 * PLANE,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    // Written by the build that added `fzmod::masked_preset` (format 1.0 plus stage id 43):
    // a −1e10 land band and the specials' NaN masked, rel relative to the valid values.
    Golden {
        file: "v1.0_masked-cuszp2_2d_specials.fzm",
        preset: "cuszp2",
        shape: &[73, 144],
        start: 8 * PLANE,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: true,
        land: Some(-1e10),
        mask_land: true,
        pipeline: None,
    },
    Golden {
        file: "v1.0_interp_3d_specials.fzm",
        preset: "interp",
        shape: &[6, 73, 144],
        start: 0,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: Some("interp-before-code-order.toml"),
    },
    Golden {
        file: "v1.0_interp-fast_f64.fzm",
        preset: "interp-fast",
        shape: &[73, 144],
        start: 3 * PLANE,
        bound: (ErrorMode::Rel, 1e-4),
        f64: true,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: Some("interp-fast-before-ans.toml"),
    },
    // Written by the build that added the run layout of outlier lists (docs/FORMAT.md 6.1.1):
    // the −1e10 land band and the specials left to the outlier channels, which take the run
    // layout (Quantizer outlier_format 2, LorenzoQuant's trailing byte 2).
    Golden {
        file: "v1.0_cuszp2_2d_land_runs.fzm",
        preset: "cuszp2",
        shape: &[73, 144],
        start: 9 * PLANE,
        bound: (ErrorMode::Abs, 1e-2),
        f64: false,
        specials: true,
        land: Some(-1e10),
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_cusz_2d_land_runs.fzm",
        preset: "cusz",
        shape: &[73, 144],
        start: 10 * PLANE,
        bound: (ErrorMode::Abs, 1e-2),
        f64: false,
        specials: true,
        land: Some(-1e10),
        mask_land: false,
        pipeline: None,
    },
    // Written by the build that added the level code order (docs/FORMAT.md 6.17, bit 1 of the
    // code-mapping byte) and ANS after RZE in `interp-fast`.
    Golden {
        file: "v1.0_interp_3d_level_specials.fzm",
        preset: "interp",
        shape: &[6, 73, 144],
        start: 0,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: true,
        land: None,
        mask_land: false,
        pipeline: Some("interp-before-mask.toml"),
    },
    Golden {
        file: "v1.0_interp-fast_3d_level_f64.fzm",
        preset: "interp-fast",
        shape: &[4, 73, 144],
        start: 11 * PLANE,
        bound: (ErrorMode::Rel, 1e-4),
        f64: true,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: Some("interp-fast-before-mask.toml"),
    },
    // Written by the build that put a NaN Mask in front of the interpolation presets: a NaN
    // land band, masked by the preset's own Mask stage.
    Golden {
        file: "v1.0_interp_2d_nan_land.fzm",
        preset: "interp",
        shape: &[73, 144],
        start: 12 * PLANE,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: false,
        land: Some(f32::NAN),
        mask_land: false,
        pipeline: None,
    },
    // Written by the build that gave LorenzoQuant's value outliers their Lorenzo prediction
    // (docs/FORMAT.md 6.5, outlier_format 4): the band kernels' 2-D tiles, and 3-D tiles.
    Golden {
        file: "v1.0_fzgpu_2d_land_predicted.fzm",
        preset: "fzgpu",
        shape: &[73, 144],
        start: 11 * PLANE,
        bound: (ErrorMode::Abs, 1e-2),
        f64: false,
        specials: true,
        land: Some(-1e10),
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_mans_3d_land_predicted.fzm",
        preset: "mans",
        shape: &[3, 73, 144],
        start: 12 * PLANE,
        bound: (ErrorMode::Abs, 1e-2),
        f64: false,
        specials: true,
        land: Some(-1e10),
        mask_land: false,
        pipeline: None,
    },
    // Written by the build whose Mask hands an input with nothing to mask on uncopied
    // (Stage::forward_unchanged): the interpolation presets on NaN-free fields, which must
    // keep the bytes of the copying walk (the same as the binary before it, checked by cmp).
    Golden {
        file: "v1.0_interp_3d_unmasked.fzm",
        preset: "interp",
        shape: &[5, 73, 144],
        start: 20 * PLANE,
        bound: (ErrorMode::Rel, 1e-3),
        f64: false,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
    Golden {
        file: "v1.0_interp-fast_2d_unmasked_f64.fzm",
        preset: "interp-fast",
        shape: &[73, 144],
        start: 30 * PLANE,
        bound: (ErrorMode::Rel, 1e-4),
        f64: true,
        specials: false,
        land: None,
        mask_land: false,
        pipeline: None,
    },
];

/// Goldens written while LorenzoQuant's value outliers took p = 0 (before outlier_format 3
/// and 4, docs/FORMAT.md 6.5). The current encoder gives them their prediction instead, so
/// its bytes differ from these; its archives still decode to exactly the golden's values
/// (the inverse overwrites an outlier whatever its p).
const BEFORE_PREDICTED_OUTLIERS: [&str; 4] = [
    "v1.0_fzgpu_2d_specials.fzm",
    "v1.0_cusz_2d_specials.fzm",
    "v1.0_mans_2d_specials.fzm",
    "v1.0_cusz_2d_land_runs.fzm",
];

fn golden_dir() -> PathBuf {
    repo_root().join("tests/golden")
}

impl Golden {
    fn input(&self) -> Buffer {
        let all = load(&repo_root().join("data/navy_uwnd_132x73x144.f32"));
        let Buffer::F32(v) = all.data else { unreachable!() };
        let mut v = v[self.start..self.start + self.shape.iter().product::<usize>()].to_vec();
        if self.specials {
            v[10] = f32::from_bits(0x7fc0_0bad); // NaN with a payload
            v[11] = f32::INFINITY;
            v[500] = f32::NEG_INFINITY;
            v[501] = 3.0e38;
            v[9000] = -0.0;
        }
        if let Some(fill) = self.land {
            v[501] = fill; // not 3e38: the valid range stays the field's
            for (i, x) in v.iter_mut().enumerate() {
                let (y, lon) = (i / 144, i % 144);
                if (40 + y / 3..70 + y / 2).contains(&lon) || (y > 60 && lon < 20) {
                    *x = fill;
                }
            }
        }
        if self.f64 {
            Buffer::F64(v.iter().map(|&x| f64::from(x) * 1.000_000_1).collect())
        } else {
            Buffer::F32(v)
        }
    }

    fn compress(&self) -> Vec<u8> {
        let input = self.input();
        let mut p = match (self.land.filter(|_| self.mask_land), self.pipeline) {
            (Some(fill), _) => fzmod::masked_preset(self.preset, self.shape, MaskSpec::nan_and(Some(f64::from(fill)))),
            (None, Some(file)) => fzmod::from_toml(&std::fs::read_to_string(golden_dir().join(file)).unwrap()),
            (None, None) => fzmod::preset(self.preset, self.shape),
        }
        .unwrap();
        p.set_error_bound(ErrorBound::new(self.bound.0, self.bound.1).unwrap()).unwrap();
        p.set_input_dtype(input.dtype()).unwrap();
        p.compress(&input, self.shape).unwrap()
    }

    fn archive(&self) -> Vec<u8> {
        let path = golden_dir().join(self.file);
        if !path.exists() && std::env::var_os("FZMOD_BLESS").is_some() {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&path, self.compress()).unwrap();
        }
        std::fs::read(&path).unwrap_or_else(|_| panic!("{} missing (FZMOD_BLESS=1 writes it once)", path.display()))
    }
}

/// With FZMOD_BLESS=1, record a golden's decoded checksum if the manifest lacks it.
fn bless_manifest(file: &str, crc: u32) {
    let path = golden_dir().join("MANIFEST");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    if std::env::var_os("FZMOD_BLESS").is_some() && !text.lines().any(|l| l.starts_with(file)) {
        std::fs::write(&path, format!("{text}{file} {crc:08x}\n")).unwrap();
    }
}

/// crc32c of the decoded bytes, from tests/golden/MANIFEST.
fn manifest_crc(file: &str) -> u32 {
    let text = std::fs::read_to_string(golden_dir().join("MANIFEST")).unwrap();
    let line = text.lines().find(|l| l.split_whitespace().next() == Some(file));
    let line = line.unwrap_or_else(|| panic!("{file} not in tests/golden/MANIFEST"));
    u32::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
}

#[test]
fn golden_archives_decode_to_their_recorded_values() {
    for g in &GOLDENS {
        let archive = g.archive();
        let decoded = fzmod::decompress(&archive).unwrap_or_else(|e| panic!("{}: {e}", g.file));
        let bytes = decoded.data.to_le_bytes();
        bless_manifest(g.file, crc32c::crc32c(&bytes));
        assert_eq!(crc32c::crc32c(&bytes), manifest_crc(g.file), "{}: decoded values changed", g.file);
        let input = g.input();
        let abs = expected_abs_bound(&input, ErrorBound::new(g.bound.0, g.bound.1).unwrap());
        assert_within(&input, &decoded.data, abs, g.file);
        // (A masked golden's bound is checked against its valid range in its own test.)
        let preset = if g.mask_land { format!("masked-{}", g.preset) } else { g.preset.to_string() };
        assert_eq!(decoded.header.preset, preset);
    }
}

#[test]
fn the_current_encoder_still_writes_the_golden_bytes() {
    for g in GOLDENS.iter().filter(|g| !BEFORE_PREDICTED_OUTLIERS.contains(&g.file)) {
        assert!(g.compress() == g.archive(), "{}: encoder output differs from the format-1.0 golden", g.file);
    }
}

#[test]
fn goldens_before_predicted_outliers_reencode_to_the_same_values() {
    for g in GOLDENS.iter().filter(|g| BEFORE_PREDICTED_OUTLIERS.contains(&g.file)) {
        let archive = g.compress();
        assert!(archive != g.archive(), "{}: the outliers' prediction changes the codes", g.file);
        let format = *fzmod::inspect(&archive).unwrap().stages[0].params.last().unwrap();
        let before = *fzmod::inspect(&g.archive()).unwrap().stages[0].params.last().unwrap();
        assert_eq!(format, if before == 2 { 4 } else { 3 }, "{}: the record marks the prediction", g.file);
        let decoded = fzmod::decompress(&archive).unwrap().data.to_le_bytes();
        assert_eq!(crc32c::crc32c(&decoded), manifest_crc(g.file), "{}: decoded values changed", g.file);
    }
}

#[test]
fn every_truncation_is_an_error() {
    for g in &GOLDENS {
        let archive = g.archive();
        for len in 0..archive.len() {
            assert!(fzmod::decompress(&archive[..len]).is_err(), "{}: prefix of {len} bytes decoded", g.file);
        }
    }
}

#[test]
fn every_single_byte_corruption_is_an_error_or_a_correct_decode() {
    for g in &GOLDENS {
        let archive = g.archive();
        let expected = fzmod::decompress(&archive).unwrap().data.to_le_bytes();
        let mut bad = archive.clone();
        for i in 0..archive.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                bad[i] ^= flip;
                if let Ok(d) = fzmod::decompress(&bad) {
                    assert!(
                        d.data.to_le_bytes() == expected,
                        "{}: byte {i} ^ {flip:#x} decoded to different values",
                        g.file
                    );
                }
                bad[i] = archive[i];
            }
        }
    }
}

/// Corrupt header fields behind a recomputed CRC, so the parser and every stage's record
/// decoder see them: an error, or a decode whose values match the header's shape and type.
#[test]
fn corrupt_fields_with_valid_checksums_never_panic() {
    for g in &GOLDENS {
        let archive = g.archive();
        let crc_at = header_crc_at(&archive);
        for i in 8..crc_at {
            for value in [0x00u8, 0x01, 0x7f, 0x80, 0xff, archive[i].wrapping_add(1), archive[i].wrapping_sub(1)] {
                let mut bad = archive.clone();
                bad[i] = value;
                reseal_header(&mut bad, crc_at);
                if let Ok(d) = fzmod::decompress(&bad) {
                    assert_eq!(Some(d.data.len() as u64), d.header.num_elements().ok(), "{}: byte {i}", g.file);
                    assert_eq!(d.data.dtype(), d.header.dtype, "{}: byte {i}", g.file);
                }
            }
        }
    }
}

#[test]
fn the_store_fallback_golden_keeps_every_bit_and_the_requested_bound() {
    let g = GOLDENS.iter().find(|g| g.file == "v1.0_store_fallback.fzm").unwrap();
    let decoded = fzmod::decompress(&g.archive()).unwrap();
    assert!(fzmod::is_stored_raw(&decoded.header));
    assert_eq!((decoded.header.error_mode, decoded.header.error_bound), g.bound);
    assert_eq!(decoded.data.to_le_bytes(), g.input().to_le_bytes(), "NaN payload, -0.0 and all values bit for bit");
}

#[test]
fn the_masked_golden_restores_its_land_and_nan_bit_for_bit() {
    let g = GOLDENS.iter().find(|g| g.mask_land).unwrap();
    let decoded = fzmod::decompress(&g.archive()).unwrap();
    assert_eq!(decoded.header.preset, "masked-cuszp2");
    let (Buffer::F32(input), Buffer::F32(output)) = (g.input(), decoded.data) else { unreachable!() };
    let fill = g.land.unwrap();
    let valid: Vec<f64> = input.iter().filter(|x| x.is_finite() && **x != fill).map(|&x| f64::from(x)).collect();
    let range =
        valid.iter().copied().fold(f64::NEG_INFINITY, f64::max) - valid.iter().copied().fold(f64::INFINITY, f64::min);
    let mut land = 0;
    for (a, b) in input.iter().zip(&output) {
        if *a == fill || a.is_nan() {
            assert_eq!(a.to_bits(), b.to_bits());
            land += 1;
        } else if a.is_finite() {
            assert!((f64::from(*a) - f64::from(*b)).abs() <= 1e-3 * range, "{a} -> {b}");
        }
    }
    assert!(land > 2000, "{land} masked points");
}

#[test]
fn the_unmasked_land_goldens_use_the_run_layout() {
    // (The interpolation presets mask NaN land with their own Mask stage: tested below.)
    for g in GOLDENS.iter().filter(|g| g.land.is_some() && !g.mask_land && !g.preset.starts_with("interp")) {
        let header = fzmod::inspect(&g.archive()).unwrap();
        let quantizer = &header.stages[0];
        // LorenzoQuant's 4 is the run layout with predicted value outliers.
        let runs = if g.file.ends_with("_predicted.fzm") { 4 } else { 2 };
        assert_eq!(quantizer.params.last(), Some(&runs), "{}: outlier_format {runs} (runs)", g.file);
    }
}

#[test]
fn the_interp_nan_land_golden_is_masked_by_the_preset() {
    let g = GOLDENS.iter().find(|g| g.file == "v1.0_interp_2d_nan_land.fzm").unwrap();
    let decoded = fzmod::decompress(&g.archive()).unwrap();
    assert_eq!(decoded.header.stages[0].name, "mask");
    let (Buffer::F32(input), Buffer::F32(output)) = (g.input(), decoded.data) else { unreachable!() };
    let valid: Vec<f64> = input.iter().filter(|x| x.is_finite()).map(|&x| f64::from(x)).collect();
    let range =
        valid.iter().copied().fold(f64::NEG_INFINITY, f64::max) - valid.iter().copied().fold(f64::INFINITY, f64::min);
    let bound = g.bound.1 * range;
    let mut land = 0;
    for (a, b) in input.iter().zip(&output) {
        if a.is_nan() {
            assert_eq!(a.to_bits(), b.to_bits());
            land += 1;
        } else {
            assert!((f64::from(*a) - f64::from(*b)).abs() <= bound, "{a} -> {b}");
        }
    }
    assert!(land > 2000, "{land} NaN points");
}
