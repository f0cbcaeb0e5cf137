//! CPU reference of the Huffman stage: a global histogram, the book (book.rs), then chunks of
//! [`CHUNK`] symbols coded independently, each padded to whole 32-bit words, so a decoder
//! can start every chunk at once from the word counts in front of the payload.
//!
//! Segment: `book ‖ u32 words per chunk ‖ payload words` (little-endian words; in each word
//! the first bit is the most significant). A symbol `s < bklen` is the code of entry `s`; a
//! symbol `s ≥ bklen` is the code of the escape entry `bklen` followed by `s` in the symbol
//! type's full width.

use super::book::{Book, DecodeTables, MAX_LEN};
use crate::element::zeroed_vec;
use crate::error::{corrupt, Result};
use rayon::prelude::*;

/// Symbols per chunk: the unit a device thread decodes.
pub const CHUNK: usize = 4096;

/// A symbol type the stage codes: u8, u16 or u32.
pub trait Symbol: Copy + Send + Sync + bytemuck::Zeroable + 'static {
    /// Width in bits, as escaped values are written.
    const BITS: u32;
    fn value(self) -> u32;
    /// From a value below `2^BITS`.
    fn from_value(v: u32) -> Self;
}

macro_rules! symbol {
    ($t:ty) => {
        impl Symbol for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn value(self) -> u32 {
                u32::from(self)
            }
            #[inline]
            fn from_value(v: u32) -> Self {
                v as $t
            }
        }
    };
}
symbol!(u8);
symbol!(u16);
symbol!(u32);

/// Counts of entries `0..=bklen` (symbols ≥ bklen count as the escape entry).
pub fn histogram<S: Symbol>(data: &[S], bklen: u32) -> Vec<u64> {
    let entries = bklen as usize + 1;
    data.par_chunks(1 << 16)
        .fold(
            || vec![0u64; entries],
            |mut h, c| {
                // Four tables, one per symbol position mod 4: runs of one symbol (the common
                // case of quantization codes) would otherwise wait on each increment of a single
                // counter to land before the next.
                let mut part = [(); 4].map(|_| vec![0u32; entries]);
                let quads = c.chunks_exact(4);
                for &s in quads.remainder() {
                    h[s.value().min(bklen) as usize] += 1;
                }
                // Chunks of 2^16 symbols: a u32 count cannot overflow.
                for q in quads {
                    for (t, &s) in part.iter_mut().zip(q) {
                        t[s.value().min(bklen) as usize] += 1;
                    }
                }
                for t in &part {
                    h.iter_mut().zip(t).for_each(|(h, &t)| *h += u64::from(t));
                }
                h
            },
        )
        .reduce(|| vec![0u64; entries], |a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect())
}

/// Most payload words a chunk of `len` symbols can take (every symbol escaped).
pub fn max_words(len: usize, bits: u32) -> usize {
    (len * (MAX_LEN + bits as usize)).div_ceil(32)
}

/// Bits appended most significant first into 32-bit words, in a buffer sized for the worst
/// case (so no capacity checks) that is reused from chunk to chunk.
struct BitWriter<'a> {
    words: &'a mut [u32],
    /// Whole words written.
    n: usize,
    acc: u64,
    bits: u32,
}

impl BitWriter<'_> {
    /// Append the `len` (≤ 32) low bits of `v`. Between calls fewer than 32 bits wait in `acc`
    /// (bits above them are shifted out or cut by the word cast). Branch-free: the word at the
    /// cursor is always stored and the cursor moves on only once it is whole (when words end
    /// is data-dependent).
    #[inline]
    fn push(&mut self, v: u32, len: u32) {
        self.acc = self.acc << len | u64::from(v);
        self.bits += len;
        let full = self.bits >= 32;
        self.bits -= 32 * u32::from(full);
        self.words[self.n] = (self.acc >> self.bits) as u32;
        self.n += usize::from(full);
    }

    /// The words, the last one padded with zero bits.
    fn finish(self) -> Vec<u32> {
        let mut n = self.n;
        if self.bits > 0 {
            self.words[n] = (self.acc << (32 - self.bits)) as u32;
            n += 1;
        }
        self.words[..n].to_vec()
    }
}

/// Encode table: `code << 8 | length` per entry.
fn encode_table(book: &Book) -> Vec<u32> {
    book.codes.iter().zip(&book.lengths).map(|(&c, &l)| c << 8 | u32::from(l)).collect()
}

/// The symbol whose code is the single bit 0, if any (not the escape): the most frequent one
/// of a skewed book, whose runs [`encode_chunk`] writes eight at a time.
fn zero_bit_symbol(table: &[u32], bklen: u32) -> Option<u32> {
    table[..bklen as usize].iter().position(|&e| e == 1).map(|s| s as u32)
}

