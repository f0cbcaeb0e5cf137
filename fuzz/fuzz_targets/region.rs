//! Any bytes and any box given to the region decoder (chunked archives, docs/FORMAT.md §8): a
//! typed error, or exactly the box's elements, which equal those of a full decode. Seed the
//! corpus with `python3 fuzz/region_seeds.py DIR` (the golden archives in this target's input
//! encoding; v2.0_chunked_*.fzm reaches the chunk index).
#![no_main]

use std::ops::Range;

libfuzzer_sys::fuzz_target!(|input: (Vec<u8>, Vec<(u16, u16)>)| {
    let (archive, corners) = input;
    let Ok(header) = fzmod::inspect(&archive) else { return };
    // A box from the fuzzer's corners, within or beyond the shape (the decoder must refuse
    // what does not fit).
    let region: Vec<Range<u64>> = header
        .shape
        .iter()
        .zip(corners.iter().chain(std::iter::repeat(&(0, u16::MAX))))
        .map(|(&n, &(a, b))| {
            let n = n.max(1);
            let (lo, hi) = (u64::from(a) % (n + 1), u64::from(b) % (n + 2));
            lo..hi
        })
        .collect();
    let Ok(part) = fzmod::decompress_region(&archive, &region) else { return };
    let elements: u64 = region.iter().map(|r| r.end - r.start).product();
    assert_eq!(part.data.len() as u64, elements);
    if let Ok(full) = fzmod::decompress(&archive) {
        let (full, part) = (full.data.to_le_bytes(), part.data.to_le_bytes());
        let size = full.len() / header.shape.iter().product::<u64>().max(1) as usize;
        // The box in C order, element by element from the full decode.
        let mut expected = Vec::with_capacity(part.len());
        let mut index = region.iter().map(|r| r.start).collect::<Vec<_>>();
        for _ in 0..elements {
            let flat = index.iter().zip(&header.shape).fold(0u64, |acc, (&i, &n)| acc * n + i) as usize;
            expected.extend_from_slice(&full[flat * size..(flat + 1) * size]);
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < region[d].end {
                    break;
                }
                index[d] = region[d].start;
            }
        }
        assert!(expected == part, "region decode differs from the full decode");
    }
});
