//! Graph validation, TOML round trips and typed errors for bad pipelines and inputs.

use fzmod::{Buffer, Error, ErrorBound, ErrorMode};

fn sample(n: usize) -> Buffer {
    Buffer::F32((0..n).map(|i| (i as f32 * 0.37).sin() * 100.0).collect())
}

#[test]
fn every_preset_round_trips_through_toml() {
    for preset in fzmod::PRESETS {
        for shape in [vec![5000usize], vec![40, 50], vec![6, 20, 30]] {
            let p = fzmod::preset(preset.name, &shape).unwrap();
            let text = fzmod::to_toml(&p);
            let again = fzmod::from_toml(&text).unwrap();
            assert_eq!(fzmod::to_toml(&again), text, "{} {shape:?}", preset.name);
            let input = sample(shape.iter().product());
            assert_eq!(p.compress(&input, &shape).unwrap(), again.compress(&input, &shape).unwrap());
        }
    }
}

fn config_error(text: &str) -> String {
    match fzmod::from_toml(text) {
        Err(e @ (Error::Config(_) | Error::Pipeline(_))) => e.to_string(),
        other => panic!("expected a config/pipeline error, got {other:?}"),
    }
}

const QUANT: &str = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound = 0.1\n";

#[test]
fn bad_pipelines_name_the_stage_and_port() {
    let e = config_error(&format!(
        "{QUANT}[[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\ninputs = [{{from = \"q\", port = \"cods\"}}]\n"
    ));
    assert!(e.contains("'q'") && e.contains("cods") && e.contains("codes"), "{e}");
    let e = config_error(&format!("{QUANT}[[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\ninput_type = \"int16\"\ninputs = [{{from = \"q\", port = \"codes\"}}]\n"));
    assert!(e.contains("'c'") && e.contains("i16") && e.contains("i32"), "{e}");
    let e = config_error(&format!("{QUANT}[[stage]]\nname = \"c\"\ntype = \"Bogus\"\n"));
    assert!(e.contains("Bogus") && e.contains("AdaptiveBitpack"), "{e}");
    let e = config_error(&format!("{QUANT}[[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\nblock_sise = 32\ninputs = [{{from = \"q\", port = \"codes\"}}]\n"));
    assert!(e.contains("block_sise"), "{e}");
    let e = config_error(&format!("{QUANT}[[stage]]\nname = \"a\"\ntype = \"Lorenzo\"\ninputs = [{{from = \"q\", port = \"codes\"}}]\n[[stage]]\nname = \"b\"\ntype = \"Lorenzo\"\ninputs = [{{from = \"q\", port = \"codes\"}}]\n"));
    assert!(e.contains("more than one"), "{e}");
    let e = config_error("[[stage]]\nname = \"a\"\ntype = \"Lorenzo\"\ninputs = [{from = \"b\"}]\n[[stage]]\nname = \"b\"\ntype = \"Lorenzo\"\ninputs = [{from = \"a\"}]\n");
    assert!(e.contains("pipeline input"), "{e}");
    let e = config_error(&format!("{QUANT}[[stage]]\nname = \"q\"\ntype = \"Lorenzo\"\n"));
    assert!(e.contains("already used"), "{e}");
    let e = config_error(&format!("{QUANT}[[stage]]\nname = \"t\"\ntype = \"TiledLorenzo\"\ntile_x = 64\ntile_y = 64\ninputs = [{{from = \"q\", port = \"codes\"}}]\n"));
    assert!(e.contains("1024"), "{e}");
}

#[test]
fn a_cycle_is_reported() {
    let mut p = fzmod::Pipeline::new();
    for name in ["a", "b"] {
        p.add_stage(name, Box::new(fzmod::stages::lorenzo::Lorenzo::new(0).unwrap())).unwrap();
    }
    p.add_stage("q", Box::new(fzmod::stages::quantizer::Quantizer::new(fzmod::DType::F32, None).unwrap())).unwrap();
    p.connect("a", "b", "output").unwrap();
    p.connect("b", "a", "output").unwrap();
    p.connect_input("q").unwrap();
    let e = p.finalize().unwrap_err().to_string();
    assert!(e.contains("cycle") && e.contains('a') && e.contains('b'), "{e}");
}

#[test]
fn unconnected_outputs_are_archived() {
    // Quantizer alone: both its outputs become segments and the archive still decodes. On f64
    // values its i32 codes take half the input's bytes, so the archive stays smaller than the
    // input (on f32 it would not, and the input would be stored as it is instead).
    let mut p = fzmod::from_toml(QUANT).unwrap();
    p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 0.5).unwrap()).unwrap();
    p.set_input_dtype(fzmod::DType::F64).unwrap();
    let input = Buffer::F64((0..1000).map(|i| (i as f64 * 0.37).sin() * 100.0).collect());
    let archive = p.compress(&input, &[1000]).unwrap();
    let h = fzmod::inspect(&archive).unwrap();
    assert_eq!(h.segments.len(), 2);
    let Buffer::F64(back) = fzmod::decompress(&archive).unwrap().data else { panic!() };
    let Buffer::F64(orig) = input else { panic!() };
    assert!(orig.iter().zip(&back).all(|(a, b)| (a - b).abs() <= 0.5));
}

