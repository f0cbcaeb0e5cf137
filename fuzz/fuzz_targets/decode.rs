//! Any bytes given to the decoder: a value or a typed error, never a panic or a hang, and
//! the same with the CPU's fused regions on and off.
//! Each input is decoded twice: as it is (the checksums reject most mutations), and with its
//! CRCs recomputed (reseal.rs), so mutated stage records and segments reach the stage decoders.
//! Seed the corpus with tests/golden/*.fzm.
#![no_main]

mod reseal;

use fzmod::backend::Backend;
use fzmod::RunOptions;

fn check(bytes: &[u8]) {
    // The fused CPU regions against the stage walk: both fail, or both give the same values.
    let decode = |fusion| fzmod::decompress_with(&Backend::Cpu, bytes, RunOptions { fusion });
    let (fused, walked) = (decode(true), decode(false));
    match (&fused, &walked) {
        (Ok(a), Ok(b)) => assert!(a.data.to_le_bytes() == b.data.to_le_bytes(), "fused and walked decodes differ"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("fused {:?}, walked {:?}", a.as_ref().err(), b.as_ref().err()),
    }
    if let Ok(decoded) = fused {
        let header = fzmod::inspect(bytes).expect("a decodable archive has a valid header");
        assert_eq!(decoded.data.len() as u64, header.num_elements().expect("checked by decode"));
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check(data);
    let mut resealed = data.to_vec();
    if reseal::reseal(&mut resealed).is_some() && resealed != data {
        check(&resealed);
    }
});
