//! The word maps on the device: the map kernel of words.cu, one thread per word, and the same
//! map as a fragment of a fused region.

use super::{Map, WordMap};
use crate::backend::cuda::device::{DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage};
use crate::backend::cuda::region::{Code, ForwardPart, Fragment, Geometry, InversePart};
use crate::error::{Error, Result};
use crate::stages::words::{self, device};

impl Map {
    /// The map's code in words.cu.
    fn op(self) -> u32 {
        match self {
            Map::Zigzag => device::ZIGZAG,
            Map::Negabinary => device::NEGABINARY,
        }
    }
}

impl DeviceStage for WordMap {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("a word map takes one input".into())) };
        let out = device::map(run, x, words::unsigned_of(self.input), self.map.op(), false)?;
        let record = self.record();
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let [w] = outputs else { return Err(Error::Pipeline("a word map's inverse takes one buffer".into())) };
        Ok(vec![device::map(run, w, self.input, self.map.op(), true)?])
    }
}

impl Fragment for WordMap {
    fn sources(&self) -> Vec<&'static str> {
        vec![device::SOURCE]
    }

    fn geometry(&self) -> Option<Geometry> {
        let w = self.input.size();
        Some(Geometry { in_width: w, out_width: w, same_count: true, granule: w, coder: false })
    }

    fn forward_code(&self) -> Code {
        self.code(false)
    }

    fn inverse_code(&self) -> Code {
        self.code(true)
    }

    fn forward(&self, _run: &mut DeviceRun, _input: Option<&DeviceBuffer>, _n: usize) -> Result<ForwardPart> {
        Ok(ForwardPart::fixed(self.record()))
    }

    fn inverse(&self, _run: &mut DeviceRun, _outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        Ok(InversePart::fixed())
    }
}

impl WordMap {
    fn code(&self, undo: bool) -> Code {
        let (bits, op) = (8 * self.input.size(), self.map.op());
        format!("w_map_tile($in, $out, $bytes, {bits}u, {op}u, {}u)", u32::from(undo))
    }
}
