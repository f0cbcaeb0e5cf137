//! CPU reference of the Huffman stage: a global histogram, the book (book.rs), then chunks of
//! [`CHUNK`] symbols coded independently, each padded to whole 32-bit words, so a decoder
//! can start every chunk at once from the word counts in front of the payload.
//!
//! Segment: `book ‖ u32 words per chunk ‖ payload words` (little-endian words; in each word
//! the first bit is the most significant). A symbol `s < bklen` is the code of entry `s`; a
//! symbol `s ≥ bklen` is the code of the escape entry `bklen` followed by `s` in the symbol
//! type's full width.

use super::book::{Book, DecodeTables, MAX_LEN, TABLE_BITS};
use crate::element::{concat_on_all_cores, try_vec_by_chunks};
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
    let Some(z) = zero else {
        push_pairs(&mut w, table, bklen, chunk);
        return w.finish();
    };
    // Eight symbols of the 1-bit code 0 are eight zero bits: one push instead of eight (the
    // runs of exact predictions at loose bounds).
    let (groups, rest) = chunk.as_chunks::<8>();
    for g in groups {
        if g.iter().all(|s| s.value() == z) {
            w.push(0, 8);
        } else {
            push_pairs(&mut w, table, bklen, g);
        }
    }
    push_pairs(&mut w, table, bklen, rest);
    w.finish()
}

// The pushes of [`encode_chunk`] are functions forced inline: as closures LLVM kept the pair
// one out of line, a call with its register saves per two symbols (a third of the Huffman
// encode's samples in a one-thread `interp` compress of ncep_hgt500).

/// One symbol's code, and its value in full after the escape's.
#[inline(always)]
fn push_one<S: Symbol>(w: &mut BitWriter, table: &[u32], bklen: u32, s: S) {
    let v = s.value();
    let e = table[v.min(bklen) as usize];
    w.push(e >> 8, e & 0xff);
    if v >= bklen {
        w.push(v, S::BITS);
    }
}

/// Two codes that fit 32 bits together go in one push: the pushes are one dependency chain
/// (the accumulator and the cursor), so this halves its length for the short codes that
/// most symbols have.
#[inline(always)]
fn push_pair<S: Symbol>(w: &mut BitWriter, table: &[u32], bklen: u32, a: S, b: S) {
    let (va, vb) = (a.value(), b.value());
    if va < bklen && vb < bklen {
        let (ea, eb) = (table[va as usize], table[vb as usize]);
        let (la, lb) = (ea & 0xff, eb & 0xff);
        if la + lb <= 32 {
            w.push((ea >> 8) << lb | eb >> 8, la + lb);
            return;
        }
    }
    push_one(w, table, bklen, a);
    push_one(w, table, bklen, b);
}

/// The symbols two at a time, then the last one if odd.
#[inline(always)]
fn push_pairs<S: Symbol>(w: &mut BitWriter, table: &[u32], bklen: u32, symbols: &[S]) {
    let (twos, rest) = symbols.as_chunks::<2>();
    for &[a, b] in twos {
        push_pair(w, table, bklen, a, b);
    }
    for &s in rest {
        push_one(w, table, bklen, s);
    }
}

