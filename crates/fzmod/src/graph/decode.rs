//! The decode front end: archive bytes are parsed and validated once into a [`DecodePlan`],
//! which any backend then runs inverse. Backends therefore cannot disagree about what a valid
//! archive is: checksums, versions, the stage graph, segment element types against their
//! ports, and the header against the stage records are all checked here, and so is the
//! memory the decode will need ([`DecodeLimits`]), before any stage runs.

use super::Decompressed;
use crate::archive::{self, Header, InputRef};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::stage::{self, Stage};

/// Limits a decode must respect. An archive may legitimately decode to thousands of times
/// its own size (docs/FORMAT.md §3: a constant field compresses to almost nothing), so the
/// memory a decode needs is computed from the header before any stage runs and refused above
/// `max_memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Most bytes of host memory one decode may need (the estimate of
    /// [`DecodePlan::memory_needed`], plus 8 bytes per element of a padded layout beyond the
    /// array).
    pub max_memory: u64,
}

/// The default limit where physical memory is unknown (non-Linux systems).
const FALLBACK_MAX_MEMORY: u64 = 8 << 30;

impl DecodeLimits {
    /// A limit of `max_memory` bytes.
    pub fn new(max_memory: u64) -> Self {
        DecodeLimits { max_memory }
    }
}

impl Default for DecodeLimits {
    /// Half of the physical memory (`MemTotal` of /proc/meminfo on Linux), else 8 GiB: a
    /// decode may use a large share of the machine, but an archive alone cannot make it
    /// exhaust the memory.
    fn default() -> Self {
        // Read once per process: small archives decode in microseconds, the file read would
        // dominate them.
        static DEFAULT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let max_memory = *DEFAULT.get_or_init(|| physical_memory().map_or(FALLBACK_MAX_MEMORY, |m| m / 2));
        DecodeLimits { max_memory }
    }
}

/// Physical memory in bytes, from /proc/meminfo (`MemTotal:  16318412 kB`).
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// A validated archive, ready to run inverse.
pub struct DecodePlan<'a> {
    pub header: Header,
    /// Stages rebuilt from their records, in archive (topological) order.
    pub stages: Vec<Box<dyn Stage>>,
    /// `archived[stage][port]`: the segment bytes of each unconnected output.
    pub archived: Vec<Vec<Option<&'a [u8]>>>,
    /// A chunked archive (docs/FORMAT.md §8): its bytes, where its chunks lie, and what
    /// decodes each chunk; `stages` and `archived` are then empty.
    pub chunked: Option<ChunkedArchive<'a>>,
    /// Whether the CPU decode runs its fused regions block by block (the default) or every
    /// stage over the whole array (the same result).
    pub(crate) cpu_fusion: bool,
}

/// The parts of a chunked archive a decode needs besides its header.
#[derive(Clone, Copy)]
pub struct ChunkedArchive<'a> {
    pub bytes: &'a [u8],
    pub data_start: u64,
    pub data_len: u64,
    /// The stage registry and limits every chunk is planned with.
    pub registry: &'static [&'static stage::StageKind],
    pub limits: DecodeLimits,
}

impl std::fmt::Debug for ChunkedArchive<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedArchive")
            .field("data_start", &self.data_start)
            .field("data_len", &self.data_len)
            .finish()
    }
}

impl ChunkedArchive<'_> {
    /// The archive's header and data region, as [`super::chunks::decode`] takes them.
    pub fn head(&self, header: &Header) -> archive::Head {
        archive::Head { header: header.clone(), data_start: self.data_start, data_len: self.data_len, trailer_len: 0 }
    }
}

/// Decodes chunks on the CPU (the reference), in parallel.
struct CpuChunks {
    registry: &'static [&'static stage::StageKind],
    limits: DecodeLimits,
}

impl super::chunks::ChunkRunner for CpuChunks {
    fn plan<'a>(&self, chunk: &'a [u8]) -> Result<DecodePlan<'a>> {
        DecodePlan::with_registry(chunk, &self.limits, self.registry)
    }
    fn run(&self, plan: DecodePlan<'_>) -> Result<Buffer> {
        plan.run_cpu_buffer().map(|(_, data)| data)
    }
    fn run_into(&self, plan: DecodePlan<'_>, dst: &mut [u8]) -> Result<()> {
        plan.run_cpu_into(dst).map(drop)
    }
    fn parallel(&self) -> bool {
        true
    }
    fn each(
        &self,
        count: usize,
        work: &(dyn Fn(&dyn super::chunks::ChunkRunner, usize) -> Result<()> + Sync),
    ) -> Result<()> {
        crate::error::at_once(count, |k| work(self, k)).map(drop)
    }
    fn max_memory(&self) -> u64 {
        self.limits.max_memory
    }
}

