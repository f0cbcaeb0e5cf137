//! AdaptiveBitpack as the coder ending a fused CPU region (cpu_fragment.rs): each region block
//! encodes its blocks as cpu.rs does, and their metadata and payloads are joined as
//! `cpu::encode` lays them out (every block's metadata, then every payload, in block order).
//! The inverse checks the whole segment first, as `cpu::decode` does, then decodes each region
//! block's blocks from it in place.

use super::cpu::{self, Code, Segment};
use super::AdaptiveBitpack;
use crate::cpu_fragment::{nothing, sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{concat_on_all_cores, Buffer, DType, View};
use crate::error::{corrupt, Result};
use std::marker::PhantomData;

impl CpuFragment for AdaptiveBitpack {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.block_size as usize * self.input.size())
    }

    fn is_coder(&self) -> bool {
        true
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        let count = whole.input_len / self.input.size();
        Ok(match self.input {
            DType::I16 => Box::new(Encode::<i16> { stage: self, count, codes: PhantomData }),
            _ => Box::new(Encode::<i32> { stage: self, count, codes: PhantomData }),
        })
    }

    fn stated_input_len(&self) -> Option<usize> {
        usize::try_from(self.num_elements?).ok()?.checked_mul(self.input.size())
    }

    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        let seg = segments.first().copied().flatten().ok_or_else(|| corrupt!("AdaptiveBitpack segment missing"))?;
        let (n, b) = (self.decoded_len(seg)?, self.block_size as usize);
        Ok(match self.input {
            DType::I16 => Box::new(Decode { b, segment: Segment::<i16>::read(seg, n, b, self.layout)? }),
            _ => Box::new(Decode { b, segment: Segment::<i32>::read(seg, n, b, self.layout)? }),
        })
    }
}

/// The encode of a region block's blocks of `T` codes, `count` of them in all.
struct Encode<'s, T> {
    stage: &'s AdaptiveBitpack,
    count: usize,
    codes: PhantomData<T>,
}

/// What a block leaves: its blocks' metadata and payloads (kept here, not copied into the
/// region's encoding).
struct Encoded {
    meta: Vec<u8>,
    payload: Vec<u8>,
}

impl<T: Code + bytemuck::Pod> BlockForward for Encode<'_, T> {
    fn block(&self, _: usize, input: &[u8], _: &mut BlockBytes) -> Side {
        let codes: &[T] = bytemuck::cast_slice(input);
        let (mut meta, mut payload) = (Vec::new(), Vec::new());
        cpu::encode_blocks(codes, self.stage.block_size as usize, self.stage.layout, &mut meta, &mut payload);
        Box::new(Encoded { meta, payload })
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        let sides = sides_of::<Encoded>(sides);
        let metas = sides.iter().map(|s| s.meta.as_slice());
        let out = concat_on_all_cores(metas.chain(sides.iter().map(|s| s.payload.as_slice())));
        Ok((vec![Some(Buffer::U8(out))], self.stage.record(self.count)))
    }
}

/// The decode of a region block's blocks from the checked segment.
struct Decode<'s, T> {
    b: usize,
    segment: Segment<'s, T>,
}

