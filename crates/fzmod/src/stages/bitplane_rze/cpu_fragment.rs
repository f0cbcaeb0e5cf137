//! BitplaneRZE as the coder ending a fused CPU region (cpu_fragment.rs): each block encodes
//! its 4096-byte chunks as cpu.rs does, and the header, flags, start positions and kept words
//! are joined in chunk order.

use super::cpu::{self, ChunkSlice, CHUNK_WORDS, FLAG_WORDS};
use super::{BitplaneRze, MAX_CODES};
use crate::cpu_fragment::{nothing, sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::{corrupt, Error, Result};

/// Bytes of codes per chunk.
const CHUNK_BYTES: usize = 4 * CHUNK_WORDS;

impl CpuFragment for BitplaneRze {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(CHUNK_BYTES)
    }

    fn is_coder(&self) -> bool {
        true
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        let codes = whole.input_len / 2;
        if codes > MAX_CODES {
            return Err(Error::InvalidArgument(format!("BitplaneRZE holds at most {MAX_CODES} codes")));
        }
        Ok(Box::new(Encode { codes }))
    }

    fn stated_input_len(&self) -> Option<usize> {
        usize::try_from(self.num_codes?).ok()?.checked_mul(2)
    }

    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let archive = segments.first().copied().flatten().ok_or_else(|| corrupt!("BitplaneRZE segment missing"))?;
        let n = self.num_codes.and_then(|n| usize::try_from(n).ok()).filter(|&n| n <= MAX_CODES);
        let n = n.ok_or_else(|| corrupt!("BitplaneRZE code count out of range"))?;
        let meta_len = cpu::metadata_len(n);
        let slices = cpu::check(&archive[..archive.len().min(meta_len)], archive.len(), n)?;
        Ok(Box::new(Decode { slices, stream: &archive[meta_len..] }))
    }
}

/// The encode of `codes` codes, block by block; a block leaves its chunks' flags and
/// kept-word counts, and its kept words as its encoding.
struct Encode {
    codes: usize,
}

impl BlockForward for Encode {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let codes: &[u16] = bytemuck::cast_slice(input);
        let chunks: Vec<([u32; FLAG_WORDS], usize)> = codes
            .chunks(2 * CHUNK_WORDS)
            .map(|c| {
                let (flags, kept) = cpu::encode_codes(c);
                out.extend(bytemuck::cast_slice(&kept));
                (flags, kept.len())
            })
            .collect();
        Box::new(chunks)
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, encoded: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        let chunks: Vec<([u32; FLAG_WORDS], usize)> =
            sides_of::<Vec<([u32; FLAG_WORDS], usize)>>(sides).into_iter().flatten().collect();
        let archive = cpu::assemble(self.codes, &chunks, encoded.iter().map(BlockBytes::bytes).collect());
        Ok((vec![Some(Buffer::U8(archive))], BitplaneRze::record(self.codes)))
    }
}

/// The decode of a block's chunks, the archive's metadata checked whole first.
struct Decode<'s> {
    slices: Vec<ChunkSlice>,
    stream: &'s [u8],
}

impl BlockInverse for Decode<'_> {
    fn block(&self, at: usize, _: &[u8], out: &mut [u8]) -> Result<Side> {
        let codes: &mut [u16] = bytemuck::cast_slice_mut(out);
        for (k, chunk) in codes.chunks_mut(2 * CHUNK_WORDS).enumerate() {
            cpu::decode_codes(&self.slices[at / CHUNK_BYTES + k], self.stream, chunk);
        }
        Ok(nothing())
    }
}
