//! Quality metrics of a reconstruction: max abs error, PSNR, NRMSE (decimal conventions of
//! SDRBench: range = max − min of the finite original values).

use crate::element::Buffer;
use crate::error::{Error, Result};

/// Distortion of `decoded` against `original`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    pub value_min: f64,
    pub value_max: f64,
    pub max_abs_error: f64,
    /// Index of the first element reaching `max_abs_error`.
    pub max_error_index: usize,
    pub mse: f64,
    /// ∞ when the reconstruction is exact.
    pub psnr_db: f64,
    pub nrmse: f64,
    /// NaN/±Inf originals whose bits did not come back identical (must be 0).
    pub special_mismatches: usize,
}

impl Quality {
    pub fn value_range(&self) -> f64 {
        if self.value_max >= self.value_min {
            self.value_max - self.value_min
        } else {
            0.0
        }
    }
}

trait Sample: Copy {
    fn value(self) -> f64;
    fn bits(self) -> u64;
}
impl Sample for f32 {
    fn value(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Sample for f64 {
    fn value(self) -> f64 {
        self
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// Elements of one part of [`measure`]'s walk: fixed, so that the sums (and so MSE and PSNR)
/// are the same for any thread count.
const PART: usize = 1 << 16;

/// One part's extremes, largest error (its first index) and sums.
#[derive(Clone, Copy)]
struct Part {
    min: f64,
    max: f64,
    max_err: f64,
    max_err_index: usize,
    sum_sq: f64,
    finite: usize,
    special_mismatches: usize,
}

fn measure_part<T: Sample>(first: usize, a: &[T], b: &[T]) -> Part {
    let mut p = Part {
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        max_err: 0.0,
        max_err_index: 0,
        sum_sq: 0.0,
        finite: 0,
        special_mismatches: 0,
    };
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let (xv, yv) = (x.value(), y.value());
        if !xv.is_finite() {
            p.special_mismatches += usize::from(x.bits() != y.bits());
            continue;
        }
        p.min = p.min.min(xv);
        p.max = p.max.max(xv);
        let err = if yv.is_finite() { (xv - yv).abs() } else { f64::INFINITY };
        if err > p.max_err {
            p.max_err = err;
            p.max_err_index = first + i;
        }
        p.sum_sq += err * err;
        p.finite += 1;
    }
    p
}

/// The parts on every core, then joined in order (a one-core walk was the serial tail of a
/// large `fzmod roundtrip` or `bench`).
fn measure<T: Sample + Sync>(a: &[T], b: &[T]) -> Quality {
    use rayon::prelude::*;
    let parts: Vec<Part> = a
        .par_chunks(PART)
        .zip(b.par_chunks(PART))
        .enumerate()
        .map(|(k, (a, b))| measure_part(k * PART, a, b))
        .collect();
    let mut q = Quality {
        value_min: f64::INFINITY,
        value_max: f64::NEG_INFINITY,
        max_abs_error: 0.0,
        max_error_index: 0,
        mse: 0.0,
        psnr_db: f64::INFINITY,
        nrmse: 0.0,
        special_mismatches: 0,
    };
    let (mut sum_sq, mut finite) = (0.0f64, 0usize);
    for p in parts {
        q.value_min = q.value_min.min(p.min);
        q.value_max = q.value_max.max(p.max);
        if p.max_err > q.max_abs_error {
            q.max_abs_error = p.max_err;
            q.max_error_index = p.max_err_index;
        }
        q.special_mismatches += p.special_mismatches;
        sum_sq += p.sum_sq;
        finite += p.finite;
    }
    q.mse = if finite > 0 { sum_sq / finite as f64 } else { 0.0 };
    let range = q.value_range();
    if q.mse > 0.0 {
        q.psnr_db = if range > 0.0 { 20.0 * range.log10() - 10.0 * q.mse.log10() } else { 0.0 };
        q.nrmse = if range > 0.0 { q.mse.sqrt() / range } else { f64::INFINITY };
    }
    q
}

/// Compare two buffers of the same float type and length.
pub fn compare(original: &Buffer, decoded: &Buffer) -> Result<Quality> {
    match (original, decoded) {
        (Buffer::F32(a), Buffer::F32(b)) if a.len() == b.len() => Ok(measure(a, b)),
        (Buffer::F64(a), Buffer::F64(b)) if a.len() == b.len() => Ok(measure(a, b)),
        _ => Err(Error::InvalidArgument(format!(
            "cannot compare {} {} elements with {} {} elements",
            original.len(),
            original.dtype(),
            decoded.len(),
            decoded.dtype()
        ))),
    }
}

/// Bytes in the units people read (`1.50 GiB`), for limits and needs in messages.
pub fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let q = compare(&Buffer::F32(vec![0.0, 10.0, f32::NAN]), &Buffer::F32(vec![1.0, 10.0, f32::NAN])).unwrap();
        assert_eq!(q.max_abs_error, 1.0);
        assert_eq!(q.max_error_index, 0);
        assert_eq!(q.mse, 0.5);
        assert!((q.psnr_db - (20.0 - 10.0 * 0.5f64.log10())).abs() < 1e-12);
        assert_eq!(q.special_mismatches, 0);
        let bad = compare(&Buffer::F32(vec![f32::INFINITY]), &Buffer::F32(vec![0.0])).unwrap();
        assert_eq!(bad.special_mismatches, 1);
    }

    /// Across parts: the first index of the largest error, specials and extremes of every
    /// part, and the same sums whatever the thread count.
    #[test]
    fn parts_join_in_order() {
        let n = 3 * PART + 17;
        let a: Vec<f64> = (0..n).map(|i| (i % 1000) as f64).collect();
        let mut b = a.clone();
        for i in [PART + 5, 2 * PART + 9, 3 * PART + 3] {
            b[i] += 2.0;
        }
        b[7] += 1.0;
        let (mut a2, b2) = (a.clone(), b.clone());
        a2[n - 1] = f64::NAN;
        let q = compare(&Buffer::F64(a2), &Buffer::F64(b2)).unwrap();
        assert_eq!((q.max_abs_error, q.max_error_index, q.special_mismatches), (2.0, PART + 5, 1));
        assert_eq!((q.value_min, q.value_max), (0.0, 999.0));
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let serial = one.install(|| compare(&Buffer::F64(a.clone()), &Buffer::F64(b.clone())).unwrap());
        assert_eq!(serial, compare(&Buffer::F64(a), &Buffer::F64(b)).unwrap());
    }
}
