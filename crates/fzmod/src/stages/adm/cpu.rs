//! CPU reference of ADM (MANS's adaptive data mapping). A block of 512 words is one GPU warp:
//! lane `l` holds words `16l .. 16l + 16`. Each word becomes a code byte (its offset from the
//! block's centre modulo 126, with the sign in bit 0) and a unary signal (how many multiples of
//! 126 it lies beyond that) in its lane's bit stream. A block whose signal area would be at
//! least as large as its raw words is stored raw (the escape MANS lacks).

use crate::element::{try_vec_by_chunks, vec_by_chunks};
use crate::error::{corrupt, Result};

/// Words per block (one warp).
pub const BLOCK: usize = 512;
/// Words per lane.
pub const PER_LANE: usize = 16;
/// Lanes per block.
pub const LANES: usize = BLOCK / PER_LANE;
/// Offsets per signal step: a code byte carries an offset in 1..=126.
const SPAN: u64 = 126;
/// Blocks per parallel task.
const TASK_BLOCKS: usize = 64;

/// The two input word types. The block-wide loops of the common case (every signal a single
/// one bit) run in the word's own width (eight u16 words to an SSE register, not two u64).
pub trait Word: Copy + Default + Send + Sync + bytemuck::Zeroable + Into<u64> + 'static {
    const BYTES: usize;
    const MAX: u64;
    /// `v` is at most `MAX`.
    fn from_u64(v: u64) -> Self;
    fn put_le(self, out: &mut [u8]);
    fn get_le(b: &[u8]) -> Self;
    /// The block's centre: the floor of its words' mean (blocks of at most `BLOCK` words).
    fn centre(block: &[Self]) -> u64;
    /// Whether every word lies within one span of `c`; if so, `codes` holds their code bytes
    /// as `map` writes them for k = 1 (otherwise garbage).
    fn near_codes(block: &[Self], c: u64, codes: &mut [u8]) -> bool;
    /// Code byte and signal length of every word of `block` around `c`, as `map` gives them
    /// (branch-free: the lengths' division is a multiply by a constant).
    fn far_codes(block: &[Self], c: u64, codes: &mut [u8], lengths: &mut [u32]);
    /// The words of code bytes with single-bit signals around `c` (as `unmap` with k = 1);
    /// false when some code stands for no word (`out` then holds garbage).
    fn unmap_near(codes: &[u8], c: u64, out: &mut [Self]) -> bool;
}

macro_rules! impl_word {
    ($t:ty, $sum:ty) => {
        impl Word for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            const MAX: u64 = <$t>::MAX as u64;
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            fn put_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn get_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("a word's bytes"))
            }
            fn centre(block: &[Self]) -> u64 {
                // At most 512 words: the sum fits twice the word's width.
                (block.iter().map(|&v| <$sum>::from(v)).sum::<$sum>() / block.len() as $sum) as u64
            }
            fn near_codes(block: &[Self], c: u64, codes: &mut [u8]) -> bool {
                let c = c as $t;
                let mut near = true;
                for (code, &v) in codes.iter_mut().zip(block) {
                    let d = v.abs_diff(c);
                    near &= u64::from(d) <= SPAN;
                    // Where it counts, d ≤ 126: the shift keeps every bit then.
                    *code = (d << 1 | <$t>::from(v <= c)) as u8;
                }
                near
            }
            fn far_codes(block: &[Self], c: u64, codes: &mut [u8], lengths: &mut [u32]) {
                let c = c as $t;
                for ((code, k), &v) in codes.iter_mut().zip(lengths.iter_mut()).zip(block) {
                    let d = v.abs_diff(c);
                    let steps = d.div_ceil(SPAN as $t).max(1);
                    // d = 0 gives code 1 (sign bit set for v ≤ c), as `map`.
                    *code = ((d - SPAN as $t * (steps - 1)) << 1 | <$t>::from(v <= c)) as u8;
                    *k = steps as u32;
                }
            }
            fn unmap_near(codes: &[u8], c: u64, out: &mut [Self]) -> bool {
                let c = c as $t;
                let mut valid = true;
                for (o, &code) in out.iter_mut().zip(codes) {
                    let d = <$t>::from(code >> 1);
                    let (below, above) = (c.wrapping_sub(d), c.wrapping_add(d));
                    let odd = code & 1 == 1;
                    // Codes 1..=253; a word below the centre must not wrap below 0, one above
                    // it not past the word's maximum.
                    valid &= (code.wrapping_sub(1) < 253) & if odd { c >= d } else { above >= c };
                    *o = if odd { below } else { above };
                }
                valid
            }
        }
    };
}

