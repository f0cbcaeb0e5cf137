//! CPU reference of ANS: rANS over bytes with dietgpu's geometry (Johnson et al.,
//! facebookresearch/dietgpu), written here from the published algorithm. One global
//! histogram, normalised to `2^prob_bits`; blocks of 4096 bytes, each one GPU warp whose lane
//! `j` encodes bytes `j, j + 32, …` into its own 32-bit state; words a round emits are stored
//! in lane order (the device's ballot order), so the device's bytes are these.

use crate::element::{concat_on_all_cores, try_vec_by_chunks};
use crate::error::{corrupt, Result};
use rayon::prelude::*;

/// Bytes per block (one warp).
pub const BLOCK: usize = 4096;
/// Interleaved states per block.
pub const LANES: usize = 32;
/// Lower bound of a state, and every state's start and end value: states stay in
/// `[2^15, 2^31)` and renormalise by one 16-bit word.
pub const STATE_LOW: u32 = 1 << 15;
/// Bytes of the probability table at the head of the segment.
pub const PROBS_BYTES: usize = 512;
/// A block's word count that marks it raw.
pub const RAW: u32 = u32::MAX;
/// Bytes of a coded block's final states.
pub const STATES_BYTES: usize = 4 * LANES;

/// Bytes of a coded block with `words` words: final states, words, zero padding to 4 bytes.
pub fn coded_len(words: usize) -> usize {
    (STATES_BYTES + 2 * words).next_multiple_of(4)
}

/// The most words a coded block of `len` bytes may hold (one more and it is stored raw);
/// `None` when even no words would not make it shorter than `len`.
pub fn max_words(len: usize) -> Option<usize> {
    // coded_len(w) = 128 + 4 · ceil(w / 2) < len.
    (len > STATES_BYTES).then(|| 2 * ((len - STATES_BYTES - 1) / 4))
}

/// Bytes of the segment's head: probabilities and one word count per block.
pub fn head_len(nblocks: usize) -> usize {
    PROBS_BYTES + 4 * nblocks
}

/// Byte counts of `data`.
pub fn histogram(data: &[u8]) -> [u64; 256] {
    data.par_chunks(1 << 20)
        .map(|c| {
            // Four tables, one per byte position mod 4: runs of one byte (the skewed codes ANS
            // gets) would otherwise wait on each increment of a single counter.
            let mut part = [[0u32; 256]; 4];
            let quads = c.chunks_exact(4);
            let mut h = [0u64; 256];
            quads.remainder().iter().for_each(|&b| h[usize::from(b)] += 1);
            // Chunks of 2^20 bytes: a u32 count cannot overflow.
            for q in quads {
                for (t, &b) in part.iter_mut().zip(q) {
                    t[usize::from(b)] += 1;
                }
            }
            for t in &part {
                h.iter_mut().zip(t).for_each(|(h, &t)| *h += u64::from(t));
            }
            h
        })
        .reduce(
            || [0u64; 256],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        )
}

/// Normalise counts (not all zero) to probabilities summing to `2^bits`: with `k` symbols
/// present and `N` bytes, a present symbol gets `1 + floor(count · (2^bits − k) / N)`, an
/// absent one 0; what remains goes to the most frequent symbol (the smallest on ties).
pub fn normalise(counts: &[u64; 256], bits: u32) -> [u32; 256] {
    let total: u64 = counts.iter().sum();
    let present = counts.iter().filter(|&&c| c > 0).count() as u64;
    let spread = (1u64 << bits) - present;
    let mut probs = [0u32; 256];
    for (p, &c) in probs.iter_mut().zip(counts) {
        if c > 0 {
            *p = (1 + (u128::from(c) * u128::from(spread) / u128::from(total)) as u64) as u32;
        }
    }
    let top = (0..256).max_by_key(|&s| (counts[s], std::cmp::Reverse(s))).expect("256 symbols");
    probs[top] += (1u32 << bits) - probs.iter().sum::<u32>();
    probs
}

/// Cumulative probabilities (exclusive prefix sums).
fn cumulative(probs: &[u32; 256]) -> [u32; 256] {
    let mut cdf = [0u32; 256];
    for s in 1..256 {
        cdf[s] = cdf[s - 1] + probs[s - 1];
    }
    cdf
}

