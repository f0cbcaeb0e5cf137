//! The streaming reader: frames in order from any reader (a pipe), a slab at a time, then the
//! trailer, checked against the frames it indexes.

use super::Slabs;
use crate::archive::chunked::{self, CHUNK_UNIT, TRAILER_TAIL};
use crate::archive::{self, Head, Header};
use crate::element::Buffer;
use crate::error::{corrupt, Error, Result};
use crate::graph::chunks::{check_chunk, copy_box, in_chunk};
use crate::run::Decoder;
use std::io::Read;
use std::ops::Range;

/// Decoded rows `rows` of dimension 0 of the array: `data` in C order, of shape `shape`.
#[derive(Debug)]
pub struct Slab {
    pub rows: Range<u64>,
    pub shape: Vec<u64>,
    pub data: Buffer,
}

/// Decodes a streamed chunked archive (docs/FORMAT.md §8.5) from a reader that cannot seek:
/// the header when created, then each slab's frames in order ([`StreamDecoder::next_slab`]),
/// and after the last slab the trailer, whose index must match the frames read and end the
/// stream. Every frame is checked as a chunk of a seekable archive is (its CRCs, its header
/// against the archive's) before its values are returned.
pub struct StreamDecoder<R: Read> {
    input: R,
    decoder: Decoder,
    head: Head,
    slabs: Slabs,
    next_row: u64,
    /// Size of every frame read so far, in 64-byte units.
    units: Vec<u64>,
    /// Bytes of the trailer, once read.
    trailer_len: u64,
    finished: bool,
}

/// Read exactly `n` bytes, or say where the stream ended. The buffer grows as bytes arrive,
/// so a forged length costs memory only as far as the stream really goes.
fn read_exact(input: &mut impl Read, n: usize, what: impl Fn() -> String) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    input.take(n as u64).read_to_end(&mut buf)?;
    if buf.len() < n {
        return Err(Error::Truncated(format!("the stream ends {} bytes into {} ({n} bytes)", buf.len(), what())));
    }
    Ok(buf)
}

impl<R: Read> StreamDecoder<R> {
    /// Read and check the header of a streamed archive (anything else is refused).
    pub fn new(mut input: R, decoder: Decoder) -> Result<Self> {
        let max = decoder.limits().max_memory;
        let mut bytes = read_exact(&mut input, archive::PREAMBLE_BYTES, || "the preamble".into())?;
        let header_len = archive::header_len(&bytes)?;
        if header_len as u64 > max {
            return Err(corrupt!("a header of {header_len} bytes"));
        }
        bytes.extend(read_exact(&mut input, header_len - bytes.len(), || "the header".into())?);
        let head = archive::parse_head(&bytes)?;
        if !head.is_streamed() {
            return Err(Error::InvalidArgument(
                "not a streamed archive (docs/FORMAT.md §8.5): decode it whole or by region".into(),
            ));
        }
        let padding = read_exact(&mut input, head.data_start as usize - header_len, || "the header padding".into())?;
        if padding.iter().any(|&b| b != 0) {
            return Err(corrupt!("non-zero padding after the header"));
        }
        let c = head.header.chunking.as_ref().expect("a streamed header");
        let slabs = Slabs::new(c, &head.header.shape, head.header.dtype.size(), 0);
        let d = StreamDecoder {
            input,
            decoder,
            head,
            slabs,
            next_row: 0,
            units: Vec::new(),
            trailer_len: 0,
            finished: false,
        };
        d.check_slab_memory()?;
        Ok(d)
    }

    /// Decode slabs of about `bytes` bytes (whole grid steps along dimension 0; 0: the
    /// default [`super::STREAM_SLAB_BYTES`]); only before the first slab.
    pub fn with_slab_bytes(mut self, bytes: u64) -> Result<Self> {
        if self.next_row > 0 {
            return Err(Error::InvalidArgument("the slab size is set before the first slab".into()));
        }
        let c = self.head.header.chunking.as_ref().expect("a streamed header");
        self.slabs = Slabs::new(c, &self.head.header.shape, self.head.header.dtype.size(), bytes);
        self.check_slab_memory()?;
        Ok(self)
    }

    fn check_slab_memory(&self) -> Result<()> {
        let (max, header) = (self.decoder.limits().max_memory, &self.head.header);
        let need = self.slabs.max_bytes(header.dtype.size());
        if need > max {
            let c = header.chunking.as_ref().expect("a streamed header");
            return Err(Error::InvalidArgument(format!(
                "a slab of this stream (chunk shape {:?} over shape {:?}) needs {need} bytes, above the \
                 decode limit of {max} bytes (--max-memory, DecodeLimits)",
                c.chunk_shape, header.shape
            )));
        }
        Ok(())
    }

    /// The archive's header (the chunk index is known only at the end of the stream).
    pub fn header(&self) -> &Header {
        &self.head.header
    }

