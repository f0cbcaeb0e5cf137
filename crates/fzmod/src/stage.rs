//! The stage abstraction: typed ports, versioned parameters, forward and inverse runs,
//! and the stage types' registry entries (the registry itself, `stages::ALL`, sits above the
//! stages and hands its lookups down).

use crate::archive::{ErrorMode, Header};
use crate::element::{Buffer, DType, View};
use crate::error::{Error, Result};

/// A named, typed port. Forward inputs/outputs; the inverse swaps the roles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub name: &'static str,
    pub dtype: DType,
}

/// The requested error bound as given by the user.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorBound {
    pub mode: ErrorMode,
    pub value: f64,
}

impl ErrorBound {
    /// The bound a stage holds, or the error that says how to give one.
    pub(crate) fn required(bound: Option<ErrorBound>) -> Result<ErrorBound> {
        bound.ok_or_else(|| Error::InvalidArgument("no error bound set (give -e/--error-bound or error_bound)".into()))
    }

    /// A bound must be a finite, strictly positive number.
    pub fn new(mode: ErrorMode, value: f64) -> Result<Self> {
        if !(value.is_finite() && value > 0.0) {
            return Err(Error::InvalidArgument(format!("error bound must be a finite number > 0, got {value}")));
        }
        Ok(ErrorBound { mode, value })
    }
}

impl ErrorBound {
    /// The one bound policy. `mode` and `value` are what the caller gave (a CLI's `-m`/`-e`,
    /// a codec's `mode=`/`bound=`, a TOML's `error_bound_mode`/`error_bound`); `pipeline` is
    /// the bound the pipeline already carries, if any.
    ///
    /// - mode and value: that bound;
    /// - a value alone: relative to the value range (`rel`), everywhere;
    /// - a mode alone: the pipeline's bound if it has that mode, else an error (a relative
    ///   1e-3 silently reused as an absolute 1e-3 would be a different guarantee);
    /// - neither: the pipeline's bound (`None` when it has none).
    pub fn from_parts(
        mode: Option<ErrorMode>,
        value: Option<f64>,
        pipeline: Option<ErrorBound>,
    ) -> Result<Option<ErrorBound>> {
        match (mode, value) {
            (mode, Some(value)) => ErrorBound::new(mode.unwrap_or(ErrorMode::Rel), value).map(Some),
            (Some(mode), None) => match pipeline {
                Some(b) if b.mode == mode => Ok(Some(b)),
                Some(b) => Err(Error::InvalidArgument(format!(
                    "error-bound mode '{}' given without a value, and the pipeline's bound is {} {:e}: \
                     give the value too",
                    mode.name(),
                    b.mode.name(),
                    b.value
                ))),
                None => Err(Error::InvalidArgument(format!(
                    "error-bound mode '{}' given without a value, and the pipeline has no bound",
                    mode.name()
                ))),
            },
            (None, None) => Ok(pipeline),
        }
    }
}

/// What a stage may know about the pipeline input while running forward.
#[derive(Clone, Debug)]
pub struct ForwardContext<'a> {
    /// Shape of the pipeline input, C order (slowest first).
    pub shape: &'a [usize],
}

/// Result of a forward run: the output buffers (one per output port) and the stage's
/// complete parameter record (configuration plus data-dependent values decode needs).
pub struct Forwarded {
    pub outputs: Vec<Buffer>,
    pub record: Vec<u8>,
}