impl<T: Code + bytemuck::Pod> BlockInverse for Decode<'_, T> {
    fn block(&self, at: usize, _: &[u8], out: &mut [u8]) -> Result<Side> {
        let first = at / (self.b * std::mem::size_of::<T>());
        self.segment.decode(first, bytemuck::cast_slice_mut(out))?;
        Ok(nothing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_fragment::BlockBytes;
    use crate::graph::cpu_region::tests::fused_as_walked;
    use crate::stage::Stage;
    use crate::stages::adaptive_bitpack::Layout;

    #[test]
    fn bitpack_regions_fuse_as_walked() {
        // Quantizer -> AdaptiveBitpack (plain), and with each selection layout at a block
        // size that is no power of two.
        fused_as_walked(&crate::config::preset("cuszp3-fixed", &[1]).unwrap());
        for metadata in ["wide", "packed"] {
            let toml = format!(
                r#"
                [[stage]]
                name = "quant"
                type = "Quantizer"
                error_bound = 1e-3
                [[stage]]
                name = "coder"
                type = "AdaptiveBitpack"
                block_size = 200
                outlier_selection = true
                metadata = "{metadata}"
                inputs = [{{ from = "quant", port = "codes" }}]
                "#
            );
            fused_as_walked(&crate::config::from_toml(&toml).unwrap());
        }
    }

    /// `stage`'s fragment over `codes` in region blocks of `blocks` of its blocks: the segment
    /// and the codes decoded back from it.
    fn blockwise<T: Code + bytemuck::Pod>(stage: &AdaptiveBitpack, codes: &[T], blocks: usize) -> (Vec<u8>, Vec<T>) {
        let region_block = blocks * stage.grain(Extent { shape: &[], input_len: 0 }).unwrap();
        let bytes: &[u8] = bytemuck::cast_slice(codes);
        let forward = stage.forward_blocks(View::of::<u8>(&[]), Extent { shape: &[], input_len: bytes.len() }).unwrap();
        let (mut sides, mut encoded) = (Vec::new(), Vec::new());
        for (k, piece) in bytes.chunks(region_block).enumerate() {
            let mut out = BlockBytes::default();
            sides.push(forward.block(k * region_block, piece, &mut out));
            encoded.push(out);
        }
        let (mut outputs, record) = forward.finish(sides, encoded).unwrap();
        let Some(Buffer::U8(segment)) = outputs.remove(0) else { panic!("one segment") };
        let decoder = AdaptiveBitpack::from_record(1, &record).unwrap();
        let fragment = decoder.cpu_fragment().unwrap();
        let mut back = vec![T::zeroed(); codes.len()];
        {
            let inverse = fragment.inverse_blocks(&[Some(&segment)]).unwrap();
            let rebuilt: &mut [u8] = bytemuck::cast_slice_mut(&mut back);
            for (k, piece) in rebuilt.chunks_mut(region_block).enumerate() {
                inverse.block(k * region_block, &[], piece).unwrap();
            }
        }
        (segment, back)
    }

    /// Every layout and both code types, in region blocks that cut the stage walk's work
    /// items anywhere: the segment `cpu::encode` writes, decoded back.
    #[test]
    fn blocks_code_as_the_whole() {
        // Smooth codes with the type's extreme in every 501st (rate 32 or 16, outlier blocks).
        let wave = |i: usize, scale: f64| ((i as f64 * 0.01).sin() * scale) as i64 + (i % 7) as i64 - 3;
        let i32s: Vec<i32> = (0..100_003).map(|i| if i % 501 == 0 { i32::MIN } else { wave(i, 3e4) as i32 }).collect();
        let i16s: Vec<i16> = (0..100_003).map(|i| if i % 501 == 0 { i16::MIN } else { wave(i, 3e2) as i16 }).collect();
        for layout in [Layout::Plain, Layout::Wide, Layout::Packed] {
            for (b, blocks) in [(32, 2048), (32, 1000), (24, 7), (1024, 3), (5, 4096)] {
                let stage = AdaptiveBitpack::new(DType::I32, b as u32, layout).unwrap();
                let (segment, back) = blockwise(&stage, &i32s, blocks);
                assert!(segment == cpu::encode(&i32s, b, layout) && back == i32s, "i32 {layout:?} {b} {blocks}");
                let stage = AdaptiveBitpack::new(DType::I16, b as u32, layout).unwrap();
                let (segment, back) = blockwise(&stage, &i16s, blocks);
                assert!(segment == cpu::encode(&i16s, b, layout) && back == i16s, "i16 {layout:?} {b} {blocks}");
            }
        }
    }

    /// A corrupt segment is refused before any block, with the stage walk's error.
    #[test]
    fn corrupt_segments_fail_as_in_the_walk() {
        let codes: Vec<i32> = (0..10_000).map(|i| (i % 300) - 150).collect();
        let mut stage = AdaptiveBitpack::new(DType::I32, 32, Layout::Packed).unwrap();
        let segment = cpu::encode(&codes, 32, Layout::Packed);
        stage.num_elements = Some(codes.len() as u64);
        let mut bad_rate = segment.clone();
        bad_rate[100] = 0x7f;
        let few = AdaptiveBitpack { num_elements: Some(1 << 40), ..stage.clone() };
        for (stage, bytes) in [(&stage, &segment[..segment.len() - 1]), (&stage, &bad_rate[..]), (&few, &segment[..])] {
            let walked = stage.inverse(vec![Buffer::U8(bytes.to_vec())]).unwrap_err().to_string();
            let fused = stage.inverse_blocks(&[Some(bytes)]).err().expect("refused").to_string();
            assert_eq!(fused, walked);
        }
    }
}
