//! Inclusive prefix sums of 32-bit words (wrapping), shared by the inverses that sum along
//! lines: the Difference's chunks and LorenzoQuant's tile rows.

/// Inclusive sums of 8 lanes per step on AVX2: log-steps inside each 128-bit half, the low
/// half's total into the high half, the running total into all. Wrapping sums reassociate
/// exactly, so the words are the scalar loop's.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    /// `c[i] = undo(c[0]) + … + undo(c[i])`, where `undo8` is `undo` on 8 lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn scan(c: &mut [u32], undo8: impl Fn(__m256i) -> __m256i, undo: impl Fn(u32) -> u32) {
        let last = _mm256_set1_epi32(7);
        let mut total = _mm256_setzero_si256();
        let (eights, rest) = c.as_chunks_mut::<8>();
        for e in eights {
            // SAFETY: 8 u32 = 32 bytes; unaligned load.
            let mut x = undo8(unsafe { _mm256_loadu_si256(e.as_ptr().cast()) });
            x = _mm256_add_epi32(x, _mm256_slli_si256::<4>(x));
            x = _mm256_add_epi32(x, _mm256_slli_si256::<8>(x));
            // Lane 3's sum (the low half's total) into the high half only.
            let low_total = _mm256_permute2x128_si256::<0x08>(_mm256_shuffle_epi32::<0xff>(x), x);
            x = _mm256_add_epi32(_mm256_add_epi32(x, low_total), total);
            // SAFETY: as the load.
            unsafe { _mm256_storeu_si256(e.as_mut_ptr().cast(), x) };
            total = _mm256_permutevar8x32_epi32(x, last);
        }
        let mut acc = _mm256_cvtsi256_si32(total) as u32;
        for v in rest {
            acc = acc.wrapping_add(undo(*v));
            *v = acc;
        }
    }
}
