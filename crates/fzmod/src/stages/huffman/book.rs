//! The code book: histogram → code lengths (minimum redundancy, limited to [`MAX_LEN`] bits) →
//! canonical codes, its stored form at the head of the segment, and the decode tables.
//!
//! Every step is a fixed sequential rule the device's book kernel repeats exactly (device.cu),
//! so both backends derive the same book from the same histogram:
//! 1. the used entries (count > 0) in *weight order*: count ascending, then entry index
//!    descending (the heaviest entry, smallest index among equals, comes last);
//! 2. minimum-redundancy lengths by Moffat and Katajainen's in-place algorithm ("In-place
//!    calculation of minimum-redundancy codes", WADS 1995), taking a leaf before an internal
//!    node of equal weight;
//! 3. lengths above [`MAX_LEN`] folded back by the adjustment of JPEG (ITU-T T.81 Annex K.3,
//!    `Adjust_BITS`) on the count of codes per length; the shortest lengths then go to the
//!    heaviest entries, in reverse weight order;
//! 4. canonical codes as DEFLATE assigns them (RFC 1951 §3.2.2): by length, then entry index.

use crate::archive::Reader;
use crate::error::{corrupt, Result};

/// Longest code, in bits. 20 keeps a code plus a 32-bit escaped value within a 64-bit bit
/// buffer and costs at most `4097 · 2^-20` of Kraft sum against an unlimited code.
pub const MAX_LEN: usize = 20;
/// Most book entries below the escape: a block's histogram and encode table fit in shared
/// memory (4097 entries × 4 bytes) next to a chunk's bits.
pub const MAX_BKLEN: u32 = 4096;
/// Bits of the decoder's first-level table: codes up to this length decode in one lookup.
pub const TABLE_BITS: usize = 11;

/// A code book over entries `0..=bklen` (entry `bklen` is the escape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Book {
    /// Code length per entry; 0 = no code.
    pub lengths: Vec<u8>,
    /// Canonical code per entry, its `lengths[s]` low bits sent most significant first.
    pub codes: Vec<u32>,
    /// The one entry in use when the input has a single distinct entry: it costs no bits.
    pub single: Option<u32>,
}

/// Minimum-redundancy code lengths of weights sorted ascending (n ≥ 2), in place
/// (Moffat and Katajainen 1995): phase 1 builds the tree in the array (each slot holds an
/// internal node's weight, then its parent's index), phase 2 turns parents into depths,
/// phase 3 turns internal depths into leaf depths, the deepest leaves first.
fn minimum_redundancy(a: &mut [u64]) {
    let n = a.len();
    a[0] += a[1];
    let (mut root, mut leaf) = (0usize, 2usize);
    for next in 1..n - 1 {
        // On a tie the leaf goes first (fixed: the lengths depend on it).
        if leaf >= n || a[root] < a[leaf] {
            a[next] = a[root];
            a[root] = next as u64;
            root += 1;
        } else {
            a[next] = a[leaf];
            leaf += 1;
        }
        if leaf >= n || (root < next && a[root] < a[leaf]) {
            a[next] += a[root];
            a[root] = next as u64;
            root += 1;
        } else {
            a[next] += a[leaf];
            leaf += 1;
        }
    }
    a[n - 2] = 0;
    for next in (0..n.saturating_sub(2)).rev() {
        a[next] = a[a[next] as usize] + 1;
    }
    let (mut avail, mut used, mut depth) = (1u64, 0u64, 0u64);
    let (mut root, mut next) = (n as isize - 2, n as isize - 1);
    while avail > 0 {
        while root >= 0 && a[root as usize] == depth {
            used += 1;
            root -= 1;
        }
        while avail > used {
            a[next as usize] = depth;
            next -= 1;
            avail -= 1;
        }
        avail = 2 * used;
        depth += 1;
        used = 0;
    }
}

/// JPEG's `Adjust_BITS` (T.81 Annex K.3): while a length beyond [`MAX_LEN`] has codes, take
/// two of them (siblings): one replaces their parent, the other hangs with a leaf of the
/// deepest shorter length `j` below a new node (both at `j + 1`). The code stays complete.
fn limit_lengths(per_len: &mut [u64]) {
    for i in (MAX_LEN + 1..per_len.len()).rev() {
        while per_len[i] > 0 {
            // A shorter leaf exists: all leaves at depth ≥ i − 1 > 20 would need > 4097 codes.
            let mut j = i - 2;
            while per_len[j] == 0 {
                j -= 1;
            }
            per_len[i] -= 2;
            per_len[i - 1] += 1;
            per_len[j + 1] += 2;
            per_len[j] -= 1;
        }
    }
}

