//! GPU tests. They need a CUDA device (and NVRTC), so they are `#[ignore]`d: `cargo test`
//! counts them as ignored, and `scripts/gpu-check.sh` runs them with `--include-ignored`,
//! where a missing device is a failure, not a skip.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use fzmod::backend::cuda::CudaDevice;
use fzmod::backend::Backend;
use fzmod::stages::compile_all;
use fzmod::{Buffer, ErrorBound, ErrorMode, Pipeline, RunOptions};

const FUSED: RunOptions = RunOptions { fusion: true };
const UNFUSED: RunOptions = RunOptions { fusion: false };

fn gpu() -> Backend {
    Backend::Cuda(CudaDevice::get().expect("these tests need a CUDA device"))
}

#[test]
#[ignore = "needs NVRTC and a CUDA device (scripts/gpu-check.sh)"]
fn nvrtc_compiles_every_device_program() {
    let arch = CudaDevice::get().expect("a CUDA device").arch().to_string();
    let n = compile_all(&arch).unwrap();
    assert!(n >= 40, "{n} programs");
}

/// A small deterministic generator (xorshift), so every seed names one exact case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A smooth field with noise, a few specials (NaN, ±Inf, huge values) and a random shape.
fn random_field(rng: &mut Rng, f64_values: bool) -> (Buffer, Vec<usize>) {
    let ndim = 1 + rng.below(4) as usize;
    let shape: Vec<usize> = (0..ndim).map(|_| 1 + rng.below([50_000, 300, 40, 12][ndim - 1]) as usize).collect();
    field_of_shape(rng, f64_values, shape)
}

/// [`random_field`]'s values on a given shape.
fn field_of_shape(rng: &mut Rng, f64_values: bool, shape: Vec<usize>) -> (Buffer, Vec<usize>) {
    let n: usize = shape.iter().product();
    let noise = rng.unit() * 0.5;
    let mut v: Vec<f64> =
        (0..n).map(|i| (i as f64 * 0.01).sin() * 100.0 + (rng.unit() - 0.5) * noise * 100.0).collect();
    for _ in 0..rng.below(20) {
        let at = rng.below(n as u64) as usize;
        v[at] = [f64::NAN, f64::INFINITY, -f64::INFINITY, 3.0e38, -1.0e30][rng.below(5) as usize];
    }
    let data = if f64_values { Buffer::F64(v) } else { Buffer::F32(v.iter().map(|&x| x as f32).collect()) };
    (data, shape)
}

/// One random pipeline of the four stages, as TOML: Quantizer → [Lorenzo | TiledLorenzo]? →
/// AdaptiveBitpack, with random block sizes, tiles, layouts and bounds.
fn random_pipeline(rng: &mut Rng) -> String {
    let mode = ["abs", "rel"][rng.below(2) as usize];
    let bound = [1e-1, 1e-2, 1e-3, 1e-5][rng.below(4) as usize];
    let mut t = format!(
        "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"{mode}\"\nerror_bound = {bound:e}\n"
    );
    let feed = match rng.below(3) {
        0 => "{from = \"q\", port = \"codes\"}".to_string(),
        1 => {
            let block = [0, 1, 7, 32, 100, 1024, 5000][rng.below(7) as usize];
            t += &format!("[[stage]]\nname = \"p\"\ntype = \"Lorenzo\"\nblock_size = {block}\ninputs = [{{from = \"q\", port = \"codes\"}}]\n");
            "{from = \"p\"}".to_string()
        }
        _ => {
            let tile = [1 + rng.below(4), 1 + rng.below(8), 1 + rng.below(16)];
            let delta = rng.below(2) == 1;
            t += &format!(
                "[[stage]]\nname = \"p\"\ntype = \"TiledLorenzo\"\ntile_z = {}\ntile_y = {}\ntile_x = {}\ndelta = {delta}\ninputs = [{{from = \"q\", port = \"codes\"}}]\n",
                tile[0], tile[1], tile[2]
            );
            "{from = \"p\"}".to_string()
        }
    };
    let block = [1, 5, 32, 48, 64, 200, 1024][rng.below(7) as usize];
    let (selection, metadata) = [("false", "plain"), ("true", "wide"), ("true", "packed")][rng.below(3) as usize];
    let meta = if selection == "true" { format!("metadata = \"{metadata}\"\n") } else { String::new() };
    t + &format!(
        "[[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\nblock_size = {block}\noutlier_selection = {selection}\n{meta}inputs = [{feed}]\n"
    )
}

/// CPU, fused and unfused GPU archives are the same bytes; each decoder decodes the others'.
fn assert_backends_agree(p: &Pipeline, data: &Buffer, shape: &[usize], what: &str) {
    let gpu = gpu();
    let cpu = p.compress(data, shape).unwrap_or_else(|e| panic!("{what}: CPU compress: {e}"));
    for opts in [FUSED, UNFUSED] {
        let on_gpu = p.compress_with(&gpu, data, shape, opts).unwrap_or_else(|e| panic!("{what} {opts:?}: {e}"));
        assert!(on_gpu == cpu, "{what} {opts:?}: GPU archive differs from the CPU archive");
        let back = fzmod::decompress_with(&gpu, &cpu, opts).unwrap_or_else(|e| panic!("{what} {opts:?}: decode {e}"));
        let reference = fzmod::decompress(&cpu).unwrap();
        assert!(back.data.to_le_bytes() == reference.data.to_le_bytes(), "{what} {opts:?}: decoders disagree");
    }
}

/// Case `seed` of a seeded random-pipeline test (`salt` tells the tests apart): the TOML
/// `generate` writes, a random field (f64 one time in three) and the pipeline set for it.
fn seeded_case(salt: u64, seed: u64, generate: fn(&mut Rng) -> String) -> (String, Pipeline, Buffer, Vec<usize>) {
    let mut rng = Rng(seed.wrapping_mul(salt) | 1);
    let toml = generate(&mut rng);
    let f64_values = rng.below(3) == 0;
    let (data, shape) = random_field(&mut rng, f64_values);
    let mut p = fzmod::from_toml(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    p.set_input_dtype(data.dtype()).unwrap();
    (toml, p, data, shape)
}

/// The seeds of a seeded GPU test this process runs: all of `seeds`, or with
/// `FZMOD_GPU_SHARD=k/n` those equal to k modulo n (gpu-check.sh runs n shards at once: the
/// tests wait on NVRTC compiles and CPU references, and the GPU machine has the cores).
fn shard(seeds: std::ops::RangeInclusive<u64>) -> impl Iterator<Item = u64> {
    let (k, n) = match std::env::var("FZMOD_GPU_SHARD") {
        Err(_) => (0, 1),
        Ok(s) => s
            .split_once('/')
            .and_then(|(k, n)| Some((k.parse::<u64>().ok()?, n.parse::<u64>().ok()?)))
            .filter(|&(k, n)| k < n)
            .unwrap_or_else(|| panic!("FZMOD_GPU_SHARD={s}: expected k/n with k < n")),
    };
    seeds.filter(move |seed| seed % n == k)
}

/// Property test with a fixed seed list: random pipelines of every stage (block sizes 1..5000,
/// N-D and block Lorenzo, any tile, every layout, abs and rel) on random shapes and values.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn random_pipelines_give_cpu_bytes_fused_and_unfused() {
    for seed in shard(1..=60u64) {
        let (toml, p, data, shape) = seeded_case(0x9E37_79B9_7F4A_7C15, seed, random_pipeline);
        assert_backends_agree(&p, &data, &shape, &format!("seed {seed} shape {shape:?}\n{toml}"));
    }
}

