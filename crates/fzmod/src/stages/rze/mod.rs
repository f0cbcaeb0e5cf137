//! RZE: repeated-zero elimination per chunk with a hierarchical bitmap (LC / PFPL `RZE_k`,
//! Azami and Burtscher's LC framework; the last stage of PFPL). A chunk that would not shrink
//! is stored raw.
//!
//! Forward: `u8[n]` → `output: u8[]` = `[u16 size per chunk][chunk payloads]`.
//! Layout: docs/FORMAT.md, "RZE".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry (FZGPUModules' `StageType::RZE`).
pub static KIND: StageKind = StageKind {
    id: 18,
    name: "RZE",
    summary: "per-chunk zero-word elimination with a 3-level repetition-eliminated bitmap; raw escape",
    param_version: 1,
    from_toml: Rze::from_toml,
    from_record: Rze::from_record,
};

/// Largest chunk: its size must fit the u16 size table.
pub const MAX_CHUNK_BYTES: u32 = u16::MAX as u32;

/// The RZE stage.
#[derive(Clone, Debug)]
pub struct Rze {
    /// Bytes per chunk (1..=65535, a multiple of the word size).
    pub chunk_bytes: u32,
    /// Bytes per eliminated word: 1, 2, 4 or 8.
    pub word_size: u8,
    /// Input length, known after the forward run.
    pub num_bytes: Option<u64>,
}

impl Rze {
    pub fn new(chunk_bytes: u32, word_size: u8) -> Result<Self> {
        if ![1, 2, 4, 8].contains(&word_size) {
            return Err(Error::InvalidArgument(format!("RZE word_size {word_size} (1, 2, 4 or 8)")));
        }
        if chunk_bytes == 0 || chunk_bytes > MAX_CHUNK_BYTES || !chunk_bytes.is_multiple_of(u32::from(word_size)) {
            return Err(Error::InvalidArgument(format!(
                "RZE chunk_size {chunk_bytes} must be a multiple of {word_size} in 1..={MAX_CHUNK_BYTES}"
            )));
        }
        Ok(Rze { chunk_bytes, word_size, num_bytes: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "RZE");
        let chunk = p.u32("chunk_size", 16384)?;
        let word = u8::try_from(p.u32("word_size", 1)?).unwrap_or(0);
        p.finish()?;
        Ok(Box::new(Rze::new(chunk, word).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "RZE parameters");
        let chunk = r.count(u64::from(MAX_CHUNK_BYTES), "chunk size")? as u32;
        let word = r.u8()?;
        let n = r.varint()?;
        r.finish()?;
        let mut s = Rze::new(chunk, word).map_err(|e| corrupt!("{e}"))?;
        s.num_bytes = Some(n);
        Ok(Box::new(s))
    }

    /// The parameter record: chunk bytes, word size, input length; shared by every backend.
    pub(crate) fn record(&self, num_bytes: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.varint(u64::from(self.chunk_bytes));
        w.u8(self.word_size);
        w.varint(num_bytes as u64);
        w.bytes
    }
}

impl Stage for Rze {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: DType::U8 }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let Buffer::U8(data) = &inputs[0] else { unreachable!("checked by expect_buffers") };
        let out = cpu::encode(data, self.chunk_bytes as usize, usize::from(self.word_size));
        Ok(Forwarded { outputs: vec![Buffer::U8(out)], record: self.record(data.len()) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let n = self.num_bytes.ok_or_else(|| Error::Pipeline("RZE inverse needs a decoded record".into()))?;
        let n = usize::try_from(n).map_err(|_| corrupt!("RZE length {n}"))?;
        let Buffer::U8(seg) = &outputs[0] else { unreachable!("checked by expect_buffers") };
        let out = cpu::decode(seg, n, self.chunk_bytes as usize, usize::from(self.word_size))?;
        Ok(vec![Buffer::U8(out)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("chunk_size".into(), i64::from(self.chunk_bytes).into());
        t.insert("word_size".into(), i64::from(self.word_size).into());
        t
    }

    fn stated_bytes(&self) -> u64 {
        self.num_bytes.unwrap_or(0)
    }

    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        Some(self)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }

    #[cfg(feature = "cuda")]
    fn fragment(&self) -> Option<&dyn crate::backend::cuda::region::Fragment> {
        Some(self)
    }
}
