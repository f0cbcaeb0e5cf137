//! Interpolation: multilevel spline interpolation with a strict bound, the predictor of SZ3
//! (Liang et al., Zhao et al., ICDE'21), QoZ (Liu et al., SC'22) and cuSZ-i (Liu et al.,
//! SC'24), written from the published algorithms.
//!
//! Forward: `f32|f64[n]` → `codes: u16[n]`, `side: u8[]`. Anchors (every coordinate a multiple
//! of the anchor stride A) are stored verbatim; then level by level, coarse to fine, each
//! level's points are predicted by a linear or cubic spline along one axis at a time from the
//! *reconstructed* values, and the error is quantized against the level's bound (finer than
//! the requested one on coarse levels, as SZ3's α/β rule). Stencils never leave the anchor
//! segment of the point, so an A-cube is decodable on its own (cuSZ-i's tiles). A code the
//! radius cannot hold, a value the check in f64 would miss, NaN and ±Inf go to a lossless
//! outlier list in index order. Per level, interpolator and sweep order come from an integer
//! cost estimate on sampled blocks and are recorded. The codes leave in element order or
//! grouped by level and pass (order.rs). Layout: docs/FORMAT.md 6.17. device.rs produces the
//! same bytes on the GPU (every level of an A-box in one thread block where it fits in shared
//! memory, else one kernel per level and pass).

mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod device;
mod order;
mod parity;
mod rows;
mod slabs;
pub(crate) mod walk;

use crate::archive::{ErrorMode, Header, Reader, Writer};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::shape::Grid;
use crate::stage::{self, ErrorBound, ForwardContext, Forwarded, Port, Stage, StageKind};
use crate::stages::quantizer::cpu::{finite_min_max, Float};
use crate::stages::quantizer::{
    check_header_bound, check_recorded, check_resolved, check_stated_input, resolve_abs_bound, RecordHead,
};
pub use walk::{Choice, Geometry, Kind};

/// Registry entry.
pub static KIND: StageKind = StageKind {
    id: 44,
    name: "Interpolation",
    summary: "SZ3/QoZ/cuSZ-i multilevel linear/cubic interpolation, u16 radius codes; strict bound, lossless outliers",
    param_version: 1,
    from_toml: Interpolation::from_toml,
    from_record: Interpolation::from_record,
};

/// Largest anchor stride (2^12): 12 levels.
pub const MAX_ANCHOR: usize = 1 << 12;

/// The default anchor stride for a grid of `ndim` dimensions (1-D 1024, 2-D and 3-D 64): one
/// verbatim value per 1024 or more (larger strides measured no better on the shared fields).
pub fn default_anchor(ndim: usize) -> usize {
    match ndim {
        1 => 1024,
        2 => 64,
        _ => 64,
    }
}

/// The order of the `codes` port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeOrder {
    /// Element (C) order.
    Natural,
    /// Grouped by level and pass, coarsest first (order.rs).
    Level,
    /// Level order on 3-D grids, element order otherwise: grouping gained up to 42 % on the
    /// shared 3-D fields and lost up to 9 % on 2-D ones (docs/PERFORMANCE.md).
    Auto,
}

impl CodeOrder {
    fn parse(name: &str) -> Result<CodeOrder> {
        match name {
            "natural" => Ok(CodeOrder::Natural),
            "level" => Ok(CodeOrder::Level),
            "auto" => Ok(CodeOrder::Auto),
            other => {
                Err(Error::Config(format!("Interpolation: code_order \"{other}\" (expected natural, level or auto)")))
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            CodeOrder::Natural => "natural",
            CodeOrder::Level => "level",
            CodeOrder::Auto => "auto",
        }
    }

    /// Whether the codes of `grid` leave in level order.
    pub fn is_level(self, grid: &Grid) -> bool {
        match self {
            CodeOrder::Natural => false,
            CodeOrder::Level => true,
            CodeOrder::Auto => grid.ndim == 3,
        }
    }
}

/// Values a decode needs that only exist after the forward run.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub abs_bound: f64,
    /// The finest level's half bin width (the element type's largest value ≤ abs_bound).
    pub step: f64,
    pub anchor: usize,
    pub grid: Grid,
    /// Per level, coarsest first.
    pub choices: Vec<Choice>,
    pub num_outliers: u64,
    /// The codes are in level order (order.rs), else in element order.
    pub level_order: bool,
}

