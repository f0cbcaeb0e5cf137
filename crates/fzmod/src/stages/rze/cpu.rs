//! CPU reference of RZE (LC's `RZE_k`, the last stage of PFPL). Per chunk of `L` bytes with
//! `m = L / word` words: bitmap `B0` marks the non-zero words; three levels of repetition
//! elimination shrink it (`B_{l+1}` marks the bytes of `B_l` that differ from their
//! predecessor, the predecessor of byte 0 being 0). Chunks are independent.

use crate::archive::Reader;
use crate::element::{concat_on_all_cores, try_vec_by_chunks};
use crate::error::{corrupt, Result};
use rayon::prelude::*;

/// Repetition-elimination levels above B0.
pub const LEVELS: usize = 3;

/// Bytes of each bitmap `B0..=B3` for `words` words.
pub fn bitmap_lens(words: usize) -> [usize; LEVELS + 1] {
    let mut lens = [words.div_ceil(8); LEVELS + 1];
    for l in 1..=LEVELS {
        lens[l] = lens[l - 1].div_ceil(8);
    }
    lens
}

#[inline]
fn bit(map: &[u8], i: usize) -> bool {
    map[i / 8] >> (i % 8) & 1 == 1
}

/// Set bits of a bitmap, counted 64 at a time (the baseline x86-64 target has no popcount
/// instruction: a software count per byte cost more than the scatter it sizes).
fn ones(map: &[u8]) -> usize {
    let words = map.chunks_exact(8);
    let tail = words.remainder().iter().map(|b| b.count_ones() as usize).sum::<usize>();
    words.map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")).count_ones() as usize).sum::<usize>() + tail
}

/// `B0` of a chunk (bit per word: non-zero) and its non-zero words in order.
fn nonzero_words<const W: usize>(chunk: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let body = &chunk[..chunk.len() / W * W];
    let mut map = vec![0u8; (body.len() / W).div_ceil(8)];
    // Per group of 8 words: the bitmap byte first (compares only), then all-zero groups are
    // skipped and all-non-zero ones copied whole, the common cases after Bitshuffle. In mixed
    // groups every word is stored at the cursor, which moves past the non-zero ones only: no
    // branch per word, and the cursor never passes the word being read.
    let mut kept = vec![0u8; body.len()];
    let mut at = 0;
    for (m, group) in map.iter_mut().zip(body.chunks(8 * W)) {
        let bits = group
            .chunks_exact(W)
            .enumerate()
            .fold(0u8, |bits, (j, w)| bits | u8::from(w.iter().fold(0u8, |a, &b| a | b) != 0) << j);
        *m = bits;
        if bits == 0 {
            continue;
        }
        if u32::from(bits) == (1u32 << (group.len() / W)) - 1 {
            kept[at..at + group.len()].copy_from_slice(group);
            at += group.len();
            continue;
        }
        for (j, w) in group.chunks_exact(W).enumerate() {
            kept[at..at + W].copy_from_slice(w);
            at += W * usize::from(bits >> j & 1);
        }
    }
    kept.truncate(at);
    (map, kept)
}

/// One repetition level: the bitmap of bytes that differ from their predecessor (0 before
/// byte 0) and those bytes in order.
fn repetition_level(prev: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut map = vec![0u8; prev.len().div_ceil(8)];
    let mut kept = vec![0u8; prev.len()];
    let (mut at, mut before) = (0, 0u8);
    for (m, group) in map.iter_mut().zip(prev.chunks(8)) {
        let mut bits = 0u8;
        for (j, &b) in group.iter().enumerate() {
            kept[at] = b;
            at += usize::from(b != before);
            bits |= u8::from(b != before) << j;
            before = b;
        }
        *m = bits;
    }
    kept.truncate(at);
    (map, kept)
}

/// Encode one chunk: `B3 ‖ kept(B2) ‖ kept(B1) ‖ kept(B0) ‖ non-zero words ‖ tail`;
/// `None` when that is not shorter than the chunk (the chunk is then stored raw).
pub fn encode_chunk(chunk: &[u8], word: usize) -> Option<Vec<u8>> {
    let (mut map, words) = match word {
        1 => nonzero_words::<1>(chunk),
        2 => nonzero_words::<2>(chunk),
        4 => nonzero_words::<4>(chunk),
        _ => nonzero_words::<8>(chunk),
    };
    let mut kept = Vec::with_capacity(LEVELS);
    for _ in 0..LEVELS {
        let (above, k) = repetition_level(&map);
        kept.push(k);
        map = above;
    }
    let tail = &chunk[chunk.len() / word * word..];
    let len = map.len() + kept.iter().map(Vec::len).sum::<usize>() + words.len() + tail.len();
    if len >= chunk.len() {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&map);
    for k in kept.iter().rev() {
        out.extend_from_slice(k);
    }
    out.extend_from_slice(&words);
    out.extend_from_slice(tail);
    Some(out)
}

