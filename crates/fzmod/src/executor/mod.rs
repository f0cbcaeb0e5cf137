//! One executor for every pipeline on the GPU. Compress walks the validated graph in stage
//! order on device buffers: a stage with a device implementation runs there; one without gets
//! transfers inserted around its CPU reference (and the report says so). Decompress runs a
//! [`DecodePlan`] inverse the same way. With fusion on, the pipeline is first offered to the
//! hand-written fusion rules (`stages::FUSION_RULES`); a rule that matches runs instead. Else
//! the walk runs every chain of stages that fuses (graph/partition.rs) as one generated kernel from
//! the stages' fragments, and the rest stage by stage; the bytes are the same either way.
//! Archive assembly is [`Pipeline::assemble`], shared with the CPU path.

use crate::archive::{Header, InputRef};
use crate::backend::cuda::device::{DeviceBuffer, DeviceRun, Len, PendingRecord};
use crate::backend::cuda::region::{Fragment, StoredInverse};
use crate::backend::cuda::{device_error, CudaDevice};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
pub use crate::graph::fusion::{finish, CompressJob, DecompressJob, Source};
use crate::graph::partition::Chain;
use crate::graph::{check_inverse, DecodePlan, Pipeline};
use crate::stage::{ForwardContext, Stage};

/// Prepare a compress: a matching fusion rule when `fusion` is on, else the unfused walk.
pub fn compress_job<'a>(
    dev: &'a CudaDevice,
    pipeline: &'a Pipeline,
    input: Source<'a>,
    shape: &[usize],
    fusion: bool,
) -> Result<Box<dyn CompressJob + 'a>> {
    if fusion {
        for rule in crate::stages::FUSION_RULES {
            if let Some(job) = rule.compress(dev, pipeline, input, shape)? {
                return Ok(job);
            }
        }
    }
    Ok(Box::new(UnfusedCompress::new(dev, pipeline, input, shape, fusion)?))
}

/// Prepare a decompress of a validated plan.
pub fn decompress_job<'a>(
    dev: &'a CudaDevice,
    mut plan: DecodePlan<'a>,
    fusion: bool,
) -> Result<Box<dyn DecompressJob + 'a>> {
    if fusion {
        for rule in crate::stages::FUSION_RULES {
            match rule.decompress(dev, plan)? {
                Ok(job) => return Ok(job),
                Err(unused) => plan = unused,
            }
        }
    }
    Ok(Box::new(UnfusedDecompress::new(dev, plan, fusion)?))
}

/// Download a buffer into a host [`Buffer`] (its length must be known or in `scalars`).
fn to_host(run: &DeviceRun, b: &DeviceBuffer, len: usize) -> Result<Buffer> {
    run.download_buffer(b, len)
}

/// Decode a validated archive into a new device buffer (unfused), ready when this returns.
pub fn decompress_device(dev: &CudaDevice, plan: DecodePlan) -> Result<(DeviceBuffer, crate::archive::Header)> {
    let mut job = UnfusedDecompress::new(dev, plan, false)?;
    job.kernels()?;
    let (run, data) = job.result.take().ok_or_else(|| Error::Device("no result".into()))?;
    run.stream().synchronize().map_err(device_error)?;
    run.check_flags()?;
    let n = host_len(&run, &data)?;
    job.plan.check_result(data.dtype, n)?;
    Ok((data, job.plan.header.clone()))
}

/// The pipeline input: uploaded by the job, or the caller's device memory.
enum Input<'a> {
    Owned(DeviceBuffer),
    Borrowed(&'a DeviceBuffer),
}

impl Input<'_> {
    fn buffer(&self) -> &DeviceBuffer {
        match self {
            Input::Owned(b) => b,
            Input::Borrowed(b) => b,
        }
    }
}

/// The compress walk: every stage in order, on the device where it can, fused regions as one
/// kernel each when `fuse`.
struct UnfusedCompress<'a> {
    dev: &'a CudaDevice,
    pipeline: &'a Pipeline,
    shape: Vec<usize>,
    input: Input<'a>,
    fuse: bool,
    /// Capacities learnt from a run whose dynamic outputs overflowed (this call's, or an
    /// earlier call's under the same `learnt_key`).
    learnt: Vec<usize>,
    learnt_key: String,
    done: Option<Forward<'a>>,
}

