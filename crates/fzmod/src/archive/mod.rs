//! The `.fzm` container, section by section as in docs/FORMAT.md.
//!
//! This module knows bytes, not algorithms: it writes and parses the preamble, the header
//! body (pipeline, shape, bound, segment table) and the aligned, checksummed segments.

mod bytes;
pub mod chunked;
mod crc_join;
pub mod index;
pub mod source;

pub(crate) use bytes::{Reader, Writer};

use crate::element::DType;
use crate::error::{corrupt, Error, Result};

/// First eight bytes of every archive: `\x89 F Z M \r \n \x1a \n` (catches text-mode damage).
pub const MAGIC: [u8; 8] = [0x89, b'F', b'Z', b'M', b'\r', b'\n', 0x1a, b'\n'];
/// Format major version written by this build; a newer major is refused.
pub const FORMAT_MAJOR: u16 = 1;
/// Format minor version written by this build; newer minors only add optional data.
pub const FORMAT_MINOR: u16 = 0;
/// Every segment starts at a multiple of this many bytes from the archive start.
pub const SEGMENT_ALIGN: usize = 64;
/// Preamble: magic, major, minor, body length.
const PREAMBLE_LEN: usize = 16;
/// Sanity limits on header counts (a header is kilobytes; these only stop absurd values).
const MAX_STAGES: u64 = 4096;
const MAX_PORTS: u64 = 256;
/// Most dimensions a shape may have (docs/FORMAT.md §2).
pub const MAX_DIMS: usize = 16;

/// How the user stated the error bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorMode {
    /// Absolute: |x − x̂| ≤ eb.
    Abs,
    /// Relative to the value range of the finite input values: |x − x̂| ≤ eb·(max − min).
    Rel,
}

impl ErrorMode {
    pub fn code(self) -> u8 {
        match self {
            ErrorMode::Abs => 0,
            ErrorMode::Rel => 1,
        }
    }
    pub fn from_code(c: u8) -> Result<Self> {
        match c {
            0 => Ok(ErrorMode::Abs),
            1 => Ok(ErrorMode::Rel),
            _ => Err(corrupt!("unknown error-bound mode code {c}")),
        }
    }
    /// Accepts `abs`, `rel` and `noa` (FZGPUModules' name for value-range relative).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "abs" => Ok(ErrorMode::Abs),
            "rel" | "noa" => Ok(ErrorMode::Rel),
            _ => Err(Error::InvalidArgument(format!("unknown error-bound mode '{s}' (expected abs, rel or noa)"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            ErrorMode::Abs => "abs",
            ErrorMode::Rel => "rel",
        }
    }
}

/// Where a stage input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputRef {
    /// The pipeline input array.
    External,
    /// Output port `port` of the stage at index `stage` (an earlier stage).
    Stage { stage: usize, port: usize },
}

/// One stage as recorded in the header.
#[derive(Clone, Debug, PartialEq)]
pub struct StageRecord {
    pub type_id: u16,
    pub name: String,
    pub param_version: u32,
    pub params: Vec<u8>,
    pub inputs: Vec<InputRef>,
}

/// One archived (unconnected) output port.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentEntry {
    pub stage: usize,
    pub port: usize,
    pub dtype: DType,
    /// Offset from the start of the data region; a multiple of [`SEGMENT_ALIGN`].
    pub offset: u64,
    pub len: u64,
    pub crc32c: u32,
}

/// Everything in the archive except the segment bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub version: (u16, u16),
    pub dtype: DType,
    /// C order, slowest dimension first.
    pub shape: Vec<u64>,
    pub error_mode: ErrorMode,
    pub error_bound: f64,
    /// Preset name, empty for a custom pipeline.
    pub preset: String,
    pub stages: Vec<StageRecord>,
    pub segments: Vec<SegmentEntry>,
    /// Chunked archives (format 2, docs/FORMAT.md §8): the chunk grid, the bound each chunk
    /// was given and the chunk index. Their `stages` and `segments` are empty (each chunk is
    /// an archive of its own), except that [`crate::inspect`] shows the first chunk's stages.
    pub chunking: Option<chunked::Chunking>,
}