impl Book {
    /// The book of a histogram (`counts[s]` for entries `0..=bklen`).
    pub fn from_counts(counts: &[u64]) -> Book {
        let mut order: Vec<u32> = (0..counts.len() as u32).filter(|&s| counts[s as usize] > 0).collect();
        order.sort_unstable_by_key(|&s| (counts[s as usize], std::cmp::Reverse(s)));
        let mut lengths = vec![0u8; counts.len()];
        let single = (order.len() == 1).then(|| order[0]);
        if order.len() >= 2 {
            let mut depth: Vec<u64> = order.iter().map(|&s| counts[s as usize]).collect();
            minimum_redundancy(&mut depth);
            let mut per_len = vec![0u64; (depth[0] as usize).max(MAX_LEN) + 1];
            for &d in &depth {
                per_len[d as usize] += 1;
            }
            limit_lengths(&mut per_len);
            let mut heaviest = order.iter().rev();
            for (len, &k) in per_len.iter().enumerate().take(MAX_LEN + 1) {
                for &s in heaviest.by_ref().take(k as usize) {
                    lengths[s as usize] = len as u8;
                }
            }
        }
        Book::canonical(lengths, single)
    }

    /// Canonical codes for `lengths` (RFC 1951 §3.2.2): first code of each length, then
    /// consecutive codes in entry order.
    fn canonical(lengths: Vec<u8>, single: Option<u32>) -> Book {
        let mut per_len = [0u32; MAX_LEN + 1];
        for &l in &lengths {
            per_len[usize::from(l)] += 1;
        }
        per_len[0] = 0;
        let mut next = [0u32; MAX_LEN + 2];
        for l in 1..=MAX_LEN {
            next[l + 1] = (next[l] + per_len[l]) << 1;
        }
        let codes = lengths
            .iter()
            .map(|&l| {
                let l = usize::from(l);
                let c = next[l];
                next[l] += u32::from(l > 0);
                if l > 0 {
                    c
                } else {
                    0
                }
            })
            .collect();
        Book { lengths, codes, single }
    }

    /// The stored book: `u32 lo, u32 count`, then (count ≥ 2) `count` length bytes for entries
    /// `lo..lo+count`, zero bytes up to a multiple of 4. count 0: no symbols; count 1: every
    /// symbol is entry `lo`, coded in zero bits.
    pub fn write(&self, out: &mut Vec<u8>) {
        let used: Vec<usize> = (0..self.lengths.len()).filter(|&s| self.lengths[s] > 0).collect();
        let (lo, count) = match (self.single, used.first(), used.last()) {
            (Some(s), _, _) => (s as usize, 1),
            (None, Some(&lo), Some(&hi)) => (lo, hi - lo + 1),
            _ => (0, 0),
        };
        out.extend_from_slice(&(lo as u32).to_le_bytes());
        out.extend_from_slice(&(count as u32).to_le_bytes());
        if count >= 2 {
            out.extend_from_slice(&self.lengths[lo..lo + count]);
        }
        out.resize(out.len().next_multiple_of(4), 0);
    }

    /// Read and validate a stored book over entries `0..=bklen` for `n` symbols; returns the
    /// book and the bytes it took. The lengths must form a complete prefix code (Kraft sum
    /// exactly 1), so every bit string decodes and the decoder needs no invalid-code check.
    pub fn read(seg: &[u8], bklen: u32, n: u64) -> Result<(Book, usize)> {
        let mut r = Reader::new(seg, "Huffman book");
        let (lo, count) = (r.u32()? as usize, r.u32()? as usize);
        let entries = bklen as usize + 1;
        if (count == 0) != (n == 0) || lo.checked_add(count).is_none_or(|end| end > entries) {
            return Err(corrupt!("Huffman: book range {lo}+{count} for {n} symbols over {entries} entries"));
        }
        let mut lengths = vec![0u8; entries];
        let single = (count == 1).then_some(lo as u32);
        if count >= 2 {
            let stored = r.take(count)?;
            if stored[0] == 0 || stored[count - 1] == 0 || stored.iter().any(|&l| usize::from(l) > MAX_LEN) {
                return Err(corrupt!("Huffman: book lengths out of range"));
            }
            let kraft: u64 = stored.iter().filter(|&&l| l > 0).map(|&l| 1u64 << (MAX_LEN - usize::from(l))).sum();
            if kraft != 1 << MAX_LEN {
                return Err(corrupt!("Huffman: book lengths do not form a complete prefix code"));
            }
            lengths[lo..lo + count].copy_from_slice(stored);
        }
        let stored = 8 + if count >= 2 { count } else { 0 };
        let taken = stored.next_multiple_of(4);
        if r.take(taken - stored)?.iter().any(|&b| b != 0) {
            return Err(corrupt!("Huffman: book padding is not zero"));
        }
        Ok((Book::canonical(lengths, single), taken))
    }
}

