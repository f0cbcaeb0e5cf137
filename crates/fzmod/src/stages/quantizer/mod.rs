//! Quantizer (linear, cuSZp rounding) with a lossless outlier side channel.
//!
//! Forward: `f32|f64[n]` → `codes: i32[n]`, `outliers: u8[]`. Every element either
//! reconstructs within the bound (checked with the decoder's own formula) or goes, bit for
//! bit, to the outlier channel: NaN, ±Inf, values whose code would overflow i32 and values
//! whose reconstruction misses the bound. Layouts: docs/FORMAT.md, "Quantizer".
//!
//! `inplace_outliers` (PFPL's QABS word format, Fallin et al., IPDPS'25): `codes: u32[n]` hold
//! zigzag bins and, inline, the raw bits of f32 values that fail; only values no inline word
//! can carry (f64 outliers, raw bits that look like a bin) go to the channel, marked by an
//! escape word. The record marks this mode with one trailing byte, so records without it
//! (every archive written before the mode existed) keep their meaning and their bytes.

pub(crate) mod channel;
pub(crate) mod cpu;
mod cpu_fragment;
#[cfg(feature = "cuda")]
pub(crate) mod device;

use crate::archive::{ErrorMode, Header, Reader, Writer};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Error, Result};
use crate::params::TomlParams;
use crate::stage::{self, ErrorBound, ForwardContext, Forwarded, Port, Stage, StageKind};
use std::borrow::Cow;

pub use channel::Layout;
#[cfg(feature = "cuda")]
pub(crate) use cpu::encode_outliers;
use cpu::Float;
use cpu::{quantize, quantize_inline, reconstruct, reconstruct_inline};

/// Registry entry.
pub static KIND: StageKind = StageKind {
    id: 14,
    name: "Quantizer",
    summary: "linear quantizer (cuSZp rounding) to i32 codes or PFPL inline u32 words; strict bound, lossless outliers",
    param_version: 1,
    from_toml: Quantizer::from_toml,
    from_record: Quantizer::from_record,
};

/// Values a decode needs that only exist after the forward run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resolved {
    /// Absolute bound every element satisfies (`value` or `value × range`).
    pub abs_bound: f64,
    /// Half bin width used by quantize and reconstruct, in the element type (stored as f64).
    pub step: f64,
    pub num_elements: u64,
    pub num_outliers: u64,
    /// Layout of the indexed outlier channel (unused with inline outliers).
    pub layout: Layout,
}

/// The absolute bound a request resolves to for finite values spanning `range` (min, max).
/// Relative bounds use `value · (max − min)`; when `max − min` overflows (f64 inputs spanning
/// more than `f64::MAX`) the bound may still be finite, so each end is scaled first. Shared
/// by every stage that resolves a bound on the CPU; device.cu's `fz_resolve` mirrors it.
pub(crate) fn resolve_abs_bound(bound: ErrorBound, range: Option<(f64, f64)>) -> f64 {
    match (bound.mode, range) {
        (ErrorMode::Abs, _) => bound.value,
        (ErrorMode::Rel, None) => 0.0,
        (ErrorMode::Rel, Some((lo, hi))) if (hi - lo).is_finite() => bound.value * (hi - lo),
        (ErrorMode::Rel, Some((lo, hi))) => bound.value * hi - bound.value * lo,
    }
}

/// The half bin width an absolute bound gives in the element type: the largest value of the
/// type that is ≤ the bound (saturating at the type's maximum), as f64.
pub(crate) fn step_for(input: DType, abs_bound: f64) -> f64 {
    match input {
        DType::F32 => f32::at_most(abs_bound).to_f64(),
        _ => f64::at_most(abs_bound),
    }
}

/// Whether a resolved (bound, step) pair can be honoured: both finite, positive and normal in
/// the element type, or both exactly +0 (a relative bound over a constant field: every value
/// is then coded exactly, as zero or as an outlier). Anything else quantizes nonsense: an
/// infinite bound passes every check and decodes every value as 0, a subnormal step
/// overflows the reciprocal.
fn usable(input: DType, abs_bound: f64, step: f64) -> bool {
    let step_normal = match input {
        DType::F32 => (step as f32).is_normal(),
        _ => step.is_normal(),
    };
    let exact = abs_bound.to_bits() == 0 && step.to_bits() == 0;
    exact || (abs_bound.is_normal() && abs_bound > 0.0 && step_normal && step > 0.0)
}

/// The head every float front end's record starts with (Quantizer, LorenzoQuant,
/// Interpolation; docs/FORMAT.md 6.1): element type, the bound as given, the resolved absolute
/// bound and the step.
pub(crate) struct RecordHead {
    pub input: DType,
    pub mode: ErrorMode,
    pub value: f64,
    pub abs_bound: f64,
    pub step: f64,
}

