//! Fusion rule `cuszp`: the cuSZp-family chain on the GPU as one fused program: Quantizer → [Lorenzo (block or N-D) | TiledLorenzo]
//! → AdaptiveBitpack(i32, block = 32·m) compresses in one kernel (after a value-range pass for
//! relative bounds): each thread block codes a tile of blocks in shared memory and finds its
//! output offsets by a decoupled look-back; codes and deltas never reach device memory.
//! Decoding is one pass per block after a scan of the metadata costs (N-D Lorenzo adds three
//! prefix-sum passes). The archive bytes are those of the unfused stages: the same record
//! writers, the Quantizer's own outlier-channel encoder, and the shared archive assembly.

use crate::archive::InputRef;
use crate::backend::cuda::device::{address, first_guess, scan_in_one_block, scan_partials_len, DeviceBuffer};
use crate::backend::cuda::{device_error, CudaDevice, LaunchList, Program, Workspace};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use crate::graph::fusion::{CompressJob, DecompressJob, FusionRule, Source};
use crate::graph::DecodePlan;
use crate::graph::Pipeline;
use crate::shape::Grid;
use crate::stage::Stage;
use crate::stages::adaptive_bitpack::{AdaptiveBitpack, Layout};
use crate::stages::lorenzo::Lorenzo;
use crate::stages::quantizer::device::{minmax_blocks, PARAMS_BYTES};
use crate::stages::quantizer::{self, Quantizer, Resolved};
use crate::stages::tiled_lorenzo::{Tile, TiledLorenzo};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig};
use std::sync::Arc;

/// `struct Geometry` of launch.cuh, passed by value (its size is asserted on both sides).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Geometry {
    n: u64,
    ncodes: u64,
    nblocks: u64,
    meta_len: u64,
    nx: u64,
    ny: u64,
    nz: u64,
}

const _: () = assert!(std::mem::size_of::<Geometry>() == 56);
// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for Geometry {}

/// The fused program's sources: the launch structs, the Quantizer's arithmetic, then each
/// fused stage's fragment.
const SOURCE: &str = concat!(
    include_str!("launch.cuh"),
    include_str!("../quantizer/device.cu"),
    include_str!("quantizer.cu"),
    include_str!("lorenzo.cu"),
    include_str!("tiled_lorenzo.cu"),
    include_str!("adaptive_bitpack.cu"),
);

/// fz_compress's tiles (a compile-time shape): the bytes are the same with either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TileSize {
    Full,
    Small,
}

/// Full tiles down to this many thread blocks (two per SM of an H100); fewer take small tiles.
const MIN_FULL_TILES: u64 = 264;

/// The predictor between quantizer and coder.
#[derive(Clone, Copy, Debug)]
enum Predictor {
    None,
    Block(u32),
    Tiled {
        tile: Tile,
        delta: bool,
    },
    /// N-D Lorenzo over the grid (block_size = 0).
    Nd,
}

/// A pipeline (or decoded archive) the fused GPU chain can run.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    quant: Quantizer,
    predictor: Predictor,
    coder: AdaptiveBitpack,
    /// Stage index of the predictor, when there is one.
    pred_stage: Option<usize>,
}

fn downcast<T: 'static>(s: &dyn Stage) -> Option<&T> {
    s.as_any().downcast_ref::<T>()
}

impl Chain {
    /// Recognise the chain in stages and their input references; `Err` says why not.
    pub(crate) fn recognise(stages: &[&dyn Stage], inputs: &[Vec<InputRef>]) -> Result<Chain, String> {
        let codes = InputRef::Stage { stage: 0, port: 0 };
        let quant =
            stages.first().and_then(|s| downcast::<Quantizer>(*s)).ok_or("the first stage is not a Quantizer")?;
        if quant.inline_outliers {
            return Err("the Quantizer writes PFPL inline words, not i32 codes".into());
        }
        if inputs[0] != [InputRef::External] {
            return Err("the Quantizer does not read the pipeline input".into());
        }
        let coder_at = stages.len() - 1;
        let coder = downcast::<AdaptiveBitpack>(stages[coder_at]).ok_or("the last stage is not an AdaptiveBitpack")?;
        let (predictor, pred_stage) = match stages.len() {
            2 => (Predictor::None, None),
            3 => {
                if inputs[1] != [codes] {
                    return Err("the predictor does not read the quantizer codes".into());
                }
                let p = if let Some(l) = downcast::<Lorenzo>(stages[1]) {
                    if l.block_size == 0 {
                        Predictor::Nd
                    } else {
                        Predictor::Block(l.block_size)
                    }
                } else if let Some(t) = downcast::<TiledLorenzo>(stages[1]) {
                    Predictor::Tiled { tile: t.tile.unwrap_or(Tile([1, 1, 1])), delta: t.delta }
                } else {
                    return Err(format!("{} has no fused GPU kernel", stages[1].kind().name));
                };
                (p, Some(1))
            }
            _ => return Err("only Quantizer → [Lorenzo | TiledLorenzo] → AdaptiveBitpack chains run on the GPU".into()),
        };
        let feed = if pred_stage.is_some() { InputRef::Stage { stage: 1, port: 0 } } else { codes };
        if inputs[coder_at] != [feed] || coder.input != DType::I32 {
            return Err("the coder must take the i32 output of the stage before it".into());
        }
        let b = coder.block_size;
        if b % 32 != 0 {
            return Err(format!("coder block size {b} is not a multiple of 32"));
        }
        if let Predictor::Block(l) = predictor {
            if l != b {
                return Err(format!("Lorenzo block {l} differs from the coder block {b}"));
            }
        }
        Ok(Chain { quant: quant.clone(), predictor, coder: coder.clone(), pred_stage })
    }