/// Encode `data` over entries `0..=bklen` into a segment.
pub fn encode<S: Symbol>(data: &[S], bklen: u32) -> Vec<u8> {
    let book = Book::from_counts(&histogram(data, bklen));
    let table = encode_table(&book);
    let zero = zero_bit_symbol(&table, bklen);
    // Each chunk's words in little-endian order where they were made, so that the payload is
    // joined as bytes on every core.
    let chunks: Vec<Vec<u32>> = data
        .par_chunks(CHUNK)
        .map_init(Vec::new, |scratch, c| {
            let mut words = encode_chunk(c, &table, bklen, zero, scratch);
            words.iter_mut().for_each(|w| *w = w.to_le());
            words
        })
        .collect();
    let mut head = Vec::with_capacity(8 + table.len() + 4 * chunks.len());
    book.write(&mut head);
    head.extend(chunks.iter().flat_map(|c| (c.len() as u32).to_le_bytes()));
    let payload = chunks.iter().map(|c| bytemuck::cast_slice::<u32, u8>(c));
    concat_on_all_cores(std::iter::once(head.as_slice()).chain(payload))
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

/// The 64 bits of the payload `p` from bit `bit` on (most significant first), of which at
/// least the top 33 are the payload's. `p` ends in two zero words, and a position past them
/// (only a corrupted chunk consumes that far) reads them: its check fails afterwards.
#[inline(always)]
fn bits_at(p: &[u32], bit: usize) -> u64 {
    let i = (bit / 32).min(p.len() - 2);
    (u64::from(p[i]) << 32 | u64::from(p[i + 1])) << (bit % 32)
}

/// Where a chunk's decode stands: its next bit in the payload, its next symbol in the
/// output and the end of its symbols there.
struct Cursor {
    bit: usize,
    at: usize,
    end: usize,
}

impl Cursor {
    fn new(span: &ChunkSpan, at: usize, end: usize) -> Self {
        Cursor { bit: 32 * span.at, at, end }
    }

    /// The next symbol, one code at a time. An escaped value that has a code of its own is
    /// marked in `bad` (and reported by [`Cursor::finish`]), keeping the loop free of error
    /// returns.
    #[inline(always)]
    fn symbol<S: Symbol>(&mut self, p: &[u32], t: &CpuTables<S>, out: &mut [S], bad: &mut bool) {
        let (e, len) = t.lookup((bits_at(p, self.bit) >> (64 - MAX_LEN)) as u32);
        self.bit += len as usize;
        let mut v = e;
        if e == t.bklen {
            v = (bits_at(p, self.bit) >> (64 - S::BITS)) as u32;
            self.bit += S::BITS as usize;
            *bad |= v < t.bklen;
        }
        out[self.at] = S::from_value(v);
        self.at += 1;
    }

    /// Whether [`Cursor::step`] has room for a whole run.
    #[inline(always)]
    fn has_room(&self) -> bool {
        self.at + RUN <= self.end
    }

    /// One lookup: the window's run of symbols (all [`RUN`] stored, its count kept), or one
    /// long or escaped code; or, where the code 0 is one bit and the next 32 bits are zero,
    /// 32 of its symbols. Needs [`Cursor::has_room`].
    #[inline(always)]
    fn step<S: Symbol>(&mut self, p: &[u32], t: &CpuTables<S>, out: &mut [S], bad: &mut bool) {
        let bits = bits_at(p, self.bit);
        if let Some(zero) = t.zero {
            // 32 zero bits: 32 symbols of the code 0, the runs of exact predictions.
            if bits >> 32 == 0 && self.at + 32 <= self.end {
                out[self.at..self.at + 32].fill(zero);
                self.at += 32;
                self.bit += 32;
                return;
            }
        }
        let window = (bits >> (64 - TABLE_BITS)) as usize;
        let cl = usize::from(t.count_len[window]);
        if cl & 15 == 0 {
            return self.symbol(p, t, out, bad);
        }
        out[self.at..self.at + RUN].copy_from_slice(&t.run[window]);
        self.at += cl & 15;
        self.bit += cl >> 4;
    }

    /// The symbols after the last whole run (no room left), one code at a time; then the
    /// chunk's check: exactly the words the bits need, and zero padding (one encoding per
    /// chunk).
    fn finish<S: Symbol>(mut self, p: &[u32], span: &ChunkSpan, t: &CpuTables<S>, out: &mut [S]) -> Result<()> {
        let mut bad = false;
        while self.at < self.end {
            self.symbol(p, t, out, &mut bad);
        }
        if bad {
            return Err(corrupt!("Huffman: an escaped value has a code of its own"));
        }
        let used = self.bit - 32 * span.at;
        let pad = (32 - used % 32) % 32;
        let words = &p[span.at..span.at + span.words];
        let last_ok = words.last().is_none_or(|&w| pad == 0 || w & ((1u32 << pad) - 1) == 0);
        if used.div_ceil(32) != span.words || !last_ok {
            return Err(corrupt!("Huffman: a chunk's {} words do not hold exactly its {used} bits", span.words));
        }
        Ok(())
    }
}

/// Symbols one lookup of [`CpuTables`] yields at most.
const RUN: usize = 4;

/// Bits of the second-level window of [`CpuTables`]. Its table has an entry per window the
/// codes longer than [`TABLE_BITS`] take, at most 4 per such code (each takes at most 2^-12
/// of the code space), so never more than 4 per symbol decoded.
const LONG_BITS: usize = 14;

/// The CPU decoder's tables. Per [`TABLE_BITS`]-bit window, the codes that lie wholly inside
/// it, up to [`RUN`] of them and none after an escape: their symbols, stored together so a
/// lookup writes them with one store, and their count and total length. Quantization codes
/// are mostly 1 to 4 bits, so one lookup (whose latency every later code waits on) yields
/// several symbols instead of one. Codes longer than the window up to [`LONG_BITS`] (most of
/// them at tight bounds) come from a second table; longer ones find their length by
/// comparison with the canonical code's range ends instead of a search.
struct CpuTables<S> {
    /// Per window: its first [`RUN`] symbols (those beyond the count are any value).
    run: Vec<[S; RUN]>,
    /// Per window: symbol count (0: the first code is longer than the window, or the escape)
    /// in bits 0..4, their total length above.
    count_len: Vec<u8>,
    /// The first-level table, for the single-symbol path (book.rs).
    first: Vec<u32>,
    /// Per [`LONG_BITS`]-bit window from `long_start` on (where the codes longer than
    /// [`TABLE_BITS`] begin): `entry << 8 | length` when a code of at most LONG_BITS bits
    /// matches, else 0.
    long: Vec<u32>,
    long_start: u32,
    /// The symbol of the 1-bit code 0, if any (not the escape): at loose bounds most symbols
    /// are this one, in long runs.
    zero: Option<S>,
    /// Per length l: where the codes of length ≤ l end, left-justified in [`MAX_LEN`] bits
    /// (canonical codes ascend with their length, so a window's code length is the least l
    /// whose end lies above it).
    ends: [u32; MAX_LEN + 1],
    /// Per length l: the entry index in `sorted` of the l-bit code 0 (wrapping), so a code c
    /// of length l is entry `sorted[base[l] + c]`.
    base: [u32; MAX_LEN + 1],
    sorted: Vec<u16>,
    bklen: u32,
}

impl<S: Symbol> CpuTables<S> {
    fn new(book: &Book, bklen: u32) -> Self {
        let t = DecodeTables::new(book);
        let mut ends = [0u32; MAX_LEN + 1];
        let mut base = [0u32; MAX_LEN + 1];
        for l in 1..=MAX_LEN {
            ends[l] = ends[l - 1] + (t.count[l] << (MAX_LEN - l));
            base[l] = t.offset[l].wrapping_sub(ends[l - 1] >> (MAX_LEN - l));
        }
        let long_start = ends[TABLE_BITS] >> (MAX_LEN - LONG_BITS);
        let mut long = vec![0u32; ((ends[MAX_LEN] >> (MAX_LEN - LONG_BITS)) - long_start) as usize];
        for l in TABLE_BITS + 1..=LONG_BITS {
            let first_code = ends[l - 1] >> (MAX_LEN - l);
            for k in 0..t.count[l] {
                let entry = u32::from(t.sorted[(t.offset[l] + k) as usize]);
                let at = (((first_code + k) << (LONG_BITS - l)) - long_start) as usize;
                long[at..at + (1 << (LONG_BITS - l))].fill(entry << 8 | l as u32);
            }
        }
        let none = S::from_value(0);
        let (mut run, mut count_len) = (vec![[none; RUN]; 1 << TABLE_BITS], vec![0u8; 1 << TABLE_BITS]);
        for (window, (syms, cl)) in run.iter_mut().zip(&mut count_len).enumerate() {
            let (mut used, mut k) = (0, 0);
            while k < RUN {
                // The window's bits after the codes taken: TABLE_BITS − used of them are known.
                let e = t.table[(window << used) & ((1 << TABLE_BITS) - 1)];
                let (entry, len) = ((e >> 8) as usize, (e & 0x7f) as usize);
                if e == 0 || entry == bklen as usize || used + len > TABLE_BITS {
                    break;
                }
                syms[k] = S::from_value(entry as u32);
                used += len;
                k += 1;
            }
            *cl = (k | used << 4) as u8;
        }
        let zero = (t.table[0] & 0x7f == 1 && t.table[0] >> 8 != bklen).then(|| S::from_value(t.table[0] >> 8));
        CpuTables { run, count_len, first: t.table, long, long_start, zero, ends, base, sorted: t.sorted, bklen }
    }

    /// The entry and length of the code at the top of `window` (its next [`MAX_LEN`] bits).
    #[inline(always)]
    fn lookup(&self, window: u32) -> (u32, u32) {
        let e = self.first[(window >> (MAX_LEN - TABLE_BITS)) as usize];
        if e != 0 {
            return (e >> 8, e & 0x7f);
        }
        // A code longer than TABLE_BITS: the window lies at or above `long_start`.
        let e = self.long[((window >> (MAX_LEN - LONG_BITS)) - self.long_start) as usize];
        if e != 0 {
            return (e >> 8, e & 0xff);
        }
        self.lookup_longest(window)
    }

    /// A code longer than [`LONG_BITS`]: its length counted from the range ends without a
    /// branch (a search mispredicted once per long code), kept out of the inlined loops.
    #[cold]
    #[inline(never)]
    fn lookup_longest(&self, window: u32) -> (u32, u32) {
        let len =
            LONG_BITS + 1 + self.ends[LONG_BITS + 1..MAX_LEN].iter().map(|&e| usize::from(window >= e)).sum::<usize>();
        let code = window >> (MAX_LEN - len);
        (u32::from(self.sorted[self.base[len].wrapping_add(code) as usize]), len as u32)
    }
}

/// Chunks decoded side by side. Within a chunk each lookup's lengths say where the next one
/// starts, so one chunk at a time waits on every table lookup; independent chunks in one
/// loop fill those waits.
const INTERLEAVE: usize = 4;

/// Decode the chunks `spans` (at most [`INTERLEAVE`]; `out` holds exactly their symbols):
/// side by side while every one has room for a whole run, again without those that have
/// none left (chunks with more short codes finish their runs sooner), then each to its end.
fn decode_group<S: Symbol>(p: &[u32], spans: &[ChunkSpan], out: &mut [S], t: &CpuTables<S>) -> Result<()> {
    let mut live: Vec<(Cursor, &ChunkSpan)> = spans
        .iter()
        .enumerate()
        .map(|(k, s)| (Cursor::new(s, k * CHUNK, (k * CHUNK + CHUNK).min(out.len())), s))
        .collect();
    let mut ended = Vec::with_capacity(live.len());
    let mut bad = false;
    macro_rules! side_by_side {
        ($($c:ident),+) => {
            while $($c.has_room())&&+ {
                $($c.step(p, t, out, &mut bad);)+
            }
        };
    }
    loop {
        match &mut live[..] {
            [] => break,
            [(a, _)] => side_by_side!(a),
            [(a, _), (b, _)] => side_by_side!(a, b),
            [(a, _), (b, _), (c, _)] => side_by_side!(a, b, c),
            [(a, _), (b, _), (c, _), (d, _), ..] => side_by_side!(a, b, c, d),
        }
        let (room, none): (Vec<_>, Vec<_>) = live.into_iter().partition(|(c, _)| c.has_room());
        live = room;
        ended.extend(none);
    }
    if bad {
        return Err(corrupt!("Huffman: an escaped value has a code of its own"));
    }
    ended.into_iter().try_for_each(|(c, s)| c.finish(p, s, t, out))
}

/// Decode a segment of `n` symbols over entries `0..=bklen`.
pub fn decode<S: Symbol>(seg: &[u8], n: usize, bklen: u32) -> Result<Vec<S>> {
    let (book, book_len) = Book::read(seg, bklen, n as u64)?;
    let spans = chunk_spans(seg.len(), book_len, n, S::BITS, |chunks| Ok(words_at(seg, book_len, chunks)))?;
    let mut payload = words_at(seg, book_len + 4 * spans.len(), (seg.len() - book_len) / 4 - spans.len());
    // Two zero words past the end: [`bits_at`] reads there.
    payload.extend([0, 0]);
    let tables = CpuTables::new(&book, bklen);
    try_vec_by_chunks::<S>(n, CHUNK * INTERLEAVE, |k, o| {
        let group = &spans[k * INTERLEAVE..(k * INTERLEAVE + INTERLEAVE).min(spans.len())];
        decode_group(&payload, group, o, &tables)
    })
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

    /// The chunk's words as one push per symbol (code, then an escaped value's raw bits).
    fn one_at_a_time<S: Symbol>(chunk: &[S], table: &[u32], bklen: u32) -> Vec<u32> {
        let mut words = vec![0; max_words(chunk.len(), S::BITS) + 1];
        let mut w = BitWriter { words: &mut words, n: 0, acc: 0, bits: 0 };
        for s in chunk {
            let v = s.value();
            let e = table[v.min(bklen) as usize];
            w.push(e >> 8, e & 0xff);
            if v >= bklen {
                w.push(v, S::BITS);
            }
        }
        w.finish()
    }

    proptest! {
        /// Codes pushed two at a time (where they fit 32 bits together) and zero runs eight at
        /// a time give the words of one push per symbol: skewed and flat books, codes up to
        /// the length limit, escapes, odd lengths.
        #[test]
        fn paired_codes_are_written_as_single_symbols_are(
            seed in prop::collection::vec(any::<u32>(), 0..3000), spread in 1u32..5000, bklen in 1u32..=4096,
        ) {
            let data: Vec<u16> = skewed(seed, spread, u32::MAX).into_iter().map(|v| v as u16).collect();
            let table = encode_table(&Book::from_counts(&histogram(&data, bklen)));
            let zero = zero_bit_symbol(&table, bklen);
            let mut scratch = Vec::new();
            prop_assert_eq!(encode_chunk(&data, &table, bklen, zero, &mut scratch), one_at_a_time(&data, &table, bklen));
        }
    }

    /// Every code of a book decodes by one lookup (short codes, codes of the second table,
    /// longer ones), and every window's run is the codes it starts with, taken one lookup at
    /// a time until the window ends, an escape comes or the run is full.
    #[test]
    fn tables_decode_every_code_and_runs_are_successive_codes() {
        let wide: Vec<u64> = (0..300u64).map(|i| 1 + (i * 7919) % 1000 + if i == 5 { 1 << 30 } else { 0 }).collect();
        // Lengths up to MAX_LEN, and the escape (the last entry) the 1-bit code.
        let mut fib = vec![1u64, 1];
        while fib.len() < 60 {
            fib.push(fib[fib.len() - 1] + fib[fib.len() - 2]);
        }
        for counts in [wide, fib] {
            let bklen = counts.len() as u32 - 1;
            let b = Book::from_counts(&counts);
            assert!(b.lengths.iter().any(|&l| usize::from(l) > LONG_BITS) || bklen == 299);
            let t = CpuTables::<u16>::new(&b, bklen);
            for (s, (&l, &c)) in b.lengths.iter().zip(&b.codes).enumerate() {
                let window = c << (MAX_LEN - usize::from(l));
                assert_eq!(t.lookup(window), (s as u32, u32::from(l)));
            }
            for window in 0..1usize << TABLE_BITS {
                let (mut used, mut k) = (0, 0);
                while k < RUN {
                    let (e, len) = t.lookup(((window << used) << (MAX_LEN - TABLE_BITS)) as u32 & ((1 << MAX_LEN) - 1));
                    if e == bklen || used + len as usize > TABLE_BITS {
                        break;
                    }
                    assert_eq!(u32::from(t.run[window][k]), e, "window {window:#b} symbol {k}");
                    used += len as usize;
                    k += 1;
                }
                assert_eq!(t.count_len[window], (k | used << 4) as u8, "window {window:#b}");
            }
        }
    }

    /// Runs of the 1-bit code 0 (decoded 32 at a time) of every length, across chunk ends,
    /// between other codes and escapes, in whole groups of chunks and a last partial one.
    #[test]
    fn zero_code_runs_decode_across_chunk_ends() {
        let mut data = Vec::new();
        let mut k = 0u32;
        while data.len() < 6 * CHUNK + 123 {
            k += 1;
            data.extend(std::iter::repeat_n(7u16, (k * 37 % 101) as usize));
            data.push([3, 9, 7000][k as usize % 3]);
        }
        let e = encode(&data, 64);
        let t = CpuTables::<u16>::new(&Book::read(&e, 64, data.len() as u64).unwrap().0, 64);
        assert_eq!(t.zero, Some(7));
        assert_eq!(decode::<u16>(&e, data.len(), 64).unwrap(), data);
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
