//! LorenzoQuant: cuSZ dual quantization (Tian et al., PACT'20 / CLUSTER'21), the front end
//! of FZ-GPU (Zhang et al., HPDC'23), with a strict bound.
//!
//! Forward: `f32|f64[n]` → `codes: u16[n]`, `outliers: u8[]`. Pre-quantize `p = round(x / 2h)`,
//! integer Lorenzo inside tiles (neighbours outside the tile count as 0), map each delta to a
//! u16 code. Unlike FZ-GPU (codes wrap) and cuSZ (capped, unordered outlier list), every delta
//! the code cannot hold and every value whose reconstruction would miss the bound (NaN, ±Inf,
//! overflow, rounding) goes to a lossless outlier channel of unlimited size in index order.
//! Layout: docs/FORMAT.md, "LorenzoQuant".

mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{ErrorMode, Header, Reader, Writer};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::shape::Grid;
use crate::stage::{self, ErrorBound, ForwardContext, Forwarded, Port, Stage, StageKind};
use crate::stages::quantizer::cpu::{finite_min_max, Float};
use crate::stages::quantizer::Layout;
use crate::stages::quantizer::{
    check_header_bound, check_recorded, check_resolved, check_stated_input, resolve_abs_bound, RecordHead,
};

/// Registry entry.
pub static KIND: StageKind = StageKind {
    id: 1,
    name: "LorenzoQuant",
    summary: "cuSZ dual quantization: round(x/2eb), Lorenzo in tiles, u16 codes; strict bound, lossless outliers",
    param_version: 1,
    from_toml: LorenzoQuant::from_toml,
    from_record: LorenzoQuant::from_record,
};

/// Largest tile (elements); keeps a tile within one GPU thread block's shared memory.
pub const MAX_TILE_ELEMS: usize = 1 << 16;

/// How a Lorenzo delta becomes a u16 code; `None` = out of range (an outlier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeMapping {
    /// FZ-GPU's: `|δ| | (δ < 0) << 15`, |δ| < 2^15.
    SignMagnitude,
    /// `(δ << 1) ^ (δ >> 31)`, δ in −2^15..2^15.
    Zigzag,
    /// cuSZ's: `δ + radius`, |δ| < radius (1..=32768).
    Radius(u32),
}

impl CodeMapping {
    #[inline]
    pub fn encode(self, d: i32) -> Option<u16> {
        match self {
            CodeMapping::SignMagnitude => {
                (d.unsigned_abs() < 1 << 15).then(|| d.unsigned_abs() as u16 | (u16::from(d < 0) << 15))
            }
            CodeMapping::Zigzag => (-(1 << 15)..1 << 15).contains(&d).then_some(((d << 1) ^ (d >> 31)) as u16),
            CodeMapping::Radius(r) => (d.unsigned_abs() < r).then(|| (d + r as i32) as u16),
        }
    }

    /// Inverse of [`CodeMapping::encode`]; total (any code decodes to some delta).
    #[inline]
    pub fn decode(self, c: u16) -> i32 {
        match self {
            CodeMapping::SignMagnitude => {
                let m = i32::from(c & 0x7fff);
                if c >> 15 == 1 {
                    -m
                } else {
                    m
                }
            }
            CodeMapping::Zigzag => i32::from(c >> 1) ^ -i32::from(c & 1),
            CodeMapping::Radius(r) => i32::from(c) - r as i32,
        }
    }

    fn code(self) -> u8 {
        match self {
            CodeMapping::SignMagnitude => 0,
            CodeMapping::Zigzag => 1,
            CodeMapping::Radius(_) => 2,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CodeMapping::SignMagnitude => "sign_magnitude",
            CodeMapping::Zigzag => "zigzag",
            CodeMapping::Radius(_) => "radius",
        }
    }

    fn radius(self) -> u32 {
        if let CodeMapping::Radius(r) = self {
            r
        } else {
            0
        }
    }

    /// From a mapping code and the radius field (0 unless the mapping is `radius`).
    fn from_parts(code: u8, radius: u32) -> Result<CodeMapping> {
        match (code, radius) {
            (0, 0) => Ok(CodeMapping::SignMagnitude),
            (1, 0) => Ok(CodeMapping::Zigzag),
            (2, 1..=32768) => Ok(CodeMapping::Radius(radius)),
            _ => Err(corrupt!("LorenzoQuant code mapping {code} with radius {radius}")),
        }
    }
}

