//! Block indexes: where each of `n` variable-size blocks starts and how long it is, so a reader
//! can seek to any block without reading the ones before it (docs/FORMAT.md §8).
//!
//! The four classes follow the design of zfp's index classes (Lindstrom et al., LLNL; zfp's
//! documentation, "Index"): `implicit` (one fixed size for every block), `verbatim` (one 64-bit
//! offset per block), `hybrid4` (per 4 blocks: the top 32 bits of a 44-bit base whose low 12
//! bits are zero, plus four 16-bit deltas from it) and `hybrid8` (per 8 blocks: two 64-bit
//! words holding the base and seven block sizes, split by the dimensionality `d`). The code and
//! the byte layout are fzmod's own. Offsets and sizes are counted in abstract *units* (zfp
//! counts bits; the chunk index counts 64-byte units).
//!
//! Semantics, as in zfp: block `i` starts at `block_offset(i)`; its size is the distance to the
//! next block's offset (`range()` for the last block); blocks are set strictly in order; a
//! class that cannot represent an offset or a size refuses it with
//! [`IndexError::Unrepresentable`].

use super::bytes::{Reader, Writer};

/// The index classes (their storage, offset and size ranges: docs/FORMAT.md §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexClass {
    /// Fixed size per block: no storage beyond the size; offsets are `i · size`.
    Implicit,
    /// A full 64-bit offset per block.
    Verbatim,
    /// Per 4 blocks: a 44-bit base (low 12 bits zero, top 32 stored) and four 16-bit deltas.
    Hybrid4,
    /// Per 8 blocks: two 64-bit words (base and 7 sizes); `d` (1..=4) splits them.
    Hybrid8 { d: u8 },
}

impl IndexClass {
    /// Every class, in order of storage (cheapest first); hybrid8 for dimensionality `d`.
    pub fn all(d: u8) -> [IndexClass; 4] {
        [IndexClass::Implicit, IndexClass::Hybrid8 { d }, IndexClass::Hybrid4, IndexClass::Verbatim]
    }

    pub fn code(self) -> u8 {
        match self {
            IndexClass::Implicit => 0,
            IndexClass::Verbatim => 1,
            IndexClass::Hybrid4 => 2,
            IndexClass::Hybrid8 { .. } => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IndexClass::Implicit => "implicit",
            IndexClass::Verbatim => "verbatim",
            IndexClass::Hybrid4 => "hybrid4",
            IndexClass::Hybrid8 { .. } => "hybrid8",
        }
    }

    /// Parse `implicit`, `verbatim`, `hybrid4` or `hybrid8` (hybrid8 takes `d`).
    pub fn parse(name: &str, d: u8) -> Option<IndexClass> {
        Some(match name {
            "implicit" => IndexClass::Implicit,
            "verbatim" => IndexClass::Verbatim,
            "hybrid4" => IndexClass::Hybrid4,
            "hybrid8" => IndexClass::Hybrid8 { d: d.clamp(1, 4) },
            _ => return None,
        })
    }

    /// Does the class hold blocks of different sizes? (zfp's `has_variable_rate`.)
    pub fn has_variable_rate(self) -> bool {
        !matches!(self, IndexClass::Implicit)
    }

    /// Bits of a block size the class can hold (`None`: the full 64).
    pub fn size_bits(self) -> Option<u32> {
        match self {
            IndexClass::Implicit | IndexClass::Verbatim => None,
            IndexClass::Hybrid4 => Some(16),
            IndexClass::Hybrid8 { d } => Some(6 + 2 * u32::from(d)),
        }
    }

    /// Bits of a block offset the class can hold (`None`: the full 64).
    pub fn offset_bits(self) -> Option<u32> {
        match self {
            IndexClass::Implicit | IndexClass::Verbatim => None,
            IndexClass::Hybrid4 => Some(44),
            IndexClass::Hybrid8 { d } => Some(86 - 14 * u32::from(d)),
        }
    }
}

impl std::fmt::Display for IndexClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexClass::Hybrid8 { d } => write!(f, "hybrid8 (d = {d})"),
            c => f.write_str(c.name()),
        }
    }
}

