//! The Mask stage in whole pipelines (the documented examples, docs/examples/masked-*.toml):
//! masked elements come back bit for bit, the others within a bound relative to the valid
//! values; corrupt masks fail cleanly; and on Levitus' land mask the ratio no longer collapses.

mod common;

use common::reseal::{fix_crcs, layout};
use common::*;
use fzmod::{Buffer, ErrorBound, ErrorMode, Pipeline};
use proptest::prelude::*;
use std::io::Write;

const EXAMPLES: [&str; 4] = ["masked-cuszp2", "masked-cuszp3-outlier", "masked-fzgpu", "masked-pfpl"];
const FILL: f32 = -1e10;

fn example(name: &str, dtype: fzmod::DType) -> Pipeline {
    let path = repo_root().join(format!("docs/examples/{name}.toml"));
    let mut p = fzmod::from_toml(&std::fs::read_to_string(&path).unwrap()).unwrap();
    p.set_input_dtype(dtype).unwrap();
    p
}

/// Whether an element is one the examples mask (NaN or the fill).
fn masked(v: f64) -> bool {
    v.is_nan() || v == f64::from(FILL)
}

/// `rel` × the range of the unmasked values (what the examples' bound means).
fn valid_abs_bound(data: &Buffer, rel: f64) -> f64 {
    let valid: Vec<f64> = values(data).into_iter().filter(|&v| !masked(v) && v.is_finite()).collect();
    let (lo, hi) = valid.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    if lo <= hi {
        rel * (hi - lo)
    } else {
        0.0
    }
}

fn bits(b: &Buffer) -> Vec<u64> {
    match b {
        Buffer::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        Buffer::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        _ => panic!("not a float buffer"),
    }
}

/// Masked elements bit for bit, the others within `abs`.
fn check(original: &Buffer, decoded: &Buffer, abs: f64, what: &str) {
    let (a, b) = (values(original), values(decoded));
    let (ab, bb) = (bits(original), bits(decoded));
    assert_eq!(a.len(), b.len(), "{what}: length");
    for i in 0..a.len() {
        if masked(a[i]) || !a[i].is_finite() {
            assert_eq!(ab[i], bb[i], "{what}: masked element {i} not bit-identical");
        } else {
            assert!((a[i] - b[i]).abs() <= abs, "{what}: element {i}: {} vs {} beyond {abs:e}", a[i], b[i]);
        }
    }
}

/// Compress with the examples' own bound (rel 1e-3 of the valid range), decode, check.
fn round_trip(name: &str, data: &Buffer, shape: &[usize]) -> usize {
    let p = example(name, data.dtype());
    let archive = p.compress(data, shape).unwrap();
    let decoded = fzmod::decompress(&archive).unwrap();
    let abs = valid_abs_bound(data, 1e-3);
    // (Short random inputs may grow and be stored raw instead: then every value is exact.)
    if !fzmod::is_stored_raw(&decoded.header) {
        assert_eq!(fzmod::archived_abs_bound(&decoded.header), Some(abs), "{name}: bound of the valid range");
    }
    check(data, &decoded.data, abs, name);
    archive.len()
}

/// A smooth 3-D field with a land block (the fill), NaN with payloads, and isolated NaN.
fn synthetic(shape: [usize; 3]) -> Vec<f32> {
    let [d, h, w] = shape;
    let mut v = Vec::with_capacity(d * h * w);
    for k in 0..d {
        for i in 0..h {
            for j in 0..w {
                let x = (i as f32 * 0.1).sin() * 10.0 + (j as f32 * 0.07).cos() * 5.0 - k as f32;
                let land = (i + k) % 17 < 6 && j > w / 3 && j < w / 3 + 11 + k;
                v.push(if land {
                    FILL
                } else if (i * w + j) % 97 == 5 {
                    f32::from_bits(0x7fc0_0000 | (i * 31 + j) as u32)
                } else {
                    x
                });
            }
        }
    }
    v
}