/// Tile extents, slowest first: `[tz, ty, tx]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile(pub [usize; 3]);

impl Tile {
    /// FZ-GPU's tiles: 256 (1-D), 16×16 (2-D), 8×8×32 (3-D, x fastest).
    pub fn default_for(ndim: usize) -> Tile {
        match ndim {
            1 => Tile([1, 1, 256]),
            2 => Tile([1, 16, 16]),
            _ => Tile([8, 8, 32]),
        }
    }

    /// Each extent ≥ 1, at most [`MAX_TILE_ELEMS`] elements.
    pub fn validate(self) -> Result<Tile> {
        let elems = self.0.iter().try_fold(1usize, |a, &t| a.checked_mul(t));
        if self.0.contains(&0) || elems.is_none_or(|e| e > MAX_TILE_ELEMS) {
            return Err(Error::InvalidArgument(format!(
                "LorenzoQuant tile {:?}: extents must be ≥ 1 with at most {MAX_TILE_ELEMS} elements",
                self.0
            )));
        }
        Ok(self)
    }
}

/// Values a decode needs that only exist after the forward run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resolved {
    /// Absolute bound every element satisfies.
    pub abs_bound: f64,
    /// Half bin width h (the largest value of the input type ≤ abs_bound), stored as f64.
    pub step: f64,
    pub tile: Tile,
    pub grid: Grid,
    pub num_delta_outliers: u64,
    pub num_value_outliers: u64,
    /// Layout of both outlier lists.
    pub layout: Layout,
}

/// The LorenzoQuant stage.
#[derive(Clone, Debug)]
pub struct LorenzoQuant {
    pub input: DType,
    pub mapping: CodeMapping,
    /// `None` = FZ-GPU's default tile for the grid's dimensionality.
    pub tile: Option<Tile>,
    /// The TOML stated `input_type` (see the Quantizer's field of the same name).
    pub input_stated: bool,
    pub bound: Option<ErrorBound>,
    pub resolved: Option<Resolved>,
}