/// How one symbol moves an encoder state: `x → (x / p) · 2^bits + x mod p + cdf`, computed as
/// `x + q · (2^bits − p) + bias` with `q = x / p` from a multiply by a fixed-point reciprocal
/// (Alverson, "Integer division using reciprocals"; the p = 1 case and the bias as in Giesen's
/// ryg_rans). For p ≥ 2, `recip = m · 2^21` with `m = ⌊2^43 / p⌋ + 1`, so the high half of
/// `x · recip` is `⌊x · m / 2^43⌋ = x / p`: x · m / 2^43 exceeds x / p by less than x / 2^43
/// < 2^-12 ≤ 1 / p for x < 2^31 and p ≤ 2^12, never enough to reach the next integer. For
/// p = 1, `recip = 2^64 − 1` gives q = x − 1 (states are at least 1), and the bias adds the
/// 2^bits − 1 that q lacks.
#[derive(Clone, Copy, Default)]
struct Coder {
    recip: u64,
    /// States at or above it emit a word first: `p · 2^(31 − bits)`.
    limit: u32,
    /// `2^bits − p`.
    comp: u32,
    /// `cdf`, plus `2^bits − 1` for p = 1.
    bias: u32,
}

impl Coder {
    /// The coders of every symbol (default for an absent one).
    fn all(probs: &[u32; 256], bits: u32) -> [Coder; 256] {
        let cdf = cumulative(probs);
        let mut coders = [Coder::default(); 256];
        for ((coder, &p), &c) in coders.iter_mut().zip(probs).zip(&cdf) {
            let (recip, bias) = match p {
                0 => continue,
                1 => (u64::MAX, c + (1 << bits) - 1),
                _ => (((1u64 << 43) / u64::from(p) + 1) << 21, c),
            };
            *coder = Coder { recip, limit: p << (31 - bits), comp: (1 << bits) - p, bias };
        }
        coders
    }

    /// The state after encoding this symbol into `x` (1 ≤ x < 2^31, below `limit`).
    #[inline(always)]
    fn step(&self, x: u32) -> u32 {
        let q = ((u128::from(x) * u128::from(self.recip)) >> 64) as u32;
        x.wrapping_add(q.wrapping_mul(self.comp)).wrapping_add(self.bias)
    }
}

/// Encode one block: its word count and bytes (final states, words, padding), or `None`
/// when that would not be shorter than the block.
fn encode_block(block: &[u8], coders: &[Coder; 256]) -> Option<(u32, Vec<u8>)> {
    let cap = max_words(block.len())?;
    let mut state = [STATE_LOW; LANES];
    // Whether a lane renormalises is data-dependent: stored unconditionally at the cursor,
    // which moves only for lanes that emit (a branch here is mispredicted half the time).
    let mut words = vec![0u16; cap + LANES];
    let mut n = 0;
    for round in block.chunks(LANES) {
        // Lanes emit in lane order: the device's ballot-ranked slots.
        for (x, &s) in state.iter_mut().zip(round) {
            let coder = &coders[usize::from(s)];
            let emit = *x >= coder.limit;
            words[n] = *x as u16;
            n += usize::from(emit);
            *x = coder.step(if emit { *x >> 16 } else { *x });
        }
        if n > cap {
            return None;
        }
    }
    words.truncate(n);
    let mut out = vec![0u8; coded_len(words.len())];
    for (o, x) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&x.to_le_bytes());
    }
    for (o, w) in out[STATES_BYTES..].chunks_exact_mut(2).zip(&words) {
        o.copy_from_slice(&w.to_le_bytes());
    }
    Some((words.len() as u32, out))
}

/// Encode `data` with `2^bits` probability precision: `[u16 probability per symbol][u32 word
/// count per block (RAW for a raw block)][blocks]`; empty for empty data.
pub fn encode(data: &[u8], bits: u32) -> Vec<u8> {
    if data.is_empty() {
        return Vec::new();
    }
    let probs = normalise(&histogram(data), bits);
    let coders = Coder::all(&probs, bits);
    let blocks: Vec<Option<(u32, Vec<u8>)>> = data.par_chunks(BLOCK).map(|b| encode_block(b, &coders)).collect();
    let mut head: Vec<u8> = probs.iter().flat_map(|&p| (p as u16).to_le_bytes()).collect();
    head.extend(blocks.iter().flat_map(|e| e.as_ref().map_or(RAW, |e| e.0).to_le_bytes()));
    let bodies = blocks.iter().zip(data.chunks(BLOCK)).map(|(e, b)| e.as_ref().map_or(b, |e| &e.1[..]));
    concat_on_all_cores(std::iter::once(head.as_slice()).chain(bodies))
}

