//! AVX2 forms of the narrow-block decode (rates below 16, i32 codes; 32 elements per
//! vector) and of the encode's plane writer (8 magnitudes per vector).
//!
//! Four bytes of a plane (32 elements) are spread so that byte lane i holds bit i of them
//! (a byte shuffle and one compare per plane); the magnitudes build up plane by plane from
//! the top, `acc = 2·acc + bit`, in bytes (planes 0–7 and 8–15 apart), and widen to i32
//! with the sign joined by two's-complement masks. Same values and the same accept / reject
//! decision as `decode_narrow` (tested against it).

use super::cpu::Code;
use std::arch::x86_64::*;

/// Byte `i` of the result is bit `i % 8` of byte `i / 8` of `bytes`, as 0xff or 0.
#[target_feature(enable = "avx2")]
#[inline]
fn bits32(bytes: u32) -> __m256i {
    // Within each 128-bit half, bytes 0–7 take source byte 0 (2 in the upper half), 8–15
    // byte 1 (3): `set1_epi32` repeats all four source bytes in both halves.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    let v = _mm256_shuffle_epi8(_mm256_set1_epi32(bytes as i32), spread);
    _mm256_cmpeq_epi8(_mm256_and_si256(v, select), select)
}

#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Planes `planes` (each `s` bytes apart, most significant last) of 32 elements from byte
/// `k` on, as byte magnitudes.
#[target_feature(enable = "avx2")]
#[inline]
fn gather(planes: &[u8], s: usize, k: usize) -> __m256i {
    let mut acc = _mm256_setzero_si256();
    for plane in planes.chunks_exact(s).rev() {
        // 2·acc + 1 where the bit is set (the compare gives −1).
        acc = _mm256_sub_epi8(_mm256_add_epi8(acc, acc), bits32(word(plane, k)));
    }
    acc
}

/// The four 8-byte quarters of `v`, each in the low half of a 128-bit value.
#[target_feature(enable = "avx2")]
#[inline]
fn quarters(v: __m256i) -> [__m128i; 4] {
    let (a, b) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    [a, _mm_srli_si128::<8>(a), b, _mm_srli_si128::<8>(b)]
}

/// Eight i32 values from byte lanes 8q..8q+8 of the low / high magnitude bytes and the
/// sign mask, with the sign applied: `(m ^ n) − n`.
#[target_feature(enable = "avx2")]
#[inline]
fn join8(low: __m128i, high: __m128i, negative: __m128i) -> __m256i {
    let mag = _mm256_or_si256(_mm256_cvtepu8_epi32(low), _mm256_slli_epi32::<8>(_mm256_cvtepu8_epi32(high)));
    let n = _mm256_cvtepi8_epi32(negative);
    _mm256_sub_epi32(_mm256_xor_si256(mag, n), n)
}

/// Decode one full narrow block (`out.len() == 8 · s`, `s` a multiple of 4, `rate < 16`) as
/// `decode_narrow` does; whether every value is canonical and fits.
#[target_feature(enable = "avx2")]
pub(super) fn decode_narrow(
    sign_region: &[u8],
    planes: &[u8],
    rate: usize,
    outlier: Option<u32>,
    out: &mut [i32],
) -> bool {
    let s = sign_region.len();
    debug_assert!(s.is_multiple_of(4) && out.len() == 8 * s && rate < 16);
    let (low, high) = planes[..rate * s].split_at(rate.min(8) * s);
    let mut bad = _mm256_setzero_si256();
    for (k, out) in (0..s).step_by(4).zip(out.chunks_exact_mut(32)) {
        let mut signs = word(sign_region, k);
        if k == 0 && outlier.is_some() {
            // Element 0's sign is joined below with its raw magnitude.
            signs &= !1;
        }
        let negative = bits32(signs);
        let (lo, hi) = (gather(low, s, k), gather(high, s, k));
        let zero = _mm256_cmpeq_epi8(_mm256_or_si256(lo, hi), _mm256_setzero_si256());
        bad = _mm256_or_si256(bad, _mm256_and_si256(negative, zero));
        let (lo, hi, negative) = (quarters(lo), quarters(hi), quarters(negative));
        for (q, out) in out.chunks_exact_mut(8).enumerate() {
            let v = join8(lo[q], hi[q], negative[q]);
            // SAFETY: `out` is 8 i32 = 32 bytes; unaligned store.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
        }
    }
    let mut ok = _mm256_testz_si256(bad, bad) == 1;
    if let Some(m) = outlier {
        let negative = sign_region[0] & 1 == 1;
        out[0] = i32::join_wrapping(negative, m);
        ok &= i32::fits(negative, m) & !(negative & (m == 0));
    }
    ok
}

/// The planes of whole 8-element groups of `mags` (`rate` planes, each `s` bytes): byte `k`
/// of plane `p` is the sign bits (movemask) of group `k`'s magnitudes shifted left by 31 − p.
/// The same bytes as `cpu::write_planes_from` (tested against it).
#[target_feature(enable = "avx2")]
pub fn write_planes(mags: &[u32], rate: usize, s: usize, planes: &mut [u8]) {
    for (k, group) in mags.chunks_exact(8).enumerate() {
        // SAFETY: `group` holds 8 u32, the 32 bytes read (unaligned load).
        let v = unsafe { _mm256_loadu_si256(group.as_ptr().cast()) };
        for p in 0..rate {
            let top = _mm256_sll_epi32(v, _mm_cvtsi32_si128(31 - p as i32));
            planes[p * s + k] = _mm256_movemask_ps(_mm256_castsi256_ps(top)) as u8;
        }
    }
}
