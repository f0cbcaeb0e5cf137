//! The Quantizer as the first fragment of a fused region: codes (or PFPL inline words) are made
//! tile by tile on chip and handed to the next fragment. The bound is resolved before the
//! region; the outlier channel is written after it, reading the input again only in tiles that
//! have outliers. Before a gatherer (TiledLorenzo, N-D Lorenzo) the codes are made inside the
//! gatherer's loads instead, and each element's own read counts its outlier in the tile
//! statistics.
//! The inverse reconstructs on chip (after a gatherer, inside its scatter's stores) and puts
//! the outliers back afterwards.

use super::inline::tiles;
use super::{real_define, Encoding, Quantizer, SOURCE, TILE};
use crate::backend::cuda::device::{grid, DeviceBuffer, DeviceRun};
use crate::backend::cuda::device_error;
use crate::backend::cuda::region::{Code, ForwardPart, Fragment, Geometry, InversePart};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use crate::stage::ErrorBound;
use cudarc::driver::PushKernelArg;

impl Fragment for Quantizer {
    fn sources(&self) -> Vec<&'static str> {
        vec![SOURCE]
    }

    fn defines(&self) -> String {
        real_define(self.input)
    }

    fn geometry(&self) -> Option<Geometry> {
        let w = self.input.size();
        // Whole outlier tiles per region tile: their statistics are written per tile.
        Some(Geometry { in_width: w, out_width: 4, same_count: true, granule: TILE as usize * w, coder: false })
    }

    fn forward_code(&self) -> Code {
        format!(
            "q_region_forward((const real*)$in, $out, $first, $count, (const Params*)$0, (u32*)$1, (u64*)$2, {})",
            self.inline_outliers
        )
    }

    fn load_code(&self) -> Option<(Code, Code)> {
        // PFPL's inline words feed no gatherer (Lorenzo and TiledLorenzo read i32 codes).
        (!self.inline_outliers).then(|| {
            (
                "const QParams q_params = load_params((const Params*)$0)".into(),
                "q_load((const real*)$global_in, $index, q_params, $own, (u32*)$1, (u64*)$2)".into(),
            )
        })
    }

    fn forward_loaded(&self, run: &mut DeviceRun, input: &DeviceBuffer, _n: usize) -> Result<ForwardPart> {
        let bound = self.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let enc = self.begin(run, input, bound)?;
        let tile_next = enc.tile_next.as_ref().ok_or_else(|| Error::Device("no tile_next".into()))?;
        // The gatherer's loads count into them.
        run.zero(&enc.tile_count)?;
        run.zero(tile_next)?;
        let s = run.stream().clone();
        let args = vec![enc.params.ptr(&s), enc.tile_count.ptr(&s), tile_next.ptr(&s)];
        Ok(self.then_channel(args, input.ptr(&s), enc, bound))
    }

    fn store_code(&self) -> Option<(Code, Code)> {
        // The same reconstruction as q_region_inverse; outliers are put back after the region.
        (!self.inline_outliers).then(|| {
            (
                "const real q_step = (real)__longlong_as_double((i64)$0)".into(),
                "((real*)$global_out)[$index] = reconstruct((i32)$value, q_step)".into(),
            )
        })
    }

    fn inverse_code(&self) -> Code {
        format!("q_region_inverse($in, (real*)$out, $first, $count, $0, (u32*)$1, {})", self.inline_outliers)
    }

    fn forward(&self, run: &mut DeviceRun, input: Option<&DeviceBuffer>, _n: usize) -> Result<ForwardPart> {
        let x = input.ok_or_else(|| Error::Pipeline("a Quantizer fragment must read the region's input".into()))?;
        let bound = self.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let enc = self.begin(run, x, bound)?;
        let s = run.stream().clone();
        let args = vec![enc.params.ptr(&s), enc.tile_count.ptr(&s), enc.tile_next.as_ref().map_or(0, |b| b.ptr(&s))];
        Ok(self.then_channel(args, x.ptr(&s), enc, bound))
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
        let [_, Some(channel)] = outputs else {
            return Err(Error::Pipeline("Quantizer inverse needs its outlier channel".into()));
        };
        let n = usize::try_from(r.num_elements).map_err(|_| corrupt!("Quantizer: {} elements", r.num_elements))?;
        let ntiles = tiles(n);
        let step = r.step.to_bits();
        let input_bytes = n.checked_mul(self.input.size()).ok_or_else(|| corrupt!("Quantizer: {n} elements"))?;
        let stage = self.clone();
        if self.inline_outliers {
            let tile_count = run.alloc(DType::U32, ntiles as usize)?;
            let counts = tile_count.ptr(run.stream());
            let (channel_bytes, channel) = (channel.known_len()? as u64, channel.ptr(run.stream()));
            // The escapes the words hold are counted on the device and checked against this
            // after the run (no synchronisation here).
            if r.num_outliers.checked_mul(self.input.size() as u64) != Some(channel_bytes) {
                return Err(corrupt!("Quantizer: {} outliers in {channel_bytes} channel bytes", r.num_outliers));
            }
            let err = run.error_flag(format!(
                "Quantizer: the words' escapes differ from the {} outliers recorded",
                r.num_outliers
            ))?;
            return Ok(InversePart::Transform {
                args: vec![step, counts],
                input_bytes: Some(input_bytes),
                finish: Box::new(move |run, out| {
                    let out =
                        out.ok_or_else(|| Error::Pipeline("the Quantizer must be a region's first stage".into()))?;
                    let offsets = stage.escape_offsets(run, &tile_count, ntiles)?;
                    let patch = run.kernel(&super::program(stage.input), "qi_patch_escapes")?;
                    let s = run.stream();
                    // SAFETY: argument list matches device.cu; `out` holds n elements, `offsets`
                    // ntiles + 1 counts; the kernel reads the channel only when their total is
                    // its value count.
                    unsafe {
                        s.launch_builder(&patch)
                            .arg(&out.ptr(s))
                            .arg(&(n as u64))
                            .arg(&offsets.ptr(s))
                            .arg(&ntiles)
                            .arg(&channel)
                            .arg(&r.num_outliers)
                            .arg(&err)
                            .launch(grid(ntiles * 256, 256))
                            .map_err(device_error)?;
                    }
                    Ok(())
                }),
            });
        }
        let (runs, count) = self.outlier_runs(run, channel, n)?;
        Ok(InversePart::Transform {
            args: vec![step, 0],
            input_bytes: Some(input_bytes),
            finish: Box::new(move |run, out| {
                let out = out.ok_or_else(|| Error::Pipeline("the Quantizer must be a region's first stage".into()))?;
                stage.scatter_runs(run, &runs, count, out.ptr(run.stream()))
            }),
        })
    }
}

impl Quantizer {
    /// The region part of a forward with runtime values `args`: after the region, the outlier
    /// channel (reading the input at device address `x` again where there are outliers) and
    /// the record.
    fn then_channel(&self, args: Vec<u64>, x: u64, enc: Encoding, bound: ErrorBound) -> ForwardPart {
        let stage = self.clone();
        ForwardPart::Transform {
            args,
            finish: Box::new(move |run| {
                let (channel, record) = stage.channel(run, x, None, enc, bound)?;
                Ok((vec![channel], record))
            }),
        }
    }
}