/// The probabilities at the head of a segment: they must sum to `2^bits`.
pub fn read_probs(head: &[u8], bits: u32) -> Result<[u32; 256]> {
    let mut probs = [0u32; 256];
    for (p, b) in probs.iter_mut().zip(head.chunks_exact(2)) {
        *p = u32::from(u16::from_le_bytes([b[0], b[1]]));
    }
    let sum: u32 = probs.iter().sum();
    if sum != 1 << bits {
        return Err(corrupt!("ANS: probabilities sum to {sum}, not 2^{bits}"));
    }
    Ok(probs)
}

/// The device's decode table: for each of the `2^bits` slots, `cdf << 20 | prob << 8 | symbol`
/// (the CPU decodes with [`Slots`]).
#[cfg(feature = "cuda")]
pub fn decode_table(probs: &[u32; 256]) -> Vec<u32> {
    let cdf = cumulative(probs);
    let mut table = Vec::with_capacity(1 << 11);
    for s in 0..256 {
        table.extend((0..probs[s]).map(|_| cdf[s] << 20 | probs[s] << 8 | s as u32));
    }
    table
}

/// Where each block starts in a segment of `seg_len` bytes holding `n` bytes, from the blocks'
/// word counts (read once the head is known to lie in the segment); checks every count and
/// that the blocks fill the segment exactly. Shared with the device inverse.
pub fn block_starts(seg_len: usize, n: usize, counts: &[u32]) -> Result<Vec<u64>> {
    let mut at = head_len(counts.len());
    let mut starts = Vec::with_capacity(counts.len());
    for (b, &count) in counts.iter().enumerate() {
        let len = BLOCK.min(n - b * BLOCK);
        let size = if count == RAW {
            len
        } else if max_words(len).is_some_and(|most| count as usize <= most) {
            coded_len(count as usize)
        } else {
            return Err(corrupt!("ANS: block {b} of {len} bytes claims {count} words"));
        };
        starts.push(at as u64);
        at += size;
    }
    if at != seg_len {
        return Err(corrupt!("ANS: blocks occupy {at} bytes, the segment {seg_len}"));
    }
    Ok(starts)
}

/// The CPU decode tables of `2^bits` slots: each slot's symbol, and its step
/// `prob | (slot − cdf) << 16`, so that a state's next value is `prob · (x >> bits) + (slot −
/// cdf)` (one multiply and add; the slot's offset within its symbol is looked up, not
/// computed). Probabilities are at most 2^11 (`PROB_BITS`), so both halves fit 16 bits.
struct Slots {
    symbols: Vec<u8>,
    steps: Vec<u32>,
}

impl Slots {
    fn new(probs: &[u32; 256]) -> Self {
        let (mut symbols, mut steps) = (Vec::with_capacity(1 << 11), Vec::with_capacity(1 << 11));
        for (s, &p) in probs.iter().enumerate() {
            symbols.extend((0..p).map(|_| s as u8));
            steps.extend((0..p).map(|offset| p | offset << 16));
        }
        Slots { symbols, steps }
    }
}

/// Decode one round: each lane's symbol into `round` (lane `j` → `round[j]`), its state
/// moved back; returns the lanes whose state fell below `STATE_LOW` (bit `j` for lane `j`).
#[inline(always)]
fn decode_round<const BITS: u32>(state: &mut [u32; LANES], round: &mut [u8], symbols: &[u8], steps: &[u32]) -> u32 {
    let mask = (1u32 << BITS) - 1;
    for (x, o) in state.iter_mut().zip(round.iter_mut()) {
        let slot = (*x & mask) as usize;
        let step = steps[slot];
        *o = symbols[slot];
        *x = (step & 0xffff) * (*x >> BITS) + (step >> 16);
    }
    // Over all lanes, in a loop of its own (compares and sign masks over vectors): a lane
    // past a short last round still holds its final state, which is at least STATE_LOW.
    state.iter().enumerate().fold(0, |need, (j, &x)| need | u32::from(x < STATE_LOW) << j)
}

/// A full round's decode: [`decode_round`] or a vector form of it.
type FullRound = fn(&mut [u32; LANES], &mut [u8; LANES], &[u8], &[u32]) -> u32;

