//! Chunked archives (format 2.0, docs/FORMAT.md §8): the array cut into boxes ("chunks"),
//! each stored as a complete format-1.0 archive at a 64-byte boundary of the data region,
//! found through a block index (zfp's index classes, [`super::index`]) in the header.
//!
//! This module knows bytes: the header fields, the chunk grid, where chunk `i` lies and the
//! checks that tie the index to the header. Compressing and decoding chunks is done above.

use super::bytes::{Reader, Writer};
use super::index::{BlockIndex, IndexClass};
use super::{ErrorMode, Header, SEGMENT_ALIGN};
use crate::error::{corrupt, Error, Result};

/// Format major version of chunked archives (a 1.x reader must refuse them: §8 says why).
pub const CHUNKED_MAJOR: u16 = 2;
/// Format minor version of chunked archives written by this build.
pub const CHUNKED_MINOR: u16 = 0;
/// The unit of the chunk index: chunks start at multiples of 64 bytes from the data region.
pub const CHUNK_UNIT: u64 = SEGMENT_ALIGN as u64;

/// How an array is cut into chunks, and where they are.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunking {
    /// Extent of a chunk in each dimension (C order); edge chunks are cut by the array.
    pub chunk_shape: Vec<u64>,
    /// The bound every chunk was compressed with (its own header's mode and bound): the
    /// user's bound, or for a `rel` request the absolute bound it resolved to over the whole
    /// array (`rel` itself only when that range is 0, and `abs 0` for lossless pipelines).
    pub chunk_mode: ErrorMode,
    pub chunk_bound: f64,
    /// Chunk `i` (C order over the chunk grid) starts `64 · block_offset(i)` bytes into the
    /// data region; the last ends `data_len` bytes into it.
    pub index: BlockIndex,
}

impl Chunking {
    /// Chunks along each dimension.
    pub fn grid(&self, shape: &[u64]) -> Vec<u64> {
        shape.iter().zip(&self.chunk_shape).map(|(&n, &c)| n.div_ceil(c.max(1))).collect()
    }

    /// Number of chunks (checked product of the grid).
    pub fn num_chunks(&self, shape: &[u64]) -> Option<u64> {
        self.grid(shape).iter().try_fold(1u64, |a, &g| a.checked_mul(g))
    }

    /// Origin and extent of chunk `i` in the array.
    pub fn chunk_box(&self, shape: &[u64], mut i: u64) -> (Vec<u64>, Vec<u64>) {
        let grid = self.grid(shape);
        let mut origin = vec![0; shape.len()];
        let mut extent = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            let g = i % grid[d];
            i /= grid[d];
            origin[d] = g * self.chunk_shape[d];
            extent[d] = self.chunk_shape[d].min(shape[d] - origin[d]);
        }
        (origin, extent)
    }

    /// The absolute bound every value of the array meets (`None`: exact, a lossless pipeline).
    pub fn guaranteed_abs_bound(&self) -> Option<f64> {
        match self.chunk_mode {
            ErrorMode::Abs if self.chunk_bound.to_bits() == 0 => None,
            ErrorMode::Abs => Some(self.chunk_bound),
            // Relative only over a constant (or non-finite) array: every chunk is exact.
            ErrorMode::Rel => Some(0.0),
        }
    }

    /// Byte span `[start, start + len)` of chunk `i` in the data region (padding included,
    /// except after the last chunk).
    pub fn chunk_span(&self, i: u64, data_len: u64) -> Result<(u64, u64)> {
        let bad = |e: super::index::IndexError| corrupt!("chunk index: {e}");
        let start = self.index.block_offset(i).map_err(bad)? * CHUNK_UNIT;
        let stride = self.index.block_size(i).map_err(bad)? * CHUNK_UNIT;
        Ok((start, stride.min(data_len - start)))
    }
}

/// The chunk's own archive inside its span: its length from its preamble, the padding after
/// it zero and shorter than 64 bytes, and a format-1 archive (chunks do not nest).
pub fn chunk_archive(span: &[u8], i: u64) -> Result<&[u8]> {
    let len = super::announced_len(span).map_err(|e| match e {
        Error::BadMagic => corrupt!("chunk {i} does not start with the archive magic"),
        e => corrupt!("chunk {i}: {e}"),
    })?;
    let major = u16::from_le_bytes([span[8], span[9]]);
    if major != super::FORMAT_MAJOR {
        return Err(corrupt!("chunk {i} is a format {major} archive; chunks are format 1 archives"));
    }
    if len > span.len() as u64 || span.len() as u64 - len >= CHUNK_UNIT {
        return Err(corrupt!("chunk {i} announces {len} bytes, its index entry spans {}", span.len()));
    }
    let (archive, padding) = span.split_at(len as usize);
    if padding.iter().any(|&b| b != 0) {
        return Err(corrupt!("non-zero padding after chunk {i}"));
    }
    Ok(archive)
}

