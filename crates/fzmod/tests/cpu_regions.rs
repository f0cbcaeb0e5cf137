//! Fused CPU regions (graph/cpu_region.rs) against the stage walk (`RunOptions { fusion:
//! false }`): the same archive bytes and the same decode for every preset on every shared
//! field, for arrays of awkward lengths and values through chains of every fusable kind, on
//! any thread count, and for damaged archives (both fail, or both give the same values).

mod common;

use common::reseal::{fix_crcs, layout};
use common::*;
use fzmod::backend::Backend;
use fzmod::{Buffer, ErrorBound, ErrorMode, Pipeline, RunOptions};

const FUSED: RunOptions = RunOptions { fusion: true };
const WALKED: RunOptions = RunOptions { fusion: false };

/// Compress `data` both ways on `threads` threads; the archives must be equal, and so must
/// their decodes both ways. Returns the archive.
fn same_both_ways(p: &Pipeline, data: &Buffer, shape: &[usize], threads: usize, what: &str) -> Vec<u8> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let fused = p.compress_with(&Backend::Cpu, data, shape, FUSED).unwrap();
        let walked = p.compress_with(&Backend::Cpu, data, shape, WALKED).unwrap();
        assert!(fused == walked, "{what}: fused archive differs from the stage walk's");
        let a = fzmod::decompress_with(&Backend::Cpu, &fused, FUSED).unwrap();
        let b = fzmod::decompress_with(&Backend::Cpu, &fused, WALKED).unwrap();
        assert!(a.data.to_le_bytes() == b.data.to_le_bytes(), "{what}: fused decode differs");
        // An archive at an odd address: segments the region reads as words are not aligned.
        let odd = [&[0u8][..], &fused].concat();
        let c = fzmod::decompress_with(&Backend::Cpu, &odd[1..], FUSED).unwrap();
        assert!(c.data.to_le_bytes() == b.data.to_le_bytes(), "{what}: fused decode at an odd address differs");
        fused
    })
}

#[test]
fn every_preset_on_every_shared_field_gives_the_stage_walks_bytes() {
    let test = "every_preset_on_every_shared_field_gives_the_stage_walks_bytes";
    let Some(dir) = shared_data_for(test, &SHARED_FIELDS) else { return };
    let bounds = [ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap(), ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap()];
    for path in shared_fields(&dir) {
        let field = load(&path);
        for preset in fzmod::PRESETS {
            for bound in bounds {
                let mut p = fzmod::preset(preset.name, &field.shape).unwrap();
                p.set_error_bound(bound).unwrap();
                p.set_input_dtype(field.data.dtype()).unwrap();
                let what = format!("{} {} {:?}", field.name, preset.name, bound);
                same_both_ways(&p, &field.data, &field.shape, 2, &what);
            }
        }
    }
}

/// Pipelines whose stages all fuse: the pfpl chain with other grains and word sizes, the
/// indexed Quantizer, chains that end in a transform (its output archived), the word maps;
/// and a region that ends in ADM, before ANS (which has no fragment).
const CHAINS: [&str; 7] = [
    "",
    r#"[[stage]]
name = "q"
type = "Quantizer"
error_bound_mode = "abs"
error_bound = 0.01
[[stage]]
name = "d"
type = "Difference"
input_type = "int32"
chunk_size = 4000
fusion_mode = "zigzag"
inputs = [{ from = "q", port = "codes" }]
[[stage]]
name = "s"
type = "Bitshuffle"
data_type = "uint32"
element_width = 4
block_size = 4096
inputs = [{ from = "d" }]
[[stage]]
name = "r"
type = "RZE"
chunk_size = 2048
word_size = 4
inputs = [{ from = "s" }]
"#,
    r#"[[stage]]
name = "q"
type = "Quantizer"
code_type = "uint32"
inplace_outliers = true
error_bound_mode = "rel"
error_bound = 1e-4
[[stage]]
name = "d"
type = "Difference"
input_type = "uint32"
chunk_size = 1024
fusion_mode = "negabinary"
inputs = [{ from = "q", port = "codes" }]
[[stage]]
name = "s"
type = "Bitshuffle"
data_type = "uint32"
element_width = 2
block_size = 1024
inputs = [{ from = "d" }]
"#,
    r#"[[stage]]
name = "q"
type = "Quantizer"
code_type = "uint32"
inplace_outliers = true
error_bound_mode = "abs"
error_bound = 0.5
[[stage]]
name = "s"
type = "Bitshuffle"
data_type = "uint32"
element_width = 4
block_size = 65536
inputs = [{ from = "q", port = "codes" }]
[[stage]]
name = "r"
type = "RZE"
chunk_size = 1000
word_size = 2
inputs = [{ from = "s" }]
"#,
    r#"[[stage]]
name = "q"
type = "Quantizer"
error_bound_mode = "rel"
error_bound = 1e-3
[[stage]]
name = "z"
type = "Zigzag"
input_type = "int32"
inputs = [{ from = "q", port = "codes" }]
[[stage]]
name = "n"
type = "Negabinary"
input_type = "uint32"
inputs = [{ from = "z" }]
[[stage]]
name = "s"
type = "Bitshuffle"
data_type = "uint32"
element_width = 4
block_size = 8192
inputs = [{ from = "n" }]
[[stage]]
name = "r"
type = "RZE"
chunk_size = 8192
word_size = 1
inputs = [{ from = "s" }]
"#,
    r#"[[stage]]
name = "q"
type = "Quantizer"
error_bound_mode = "abs"
error_bound = 0.25
[[stage]]
name = "z"
type = "Zigzag"
input_type = "int32"
inputs = [{ from = "q", port = "codes" }]
"#,
    r#"[[stage]]
name = "q"
type = "Quantizer"
code_type = "uint32"
inplace_outliers = true
error_bound_mode = "abs"
error_bound = 0.02
[[stage]]
name = "a"
type = "ADM"
input_type = "uint32"
inputs = [{ from = "q", port = "codes" }]
[[stage]]
name = "c"
type = "ANS"
inputs = [{ from = "a", port = "codes" }]
"#,
];

