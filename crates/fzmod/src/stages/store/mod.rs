//! Store: the input as it is, losslessly (identity on f32/f64 values, bit for bit).
//!
//! Compression ends with it as a fallback: when a pipeline's archive would be larger than the
//! raw input (bounds near float precision, noise), the input is stored instead
//! (`fallback.rs`, in the run layer). It can also be configured on its own as a lossless pipeline.
//! Layout: docs/FORMAT.md, "Store".

mod cpu;
#[cfg(feature = "cuda")]
mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry.
pub static KIND: StageKind = StageKind {
    id: 42,
    name: "Store",
    summary: "the input values as they are (lossless; the fallback when compression would grow the data)",
    param_version: 1,
    from_toml: Store::from_toml,
    from_record: Store::from_record,
};

/// The store stage.
#[derive(Clone, Debug)]
pub struct Store {
    pub input: DType,
    /// Element count recorded by the forward run; the inverse checks the segment against it.
    pub num_elements: Option<u64>,
}

impl Store {
    pub fn new(input: DType) -> Result<Self> {
        if !matches!(input, DType::F32 | DType::F64) {
            return Err(Error::InvalidArgument(format!("Store input must be f32 or f64, not {input}")));
        }
        Ok(Store { input, num_elements: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Store");
        let input = p.dtype("input_type", DType::F32, &[DType::F32, DType::F64])?;
        p.finish()?;
        Ok(Box::new(Store::new(input)?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Store parameters");
        let code = r.u8()?;
        let input = DType::from_code(code).filter(|d| matches!(d, DType::F32 | DType::F64));
        let input = input.ok_or_else(|| corrupt!("Store input type code {code}"))?;
        let num_elements = r.varint()?;
        r.finish()?;
        Ok(Box::new(Store { input, num_elements: Some(num_elements) }))
    }

    /// The parameter record (docs/FORMAT.md 6.12).
    pub(crate) fn record(&self, num_elements: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.varint(num_elements as u64);
        w.bytes
    }
}

impl Stage for Store {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "values", dtype: self.input }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let values = cpu::forward(inputs.into_iter().next().expect("one input, checked above"));
        let record = self.record(values.len());
        Ok(Forwarded { outputs: vec![values], record })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let n = self.num_elements.ok_or_else(|| Error::Pipeline("Store inverse needs a decoded record".into()))?;
        let values = outputs.into_iter().next().expect("one output, checked above");
        Ok(vec![cpu::inverse(values, n)?])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t
    }

    fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        *self = Store::new(dtype)?;
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}
