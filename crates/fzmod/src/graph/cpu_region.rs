//! Fused regions on the CPU (issue 12 item 6; the contract is `cpu_fragment.rs`): which chains
//! of stages fuse, and their forward and inverse block by block. A block of the region's input
//! goes through every stage of the region on one core while it is in that core's cache; the
//! blocks run on all cores and their results are joined in block order, so the bytes are the
//! stage walk's for any thread count (tested in tests/cpu_regions.rs).

use crate::archive::InputRef;
use crate::cpu_fragment::{BlockBytes, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, DType, View};
use crate::error::Result;
use crate::stage::Stage;
use rayon::prelude::*;

/// Region input bytes per block where the grains allow: the block and the stages' buffers
/// between them stay within a core's L2 cache.
const BLOCK_BYTES: usize = 1 << 18;

/// The largest block the grains may ask for (a larger common multiple does not fuse).
const MAX_BLOCK_BYTES: usize = 1 << 24;

thread_local! {
    /// A thread's buffers between the stages of an inverse region, kept from block to block.
    static SCRATCH: std::cell::Cell<(BlockBytes, BlockBytes)> = std::cell::Cell::default();
}

/// Stages `start..end` of a chain, fused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuRegion {
    pub start: usize,
    pub end: usize,
}

/// The regions of a chain of `stages` whose inputs are `inputs`: maximal runs of two or more
/// stages that have CPU fragments, where each stage after the first reads only the main
/// output (port 0) of the one before, which nothing else reads; a coder only last, a stage
/// that reads its whole input first (the value range of a relative bound) only first.
pub fn regions(stages: &[&dyn Stage], inputs: &[Vec<InputRef>]) -> Vec<CpuRegion> {
    let fragment = |k: usize| stages[k].cpu_fragment().filter(|_| inputs[k].len() == 1);
    let links = |k: usize| {
        let main = InputRef::Stage { stage: k, port: 0 };
        inputs[k + 1] == [main] && inputs.iter().flatten().filter(|r| **r == main).count() == 1
    };
    let mut found = Vec::new();
    let mut start = 0;
    while start < stages.len() {
        let mut end = start + 1;
        if fragment(start).is_some_and(|f| !f.is_coder()) {
            while end < stages.len()
                && links(end - 1)
                && fragment(end).is_some_and(|f| !f.reads_whole_input())
                && fragment(end - 1).is_some_and(|f| !f.is_coder())
            {
                end += 1;
            }
        }
        if end - start >= 2 {
            found.push(CpuRegion { start, end });
        }
        start = end;
    }
    found
}

/// A region's stages with the whole input each of them sees.
struct Chain<'a> {
    fragments: &'a [&'a dyn CpuFragment],
    wholes: Vec<Extent<'a>>,
}

impl<'a> Chain<'a> {
    /// The stages `fragments` over `input` bytes of region input, of an array of `shape`.
    fn new(fragments: &'a [&'a dyn CpuFragment], shape: &'a [usize], input: usize) -> Self {
        let mut wholes = Vec::with_capacity(fragments.len());
        let mut input_len = input;
        for f in fragments {
            let whole = Extent { shape, input_len };
            wholes.push(whole);
            if !f.is_coder() {
                input_len = f.output_len(whole, input_len);
            }
        }
        Chain { fragments, wholes }
    }

    /// Bytes of each stage's main input (and, last, the region's output) for `input` bytes
    /// of the region's input; a coder's entry is its input's.
    fn lens(&self, input: usize) -> Vec<usize> {
        let mut lens = vec![input];
        for (f, &whole) in self.fragments.iter().zip(&self.wholes) {
            let last = *lens.last().expect("one entry at least");
            lens.push(if f.is_coder() { last } else { f.output_len(whole, last) });
        }
        lens
    }

    /// Region input bytes per block: a multiple of every stage's grain (as its input sees
    /// the block) near [`BLOCK_BYTES`]; `None` when a stage cannot cut its input or there is
    /// no common multiple up to [`MAX_BLOCK_BYTES`].
    fn block_bytes(&self) -> Option<usize> {
        let grain = |k: usize| self.fragments[k].grain(self.wholes[k]).filter(|&g| g > 0);
        let mut unit = grain(0)?;
        for k in 1..self.fragments.len() {
            let grain = grain(k)?;
            // `unit` is whole grains of every stage before k, and the lens are linear over
            // whole grains: m units give stage k m times what one gives, a multiple of its
            // grain from m = grain / gcd on.
            let per_unit = self.lens(unit)[k];
            if per_unit == 0 {
                return None;
            }
            unit = unit.checked_mul(grain / gcd(per_unit, grain)).filter(|&b| b <= MAX_BLOCK_BYTES)?;
        }
        Some(unit * (BLOCK_BYTES / unit).max(1))
    }
}