/// Rebuild a bitmap of `len` bytes from the level above it (padding already checked, so
/// its set bits count the kept bytes) and its kept bytes.
fn expand(r: &mut Reader, above: &[u8], len: usize) -> Result<Vec<u8>> {
    let kept = r.take(ones(above))?;
    let mut out = vec![0u8; len];
    let (mut at, mut prev) = (0, 0u8);
    // Eight bytes per byte of the level above. All clear (the common case: runs) repeats the
    // previous byte; all set takes eight kept bytes; mixed bytes go branch-free: a set bit
    // takes the next kept byte (the lookup past the last one is never selected), a clear bit
    // repeats the previous byte.
    for (o, &a) in out.chunks_mut(8).zip(above) {
        match a {
            0 => o.fill(prev),
            0xff if o.len() == 8 => {
                o.copy_from_slice(&kept[at..at + 8]);
                at += 8;
                prev = o[7];
            }
            _ => {
                for (j, o) in o.iter_mut().enumerate() {
                    let take = a >> j & 1 == 1;
                    let next = kept.get(at).copied().unwrap_or(prev);
                    prev = if take { next } else { prev };
                    at += usize::from(take);
                    *o = prev;
                }
            }
        }
    }
    Ok(out)
}

/// Bits at and beyond `valid` must be zero (one encoding per chunk).
fn check_padding(map: &[u8], valid: usize) -> Result<()> {
    if (valid..8 * map.len()).any(|i| bit(map, i)) {
        return Err(corrupt!("RZE: bitmap bit set beyond its {valid} entries"));
    }
    Ok(())
}

/// Put the non-zero `words` where `map` (B0, one bit per word, `count_ones` = words) says,
/// into `out` (zero on entry). Bytes of the map that are all zeros or all ones are the common
/// case on compressible data: skipped or copied as one run; mixed bytes go word by word,
/// branch-free while 8 words remain to read (masked copies; the cursor moves on set bits).
/// Those paths write 8 whole words: a last map byte that covers fewer words has fewer than 8
/// set bits and is the last to read, so it always takes the bit-by-bit path.
/// `place_bytes(next, byte)` puts the next 8 kept bytes where a mixed map byte of bytes has
/// set bits ([`place_bytes`], or a vector form of it).
#[inline(always)]
fn scatter_words<const W: usize>(map: &[u8], words: &[u8], out: &mut [u8], place_bytes: impl Fn(u64, u8) -> u64) {
    let mut at = 0;
    for (k, &byte) in map.iter().enumerate() {
        let o = &mut out[8 * k * W..];
        match byte {
            0 => {}
            0xff => {
                o[..8 * W].copy_from_slice(&words[at..at + 8 * W]);
                at += 8 * W;
            }
            _ if W == 1 && at + 8 <= words.len() => {
                // Bytes: the next 8 kept bytes in a register, placed; one 8-byte store.
                let next = u64::from_le_bytes(words[at..at + 8].try_into().expect("8 bytes"));
                o[..8].copy_from_slice(&place_bytes(next, byte).to_le_bytes());
                at += byte.count_ones() as usize;
            }
            _ if at + 8 * W <= words.len() => {
                for j in 0..8 {
                    let keep = byte >> j & 1;
                    let mask = keep.wrapping_neg();
                    for (d, &s) in o[j * W..(j + 1) * W].iter_mut().zip(&words[at..at + W]) {
                        *d = s & mask;
                    }
                    at += W * usize::from(keep);
                }
            }
            _ => {
                let mut bits = byte;
                while bits != 0 {
                    let j = bits.trailing_zeros() as usize;
                    o[j * W..(j + 1) * W].copy_from_slice(&words[at..at + W]);
                    at += W;
                    bits &= bits - 1;
                }
            }
        }
    }
}

/// The bytes of `next`, in order, at the set bits of `byte` (zero elsewhere): each output
/// byte shifted out of the register.
fn place_bytes(next: u64, byte: u8) -> u64 {
    let (mut value, mut taken) = (0u64, 0);
    for j in 0..8 {
        let keep = u64::from(byte >> j & 1);
        value |= ((next >> (8 * taken) & 0xff) * keep) << (8 * j);
        taken += keep;
    }
    value
}

/// [`scatter_words`] of bytes; with SSSE3 a mixed map byte places its kept bytes with one
/// byte shuffle from a table (the byte loop's cursor chain is what the word loop waits on).
fn scatter_bytes(map: &[u8], words: &[u8], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3.
        return unsafe { ssse3::scatter_bytes(map, words, out) };
    }
    scatter_words::<1>(map, words, out, place_bytes)
}