impl RecordHead {
    pub(crate) fn read(r: &mut Reader, stage: &str) -> Result<RecordHead> {
        let code = r.u8()?;
        let input = DType::from_code(code).filter(|d| matches!(d, DType::F32 | DType::F64));
        let input = input.ok_or_else(|| corrupt!("{stage} input type code {code}"))?;
        let mode = ErrorMode::from_code(r.u8()?)?;
        Ok(RecordHead { input, mode, value: r.f64()?, abs_bound: r.f64()?, step: r.f64()? })
    }

    pub(crate) fn write(w: &mut Writer, input: DType, bound: ErrorBound, abs_bound: f64, step: f64) {
        w.u8(input.code());
        w.u8(bound.mode.code());
        w.f64(bound.value);
        w.f64(abs_bound);
        w.f64(step);
    }
}

/// Refuse to write a record whose resolved bound cannot be honoured (every backend's record
/// passes here, so CPU and GPU refuse the same inputs; nothing is written).
pub(crate) fn check_resolved(
    stage: &str,
    input: DType,
    bound: ErrorBound,
    range: Option<(f64, f64)>,
    abs_bound: f64,
    step: f64,
) -> Result<()> {
    if usable(input, abs_bound, step) {
        return Ok(());
    }
    let range = match range {
        Some((lo, hi)) => format!("the value range [{lo:e}, {hi:e}]"),
        None => "the input's value range".into(),
    };
    Err(Error::InvalidArgument(format!(
        "{stage}: the {} bound {:e} over {range} resolves to an absolute bound of {abs_bound:e} \
         (step {step:e} in {input}), which is not a finite normal number; nothing was written \
         (give a bound whose absolute value is a normal {input} number)",
        bound.mode.name(),
        bound.value
    )))
}

/// The bound a stage's record states must be the header's, mode and value bit for bit: the
/// header is what reports print, the record what the reconstruction obeys.
pub(crate) fn check_header_bound(stage: &str, bound: ErrorBound, header: &Header) -> Result<()> {
    if header.error_mode != bound.mode || header.error_bound.to_bits() != bound.value.to_bits() {
        return Err(corrupt!(
            "{stage} bound {} {} differs from the header's {} {}",
            bound.mode.name(),
            bound.value,
            header.error_mode.name(),
            header.error_bound
        ));
    }
    Ok(())
}

/// Check the recorded facts that depend on each other: the step is exactly the one the
/// encoder derives from the recorded absolute bound, the pair is usable, and an absolute
/// bound is the requested value itself. (A relative bound's range is not recorded.)
pub(crate) fn check_recorded(stage: &str, input: DType, bound: ErrorBound, abs_bound: f64, step: f64) -> Result<()> {
    if step.to_bits() != step_for(input, abs_bound).to_bits() || !usable(input, abs_bound, step) {
        return Err(corrupt!("{stage} step {step:e} is not the {input} half bin width of the bound {abs_bound:e}"));
    }
    if bound.mode == ErrorMode::Abs && abs_bound.to_bits() != bound.value.to_bits() {
        return Err(corrupt!("{stage} absolute bound {abs_bound:e} differs from the requested {:e}", bound.value));
    }
    Ok(())
}

/// A pipeline whose TOML states the input type refuses data of another type (a silent
/// override would compress with a pipeline other than the one written down).
pub(crate) fn check_stated_input(stage: &str, stated: bool, input: DType, dtype: DType) -> Result<()> {
    if stated && input != dtype {
        return Err(Error::Config(format!(
            "{stage}: the pipeline states input_type = \"{}\" but the data is {dtype} \
             (remove input_type to accept either, or give {input} data)",
            input.toml_name()
        )));
    }
    Ok(())
}

/// The quantizer stage.
#[derive(Clone, Debug)]
pub struct Quantizer {
    pub input: DType,
    /// PFPL inline words (`u32` codes) instead of `i32` codes plus the indexed channel.
    pub inline_outliers: bool,
    /// The TOML stated `input_type`: the pipeline input must then have that type (a preset
    /// states none and takes f32 or f64).
    pub input_stated: bool,
    pub bound: Option<ErrorBound>,
    pub resolved: Option<Resolved>,
}

impl Quantizer {
    pub fn new(input: DType, bound: Option<ErrorBound>) -> Result<Self> {
        if !matches!(input, DType::F32 | DType::F64) {
            return Err(Error::InvalidArgument(format!("Quantizer input must be f32 or f64, not {input}")));
        }
        Ok(Quantizer { input, inline_outliers: false, input_stated: false, bound, resolved: None })
    }

