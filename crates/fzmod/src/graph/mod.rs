//! The pipeline: a validated graph of named stages, run forward into an archive and
//! rebuilt from an archive to run inverse.
//!
//! Rules (checked by [`Pipeline::finalize`], errors name the stage and port):
//! exactly one stage input reads the pipeline input; every other input reads an output
//! port of another stage, with matching element types; an output feeds at most one input
//! (so the inverse reconstructs it exactly once); no cycles. Unconnected outputs are
//! archived as segments, in stage order then port order.

use crate::archive::{self, ErrorMode, Header, InputRef, SegmentEntry, StageRecord};
use crate::element::{Buffer, DType, View};
use crate::error::{Error, Result};
use crate::stage::{ErrorBound, ForwardContext, Stage};

pub mod chunks;
pub mod cpu_region;
mod decode;
#[cfg(feature = "cuda")]
pub mod fusion;
#[cfg(feature = "cuda")]
pub mod partition;
#[cfg(feature = "cuda")]
pub(crate) use decode::check_inverse;
pub use decode::{slice, ChunkedArchive, DecodeLimits, DecodePlan};

/// One stage of a pipeline and where its inputs come from.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub stage: Box<dyn Stage>,
    /// One entry per input port; `None` until connected.
    pub inputs: Vec<Option<InputRef>>,
}

/// A compression pipeline.
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    nodes: Vec<Node>,
    /// Preset name recorded in archives (empty for custom pipelines).
    pub preset: String,
    finalized: bool,
}

/// An archived output port of a finished forward run.
pub(crate) struct Leaf {
    pub stage: usize,
    pub port: usize,
    pub dtype: DType,
    pub bytes: Vec<u8>,
}

/// A decoded archive.
#[derive(Debug)]
pub struct Decompressed {
    pub header: Header,
    pub data: Buffer,
    /// Backend that decoded it ("cpu" or "cuda").
    pub backend: &'static str,
}

