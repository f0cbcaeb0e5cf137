//! The CPU side of fusion (issue 12 item 6): a stage's forward and inverse on one block of a
//! fused region. `graph/cpu_region.rs` runs a region's stages block after block, each block
//! passing through all of them while it is in the core's cache, instead of stage after stage
//! over whole arrays: every intermediate array would be written to memory, read back by the
//! next stage and, in a one-shot call, faulted in page by page first.
//!
//! A block is a run of the region's input; each stage sees the part of its own main input
//! that the block makes (a transform keeps the order of its stream: byte `i` of its output
//! comes from a fixed byte range of its input). A stage states its *grain*, the bytes of its
//! main input that its work items are made of (a chunk, a block, an element), and every block
//! but the last holds a multiple of every grain, so the blocks cut no work item. A coder ends
//! a region: its blocks' encodings are joined once every block is done.

use crate::element::{Buffer, View};
use crate::error::Result;
use std::any::Any;

/// What one block leaves for its stage's `finish` (the outliers it met, the chunk sizes it
/// encoded, the escapes it found), handed back in block order.
pub type Side = Box<dyn Any + Send>;

/// What a stage's block geometry may depend on: the array's shape (the pipeline input's on
/// the way forward, the header's on the way back) and the bytes of the stage's whole main
/// input. Tiles of a grid are cut along the grid; most stages ignore it.
#[derive(Clone, Copy, Debug)]
pub struct Extent<'a> {
    pub shape: &'a [usize],
    pub input_len: usize,
}

/// A stage's CPU work as a fragment of a fused region.
pub trait CpuFragment: Sync {
    /// Bytes of its main input that every block but the last holds a multiple of, for the
    /// whole input `whole`; `None` where that input cannot be cut (the stage walk then runs
    /// the region's stages, and reports what is wrong with it).
    fn grain(&self, whole: Extent) -> Option<usize>;
    /// Whether it is a coder, which ends a region.
    fn is_coder(&self) -> bool;
    /// Bytes of main output a transform makes of `input` bytes of main input (a multiple of
    /// its grain, or the rest of the whole input `whole`); a coder is never asked.
    fn output_len(&self, whole: Extent, input: usize) -> usize {
        let _ = whole;
        input
    }
    /// Whether its forward reads its whole main input before any block (the value range of
    /// a relative bound): such a stage only comes first in a region, where that input exists.
    fn reads_whole_input(&self) -> bool {
        false
    }
    /// Prepare the forward over the whole main input `whole`; `input` holds its bytes when the
    /// stage comes first in its region (else it is empty; read before any block only where
    /// `reads_whole_input`).
    fn forward_blocks<'s>(&'s self, input: View<'s>, whole: Extent) -> Result<Box<dyn BlockForward + 's>>;
    /// On a stage rebuilt from its record: the bytes of main input it reconstructs, when its
    /// record states them (a region's first stage must).
    fn stated_input_len(&self) -> Option<usize>;
    /// Prepare the inverse from its archived outputs (`segments[p]`; `None` for port 0 of a
    /// transform, which the region makes).
    fn inverse_blocks<'s>(&'s self, segments: &[Option<&'s [u8]>]) -> Result<Box<dyn BlockInverse + 's>>;
}

/// The forward of one stage, block by block.
pub trait BlockForward: Sync {
    /// The block at byte `at` of the main input, `input` its bytes. A transform writes its
    /// output into `out` (sized by the caller to [`CpuFragment::output_len`]); a coder writes
    /// its encoding of the block into `out` (empty on entry), sized as it needs, or keeps it
    /// in its side.
    fn block(&self, at: usize, input: &[u8], out: &mut BlockBytes) -> Side;
    /// After every block, their sides in block order (and a coder's encodings): the stage's
    /// outputs (`None` for a transform's port 0, which the next stage took) and its record.
    fn finish(self: Box<Self>, sides: Vec<Side>, encoded: Vec<BlockBytes>) -> Result<(Vec<Option<Buffer>>, Vec<u8>)>;
}

/// The inverse of one stage, block by block.
pub trait BlockInverse: Sync {
    /// The block at byte `at` of the main input, rebuilt into `out` (the block's bytes of it)
    /// from `output`, the block's part of the main output (empty for a coder: it decodes its
    /// own segment). An inconsistent block is an error.
    fn block(&self, at: usize, output: &[u8], out: &mut [u8]) -> Result<Side>;
    /// After every block, their sides in block order: what needs the whole (outliers put
    /// back, counts checked). `input` is the whole main input rebuilt, given to the region's
    /// first stage (whose blocks wrote it); `None` for the others. Most stages have nothing
    /// to finish.
    fn finish(self: Box<Self>, sides: Vec<Side>, input: Option<&mut [u8]>) -> Result<()> {
        let _ = (sides, input);
        Ok(())
    }
}

/// A block's bytes between two stages, held in 8-byte words so that any element type may
/// view them in place (`bytemuck::cast_slice`).
#[derive(Default)]
pub struct BlockBytes {
    words: Vec<u64>,
    len: usize,
}

impl BlockBytes {
    /// `len` bytes (what was there before is left, new bytes are zero), to be written.
    pub fn resize(&mut self, len: usize) -> &mut [u8] {
        self.words.resize(len.div_ceil(8), 0);
        self.len = len;
        self.bytes_mut()
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// `bytes` appended.
    pub fn extend(&mut self, bytes: &[u8]) {
        let at = self.len;
        self.resize(at + bytes.len())[at..].copy_from_slice(bytes);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A side of no content, for blocks that leave nothing.
pub fn nothing() -> Side {
    Box::new(())
}

/// The sides of a stage's blocks as their concrete type (each stage knows what its blocks
/// left).
pub fn sides_of<T: 'static>(sides: Vec<Side>) -> Vec<T> {
    sides.into_iter().map(|s| *s.downcast::<T>().expect("a stage's blocks leave one side type")).collect()
}
