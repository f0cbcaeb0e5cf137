//! Store on the device: a copy each way (no kernel of its own).

use super::Store;
use crate::backend::cuda::device::{DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage};
use crate::error::{corrupt, Error, Result};

impl DeviceStage for Store {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [values] = inputs else { return Err(Error::Pipeline("Store takes one input".into())) };
        let n = values.known_len()?;
        let record = self.record(n);
        Ok(DeviceForwarded { outputs: vec![run.copy(values, n)?], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let n = self.num_elements.ok_or_else(|| Error::Pipeline("Store inverse needs a decoded record".into()))?;
        let [values] = outputs else { return Err(Error::Pipeline("Store inverse takes one buffer".into())) };
        let len = values.known_len()?;
        if len as u64 != n {
            return Err(corrupt!("Store: segment holds {len} values, record says {n}"));
        }
        Ok(vec![run.copy(values, len)?])
    }
}