/// A walk's records and unconsumed buffers (stage, port, buffer).
type Walked = (Vec<PendingRecord>, Vec<(usize, usize, DeviceBuffer)>);

/// The state of one forward walk, until `finish`.
struct Forward<'a> {
    run: DeviceRun<'a>,
    records: Vec<PendingRecord>,
    leaves: Vec<(usize, usize, DeviceBuffer)>,
}

impl<'a> UnfusedCompress<'a> {
    fn new(
        dev: &'a CudaDevice,
        pipeline: &'a Pipeline,
        input: Source<'a>,
        shape: &[usize],
        fuse: bool,
    ) -> Result<Self> {
        let input = match input {
            Source::Host(view) => Input::Owned(
                DeviceRun::new(dev, shape.to_vec(), Vec::new())?.upload(view.dtype(), view.native_bytes())?,
            ),
            Source::Device { buffer, .. } => Input::Borrowed(buffer),
        };
        let learnt_key =
            format!("{:?} {shape:?} fuse {fuse}\n{}", input.buffer().dtype, crate::config::to_toml(pipeline));
        let learnt = dev.learnt_capacities(&learnt_key);
        Ok(UnfusedCompress { dev, pipeline, shape: shape.to_vec(), input, fuse, learnt, learnt_key, done: None })
    }

    fn walk(&self) -> Result<Forward<'a>> {
        let mut run = DeviceRun::new(self.dev, self.shape.clone(), self.learnt.clone())?;
        let chain = Chain::of_pipeline(self.pipeline);
        let readers = chain.inputs.iter().flatten().filter(|r| matches!(r, InputRef::External)).count();
        if let (Input::Owned(input), 1) = (&self.input, readers) {
            run.allow_overwrite(input);
        }
        let walked = self.walk_stages(&mut run, &chain).and_then(|(records, leaves)| {
            // An output that is the input written in place (a Mask's filled values left
            // unconsumed) is archived as it is now, not as the undo leaves it.
            let copy = |b: DeviceBuffer| if run.may_overwrite(&b) { run.copy(&b, b.len.capacity()) } else { Ok(b) };
            let leaves = leaves.into_iter().map(|(s, p, b)| Ok((s, p, copy(b)?))).collect::<Result<_>>()?;
            Ok((records, leaves))
        });
        // Whatever happened, the input is put back before anything can run on it again.
        run.end_walk()?;
        let (records, leaves) = walked?;
        Ok(Forward { run, records, leaves })
    }

    /// The stages of `walk`: their records and the buffers nothing consumed (none when the
    /// walk stopped early at an overflowed length).
    fn walk_stages(&self, run: &mut DeviceRun<'a>, chain: &Chain) -> Result<Walked> {
        let nodes = self.pipeline.nodes();
        let mut produced: Vec<Vec<Option<DeviceBuffer>>> = Vec::with_capacity(nodes.len());
        let mut records = Vec::with_capacity(nodes.len());
        while produced.len() < nodes.len() {
            let node = &nodes[produced.len()];
            let mut owned = Vec::new();
            for r in &chain.inputs[produced.len()] {
                owned.push(match *r {
                    InputRef::External => None,
                    InputRef::Stage { stage, port } => {
                        Some(produced[stage][port].take().expect("finalize guarantees one producer per input"))
                    }
                });
            }
            // A length only the device knows (a coder's output feeding another stage) is read
            // back here: stages size their work from their inputs' lengths. An output that
            // outgrew its room ends the walk here: `finish` repeats it with room for it.
            for b in owned.iter_mut().flatten() {
                if let Len::Device { slot, capacity } = b.len {
                    let n = run.read_slot(slot)? as usize;
                    if n > capacity {
                        return Ok((records, Vec::new()));
                    }
                    b.len = Len::Known(n);
                }
            }
            let inputs: Vec<&DeviceBuffer> = owned.iter().map(|b| b.as_ref().unwrap_or(self.input.buffer())).collect();
            let ports = node.stage.inputs();
            if inputs.iter().zip(&ports).any(|(b, p)| b.dtype != p.dtype) {
                return Err(Error::Pipeline("input of the wrong element type".into()).in_stage(&node.name));
            }
            if let Some(r) = chain.starting_at(produced.len()).filter(|_| self.fuse) {
                let names = chain.describe(&r, |k| nodes[k].name.clone());
                let out_dtype = nodes[r.end - 1].stage.outputs()[0].dtype;
                let n = inputs[0].known_len()?;
                let out = r.region.forward(run, inputs[0], n, out_dtype).map_err(|e| e.in_stage(&names))?;
                for finish in out.finishers {
                    let (side, record) = finish(run).map_err(|e| e.in_stage(&names))?;
                    produced.push(std::iter::once(None).chain(side.into_iter().map(Some)).collect());
                    records.push(record);
                }
                match out.coder_record {
                    Some(record) => {
                        produced.push(vec![Some(out.output)]);
                        records.push(record);
                    }
                    None => produced.last_mut().expect("a region has stages")[0] = Some(out.output),
                }
                continue;
            }
            let (outputs, record) = match node.stage.device() {
                Some(d) => {
                    let f = d.forward(run, &inputs).map_err(|e| e.in_stage(&node.name))?;
                    (f.outputs, f.record)
                }
                None => on_cpu_forward(run, node.stage.as_ref(), &inputs).map_err(|e| e.in_stage(&node.name))?,
            };
            let declared = node.stage.outputs();
            if outputs.len() != declared.len() || outputs.iter().zip(&declared).any(|(b, p)| b.dtype != p.dtype) {
                return Err(Error::Pipeline("produced buffers that do not match its ports".into()).in_stage(&node.name));
            }
            produced.push(outputs.into_iter().map(Some).collect());
            records.push(record);
        }
        let leaves = produced
            .into_iter()
            .enumerate()
            .flat_map(|(s, ports)| ports.into_iter().enumerate().filter_map(move |(p, b)| b.map(|b| (s, p, b))))
            .collect();
        Ok((records, leaves))
    }
}

