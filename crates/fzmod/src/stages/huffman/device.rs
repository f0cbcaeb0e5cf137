//! Huffman on the device (kernels in device.cu). Forward builds the book on the device, so it
//! needs no host synchronisation: histogram → book (one thread block) → encode (chunks placed
//! by a decoupled look-back). The inverse reads the book and the word counts back (a few
//! KiB), validates them with the CPU's own checks, uploads the decode tables and decodes a
//! chunk per warp.

use super::book::{Book, DecodeTables, TABLE_BITS};
use super::cpu::{self, CHUNK};
use super::{symbol_bits, Huffman};
use crate::backend::cuda::device::{
    first_guess, grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, PendingRecord,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{Error, Result};
use cudarc::driver::PushKernelArg;

/// Threads per block of the chunk kernels, of the book kernel and of the decoder (device.cu).
const THREADS: u64 = 256;
const BOOK_THREADS: u64 = 1024;
const DECODE_THREADS: u64 = 256;
/// Most thread blocks of the chunk kernels (they loop), and of the histogram: each of its
/// blocks adds its bins into the global ones, so fewer blocks contend less.
const MAX_BLOCKS: u64 = 1 << 15;
const HISTOGRAM_BLOCKS: u64 = 1024;

/// The program for one symbol type.
pub(crate) fn program(symbol: DType) -> Program {
    let c_type = match symbol {
        DType::U8 => "unsigned char",
        DType::U16 => "unsigned short",
        _ => "unsigned int",
    };
    Program::new(
        include_str!("device.cu"),
        format!("#define HUF_SYM {c_type}\n#define HUF_BITS {}\n", symbol_bits(symbol)),
    )
}

/// The largest segment: the widest book, the table, every symbol escaped.
fn worst_case(n: usize, bklen: u32, bits: u32) -> usize {
    let chunks = n.div_ceil(CHUNK);
    let full = n / CHUNK;
    (8 + bklen as usize + 1).next_multiple_of(4)
        + 4 * chunks
        + 4 * (full * cpu::max_words(CHUNK, bits) + cpu::max_words(n % CHUNK, bits))
}

impl DeviceStage for Huffman {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [x] = inputs else { return Err(Error::Pipeline("Huffman takes one input".into())) };
        let n = x.known_len()?;
        let nchunks = n.div_ceil(CHUNK);
        let worst = worst_case(n, self.bklen, symbol_bits(self.input));
        // The book and the chunk table, then half the symbols' bytes.
        let fixed = (8 + self.bklen as usize + 1).next_multiple_of(4) + 4 * nchunks;
        let (out, out_len) = run.alloc_dynamic(DType::U8, first_guess(n * self.input.size(), fixed, worst))?;
        let record = self.record(n);
        let record: PendingRecord = Box::new(move |_| Ok(record));
        let program = program(self.input);
        let entries = self.bklen as usize + 1;
        let hist = run.alloc(DType::U64, entries)?;
        run.zero(&hist)?;
        let table = run.alloc(DType::U32, entries)?;
        let book_len = run.alloc(DType::U64, 1)?;
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let (n64, bklen, nc, cap) = (n as u64, self.bklen, nchunks as u64, out.len.capacity() as u64);
        let blocks = nc.clamp(1, MAX_BLOCKS);
        // SAFETY (all launches): argument lists match device.cu; `hist` and `table` hold
        // bklen + 1 entries, `book_len` one word, and no kernel writes past `cap` bytes of `out`.
        unsafe {
            if n > 0 {
                s.launch_builder(&run.kernel(&program, "huf_histogram")?)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&bklen)
                    .arg(&p(&hist))
                    .launch(grid(nc.min(HISTOGRAM_BLOCKS) * THREADS, THREADS))
                    .map_err(device_error)?;
            }
            s.launch_builder(&run.kernel(&program, "huf_book")?)
                .arg(&p(&hist))
                .arg(&bklen)
                .arg(&p(&table))
                .arg(&p(&out))
                .arg(&p(&book_len))
                .launch(grid(BOOK_THREADS, BOOK_THREADS))
                .map_err(device_error)?;
        }
        if nchunks == 0 {
            // SAFETY: one u64 in, one u64 slot out.
            unsafe {
                s.launch_builder(&run.kernel(&program, "fz_add_u64")?)
                    .arg(&p(&book_len))
                    .arg(&0u64)
                    .arg(&out_len)
                    .launch(grid(1, 1))
                    .map_err(device_error)?;
            }
            return Ok(DeviceForwarded { outputs: vec![out], record });
        }
        // The ticket counter, then one look-back word per chunk (device.cu), zeroed.
        let state = run.alloc(DType::U64, nchunks + 1)?;
        run.zero(&state)?;
        // SAFETY: `state` holds nchunks + 1 zeroed words; writes are checked against `cap`.
        unsafe {
            s.launch_builder(&run.kernel(&program, "huf_encode")?)
                .arg(&p(x))
                .arg(&n64)
                .arg(&bklen)
                .arg(&p(&table))
                .arg(&nc)
                .arg(&p(&state))
                .arg(&p(&book_len))
                .arg(&p(&out))
                .arg(&cap)
                .arg(&out_len)
                .launch(grid(blocks * THREADS, THREADS))
                .map_err(device_error)?;
        }
        Ok(DeviceForwarded { outputs: vec![out], record })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let n = self.recorded_len()?;
        let [seg] = outputs else { return Err(Error::Pipeline("Huffman inverse takes one buffer".into())) };
        let seg_len = seg.known_len()?;
        // The book's head says how long it is; Book::read checks every field of it.
        let head = run.download(seg, seg_len.min(8))?;
        let count = head.get(4..8).map_or(0, |c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize);
        let stored = if count >= 2 { 8 + count.min(seg_len) } else { 8 };
        let (book, book_len) =
            Book::read(&run.download(seg, seg_len.min(stored.next_multiple_of(4)))?, self.bklen, n as u64)?;
        let bits = symbol_bits(self.input);
        let spans = cpu::chunk_spans(seg_len, book_len, n, bits, |chunks| {
            let table = run.download(seg, book_len + 4 * chunks)?;
            Ok(table[book_len..].chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect())
        })?;
        let out = run.alloc(self.input, n)?;
        if spans.is_empty() {
            return Ok(vec![out]);
        }
        let ends = spans.last().map(|s| s.at + s.words);
        let starts: Vec<u8> = spans.iter().map(|s| s.at).chain(ends).flat_map(|w| (w as u64).to_le_bytes()).collect();
        let starts = run.upload(DType::U64, &starts)?;
        let t = DecodeTables::new(&book);
        let pairs = pair_table(&t.table, self.bklen);
        let tables: Vec<u8> = t
            .table
            .iter()
            .chain(&pairs)
            .chain(&t.first)
            .chain(&t.count)
            .chain(&t.offset)
            .copied()
            .chain(t.sorted.iter().map(|&e| u32::from(e)))
            .flat_map(u32::to_le_bytes)
            .collect();
        let tables = run.upload(DType::U32, &tables)?;
        // Raised by the kernel, read once after the run (no synchronisation here).
        let err = run.error_flag("Huffman: a chunk's payload does not match its word count".into())?;
        let program = program(self.input);
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let payload = p(seg) + (book_len + 4 * spans.len()) as u64;
        let (n64, nsorted, nc) = (n as u64, t.sorted.len() as u32, spans.len() as u64);
        // SAFETY: argument list matches device.cu; every chunk's words lie in `seg` (checked by
        // chunk_spans), the payload starts 4-byte aligned (book and table are whole words), and
        // `out` holds n symbols.
        unsafe {
            s.launch_builder(&run.kernel(&program, "huf_decode")?)
                .arg(&payload)
                .arg(&p(&starts))
                .arg(&n64)
                .arg(&self.bklen)
                .arg(&p(&tables))
                .arg(&nsorted)
                .arg(&nc)
                .arg(&p(&out))
                .arg(&err)
                .launch(grid(32 * nc, DECODE_THREADS))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

/// The decoder's pair table beside the first-level one (device.cu huf_next): for each window
/// whose first code is short and no escape, the code after it when that one also ends inside
/// the window and is no escape, as `entry << 8 | length`; 0 elsewhere (and for a one-entry
/// book, whose codes take no bits).
fn pair_table(first_level: &[u32], bklen: u32) -> Vec<u32> {
    let short = |e: u32| (e != 0 && e >> 8 != bklen && e & 0x7f != 0).then_some((e >> 8, e & 0x7f));
    (0..first_level.len() as u32)
        .map(|window| {
            let Some((_, len)) = short(first_level[window as usize]) else { return 0 };
            let rest = (window << len) as usize & (first_level.len() - 1);
            match short(first_level[rest]) {
                Some((entry, len2)) if len + len2 <= TABLE_BITS as u32 => entry << 8 | len2,
                _ => 0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_the_two_codes_a_window_starts_with() {
        // Codes "0" (entry 0), "10" (1), "110" (2) and the escape "111" (entry 3 = bklen).
        let first_level: Vec<u32> = (0..2048u32)
            .map(|w| match w >> 8 {
                0..=3 => 0x80 | 1,
                4..=5 => 1 << 8 | 0x80 | 2,
                6 => 2 << 8 | 0x80 | 3,
                _ => 3 << 8 | 0x80 | 3,
            })
            .collect();
        let pairs = pair_table(&first_level, 3);
        // "0" then "10": entry 1 after entry 0.
        assert_eq!(pairs[0b010_0000_0000], 1 << 8 | 2);
        // "0" then the escape "111": no pair.
        assert_eq!(pairs[0b011_1000_0000], 0);
        // The escape first: no pair.
        assert_eq!(pairs[0b111_0000_0000], 0);
        assert!(pair_table(&vec![5 << 8 | 0x80; 2048], 9).iter().all(|&p| p == 0));
    }

    #[test]
    fn worst_case_is_every_symbol_escaped_under_the_widest_book() {
        let data: Vec<u32> = (0..5000u32).map(|i| 100_000 + i).collect();
        assert!(cpu::encode(&data, 4096).len() <= worst_case(5000, 4096, 32));
        let single = vec![1_000_000u32; 5000];
        assert!(cpu::encode(&single, 1).len() <= worst_case(5000, 1, 32));
        assert_eq!(worst_case(0, 1024, 16), 1036);
    }
}