impl LorenzoQuant {
    pub fn new(input: DType, mapping: CodeMapping, tile: Option<Tile>, bound: Option<ErrorBound>) -> Result<Self> {
        if !matches!(input, DType::F32 | DType::F64) {
            return Err(Error::InvalidArgument(format!("LorenzoQuant input must be f32 or f64, not {input}")));
        }
        if let CodeMapping::Radius(r) = mapping {
            if !(1..=32768).contains(&r) {
                return Err(Error::InvalidArgument(format!("LorenzoQuant quant_radius {r} outside 1..=32768")));
            }
        }
        let tile = tile.map(Tile::validate).transpose()?;
        Ok(LorenzoQuant { input, mapping, tile, input_stated: false, bound, resolved: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "LorenzoQuant");
        let input = p.dtype("input_type", DType::F32, &[DType::F32, DType::F64])?;
        p.dtype("code_type", DType::U16, &[DType::U16])?;
        let radius = p.u32("quant_radius", 512)?;
        let mapping = match p.str("code_mapping")?.unwrap_or("sign_magnitude") {
            "sign_magnitude" => CodeMapping::SignMagnitude,
            "zigzag" => CodeMapping::Zigzag,
            "radius" => CodeMapping::Radius(radius),
            other => {
                return Err(Error::Config(format!(
                    "LorenzoQuant: code_mapping \"{other}\" (expected sign_magnitude, zigzag or radius)"
                )))
            }
        };
        let (x, y, z) = (p.u32("tile_x", 0)?, p.u32("tile_y", 0)?, p.u32("tile_z", 0)?);
        let mode = p.str("error_bound_mode")?.map(ErrorMode::parse).transpose()?;
        let value = p.f64("error_bound")?;
        p.finish()?;
        let tile = match (x, y, z) {
            (0, 0, 0) => None,
            (0, _, _) => return Err(Error::Config("LorenzoQuant: tile_y/tile_z need tile_x".into())),
            (x, y, z) => Some(Tile([z.max(1) as usize, y.max(1) as usize, x as usize])),
        };
        // The one bound policy (a bare value is relative), as on the command line.
        let bound =
            ErrorBound::from_parts(mode, value, None).map_err(|e| Error::Config(format!("LorenzoQuant: {e}")))?;
        let stage = LorenzoQuant::new(input, mapping, tile, bound).map_err(|e| Error::Config(e.to_string()))?;
        Ok(Box::new(LorenzoQuant { input_stated: t.contains_key("input_type"), ..stage }))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        Ok(Box::new(LorenzoQuant::decode_record(version, bytes)?))
    }

    fn decode_record(version: u32, bytes: &[u8]) -> Result<LorenzoQuant> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "LorenzoQuant parameters");
        let RecordHead { input, mode, value, abs_bound, step } = RecordHead::read(&mut r, "LorenzoQuant")?;
        let mapping_code = r.u8()?;
        let radius = r.count(32768, "quant radius")? as u32;
        let mapping = CodeMapping::from_parts(mapping_code, radius)?;
        let mut tile = [0usize; 3];
        for t in &mut tile {
            *t = r.count(MAX_TILE_ELEMS as u64, "tile extent")?;
        }
        let tile = Tile(tile).validate().map_err(|e| corrupt!("{e}"))?;
        let grid = Grid::read_from(&mut r)?;
        let num_delta_outliers = r.varint()?;
        let num_value_outliers = r.varint()?;
        // Optional trailing field: absent = indexed lists (every record before the run layout),
        // 2 = the run layout (the Quantizer's code for it); 3 and 4 the same layouts with the
        // value outliers' p predicted by the encoder, which the inverse never reads.
        let layout = match r.remaining() {
            0 => Layout::Indexed,
            _ => match r.u8()? {
                2 | 4 => Layout::Runs,
                3 => Layout::Indexed,
                v => return Err(corrupt!("LorenzoQuant outlier format {v}")),
            },
        };
        r.finish()?;
        let n = grid.len() as u64;
        if num_delta_outliers > n || num_value_outliers > n {
            return Err(corrupt!("LorenzoQuant: outlier counts exceed {n} elements"));
        }
        let bound = ErrorBound::new(mode, value).map_err(|_| corrupt!("LorenzoQuant bound {value}"))?;
        check_recorded("LorenzoQuant", input, bound, abs_bound, step)?;
        let resolved = Resolved { abs_bound, step, tile, grid, num_delta_outliers, num_value_outliers, layout };
        let (tile, bound, resolved) = (Some(tile), Some(bound), Some(resolved));
        Ok(LorenzoQuant { input, mapping, tile, input_stated: true, bound, resolved })
    }

    /// The parameter record (docs/FORMAT.md, "LorenzoQuant"); shared by every backend, so
    /// each refuses a bound that resolved to something unusable before anything is written.
    pub(crate) fn record(&self, bound: ErrorBound, range: Option<(f64, f64)>, r: &Resolved) -> Result<Vec<u8>> {
        check_resolved("LorenzoQuant", self.input, bound, range, r.abs_bound, r.step)?;
        let mut w = Writer::default();
        RecordHead::write(&mut w, self.input, bound, r.abs_bound, r.step);
        w.u8(self.mapping.code());
        w.varint(u64::from(self.mapping.radius()));
        for t in r.tile.0 {
            w.varint(t as u64);
        }
        r.grid.write_to(&mut w);
        w.varint(r.num_delta_outliers);
        w.varint(r.num_value_outliers);
        // The trailing field: the lists' layout and whether value outliers took their
        // prediction (cpu.rs `predict_value_outliers`; marked only where there are any, so a
        // record without value outliers keeps the bytes it had before the prediction).
        match (r.layout, r.num_value_outliers > 0) {
            (Layout::Indexed, false) => {}
            (Layout::Runs, false) => w.u8(2),
            (Layout::Indexed, true) => w.u8(3),
            (Layout::Runs, true) => w.u8(4),
        }
        Ok(w.bytes)
    }

    fn run_forward<T: Float>(&self, x: &[T], bound: ErrorBound, grid: Grid) -> Result<Forwarded> {
        let range = match bound.mode {
            ErrorMode::Abs => None,
            ErrorMode::Rel => finite_min_max(x),
        };
        let abs_bound = resolve_abs_bound(bound, range);
        // Refuse before quantizing: the work would be thrown away.
        check_resolved("LorenzoQuant", self.input, bound, range, abs_bound, T::at_most(abs_bound).to_f64())?;
        let tile = self.tile.unwrap_or_else(|| Tile::default_for(grid.ndim));
        let f = cpu::forward(x, grid.dims, tile, self.mapping, abs_bound);
        let resolved = Resolved {
            abs_bound,
            step: T::at_most(abs_bound).to_f64(),
            tile,
            grid,
            num_delta_outliers: f.num_delta_outliers,
            num_value_outliers: f.num_value_outliers,
            layout: f.layout,
        };
        let record = self.record(bound, range, &resolved)?;
        Ok(Forwarded { outputs: vec![Buffer::U16(f.codes), Buffer::U8(f.outliers)], record })
    }
}

