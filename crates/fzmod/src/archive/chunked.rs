//! Chunked archives (format 2.0, docs/FORMAT.md §8): the array cut into boxes ("chunks"),
//! each stored as a complete format-1.0 archive at a 64-byte boundary of the data region,
//! found through a block index (zfp's index classes, [`super::index`]) in the header.
//!
//! The streamed form (format 2.1, §8.5) writes the same chunks as frames after a header whose
//! index is empty, and puts the index in a trailer at the end ([`encode_trailer`],
//! [`parse_trailer`], [`resolve_stream`]).
//!
//! This module knows bytes: the header fields, the chunk grid, where chunk `i` lies and the
//! checks that tie the index to the header. Compressing and decoding chunks is done above.

use super::bytes::{Reader, Writer};
use super::index::{BlockIndex, IndexClass};
use super::source::ArchiveSource;
use super::{ErrorMode, Head, Header, SEGMENT_ALIGN};
use crate::error::{corrupt, Error, Result};

/// Format major version of chunked archives (a 1.x reader must refuse them: §8 says why).
pub const CHUNKED_MAJOR: u16 = 2;
/// Newest minor version of chunked archives this build reads.
pub const CHUNKED_MINOR: u16 = STREAMED_MINOR;
/// Minor version of seekable chunked archives (the index in the header): their bytes are 2.0.
pub const SEEKABLE_MINOR: u16 = 0;
/// Minor version of streamed chunked archives (the index in a trailer, §8.5).
pub const STREAMED_MINOR: u16 = 1;
/// Last four bytes of a streamed archive.
pub const TRAILER_MAGIC: [u8; 4] = *b"FZMI";
/// The trailer's fixed tail after the index record: u64 record length, u32 CRC, the magic.
pub const TRAILER_TAIL: usize = 16;
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
    /// The streamed form (§8.5): the header's index is empty and the real one, read from the
    /// trailer, is put here by [`resolve_stream`].
    pub streamed: bool,
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

    /// The minor version this chunking is written with.
    pub fn minor(&self) -> u16 {
        if self.streamed {
            STREAMED_MINOR
        } else {
            SEEKABLE_MINOR
        }
    }

    /// Chunks per step of the slowest dimension's grid: the chunks of one "slab" of the array
    /// (one chunk extent along dimension 0, the whole array along the others), which are
    /// consecutive in C order and cover consecutive bytes of the array.
    pub fn chunks_per_slab_row(&self, shape: &[u64]) -> u64 {
        self.grid(shape)[1..].iter().product()
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
    let streams = header.version.1 >= STREAMED_MINOR;
    let shape = &header.shape;
    if shape.is_empty() || shape.contains(&0) {
        return Err(corrupt!("a chunked archive of shape {shape:?}: needs at least one dimension, none empty"));
    }
    // The array's bytes fit in 64 bits: with no dimension empty, every product over some of
    // its dimensions (a slab's rows, a chunk grid step) is then at most this one.
    if header.num_elements()?.checked_mul(header.dtype.size() as u64).is_none() {
        return Err(corrupt!("a chunked array of {} values of shape {shape:?} overflows 64 bits", header.dtype));
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
    let empty = BlockIndex::build(IndexClass::Verbatim, &[])?;
    let c = Chunking { chunk_shape, chunk_mode, chunk_bound, index: empty, streamed: false };
    let expected = c.num_chunks(shape).ok_or_else(|| corrupt!("chunk grid of {shape:?} overflows"))?;
    if num_chunks == 0 && streams {
        return streamed_fields(r, c, data_len);
    }
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
    check_index(&index)?;
    Ok(Chunking { index, ..c })
}

/// The header of a streamed archive (§8.5): no data length (the writer did not know it) and
/// an empty verbatim index, exactly as the layout prescribes.
fn streamed_fields(r: &mut Reader<'_>, c: Chunking, data_len: u64) -> Result<Chunking> {
    if data_len != 0 {
        return Err(corrupt!("a streamed archive's header states a data length of {data_len}, not 0"));
    }
    let record = r.take(3)?;
    if record != [IndexClass::Verbatim.code(), 0, 0] {
        return Err(corrupt!("a streamed archive's header index is {record:?}, not an empty verbatim index"));
    }
    Ok(Chunking { streamed: true, ..c })
}

/// Every chunk at least one unit, the first at offset 0 (offsets are non-decreasing and
/// inside the range by [`BlockIndex::decode`]).
fn check_index(index: &BlockIndex) -> Result<()> {
    let num_chunks = index.len();
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
    Ok(())
}

/// The trailer of a streamed archive (§8.5): the index record, its length, its CRC, "FZMI".
pub fn encode_trailer(index: &BlockIndex) -> Vec<u8> {
    let mut w = Writer::default();
    index.encode(&mut w);
    let record_len = w.bytes.len() as u64;
    let crc = crc32c::crc32c(&w.bytes);
    w.u64(record_len);
    w.u32(crc);
    w.bytes.extend_from_slice(&TRAILER_MAGIC);
    w.bytes
}

/// Most bytes an index record of `blocks` blocks can take (verbatim is the largest class):
/// a reader never reads more for a trailer.
pub fn max_index_record(blocks: u64) -> u64 {
    blocks.saturating_mul(8).saturating_add(1 + 10 + 10)
}

/// The record length the fixed tail of a trailer (its last [`TRAILER_TAIL`] bytes) states,
/// after checking its magic.
pub fn trailer_record_len(tail: &[u8]) -> Result<u64> {
    let at = <[u8]>::len(tail).saturating_sub(TRAILER_TAIL);
    let tail = tail.get(at..).filter(|t| <[u8]>::len(t) == TRAILER_TAIL);
    let Some(tail) = tail else {
        return Err(Error::Truncated("the stream ends before its trailer".into()));
    };
    if tail[12..] != TRAILER_MAGIC {
        return Err(Error::Truncated(format!(
            "the archive does not end with the trailer magic \"FZMI\" (found {:02x?}): a cut or unfinished stream",
            &tail[12..]
        )));
    }
    Ok(u64::from_le_bytes(tail[..8].try_into().expect("8 bytes")))
}

/// Parse a whole trailer (`bytes` = record, length, CRC, magic, nothing else) of an archive of
/// `blocks` chunks: the magic, the length, the CRC, then the index record and its checks.
pub fn parse_trailer(bytes: &[u8], blocks: u64) -> Result<BlockIndex> {
    let record_len = trailer_record_len(bytes)?;
    let record_end = <[u8]>::len(bytes) - TRAILER_TAIL;
    if record_len != record_end as u64 {
        return Err(corrupt!("the trailer states an index of {record_len} bytes, it holds {record_end}"));
    }
    let record = &bytes[..record_end];
    let stored = u32::from_le_bytes(bytes[record_end + 8..record_end + 12].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(record);
    if stored != computed {
        return Err(Error::Checksum { what: "trailing chunk index".into(), stored, computed });
    }
    let index = BlockIndex::from_bytes(record, blocks).map_err(|e| corrupt!("trailing chunk index: {e}"))?;
    check_index(&index)?;
    Ok(index)
}

/// Complete the head of a streamed archive in `source` from its trailer: the index goes into
/// the chunking, the frames span `64 · range` bytes from the data region's start, and the
/// trailer must begin exactly there and end the archive.
pub fn resolve_stream(mut head: Head, source: &dyn ArchiveSource) -> Result<Head> {
    let Some(c) = head.header.chunking.as_mut().filter(|c| c.streamed) else {
        return Ok(head);
    };
    let total = source.len();
    let blocks = c.num_chunks(&head.header.shape).ok_or_else(|| corrupt!("chunk grid overflows"))?;
    let frames_start = head.data_start;
    if total < frames_start + TRAILER_TAIL as u64 {
        return Err(Error::Truncated(format!("a streamed archive of {total} bytes ends before its trailer")));
    }
    let record_len = trailer_record_len(&source.read_at(total - TRAILER_TAIL as u64, TRAILER_TAIL)?)?;
    let room = total - TRAILER_TAIL as u64 - frames_start;
    if record_len > room || record_len > max_index_record(blocks) {
        return Err(corrupt!(
            "the trailer states an index of {record_len} bytes; {room} bytes follow the header and \
             {blocks} chunks need at most {}",
            max_index_record(blocks)
        ));
    }
    let trailer_len = record_len + TRAILER_TAIL as u64;
    let trailer_start = total - trailer_len;
    let index = parse_trailer(&source.read_at(trailer_start, trailer_len as usize)?, blocks)?;
    let frames_len = index.range().checked_mul(CHUNK_UNIT).ok_or_else(|| corrupt!("chunk index range overflows"))?;
    if frames_start.checked_add(frames_len) != Some(trailer_start) {
        return Err(corrupt!(
            "the trailing index places the frames in {frames_len} bytes, the trailer starts {} bytes \
             after the header",
            trailer_start - frames_start
        ));
    }
    c.index = index;
    head.data_len = frames_len;
    head.trailer_len = trailer_len;
    Ok(head)
}

impl From<super::index::IndexError> for Error {
    fn from(e: super::index::IndexError) -> Self {
        Error::InvalidArgument(e.to_string())
    }
}
