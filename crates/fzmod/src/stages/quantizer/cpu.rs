//! CPU reference of the quantizer. The CUDA kernel must reproduce these bits exactly:
//! one multiply, cuSZp's rounding, reconstruction `(q · step) · 2` in the element type,
//! and the bound check in f64.

use crate::archive::{Reader, Writer};
use crate::error::{corrupt, Result};
use rayon::prelude::*;

/// Elements per parallel work item; fixed so the output never depends on the thread count.
const CHUNK: usize = 1 << 16;

/// The floating-point element types the quantizer accepts.
pub(crate) trait Float: Copy + Send + Sync + PartialOrd + 'static {
    const ZERO: Self;
    fn to_f64(self) -> f64;
    /// Largest value of this type that is ≤ `v` (v ≥ 0), saturating at the type's maximum.
    fn at_most(v: f64) -> Self;
    fn is_finite(self) -> bool;
    /// 0.5 / step, in this type.
    fn half_recip(step: Self) -> Self;
    /// cuSZp's rounding of `x · recip` to a signed code (ALGORITHMS.md §1.1).
    fn quantize(self, recip: Self) -> i32;
    /// `(q · step) · 2`, evaluated in this type without contraction.
    fn reconstruct(q: i32, step: Self) -> Self;
    /// The raw bits, zero-extended.
    fn bits(self) -> u64;
    fn read_le(r: &mut Reader) -> Result<Self>;
}

macro_rules! impl_float {
    ($t:ty, $bytes:expr) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn at_most(v: f64) -> Self {
                let c = (v as $t).min(<$t>::MAX);
                if (c as f64) > v {
                    c.next_down()
                } else {
                    c
                }
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            fn half_recip(step: Self) -> Self {
                0.5 / step
            }
            #[inline]
            fn quantize(self, recip: Self) -> i32 {
                let d = self * recip;
                let t = (d + 0.5).trunc() as i32;
                if d >= -0.5 {
                    t
                } else {
                    t.wrapping_sub(1)
                }
            }
            #[inline]
            fn reconstruct(q: i32, step: Self) -> Self {
                (q as $t * step) * 2.0
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn read_le(r: &mut Reader) -> Result<Self> {
                let b = r.take($bytes)?;
                Ok(<$t>::from_le_bytes(b.try_into().expect("element size")))
            }
        }
    };
}
impl_float!(f32, 4);
impl_float!(f64, 8);

/// max − min over the finite values (0 when there are none), in f64.
pub(crate) fn finite_range<T: Float>(x: &[T]) -> f64 {
    let (lo, hi) = x
        .par_chunks(CHUNK)
        .map(|c| {
            c.iter()
                .filter(|v| v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v.to_f64()), hi.max(v.to_f64())))
        })
        .reduce(|| (f64::INFINITY, f64::NEG_INFINITY), |a, b| (a.0.min(b.0), a.1.max(b.1)));
    if lo <= hi {
        hi - lo
    } else {
        0.0
    }
}

/// Output of [`quantize`].
pub(crate) struct Quantized<T> {
    pub codes: Vec<i32>,
    /// Outlier channel bytes: per outlier, a varint index gap then the raw value (LE).
    pub outliers: Vec<u8>,
    pub num_outliers: u64,
    pub step: T,
}

/// Quantize with the strict-bound check; failures become code 0 plus an outlier entry.
pub(crate) fn quantize<T: Float>(x: &[T], abs_bound: f64) -> Quantized<T> {
    let step = T::at_most(abs_bound);
    let recip = T::half_recip(step);
    let mut codes = vec![0i32; x.len()];
    let per_chunk: Vec<Vec<(usize, T)>> = codes
        .par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .enumerate()
        .map(|(chunk, (codes, x))| {
            let base = chunk * CHUNK;
            let mut outliers = Vec::new();
            for (i, (c, &v)) in codes.iter_mut().zip(x).enumerate() {
                let q = v.quantize(recip);
                let err = (v.to_f64() - T::reconstruct(q, step).to_f64()).abs();
                if v.is_finite() && err <= abs_bound {
                    *c = q;
                } else {
                    outliers.push((base + i, v));
                }
            }
            outliers
        })
        .collect();
    let list: Vec<(u64, u64)> = per_chunk.into_iter().flatten().map(|(i, v)| (i as u64, v.bits())).collect();
    Quantized {
        codes,
        outliers: encode_outliers(&list, std::mem::size_of::<T>()),
        num_outliers: list.len() as u64,
        step,
    }
}