/// Chunk archive lengths → the index (the cheapest of `classes` that holds them; none given:
/// implicit, hybrid8 for the array's dimensionality, hybrid4, verbatim) and the data length.
pub fn build_index(lens: &[usize], ndim: usize, classes: &[IndexClass]) -> Result<(BlockIndex, u64)> {
    let strides: Vec<u64> = lens.iter().map(|&l| (l as u64).div_ceil(CHUNK_UNIT)).collect();
    let d = ndim.clamp(1, 4) as u8;
    let all = IndexClass::all(d);
    let classes = if classes.is_empty() { &all[..] } else { classes };
    let index = BlockIndex::build_best(classes, &strides).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let data_len = match lens.last() {
        Some(&last) => (index.range() - strides[strides.len() - 1]) * CHUNK_UNIT + last as u64,
        None => 0,
    };
    Ok((index, data_len))
}

/// Write the chunked header fields after the common ones (docs/FORMAT.md §8).
pub(crate) fn encode_fields(c: &Chunking, w: &mut Writer) {
    for &e in &c.chunk_shape {
        w.varint(e);
    }
    w.u8(c.chunk_mode.code());
    w.f64(c.chunk_bound);
    w.varint(c.index.len());
    c.index.encode(w);
}

/// Read and check the chunked header fields: every fact stated twice must agree.
pub(crate) fn decode_fields(r: &mut Reader<'_>, header: &Header, data_len: u64) -> Result<Chunking> {
    let shape = &header.shape;
    if shape.is_empty() || shape.contains(&0) {
        return Err(corrupt!("a chunked archive of shape {shape:?}: needs at least one dimension, none empty"));
    }
    let chunk_shape = (0..shape.len()).map(|_| r.varint()).collect::<Result<Vec<_>>>()?;
    if let Some(d) = (0..shape.len()).find(|&d| chunk_shape[d] == 0 || chunk_shape[d] > shape[d]) {
        return Err(corrupt!("chunk shape {chunk_shape:?} does not fit the shape {shape:?} (dimension {d})"));
    }
    let chunk_mode = ErrorMode::from_code(r.u8()?)?;
    let chunk_bound = r.f64()?;
    if !(chunk_bound.to_bits() == 0 || (chunk_bound.is_finite() && chunk_bound > 0.0)) {
        return Err(corrupt!("chunk bound {chunk_bound} is neither +0 nor a finite positive number"));
    }
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits();
    let consistent = match (header.error_mode, chunk_mode) {
        // Lossless pipelines (+0) and absolute bounds: every chunk has the user's bound.
        (ErrorMode::Abs, ErrorMode::Abs) => same(chunk_bound, header.error_bound),
        // Relative: resolved once over the whole array; relative itself only on a constant one.
        (ErrorMode::Rel, ErrorMode::Abs) => chunk_bound > 0.0,
        (ErrorMode::Rel, ErrorMode::Rel) => same(chunk_bound, header.error_bound),
        (ErrorMode::Abs, ErrorMode::Rel) => false,
    };
    if !consistent {
        return Err(corrupt!(
            "chunk bound {} {chunk_bound:e} does not follow from the header's {} {:e}",
            chunk_mode.name(),
            header.error_mode.name(),
            header.error_bound
        ));
    }
    let num_chunks = r.varint()?;
    let c = Chunking { chunk_shape, chunk_mode, chunk_bound, index: BlockIndex::build(IndexClass::Verbatim, &[])? };
    let expected = c.num_chunks(shape).ok_or_else(|| corrupt!("chunk grid of {shape:?} overflows"))?;
    if num_chunks != expected {
        return Err(corrupt!(
            "{num_chunks} chunks stated, the shape {shape:?} in chunks of {:?} has {expected}",
            c.chunk_shape
        ));
    }
    // Every chunk takes at least one unit, so the count is bounded by the data region.
    let units = data_len.div_ceil(CHUNK_UNIT);
    if num_chunks > units {
        return Err(corrupt!("{num_chunks} chunks cannot fit in {data_len} bytes of data"));
    }
    let index = BlockIndex::decode(r, num_chunks).map_err(|e| corrupt!("chunk index: {e}"))?;
    if index.range() != units {
        return Err(corrupt!(
            "the chunk index spans {} units of 64 bytes, the data region {data_len} bytes",
            index.range()
        ));
    }
    for i in 0..num_chunks {
        let size = index.block_size(i).map_err(|e| corrupt!("chunk index: {e}"))?;
        if size == 0 {
            return Err(corrupt!("chunk {i} is empty"));
        }
        if i == 0 && index.block_offset(0).map_err(|e| corrupt!("chunk index: {e}"))? != 0 {
            return Err(corrupt!("the first chunk does not start the data region"));
        }
        if matches!(index.class(), IndexClass::Implicit) {
            break; // every block alike: one check stands for all
        }
    }
    Ok(Chunking { index, ..c })
}

impl From<super::index::IndexError> for Error {
    fn from(e: super::index::IndexError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}
