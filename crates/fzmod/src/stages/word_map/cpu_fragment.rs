//! The word maps as fragments of a fused CPU region (cpu_fragment.rs): one pure map per
//! word, any block.

use super::{Map, WordMap};
use crate::cpu_fragment::{nothing, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::Result;
use crate::stages::words::Word;

impl CpuFragment for WordMap {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.input.size())
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, _: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Words(self)))
    }

    fn stated_input_len(&self) -> Option<usize> {
        None
    }

    fn inverse_blocks<'s>(&'s self, _: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        Ok(Box::new(Words(self)))
    }
}

/// The stage's words in a block.
struct Words<'s>(&'s WordMap);

impl Words<'_> {
    fn map(&self, input: &[u8], out: &mut [u8], inverse: bool) {
        match self.0.input.size() {
            2 => map_as::<u16>(self.0.map, input, out, inverse),
            _ => map_as::<u32>(self.0.map, input, out, inverse),
        }
    }
}

/// The map (or its inverse) of every word of `input` into `out`, as words of type `W`.
fn map_as<W: Word + bytemuck::Pod>(map: Map, input: &[u8], out: &mut [u8], inverse: bool) {
    let f = match (map, inverse) {
        (Map::Zigzag, false) => W::zigzag,
        (Map::Zigzag, true) => W::unzigzag,
        (Map::Negabinary, false) => W::negabinary,
        (Map::Negabinary, true) => W::unnegabinary,
    };
    let (input, out): (&[W], &mut [W]) = (bytemuck::cast_slice(input), bytemuck::cast_slice_mut(out));
    out.iter_mut().zip(input).for_each(|(o, &w)| *o = f(w));
}

impl BlockForward for Words<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        self.map(input, out.bytes_mut(), false);
        nothing()
    }

    fn finish(self: Box<Self>, _: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        Ok((vec![None], self.0.record()))
    }
}

impl BlockInverse for Words<'_> {
    fn block(&self, _: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        self.map(output, out, true);
        Ok(nothing())
    }
}