impl_word!(u16, u32);
impl_word!(u32, u64);

/// Bytes of the side table: a centre and a length byte per block.
pub fn table_len(nblocks: usize, word: usize) -> usize {
    nblocks * (word + 1)
}

/// Payload bytes of a block of `len` words with length byte `lane_bytes` (0 = raw).
pub fn payload_len(len: usize, word: usize, lane_bytes: u8) -> usize {
    if lane_bytes == 0 {
        len * word
    } else {
        LANES * usize::from(lane_bytes)
    }
}

/// The length byte of a block whose largest lane needs `bits` signal bits: its bytes per lane,
/// or 0 (raw) when the signal area would be at least as large as the block's raw words.
pub fn lane_bytes(bits: u64, len: usize, word: usize) -> u8 {
    let per_lane = bits.div_ceil(8);
    if LANES as u64 * per_lane >= (len * word) as u64 {
        0
    } else {
        per_lane as u8
    }
}

/// One encoded block: its centre (0 when raw), length byte and payload.
pub struct Encoded {
    centre: u64,
    lane_bytes: u8,
    payload: Vec<u8>,
}

/// Encode one block; its code bytes go to `codes` (0 for a raw block).
/// `lengths` is scratch space for the signal lengths (`BLOCK` of them).
fn encode_block<T: Word>(block: &[T], codes: &mut [u8], lengths: &mut [u32; BLOCK]) -> Encoded {
    let c = T::centre(block);
    // The common case on smooth data: every word within one span of the centre, so every
    // signal is a single one bit and a lane's bits are its word count (what `map` gives,
    // without its division and branches); the code bytes come from the same pass.
    let near = T::near_codes(block, c, codes);
    let lengths = &mut lengths[..block.len()];
    let bits = if near {
        Some(block.len().min(PER_LANE) as u64)
    } else {
        T::far_codes(block, c, codes, lengths);
        lengths.chunks(PER_LANE).map(|lane| lane.iter().map(|&k| u64::from(k)).sum::<u64>()).max()
    };
    let lane_bytes = lane_bytes(bits.unwrap_or(0), block.len(), T::BYTES);
    if lane_bytes == 0 {
        codes.fill(0);
        let mut payload = vec![0u8; block.len() * T::BYTES];
        for (o, &v) in payload.chunks_exact_mut(T::BYTES).zip(block) {
            v.put_le(o);
        }
        return Encoded { centre: 0, lane_bytes, payload };
    }
    let per = usize::from(lane_bytes);
    // Padding bits are ones: start from ones and clear each signal's zero bits.
    let mut payload = vec![0xffu8; LANES * per];
    if near {
        // Signals without zero bits; the code bytes are written.
        return Encoded { centre: c, lane_bytes, payload };
    }
    for (stream, lane) in payload.chunks_exact_mut(per).zip(lengths.chunks(PER_LANE)) {
        let mut pos = 0usize;
        for &k in lane {
            // A signal of k bits: a one, then k − 1 zeros.
            let k = k as usize;
            if k > 1 {
                clear_bits(stream, pos + 1, pos + k);
            }
            pos += k;
        }
    }
    Encoded { centre: c, lane_bytes, payload }
}

