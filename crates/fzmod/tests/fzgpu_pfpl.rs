//! The `fzgpu` and `pfpl` presets and their stages: the bound on every element of every shared
//! field, FZ-GPU's published ratios, thread-count determinism, and typed errors (never a panic)
//! for every corrupt or truncated stage record and payload.

mod common;

use common::*;
use fzmod::archive::InputRef;
use fzmod::stage::ForwardContext;
use fzmod::{Buffer, DType, ErrorBound, ErrorMode};

const PRESETS: [&str; 2] = ["fzgpu", "pfpl"];
const BOUNDS: [(ErrorMode, f64); 4] =
    [(ErrorMode::Rel, 1e-2), (ErrorMode::Rel, 1e-3), (ErrorMode::Rel, 1e-4), (ErrorMode::Abs, 1e-3)];

fn pipeline(preset: &str, shape: &[usize], dtype: DType, bound: (ErrorMode, f64)) -> fzmod::Pipeline {
    let mut p = fzmod::preset(preset, shape).unwrap();
    p.set_error_bound(ErrorBound::new(bound.0, bound.1).unwrap()).unwrap();
    p.set_input_dtype(dtype).unwrap();
    p
}

#[test]
fn bound_holds_on_every_element_of_every_shared_field() {
    let Some(dir) = shared_data() else { return };
    let fields = shared_fields(&dir);
    assert!(fields.len() >= 12, "expected the 12 shared fields, found {}", fields.len());
    for path in fields {
        let field = load(&path);
        for preset in PRESETS {
            for bound in BOUNDS {
                let what = format!("{} {preset} {} {:e}", field.name, bound.0.name(), bound.1);
                let p = pipeline(preset, &field.shape, field.data.dtype(), bound);
                let archive = p.compress(&field.data, &field.shape).unwrap();
                let decoded = fzmod::decompress(&archive).unwrap();
                let abs = expected_abs_bound(&field.data, ErrorBound::new(bound.0, bound.1).unwrap());
                assert_eq!(fzmod::archived_abs_bound(&decoded.header), Some(abs), "{what}: recorded bound");
                let max = assert_within(&field.data, &decoded.data, abs, &what);
                let ratio = field.data.byte_len() as f64 / archive.len() as f64;
                eprintln!("{what}: ratio {ratio:.3}, max err {max:e} <= {abs:e}");
            }
        }
    }
}

/// Native FZ-GPU on etopo5 2161×4320 (its own CLI on an H100; docs/PERFORMANCE.md): `fzgpu` must reach 0.99× of it.
#[test]
fn fzgpu_reaches_native_fz_gpu_ratios_on_etopo5() {
    let Some(dir) = shared_data() else { return };
    let field = load(&dir.join("etopo5_2161x4320.f32"));
    for (rel, native) in [(1e-2, 12.85), (1e-3, 6.84), (1e-4, 4.21)] {
        let p = pipeline("fzgpu", &field.shape, DType::F32, (ErrorMode::Rel, rel));
        let ratio = field.data.byte_len() as f64 / p.compress(&field.data, &field.shape).unwrap().len() as f64;
        eprintln!("etopo5 fzgpu rel {rel:e}: ratio {ratio:.4} (native FZ-GPU {native})");
        assert!(ratio >= 0.99 * native, "rel {rel:e}: {ratio:.4} < 0.99 × {native}");
    }
}

/// A smooth field with a little noise, NaN and ±Inf, values too large for a bin, and a
/// plateau of zeros (all-zero chunks in every coder).
fn synthetic(n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n)
        .map(|i| {
            let t = i as f32;
            (t * 0.013).sin() * 40.0 + (t * 0.0007).cos() * 300.0 + ((i * 7919) % 13) as f32 * 0.01
        })
        .collect();
    v[n / 3..n / 3 + n / 8].fill(0.0);
    for (k, s) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3.0e38, -0.0, 1e-40].into_iter().enumerate() {
        v[17 + k * (n / 8)] = s;
    }
    v
}

#[test]
fn synthetic_fields_round_trip_in_every_dimensionality() {
    for shape in [vec![1usize], vec![7], vec![50_001], vec![97, 131], vec![9, 33, 70]] {
        let n = shape.iter().product();
        let x = if n > 10_000 { synthetic(n) } else { (0..n).map(|i| i as f32 * 0.25).collect() };
        let data = Buffer::F32(x);
        let data64 = Buffer::F64(values(&data));
        for preset in PRESETS {
            for bound in [(ErrorMode::Abs, 1e-3), (ErrorMode::Abs, 0.5), (ErrorMode::Rel, 1e-4)] {
                for d in [&data, &data64] {
                    let p = pipeline(preset, &shape, d.dtype(), bound);
                    let decoded = fzmod::decompress(&p.compress(d, &shape).unwrap()).unwrap();
                    let abs = expected_abs_bound(d, ErrorBound::new(bound.0, bound.1).unwrap());
                    assert_within(d, &decoded.data, abs, &format!("{preset} {shape:?} {} {bound:?}", d.dtype()));
                }
            }
        }
    }
}

#[test]
fn archives_do_not_depend_on_the_thread_count() {
    let shape = [64, 40, 90];
    let data = Buffer::F32(synthetic(shape.iter().product()));
    for preset in PRESETS {
        let p = pipeline(preset, &shape, DType::F32, (ErrorMode::Abs, 1e-2));
        let run = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| p.compress(&data, &shape).unwrap())
        };
        let one = run(1);
        assert_eq!(one, run(2), "{preset}: 1 vs 2 threads");
        let decode = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| fzmod::decompress(&one).unwrap().data)
        };
        assert_eq!(decode(1).to_le_bytes(), decode(2).to_le_bytes(), "{preset}: decode");
    }
}

