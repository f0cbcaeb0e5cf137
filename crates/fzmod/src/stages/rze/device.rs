//! RZE on the device (kernels in device.cu): one pass builds each chunk once and places it
//! (and its size-table entry) by a decoupled look-back over the sizes before it. The inverse
//! validates the size table on the host with the CPU's own checks, then decodes one chunk per
//! warp (chunks up to 16 KiB) or per thread block.

use super::{cpu, Rze};
use crate::backend::cuda::device::{first_guess, grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage};
use crate::backend::cuda::region::{Code, ForwardPart, Fragment, Geometry, InversePart, TILE_BUFFER_BYTES};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Threads per chunk (`RZE_THREADS`) and the most thread blocks a launch uses (they loop).
const THREADS: u64 = 256;
const MAX_BLOCKS: u64 = 1 << 15;
/// Warps per thread block, and the largest chunk `rze_decode_warps` decodes (`RZE_STAGE`).
const WARPS: u64 = THREADS / 32;
const WARP_CHUNK_BYTES: usize = 16384;

static SOURCE: &str = include_str!("device.cu");

pub(crate) fn program() -> Program {
    Program::new(SOURCE, String::new())
}

/// One thread block per chunk, at most [`MAX_BLOCKS`] (each then takes several).
fn chunk_grid(nchunks: u64) -> cudarc::driver::LaunchConfig {
    grid(nchunks.min(MAX_BLOCKS) * THREADS, THREADS)
}

/// The encoded segment's largest size: the table and every chunk raw.
fn worst_case(n: usize, nchunks: usize) -> usize {
    2 * nchunks + n
}

/// First room for the segment: the table and half the input (`first_guess`); the kernels
/// write nothing past it and report the true size, so data that RZE cannot halve pays one
/// repeated run.
fn segment_guess(n: usize, nchunks: usize) -> usize {
    first_guess(n, 2 * nchunks, worst_case(n, nchunks))
}

