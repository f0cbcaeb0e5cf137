//! Difference: chunked first difference of integer words (LC / PFPL `DIFF`), optionally mapped
//! to negabinary (PFPL's `DIFFNB`) or zigzag (LC's `DIFFMS`) so small magnitudes of either sign
//! have few significant bits.
//!
//! Forward: `T[n]` → `output: U[n]` (T = i16|u16|i32|u32; U = T without a map, else the
//! unsigned type of T's width). Layout: docs/FORMAT.md, "Difference".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};
use crate::stages::words::{self, Word, Words};

/// Registry entry (FZGPUModules' `StageType::DIFFERENCE`).
pub static KIND: StageKind = StageKind {
    id: 2,
    name: "Difference",
    summary: "chunked first difference of integer words; optional negabinary or zigzag output",
    param_version: 1,
    from_toml: Difference::from_toml,
    from_record: Difference::from_record,
};

/// Largest chunk in bytes (one GPU thread block's shared tile is far smaller; 0 = whole).
pub const MAX_CHUNK_BYTES: u32 = 1 << 30;

/// What happens to each difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMap {
    None,
    Negabinary,
    Zigzag,
}

impl OutputMap {
    #[inline]
    pub fn apply<W: Word>(self, d: W) -> W {
        match self {
            OutputMap::None => d,
            OutputMap::Negabinary => d.negabinary(),
            OutputMap::Zigzag => d.zigzag(),
        }
    }
    #[inline]
    pub fn undo<W: Word>(self, d: W) -> W {
        match self {
            OutputMap::None => d,
            OutputMap::Negabinary => d.unnegabinary(),
            OutputMap::Zigzag => d.unzigzag(),
        }
    }
    fn code(self) -> u8 {
        match self {
            OutputMap::None => 0,
            OutputMap::Negabinary => 1,
            OutputMap::Zigzag => 2,
        }
    }
    fn name(self) -> &'static str {
        match self {
            OutputMap::None => "none",
            OutputMap::Negabinary => "negabinary",
            OutputMap::Zigzag => "zigzag",
        }
    }
    fn parse(s: &str) -> Result<OutputMap> {
        [OutputMap::None, OutputMap::Negabinary, OutputMap::Zigzag].into_iter().find(|m| m.name() == s).ok_or_else(
            || Error::Config(format!("Difference: fusion_mode \"{s}\" (expected none, negabinary or zigzag)")),
        )
    }
}

/// The Difference stage.
#[derive(Clone, Debug)]
pub struct Difference {
    pub input: DType,
    /// Bytes per chunk, a multiple of the element size; 0 = the whole array.
    pub chunk_bytes: u32,
    pub map: OutputMap,
}

impl Difference {
    pub fn new(input: DType, chunk_bytes: u32, map: OutputMap) -> Result<Self> {
        if !words::INTEGER_TYPES.contains(&input) {
            return Err(Error::InvalidArgument(format!(
                "Difference input must be a 16- or 32-bit integer, not {input}"
            )));
        }
        if chunk_bytes > MAX_CHUNK_BYTES || !chunk_bytes.is_multiple_of(input.size() as u32) {
            return Err(Error::InvalidArgument(format!(
                "Difference chunk_size {chunk_bytes} must be a multiple of {} bytes, at most {MAX_CHUNK_BYTES}",
                input.size()
            )));
        }
        Ok(Difference { input, chunk_bytes, map })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Difference");
        let input = p.dtype("input_type", DType::I32, &words::INTEGER_TYPES)?;
        let chunk = p.u32("chunk_size", 0)?;
        let map = OutputMap::parse(p.str("fusion_mode")?.unwrap_or("none"))?;
        p.finish()?;
        Ok(Box::new(Difference::new(input, chunk, map).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Difference parameters");
        let code = r.u8()?;
        let input = DType::from_code(code).ok_or_else(|| corrupt!("Difference input type code {code}"))?;
        let chunk = r.count(u64::from(MAX_CHUNK_BYTES), "chunk size")? as u32;
        let map = match r.u8()? {
            0 => OutputMap::None,
            1 => OutputMap::Negabinary,
            2 => OutputMap::Zigzag,
            v => return Err(corrupt!("Difference output map {v}")),
        };
        r.finish()?;
        Ok(Box::new(Difference::new(input, chunk, map).map_err(|e| corrupt!("{e}"))?))
    }

    /// The parameter record: input type, chunk bytes, output map; shared by every backend.
    pub(crate) fn record(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.varint(u64::from(self.chunk_bytes));
        w.u8(self.map.code());
        w.bytes
    }

    fn output_type(&self) -> DType {
        match self.map {
            OutputMap::None => self.input,
            _ => words::unsigned_of(self.input),
        }
    }

    fn chunk_elems(&self) -> usize {
        self.chunk_bytes as usize / self.input.size()
    }
}

impl Stage for Difference {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: self.output_type() }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let mut out =
            Words::from_buffer(inputs.into_iter().next().expect("one input")).expect("checked by expect_buffers");
        match &mut out {
            Words::W16(v) => cpu::forward(v, self.chunk_elems(), self.map),
            Words::W32(v) => cpu::forward(v, self.chunk_elems(), self.map),
        }
        Ok(Forwarded { outputs: vec![out.into_buffer(self.output_type())], record: self.record() })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let mut w = Words::from_buffer(outputs.into_iter().next().expect("one output")).expect("checked");
        match &mut w {
            Words::W16(v) => cpu::inverse(v, self.chunk_elems(), self.map),
            Words::W32(v) => cpu::inverse(v, self.chunk_elems(), self.map),
        }
        Ok(vec![w.into_buffer(self.input)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t.insert("chunk_size".into(), i64::from(self.chunk_bytes).into());
        t.insert("fusion_mode".into(), self.map.name().into());
        t
    }

    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        (self.chunk_elems() > 0).then_some(self as _)
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