/// A random chain the region compiler may fuse: Quantizer (indexed outliers or inline words)
/// → up to three of word map, chunked Difference, block Lorenzo, Bitshuffle → RZE,
/// AdaptiveBitpack (after i32 codes) or nothing, with chunk and
/// block sizes that sometimes fit a tile and sometimes do not (the walk then fuses a shorter
/// region or none).
fn random_fusable_chain(rng: &mut Rng) -> String {
    let mode = ["abs", "rel"][rng.below(2) as usize];
    let bound = [1e-1, 1e-3, 1e-5][rng.below(3) as usize];
    let inline = rng.below(2) == 0;
    let codes = if inline { "code_type = \"uint32\"\ninplace_outliers = true\n" } else { "" };
    let mut t = format!(
        "[[stage]]\nname = \"s0\"\ntype = \"Quantizer\"\n{codes}error_bound_mode = \"{mode}\"\nerror_bound = {bound:e}\n"
    );
    let mut ty = if inline { "uint32" } else { "int32" };
    let mut feed = "{from = \"s0\", port = \"codes\"}".to_string();
    let stages = rng.below(4);
    for k in 1..=stages + 1 {
        let last = k == stages + 1;
        let body = if last {
            if rng.below(4) == 0 {
                break;
            }
            if ty == "int32" && rng.below(3) == 0 {
                // AdaptiveBitpack: tiles of whole blocks (blocks of 1024 i32 codes fit 3).
                let block = [5, 32, 64, 77, 256, 1024][rng.below(6) as usize];
                let layout = ["", "outlier_selection = true\nmetadata = \"wide\"\n", "outlier_selection = true\n"]
                    [rng.below(3) as usize];
                t += &format!(
                    "[[stage]]\nname = \"s{k}\"\ntype = \"AdaptiveBitpack\"\nblock_size = {block}\n{layout}inputs = [{feed}]\n"
                );
                break;
            }
            let word = [1u64, 2, 4, 8][rng.below(4) as usize];
            let chunk = [8192u64, 16384, 4096, 24576][rng.below(4) as usize];
            if ty != "uint8" {
                t += &format!("[[stage]]\nname = \"b{k}\"\ntype = \"Bitshuffle\"\ndata_type = \"{ty}\"\nelement_width = 4\nblock_size = {chunk}\ninputs = [{feed}]\n");
                feed = format!("{{from = \"b{k}\"}}");
            }
            format!("type = \"RZE\"\nchunk_size = {chunk}\nword_size = {word}\n")
        } else if ty == "uint8" {
            format!(
                "type = \"Bitshuffle\"\ndata_type = \"uint8\"\nelement_width = 1\nblock_size = {}\n",
                [8192, 16384][rng.below(2) as usize]
            )
        } else {
            // A block Lorenzo (int32 codes only) joins a region as a chunked Difference, an
            // N-D Lorenzo (block 0) starts one.
            match rng.below(if ty == "int32" { 4 } else { 3 }) {
                3 => {
                    let block = [1, 2, 8, 32, 64, 100, 512, 4096, 0][rng.below(9) as usize];
                    format!("type = \"Lorenzo\"\nblock_size = {block}\n")
                }
                0 => {
                    let map = ["Zigzag", "Negabinary"][rng.below(2) as usize];
                    let s = format!("type = \"{map}\"\ninput_type = \"{ty}\"\n");
                    ty = "uint32";
                    s
                }
                1 => {
                    let chunk = [4096, 16384, 32768, 4 * (1 + rng.below(3000))][rng.below(4) as usize];
                    let map = ["none", "negabinary", "zigzag"][rng.below(3) as usize];
                    let s = format!(
                        "type = \"Difference\"\ninput_type = \"{ty}\"\nchunk_size = {chunk}\nfusion_mode = \"{map}\"\n"
                    );
                    if map != "none" {
                        ty = "uint32";
                    }
                    s
                }
                _ => {
                    let width = [1, 2, 4, 8][rng.below(4) as usize];
                    let block = [8192, 16384, 4096][rng.below(3) as usize];
                    let s = format!(
                        "type = \"Bitshuffle\"\ndata_type = \"{ty}\"\nelement_width = {width}\nblock_size = {block}\n"
                    );
                    ty = "uint8";
                    s
                }
            }
        };
        t += &format!("[[stage]]\nname = \"s{k}\"\n{body}inputs = [{feed}]\n");
        feed = format!("{{from = \"s{k}\"}}");
    }
    t
}

/// Block Lorenzo and chunked Difference inside regions, at every kind of block: a few words
/// (one segmented warp scan for several blocks), a warp's worth, blocks a warp takes alone,
/// and blocks the whole thread block shares; with and without a coder after them.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn block_deltas_in_regions_give_cpu_bytes() {
    let mut rng = Rng(0xb10c_de17);
    for block in [1u32, 2, 3, 8, 32, 64, 100, 500, 512, 1024, 4096] {
        let (data, shape) = random_field(&mut rng, false);
        let quant = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"rel\"\nerror_bound = 1e-4\n";
        let lorenzo = format!(
            "[[stage]]\nname = \"l\"\ntype = \"Lorenzo\"\nblock_size = {block}\ninputs = [{{from = \"q\", port = \"codes\"}}]\n"
        );
        let coded = "[[stage]]\nname = \"z\"\ntype = \"Zigzag\"\ninput_type = \"int32\"\ninputs = [{from = \"l\"}]\n\
                     [[stage]]\nname = \"d\"\ntype = \"Difference\"\ninput_type = \"uint32\"\nfusion_mode = \"zigzag\"\n";
        let coded = format!(
            "{coded}chunk_size = {}\ninputs = [{{from = \"z\"}}]\n\
             [[stage]]\nname = \"b\"\ntype = \"Bitshuffle\"\ndata_type = \"uint32\"\nelement_width = 4\nblock_size = 16384\n\
             inputs = [{{from = \"d\"}}]\n\
             [[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\ninputs = [{{from = \"b\"}}]\n",
            4 * block
        );
        for toml in [format!("{quant}{lorenzo}"), format!("{quant}{lorenzo}{coded}")] {
            let mut p = fzmod::from_toml(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("block {block} shape {shape:?}\n{toml}"));
        }
    }
}

/// AdaptiveBitpack ends regions (tiles of whole blocks placed by the look-back, its metadata
/// as the table) after a Quantizer and a block Lorenzo, at block sizes and layouts the cuSZp
/// rule does not take, and alone (a region of one) under `--fusion off`.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn adaptive_bitpack_in_regions_gives_cpu_bytes() {
    let mut rng = Rng(0xab_b10c);
    let layouts = ["", "outlier_selection = true\nmetadata = \"wide\"\n", "outlier_selection = true\n"];
    for block in [1u32, 5, 32, 64, 77, 256, 1000, 1024] {
        for layout in layouts {
            let (data, shape) = random_field(&mut rng, false);
            let toml = format!(
                "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"rel\"\nerror_bound = 1e-4\n\
                 [[stage]]\nname = \"l\"\ntype = \"Lorenzo\"\nblock_size = 64\ninputs = [{{from = \"q\", port = \"codes\"}}]\n\
                 [[stage]]\nname = \"a\"\ntype = \"AdaptiveBitpack\"\nblock_size = {block}\n{layout}inputs = [{{from = \"l\"}}]\n"
            );
            let mut p = fzmod::from_toml(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("shape {shape:?}\n{toml}"));
        }
    }
}

/// Gatherers start regions: TiledLorenzo gathers each tile from the natural grid (and scatters
/// it back) — cuSZp3's default tiles (specialised copies), other tiles (runtime extents),
/// tiles too small to fuse (the standalone kernels), with and without deltas — and N-D
/// Lorenzo gathers each element's neighbours (its inverse joins the decode region over a
/// line only), the Quantizer running inside their loads (and, in the decode, inside
/// TiledLorenzo's scatter: its outliers put back after the region); before a coder or a map,
/// on 1-D, 2-D and 3-D grids whose extents are no multiples of the tile.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn gatherers_in_regions_give_cpu_bytes() {
    let mut rng = Rng(0x7_11ed);
    let tiled = |tile: &str, delta: bool| format!("type = \"TiledLorenzo\"\n{tile}delta = {delta}\n");
    let mut predictors: Vec<String> =
        ["", "tile_x = 64\n", "tile_x = 8\ntile_y = 8\n", "tile_x = 4\ntile_y = 4\ntile_z = 4\n"]
            .iter()
            .chain(&[
                "tile_x = 5\ntile_y = 3\ntile_z = 2\n",
                "tile_x = 16\ntile_y = 2\n",
                "tile_x = 16\n",
                "tile_x = 2\ntile_y = 2\ntile_z = 2\n",
            ])
            .map(|tile| tiled(tile, rng.below(4) != 0))
            .collect();
    predictors.push("type = \"Lorenzo\"\nblock_size = 0\n".into());
    let shapes =
        [vec![70_001], vec![301, 67], vec![9, 31, 45], vec![3, 7, 1, 130], vec![40, 1, 300], vec![5, 130, 151]];
    for (k, predictor) in predictors.iter().enumerate() {
        for shape in &shapes {
            let (data, shape) = field_of_shape(&mut rng, k % 3 == 2, shape.clone());
            let head = format!(
                "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"rel\"\nerror_bound = 1e-4\n\
                 [[stage]]\nname = \"t\"\n{predictor}inputs = [{{from = \"q\", port = \"codes\"}}]\n"
            );
            let map = "[[stage]]\nname = \"m\"\ntype = \"Zigzag\"\ninput_type = \"int32\"\ninputs = [{from = \"t\"}]\n";
            let coded = "[[stage]]\nname = \"n\"\ntype = \"Negabinary\"\ninput_type = \"int32\"\ninputs = [{from = \"t\"}]\n\
                         [[stage]]\nname = \"b\"\ntype = \"Bitshuffle\"\ndata_type = \"uint32\"\nelement_width = 4\n\
                         block_size = 16384\ninputs = [{from = \"n\"}]\n\
                         [[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\ninputs = [{from = \"b\"}]\n";
            for toml in [format!("{head}{map}"), format!("{head}{coded}")] {
                let mut p = fzmod::from_toml(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
                p.set_input_dtype(data.dtype()).unwrap();
                assert_backends_agree(&p, &data, &shape, &format!("shape {shape:?}\n{toml}"));
            }
        }
    }
}