/// Clear bits `from..to` of `stream` (most significant bit of a byte first), up to a byte's
/// worth at a time.
fn clear_bits(stream: &mut [u8], mut from: usize, to: usize) {
    while from < to {
        let (at, offset) = (from / 8, from % 8);
        let n = (8 - offset).min(to - from);
        stream[at] &= !((0xffu8 << (8 - n)) >> offset);
        from += n;
    }
}

/// Encode `words`: the code bytes (one per word) and the side stream
/// `[centre per block][length byte per block][payload per block]`.
pub fn encode<T: Word>(words: &[T]) -> (Vec<u8>, Vec<u8>) {
    let task = BLOCK * TASK_BLOCKS;
    let (codes, groups): (Vec<u8>, Vec<Vec<Encoded>>) =
        vec_by_chunks(words.len(), task, |k, c| encode_blocks(&words[k * task..][..c.len()], c));
    (codes, side_stream::<T>(groups.iter().flatten().collect()))
}

/// Encode the blocks of `words` (whole blocks but at the array's end); their code bytes go
/// to `codes`.
pub fn encode_blocks<T: Word>(words: &[T], codes: &mut [u8]) -> Vec<Encoded> {
    let mut lengths = [0u32; BLOCK];
    words.chunks(BLOCK).zip(codes.chunks_mut(BLOCK)).map(|(b, c)| encode_block(b, c, &mut lengths)).collect()
}

/// The side stream of the encoded `blocks` of an array, in block order.
pub fn side_stream<T: Word>(blocks: Vec<&Encoded>) -> Vec<u8> {
    let nblocks = blocks.len();
    let payload: usize = blocks.iter().map(|b| b.payload.len()).sum();
    let mut side = vec![0u8; table_len(nblocks, T::BYTES) + payload];
    for (i, b) in blocks.iter().enumerate() {
        T::from_u64(b.centre).put_le(&mut side[i * T::BYTES..(i + 1) * T::BYTES]);
        side[nblocks * T::BYTES + i] = b.lane_bytes;
    }
    let mut at = table_len(nblocks, T::BYTES);
    for b in blocks {
        side[at..at + b.payload.len()].copy_from_slice(&b.payload);
        at += b.payload.len();
    }
    side
}

/// Where each block's payload starts in a side stream of `side_len` bytes for `n` words whose
/// length bytes are `lens` (read once the table is known to lie in the stream); checks every
/// length byte and that the payloads fill the stream exactly. Shared with the device inverse.
pub fn payload_starts(side_len: usize, n: usize, word: usize, lens: &[u8]) -> Result<Vec<u64>> {
    let table = table_len(lens.len(), word);
    let mut at = table;
    let mut starts = Vec::with_capacity(lens.len());
    for (b, &lane_bytes) in lens.iter().enumerate() {
        let len = BLOCK.min(n - b * BLOCK);
        // A coded block's signal area is smaller than its raw words (else it would be raw).
        if lane_bytes != 0 && LANES * usize::from(lane_bytes) >= len * word {
            return Err(corrupt!("ADM: block {b} of {len} words claims {lane_bytes} signal bytes per lane"));
        }
        starts.push(at as u64);
        at += payload_len(len, word, lane_bytes);
    }
    if at != side_len {
        return Err(corrupt!("ADM: blocks occupy {at} bytes, the side stream {side_len}"));
    }
    Ok(starts)
}

/// The word `code` with signal length `k ≥ 1` stands for around centre `c`, `None` when no
/// word is coded that way. Branch-free up to the final check: a code's side bit (below or
/// above the centre) follows the data, and a branch on it missed every other word.
#[inline]
fn unmap<T: Word>(code: u8, k: u64, c: u64) -> Option<u64> {
    let diff = u64::from(code >> 1) + SPAN * (k - 1);
    let below = code & 1 == 1;
    // No overflow: c < 2^32 and diff < 2^20 (signals of at most 255 · 8 bits).
    let far = if below { c.wrapping_sub(diff) } else { c + diff };
    let far_ok = (2..=253).contains(&code) & if below { diff <= c } else { far <= T::MAX };
    let near_ok = (code == 1) & (k == 1);
    (far_ok | near_ok).then_some(if near_ok { c } else { far })
}