/// A region's forward results: per stage, its outputs (`None` where the next stage took
/// them) and its record.
pub type RegionForwarded = Vec<(Vec<Option<Buffer>>, Vec<u8>)>;

/// Run stages `fragments` (named `names`, for errors) forward over `input`, an array of
/// `shape`, block by block, `last_dtype` the type of the last one's main output; `None` when
/// these blocks cannot be cut (no common block, an empty or misaligned input, an input that
/// is not the grid a stage cuts along): the stage walk runs them.
pub fn forward(
    fragments: &[&dyn CpuFragment],
    names: &[&str],
    input: View,
    shape: &[usize],
    last_dtype: DType,
) -> Result<Option<RegionForwarded>> {
    let bytes = input.native_bytes();
    let n = bytes.len();
    let chain = Chain::new(fragments, shape, n);
    let Some(block) = chain.block_bytes() else { return Ok(None) };
    if n == 0 || !(bytes.as_ptr() as usize).is_multiple_of(input.dtype().size()) {
        return Ok(None);
    }
    let workers = fragments
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let view = if k == 0 { input } else { View::of::<u8>(&[]) };
            f.forward_blocks(view, chain.wholes[k]).map_err(|e| e.in_stage(names[k]))
        })
        .collect::<Result<Vec<_>>>()?;
    let per_block: Vec<(Vec<Side>, BlockBytes)> = (0..n.div_ceil(block))
        .into_par_iter()
        .map_init(
            || (BlockBytes::default(), BlockBytes::default()),
            |(a, b), k| {
                let at = chain.lens(k * block);
                let len = chain.lens(block.min(n - k * block));
                let mut sides = Vec::with_capacity(workers.len());
                let mut out = BlockBytes::default();
                for (i, w) in workers.iter().enumerate() {
                    let input = if i == 0 { &bytes[k * block..][..len[0]] } else { a.bytes() };
                    let last = i + 1 == workers.len();
                    if fragments[i].is_coder() {
                        sides.push(w.block(at[i], input, &mut out));
                    } else if last {
                        out.resize(len[i + 1]);
                        sides.push(w.block(at[i], input, &mut out));
                    } else {
                        b.resize(len[i + 1]);
                        sides.push(w.block(at[i], input, b));
                        std::mem::swap(a, b);
                    }
                }
                (sides, out)
            },
        )
        .collect();
    let mut sides: Vec<Vec<Side>> = workers.iter().map(|_| Vec::with_capacity(per_block.len())).collect();
    let mut last_outs = Vec::with_capacity(per_block.len());
    for (block_sides, out) in per_block {
        for (stage, side) in sides.iter_mut().zip(block_sides) {
            stage.push(side);
        }
        last_outs.push(out);
    }
    let last = workers.len() - 1;
    let ends_in_transform = !fragments[last].is_coder();
    let mut results = Vec::with_capacity(workers.len());
    for (i, (w, s)) in workers.into_iter().zip(sides).enumerate() {
        let encoded = if i == last && !ends_in_transform { std::mem::take(&mut last_outs) } else { Vec::new() };
        let (mut outputs, record) = w.finish(s, encoded).map_err(|e| e.in_stage(names[i]))?;
        if i == last && ends_in_transform {
            // The region's output: the last transform's blocks, joined.
            let pieces: Vec<&[u8]> = last_outs.iter().map(BlockBytes::bytes).collect();
            let joined = crate::element::concat_on_all_cores(pieces);
            outputs[0] = Some(Buffer::from_le_bytes(last_dtype, &joined)?);
        }
        results.push((outputs, record));
    }
    Ok(Some(results))
}

