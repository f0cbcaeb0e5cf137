//! Lorenzo on the device (kernels in device.cu): block and N-D deltas and their prefix sums.

use super::Lorenzo;
use crate::backend::cuda::device::{grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, THREADS};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Warps per thread block of the prefix kernels (`LZ_WARPS`).
const WARPS: u64 = 4;

pub(crate) fn program() -> Program {
    Program::new(include_str!("device.cu"), String::new())
}

impl DeviceStage for Lorenzo {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [q] = inputs else { return Err(Error::Pipeline("Lorenzo takes one input".into())) };
        let n = q.known_len()?;
        let g = self.grid_for(&run.shape, n)?;
        let out = run.alloc(DType::I32, n)?;
        let s = run.stream().clone();
        let (qp, op, n64) = (q.ptr(&s), out.ptr(&s), n as u64);
        let launch = grid(n64, u64::from(THREADS));
        // SAFETY: argument lists match device.cu; both buffers hold n elements.
        unsafe {
            if self.block_size > 0 {
                let f = run.kernel(&program(), "lz_block_delta")?;
                let block = u64::from(self.block_size);
                s.launch_builder(&f).arg(&qp).arg(&n64).arg(&block).arg(&op).launch(launch).map_err(device_error)?;
            } else {
                let f = run.kernel(&program(), "lz_nd_delta")?;
                let [nz, ny, nx] = g.dims.map(|d| d as u64);
                s.launch_builder(&f)
                    .arg(&qp)
                    .arg(&nz)
                    .arg(&ny)
                    .arg(&nx)
                    .arg(&op)
                    .launch(launch)
                    .map_err(device_error)?;
            }
        }
        let record = self.record(g);
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let g = self.grid.ok_or_else(|| Error::Pipeline("Lorenzo inverse needs a decoded record".into()))?;
        let [d] = outputs else { return Err(Error::Pipeline("Lorenzo inverse takes one buffer".into())) };
        let n = d.known_len()?;
        if n != g.len() {
            return Err(corrupt!("Lorenzo: {n} elements for grid {:?}", g.dims));
        }
        let out = run.copy(d, n)?;
        let s = run.stream().clone();
        let op = out.ptr(&s);
        // SAFETY: argument lists match device.cu; every line lies inside the n elements.
        unsafe {
            if self.block_size > 0 {
                let f = run.kernel(&program(), "lz_block_prefix")?;
                let (n64, block) = (n as u64, u64::from(self.block_size));
                let blocks = n64.div_ceil(block);
                s.launch_builder(&f)
                    .arg(&op)
                    .arg(&n64)
                    .arg(&block)
                    .launch(grid(blocks * 32, WARPS * 32))
                    .map_err(device_error)?;
            } else {
                let f = run.kernel(&program(), "lz_axis_prefix")?;
                let [nz, ny, nx] = g.dims.map(|d| d as u64);
                // (lines, inner, outer stride, inner stride, length, stride) per axis x, y, z.
                for axis in [
                    [nz * ny, 1, nx, 0, nx, 1],
                    [nz * nx, nx, ny * nx, 1, ny, nx],
                    [ny * nx, ny * nx, 0, 1, nz, ny * nx],
                ] {
                    let [lines, inner, outer_stride, inner_stride, len, stride] = axis;
                    s.launch_builder(&f)
                        .arg(&op)
                        .arg(&lines)
                        .arg(&inner)
                        .arg(&outer_stride)
                        .arg(&inner_stride)
                        .arg(&len)
                        .arg(&stride)
                        .launch(grid(lines * 32, WARPS * 32))
                        .map_err(device_error)?;
                }
            }
        }
        Ok(vec![out])
    }
}
