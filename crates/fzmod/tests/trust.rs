//! What an archive promises is what its reconstruction holds (issue 13): bounds that resolve
//! to something unusable are refused at compress time, every fact an archive states twice is
//! cross-checked on decode, and a decode's memory need is checked before it runs.

mod common;

use fzmod::archive::{self, ErrorMode, Header};
use fzmod::graph::DecodePlan;
use fzmod::stages::{lorenzo_quant, quantizer};
use fzmod::{Buffer, DType, DecodeLimits, Error, ErrorBound, ErrorKind};

/// A smooth 64×64 field with some noise, as f64 (f32 by conversion).
fn field(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i as f64 * 0.013).sin() * 40.0 + ((i * 7919) % 97) as f64 * 0.01).collect()
}

fn buffer(values: &[f64], dtype: DType) -> Buffer {
    match dtype {
        DType::F32 => Buffer::F32(values.iter().map(|&v| v as f32).collect()),
        _ => Buffer::F64(values.to_vec()),
    }
}

fn compress(preset: &str, data: &Buffer, shape: &[usize], bound: ErrorBound) -> fzmod::Result<Vec<u8>> {
    let mut p = fzmod::preset(preset, shape)?;
    p.set_input_dtype(data.dtype())?;
    p.set_error_bound(bound)?;
    p.compress(data, shape)
}

/// The archive with its header edited; the writer recomputes the layout and every checksum.
fn rewrite(bytes: &[u8], edit: impl FnOnce(&mut Header)) -> Vec<u8> {
    let parsed = archive::parse(bytes).unwrap();
    let segments: Vec<Vec<u8>> = parsed.segments.iter().map(|s| s.to_vec()).collect();
    let mut header = parsed.header;
    edit(&mut header);
    archive::write(header, &segments)
}

fn is_refusal(e: &Error) -> bool {
    let text = e.to_string();
    matches!(e.root(), Error::InvalidArgument(_)) && text.contains("not a finite normal number")
}

#[test]
fn a_relative_bound_over_the_whole_f64_range_holds() {
    // max − min overflows f64; the bound 1e-3 · (max − min) does not.
    let mut values = field(4096);
    values[0] = f64::MAX;
    values[1] = -f64::MAX;
    values[2] = 1e307;
    let data = Buffer::F64(values);
    let bound = ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap();
    let abs = 1e-3 * f64::MAX - 1e-3 * -f64::MAX;
    assert!(abs.is_finite());
    for preset in ["cuszp2", "pfpl", "fzgpu", "cuszp3-plain"] {
        let archive = compress(preset, &data, &[64, 64], bound).unwrap();
        let back = fzmod::decompress(&archive).unwrap();
        common::assert_within(&data, &back.data, abs, preset);
        assert_eq!(fzmod::archived_abs_bound(&back.header), Some(abs), "{preset}");
    }
}

#[test]
fn bounds_that_resolve_to_no_usable_step_are_refused_on_every_preset() {
    let mut wide = field(4096);
    wide[0] = f64::MAX;
    wide[1] = -f64::MAX;
    let cases = [
        // 0.75 · 2 · f64::MAX overflows: every value would decode as 0 "within" an infinite bound.
        ("f64 over ±MAX, rel 0.75", Buffer::F64(wide), ErrorMode::Rel, 0.75),
        ("f32, rel 1e308", buffer(&field(4096), DType::F32), ErrorMode::Rel, 1e308),
        ("f32, abs 1e-40 (subnormal step)", buffer(&field(4096), DType::F32), ErrorMode::Abs, 1e-40),
        ("f64, abs 1e-310 (subnormal)", buffer(&field(4096), DType::F64), ErrorMode::Abs, 1e-310),
    ];
    for (what, data, mode, value) in &cases {
        for preset in fzmod::PRESETS {
            let bound = ErrorBound::new(*mode, *value).unwrap();
            match compress(preset.name, data, &[64, 64], bound) {
                Err(e) => assert!(is_refusal(&e), "{what}, {}: {e}", preset.name),
                Ok(_) => panic!("{what}, {}: compressed", preset.name),
            }
        }
    }
}

