//! Recompute an archive's CRCs after the fuzzer mutated it, so mutations of stage records and
//! segments reach the stage decoders instead of stopping at a checksum. The container layout
//! (docs/FORMAT.md §1–2) is re-parsed here independently of the library, and defensively:
//! bytes that are not laid out like an archive are left alone.

/// Fix the segment CRCs and then the header CRC in place; `None` if the layout does not parse.
pub fn reseal(bytes: &mut [u8]) -> Option<()> {
    let body_len = u32::from_le_bytes(bytes.get(12..16)?.try_into().ok()?) as usize;
    let header_crc = 16usize.checked_add(body_len)?;
    bytes.get(header_crc..header_crc.checked_add(4)?)?;
    let data_start = (header_crc + 4).div_ceil(64) * 64;
    let segments = segment_table(&bytes[16..header_crc])?;
    for (offset, len, crc_at) in segments {
        let start = data_start.checked_add(usize::try_from(offset).ok()?)?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        let crc = crc32c::crc32c(bytes.get(start..end)?);
        bytes[16 + crc_at..16 + crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32c::crc32c(&bytes[..header_crc]);
    bytes[header_crc..header_crc + 4].copy_from_slice(&crc.to_le_bytes());
    Some(())
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<usize> {
        let start = self.at;
        self.at = self.at.checked_add(n).filter(|&end| end <= self.bytes.len())?;
        Some(start)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|i| self.bytes[i])
    }
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn count(&mut self) -> Option<usize> {
        // Counts beyond the body's length cannot be real; refusing them keeps this cheap.
        usize::try_from(self.varint()?).ok().filter(|&n| n <= self.bytes.len())
    }
    fn blob(&mut self) -> Option<()> {
        let n = self.count()?;
        self.take(n).map(drop)
    }
}

/// (offset, len, position of the CRC within the body) of each segment entry.
fn segment_table(body: &[u8]) -> Option<Vec<(u64, u64, usize)>> {
    let mut c = Cursor { bytes: body, at: 0 };
    c.varint()?; // data_len
    c.u8()?; // dtype
    for _ in 0..c.count()? {
        c.varint()?; // shape
    }
    c.u8()?; // error mode
    c.take(8)?; // error bound
    c.blob()?; // preset
    for _ in 0..c.count()? {
        c.varint()?; // type id
        c.blob()?; // name
        c.varint()?; // parameter version
        c.blob()?; // parameters
        for _ in 0..c.count()? {
            if c.varint()? != 0 {
                c.varint()?; // port
            }
        }
    }
    let mut segments = Vec::new();
    for _ in 0..c.count()? {
        c.varint()?; // stage
        c.varint()?; // port
        c.u8()?; // dtype
        let offset = c.varint()?;
        let len = c.varint()?;
        segments.push((offset, len, c.take(4)?));
    }
    Some(segments)
}
