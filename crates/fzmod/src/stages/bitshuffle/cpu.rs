//! CPU reference of Bitshuffle. A block body of `m` elements (m a multiple of 8) of `width`
//! bytes becomes `8·width` planes of `m/8` bytes: plane `P = 8b + i` holds bit `i` of byte `b`
//! of every element, bit `j` of plane byte `k` from element `8k + j` (what a warp ballot over
//! 8-element groups gives). The per-group step is one 8×8 bit transpose.

use crate::element::zeroed_vec;
use crate::stages::bit_transpose::{transpose32, transpose32_lanes, transpose8};
use rayon::prelude::*;

/// Bytes of a block that are transposed; the rest (< 8·width bytes) is copied.
pub fn body_len(block_len: usize, width: usize) -> usize {
    block_len / (8 * width) * (8 * width)
}

/// 32-element groups transposed together by [`transpose32_lanes`] (one SIMD lane each).
const LANES: usize = 8;

/// Transpose one block (`inverse = false`) or undo it; `out` has the block's length. On AVX2
/// the lane-batched transposes take one vector per row of 8 lanes (two on SSE2).
pub fn block(inp: &[u8], width: usize, inverse: bool, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { block_avx2(inp, width, inverse, out) };
    }
    block_inline(inp, width, inverse, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn block_avx2(inp: &[u8], width: usize, inverse: bool, out: &mut [u8]) {
    block_inline(inp, width, inverse, out)
}

#[inline(always)]
fn block_inline(inp: &[u8], width: usize, inverse: bool, out: &mut [u8]) {
    let body = body_len(inp.len(), width);
    let plane_len = body / (8 * width);
    // 4-byte elements, 32 at a time: one 32×32 transpose yields 4 bytes of each of 32 planes.
    let wide = if width == 4 { plane_len / 4 } else { 0 };
    let batched = wide / LANES * LANES;
    // 2-byte elements, 64 at a time (8 bytes of each of 16 planes), `LANES` transposes at once.
    let pairs = if width == 2 { plane_len / 8 / LANES * LANES } else { 0 };
    for g in (0..pairs).step_by(LANES) {
        if inverse {
            planes_to_halves(&inp[..body], plane_len, g, &mut out[128 * g..128 * (g + LANES)]);
        } else {
            halves_to_planes(&inp[128 * g..128 * (g + LANES)], plane_len, g, &mut out[..body]);
        }
    }
    for g in (0..batched).step_by(LANES) {
        if inverse {
            planes_to_words(&inp[..body], plane_len, g, &mut out[128 * g..128 * (g + LANES)]);
        } else {
            words_to_planes(&inp[128 * g..128 * (g + LANES)], plane_len, g, &mut out[..body]);
        }
    }
    for g in batched..wide {
        let elem = |j: usize| (32 * g + j) * 4;
        let plane = |p: usize| p * plane_len + 4 * g;
        if inverse {
            words32(inp, plane, out, elem);
        } else {
            words32(inp, elem, out, plane);
        }
    }
    // Groups of 8 elements: one 8×8 transpose per byte of the element.
    for k in 4 * wide + 8 * pairs..plane_len {
        for b in 0..width {
            // Byte j of group k in element order ↔ byte k of plane 8b + j.
            let elem = |j: usize| (8 * k + j) * width + b;
            let plane = |i: usize| (8 * b + i) * plane_len + k;
            if inverse {
                group(inp, plane, out, elem);
            } else {
                group(inp, elem, out, plane);
            }
        }
    }
    out[body..].copy_from_slice(&inp[body..]);
}

/// `LANES` groups of 32 words from `words` (their `128 · LANES` bytes, groups `g..`) into the
/// 32 planes of `planes`: a plane's bytes for consecutive groups are contiguous, so each
/// plane takes one `4 · LANES`-byte run.
#[inline(always)]
fn words_to_planes(words: &[u8], plane_len: usize, g: usize, planes: &mut [u8]) {
    let mut a = [[0u32; LANES]; 32];
    for (l, group) in words.chunks_exact(128).enumerate() {
        for (j, w) in group.chunks_exact(4).enumerate() {
            a[j][l] = u32::from_le_bytes(w.try_into().expect("4 bytes"));
        }
    }
    transpose32_lanes(&mut a);
    for (row, plane) in a.iter().zip(planes.chunks_exact_mut(plane_len)) {
        for (v, o) in row.iter().zip(plane[4 * g..4 * (g + LANES)].chunks_exact_mut(4)) {
            o.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Inverse of [`words_to_planes`].
#[inline(always)]
fn planes_to_words(planes: &[u8], plane_len: usize, g: usize, words: &mut [u8]) {
    let mut a = [[0u32; LANES]; 32];
    for (row, plane) in a.iter_mut().zip(planes.chunks_exact(plane_len)) {
        for (v, w) in row.iter_mut().zip(plane[4 * g..4 * (g + LANES)].chunks_exact(4)) {
            *v = u32::from_le_bytes(w.try_into().expect("4 bytes"));
        }
    }
    transpose32_lanes(&mut a);
    for (l, group) in words.chunks_exact_mut(128).enumerate() {
        for (j, w) in group.chunks_exact_mut(4).enumerate() {
            w.copy_from_slice(&a[j][l].to_le_bytes());
        }
    }
}

/// `LANES` runs of 64 two-byte elements from `halves` (their `128 · LANES` bytes, runs `g..`)
/// into the 16 planes of `planes`, one 32×32 transpose per run: element `j` of its first 32 in
/// the low half of row `j`, element `32 + j` in the high half, so that row `i` becomes plane
/// `i`'s 4 bytes for the first 32 and row `16 + i` its 4 bytes for the next 32.
#[inline(always)]
fn halves_to_planes(halves: &[u8], plane_len: usize, g: usize, planes: &mut [u8]) {
    let half = |b: &[u8], j: usize| u32::from(u16::from_le_bytes([b[2 * j], b[2 * j + 1]]));
    let mut a = [[0u32; LANES]; 32];
    for (l, run) in halves.chunks_exact(128).enumerate() {
        for (j, row) in a.iter_mut().enumerate() {
            row[l] = half(run, j) | half(run, 32 + j) << 16;
        }
    }
    transpose32_lanes(&mut a);
    for (i, plane) in planes.chunks_exact_mut(plane_len).enumerate() {
        for (l, o) in plane[8 * g..8 * (g + LANES)].chunks_exact_mut(8).enumerate() {
            o[..4].copy_from_slice(&a[i][l].to_le_bytes());
            o[4..].copy_from_slice(&a[16 + i][l].to_le_bytes());
        }
    }
}

/// Inverse of [`halves_to_planes`].
#[inline(always)]
fn planes_to_halves(planes: &[u8], plane_len: usize, g: usize, halves: &mut [u8]) {
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let mut a = [[0u32; LANES]; 32];
    for (i, plane) in planes.chunks_exact(plane_len).enumerate() {
        for (l, b) in plane[8 * g..8 * (g + LANES)].chunks_exact(8).enumerate() {
            a[i][l] = word(&b[..4]);
            a[16 + i][l] = word(&b[4..]);
        }
    }
    transpose32_lanes(&mut a);
    for (l, run) in halves.chunks_exact_mut(128).enumerate() {
        for (j, row) in a.iter().enumerate() {
            run[2 * j..2 * j + 2].copy_from_slice(&(row[l] as u16).to_le_bytes());
            run[64 + 2 * j..64 + 2 * j + 2].copy_from_slice(&((row[l] >> 16) as u16).to_le_bytes());
        }
    }
}

/// Gather 32 LE words, transpose their bits, scatter them.
#[inline]
fn words32(inp: &[u8], from: impl Fn(usize) -> usize, out: &mut [u8], to: impl Fn(usize) -> usize) {
    let mut a: [u32; 32] =
        std::array::from_fn(|i| u32::from_le_bytes(inp[from(i)..from(i) + 4].try_into().expect("4 bytes")));
    transpose32(&mut a);
    for (i, v) in a.iter().enumerate() {
        out[to(i)..to(i) + 4].copy_from_slice(&v.to_le_bytes());
    }
}

/// Gather 8 bytes, transpose their bits, scatter them.
#[inline]
fn group(inp: &[u8], from: impl Fn(usize) -> usize, out: &mut [u8], to: impl Fn(usize) -> usize) {
    let x = (0..8).fold(0u64, |x, j| x | u64::from(inp[from(j)]) << (8 * j));
    let t = transpose8(x);
    for i in 0..8 {
        out[to(i)] = (t >> (8 * i)) as u8;
    }
}

/// Every block of `block_bytes` (the last may be shorter), in parallel, into `out` (as long
/// as `data`; the inverse writes straight into the typed buffer the next stage reads).
pub fn run_into(data: &[u8], width: usize, block_bytes: usize, inverse: bool, out: &mut [u8]) {
    out.par_chunks_mut(block_bytes).zip(data.par_chunks(block_bytes)).for_each(|(o, i)| block(i, width, inverse, o));
}

/// [`run_into`] a fresh vector.
pub fn run(data: &[u8], width: usize, block_bytes: usize, inverse: bool) -> Vec<u8> {
    let mut out = zeroed_vec(data.len());
    run_into(data, width, block_bytes, inverse, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn planes_hold_one_bit_of_every_element() {
        // 16 u32 elements; element e = e → plane 0 (bit 0 of byte 0) = 0b10101010 per byte.
        let data: Vec<u8> = (0u32..16).flat_map(|e| e.to_le_bytes()).collect();
        let s = run(&data, 4, 64, false);
        assert_eq!(&s[..2], &[0xaa, 0xaa], "plane 0: odd elements");
        assert_eq!(&s[2..4], &[0xcc, 0xcc], "plane 1");
        assert_eq!(&s[6..8], &[0x00, 0xff], "plane 3: elements 8..16");
        assert!(s[8..].iter().all(|&b| b == 0));
    }

    proptest! {
        /// Every width and path (32-word transposes, 8-element groups, tail) against the definition.
        #[test]
        fn output_bits_follow_the_definition(data in prop::collection::vec(any::<u8>(), 0..700), w in 0usize..4) {
            let width = 1 << w;
            let s = run(&data, width, data.len().max(1).next_multiple_of(8 * width), false);
            let body = body_len(data.len(), width);
            let plane_len = body / (8 * width);
            for e in 0..body / width {
                for bit in 0..8 * width {
                    let expected = data[e * width + bit / 8] >> (bit % 8) & 1;
                    prop_assert_eq!(s[bit * plane_len + e / 8] >> (e % 8) & 1, expected);
                }
            }
            prop_assert_eq!(&s[body..], &data[body..]);
        }

        /// Blocks long enough for the lane-batched 32×32 transposes (width 4, ≥ 8 groups of 32;
        /// width 2, ≥ 8 runs of 64) against the definition, with an unbatched remainder and a tail.
        #[test]
        fn batched_groups_follow_the_definition(data in prop::collection::vec(any::<u8>(), 1024..9000), w in 1usize..3) {
            let width = 1 << w;
            let s = run(&data, width, 16384, false);
            let plane_len = body_len(data.len(), width) / (8 * width);
            for e in 0..8 * plane_len {
                for bit in 0..8 * width {
                    let expected = data[e * width + bit / 8] >> (bit % 8) & 1;
                    prop_assert_eq!(s[bit * plane_len + e / 8] >> (e % 8) & 1, expected);
                }
            }
            prop_assert_eq!(run(&s, width, 16384, true), data);
        }

        #[test]
        fn round_trip(data in prop::collection::vec(any::<u8>(), 0..5000), w in 0usize..4, blocks in 1usize..20) {
            let width = 1 << w;
            let block_bytes = 8 * width * blocks;
            let s = run(&data, width, block_bytes, false);
            prop_assert_eq!(run(&s, width, block_bytes, true), data);
        }
    }
}