/// What an index refuses or finds wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// The class cannot represent this block's offset or size (zfp throws here).
    #[error("the {class} index cannot represent block {block}: {why}")]
    Unrepresentable { class: IndexClass, block: u64, why: String },
    /// A block number past the end, or blocks set out of order.
    #[error("block {block}: {why}")]
    BadBlock { block: u64, why: String },
    /// A serialised index that is not one.
    #[error("block index record: {0}")]
    Malformed(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Data {
    Implicit {
        size: u64,
    },
    Verbatim(Vec<u64>),
    /// (top 32 bits of the 44-bit base, deltas of the four blocks)
    Hybrid4(Vec<(u32, [u16; 4])>),
    /// (word A: low 8 bits of base and of 7 sizes; word B: high size bits and top base bits)
    Hybrid8(Vec<[u64; 2]>),
}

/// A finished index over `len()` blocks whose data spans `range()` units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockIndex {
    class: IndexClass,
    blocks: u64,
    range: u64,
    data: Data,
}

fn unrep(class: IndexClass, block: u64, why: String) -> IndexError {
    IndexError::Unrepresentable { class, block, why }
}

impl BlockIndex {
    /// An index of blocks of the given sizes, laid out back to back from offset 0.
    pub fn build(class: IndexClass, sizes: &[u64]) -> Result<BlockIndex, IndexError> {
        let mut b = IndexBuilder::new(class, sizes.len() as u64);
        for (i, &s) in sizes.iter().enumerate() {
            b.set_block_size(i as u64, s)?;
        }
        b.flush()
    }

    /// The cheapest class of `candidates` (in the order given) that represents `sizes`.
    pub fn build_best(candidates: &[IndexClass], sizes: &[u64]) -> Result<BlockIndex, IndexError> {
        let mut last = None;
        for &class in candidates {
            match BlockIndex::build(class, sizes) {
                Ok(index) => return Ok(index),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| IndexError::Malformed("no index class to try".into())))
    }

    pub fn class(&self) -> IndexClass {
        self.class
    }

    /// Number of blocks.
    pub fn len(&self) -> u64 {
        self.blocks
    }

    pub fn is_empty(&self) -> bool {
        self.blocks == 0
    }

    /// Units spanned by the index: the offset where the last block ends.
    pub fn range(&self) -> u64 {
        self.range
    }

    /// Offset of block `i` from the start of the data.
    pub fn block_offset(&self, i: u64) -> Result<u64, IndexError> {
        if i >= self.blocks {
            return Err(IndexError::BadBlock { block: i, why: format!("the index has {} blocks", self.blocks) });
        }
        Ok(self.offset_unchecked(i))
    }

    /// Size of block `i`: the distance to the next block (or to `range()`).
    pub fn block_size(&self, i: u64) -> Result<u64, IndexError> {
        let start = self.block_offset(i)?;
        let end = if i + 1 == self.blocks { self.range } else { self.offset_unchecked(i + 1) };
        Ok(end - start)
    }

    fn offset_unchecked(&self, i: u64) -> u64 {
        match &self.data {
            Data::Implicit { size } => i * size,
            Data::Verbatim(offsets) => offsets[i as usize],
            Data::Hybrid4(groups) => {
                let (base, deltas) = groups[(i / 4) as usize];
                (u64::from(base) << 12) + u64::from(deltas[(i % 4) as usize])
            }
            Data::Hybrid8(groups) => {
                let IndexClass::Hybrid8 { d } = self.class else { unreachable!("hybrid8 data") };
                let [a, b] = groups[(i / 8) as usize];
                let mut offset = hybrid8_base(a, b, d);
                for k in 0..(i % 8) as u32 {
                    offset += hybrid8_size(a, b, d, k);
                }
                offset
            }
        }
    }