/// The fastest full-round decode this CPU runs.
fn full_round<const BITS: u32>() -> FullRound {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        // SAFETY: the CPU has SSE4.1.
        return |state, round, symbols, steps| unsafe { sse41::decode_round::<BITS>(state, round, symbols, steps) };
    }
    |state, round, symbols, steps| decode_round::<BITS>(state, round, symbols, steps)
}

/// [`decode_round`] four lanes to an SSE register: the table lookups stay scalar (SSE has no
/// gather), the state arithmetic and the below-`STATE_LOW` test (a sign mask per four lanes)
/// are vector operations. The same values as the scalar form (tested).
#[cfg(target_arch = "x86_64")]
mod sse41 {
    use super::{LANES, STATE_LOW};
    use std::arch::x86_64::*;

    #[target_feature(enable = "sse4.1")]
    pub(super) fn decode_round<const BITS: u32>(
        state: &mut [u32; LANES],
        round: &mut [u8; LANES],
        symbols: &[u8],
        steps: &[u32],
    ) -> u32 {
        let mask = (1u32 << BITS) - 1;
        let (symbols, steps) = (&symbols[..=mask as usize], &steps[..=mask as usize]);
        let (low16, low, shift) =
            (_mm_set1_epi32(0xffff), _mm_set1_epi32(STATE_LOW as i32), _mm_cvtsi32_si128(BITS as i32));
        let mut need = 0;
        for (g, (xs, os)) in state.as_chunks_mut::<4>().0.iter_mut().zip(round.as_chunks_mut::<4>().0).enumerate() {
            // SAFETY: 16 bytes of `xs`, unaligned load.
            let x = unsafe { _mm_loadu_si128(xs.as_ptr().cast()) };
            let slots = xs.map(|x| (x & mask) as usize);
            for (o, &slot) in os.iter_mut().zip(&slots) {
                *o = symbols[slot];
            }
            let step = _mm_setr_epi32(
                steps[slots[0]] as i32,
                steps[slots[1]] as i32,
                steps[slots[2]] as i32,
                steps[slots[3]] as i32,
            );
            let prob = _mm_and_si128(step, low16);
            let next = _mm_add_epi32(_mm_mullo_epi32(prob, _mm_srl_epi32(x, shift)), _mm_srli_epi32::<16>(step));
            // SAFETY: 16 bytes of `xs`, unaligned store.
            unsafe { _mm_storeu_si128(xs.as_mut_ptr().cast(), next) };
            // States stay below 2^31: a signed compare.
            let below = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmplt_epi32(next, low))) as u32;
            need |= below << (4 * g);
        }
        need
    }
}

/// [`decode_block`] at one precision.
type BlockDecode = fn(&[u8], usize, &Slots, FullRound, &mut [u8]) -> Result<()>;

