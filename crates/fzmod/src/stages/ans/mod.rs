//! ANS: rANS over bytes with dietgpu's geometry (Jeff Johnson, facebookresearch/dietgpu, as
//! forked by MANS), written here from the published algorithm: one global byte histogram
//! normalised to `2^prob_bits`, 4 KiB blocks, each one GPU warp of 32 interleaved lane states,
//! per-block word counts, incompressible blocks stored raw.
//!
//! Forward: `u8[n]` → `output: u8[]`. Layout: docs/FORMAT.md, "ANS".

mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry (FZGPUModules' `StageType::ANS`).
pub static KIND: StageKind = StageKind {
    id: 20,
    name: "ANS",
    summary: "dietgpu-style rANS over bytes: global histogram, 4 KiB blocks of 32 interleaved states; raw escape",
    param_version: 1,
    from_toml: Ans::from_toml,
    from_record: Ans::from_record,
};

/// Probability precisions (bits) dietgpu supports; 10 is its default.
pub const PROB_BITS: std::ops::RangeInclusive<u32> = 9..=11;

/// The ANS stage.
#[derive(Clone, Debug)]
pub struct Ans {
    /// Probability precision: probabilities sum to `2^prob_bits`.
    pub prob_bits: u32,
    /// Input length, known after the forward run.
    pub num_bytes: Option<u64>,
}

impl Ans {
    pub fn new(prob_bits: u32) -> Result<Self> {
        if !PROB_BITS.contains(&prob_bits) {
            return Err(Error::InvalidArgument(format!("ANS prob_bits {prob_bits} (9, 10 or 11)")));
        }
        Ok(Ans { prob_bits, num_bytes: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "ANS");
        let bits = p.u32("prob_bits", 10)?;
        p.finish()?;
        Ok(Box::new(Ans::new(bits).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "ANS parameters");
        let bits = r.u8()?;
        let n = r.varint()?;
        r.finish()?;
        let mut s = Ans::new(u32::from(bits)).map_err(|e| corrupt!("{e}"))?;
        s.num_bytes = Some(n);
        Ok(Box::new(s))
    }

    /// The parameter record: precision and input length; shared by every backend.
    pub(crate) fn record(&self, num_bytes: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.prob_bits as u8);
        w.varint(num_bytes as u64);
        w.bytes
    }

    /// The recorded length, on a stage rebuilt from its record.
    fn recorded_len(&self) -> Result<usize> {
        let n = self.num_bytes.ok_or_else(|| Error::Pipeline("ANS inverse needs a decoded record".into()))?;
        usize::try_from(n).map_err(|_| corrupt!("ANS length {n}"))
    }
}

impl Stage for Ans {
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
        let out = cpu::encode(data, self.prob_bits);
        Ok(Forwarded { outputs: vec![Buffer::U8(out)], record: self.record(data.len()) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let n = self.recorded_len()?;
        let Buffer::U8(seg) = &outputs[0] else { unreachable!("checked by expect_buffers") };
        Ok(vec![Buffer::U8(cpu::decode(seg, n, self.prob_bits)?)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("prob_bits".into(), i64::from(self.prob_bits).into());
        t
    }

    fn stated_bytes(&self) -> u64 {
        self.num_bytes.unwrap_or(0)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}