/// The first set bit of `stream` (most significant first) at or after bit `from`, or the
/// stream's end: a byte at a time, not a bit.
#[inline]
fn next_one(stream: &[u8], from: usize) -> usize {
    let mut at = from / 8;
    let mut byte = stream.get(at).map_or(0, |&b| b & (0xff >> (from % 8)));
    while byte == 0 {
        at += 1;
        match stream.get(at) {
            Some(&b) => byte = b,
            None => return stream.len() * 8,
        }
    }
    8 * at + byte.leading_zeros() as usize
}

/// The words of code bytes whose signals are all a single one bit (branch-free).
fn unmap_all_near<T: Word>(codes: &[u8], c: u64, out: &mut [T]) -> Result<()> {
    if !T::unmap_near(codes, c, out) {
        let code = codes.iter().find(|&&code| unmap::<T>(code, 1, c).is_none()).expect("a failed check has a cause");
        return Err(corrupt!("ADM: code {code} with signal 1 around centre {c}"));
    }
    Ok(())
}

/// Decode one lane's words from its signal stream (`stream.len()` bytes per lane).
fn decode_lane<T: Word>(stream: &[u8], codes: &[u8], c: u64, out: &mut [T]) -> Result<u64> {
    if stream.iter().all(|&b| b == 0xff) {
        // Every signal a single one bit, the rest padding.
        unmap_all_near(codes, c, out)?;
        return Ok(out.len().min(codes.len()) as u64);
    }
    if stream.len() <= 8 {
        return decode_lane_in_word(stream, codes, c, out);
    }
    let end = stream.len() * 8;
    let mut pos = 0;
    for (o, &code) in out.iter_mut().zip(codes) {
        if pos >= end || next_one(stream, pos) != pos {
            return Err(corrupt!("ADM: a signal ends early or does not start with a one"));
        }
        let next = next_one(stream, pos + 1);
        let k = (next - pos) as u64;
        pos = next;
        *o = T::from_u64(
            unmap::<T>(code, k, c).ok_or_else(|| corrupt!("ADM: code {code} with signal {k} around centre {c}"))?,
        );
    }
    // Bits past the last signal are the lane's padding: ones.
    let bit = |p: usize| stream[p / 8] >> (7 - p % 8) & 1 == 1;
    if (pos..end).any(|p| !bit(p)) {
        return Err(corrupt!("ADM: signal padding is not all ones"));
    }
    Ok(pos as u64)
}

/// `decode_lane` for a stream of at most 64 bits: held in one word, each signal's length is
/// a count of leading zeros instead of a scan.
fn decode_lane_in_word<T: Word>(stream: &[u8], codes: &[u8], c: u64, out: &mut [T]) -> Result<u64> {
    let end = stream.len() * 8;
    let mut bytes = [0u8; 8];
    bytes[..stream.len()].copy_from_slice(stream);
    // Bit `pos` of the stream at the top; zeros below the stream's end.
    let mut rest = u64::from_be_bytes(bytes);
    let mut pos = 0;
    for (o, &code) in out.iter_mut().zip(codes) {
        if pos >= end || rest >> 63 == 0 {
            return Err(corrupt!("ADM: a signal ends early or does not start with a one"));
        }
        // A one, then zeros up to the next one or the stream's end.
        let k = ((rest << 1).leading_zeros() as usize + 1).min(end - pos);
        rest = rest.checked_shl(k as u32).unwrap_or(0);
        pos += k;
        let k = k as u64;
        *o = T::from_u64(
            unmap::<T>(code, k, c).ok_or_else(|| corrupt!("ADM: code {code} with signal {k} around centre {c}"))?,
        );
    }
    // Bits past the last signal are the lane's padding: ones.
    let padding = end - pos;
    if padding > 0 && !rest >> (64 - padding) != 0 {
        return Err(corrupt!("ADM: signal padding is not all ones"));
    }
    Ok(pos as u64)
}