    /// The serialised index (docs/FORMAT.md §8).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        self.encode(&mut w);
        w.bytes
    }

    /// Parse a serialised index of exactly `blocks` blocks that fills `bytes`.
    pub fn from_bytes(bytes: &[u8], blocks: u64) -> Result<BlockIndex, IndexError> {
        let mut r = Reader::new(bytes, "block index");
        let index = BlockIndex::decode(&mut r, blocks)?;
        r.finish().map_err(|e| IndexError::Malformed(e.to_string()))?;
        Ok(index)
    }

    /// Bytes of the serialised index ([`BlockIndex::to_bytes`]).
    pub fn size_bytes(&self) -> usize {
        let mut w = Writer::default();
        self.encode(&mut w);
        w.bytes.len()
    }

    /// Amortised storage in bits per block (serialised record included).
    pub fn bits_per_block(&self) -> f64 {
        if self.blocks == 0 {
            return 0.0;
        }
        8.0 * self.size_bytes() as f64 / self.blocks as f64
    }

    /// Serialise: class code, block count, then the class's fields (docs/FORMAT.md §8).
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u8(self.class.code());
        w.varint(self.blocks);
        match &self.data {
            Data::Implicit { size } => w.varint(*size),
            Data::Verbatim(offsets) => {
                w.varint(self.range);
                for &o in offsets {
                    w.u64(o);
                }
            }
            Data::Hybrid4(groups) => {
                w.varint(self.range);
                for (base, deltas) in groups {
                    w.u32(*base);
                    for &d in deltas {
                        w.u16(d);
                    }
                }
            }
            Data::Hybrid8(groups) => {
                let IndexClass::Hybrid8 { d } = self.class else { unreachable!("hybrid8 data") };
                w.u8(d);
                w.varint(self.range);
                for [a, b] in groups {
                    w.u64(*a);
                    w.u64(*b);
                }
            }
        }
    }

    /// Parse an index of exactly `blocks` blocks and check it: every offset representable,
    /// offsets non-decreasing and within the range, unused fields zero. Allocates only after
    /// checking the record holds the bytes its block count needs.
    pub(crate) fn decode(r: &mut Reader<'_>, blocks: u64) -> Result<BlockIndex, IndexError> {
        let bad = |e: crate::error::Error| IndexError::Malformed(e.to_string());
        let code = r.u8().map_err(bad)?;
        let stated = r.varint().map_err(bad)?;
        if stated != blocks {
            return Err(IndexError::Malformed(format!("holds {stated} blocks, the header implies {blocks}")));
        }
        let need = |r: &Reader<'_>, per_group: u64, group: u64| -> Result<(), IndexError> {
            let bytes = blocks.div_ceil(group).checked_mul(per_group);
            match bytes {
                Some(b) if b <= r.remaining() as u64 => Ok(()),
                _ => Err(IndexError::Malformed(format!(
                    "{blocks} blocks need more than the {} bytes left",
                    r.remaining()
                ))),
            }
        };
        let index = match code {
            0 => {
                let size = r.varint().map_err(bad)?;
                let range = blocks
                    .checked_mul(size)
                    .ok_or_else(|| IndexError::Malformed(format!("{blocks} blocks of {size} units overflow")))?;
                BlockIndex { class: IndexClass::Implicit, blocks, range, data: Data::Implicit { size } }
            }
            1 => {
                let range = r.varint().map_err(bad)?;
                need(r, 8, 1)?;
                let offsets = (0..blocks).map(|_| r.u64()).collect::<crate::error::Result<Vec<_>>>().map_err(bad)?;
                BlockIndex { class: IndexClass::Verbatim, blocks, range, data: Data::Verbatim(offsets) }
            }
            2 => {
                let range = r.varint().map_err(bad)?;
                need(r, 12, 4)?;
                let mut groups = Vec::with_capacity(blocks.div_ceil(4) as usize);
                for _ in 0..blocks.div_ceil(4) {
                    let base = r.u32().map_err(bad)?;
                    let mut deltas = [0u16; 4];
                    for d in &mut deltas {
                        *d = r.u16().map_err(bad)?;
                    }
                    groups.push((base, deltas));
                }
                let unused = (4 - blocks % 4) % 4;
                if let Some((_, deltas)) = groups.last() {
                    if deltas[4 - unused as usize..].iter().any(|&d| d != 0) {
                        return Err(IndexError::Malformed("unused hybrid4 deltas are not zero".into()));
                    }
                }
                BlockIndex { class: IndexClass::Hybrid4, blocks, range, data: Data::Hybrid4(groups) }
            }
            3 => {
                let d = r.u8().map_err(bad)?;
                if !(1..=4).contains(&d) {
                    return Err(IndexError::Malformed(format!("hybrid8 dimensionality {d} is not 1..=4")));
                }
                let range = r.varint().map_err(bad)?;
                need(r, 16, 8)?;
                let mut groups = Vec::with_capacity(blocks.div_ceil(8) as usize);
                for _ in 0..blocks.div_ceil(8) {
                    groups.push([r.u64().map_err(bad)?, r.u64().map_err(bad)?]);
                }
                let class = IndexClass::Hybrid8 { d };
                // Sizes of blocks that do not exist must be zero.
                if let Some(&[a, b]) = groups.last() {
                    let used = blocks - (groups.len() as u64 - 1) * 8;
                    if (used as u32..7).any(|k| hybrid8_size(a, b, d, k) != 0) {
                        return Err(IndexError::Malformed("unused hybrid8 sizes are not zero".into()));
                    }
                }
                BlockIndex { class, blocks, range, data: Data::Hybrid8(groups) }
            }
            other => return Err(IndexError::Malformed(format!("unknown index class {other}"))),
        };
        index.check()?;
        Ok(index)
    }

    /// Offsets non-decreasing and within the range; every size within the class's limit.
    fn check(&self) -> Result<(), IndexError> {
        // Implicit offsets are `i · size` with `blocks · size` = `range` checked at decode: in
        // order and within the range by construction, sizes unlimited. Its block count is no
        // bound on the work (the record is three fields whatever the count): no loop over it.
        if let Data::Implicit { .. } = self.data {
            return Ok(());
        }
        let mut prev = 0u64;
        let limit = self.class.size_bits().map(|b| 1u64 << b);
        for i in 0..self.blocks {
            let o = self.offset_unchecked_checked(i)?;
            if o < prev || o > self.range {
                return Err(IndexError::Malformed(format!(
                    "block {i} at offset {o} is out of order (previous {prev}, range {})",
                    self.range
                )));
            }
            if i > 0 && limit.is_some_and(|l| o - prev >= l) {
                return Err(IndexError::Malformed(format!("block {} is larger than the class allows", i - 1)));
            }
            prev = o;
        }
        if self.blocks > 0 && limit.is_some_and(|l| self.range - prev >= l) {
            return Err(IndexError::Malformed("the last block is larger than the class allows".into()));
        }
        Ok(())
    }

    /// `offset_unchecked` without overflow (a forged hybrid8 group could sum past 2^64).
    fn offset_unchecked_checked(&self, i: u64) -> Result<u64, IndexError> {
        if let (Data::Hybrid8(groups), IndexClass::Hybrid8 { d }) = (&self.data, self.class) {
            let [a, b] = groups[(i / 8) as usize];
            let mut offset = hybrid8_base(a, b, d);
            for k in 0..(i % 8) as u32 {
                offset = offset
                    .checked_add(hybrid8_size(a, b, d, k))
                    .ok_or_else(|| IndexError::Malformed(format!("block {i}'s offset overflows")))?;
            }
            return Ok(offset);
        }
        Ok(self.offset_unchecked(i))
    }
}