impl DeviceStage for Rze {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("RZE takes one input".into())) };
        // Chunks up to 16 KiB (those a region tile holds too) encode a warp each: 300 µs
        // against a region of one's 380 on etopo5 ×8's 299 MB (docs/PERFORMANCE.md); larger
        // ones a thread block each.
        let by_warps = self.chunk_bytes as usize <= WARP_CHUNK_BYTES;
        let n = x.known_len()?;
        let nchunks = n.div_ceil(self.chunk_bytes as usize);
        let (out, out_len) = run.alloc_dynamic(DType::U8, segment_guess(n, nchunks))?;
        let record = self.record(n);
        let record: crate::backend::cuda::device::PendingRecord = Box::new(move |_| Ok(record));
        if nchunks == 0 {
            // The length slot starts at zero: an empty segment.
            return Ok(DeviceForwarded { outputs: vec![out], record });
        }
        let program = program();
        let encode = run.kernel(&program, if by_warps { "rze_encode_warps" } else { "rze_encode" })?;
        // The ticket counter, then one look-back word per chunk (device.cu), zeroed.
        let state = run.alloc(DType::U64, nchunks + 1)?;
        run.zero(&state)?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, chunk, word, nc, cap) = (
            n as u64,
            u64::from(self.chunk_bytes),
            u32::from(self.word_size),
            nchunks as u64,
            out.len.capacity() as u64,
        );
        // SAFETY: argument list matches device.cu; `state` holds nchunks + 1 words, the kernel
        // writes nothing past `cap` bytes of `out`, and `out_len` is a live u64 slot.
        unsafe {
            s.launch_builder(&encode)
                .arg(&p(x))
                .arg(&n64)
                .arg(&chunk)
                .arg(&word)
                .arg(&nc)
                .arg(&p(&state))
                .arg(&p(&out))
                .arg(&cap)
                .arg(&out_len)
                .launch(if by_warps { chunk_grid(nc.div_ceil(WARPS)) } else { chunk_grid(nc) })
                .map_err(device_error)?;
        }
        Ok(DeviceForwarded { outputs: vec![out], record })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let [seg] = outputs else { return Err(Error::Pipeline("RZE inverse takes one buffer".into())) };
        let (n, starts) = self.chunk_starts(run, seg)?;
        let chunk = self.chunk_bytes as usize;
        let out = run.alloc(DType::U8, n)?;
        let Some((starts, nchunks)) = starts else {
            return Ok(vec![out]);
        };
        // Raised by the kernel, read once after the run (no synchronisation here).
        let err = run.error_flag("RZE: a chunk's bitmaps do not match its payload".into())?;
        let program = program();
        // Chunks that fit RZE_STAGE decode a warp each; larger ones a thread block each.
        let by_warps = chunk <= WARP_CHUNK_BYTES;
        let decode = run.kernel(&program, if by_warps { "rze_decode_warps" } else { "rze_decode" })?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, chunk64, word32, nc) = (n as u64, chunk as u64, u32::from(self.word_size), nchunks);
        // SAFETY: argument list matches device.cu; every chunk's payload lies inside `seg`
        // (checked by chunk_spans) and `out` holds n bytes.
        unsafe {
            s.launch_builder(&decode)
                .arg(&p(seg))
                .arg(&p(&starts))
                .arg(&n64)
                .arg(&chunk64)
                .arg(&word32)
                .arg(&nc)
                .arg(&p(&out))
                .arg(&err)
                .launch(if by_warps { chunk_grid(nc.div_ceil(WARPS)) } else { chunk_grid(nc) })
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

impl Rze {
    /// The decoded length, and where each chunk's payload starts (on the device) with the
    /// chunk count: the size table is small (2 bytes per chunk), so the CPU's checks validate
    /// it. `None` for an empty stream.
    fn chunk_starts(&self, run: &DeviceRun, seg: &DeviceBuffer) -> Result<(usize, Option<(DeviceBuffer, u64)>)> {
        let n = self.num_bytes.ok_or_else(|| Error::Pipeline("RZE inverse needs a decoded record".into()))?;
        let n = usize::try_from(n).map_err(|_| corrupt!("RZE length {n}"))?;
        let (chunk, word) = (self.chunk_bytes as usize, usize::from(self.word_size));
        let spans = cpu::chunk_spans(seg.known_len()?, n, chunk, word, |chunks| {
            if chunks == 0 {
                return Ok(Vec::new());
            }
            let table = run.download(seg, 2 * chunks)?;
            Ok(table.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect())
        })?;
        if spans.is_empty() {
            return Ok((n, None));
        }
        let starts: Vec<u8> = spans.iter().flat_map(|c| (c.at as u64).to_le_bytes()).collect();
        Ok((n, Some((run.upload(DType::U64, &starts)?, spans.len() as u64))))
    }
}

impl Fragment for Rze {
    fn sources(&self) -> Vec<&'static str> {
        vec![SOURCE]
    }

    fn geometry(&self) -> Option<Geometry> {
        // A chunk is one tile, staged in a tile buffer.
        (self.chunk_bytes as usize <= TILE_BUFFER_BYTES).then_some(Geometry {
            in_width: 1,
            out_width: 1,
            same_count: false,
            granule: self.chunk_bytes as usize,
            coder: true,
        })
    }

    fn forward_code(&self) -> Code {
        format!("rze_region_size($in, $bytes, {}u, $scratch)", self.word_size)
    }

    fn emit_code(&self) -> Code {
        format!("rze_region_emit($in, $bytes, {}u, $scratch, $size, $out)", self.word_size)
    }

    fn entry_code(&self) -> Code {
        "if (threadIdx.x == 0) rze_table_entry($seg, $tile, $size)".into()
    }

    fn inverse_code(&self) -> Code {
        format!("rze_region_decode($seg, (const u64*)$0, $tile, $bytes, {}u, $scratch, $stage, $out)", self.word_size)
    }

    fn forward(&self, run: &mut DeviceRun, _input: Option<&DeviceBuffer>, n: usize) -> Result<ForwardPart> {
        let nchunks = n.div_ceil(self.chunk_bytes as usize);
        let (segment, length_at) = run.alloc_dynamic(DType::U8, segment_guess(n, nchunks))?;
        let record = self.record(n);
        Ok(ForwardPart::Coder {
            args: Vec::new(),
            table_bytes: 2 * nchunks as u64,
            segment,
            length_at,
            record: Box::new(move |_| Ok(record)),
        })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        let [Some(seg)] = outputs else { return Err(Error::Pipeline("RZE inverse takes its segment".into())) };
        let (n, starts) = self.chunk_starts(run, seg)?;
        let keep: Vec<DeviceBuffer> = starts.into_iter().map(|(b, _)| b).collect();
        let at = keep.first().map_or(0, |b| b.ptr(run.stream()));
        Ok(InversePart::Coder { args: vec![at], input_bytes: n, keep })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_is_every_chunk_raw() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 1) as u8 | 1).collect();
        assert_eq!(cpu::encode(&data, 512, 1).len(), worst_case(1000, 2));
        assert_eq!(worst_case(0, 0), 0);
    }
}