impl Header {
    /// Number of elements of the pipeline input (checked product of the shape).
    pub fn num_elements(&self) -> Result<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| corrupt!("shape {:?} overflows", self.shape))
    }
}

fn align_up(x: usize) -> usize {
    x.div_ceil(SEGMENT_ALIGN) * SEGMENT_ALIGN
}

/// Serialise a header and its segments into archive bytes. Segment offsets, lengths and
/// checksums in `header.segments` are recomputed from `segments` (same order).
pub fn write(header: Header, segments: &[Vec<u8>]) -> Vec<u8> {
    let lens: Vec<usize> = segments.iter().map(Vec::len).collect();
    let copied = write_with(header, &lens, |slots| {
        for (slot, segment) in slots.iter_mut().zip(segments) {
            crate::element::copy_on_all_cores(slot, segment);
        }
        Ok::<_, std::convert::Infallible>(vec![None; slots.len()])
    });
    match copied {
        Ok(bytes) => bytes,
        Err(never) => match never {},
    }
}

/// Serialise a header and segments of the given lengths, which `fill` writes straight into
/// their place in the archive (a device download lands there without a host copy). Offsets,
/// lengths and checksums in `header.segments` are recomputed; `fill` returns, per segment, the
/// CRC-32C it took of the bytes as it wrote them (`None`: computed here, in a pass of its own).
pub(crate) fn write_with<E>(
    mut header: Header,
    lens: &[usize],
    fill: impl FnOnce(&mut [&mut [u8]]) -> std::result::Result<Vec<Option<u32>>, E>,
) -> std::result::Result<Vec<u8>, E> {
    assert_eq!(header.segments.len(), lens.len(), "one table entry per segment");
    let mut offset = 0u64;
    for (entry, &len) in header.segments.iter_mut().zip(lens) {
        entry.offset = offset;
        entry.len = len as u64;
        offset = align_up((offset as usize) + len) as u64;
    }
    let data_len = header.segments.last().map_or(0, |e| e.offset + e.len);
    // Checksums are fixed-width fields: the body's length does not depend on their values.
    let body_len = encode_body(&header, data_len).len();
    let header_end = PREAMBLE_LEN + body_len + 4;
    // The data area starts aligned, also where it is empty (FORMAT.md §1: the archive then
    // ends at D), as the reader's announced length has it.
    let data_start = align_up(header_end);
    // One allocation of the final size (large ones on huge pages, cleared on every core),
    // filled in place.
    let mut out: Vec<u8> = crate::element::zeroed_vec(data_start + data_len as usize);
    let (head, mut rest) = out.split_at_mut(data_start);
    let mut slots = Vec::with_capacity(lens.len());
    let mut at = 0;
    for entry in &header.segments {
        let (_, from_offset) = std::mem::take(&mut rest).split_at_mut(entry.offset as usize - at);
        let (slot, after) = from_offset.split_at_mut(entry.len as usize);
        slots.push(slot);
        rest = after;
        at = (entry.offset + entry.len) as usize;
    }
    let taken = fill(&mut slots)?;
    assert_eq!(taken.len(), slots.len(), "one checksum or None per segment");
    for ((entry, slot), taken) in header.segments.iter_mut().zip(&slots).zip(taken) {
        entry.crc32c = taken.unwrap_or_else(|| checksum(slot));
    }
    let body = encode_body(&header, data_len);
    debug_assert_eq!(body.len(), body_len, "checksums are fixed-width");
    let mut at = 0;
    let (major, minor) = match &header.chunking {
        Some(c) => (chunked::CHUNKED_MAJOR, c.minor()),
        None => (FORMAT_MAJOR, FORMAT_MINOR),
    };
    for piece in [&MAGIC[..], &major.to_le_bytes(), &minor.to_le_bytes(), &(body.len() as u32).to_le_bytes(), &body] {
        head[at..at + piece.len()].copy_from_slice(piece);
        at += piece.len();
    }
    let crc = crc32c::crc32c(&head[..at]);
    head[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The header of a chunked archive (format 2, docs/FORMAT.md §8) up to the data region:
/// preamble, body, CRC and the zero padding to the next 64-byte boundary. A streamed
/// chunking (§8.5) is written with its minor version, `data_len` 0 and its empty index.
pub fn chunked_head(header: &Header, data_len: u64) -> Vec<u8> {
    let c = header.chunking.as_ref().expect("a chunked header");
    assert!(header.segments.is_empty(), "a chunked header has no segments");
    let body = encode_body(header, data_len);
    let mut head = Vec::with_capacity(align_up(PREAMBLE_LEN + body.len() + 4));
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&chunked::CHUNKED_MAJOR.to_le_bytes());
    head.extend_from_slice(&c.minor().to_le_bytes());
    head.extend_from_slice(&(body.len() as u32).to_le_bytes());
    head.extend_from_slice(&body);
    let crc = crc32c::crc32c(&head);
    head.extend_from_slice(&crc.to_le_bytes());
    head.resize(align_up(head.len()), 0);
    head
}

/// Serialise a seekable chunked archive (format 2.0, docs/FORMAT.md §8): `header.chunking`
/// holds the index built from `chunks`' lengths ([`chunked::build_index`]), whose archives
/// follow the header at 64-byte boundaries.
pub fn write_chunked(header: Header, chunks: &[Vec<u8>], data_len: u64) -> Vec<u8> {
    use rayon::prelude::*;
    let head = chunked_head(&header, data_len);
    let mut out = crate::element::zeroed_vec(head.len() + data_len as usize);
    let (head_place, mut rest) = out.split_at_mut(head.len());
    head_place.copy_from_slice(&head);
    // Each chunk's place (the padding between them stays zero), filled on every core: a
    // GPU's lanes hand over tens of MB of chunk archives at once.
    let mut places = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        let (place, after) = std::mem::take(&mut rest).split_at_mut(chunk.len());
        places.push(place);
        let padding = (align_up(chunk.len()) - chunk.len()).min(after.len());
        rest = &mut after[padding..];
    }
    places.into_par_iter().zip(chunks).for_each(|(place, chunk)| place.copy_from_slice(chunk));
    out
}