/// Decode tables of a book: a first-level table on [`TABLE_BITS`] bits and, for longer codes,
/// the canonical ranges per length. Shared by the CPU decoder and the device's (uploaded).
#[derive(Clone, Debug)]
pub struct DecodeTables {
    /// Per [`TABLE_BITS`]-bit prefix: `entry << 8 | 0x80 | length` when a code of at most
    /// TABLE_BITS bits (or the single entry, length 0) matches, else 0.
    pub table: Vec<u32>,
    /// Per length: first canonical code, number of codes, index of its first entry in `sorted`.
    pub first: [u32; MAX_LEN + 1],
    pub count: [u32; MAX_LEN + 1],
    pub offset: [u32; MAX_LEN + 1],
    /// Entries in canonical order (length, then index).
    pub sorted: Vec<u16>,
}

impl DecodeTables {
    pub fn new(book: &Book) -> DecodeTables {
        let mut t = DecodeTables {
            table: vec![0; 1 << TABLE_BITS],
            first: [0; MAX_LEN + 1],
            count: [0; MAX_LEN + 1],
            offset: [0; MAX_LEN + 1],
            sorted: Vec::new(),
        };
        if let Some(s) = book.single {
            t.table.fill(s << 8 | 0x80);
            return t;
        }
        // Canonical order by counting: entries per length, each length's start in `sorted`,
        // then one pass in entry order (one pass over the book, not one per length).
        for &len in &book.lengths {
            t.count[usize::from(len)] += 1;
        }
        t.count[0] = 0;
        for l in 1..MAX_LEN {
            t.offset[l + 1] = t.offset[l] + t.count[l];
        }
        let mut next = t.offset;
        t.sorted = vec![0; (t.offset[MAX_LEN] + t.count[MAX_LEN]) as usize];
        for (s, &len) in book.lengths.iter().enumerate() {
            let l = usize::from(len);
            if l == 0 {
                continue;
            }
            if next[l] == t.offset[l] {
                t.first[l] = book.codes[s];
            }
            t.sorted[next[l] as usize] = s as u16;
            next[l] += 1;
            if l <= TABLE_BITS {
                let at = (book.codes[s] as usize) << (TABLE_BITS - l);
                t.table[at..at + (1 << (TABLE_BITS - l))].fill((s as u32) << 8 | 0x80 | l as u32);
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kraft(b: &Book) -> u64 {
        b.lengths.iter().filter(|&&l| l > 0).map(|&l| 1u64 << (MAX_LEN - usize::from(l))).sum()
    }

    #[test]
    fn textbook_lengths_and_canonical_codes() {
        // Counts 1, 1, 2, 4 (entries 0..=3) → lengths 3, 3, 2, 1; codes 110, 111, 10, 0.
        let b = Book::from_counts(&[1, 1, 2, 4]);
        assert_eq!(b.lengths, [3, 3, 2, 1]);
        assert_eq!(b.codes, [0b110, 0b111, 0b10, 0]);
        // Ties: equal counts give the smaller index the shorter (or equal) code.
        let b = Book::from_counts(&[5, 5, 5]);
        assert_eq!(b.lengths, [1, 2, 2]);
    }

    #[test]
    fn fibonacci_counts_are_limited_to_max_len_and_stay_complete() {
        let mut fib = vec![1u64, 1];
        while fib.len() < 60 {
            fib.push(fib[fib.len() - 1] + fib[fib.len() - 2]);
        }
        let b = Book::from_counts(&fib);
        assert_eq!(b.lengths.iter().copied().max(), Some(MAX_LEN as u8));
        assert_eq!(kraft(&b), 1 << MAX_LEN);
        // Heavier entries never get longer codes.
        assert!(b.lengths.windows(2).all(|w| w[0] >= w[1]));
    }

    #[test]
    fn stored_books_round_trip_and_are_checked() {
        let b = Book::from_counts(&[0, 3, 0, 9, 1, 0]);
        let mut out = Vec::new();
        b.write(&mut out);
        assert_eq!(out, [1, 0, 0, 0, 4, 0, 0, 0, 2, 0, 1, 2]);
        assert_eq!(Book::read(&out, 5, 13).unwrap(), (b, 12));
        let mut bad = out.clone();
        bad[10] = 2; // Kraft sum 3/4
        assert!(Book::read(&bad, 5, 13).is_err());
        assert!(Book::read(&out, 3, 13).is_err(), "range past the escape");
        assert!(Book::read(&out[..10], 5, 13).is_err());
        let single = Book::from_counts(&[0, 0, 7]);
        let mut out = Vec::new();
        single.write(&mut out);
        assert_eq!(out, [2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(Book::read(&out, 2, 7).unwrap().0.single, Some(2));
        assert!(Book::read(&out, 2, 0).is_err(), "a book for no symbols");
    }
}
