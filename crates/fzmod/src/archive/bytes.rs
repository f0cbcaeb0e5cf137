//! Little-endian primitives and LEB128 varints (docs/FORMAT.md, "Encodings").
//!
//! The reader never panics and never trusts a length before checking it against the bytes left.

use crate::error::{corrupt, Error, Result};

/// Appends little-endian fields to a byte vector.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// Unsigned LEB128: 7 bits per byte, low group first, high bit = more bytes follow.
    pub fn varint(&mut self, mut v: u64) {
        loop {
            let low = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.bytes.push(low);
                return;
            }
            self.bytes.push(low | 0x80);
        }
    }
    /// A varint length followed by that many bytes.
    pub fn blob(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.bytes.extend_from_slice(b);
    }
}

/// Reads fields back; every read checks the remaining length first.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// What is being read, for error messages ("header", "stage 'q' parameters").
    what: &'a str,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], what: &'a str) -> Self {
        Reader { bytes, pos: 0, what }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(corrupt!(
                "{}: needs {n} more bytes at offset {}, only {} left",
                self.what,
                self.pos,
                self.remaining()
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    pub fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            let group = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                break;
            }
            v |= group << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt!("{}: varint longer than 64 bits", self.what))
    }
    /// A varint that must fit in `usize` and not exceed `max`.
    pub fn count(&mut self, max: u64, field: &str) -> Result<usize> {
        let v = self.varint()?;
        if v > max {
            return Err(corrupt!("{}: {field} = {v} exceeds the limit {max}", self.what));
        }
        usize::try_from(v).map_err(|_| corrupt!("{}: {field} = {v} too large", self.what))
    }
    pub fn blob(&mut self) -> Result<&'a [u8]> {
        let n = self.count(self.remaining() as u64, "length")?;
        self.take(n)
    }
    pub fn string(&mut self) -> Result<String> {
        let b = self.blob()?;
        String::from_utf8(b.to_vec()).map_err(|_| corrupt!("{}: string is not UTF-8", self.what))
    }
    /// Fails unless every byte was consumed.
    pub fn finish(self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(Error::Corrupt(format!("{}: {} unexpected trailing bytes", self.what, self.remaining())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<u64>()) {
            let mut w = Writer::default();
            w.varint(v);
            prop_assert!(w.bytes.len() <= 10);
            let mut r = Reader::new(&w.bytes, "test");
            prop_assert_eq!(r.varint().unwrap(), v);
            r.finish().unwrap();
        }
    }

    #[test]
    fn overlong_varint_is_an_error() {
        let bytes = [0xffu8; 11];
        assert!(Reader::new(&bytes, "t").varint().is_err());
        let too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader::new(&too_big, "t").varint().is_err());
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&max, "t").varint().unwrap(), u64::MAX);
    }
}