/// Decode one block of `out.len()` words.
fn decode_block<T: Word>(centre: &[u8], lane_bytes: u8, payload: &[u8], codes: &[u8], out: &mut [T]) -> Result<()> {
    let c: u64 = T::get_le(centre).into();
    if lane_bytes == 0 {
        if c != 0 || codes.iter().any(|&b| b != 0) {
            return Err(corrupt!("ADM: a raw block with a centre or code bytes"));
        }
        for (o, b) in out.iter_mut().zip(payload.chunks_exact(T::BYTES)) {
            *o = T::get_le(b);
        }
        return Ok(());
    }
    let per = usize::from(lane_bytes);
    let longest = if payload.iter().all(|&b| b == 0xff) {
        // Every signal a single one bit in every lane (the common case): one pass over the
        // block, and the first lane is the longest.
        unmap_all_near(codes, c, out)?;
        out.len().min(PER_LANE) as u64
    } else {
        let mut longest = 0;
        for (l, stream) in payload.chunks_exact(per).enumerate() {
            let lo = (l * PER_LANE).min(out.len());
            let hi = (lo + PER_LANE).min(out.len());
            longest = longest.max(decode_lane(stream, &codes[lo..hi], c, &mut out[lo..hi])?);
        }
        longest
    };
    // One encoding per block: the longest lane needs its last signal byte.
    if longest.div_ceil(8) != per as u64 {
        return Err(corrupt!("ADM: {per} signal bytes per lane where {longest} bits need fewer"));
    }
    Ok(())
}

/// Decode `codes.len()` words from their code bytes and side stream.
pub fn decode<T: Word>(codes: &[u8], side: &[u8]) -> Result<Vec<T>> {
    let side = SideStream::read(side, codes.len(), T::BYTES)?;
    let task = BLOCK * TASK_BLOCKS;
    try_vec_by_chunks::<T>(codes.len(), task, |k, o| {
        side.decode_blocks(k * TASK_BLOCKS, &codes[k * task..][..o.len()], o)
    })
}

/// A side stream whose table and payload sizes are checked, for decoding any of its blocks.
pub struct SideStream<'a> {
    side: &'a [u8],
    word: usize,
    starts: Vec<u64>,
}

impl<'a> SideStream<'a> {
    /// The side stream of `n` words of `word` bytes, its table and every block's payload
    /// checked to lie in it.
    pub fn read(side: &'a [u8], n: usize, word: usize) -> Result<Self> {
        let nblocks = n.div_ceil(BLOCK);
        let table = table_len(nblocks, word);
        if table > side.len() {
            return Err(corrupt!("ADM: {n} words need a {table} byte table, the side stream has {}", side.len()));
        }
        let starts = payload_starts(side.len(), n, word, &side[nblocks * word..table])?;
        Ok(SideStream { side, word, starts })
    }