/// CRC-32C of a segment, computed in 1 MiB pieces on every core and joined (the same value
/// as one pass; large segments made the checksum a visible part of end-to-end time).
pub(crate) fn checksum(bytes: &[u8]) -> u32 {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 20;
    if bytes.len() <= PIECE {
        return crc32c::crc32c(bytes);
    }
    checksum_of_pieces(bytes.par_chunks(PIECE).map(|piece| (crc32c::crc32c(piece), piece.len())).collect())
}

/// The CRC-32C of consecutive pieces, from each piece's own CRC-32C and length, in order
/// (crc_join.rs).
pub(crate) fn checksum_of_pieces(pieces: Vec<(u32, usize)>) -> u32 {
    pieces.into_iter().fold(0, |crc, (piece_crc, len)| crc_join::join(crc, piece_crc, len as u64))
}

fn encode_body(h: &Header, data_len: u64) -> Vec<u8> {
    let mut w = Writer::default();
    w.varint(data_len);
    w.u8(h.dtype.code());
    w.varint(h.shape.len() as u64);
    for &d in &h.shape {
        w.varint(d);
    }
    w.u8(h.error_mode.code());
    w.f64(h.error_bound);
    w.blob(h.preset.as_bytes());
    if let Some(c) = &h.chunking {
        chunked::encode_fields(c, &mut w);
        return w.bytes;
    }
    w.varint(h.stages.len() as u64);
    for s in &h.stages {
        w.varint(u64::from(s.type_id));
        w.blob(s.name.as_bytes());
        w.varint(u64::from(s.param_version));
        w.blob(&s.params);
        w.varint(s.inputs.len() as u64);
        for input in &s.inputs {
            match *input {
                InputRef::External => w.varint(0),
                InputRef::Stage { stage, port } => {
                    w.varint(stage as u64 + 1);
                    w.varint(port as u64);
                }
            }
        }
    }
    w.varint(h.segments.len() as u64);
    for e in &h.segments {
        w.varint(e.stage as u64);
        w.varint(e.port as u64);
        w.u8(e.dtype.code());
        w.varint(e.offset);
        w.varint(e.len);
        w.u32(e.crc32c);
    }
    w.bytes
}

