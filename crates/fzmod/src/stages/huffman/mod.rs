//! Huffman: cuSZ's entropy coder (Tian et al., PACT'20; CLUSTER'21) as a stage: a global
//! histogram, a canonical code book limited to 20-bit codes, and chunks of 4096 symbols
//! coded independently behind a table of their word counts, so both backends encode and
//! decode every chunk in parallel. Symbols at or above the book length are escaped (the
//! escape's code, then the value in full), so any input is accepted.
//!
//! Forward: `u8|u16|u32[n]` → `output: u8[]` = book ‖ word counts ‖ payload.
//! Layout: docs/FORMAT.md, "Huffman"; the book's rules: book.rs.

mod book;
mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};
pub use book::{MAX_BKLEN, MAX_LEN};
pub use cpu::CHUNK;

/// Registry entry (FZGPUModules' `StageType::HUFFMAN`).
pub static KIND: StageKind = StageKind {
    id: 6,
    name: "Huffman",
    summary: "cuSZ Huffman: global histogram, canonical book (codes <= 20 bits), 4096-symbol chunks; escapes",
    param_version: 1,
    from_toml: Huffman::from_toml,
    from_record: Huffman::from_record,
};

/// Symbol types the stage codes.
pub const SYMBOL_TYPES: [DType; 3] = [DType::U8, DType::U16, DType::U32];

/// The Huffman stage.
#[derive(Clone, Debug)]
pub struct Huffman {
    /// Symbol type: u8, u16 or u32.
    pub input: DType,
    /// Book length: symbols below it have codes of their own, the rest share the escape.
    pub bklen: u32,
    /// Symbol count, known after the forward run.
    pub num_symbols: Option<u64>,
}

/// Bits of a symbol type (as escaped values are written).
fn symbol_bits(input: DType) -> u32 {
    8 * input.size() as u32
}

impl Huffman {
    /// `bklen` in `1..=4096`, and at most `2^8` for u8 symbols (every entry below it is a symbol).
    pub fn new(input: DType, bklen: u32) -> Result<Self> {
        if !SYMBOL_TYPES.contains(&input) {
            return Err(Error::InvalidArgument(format!("Huffman codes u8, u16 or u32 symbols, not {input}")));
        }
        let most = MAX_BKLEN.min(1 << symbol_bits(input).min(31));
        if !(1..=most).contains(&bklen) {
            return Err(Error::InvalidArgument(format!("Huffman bklen {bklen} outside 1..={most} for {input}")));
        }
        Ok(Huffman { input, bklen, num_symbols: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Huffman");
        let input = p.dtype("input_type", DType::U16, &SYMBOL_TYPES)?;
        let bklen = p.u32("bklen", if input == DType::U8 { 256 } else { 1024 })?;
        p.finish()?;
        Ok(Box::new(Huffman::new(input, bklen).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Huffman parameters");
        let code = r.u8()?;
        let input = DType::from_code(code).filter(|d| SYMBOL_TYPES.contains(d));
        let input = input.ok_or_else(|| corrupt!("Huffman symbol type code {code}"))?;
        let bklen = r.count(u64::from(MAX_BKLEN), "bklen")? as u32;
        let n = r.varint()?;
        r.finish()?;
        let mut s = Huffman::new(input, bklen).map_err(|e| corrupt!("{e}"))?;
        s.num_symbols = Some(n);
        Ok(Box::new(s))
    }

    /// The parameter record: symbol type, book length, symbol count; shared by every backend.
    pub(crate) fn record(&self, n: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.varint(u64::from(self.bklen));
        w.varint(n as u64);
        w.bytes
    }

    /// The decoded symbol count (from the record).
    fn recorded_len(&self) -> Result<usize> {
        let n = self.num_symbols.ok_or_else(|| Error::Pipeline("Huffman inverse needs a decoded record".into()))?;
        usize::try_from(n).map_err(|_| corrupt!("Huffman length {n}"))
    }
}

impl Stage for Huffman {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let out = match &inputs[0] {
            Buffer::U8(x) => cpu::encode(x, self.bklen),
            Buffer::U16(x) => cpu::encode(x, self.bklen),
            Buffer::U32(x) => cpu::encode(x, self.bklen),
            _ => unreachable!("checked by expect_buffers"),
        };
        Ok(Forwarded { outputs: vec![Buffer::U8(out)], record: self.record(inputs[0].len()) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let n = self.recorded_len()?;
        let Buffer::U8(seg) = &outputs[0] else { unreachable!("checked by expect_buffers") };
        Ok(vec![match self.input {
            DType::U8 => Buffer::U8(cpu::decode(seg, n, self.bklen)?),
            DType::U16 => Buffer::U16(cpu::decode(seg, n, self.bklen)?),
            _ => Buffer::U32(cpu::decode(seg, n, self.bklen)?),
        }])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t.insert("bklen".into(), i64::from(self.bklen).into());
        t
    }

    fn stated_bytes(&self) -> u64 {
        self.num_symbols.unwrap_or(0).saturating_mul(self.input.size() as u64)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        let s = Huffman::new(DType::U16, 1024).unwrap();
        let rec = s.record(77);
        let back = Huffman::from_record(1, &rec).unwrap();
        assert_eq!(back.to_toml(), s.to_toml());
        assert!(Huffman::from_record(2, &rec).is_err());
        assert!(Huffman::from_record(1, &rec[..2]).is_err());
        assert!(Huffman::from_record(1, &Huffman { bklen: 0, ..s.clone() }.record(1)).is_err());
        assert!(Huffman::from_record(1, &Huffman { input: DType::U8, ..s }.record(1)).is_err(), "bklen > 256 for u8");
        assert!(Huffman::new(DType::I16, 16).is_err());
    }

    #[test]
    fn toml_defaults() {
        let t: toml::Table = "input_type = \"uint8\"".parse().unwrap();
        let s = Huffman::from_toml(&t).unwrap();
        assert_eq!(s.to_toml().get("bklen").and_then(|v| v.as_integer()), Some(256));
        let t: toml::Table = "bklen = 5000".parse().unwrap();
        assert!(Huffman::from_toml(&t).is_err());
    }
}
