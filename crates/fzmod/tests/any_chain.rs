//! Any chain a user composes either compresses to an archive that decodes within its bound
//! (non-finite values bit for bit), or is refused at compress time with a typed error naming
//! the arguments — never an archive that no decoder accepts. Random chains of the quantizer,
//! every predictor (tiles that do not fit the grid's dimensionality included), the maps and
//! every coder, on random 1-D, 2-D and 3-D fields with NaN and Inf.

use fzmod::{Buffer, ErrorKind};

/// xorshift64*: the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One `[[stage]]` reading `from`.
fn stage(name: &str, body: &str, from: &str) -> String {
    format!("[[stage]]\nname = \"{name}\"\n{body}inputs = [{from}]\n")
}

/// A random chain as TOML: Quantizer → predictor? → map? → coder.
fn random_chain(rng: &mut Rng) -> String {
    let (mode, bound) = (rng.pick(&["abs", "rel"]), rng.pick(&["1e-1", "1e-3", "1e-5"]));
    let mut toml = format!(
        "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"{mode}\"\nerror_bound = {bound}\n"
    );
    let mut from = "{from = \"q\", port = \"codes\"}".to_string();
    let predictor = match rng.below(3) {
        0 => None,
        1 => Some(format!("type = \"Lorenzo\"\nblock_size = {}\n", rng.pick(&["0", "1", "32", "1000"]))),
        _ => Some(format!(
            "type = \"TiledLorenzo\"\ntile_z = {}\ntile_y = {}\ntile_x = {}\ndelta = {}\n",
            1 + rng.below(4),
            1 + rng.below(8),
            1 + rng.below(64),
            rng.below(2) == 1
        )),
    };
    if let Some(body) = predictor {
        toml += &stage("p", &body, &from);
        from = "{from = \"p\"}".into();
    }
    let mut words = "int32";
    if rng.below(3) != 0 {
        toml += &stage(
            "m",
            &format!("type = \"{}\"\ninput_type = \"int32\"\n", rng.pick(&["Zigzag", "Negabinary"])),
            &from,
        );
        (from, words) = ("{from = \"m\"}".into(), "uint32");
    }
    let shuffle = format!(
        "type = \"Bitshuffle\"\ndata_type = \"{words}\"\nelement_width = 4\nblock_size = {}\n",
        rng.pick(&["4096", "16384"])
    );
    let rze = format!(
        "type = \"RZE\"\nchunk_size = {}\nword_size = {}\n",
        rng.pick(&["4096", "16384"]),
        rng.pick(&["1", "4"])
    );
    match (words, rng.below(3)) {
        ("int32", 0) => {
            toml + &stage(
                "c",
                &format!("type = \"AdaptiveBitpack\"\nblock_size = {}\n", rng.pick(&["32", "64", "200"])),
                &from,
            )
        }
        ("uint32", 0) => toml + &stage("c", "type = \"Huffman\"\ninput_type = \"uint32\"\n", &from),
        ("uint32", 1) => {
            toml + &stage("a", "type = \"ADM\"\ninput_type = \"uint32\"\n", &from)
                + &stage("c", "type = \"ANS\"\n", "{from = \"a\", port = \"codes\"}")
        }
        _ => toml + &stage("s", &shuffle, &from) + &stage("c", &rze, "{from = \"s\"}"),
    }
}

/// A random field: smooth values with noise, a few NaN and ±Inf.
fn random_field(rng: &mut Rng) -> (Vec<f32>, Vec<usize>) {
    let shape: Vec<usize> = match rng.below(3) {
        0 => vec![1 + rng.below(20_000) as usize],
        1 => vec![1 + rng.below(150) as usize, 1 + rng.below(150) as usize],
        _ => (0..3).map(|_| 1 + rng.below(30) as usize).collect(),
    };
    let n: usize = shape.iter().product();
    let mut v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.013).sin() * 50.0 + (rng.below(1000) as f32) * 0.001).collect();
    for _ in 0..rng.below(4) {
        let at = rng.below(n as u64) as usize;
        v[at] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][rng.below(3) as usize];
    }
    (v, shape)
}

#[test]
fn any_chain_decodes_within_its_bound_or_is_refused_at_compress() {
    let mut rng = Rng(0x5eed_c4a1);
    let (mut decoded, mut refused) = (0, 0);
    for case in 0..500 {
        let toml = random_chain(&mut rng);
        let (values, shape) = random_field(&mut rng);
        let what = format!("case {case}, shape {shape:?}\n{toml}");
        let compressed = fzmod::from_toml(&toml).and_then(|p| p.compress(&Buffer::F32(values.clone()), &shape));
        let archive = match compressed {
            Ok(a) => a,
            Err(e) => {
                // Refusing (a tile of more than 1024 elements, …) is allowed; refusing as if
                // the caller's input were a corrupt archive, or as a device failure, is not.
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{what}: {e}");
                refused += 1;
                continue;
            }
        };
        let header = fzmod::inspect(&archive).unwrap_or_else(|e| panic!("{what}: {e}"));
        // A chain that does not pay is stored as it is: exact.
        let bound = match fzmod::archived_abs_bound(&header) {
            Some(b) => b,
            None if fzmod::is_stored_raw(&header) => 0.0,
            None => panic!("{what}: a lossy archive states no bound"),
        };
        let back = fzmod::decompress(&archive).unwrap_or_else(|e| panic!("{what}: the archive does not decode: {e}"));
        let Buffer::F32(back) = back.data else { panic!("{what}: not f32") };
        for (i, (&x, &y)) in values.iter().zip(&back).enumerate() {
            let ok =
                if x.is_finite() { (f64::from(x) - f64::from(y)).abs() <= bound } else { x.to_bits() == y.to_bits() };
            assert!(ok, "{what}: element {i}: {x} decoded as {y}, bound {bound}");
        }
        decoded += 1;
    }
    // The generator must mostly produce chains that compress.
    assert!(decoded > 400, "{decoded} decoded, {refused} refused");
    eprintln!("{decoded} chains decoded within their bound, {refused} refused at compress");
}
