//! BitplaneRZE: FZ-GPU's lossless codec (Zhang et al., HPDC'23) as one stage (FZGPUModules'
//! BitplaneRZE stage): per 4096-byte chunk a 32×32 bit-plane transpose, then elimination of
//! all-zero 16-byte groups, in FZ-GPU's self-describing archive. Chunks are placed in chunk
//! order by an exclusive scan, never by atomics, so the bytes are deterministic.
//!
//! Forward: `u16[n]` → `output: u8[]`. Layout: docs/FORMAT.md, "BitplaneRZE".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry (FZGPUModules' `StageType::BITPLANE_RZE`).
pub static KIND: StageKind = StageKind {
    id: 23,
    name: "BitplaneRZE",
    summary: "FZ-GPU lossless codec: 4096-B chunks, bit-plane transpose, zero 16-B groups dropped",
    param_version: 1,
    from_toml: BitplaneRze::from_toml,
    from_record: BitplaneRze::from_record,
};

/// Most codes one archive can hold: its offsets are u32 and a chunk may not shrink.
pub const MAX_CODES: usize =
    (u32::MAX as usize - cpu::HEADER_BYTES) / (4 * (cpu::CHUNK_WORDS + cpu::FLAG_WORDS + 1)) * (2 * cpu::CHUNK_WORDS);

/// The BitplaneRZE stage (no parameters; the code count is recorded by the forward run).
#[derive(Clone, Debug, Default)]
pub struct BitplaneRze {
    pub num_codes: Option<u64>,
}

impl BitplaneRze {
    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "BitplaneRZE");
        p.dtype("input_type", DType::U16, &[DType::U16])?;
        p.finish()?;
        Ok(Box::new(BitplaneRze::default()))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "BitplaneRZE parameters");
        let n = r.varint()?;
        r.finish()?;
        Ok(Box::new(BitplaneRze { num_codes: Some(n) }))
    }

    /// The parameter record: the code count as a varint; shared by every backend.
    pub(crate) fn record(num_codes: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.varint(num_codes as u64);
        w.bytes
    }
}

impl Stage for BitplaneRze {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: DType::U16 }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let Buffer::U16(codes) = &inputs[0] else { unreachable!("checked by expect_buffers") };
        if codes.len() > MAX_CODES {
            return Err(Error::InvalidArgument(format!("BitplaneRZE holds at most {MAX_CODES} codes")));
        }
        Ok(Forwarded { outputs: vec![Buffer::U8(cpu::encode(codes))], record: Self::record(codes.len()) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let n = self.num_codes.ok_or_else(|| Error::Pipeline("BitplaneRZE inverse needs a decoded record".into()))?;
        let n = usize::try_from(n).ok().filter(|&n| n <= MAX_CODES);
        let n = n.ok_or_else(|| corrupt!("BitplaneRZE code count out of range"))?;
        let Buffer::U8(archive) = &outputs[0] else { unreachable!("checked by expect_buffers") };
        Ok(vec![Buffer::U16(cpu::decode(archive, n)?)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), "uint16".into());
        t
    }

    fn stated_bytes(&self) -> u64 {
        self.num_codes.unwrap_or(0).saturating_mul(2)
    }

    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        Some(self)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}