/// Decode one coded block (`enc` = states, words, padding) into `out`.
fn decode_block<const BITS: u32>(
    enc: &[u8],
    words: usize,
    slots: &Slots,
    full_round: FullRound,
    out: &mut [u8],
) -> Result<()> {
    let mut state = [0u32; LANES];
    for (x, b) in state.iter_mut().zip(enc.chunks_exact(4)) {
        *x = u32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
    if state.iter().any(|&x| !(STATE_LOW..1 << 31).contains(&x)) {
        return Err(corrupt!("ANS: a final state out of range"));
    }
    let (stream, _) = enc[STATES_BYTES..STATES_BYTES + 2 * words].as_chunks::<2>();
    if enc[STATES_BYTES + 2 * words..].iter().any(|&b| b != 0) {
        return Err(corrupt!("ANS: non-zero block padding"));
    }
    // As long as the mask allows: the lookups need no bounds checks.
    let (symbols, steps) = (&slots.symbols[..1 << BITS], &slots.steps[..1 << BITS]);
    let mut pos = words;
    // The words a round's lanes read were emitted together, in lane order: the highest
    // reading lane takes the last of them. Only the lanes that read are visited (a walk over
    // the set bits, highest first: testing every lane's bit is a data-dependent branch each).
    let mut refill = |state: &mut [u32; LANES], mut readers: u32| -> Result<()> {
        while readers != 0 {
            let j = 31 - readers.leading_zeros();
            // Past the first word, `pos − 1` wraps to no word at all.
            let Some(word) = stream.get(pos.wrapping_sub(1)) else {
                return Err(corrupt!("ANS: a block reads more words than it holds"));
            };
            pos -= 1;
            let x = &mut state[j as usize];
            *x = *x << 16 | u32::from(u16::from_le_bytes(*word));
            readers ^= 1 << j;
        }
        Ok(())
    };
    // The last round (possibly partial) is decoded first.
    let (full, last) = out.as_chunks_mut::<LANES>();
    if !last.is_empty() {
        let need = decode_round::<BITS>(&mut state, last, symbols, steps);
        refill(&mut state, need)?;
    }
    for round in full.iter_mut().rev() {
        let need = full_round(&mut state, round, symbols, steps);
        refill(&mut state, need)?;
    }
    if pos != 0 || state.iter().any(|&x| x != STATE_LOW) {
        return Err(corrupt!("ANS: a block does not decode back to its initial states"));
    }
    Ok(())
}

/// Decode `n` bytes from a segment.
pub fn decode(seg: &[u8], n: usize, bits: u32) -> Result<Vec<u8>> {
    if n == 0 {
        if !seg.is_empty() {
            return Err(corrupt!("ANS: {} bytes for an empty input", seg.len()));
        }
        return Ok(Vec::new());
    }
    let nblocks = n.div_ceil(BLOCK);
    let head = head_len(nblocks);
    if head > seg.len() {
        return Err(corrupt!("ANS: {n} bytes need a {head} byte head, the segment has {}", seg.len()));
    }
    let probs = read_probs(&seg[..PROBS_BYTES], bits)?;
    let counts: Vec<u32> =
        seg[PROBS_BYTES..head].chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4"))).collect();
    let starts = block_starts(seg.len(), n, &counts)?;
    let slots = Slots::new(&probs);
    // The precision as a constant: shifts and masks by immediates in the lane loop.
    let (decode_block, full_round): (BlockDecode, FullRound) = match bits {
        9 => (decode_block::<9>, full_round::<9>()),
        10 => (decode_block::<10>, full_round::<10>()),
        11 => (decode_block::<11>, full_round::<11>()),
        _ => return Err(corrupt!("ANS: probability precision {bits} bits")),
    };
    try_vec_by_chunks(n, BLOCK, |b, o| {
        let at = starts[b] as usize;
        if counts[b] == RAW {
            o.copy_from_slice(&seg[at..at + o.len()]);
            return Ok(());
        }
        let words = counts[b] as usize;
        decode_block(&seg[at..at + coded_len(words)], words, &slots, full_round, o)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(data: &[u8], bits: u32) -> Vec<u8> {
        let e = encode(data, bits);
        assert_eq!(decode(&e, data.len(), bits).unwrap(), data);
        e
    }

    #[test]
    fn coder_steps_divide_exactly_over_every_state() {
        // Every probability of every precision; states at the low end (1.. after a word went
        // out, 2^15.. otherwise), below the limit (the largest a step gets) and around the
        // multiples of p next to it, where the reciprocal's error is largest.
        for bits in super::super::PROB_BITS {
            for p in 1..=1u32 << bits {
                let mut probs = [0u32; 256];
                (probs[3], probs[7]) = ((1 << bits) - p, p);
                let (coder, c) = (Coder::all(&probs, bits)[7], cumulative(&probs)[7]);
                let top = coder.limit - 1;
                let near_top = (0..64).flat_map(|k| {
                    let base = (top / p).saturating_sub(k) * p;
                    [base.saturating_sub(1).max(1), base, base + p - 1]
                });
                let states = (1..64).chain(STATE_LOW..STATE_LOW + 64).chain(top - 64..=top).chain(near_top);
                for x in states.filter(|&x| x <= top) {
                    assert_eq!(coder.step(x), ((x / p) << bits) + x % p + c, "x {x}, p {p}, bits {bits}");
                }
            }
        }
    }

    fn rounds_agree<const BITS: u32>(seed: u64) {
        let mut next = {
            let mut x = seed | 1;
            move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            }
        };
        let mut counts = [0u64; 256];
        counts.iter_mut().for_each(|c| *c = next() % 1000 * (next() % 3));
        counts[0] += 1;
        let slots = Slots::new(&normalise(&counts, BITS));
        for _ in 0..200 {
            let mut state = [0u32; LANES].map(|_| STATE_LOW + (next() % u64::from((1u32 << 31) - STATE_LOW)) as u32);
            let (mut vector_state, mut round, mut vector_round) = (state, [0u8; LANES], [0u8; LANES]);
            let need = decode_round::<BITS>(&mut state, &mut round, &slots.symbols, &slots.steps);
            let vector_need = full_round::<BITS>()(&mut vector_state, &mut vector_round, &slots.symbols, &slots.steps);
            assert_eq!((need, state, round), (vector_need, vector_state, vector_round));
        }
    }

    #[test]
    fn full_rounds_decode_as_the_scalar_round() {
        for seed in 0..20 {
            rounds_agree::<9>(seed);
            rounds_agree::<10>(seed);
            rounds_agree::<11>(seed);
        }
    }

    #[test]
    fn normalisation_keeps_every_present_symbol_and_sums_exactly() {
        let mut counts = [0u64; 256];
        counts[3] = 1;
        counts[7] = 1_000_000;
        counts[9] = 1_000_000;
        let p = normalise(&counts, 10);
        // k = 3: 1 + floor(c · 1021 / 2000001); the remainder goes to symbol 7 (a tie, smaller).
        assert_eq!((p[3], p[7], p[9]), (1, 1 + 510 + 1, 1 + 510));
        assert_eq!(p.iter().sum::<u32>(), 1024);
        let mut one = [0u64; 256];
        one[200] = 5;
        assert_eq!(normalise(&one, 9)[200], 512);
        assert_eq!(normalise(&[1; 256], 9), [2; 256]);
    }

    #[test]
    fn max_words_keeps_coded_blocks_shorter() {
        assert_eq!(max_words(4096), Some(1982));
        assert!(coded_len(1982) < 4096 && coded_len(1983) >= 4096);
        assert_eq!(max_words(128), None);
        assert_eq!(max_words(129), Some(0));
    }

    #[test]
    fn single_symbol_blocks_keep_their_states() {
        let e = round_trip(&[42u8; 10_000], 10);
        // Probability 2^10 never renormalises: each coded block is its 128 bytes of states.
        assert_eq!(e.len(), head_len(3) + 3 * 128);
        assert!(e[head_len(3)..].chunks_exact(4).all(|s| s == STATE_LOW.to_le_bytes()));
    }

    #[test]
    fn empty_and_tiny_inputs() {
        assert!(round_trip(&[], 10).is_empty());
        let e = round_trip(&[1, 2, 3], 11);
        assert_eq!(e.len(), head_len(1) + 3, "raw");
        assert_eq!(&e[PROBS_BYTES..PROBS_BYTES + 4], &RAW.to_le_bytes());
    }

    #[test]
    fn uniform_bytes_are_raw() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(0x9e37_79b9) >> 24) as u8).collect();
        let e = round_trip(&data, 9);
        assert_eq!(e.len(), head_len(5) + data.len());
    }

    #[test]
    fn corrupt_heads_and_blocks_are_errors() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i % 7) as u8 * (i % 3) as u8).collect();
        let e = encode(&data, 10);
        assert!(decode(&e, data.len(), 11).is_err());
        assert!(decode(&e, data.len() + 1, 10).is_err());
        assert!(decode(&e[..e.len() - 2], data.len(), 10).is_err());
        let mut bad = e.clone();
        bad[PROBS_BYTES] ^= 1; // a word count
        assert!(decode(&bad, data.len(), 10).is_err());
        let mut bad = e.clone();
        bad[head_len(3) + 5] ^= 0x40; // a final state
        assert!(decode(&bad, data.len(), 10).is_err());
    }

    fn skewed(seed: Vec<u8>, spread: u8) -> Vec<u8> {
        seed.into_iter().map(|s| if s < spread { s } else { s % 3 }).collect()
    }

    proptest! {
        #[test]
        fn round_trips(seed in prop::collection::vec(any::<u8>(), 0..20_000), spread in any::<u8>(), bits in 9u32..12) {
            round_trip(&skewed(seed, spread), bits);
        }

        #[test]
        fn corruption_is_an_error_or_a_decode(seed in prop::collection::vec(any::<u8>(), 1..9000), at in any::<usize>(), v in any::<u8>()) {
            let data = skewed(seed, 4);
            let mut e = encode(&data, 10);
            let i = at % e.len();
            e[i] = v;
            let _ = decode(&e, data.len(), 10);
            let _ = decode(&e[..i], data.len(), 10);
        }
    }
}