/// The outlier channel: per outlier, in index order, the varint gap from the previous
/// outlier's index + 1, then the raw value's `value_bytes` little-endian bytes.
pub(crate) fn encode_outliers(sorted: &[(u64, u64)], value_bytes: usize) -> Vec<u8> {
    let mut w = Writer::default();
    let mut next = 0u64;
    for &(index, bits) in sorted {
        w.varint(index - next);
        w.bytes.extend_from_slice(&bits.to_le_bytes()[..value_bytes]);
        next = index + 1;
    }
    w.bytes
}

/// Inverse: reconstruct every code, then put the outliers back bit for bit.
pub(crate) fn reconstruct<T: Float>(codes: &[i32], step: T, outliers: &[u8], num_outliers: u64) -> Result<Vec<T>> {
    let mut out = vec![T::ZERO; codes.len()];
    out.par_chunks_mut(CHUNK).zip(codes.par_chunks(CHUNK)).for_each(|(o, c)| {
        for (o, &q) in o.iter_mut().zip(c) {
            *o = T::reconstruct(q, step);
        }
    });
    for (index, value) in parse_outliers(outliers, num_outliers, codes.len())? {
        out[index] = value;
    }
    Ok(out)
}

/// Decode the outlier channel into (index, value) pairs, every index checked against `n`.
pub(crate) fn parse_outliers<T: Float>(bytes: &[u8], count: u64, n: usize) -> Result<Vec<(usize, T)>> {
    let mut r = Reader::new(bytes, "Quantizer outlier channel");
    // Each entry takes at least one byte: never reserve more than the channel can hold.
    let mut list = Vec::with_capacity((count as usize).min(bytes.len()));
    let mut next = 0u64;
    for k in 0..count {
        let index = r.varint()?.checked_add(next).filter(|&i| i < n as u64);
        let index = index.ok_or_else(|| corrupt!("outlier {k} lies outside {n} elements"))?;
        list.push((index as usize, T::read_le(&mut r)?));
        next = index + 1;
    }
    r.finish()?;
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_matches_cuszp_definition() {
        // trunc(d + 0.5) − (d >= −0.5 ? 0 : 1), ALGORITHMS.md §1.1.
        assert_eq!(1.49f32.quantize(1.0), 1);
        assert_eq!(1.5f32.quantize(1.0), 2);
        assert_eq!((-0.5f32).quantize(1.0), 0);
        assert_eq!((-0.51f32).quantize(1.0), -1);
        assert_eq!((-1.5f32).quantize(1.0), -2); // d + 0.5 = −1 exactly: one lower
        assert_eq!(f32::NAN.quantize(1.0), -1);
    }

    #[test]
    fn step_never_exceeds_the_bound() {
        for b in [1e-3, 0.1, 1.0 / 3.0, 7.7e-30, 1e300] {
            assert!(f32::at_most(b) as f64 <= b);
            assert!(f64::at_most(b) <= b);
        }
    }

    #[test]
    fn special_values_go_to_the_outlier_channel_bit_exact() {
        let nan = f32::from_bits(0x7fc0_1234);
        let x = [1.0f32, nan, f32::INFINITY, -f32::INFINITY, 3.0e38, -2.5];
        let q = quantize(&x, 1e-3);
        assert_eq!(q.num_outliers, 4);
        let y = reconstruct(&q.codes, q.step, &q.outliers, q.num_outliers).unwrap();
        for (a, b) in x.iter().zip(&y) {
            if a.is_finite() && a.abs() < 1e30 {
                assert!((a - b).abs() as f64 <= 1e-3);
            } else {
                assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }

    #[test]
    fn truncated_outlier_channel_is_an_error() {
        let q = quantize(&[f64::NAN, 1.0, f64::INFINITY], 0.5);
        for cut in 0..q.outliers.len() {
            assert!(reconstruct(&q.codes, q.step, &q.outliers[..cut], q.num_outliers).is_err());
        }
    }
}