impl Stage for LorenzoQuant {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "codes", dtype: DType::U16 }, Port { name: "outliers", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let bound = ErrorBound::required(self.bound)?;
        let grid = Grid::for_stage(ctx.shape, inputs[0].len(), "LorenzoQuant")?;
        match &inputs[0] {
            Buffer::F32(x) => self.run_forward(x, bound, grid),
            Buffer::F64(x) => self.run_forward(x, bound, grid),
            _ => unreachable!("checked by expect_buffers"),
        }
    }

    fn forward_borrowed(&self, input: View, ctx: &ForwardContext) -> Result<Forwarded> {
        let bound = self.bound.filter(|_| input.dtype() == self.input);
        let grid = Grid::for_stage(ctx.shape, input.len(), "LorenzoQuant")?;
        match (bound, input.typed::<f32>(), input.typed::<f64>()) {
            (Some(bound), Some(x), _) => self.run_forward(x, bound, grid),
            (Some(bound), _, Some(x)) => self.run_forward(x, bound, grid),
            // Misaligned memory, a wrong type or no bound: the owned path copies or refuses.
            _ => self.forward(vec![input.to_buffer()?], ctx),
        }
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("LorenzoQuant inverse needs a decoded record".into()))?;
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let (Buffer::U16(codes), Buffer::U8(outliers)) = (&outputs[0], &outputs[1]) else {
            unreachable!("checked by expect_buffers")
        };
        if codes.len() != r.grid.len() {
            return Err(corrupt!("LorenzoQuant: {} codes for grid {:?}", codes.len(), r.grid.dims));
        }
        let counts = ((r.num_delta_outliers, r.num_value_outliers), r.layout);
        let (dims, tile) = (r.grid.dims, r.tile);
        Ok(vec![match self.input {
            DType::F32 => Buffer::F32(cpu::inverse(codes, outliers, counts, dims, tile, self.mapping, r.step as f32)?),
            _ => Buffer::F64(cpu::inverse(codes, outliers, counts, dims, tile, self.mapping, r.step)?),
        }])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        if self.input_stated {
            t.insert("input_type".into(), self.input.toml_name().into());
        }
        t.insert("code_type".into(), "uint16".into());
        t.insert("code_mapping".into(), self.mapping.name().into());
        if let CodeMapping::Radius(r) = self.mapping {
            t.insert("quant_radius".into(), i64::from(r).into());
        }
        if let Some(Tile([z, y, x])) = self.tile {
            t.insert("tile_x".into(), (x as i64).into());
            t.insert("tile_y".into(), (y as i64).into());
            t.insert("tile_z".into(), (z as i64).into());
        }
        if let Some(b) = self.bound {
            t.insert("error_bound_mode".into(), b.mode.name().into());
            t.insert("error_bound".into(), b.value.into());
        }
        t
    }

    fn set_error_bound(&mut self, bound: ErrorBound) -> bool {
        self.bound = Some(bound);
        true
    }

    fn error_bound(&self) -> Option<ErrorBound> {
        self.bound
    }

    fn recorded_abs_bound(&self) -> Option<f64> {
        self.resolved.map(|r| r.abs_bound)
    }

    fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        check_stated_input("LorenzoQuant", self.input_stated, self.input, dtype)?;
        *self = LorenzoQuant::new(dtype, self.mapping, self.tile, self.bound)?;
        Ok(())
    }

    fn check_header(&self, header: &Header) -> Result<()> {
        let r = self.resolved.ok_or_else(|| corrupt!("LorenzoQuant record incomplete"))?;
        let bound = self.bound.ok_or_else(|| corrupt!("LorenzoQuant record has no bound"))?;
        if header.dtype != self.input || header.num_elements().ok() != Some(r.grid.len() as u64) {
            return Err(corrupt!(
                "LorenzoQuant quantized {} {} elements, the header says {} of shape {:?}",
                r.grid.len(),
                self.input,
                header.dtype,
                header.shape
            ));
        }
        r.grid.check_header(header, "LorenzoQuant")?;
        check_header_bound("LorenzoQuant", bound, header)
    }

    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        Some(self)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}