/// A parsed archive: the header plus verified views of its segments.
#[derive(Debug)]
pub struct ParsedArchive<'a> {
    pub header: Header,
    /// Segment bytes in table order, each checksum-verified.
    pub segments: Vec<&'a [u8]>,
    /// Offset of the data region (chunked archives: the chunks start there).
    pub data_start: usize,
    /// Bytes of the data region (of a streamed archive: its frames, without the trailer).
    pub data_len: u64,
}

/// Bytes needed to know an archive's length: the preamble, and then the body's first field.
pub const PREAMBLE_BYTES: usize = PREAMBLE_LEN;

/// The total length an archive announces, from its first bytes: the preamble and at least the
/// header body's first field (`data_len`). Lets a reader of a stream stop at the archive's end
/// instead of reading until the stream ends (which `/dev/zero` never does).
pub fn announced_len(head: &[u8]) -> Result<u64> {
    if head.len() < MAGIC.len() || head[..MAGIC.len()] != MAGIC {
        return Err(Error::BadMagic);
    }
    let preamble = head.get(..PREAMBLE_LEN).ok_or_else(|| Error::Truncated("preamble cut short".into()))?;
    let body_len = u32::from_le_bytes(preamble[12..16].try_into().expect("4 bytes")) as usize;
    let data_len = Reader::new(&head[PREAMBLE_LEN..], "header").varint()?;
    let data_start = align_up(PREAMBLE_LEN + body_len + 4) as u64;
    data_start.checked_add(data_len).ok_or_else(|| corrupt!("data length {data_len} overflows"))
}

/// The parsed header of an archive and where its data region lies.
#[derive(Debug)]
pub struct Head {
    pub header: Header,
    /// Offset of the data region from the archive start.
    pub data_start: u64,
    /// Bytes of the data region.
    pub data_len: u64,
    /// Bytes after the data region: a streamed archive's trailer (docs/FORMAT.md §8.5), known
    /// once [`chunked::resolve_stream`] has read it; 0 otherwise.
    pub trailer_len: u64,
}

impl Head {
    /// Total length of the archive the header announces (with a streamed archive's trailer
    /// once resolved).
    pub fn archive_len(&self) -> Result<u64> {
        self.data_start
            .checked_add(self.data_len)
            .and_then(|n| n.checked_add(self.trailer_len))
            .ok_or_else(|| corrupt!("data length {} overflows", self.data_len))
    }

    /// Is this the header of a streamed archive (§8.5)?
    pub fn is_streamed(&self) -> bool {
        self.header.chunking.as_ref().is_some_and(|c| c.streamed)
    }
}

/// Bytes from the archive start to the end of the header CRC, from the first 16 bytes: what
/// a reader of a file reads before [`parse_head`].
pub fn header_len(preamble: &[u8]) -> Result<usize> {
    if preamble.len() < MAGIC.len() || preamble[..MAGIC.len()] != MAGIC {
        return Err(if MAGIC.starts_with(preamble) {
            Error::Truncated(format!("{} bytes, shorter than the magic", preamble.len()))
        } else {
            Error::BadMagic
        });
    }
    let p = preamble.get(..PREAMBLE_LEN).ok_or_else(|| Error::Truncated("preamble cut short".into()))?;
    let body_len = u32::from_le_bytes(p[12..16].try_into().expect("4 bytes")) as usize;
    Ok(PREAMBLE_LEN + body_len + 4)
}

/// Parse and verify the header alone (magic, version, header CRC, body, chunk index):
/// `bytes` starts at the archive start and holds at least [`header_len`] bytes.
pub fn parse_head(bytes: &[u8]) -> Result<Head> {
    let end = header_len(bytes)?;
    let mut pre = Reader::new(bytes, "preamble");
    pre.take(MAGIC.len())?;
    let (major, minor) = (pre.u16()?, pre.u16()?);
    if major != FORMAT_MAJOR && major != chunked::CHUNKED_MAJOR {
        return Err(Error::UnsupportedVersion { major, minor, supported: chunked::CHUNKED_MAJOR });
    }
    if bytes.len() < end {
        return Err(Error::Truncated(format!("header announces {} bytes, archive has {}", end, bytes.len())));
    }
    let crc_end = end - 4;
    let stored = u32::from_le_bytes(bytes[crc_end..end].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&bytes[..crc_end]);
    if stored != computed {
        return Err(Error::Checksum { what: "header".into(), stored, computed });
    }
    let (header, data_len) = decode_body(&bytes[PREAMBLE_LEN..crc_end], (major, minor))?;
    Ok(Head { header, data_start: align_up(end) as u64, data_len, trailer_len: 0 })
}

