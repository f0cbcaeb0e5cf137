//! CPU reference of BitplaneRZE (FZ-GPU's lossless codec, layout in docs/FORMAT.md).
//!
//! A chunk is 1024 u32 words (2048 u16 codes, 4096 bytes), seen as 32 rows of 32 words. Row
//! `r` transposed gives `T[r][plane]` (bit `t` = bit `plane` of word `32r + t`). A block is the
//! four words `T[4g..4g+4][plane]` (16 bytes); flag `f = plane·8 + g` marks a non-zero block,
//! and non-zero blocks are kept in flag order. One chunk is one CUDA thread block.

use crate::element::{concat_on_all_cores, vec_by_chunks};
use crate::error::{corrupt, Result};
#[cfg(target_arch = "x86_64")]
use crate::stages::bit_transpose::transpose32_avx2;
use crate::stages::bit_transpose::transpose32_lanes;
use rayon::prelude::*;

/// Words per chunk (4096 bytes).
pub const CHUNK_WORDS: usize = 1024;
/// Flag words per chunk: one bit per 16-byte block, 256 blocks.
pub const FLAG_WORDS: usize = 8;
/// Bytes of the self-describing header.
pub const HEADER_BYTES: usize = 128;

/// Rows transposed together by [`transpose32_lanes`] (one SIMD lane each).
const LANES: usize = 8;

/// A chunk's bit planes `t[plane][row]`: word `row` of plane `plane` holds bit `plane` of the
/// chunk's words `32 row .. 32 row + 32`.
type Planes = [[u32; 32]; 32];

/// The planes of a chunk of 1024 words.
#[inline(always)]
fn transpose_chunk(words: &[u32; CHUNK_WORDS]) -> Planes {
    let mut t = [[0u32; 32]; 32];
    for row0 in (0..32).step_by(LANES) {
        let mut a: [[u32; LANES]; 32] = std::array::from_fn(|j| std::array::from_fn(|l| words[(row0 + l) * 32 + j]));
        transpose32_lanes(&mut a);
        for (plane, lanes) in a.iter().enumerate() {
            t[plane][row0..row0 + LANES].copy_from_slice(lanes);
        }
    }
    t
}

/// [`transpose_chunk`] on AVX2: each row of 32 words transposed at once.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn transpose_chunk_avx2(words: &[u32; CHUNK_WORDS]) -> Planes {
    let mut t = [[0u32; 32]; 32];
    for (row, w) in words.as_chunks::<32>().0.iter().enumerate() {
        for (plane, bits) in transpose32_avx2(w).into_iter().enumerate() {
            t[plane][row] = bits;
        }
    }
    t
}

/// The words of a chunk from its planes (the inverse of [`transpose_chunk`]).
#[inline(always)]
fn untranspose_chunk(t: &Planes, out: &mut [u32; CHUNK_WORDS]) {
    for row0 in (0..32).step_by(LANES) {
        let mut a: [[u32; LANES]; 32] =
            std::array::from_fn(|plane| t[plane][row0..row0 + LANES].try_into().expect("lanes"));
        transpose32_lanes(&mut a);
        for (j, lanes) in a.iter().enumerate() {
            for (l, &v) in lanes.iter().enumerate() {
                out[(row0 + l) * 32 + j] = v;
            }
        }
    }
}

/// [`untranspose_chunk`] on AVX2: each row's 32 plane words transposed at once.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn untranspose_chunk_avx2(t: &Planes, out: &mut [u32; CHUNK_WORDS]) {
    for (row, w) in out.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        *w = transpose32_avx2(&std::array::from_fn(|plane| t[plane][row]));
    }
}

/// A chunk's 8 flag words and its kept blocks (4 words each, flag order) from its planes.
#[inline(always)]
fn encode_planes(t: &Planes) -> ([u32; FLAG_WORDS], Vec<u32>) {
    let mut flags = [0u32; FLAG_WORDS];
    let mut kept = Vec::new();
    for (plane, rows) in t.iter().enumerate() {
        for (g, block) in rows.chunks_exact(4).enumerate() {
            if block.iter().any(|&w| w != 0) {
                let f = plane * 8 + g;
                flags[f / 32] |= 1 << (f % 32);
                kept.extend_from_slice(block);
            }
        }
    }
    (flags, kept)
}