#[test]
fn a_constant_field_with_a_relative_bound_still_round_trips_exactly() {
    // Range 0 gives bound 0 and step 0: lossless, not refused.
    for dtype in [DType::F32, DType::F64] {
        let data = buffer(&[2.5; 4096], dtype);
        for preset in fzmod::PRESETS {
            let archive = compress(preset.name, &data, &[64, 64], ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap());
            assert_eq!(fzmod::decompress(&archive.unwrap()).unwrap().data, data, "{}", preset.name);
        }
    }
}

/// Offsets of the f64 fields `error_bound`, `abs_bound`, `step` in the records of the two
/// quantizing stages (docs/FORMAT.md 6.1 and 6.5: both start `u8 type, u8 mode`).
const RECORD_FLOATS: [usize; 3] = [2, 10, 18];

fn is_quantizing(type_id: u16) -> bool {
    type_id == quantizer::KIND.id || type_id == lorenzo_quant::KIND.id
}

fn set_f64(params: &mut [u8], at: usize, v: f64) {
    params[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_f64(params: &[u8], at: usize) -> f64 {
    f64::from_le_bytes(params[at..at + 8].try_into().unwrap())
}

#[test]
fn recorded_step_and_bounds_are_checked_against_each_other() {
    let data = buffer(&field(4096), DType::F32);
    for preset in ["cuszp2", "pfpl", "fzgpu"] {
        for mode in [ErrorMode::Abs, ErrorMode::Rel] {
            let archive = compress(preset, &data, &[64, 64], ErrorBound::new(mode, 1e-3).unwrap()).unwrap();
            let [_, abs_at, step_at] = RECORD_FLOATS;
            let step = get_f64(&archive::parse(&archive).unwrap().header.stages[0].params, step_at);
            for (at, v) in
                [(step_at, 0.0), (step_at, 1e300), (step_at, f64::NAN), (step_at, 1e-40), (step_at, 2.0 * step)]
                    .into_iter()
                    .chain([(abs_at, 0.5e-3), (abs_at, f64::INFINITY)])
            {
                let bad = rewrite(&archive, |h| set_f64(&mut h.stages[0].params, at, v));
                let err = fzmod::decompress(&bad).expect_err(&format!("{preset} {mode:?}: field {at} = {v}"));
                assert!(
                    err.kind() == ErrorKind::CorruptArchive && matches!(err.root(), Error::Corrupt(_)),
                    "{preset}: {err}"
                );
            }
        }
    }
}

/// One named change to a header.
type HeaderEdit = Box<dyn Fn(&mut Header)>;

#[test]
fn lorenzo_quant_records_are_checked_against_the_header() {
    let data = buffer(&field(4096), DType::F32);
    let archive = compress("fzgpu", &data, &[32, 128], ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap()).unwrap();
    assert!(fzmod::decompress(&archive).is_ok());
    let edits: [(&str, HeaderEdit); 4] = [
        ("bound NaN", Box::new(|h| h.error_bound = f64::NAN)),
        ("bound doubled", Box::new(|h| h.error_bound *= 2.0)),
        ("mode rel -> abs", Box::new(|h| h.error_mode = ErrorMode::Abs)),
        ("shape permuted", Box::new(|h| h.shape = vec![128, 32])),
    ];
    for (what, edit) in edits {
        let err = fzmod::decompress(&rewrite(&archive, edit)).expect_err(what);
        assert!(matches!(err.root(), Error::Corrupt(_)), "{what}: {err}");
    }
}

#[test]
fn duplicate_and_empty_stage_names_are_refused() {
    let archive =
        compress("cuszp2", &buffer(&field(4096), DType::F32), &[4096], ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap())
            .unwrap();
    for name in ["", "quant"] {
        let bad = rewrite(&archive, |h| h.stages[1].name = name.into());
        assert!(matches!(fzmod::decompress(&bad), Err(Error::Corrupt(_))), "name '{name}'");
    }
    for name in ["", "a"] {
        let toml = format!(
            "[[stage]]\nname = \"a\"\ntype = \"Quantizer\"\n[[stage]]\nname = \"{name}\"\ntype = \"AdaptiveBitpack\"\n\
             inputs = [{{ from = \"a\", port = \"codes\" }}]\n"
        );
        assert!(matches!(fzmod::from_toml(&toml), Err(Error::Config(_))), "name '{name}'");
    }
}

#[test]
fn a_stated_input_type_is_not_silently_overridden() {
    let toml = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\ninput_type = \"float64\"\nerror_bound = 1e-3\n\
                [[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\ninputs = [{ from = \"q\", port = \"codes\" }]\n";
    let mut p = fzmod::from_toml(toml).unwrap();
    assert!(matches!(p.set_input_dtype(DType::F32).unwrap_err().root(), Error::Config(_)));
    p.set_input_dtype(DType::F64).unwrap();
    let fz = toml.replace("Quantizer", "LorenzoQuant").replace("AdaptiveBitpack", "BitplaneRZE");
    let stated = fzmod::from_toml(&fz).unwrap().set_input_dtype(DType::F32);
    assert!(matches!(stated.unwrap_err().root(), Error::Config(_)));
    // Presets state no type: the same preset takes f32 and f64.
    for preset in fzmod::PRESETS {
        for dtype in [DType::F32, DType::F64] {
            let data = buffer(&field(4096), dtype);
            let archive =
                compress(preset.name, &data, &[64, 64], ErrorBound::new(ErrorMode::Abs, 1e-2).unwrap()).unwrap();
            assert_eq!(fzmod::decompress(&archive).unwrap().data.dtype(), dtype, "{}", preset.name);
        }
    }
}

#[test]
fn seventeen_dimensions_are_refused_with_the_limit() {
    let err = fzmod::parse_shape(&vec!["1"; 17].join("x")).unwrap_err().to_string();
    assert!(err.contains("at most 16"), "{err}");
    let shape = [vec![1usize; 16], vec![64]].concat();
    let err =
        compress("cuszp2", &buffer(&field(64), DType::F32), &shape, ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap())
            .unwrap_err()
            .to_string();
    assert!(err.contains("at most 16"), "{err}");
}

#[test]
fn a_decode_above_the_memory_limit_is_refused_before_it_runs() {
    // 64 MiB of zeros compresses to well under 1 MiB.
    let shape = [4096, 4096];
    let data = Buffer::F32(vec![0.0; 4096 * 4096]);
    let archive = compress("cuszp2", &data, &shape, ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap()).unwrap();
    assert!(archive.len() < 1 << 20, "{} bytes", archive.len());
    let err = DecodePlan::new_with_limits(&archive, &DecodeLimits::new(16 << 20)).err().expect("refused");
    let text = err.to_string();
    assert!(
        matches!(err, Error::InvalidArgument(_)) && text.contains("16.0 MiB") && text.contains("DecodeLimits"),
        "{text}"
    );
    let header = fzmod::inspect(&archive).unwrap();
    assert!(DecodePlan::memory_needed(&header).unwrap() >= 64 << 20);
    assert!(DecodeLimits::default().max_memory >= 64 << 20);
    assert_eq!(DecodePlan::new(&archive).unwrap().run_cpu().unwrap().data, data);
}

/// Values a recorded float is mutated to.
fn float_mutations(v: f64) -> Vec<f64> {
    let all = [0.0, -0.0, 1e-310, 1e-40, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, v * 2.0];
    all.into_iter().filter(|m| m.to_bits() != v.to_bits()).collect()
}

/// What a decode gives: its values' bits and the bound it guarantees.
fn outcome(bytes: &[u8]) -> fzmod::Result<(Vec<u8>, Option<u64>)> {
    let plan = DecodePlan::new(bytes)?;
    let guaranteed = plan.guaranteed_abs_bound().map(f64::to_bits);
    let report = fzmod::archived_abs_bound(&plan.header).map(f64::to_bits);
    assert_eq!(guaranteed, report, "the report and the decode disagree on the guarantee");
    Ok((plan.run_cpu()?.data.to_le_bytes(), guaranteed))
}

#[test]
fn every_recorded_float_mutated_decodes_identically_or_fails() {
    let mut archives: Vec<(String, Vec<u8>)> = std::fs::read_dir(common::repo_root().join("tests/golden"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fzm"))
        // Stage records of format 1 headers (a chunked golden's records sit in its chunks).
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("v1.")))
        .map(|p| (p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    assert!(archives.len() >= 7, "expected the golden archives");
    for preset in fzmod::PRESETS {
        for dtype in [DType::F32, DType::F64] {
            for mode in [ErrorMode::Abs, ErrorMode::Rel] {
                let data = buffer(&field(4096), dtype);
                let archive = compress(preset.name, &data, &[64, 64], ErrorBound::new(mode, 1e-3).unwrap()).unwrap();
                archives.push((format!("{} {dtype} {}", preset.name, mode.name()), archive));
            }
        }
        // The same with a Mask stage in front (NaN and a fill value on a tenth of the points).
        let mut values = field(4096);
        values.iter_mut().step_by(10).for_each(|v| *v = -1e10);
        values[7] = f64::NAN;
        let data = buffer(&values, DType::F32);
        let mut p = fzmod::masked_preset(preset.name, &[64, 64], fzmod::MaskSpec::nan_and(Some(-1e10))).unwrap();
        p.set_error_bound(ErrorBound::new(ErrorMode::Rel, 1e-3).unwrap()).unwrap();
        p.set_input_dtype(DType::F32).unwrap();
        archives.push((format!("masked {} f32 rel", preset.name), p.compress(&data, &[64, 64]).unwrap()));
    }
    let mut failures = Vec::new();
    let mut mutated = 0;
    for (name, archive) in &archives {
        let expected = outcome(archive).unwrap_or_else(|e| panic!("{name}: {e}"));
        let header = fzmod::inspect(archive).unwrap();
        // (stage index or None for the header's bound, byte offset in the record, value)
        let mut floats = vec![(None, 0, header.error_bound)];
        for (i, rec) in header.stages.iter().enumerate().filter(|(_, r)| is_quantizing(r.type_id)) {
            floats.extend(RECORD_FLOATS.iter().map(|&at| (Some(i), at, get_f64(&rec.params, at))));
        }
        for (stage, at, value) in floats {
            for m in float_mutations(value) {
                let bad = rewrite(archive, |h| match stage {
                    None => h.error_bound = m,
                    Some(i) => set_f64(&mut h.stages[i].params, at, m),
                });
                mutated += 1;
                match outcome(&bad) {
                    Err(_) => {}
                    Ok(got) if got == expected => {}
                    Ok(_) => {
                        failures.push(format!("{name}: {stage:?} field {at}: {value:e} -> {m:e} decoded differently"))
                    }
                }
            }
        }
    }
    assert!(mutated > 500, "{mutated} mutations");
    assert!(failures.is_empty(), "{} silent different decodes:\n{}", failures.len(), failures.join("\n"));
}

/// The device resolves the bound itself: it must give the CPU's archive bytes where the CPU
/// compresses, and refuse where the CPU refuses, fused and unfused.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs NVRTC and a CUDA device (scripts/gpu-check.sh)"]
fn the_device_resolves_and_refuses_bounds_as_the_cpu_does() {
    use fzmod::backend::cuda::CudaDevice;
    use fzmod::backend::Backend;
    let gpu = Backend::Cuda(CudaDevice::get().expect("a CUDA device"));
    let mut wide = field(4096);
    wide[0] = f64::MAX;
    wide[1] = -f64::MAX;
    let cases = [
        (Buffer::F64(wide.clone()), ErrorMode::Rel, 1e-3),
        (Buffer::F64(wide), ErrorMode::Rel, 0.75),
        (buffer(&field(4096), DType::F32), ErrorMode::Rel, 1e308),
        (buffer(&field(4096), DType::F32), ErrorMode::Abs, 1e-40),
        (buffer(&[2.5; 4096], DType::F32), ErrorMode::Rel, 1e-3),
    ];
    for (data, mode, value) in &cases {
        for preset in fzmod::PRESETS {
            let mut p = fzmod::preset(preset.name, &[64, 64]).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            p.set_error_bound(ErrorBound::new(*mode, *value).unwrap()).unwrap();
            let cpu = p.compress(data, &[64, 64]).ok();
            for fusion in [true, false] {
                let dev = p.compress_with(&gpu, data, &[64, 64], fzmod::RunOptions { fusion }).ok();
                assert_eq!(dev, cpu, "{} {mode:?} {value:e} fusion {fusion}", preset.name);
            }
        }
    }
}

/// A stage record may not state a buffer larger than the header's array can need: RZE's input
/// length (and BitplaneRZE's code count) are checked against the shape before any stage runs,
/// so an archive of a few KB cannot make the decoder allocate gigabytes under any limit.
#[test]
fn recorded_lengths_beyond_the_array_are_refused_before_decoding() {
    let data = Buffer::F32((0..1000).map(|i| (i as f32 * 0.01).sin()).collect());
    let bound = ErrorBound::new(ErrorMode::Abs, 1e-3).unwrap();
    for (preset, stage) in [("pfpl", "RZE"), ("fzgpu", "BitplaneRZE")] {
        let archive = compress(preset, &data, &[1000], bound).unwrap();
        let forged = rewrite(&archive, |h| {
            let rec =
                h.stages.iter_mut().find(|s| fzmod::stages::kind_by_id(s.type_id).unwrap().name == stage).unwrap();
            // RZE: chunk 16384, word 1, then the input length; BitplaneRZE: the code count.
            // LEB128 varints: 16384 = [0x80, 0x80, 0x01]; 2^40 = five 0x80 bytes, then 0x20.
            let length = [0x80, 0x80, 0x80, 0x80, 0x80, 0x20];
            rec.params = if stage == "RZE" { [&[0x80, 0x80, 0x01, 1][..], &length].concat() } else { length.to_vec() };
        });
        let err = DecodePlan::new_with_limits(&forged, &DecodeLimits::new(1 << 20)).err().expect("refused");
        assert_eq!(err.kind(), ErrorKind::CorruptArchive, "{preset}: {err}");
        assert!(err.to_string().contains("more than the 73536"), "{preset}: {err}");
    }
}

/// TiledLorenzo's padded layout is wider than the array (a 1-D array under 8×8 tiles pads
/// eightfold): the coder after it states that many bytes, and the archive decodes — the bound
/// on stated lengths follows the padded stream its record states, and still refuses past it.
#[test]
fn a_padded_tile_layout_decodes_and_bounds_the_lengths_after_it() {
    let n = 70_001;
    let data = Buffer::F32((0..n).map(|i| (i as f32 * 0.01).sin() * 100.0).collect());
    let toml = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"abs\"\nerror_bound = 1e-4\n\
        [[stage]]\nname = \"t\"\ntype = \"TiledLorenzo\"\ntile_x = 8\ntile_y = 8\ndelta = false\n\
        inputs = [{from = \"q\", port = \"codes\"}]\n\
        [[stage]]\nname = \"n\"\ntype = \"Negabinary\"\ninput_type = \"int32\"\ninputs = [{from = \"t\"}]\n\
        [[stage]]\nname = \"b\"\ntype = \"Bitshuffle\"\ndata_type = \"uint32\"\nelement_width = 4\nblock_size = 16384\n\
        inputs = [{from = \"n\"}]\n\
        [[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\ninputs = [{from = \"b\"}]\n";
    let mut p = fzmod::from_toml(toml).unwrap();
    p.set_input_dtype(DType::F32).unwrap();
    let archive = p.compress(&data, &[n]).unwrap();
    let padded = n.div_ceil(8) * 64;
    let back = fzmod::decompress(&archive).unwrap();
    let Buffer::F32(back) = back.data else { panic!("f32 out") };
    let Buffer::F32(orig) = &data else { unreachable!() };
    assert!(back.iter().zip(orig).all(|(a, b)| (a - b).abs() <= 1e-4));
    let forged = rewrite(&archive, |h| {
        let rec = h.stages.iter_mut().find(|s| fzmod::stages::kind_by_id(s.type_id).unwrap().name == "RZE").unwrap();
        // Chunk 16384, word 1, then an input length of 2^40 (LEB128).
        rec.params = [&[0x80, 0x80, 0x01, 1][..], &[0x80, 0x80, 0x80, 0x80, 0x80, 0x20]].concat();
    });
    let err = DecodePlan::new(&forged).err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::CorruptArchive, "{err}");
    let most = 8 * padded as u64 + 65536;
    assert!(err.to_string().contains(&format!("more than the {most}")), "{err}");
}