/// N-D Lorenzo's inverse over a line runs inside its decode region as a prefix sum with a
/// look-back: lines of more tiles than the launch has blocks (each block takes several tiles
/// by ticket), as one axis or inside a 2-D shape with one row, f32 and f64 values.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn line_scans_in_regions_give_cpu_bytes() {
    let mut rng = Rng(0x5ca7);
    let chain = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"abs\"\nerror_bound = 1e-3\n\
                 [[stage]]\nname = \"t\"\ntype = \"Lorenzo\"\nblock_size = 0\ninputs = [{from = \"q\", port = \"codes\"}]\n\
                 [[stage]]\nname = \"m\"\ntype = \"Zigzag\"\ninput_type = \"int32\"\ninputs = [{from = \"t\"}]\n\
                 [[stage]]\nname = \"b\"\ntype = \"Bitshuffle\"\ndata_type = \"uint32\"\nelement_width = 4\n\
                 block_size = 16384\ninputs = [{from = \"m\"}]\n\
                 [[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\ninputs = [{from = \"b\"}]\n";
    for (shape, f64_values) in [(vec![9_000_003], false), (vec![1, 9_437_184], false), (vec![3_000_001], true)] {
        let (data, shape) = field_of_shape(&mut rng, f64_values, shape);
        let mut p = fzmod::from_toml(chain).unwrap();
        p.set_input_dtype(data.dtype()).unwrap();
        assert_backends_agree(&p, &data, &shape, &format!("shape {shape:?} f64 {f64_values}"));
    }
}

/// N-D Lorenzo's inverse over a 2-D or 3-D grid is a global pass whose last kernel stores the
/// Quantizer's reconstruction (the codes never reach memory; outliers put back afterwards):
/// the band pass over one plane, the z pass after the bands, the last strided pass of the
/// axis-at-a-time sums (rows narrower than a band row or wider than a block holds, columns
/// of several pieces, a y axis of one row), planes of one band (no carries) and of a few,
/// f32 and f64, after a region and alone.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn global_inverses_store_through_the_quantizer() {
    let mut rng = Rng(0x0057_07ed);
    let head = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"rel\"\nerror_bound = 1e-4\n\
                [[stage]]\nname = \"t\"\ntype = \"Lorenzo\"\nblock_size = 0\ninputs = [{from = \"q\", port = \"codes\"}]\n";
    let coded = "[[stage]]\nname = \"m\"\ntype = \"Zigzag\"\ninput_type = \"int32\"\ninputs = [{from = \"t\"}]\n\
                 [[stage]]\nname = \"b\"\ntype = \"Bitshuffle\"\ndata_type = \"uint32\"\nelement_width = 4\n\
                 block_size = 16384\ninputs = [{from = \"m\"}]\n\
                 [[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\ninputs = [{from = \"b\"}]\n";
    let shapes = [
        vec![300, 700],
        vec![3, 40, 300],
        vec![500, 100],
        vec![4, 30, 50],
        vec![5, 1, 300],
        vec![2000, 100],
        vec![40, 7000],
        vec![2, 257, 6144],
        vec![300, 2, 700],
        vec![40, 40, 300],
    ];
    for (k, shape) in shapes.iter().enumerate() {
        let (data, shape) = field_of_shape(&mut rng, k % 2 == 1, shape.clone());
        for toml in [head.to_string(), format!("{head}{coded}")] {
            let mut p = fzmod::from_toml(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("shape {shape:?}\n{toml}"));
        }
    }
}

/// The seeds of the fusable-chain tests (the GPU test and its CPU twin take the same cases).
const FUSABLE_SALT: u64 = 0xD1B5_4A32_D192_ED03;

/// The region compiler: random fusable chains on random fields (NaN, Inf, f32 and f64) give
/// the CPU's bytes fused (generated region kernels) and unfused (stage by stage), and each
/// decoder decodes the others' archives.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn random_fused_regions_give_cpu_bytes() {
    for seed in shard(1..=48u64) {
        let (toml, p, data, shape) = seeded_case(FUSABLE_SALT, seed, random_fusable_chain);
        assert_backends_agree(&p, &data, &shape, &format!("seed {seed} shape {shape:?}\n{toml}"));
    }
}

/// The same chains on the CPU: valid pipelines that round-trip within their bound.
#[test]
fn random_fusable_chains_are_valid_pipelines() {
    for seed in 1..=48u64 {
        let (toml, p, data, shape) = seeded_case(FUSABLE_SALT, seed, random_fusable_chain);
        let archive = p.compress(&data, &shape).unwrap_or_else(|e| panic!("{e}\n{toml}"));
        fzmod::decompress(&archive).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    }
}

/// Each stage alone, forward and inverse, on integer inputs it accepts directly.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn integer_stages_alone_give_cpu_bytes() {
    let stages = [
        "type = \"Lorenzo\"\nblock_size = 33\n",
        "type = \"Lorenzo\"\nblock_size = 0\n",
        "type = \"TiledLorenzo\"\ntile_z = 2\ntile_y = 3\ntile_x = 5\ndelta = true\n",
        "type = \"AdaptiveBitpack\"\nblock_size = 77\noutlier_selection = true\nmetadata = \"wide\"\n",
        "type = \"AdaptiveBitpack\"\ninput_type = \"int16\"\nblock_size = 1000\noutlier_selection = true\nmetadata = \"packed\"\n",
        // Lane groups of 4 (8 blocks a warp) and of 1 (32 blocks a warp).
        "type = \"AdaptiveBitpack\"\nblock_size = 32\n",
        "type = \"AdaptiveBitpack\"\nblock_size = 5\noutlier_selection = true\nmetadata = \"packed\"\n",
    ];
    for seed in 1..=10u64 {
        let mut rng = Rng(seed * 7919);
        for stage in stages {
            let shape = vec![1 + rng.below(20) as usize, 1 + rng.below(30) as usize, 1 + rng.below(50) as usize];
            let n: usize = shape.iter().product();
            let spread = 1u64 << rng.below(20);
            let data = if stage.contains("int16") {
                Buffer::I16(
                    (0..n)
                        .map(|_| (rng.below(2 * spread) as i64 - spread as i64).clamp(-32768, 32767) as i16)
                        .collect(),
                )
            } else {
                Buffer::I32((0..n).map(|_| (rng.below(2 * spread) as i64 - spread as i64) as i32).collect())
            };
            let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("seed {seed}: {stage}"));
        }
    }
    // Long lines take the N-D Lorenzo inverse's multi-pass scans: x beyond one 8192-element
    // piece, y and z beyond one 256-element column piece. Rows of 256–6144 elements take the
    // plane scan by bands (the widest and one wider, the narrowest and one narrower, blocks of
    // one to sixteen warps, bands of 8 and of 32 rows).
    let mut rng = Rng(17);
    let shapes = [
        vec![70_001],
        vec![3, 700, 40],
        vec![600, 2, 9000],
        vec![257, 1, 3],
        vec![2, 33, 6144],
        vec![2, 31, 6145],
        vec![3, 65, 256],
        vec![1, 4097, 255],
        vec![1, 40_000, 385],
        vec![5, 17, 700],
        vec![2, 9, 5000],
    ];
    for shape in shapes {
        let n: usize = shape.iter().product();
        let data = Buffer::I32((0..n).map(|_| rng.below(1 << 31) as i32 - (1 << 30)).collect());
        let mut p = fzmod::from_toml("[[stage]]\nname = \"s\"\ntype = \"Lorenzo\"\nblock_size = 0\n").unwrap();
        p.set_input_dtype(data.dtype()).unwrap();
        assert_backends_agree(&p, &data, &shape, &format!("N-D Lorenzo on {shape:?}"));
    }
}

const BOUNDS: [(ErrorMode, f64); 4] =
    [(ErrorMode::Rel, 1e-2), (ErrorMode::Rel, 1e-3), (ErrorMode::Rel, 1e-4), (ErrorMode::Abs, 1e-3)];

