//! The `interp` and `interp-fast` presets through the public API on thin, prime, 4-D and 5-D
//! shapes with NaN and ±Inf: the bound on every finite element, specials bit for bit.

use fzmod::{Buffer, ErrorBound, ErrorMode};

#[test]
fn thin_prime_and_four_d_shapes_through_both_presets() {
    let shapes: [&[usize]; 7] = [&[1, 97], &[97, 1], &[13, 31], &[7, 11, 17], &[3, 5, 7, 11], &[2, 1, 3, 4, 5], &[1]];
    for shape in shapes {
        let n: usize = shape.iter().product();
        let mut x: Vec<f32> = (0..n).map(|i| 50.0 * (i as f32 * 0.05).sin() + (i % 7) as f32 * 0.01).collect();
        if n > 4 {
            x[n / 2] = f32::NAN;
            x[n / 3] = f32::NEG_INFINITY;
        }
        let (lo, hi) = x
            .iter()
            .filter(|v| v.is_finite())
            .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(f64::from(v)), h.max(f64::from(v))));
        let b = 1e-3 * (hi - lo);
        for preset in ["interp", "interp-fast"] {
            let bound = ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap();
            let archive = fzmod::compress(&x, shape, preset, bound).unwrap();
            let back = fzmod::decompress(&archive).unwrap();
            let Buffer::F32(y) = back.data else { panic!("f32 expected") };
            for (i, (a, c)) in x.iter().zip(&y).enumerate() {
                if a.is_finite() {
                    assert!((f64::from(*a) - f64::from(*c)).abs() <= b, "{preset} {shape:?} element {i}: {a} vs {c}");
                } else {
                    assert_eq!(a.to_bits(), c.to_bits(), "{preset} {shape:?} element {i}");
                }
            }
        }
    }
}
