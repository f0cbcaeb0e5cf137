//! Zigzag on the device: the word map of words.cu, one thread per word.

use super::Zigzag;
use crate::backend::cuda::device::{DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage};
use crate::error::{Error, Result};
use crate::stages::words::{self, device};

impl DeviceStage for Zigzag {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("Zigzag takes one input".into())) };
        let out = device::map(run, x, words::unsigned_of(self.input), device::ZIGZAG, false)?;
        let record = self.record();
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let [w] = outputs else { return Err(Error::Pipeline("Zigzag inverse takes one buffer".into())) };
        Ok(vec![device::map(run, w, self.input, device::ZIGZAG, true)?])
    }
}
