//! Round trips of the CPU reference: the bound on every element, specials bit-exact, and
//! corrupted records and channels refused with typed errors.

use super::cpu::{forward, inverse, point_cost, Params};
use super::walk::{Choice, Geometry, Real};
use super::*;
use proptest::prelude::*;

/// The decode of the codes in element order, checked against a round trip in level order:
/// the drivers' level-order rows are the whole-array permutation's, both ways.
fn round_trip<T: Real>(x: &[T], dims: [usize; 3], anchor: usize, q: Params) -> Vec<T> {
    let g = Geometry { dims, anchor };
    let f = forward(x, &g, q, None, false);
    let y: Vec<T> = inverse(&f.codes, &f.side, f.num_outliers, &g, q, &f.choices, false).unwrap();
    let level = forward(x, &g, q, None, true);
    assert_eq!(level.codes, order::to_level_order(&f.codes, &g));
    let z: Vec<T> = inverse(&level.codes, &level.side, level.num_outliers, &g, q, &level.choices, true).unwrap();
    assert!(y.iter().zip(&z).all(|(a, b)| a.bits() == b.bits()));
    y
}

fn check<T: Real>(x: &[T], y: &[T], b: f64) {
    assert_eq!(x.len(), y.len());
    for (i, (a, c)) in x.iter().zip(y).enumerate() {
        if a.is_finite() {
            assert!((a.to_f64() - c.to_f64()).abs() <= b, "element {i}: {} vs {}", a.to_f64(), c.to_f64());
        } else {
            assert_eq!(a.bits(), c.bits(), "element {i}");
        }
    }
}

fn field(n: usize, pattern: u8, seed: u64, scale: f64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let noise = (i.wrapping_mul(seed | 1).wrapping_add(seed) >> 40) as f64 / 16777216.0 - 0.5;
            match pattern {
                0 => scale,
                1 => scale * i as f64 / n as f64,
                2 => scale * noise,
                _ => scale * ((i as f64 * 0.05).sin() + 0.01 * noise),
            }
        })
        .collect()
}

proptest! {
    #[test]
    fn bound_holds_on_every_element(
        nz in 1usize..6, ny in 1usize..20, nx in 1usize..45, anchor_log in 1u32..6,
        pattern in 0u8..4, seed in any::<u64>(), scale in 1e-3f64..1e6, rel in 1e-6f64..1e-1,
        radius in prop::sample::select(vec![1u32, 4, 512, 32768]), specials in any::<bool>(),
        alpha in 1.0f64..2.0, beta in 1.0f64..4.0, zigzag in any::<bool>(),
    ) {
        let n = nz * ny * nx;
        let mut x: Vec<f32> = field(n, pattern, seed, scale).iter().map(|&v| v as f32).collect();
        if specials {
            for (k, v) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e38, -0.0].into_iter().enumerate() {
                let i = (seed as usize).wrapping_add(k * 7919) % n;
                x[i] = v;
            }
        }
        let b = rel * scale;
        let q = Params { radius, zigzag, abs_bound: b, alpha, beta };
        let y = round_trip(&x, [nz, ny, nx], 1 << anchor_log, q);
        check(&x, &y, b);
        let x64: Vec<f64> = field(n, pattern, seed, scale);
        check(&x64, &round_trip(&x64, [nz, ny, nx], 1 << anchor_log, q), b);
    }
}

/// `f` on a rayon pool of `threads` threads.
fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool").install(f)
}

/// Encode and decode in element order on `threads` threads: codes, side bytes, outlier
/// count, choices and the decoded values' bits.
fn walk_on<T: Real>(threads: usize, x: &[T], g: &Geometry, q: Params) -> (Vec<u16>, Vec<u8>, u64, Vec<u8>, Vec<u64>) {
    on_threads(threads, || {
        assert_eq!(super::slabs::Slabs::for_threads(g, false).is_some(), threads > 1 && slab_axis_longer_than_a(g));
        let f = forward(x, g, q, None, false);
        let y: Vec<T> = inverse(&f.codes, &f.side, f.num_outliers, g, q, &f.choices, false).unwrap();
        let choices = f.choices.iter().map(|c| c.byte()).collect();
        (f.codes, f.side, f.num_outliers, choices, y.iter().map(|v| v.bits()).collect())
    })
}

/// Whether the slowest axis of more than one point is longer than the anchor stride.
fn slab_axis_longer_than_a(g: &Geometry) -> bool {
    (0..2).find(|&a| g.dims[a] > 1).is_some_and(|a| g.dims[a] > g.anchor)
}

