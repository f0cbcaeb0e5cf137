//! Bitshuffle: per-block bit-plane transpose of 1/2/4/8-byte elements (LC `BIT_k`, the PFPL
//! chain's third stage), so the zero high planes of small words become runs of zero bytes.
//! Bytes after the last whole group of 8 elements of each block are copied.
//!
//! Forward: `T[n]` (any integer type, read as its little-endian bytes) → `output: u8[]` of the
//! same length. Layout: docs/FORMAT.md, "Bitshuffle".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry (FZGPUModules' `StageType::BITSHUFFLE`).
pub static KIND: StageKind = StageKind {
    id: 17,
    name: "Bitshuffle",
    summary: "per-block bit-plane transpose of 1/2/4/8-byte elements; tail bytes copied",
    param_version: 1,
    from_toml: Bitshuffle::from_toml,
    from_record: Bitshuffle::from_record,
};

/// Largest block in bytes.
pub const MAX_BLOCK_BYTES: u32 = 1 << 30;

/// Port types Bitshuffle accepts.
const DATA_TYPES: [DType; 5] = [DType::U8, DType::U16, DType::I16, DType::U32, DType::I32];

/// The Bitshuffle stage.
#[derive(Clone, Debug)]
pub struct Bitshuffle {
    /// Type of the input port (only its bytes matter).
    pub data_type: DType,
    /// Bytes per shuffled element: 1, 2, 4 or 8.
    pub element_width: u8,
    /// Bytes per block, a multiple of 8 · element_width.
    pub block_bytes: u32,
}

impl Bitshuffle {
    pub fn new(data_type: DType, element_width: u8, block_bytes: u32) -> Result<Self> {
        if !DATA_TYPES.contains(&data_type) {
            return Err(Error::InvalidArgument(format!("Bitshuffle cannot take {data_type} input")));
        }
        if ![1, 2, 4, 8].contains(&element_width) {
            return Err(Error::InvalidArgument(format!("Bitshuffle element_width {element_width} (1, 2, 4 or 8)")));
        }
        let group = 8 * u32::from(element_width);
        if block_bytes == 0 || block_bytes > MAX_BLOCK_BYTES || !block_bytes.is_multiple_of(group) {
            return Err(Error::InvalidArgument(format!(
                "Bitshuffle block_size {block_bytes} must be a positive multiple of {group}, at most {MAX_BLOCK_BYTES}"
            )));
        }
        Ok(Bitshuffle { data_type, element_width, block_bytes })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Bitshuffle");
        let data_type = p.dtype("data_type", DType::U8, &DATA_TYPES)?;
        let width = p.u32("element_width", 4)?;
        let block = p.u32("block_size", 16384)?;
        p.finish()?;
        let width = u8::try_from(width).unwrap_or(0);
        Ok(Box::new(Bitshuffle::new(data_type, width, block).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Bitshuffle parameters");
        let code = r.u8()?;
        let width = r.u8()?;
        let block = r.count(u64::from(MAX_BLOCK_BYTES), "block size")? as u32;
        r.finish()?;
        let data_type = DType::from_code(code).ok_or_else(|| corrupt!("Bitshuffle type code {code}"))?;
        Ok(Box::new(Bitshuffle::new(data_type, width, block).map_err(|e| corrupt!("{e}"))?))
    }

    /// The parameter record: data type, element width, block bytes; shared by every backend.
    pub(crate) fn record(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.data_type.code());
        w.u8(self.element_width);
        w.varint(u64::from(self.block_bytes));
        w.bytes
    }
}

impl Stage for Bitshuffle {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.data_type }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let bytes = inputs[0].le_bytes();
        let out = cpu::run(&bytes, usize::from(self.element_width), self.block_bytes as usize, false);
        Ok(Forwarded { outputs: vec![Buffer::U8(out)], record: self.record() })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let Buffer::U8(bytes) = &outputs[0] else { unreachable!("checked by expect_buffers") };
        let size = self.data_type.size();
        if !bytes.len().is_multiple_of(size) {
            return Err(corrupt!("{} bytes is not a whole number of {} elements", bytes.len(), self.data_type));
        }
        // Unshuffled straight into the typed buffer: no byte vector to convert afterwards.
        let mut out = Buffer::zeroed(self.data_type, bytes.len() / size)?;
        cpu::run_into(bytes, usize::from(self.element_width), self.block_bytes as usize, true, out.native_bytes_mut());
        out.from_le_in_place();
        Ok(vec![out])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("data_type".into(), self.data_type.toml_name().into());
        t.insert("element_width".into(), i64::from(self.element_width).into());
        t.insert("block_size".into(), i64::from(self.block_bytes).into());
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