/// A chunk's planes from its flags and its kept blocks (exactly 4 × popcount words).
#[inline(always)]
fn planes_of(flags: &[u32; FLAG_WORDS], kept: &[u32]) -> Planes {
    let mut t = [[0u32; 32]; 32];
    let mut blocks = kept.chunks_exact(4);
    for (plane, rows) in t.iter_mut().enumerate() {
        for (g, block) in rows.chunks_exact_mut(4).enumerate() {
            let f = plane * 8 + g;
            if flags[f / 32] >> (f % 32) & 1 == 1 {
                block.copy_from_slice(blocks.next().expect("kept holds one block per set flag"));
            }
        }
    }
    t
}

/// Number of chunks for `n` codes: `ceil(2n / 4096)`, at least one.
pub fn num_chunks(n: usize) -> usize {
    (2 * n).div_ceil(4 * CHUNK_WORDS).max(1)
}

/// Encode `codes` into the self-describing archive (docs/FORMAT.md, "BitplaneRZE").
pub fn encode(codes: &[u16]) -> Vec<u8> {
    let encoded: Vec<EncodedChunk> = (0..num_chunks(codes.len()))
        .into_par_iter()
        .map(|c| {
            encode_codes(&codes[(c * 2 * CHUNK_WORDS).min(codes.len())..((c + 1) * 2 * CHUNK_WORDS).min(codes.len())])
        })
        .collect();
    let chunks: Vec<([u32; FLAG_WORDS], usize)> = encoded.iter().map(|(flags, kept)| (*flags, kept.len())).collect();
    assemble(codes.len(), &chunks, encoded.iter().map(|(_, kept)| bytemuck::cast_slice::<u32, u8>(kept)).collect())
}

/// A chunk's flags and kept words (little-endian).
pub type EncodedChunk = ([u32; FLAG_WORDS], Vec<u32>);

/// Encode the codes of one chunk (2048, or fewer at the end), its kept words made
/// little-endian where they are made, so that the stream is joined as bytes on every core.
pub fn encode_codes(codes: &[u16]) -> EncodedChunk {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return encode_codes_by(codes, |w| unsafe { transpose_chunk_avx2(w) });
    }
    encode_codes_by(codes, transpose_chunk)
}

/// [`encode_codes`] with the chunk's planes from `transpose`.
#[inline(always)]
fn encode_codes_by(codes: &[u16], transpose: impl Fn(&[u32; CHUNK_WORDS]) -> Planes) -> EncodedChunk {
    let mut words = [0u32; CHUNK_WORDS];
    for (w, pair) in words.iter_mut().zip(codes.chunks(2)) {
        *w = u32::from(pair[0]) | u32::from(pair.get(1).copied().unwrap_or(0)) << 16;
    }
    let (flags, mut kept) = encode_planes(&transpose(&words));
    kept.iter_mut().for_each(|w| *w = w.to_le());
    (flags, kept)
}

/// The archive of `n` codes from its chunks' flags and kept-word counts, in chunk order, and
/// their kept words as bytes, `stream`.
pub fn assemble(n: usize, chunks: &[([u32; FLAG_WORDS], usize)], stream: Vec<&[u8]>) -> Vec<u8> {
    // Start positions: exclusive scan of the kept words, in chunk order (never atomic order).
    let mut starts = Vec::with_capacity(chunks.len());
    let mut total = 0u32;
    for &(_, kept) in chunks {
        starts.push(total);
        total += kept as u32;
    }
    let entries = header_entries(chunks.len(), total as usize);
    let mut head = Vec::with_capacity(entries[3] as usize);
    head.extend_from_slice(&(n as u64).to_le_bytes());
    for e in entries {
        head.extend_from_slice(&e.to_le_bytes());
    }
    head.resize(HEADER_BYTES, 0);
    for (flags, _) in chunks {
        head.extend(flags.iter().flat_map(|f| f.to_le_bytes()));
    }
    head.extend(starts.iter().flat_map(|s| s.to_le_bytes()));
    concat_on_all_cores(std::iter::once(head.as_slice()).chain(stream))
}

