//! The streaming writer: header, then each slab's chunks as frames, then the trailer.

use super::Slabs;
use crate::archive::chunked::{self, Chunking, CHUNK_UNIT};
use crate::archive::{self, ErrorMode, Header};
use crate::backend::Backend;
use crate::chunking::{self, ChunkOptions};
use crate::element::{Buffer, DType, View};
use crate::error::{Error, Result};
use crate::graph::Pipeline;
use crate::run::RunOptions;
use std::io::{Read, Write};

/// What a streamed compression needs besides the pipeline and the array's shape.
#[derive(Clone, Debug, Default)]
pub struct StreamOptions {
    /// Chunk shape and index classes, as for [`Pipeline::compress_chunked`].
    pub chunks: ChunkOptions,
    /// For a `rel` bound: the finite value range the pipeline's first quantizing stage sees
    /// of the whole array (`Some(None)`: it has no finite value), as a first pass with
    /// [`Pipeline::quantizer_value_range`] finds it, or as the user states it. The bound is
    /// resolved from it before the first frame is written (docs/FORMAT.md §8.2), and every
    /// slab is checked to lie inside it. Without it a `rel` bound is refused.
    pub range: Option<Option<(f64, f64)>>,
    pub run: RunOptions,
    /// Bytes of the array per slab (whole grid steps along dimension 0, at least one); 0:
    /// [`super::STREAM_SLAB_BYTES`]. Any value gives the same archive bytes.
    pub slab_bytes: u64,
    /// Most bytes one slab of values may take (0: no limit); a larger one is refused before
    /// the header is written.
    pub max_memory: u64,
}

/// A streamed archive written to the end.
#[derive(Debug)]
pub struct Finished<W> {
    pub out: W,
    /// The archive's header; its `stages` are those of the first chunk (as [`crate::inspect`]).
    pub header: Header,
    /// Bytes written, trailer included.
    pub archive_len: u64,
}

/// Writes a streamed chunked archive (docs/FORMAT.md §8.5) slab by slab: the header when
/// created, each slab's chunks as frames when given, the trailing index at
/// [`StreamCompressor::finish`]. The frames are byte for byte the chunks
/// [`Pipeline::compress_chunked`] writes for the same array and options.
pub struct StreamCompressor<W: Write> {
    out: W,
    /// The user's pipeline (its quantizer's view of a slab is checked against the range).
    pipeline: Pipeline,
    /// The pipeline every chunk runs (the chunk bound set).
    chunk_pipeline: Pipeline,
    backend: Backend,
    opts: RunOptions,
    header: Header,
    shape: Vec<u64>,
    slabs: Slabs,
    next_row: u64,
    /// The range a `rel` bound was resolved from, which every slab must respect.
    range: Option<Option<(f64, f64)>>,
    classes: Vec<archive::index::IndexClass>,
    lens: Vec<usize>,
    written: u64,
}

impl<W: Write> StreamCompressor<W> {
    /// Check the job and write the header. `pipeline` must take `dtype` values.
    pub fn new(
        pipeline: &Pipeline,
        backend: &Backend,
        dtype: DType,
        shape: &[usize],
        options: &StreamOptions,
        mut out: W,
    ) -> Result<Self> {
        let p = pipeline.finalized()?.into_owned();
        p.check_input_len(shape.iter().product::<usize>().max(1), shape)?;
        if let Some(want) = p.input_dtype() {
            if want != dtype {
                return Err(Error::InvalidArgument(format!(
                    "the pipeline takes {want} values, the stream holds {dtype}"
                )));
            }
        }
        let rel = p.error_bound().is_some_and(|b| b.mode == ErrorMode::Rel);
        let range = if rel { options.range } else { None };
        let bound = chunking::chunk_bound(&p, || {
            range.ok_or_else(|| {
                Error::RangeNeeded(
                    "a relative bound over a stream needs the value range before the first chunk is written: \
                     give it (a first pass over the input, or the known range) or use an absolute bound"
                        .into(),
                )
            })
        })?;
        let (mut grid, chunk_pipeline) = chunking::chunk_plan(&p, shape, dtype.size(), &options.chunks, bound)?;
        grid.streamed = true;
        let shape64: Vec<u64> = shape.iter().map(|&n| n as u64).collect();
        let slabs = Slabs::new(&grid, &shape64, dtype.size(), options.slab_bytes);
        let need = slabs.max_bytes(dtype.size());
        if options.max_memory > 0 && need > options.max_memory {
            return Err(Error::InvalidArgument(format!(
                "one slab of the stream (chunk extent {} along the first dimension × the others) needs {need} \
                 bytes, above the limit of {} bytes (--max-memory, StreamOptions::max_memory)",
                grid.chunk_shape[0], options.max_memory
            )));
        }
        let header = chunking::chunked_header(&p, dtype, shape, grid);
        let head = archive::chunked_head(&header, 0);
        out.write_all(&head)?;
        Ok(StreamCompressor {
            out,
            pipeline: p,
            chunk_pipeline,
            backend: backend.clone(),
            opts: options.run,
            header,
            shape: shape64,
            slabs,
            next_row: 0,
            range,
            classes: options.chunks.index.clone(),
            lens: Vec::new(),
            written: head.len() as u64,
        })
    }