impl<'a> DecodePlan<'a> {
    /// Parse and validate archive bytes, rebuilding stages with the `registry` handed down
    /// (`stages::ALL`; [`DecodePlan::new`] passes it); refuse (`InvalidArgument`) a decode
    /// that would need more memory than `limits` allow, before any stage runs.
    pub fn with_registry(
        bytes: &'a [u8],
        limits: &DecodeLimits,
        registry: &'static [&'static stage::StageKind],
    ) -> Result<Self> {
        let parsed = archive::parse(bytes)?;
        let header = parsed.header;
        check_header_facts(&header)?;
        if header.chunking.is_some() {
            // The array, and per chunk what its own plan checks (under the same limits).
            let need = header.num_elements()?.checked_mul(header.dtype.size() as u64);
            if need.is_none_or(|n| n > limits.max_memory) {
                return Err(Error::InvalidArgument(format!(
                    "decoding needs more than {} bytes ({} {} values of shape {:?}); raise the decode \
                     limit (the CLI's --max-memory, the library's DecodeLimits) or decode a region",
                    limits.max_memory,
                    header.num_elements()?,
                    header.dtype,
                    header.shape
                )));
            }
            let chunked = ChunkedArchive {
                bytes,
                data_start: parsed.data_start as u64,
                data_len: parsed.data_len,
                registry,
                limits: *limits,
            };
            return Ok(DecodePlan {
                header,
                stages: Vec::new(),
                archived: Vec::new(),
                chunked: Some(chunked),
                cpu_fusion: true,
            });
        }
        let mut stages: Vec<Box<dyn Stage>> = Vec::with_capacity(header.stages.len());
        for rec in &header.stages {
            let kind =
                registry.iter().copied().find(|k| k.id == rec.type_id).ok_or(Error::UnknownStage(rec.type_id))?;
            let s = (kind.from_record)(rec.param_version, &rec.params).map_err(|e| e.in_stage(&rec.name))?;
            if s.inputs().len() != rec.inputs.len() {
                return Err(corrupt!(
                    "stage '{}' records {} inputs, its type has {}",
                    rec.name,
                    rec.inputs.len(),
                    s.inputs().len()
                ));
            }
            s.check_header(&header).map_err(|e| e.in_stage(&rec.name))?;
            stages.push(s);
        }
        // A padded layout (TiledLorenzo's tiles) widens every buffer after it.
        let n = header.num_elements()?;
        let widest = stages.iter().filter_map(|s| s.padded_elements()).fold(n, u64::max);
        let need = DecodePlan::memory_needed(&header)?.saturating_add((widest - n).saturating_mul(8));
        if need > limits.max_memory {
            return Err(Error::InvalidArgument(format!(
                "decoding needs ~{} ({} {} values of shape {:?}), above the limit of {}; \
                 raise the decode limit (the CLI's --max-memory, the library's DecodeLimits)",
                crate::metrics::human_bytes(need),
                header.num_elements()?,
                header.dtype,
                header.shape,
                crate::metrics::human_bytes(limits.max_memory)
            )));
        }
        for (s, rec) in stages.iter().zip(&header.stages) {
            stage::check_stated_bytes(s.kind().name, s.stated_bytes(), widest).map_err(|e| e.in_stage(&rec.name))?;
        }
        let consumed = consumed_outputs(&header, &stages)?;
        let mut archived: Vec<Vec<Option<&[u8]>>> = stages.iter().map(|s| vec![None; s.outputs().len()]).collect();
        for (entry, bytes) in header.segments.iter().zip(&parsed.segments) {
            let port = stages.get(entry.stage).and_then(|s| s.outputs().get(entry.port).cloned());
            let port =
                port.ok_or_else(|| corrupt!("segment for missing port {} of stage {}", entry.port, entry.stage))?;
            if consumed[entry.stage][entry.port] || port.dtype != entry.dtype {
                return Err(corrupt!(
                    "segment for stage {} port {} is not an unconnected {} output",
                    entry.stage,
                    entry.port,
                    port.dtype
                ));
            }
            if bytes.len() % entry.dtype.size() != 0 {
                return Err(corrupt!("segment of {} bytes is not a whole number of {}", bytes.len(), entry.dtype));
            }
            let slot = &mut archived[entry.stage][entry.port];
            if slot.replace(bytes).is_some() {
                return Err(corrupt!("two segments for stage {} port {}", entry.stage, entry.port));
            }
        }
        for (i, ports) in archived.iter().enumerate() {
            for (p, segment) in ports.iter().enumerate() {
                if segment.is_none() && !consumed[i][p] {
                    return Err(corrupt!(
                        "stage '{}' output {p} is neither archived nor consumed",
                        header.stages[i].name
                    ));
                }
            }
        }
        Ok(DecodePlan { header, stages, archived, chunked: None, cpu_fusion: true })
    }

    /// The host memory a decode of `header` needs, estimated from the header alone: the
    /// decoded array (elements × element size), plus the intermediates a stage's inverse
    /// holds beside it — its input and its output, each at most 4 bytes per element (every
    /// stage of the registry passes i32/u32 codes, u16 codes, or their bytes; TiledLorenzo's
    /// tile padding adds at most a tile's edge per dimension) — plus a copy of the archived
    /// segments (they are read into typed buffers). It is an estimate of the CPU decoder's
    /// peak, not a bound on every allocator's view of it.
    pub fn memory_needed(header: &Header) -> Result<u64> {
        let n = header.num_elements()?;
        let values = n.checked_mul(header.dtype.size() as u64);
        let intermediate = n.checked_mul(8);
        let segments = header.segments.iter().try_fold(0u64, |a, e| a.checked_add(e.len));
        values
            .zip(intermediate)
            .zip(segments)
            .and_then(|((v, i), s)| v.checked_add(i)?.checked_add(s))
            .ok_or_else(|| corrupt!("shape {:?} of {} overflows the memory estimate", header.shape, header.dtype))
    }

    /// The absolute bound the reconstruction guarantees: the first stage rebuilt from a record
    /// that states one (its record was checked against the header); `None` when every stage is
    /// exact (lossless pipelines and the Store fallback).
    pub fn guaranteed_abs_bound(&self) -> Option<f64> {
        if let Some(c) = &self.header.chunking {
            return c.guaranteed_abs_bound();
        }
        self.stages.iter().find_map(|s| s.recorded_abs_bound())
    }

    /// Where each input of stage `i` comes from (its forward sources).
    pub fn inputs_of(&self, i: usize) -> &[InputRef] {
        &self.header.stages[i].inputs
    }

    /// The name of stage `i`, for errors.
    pub fn name(&self, i: usize) -> &str {
        &self.header.stages[i].name
    }

    /// Check a decoded result (its element type and count) against the header.
    pub fn check_result(&self, dtype: DType, len: usize) -> Result<()> {
        if dtype != self.header.dtype || Some(len as u64) != self.header.num_elements().ok() {
            return Err(corrupt!(
                "decoded {len} {dtype} elements, header says {} of shape {:?}",
                self.header.dtype,
                self.header.shape
            ));
        }
        Ok(())
    }

    /// The same plan with the CPU's fused regions on or off (`RunOptions::fusion`).
    pub fn with_cpu_fusion(self, on: bool) -> Self {
        DecodePlan { cpu_fusion: on, ..self }
    }

    /// Run the plan on the CPU (the reference decoder).
    pub fn run_cpu(self) -> Result<Decompressed> {
        let (header, data) = self.run_cpu_buffer()?;
        Ok(Decompressed { header, data, backend: "cpu" })
    }

    /// Run the plan on the CPU into `dst` (native bytes of exactly the header's elements).
    pub fn run_cpu_into(self, dst: &mut [u8]) -> Result<Header> {
        let need = self.header.num_elements()?.checked_mul(self.header.dtype.size() as u64);
        if need != Some(dst.len() as u64) {
            return Err(Error::InvalidArgument(format!(
                "destination of {} bytes for {} {} values",
                dst.len(),
                self.header.num_elements()?,
                self.header.dtype
            )));
        }
        if let Some(c) = self.chunked {
            let runner = CpuChunks { registry: c.registry, limits: c.limits };
            super::chunks::decode_into(&c.head(&self.header), &c.bytes, dst, &runner)?;
            return Ok(self.header);
        }
        let (header, data) = self.run_cpu_buffer()?;
        if data.native_bytes().len() != dst.len() {
            return Err(corrupt!("decoded {} bytes into a destination of {}", data.native_bytes().len(), dst.len()));
        }
        crate::element::copy_on_all_cores(dst, data.native_bytes());
        Ok(header)
    }

    /// Decode a region (C-order ranges, one per dimension) on the CPU: of a chunked archive
    /// only the chunks it intersects; of an unchunked one the whole array, then the slice.
    pub fn run_cpu_region(self, region: &[std::ops::Range<u64>]) -> Result<Buffer> {
        super::chunks::check_region(region, &self.header.shape)?;
        if let Some(c) = self.chunked {
            let runner = CpuChunks { registry: c.registry, limits: c.limits };
            return super::chunks::decode(&c.head(&self.header), &c.bytes, Some(region), &runner);
        }
        let shape = self.header.shape.clone();
        let (_, data) = self.run_cpu_buffer()?;
        slice(&data, &shape, region)
    }

    fn run_cpu_buffer(self) -> Result<(Header, Buffer)> {
        if let Some(c) = self.chunked {
            let runner = CpuChunks { registry: c.registry, limits: c.limits };
            let data = super::chunks::decode(&c.head(&self.header), &c.bytes, None, &runner)?;
            return Ok((self.header, data));
        }
        // The whole walk runs on a pool thread: each stage's parallel loops then start as
        // local work instead of a hand-off from the calling thread and back (a wake-up per
        // loop, which costs a visible share of a small array's decode).
        rayon::scope(|_| self.walk_inverse())
    }

    fn walk_inverse(self) -> Result<(Header, Buffer)> {
        let regions = if self.cpu_fusion { self.cpu_regions() } else { Vec::new() };
        let in_region = |i: usize| regions.iter().any(|r| (r.start..r.end).contains(&i));
        // A region's stages read their segments in place; the others get typed buffers.
        let mut pending: Vec<Vec<Option<Buffer>>> = self.archived.iter().map(|ports| vec![None; ports.len()]).collect();
        for i in (0..self.stages.len()).filter(|&i| !in_region(i)) {
            self.take_archived(i, &mut pending[i])?;
        }
        let mut result = None;
        let mut i = self.stages.len();
        while i > 0 {
            i -= 1;
            if let Some(&r) = regions.iter().find(|r| r.end == i + 1) {
                if let Some(rebuilt) = self.inverse_region(r, &pending)? {
                    pending[r.end - 1][0] = None;
                    match self.inputs_of(r.start)[0] {
                        InputRef::External => result = Some(rebuilt),
                        InputRef::Stage { stage, port } => pending[stage][port] = Some(rebuilt),
                    }
                    i = r.start;
                    continue;
                }
                // Not fused after all: its stages walk one by one, on typed buffers.
                for (k, outputs) in pending.iter_mut().enumerate().take(r.end).skip(r.start) {
                    self.take_archived(k, outputs)?;
                }
            }
            let s = &self.stages[i];
            let name = self.name(i);
            let outputs = std::mem::take(&mut pending[i])
                .into_iter()
                .enumerate()
                .map(|(p, b)| b.ok_or_else(|| corrupt!("stage '{name}' output {p} was not reconstructed")))
                .collect::<Result<Vec<_>>>()?;
            let inputs = s.inverse(outputs).map_err(|e| e.in_stage(name))?;
            check_inverse(s.as_ref(), name, &inputs.iter().map(Buffer::dtype).collect::<Vec<_>>())?;
            for (buffer, r) in inputs.into_iter().zip(self.inputs_of(i)) {
                match *r {
                    InputRef::External => result = Some(buffer),
                    InputRef::Stage { stage, port } => pending[stage][port] = Some(buffer),
                }
            }
        }
        let data = result.ok_or_else(|| corrupt!("no stage reconstructs the pipeline input"))?;
        self.check_result(data.dtype(), data.len())?;
        Ok((self.header, data))
    }

    /// Stage `i`'s archived segments as typed buffers into `ports`.
    fn take_archived(&self, i: usize, ports: &mut [Option<Buffer>]) -> Result<()> {
        for (p, segment) in self.archived[i].iter().enumerate() {
            if let Some(bytes) = segment {
                ports[p] = Some(Buffer::from_le_bytes(self.stages[i].outputs()[p].dtype, bytes)?);
            }
        }
        Ok(())
    }

    /// The CPU regions of this plan's stages (cpu_region.rs).
    fn cpu_regions(&self) -> Vec<super::cpu_region::CpuRegion> {
        let stages: Vec<&dyn Stage> = self.stages.iter().map(AsRef::as_ref).collect();
        let inputs: Vec<Vec<InputRef>> = (0..self.stages.len()).map(|i| self.inputs_of(i).to_vec()).collect();
        super::cpu_region::regions(&stages, &inputs)
    }

    /// Region `r` inverse: its stages' segments read in place (or, for an output another
    /// stage's inverse rebuilt, from `pending`); the region's input rebuilt, or `None` when
    /// the records do not fit one block walk (the stage walk then runs them).
    fn inverse_region(
        &self,
        r: super::cpu_region::CpuRegion,
        pending: &[Vec<Option<Buffer>>],
    ) -> Result<Option<Buffer>> {
        let segments: Vec<Vec<Option<&[u8]>>> = (r.start..r.end)
            .map(|k| {
                let ports = self.archived[k].iter().zip(&pending[k]);
                ports.map(|(seg, made)| seg.or_else(|| made.as_ref().map(Buffer::native_bytes))).collect()
            })
            .collect();
        let fragments: Vec<_> = (r.start..r.end)
            .map(|k| self.stages[k].cpu_fragment().expect("a region's stages have fragments"))
            .collect();
        // A region that ends in a transform starts from that transform's rebuilt output.
        let last = r.end - 1;
        let ends_in_transform = !fragments[fragments.len() - 1].is_coder();
        let output = ends_in_transform.then(|| {
            let made = || pending[last][0].as_ref().map(Buffer::native_bytes);
            self.archived[last][0].or_else(made).unwrap_or(&[])
        });
        let names: Vec<&str> = (r.start..r.end).map(|k| self.name(k)).collect();
        let dtype = self.stages[r.start].inputs()[0].dtype;
        let shape: Vec<usize> = self.header.shape.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
        super::cpu_region::inverse(&fragments, &names, &segments, output, &shape, dtype)
    }
}