/// One chunk's words; `scratch` is any buffer, grown to the chunk's worst case.
fn encode_chunk<S: Symbol>(
    chunk: &[S],
    table: &[u32],
    bklen: u32,
    zero: Option<u32>,
    scratch: &mut Vec<u32>,
) -> Vec<u32> {
    // One more than the most words: the last store may land one past the last whole word.
    let most = max_words(chunk.len(), S::BITS) + 1;
    if scratch.len() < most {
        scratch.resize(most, 0);
    }
    let mut w = BitWriter { words: scratch, n: 0, acc: 0, bits: 0 };
    let one = |w: &mut BitWriter, s: S| {
        let v = s.value();
        let e = table[v.min(bklen) as usize];
        w.push(e >> 8, e & 0xff);
        if v >= bklen {
            w.push(v, S::BITS);
        }
    };
    let Some(z) = zero else {
        chunk.iter().for_each(|&s| one(&mut w, s));
        return w.finish();
    };
    // Eight symbols of the 1-bit code 0 are eight zero bits: one push instead of eight (the
    // runs of exact predictions at loose bounds).
    let (groups, rest) = chunk.as_chunks::<8>();
    for g in groups {
        if g.iter().all(|s| s.value() == z) {
            w.push(0, 8);
        } else {
            g.iter().for_each(|&s| one(&mut w, s));
        }
    }
    rest.iter().for_each(|&s| one(&mut w, s));
    w.finish()
}

/// Encode `data` over entries `0..=bklen` into a segment.
pub fn encode<S: Symbol>(data: &[S], bklen: u32) -> Vec<u8> {
    let book = Book::from_counts(&histogram(data, bklen));
    let table = encode_table(&book);
    let zero = zero_bit_symbol(&table, bklen);
    let chunks: Vec<Vec<u32>> =
        data.par_chunks(CHUNK).map_init(Vec::new, |scratch, c| encode_chunk(c, &table, bklen, zero, scratch)).collect();
    let payload: usize = chunks.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(8 + table.len() + 4 * (chunks.len() + payload));
    book.write(&mut out);
    for c in &chunks {
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
    }
    for w in chunks.iter().flatten() {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

/// One chunk's payload: first word (from the payload's start) and word count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSpan {
    pub at: usize,
    pub words: usize,
}

/// Validate the word-count table that follows a book of `book_len` bytes in a segment of
/// `seg_len` bytes holding `n` symbols, before anything is allocated: the table must lie in
/// the segment, no chunk may exceed its most words, and the chunks must fill the rest of the
/// segment exactly. `table(k)` reads the k counts, asked only once they are known to lie in
/// the segment. Shared with the device inverse.
pub fn chunk_spans(
    seg_len: usize,
    book_len: usize,
    n: usize,
    bits: u32,
    table: impl FnOnce(usize) -> Result<Vec<u32>>,
) -> Result<Vec<ChunkSpan>> {
    let chunks = n.div_ceil(CHUNK);
    let rest = seg_len - book_len;
    if chunks > rest / 4 {
        return Err(corrupt!("Huffman: {n} symbols need a table longer than the {rest} bytes left"));
    }
    let counts = table(chunks)?;
    let mut spans = Vec::with_capacity(chunks);
    let mut at = 0usize;
    for (c, &words) in counts.iter().enumerate() {
        let words = words as usize;
        if words > max_words(CHUNK.min(n - c * CHUNK), bits) {
            return Err(corrupt!("Huffman: chunk {c} claims {words} words"));
        }
        spans.push(ChunkSpan { at, words });
        at += words;
    }
    if 4 * (chunks + at) != rest {
        return Err(corrupt!(
            "Huffman: chunks occupy {} bytes, the segment has {rest} after its book",
            4 * (chunks + at)
        ));
    }
    Ok(spans)
}

/// Bits read most significant first from 32-bit words; past the last word it reads zeros
/// (the caller checks afterwards that no bit beyond the chunk was used).
struct BitReader<'a> {
    words: &'a [u32],
    next: usize,
    buf: u64,
    have: u32,
}

impl BitReader<'_> {
    /// At least 33 bits in `buf` (a code of ≤ 20 bits, or a 32-bit escaped value).
    #[inline]
    fn refill(&mut self) {
        while self.have <= 32 {
            let w = self.words.get(self.next).copied().unwrap_or(0);
            self.buf |= u64::from(w) << (32 - self.have);
            self.have += 32;
            self.next += 1;
        }
    }

    #[inline]
    fn peek(&self, bits: u32) -> u32 {
        (self.buf >> (64 - bits)) as u32
    }

    #[inline]
    fn skip(&mut self, bits: u32) {
        self.buf <<= bits;
        self.have -= bits;
    }
}