proptest! {
    /// The slab walk (slabs.rs) on several threads gives the serial walk's bytes and values:
    /// grids cut along z or along y, last slabs of one line or short, specials included.
    #[test]
    fn slabs_give_the_serial_bytes(
        nz in 1usize..12, ny in 1usize..40, nx in 1usize..24, anchor_log in 1u32..4,
        pattern in 0u8..4, seed in any::<u64>(), specials in any::<bool>(), rel in 1e-5f64..1e-2,
    ) {
        let n = nz * ny * nx;
        let mut x64 = field(n, pattern, seed, 100.0);
        if specials {
            for (k, v) in [f64::NAN, f64::INFINITY, -1e30, 7e3].into_iter().enumerate() {
                x64[(seed as usize).wrapping_add(k * 7919) % n] = v;
            }
        }
        let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
        let g = Geometry { dims: [nz, ny, nx], anchor: 1 << anchor_log };
        let q = Params { radius: 512, zigzag: seed % 2 == 0, abs_bound: rel * 100.0, alpha: 1.25, beta: 2.0 };
        prop_assert_eq!(walk_on(1, &x32, &g, q), walk_on(3, &x32, &g, q));
        prop_assert_eq!(walk_on(1, &x64, &g, q), walk_on(3, &x64, &g, q));
    }
}

#[test]
fn constant_field_at_a_relative_bound_is_exact() {
    let x = vec![2.5f32; 300];
    let q = Params { radius: 512, zigzag: false, abs_bound: 0.0, alpha: 1.5, beta: 4.0 };
    let g = Geometry { dims: [1, 10, 30], anchor: 8 };
    let f = forward(&x, &g, q, None, false);
    assert_eq!(f.num_outliers, 0);
    assert_eq!(inverse::<f32>(&f.codes, &f.side, 0, &g, q, &f.choices, false).unwrap(), x);
}

#[test]
fn smooth_field_codes_are_mostly_zero() {
    let x: Vec<f32> = (0..64 * 64).map(|i| ((i / 64) as f32 * 0.1).sin() + ((i % 64) as f32 * 0.07).cos()).collect();
    let q = Params { radius: 512, zigzag: false, abs_bound: 1e-3, alpha: 1.5, beta: 4.0 };
    let g = Geometry { dims: [1, 64, 64], anchor: 16 };
    let f = forward(&x, &g, q, None, false);
    let zeros = f.codes.iter().filter(|&&c| c == 512).count();
    assert!(zeros > x.len() * 3 / 4, "{zeros}");
    assert!(f.choices.iter().any(|c| c.kind != Kind::Linear), "{:?}", f.choices);
}

#[test]
fn truncated_or_corrupted_side_channel_is_an_error() {
    let mut x: Vec<f32> = field(200, 2, 7, 10.0).iter().map(|&v| v as f32).collect();
    x[17] = f32::NAN;
    x[101] = 1e30;
    let q = Params { radius: 4, zigzag: true, abs_bound: 1e-2, alpha: 1.5, beta: 4.0 };
    let g = Geometry { dims: [1, 10, 20], anchor: 4 };
    let f = forward(&x, &g, q, None, false);
    assert!(f.num_outliers >= 2);
    for cut in 0..f.side.len() {
        assert!(inverse::<f32>(&f.codes, &f.side[..cut], f.num_outliers, &g, q, &f.choices, false).is_err());
    }
    assert!(inverse::<f32>(&f.codes, &f.side, f.num_outliers + 1, &g, q, &f.choices, false).is_err());
    assert!(inverse::<f32>(&f.codes[1..], &f.side, f.num_outliers, &g, q, &f.choices, false).is_err());
    assert!(inverse::<f32>(&f.codes, &f.side, f.num_outliers, &g, q, &f.choices[1..], false).is_err());
    // Any code and any choice decode to something without a panic.
    let codes: Vec<u16> = (0..200).map(|i| (i * 7919 % 65536) as u16).collect();
    let choices = vec![Choice::CANDIDATES[5]; 2];
    for level_order in [false, true] {
        assert!(inverse::<f32>(&codes, &f.side, f.num_outliers, &g, q, &choices, level_order).is_ok());
    }
}

fn stage(order: CodeOrder) -> Interpolation {
    let bound = Some(ErrorBound::new(ErrorMode::Abs, 0.01).unwrap());
    Interpolation::new(DType::F32, 512, false, order, Some(8), 1.5, 4.0, bound).unwrap()
}