/// A pipeline stage. Stages are immutable during a run: data-dependent values (resolved
/// bound, element counts, dims) go into the record returned by `forward`, and the inverse
/// runs on a stage rebuilt from that record, so decode never depends on compress state.
pub trait Stage: StageObject + Send + Sync + std::fmt::Debug {
    /// The registry entry of this stage's type.
    fn kind(&self) -> &'static StageKind;
    /// Forward input ports.
    fn inputs(&self) -> Vec<Port>;
    /// Forward output ports.
    fn outputs(&self) -> Vec<Port>;
    /// Run forward: one buffer per input port in, one per output port out.
    fn forward(&self, inputs: Vec<Buffer>, ctx: &ForwardContext) -> Result<Forwarded>;
    /// Run forward on the pipeline input, borrowed (the stage's one input). Stages that only
    /// read it (the float front ends) override this, so the CPU path never copies the
    /// caller's array; the default takes one owned copy for [`Stage::forward`].
    fn forward_borrowed(&self, input: View, ctx: &ForwardContext) -> Result<Forwarded> {
        self.forward(vec![input.to_buffer()?], ctx)
    }
    /// For a stage whose first output can be its one input unchanged (a Mask with nothing to
    /// mask): in that case, the record and the other outputs (the first left out), so that the
    /// CPU walk hands the caller's memory on to the next stage in place of a copy of it (the
    /// copy was 5–8 % of an `interp` compress of the small shared fields); else `None`, and
    /// the walk runs [`Stage::forward_borrowed`].
    fn forward_unchanged(&self, _input: View, _ctx: &ForwardContext) -> Result<Option<Forwarded>> {
        Ok(None)
    }
    /// Run inverse on a stage decoded from its record: forward outputs in, forward inputs out.
    fn inverse(&self, outputs: Vec<Buffer>) -> Result<Vec<Buffer>>;
    /// Configuration as TOML keys (snake_case), for saving pipelines.
    fn to_toml(&self) -> toml::Table;
    /// Accept the pipeline's error bound; stages that are not lossy return `false`.
    fn set_error_bound(&mut self, _bound: ErrorBound) -> bool {
        false
    }
    /// The bound this stage enforces, if it is lossy.
    fn error_bound(&self) -> Option<ErrorBound> {
        None
    }
    /// The anchor stride `a` of a predictor whose segments close at a chunk's far edge when
    /// the chunk's extents are `k·a + 1` (an interpolation over an array of `ndim`
    /// dimensions); the default chunk shape of large arrays takes such extents
    /// (docs/FORMAT.md §8.4). `None` for every other stage.
    fn chunk_anchor(&self, _ndim: usize) -> Option<usize> {
        None
    }
    /// On a stage rebuilt from its record: the absolute bound its reconstruction guarantees
    /// (checked against the header by [`Stage::check_header`]); `None` for exact stages.
    fn recorded_abs_bound(&self) -> Option<f64> {
        None
    }
    /// Accept the pipeline input's element type (only stages fed by the pipeline input).
    fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        match self.inputs().first() {
            Some(p) if p.dtype == dtype => Ok(()),
            _ => Err(Error::Pipeline(format!("{} cannot take {dtype} input", self.kind().name))),
        }
    }
    /// Check a stage decoded from its record against the archive header (element type,
    /// shape, bound), so that the header a report shows is the one the data obeys.
    fn check_header(&self, _header: &Header) -> Result<()> {
        Ok(())
    }
    /// On a stage rebuilt from its record: the largest buffer length (bytes) the record
    /// states, which a decode allocates before the data can be checked (bounded by the plan
    /// with [`check_stated_bytes`]).
    fn stated_bytes(&self) -> u64 {
        0
    }
    /// On a stage rebuilt from its record: the elements of its output when the record states
    /// a layout wider than the array (padded tiles), which the plan's bounds grow to.
    fn padded_elements(&self) -> Option<u64> {
        None
    }
    /// Its CPU work as a fragment of a fused region (cpu_fragment.rs), if it has one.
    fn cpu_fragment(&self) -> Option<&dyn crate::cpu_fragment::CpuFragment> {
        None
    }
    /// The device implementation of the same contract, if this stage has one.
    #[cfg(feature = "cuda")]
    fn device(&self) -> Option<&dyn crate::backend::cuda::device::DeviceStage> {
        None
    }
    /// Its device work as a fragment of a fused region, if it has one.
    #[cfg(feature = "cuda")]
    fn fragment(&self) -> Option<&dyn crate::backend::cuda::region::Fragment> {
        None
    }
}