    /// Fix the tiled predictor's tile for a grid (its default depends on the dimensionality).
    fn resolve_tile(&mut self, tiled: Option<&TiledLorenzo>, grid: Grid) -> Result<(), String> {
        if let (Predictor::Tiled { tile, .. }, Some(t)) = (&mut self.predictor, tiled) {
            *tile = t.tile_for(grid);
            if tile.elems() != self.coder.block_size as usize {
                return Err(format!(
                    "tile of {} elements differs from the coder block {}",
                    tile.elems(),
                    self.coder.block_size
                ));
            }
        }
        Ok(())
    }

    /// The program with full-size compress tiles (every decode kernel is the same in both).
    fn program(&self, real: DType) -> Program {
        self.program_with(real, TileSize::Full)
    }

    fn program_with(&self, real: DType, tiles: TileSize) -> Program {
        Program::new(SOURCE, self.defines(real, tiles))
    }

    fn defines(&self, real: DType, tiles: TileSize) -> String {
        let (pred, lblock, tile, delta) = match self.predictor {
            Predictor::None => (0, 1, [1, 1, 1], 0),
            Predictor::Block(l) => (1, l, [1, 1, 1], 0),
            Predictor::Tiled { tile, delta } => (2, 1, tile.0, u32::from(delta)),
            Predictor::Nd => (3, 1, [1, 1, 1], 0),
        };
        format!(
            "#define REAL_F64 {}\n#define PRED {pred}\n#define LBLOCK {lblock}u\n#define TZ {}u\n#define TY {}u\n\
             #define TX {}u\n#define TDELTA {delta}\n#define BLOCK {}u\n#define LAYOUT {}\n#define FUSED_WARPS {}\n\
             #define BLOCKS_PER_WARP {}\n",
            u8::from(real == DType::F64),
            tile[0],
            tile[1],
            tile[2],
            self.coder.block_size,
            self.coder.layout.code(),
            self.tile_shape(tiles).0,
            self.tile_shape(tiles).1,
        )
    }

    /// The kernels index tiles with 32-bit arithmetic.
    fn check_tile_count(&self, g: &Geometry) -> Result<()> {
        if g.nblocks > u64::from(u32::MAX) {
            return Err(Error::BackendUnavailable(format!(
                "{} coder blocks exceed the GPU kernels' 32-bit tile index",
                g.nblocks
            )));
        }
        Ok(())
    }

    fn geometry(&self, n: usize, grid: Grid) -> Geometry {
        let ncodes = match self.predictor {
            Predictor::Tiled { tile, .. } => TiledLorenzo::padded_len(grid, tile).unwrap_or(usize::MAX),
            _ => n,
        } as u64;
        let nblocks = ncodes.div_ceil(u64::from(self.coder.block_size));
        Geometry {
            n: n as u64,
            ncodes,
            nblocks,
            meta_len: nblocks * self.coder.layout.meta_bytes() as u64,
            nx: grid.dims[2] as u64,
            ny: grid.dims[1] as u64,
            nz: grid.dims[0] as u64,
        }
    }

    /// fz_compress's tile: (warps per thread block, coder blocks per warp). A full tile holds
    /// at most 8192 elements, so its values fit 32 KiB of shared memory, and keeps the
    /// look-back chain short (measured on 299 MB: 2,048-element tiles ran at half the speed).
    /// A small tile is an eighth of that.
    fn tile_shape(&self, tiles: TileSize) -> (u64, u64) {
        let full = (1024 / u64::from(self.coder.block_size)).max(1);
        (8, if tiles == TileSize::Full { full } else { (full / 8).max(1) })
    }

    /// The tile size for an input: small tiles when full ones would leave SMs idle (a 1 MiB
    /// call made 32 full tiles for the H100's 132 SMs: fz_compress took 31 µs).
    fn tile_size(&self, g: &Geometry) -> TileSize {
        if self.tiles(g, TileSize::Full) < MIN_FULL_TILES {
            TileSize::Small
        } else {
            TileSize::Full
        }
    }

    /// Thread blocks of fz_compress.
    fn tiles(&self, g: &Geometry, tiles: TileSize) -> u64 {
        let (warps, blocks) = self.tile_shape(tiles);
        g.nblocks.div_ceil(warps * blocks)
    }

