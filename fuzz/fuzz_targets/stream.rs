//! Any bytes given to the pipe reader of streamed archives (docs/FORMAT.md §8.5), with any
//! slab size: a typed error, or slabs in row order whose values are exactly those of the
//! seekable decode of the same bytes. Seed the corpus with `python3 fuzz/region_seeds.py
//! --stream DIR` (tests/golden/v2.1_*.fzm in this target's input encoding: raw archives are
//! read as a few bytes of archive and a slab size).
#![no_main]

use fzmod::backend::Backend;
use fzmod::{Decoder, StreamDecoder};

libfuzzer_sys::fuzz_target!(|input: (Vec<u8>, u8)| {
    let (archive, slab) = input;
    let Ok(d) = StreamDecoder::new(archive.as_slice(), Decoder::new(Backend::Cpu)) else { return };
    let Ok(mut d) = d.with_slab_bytes(1 + u64::from(slab) * 4096) else { return };
    let (mut values, mut next_row) = (Vec::new(), 0);
    loop {
        match d.next_slab() {
            Ok(Some(s)) => {
                assert_eq!(s.rows.start, next_row, "slabs come in row order");
                next_row = s.rows.end;
                values.extend_from_slice(&s.data.le_bytes());
            }
            Ok(None) => break,
            Err(_) => return,
        }
    }
    // The pipe reader checked every frame and the trailer: the file reader must agree.
    let whole = fzmod::decompress(&archive).expect("a stream the pipe reader accepts decodes whole");
    assert_eq!(whole.data.to_le_bytes(), values, "pipe and file readers disagree");
});