/// One stage of a preset run forward by hand: its record and its inputs and outputs.
struct StageRun {
    name: String,
    kind: &'static fzmod::stage::StageKind,
    record: Vec<u8>,
    inputs: Vec<Buffer>,
    outputs: Vec<Buffer>,
}

fn run_stages(p: &fzmod::Pipeline, input: &Buffer, shape: &[usize]) -> Vec<StageRun> {
    let ctx = ForwardContext { shape };
    let mut runs: Vec<StageRun> = Vec::new();
    for node in p.nodes() {
        let inputs: Vec<Buffer> = node
            .inputs
            .iter()
            .map(|r| match r.unwrap() {
                InputRef::External => input.clone(),
                InputRef::Stage { stage, port } => runs[stage].outputs[port].clone(),
            })
            .collect();
        let f = node.stage.forward(inputs.clone(), &ctx).unwrap();
        let kind = node.stage.kind();
        runs.push(StageRun { name: node.name.clone(), kind, record: f.record, inputs, outputs: f.outputs });
    }
    runs
}

/// A mutated copy of a buffer: `keep` elements, then byte `flip` (if any) xor-ed with 0xff.
fn mutate(b: &Buffer, keep: usize, flip: Option<usize>) -> Buffer {
    let size = b.dtype().size();
    let mut bytes = b.to_le_bytes();
    bytes.truncate(keep * size);
    if let Some(i) = flip.filter(|&i| i < bytes.len()) {
        bytes[i] ^= 0xff;
    }
    Buffer::from_le_bytes(b.dtype(), &bytes).unwrap()
}

#[test]
fn corrupt_or_truncated_records_and_payloads_give_typed_errors() {
    let shape = [48, 70];
    let data = Buffer::F32(synthetic(48 * 70));
    for preset in PRESETS {
        let p = pipeline(preset, &shape, DType::F32, (ErrorMode::Abs, 1e-2));
        for run in run_stages(&p, &data, &shape) {
            let what = format!("{preset} stage '{}' ({})", run.name, run.kind.name);
            let decode = |record: &[u8]| (run.kind.from_record)(run.kind.param_version, record);
            let stage = decode(&run.record).unwrap();
            let back = stage.inverse(run.outputs.clone()).unwrap();
            if stage.error_bound().is_none() {
                assert_eq!(back, run.inputs, "{what}: lossless round trip");
            }
            // A record prefix is refused, or (the optional trailing field) it describes a
            // different stage whose ports refuse these payloads, or one that decodes them alike
            // (LorenzoQuant's 3 only says the encoder predicted its value outliers' p).
            for cut in 0..run.record.len() {
                if let Ok(s) = decode(&run.record[..cut]) {
                    let bytes = |b: &[Buffer]| b.iter().map(Buffer::to_le_bytes).collect::<Vec<_>>();
                    let alike = s.inverse(run.outputs.clone()).map(|d| bytes(&d) == bytes(&back));
                    assert!(alike.unwrap_or(true), "{what}: record prefix of {cut} bytes decoded differently");
                }
            }
            // Corrupt records either fail or decode into stages that fail cleanly or decode.
            for i in 0..run.record.len() {
                for value in [0x00, 0x01, 0x7f, 0x80, 0xff, run.record[i] ^ 0x10] {
                    let mut bad = run.record.clone();
                    bad[i] = value;
                    if let Ok(s) = decode(&bad) {
                        let _ = s.inverse(run.outputs.clone());
                    }
                }
            }
            // Truncated and corrupted payloads of every output port.
            for port in 0..run.outputs.len() {
                let len = run.outputs[port].len();
                let bytes = run.outputs[port].byte_len();
                let cuts = [0, 1, len / 2, len.saturating_sub(1)];
                let flips = (0..bytes).step_by(bytes / 97 + 1);
                let cases = cuts.iter().map(|&c| (c.min(len), None)).chain(flips.map(|f| (len, Some(f))));
                for (keep, flip) in cases {
                    let mut outputs = run.outputs.clone();
                    outputs[port] = mutate(&run.outputs[port], keep, flip);
                    let result = stage.inverse(outputs);
                    if keep < len && run.kind.name != "Difference" && run.kind.name != "Bitshuffle" {
                        assert!(result.is_err(), "{what}: port {port} cut to {keep} of {len} decoded");
                    }
                }
            }
        }
    }
}

#[test]
fn levitus_fill_value_survives() {
    let Some(dir) = shared_data() else { return };
    let field = load(&dir.join("levitus_temp_20x180x360.f32"));
    let Buffer::F32(orig) = &field.data else { panic!() };
    let fills = orig.iter().filter(|&&v| v == -1e10).count();
    for preset in PRESETS {
        for bound in BOUNDS {
            let p = pipeline(preset, &field.shape, DType::F32, bound);
            let decoded = fzmod::decompress(&p.compress(&field.data, &field.shape).unwrap()).unwrap();
            let Buffer::F32(back) = decoded.data else { panic!() };
            let abs = expected_abs_bound(&field.data, ErrorBound::new(bound.0, bound.1).unwrap());
            let kept = orig.iter().zip(&back).filter(|(o, b)| **o == -1e10 && (f64::from(**b) + 1e10).abs() <= abs);
            assert_eq!(kept.count(), fills, "{preset} {bound:?}");
        }
    }
}