/// The box `region` of a C-order array of `shape` (checked by the caller), as a new buffer.
pub fn slice(data: &Buffer, shape: &[u64], region: &[std::ops::Range<u64>]) -> Result<Buffer> {
    let extent: Vec<u64> = region.iter().map(|r| r.end - r.start).collect();
    let n: u64 = extent.iter().product();
    let mut out = Buffer::zeroed(data.dtype(), n as usize)?;
    let origin: Vec<u64> = region.iter().map(|r| r.start).collect();
    let zero = vec![0; extent.len()];
    let elem = data.dtype().size();
    super::chunks::copy_box(data.native_bytes(), shape, &origin, out.native_bytes_mut(), &extent, &zero, &extent, elem);
    Ok(out)
}

/// Header facts that hold for every pipeline: stage names are unique and non-empty
/// (docs/FORMAT.md §2), and the bound is +0 (lossless pipelines) or a finite positive number.
fn check_header_facts(header: &Header) -> Result<()> {
    let mut names = std::collections::BTreeSet::new();
    for rec in &header.stages {
        if rec.name.is_empty() || !names.insert(rec.name.as_str()) {
            return Err(corrupt!("stage name '{}' is empty or not unique", rec.name));
        }
    }
    let b = header.error_bound;
    if !(b.to_bits() == 0 || (b.is_finite() && b > 0.0)) {
        return Err(corrupt!("header error bound {b} is neither +0 nor a finite positive number"));
    }
    Ok(())
}