impl<'a> BitReader<'a> {
    fn new(words: &'a [u32]) -> Self {
        BitReader { words, next: 0, buf: 0, have: 0 }
    }

    /// The next symbol. An escaped value that has a code of its own is marked in `bad` (and
    /// reported by [`BitReader::finish`]), keeping the loop free of error returns.
    #[inline(always)]
    fn symbol<S: Symbol>(&mut self, tables: &DecodeTables, bklen: u32, bad: &mut bool) -> S {
        self.refill();
        let (e, len) = tables.lookup(self.peek(MAX_LEN as u32));
        self.skip(len);
        if e != bklen {
            return S::from_value(e);
        }
        self.refill();
        let v = self.peek(S::BITS);
        self.skip(S::BITS);
        *bad |= v < bklen;
        S::from_value(v)
    }

    /// Exactly the words the bits need, and zero padding: one encoding per chunk.
    fn finish(&self, bad: bool) -> Result<()> {
        if bad {
            return Err(corrupt!("Huffman: an escaped value has a code of its own"));
        }
        let used = 32 * self.next - self.have as usize;
        let pad = (32 - used % 32) % 32;
        let last_ok = self.words.last().is_none_or(|&w| pad == 0 || w & ((1u32 << pad) - 1) == 0);
        if used.div_ceil(32) != self.words.len() || !last_ok {
            return Err(corrupt!("Huffman: a chunk's {} words do not hold exactly its {used} bits", self.words.len()));
        }
        Ok(())
    }
}

fn decode_chunk<S: Symbol>(words: &[u32], out: &mut [S], tables: &DecodeTables, bklen: u32) -> Result<()> {
    let (mut r, mut bad) = (BitReader::new(words), false);
    for o in out.iter_mut() {
        *o = r.symbol(tables, bklen, &mut bad);
    }
    r.finish(bad)
}

/// Whole chunks decoded side by side. Within a chunk each code's length says where the next
/// one starts, so one chunk at a time waits on every table lookup; independent chunks in one
/// loop fill those waits.
const INTERLEAVE: usize = 4;

/// Decode [`INTERLEAVE`] whole chunks (`out` holds exactly their symbols) in one loop.
fn decode_interleaved<S: Symbol>(
    words: [&[u32]; INTERLEAVE],
    out: &mut [S],
    tables: &DecodeTables,
    bklen: u32,
) -> Result<()> {
    let (mut r, mut bad) = (words.map(BitReader::new), false);
    let (o0, rest) = out.split_at_mut(CHUNK);
    let (o1, rest) = rest.split_at_mut(CHUNK);
    let (o2, o3) = rest.split_at_mut(CHUNK);
    for (((a, b), c), d) in o0.iter_mut().zip(o1.iter_mut()).zip(o2.iter_mut()).zip(o3.iter_mut()) {
        *a = r[0].symbol(tables, bklen, &mut bad);
        *b = r[1].symbol(tables, bklen, &mut bad);
        *c = r[2].symbol(tables, bklen, &mut bad);
        *d = r[3].symbol(tables, bklen, &mut bad);
    }
    r.iter().try_for_each(|r| r.finish(bad))
}

/// Decode a segment of `n` symbols over entries `0..=bklen`.
pub fn decode<S: Symbol>(seg: &[u8], n: usize, bklen: u32) -> Result<Vec<S>> {
    let (book, book_len) = Book::read(seg, bklen, n as u64)?;
    let spans = chunk_spans(seg.len(), book_len, n, S::BITS, |chunks| Ok(words_at(seg, book_len, chunks)))?;
    let payload = words_at(seg, book_len + 4 * spans.len(), (seg.len() - book_len) / 4 - spans.len());
    let tables = DecodeTables::new(&book);
    let mut out = zeroed_vec::<S>(n);
    let words = |s: &ChunkSpan| &payload[s.at..s.at + s.words];
    out.par_chunks_mut(CHUNK * INTERLEAVE).zip(spans.par_chunks(INTERLEAVE)).try_for_each(|(o, group)| {
        if o.len() == CHUNK * INTERLEAVE {
            let [a, b, c, d] = group else { unreachable!("a group of whole chunks has INTERLEAVE spans") };
            return decode_interleaved([words(a), words(b), words(c), words(d)], o, &tables, bklen);
        }
        o.chunks_mut(CHUNK).zip(group).try_for_each(|(o, s)| decode_chunk(words(s), o, &tables, bklen))
    })?;
    Ok(out)
}