    fn grid(&self) -> &Chunking {
        self.header.chunking.as_ref().expect("a chunked header")
    }

    /// The archive's header (no stages: those come with the chunks).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Shape of the next slab to give (`None`: every slab was given).
    pub fn next_slab_shape(&self) -> Option<Vec<usize>> {
        (self.next_row < self.slabs.rows_total())
            .then(|| self.slabs.shape_of(&self.slabs.at(self.next_row).0).iter().map(|&n| n as usize).collect())
    }

    /// Bytes of the largest slab (what one slab of values costs in memory).
    pub fn max_slab_bytes(&self) -> u64 {
        self.slabs.max_bytes(self.header.dtype.size())
    }

    /// Chunks written so far, of [`StreamCompressor::num_chunks`].
    pub fn chunks_done(&self) -> u64 {
        self.lens.len() as u64
    }

    pub fn num_chunks(&self) -> u64 {
        self.grid().num_chunks(&self.shape).unwrap_or(0)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Compress the next slab (its values in C order, of [`StreamCompressor::next_slab_shape`])
    /// and write its chunks.
    pub fn write_slab(&mut self, slab: View) -> Result<()> {
        let (rows, ids) = self.slabs.at(self.next_row);
        if rows.is_empty() {
            return Err(Error::InvalidArgument("every slab of the array was written already".into()));
        }
        let slab_shape = self.slabs.shape_of(&rows);
        let shape_usize: Vec<usize> = slab_shape.iter().map(|&n| n as usize).collect();
        self.pipeline.check_input(slab, &shape_usize)?;
        if slab.dtype() != self.header.dtype {
            return Err(Error::InvalidArgument(format!(
                "a slab of {} values, the stream holds {}",
                slab.dtype(),
                self.header.dtype
            )));
        }
        if let Some(range) = self.range {
            self.check_range(slab, &shape_usize, range, &rows)?;
        }
        let grid = self.header.chunking.as_ref().expect("a chunked header");
        let frames = chunking::compress_chunks(
            &self.chunk_pipeline,
            &self.backend,
            grid,
            &self.shape,
            slab,
            &slab_shape,
            rows.start,
            ids,
            self.opts,
        )?;
        for frame in &frames {
            let padded = (frame.len() as u64).div_ceil(CHUNK_UNIT) * CHUNK_UNIT;
            self.out.write_all(frame)?;
            self.out.write_all(&[0u8; CHUNK_UNIT as usize][..(padded - frame.len() as u64) as usize])?;
            if self.lens.is_empty() {
                // Reports show the pipeline every chunk ran, as `inspect` does.
                self.header.stages = archive::parse_head(frame)?.header.stages;
            }
            self.lens.push(frame.len());
            self.written += padded;
        }
        self.next_row = rows.end;
        Ok(())
    }

    /// The values the quantizer sees of this slab must lie in the range the bound came from:
    /// otherwise the archive would not obey the bound it states.
    fn check_range(
        &self,
        slab: View,
        shape: &[usize],
        range: Option<(f64, f64)>,
        rows: &std::ops::Range<u64>,
    ) -> Result<()> {
        let seen = self.pipeline.quantizer_value_range(slab, shape)?;
        let inside = match (seen, range) {
            (None, _) => true,
            (Some((lo, hi)), Some((min, max))) => min <= lo && hi <= max,
            (Some(_), None) => false,
        };
        if inside {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "rows {}..{} hold values in {seen:?}, outside the value range {range:?} the relative bound was \
             resolved from",
            rows.start, rows.end
        )))
    }

    /// Read the next slab's values (little-endian, C order) from `input` and write its chunks;
    /// `false` when every slab was written. An input that ends early is an error.
    pub fn write_slab_from(&mut self, input: &mut (impl Read + ?Sized)) -> Result<bool> {
        let Some(shape) = self.next_slab_shape() else { return Ok(false) };
        let n: usize = shape.iter().product();
        let mut slab = Buffer::zeroed(self.header.dtype, n)?;
        let want = slab.byte_len();
        let got = read_full(input, slab.native_bytes_mut())?;
        if got != want {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the input ended {got} bytes into a slab of {want} (rows from {})", self.next_row),
            )));
        }
        slab.from_le_in_place();
        self.write_slab(slab.view())?;
        Ok(true)
    }

    /// Write the trailing index once every slab was given.
    pub fn finish(mut self) -> Result<Finished<W>> {
        if self.next_row < self.slabs.rows_total() {
            return Err(Error::InvalidArgument(format!(
                "the stream was finished after {} of {} rows",
                self.next_row,
                self.slabs.rows_total()
            )));
        }
        let (index, _) = chunked::build_index(&self.lens, self.shape.len(), &self.classes)?;
        let trailer = chunked::encode_trailer(&index);
        self.out.write_all(&trailer)?;
        self.out.flush()?;
        self.written += trailer.len() as u64;
        let archive_len = self.written;
        if let Some(c) = self.header.chunking.as_mut() {
            c.index = index;
        }
        Ok(Finished { out: self.out, header: self.header, archive_len })
    }
}

/// Fill `dst` from `input`; how many bytes arrived (fewer only when the input ends).
pub(crate) fn read_full(input: &mut (impl Read + ?Sized), dst: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < dst.len() {
        match input.read(&mut dst[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
