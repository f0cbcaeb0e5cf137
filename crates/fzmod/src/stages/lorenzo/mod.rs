//! Lorenzo: lossless integer delta on i32 codes (wrapping arithmetic).
//!
//! `block_size = 0`: N-D inclusion–exclusion over the pipeline grid (1-D, 2-D or 3-D).
//! `block_size = B`: 1-D delta that restarts every B elements (cuSZp), so every block
//! decodes on its own. Layout: docs/FORMAT.md, "Lorenzo".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{Reader, Writer};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::shape::Grid;
use crate::stage::{self, ForwardContext, Forwarded, Port, Stage, StageKind};

/// Registry entry.
pub static KIND: StageKind = StageKind {
    id: 12,
    name: "Lorenzo",
    summary: "integer Lorenzo delta: N-D inclusion-exclusion, or 1-D block-restart (cuSZp)",
    param_version: 1,
    from_toml: Lorenzo::from_toml,
    from_record: Lorenzo::from_record,
};

/// Largest accepted block size (a block must fit a GPU thread block's shared tile).
pub const MAX_BLOCK: u32 = 1 << 20;

/// The Lorenzo stage.
#[derive(Clone, Debug)]
pub struct Lorenzo {
    /// 0 = N-D over the grid; otherwise the 1-D restart period.
    pub block_size: u32,
    /// Grid recorded by the forward run (needed by the N-D inverse).
    pub grid: Option<Grid>,
}

impl Lorenzo {
    pub fn new(block_size: u32) -> Result<Self> {
        if block_size > MAX_BLOCK {
            return Err(Error::InvalidArgument(format!("Lorenzo block_size {block_size} > {MAX_BLOCK}")));
        }
        Ok(Lorenzo { block_size, grid: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Lorenzo");
        p.dtype("data_type", DType::I32, &[DType::I32])?;
        let block = p.u32("block_size", 0)?;
        p.finish()?;
        Ok(Box::new(Lorenzo::new(block)?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Lorenzo parameters");
        let block = u32::try_from(r.varint()?).map_err(|_| corrupt!("Lorenzo block size"))?;
        let grid = Grid::read_from(&mut r)?;
        r.finish()?;
        let mut s = Lorenzo::new(block).map_err(|e| corrupt!("{e}"))?;
        s.grid = Some(grid);
        Ok(Box::new(s))
    }
}

impl Lorenzo {
    /// The grid a forward run over `len` codes records (1-D in block mode).
    pub(crate) fn grid_for(&self, shape: &[usize], len: usize) -> Result<Grid> {
        if self.block_size > 0 {
            Ok(Grid { dims: [1, 1, len], ndim: 1 })
        } else {
            Grid::for_stage(shape, len, "Lorenzo")
        }
    }

    /// The parameter record (docs/FORMAT.md 6.2); shared by every backend.
    pub(crate) fn record(&self, grid: Grid) -> Vec<u8> {
        let mut w = Writer::default();
        w.varint(u64::from(self.block_size));
        grid.write_to(&mut w);
        w.bytes
    }
}

impl Stage for Lorenzo {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: DType::I32 }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "output", dtype: DType::I32 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let Some(Buffer::I32(mut q)) = inputs.into_iter().next() else { unreachable!() };
        let grid = self.grid_for(ctx.shape, q.len())?;
        let out = if self.block_size > 0 {
            cpu::block_delta(&mut q, self.block_size as usize);
            q
        } else {
            cpu::nd_delta(&q, grid.dims)
        };
        Ok(Forwarded { outputs: vec![Buffer::I32(out)], record: self.record(grid) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let grid = self.grid.ok_or_else(|| Error::Pipeline("Lorenzo inverse needs a decoded record".into()))?;
        let Some(Buffer::I32(mut d)) = outputs.into_iter().next() else { unreachable!() };
        if d.len() != grid.len() {
            return Err(corrupt!("Lorenzo: {} elements for grid {:?}", d.len(), grid.dims));
        }
        if self.block_size > 0 {
            cpu::block_prefix(&mut d, self.block_size as usize);
        } else {
            cpu::nd_prefix(&mut d, grid.dims);
        }
        Ok(vec![Buffer::I32(d)])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("data_type".into(), "int32".into());
        t.insert("block_size".into(), i64::from(self.block_size).into());
        t
    }

    fn check_header(&self, header: &crate::archive::Header) -> Result<()> {
        match self.grid {
            Some(grid) if self.block_size == 0 => grid.check_header(header, "Lorenzo"),
            _ => Ok(()),
        }
    }

    /// Only the block-restart form: the N-D one reads the whole grid.
    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        (self.block_size > 0).then_some(self as _)
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
