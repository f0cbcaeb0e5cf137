//! Bitshuffle as a fragment of a fused CPU region (cpu_fragment.rs): its blocks, whole in
//! every region block, transposed as cpu.rs does.

use super::{cpu, Bitshuffle};
use crate::cpu_fragment::{nothing, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::Result;

impl CpuFragment for Bitshuffle {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.block_bytes as usize)
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, _: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Blocks(self)))
    }

    fn stated_input_len(&self) -> Option<usize> {
        None
    }

    fn inverse_blocks<'s>(&'s self, _: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        Ok(Box::new(Blocks(self)))
    }
}

/// The stage's blocks in a region block.
struct Blocks<'s>(&'s Bitshuffle);

impl Blocks<'_> {
    fn run(&self, input: &[u8], out: &mut [u8], inverse: bool) {
        let (width, block) = (usize::from(self.0.element_width), self.0.block_bytes as usize);
        for (i, o) in input.chunks(block).zip(out.chunks_mut(block)) {
            cpu::block(i, width, inverse, o);
        }
    }
}

impl BlockForward for Blocks<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        self.run(input, out.bytes_mut(), false);
        nothing()
    }

    fn finish(self: Box<Self>, _: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        Ok((vec![None], self.0.record()))
    }
}

impl BlockInverse for Blocks<'_> {
    fn block(&self, _: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        self.run(output, out, true);
        Ok(nothing())
    }
}