fn chain(k: usize, shape: &[usize]) -> Pipeline {
    match k {
        0 => fzmod::preset("pfpl", shape).unwrap(),
        _ => fzmod::from_toml(CHAINS[k]).unwrap(),
    }
}

/// Values of one kind: smooth, noisy, NaN and ±Inf every few elements, constant, huge.
fn values(kind: usize, n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    let mut noise = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    (0..n)
        .map(|i| {
            let t = i as f64;
            match kind {
                0 => (t * 0.001).sin() * 100.0 + (t * 0.0173).cos(),
                1 => noise() * 1e3,
                2 if i % 7 == 3 => [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][i % 3],
                2 => (t * 0.01).sin(),
                3 => 42.5,
                _ => (t * 0.003).sin() * 3e37,
            }
        })
        .collect()
}

#[test]
fn awkward_lengths_and_values_give_the_stage_walks_bytes() {
    let lengths = [1usize, 2, 7, 4095, 16385, 65543, 262_145, 1_000_003];
    let mut fused_somewhere = 0;
    for (k, _) in CHAINS.iter().enumerate() {
        for (i, &n) in lengths.iter().enumerate() {
            let kind = i % 5;
            for f64_input in [false, true] {
                let v = values(kind, n, 17 + i as u64);
                let data = match f64_input {
                    true => Buffer::F64(v),
                    false => Buffer::F32(v.iter().map(|&x| x as f32).collect()),
                };
                let mut p = chain(k, &[n]);
                p.set_input_dtype(data.dtype()).unwrap();
                let threads = 1 + (i + k) % 3;
                let what = format!("chain {k}, {n} {} values of kind {kind}, {threads} threads", data.dtype());
                same_both_ways(&p, &data, &[n], threads, &what);
                fused_somewhere += 1;
            }
        }
    }
    assert_eq!(fused_somewhere, CHAINS.len() * lengths.len() * 2);
}

/// TiledLorenzo chains on grids of awkward extents in 1, 2, 3 and 4 dimensions: cuSZp3's
/// presets, other tiles, and a chain that ends in TiledLorenzo (its tile-major output
/// archived). Blocks are cut along bands of tiles; each grid is large enough for several.
#[test]
fn tiled_grids_give_the_stage_walks_bytes() {
    let tiled = |tile: &str, delta: bool, coder: bool| {
        let mut toml = format!(
            r#"[[stage]]
name = "q"
type = "Quantizer"
error_bound_mode = "rel"
error_bound = 1e-3
[[stage]]
name = "t"
type = "TiledLorenzo"
data_type = "int32"
delta = {delta}
{tile}
inputs = [{{ from = "q", port = "codes" }}]
"#
        );
        if coder {
            toml +=
                "[[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\nblock_size = 24\ninputs = [{ from = \"t\" }]\n";
        }
        fzmod::from_toml(&toml).unwrap()
    };
    let shapes: [&[usize]; 9] = [
        &[1],
        &[100_003],
        &[33, 17],
        &[700, 601],
        &[3, 100_000],
        &[5, 9, 13],
        &[21, 90, 91],
        &[2, 3, 40, 50],
        &[9, 1, 300, 301],
    ];
    grids_give_the_stage_walks_bytes(&shapes, &[0, 1, 2, 3, 4], |shape| {
        let mut pipelines: Vec<Pipeline> = ["cuszp3-plain", "cuszp3-fixed", "cuszp3-outlier"]
            .iter()
            .map(|name| fzmod::preset(name, shape).unwrap())
            .collect();
        pipelines.push(tiled("tile_x = 5\ntile_y = 3\ntile_z = 2", true, true));
        pipelines.push(tiled("tile_x = 16", true, false));
        pipelines.push(tiled("", false, false));
        pipelines
    });
}