/// Every shared field × preset × bound: fused == unfused == CPU bytes, the bound holds on every
/// element, and each backend decodes the other's archive.
#[test]
#[ignore = "needs a CUDA device and ../shared/data (scripts/gpu-check.sh)"]
fn presets_on_shared_fields_fused_unfused_and_cpu_agree() {
    let dir = shared_data().expect("the shared fields (FZMOD_DATA)");
    // FZMOD_GPU_PRESETS=a,b narrows a device run to the presets a change touches (said aloud).
    let only = std::env::var("FZMOD_GPU_PRESETS").ok();
    let presets: Vec<_> = fzmod::PRESETS
        .iter()
        .filter(|p| only.as_deref().is_none_or(|list| list.split(',').any(|name| name == p.name)))
        .collect();
    if let Some(list) = &only {
        for name in list.split(',') {
            assert!(fzmod::PRESETS.iter().any(|p| p.name == name), "FZMOD_GPU_PRESETS names no preset {name:?}");
        }
        eprintln!("FZMOD_GPU_PRESETS={list}: {} of {} presets", presets.len(), fzmod::PRESETS.len());
    }
    let mut checked = 0;
    for path in shared_fields(&dir) {
        let field = load(&path);
        for preset in &presets {
            for (mode, value) in BOUNDS {
                let what = format!("{} {} {} {value:e}", field.name, preset.name, mode.name());
                let bound = ErrorBound::new(mode, value).unwrap();
                let mut p = fzmod::preset(preset.name, &field.shape).unwrap();
                p.set_error_bound(bound).unwrap();
                p.set_input_dtype(field.data.dtype()).unwrap();
                assert_backends_agree(&p, &field.data, &field.shape, &what);
                let archive = p.compress_on(&gpu(), &field.data, &field.shape).unwrap();
                let back = fzmod::decompress_on(&gpu(), &archive).unwrap();
                assert_within(&field.data, &back.data, expected_abs_bound(&field.data, bound), &what);
                checked += 1;
            }
        }
    }
    eprintln!("GPU == CPU (fused and unfused) on {checked} field/preset/bound combinations");
    assert_eq!(checked, shared_fields(&dir).len() * presets.len() * BOUNDS.len());
}

/// Calls repeated on inputs of one shape replay the fused cuSZp kernels as CUDA graphs (from
/// a list's second run on): every archive still equals the CPU's, and every decode the CPU's,
/// with shapes, bounds and element types interleaved so that graphs are built, looked up and
/// replayed in turn, and a replay sees its call's data, not the data it was built from.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn repeated_calls_replay_graphs_with_cpu_bytes() {
    let gpu = gpu();
    let mut rng = Rng(0x6a9b_5eed);
    let (mut calls, replays_before) = (0, CudaDevice::get().unwrap().graph_launches());
    for round in 0..8 {
        for preset in ["cuszp", "cuszp2", "cuszp3-fixed", "cuszp3-outlier"] {
            for shape in [vec![96, 130], vec![300_000], vec![9, 20, 31]] {
                for (mode, value) in [(ErrorMode::Abs, 0.05), (ErrorMode::Rel, 1e-3)] {
                    let (data, shape) = field_of_shape(&mut rng, round >= 4, shape.clone());
                    let what = format!("round {round} {preset} {shape:?} {} {value:e}", mode.name());
                    let mut p = fzmod::preset(preset, &shape).unwrap();
                    p.set_error_bound(ErrorBound::new(mode, value).unwrap()).unwrap();
                    p.set_input_dtype(data.dtype()).unwrap();
                    let cpu = p.compress(&data, &shape).unwrap();
                    let on_gpu = p.compress_with(&gpu, &data, &shape, FUSED).unwrap();
                    assert!(on_gpu == cpu, "{what}: GPU archive differs from the CPU archive");
                    let back = fzmod::decompress_with(&gpu, &cpu, FUSED).unwrap();
                    let reference = fzmod::decompress(&cpu).unwrap();
                    assert!(back.data.to_le_bytes() == reference.data.to_le_bytes(), "{what}: decoders disagree");
                    calls += 1;
                }
            }
        }
    }
    let replays = CudaDevice::get().unwrap().graph_launches() - replays_before;
    eprintln!("GPU == CPU on {calls} repeated calls, {replays} of their compresses and decodes as graphs");
    // Rounds 0 and 4 (and some calls after them) grow the workspace, which moves the lists'
    // addresses; after that each list repeats.
    assert!(replays > calls / 2, "only {replays} graph launches in {calls} calls");
}

/// Noise whose codes take ~18 bits: the cuSZp rule's payload outgrows its first guess (half
/// the input), so the call grows it to the exact size and runs again — from host memory and
/// from the caller's device buffer, read in place, and stage by stage — and still gives the
/// CPU's bytes.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn payload_past_the_first_guess_gives_cpu_bytes() {
    let dev = CudaDevice::get().unwrap();
    let mut rng = Rng(0x5eed_f00d);
    let noise: Vec<f32> = (0..200_000).map(|_| f32::from_bits(0x3f80_0000 | (rng.next() as u32 >> 9))).collect();
    let bound = ErrorBound::new(ErrorMode::Abs, 4e-6).unwrap();
    for preset in ["cuszp", "cuszp2", "cuszp3-fixed", "cuszp3-outlier"] {
        let shape = [400usize, 500];
        let cpu = fzmod::compress(&noise, &shape, preset, bound).unwrap();
        assert!(!fzmod::is_stored_raw(&fzmod::inspect(&cpu).unwrap()), "{preset}: stored raw");
        assert!(cpu.len() > noise.len() * 4 / 2, "{preset}: {} bytes fit the first guess", cpu.len());
        let gpu = fzmod::Compressor::preset::<f32>(preset, &shape, bound, fzmod::backend::BackendChoice::Cuda).unwrap();
        for call in 0..2 {
            assert!(gpu.compress(&noise, &shape).unwrap() == cpu, "{preset} call {call}: from host memory");
            let on_device = dev.to_device(&noise).unwrap();
            assert!(gpu.compress_device(&on_device, &shape).unwrap() == cpu, "{preset} call {call}: device input");
        }
        // Stage by stage, AdaptiveBitpack's payload outgrows its first room in turn.
        let mut p = fzmod::preset(preset, &shape).unwrap();
        p.set_error_bound(bound).unwrap();
        p.set_input_dtype(fzmod::DType::F32).unwrap();
        assert_backends_agree(&p, &Buffer::F32(noise.clone()), &shape, preset);
    }
}

/// Noise that RZE cannot halve: its segment outgrows the first room (the table and half its
/// input), in a fused region and alone, so the walk repeats with the exact size and still
/// gives the CPU's bytes (`pfpl`, `interp-fast`, and a composed Quantizer → Negabinary →
/// Bitshuffle → RZE chain).
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn rze_segments_past_the_first_guess_give_cpu_bytes() {
    let mut rng = Rng(0x0072_e5e9);
    let noise: Vec<f32> = (0..200_000).map(|_| f32::from_bits(0x3f80_0000 | (rng.next() as u32 >> 9))).collect();
    let chain = std::fs::read_to_string(repo_root().join("scripts/chains/quant-negabinary-rze.toml")).unwrap();
    let shape = [400usize, 500];
    let pipelines = [
        ("pfpl", fzmod::preset("pfpl", &shape).unwrap()),
        ("interp-fast", fzmod::preset("interp-fast", &shape).unwrap()),
        ("quant-negabinary-rze", fzmod::from_toml(&chain).unwrap()),
    ];
    for (what, mut p) in pipelines {
        p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 4e-6).unwrap()).unwrap();
        p.set_input_dtype(fzmod::DType::F32).unwrap();
        let data = Buffer::F32(noise.clone());
        let cpu = p.compress(&data, &shape).unwrap();
        assert!(cpu.len() > noise.len() * 4 / 2, "{what}: {} bytes fit the first room", cpu.len());
        assert_backends_agree(&p, &data, &shape, what);
    }
}

/// Noise whose Lorenzo deltas mostly have no code: LorenzoQuant keeps far more deltas than its
/// first guess (one per 64 elements), so the call repeats with room for all of them and still
/// gives the CPU's bytes; a smooth field with a few unfit deltas keeps the first guess.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn kept_deltas_past_the_first_guess_give_cpu_bytes() {
    let mut rng = Rng(0x00de_17a5);
    let noise: Vec<f32> = (0..200_000).map(|_| f32::from_bits(0x3f80_0000 | (rng.next() as u32 >> 9))).collect();
    let smooth: Vec<f32> =
        (0..200_000).map(|i| ((i as f32) * 0.01).sin() * 10.0 + if i % 997 == 0 { 50.0 } else { 0.0 }).collect();
    for (what, data, bound) in [("noise", &noise, 1e-4), ("smooth with spikes", &smooth, 1e-3)] {
        for preset in ["fzgpu", "cusz", "mans"] {
            for shape in [vec![400, 500], vec![20, 100, 100]] {
                let mut p = fzmod::preset(preset, &shape).unwrap();
                p.set_error_bound(ErrorBound::new(ErrorMode::Abs, bound).unwrap()).unwrap();
                p.set_input_dtype(fzmod::DType::F32).unwrap();
                let data = Buffer::F32(data.clone());
                assert_backends_agree(&p, &data, &shape, &format!("{what} {preset} {shape:?}"));
            }
        }
    }
}