    /// Worst-case payload bytes of one block: raw first magnitude plus 33 planes.
    fn max_block_bytes(&self) -> u64 {
        4 + 33 * u64::from(self.coder.block_size / 8)
    }
}

/// Why the rule does not apply to a pipeline (`None` when it does).
fn mismatch(pipeline: &Pipeline) -> Option<String> {
    let nodes = pipeline.nodes();
    let stages: Vec<&dyn Stage> = nodes.iter().map(|n| n.stage.as_ref()).collect();
    let inputs: Vec<Vec<InputRef>> = nodes.iter().map(|n| n.inputs.iter().flatten().copied().collect()).collect();
    Chain::recognise(&stages, &inputs).err()
}

/// The rule, registered in `stages::FUSION_RULES`.
pub struct CuszpFusion;

impl FusionRule for CuszpFusion {
    fn name(&self) -> &'static str {
        "cuszp"
    }

    fn compress<'a>(
        &self,
        dev: &'a CudaDevice,
        pipeline: &'a Pipeline,
        input: Source<'a>,
        shape: &[usize],
    ) -> Result<Option<Box<dyn CompressJob + 'a>>> {
        if mismatch(pipeline).is_some() {
            return Ok(None);
        }
        match DeviceCompress::new(dev, pipeline, input, shape) {
            Ok(job) => Ok(Some(Box::new(job))),
            // Limits that only show with the input (tile vs block, 32-bit tile index).
            Err(Error::BackendUnavailable(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn decompress<'a>(
        &self,
        dev: &'a CudaDevice,
        plan: DecodePlan<'a>,
    ) -> Result<std::result::Result<Box<dyn DecompressJob + 'a>, DecodePlan<'a>>> {
        match DeviceDecompress::new(dev, &plan) {
            Ok(job) => Ok(Ok(Box::new(job))),
            Err(Error::BackendUnavailable(_)) => Ok(Err(plan)),
            Err(e) => Err(e),
        }
    }
}

impl CompressJob for DeviceCompress<'_> {
    fn kernels(&mut self) -> Result<()> {
        DeviceCompress::kernels(self)
    }
    fn finish(&mut self) -> Result<Vec<u8>> {
        DeviceCompress::finish(self)
    }
    fn notes(&self) -> Vec<String> {
        vec!["fusion rule cuszp".into()]
    }
}

impl DecompressJob for DeviceDecompress<'_> {
    fn kernels(&mut self) -> Result<()> {
        DeviceDecompress::kernels(self)
    }
    fn finish_into(&mut self, dst: &mut [u8]) -> Result<()> {
        DeviceDecompress::finish_into(self, dst)
    }
    fn header(&self) -> &crate::archive::Header {
        &self.header
    }
    fn notes(&self) -> Vec<String> {
        vec!["fusion rule cuszp".into()]
    }
}

fn blocks(n: u64, per: u64) -> u32 {
    n.div_ceil(per).max(1) as u32
}

