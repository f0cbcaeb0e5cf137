//! CPU reference of Difference: `out[i] = map(w[i] − w[i−1])`, with `w[−1] = 0` at the start
//! of every chunk (wrapping), and its chunked prefix-sum inverse.

use super::OutputMap;
use crate::element::zeroed_vec;
use crate::stages::words::Word;
use rayon::prelude::*;

/// Elements per parallel work item when chunks are large or absent.
const TASK_ELEMS: usize = 1 << 16;

/// The difference at element `i` of a chunk, mapped (pure, one element).
#[inline]
pub fn delta<W: Word>(current: W, previous: W, map: OutputMap) -> W {
    map.apply(current.wrapping_sub(previous))
}

/// Forward over words; `chunk` = elements per chunk (0 = the whole array is one chunk).
pub fn forward<W: Word>(w: &[W], chunk: usize, map: OutputMap) -> Vec<W> {
    let chunk = if chunk == 0 { w.len().max(1) } else { chunk };
    let mut out = zeroed_vec(w.len());
    out.par_chunks_mut(TASK_ELEMS).enumerate().for_each(|(task, o)| {
        let base = task * TASK_ELEMS;
        for (k, o) in o.iter_mut().enumerate() {
            let i = base + k;
            let previous = if i.is_multiple_of(chunk) { W::default() } else { w[i - 1] };
            *o = delta(w[i], previous, map);
        }
    });
    out
}

/// Inverse, in place: undo the map, then an inclusive prefix sum inside every chunk.
pub fn inverse<W: Word>(d: &mut [W], chunk: usize, map: OutputMap) {
    let chunk = if chunk == 0 { d.len().max(1) } else { chunk };
    d.par_chunks_mut(chunk).for_each(|c| {
        let mut acc = W::default();
        for v in c {
            acc = acc.wrapping_add(map.undo(*v));
            *v = acc;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(w in prop::collection::vec(any::<u32>(), 0..3000), chunk in 0usize..300, m in 0u8..3) {
            let map = [OutputMap::None, OutputMap::Negabinary, OutputMap::Zigzag][m as usize];
            let mut d = forward(&w, chunk, map);
            inverse(&mut d, chunk, map);
            prop_assert_eq!(d, w);
        }

        #[test]
        fn round_trip_u16(w in prop::collection::vec(any::<u16>(), 0..3000), chunk in 0usize..300) {
            let mut d = forward(&w, chunk, OutputMap::Zigzag);
            inverse(&mut d, chunk, OutputMap::Zigzag);
            prop_assert_eq!(d, w);
        }
    }

    #[test]
    fn restarts_every_chunk() {
        let d = forward(&[5u32, 7, 4, 9], 2, OutputMap::None);
        assert_eq!(d, [5, 2, 4, 5]);
        assert_eq!(forward(&[5u32, 4], 0, OutputMap::Negabinary), [5u32.negabinary(), 3]);
    }
}