/// Every pipeline `pipelines(shape)` makes for every grid of `shapes` gives the same bytes
/// both ways, on values of the `kinds` in turn, f32 and f64 in turn, on 1–3 threads.
fn grids_give_the_stage_walks_bytes(
    shapes: &[&[usize]],
    kinds: &[usize],
    pipelines: impl Fn(&[usize]) -> Vec<Pipeline>,
) {
    for (i, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        for (k, mut p) in pipelines(shape).into_iter().enumerate() {
            let kind = kinds[(i + k) % kinds.len()];
            let v = values(kind, n, 3 + i as u64);
            let data = match (i + k) % 2 {
                0 => Buffer::F32(v.iter().map(|&x| x as f32).collect()),
                _ => Buffer::F64(v),
            };
            p.set_input_dtype(data.dtype()).unwrap();
            let threads = 1 + (i + k) % 3;
            let what =
                format!("pipeline {k}, shape {shape:?} {} values of kind {kind}, {threads} threads", data.dtype());
            same_both_ways(&p, &data, shape, threads, &what);
        }
    }
}

/// LorenzoQuant → BitplaneRZE (`fzgpu`, and other tiles and code mappings) and LorenzoQuant →
/// ADM before ANS (`mans`) on grids of awkward extents in 1, 2, 3 and 4 dimensions, with value
/// outliers (NaN, ±Inf, huge values) and delta outliers (noise at a tight bound). Blocks are
/// cut along bands of tiles; each grid is large enough for several.
#[test]
fn lorenzo_quant_grids_give_the_stage_walks_bytes() {
    let quantized = |params: &str| {
        fzmod::from_toml(&format!(
            r#"[[stage]]
name = "q"
type = "LorenzoQuant"
error_bound_mode = "rel"
error_bound = 1e-4
{params}
[[stage]]
name = "c"
type = "BitplaneRZE"
inputs = [{{ from = "q", port = "codes" }}]
"#
        ))
        .unwrap()
    };
    let shapes: [&[usize]; 8] =
        [&[1], &[100_003], &[33, 17], &[700, 601], &[3, 100_000], &[21, 90, 91], &[2, 3, 40, 50], &[9, 1, 300, 301]];
    grids_give_the_stage_walks_bytes(&shapes, &[0, 2, 1, 4], |shape| {
        vec![
            fzmod::preset("fzgpu", shape).unwrap(),
            fzmod::preset("mans", shape).unwrap(),
            quantized("tile_x = 5\ntile_y = 3\ntile_z = 2\ncode_mapping = \"zigzag\""),
            quantized("tile_x = 64\ncode_mapping = \"radius\"\nquant_radius = 8"),
        ]
    });
}

/// Damaged archives behind recomputed CRCs: the fused decode fails where the stage walk
/// fails and gives its values where it succeeds.
#[test]
fn damaged_archives_decode_alike_fused_and_walked() {
    let n = 150_000;
    let data = Buffer::F32(values(2, n, 5).iter().map(|&x| x as f32).collect());
    // The 1-D chains, and `fzgpu` on a grid of bands.
    let cases = [0, 1, 3, 4].map(|k| (format!("chain {k}"), chain(k, &[n]), vec![n]));
    let grid = vec![300, 500];
    let cases = cases.into_iter().chain([("fzgpu".to_string(), fzmod::preset("fzgpu", &grid).unwrap(), grid)]);
    for (k, mut p, shape) in cases {
        p.set_input_dtype(data.dtype()).unwrap();
        let archive = p.compress_with(&Backend::Cpu, &data, &shape, FUSED).unwrap();
        let l = layout(&archive);
        let mut bad = archive.clone();
        let (mut failed, mut decoded) = (0, 0);
        let targets = l.records.iter().cloned().chain(l.segments.iter().map(|(r, _)| r.clone()));
        for range in targets {
            let step = (range.len() / 97).max(1);
            for i in range.step_by(step) {
                for value in [archive[i] ^ 0x01, archive[i] ^ 0x80, 0x00, 0xff] {
                    bad[i] = value;
                    fix_crcs(&mut bad, &l);
                    let a = fzmod::decompress_with(&Backend::Cpu, &bad, FUSED).map(|d| d.data.to_le_bytes());
                    let b = fzmod::decompress_with(&Backend::Cpu, &bad, WALKED).map(|d| d.data.to_le_bytes());
                    match (a, b) {
                        (Err(_), Err(_)) => failed += 1,
                        (Ok(a), Ok(b)) if a == b => decoded += 1,
                        (a, b) => panic!(
                            "{k}, byte {i} -> {value:#04x}: fused {:?}, walked {:?}",
                            a.map(|v| v.len()),
                            b.map(|v| v.len())
                        ),
                    }
                }
                bad[i] = archive[i];
            }
        }
        fix_crcs(&mut bad, &l);
        eprintln!("{k}: {failed} damaged archives failed both ways, {decoded} decoded alike");
        assert!(failed > 0, "{k}: no damage was caught");
    }
}