fn cfg(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

/// Room for outliers before the first run: a sixteenth of the elements (real fields have far
/// fewer); a run that finds more grows the list to the exact count and runs again.
fn initial_outlier_capacity(n: u64) -> u64 {
    (n / 16).max(1024)
}

/// Device buffers of one compress run, taken from the workspace.
struct CompressBuffers {
    /// The input, uploaded; `None` when the kernels read the caller's device buffer.
    input: Option<CudaSlice<u8>>,
    pmin: CudaSlice<u8>,
    pmax: CudaSlice<u8>,
    params: CudaSlice<u8>,
    out: CudaSlice<u8>,
    oindex: CudaSlice<u8>,
    obits: CudaSlice<u8>,
    /// u32 ticket, then one u32 look-back flag per tile (zeroed before every run).
    state: CudaSlice<u8>,
    /// Per tile: aggregate bytes, aggregate outliers, inclusive bytes, inclusive outliers.
    sums: CudaSlice<u8>,
    /// Payload bytes and outliers of the whole input.
    totals: CudaSlice<u8>,
}

impl CompressBuffers {
    /// Outlier entries the lists can hold (they may be larger than asked for: reused).
    fn outlier_capacity(&self) -> u64 {
        (self.oindex.len().min(self.obits.len()) / 8) as u64
    }

    /// Payload bytes `out` holds after `meta_len` bytes of block metadata.
    fn payload_capacity(&self, meta_len: u64) -> u64 {
        (self.out.len() as u64).saturating_sub(meta_len)
    }

    /// Replace workspace buffer `name` (held in `slot`) by one of at least `bytes` bytes.
    fn grow(
        ws: &mut Workspace,
        s: &Arc<CudaStream>,
        name: &'static str,
        slot: &mut CudaSlice<u8>,
        bytes: u64,
    ) -> Result<()> {
        let placeholder = s.alloc_zeros::<u8>(8).map_err(device_error)?;
        ws.put(name, std::mem::replace(slot, placeholder));
        *slot = ws.take(s, name, bytes as usize)?;
        Ok(())
    }
}

impl CompressBuffers {
    fn take(
        ws: &mut Workspace,
        s: &Arc<CudaStream>,
        upload_bytes: Option<usize>,
        g: &Geometry,
        out_bytes: u64,
        tiles: u64,
    ) -> Result<Self> {
        let tiles = tiles as usize;
        Ok(CompressBuffers {
            input: upload_bytes.map(|bytes| ws.take(s, "input", bytes)).transpose()?,
            pmin: ws.take(s, "pmin", 8 * minmax_blocks(g.n) as usize)?,
            pmax: ws.take(s, "pmax", 8 * minmax_blocks(g.n) as usize)?,
            params: ws.take(s, "params", PARAMS_BYTES)?,
            out: ws.take(s, "out", out_bytes as usize)?,
            oindex: ws.take(s, "oindex", 8 * initial_outlier_capacity(g.n) as usize)?,
            obits: ws.take(s, "obits", 8 * initial_outlier_capacity(g.n) as usize)?,
            state: ws.take(s, "state", 4 * (tiles + 1))?,
            sums: ws.take(s, "sums", 32 * tiles)?,
            totals: ws.take(s, "totals", 16)?,
        })
    }

    fn give_back(self, ws: &mut Workspace) {
        if let Some(input) = self.input {
            ws.put("input", input);
        }
        for (name, b) in [
            ("pmin", self.pmin),
            ("pmax", self.pmax),
            ("params", self.params),
            ("out", self.out),
            ("oindex", self.oindex),
            ("obits", self.obits),
            ("state", self.state),
            ("sums", self.sums),
            ("totals", self.totals),
        ] {
            ws.put(name, b);
        }
    }
}

fn read_u64(s: &Arc<CudaStream>, buf: &CudaSlice<u8>, index: usize) -> Result<u64> {
    let mut b = [0u8; 8];
    s.memcpy_dtoh(&buf.slice(8 * index..8 * index + 8), &mut b).map_err(device_error)?;
    Ok(u64::from_le_bytes(b))
}

/// The first two u64 of a buffer (one transfer, one wait).
fn read_pair(s: &Arc<CudaStream>, buf: &CudaSlice<u8>) -> Result<[u64; 2]> {
    let mut b = [0u8; 16];
    s.memcpy_dtoh(&buf.slice(0..16), &mut b).map_err(device_error)?;
    let word = |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
    Ok([word(0), word(1)])
}

/// Every kernel of one chain configuration, looked up once per run.
struct Kernels {
    minmax: CudaFunction,
    resolve: CudaFunction,
    compress: CudaFunction,
    scan_small: CudaFunction,
    scan_reduce: CudaFunction,
    scan_partials: CudaFunction,
    scan_apply: CudaFunction,
    block_cost: CudaFunction,
    decode: CudaFunction,
    scatter: CudaFunction,
    prefix_x: CudaFunction,
    prefix_y: CudaFunction,
    prefix_z: CudaFunction,
    reconstruct: CudaFunction,
}

impl Kernels {
    fn load(dev: &CudaDevice, program: &Program) -> Result<Kernels> {
        let f = |name| dev.function(program, name);
        Ok(Kernels {
            minmax: f("fz_minmax")?,
            resolve: f("fz_resolve")?,
            compress: f("fz_compress")?,
            scan_small: f("fz_scan_small")?,
            scan_reduce: f("fz_scan_reduce")?,
            scan_partials: f("fz_scan_partials")?,
            scan_apply: f("fz_scan_apply")?,
            block_cost: f("fz_block_cost")?,
            decode: f("fz_decode")?,
            scatter: f("fz_scatter_runs")?,
            prefix_x: f("fz_prefix_x")?,
            prefix_y: f("fz_prefix_y")?,
            prefix_z: f("fz_prefix_z")?,
            reconstruct: f("fz_reconstruct")?,
        })
    }

    /// Exclusive scan of `n` u32 counts at `input` into `n + 1` u64 offsets at `out`.
    fn scan(&self, list: &mut LaunchList, input: u64, n: u64, partials: u64, out: u64) {
        let parts = scan_partials_len(n) as u64;
        if scan_in_one_block(n) {
            list.kernel(&self.scan_small, cfg(1, 1024)).arg(&input).arg(&n).arg(&out);
            return;
        }
        list.kernel(&self.scan_reduce, cfg(parts as u32, 1024)).arg(&input).arg(&n).arg(&partials);
        list.kernel(&self.scan_partials, cfg(1, 1024)).arg(&partials).arg(&parts);
        list.kernel(&self.scan_apply, cfg(parts as u32, 1024)).arg(&input).arg(&n).arg(&partials).arg(&out);
    }
}

/// A compress whose input is already on the device; `kernels` can be re-run for timing.
pub(crate) struct DeviceCompress<'a> {
    dev: &'a CudaDevice,
    /// The caller's device buffer when the input came from device memory (read in place).
    caller_input: Option<&'a DeviceBuffer>,
    pipeline: &'a Pipeline,
    chain: Chain,
    shape: Vec<usize>,
    dtype: DType,
    geometry: Geometry,
    tile_size: TileSize,
    kernels: Kernels,
    buffers: Option<CompressBuffers>,
}

