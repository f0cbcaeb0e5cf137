//! The word maps on the device: the map kernel of words.cu, one thread per word.

use super::{Map, WordMap};
use crate::backend::cuda::device::{DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage};
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