#[test]
fn level_order_round_trips_through_the_record_and_auto_picks_it_in_3d() {
    let x: Vec<f32> = (0..4 * 10 * 30).map(|i| (i as f32 * 0.1).sin() * 3.0 + (i / 300) as f32).collect();
    for (order, shape, level) in [
        (CodeOrder::Level, &[4, 10, 30][..], true),
        (CodeOrder::Level, &[40, 30], true),
        (CodeOrder::Auto, &[4, 10, 30], true),
        (CodeOrder::Auto, &[1, 40, 30], false),
        (CodeOrder::Natural, &[4, 10, 30], false),
    ] {
        let f = stage(order).forward(vec![Buffer::F32(x.clone())], &ForwardContext { shape }).unwrap();
        let decoded = Interpolation::decode_record(1, &f.record).unwrap();
        assert_eq!(decoded.resolved.as_ref().unwrap().level_order, level, "{order:?} {shape:?}");
        let natural =
            stage(CodeOrder::Natural).forward(vec![Buffer::F32(x.clone())], &ForwardContext { shape }).unwrap();
        let [Buffer::U16(codes), _] = &f.outputs[..] else { unreachable!() };
        let [Buffer::U16(plain), _] = &natural.outputs[..] else { unreachable!() };
        assert_eq!(codes != plain, level, "{order:?} {shape:?}");
        let y = decoded.inverse(f.outputs).unwrap();
        let [Buffer::F32(y)] = &y[..] else { unreachable!() };
        check(&x, y, 0.01);
    }
}

#[test]
fn mutated_records_are_typed_errors() {
    let x: Vec<f32> = (0..300).map(|i| (i as f32 * 0.1).sin()).collect();
    let f = stage(CodeOrder::Natural).forward(vec![Buffer::F32(x)], &ForwardContext { shape: &[10, 30] }).unwrap();
    assert!(Interpolation::decode_record(1, &f.record).is_ok());
    for cut in 0..f.record.len() {
        assert!(Interpolation::decode_record(1, &f.record[..cut]).is_err());
    }
    for i in 0..f.record.len() {
        for bit in 0..8 {
            let mut r = f.record.clone();
            r[i] ^= 1 << bit;
            let _ = Interpolation::decode_record(1, &r); // never panics
        }
    }
    assert!(Interpolation::decode_record(2, &f.record).is_err());
}

/// The choice estimate's cost as first defined: the bit length of the quantizer's own code.
fn cost_by_code<T: Real>(x: T, p: T, recip: T) -> u32 {
    let e = x - p;
    if (e * recip).to_f64().abs().partial_cmp(&f64::from(1u32 << 20)) != Some(std::cmp::Ordering::Less) {
        return 21;
    }
    32 - e.quantize(recip).unsigned_abs().leading_zeros()
}

#[test]
fn point_cost_is_the_bit_length_of_the_code() {
    // Half-integers (where rounding ties and y is an integer), both signs, the 2^20 edge,
    // specials, and a spread of magnitudes.
    let mut ds: Vec<f64> = (-80..=80).map(|k| f64::from(k) * 0.25).collect();
    for m in 0..=21 {
        let v = f64::from(1u32 << m);
        ds.extend([v, v - 0.5, v + 0.5, v - 1.0, v - 1.5, v + 1e-3, v - 1e-3].iter().flat_map(|&v| [v, -v]));
    }
    ds.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1048575.75, -1048575.75, 1048576.5, -1048576.5]);
    for k in 0..20_000u64 {
        let r = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
        ds.push((r - 0.5) * 2f64.powi((k % 46) as i32 - 4));
    }
    for &d in &ds {
        for recip in [1.0, 0.5, 4.0, 3.0] {
            let x = d / recip;
            assert_eq!(point_cost(x, 0.0, recip), cost_by_code(x, 0.0, recip), "f64 d={d} recip={recip}");
            let (x, recip) = (x as f32, recip as f32);
            assert_eq!(point_cost(x, 0.5f32, recip), cost_by_code(x, 0.5f32, recip), "f32 d={d} recip={recip}");
        }
    }
}

/// The choice estimate's costs, x-first points shared with z-first counted once, are the
/// point-wise sums over every candidate's own passes.
#[test]
fn level_costs_are_every_candidates_point_sums() {
    use super::cpu::{level_costs, sampled_blocks};
    use super::walk::{passes, predict, walk};
    for dims in [[1, 1, 37], [3, 5, 7], [9, 17, 33], [1, 40, 1], [5, 1, 6], [2, 70, 131], [17, 20, 24], [19, 26, 13]] {
        for anchor in [2, 4, 8, 16] {
            let g = Geometry { dims, anchor };
            let x: Vec<f32> = (0..g.len()).map(|i| ((i * 7919 % 1013) as f32 * 0.37).sin() * 50.0).collect();
            let blocks: Vec<_> = sampled_blocks(&g).collect();
            for l in 1..=g.levels() {
                let s = 1 << (l - 1);
                let want = Choice::CANDIDATES.map(|c| {
                    let mut sum = 0;
                    for (lo, hi) in sampled_blocks(&g) {
                        for pass in passes(s, c) {
                            walk(&g, &pass, lo, hi, |idx, i| {
                                let p = predict(&g, &x, c.kind, pass.axis, s, idx, i);
                                sum += u64::from(point_cost(x[idx], p, 0.25));
                            });
                        }
                    }
                    sum
                });
                assert_eq!(level_costs(&x, &g, s, 0.25, &blocks), want, "{dims:?} A={anchor} s={s}");
            }
        }
    }
}