/// The Interpolation stage.
#[derive(Clone, Debug)]
pub struct Interpolation {
    pub input: DType,
    /// Codes are q + radius, 1..=2·radius−1; 0 marks an outlier.
    pub radius: u32,
    /// Zigzag codes (0..=2·radius−2, 2·radius−1 marks an outlier) instead of radius codes:
    /// an exact prediction is the word 0, which bit-plane and zero-run coders want.
    pub zigzag: bool,
    pub order: CodeOrder,
    /// `None` = [`default_anchor`] of the grid's dimensionality.
    pub anchor: Option<usize>,
    /// Level bound eb_ℓ = eb / min(α^(ℓ−1), β).
    pub alpha: f64,
    pub beta: f64,
    pub input_stated: bool,
    pub bound: Option<ErrorBound>,
    pub resolved: Option<Resolved>,
}

fn check_params(radius: u32, anchor: Option<usize>, alpha: f64, beta: f64) -> std::result::Result<(), String> {
    if !(1..=32768).contains(&radius) {
        return Err(format!("quant_radius {radius} outside 1..=32768"));
    }
    if let Some(a) = anchor {
        if !(a.is_power_of_two() && (2..=MAX_ANCHOR).contains(&a)) {
            return Err(format!("anchor_stride {a} must be a power of two in 2..={MAX_ANCHOR}"));
        }
    }
    if !(alpha.is_finite() && alpha >= 1.0 && beta.is_finite() && beta >= 1.0) {
        return Err(format!("alpha {alpha} and beta {beta} must be finite and ≥ 1"));
    }
    Ok(())
}

