//! The word maps, one stage with two registered types: **Zigzag** (LC's TCMS map,
//! `(v << 1) ^ (v >> (bits − 1))`) and **Negabinary** (base −2 digits, `(v + 0xAA…A) ^ 0xAA…A`,
//! PFPL and LC). Both turn integer words of small magnitude and either sign into words with few
//! significant bits; they differ only in the map, so they share everything else. Each keeps its
//! own permanent type id and record, byte for byte what the two former stages wrote.
//!
//! Forward: `T[n]` → `output: U[n]` (T = i16|u16|i32|u32, U unsigned of T's width; unsigned
//! inputs are read as two's complement). Layout: docs/FORMAT.md, "Zigzag" and "Negabinary".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};
use crate::stages::words::{self, Words};

/// Registry entry of Zigzag (FZGPUModules' `StageType::ZIGZAG`).
pub static ZIGZAG: StageKind = StageKind {
    id: 15,
    name: "Zigzag",
    summary: "zigzag (TCMS) map of 16/32-bit integer words to unsigned",
    param_version: 1,
    from_toml: |t| WordMap::from_toml(Map::Zigzag, t),
    from_record: |v, b| WordMap::from_record(Map::Zigzag, v, b),
};

/// Registry entry of Negabinary (FZGPUModules' `StageType::NEGABINARY`).
pub static NEGABINARY: StageKind = StageKind {
    id: 16,
    name: "Negabinary",
    summary: "negabinary (base -2) map of 16/32-bit integer words to unsigned",
    param_version: 1,
    from_toml: |t| WordMap::from_toml(Map::Negabinary, t),
    from_record: |v, b| WordMap::from_record(Map::Negabinary, v, b),
};

/// Which map a [`WordMap`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Map {
    Zigzag,
    Negabinary,
}

impl Map {
    fn kind(self) -> &'static StageKind {
        match self {
            Map::Zigzag => &ZIGZAG,
            Map::Negabinary => &NEGABINARY,
        }
    }
}

/// A word-map stage: Zigzag or Negabinary over one integer type.
#[derive(Clone, Debug)]
pub struct WordMap {
    pub map: Map,
    pub input: DType,
}

impl WordMap {
    pub fn new(map: Map, input: DType) -> Result<Self> {
        if !words::INTEGER_TYPES.contains(&input) {
            return Err(Error::InvalidArgument(format!(
                "{} input must be a 16- or 32-bit integer, not {input}",
                map.kind().name
            )));
        }
        Ok(WordMap { map, input })
    }

    fn from_toml(map: Map, t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, map.kind().name);
        let input = p.dtype("input_type", DType::I32, &words::INTEGER_TYPES)?;
        p.finish()?;
        Ok(Box::new(WordMap::new(map, input)?))
    }

    fn from_record(map: Map, version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        let name = map.kind().name;
        stage::check_param_version(map.kind(), version)?;
        let mut r = Reader::new(bytes, "word map parameters");
        let code = r.u8()?;
        r.finish()?;
        let input = DType::from_code(code).ok_or_else(|| corrupt!("{name} input type code {code}"))?;
        Ok(Box::new(WordMap::new(map, input).map_err(|e| corrupt!("{e}"))?))
    }

    /// The parameter record: the input type; shared by every backend.
    pub(crate) fn record(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.bytes
    }
}

impl Stage for WordMap {
    fn kind(&self) -> &'static StageKind {
        self.map.kind()
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: words::unsigned_of(self.input) }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let w = Words::from_buffer(inputs.into_iter().next().expect("one input")).expect("checked by expect_buffers");
        Ok(Forwarded {
            outputs: vec![cpu::forward(self.map, w).into_buffer(words::unsigned_of(self.input))],
            record: self.record(),
        })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let w = Words::from_buffer(outputs.into_iter().next().expect("one output")).expect("checked");
        Ok(vec![cpu::inverse(self.map, w).into_buffer(self.input)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t
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