    pub fn num_chunks(&self) -> u64 {
        let c = self.head.header.chunking.as_ref().expect("a streamed header");
        c.num_chunks(&self.head.header.shape).unwrap_or(0)
    }

    /// Chunks decoded so far.
    pub fn chunks_done(&self) -> u64 {
        self.units.len() as u64
    }

    /// Bytes of the archive read so far.
    pub fn bytes_read(&self) -> u64 {
        self.head.data_start + self.units.iter().sum::<u64>() * CHUNK_UNIT + self.trailer_len
    }

    /// The next slab of decoded rows; `None` once the trailer was read and checked.
    pub fn next_slab(&mut self) -> Result<Option<Slab>> {
        let (rows, ids) = self.slabs.at(self.next_row);
        if rows.is_empty() {
            if !self.finished {
                self.read_trailer()?;
                self.finished = true;
            }
            return Ok(None);
        }
        let frames = ids.clone().map(|i| self.read_frame(i)).collect::<Result<Vec<_>>>()?;
        let header = &self.head.header;
        let c = header.chunking.as_ref().expect("a streamed header");
        let shape = &header.shape;
        // The slab's chunks at once: on the CPU's pool or a GPU's lanes.
        let decoded = self.decoder.map_chunks(frames.len(), |decoder, k| {
            let i = ids.start + k as u64;
            let inner = chunked::chunk_archive(&frames[k], i)?;
            let plan = decoder.plan(inner).map_err(|e| in_chunk(e, i))?;
            let (_, extent) = c.chunk_box(shape, i);
            check_chunk(header, c, i, &extent, &plan)?;
            decoder.run(plan).map(|d| d.data).map_err(|e| in_chunk(e, i))
        })?;
        let slab_shape = self.slabs.shape_of(&rows);
        let elem = header.dtype.size();
        let n: u64 = slab_shape.iter().product();
        let mut data = Buffer::zeroed(header.dtype, n as usize)?;
        for (k, part) in decoded.iter().enumerate() {
            let (mut origin, extent) = c.chunk_box(shape, ids.start + k as u64);
            origin[0] -= rows.start;
            let zero = vec![0; extent.len()];
            copy_box(part.native_bytes(), &extent, &zero, data.native_bytes_mut(), &slab_shape, &origin, &extent, elem);
        }
        self.next_row = rows.end;
        Ok(Some(Slab { rows, shape: slab_shape, data }))
    }

    /// Frame `i` with its padding: its length from its own header (at most the decode limit),
    /// then the zero padding to the next 64-byte boundary (checked by `chunk_archive`).
    fn read_frame(&mut self, i: u64) -> Result<Vec<u8>> {
        let what = || format!("chunk {i}");
        let mut frame = read_exact(&mut self.input, archive::PREAMBLE_BYTES, what)?;
        if frame[..archive::MAGIC.len()] != archive::MAGIC {
            return Err(corrupt!("chunk {i} does not start with the archive magic"));
        }
        let header_len = archive::header_len(&frame)?;
        frame.extend(read_exact(&mut self.input, header_len - frame.len(), what)?);
        let len = archive::announced_len(&frame).map_err(|e| in_chunk(e, i))?;
        let max = self.decoder.limits().max_memory;
        if len > max {
            return Err(Error::InvalidArgument(format!(
                "chunk {i} announces {len} bytes, above the decode limit of {max} bytes"
            )));
        }
        let padded = len.div_ceil(CHUNK_UNIT) * CHUNK_UNIT;
        frame.extend(read_exact(&mut self.input, (padded - frame.len() as u64) as usize, what)?);
        self.units.push(padded / CHUNK_UNIT);
        Ok(frame)
    }

    /// The trailer: it must end the stream, verify, and index exactly the frames read.
    fn read_trailer(&mut self) -> Result<()> {
        let blocks = self.units.len() as u64;
        let most = chunked::max_index_record(blocks) + TRAILER_TAIL as u64;
        let mut bytes = Vec::new();
        (&mut self.input).take(most + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > most {
            return Err(corrupt!("more than {most} bytes follow the last chunk, the most a trailer takes"));
        }
        let index = chunked::parse_trailer(&bytes, blocks)?;
        let mut offset = 0;
        for (i, &units) in self.units.iter().enumerate() {
            let i = i as u64;
            let bad = |e| corrupt!("trailing chunk index: {e}");
            let (at, size) = (index.block_offset(i).map_err(bad)?, index.block_size(i).map_err(bad)?);
            if (at, size) != (offset, units) {
                return Err(corrupt!(
                    "the trailing index places chunk {i} at unit {at} ({size} units); the stream has it at \
                     unit {offset} ({units} units)"
                ));
            }
            offset += units;
        }
        if index.range() != offset {
            return Err(corrupt!("the trailing index spans {} units, the frames {offset}", index.range()));
        }
        self.trailer_len = bytes.len() as u64;
        Ok(())
    }
}