#[cfg(target_arch = "x86_64")]
mod ssse3 {
    use std::arch::x86_64::*;

    /// For each map byte, the shuffle that places the next kept bytes: output byte `j` takes
    /// kept byte `popcount(map & ((1 << j) − 1))` where bit `j` is set, else zero (0x80).
    const PLACES: [[u8; 8]; 256] = {
        let mut t = [[0x80u8; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let (mut j, mut taken) = (0, 0u8);
            while j < 8 {
                if m >> j & 1 == 1 {
                    t[m][j] = taken;
                    taken += 1;
                }
                j += 1;
            }
            m += 1;
        }
        t
    };

    /// `super::scatter_words::<1>` with the mixed bytes placed by table: the same bytes (tested).
    #[target_feature(enable = "ssse3")]
    pub(super) fn scatter_bytes(map: &[u8], words: &[u8], out: &mut [u8]) {
        super::scatter_words::<1>(map, words, out, |next, byte| {
            let places = u64::from_le_bytes(PLACES[usize::from(byte)]);
            let placed = _mm_shuffle_epi8(_mm_cvtsi64_si128(next as i64), _mm_cvtsi64_si128(places as i64));
            _mm_cvtsi128_si64(placed) as u64
        })
    }
}

/// Decode one encoded chunk into `out` (the chunk's original length, zero on entry).
pub fn decode_chunk(enc: &[u8], word: usize, out: &mut [u8]) -> Result<()> {
    let m = out.len() / word;
    let lens = bitmap_lens(m);
    let mut r = Reader::new(enc, "RZE chunk");
    let mut map = r.take(lens[LEVELS])?.to_vec();
    for l in (0..LEVELS).rev() {
        check_padding(&map, lens[l])?;
        map = expand(&mut r, &map, lens[l])?;
    }
    check_padding(&map, m)?;
    let words = r.take(ones(&map) * word)?;
    match word {
        1 => scatter_bytes(&map, words, out),
        2 => scatter_words::<2>(&map, words, out, place_bytes),
        4 => scatter_words::<4>(&map, words, out, place_bytes),
        _ => scatter_words::<8>(&map, words, out, place_bytes),
    }
    let tail = out.len() - m * word;
    out[m * word..].copy_from_slice(r.take(tail)?);
    r.finish()
}

/// Encode `data` in chunks: `[u16 size per chunk][payloads]`; size = chunk length means raw.
pub fn encode(data: &[u8], chunk: usize, word: usize) -> Vec<u8> {
    let encoded: Vec<Option<Vec<u8>>> = data.par_chunks(chunk).map(|c| encode_chunk(c, word)).collect();
    let payloads: Vec<&[u8]> = encoded.iter().zip(data.chunks(chunk)).map(|(e, c)| e.as_deref().unwrap_or(c)).collect();
    let table: Vec<u8> = payloads.iter().flat_map(|p| (p.len() as u16).to_le_bytes()).collect();
    concat_on_all_cores(std::iter::once(table.as_slice()).chain(payloads))
}

/// One chunk of an encoded segment: where its payload starts, its payload and decoded sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSpan {
    pub at: usize,
    pub size: usize,
    pub len: usize,
}

/// Validate the size table of a segment of `seg_len` bytes holding `num_bytes` bytes, before
/// anything is allocated (at least 4 bytes of segment per chunk of up to 65,528 bytes, so the
/// output is at most ~16 400 × the segment; the record's length is also checked against the
/// header's array, `Rze::check_header`). `table(k)` reads table entry k, asked only once the table's
/// `2 · chunks` bytes are known to lie in the segment. Shared with the device inverse.
pub fn chunk_spans(
    seg_len: usize,
    num_bytes: usize,
    chunk: usize,
    word: usize,
    table: impl FnOnce(usize) -> Result<Vec<u16>>,
) -> Result<Vec<ChunkSpan>> {
    let chunks = num_bytes.div_ceil(chunk);
    if chunks > seg_len / 2 {
        return Err(corrupt!("RZE: {num_bytes} bytes need a size table longer than the {seg_len} byte segment"));
    }
    let sizes = table(chunks)?;
    let mut spans = Vec::with_capacity(chunks);
    let mut at = 2 * chunks;
    for (c, &size) in sizes.iter().enumerate() {
        let size = usize::from(size);
        let len = chunk.min(num_bytes - c * chunk);
        // An encoded chunk holds at least its top bitmap and its tail: this bounds the output
        // by the segment's own bytes before anything is allocated.
        let least = bitmap_lens(len / word)[LEVELS] + len % word;
        if size > len || size < least {
            return Err(corrupt!("RZE: chunk {c} claims {size} bytes for {len}"));
        }
        spans.push(ChunkSpan { at, size, len });
        at += size;
    }
    if at != seg_len {
        return Err(corrupt!("RZE: chunks occupy {at} bytes, the segment {seg_len}"));
    }
    Ok(spans)
}