/// Bits of word B that hold the high parts of the seven sizes: `2 (d − 1)` each.
fn hybrid8_high_bits(d: u8) -> u32 {
    2 * (u32::from(d) - 1)
}

fn hybrid8_base(a: u64, b: u64, d: u8) -> u64 {
    let top = b.checked_shr(7 * hybrid8_high_bits(d)).unwrap_or(0);
    (top << 8) | (a & 0xff)
}

fn hybrid8_size(a: u64, b: u64, d: u8, k: u32) -> u64 {
    let hb = hybrid8_high_bits(d);
    let low = (a >> (8 * (k + 1))) & 0xff;
    let high = if hb == 0 { 0 } else { (b >> (hb * k)) & ((1u64 << hb) - 1) };
    (high << 8) | low
}

/// Builds an index block by block, strictly in order (zfp's `set_block_size(i, size)`), and
/// refuses what the class cannot represent.
#[derive(Debug)]
pub struct IndexBuilder {
    class: IndexClass,
    blocks: u64,
    next: u64,
    offset: u64,
    /// Sizes of the group being filled (hybrid classes).
    pending: Vec<u64>,
    pending_start: u64,
    fixed: Option<u64>,
    verbatim: Vec<u64>,
    hybrid4: Vec<(u32, [u16; 4])>,
    hybrid8: Vec<[u64; 2]>,
}