    fn from_toml(t: &toml::Table) -> Result<Box<dyn Stage>> {
        let p = TomlParams::new(t, "Quantizer");
        let input = p.dtype("input_type", DType::F32, &[DType::F32, DType::F64])?;
        let inline = p.bool("inplace_outliers", false)?;
        let code = p.dtype("code_type", if inline { DType::U32 } else { DType::I32 }, &[DType::I32, DType::U32])?;
        if inline && code != DType::U32 {
            return Err(Error::Config("Quantizer: inplace_outliers needs code_type = \"uint32\"".into()));
        }
        if !p.bool("linear_mode", true)? {
            return Err(Error::Config(
                "Quantizer: only linear_mode = true (cuSZp-style signed codes) is implemented".into(),
            ));
        }
        let mode = p.str("error_bound_mode")?.map(ErrorMode::parse).transpose()?;
        let value = p.f64("error_bound")?;
        p.finish()?;
        // The one bound policy (a bare value is relative), as on the command line.
        let bound = ErrorBound::from_parts(mode, value, None).map_err(|e| Error::Config(format!("Quantizer: {e}")))?;
        let input_stated = t.contains_key("input_type");
        Ok(Box::new(Quantizer { inline_outliers: inline, input_stated, ..Quantizer::new(input, bound)? }))
    }

    fn from_record(version: u32, bytes: &[u8]) -> Result<Box<dyn Stage>> {
        Ok(Box::new(Quantizer::decode_record(version, bytes)?))
    }

    fn decode_record(version: u32, bytes: &[u8]) -> Result<Quantizer> {
        stage::check_param_version(&KIND, version)?;
        let mut r = Reader::new(bytes, "Quantizer parameters");
        let RecordHead { input, mode, value, abs_bound, step } = RecordHead::read(&mut r, "Quantizer")?;
        let num_elements = r.varint()?;
        let num_outliers = r.varint()?;
        // Optional trailing field: absent = indexed channel (every record before the other
        // formats), 1 = inline words, 2 = the channel's run layout.
        let (inline_outliers, layout) = match r.remaining() {
            0 => (false, Layout::Indexed),
            _ => match r.u8()? {
                1 => (true, Layout::Indexed),
                2 => (false, Layout::Runs),
                v => return Err(corrupt!("Quantizer outlier format {v}")),
            },
        };
        r.finish()?;
        if num_outliers > num_elements {
            return Err(corrupt!("Quantizer: {num_outliers} outliers among {num_elements} elements"));
        }
        let bound = ErrorBound::new(mode, value).map_err(|_| corrupt!("Quantizer bound {value}"))?;
        check_recorded("Quantizer", input, bound, abs_bound, step)?;
        let resolved = Resolved { abs_bound, step, num_elements, num_outliers, layout };
        Ok(Quantizer { input, inline_outliers, input_stated: true, bound: Some(bound), resolved: Some(resolved) })
    }

    /// The parameter record (docs/FORMAT.md 6.1); shared by every backend, so each refuses a
    /// bound that resolved to something unusable before anything is written.
    pub(crate) fn record(&self, bound: ErrorBound, range: Option<(f64, f64)>, r: &Resolved) -> Result<Vec<u8>> {
        check_resolved("Quantizer", self.input, bound, range, r.abs_bound, r.step)?;
        let mut w = Writer::default();
        RecordHead::write(&mut w, self.input, bound, r.abs_bound, r.step);
        w.varint(r.num_elements);
        w.varint(r.num_outliers);
        if self.inline_outliers {
            w.u8(1);
        } else if r.layout == Layout::Runs {
            w.u8(2);
        }
        Ok(w.bytes)
    }

    fn run_forward<T: Float>(&self, x: Cow<'_, [T]>, bound: ErrorBound) -> Result<Forwarded> {
        let range = match bound.mode {
            ErrorMode::Abs => None,
            ErrorMode::Rel => cpu::finite_min_max(&x),
        };
        let abs_bound = resolve_abs_bound(bound, range);
        // Refuse before quantizing: the work would be thrown away.
        check_resolved("Quantizer", self.input, bound, range, abs_bound, T::at_most(abs_bound).to_f64())?;
        let num_elements = x.len() as u64;
        let (outputs, step, num_outliers, layout) = if self.inline_outliers {
            let q = quantize_inline(x, abs_bound);
            let step = T::at_most(abs_bound).to_f64();
            (vec![Buffer::U32(q.words), Buffer::U8(q.outliers)], step, q.num_outliers, Layout::Indexed)
        } else {
            let q = quantize(x, abs_bound);
            (vec![Buffer::I32(q.codes), Buffer::U8(q.outliers)], q.step.to_f64(), q.num_outliers, q.layout)
        };
        let resolved = Resolved { abs_bound, step, num_elements, num_outliers, layout };
        Ok(Forwarded { outputs, record: self.record(bound, range, &resolved)? })
    }
}