/// Run stages `fragments` (named `names`) inverse, block by block, for an array of `shape`:
/// each stage's archived segments in `segments`, `output` the main output of the last stage
/// when it is a transform (archived, or rebuilt by the stages after the region). Returns the region's input rebuilt, as `dtype`; `None` when
/// the records do not state one consistent length for every stage (the stage walk then runs
/// them and reports what is wrong).
pub fn inverse(
    fragments: &[&dyn CpuFragment],
    names: &[&str],
    segments: &[Vec<Option<&[u8]>>],
    output: Option<&[u8]>,
    shape: &[usize],
    dtype: DType,
) -> Result<Option<Buffer>> {
    let Some(n) = fragments[0].stated_input_len() else { return Ok(None) };
    let chain = Chain::new(fragments, shape, n);
    let Some(block) = chain.block_bytes() else { return Ok(None) };
    let whole = chain.lens(n);
    let consistent = fragments.iter().zip(&whole).all(|(f, &len)| f.stated_input_len().is_none_or(|s| s == len))
        && output.is_none_or(|o| o.len() == whole[fragments.len()]);
    if n == 0 || !n.is_multiple_of(dtype.size()) || !block.is_multiple_of(dtype.size()) || !consistent {
        return Ok(None);
    }
    let workers: Vec<Box<dyn BlockInverse + '_>> = fragments
        .iter()
        .zip(segments)
        .zip(names)
        .map(|((f, s), name)| f.inverse_blocks(s).map_err(|e| e.in_stage(name)))
        .collect::<Result<_>>()?;
    // Stages read their blocks of the output as words: an archived segment lies wherever the
    // caller's archive does.
    let aligned;
    let output = match output {
        Some(o) if !(o.as_ptr() as usize).is_multiple_of(8) => {
            aligned = words_of(o);
            Some(aligned.bytes())
        }
        o => o,
    };
    let last = workers.len() - 1;
    // Each block is rebuilt straight into the result while it is in cache (no clearing pass
    // over the whole result first); the stages' buffers between are per thread.
    let rebuild = |k: usize, rebuilt: &mut [u8]| -> Result<Vec<Side>> {
        let (mut a, mut b) = SCRATCH.take();
        let at = chain.lens(k * block);
        let len = chain.lens(rebuilt.len());
        let named = |i: usize| move |e: crate::error::Error| e.in_stage(names[i]);
        let made = output.map_or(&[][..], |o| &o[at[last + 1]..][..len[last + 1]]);
        let mut sides = Vec::with_capacity(workers.len());
        sides.push(workers[last].block(at[last], made, a.resize(len[last])).map_err(named(last))?);
        for i in (1..last).rev() {
            sides.push(workers[i].block(at[i], a.bytes(), b.resize(len[i])).map_err(named(i))?);
            std::mem::swap(&mut a, &mut b);
        }
        sides.push(workers[0].block(at[0], a.bytes(), rebuilt).map_err(named(0))?);
        sides.reverse();
        SCRATCH.set((a, b));
        Ok(sides)
    };
    let (mut result, per_block) = Buffer::by_chunks(dtype, n / dtype.size(), block / dtype.size(), rebuild)?;
    let mut sides: Vec<Vec<Side>> = workers.iter().map(|_| Vec::with_capacity(per_block.len())).collect();
    for block_sides in per_block {
        for (stage, side) in sides.iter_mut().zip(block_sides?) {
            stage.push(side);
        }
    }
    for (i, (w, s)) in workers.into_iter().zip(sides).enumerate().rev() {
        w.finish(s, (i == 0).then(|| result.native_bytes_mut())).map_err(|e| e.in_stage(names[i]))?;
    }
    Ok(Some(result))
}

/// The greatest common divisor of `a` and `b`.
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `bytes` copied into 8-byte words.
fn words_of(bytes: &[u8]) -> BlockBytes {
    let mut words = BlockBytes::default();
    words.extend(bytes);
    words
}

#[cfg(test)]
pub(crate) mod tests {
    //! What the stages' fragment tests share.

    use crate::archive::ErrorMode;
    use crate::backend::Backend;
    use crate::element::Buffer;
    use crate::graph::cpu_region::CpuRegion;
    use crate::graph::Pipeline;
    use crate::run::{decompress_with, RunOptions};
    use crate::stage::ErrorBound;

    /// Around the stages' block sizes, across a region block (65,536 f32), and one of many
    /// region blocks whose last is partial.
    const LENGTHS: [usize; 8] = [1, 31, 32, 33, 1000, 65_537, 300_001, 3_000_017];

