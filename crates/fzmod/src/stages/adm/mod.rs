//! ADM: MANS's adaptive data mapping (Huang, Yang, Huang, Long, Tao, Tan, "MANS:
//! Multidimensional Adaptive Numerical Compressor for Scientific Data"), written here from the
//! published algorithm. Wide integer codes become one skewed byte each, for a byte entropy coder
//! (ANS), plus a unary signal per code kept raw. Unlike MANS, a block whose signals would not
//! fit beside its raw words is stored raw, so any input is safe.
//!
//! Forward: `u16|u32[n]` → `codes: u8[n]`, `side: u8[]` (centres, signal lengths, signals and
//! raw blocks). Layout: docs/FORMAT.md, "ADM".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry (FZGPUModules' `StageType::ADM`).
pub static KIND: StageKind = StageKind {
    id: 19,
    name: "ADM",
    summary: "MANS adaptive data mapping: u16/u32 codes -> skewed bytes + unary signals per 512-word block; raw escape",
    param_version: 1,
    from_toml: Adm::from_toml,
    from_record: Adm::from_record,
};

/// The word types ADM takes.
const INPUT_TYPES: [DType; 2] = [DType::U16, DType::U32];

/// The ADM stage.
#[derive(Clone, Debug)]
pub struct Adm {
    /// `u16` or `u32`.
    pub input: DType,
    /// Input length, known after the forward run.
    pub num_elements: Option<u64>,
}

impl Adm {
    pub fn new(input: DType) -> Result<Self> {
        if !INPUT_TYPES.contains(&input) {
            return Err(Error::InvalidArgument(format!("ADM input must be uint16 or uint32, not {input}")));
        }
        Ok(Adm { input, num_elements: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "ADM");
        let input = p.dtype("input_type", DType::U16, &INPUT_TYPES)?;
        p.finish()?;
        Ok(Box::new(Adm::new(input)?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "ADM parameters");
        let code = r.u8()?;
        let n = r.varint()?;
        r.finish()?;
        let input = DType::from_code(code).ok_or_else(|| corrupt!("ADM input type code {code}"))?;
        let mut s = Adm::new(input).map_err(|e| corrupt!("{e}"))?;
        s.num_elements = Some(n);
        Ok(Box::new(s))
    }

    /// The parameter record: input type and length; shared by every backend.
    pub(crate) fn record(&self, n: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.varint(n as u64);
        w.bytes
    }

    /// The recorded length, on a stage rebuilt from its record.
    fn recorded_len(&self) -> Result<usize> {
        let n = self.num_elements.ok_or_else(|| Error::Pipeline("ADM inverse needs a decoded record".into()))?;
        usize::try_from(n).map_err(|_| corrupt!("ADM length {n}"))
    }
}

impl Stage for Adm {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "codes", dtype: DType::U8 }, Port { name: "side", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let (n, (codes, side)) = match &inputs[0] {
            Buffer::U16(v) => (v.len(), cpu::encode(v)),
            Buffer::U32(v) => (v.len(), cpu::encode(v)),
            _ => unreachable!("checked by expect_buffers"),
        };
        Ok(Forwarded { outputs: vec![Buffer::U8(codes), Buffer::U8(side)], record: self.record(n) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let n = self.recorded_len()?;
        let [Buffer::U8(codes), Buffer::U8(side)] = &outputs[..] else { unreachable!("checked by expect_buffers") };
        if codes.len() != n {
            return Err(corrupt!("ADM: {} code bytes for {n} words", codes.len()));
        }
        Ok(vec![match self.input {
            DType::U16 => Buffer::U16(cpu::decode(codes, side)?),
            _ => Buffer::U32(cpu::decode(codes, side)?),
        }])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t
    }

    fn stated_bytes(&self) -> u64 {
        self.num_elements.unwrap_or(0).saturating_mul(self.input.size() as u64)
    }

    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        Some(self)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}
