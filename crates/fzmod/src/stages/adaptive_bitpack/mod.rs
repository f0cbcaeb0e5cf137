//! AdaptiveBitpack: per-block fixed-rate bit-plane coder (cuSZp), optionally with cuSZp2's
//! per-block plain/outlier selection (FZGPUModules' AdaptiveBitpack stage).
//!
//! Forward: `i32|i16[n]` → `output: u8[]` = `[metadata, one entry per block][payloads]`.
//! Metadata layouts: `plain` (1 B rate), `wide` (2 B rate + selection, the seed's layout) and
//! `packed` (1 B, cuSZp2 ratio parity with an escape for rate 32; docs/FORMAT.md).
//! Byte layout: docs/FORMAT.md, "AdaptiveBitpack".

mod cpu;
#[cfg(target_arch = "x86_64")]
mod cpu_avx2;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

pub use cpu::Layout;

/// Registry entry.
pub static KIND: StageKind = StageKind {
    id: 41,
    name: "AdaptiveBitpack",
    summary: "per-block fixed-rate bit-planes (cuSZp), optional cuSZp2 outlier selection",
    param_version: 1,
    from_toml: AdaptiveBitpack::from_toml,
    from_record: AdaptiveBitpack::from_record,
};

/// Block size limits from the seed.
pub const MAX_BLOCK: u32 = 1024;

/// The AdaptiveBitpack stage.
#[derive(Clone, Debug)]
pub struct AdaptiveBitpack {
    pub input: DType,
    pub block_size: u32,
    pub layout: Layout,
    /// Element count, known after the forward run.
    pub num_elements: Option<u64>,
}

impl AdaptiveBitpack {
    pub fn new(input: DType, block_size: u32, layout: Layout) -> Result<Self> {
        if !(1..=MAX_BLOCK).contains(&block_size) {
            return Err(Error::InvalidArgument(format!(
                "AdaptiveBitpack block_size {block_size} outside 1..={MAX_BLOCK}"
            )));
        }
        if !matches!(input, DType::I16 | DType::I32) {
            return Err(Error::InvalidArgument(format!("AdaptiveBitpack input must be int16 or int32, not {input}")));
        }
        Ok(AdaptiveBitpack { input, block_size, layout, num_elements: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "AdaptiveBitpack");
        let input = p.dtype("input_type", DType::I32, &[DType::I16, DType::I32])?;
        let block = p.u32("block_size", 32)?;
        let selection = p.bool("outlier_selection", false)?;
        let metadata = p.str("metadata")?;
        p.finish()?;
        let layout = match (selection, metadata) {
            (false, None | Some("plain")) => Layout::Plain,
            (true, None | Some("wide")) => Layout::Wide,
            (true, Some("packed")) => Layout::Packed,
            (s, Some(m)) => {
                return Err(Error::Config(format!(
                    "AdaptiveBitpack: metadata = \"{m}\" with outlier_selection = {s} (plain needs \
                     no metadata choice; with selection use \"wide\" or \"packed\")"
                )))
            }
        };
        Ok(Box::new(AdaptiveBitpack::new(input, block, layout).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "AdaptiveBitpack parameters");
        let code = r.u8()?;
        let input = DType::from_code(code).ok_or_else(|| corrupt!("AdaptiveBitpack type code {code}"))?;
        let block = r.count(u64::from(MAX_BLOCK), "block size")? as u32;
        let layout = Layout::from_code(r.u8()?)?;
        let n = r.varint()?;
        r.finish()?;
        let mut s = AdaptiveBitpack::new(input, block, layout).map_err(|e| corrupt!("{e}"))?;
        s.num_elements = Some(n);
        Ok(Box::new(s))
    }
}

impl AdaptiveBitpack {
    /// The parameter record (docs/FORMAT.md 6.4); shared by every backend.
    pub(crate) fn record(&self, num_elements: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.input.code());
        w.varint(u64::from(self.block_size));
        w.u8(self.layout.code());
        w.varint(num_elements as u64);
        w.bytes
    }

    /// The element count of a decoded record, bounded by its segment `bytes`: every block
    /// costs at least one metadata byte.
    fn decoded_len(&self, bytes: &[u8]) -> Result<usize> {
        let n = self
            .num_elements
            .ok_or_else(|| Error::Pipeline("AdaptiveBitpack inverse needs a decoded record".into()))?;
        if n.div_ceil(u64::from(self.block_size)) > bytes.len() as u64 {
            return Err(corrupt!("AdaptiveBitpack: {n} elements need more than {} bytes", bytes.len()));
        }
        Ok(n as usize)
    }
}

impl Stage for AdaptiveBitpack {
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
        let b = self.block_size as usize;
        let (out, n) = match &inputs[0] {
            Buffer::I32(v) => (cpu::encode(v, b, self.layout), v.len()),
            Buffer::I16(v) => (cpu::encode(v, b, self.layout), v.len()),
            _ => unreachable!("checked by expect_buffers"),
        };
        Ok(Forwarded { outputs: vec![Buffer::U8(out)], record: self.record(n) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let Buffer::U8(bytes) = &outputs[0] else { unreachable!() };
        let (n, b) = (self.decoded_len(bytes)?, self.block_size as usize);
        Ok(vec![match self.input {
            DType::I16 => Buffer::I16(cpu::decode(bytes, n, b, self.layout)?),
            _ => Buffer::I32(cpu::decode(bytes, n, b, self.layout)?),
        }])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("input_type".into(), self.input.toml_name().into());
        t.insert("block_size".into(), i64::from(self.block_size).into());
        t.insert("outlier_selection".into(), (self.layout != Layout::Plain).into());
        if self.layout != Layout::Plain {
            t.insert("metadata".into(), self.layout.name().into());
        }
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
