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