/// What every stage gets for free from being a `Clone` type: cloning behind the trait object,
/// and the concrete type for fusion rules, which recognise the stages they fuse.
pub trait StageObject {
    /// Clone behind the trait object.
    fn clone_box(&self) -> Box<dyn Stage>;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: Stage + Clone + 'static> StageObject for T {
    fn clone_box(&self) -> Box<dyn Stage> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Clone for Box<dyn Stage> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// Builds a stage from its TOML table.
pub type FromToml = fn(&toml::Table) -> Result<Box<dyn Stage>>;
/// Builds a stage from an archive record: (parameter version, bytes).
pub type FromRecord = fn(u32, &[u8]) -> Result<Box<dyn Stage>>;

/// A stage type: its permanent id and name, its parameter version, and its constructors.
pub struct StageKind {
    /// Permanent on-disk id; never reused (docs/FORMAT.md, "Stage type registry").
    pub id: u16,
    /// TOML `type` name.
    pub name: &'static str,
    /// One line for `fzmod stages`.
    pub summary: &'static str,
    /// Version of the parameter record this build writes.
    pub param_version: u32,
    /// Build from a TOML `[[stage]]` table (keys other than name/type/inputs).
    pub from_toml: FromToml,
    /// Build from an archive record (version, bytes) for decoding.
    pub from_record: FromRecord,
}

impl std::fmt::Debug for StageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.name, self.id)
    }
}

/// The most bytes any buffer of a pipeline holds per element of its widest stream (the input,
/// or a padded layout a stage records): every element type is at most 8 bytes wide, and no
/// stage widens its data beyond that.
pub const MAX_BYTES_PER_ELEMENT: u64 = 8;

/// Bytes any buffer may hold beyond [`MAX_BYTES_PER_ELEMENT`] per element, whatever the array's
/// size: a coder's fixed tables (a Huffman book of 4096 entries takes about 2.5 KB, so RZE after
/// Huffman on a 97-element array states more than 8 bytes per element).
pub const MAX_FIXED_BYTES: u64 = 1 << 16;

/// Refuse a record that states a buffer length (`bytes`) no archive whose widest stream has
/// `widest` elements needs: decoding would allocate it before any other check could refuse
/// the archive.
pub fn check_stated_bytes(stage: &str, bytes: u64, widest: u64) -> Result<()> {
    let most = widest.saturating_mul(MAX_BYTES_PER_ELEMENT).saturating_add(MAX_FIXED_BYTES);
    if bytes > most {
        return Err(Error::Corrupt(format!(
            "{stage} states {bytes} bytes, more than the {most} a stream of {widest} elements can need"
        )));
    }
    Ok(())
}

/// Refuse a record written with a parameter version this build cannot read.
pub fn check_param_version(kind: &StageKind, version: u32) -> Result<()> {
    if version == 0 || version > kind.param_version {
        return Err(Error::Corrupt(format!(
            "{} parameter version {version} not supported (this build reads 1..={})",
            kind.name, kind.param_version
        )));
    }
    Ok(())
}

/// Check that a forward call received the buffers its ports declare.
pub fn expect_buffers(stage: &dyn Stage, ports: &[Port], buffers: &[Buffer]) -> Result<()> {
    if ports.len() != buffers.len() {
        return Err(Error::Pipeline(format!(
            "{} expects {} buffers, got {}",
            stage.kind().name,
            ports.len(),
            buffers.len()
        )));
    }
    for (p, b) in ports.iter().zip(buffers) {
        if p.dtype != b.dtype() {
            return Err(Error::Pipeline(format!(
                "{} port '{}' expects {}, got {}",
                stage.kind().name,
                p.name,
                p.dtype,
                b.dtype()
            )));
        }
    }
    Ok(())
}
