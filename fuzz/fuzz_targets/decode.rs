//! Any bytes given to the decoder: a value or a typed error, never a panic or a hang.
//! Each input is decoded twice: as it is (the checksums reject most mutations), and with its
//! CRCs recomputed (reseal.rs), so mutated stage records and segments reach the stage decoders.
//! Seed the corpus with tests/golden/*.fzm.
#![no_main]

mod reseal;

fn check(bytes: &[u8]) {
    if let Ok(decoded) = fzmod::decompress(bytes) {
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
