//! Lorenzo's block-restart form as a fragment of a fused CPU region (cpu_fragment.rs): its
//! blocks, whole in every region block, differenced and summed as cpu.rs does. The N-D form
//! needs the whole grid and does not fuse.

use super::{cpu, Lorenzo};
use crate::cpu_fragment::{nothing, sides_of, BlockBytes, BlockForward, BlockInverse, CpuFragment, Extent, Side};
use crate::element::{Buffer, View};
use crate::error::Result;

impl CpuFragment for Lorenzo {
    fn grain(&self, _: Extent) -> Option<usize> {
        Some(self.block_size as usize * 4)
    }

    fn is_coder(&self) -> bool {
        false
    }

    fn forward_blocks<'s>(&'s self, _: View<'s>, _: Extent) -> Result<Box<dyn BlockForward + 's>> {
        Ok(Box::new(Blocks(self)))
    }

    fn stated_input_len(&self) -> Option<usize> {
        self.grid?.len().checked_mul(4)
    }

    fn inverse_blocks<'s>(&'s self, _: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>> {
        Ok(Box::new(Blocks(self)))
    }
}

/// The stage's blocks in a region block.
struct Blocks<'s>(&'s Lorenzo);

impl BlockForward for Blocks<'_> {
    /// Leaves its code count: the record's 1-D grid is the whole stream's.
    fn block(&self, _: usize, input: &[u8], out: &mut BlockBytes) -> Side {
        let codes = out.bytes_mut();
        codes.copy_from_slice(input);
        cpu::delta_blocks(bytemuck::cast_slice_mut(codes), self.0.block_size as usize);
        Box::new(input.len() / 4)
    }

    fn finish(self: Box<Self>, sides: Vec<Side>, _: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)> {
        let len = sides_of::<usize>(sides).into_iter().sum();
        Ok((vec![None], self.0.record(self.0.grid_for(&[], len)?)))
    }
}

impl BlockInverse for Blocks<'_> {
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