/// A stage without a device implementation: its inputs come to the host, its CPU reference
/// runs, its outputs go back.
fn on_cpu_forward(
    run: &DeviceRun,
    stage: &dyn Stage,
    inputs: &[&DeviceBuffer],
) -> Result<(Vec<DeviceBuffer>, PendingRecord)> {
    let host = inputs.iter().map(|b| to_host(run, b, host_len(run, b)?)).collect::<Result<Vec<_>>>()?;
    let f = stage.forward(host, &ForwardContext { shape: &run.shape })?;
    let outputs = f.outputs.iter().map(|b| run.upload(b.dtype(), &b.to_le_bytes())).collect::<Result<Vec<_>>>()?;
    let record = f.record;
    Ok((outputs, Box::new(move |_| Ok(record))))
}

/// A buffer's length at a transfer to the host: known, or read from its slot now (a
/// CPU-only stage is a synchronisation point anyway).
fn host_len(run: &DeviceRun, b: &DeviceBuffer) -> Result<usize> {
    match b.len {
        Len::Known(n) => Ok(n),
        Len::Device { slot, capacity } => {
            let n = run.read_slot(slot)? as usize;
            if n > capacity {
                return Err(Error::Device(format!("a device output of {n} elements overflowed its {capacity}")));
            }
            Ok(n)
        }
    }
}

