//! TiledLorenzo on the device (kernels in device.cu).

use super::{cpu, TiledLorenzo};
use crate::backend::cuda::device::{grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, THREADS};
use crate::backend::cuda::region::{self, Code, ForwardPart, Fragment, Geometry, InversePart, Region};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use crate::shape::Grid;
use cudarc::driver::{DeviceRepr, PushKernelArg};

use super::Tile;

/// `struct TileGeometry` of device.cu, passed by value (size checked on both sides).
#[repr(C)]
#[derive(Clone, Copy)]
struct TileGeometry {
    grid: [u64; 3],
    tile: [u64; 3],
    nty: u64,
    ntx: u64,
}
const _: () = assert!(std::mem::size_of::<TileGeometry>() == 64);
// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for TileGeometry {}

impl TileGeometry {
    fn new(g: Grid, t: Tile) -> TileGeometry {
        let [_, ny, nx] = g.dims;
        TileGeometry {
            grid: g.dims.map(|d| d as u64),
            tile: t.0.map(|d| d as u64),
            nty: ny.div_ceil(t.0[1]) as u64,
            ntx: nx.div_ceil(t.0[2]) as u64,
        }
    }
}

static SOURCE: &str = include_str!("device.cu");

pub(crate) fn program() -> Program {
    Program::new(SOURCE, String::new())
}

/// Largest tile (elements) whose inverse runs in shared memory (`TL_TILE_MAX`), that kernel's
/// threads per block (`TL_THREADS`) and the most tiles a block takes (`TL_GROUP`).
const TILE_MAX: u64 = 4096;
const INVERSE_THREADS: u64 = 256;
const GROUP: u64 = 64;

