//! Arbitrary f32 values through every preset: the bound holds on every element and NaN/Inf
//! come back bit-identical.
#![no_main]

use fzmod::{Buffer, ErrorBound, ErrorMode};

libfuzzer_sys::fuzz_target!(|input: (u8, u8, Vec<u32>)| {
    let (preset, exponent, bits) = input;
    if bits.is_empty() {
        return;
    }
    let values: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    let preset = &fzmod::PRESETS[preset as usize % fzmod::PRESETS.len()];
    let bound = 10f64.powi(i32::from(exponent % 40) - 30);
    let shape = [values.len()];
    let mut p = fzmod::preset(preset.name, &shape).unwrap();
    p.set_error_bound(ErrorBound::new(ErrorMode::Abs, bound).unwrap()).unwrap();
    let archive = p.compress(&Buffer::F32(values.clone()), &shape).unwrap();
    let Buffer::F32(back) = fzmod::decompress(&archive).unwrap().data else { unreachable!() };
    for (a, b) in values.iter().zip(&back) {
        if a.is_finite() {
            assert!((f64::from(*a) - f64::from(*b)).abs() <= bound, "{a} -> {b} (bound {bound})");
        } else {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }
});
