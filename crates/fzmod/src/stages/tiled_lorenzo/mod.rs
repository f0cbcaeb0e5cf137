//! TiledLorenzo: cuSZp3's separable per-tile delta with tile-major, zero-padded output
//! (FZGPUModules' TiledLorenzo stage). `delta = false` keeps only the tile-major reshape,
//! which is how cuSZp3's "fixed" mode lines its coder blocks up with the tiles.
//! Layout: docs/FORMAT.md, "TiledLorenzo".

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
    id: 40,
    name: "TiledLorenzo",
    summary: "cuSZp3 separable delta inside tiles, tile-major zero-padded output",
    param_version: 1,
    from_toml: TiledLorenzo::from_toml,
    from_record: TiledLorenzo::from_record,
};

/// Tile geometry, slowest first: `[tz, ty, tx]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile(pub [usize; 3]);

impl Tile {
    /// cuSZp3's defaults: 64 in 1-D, 8×8 in 2-D, 4×4×4 in 3-D.
    pub fn default_for(ndim: usize) -> Tile {
        match ndim {
            1 => Tile([1, 1, 64]),
            2 => Tile([1, 8, 8]),
            _ => Tile([4, 4, 4]),
        }
    }
    pub fn elems(self) -> usize {
        self.0.iter().product()
    }
    /// Each extent in 1..=255 and the product in 1..=1024 (the seed's limits).
    pub fn validate(self) -> Result<Tile> {
        if self.0.iter().any(|&t| !(1..=255).contains(&t)) || self.elems() > 1024 {
            return Err(Error::InvalidArgument(format!(
                "TiledLorenzo tile {:?}: each extent must be 1..=255 and the product ≤ 1024",
                self.0
            )));
        }
        Ok(self)
    }
}

/// The TiledLorenzo stage.
#[derive(Clone, Debug)]
pub struct TiledLorenzo {
    /// `None` = pick the cuSZp3 default for the grid's dimensionality.
    pub tile: Option<Tile>,
    /// false = tile-major reshape only (cuSZp3 fixed mode).
    pub delta: bool,
    pub grid: Option<Grid>,
}

impl TiledLorenzo {
    pub fn new(tile: Option<Tile>, delta: bool) -> Result<Self> {
        let tile = tile.map(Tile::validate).transpose()?;
        Ok(TiledLorenzo { tile, delta, grid: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "TiledLorenzo");
        p.dtype("data_type", DType::I32, &[DType::I32])?;
        let (x, y, z) = (p.u32("tile_x", 0)?, p.u32("tile_y", 0)?, p.u32("tile_z", 0)?);
        let delta = p.bool("delta", true)?;
        p.finish()?;
        let tile = match (x, y, z) {
            (0, 0, 0) => None,
            (0, _, _) => return Err(Error::Config("TiledLorenzo: tile_y/tile_z need tile_x".into())),
            (x, y, z) => Some(Tile([z.max(1) as usize, y.max(1) as usize, x as usize])),
        };
        Ok(Box::new(TiledLorenzo::new(tile, delta).map_err(|e| Error::Config(e.to_string()))?))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "TiledLorenzo parameters");
        let mut tile = [0usize; 3];
        for t in &mut tile {
            *t = r.count(255, "tile extent")?;
        }
        let delta = match r.u8()? {
            0 => false,
            1 => true,
            v => return Err(corrupt!("TiledLorenzo delta flag {v}")),
        };
        let grid = Grid::read_from(&mut r)?;
        r.finish()?;
        let tile = Tile(tile).validate().map_err(|e| corrupt!("{e}"))?;
        if cpu::padded_len(grid, tile).is_none() {
            return Err(corrupt!("TiledLorenzo grid {:?} is impossible", grid.dims));
        }
        Ok(Box::new(TiledLorenzo { tile: Some(tile), delta, grid: Some(grid) }))
    }
}

impl TiledLorenzo {
    /// The configured tile, or cuSZp3's default for the grid's dimensionality.
    pub fn tile_for(&self, grid: Grid) -> Tile {
        self.tile.unwrap_or_else(|| Tile::default_for(grid.ndim))
    }

    /// Elements of the tile-major output for a grid.
    pub fn padded_len(grid: Grid, tile: Tile) -> Option<usize> {
        cpu::padded_len(grid, tile)
    }

    /// The parameter record (docs/FORMAT.md 6.3); shared by every backend.
    pub(crate) fn record(&self, tile: Tile, grid: Grid) -> Vec<u8> {
        let mut w = Writer::default();
        for t in tile.0 {
            w.varint(t as u64);
        }
        w.u8(u8::from(self.delta));
        grid.write_to(&mut w);
        w.bytes
    }
}

impl Stage for TiledLorenzo {
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
        let Some(Buffer::I32(q)) = inputs.into_iter().next() else { unreachable!() };
        let grid = Grid::for_stage(ctx.shape, q.len(), "TiledLorenzo")?;
        let tile = self.tile_for(grid);
        let out = cpu::forward(&q, grid, tile, self.delta);
        Ok(Forwarded { outputs: vec![Buffer::I32(out)], record: self.record(tile, grid) })
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let (Some(grid), Some(tile)) = (self.grid, self.tile) else {
            return Err(Error::Pipeline("TiledLorenzo inverse needs a decoded record".into()));
        };
        let Some(Buffer::I32(d)) = outputs.into_iter().next() else { unreachable!() };
        if Some(d.len()) != cpu::padded_len(grid, tile) {
            return Err(corrupt!("TiledLorenzo: {} elements for grid {:?}, tile {:?}", d.len(), grid.dims, tile.0));
        }
        Ok(vec![Buffer::I32(cpu::inverse(d, grid, tile, self.delta))])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("data_type".into(), "int32".into());
        if let Some(Tile([z, y, x])) = self.tile {
            t.insert("tile_x".into(), (x as i64).into());
            t.insert("tile_y".into(), (y as i64).into());
            t.insert("tile_z".into(), (z as i64).into());
        }
        t.insert("delta".into(), self.delta.into());
        t
    }

    fn check_header(&self, header: &crate::archive::Header) -> Result<()> {
        self.grid.map_or(Ok(()), |grid| grid.check_header(header, "TiledLorenzo"))
    }

    fn padded_elements(&self) -> Option<u64> {
        // from_record checked that the padded length fits a usize.
        Some(cpu::padded_len(self.grid?, self.tile?)? as u64)
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