/// Decode `num_bytes` bytes (table checked by [`chunk_spans`]).
pub fn decode(seg: &[u8], num_bytes: usize, chunk: usize, word: usize) -> Result<Vec<u8>> {
    let spans = chunk_spans(seg.len(), num_bytes, chunk, word, |chunks| {
        Ok(seg[..2 * chunks].chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect())
    })?;
    try_vec_by_chunks(num_bytes, chunk, |k, o| {
        let ChunkSpan { at, size, len } = spans[k];
        let enc = &seg[at..at + size];
        if size == len {
            o.copy_from_slice(enc);
            Ok(())
        } else {
            decode_chunk(enc, word, o)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The SSSE3 byte scatter against the portable one, on maps of every density.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn table_scatter_matches_the_word_loop() {
        if !std::arch::is_x86_feature_detected!("ssse3") {
            return;
        }
        for density in [0u32, 1, 40, 128, 200, 255, 256] {
            let map: Vec<u8> = (0..300u32)
                .map(|k| {
                    (0..8).fold(0u8, |b, j| b | u8::from((k * 8 + j).wrapping_mul(0x9e37_79b9) >> 24 < density) << j)
                })
                .collect();
            let words: Vec<u8> = (1..=ones(&map) as u32).map(|i| (i % 251 + 1) as u8).collect();
            let (mut portable, mut table) = (vec![0u8; 8 * map.len()], vec![0u8; 8 * map.len()]);
            scatter_words::<1>(&map, &words, &mut portable, place_bytes);
            // SAFETY: the CPU has SSSE3 (checked above).
            unsafe { ssse3::scatter_bytes(&map, &words, &mut table) };
            assert_eq!(portable, table, "density {density}");
        }
    }

    #[test]
    fn zero_chunk_is_its_top_bitmap() {
        assert_eq!(bitmap_lens(16384), [2048, 256, 32, 4]);
        assert_eq!(encode_chunk(&[0u8; 16384], 1), Some(vec![0u8; 4]));
        let mut one = [0u8; 64];
        one[9] = 7;
        // B0 = [0, 2, 0 ...] (8 bytes), B1 = [0b110], B2 = [1], B3 = [1].
        assert_eq!(encode_chunk(&one, 1), Some(vec![1, 1, 0b110, 2, 0, 7]));
        let e = encode(&[0u8; 20000], 16384, 1);
        assert_eq!(e.len(), 4 + 4 + 1, "two sizes, B3 of 4 bytes and of 1 byte (3616 bytes)");
        assert_eq!(decode(&e, 20000, 16384, 1).unwrap(), vec![0u8; 20000]);
    }

    #[test]
    fn incompressible_chunks_are_raw() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 1) as u8 | 1).collect();
        let e = encode(&data, 512, 1);
        assert_eq!(&e[..4], &[0, 2, 232, 1], "sizes 512 and 488 = raw");
        assert_eq!(decode(&e, 1000, 512, 1).unwrap(), data);
    }

    #[test]
    fn sizes_below_the_top_bitmap_are_refused_before_allocating() {
        let seg = vec![0u8; 2000]; // 1000 chunks of size 0 claiming 65 MB
        assert!(decode(&seg, 1000 * 65535, 65535, 1).is_err());
    }

    fn sparse(bytes: Vec<u8>, density: u8) -> Vec<u8> {
        bytes.into_iter().map(|b| if b < density { b } else { 0 }).collect()
    }

    proptest! {
        #[test]
        fn round_trip(
            data in prop::collection::vec(any::<u8>(), 0..6000), density in any::<u8>(),
            w in 0usize..4, chunk_words in 1usize..3000,
        ) {
            let data = sparse(data, density);
            let word = 1 << w;
            let chunk = (word * chunk_words).min(65535 / word * word);
            let e = encode(&data, chunk, word);
            prop_assert_eq!(decode(&e, data.len(), chunk, word).unwrap(), data);
        }

        #[test]
        fn corruption_is_an_error_or_a_decode(data in prop::collection::vec(0u8..3, 1..3000), at in any::<usize>(), v in any::<u8>()) {
            let data = sparse(data, 1);
            let mut e = encode(&data, 1024, 1);
            let i = at % e.len();
            e[i] = v;
            let _ = decode(&e, data.len(), 1024, 1);
            let _ = decode(&e[..i], data.len(), 1024, 1);
        }
    }
}