impl CompressJob for UnfusedCompress<'_> {
    fn kernels(&mut self) -> Result<()> {
        // A repeated call (timing) frees the previous run's buffers first: one run's memory
        // at a time.
        self.done = None;
        self.done = Some(self.walk()?);
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<u8>> {
        let mut forward = self.done.take().ok_or_else(|| Error::Device("finish before kernels".into()))?;
        let mut repeats = 0;
        let scalars = loop {
            match forward.run.read_scalars()? {
                Ok(s) => break s,
                // A buffer outgrew its guess: run again with the sizes measured. A buffer
                // filled from an overflowed one (a list of deltas not all kept) may measure too
                // little, but the first overflowing buffer in data order had exact inputs, so
                // each repeat makes one more buffer exact: at most one repeat per buffer.
                Err(capacities) if repeats < capacities.len() => {
                    repeats += 1;
                    self.dev.learn_capacities(&self.learnt_key, &capacities);
                    self.learnt = capacities;
                    forward = self.walk()?;
                }
                Err(_) => return Err(Error::Device("device outputs still overflow after a repeat per buffer".into())),
            }
        };
        let records = forward.records.into_iter().map(|r| r(&scalars)).collect::<Result<Vec<_>>>()?;
        let leaves: Vec<(usize, usize, DType, usize)> = forward
            .leaves
            .iter()
            .map(|(stage, port, b)| {
                let len = match b.len {
                    Len::Known(n) => n,
                    Len::Device { slot, .. } => scalars.u64(slot) as usize,
                };
                (*stage, *port, b.dtype, len * b.dtype.size())
            })
            .collect();
        // Each output is downloaded straight into its place in the archive, its checksum
        // taken on the way.
        let run = &forward.run;
        let download = |slots: &mut [&mut [u8]]| {
            let checksums =
                slots.iter_mut().zip(&forward.leaves).map(|(slot, (_, _, b))| run.download_checked(b, slot));
            checksums.map(|c| c.map(Some)).collect()
        };
        self.pipeline.assemble_with(self.input.buffer().dtype, &self.shape, records, &leaves, download)
    }

    fn notes(&self) -> Vec<String> {
        let nodes = self.pipeline.nodes();
        let mut notes = cpu_stage_notes(nodes.iter().map(|n| (n.name.as_str(), n.stage.as_ref())));
        if self.fuse {
            let chain = Chain::of_pipeline(self.pipeline);
            let regions: Vec<String> =
                chain.forward_regions().iter().map(|r| chain.describe(r, |k| nodes[k].name.clone())).collect();
            if !regions.is_empty() {
                notes[0] = "device walk with generated region kernels".into();
            }
            notes.extend(regions.into_iter().map(|r| format!("fused region: {r}")));
        }
        notes
    }
}

fn cpu_stage_notes<'s>(stages: impl Iterator<Item = (&'s str, &'s dyn Stage)>) -> Vec<String> {
    let on_cpu: Vec<&str> = stages.filter(|(_, s)| s.device().is_none()).map(|(n, _)| n).collect();
    let mut notes = vec!["unfused device path".to_string()];
    if !on_cpu.is_empty() {
        notes.push(format!("stages without a device implementation ran on the CPU: {}", on_cpu.join(", ")));
    }
    notes
}

/// The decompress walk: every stage inverse, in reverse order, fused regions as one kernel
/// each when `fuse`.
struct UnfusedDecompress<'a> {
    dev: &'a CudaDevice,
    plan: DecodePlan<'a>,
    fuse: bool,
    /// The archived segments on the device, by stage and port.
    segments: Vec<Vec<Option<DeviceBuffer>>>,
    result: Option<(DeviceRun<'a>, DeviceBuffer)>,
}

impl<'a> UnfusedDecompress<'a> {
    fn new(dev: &'a CudaDevice, plan: DecodePlan<'a>, fuse: bool) -> Result<Self> {
        let run = DeviceRun::new(dev, Vec::new(), Vec::new())?;
        let mut segments = Vec::with_capacity(plan.stages.len());
        for (s, ports) in plan.archived.iter().enumerate() {
            let outputs = plan.stages[s].outputs();
            segments.push(
                ports
                    .iter()
                    .zip(&outputs)
                    .map(|(bytes, port)| bytes.map(|b| run.upload(port.dtype, b)).transpose())
                    .collect::<Result<Vec<_>>>()?,
            );
        }
        Ok(UnfusedDecompress { dev, plan, fuse, segments, result: None })
    }

