//! RZE as the coder ending a fused CPU region (cpu_fragment.rs): each block encodes its
//! chunks as cpu.rs does, and the size table and payloads are joined in chunk order.

use super::{cpu, Rze};
use crate::cpu_fragment::{nothing, sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{concat_on_all_cores, Buffer, View};
use crate::error::{corrupt, Result};

impl CpuFragment for Rze {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.chunk_bytes as usize)
    }

    fn is_coder(&self) -> bool {
        true
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Encode { stage: self, bytes: whole.input_len }))
    }

    fn stated_input_len(&self) -> Option<usize> {
        usize::try_from(self.num_bytes?).ok()
    }

    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let seg = segments.first().copied().flatten().ok_or_else(|| corrupt!("RZE segment missing"))?;
        let n = self.stated_input_len().ok_or_else(|| corrupt!("RZE length unknown"))?;
        let (chunk, word) = (self.chunk_bytes as usize, usize::from(self.word_size));
        let spans = cpu::chunk_spans(seg.len(), n, chunk, word, |chunks| {
            Ok(seg[..2 * chunks].chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect())
        })?;
        Ok(Box::new(Decode { chunk, word, seg, spans }))
    }
}

/// The encode of a block's chunks, `bytes` in all; a block leaves its chunks' encoded sizes.
struct Encode<'s> {
    stage: &'s Rze,
    bytes: usize,
}

impl BlockForward for Encode<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let word = usize::from(self.stage.word_size);
        let mut sizes: Vec<u16> = Vec::with_capacity(input.len().div_ceil(self.stage.chunk_bytes as usize));
        for c in input.chunks(self.stage.chunk_bytes as usize) {
            let encoded = cpu::encode_chunk(c, word);
            let payload = encoded.as_deref().unwrap_or(c);
            sizes.push(payload.len() as u16);
            out.extend(payload);
        }
        Box::new(sizes)
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, encoded: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        let table: Vec<u8> = sides_of::<Vec<u16>>(sides).into_iter().flatten().flat_map(u16::to_le_bytes).collect();
        let out = concat_on_all_cores(std::iter::once(table.as_slice()).chain(encoded.iter().map(BlockBytes::bytes)));
        Ok((vec![Some(Buffer::U8(out))], self.stage.record(self.bytes)))
    }
}

/// The decode of a block's chunks from the segment, placed by its size table.
struct Decode<'s> {
    chunk: usize,
    word: usize,
    seg: &'s [u8],
    spans: Vec<cpu::ChunkSpan>,
}

impl BlockInverse for Decode<'_> {
    fn block(&self, at: usize, _: &[u8], out: &mut [u8]) -> Result<Side> {
        for (k, o) in out.chunks_mut(self.chunk).enumerate() {
            let cpu::ChunkSpan { at: from, size, len } = self.spans[at / self.chunk + k];
            let enc = &self.seg[from..from + size];
            if size == len {
                o.copy_from_slice(enc);
            } else {
                // The scatter writes only the kept words: the rest must be zero already.
                o.fill(0);
                cpu::decode_chunk(enc, self.word, o)?;
            }
        }
        Ok(nothing())
    }
}