/// `count` little-endian u32 words of `seg` from byte `at` (in bounds: checked by the caller).
fn words_at(seg: &[u8], at: usize, count: usize) -> Vec<u32> {
    seg[at..at + 4 * count].chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_and_single_symbol_inputs() {
        let e = encode::<u16>(&[], 1024);
        assert_eq!(e, [0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode::<u16>(&e, 0, 1024).unwrap(), Vec::<u16>::new());
        let data = vec![512u16; 10_000];
        let e = encode(&data, 1024);
        assert_eq!(e.len(), 8 + 4 * 3, "book, three word counts of 0, no payload");
        assert_eq!(decode::<u16>(&e, data.len(), 1024).unwrap(), data);
        // One distinct symbol above bklen: the escape costs no bits, the value its width.
        let data = vec![70_000u32; 5];
        let e = encode(&data, 16);
        assert_eq!(e.len(), 8 + 4 + 4 * 5);
        assert_eq!(decode::<u32>(&e, 5, 16).unwrap(), data);
    }

    /// Runs of the 1-bit code 0 written eight at a time give the words of one at a time.
    #[test]
    fn zero_runs_are_written_as_single_symbols_are() {
        let data: Vec<u16> = (0..5000u32).map(|i| if (i / 13) % 3 == 0 { (i % 7) as u16 } else { 3 }).collect();
        let table = encode_table(&Book::from_counts(&histogram(&data, 16)));
        let zero = zero_bit_symbol(&table, 16);
        assert_eq!(zero, Some(3));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        assert_eq!(encode_chunk(&data, &table, 16, zero, &mut a), encode_chunk(&data, &table, 16, None, &mut b));
    }

    #[test]
    fn bits_fill_words_most_significant_first() {
        // Entries 0..=3 with counts 2, 1, 1, 0 (no escape): codes 0, 10, 11.
        let e = encode::<u8>(&[1, 0, 2, 0], 3);
        assert_eq!(&e[..16], &[0, 0, 0, 0, 3, 0, 0, 0, 1, 2, 2, 0, 1, 0, 0, 0], "book, one chunk of one word");
        assert_eq!(&e[16..], &[0, 0, 0, 0b1001_1000], "10 0 11 0, then zero padding");
    }

    #[test]
    fn truncation_and_trailing_bytes_are_errors() {
        let data: Vec<u16> = (0..9000u32).map(|i| (i * i % 37) as u16).collect();
        let e = encode(&data, 64);
        for cut in 0..e.len() {
            assert!(decode::<u16>(&e[..cut], data.len(), 64).is_err(), "cut {cut}");
        }
        let mut longer = e.clone();
        longer.extend_from_slice(&[0; 4]);
        assert!(decode::<u16>(&longer, data.len(), 64).is_err());
    }

    #[test]
    fn an_escaped_value_with_a_code_is_an_error_in_every_chunk() {
        // One distinct symbol above bklen: each is its 16-bit value, two per word. Five chunks:
        // four decoded side by side, one alone.
        let data = vec![5000u16; 5 * CHUNK];
        let e = encode(&data, 16);
        assert_eq!(decode::<u16>(&e, data.len(), 16).unwrap(), data);
        let payload = 8 + 4 * 5;
        for chunk in 0..5 {
            let mut bad = e.clone();
            // The first symbol of the chunk is the high half of its first word.
            let at = payload + 4 * (chunk * CHUNK / 2 + 7) + 2;
            bad[at..at + 2].copy_from_slice(&3u16.to_le_bytes());
            let err = decode::<u16>(&bad, data.len(), 16).unwrap_err().to_string();
            assert!(err.contains("escaped value"), "chunk {chunk}: {err}");
        }
    }

    fn skewed(seed: Vec<u32>, spread: u32, mask: u32) -> Vec<u32> {
        seed.into_iter().map(|r| (512 + (r % 7).pow(3) * (r % spread) / 40) & mask).collect()
    }

    fn check<S: Symbol + std::fmt::Debug + PartialEq>(
        data: &[S],
        bklen: u32,
    ) -> std::result::Result<(), TestCaseError> {
        let e = encode(data, bklen);
        prop_assert_eq!(decode::<S>(&e, data.len(), bklen).unwrap(), data.to_vec());
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_all_widths(
            seed in prop::collection::vec(any::<u32>(), 0..20_000), spread in 1u32..100_000, bklen in 1u32..=4096,
        ) {
            let data = skewed(seed.clone(), spread, u32::MAX);
            check(&data, bklen)?;
            check(&data.iter().map(|&v| v as u16).collect::<Vec<_>>(), bklen)?;
            check(&data.iter().map(|&v| v as u8).collect::<Vec<_>>(), bklen.min(256))?;
            check(&seed, bklen)?;
        }

        #[test]
        fn corruption_is_an_error_or_a_decode(data in prop::collection::vec(0u16..40, 1..10_000), at in any::<usize>(), v in any::<u8>()) {
            let mut e = encode(&data, 32);
            let i = at % e.len();
            e[i] = v;
            let _ = decode::<u16>(&e, data.len(), 32);
            let _ = decode::<u16>(&e[..i], data.len(), 32);
        }
    }
}