impl IndexBuilder {
    /// A builder for `blocks` blocks (zfp's `index(blocks)`).
    pub fn new(class: IndexClass, blocks: u64) -> IndexBuilder {
        IndexBuilder {
            class,
            blocks,
            next: 0,
            offset: 0,
            pending: Vec::new(),
            pending_start: 0,
            fixed: None,
            verbatim: Vec::new(),
            hybrid4: Vec::new(),
            hybrid8: Vec::new(),
        }
    }

    /// One fixed size for every block (fixed-rate; the implicit class's only mode).
    pub fn set_fixed_block_size(&mut self, size: u64) -> Result<(), IndexError> {
        for i in self.next..self.blocks {
            self.set_block_size(i, size)?;
        }
        Ok(())
    }

    /// The size of block `i`, which must be the next one.
    pub fn set_block_size(&mut self, i: u64, size: u64) -> Result<(), IndexError> {
        if i != self.next || i >= self.blocks {
            return Err(IndexError::BadBlock {
                block: i,
                why: format!("expected block {} of {}", self.next, self.blocks),
            });
        }
        let class = self.class;
        if let Some(bits) = class.size_bits() {
            if size >> bits != 0 {
                return Err(unrep(class, i, format!("size {size} needs more than {bits} bits")));
            }
        }
        let end =
            self.offset.checked_add(size).ok_or_else(|| unrep(class, i, "its end exceeds 64 bits".to_string()))?;
        match class {
            IndexClass::Implicit => {
                if *self.fixed.get_or_insert(size) != size {
                    return Err(unrep(
                        class,
                        i,
                        format!(
                            "size {size} differs from the fixed size {} (no variable rate)",
                            self.fixed.unwrap_or(0)
                        ),
                    ));
                }
            }
            IndexClass::Verbatim => self.verbatim.push(self.offset),
            IndexClass::Hybrid4 | IndexClass::Hybrid8 { .. } => {
                if self.pending.is_empty() {
                    self.pending_start = self.offset;
                    if let Some(bits) = class.offset_bits().filter(|&b| b < 64) {
                        if self.offset >> bits != 0 {
                            return Err(unrep(class, i, format!("offset {} needs more than {bits} bits", self.offset)));
                        }
                    }
                }
                if class == IndexClass::Hybrid4 {
                    let delta = self.offset - (self.pending_start & !0xfff);
                    if delta > u64::from(u16::MAX) {
                        return Err(unrep(class, i, format!("delta {delta} from its group's base exceeds 16 bits")));
                    }
                }
                self.pending.push(size);
            }
        }
        self.offset = end;
        self.next += 1;
        let group = match class {
            IndexClass::Hybrid4 => 4,
            IndexClass::Hybrid8 { .. } => 8,
            _ => 0,
        };
        if group > 0 && (self.pending.len() == group || self.next == self.blocks) {
            self.close_group();
        }
        Ok(())
    }

    fn close_group(&mut self) {
        let start = self.pending_start;
        match self.class {
            IndexClass::Hybrid4 => {
                let base = start & !0xfff;
                let mut deltas = [0u16; 4];
                let mut at = start;
                for (j, &s) in self.pending.iter().enumerate() {
                    deltas[j] = (at - base) as u16;
                    at += s;
                }
                self.hybrid4.push(((base >> 12) as u32, deltas));
            }
            IndexClass::Hybrid8 { d } => {
                let hb = hybrid8_high_bits(d);
                let mut a = start & 0xff;
                let mut b = (start >> 8).checked_shl(7 * hb).unwrap_or(0);
                // The eighth block's size is implied by the next base (or the range).
                for (k, &s) in self.pending.iter().take(7).enumerate() {
                    a |= (s & 0xff) << (8 * (k + 1));
                    if hb > 0 {
                        b |= (s >> 8) << (hb * k as u32);
                    }
                }
                self.hybrid8.push([a, b]);
            }
            _ => {}
        }
        self.pending.clear();
    }

