//! Re-sealing mutated archives: the container layout re-parsed independently of the library
//! (docs/FORMAT.md §1–2), and every CRC recomputed, so that a mutation reaches the decoders
//! instead of being stopped by a checksum.

use std::ops::Range;

/// Where the mutable parts of an archive lie, re-parsed from the container layout
/// (docs/FORMAT.md §1–2) independently of the library.
pub struct Layout2 {
    /// Offset of the header CRC (it covers `[0, header_crc)`).
    pub header_crc: usize,
    /// Absolute byte ranges of each stage's parameter record.
    pub records: Vec<Range<usize>>,
    /// Absolute byte range of each segment, and where its CRC sits in the header.
    pub segments: Vec<(Range<usize>, usize)>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn u8(&mut self) -> u8 {
        self.at += 1;
        self.bytes[self.at - 1]
    }
    fn skip(&mut self, n: usize) {
        self.at += n;
    }
    fn varint(&mut self) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = self.u8();
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }
    /// A blob's byte range (after its length).
    fn blob(&mut self) -> Range<usize> {
        let n = self.varint() as usize;
        self.skip(n);
        self.at - n..self.at
    }
}

pub fn layout(archive: &[u8]) -> Layout2 {
    let body_len = u32::from_le_bytes(archive[12..16].try_into().unwrap()) as usize;
    let header_crc = 16 + body_len;
    let data_start = (header_crc + 4).div_ceil(64) * 64;
    let mut c = Cursor { bytes: archive, at: 16 };
    c.varint(); // data_len
    c.u8(); // dtype
    for _ in 0..c.varint() {
        c.varint(); // shape
    }
    c.u8(); // error mode
    c.skip(8); // error bound
    c.blob(); // preset
    let mut records = Vec::new();
    for _ in 0..c.varint() {
        c.varint(); // type id
        c.blob(); // name
        c.varint(); // parameter version
        records.push(c.blob());
        for _ in 0..c.varint() {
            if c.varint() != 0 {
                c.varint(); // port
            }
        }
    }
    let mut segments = Vec::new();
    for _ in 0..c.varint() {
        c.varint(); // stage
        c.varint(); // port
        c.u8(); // dtype
        let offset = c.varint() as usize;
        let len = c.varint() as usize;
        segments.push((data_start + offset..data_start + offset + len, c.at));
        c.skip(4);
    }
    assert_eq!(c.at, header_crc, "re-parsed header ends where the CRC starts");
    Layout2 { header_crc, records, segments }
}

/// Recompute every segment CRC and then the header CRC.
pub fn fix_crcs(archive: &mut [u8], l: &Layout2) {
    for (range, crc_at) in &l.segments {
        let crc = crc32c::crc32c(&archive[range.clone()]);
        archive[*crc_at..*crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32c::crc32c(&archive[..l.header_crc]);
    archive[l.header_crc..l.header_crc + 4].copy_from_slice(&crc.to_le_bytes());
}