/// Parse and verify archive bytes: magic, version, header CRC, layout, segment CRCs. For a
/// chunked archive the chunks are checked when they are read ([`chunked::chunk_archive`]).
pub fn parse(data: &[u8]) -> Result<ParsedArchive<'_>> {
    let head = chunked::resolve_stream(parse_head(data)?, &data)?;
    let expected_len = head.archive_len()?;
    let Head { header, data_start, data_len, .. } = head;
    let crc_end = header_len(data)? - 4;
    let data_start = data_start as usize;
    let actual = data.len() as u64;
    if actual < expected_len {
        return Err(Error::Truncated(format!("archive is {actual} bytes, header announces {expected_len}")));
    }
    if actual > expected_len {
        return Err(corrupt!("{} trailing bytes after the last segment", actual - expected_len));
    }
    if data[crc_end + 4..data_start.min(data.len())].iter().any(|&b| b != 0) {
        return Err(corrupt!("non-zero padding after the header"));
    }
    let region = &data[data_start..];
    let mut segments = Vec::with_capacity(header.segments.len());
    let mut next_free = 0u64;
    for (i, e) in header.segments.iter().enumerate() {
        let end = e.offset.checked_add(e.len).filter(|&end| end <= data_len);
        let Some(end) = end else {
            return Err(corrupt!("segment {i} [{}, +{}) lies outside the data region", e.offset, e.len));
        };
        if e.offset % SEGMENT_ALIGN as u64 != 0 || e.offset < next_free {
            return Err(corrupt!("segment {i} at offset {} is misaligned or overlaps", e.offset));
        }
        let bytes = &region[e.offset as usize..end as usize];
        let computed = checksum(bytes);
        if computed != e.crc32c {
            return Err(Error::Checksum {
                what: format!("segment {i} (stage {}, port {})", e.stage, e.port),
                stored: e.crc32c,
                computed,
            });
        }
        if !region[next_free as usize..e.offset as usize].iter().all(|&b| b == 0) {
            return Err(corrupt!("non-zero padding before segment {i}"));
        }
        next_free = end;
        segments.push(bytes);
    }
    Ok(ParsedArchive { header, segments, data_start, data_len })
}