/// The header's cumulative byte offsets for `chunks` chunks and `stream_words` kept words.
fn header_entries(chunks: usize, stream_words: usize) -> [u32; 5] {
    let flags_end = HEADER_BYTES + 4 * FLAG_WORDS * chunks;
    let starts_end = flags_end + 4 * chunks;
    [0, HEADER_BYTES as u32, flags_end as u32, starts_end as u32, (starts_end + 4 * stream_words) as u32]
}

fn le32(b: &[u8], word: usize) -> u32 {
    u32::from_le_bytes(b[4 * word..4 * word + 4].try_into().expect("4 bytes"))
}

/// Bytes before the bitstream for `n` codes: header, flags and start positions.
pub fn metadata_len(n: usize) -> usize {
    HEADER_BYTES + 4 * (FLAG_WORDS + 1) * num_chunks(n)
}

/// One chunk's place in the bitstream: its flags, first kept word and kept words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSlice {
    pub flags: [u32; FLAG_WORDS],
    pub start: usize,
    pub words: usize,
}

/// What the lengths alone fix for an archive of `len` bytes holding `n` codes: its chunk
/// count and the words of its bitstream. Shared with the device inverse, which checks the
/// metadata itself in its decode kernel.
pub fn layout(len: usize, n: usize) -> Result<(usize, usize)> {
    if len < HEADER_BYTES {
        return Err(corrupt!("BitplaneRZE: {len} bytes, the header alone is {HEADER_BYTES}"));
    }
    let chunks = num_chunks(n);
    // Every chunk costs 36 bytes of flags and start position: n is bounded by the archive.
    let stream_bytes = (len - HEADER_BYTES)
        .checked_sub(4 * (FLAG_WORDS + 1) * chunks)
        .ok_or_else(|| corrupt!("BitplaneRZE: {n} codes need more than {len} bytes"))?;
    if !stream_bytes.is_multiple_of(4) {
        return Err(corrupt!("BitplaneRZE: a bitstream of {stream_bytes} bytes is not whole words"));
    }
    Ok((chunks, stream_bytes / 4))
}

/// Check an archive of `len` bytes for `n` codes from its metadata (its first
/// [`metadata_len`] bytes, or all of it when shorter) before anything is decoded.
pub fn check(meta: &[u8], len: usize, n: usize) -> Result<Vec<ChunkSlice>> {
    let (chunks, stream_words) = layout(len, n)?;
    let recorded = u64::from_le_bytes(meta[..8].try_into().expect("8 bytes"));
    if recorded != n as u64 {
        return Err(corrupt!("BitplaneRZE: header says {recorded} codes, the record {n}"));
    }
    let expected = header_entries(chunks, stream_words);
    let stored: Vec<u32> = (0..5).map(|i| le32(&meta[8..28], i)).collect();
    if stored != expected || meta[28..HEADER_BYTES].iter().any(|&b| b != 0) {
        return Err(corrupt!("BitplaneRZE: header offsets {stored:?} do not match {n} codes in {len} bytes"));
    }
    let flags = &meta[HEADER_BYTES..expected[2] as usize];
    let starts = &meta[expected[2] as usize..expected[3] as usize];
    let mut slices = Vec::with_capacity(chunks);
    let mut total = 0usize;
    for c in 0..chunks {
        let flags: [u32; FLAG_WORDS] = std::array::from_fn(|i| le32(flags, c * FLAG_WORDS + i));
        let words = 4 * flags.iter().map(|w| w.count_ones() as usize).sum::<usize>();
        let start = le32(starts, c) as usize;
        if start + words > stream_words {
            return Err(corrupt!("BitplaneRZE: chunk {c} reads past the bitstream"));
        }
        total += words;
        slices.push(ChunkSlice { flags, start, words });
    }
    if total != stream_words {
        return Err(corrupt!("BitplaneRZE: flags announce {total} words, the bitstream holds {stream_words}"));
    }
    Ok(slices)
}