/// An inverse must return one buffer per forward input port, of the port's type.
pub(crate) fn check_inverse(s: &dyn Stage, name: &str, dtypes: &[crate::element::DType]) -> Result<()> {
    let ports = s.inputs();
    if dtypes.len() != ports.len() || dtypes.iter().zip(&ports).any(|(d, p)| *d != p.dtype) {
        return Err(corrupt!("inverse produced buffers that do not match its ports").in_stage(name));
    }
    Ok(())
}

/// Which outputs feed another stage; checks that each is consumed at most once, that reads
/// go backwards (archive order is topological) and that exactly one input is the pipeline's.
fn consumed_outputs(header: &Header, stages: &[Box<dyn Stage>]) -> Result<Vec<Vec<bool>>> {
    let mut consumed: Vec<Vec<bool>> = stages.iter().map(|s| vec![false; s.outputs().len()]).collect();
    let mut externals = 0;
    for (i, rec) in header.stages.iter().enumerate() {
        let ports = stages[i].inputs();
        for (r, to) in rec.inputs.iter().zip(&ports) {
            match *r {
                InputRef::External => externals += 1,
                InputRef::Stage { stage, port } => {
                    if stage >= i {
                        return Err(corrupt!("stage '{}' reads stage {stage}, which does not precede it", rec.name));
                    }
                    let slot = consumed[stage]
                        .get_mut(port)
                        .ok_or_else(|| corrupt!("stage '{}' reads missing port {port} of stage {stage}", rec.name))?;
                    if std::mem::replace(slot, true) {
                        return Err(corrupt!("output {port} of stage {stage} is consumed twice"));
                    }
                    let from = &stages[stage].outputs()[port];
                    if from.dtype != to.dtype {
                        return Err(corrupt!(
                            "stage '{}' reads a {} output into a differently typed port",
                            rec.name,
                            from.dtype
                        ));
                    }
                }
            }
        }
    }
    if externals != 1 {
        return Err(corrupt!("{externals} stage inputs read the pipeline input (expected 1)"));
    }
    Ok(consumed)
}
