//! Difference as a fragment of a fused CPU region (cpu_fragment.rs): its chunks, whole in
//! every block, differenced and summed as cpu.rs does.

use super::{cpu, Difference};
use crate::cpu_fragment::{nothing, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::Result;
use crate::stages::words::Word;

impl CpuFragment for Difference {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.chunk_elems() * self.input.size())
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, _: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Chunks(self)))
    }

    fn stated_input_len(&self) -> Option<usize> {
        None
    }

    fn inverse_blocks<'s>(&'s self, _: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        Ok(Box::new(Chunks(self)))
    }
}

/// The stage's chunks in a block.
struct Chunks<'s>(&'s Difference);

impl Chunks<'_> {
    fn forward<W: Word + bytemuck::Pod>(&self, input: &[u8], out: &mut [u8]) {
        cpu::forward_chunks::<W>(
            bytemuck::cast_slice(input),
            bytemuck::cast_slice_mut(out),
            self.0.chunk_elems(),
            self.0.map,
        );
    }

    fn inverse<W: Word + bytemuck::Pod>(&self, out: &mut [u8]) {
        let words: &mut [W] = bytemuck::cast_slice_mut(out);
        words.chunks_mut(self.0.chunk_elems()).for_each(|c| cpu::inverse_chunk(c, self.0.map));
    }
}

impl BlockForward for Chunks<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        match self.0.input.size() {
            2 => self.forward::<u16>(input, out.bytes_mut()),
            _ => self.forward::<u32>(input, out.bytes_mut()),
        }
        nothing()
    }

    fn finish(self: Box<Self>, _: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        Ok((vec![None], self.0.record()))
    }
}

impl BlockInverse for Chunks<'_> {
    fn block(&self, _: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        out.copy_from_slice(output);
        match self.0.input.size() {
            2 => self.inverse::<u16>(out),
            _ => self.inverse::<u32>(out),
        }
        Ok(nothing())
    }
}
