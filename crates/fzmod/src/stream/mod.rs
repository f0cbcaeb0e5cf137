//! Streamed chunked archives (docs/FORMAT.md §8.5): compress an array that arrives in C order
//! from a reader, and decode one into a writer, with memory bounded by one *slab* instead of
//! the array.
//!
//! A slab is one or more whole steps of the chunk grid along the slowest dimension: chunk
//! extent `c0` rows of dimension 0 (a multiple of it), the whole array along the others. The
//! chunks of a slab are consecutive in the grid's C order and cover consecutive bytes of the
//! array, so a writer reads a slab, compresses its chunks (in parallel on the CPU, collected in
//! order: the bytes do not depend on the thread count), writes them as frames and drops it; a
//! reader decodes a slab's frames and writes its values in C order. Memory is about one slab of
//! values plus its compressed frames, whatever the array's length along dimension 0.

mod job;
mod read;
mod write;

pub use job::{compress_stream, decompress_stream, ReadSeek, StreamInput, StreamPass, StreamProgress};
pub use read::{Slab, StreamDecoder};
pub use write::{Finished, StreamCompressor, StreamOptions};

use crate::archive::chunked::Chunking;
use std::ops::Range;

/// Bytes of the array a slab aims at (whole grid steps along dimension 0, at least one): big
/// enough to keep every core busy with chunks of the default size, small enough that a
/// streamed run stays far below a gigabyte.
pub const STREAM_SLAB_BYTES: u64 = 64 << 20;

/// How an array of `shape` is cut into slabs for its chunking.
#[derive(Clone, Debug)]
pub(crate) struct Slabs {
    shape: Vec<u64>,
    /// Rows of dimension 0 per slab: a multiple of the chunk extent along it.
    rows: u64,
    /// Chunks per grid step along dimension 0.
    per_step: u64,
    step: u64,
}

impl Slabs {
    /// Slabs of about `target` bytes ([`STREAM_SLAB_BYTES`] when 0), whole grid steps.
    pub(crate) fn new(c: &Chunking, shape: &[u64], elem: usize, target: u64) -> Slabs {
        let target = if target == 0 { STREAM_SLAB_BYTES } else { target };
        let step = c.chunk_shape[0];
        let step_bytes = step.saturating_mul(shape[1..].iter().product()).saturating_mul(elem as u64).max(1);
        let steps = (target / step_bytes).max(1);
        Slabs { shape: shape.to_vec(), rows: steps.saturating_mul(step), per_step: c.chunks_per_slab_row(shape), step }
    }

    /// The rows of dimension 0 and the chunk ids of the slab that starts at row `row`.
    pub(crate) fn at(&self, row: u64) -> (Range<u64>, Range<u64>) {
        let end = row.saturating_add(self.rows).min(self.shape[0]);
        let ids = row / self.step * self.per_step..end.div_ceil(self.step) * self.per_step;
        (row..end, ids)
    }

    /// Shape of the slab of `rows`.
    pub(crate) fn shape_of(&self, rows: &Range<u64>) -> Vec<u64> {
        let mut s = self.shape.clone();
        s[0] = rows.end - rows.start;
        s
    }

    /// Bytes of the largest slab.
    pub(crate) fn max_bytes(&self, elem: usize) -> u64 {
        let rows = self.rows.min(self.shape[0]);
        rows.saturating_mul(self.shape[1..].iter().product()).saturating_mul(elem as u64)
    }

    pub(crate) fn rows_total(&self) -> u64 {
        self.shape[0]
    }
}