#[test]
fn bad_inputs_get_typed_errors() {
    let p = fzmod::preset("cuszp2", &[100]).unwrap();
    assert!(matches!(p.compress(&sample(100), &[10, 11]), Err(Error::InvalidArgument(_))));
    assert!(matches!(p.compress(&Buffer::F32(vec![]), &[0]), Err(Error::InvalidArgument(_))));
    assert!(matches!(p.compress(&Buffer::F64(vec![1.0; 100]), &[100]), Err(Error::Stage { .. } | Error::Pipeline(_))));
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(ErrorBound::new(ErrorMode::Abs, bad), Err(Error::InvalidArgument(_))));
    }
    assert!(matches!(fzmod::preset("sz9", &[4]), Err(Error::InvalidArgument(_))));
    assert!(matches!(fzmod::decompress(b"hello world, not an archive"), Err(Error::BadMagic)));
    assert!(matches!(fzmod::decompress(&[]), Err(Error::Truncated(_))));
}

#[test]
fn newer_major_versions_and_unknown_stages_are_refused() {
    let p = fzmod::preset("cuszp", &[256]).unwrap();
    let mut archive = p.compress(&sample(256), &[256]).unwrap();
    let mut newer = archive.clone();
    // Major 2 is the chunked container (docs/FORMAT.md §8); 3 is newer than this build.
    newer[8] = 3;
    assert!(matches!(fzmod::decompress(&newer), Err(Error::UnsupportedVersion { major: 3, .. })));
    // Rewrite the first stage's type id (first varint after the preset name) and fix the CRC.
    let h = fzmod::inspect(&archive).unwrap();
    let body_len = u32::from_le_bytes(archive[12..16].try_into().unwrap()) as usize;
    let needle = [14u8, 5, b'q'];
    let at = archive[16..16 + body_len].windows(3).position(|w| w == needle).unwrap() + 16;
    assert_eq!(h.stages[0].type_id, 14);
    archive[at] = 99;
    let crc = crc32c::crc32c(&archive[..16 + body_len]);
    archive[16 + body_len..20 + body_len].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(fzmod::decompress(&archive), Err(Error::UnknownStage(99))));
}

#[test]
fn absurd_bounds_stay_correct() {
    // A huge bound codes everything as zero; a tiny one sends everything to the outlier
    // channel: both decode within the bound (exactly, for the tiny one).
    let input = sample(4096);
    for eb in [1e30, 1e-30] {
        let mut p = fzmod::preset("cuszp2", &[4096]).unwrap();
        p.set_error_bound(ErrorBound::new(ErrorMode::Abs, eb).unwrap()).unwrap();
        let Buffer::F32(back) = fzmod::decompress(&p.compress(&input, &[4096]).unwrap()).unwrap().data else {
            panic!()
        };
        let Buffer::F32(orig) = &input else { panic!() };
        assert!(orig.iter().zip(&back).all(|(a, b)| f64::from((a - b).abs()) <= eb), "eb {eb}");
    }
    // A constant field with a relative bound has range 0: it must come back exactly.
    let flat = Buffer::F32(vec![3.25; 1000]);
    let mut p = fzmod::preset("cuszp3-plain", &[10, 100]).unwrap();
    p.set_error_bound(ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap()).unwrap();
    assert_eq!(fzmod::decompress(&p.compress(&flat, &[10, 100]).unwrap()).unwrap().data, flat);
}

mod properties {
    use fzmod::{Buffer, ErrorBound, ErrorMode};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Arbitrary bit patterns (NaN, ±Inf, subnormals, extremes) through every preset and
        /// bounds from 1e-30 to 1e9: every finite value within the bound, the rest bit-exact.
        #[test]
        fn any_f32_values_round_trip_within_the_bound(bits in prop::collection::vec(any::<u32>(), 1..700),
                                                      preset in 0usize..5, exponent in -30i32..10, rows in 1usize..4) {
            let values: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
            let n = values.len();
            let shape = if n.is_multiple_of(rows) { vec![rows, n / rows] } else { vec![n] };
            let bound = 10f64.powi(exponent);
            let mut p = fzmod::preset(fzmod::PRESETS[preset].name, &shape).unwrap();
            p.set_error_bound(ErrorBound::new(ErrorMode::Abs, bound).unwrap()).unwrap();
            let archive = p.compress(&Buffer::F32(values.clone()), &shape).unwrap();
            let Buffer::F32(back) = fzmod::decompress(&archive).unwrap().data else { unreachable!() };
            for (a, b) in values.iter().zip(&back) {
                if a.is_finite() {
                    prop_assert!((f64::from(*a) - f64::from(*b)).abs() <= bound, "{} -> {} (bound {})", a, b, bound);
                } else {
                    prop_assert_eq!(a.to_bits(), b.to_bits());
                }
            }
        }
    }
}

/// One bound policy: a TOML `error_bound` without a mode is relative, as `-e` alone and
/// `bound=` alone are; a mode without a value is refused.
#[test]
fn a_bare_toml_error_bound_is_relative_like_every_front_end() {
    use fzmod::{ErrorBound, ErrorMode};
    for stage in ["Quantizer", "LorenzoQuant"] {
        let toml = format!("[[stage]]\nname = \"q\"\ntype = \"{stage}\"\nerror_bound = 0.01\n");
        let p = fzmod::from_toml(&toml).unwrap();
        assert_eq!(p.error_bound(), Some(ErrorBound::new(ErrorMode::Rel, 0.01).unwrap()), "{stage}");
        assert_eq!(p.error_bound(), ErrorBound::from_parts(None, Some(0.01), None).unwrap());
        let mode_only = format!("[[stage]]\nname = \"q\"\ntype = \"{stage}\"\nerror_bound_mode = \"abs\"\n");
        assert!(fzmod::from_toml(&mode_only).is_err(), "{stage}: a mode without a value");
    }
}
