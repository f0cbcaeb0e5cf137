//! Any bytes given to the decoder: a value or a typed error, never a panic or a hang.
//! Seed the corpus with tests/golden/*.fzm.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(decoded) = fzmod::decompress(data) {
        let header = fzmod::inspect(data).expect("a decodable archive has a valid header");
        assert_eq!(decoded.data.len() as u64, header.num_elements().expect("checked by decode"));
    }
});