impl DeviceStage for TiledLorenzo {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [q] = inputs else { return Err(Error::Pipeline("TiledLorenzo takes one input".into())) };
        if let Some(alone) = Region::alone(self, false) {
            return alone.forward_alone(run, q, DType::I32);
        }
        let g = Grid::for_stage(&run.shape, q.known_len()?, "TiledLorenzo")?;
        let tile = self.tile_for(g);
        let padded =
            cpu::padded_len(g, tile).ok_or_else(|| Error::InvalidArgument("TiledLorenzo grid too large".into()))?;
        let out = run.alloc(DType::I32, padded)?;
        let s = run.stream().clone();
        let f = run.kernel(&program(), "tl_forward")?;
        let (geometry, delta, padded64) = (TileGeometry::new(g, tile), u32::from(self.delta), padded as u64);
        // SAFETY: argument list matches device.cu; `out` holds the padded length.
        unsafe {
            s.launch_builder(&f)
                .arg(&q.ptr(&s))
                .arg(&geometry)
                .arg(&delta)
                .arg(&padded64)
                .arg(&out.ptr(&s))
                .launch(grid(padded64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        let record = self.record(tile, g);
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let (g, tile) = self.decoded()?;
        let [d] = outputs else { return Err(Error::Pipeline("TiledLorenzo inverse takes one buffer".into())) };
        let padded = d.known_len()?;
        if Some(padded) != cpu::padded_len(g, tile) {
            return Err(corrupt!("TiledLorenzo: {padded} elements for grid {:?}, tile {:?}", g.dims, tile.0));
        }
        if let Some(alone) = Region::alone(self, true) {
            return alone.inverse_alone(run, outputs, DType::I32);
        }
        let geometry = TileGeometry::new(g, tile);
        let s = run.stream().clone();
        let ntiles = (padded / tile.elems()) as u64;
        if tile.elems() as u64 <= TILE_MAX {
            let out = run.alloc(DType::I32, g.len())?;
            let f = run.kernel(&program(), "tl_inverse")?;
            let group = (TILE_MAX / tile.elems() as u64).clamp(1, GROUP);
            let delta = u32::from(self.delta);
            // SAFETY: argument list matches device.cu; `d` holds ntiles whole tiles (checked
            // above) and `out` the grid's elements.
            unsafe {
                s.launch_builder(&f)
                    .arg(&d.ptr(&s))
                    .arg(&geometry)
                    .arg(&ntiles)
                    .arg(&delta)
                    .arg(&out.ptr(&s))
                    .launch(grid(ntiles.div_ceil(group) * INVERSE_THREADS, INVERSE_THREADS))
                    .map_err(device_error)?;
            }
            return Ok(vec![out]);
        }
        let scratch = run.copy(d, padded)?;
        let out = run.alloc(DType::I32, g.len())?;
        let (undelta, gather) = (run.kernel(&program(), "tl_undelta")?, run.kernel(&program(), "tl_gather")?);
        // SAFETY: argument lists match device.cu; sizes checked above.
        unsafe {
            if self.delta {
                s.launch_builder(&undelta)
                    .arg(&scratch.ptr(&s))
                    .arg(&geometry)
                    .arg(&ntiles)
                    .launch(grid(ntiles, 128))
                    .map_err(device_error)?;
            }
            s.launch_builder(&gather)
                .arg(&scratch.ptr(&s))
                .arg(&geometry)
                .arg(&out.ptr(&s))
                .launch(grid(g.len() as u64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

/// A region's tile-major slots are this stage's output: it gathers each tile from the natural
/// grid (the region's input) and, inverse, scatters it back, so it comes first in a region.
/// Its tables live in the region's scratch area, which bounds how small a tile may be: the
/// inverse's tile origins (24 bytes a tile), the forward's origins and extents (12 bytes a
/// tile) and row offsets (8 bytes a row of a tile).
impl Fragment for TiledLorenzo {
    fn sources(&self) -> Vec<&'static str> {
        vec![SOURCE]
    }

    fn geometry(&self) -> Option<Geometry> {
        // Every default tile (1-D, 2-D, 3-D) has 64 elements, in at most 16 rows.
        let (te, rows) = self.tile.map_or((64, 16), |t| (t.elems(), t.0[0] * t.0[1]));
        let most_tiles = region::TILE_BUFFER_BYTES / 4 / te;
        let scratch = (24 * most_tiles).max(12 * most_tiles + 8 * rows);
        (scratch <= region::SCRATCH_BYTES).then_some(Geometry {
            in_width: 4,
            out_width: 4,
            same_count: true,
            granule: 4 * te,
            coder: false,
        })
    }

    fn gathers(&self) -> bool {
        true
    }

    fn forward_code(&self) -> Code {
        format!(
            "tl_region_forward_packed(fz_elements<i32>($global_in), (u32*)$out, (u32*)$spare, $first, $count, $scratch, $0, $1, $2, $3, {})",
            self.delta
        )
    }

    fn inverse_code(&self) -> Code {
        format!(
            "tl_region_inverse_packed((u32*)$in, fz_stores($global_out), $first, $count, $scratch, $0, $1, $2, $3, {})",
            self.delta
        )
    }

    fn region_elements(&self, run: &DeviceRun, n: usize) -> Result<usize> {
        let g = Grid::for_stage(&run.shape, n, "TiledLorenzo")?;
        cpu::padded_len(g, self.tile_for(g)).ok_or_else(|| Error::InvalidArgument("TiledLorenzo grid too large".into()))
    }

    fn inverse_elements(&self, _n: usize) -> Result<usize> {
        // `n` is the padded length its `inverse` states (the region checked the others
        // against it): the grid is what it scatters back.
        Ok(self.decoded()?.0.len())
    }

    fn forward(&self, run: &mut DeviceRun, _input: Option<&DeviceBuffer>, n: usize) -> Result<ForwardPart> {
        let g = Grid::for_stage(&run.shape, n, "TiledLorenzo")?;
        let tile = self.tile_for(g);
        Ok(ForwardPart::with_args(region_args(g, tile), self.record(tile, g)))
    }

    fn inverse(&self, _run: &mut DeviceRun, _outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        let (g, tile) = self.decoded()?;
        let bytes = cpu::padded_len(g, tile)
            .and_then(|padded| padded.checked_mul(4))
            .ok_or_else(|| corrupt!("TiledLorenzo grid {:?}", g.dims))?;
        Ok(InversePart::Transform {
            args: region_args(g, tile),
            input_bytes: Some(bytes),
            finish: Box::new(|_, _| Ok(())),
        })
    }
}

impl TiledLorenzo {
    /// The grid and tile of a decoded record.
    fn decoded(&self) -> Result<(Grid, Tile)> {
        match (self.grid, self.tile) {
            (Some(g), Some(t)) => Ok((g, t)),
            _ => Err(Error::Pipeline("TiledLorenzo inverse needs a decoded record".into())),
        }
    }
}

/// A region fragment's runtime values: the grid's extents and the packed tile (`TL_PACK`).
fn region_args(g: Grid, tile: Tile) -> Vec<u64> {
    let [nz, ny, nx] = g.dims.map(|d| d as u64);
    let [tz, ty, tx] = tile.0.map(|t| t as u64);
    vec![nz, ny, nx, tz << 16 | ty << 8 | tx]
}