/// Truncated and corrupted archives: both backends refuse them alike, or decode them to the
/// same values (the validation front end is shared). Mutations of stage records and segments
/// are re-sealed with fresh CRCs so they reach the stage decoders on both backends.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn corrupt_archives_are_rejected_identically() {
    use common::reseal::{fix_crcs, layout};
    let gpu = gpu();
    let goldens = [
        "v1.0_cuszp_1d.fzm",
        "v1.0_cuszp2_2d.fzm",
        "v1.0_cuszp3-outlier_2d_specials.fzm",
        "v1.0_cuszp3-plain_3d.fzm",
        "v1.0_fzgpu_2d_specials.fzm",
        "v1.0_pfpl_f64.fzm",
        // The ANS and ADM heads are checked on the device: word counts and length bytes.
        "v1.0_mans_2d_specials.fzm",
        "v1.0_cusz_2d_specials.fzm",
    ];
    for name in goldens {
        let golden = std::fs::read(repo_root().join("tests/golden").join(name)).unwrap();
        let expected = fzmod::decompress(&golden).unwrap().data.to_le_bytes();
        let l = layout(&golden);
        let targets: Vec<usize> = l
            .records
            .iter()
            .flat_map(|r| r.clone())
            .chain(l.segments.iter().flat_map(|(r, _)| r.clone().take(600)))
            .collect();
        for opts in [FUSED, UNFUSED] {
            assert_eq!(fzmod::decompress_with(&gpu, &golden, opts).unwrap().data.to_le_bytes(), expected);
            for len in (0..golden.len()).step_by(97) {
                assert!(fzmod::decompress_with(&gpu, &golden[..len], opts).is_err());
            }
            for (k, &i) in targets.iter().enumerate() {
                let mut bad = golden.clone();
                bad[i] ^= [0x01, 0x80, 0xff][k % 3];
                fix_crcs(&mut bad, &l);
                let cpu = fzmod::decompress(&bad).map(|d| d.data.to_le_bytes());
                let dev = fzmod::decompress_with(&gpu, &bad, opts).map(|d| d.data.to_le_bytes());
                assert_eq!(cpu.is_ok(), dev.is_ok(), "{name} byte {i} {opts:?}: {:?} vs {:?}", cpu.err(), dev.err());
                if let (Ok(c), Ok(d)) = (cpu, dev) {
                    assert!(c == d, "{name} byte {i} {opts:?}: the backends decoded different values");
                }
            }
        }
    }
}

/// The embedding API: borrowed slices, caller memory, a reused compressor, and device-resident
/// input and output (owned and borrowed device memory) give the CPU's bytes and values.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn embedding_api_and_device_resident_entry_points() {
    use fzmod::backend::cuda::device::DeviceBuffer;
    use fzmod::backend::BackendChoice;
    let dev = CudaDevice::get().unwrap();
    let shape = [64usize, 1000];
    let data: Vec<f32> = (0..64_000).map(|i| ((i as f32) * 0.003).sin() * 50.0).collect();
    let bound = ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap();
    let cpu = fzmod::compress(&data, &shape, "cuszp3-outlier", bound).unwrap();
    for fusion in [true, false] {
        let gpu = fzmod::Compressor::preset::<f32>("cuszp3-outlier", &shape, bound, BackendChoice::Cuda)
            .unwrap()
            .with_options(RunOptions { fusion });
        for _ in 0..3 {
            assert!(gpu.compress(&data, &shape).unwrap() == cpu, "fusion {fusion}: reused compressor");
        }
        // A thread that never touched the device (as a Python or Dask worker's).
        let on_new_thread = std::thread::scope(|t| t.spawn(|| gpu.compress(&data, &shape).unwrap()).join().unwrap());
        assert!(on_new_thread == cpu, "fusion {fusion}: compress on a fresh thread");
        let mut back = vec![0f32; data.len()];
        gpu.decompress_into(&cpu, &mut back).unwrap();
        let mut reference = vec![0f32; data.len()];
        fzmod::decompress_into(&cpu, &mut reference).unwrap();
        assert!(back.iter().map(|v| v.to_bits()).eq(reference.iter().map(|v| v.to_bits())));
        assert!(gpu.decompress_into(&cpu, &mut back[1..]).is_err(), "wrong destination size");
        let owned = dev.to_device(&data).unwrap();
        assert!(gpu.compress_device(&owned, &shape).unwrap() == cpu, "owned device input");
        // SAFETY: `owned` holds data.len() f32 values and outlives `borrowed`.
        let borrowed = unsafe { DeviceBuffer::borrowed(fzmod::DType::F32, dev.address_of(&owned), data.len()) };
        assert!(gpu.compress_device(&borrowed, &shape).unwrap() == cpu, "borrowed device input");
        let (on_device, header) = gpu.decompress_device(&cpu).unwrap();
        assert_eq!(header.shape, [64, 1000]);
        assert!(dev.to_host(&on_device).unwrap().to_le_bytes() == fzmod::Buffer::F32(reference.clone()).to_le_bytes());
        // Incompressible values at a bound near float precision: every entry point stores
        // them as they are, with the same bytes.
        let mut rng = Rng(7);
        let noise: Vec<f32> = (0..64_000).map(|_| f32::from_bits(0x3f80_0000 | (rng.next() as u32 >> 9))).collect();
        let tight = ErrorBound::new(ErrorMode::Abs, 1e-9).unwrap();
        let stored = fzmod::compress(&noise, &shape, "cuszp3-outlier", tight).unwrap();
        assert!(fzmod::is_stored_raw(&fzmod::inspect(&stored).unwrap()));
        let gpu = fzmod::Compressor::preset::<f32>("cuszp3-outlier", &shape, tight, BackendChoice::Cuda)
            .unwrap()
            .with_options(RunOptions { fusion });
        assert!(gpu.compress(&noise, &shape).unwrap() == stored, "fusion {fusion}: stored raw from host memory");
        let on_device = dev.to_device(&noise).unwrap();
        assert!(gpu.compress_device(&on_device, &shape).unwrap() == stored, "fusion {fusion}: stored raw from device");
    }
}

/// Integer data of `dtype` for the FZ-GPU / PFPL stages: words of random magnitude (up to
/// 2^`bits`), either sign, with a random share of zeros so zero-elimination finds runs.
fn random_words(rng: &mut Rng, dtype: fzmod::DType, n: usize) -> Buffer {
    use fzmod::DType;
    let bits = rng.below(33) as u32;
    let zeros = rng.below(101);
    let v: Vec<i64> = (0..n)
        .map(|_| {
            if rng.below(100) < zeros {
                return 0;
            }
            let m = (rng.next() & ((1u64 << bits) - 1).max(1)) as i64;
            if rng.below(2) == 0 {
                m
            } else {
                -m
            }
        })
        .collect();
    match dtype {
        DType::U8 => Buffer::U8(v.iter().map(|&x| x as u8).collect()),
        DType::U16 => Buffer::U16(v.iter().map(|&x| x as u16).collect()),
        DType::I16 => Buffer::I16(v.iter().map(|&x| x as i16).collect()),
        DType::U32 => Buffer::U32(v.iter().map(|&x| x as u32).collect()),
        _ => Buffer::I32(v.iter().map(|&x| x as i32).collect()),
    }
}

/// One random single-stage case among Zigzag, Negabinary, Difference, Bitshuffle, RZE,
/// BitplaneRZE, ADM and ANS: its TOML, its input and the input's shape.
fn random_word_stage(rng: &mut Rng, which: u64) -> (String, Buffer, Vec<usize>) {
    use fzmod::DType;
    let words = [("int16", DType::I16), ("uint16", DType::U16), ("int32", DType::I32), ("uint32", DType::U32)];
    let (name, dtype) = words[rng.below(4) as usize];
    let n = [1, 7, 4096, 65_537, 1 + rng.below(300_000) as usize][rng.below(5) as usize];
    let (toml, dtype) = match which {
        0 => (format!("type = \"Zigzag\"\ninput_type = \"{name}\"\n"), dtype),
        1 => (format!("type = \"Negabinary\"\ninput_type = \"{name}\"\n"), dtype),
        2 => {
            let size = dtype.size() as u64;
            let chunk = [0, size, 7 * size, 16384, size * (1 + rng.below(9000))][rng.below(5) as usize];
            let map = ["none", "negabinary", "zigzag"][rng.below(3) as usize];
            (
                format!(
                    "type = \"Difference\"\ninput_type = \"{name}\"\nchunk_size = {chunk}\nfusion_mode = \"{map}\"\n"
                ),
                dtype,
            )
        }
        3 => {
            let (name, dtype) = [("uint8", DType::U8), words[0], words[1], words[2], words[3]][rng.below(5) as usize];
            let width = [1u64, 2, 4, 8][rng.below(4) as usize];
            let block = 8 * width * [1, 3, 64, 2048][rng.below(4) as usize];
            let t = format!(
                "type = \"Bitshuffle\"\ndata_type = \"{name}\"\nelement_width = {width}\nblock_size = {block}\n"
            );
            (t, dtype)
        }
        4 => {
            let word = [1u64, 2, 4, 8][rng.below(4) as usize];
            let chunk = [word, 16384, 65535 / word * word, word * (1 + rng.below(65535 / word))][rng.below(4) as usize];
            (format!("type = \"RZE\"\nchunk_size = {chunk}\nword_size = {word}\n"), DType::U8)
        }
        5 => ("type = \"BitplaneRZE\"\n".to_string(), DType::U16),
        6 => {
            let (name, dtype) = [("uint16", DType::U16), ("uint32", DType::U32)][rng.below(2) as usize];
            (format!("type = \"ADM\"\ninput_type = \"{name}\"\n"), dtype)
        }
        _ => (format!("type = \"ANS\"\nprob_bits = {}\n", 9 + rng.below(3)), DType::U8),
    };
    (toml, random_words(rng, dtype, n), vec![n])
}

