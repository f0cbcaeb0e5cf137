//! CPU reference of Difference: `out[i] = map(w[i] − w[i−1])`, with `w[−1] = 0` at the start
//! of every chunk (wrapping), and its chunked prefix-sum inverse.

use super::OutputMap;
use crate::stages::words::Word;
use rayon::prelude::*;

/// Elements per parallel work item when chunks are large or absent.
const TASK_ELEMS: usize = 1 << 16;

/// The difference at element `i` of a chunk, mapped (pure, one element).
#[inline]
pub fn delta<W: Word>(current: W, previous: W, map: OutputMap) -> W {
    map.apply(current.wrapping_sub(previous))
}

/// Forward over words, in place (the stage owns its input: a fresh output buffer would cost
/// its page clearing); `chunk` = elements per chunk (0 = the whole array is one chunk).
pub fn forward<W: Word>(w: &mut [W], chunk: usize, map: OutputMap) {
    let chunk = if chunk == 0 { w.len().max(1) } else { chunk };
    // The word before each task's first element, read before any task overwrites it.
    let before: Vec<W> = (0..w.len().div_ceil(TASK_ELEMS))
        .map(|t| {
            let i = t * TASK_ELEMS;
            if i.is_multiple_of(chunk) {
                W::default()
            } else {
                w[i - 1]
            }
        })
        .collect();
    w.par_chunks_mut(TASK_ELEMS).zip(before).enumerate().for_each(|(task, (w, mut previous))| {
        // Runs that stay inside one chunk (no index arithmetic per element); each run after
        // the first starts a chunk, whose predecessor is 0.
        let first = (chunk - task * TASK_ELEMS % chunk).min(w.len());
        let (head, rest) = w.split_at_mut(first);
        for run in std::iter::once(head).chain(rest.chunks_mut(chunk)) {
            for v in run {
                let current = *v;
                *v = delta(current, previous, map);
                previous = current;
            }
            previous = W::default();
        }
    });
}

/// [`forward`] of whole chunks of `w` into `out` (a block of a fused region, which starts at a
/// chunk; the last chunk may be shorter).
pub fn forward_chunks<W: Word>(w: &[W], out: &mut [W], chunk: usize, map: OutputMap) {
    for (c, o) in w.chunks(chunk).zip(out.chunks_mut(chunk)) {
        let mut previous = W::default();
        for (o, &current) in o.iter_mut().zip(c) {
            *o = delta(current, previous, map);
            previous = current;
        }
    }
}

/// Inverse, in place: undo the map, then an inclusive prefix sum inside every chunk.
pub fn inverse<W: Word>(d: &mut [W], chunk: usize, map: OutputMap) {
    let chunk = if chunk == 0 { d.len().max(1) } else { chunk };
    d.par_chunks_mut(chunk).for_each(|c| inverse_chunk(c, map));
}

/// [`inverse`] of one chunk; u32 words on AVX2 as a vector scan of 8 lanes.
pub fn inverse_chunk<W: Word>(c: &mut [W], map: OutputMap) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        if let Some(c) = W::as_u32s(c) {
            // SAFETY: the CPU has AVX2.
            return unsafe { avx2::inverse_chunk(c, map) };
        }
    }
    match map {
        OutputMap::None => inverse_chunk_with(c, |v| v),
        OutputMap::Negabinary => inverse_chunk_with(c, W::unnegabinary),
        OutputMap::Zigzag => inverse_chunk_with(c, W::unzigzag),
    }
}

/// [`inverse_chunk`] with the map's undo `undo` (one loop per map, no match per element).
#[inline(always)]
fn inverse_chunk_with<W: Word>(c: &mut [W], undo: impl Fn(W) -> W) {
    let mut acc = W::default();
    // Four at a time, the partial sums of the four first (wrapping sums reassociate
    // exactly): the running sum then waits on one addition per four elements, not four.
    let mut quads = c.chunks_exact_mut(4);
    for q in &mut quads {
        let [a, b, c, d] = [q[0], q[1], q[2], q[3]].map(&undo);
        let ab = a.wrapping_add(b);
        let abc = ab.wrapping_add(c);
        q[0] = acc.wrapping_add(a);
        q[1] = acc.wrapping_add(ab);
        q[2] = acc.wrapping_add(abc);
        acc = acc.wrapping_add(abc.wrapping_add(d));
        q[3] = acc;
    }
    for v in quads.into_remainder() {
        acc = acc.wrapping_add(undo(*v));
        *v = acc;
    }
}