fn decode_body(body: &[u8], version: (u16, u16)) -> Result<(Header, u64)> {
    let mut r = Reader::new(body, "header");
    let data_len = r.varint()?;
    let dtype_code = r.u8()?;
    let dtype = DType::from_code(dtype_code).ok_or_else(|| corrupt!("unknown element type code {dtype_code}"))?;
    let ndim = r.count(MAX_DIMS as u64, "number of dimensions")?;
    let shape = (0..ndim).map(|_| r.varint()).collect::<Result<Vec<_>>>()?;
    let error_mode = ErrorMode::from_code(r.u8()?)?;
    let error_bound = r.f64()?;
    let preset = r.string()?;
    if version.0 == chunked::CHUNKED_MAJOR {
        let mut header = Header {
            version,
            dtype,
            shape,
            error_mode,
            error_bound,
            preset,
            stages: Vec::new(),
            segments: Vec::new(),
            chunking: None,
        };
        header.chunking = Some(chunked::decode_fields(&mut r, &header, data_len)?);
        // As in 1.x: a newer minor may append fields this build does not know.
        let newer_minor = version.1 > chunked::CHUNKED_MINOR;
        if !newer_minor {
            r.finish()?;
        }
        return Ok((header, data_len));
    }
    let num_stages = r.count(MAX_STAGES, "number of stages")?;
    let mut stages = Vec::with_capacity(num_stages);
    for index in 0..num_stages {
        let type_id = u16::try_from(r.varint()?).map_err(|_| corrupt!("stage type id too large"))?;
        let name = r.string()?;
        let param_version = u32::try_from(r.varint()?).map_err(|_| corrupt!("parameter version too large"))?;
        let params = r.blob()?.to_vec();
        let num_inputs = r.count(MAX_PORTS, "number of stage inputs")?;
        let mut inputs = Vec::with_capacity(num_inputs);
        for _ in 0..num_inputs {
            let source = r.varint()?;
            inputs.push(if source == 0 {
                InputRef::External
            } else {
                let stage = (source - 1) as usize;
                if stage >= index {
                    return Err(corrupt!("stage {index} ('{name}') reads stage {stage}, which does not precede it"));
                }
                InputRef::Stage { stage, port: r.count(MAX_PORTS, "port index")? }
            });
        }
        stages.push(StageRecord { type_id, name, param_version, params, inputs });
    }
    let num_segments = r.count(MAX_STAGES * MAX_PORTS, "number of segments")?;
    let mut segments = Vec::with_capacity(num_segments.min(1024));
    for index in 0..num_segments {
        let stage = r.count(MAX_STAGES, "segment stage")?;
        if stage >= num_stages {
            return Err(corrupt!("segment {index} names stage {stage}, but the archive has {num_stages} stages"));
        }
        let port = r.count(MAX_PORTS, "segment port")?;
        let code = r.u8()?;
        let dtype = DType::from_code(code).ok_or_else(|| corrupt!("unknown segment element type {code}"))?;
        let offset = r.varint()?;
        let len = r.varint()?;
        let crc32c = r.u32()?;
        segments.push(SegmentEntry { stage, port, dtype, offset, len, crc32c });
    }
    // A newer minor version may append fields this build does not know: ignore them.
    let newer_minor = version.1 > FORMAT_MINOR;
    if !newer_minor {
        r.finish()?;
    }
    Ok((Header { version, dtype, shape, error_mode, error_bound, preset, stages, segments, chunking: None }, data_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piecewise_checksum_equals_one_pass() {
        let data: Vec<u8> = (0..(9u32 << 20) + 12345).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in [0, 1, 1 << 20, (1 << 20) + 1, (4 << 20) - 1, data.len()] {
            assert_eq!(checksum(&data[..len]), crc32c::crc32c(&data[..len]), "{len}");
        }
    }

    /// A one-stage header whose single segment claims to come from stage `segment_stage`.
    fn header_with_segment_of(segment_stage: usize) -> Header {
        Header {
            version: (FORMAT_MAJOR, FORMAT_MINOR),
            dtype: DType::F32,
            shape: vec![4],
            error_mode: ErrorMode::Abs,
            error_bound: 0.0,
            preset: String::new(),
            stages: vec![StageRecord {
                type_id: 1,
                name: "only".into(),
                param_version: 1,
                params: vec![],
                inputs: vec![InputRef::External],
            }],
            segments: vec![SegmentEntry {
                stage: segment_stage,
                port: 0,
                dtype: DType::U8,
                offset: 0,
                len: 0,
                crc32c: 0,
            }],
            chunking: None,
        }
    }

    #[test]
    fn the_announced_length_is_the_archive_length() {
        let archive = write(header_with_segment_of(0), &[vec![7; 100]]);
        for head in [&archive[..PREAMBLE_BYTES + 1], &archive[..]] {
            assert_eq!(announced_len(head).unwrap(), archive.len() as u64);
        }
        assert!(matches!(announced_len(&[0u8; 64]), Err(Error::BadMagic)));
        assert!(announced_len(&archive[..PREAMBLE_BYTES]).is_err());
    }

    #[test]
    fn an_archive_without_segments_ends_at_the_aligned_data_start() {
        let mut header = header_with_segment_of(0);
        header.segments.clear();
        let archive = write(header, &[]);
        assert_eq!(archive.len() % SEGMENT_ALIGN, 0);
        assert_eq!(announced_len(&archive).unwrap(), archive.len() as u64);
        assert!(parse(&archive).unwrap().header.segments.is_empty());
    }

    #[test]
    fn a_segment_of_a_stage_past_the_last_is_corrupt() {
        let good = write(header_with_segment_of(0), &[vec![1, 2, 3]]);
        assert_eq!(parse(&good).unwrap().header.segments[0].stage, 0);
        let bad = write(header_with_segment_of(1), &[vec![1, 2, 3]]);
        let err = parse(&bad).unwrap_err();
        assert!(matches!(&err, Error::Corrupt(m) if m.contains("names stage 1")), "{err}");
    }
}
