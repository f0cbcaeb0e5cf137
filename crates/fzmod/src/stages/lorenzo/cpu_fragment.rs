//! Lorenzo's block-restart form as a fragment of a fused CPU region (cpu_fragment.rs): its
//! blocks, whole in every region block, differenced and summed as cpu.rs does. The N-D form
//! needs the whole grid and does not fuse.

use super::{cpu, Lorenzo};
use crate::cpu_fragment::{nothing, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::Result;

impl CpuFragment for Lorenzo {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.block_size as usize * 4)
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Delta { stage: self, codes: whole.input_len / 4 }))
    }

    fn stated_input_len(&self) -> Option<usize> {
        self.grid?.len().checked_mul(4)
    }

    fn inverse_blocks<'s>(&'s self, _: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        Ok(Box::new(Prefix(self)))
    }
}

/// The deltas of a region block's blocks, `codes` codes in all (the record's 1-D grid is the
/// whole stream's).
struct Delta<'s> {
    stage: &'s Lorenzo,
    codes: usize,
}

impl BlockForward for Delta<'_> {
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let codes = out.bytes_mut();
        codes.copy_from_slice(input);
        cpu::delta_blocks(bytemuck::cast_slice_mut(codes), self.stage.block_size as usize);
        nothing()
    }

    fn finish(self: Box<Self>, _: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        Ok((vec![None], self.stage.record(self.stage.grid_for(&[], self.codes)?)))
    }
}

/// The prefix sums of a region block's blocks.
struct Prefix<'s>(&'s Lorenzo);

impl BlockInverse for Prefix<'_> {
    fn block(&self, _: usize, output: &[u8], out: &mut [u8]) -> Result<Side> {
        out.copy_from_slice(output);
        cpu::prefix_blocks(bytemuck::cast_slice_mut(out), self.0.block_size as usize);
        Ok(nothing())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::cpu_region::tests::fused_as_walked;

    #[test]
    fn block_lorenzo_fuses_as_walked() {
        for name in ["cuszp", "cuszp2"] {
            fused_as_walked(&crate::config::preset(name, &[1]).unwrap());
        }
        // A period that does not divide a region block, before a coder's block of another size.
        let toml = r#"
            [[stage]]
            name = "quant"
            type = "Quantizer"
            linear_mode = true
            error_bound = 1e-3
            [[stage]]
            name = "lorenzo"
            type = "Lorenzo"
            block_size = 100
            inputs = [{ from = "quant", port = "codes" }]
            [[stage]]
            name = "coder"
            type = "AdaptiveBitpack"
            block_size = 24
            outlier_selection = true
            inputs = [{ from = "lorenzo" }]
        "#;
        fused_as_walked(&crate::config::from_toml(toml).unwrap());
    }

    #[test]
    fn nd_lorenzo_does_not_fuse() {
        let mut p = crate::config::from_toml(
            r#"
            [[stage]]
            name = "quant"
            type = "Quantizer"
            [[stage]]
            name = "lorenzo"
            type = "Lorenzo"
            inputs = [{ from = "quant", port = "codes" }]
            [[stage]]
            name = "coder"
            type = "AdaptiveBitpack"
            inputs = [{ from = "lorenzo" }]
        "#,
        )
        .unwrap();
        p.finalize().unwrap();
        assert!(p.cpu_regions().is_empty());
    }
}
