//! The decode front end: archive bytes are parsed and validated once into a [`DecodePlan`],
//! which any backend then runs inverse. Backends therefore cannot disagree about what a valid
//! archive is: checksums, versions, the stage graph, segment element types against their
//! ports, and the header against the stage records are all checked here.

use super::Decompressed;
use crate::archive::{self, Header, InputRef};
use crate::element::{Buffer, DType};
use crate::error::{corrupt, Error, Result};
use crate::stage::{self, Stage};

/// A validated archive, ready to run inverse.
pub struct DecodePlan<'a> {
    pub header: Header,
    /// Stages rebuilt from their records, in archive (topological) order.
    pub stages: Vec<Box<dyn Stage>>,
    /// `archived[stage][port]`: the segment bytes of each unconnected output.
    pub archived: Vec<Vec<Option<&'a [u8]>>>,
}

impl<'a> DecodePlan<'a> {
    /// Parse and validate archive bytes.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        let parsed = archive::parse(bytes)?;
        let header = parsed.header;
        let mut stages: Vec<Box<dyn Stage>> = Vec::with_capacity(header.stages.len());
        for rec in &header.stages {
            let kind = stage::kind_by_id(rec.type_id)?;
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
        Ok(DecodePlan { header, stages, archived })
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

    /// Run the plan on the CPU (the reference decoder).
    pub fn run_cpu(self) -> Result<Decompressed> {
        let (header, data) = self.run_cpu_buffer()?;
        Ok(Decompressed { header, data, backend: "cpu" })
    }

    /// Run the plan on the CPU into `dst` (native bytes of exactly the header's elements).
    pub fn run_cpu_into(self, dst: &mut [u8]) -> Result<Header> {
        let (header, data) = self.run_cpu_buffer()?;
        let bytes = data.native_bytes();
        if dst.len() != bytes.len() {
            return Err(Error::InvalidArgument(format!(
                "destination of {} bytes for {} bytes",
                dst.len(),
                bytes.len()
            )));
        }
        dst.copy_from_slice(bytes);
        Ok(header)
    }

    fn run_cpu_buffer(self) -> Result<(Header, Buffer)> {
        let mut pending: Vec<Vec<Option<Buffer>>> = self.archived.iter().map(|ports| vec![None; ports.len()]).collect();
        for (i, ports) in self.archived.iter().enumerate() {
            for (p, segment) in ports.iter().enumerate() {
                if let Some(bytes) = segment {
                    let dtype = self.stages[i].outputs()[p].dtype;
                    pending[i][p] = Some(Buffer::from_le_bytes(dtype, bytes)?);
                }
            }
        }
        let mut result = None;
        for (i, s) in self.stages.iter().enumerate().rev() {
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