    /// A smooth field, noise, and the smooth field with NaN and ±Inf (the Quantizer's
    /// outliers) in every 997th value; as f32 and as f64.
    fn inputs(n: usize) -> Vec<Buffer> {
        let smooth = |i: usize| (i as f64 * 1e-3).sin() * 100.0 + (i as f64 * 0.37).cos();
        let noise = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) as i64 as f64 / 1e18;
        let special = |i: usize| match i % 997 {
            5 => f64::NAN,
            9 => f64::INFINITY,
            13 => f64::NEG_INFINITY,
            _ => smooth(i),
        };
        let fields: [&dyn Fn(usize) -> f64; 3] = [&smooth, &noise, &special];
        fields
            .iter()
            .flat_map(|f| {
                let values: Vec<f64> = (0..n).map(f).collect();
                [Buffer::F32(values.iter().map(|&v| v as f32).collect()), Buffer::F64(values)]
            })
            .collect()
    }

    /// The block is the smallest common multiple the stages' grains allow (times what fits
    /// [`super::BLOCK_BYTES`]), as a search over every multiple of the first grain finds it,
    /// for 1-D chains and for tiles of 2-D and 3-D grids, f32 and f64.
    #[test]
    fn blocks_are_the_smallest_common_multiple() {
        use super::{Chain, BLOCK_BYTES, MAX_BLOCK_BYTES};
        use crate::element::DType;
        let cases: [(&str, &[usize]); 9] = [
            ("fzgpu", &[100_000]),
            ("fzgpu", &[2161, 4320]),
            ("fzgpu", &[17, 96, 192]),
            ("pfpl", &[100_000]),
            ("cuszp2", &[100_000]),
            ("cuszp3-fixed", &[100_000]),
            ("cuszp3-plain", &[96, 190]),
            ("cuszp3-plain", &[17, 96, 192]),
            ("cuszp3-outlier", &[5, 33, 70, 7]),
        ];
        for (name, shape) in cases {
            for dtype in [DType::F32, DType::F64] {
                let mut p = crate::config::preset(name, shape).unwrap();
                p.set_input_dtype(dtype).unwrap();
                p.finalize().unwrap();
                let fragments: Vec<_> = p.nodes().iter().map(|n| n.stage.cpu_fragment().unwrap()).collect();
                let n = shape.iter().product::<usize>() * dtype.size();
                let chain = Chain::new(&fragments, shape, n);
                let grain = |k: usize| fragments[k].grain(chain.wholes[k]).unwrap();
                let mut unit = grain(0);
                for k in 1..fragments.len() {
                    let mut b = unit;
                    while !chain.lens(b)[k].is_multiple_of(grain(k)) {
                        b += unit;
                    }
                    unit = b;
                }
                let searched = (unit <= MAX_BLOCK_BYTES).then(|| unit * (BLOCK_BYTES / unit).max(1));
                assert_eq!(chain.block_bytes(), searched, "{name} {shape:?} {dtype}");
            }
        }
    }

    /// `pipeline` (a 1-D chain that fuses whole into one CPU region) gives the same archive
    /// with fusion on and off for every input of [`LENGTHS`] at an abs and a rel bound, and
    /// decodes it to the same values both ways. The archives are compared before the
    /// stored-raw choice, which would hide a short input's region bytes.
    pub(crate) fn fused_as_walked(pipeline: &Pipeline) {
        let bounds = [ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap(), ErrorBound::new(ErrorMode::Rel, 1e-4).unwrap()];
        for n in LENGTHS {
            for input in inputs(n) {
                for bound in bounds {
                    let mut p = pipeline.clone();
                    p.set_error_bound(bound).unwrap();
                    p.set_input_dtype(input.dtype()).unwrap();
                    p.finalize().unwrap();
                    assert_eq!(p.cpu_regions(), [CpuRegion { start: 0, end: p.nodes().len() }]);
                    let what = format!("{n} {} at {bound:?}", input.dtype());
                    // The region runs (no fall-back to the walk).
                    let fragments: Vec<_> = p.nodes().iter().map(|n| n.stage.cpu_fragment().unwrap()).collect();
                    let names: Vec<&str> = p.nodes().iter().map(|n| n.name.as_str()).collect();
                    let last = p.nodes()[p.nodes().len() - 1].stage.outputs()[0].dtype;
                    let run = super::forward(&fragments, &names, input.view(), &[n], last).unwrap();
                    assert!(run.is_some(), "no region ran: {what}");
                    let fused = p.compress_checked(input.view(), &[n], true).unwrap();
                    let walked = p.compress_checked(input.view(), &[n], false).unwrap();
                    assert!(fused == walked, "archives differ: {what}");
                    let decoded = |fusion| decompress_with(&Backend::Cpu, &fused, RunOptions { fusion }).unwrap().data;
                    let (fused, walked) = (decoded(true), decoded(false));
                    assert!(fused.native_bytes() == walked.native_bytes(), "decodes differ: {what}");
                }
            }
        }
    }
}