impl Stage for Quantizer {
    fn kind(&self) -> &'static StageKind {
        &KIND
    }
    fn inputs(&self) -> Vec<Port> {
        vec![Port { name: "input", dtype: self.input }]
    }
    fn outputs(&self) -> Vec<Port> {
        let codes = if self.inline_outliers { DType::U32 } else { DType::I32 };
        vec![Port { name: "codes", dtype: codes }, Port { name: "outliers", dtype: DType::U8 }]
    }

    fn forward(&self, inputs: Vec<Buffer>, _ctx: &ForwardContext) -> Result<Forwarded> {
        stage::expect_buffers(self, &self.inputs(), &inputs)?;
        let bound = ErrorBound::required(self.bound)?;
        // The input is handed over: f32 codes are written into its memory.
        match inputs.into_iter().next() {
            Some(Buffer::F32(x)) => self.run_forward(Cow::Owned(x), bound),
            Some(Buffer::F64(x)) => self.run_forward(Cow::Owned(x), bound),
            _ => unreachable!("checked by expect_buffers"),
        }
    }

    fn forward_borrowed(&self, input: View, ctx: &ForwardContext) -> Result<Forwarded> {
        let bound = self.bound.filter(|_| input.dtype() == self.input);
        match (bound, input.typed::<f32>(), input.typed::<f64>()) {
            (Some(bound), Some(x), _) => self.run_forward(Cow::Borrowed(x), bound),
            (Some(bound), _, Some(x)) => self.run_forward(Cow::Borrowed(x), bound),
            // Misaligned memory, a wrong type or no bound: the owned path copies or refuses.
            _ => self.forward(vec![input.to_buffer()?], ctx),
        }
    }

    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
        stage::expect_buffers(self, &self.outputs(), &outputs)?;
        if outputs[0].len() as u64 != r.num_elements {
            return Err(corrupt!("Quantizer: {} codes for {} elements", outputs[0].len(), r.num_elements));
        }
        let (k, f32_step, layout) = (r.num_outliers, r.step as f32, r.layout);
        // The codes are handed over: f32 values are decoded in their memory.
        let mut outputs = outputs.into_iter();
        let (codes, outliers) = (outputs.next().expect("checked"), outputs.next().expect("checked"));
        Ok(vec![match (codes, &outliers, self.input) {
            (Buffer::I32(c), Buffer::U8(o), DType::F32) => Buffer::F32(reconstruct(c, f32_step, o, k, layout)?),
            (Buffer::I32(c), Buffer::U8(o), _) => Buffer::F64(reconstruct(c, r.step, o, k, layout)?),
            (Buffer::U32(w), Buffer::U8(o), DType::F32) => Buffer::F32(reconstruct_inline(w, f32_step, o, k)?),
            (Buffer::U32(w), Buffer::U8(o), _) => Buffer::F64(reconstruct_inline(w, r.step, o, k)?),
            _ => unreachable!("checked by expect_buffers"),
        }])
    }

    fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        if self.input_stated {
            t.insert("input_type".into(), self.input.toml_name().into());
        }
        t.insert("code_type".into(), if self.inline_outliers { "uint32" } else { "int32" }.into());
        t.insert("linear_mode".into(), true.into());
        if self.inline_outliers {
            t.insert("inplace_outliers".into(), true.into());
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

    fn check_header(&self, header: &Header) -> Result<()> {
        let r = self.resolved.ok_or_else(|| corrupt!("Quantizer record incomplete"))?;
        let bound = self.bound.ok_or_else(|| corrupt!("Quantizer record has no bound"))?;
        if header.dtype != self.input || header.num_elements().ok() != Some(r.num_elements) {
            return Err(corrupt!(
                "Quantizer quantized {} {} elements, the header says {} of shape {:?}",
                r.num_elements,
                self.input,
                header.dtype,
                header.shape
            ));
        }
        check_header_bound("Quantizer", bound, header)
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

    fn error_bound(&self) -> Option<ErrorBound> {
        self.bound
    }

    fn recorded_abs_bound(&self) -> Option<f64> {
        self.resolved.map(|r| r.abs_bound)
    }

    fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        check_stated_input("Quantizer", self.input_stated, self.input, dtype)?;
        *self = Quantizer { inline_outliers: self.inline_outliers, ..Quantizer::new(dtype, self.bound)? };
        Ok(())
    }
}