impl Interpolation {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: DType,
        radius: u32,
        zigzag: bool,
        order: CodeOrder,
        anchor: Option<usize>,
        alpha: f64,
        beta: f64,
        bound: Option<ErrorBound>,
    ) -> Result<Self> {
        if !matches!(input, DType::F32 | DType::F64) {
            return Err(Error::InvalidArgument(format!("Interpolation input must be f32 or f64, not {input}")));
        }
        check_params(radius, anchor, alpha, beta).map_err(|e| Error::InvalidArgument(format!("Interpolation: {e}")))?;
        Ok(Interpolation {
            input,
            radius,
            zigzag,
            order,
            anchor,
            alpha,
            beta,
            input_stated: false,
            bound,
            resolved: None,
        })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Interpolation");
        let input = p.dtype("input_type", DType::F32, &[DType::F32, DType::F64])?;
        p.dtype("code_type", DType::U16, &[DType::U16])?;
        let radius = p.u32("quant_radius", 512)?;
        let zigzag = match p.str("code_mapping")?.unwrap_or("radius") {
            "radius" => false,
            "zigzag" => true,
            other => {
                return Err(Error::Config(format!(
                    "Interpolation: code_mapping \"{other}\" (expected radius or zigzag)"
                )))
            }
        };
        let order = CodeOrder::parse(p.str("code_order")?.unwrap_or("natural"))?;
        let anchor = match p.u32("anchor_stride", 0)? {
            0 => None,
            a => Some(a as usize),
        };
        let alpha = p.f64("alpha")?.unwrap_or(1.25);
        let beta = p.f64("beta")?.unwrap_or(2.0);
        let mode = p.str("error_bound_mode")?.map(ErrorMode::parse).transpose()?;
        let value = p.f64("error_bound")?;
        p.finish()?;
        let bound =
            ErrorBound::from_parts(mode, value, None).map_err(|e| Error::Config(format!("Interpolation: {e}")))?;
        let stage = Interpolation::new(input, radius, zigzag, order, anchor, alpha, beta, bound)
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Box::new(Interpolation { input_stated: t.contains_key("input_type"), ..stage }))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        Ok(Box::new(Interpolation::decode_record(version, bytes)?))
    }

    fn decode_record(version: u32, bytes: &[u8]) -> Result<Interpolation> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Interpolation parameters");
        let RecordHead { input, mode, value, abs_bound, step } = RecordHead::read(&mut r, "Interpolation")?;
        // Bit 0 the mapping (zigzag), bit 1 the order (level).
        let mapping = r.u8()?;
        if mapping > 3 {
            return Err(corrupt!("Interpolation code mapping {mapping}"));
        }
        let (zigzag, level_order) = (mapping & 1 == 1, mapping & 2 == 2);
        let radius = r.count(32768, "quant radius")? as u32;
        let anchor = r.count(MAX_ANCHOR as u64, "anchor stride")?;
        let (alpha, beta) = (r.f64()?, r.f64()?);
        check_params(radius, Some(anchor), alpha, beta).map_err(|e| corrupt!("Interpolation {e}"))?;
        let grid = Grid::read_from(&mut r)?;
        let levels = anchor.trailing_zeros() as usize;
        let choices = (0..levels)
            .map(|l| {
                let b = r.u8()?;
                Choice::from_byte(b).ok_or_else(|| corrupt!("Interpolation level {l} choice byte {b:#x}"))
            })
            .collect::<Result<Vec<_>>>()?;
        let num_outliers = r.varint()?;
        r.finish()?;
        if num_outliers > grid.len() as u64 {
            return Err(corrupt!("Interpolation: {num_outliers} outliers exceed {} elements", grid.len()));
        }
        let bound = ErrorBound::new(mode, value).map_err(|_| corrupt!("Interpolation bound {value}"))?;
        check_recorded("Interpolation", input, bound, abs_bound, step)?;
        let resolved = Resolved { abs_bound, step, anchor, grid, choices, num_outliers, level_order };
        Ok(Interpolation {
            input,
            radius,
            zigzag,
            order: if level_order { CodeOrder::Level } else { CodeOrder::Natural },
            anchor: Some(anchor),
            alpha,
            beta,
            input_stated: true,
            bound: Some(bound),
            resolved: Some(resolved),
        })
    }

    /// The parameter record (docs/FORMAT.md 6.17); shared by every backend.
    pub(crate) fn record(&self, bound: ErrorBound, range: Option<(f64, f64)>, r: &Resolved) -> Result<Vec<u8>> {
        check_resolved("Interpolation", self.input, bound, range, r.abs_bound, r.step)?;
        let mut w = Writer::default();
        RecordHead::write(&mut w, self.input, bound, r.abs_bound, r.step);
        w.u8(u8::from(self.zigzag) | u8::from(r.level_order) << 1);
        w.varint(u64::from(self.radius));
        w.varint(r.anchor as u64);
        w.f64(self.alpha);
        w.f64(self.beta);
        r.grid.write_to(&mut w);
        for c in &r.choices {
            w.u8(c.byte());
        }
        w.varint(r.num_outliers);
        Ok(w.bytes)
    }

    fn params(&self, abs_bound: f64) -> cpu::Params {
        cpu::Params { radius: self.radius, zigzag: self.zigzag, abs_bound, alpha: self.alpha, beta: self.beta }
    }
}

/// What [`Interpolation::resolve`] finds: the finite value range, the absolute bound, the anchor stride.
type Resolution = (Option<(f64, f64)>, f64, usize);

impl Interpolation {
    /// Bound resolution and refusal, shared by the backends: (range, abs_bound, anchor).
    pub(crate) fn resolve<T: Float>(&self, x: &[T], bound: ErrorBound, grid: &Grid) -> Result<Resolution> {
        let range = match bound.mode {
            ErrorMode::Abs => None,
            ErrorMode::Rel => finite_min_max(x),
        };
        let abs_bound = resolve_abs_bound(bound, range);
        check_resolved("Interpolation", self.input, bound, range, abs_bound, T::at_most(abs_bound).to_f64())?;
        Ok((range, abs_bound, self.anchor.unwrap_or_else(|| default_anchor(grid.ndim))))
    }

    fn run_forward<T: walk::Real>(&self, x: &[T], bound: ErrorBound, grid: Grid) -> Result<Forwarded> {
        let (range, abs_bound, anchor) = self.resolve(x, bound, &grid)?;
        let g = Geometry { dims: grid.dims, anchor };
        let level_order = self.order.is_level(&grid);
        let f = cpu::forward(x, &g, self.params(abs_bound), None, level_order);
        let resolved = Resolved {
            abs_bound,
            step: T::at_most(abs_bound).to_f64(),
            anchor,
            grid,
            choices: f.choices,
            num_outliers: f.num_outliers,
            level_order,
        };
        let record = self.record(bound, range, &resolved)?;
        Ok(Forwarded { outputs: vec![Buffer::U16(f.codes), Buffer::U8(f.side)], record })
    }
}