    /// Stage `i`'s output ports: reconstructed by a later stage, or archived.
    fn outputs_of<'b>(&'b self, pending: &'b [Vec<Option<DeviceBuffer>>], i: usize) -> Result<Vec<&'b DeviceBuffer>> {
        let name = self.plan.name(i);
        let ports = pending[i].iter().zip(&self.segments[i]).enumerate();
        ports
            .map(|(p, (made, archived))| {
                made.as_ref()
                    .or(archived.as_ref())
                    .ok_or_else(|| corrupt!("stage '{name}' output {p} was not reconstructed"))
            })
            .collect()
    }

    /// Stage `i`'s fragment (the partition found one).
    fn fragment(&self, i: usize) -> Result<&dyn Fragment> {
        self.plan.stages[i]
            .fragment()
            .ok_or_else(|| Error::Pipeline(format!("stage '{}' has no fragment", self.plan.name(i))))
    }

    /// The plan as the region partition sees it.
    fn chain(&self) -> Chain<'_> {
        Chain {
            stages: self.plan.stages.iter().map(|s| s.as_ref()).collect(),
            inputs: (0..self.plan.stages.len()).map(|i| self.plan.inputs_of(i).to_vec()).collect(),
            inverse: true,
        }
    }
}

/// A stage without a device implementation, inverse, through the host.
fn on_cpu_inverse(run: &DeviceRun, stage: &dyn Stage, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
    let host = outputs.iter().map(|b| to_host(run, b, host_len(run, b)?)).collect::<Result<Vec<_>>>()?;
    stage.inverse(host)?.iter().map(|b| run.upload(b.dtype(), &b.to_le_bytes())).collect()
}