/// The FZ-GPU and PFPL integer stages alone, forward and inverse, on random inputs, sizes and
/// parameters: device bytes == CPU bytes, and each decoder decodes the other's archive.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn fzgpu_and_pfpl_integer_stages_alone_give_cpu_bytes() {
    for seed in shard(1..=12u64) {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        for which in 0..8 {
            let (stage, data, shape) = random_word_stage(&mut rng, which);
            let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("seed {seed} n {}: {stage}", data.len()));
        }
    }
}

/// The same random cases on the CPU alone: the inputs the GPU test feeds are valid pipelines
/// that round-trip (so a GPU failure there is the device's).
#[test]
fn fzgpu_and_pfpl_integer_cases_round_trip_on_the_cpu() {
    for seed in 1..=3u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        for which in 0..8 {
            let (stage, data, shape) = random_word_stage(&mut rng, which);
            let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            let archive = p.compress(&data, &shape).unwrap_or_else(|e| panic!("{stage}: {e}"));
            assert!(fzmod::decompress(&archive).unwrap().data == data, "{stage}");
        }
    }
}

/// The float front ends alone (Quantizer inline words, LorenzoQuant with random tiles and
/// mappings) and the `fzgpu`, `pfpl` and `mans` presets on random fields, f32 and f64, abs and rel:
/// device bytes == CPU bytes fused and unfused, each decoder decodes the other's archive.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn fzgpu_and_pfpl_float_stages_and_presets_give_cpu_bytes() {
    for seed in shard(1..=16u64) {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xf00d);
        let f64_values = rng.below(3) == 0;
        let (mut data, shape) = random_field(&mut rng, f64_values);
        if let Buffer::F32(v) = &mut data {
            // The one f32 an inline word cannot carry: raw bits equal to the escape word.
            let at = rng.below(v.len() as u64) as usize;
            v[at] = f32::from_bits(u32::MAX);
        }
        let mode = [ErrorMode::Abs, ErrorMode::Rel][rng.below(2) as usize];
        let bound = ErrorBound::new(mode, [1e-1, 1e-3, 1e-5][rng.below(3) as usize]).unwrap();
        let tile = [1 + rng.below(8), 1 + rng.below(16), 1 + rng.below(64)];
        let mapping = ["sign_magnitude", "zigzag", "radius"][rng.below(3) as usize];
        let radius = 1 + rng.below(32768);
        let stages = [
            "type = \"Quantizer\"\ncode_type = \"uint32\"\ninplace_outliers = true\n".to_string(),
            format!(
                "type = \"LorenzoQuant\"\ncode_mapping = \"{mapping}\"\nquant_radius = {radius}\ntile_z = {}\ntile_y = {}\ntile_x = {}\n",
                tile[0], tile[1], tile[2]
            ),
            "type = \"LorenzoQuant\"\n".to_string(),
        ];
        for stage in &stages {
            let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
            p.set_error_bound(bound).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("seed {seed} shape {shape:?} {bound:?}: {stage}"));
        }
        for preset in ["pfpl", "fzgpu", "mans"] {
            let mut p = fzmod::preset(preset, &shape).unwrap();
            p.set_error_bound(bound).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("seed {seed} shape {shape:?} {bound:?}: {preset}"));
        }
    }
}

/// The golden `fzgpu`, `pfpl` and `mans` archives with record and segment bytes mutated and the CRCs
/// fixed (so the mutations reach the stage inverses): the device inverses refuse exactly what
/// the CPU refuses and otherwise decode to the CPU's values.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn mutated_fzgpu_and_pfpl_archives_decode_alike() {
    use common::reseal::{fix_crcs, layout};
    let gpu = gpu();
    for name in
        ["v1.0_fzgpu_2d_specials.fzm", "v1.0_pfpl_2d_specials.fzm", "v1.0_pfpl_f64.fzm", "v1.0_mans_2d_specials.fzm"]
    {
        let golden = std::fs::read(repo_root().join("tests/golden").join(name)).unwrap();
        let l = layout(&golden);
        let ranges = l.records.iter().cloned().chain(l.segments.iter().map(|(r, _)| r.clone()));
        for range in ranges {
            for i in range.clone().step_by(range.len() / 64 + 1) {
                for value in [golden[i] ^ 0x01, golden[i] ^ 0x80, 0x00, 0xff] {
                    let mut bad = golden.clone();
                    bad[i] = value;
                    fix_crcs(&mut bad, &l);
                    let cpu = fzmod::decompress(&bad).map(|d| d.data.to_le_bytes());
                    let dev = fzmod::decompress_with(&gpu, &bad, UNFUSED).map(|d| d.data.to_le_bytes());
                    assert_eq!(
                        cpu.is_ok(),
                        dev.is_ok(),
                        "{name} byte {i} = {value:#x}: {:?} vs {:?}",
                        cpu.err(),
                        dev.err()
                    );
                    if let (Ok(c), Ok(d)) = (cpu, dev) {
                        assert!(c == d, "{name} byte {i} = {value:#x}: decoders disagree");
                    }
                }
            }
        }
    }
}

/// Land-like runs of the fill value -1e10, NaN runs (one payload, and sometimes a random
/// payload per element, enough to overflow the segment's first capacity guess) over a random
/// field; sometimes nothing or everything masked, or every other element (more runs than the
/// device's first guess at the run starts).
fn masked_field(rng: &mut Rng, f64_values: bool) -> (Buffer, Vec<usize>) {
    let (data, shape) = random_field(rng, f64_values);
    let mut v = common::values(&data);
    let n = v.len();
    let payloads = rng.below(4) == 0;
    match rng.below(9) {
        0 => {}
        1 => v.iter_mut().for_each(|x| *x = -1e10),
        2 => v.iter_mut().step_by(2).for_each(|x| *x = f64::NAN),
        _ => {
            for _ in 0..1 + rng.below(40) {
                let (at, len) = (rng.below(n as u64) as usize, 1 + rng.below(n as u64 / 8 + 1) as usize);
                for x in &mut v[at..(at + len).min(n)] {
                    *x = if rng.below(2) == 0 { -1e10 } else { f64::NAN };
                }
            }
        }
    }
    let data = if f64_values {
        let bits =
            |x: f64, r: u64| if x.is_nan() && payloads { f64::from_bits(0x7ff8_0000_0000_0000 | r >> 13) } else { x };
        Buffer::F64(v.iter().map(|&x| bits(x, rng.next())).collect())
    } else {
        let bits = |x: f64, r: u64| {
            if x.is_nan() && payloads {
                f32::from_bits(0xffc0_0000 | (r >> 42) as u32)
            } else {
                x as f32
            }
        };
        Buffer::F32(v.iter().map(|&x| bits(x, rng.next())).collect())
    };
    (data, shape)
}

/// The Mask stage alone and in every documented masked pipeline: device bytes == CPU bytes
/// (fused and unfused), each decoder decodes the other's archive; then mutated masked archives
/// decode alike.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn masked_pipelines_give_cpu_bytes() {
    use common::reseal::{fix_crcs, layout};
    let examples = ["masked-cuszp2", "masked-cuszp3-outlier", "masked-fzgpu", "masked-pfpl"];
    let alone = MASK_ALONE;
    for seed in shard(1..=24u64) {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x3a5c);
        let f64_values = rng.below(3) == 0;
        let (data, shape) = masked_field(&mut rng, f64_values);
        let mut tomls = vec![alone.to_string()];
        tomls.extend(
            examples
                .iter()
                .map(|e| std::fs::read_to_string(repo_root().join(format!("docs/examples/{e}.toml"))).unwrap()),
        );
        for toml in &tomls {
            let mut p = fzmod::from_toml(toml).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            let what = format!("seed {seed} shape {shape:?} {}", toml.lines().next().unwrap());
            assert_backends_agree(&p, &data, &shape, &what);
        }
    }
    let gpu = gpu();
    let mut rng = Rng(0x5eed);
    let (data, shape) = masked_field(&mut rng, false);
    let mut p = fzmod::from_toml(alone).unwrap();
    p.set_input_dtype(data.dtype()).unwrap();
    let archive = p.compress(&data, &shape).unwrap();
    let l = layout(&archive);
    let mask_segment = l.segments.iter().map(|(r, _)| r.clone()).max_by_key(|r| r.start).unwrap();
    for range in [l.records[0].clone(), mask_segment] {
        for i in range.clone().step_by(range.len() / 64 + 1) {
            for value in [archive[i] ^ 0x01, archive[i] ^ 0x80, 0x00, 0xff] {
                let mut bad = archive.clone();
                bad[i] = value;
                fix_crcs(&mut bad, &l);
                let cpu = fzmod::decompress(&bad).map(|d| d.data.to_le_bytes());
                let dev = fzmod::decompress_with(&gpu, &bad, UNFUSED).map(|d| d.data.to_le_bytes());
                assert_eq!(cpu.is_ok(), dev.is_ok(), "byte {i} = {value:#x}: {:?} vs {:?}", cpu.err(), dev.err());
                if let (Ok(c), Ok(d)) = (cpu, dev) {
                    assert!(c == d, "byte {i} = {value:#x}: decoders disagree");
                }
            }
        }
    }
}