/// Decode an archive of `n` codes; every field is checked before it is used.
pub fn decode(archive: &[u8], n: usize) -> Result<Vec<u16>> {
    let slices = check(&archive[..archive.len().min(metadata_len(n))], archive.len(), n)?;
    let stream = &archive[metadata_len(n)..];
    // Each chunk's words split into its codes in place, in parallel (a pass over the words
    // after the decode ran on one core).
    let (codes, _) = vec_by_chunks(n, 2 * CHUNK_WORDS, |k, out| decode_codes(&slices[k], stream, out));
    Ok(codes)
}

/// The codes of chunk `c` (checked by [`check`]) into `out` (2048, or fewer at the end) from
/// the bitstream `stream`.
pub fn decode_codes(c: &ChunkSlice, stream: &[u8], out: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return decode_codes_by(c, stream, out, |t, w| unsafe { untranspose_chunk_avx2(t, w) });
    }
    decode_codes_by(c, stream, out, untranspose_chunk)
}

/// [`decode_codes`] with the chunk's words from its planes by `untranspose`.
#[inline(always)]
fn decode_codes_by(
    c: &ChunkSlice,
    stream: &[u8],
    out: &mut [u16],
    untranspose: impl Fn(&Planes, &mut [u32; CHUNK_WORDS]),
) {
    // A chunk keeps at most its own words (`check` bounds `c.words` by the flags).
    let mut kept = [0u32; CHUNK_WORDS];
    for (k, w) in kept[..c.words].iter_mut().zip(c.start..) {
        *k = le32(stream, w);
    }
    let mut words = [0u32; CHUNK_WORDS];
    untranspose(&planes_of(&c.flags, &kept[..c.words]), &mut words);
    for (pair, w) in out.chunks_mut(2).zip(words) {
        pair[0] = w as u16;
        if let Some(high) = pair.get_mut(1) {
            *high = (w >> 16) as u16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zero_codes_cost_only_flags_and_starts() {
        let a = encode(&vec![0u16; 5000]);
        assert_eq!(a.len(), HEADER_BYTES + 3 * 36);
        assert_eq!(decode(&a, 5000).unwrap(), vec![0u16; 5000]);
    }

    #[test]
    fn one_bit_keeps_one_block() {
        let mut codes = vec![0u16; 2048];
        codes[3] = 1 << 4; // word 1, bit 20: plane 20, row 0, group 0
        let a = encode(&codes);
        assert_eq!(a.len(), HEADER_BYTES + 36 + 16);
        let f = 20 * 8;
        assert_eq!(le32(&a[HEADER_BYTES..], f / 32), 1 << (f % 32));
        assert_eq!(le32(&a[HEADER_BYTES + 36..], 0), 1 << 1, "bit t of T[0][20] = word t");
    }

    /// The AVX2 planes are the portable ones, and both ways back give the words (the codec's
    /// own tests run one of the two on a given CPU).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_planes_are_the_portable_ones() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..50 {
            let words: [u32; CHUNK_WORDS] = std::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state as u32) >> (round % 32)
            });
            let t = transpose_chunk(&words);
            // SAFETY: the CPU has AVX2.
            assert_eq!(unsafe { transpose_chunk_avx2(&words) }, t, "round {round}");
            let (mut portable, mut avx2) = ([0u32; CHUNK_WORDS], [0u32; CHUNK_WORDS]);
            untranspose_chunk(&t, &mut portable);
            // SAFETY: as above.
            unsafe { untranspose_chunk_avx2(&t, &mut avx2) };
            assert_eq!((portable, avx2), (words, words), "round {round}");
        }
    }

    proptest! {
        #[test]
        fn round_trip(codes in prop::collection::vec(any::<u16>(), 0..9000), sparse in 0u16..16) {
            let codes: Vec<u16> = codes.iter().map(|&c| if c % 16 < sparse { 0 } else { c >> (c % 13) }).collect();
            let a = encode(&codes);
            prop_assert_eq!(decode(&a, codes.len()).unwrap(), codes);
        }

        #[test]
        fn corruption_is_an_error_or_a_decode(codes in prop::collection::vec(0u16..8, 1..5000), at in any::<usize>(), v in any::<u8>()) {
            let mut a = encode(&codes);
            let i = at % a.len();
            a[i] = v;
            let _ = decode(&a, codes.len());
            let _ = decode(&a[..i], codes.len());
        }
    }
}