impl Pipeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stages in their current order (topological once finalized).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    fn index_of(&self, name: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| Error::Pipeline(format!("no stage named '{name}'")))
    }

    /// Add a stage under a unique name; returns its index.
    pub fn add_stage(&mut self, name: &str, stage: Box<dyn Stage>) -> Result<usize> {
        if name.is_empty() || self.nodes.iter().any(|n| n.name == name) {
            return Err(Error::Pipeline(format!("stage name '{name}' is empty or already used")));
        }
        let inputs = vec![None; stage.inputs().len()];
        self.nodes.push(Node { name: name.to_string(), stage, inputs });
        self.finalized = false;
        Ok(self.nodes.len() - 1)
    }

    /// Connect the next free input of `dst` to output `port` of `src` (`dst ← src:port`).
    pub fn connect(&mut self, dst: &str, src: &str, port: &str) -> Result<()> {
        let (d, s) = (self.index_of(dst)?, self.index_of(src)?);
        let outputs = self.nodes[s].stage.outputs();
        let p = outputs.iter().position(|o| o.name == port).ok_or_else(|| {
            let names: Vec<_> = outputs.iter().map(|o| o.name).collect();
            Error::Pipeline(format!("stage '{src}' has no output port '{port}' (ports: {})", names.join(", ")))
        })?;
        self.bind(d, InputRef::Stage { stage: s, port: p })
    }

    /// Feed the pipeline input to the next free input of `dst`.
    pub fn connect_input(&mut self, dst: &str) -> Result<()> {
        let d = self.index_of(dst)?;
        self.bind(d, InputRef::External)
    }

    fn bind(&mut self, d: usize, source: InputRef) -> Result<()> {
        let node = &mut self.nodes[d];
        let slot = node
            .inputs
            .iter_mut()
            .find(|i| i.is_none())
            .ok_or_else(|| Error::Pipeline(format!("stage '{}' has no free input port", node.name)))?;
        *slot = Some(source);
        self.finalized = false;
        Ok(())
    }

    /// Set the error bound on every lossy stage.
    pub fn set_error_bound(&mut self, bound: ErrorBound) -> Result<()> {
        let mut taken = false;
        for n in &mut self.nodes {
            taken |= n.stage.set_error_bound(bound);
        }
        if !taken {
            return Err(Error::Pipeline("no stage takes an error bound (the pipeline has no quantizer)".into()));
        }
        Ok(())
    }

    /// The bound of the first lossy stage, if any.
    pub fn error_bound(&self) -> Option<ErrorBound> {
        self.nodes.iter().find_map(|n| n.stage.error_bound())
    }

    /// The anchor stride of the first stage with one ([`crate::stage::Stage::chunk_anchor`]).
    pub(crate) fn chunk_anchor(&self, ndim: usize) -> Option<usize> {
        self.nodes.iter().find_map(|n| n.stage.chunk_anchor(ndim))
    }

    /// The element type the stage reading the pipeline input takes (`None` before a stage
    /// is connected to the input).
    pub fn input_dtype(&self) -> Option<DType> {
        let reader = self.nodes.iter().find(|n| n.inputs.contains(&Some(InputRef::External)))?;
        let port = reader.inputs.iter().position(|r| *r == Some(InputRef::External))?;
        reader.stage.inputs().get(port).map(|p| p.dtype)
    }

    /// Tell the stages that read the pipeline input its element type, and, through every
    /// float output of that type (a Mask's `values`), the stages that read it on.
    pub fn set_input_dtype(&mut self, dtype: DType) -> Result<()> {
        let carries = matches!(dtype, DType::F32 | DType::F64);
        let mut sources = vec![InputRef::External];
        let mut done = vec![false; self.nodes.len()];
        while let Some(source) = sources.pop() {
            for (i, n) in self.nodes.iter_mut().enumerate() {
                if done[i] || !n.inputs.contains(&Some(source)) {
                    continue;
                }
                n.stage.set_input_dtype(dtype).map_err(|e| e.in_stage(&n.name))?;
                done[i] = true;
                let outputs = n.stage.outputs();
                let carried = outputs.iter().enumerate().filter(|(_, p)| carries && p.dtype == dtype);
                sources.extend(carried.map(|(port, _)| InputRef::Stage { stage: i, port }));
            }
        }
        self.finalized = false;
        Ok(())
    }

    /// Validate the graph and order the stages topologically (stable: file order on ties).
    pub fn finalize(&mut self) -> Result<()> {
        if self.nodes.is_empty() {
            return Err(Error::Pipeline("pipeline has no stages".into()));
        }
        // A stage with no connected input at all is a source: it reads the pipeline input.
        for n in &mut self.nodes {
            if n.inputs.len() == 1 && n.inputs[0].is_none() {
                n.inputs[0] = Some(InputRef::External);
            }
        }
        let mut externals = 0;
        let mut consumed = std::collections::BTreeSet::new();
        for n in &self.nodes {
            let ports = n.stage.inputs();
            for (i, input) in n.inputs.iter().enumerate() {
                let name = ports[i].name;
                match input {
                    None => return Err(Error::Pipeline(format!("stage '{}' input '{name}' is not connected", n.name))),
                    Some(InputRef::External) => externals += 1,
                    Some(InputRef::Stage { stage, port }) => {
                        let src = &self.nodes[*stage];
                        let out = &src.stage.outputs()[*port];
                        if out.dtype != ports[i].dtype {
                            return Err(Error::Pipeline(format!(
                                "stage '{}' input '{name}' expects {}, but '{}:{}' produces {}",
                                n.name, ports[i].dtype, src.name, out.name, out.dtype
                            )));
                        }
                        if !consumed.insert((*stage, *port)) {
                            return Err(Error::Pipeline(format!(
                                "output '{}:{}' feeds more than one input (each output feeds at most one)",
                                src.name, out.name
                            )));
                        }
                    }
                }
            }
        }
        if externals != 1 {
            return Err(Error::Pipeline(format!(
                "exactly one stage input must read the pipeline input, found {externals}"
            )));
        }
        self.sort_topologically()?;
        self.finalized = true;
        Ok(())
    }

    fn sort_topologically(&mut self) -> Result<()> {
        let n = self.nodes.len();
        let deps = |i: usize| -> Vec<usize> {
            self.nodes[i]
                .inputs
                .iter()
                .filter_map(|r| match r {
                    Some(InputRef::Stage { stage, .. }) => Some(*stage),
                    _ => None,
                })
                .collect()
        };
        let mut order: Vec<usize> = Vec::with_capacity(n);
        let mut placed = vec![false; n];
        while order.len() < n {
            let next = (0..n).find(|&i| !placed[i] && deps(i).iter().all(|&d| placed[d]));
            let Some(i) = next else {
                let stuck: Vec<_> = (0..n).filter(|&i| !placed[i]).map(|i| self.nodes[i].name.clone()).collect();
                return Err(Error::Pipeline(format!("cycle among stages {}", stuck.join(", "))));
            };
            placed[i] = true;
            order.push(i);
        }
        let mut new_index = vec![0; n];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut old_nodes: Vec<Option<Node>> = std::mem::take(&mut self.nodes).into_iter().map(Some).collect();
        for &old in &order {
            let mut node = old_nodes[old].take().expect("each node placed once");
            for r in node.inputs.iter_mut().flatten() {
                if let InputRef::Stage { stage, .. } = r {
                    *stage = new_index[*stage];
                }
            }
            self.nodes.push(node);
        }
        Ok(())
    }

    /// The input must be non-empty and hold exactly the elements of `shape`.
    pub(crate) fn check_input(&self, input: View, shape: &[usize]) -> Result<()> {
        self.check_input_len(input.len(), shape)
    }

    /// [`Pipeline::check_input`] of an input of `len` elements wherever it lives (host or
    /// device memory).
    pub(crate) fn check_input_len(&self, len: usize, shape: &[usize]) -> Result<()> {
        // An archive records at most MAX_DIMS extents: a longer shape would write an archive
        // no reader accepts.
        if shape.len() > archive::MAX_DIMS {
            return Err(Error::InvalidArgument(format!(
                "shape {shape:?} has {} dimensions, an archive holds at most {}",
                shape.len(),
                archive::MAX_DIMS
            )));
        }
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(len) {
            return Err(Error::InvalidArgument(format!("shape {shape:?} does not match the input's {len} elements")));
        }
        if len == 0 {
            return Err(Error::InvalidArgument("input is empty: nothing to compress".into()));
        }
        Ok(())
    }

    /// Has [`Pipeline::finalize`] run since the last change?
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// The CPU forward walk of a finalized pipeline over a checked input, assembled into an
    /// archive (before the stored-raw decision). The stage that reads the pipeline input reads
    /// the caller's memory (`Stage::forward_borrowed`; the float front ends take no copy);
    /// every later stage consumes the buffers of the one before, but for the consumer of an
    /// output that is the pipeline input unchanged (`Stage::forward_unchanged`), which reads
    /// the caller's memory too. With `fuse`, the chains that
    /// form CPU regions (cpu_region.rs) run block by block instead: the same bytes.
    pub(crate) fn compress_checked(&self, input: View, shape: &[usize], fuse: bool) -> Result<Vec<u8>> {
        // On a pool thread, as DecodePlan::run_cpu: stages' parallel loops start locally.
        rayon::scope(|_| self.walk_forward(input, shape, fuse))
    }

    /// The CPU regions of this (finalized) pipeline.
    pub(crate) fn cpu_regions(&self) -> Vec<cpu_region::CpuRegion> {
        let stages: Vec<&dyn Stage> = self.nodes.iter().map(|n| n.stage.as_ref()).collect();
        let inputs: Vec<Vec<InputRef>> =
            self.nodes.iter().map(|n| n.inputs.iter().map(|r| r.expect("finalized")).collect()).collect();
        cpu_region::regions(&stages, &inputs)
    }

    fn walk_forward(&self, input: View, shape: &[usize], fuse: bool) -> Result<Vec<u8>> {
        let ctx = ForwardContext { shape };
        let regions = if fuse { self.cpu_regions() } else { Vec::new() };
        // produced[stage][port]: outputs waiting for their consumer.
        let mut produced: Vec<Vec<Option<Buffer>>> = Vec::with_capacity(self.nodes.len());
        let mut records = Vec::with_capacity(self.nodes.len());
        // The stage whose first output is the pipeline input unchanged (Stage::forward_unchanged):
        // that output is read as the pipeline input is, from the caller's memory.
        let mut unchanged = None;
        let source = |r: &Option<InputRef>, unchanged: Option<usize>| match r.expect("finalized") {
            InputRef::Stage { stage, port: 0 } if unchanged == Some(stage) => InputRef::External,
            r => r,
        };
        let mut i = 0;
        while i < self.nodes.len() {
            let sources: Vec<InputRef> = self.nodes[i].inputs.iter().map(|r| source(r, unchanged)).collect();
            if let Some(&r) = regions.iter().find(|r| r.start == i) {
                if let Some(done) = self.forward_region(r, sources[0], input, shape, &produced)? {
                    if let InputRef::Stage { stage, port } = sources[0] {
                        produced[stage][port] = None;
                    }
                    for (outputs, record) in done {
                        produced.push(outputs);
                        records.push(record);
                    }
                    i = r.end;
                    continue;
                }
            }
            let node = &self.nodes[i];
            let ports = node.stage.inputs();
            let mismatch = |i: usize, got: DType| {
                Error::Pipeline(format!("input '{}' expects {}, got {got}", ports[i].name, ports[i].dtype))
                    .in_stage(&node.name)
            };
            let mut outputs_from = 0;
            let out = if let [InputRef::External] = sources.as_slice() {
                // The stage that reads the pipeline input reads the caller's memory.
                if input.dtype() != ports[0].dtype {
                    return Err(mismatch(0, input.dtype()));
                }
                // Only a stage of the pipeline input proper, whose first output has a consumer.
                let may_pass = node.inputs[0] == Some(InputRef::External) && self.consumed(i, 0);
                let passed = if may_pass { node.stage.forward_unchanged(input, &ctx) } else { Ok(None) };
                match passed {
                    Ok(Some(out)) => {
                        (unchanged, outputs_from) = (Some(i), 1);
                        Ok(out)
                    }
                    Ok(None) => node.stage.forward_borrowed(input, &ctx),
                    Err(e) => Err(e),
                }
            } else {
                let mut inputs = Vec::with_capacity(ports.len());
                for (i, &r) in sources.iter().enumerate() {
                    let buffer = match r {
                        InputRef::External => input.to_buffer()?,
                        InputRef::Stage { stage, port } => {
                            produced[stage][port].take().expect("finalize guarantees one producer per input")
                        }
                    };
                    if buffer.dtype() != ports[i].dtype {
                        return Err(mismatch(i, buffer.dtype()));
                    }
                    inputs.push(buffer);
                }
                node.stage.forward(inputs, &ctx)
            }
            .map_err(|e| e.in_stage(&node.name))?;
            // An unchanged first output's slot stays empty.
            let outputs: Vec<Option<Buffer>> =
                std::iter::repeat_with(|| None).take(outputs_from).chain(out.outputs.into_iter().map(Some)).collect();
            self.check_outputs(i, outputs.iter().map(|b| b.as_ref().map(Buffer::dtype)))?;
            produced.push(outputs);
            records.push(out.record);
            i += 1;
        }
        let leaves = produced
            .into_iter()
            .enumerate()
            .flat_map(|(s, ports)| ports.into_iter().enumerate().filter_map(move |(p, b)| b.map(|b| (s, p, b))))
            .map(|(s, p, b)| Leaf { stage: s, port: p, dtype: b.dtype(), bytes: b.to_le_bytes() })
            .collect();
        Ok(self.assemble(input.dtype(), shape, records, leaves))
    }

    /// Region `r` forward from its input `source` (the pipeline input or a buffer in `produced`):
    /// each stage's outputs (`None` where the next stage took them) and record, or `None`
    /// when its blocks cannot be cut (the stage walk then runs its stages).
    fn forward_region(
        &self,
        r: cpu_region::CpuRegion,
        source: InputRef,
        input: View,
        shape: &[usize],
        produced: &[Vec<Option<Buffer>>],
    ) -> Result<Option<cpu_region::RegionForwarded>> {
        let nodes = &self.nodes[r.start..r.end];
        let first = &nodes[0];
        let view = match source {
            InputRef::External => input,
            InputRef::Stage { stage, port } => produced[stage][port].as_ref().expect("one producer per input").view(),
        };
        let port = &first.stage.inputs()[0];
        if view.dtype() != port.dtype {
            return Err(Error::Pipeline(format!("input '{}' expects {}, got {}", port.name, port.dtype, view.dtype()))
                .in_stage(&first.name));
        }
        let fragments: Vec<_> =
            nodes.iter().map(|n| n.stage.cpu_fragment().expect("a region's stages have fragments")).collect();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let last = nodes[nodes.len() - 1].stage.outputs()[0].dtype;
        let done = cpu_region::forward(&fragments, &names, view, shape, last)?;
        if let Some(done) = &done {
            for (k, (outputs, _)) in done.iter().enumerate() {
                self.check_outputs(r.start + k, outputs.iter().map(|b| b.as_ref().map(Buffer::dtype)))?;
            }
        }
        Ok(done)
    }

    /// Whether output `port` of stage `stage` is an input of a later stage.
    fn consumed(&self, stage: usize, port: usize) -> bool {
        let output = Some(InputRef::Stage { stage, port });
        self.nodes[stage + 1..].iter().any(|n| n.inputs.contains(&output))
    }

    /// A forward run's outputs (their types; `None` for one a region kept) must match the
    /// stage's ports.
    fn check_outputs(&self, i: usize, dtypes: impl ExactSizeIterator<Item = Option<DType>>) -> Result<()> {
        let node = &self.nodes[i];
        let declared = node.stage.outputs();
        if dtypes.len() != declared.len() || dtypes.zip(&declared).any(|(d, p)| d.is_some_and(|d| d != p.dtype)) {
            return Err(Error::Pipeline("produced buffers that do not match its ports".into()).in_stage(&node.name));
        }
        Ok(())
    }

    /// Write the archive of a finished forward run: one parameter record per stage (in
    /// stage order) and the unconnected outputs (in stage, then port order). Every backend
    /// ends here, so the header bytes cannot differ between them.
    pub(crate) fn assemble(&self, dtype: DType, shape: &[usize], params: Vec<Vec<u8>>, leaves: Vec<Leaf>) -> Vec<u8> {
        let header = self.header(dtype, shape, params, leaves.iter().map(|l| (l.stage, l.port, l.dtype)));
        let bytes: Vec<Vec<u8>> = leaves.into_iter().map(|l| l.bytes).collect();
        archive::write(header, &bytes)
    }

    /// [`Pipeline::assemble`] for outputs that are not on the host yet: `leaves` gives each
    /// one's (stage, port, type, byte length), and `fill` writes them into their place in the
    /// archive (device backends download straight there, taking each one's CRC-32C as the
    /// bytes pass: see `archive::write_with`).
    #[cfg(feature = "cuda")]
    pub(crate) fn assemble_with(
        &self,
        dtype: DType,
        shape: &[usize],
        params: Vec<Vec<u8>>,
        leaves: &[(usize, usize, DType, usize)],
        fill: impl FnOnce(&mut [&mut [u8]]) -> Result<Vec<Option<u32>>>,
    ) -> Result<Vec<u8>> {
        let header = self.header(dtype, shape, params, leaves.iter().map(|&(s, p, d, _)| (s, p, d)));
        let lens: Vec<usize> = leaves.iter().map(|l| l.3).collect();
        archive::write_with(header, &lens, fill)
    }

    /// The header of a finished forward run: one record per stage (in stage order) and one
    /// segment entry per unconnected output (in stage, then port order).
    pub(crate) fn header(
        &self,
        dtype: DType,
        shape: &[usize],
        params: Vec<Vec<u8>>,
        leaves: impl Iterator<Item = (usize, usize, DType)>,
    ) -> Header {
        let stages = self
            .nodes
            .iter()
            .zip(params)
            .map(|(node, params)| StageRecord {
                type_id: node.stage.kind().id,
                name: node.name.clone(),
                param_version: node.stage.kind().param_version,
                params,
                inputs: node.inputs.iter().map(|r| r.expect("finalized")).collect(),
            })
            .collect();
        let segments = leaves
            .map(|(stage, port, dtype)| SegmentEntry { stage, port, dtype, offset: 0, len: 0, crc32c: 0 })
            .collect();
        let bound = self.error_bound();
        Header {
            version: (archive::FORMAT_MAJOR, archive::FORMAT_MINOR),
            dtype,
            shape: shape.iter().map(|&d| d as u64).collect(),
            error_mode: bound.map_or(ErrorMode::Abs, |b| b.mode),
            error_bound: bound.map_or(0.0, |b| b.value),
            preset: self.preset.clone(),
            stages,
            segments,
            chunking: None,
        }
    }
}