/// The Mask stage alone (its values go to the archive as they are).
const MASK_ALONE: &str = "[[stage]]\nname = \"mask\"\ntype = \"Mask\"\ninf = true\nfill_value = -1e10\n";

/// A masked compress from host memory fills the job's own uploaded input in place and puts it
/// back when the walk ends: the walk repeated after a later stage overflowed (noise outgrows
/// Huffman's first room) and the bench's timed walks over one job (it checks that every one
/// gives the first archive) both give the CPU's bytes, exceptions (NaN payloads, ±Inf next to
/// NaN and the fill) included; so do decodes repeated over one job, with the Mask's inverse
/// in place and, for the Mask alone, not.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn masked_walks_put_the_input_back() {
    let toml = r#"
[[stage]]
name = "mask"
type = "Mask"
inf = true
fill_value = -1e10
[[stage]]
name = "quant"
type = "LorenzoQuant"
inputs = [{ from = "mask", port = "values" }]
code_type = "uint16"
code_mapping = "radius"
quant_radius = 512
error_bound_mode = "rel"
error_bound = 1e-3
[[stage]]
name = "coder"
type = "Huffman"
input_type = "uint16"
bklen = 1024
inputs = [{ from = "quant", port = "codes" }]
"#;
    let mut rng = Rng(0xfeed);
    let n = 1 << 20;
    let mut v: Vec<f32> = (0..n).map(|_| (rng.next() >> 40) as f32 / (1u64 << 24) as f32).collect();
    for _ in 0..200 {
        let at = rng.below(n as u64) as usize;
        let end = (at + 1 + rng.below(300) as usize).min(n);
        for x in &mut v[at..end] {
            *x = match rng.below(4) {
                0 => -1e10,
                1 => f32::from_bits(0x7fc0_0000 | (rng.next() >> 42) as u32),
                2 => f32::NEG_INFINITY,
                _ => f32::NAN,
            };
        }
    }
    let (data, shape) = (Buffer::F32(v), [n]);
    let p = fzmod::from_toml(toml).unwrap();
    let archive = p.compress(&data, &shape).unwrap();
    // Deltas of noise span ±500 bins: ~9.7 bits a code, past the first room of 8.
    assert!(archive.len() > n + n / 10, "the codes must outgrow Huffman's first room (n bytes): {}", archive.len());
    assert_backends_agree(&p, &data, &shape, "masked noise through Huffman");
    let timing = p.bench_on(&gpu(), &data, &shape, 3, FUSED).unwrap();
    let reference = fzmod::decompress(&archive).unwrap();
    assert!(timing.decoded.to_le_bytes() == reference.data.to_le_bytes(), "the bench's decode differs");
    // Decodes repeated over one job: above, the Mask restores into the values LorenzoQuant's
    // inverse rebuilt (its own to use up); alone, its values are an archived segment the job
    // keeps for the next call, which it must copy instead.
    let alone = fzmod::from_toml(MASK_ALONE).unwrap();
    let timing = alone.bench_on(&gpu(), &data, &shape, 3, FUSED).unwrap();
    assert!(timing.decoded.to_le_bytes() == data.to_le_bytes(), "the Mask alone's repeated decode differs");
}

/// One random Huffman case: its TOML and its input (skewed around a centre, uniform over a
/// random width, or one value; every symbol width; book lengths from 1 to the largest).
fn random_huffman_case(rng: &mut Rng) -> (String, Buffer) {
    use fzmod::DType;
    let (name, dtype, most) =
        [("uint8", DType::U8, 256u64), ("uint16", DType::U16, 4096), ("uint32", DType::U32, 4096)]
            [rng.below(3) as usize];
    let n = [1, 4096, 4097, 1 + rng.below(600_000) as usize][rng.below(4) as usize];
    let bklen = [1, 2, most, 1 + rng.below(most)][rng.below(4) as usize];
    let (kind, bits, centre) = (rng.below(4), 1 + rng.below(32), rng.below(1 << 16));
    let mut v: Vec<u64> = (0..n)
        .map(|_| match kind {
            // Geometric-like spread: most symbols at the centre, a tail that reaches escapes.
            0 => centre + (rng.next() >> 60) * (rng.next() >> 60) * (rng.next() >> 60),
            1 => rng.next() & ((1u64 << bits) - 1),
            // Codes of about 1, 2, 3 and 3 bits.
            3 => centre + [0, 0, 0, 0, 1, 1, 2][rng.below(7) as usize],
            _ => centre,
        })
        .collect();
    if kind == 3 {
        // Long runs of the rarest, highest symbol, whose canonical code is all ones: a parse
        // started inside such a run never meets the true one there (the device decoder's lanes
        // must resynchronise past it).
        let mut at = 0;
        while at < n {
            let run = (64 + rng.below(4096) as usize).min(n - at);
            v[at..at + run].fill(centre + 3);
            at += run + rng.below(40_000) as usize;
        }
    }
    let data = match dtype {
        DType::U8 => Buffer::U8(v.iter().map(|&x| x as u8).collect()),
        DType::U16 => Buffer::U16(v.iter().map(|&x| x as u16).collect()),
        _ => Buffer::U32(v.iter().map(|&x| x as u32).collect()),
    };
    (format!("type = \"Huffman\"\ninput_type = \"{name}\"\nbklen = {bklen}\n"), data)
}

/// Huffman alone on random inputs: device bytes == CPU bytes, each decoder decodes the other's.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn huffman_alone_gives_cpu_bytes() {
    for seed in shard(1..=40u64) {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let (stage, data) = random_huffman_case(&mut rng);
        let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
        p.set_input_dtype(data.dtype()).unwrap();
        assert_backends_agree(&p, &data, &[data.len()], &format!("seed {seed} n {}: {stage}", data.len()));
    }
}

/// The same cases on the CPU alone: valid pipelines that round-trip.
#[test]
fn huffman_cases_round_trip_on_the_cpu() {
    for seed in 1..=6u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let (stage, data) = random_huffman_case(&mut rng);
        let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
        p.set_input_dtype(data.dtype()).unwrap();
        let archive = p.compress(&data, &[data.len()]).unwrap_or_else(|e| panic!("{stage}: {e}"));
        assert!(fzmod::decompress(&archive).unwrap().data == data, "{stage}");
    }
}

/// The Interpolation stage (random radius, anchor, α, β, code order) and the `interp` and
/// `interp-fast` presets, f32 and f64, abs and rel, radius and zigzag codes, on fields with NaN and ±Inf:
/// device bytes == CPU bytes fused and unfused, each decoder decodes the other's archive.
/// Seeds cycle through 1-D to 4-D random shapes (extents rarely multiples of the anchor
/// stride), then a few fixed shapes that span several default anchor blocks (64 in 2-D and
/// 3-D, 1024 in 1-D) with partial blocks at the upper edges.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn interpolation_stage_and_presets_give_cpu_bytes() {
    let fixed: [&[usize]; 6] = [&[50_001], &[257, 300], &[70, 65, 33], &[3, 5, 40, 41], &[1, 130, 1, 129], &[2, 1]];
    for seed in 1..=(16 + fixed.len() as u64) {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x1e7e);
        let f64_values = seed % 8 >= 4;
        let (mut data, shape) = match fixed.get((seed as usize).wrapping_sub(17)) {
            Some(shape) => field_of_shape(&mut rng, f64_values, shape.to_vec()),
            None => {
                let ndim = 1 + (seed % 4) as usize;
                let shape = (0..ndim).map(|_| 1 + rng.below([50_000, 300, 40, 12][ndim - 1]) as usize).collect();
                field_of_shape(&mut rng, f64_values, shape)
            }
        };
        // At least one NaN, +Inf and -Inf (when there is room).
        let n = data.len();
        for (k, special) in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY].into_iter().enumerate() {
            let at = (rng.below(n as u64) as usize + k) % n;
            match &mut data {
                Buffer::F32(v) => v[at] = special as f32,
                Buffer::F64(v) => v[at] = special,
                _ => unreachable!(),
            }
        }
        let mode = [ErrorMode::Abs, ErrorMode::Rel][rng.below(2) as usize];
        let bound = ErrorBound::new(mode, [1e-2, 1e-3, 1e-4][rng.below(3) as usize]).unwrap();
        let stage = format!(
            "type = \"Interpolation\"\ncode_mapping = \"{}\"\ncode_order = \"{}\"\nquant_radius = {}\nanchor_stride = {}\nalpha = {}\nbeta = {}\n",
            ["radius", "zigzag"][(seed / 2 % 2) as usize],
            ["natural", "level", "auto"][(seed % 3) as usize],
            [1 + rng.below(32768), 1, 32768, 7][rng.below(4) as usize],
            1u64 << (1 + rng.below(8)),
            [1.0, 1.25, 1.5][rng.below(3) as usize],
            [1.0, 2.0, 4.0][rng.below(3) as usize],
        );
        let mut p = fzmod::from_toml(&format!("[[stage]]\nname = \"s\"\n{stage}")).unwrap();
        p.set_error_bound(bound).unwrap();
        p.set_input_dtype(data.dtype()).unwrap();
        assert_backends_agree(&p, &data, &shape, &format!("seed {seed} shape {shape:?} {bound:?}: {stage}"));
        for preset in ["interp", "interp-fast"] {
            let mut p = fzmod::preset(preset, &shape).unwrap();
            p.set_error_bound(bound).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("seed {seed} shape {shape:?} {bound:?}: {preset}"));
        }
    }
}