#[test]
fn every_example_round_trips_f32_and_f64() {
    let shape = [4usize, 30, 50];
    let x = synthetic(shape);
    let wide: Vec<f64> = x
        .iter()
        .map(
            |&v| if v.is_nan() { f64::from_bits(0x7ff8_0000_0000_0000 | u64::from(v.to_bits())) } else { f64::from(v) },
        )
        .collect();
    for name in EXAMPLES {
        round_trip(name, &Buffer::F32(x.clone()), &shape);
        round_trip(name, &Buffer::F64(wide.clone()), &shape);
        // All masked, nothing masked, 1-D.
        round_trip(name, &Buffer::F32(vec![FILL; 300]), &[300]);
        round_trip(name, &Buffer::F32((0..300).map(|i| i as f32).collect()), &[300]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random lengths and runs of valid values, NaN (any payload) and the fill, through the
    /// cuSZp2 example (1-D).
    #[test]
    fn random_masks_round_trip(runs in prop::collection::vec((0u8..3, any::<u32>(), 1usize..80), 1..40)) {
        let x: Vec<f32> = runs
            .iter()
            .flat_map(|&(c, p, len)| {
                (0..len).map(move |k| match c {
                    0 => (p % 1000) as f32 * 0.01 + k as f32 * 0.1,
                    1 => f32::from_bits(0x7f80_0001 | ((p ^ k as u32) & 0x807f_ffff)),
                    _ => FILL,
                })
            })
            .collect();
        let n = x.len();
        round_trip("masked-cuszp2", &Buffer::F32(x), &[n]);
    }
}

#[test]
fn corrupt_mask_records_and_segments_fail_cleanly() {
    let mut x = synthetic([2, 20, 40]);
    x[7] = f32::from_bits(0xffc0_1234); // an exception: other bits than the first masked value
    let p = example("masked-cuszp2", fzmod::DType::F32);
    let archive = p.compress(&Buffer::F32(x.clone()), &[2, 20, 40]).unwrap();
    let l = layout(&archive);
    // The Mask is stage 0; its `mask` output is the first archived segment.
    let targets = [l.records[0].clone(), l.segments[0].0.clone()];
    std::panic::set_hook(Box::new(|_| {}));
    let mut decoded_ok = 0;
    for range in targets {
        for i in range {
            for value in [0u8, 0xff, archive[i] ^ 1, archive[i] ^ 0x80] {
                let mut bad = archive.clone();
                bad[i] = value;
                fix_crcs(&mut bad, &l);
                match std::panic::catch_unwind(|| fzmod::decompress(&bad).map(|d| d.data.len())) {
                    Err(_) => panic!("byte {i} -> {value:#x}: panicked"),
                    Ok(Ok(len)) => {
                        assert_eq!(len, x.len(), "byte {i}");
                        decoded_ok += 1;
                    }
                    Ok(Err(_)) => {}
                }
            }
        }
    }
    let _ = std::panic::take_hook();
    for cut in [archive.len() - 1, archive.len() / 2, 70] {
        assert!(fzmod::decompress(&archive[..cut]).is_err(), "truncated at {cut}");
    }
    let _ = writeln!(std::io::stderr(), "mask corruption: {decoded_ok} mutations still decoded");
}

/// The examples against the presets they extend, on Levitus (land as the -1e10 fill, and as
/// NaN), at rel 1e-3 of the valid range (the presets get the same absolute bound).
#[test]
fn levitus_masked_ratios() {
    let name = "levitus_temp_20x180x360.f32";
    let Some(dir) = shared_data_for("levitus_masked_ratios", &[name]) else { return };
    let field = load(&dir.join(name));
    let Buffer::F32(fill) = &field.data else { panic!() };
    let nan: Vec<f32> = fill.iter().map(|&v| if v == FILL { f32::NAN } else { v }).collect();
    let raw = field.data.byte_len() as f64;
    let abs = valid_abs_bound(&field.data, 1e-3);
    for (variant, data) in [("fill", field.data.clone()), ("NaN", Buffer::F32(nan))] {
        for (masked_name, preset) in EXAMPLES.iter().zip(["cuszp2", "cuszp3-outlier", "fzgpu", "pfpl"]) {
            let masked_ratio = raw / round_trip(masked_name, &data, &field.shape) as f64;
            let mut p = fzmod::preset(preset, &field.shape).unwrap();
            p.set_error_bound(ErrorBound::new(ErrorMode::Abs, abs).unwrap()).unwrap();
            let archive = p.compress(&data, &field.shape).unwrap();
            check(&data, &fzmod::decompress(&archive).unwrap().data, abs, preset);
            let plain_ratio = raw / archive.len() as f64;
            let _ = writeln!(
                std::io::stderr(),
                "levitus {variant}: {masked_name} {masked_ratio:.2}x, {preset} without the mask {plain_ratio:.2}x"
            );
            // pfpl's inline outliers pay per land point, so its mask pays 1.3× at least; the
            // other presets' land goes to outlier runs (docs/FORMAT.md 6.1.1) and costs little
            // without a mask too (PERFORMANCE.md, "Outlier lists in the run layout").
            let mask_pays = preset != "pfpl" || masked_ratio > 1.3 * plain_ratio;
            assert!(
                masked_ratio > 5.0 && plain_ratio > 4.0 && mask_pays,
                "{variant} {masked_name}: {masked_ratio} vs {plain_ratio}"
            );
        }
    }
}