    /// Decode the blocks from block `first` on of `codes` (whole blocks but at the array's
    /// end) into `out`.
    pub fn decode_blocks<T: Word>(&self, first: usize, codes: &[u8], out: &mut [T]) -> Result<()> {
        let (side, lens) = (self.side, &self.side[self.starts.len() * self.word..]);
        out.chunks_mut(BLOCK).zip(codes.chunks(BLOCK)).enumerate().try_for_each(|(i, (o, c))| {
            let b = first + i;
            let at = self.starts[b] as usize;
            let payload = &side[at..at + payload_len(o.len(), T::BYTES, lens[b])];
            decode_block(&side[b * T::BYTES..(b + 1) * T::BYTES], lens[b], payload, c, o)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip<T: Word + PartialEq + std::fmt::Debug>(words: &[T]) -> (Vec<u8>, Vec<u8>) {
        let (codes, side) = encode(words);
        assert_eq!(codes.len(), words.len());
        assert_eq!(decode::<T>(&codes, &side).unwrap(), words);
        (codes, side)
    }

    /// Code byte and signal length `k` (bits) of `v` around centre `c`: MANS's mapping, the
    /// reference of `near_codes` and `far_codes`.
    fn map(v: u64, c: u64) -> (u8, u64) {
        if v == c {
            return (1, 1);
        }
        let diff = v.abs_diff(c);
        let k = diff.div_ceil(SPAN);
        (((diff - SPAN * (k - 1)) << 1 | u64::from(v < c)) as u8, k)
    }

    fn far_codes_map<T: Word>(words: &[T], c: u64) {
        let (mut codes, mut lengths) = (vec![0; words.len()], vec![0; words.len()]);
        T::far_codes(words, c, &mut codes, &mut lengths);
        for ((&v, &code), &k) in words.iter().zip(&codes).zip(&lengths) {
            assert_eq!(map(v.into(), c), (code, u64::from(k)), "word {}, centre {c}", v.into());
        }
    }

    /// The branch-free unmap against the definition: every code, signal lengths 1..600,
    /// centres at and near both ends of u16 and u32.
    #[test]
    fn unmap_matches_the_definition() {
        fn definition(code: u8, k: u64, c: u64, max: u64) -> Option<u64> {
            match code {
                1 if k == 1 => Some(c),
                2..=253 => {
                    let diff = u64::from(code >> 1) + SPAN * (k - 1);
                    if code & 1 == 1 {
                        c.checked_sub(diff)
                    } else {
                        Some(c + diff).filter(|&v| v <= max)
                    }
                }
                _ => None,
            }
        }
        for code in 0..=255u8 {
            for k in 1..600 {
                for c in [0u64, 1, 126, 127, 5000, 65_409, 65_535] {
                    assert_eq!(unmap::<u16>(code, k, c), definition(code, k, c, 65_535), "u16 {code} {k} {c}");
                }
                for c in [0u64, 300, 1 << 31, u64::from(u32::MAX) - 200, u64::from(u32::MAX)] {
                    assert_eq!(
                        unmap::<u32>(code, k, c),
                        definition(code, k, c, u64::from(u32::MAX)),
                        "u32 {code} {k} {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn far_codes_map_every_distance() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        for c in [0, 1, 125, 126, 127, 252, 253, 40_000, 65_409, 65_535] {
            far_codes_map(&all, c);
        }
        let wide: Vec<u32> = (0..=200).chain(u32::MAX - 300..=u32::MAX).chain([1 << 31, 7 << 20]).collect();
        for c in [0, 126, 1 << 31, u64::from(u32::MAX)] {
            far_codes_map(&wide, c);
        }
    }

    #[test]
    fn lanes_within_and_beyond_one_word() {
        // Offsets up to ±300 around the centre (signals up to 3 bits) fit a lane in 64 bits,
        // up to ±1500 (13 bits) do not; both decode, and a lane whose first bit is cleared
        // (a signal not starting with a one) is an error either way.
        for (spread, word_sized) in [(600u32, true), (3000, false)] {
            let words: Vec<u16> =
                (0..512u32).map(|i| (2000 + (i.wrapping_mul(2_654_435_761) >> 7) % spread) as u16).collect();
            let (codes, side) = round_trip(&words);
            let per = usize::from(side[2]);
            assert_eq!((1..=8).contains(&per), word_sized, "{per} bytes per lane");
            let mut bad = side.clone();
            bad[3 + 5 * per] &= 0x7f;
            assert!(decode::<u16>(&codes, &bad).is_err());
        }
    }

    #[test]
    fn maps_as_mans_does() {
        assert_eq!(map(7, 7), (1, 1));
        assert_eq!(map(8, 7), (2, 1));
        assert_eq!(map(6, 7), (3, 1));
        assert_eq!(map(7 + 126, 7), (252, 1));
        assert_eq!(map(7 + 127, 7), (2, 2));
        assert_eq!(map(0, 127), (3, 2));
        assert_eq!(map(1, 127), (253, 1));
        assert_eq!(u16::centre(&[1, 2, 2]), 1);
        assert_eq!(u32::centre(&[u32::MAX; 512]), u64::from(u32::MAX));
    }

    #[test]
    fn a_constant_block_costs_two_bytes_per_lane() {
        let (codes, side) = round_trip(&[9u16; 512]);
        assert!(codes.iter().all(|&c| c == 1));
        // Centre 9, two bytes per lane: 16 one-bits.
        let mut expected = vec![9, 0, 2];
        expected.extend([0xff; 64]);
        assert_eq!(side, expected);
    }

    #[test]
    fn empty_input() {
        assert_eq!(round_trip::<u16>(&[]), (vec![], vec![]));
        assert_eq!(round_trip::<u32>(&[]), (vec![], vec![]));
    }

    #[test]
    fn adversarial_blocks_are_raw() {
        let alternating: Vec<u16> = (0..1500).map(|i| if i % 2 == 0 { 0 } else { u16::MAX }).collect();
        let (codes, side) = round_trip(&alternating);
        assert!(codes.iter().all(|&c| c == 0));
        assert_eq!(side.len(), 3 * 3 + 1500 * 2, "three raw blocks and their table");
        let wide: Vec<u32> =
            (0..1100u32).map(|i| if i % 3 == 0 { u32::MAX } else { i.wrapping_mul(0x9e37_79b9) }).collect();
        round_trip(&wide);
        let full: Vec<u16> = (0..=u16::MAX).collect();
        round_trip(&full);
        let full32: Vec<u32> = (0..70_000u32).map(|i| i.wrapping_mul(0x0101_0101).rotate_left(i % 32)).collect();
        round_trip(&full32);
    }

    #[test]
    fn one_word_blocks_are_raw() {
        let (codes, side) = round_trip(&[5u32; 513]);
        assert_eq!(codes[512], 0, "32 signal bytes for 4 raw bytes");
        assert_eq!(side.len(), 2 * 5 + 64 + 4);
    }

    #[test]
    fn corrupt_tables_and_signals_are_errors() {
        let words: Vec<u16> = (0..2000).map(|i| (i % 37) as u16 * 3).collect();
        let (codes, side) = encode(&words);
        assert!(decode::<u16>(&codes, &side[..side.len() - 1]).is_err());
        assert!(decode::<u16>(&codes[..1000], &side).is_err());
        let mut bad = side.clone();
        bad[4 * 2] = 0; // the first block claims raw
        assert!(decode::<u16>(&codes, &bad).is_err());
        let mut bad = codes.clone();
        bad[0] = 255;
        assert!(decode::<u16>(&bad, &side).is_err());
    }

    fn skewed(seed: Vec<u32>, spread: u32, base: u32) -> Vec<u32> {
        seed.into_iter().map(|s| base.wrapping_add(s % spread.max(1))).collect()
    }

    proptest! {
        #[test]
        fn round_trips_u16(seed in prop::collection::vec(any::<u32>(), 0..3000), spread in any::<u32>(), base in any::<u16>()) {
            let words: Vec<u16> = skewed(seed, spread % 70_000, u32::from(base)).into_iter().map(|v| v as u16).collect();
            round_trip(&words);
        }

        #[test]
        fn round_trips_u32(seed in prop::collection::vec(any::<u32>(), 0..3000), spread in any::<u32>(), base in any::<u32>()) {
            let words = skewed(seed, spread >> (spread % 32), base);
            round_trip(&words);
        }

        #[test]
        fn corruption_is_an_error_or_a_decode(seed in prop::collection::vec(0u32..300, 1..2000), at in any::<usize>(), v in any::<u8>(), side_or_codes in any::<bool>()) {
            let words: Vec<u16> = seed.iter().map(|&s| s as u16).collect();
            let (mut codes, mut side) = encode(&words);
            let target = if side_or_codes { &mut side } else { &mut codes };
            let i = at % target.len();
            target[i] = v;
            let _ = decode::<u16>(&codes, &side);
            let _ = decode::<u16>(&codes, &side[..at % side.len()]);
        }
    }
}