/// Outlier codes the outlier list lacks (a corrupt archive, resealed): both decoders decode
/// such an element as 0, with and without other outliers (the device's bitmap of stored
/// outliers, or none), in anchor boxes (2-D) and pass by pass (3-D), fused and unfused.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn interpolation_markers_without_entries_decode_alike() {
    use common::reseal::{fix_crcs, layout};
    let gpu = gpu();
    for shape in [vec![300usize, 257], vec![70, 65, 33]] {
        let n: usize = shape.iter().product();
        for with_nan in [false, true] {
            let mut v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.001).sin()).collect();
            if with_nan {
                v[n / 3] = f32::NAN;
            }
            // One stage: the codes are a raw u16 segment; radius mapping, outlier code 0.
            let mut p = fzmod::from_toml("[[stage]]\nname = \"s\"\ntype = \"Interpolation\"\n").unwrap();
            p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap()).unwrap();
            let archive = p.compress(&Buffer::F32(v), &shape).unwrap();
            let l = layout(&archive);
            let (codes, _) = l.segments.iter().find(|(r, _)| r.len() == 2 * n).expect("a raw code segment");
            let mut bad = archive.clone();
            for at in [n / 2, n - 5] {
                bad[codes.start + 2 * at..codes.start + 2 * at + 2].fill(0);
            }
            fix_crcs(&mut bad, &l);
            let cpu = fzmod::decompress(&bad).unwrap().data.to_le_bytes();
            assert_eq!(&cpu[4 * (n / 2)..4 * (n / 2) + 4], &[0; 4], "{shape:?}: the CPU decodes the bare marker as 0");
            for opts in [FUSED, UNFUSED] {
                let dev = fzmod::decompress_with(&gpu, &bad, opts).unwrap().data.to_le_bytes();
                assert!(dev == cpu, "{shape:?} NaN {with_nan} {opts:?}: the decoders disagree");
            }
        }
    }
}

/// The run layout of outlier lists (docs/FORMAT.md 6.1.1) on the device: outlier patterns
/// that cross the device's 2048-element list tiles and its 8-element thread walks (one run
/// over everything, runs of 1..5000, alternating, runs at both ends, mixed NaN payloads,
/// −0.0 / +0.0 and fill values) through every Quantizer and LorenzoQuant preset: the GPU
/// writes the CPU's bytes fused and unfused, and both decoders agree.
#[test]
#[ignore = "needs a CUDA device (scripts/gpu-check.sh)"]
fn outlier_runs_give_cpu_bytes() {
    // Three outlier tiles and a partial one, as 7 columns.
    let n = 7 * 1777;
    let shape = [n / 7, 7];
    let mut rng = Rng(0x5eed_0f0f_f1ce);
    let base: Vec<f32> = (0..n).map(|i| (i as f32 * 0.01).sin() * 10.0).collect();
    let nan2 = f32::from_bits(0x7fc0_0002);
    type Pattern = Box<dyn Fn(usize) -> Option<f32>>;
    let patterns: Vec<(&str, Pattern)> = vec![
        ("all NaN", Box::new(|_| Some(f32::NAN))),
        ("alternating NaN", Box::new(|i| (i % 2 == 1).then_some(f32::NAN))),
        ("long fill runs", Box::new(|i| ((i / 2500) % 2 == 0).then_some(-1e10))),
        ("runs at the ends", Box::new(move |i| (i < 3 || i + 5 >= n).then_some(f32::INFINITY))),
        (
            "payloads and signs",
            Box::new(move |i| match i % 13 {
                0..=3 => Some(nan2),
                4..=5 => Some(f32::NAN),
                6 => Some(-1e38),
                _ => None,
            }),
        ),
    ];
    for (name, pattern) in &patterns {
        let mut data: Vec<f32> = base.iter().enumerate().map(|(i, &v)| pattern(i).unwrap_or(v)).collect();
        for _ in 0..40 {
            let at = rng.below(n as u64) as usize;
            data[at] = [f32::NAN, -0.0, 3.0e38][rng.below(3) as usize];
        }
        let data = Buffer::F32(data);
        for preset in ["cuszp", "cuszp2", "cuszp3-outlier", "fzgpu", "cusz", "mans"] {
            let mut p = fzmod::preset(preset, &shape).unwrap();
            p.set_error_bound(ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap()).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_backends_agree(&p, &data, &shape, &format!("{name} {preset}"));
        }
    }
}

/// Chunked archives on the GPU's lanes (several chunks in flight on separate streams): the
/// CPU's bytes, slabs and boxes, rel and abs bounds, NaN in some chunks; decoded on the lanes
/// straight into the caller's array, equal to the CPU decode; a damaged chunk is named.
#[test]
#[ignore = "needs NVRTC and a CUDA device (scripts/gpu-check.sh)"]
fn chunked_archives_on_lanes_give_cpu_bytes() {
    use fzmod::{ChunkOptions, Decoder};
    let gpu = gpu();
    let mut state = 0x9e37_79b9_u64;
    let cases: [(&str, Vec<usize>, Vec<usize>); 5] = [
        ("cuszp2", vec![1 << 20], vec![40_000]),
        ("pfpl", vec![96, 4000], vec![8, 4000]),
        ("fzgpu", vec![64, 300, 40], vec![16, 100, 40]),
        ("cuszp3-outlier", vec![40, 96, 64], vec![16, 40, 24]),
        ("interp-fast", vec![24, 70, 90], vec![24, 16, 90]),
    ];
    for (preset, shape, chunk) in cases {
        let n: usize = shape.iter().product();
        let mut data: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.0007).sin() * 50.0 + (i % 97) as f32 * 0.01).collect();
        for _ in 0..20 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            data[(state >> 33) as usize % n] = f32::NAN;
        }
        let input = Buffer::F32(data);
        for bound in [ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap(), ErrorBound::new(ErrorMode::Abs, 0.05).unwrap()] {
            let mut p = fzmod::preset(preset, &shape).unwrap();
            p.set_error_bound(bound).unwrap();
            let opts = ChunkOptions::shape(&chunk);
            let what = format!("{preset} {shape:?} chunks {chunk:?} {bound:?}");
            let cpu = p.compress_chunked(&Backend::Cpu, &input, &shape, &opts, FUSED).unwrap();
            for run in 0..2 {
                let dev = p.compress_chunked(&gpu, &input, &shape, &opts, FUSED).unwrap();
                assert!(dev == cpu, "{what}: GPU chunked bytes differ from the CPU's (run {run})");
            }
            let expected = fzmod::decompress(&cpu).unwrap().data;
            let mut out = vec![0f32; n];
            Decoder::new(gpu.clone()).decompress_into(&cpu, &mut out).unwrap();
            assert!(Buffer::F32(out.clone()).native_bytes() == expected.native_bytes(), "{what}: GPU decode into");
            let whole = Decoder::new(gpu.clone()).decompress(&cpu).unwrap().data;
            assert!(whole.native_bytes() == expected.native_bytes(), "{what}: GPU decode");
            // A flipped byte deep in the data area: the same error on both backends.
            let mut bad = cpu.clone();
            let at = bad.len() - bad.len() / 3;
            bad[at] ^= 0x40;
            let on_cpu = Decoder::new(Backend::Cpu).decompress_into(&bad, &mut out).err().map(|e| e.to_string());
            let on_gpu = Decoder::new(gpu.clone()).decompress_into(&bad, &mut out).err().map(|e| e.to_string());
            assert!(on_cpu.is_some(), "{what}: a damaged chunk decoded");
            assert_eq!(on_gpu, on_cpu, "{what}: a damaged chunk");
        }
    }
}