impl<'a> DeviceCompress<'a> {
    /// Recognise the chain, take buffers and upload the input (a device input is read in place).
    pub(crate) fn new(dev: &'a CudaDevice, pipeline: &'a Pipeline, input: Source<'a>, shape: &[usize]) -> Result<Self> {
        let nodes = pipeline.nodes();
        let stages: Vec<&dyn Stage> = nodes.iter().map(|n| n.stage.as_ref()).collect();
        let inputs: Vec<Vec<InputRef>> = nodes.iter().map(|n| n.inputs.iter().flatten().copied().collect()).collect();
        let mut chain = Chain::recognise(&stages, &inputs).map_err(Error::BackendUnavailable)?;
        if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(input.len()) || input.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "shape {shape:?} does not match the input's {} elements",
                input.len()
            )));
        }
        if chain.quant.input != input.dtype() {
            return Err(Error::Pipeline(format!("expects {}, got {}", chain.quant.input, input.dtype()))
                .in_stage(&nodes[0].name));
        }
        let grid = match chain.predictor {
            Predictor::Tiled { .. } | Predictor::Nd => Grid::for_stage(shape, input.len(), nodes[1].name.as_str())?,
            _ => Grid { dims: [1, 1, input.len()], ndim: 1 },
        };
        let tiled = chain.pred_stage.and_then(|i| downcast::<TiledLorenzo>(stages[i]));
        chain.resolve_tile(tiled, grid).map_err(Error::BackendUnavailable)?;
        let geometry = chain.geometry(input.len(), grid);
        chain.check_tile_count(&geometry)?;
        let tile_size = chain.tile_size(&geometry);
        let program = chain.program_with(input.dtype(), tile_size);
        let max_payload = geometry.nblocks * chain.max_block_bytes();
        // Room for half the input's bytes first (a larger payload grows and runs again).
        let payload_room = first_guess(input.byte_len(), 0, max_payload as usize) as u64;
        let out_bytes = geometry.meta_len + payload_room;
        let tiles = chain.tiles(&geometry, tile_size);
        let caller_input = match input {
            Source::Device { buffer, .. } => Some(buffer),
            Source::Host(_) => None,
        };
        let upload = caller_input.is_none().then_some(input.byte_len());
        let mut ws = dev.workspace()?;
        let buffers = CompressBuffers::take(&mut ws, dev.stream(), upload, &geometry, out_bytes, tiles)?;
        drop(ws);
        if let Some(slot) = &buffers.input {
            input.copy_to(dev, address(slot, dev.stream()))?;
        }
        let kernels = Kernels::load(dev, &program)?;
        Ok(DeviceCompress {
            dev,
            caller_input,
            pipeline,
            chain,
            shape: shape.to_vec(),
            dtype: input.dtype(),
            geometry,
            tile_size,
            kernels,
            buffers: Some(buffers),
        })
    }

    /// Enqueue every kernel of one compress (no host synchronisation); a repeated call with
    /// the same shape, bound and workspace replays them as one CUDA graph.
    pub(crate) fn kernels(&mut self) -> Result<()> {
        let (dev, g, k) = (self.dev, self.geometry, &self.kernels);
        let b = self.buffers.as_ref().expect("buffers held until drop");
        let at = |slice: &CudaSlice<u8>| address(slice, dev.stream());
        let bound = self.chain.quant.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let relative = u32::from(bound.mode == crate::archive::ErrorMode::Rel);
        // An absolute bound needs no value range: skip that pass.
        let parts = if relative == 1 { minmax_blocks(g.n) } else { 0 };
        let tiles = self.chain.tiles(&g, self.tile_size);
        let input = match (self.caller_input, &b.input) {
            (Some(caller), _) => caller.ptr(dev.stream()),
            (None, Some(uploaded)) => at(uploaded),
            (None, None) => return Err(Error::Device("compress without an input buffer".into())),
        };
        let mut list = LaunchList::default();
        list.zero(at(&b.state), 4 * (tiles as usize + 1));
        if relative == 1 {
            list.kernel(&k.minmax, cfg(parts, 256)).arg(&input).arg(&g.n).arg(&at(&b.pmin)).arg(&at(&b.pmax));
        }
        list.kernel(&k.resolve, cfg(1, 32))
            .arg(&at(&b.pmin))
            .arg(&at(&b.pmax))
            .arg(&parts)
            .arg(&relative)
            .arg(&bound.value)
            .arg(&at(&b.params));
        list.kernel(&k.compress, cfg(tiles as u32, 32 * self.chain.tile_shape(self.tile_size).0 as u32))
            .arg(&input)
            .arg(&at(&b.params))
            .arg(&g)
            .arg(&at(&b.out))
            .arg(&b.payload_capacity(g.meta_len))
            .arg(&at(&b.oindex))
            .arg(&at(&b.obits))
            .arg(&b.outlier_capacity())
            .arg(&at(&b.state))
            .arg(&at(&b.sums))
            .arg(&at(&b.totals));
        dev.run_list(list)
    }

    /// Read the sizes back (the only synchronisation), download and write the archive.
    pub(crate) fn finish(&mut self) -> Result<Vec<u8>> {
        let (s, g) = (self.dev.stream(), self.geometry);
        let [mut payload, mut num_outliers] = read_pair(s, &self.buffers.as_ref().expect("held").totals)?;
        let b = self.buffers.as_mut().expect("held");
        let more_outliers = num_outliers > b.outlier_capacity();
        let more_payload = payload > b.payload_capacity(g.meta_len);
        if more_outliers || more_payload {
            // Past a first guess: grow to the exact size and run again (the sizes cannot change).
            let mut ws = self.dev.workspace()?;
            if more_outliers {
                CompressBuffers::grow(&mut ws, s, "oindex", &mut b.oindex, 8 * num_outliers)?;
                CompressBuffers::grow(&mut ws, s, "obits", &mut b.obits, 8 * num_outliers)?;
            }
            if more_payload {
                CompressBuffers::grow(&mut ws, s, "out", &mut b.out, g.meta_len + payload)?;
            }
            drop(ws);
            self.kernels()?;
            [payload, num_outliers] = read_pair(s, &self.buffers.as_ref().expect("held").totals)?;
        }
        let num_outliers = num_outliers as usize;
        let b = self.buffers.as_ref().expect("buffers held until drop");
        let [abs_bound, step] = read_pair(s, &b.params)?.map(f64::from_bits);
        let coder_len = (g.meta_len + payload) as usize;
        let index = self.dev.download(&b.oindex, 8 * num_outliers)?;
        let bits = self.dev.download(&b.obits, 8 * num_outliers)?;
        let word = |v: &[u8], k: usize| u64::from_le_bytes(v[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        // Tiled chains find outliers in tile order; the channel stores them by index.
        let mut list: Vec<(u64, u64)> = (0..num_outliers).map(|k| (word(&index, k), word(&bits, k))).collect();
        list.sort_unstable_by_key(|&(i, _)| i);
        let (channel, layout) = quantizer::encode_outliers(&list, self.dtype.size());
        let bound = self.chain.quant.bound.expect("checked by kernels");
        let resolved = Resolved { abs_bound, step, num_elements: g.n, num_outliers: num_outliers as u64, layout };
        let nodes = self.pipeline.nodes();
        let mut params = vec![self.chain.quant.record(bound, None, &resolved)?];
        if let Some(i) = self.chain.pred_stage {
            let stage = nodes[i].stage.as_ref();
            params.push(if let Some(l) = downcast::<Lorenzo>(stage) {
                l.record(l.grid_for(&self.shape, g.n as usize)?)
            } else {
                let t = downcast::<TiledLorenzo>(stage).expect("recognised");
                let grid = Grid::for_stage(&self.shape, g.n as usize, "TiledLorenzo")?;
                t.record(t.tile_for(grid), grid)
            });
        }
        params.push(self.chain.coder.record(g.ncodes as usize));
        let last = nodes.len() - 1;
        let leaves = [(0, 1, DType::U8, channel.len()), (last, 0, DType::U8, coder_len)];
        // The coder output is downloaded straight into its place in the archive.
        let (dev, out) = (self.dev, &self.buffers.as_ref().expect("held").out);
        self.pipeline.assemble_with(self.dtype, &self.shape, params, &leaves, |slots| {
            slots[0].copy_from_slice(&channel);
            Ok(vec![None, Some(dev.download_checked(out, slots[1])?)])
        })
    }
}

impl Drop for DeviceCompress<'_> {
    fn drop(&mut self) {
        if let (Some(b), Ok(mut ws)) = (self.buffers.take(), self.dev.workspace()) {
            b.give_back(&mut ws);
        }
    }
}

