//! Bit-matrix transposes shared by the bit-plane stages (Bitshuffle, BitplaneRZE): pure
//! functions, one per tile of bits, as a CUDA port computes them with ballots or shuffles.

/// 32×32 bit-matrix transpose in place: afterwards bit `j` of `a[i]` is the old bit `i` of `a[j]`
/// (swap the off-diagonal halves, then quarters, …; Hacker's Delight §7-3).
#[inline]
pub fn transpose32(a: &mut [u32; 32]) {
    let mut j = 16;
    let mut m: u32 = 0x0000_ffff;
    while j != 0 {
        let mut k = 0;
        while k < 32 {
            let t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k] ^= t << j;
            a[k + j] ^= t;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

/// [`transpose32`] of `L` independent matrices at once, matrix `l` in lane `l` of every row:
/// the same steps on `[u32; L]` rows compile to SIMD operations over the lanes (inlined
/// always, so that a caller's target features, AVX2, apply to them).
#[inline(always)]
pub fn transpose32_lanes<const L: usize>(a: &mut [[u32; L]; 32]) {
    let mut j = 16;
    let mut m: u32 = 0x0000_ffff;
    while j != 0 {
        let mut k = 0;
        while k < 32 {
            let (lo, hi) = a.split_at_mut(k + j);
            let (x, y) = (&mut lo[k], &mut hi[0]);
            for l in 0..L {
                let t = ((x[l] >> j) ^ y[l]) & m;
                x[l] ^= t << j;
                y[l] ^= t;
            }
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

/// [`transpose32`] on AVX2, into a new matrix, by byte movemasks: byte `k` of the 32 rows
/// gathered into one vector (a byte shuffle of each 8 rows into its own 32-bit groups, or-ed,
/// the groups then put in row order), whose bit `b` in every byte is column 8k + b: one
/// movemask per column, from bit 7 down, each byte doubled in between.
///
/// # Safety
/// The CPU must have AVX2 (callers check `is_x86_feature_detected!("avx2")`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub fn transpose32_avx2(a: &[u32; 32]) -> [u32; 32] {
    use std::arch::x86_64::*;
    /// For byte k and rows 8j..8j+8: each 128-bit lane's 4 rows' byte k into 32-bit group j.
    const GATHER: [[[i8; 32]; 4]; 4] = {
        let mut t = [[[-128i8; 32]; 4]; 4];
        let mut k = 0;
        while k < 4 {
            let mut j = 0;
            while j < 4 {
                let mut at = 0;
                while at < 8 {
                    let (lane, w) = (at / 4, at % 4);
                    t[k][j][16 * lane + 4 * j + w] = (4 * w + k) as i8;
                    at += 1;
                }
                j += 1;
            }
            k += 1;
        }
        t
    };
    // SAFETY: each load reads 8 of the 32 rows.
    let rows: [__m256i; 4] = std::array::from_fn(|j| unsafe { _mm256_loadu_si256(a.as_ptr().add(8 * j).cast()) });
    // The groups after the or: rows 0-3, 8-11, 16-19, 24-27 in the low lane, the others high.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let mut out = [0u32; 32];
    for (k, gather) in GATHER.iter().enumerate() {
        let mut bytes = _mm256_setzero_si256();
        for (&r, g) in rows.iter().zip(gather) {
            // SAFETY: 32 bytes of the table.
            let g = unsafe { _mm256_loadu_si256(g.as_ptr().cast()) };
            bytes = _mm256_or_si256(bytes, _mm256_shuffle_epi8(r, g));
        }
        bytes = _mm256_permutevar8x32_epi32(bytes, order);
        for b in (0..8).rev() {
            out[8 * k + b] = _mm256_movemask_epi8(bytes) as u32;
            bytes = _mm256_add_epi8(bytes, bytes);
        }
    }
    out
}

/// 8×8 bit transpose of the rows `byte 0..8` of `x`: afterwards bit `c` of byte `r` is the old
/// bit `r` of byte `c` (Hacker's Delight §7-3). An involution.
#[inline]
pub fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00aa_00aa_00aa_00aa;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_cccc_0000_cccc;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_f0f0_f0f0;
    x ^ t ^ (t << 28)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose32_matches_the_definition() {
        let a: [u32; 32] = std::array::from_fn(|i| (i as u32).wrapping_mul(0x9e37_79b9) ^ 0x1234_5678);
        let mut t = a;
        transpose32(&mut t);
        for (i, row) in t.iter().enumerate() {
            for (j, col) in a.iter().enumerate() {
                assert_eq!(row >> j & 1, col >> i & 1, "({i}, {j})");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_transpose_is_the_portable_one() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..200 {
            let a: [u32; 32] = std::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Sparse rows too (the codes' high planes are mostly zero).
                if round % 3 == 0 {
                    (state as u32) & (state >> 32) as u32
                } else {
                    state as u32
                }
            });
            let mut want = a;
            transpose32(&mut want);
            // SAFETY: the CPU has AVX2.
            assert_eq!(unsafe { transpose32_avx2(&a) }, want, "round {round}");
        }
    }

    #[test]
    fn lanes_transpose_each_matrix() {
        let a: [[u32; 8]; 32] = std::array::from_fn(|i| {
            std::array::from_fn(|l| ((i * 8 + l) as u32).wrapping_mul(0x9e37_79b9) ^ 0xa5a5_0f0f)
        });
        let mut t = a;
        transpose32_lanes(&mut t);
        for l in 0..8 {
            let mut one: [u32; 32] = std::array::from_fn(|i| a[i][l]);
            transpose32(&mut one);
            assert!((0..32).all(|i| t[i][l] == one[i]), "lane {l}");
        }
    }

    proptest::proptest! {
        #[test]
        fn transpose8_matches_the_definition(x in proptest::prelude::any::<u64>()) {
            let t = transpose8(x);
            for r in 0..8 {
                for c in 0..8 {
                    proptest::prop_assert_eq!(t >> (8 * r + c) & 1, x >> (8 * c + r) & 1);
                }
            }
        }
    }
}
