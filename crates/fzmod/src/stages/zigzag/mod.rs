//! Zigzag: LC's TCMS map of integer words, `(v << 1) ^ (v >> (bits − 1))`, so values of small
//! magnitude and either sign become small unsigned words.
//!
//! Forward: `T[n]` → `output: U[n]` (T = i16|u16|i32|u32, U unsigned of T's width; unsigned
//! inputs are read as two's complement). Layout: docs/FORMAT.md, "Zigzag".

mod cpu;
#[cfg(feature = "cuda")]
mod device;

use crate::archive::{Reader, Writer};
use crate::config::params::TomlParams;
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};
use crate::stages::words::{self, Words};

/// Registry entry (FZGPUModules' `StageType::ZIGZAG`).
pub static KIND: StageKind = StageKind {
    id: 15,
    name: "Zigzag",
    summary: "zigzag (TCMS) map of 16/32-bit integer words to unsigned",
    param_version: 1,
    from_toml: Zigzag::from_toml,
    from_record: Zigzag::from_record,
};

/// The Zigzag stage.
#[derive(Clone, Debug)]
pub struct Zigzag {
    pub input: DType,
}

impl Zigzag {
    pub fn new(input: DType) -> Result<Self> {
        if !words::INTEGER_TYPES.contains(&input) {
            return Err(Error::InvalidArgument(format!("Zigzag input must be a 16- or 32-bit integer, not {input}")));
        }
        Ok(Zigzag { input })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Zigzag");
        let input = p.dtype("input_type", DType::I32, &words::INTEGER_TYPES)?;
        p.finish()?;
        Ok(Box::new(Zigzag::new(input)?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Zigzag parameters");
        let code = r.u8()?;
        r.finish()?;
        let input = DType::from_code(code).ok_or_else(|| corrupt!("Zigzag input type code {code}"))?;
        Ok(Box::new(Zigzag::new(input).map_err(|e| corrupt!("{e}"))?))
    }

    /// The parameter record: the input type; shared by every backend.
    pub(crate) fn record(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.bytes
    }
}

impl Stage for Zigzag {
    fn kind(&self) -> &'static StageKind {
        &KIND
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
            outputs: vec![cpu::forward(w).into_buffer(words::unsigned_of(self.input))],
            record: self.record(),
        })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let w = Words::from_buffer(outputs.into_iter().next().expect("one output")).expect("checked");
        Ok(vec![cpu::inverse(w).into_buffer(self.input)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }

    fn clone_box(&self) -> Box<dyn Stage> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