/// A decoded archive ready to be decoded on the device (host-side checks done).
pub(crate) struct DeviceDecompress<'a> {
    dev: &'a CudaDevice,
    header: crate::archive::Header,
    geometry: Geometry,
    kernels: Kernels,
    dtype: DType,
    payload_len: u64,
    /// Outlier runs (`d_oruns` holds them as `fz_scatter_runs` triples).
    num_runs: u64,
    /// N-D Lorenzo: decode to deltas, then prefix sums and reconstruction.
    nd: bool,
    buffers: Vec<(&'static str, CudaSlice<u8>)>,
}

impl<'a> DeviceDecompress<'a> {
    /// Parse the archive on the host, upload the coder segment, step and outliers.
    /// `Err(BackendUnavailable)` when the rule does not apply to the plan.
    pub(crate) fn new(dev: &'a CudaDevice, plan: &DecodePlan) -> Result<Self> {
        let header = plan.header.clone();
        let stages = &plan.stages;
        let refs: Vec<&dyn Stage> = stages.iter().map(|s| s.as_ref()).collect();
        let inputs: Vec<Vec<InputRef>> = header.stages.iter().map(|r| r.inputs.clone()).collect();
        let mut chain = Chain::recognise(&refs, &inputs).map_err(Error::BackendUnavailable)?;
        let r = chain.quant.resolved.ok_or_else(|| corrupt!("Quantizer record incomplete"))?;
        let n = usize::try_from(r.num_elements).map_err(|_| corrupt!("element count too large"))?;
        if Some(r.num_elements) != header.num_elements().ok() || chain.quant.input != header.dtype {
            return Err(corrupt!("Quantizer record disagrees with the header"));
        }
        let grid = match chain.pred_stage.map(|i| refs[i]) {
            Some(s) => match (downcast::<TiledLorenzo>(s), downcast::<Lorenzo>(s)) {
                (Some(t), _) => t.grid.ok_or_else(|| corrupt!("TiledLorenzo record incomplete"))?,
                (_, Some(l)) => l.grid.ok_or_else(|| corrupt!("Lorenzo record incomplete"))?,
                _ => unreachable!("recognised"),
            },
            None => Grid { dims: [1, 1, n], ndim: 1 },
        };
        if let Predictor::Tiled { tile, .. } = &mut chain.predictor {
            *tile =
                chain.pred_stage.and_then(|i| downcast::<TiledLorenzo>(refs[i])).and_then(|t| t.tile).unwrap_or(*tile);
            if tile.elems() != chain.coder.block_size as usize {
                return Err(Error::BackendUnavailable("tile size differs from the coder block".into()));
            }
        }
        if grid.len() != n {
            return Err(corrupt!("predictor grid {:?} does not hold {n} elements", grid.dims));
        }
        let geometry = chain.geometry(n, grid);
        chain.check_tile_count(&geometry)?;
        if Some(geometry.ncodes) != chain.coder.num_elements {
            return Err(corrupt!("coder element count disagrees with the predictor"));
        }
        let segment = |stage: usize, port: usize| plan.archived[stage][port];
        let coded = segment(stages.len() - 1, 0).ok_or_else(|| corrupt!("coder segment missing"))?;
        let outlier_bytes = segment(0, 1).ok_or_else(|| corrupt!("outlier segment missing"))?;
        if header.segments.len() != 2 || (coded.len() as u64) < geometry.meta_len {
            return Err(corrupt!(
                "coder segment of {} bytes cannot hold {} metadata bytes",
                coded.len(),
                geometry.meta_len
            ));
        }
        let (runs, num_runs) =
            quantizer::device::parsed_runs(header.dtype, outlier_bytes, r.num_outliers, n, r.layout)?;
        let s = dev.stream();
        let mut ws = dev.workspace()?;
        let nb = geometry.nblocks as usize;
        let mut take = |name, bytes| ws.take(s, name, bytes);
        let mut seg = take("d_segment", coded.len())?;
        let mut params = take("d_params", PARAMS_BYTES)?;
        let mut oruns = take("d_oruns", runs.len())?;
        let buffers = vec![
            ("d_cost", take("d_cost", 4 * nb)?),
            ("d_offsets", take("d_offsets", 8 * (nb + 1))?),
            ("d_partials", take("d_partials", 8 * scan_partials_len(nb as u64))?),
            ("d_err", take("d_err", 8)?),
            ("d_out", take("d_out", n * header.dtype.size())?),
            ("d_deltas", take("d_deltas", if matches!(chain.predictor, Predictor::Nd) { 4 * n } else { 8 })?),
        ];
        drop(ws);
        dev.upload(coded, &mut seg)?;
        let recip = if header.dtype == DType::F32 { f64::from(0.5f32 / r.step as f32) } else { 0.5 / r.step };
        // Decoding reads only the step; the fast-path margins are for encoding.
        let p: Vec<u8> = [r.abs_bound, r.step, recip, 0.0, 0.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        s.memcpy_htod(&p, &mut params.slice_mut(0..PARAMS_BYTES)).map_err(device_error)?;
        if num_runs > 0 {
            dev.upload(&runs, &mut oruns)?;
        }
        let mut all = vec![("d_segment", seg), ("d_params", params), ("d_oruns", oruns)];
        all.extend(buffers);
        Ok(DeviceDecompress {
            dev,
            kernels: Kernels::load(dev, &chain.program(header.dtype))?,
            dtype: header.dtype,
            header,
            geometry,
            payload_len: coded.len() as u64 - geometry.meta_len,
            num_runs,
            nd: matches!(chain.predictor, Predictor::Nd),
            buffers: all,
        })
    }

    fn buffer(&mut self, name: &str) -> CudaSlice<u8> {
        let at = self.buffers.iter().position(|(n, _)| *n == name).expect("named buffer");
        self.buffers.swap_remove(at).1
    }

    /// Enqueue the decode kernels (no host synchronisation); a repeated decode of an archive
    /// of the same geometry replays them as one CUDA graph.
    pub(crate) fn kernels(&mut self) -> Result<()> {
        let (g, k) = (self.geometry, &self.kernels);
        let buffer = |name: &str| {
            let (_, b) = self.buffers.iter().find(|(n, _)| *n == name).expect("named buffer");
            address(b, self.dev.stream())
        };
        let (seg, params, oruns, cost) = (buffer("d_segment"), buffer("d_params"), buffer("d_oruns"), buffer("d_cost"));
        let (offsets, partials, err) = (buffer("d_offsets"), buffer("d_partials"), buffer("d_err"));
        let (out, deltas) = (buffer("d_out"), buffer("d_deltas"));
        let mut list = LaunchList::default();
        list.zero(err, 8);
        list.kernel(&k.block_cost, cfg(blocks(g.nblocks, 256), 256)).arg(&seg).arg(&g.nblocks).arg(&cost).arg(&err);
        k.scan(&mut list, cost, g.nblocks, partials, offsets);
        // fz_decode checks every block against the payload length.
        list.kernel(&k.decode, cfg(blocks(g.nblocks, 4), 128))
            .arg(&seg)
            .arg(&self.payload_len)
            .arg(&offsets)
            .arg(&params)
            .arg(&g)
            .arg(&out)
            .arg(&deltas)
            .arg(&err);
        if self.nd {
            list.kernel(&k.prefix_x, cfg(blocks(g.nz * g.ny, 4), 128)).arg(&deltas).arg(&g);
            list.kernel(&k.prefix_y, cfg(blocks(g.nz * g.nx, 128), 128)).arg(&deltas).arg(&g);
            list.kernel(&k.prefix_z, cfg(blocks(g.ny * g.nx, 128), 128)).arg(&deltas).arg(&g);
            list.kernel(&k.reconstruct, cfg(blocks(g.n, 256), 256)).arg(&deltas).arg(&params).arg(&g.n).arg(&out);
        }
        if self.num_runs > 0 {
            // A warp per run (fz_scatter_runs).
            list.kernel(&k.scatter, cfg(blocks(self.num_runs.min(1 << 20), 8), 256))
                .arg(&oruns)
                .arg(&self.num_runs)
                .arg(&out);
        }
        self.dev.run_list(list)
    }

    /// Check the device's verdict and download the values into `dst` (the caller's memory).
    pub(crate) fn finish_into(&mut self, dst: &mut [u8]) -> Result<()> {
        let s = self.dev.stream().clone();
        let (err, offsets, out) = (self.buffer("d_err"), self.buffer("d_offsets"), self.buffer("d_out"));
        let checked = (|| -> Result<()> {
            let total = read_u64(&s, &offsets, self.geometry.nblocks as usize)?;
            let flag = read_u64(&s, &err, 0)? & 0xffff_ffff;
            if flag != 0 || total != self.payload_len {
                return Err(corrupt!(
                    "AdaptiveBitpack: blocks need {total} payload bytes, segment has {} (or a block is invalid)",
                    self.payload_len
                ));
            }
            if dst.len() != self.geometry.n as usize * self.dtype.size() {
                return Err(Error::InvalidArgument(format!(
                    "destination of {} bytes for {} {}",
                    dst.len(),
                    self.geometry.n,
                    self.dtype
                )));
            }
            self.dev.download_into(&out, dst)
        })();
        self.buffers.extend([("d_err", err), ("d_offsets", offsets), ("d_out", out)]);
        checked
    }
}

impl Drop for DeviceDecompress<'_> {
    fn drop(&mut self) {
        if let Ok(mut ws) = self.dev.workspace() {
            for (name, b) in self.buffers.drain(..) {
                ws.put(name, b);
            }
        }
    }
}

/// Every fused program variant the presets use (compiled ahead by `compile_all`).
pub(crate) fn programs() -> Vec<Program> {
    let mut programs = Vec::new();
    for real in [DType::F32, DType::F64] {
        for (predictor, block) in [
            (Predictor::None, 32),
            (Predictor::Block(32), 32),
            (Predictor::Tiled { tile: Tile([1, 8, 8]), delta: true }, 64),
            (Predictor::Tiled { tile: Tile([4, 4, 4]), delta: false }, 64),
            (Predictor::Nd, 32),
        ] {
            for layout in [Layout::Plain, Layout::Wide, Layout::Packed] {
                let quant = Quantizer::new(real, None).expect("a float type");
                let coder = AdaptiveBitpack::new(DType::I32, block, layout).expect("a legal block");
                let chain = Chain { quant, predictor, coder, pred_stage: None };
                programs.extend([TileSize::Full, TileSize::Small].map(|t| chain.program_with(real, t)));
            }
        }
    }
    programs
}