    /// The finished index (zfp's `flush`); every block must have been set.
    pub fn flush(self) -> Result<BlockIndex, IndexError> {
        if self.next != self.blocks {
            return Err(IndexError::BadBlock {
                block: self.next,
                why: format!("only {} of {} blocks were set", self.next, self.blocks),
            });
        }
        let data = match self.class {
            IndexClass::Implicit => Data::Implicit { size: self.fixed.unwrap_or(0) },
            IndexClass::Verbatim => Data::Verbatim(self.verbatim),
            IndexClass::Hybrid4 => Data::Hybrid4(self.hybrid4),
            IndexClass::Hybrid8 { .. } => Data::Hybrid8(self.hybrid8),
        };
        Ok(BlockIndex { class: self.class, blocks: self.blocks, range: self.offset, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_classes() -> Vec<IndexClass> {
        let mut v = vec![IndexClass::Implicit, IndexClass::Verbatim, IndexClass::Hybrid4];
        v.extend((1..=4).map(|d| IndexClass::Hybrid8 { d }));
        v
    }

    /// Round trip through the serialised form, checking every offset and size.
    fn check_round_trip(index: &BlockIndex, sizes: &[u64]) {
        let mut w = Writer::default();
        index.encode(&mut w);
        let mut r = Reader::new(&w.bytes, "index");
        let back = BlockIndex::decode(&mut r, sizes.len() as u64).unwrap();
        r.finish().unwrap();
        assert_eq!(&back, index);
        let mut offset = 0u64;
        for (i, &s) in sizes.iter().enumerate() {
            assert_eq!(back.block_offset(i as u64).unwrap(), offset, "offset {i} of {}", index.class);
            assert_eq!(back.block_size(i as u64).unwrap(), s, "size {i} of {}", index.class);
            offset += s;
        }
        assert_eq!(back.range(), offset);
        assert!(back.block_offset(sizes.len() as u64).is_err());
    }

    /// Whether `class` should represent `sizes` (the seed's ranges, stated independently).
    fn representable(class: IndexClass, sizes: &[u64]) -> bool {
        let total: Option<u64> = sizes.iter().try_fold(0u64, |a, &s| a.checked_add(s));
        let Some(_) = total else { return false };
        let offsets: Vec<u64> = sizes.iter().scan(0u64, |a, &s| Some(std::mem::replace(a, *a + s))).collect();
        match class {
            IndexClass::Implicit => sizes.windows(2).all(|w| w[0] == w[1]),
            IndexClass::Verbatim => true,
            IndexClass::Hybrid4 => {
                sizes.iter().all(|&s| s < 1 << 16)
                    && offsets.chunks(4).all(|g| g[0] < 1 << 44 && g.iter().all(|&o| o - (g[0] & !0xfff) < 1 << 16))
            }
            IndexClass::Hybrid8 { d } => {
                let d = u32::from(d);
                sizes.iter().all(|&s| s < 1 << (6 + 2 * d))
                    && offsets.chunks(8).all(|g| u128::from(g[0]) < 1u128 << (86 - 14 * d))
            }
        }
    }

    proptest! {
        #[test]
        fn every_class_round_trips_or_refuses(
            sizes in prop::collection::vec(
                prop_oneof![0u64..300, 0u64..70_000, Just(255u64), Just(256u64), Just(16383u64), Just(65535u64)],
                0..70,
            ),
        ) {
            for class in all_classes() {
                let expect = representable(class, &sizes);
                match BlockIndex::build(class, &sizes) {
                    Ok(index) => {
                        prop_assert!(expect, "{class} accepted {sizes:?}");
                        check_round_trip(&index, &sizes);
                    }
                    Err(IndexError::Unrepresentable { .. }) => prop_assert!(!expect, "{class} refused {sizes:?}"),
                    Err(e) => prop_assert!(false, "{e}"),
                }
            }
        }

        #[test]
        fn implicit_round_trips_fixed_sizes(size in any::<u32>(), n in 0usize..50) {
            let sizes = vec![u64::from(size); n];
            let index = BlockIndex::build(IndexClass::Implicit, &sizes).unwrap();
            check_round_trip(&index, &sizes);
        }

        #[test]
        fn decoding_random_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200), n in 0u64..40) {
            let mut r = Reader::new(&bytes, "index");
            if let Ok(index) = BlockIndex::decode(&mut r, n) {
                for i in 0..n {
                    let o = index.block_offset(i).unwrap();
                    prop_assert!(o + index.block_size(i).unwrap() <= index.range());
                }
            }
        }
    }

    #[test]
    fn the_boundaries_of_each_class() {
        // hybrid4: 16-bit sizes, deltas from a base with its low 12 bits cleared.
        assert!(BlockIndex::build(IndexClass::Hybrid4, &[65535, 0, 0, 0]).is_ok());
        assert!(BlockIndex::build(IndexClass::Hybrid4, &[65536]).is_err());
        // A group starting at 4095 past its base leaves 65535 − 4095 for the first three sizes.
        let at = |first: u64, rest: &[u64]| {
            let mut s = vec![first];
            s.extend_from_slice(rest);
            BlockIndex::build(IndexClass::Hybrid4, &s)
        };
        assert!(at(4 * 4096 + 4095, &[0, 0, 0, 65535 - 4095, 0, 0, 0]).is_ok());
        assert!(at(4 * 4096 + 4095, &[0, 0, 0, 65536 - 4095, 0, 0, 0]).is_err());
        // hybrid4 offsets: below 2^44.
        let big = (1u64 << 44) - 1;
        assert!(BlockIndex::build(IndexClass::Hybrid4, &[0, 0, 0, 0]).is_ok());
        let mut b = IndexBuilder::new(IndexClass::Verbatim, 2);
        b.set_block_size(0, big).unwrap();
        b.set_block_size(1, 1).unwrap();
        assert_eq!(b.flush().unwrap().block_offset(1).unwrap(), big);
        // hybrid8: sizes below 2^(6 + 2d), base below 2^(86 − 14d).
        for d in 1..=4u8 {
            let class = IndexClass::Hybrid8 { d };
            let max = (1u64 << (6 + 2 * u32::from(d))) - 1;
            assert!(BlockIndex::build(class, &[max; 9]).is_ok(), "{class}");
            assert!(BlockIndex::build(class, &[max + 1]).is_err(), "{class}");
            let offset_limit = 1u64 << (86 - 14 * u32::from(d)).min(63);
            if d >= 2 {
                // Reach the limit with blocks of the largest size, in whole groups.
                let blocks = (offset_limit / (8 * max) + 1) * 8 + 1;
                if blocks < 5_000_000 {
                    let sizes = vec![max; blocks as usize];
                    let e = BlockIndex::build(class, &sizes).unwrap_err();
                    assert!(matches!(e, IndexError::Unrepresentable { .. }), "{e}");
                }
            }
        }
        // implicit: no variable rate; verbatim: any 64-bit offset.
        assert!(BlockIndex::build(IndexClass::Implicit, &[3, 4]).is_err());
        assert!(BlockIndex::build(IndexClass::Verbatim, &[u64::MAX, 1]).is_err());
        assert!(BlockIndex::build(IndexClass::Verbatim, &[u64::MAX - 1, 1]).is_ok());
        // Out-of-order blocks are refused.
        let mut b = IndexBuilder::new(IndexClass::Verbatim, 3);
        assert!(matches!(b.set_block_size(1, 1), Err(IndexError::BadBlock { .. })));
        b.set_block_size(0, 1).unwrap();
        assert!(b.flush().is_err());
    }

    #[test]
    fn storage_per_block_matches_the_seed() {
        let sizes: Vec<u64> = (0..4096).map(|i| 100 + (i * 37) % 900).collect();
        let bits = |c| BlockIndex::build(c, &sizes).unwrap().bits_per_block();
        assert!((bits(IndexClass::Verbatim) - 64.0).abs() < 0.1);
        assert!((bits(IndexClass::Hybrid4) - 24.0).abs() < 0.1);
        assert!((bits(IndexClass::Hybrid8 { d: 3 }) - 16.0).abs() < 0.1);
        assert!(BlockIndex::build(IndexClass::Implicit, &[640; 4096]).unwrap().bits_per_block() < 0.1);
    }
}
