//! The Quantizer as a fragment of a fused CPU region (cpu_fragment.rs): the same per-element
//! work as cpu.rs on a block of values, its outliers (or escaped values) left by each block
//! and joined in block order, which is index order.

use super::cpu::{self, Float, ESCAPE};
use super::{check_resolved, resolve_abs_bound, Layout, Quantizer, Resolved};
use crate::archive::{ErrorMode, Reader, Writer};
use crate::cpu_fragment::{sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Error, Result};
use crate::stage::ErrorBound;

impl CpuFragment for Quantizer {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.input.size())
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn output_len(&self, _: Extent, input: usize) -> usize {
        input / self.input.size() * 4
    }

    fn reads_whole_input(&self) -> bool {
        self.bound.is_none_or(|b| b.mode == ErrorMode::Rel)
    }

    fn forward_blocks<'s>(&'s self, input: View<'s>, _: Extent) -> Result<Box<dyn BlockForward + 's>> {
        let bound = ErrorBound::required(self.bound)?;
        match self.input {
            DType::F32 => Ok(Box::new(Quantize::<f32>::new(self, bound, input)?)),
            _ => Ok(Box::new(Quantize::<f64>::new(self, bound, input)?)),
        }
    }

    fn stated_input_len(&self) -> Option<usize> {
        let n = usize::try_from(self.resolved?.num_elements).ok()?;
        n.checked_mul(self.input.size())
    }

    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
        let channel =
            segments.get(1).copied().flatten().ok_or_else(|| corrupt!("Quantizer outlier channel missing"))?;
        match self.input {
            DType::F32 => Ok(Box::new(Reconstruct::<f32> { stage: self, r, step: r.step as f32, channel })),
            _ => Ok(Box::new(Reconstruct::<f64> { stage: self, r, step: r.step, channel })),
        }
    }
}

/// The forward on values of type `T`, its bound resolved over the whole input.
struct Quantize<'s, T> {
    stage: &'s Quantizer,
    bound: ErrorBound,
    range: Option<(f64, f64)>,
    abs_bound: f64,
    step: T,
    num_elements: u64,
}

impl<'s, T: Float> Quantize<'s, T> {
    fn new(stage: &'s Quantizer, bound: ErrorBound, input: View<'s>) -> Result<Self> {
        let x: &[T] = bytemuck::try_cast_slice(input.native_bytes())
            .map_err(|_| Error::Pipeline("Quantizer region input is not its type".into()))?;
        let range = match bound.mode {
            ErrorMode::Abs => None,
            ErrorMode::Rel => cpu::finite_min_max(x),
        };
        let abs_bound = resolve_abs_bound(bound, range);
        // Refuse before quantizing, as the stage walk does.
        check_resolved("Quantizer", stage.input, bound, range, abs_bound, T::at_most(abs_bound).to_f64())?;
        Ok(Quantize { stage, bound, range, abs_bound, step: T::at_most(abs_bound), num_elements: x.len() as u64 })
    }

    fn record(&self, num_outliers: u64, layout: Layout) -> Result<Vec<u8>> {
        let (abs_bound, step, num_elements) = (self.abs_bound, self.step.to_f64(), self.num_elements);
        let resolved = Resolved { abs_bound, step, num_elements, num_outliers, layout };
        self.stage.record(self.bound, self.range, &resolved)
    }
}

impl<T: Float> BlockForward for Quantize<'_, T> {
    fn block(&self, at: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let x: &[T] = bytemuck::cast_slice(input);
        if self.stage.inline_outliers {
            let words: &mut [u32] = bytemuck::cast_slice_mut(out.bytes_mut());
            Box::new(cpu::inline_words(x, words, self.step, self.abs_bound))
        } else {
            let codes: &mut [i32] = bytemuck::cast_slice_mut(out.bytes_mut());
            let base = at / std::mem::size_of::<T>();
            Box::new(cpu::codes_or_outliers(x, codes, base, self.step, self.abs_bound))
        }
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        if self.stage.inline_outliers {
            let mut w = Writer::default();
            let mut num_outliers = 0u64;
            for v in sides_of::<Vec<T>>(sides).into_iter().flatten() {
                v.write_le(&mut w);
                num_outliers += 1;
            }
            Ok((vec![None, Some(Buffer::U8(w.bytes))], self.record(num_outliers, Layout::Indexed)?))
        } else {
            let list: Vec<(u64, u64)> =
                sides_of::<Vec<(usize, T)>>(sides).into_iter().flatten().map(|(i, v)| (i as u64, v.bits())).collect();
            let (channel, layout) = cpu::encode_outliers(&list, std::mem::size_of::<T>());
            Ok((vec![None, Some(Buffer::U8(channel))], self.record(list.len() as u64, layout)?))
        }
    }
}

/// The inverse into values of type `T`: each block's codes reconstructed, the outliers put
/// back once every block is done.
struct Reconstruct<'s, T> {
    stage: &'s Quantizer,
    r: Resolved,
    step: T,
    channel: &'s [u8],
}

impl<T: Float> BlockInverse for Reconstruct<'_, T> {
    fn block(&self, at: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        let values: &mut [T] = bytemuck::cast_slice_mut(out);
        let step = self.step;
        if !self.stage.inline_outliers {
            let codes: &[i32] = bytemuck::cast_slice(output);
            cpu::map_codes_into(codes, values, &|q| T::reconstruct(q, step), &|_| false);
            return Ok(crate::cpu_fragment::nothing());
        }
        let words: &[u32] = bytemuck::cast_slice(output);
        let escapes = cpu::map_codes_into(words, values, &|w| cpu::inline_value(w, step), &|w| w == ESCAPE);
        // The escaped elements' positions (rare): their values come from the channel.
        let base = at / std::mem::size_of::<T>();
        let positions: Vec<usize> = match escapes {
            0 => Vec::new(),
            _ => words.iter().enumerate().filter(|&(_, &w)| w == ESCAPE).map(|(i, _)| base + i).collect(),
        };
        Ok(Box::new(positions))
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, input: Option<&mut [u8]>) -> Result<()> {
        let out: &mut [T] = bytemuck::cast_slice_mut(input.expect("a region's first stage gets its input"));
        let (channel, num_outliers) = (self.channel, self.r.num_outliers);
        if !self.stage.inline_outliers {
            for run in cpu::parse_outliers::<T>(channel, num_outliers, out.len(), self.r.layout)? {
                out[run.start..run.start + run.len].fill(run.value);
            }
            return Ok(());
        }
        let positions: Vec<usize> = sides_of::<Vec<usize>>(sides).into_iter().flatten().collect();
        let escapes = positions.len() as u64;
        if escapes != num_outliers || Some(channel.len()) != positions.len().checked_mul(std::mem::size_of::<T>()) {
            return Err(corrupt!(
                "Quantizer: {escapes} escapes, {num_outliers} outliers, {} channel bytes",
                channel.len()
            ));
        }
        let mut r = Reader::new(channel, "Quantizer outlier channel");
        for i in positions {
            out[i] = T::read_le(&mut r)?;
        }
        r.finish()
    }
}