impl DecompressJob for UnfusedDecompress<'_> {
    fn kernels(&mut self) -> Result<()> {
        self.result = None;
        let mut run = DeviceRun::new(self.dev, Vec::new(), Vec::new())?;
        let plan = &self.plan;
        for (buffers, bytes) in self.segments.iter().zip(&plan.archived) {
            for (b, bytes) in buffers.iter().zip(bytes) {
                if let (Some(b), Some(bytes)) = (b, bytes) {
                    run.mirror(b, bytes);
                }
            }
        }
        let chain = self.chain();
        let mut pending: Vec<Vec<Option<DeviceBuffer>>> =
            plan.stages.iter().map(|s| (0..s.outputs().len()).map(|_| None).collect()).collect();
        let mut result = None;
        let mut done = plan.stages.len();
        while done > 0 {
            let i = done - 1;
            let (first, inputs) = match chain.ending_at(i).filter(|_| self.fuse) {
                Some(r) => {
                    let names = chain.describe(&r, |k| plan.name(k).to_string());
                    // Stage k's outputs: reconstructed by a later stage, or archived.
                    let buffers = |k: usize, p: usize| pending[k][p].as_ref().or(self.segments[k][p].as_ref());
                    let mut parts = Vec::with_capacity(r.end - r.start);
                    for (k, f) in (r.start..r.end).zip(&r.region.fragments) {
                        // Port 0 of every stage but the last is made inside the region.
                        let outputs: Vec<Option<&DeviceBuffer>> = (0..plan.stages[k].outputs().len())
                            .map(|p| if p == 0 && k + 1 < r.end { None } else { buffers(k, p) })
                            .collect();
                        parts.push(f.inverse(&mut run, &outputs).map_err(|e| e.in_stage(plan.name(k)))?);
                    }
                    let last = buffers(i, 0)
                        .ok_or_else(|| corrupt!("stage '{}' output 0 was not reconstructed", plan.name(i)))?;
                    let out_dtype = plan.stages[r.start].inputs()[0].dtype;
                    let (out, finishers) =
                        r.region.inverse(&mut run, parts, last, out_dtype).map_err(|e| e.in_stage(&names))?;
                    for (k, finish) in finishers.into_iter().enumerate() {
                        finish(&mut run, (k == 0).then_some(&out)).map_err(|e| e.in_stage(&names))?;
                    }
                    (r.start, vec![out])
                }
                None if self.fuse && chain.stores_through(i) => {
                    // Stage i's global pass stores stage i - 1's inverse: its main output is made
                    // in those stores, its other ports are reconstructed or archived.
                    let k = i - 1;
                    let names = format!("{} → {}", plan.name(k), plan.name(i));
                    let (global, stored) = (self.fragment(i)?, self.fragment(k)?);
                    let outputs = self.outputs_of(&pending, i)?;
                    let ports: Vec<Option<&DeviceBuffer>> = (0..pending[k].len())
                        .map(|p| if p == 0 { None } else { pending[k][p].as_ref().or(self.segments[k][p].as_ref()) })
                        .collect();
                    let part = stored.inverse(&mut run, &ports).map_err(|e| e.in_stage(plan.name(k)))?;
                    let dtype = plan.stages[k].inputs()[0].dtype;
                    let (stored, finish) = StoredInverse::new(stored, part, dtype).map_err(|e| e.in_stage(&names))?;
                    run.set_consumable(&pending[i].iter().flatten().collect::<Vec<_>>());
                    let out = global.inverse_stored(&mut run, &outputs, &stored);
                    run.set_consumable(&[]);
                    let out = out.map_err(|e| e.in_stage(&names))?;
                    finish(&mut run, Some(&out)).map_err(|e| e.in_stage(&names))?;
                    (k, vec![out])
                }
                None => {
                    let stage = &plan.stages[i];
                    let name = plan.name(i);
                    let outputs = self.outputs_of(&pending, i)?;
                    run.set_consumable(&pending[i].iter().flatten().collect::<Vec<_>>());
                    let inputs = match stage.device() {
                        Some(d) => d.inverse(&mut run, &outputs),
                        None => on_cpu_inverse(&run, stage.as_ref(), &outputs),
                    };
                    run.set_consumable(&[]);
                    (i, inputs.map_err(|e| e.in_stage(name))?)
                }
            };
            let stage = &plan.stages[first];
            check_inverse(stage.as_ref(), plan.name(first), &inputs.iter().map(|b| b.dtype).collect::<Vec<DType>>())?;
            for (buffer, r) in inputs.into_iter().zip(plan.inputs_of(first)) {
                match *r {
                    InputRef::External => result = Some(buffer),
                    InputRef::Stage { stage, port } => pending[stage][port] = Some(buffer),
                }
            }
            done = first;
        }
        let data = result.ok_or_else(|| corrupt!("no stage reconstructs the pipeline input"))?;
        self.result = Some((run, data));
        Ok(())
    }

    fn finish_into(&mut self, dst: &mut [u8]) -> Result<()> {
        let (run, data) = self.result.take().ok_or_else(|| Error::Device("finish before kernels".into()))?;
        let len = host_len(&run, &data)?;
        self.plan.check_result(data.dtype, len)?;
        if dst.len() != len * data.dtype.size() {
            return Err(Error::InvalidArgument(format!("destination of {} bytes for {len} {}", dst.len(), data.dtype)));
        }
        // The caller's memory is written only once every check of the payload passed.
        run.check_flags()?;
        run.download_into(&data, dst)?;
        run.stream().synchronize().map_err(device_error)
    }

    fn header(&self) -> &Header {
        &self.plan.header
    }

    fn notes(&self) -> Vec<String> {
        let mut notes =
            cpu_stage_notes(self.plan.stages.iter().enumerate().map(|(i, s)| (self.plan.name(i), s.as_ref())));
        if self.fuse {
            // Last region first, as the decode runs them.
            let chain = self.chain();
            let regions = chain.inverse_regions();
            if !regions.is_empty() {
                notes[0] = "device walk with generated region kernels".into();
            }
            notes.extend(
                regions
                    .iter()
                    .map(|r| format!("decode region: {}", chain.describe(r, |k| self.plan.name(k).to_string()))),
            );
            let name = |k| self.plan.name(k);
            let stored = (1..self.plan.stages.len()).filter(|&i| chain.stores_through(i));
            notes.extend(stored.map(|i| format!("decode pass: {} stores through {}", name(i), name(i - 1))));
        }
        notes
    }
}