impl Stage for Interpolation {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        vec![Port { name: "codes", dtype: DType::U16 }, Port { name: "side", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let bound = ErrorBound::required(self.bound)?;
        let grid = Grid::for_stage(ctx.shape, inputs[0].len(), "Interpolation")?;
        match &inputs[0] {
            Buffer::F32(x) => self.run_forward(x, bound, grid),
            Buffer::F64(x) => self.run_forward(x, bound, grid),
            _ => unreachable!("checked by expect_buffers"),
        }
    }

    fn forward_borrowed(&self, input: View, ctx: &ForwardContext) -> Result<Forwarded> {
        let bound = self.bound.filter(|_| input.dtype() == self.input);
        let grid = Grid::for_stage(ctx.shape, input.len(), "Interpolation")?;
        match (bound, input.typed::<f32>(), input.typed::<f64>()) {
            (Some(bound), Some(x), _) => self.run_forward(x, bound, grid),
            (Some(bound), _, Some(x)) => self.run_forward(x, bound, grid),
            _ => self.forward(vec![input.to_buffer()?], ctx),
        }
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        let r = self
            .resolved
            .as_ref()
            .ok_or_else(|| Error::Pipeline("Interpolation inverse needs a decoded record".into()))?;
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        let (Buffer::U16(codes), Buffer::U8(side)) = (&outputs[0], &outputs[1]) else {
            unreachable!("checked by expect_buffers")
        };
        let g = Geometry { dims: r.grid.dims, anchor: r.anchor };
        let q = self.params(r.abs_bound);
        let (n, choices, level) = (r.num_outliers, &r.choices, r.level_order);
        Ok(vec![match self.input {
            DType::F32 => Buffer::F32(cpu::inverse(codes, side, n, &g, q, choices, level)?),
            _ => Buffer::F64(cpu::inverse(codes, side, n, &g, q, choices, level)?),
        }])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        if self.input_stated {
            t.insert("input_type".into(), self.input.toml_name().into());
        }
        t.insert("code_type".into(), "uint16".into());
        t.insert("code_mapping".into(), if self.zigzag { "zigzag" } else { "radius" }.into());
        if self.order != CodeOrder::Natural {
            t.insert("code_order".into(), self.order.name().into());
        }
        t.insert("quant_radius".into(), i64::from(self.radius).into());
        if let Some(a) = self.anchor {
            t.insert("anchor_stride".into(), (a as i64).into());
        }
        t.insert("alpha".into(), self.alpha.into());
        t.insert("beta".into(), self.beta.into());
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

    fn chunk_anchor(&self, ndim: usize) -> Option<usize> {
        Some(self.anchor.unwrap_or_else(|| default_anchor(ndim)))
    }

    fn recorded_abs_bound(&self) -> Option<f64> {
        self.resolved.as_ref().map(|r| r.abs_bound)
    }

    fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        check_stated_input("Interpolation", self.input_stated, self.input, dtype)?;
        *self = Interpolation::new(
            dtype,
            self.radius,
            self.zigzag,
            self.order,
            self.anchor,
            self.alpha,
            self.beta,
            self.bound,
        )?;
        Ok(())
    }

    fn check_header(&self, header: &Header) -> Result<()> {
        let r = self.resolved.as_ref().ok_or_else(|| corrupt!("Interpolation record incomplete"))?;
        let bound = self.bound.ok_or_else(|| corrupt!("Interpolation record has no bound"))?;
        if header.dtype != self.input || header.num_elements().ok() != Some(r.grid.len() as u64) {
            return Err(corrupt!(
                "Interpolation coded {} {} elements, the header says {} of shape {:?}",
                r.grid.len(),
                self.input,
                header.dtype,
                header.shape
            ));
        }
        r.grid.check_header(header, "Interpolation")?;
        check_header_bound("Interpolation", bound, header)
    }

    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
