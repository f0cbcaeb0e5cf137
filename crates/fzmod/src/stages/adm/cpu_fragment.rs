//! ADM as a fragment of a fused CPU region (cpu_fragment.rs): each block maps its 512-word
//! blocks as cpu.rs does; their centres, length bytes and payloads are joined into the side
//! stream in block order, and an inverse block reads its blocks' payloads from the side
//! stream, checked whole first.

use super::cpu::{self, Encoded, SideStream, Word, BLOCK};
use super::Adm;
use crate::cpu_fragment::{nothing, sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, DType, View};
use crate::error::{corrupt, Result};

impl CpuFragment for Adm {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(BLOCK * self.input.size())
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn output_len(&self, _: Extent, input: usize) -> usize {
        input / self.input.size()
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Map { stage: self, words: whole.input_len / self.input.size() }))
    }

    fn stated_input_len(&self) -> Option<usize> {
        usize::try_from(self.num_elements?).ok()?.checked_mul(self.input.size())
    }

    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let side = segments.get(1).copied().flatten().ok_or_else(|| corrupt!("ADM side stream missing"))?;
        let n = self.recorded_len()?;
        Ok(Box::new(Unmap { input: self.input, side: SideStream::read(side, n, self.input.size())? }))
    }
}

/// The forward of an array of `words` words, block by block; a block leaves its encoded
/// blocks.
struct Map<'s> {
    stage: &'s Adm,
    words: usize,
}

impl BlockForward for Map<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let codes = out.bytes_mut();
        match self.stage.input {
            DType::U16 => Box::new(cpu::encode_blocks::<u16>(bytemuck::cast_slice(input), codes)),
            _ => Box::new(cpu::encode_blocks::<u32>(bytemuck::cast_slice(input), codes)),
        }
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        let blocks = sides_of::<Vec<Encoded>>(sides);
        let blocks: Vec<&Encoded> = blocks.iter().flatten().collect();
        let side = match self.stage.input {
            DType::U16 => cpu::side_stream::<u16>(blocks),
            _ => cpu::side_stream::<u32>(blocks),
        };
        Ok((vec![None, Some(Buffer::U8(side))], self.stage.record(self.words)))
    }
}

/// The inverse of a block's 512-word blocks from its code bytes and the side stream.
struct Unmap<'s> {
    input: DType,
    side: SideStream<'s>,
}

impl BlockInverse for Unmap<'_> {
    fn block(&self, at: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        let first = at / (BLOCK * self.input.size());
        match self.input {
            DType::U16 => self.decode::<u16>(first, output, out)?,
            _ => self.decode::<u32>(first, output, out)?,
        }
        Ok(nothing())
    }
}

impl Unmap<'_> {
    fn decode<T: Word + bytemuck::Pod>(&self, first: usize, codes: &[u8], out: &mut [u8]) -> Result<()> {
        self.side.decode_blocks::<T>(first, codes, bytemuck::cast_slice_mut(out))
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::cpu_region::tests::fused_as_walked;

    /// ADM ending a region after LorenzoQuant's u16 codes (`mans` less its coder) and after
    /// the Quantizer's u32 words; its code bytes are the region's archived output.
    #[test]
    fn adm_fuses_as_walked() {
        let lorenzo_quant = r#"
            [[stage]]
            name = "q"
            type = "LorenzoQuant"
            code_mapping = "zigzag"
            [[stage]]
            name = "a"
            type = "ADM"
            inputs = [{ from = "q", port = "codes" }]
        "#;
        let quantizer = r#"
            [[stage]]
            name = "q"
            type = "Quantizer"
            code_type = "uint32"
            inplace_outliers = true
            [[stage]]
            name = "a"
            type = "ADM"
            input_type = "uint32"
            inputs = [{ from = "q", port = "codes" }]
        "#;
        for toml in [lorenzo_quant, quantizer] {
            fused_as_walked(&crate::config::from_toml(toml).unwrap());
        }
    }
}