/// The inverse of u32 words with the map's undo as a vector step before the scan
/// (`prefix_sum::avx2::scan`): the same words as the scalar loop (tested).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::OutputMap;
    use crate::stages::prefix_sum::avx2::scan;
    use crate::stages::words::Word;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub(super) fn inverse_chunk(c: &mut [u32], map: OutputMap) {
        match map {
            OutputMap::None => scan(c, |v| v, |v| v),
            OutputMap::Negabinary => {
                let m = _mm256_set1_epi32(0xaaaa_aaaa_u32 as i32);
                scan(c, |v| _mm256_sub_epi32(_mm256_xor_si256(v, m), m), u32::unnegabinary)
            }
            OutputMap::Zigzag => scan(
                c,
                |v| {
                    let low = _mm256_and_si256(v, _mm256_set1_epi32(1));
                    _mm256_xor_si256(_mm256_srli_epi32::<1>(v), _mm256_sub_epi32(_mm256_setzero_si256(), low))
                },
                u32::unzigzag,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(w in prop::collection::vec(any::<u32>(), 0..3000), chunk in 0usize..300, m in 0u8..3) {
            let map = [OutputMap::None, OutputMap::Negabinary, OutputMap::Zigzag][m as usize];
            let mut d = w.clone();
            forward(&mut d, chunk, map);
            inverse(&mut d, chunk, map);
            prop_assert_eq!(d, w);
        }

        #[test]
        fn round_trip_u16(w in prop::collection::vec(any::<u16>(), 0..3000), chunk in 0usize..300) {
            let mut d = w.clone();
            forward(&mut d, chunk, OutputMap::Zigzag);
            inverse(&mut d, chunk, OutputMap::Zigzag);
            prop_assert_eq!(d, w);
        }
    }

    proptest! {
        /// The vector scan of u32 words against the scalar loop, every map.
        #[cfg(target_arch = "x86_64")]
        #[test]
        fn avx2_scan_matches_the_scalar_one(d in prop::collection::vec(any::<u32>(), 0..200), m in 0u8..3) {
            prop_assume!(std::arch::is_x86_feature_detected!("avx2"));
            let map = [OutputMap::None, OutputMap::Negabinary, OutputMap::Zigzag][m as usize];
            let (mut scalar, mut vector) = (d.clone(), d);
            match map {
                OutputMap::None => inverse_chunk_with(&mut scalar, |v| v),
                OutputMap::Negabinary => inverse_chunk_with(&mut scalar, u32::unnegabinary),
                OutputMap::Zigzag => inverse_chunk_with(&mut scalar, u32::unzigzag),
            }
            // SAFETY: the CPU has AVX2 (assumed above).
            unsafe { avx2::inverse_chunk(&mut vector, map) };
            prop_assert_eq!(scalar, vector);
        }
    }

    /// In place across task boundaries (64 Ki elements) with chunks that straddle them: each
    /// task must read the word before it as it was before any task ran.
    #[test]
    fn in_place_forward_matches_the_definition_across_tasks() {
        let w: Vec<u32> = (0..200_000u32).map(|i| i.wrapping_mul(0x9e37_79b9) >> 7).collect();
        for chunk in [0, 1, 1000, 16384, 70_000] {
            let mut d = w.clone();
            forward(&mut d, chunk, OutputMap::Negabinary);
            let expected: Vec<u32> = (0..w.len())
                .map(|i| {
                    let previous = if i == 0 || (chunk > 0 && i % chunk == 0) { 0 } else { w[i - 1] };
                    delta(w[i], previous, OutputMap::Negabinary)
                })
                .collect();
            assert_eq!(d, expected, "chunk {chunk}");
        }
    }

    #[test]
    fn restarts_every_chunk() {
        let mut d = [5u32, 7, 4, 9];
        forward(&mut d, 2, OutputMap::None);
        assert_eq!(d, [5, 2, 4, 5]);
        let mut d = [5u32, 4];
        forward(&mut d, 0, OutputMap::Negabinary);
        assert_eq!(d, [5u32.negabinary(), 3]);
    }
}
