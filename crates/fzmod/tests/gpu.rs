//! GPU tests: skipped (with a message) where NVRTC or a CUDA device is absent, as in CI.
//! `scripts/gpu-check.sh` runs them on a GPU machine.
#![cfg(feature = "cuda")]

mod common;

use common::*;
use fzmod::backend::cuda::{compile_all_variants, CudaDevice};
use fzmod::backend::Backend;
use fzmod::{ErrorBound, ErrorMode};

fn device() -> Option<Backend> {
    match CudaDevice::get() {
        Ok(d) => Some(Backend::Cuda(d)),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

#[test]
fn nvrtc_compiles_every_kernel_variant() {
    // SAFETY: only probes for the library by name.
    if !unsafe { fzmod::backend::cuda::nvrtc_present() } {
        eprintln!("skipping: NVRTC not found");
        return;
    }
    let arch = match CudaDevice::get() {
        Ok(d) => d.arch().to_string(),
        Err(_) => "sm_90".to_string(),
    };
    let n = compile_all_variants(&arch).unwrap();
    assert_eq!(n, 30);
}

const BOUNDS: [(ErrorMode, f64); 4] =
    [(ErrorMode::Rel, 1e-2), (ErrorMode::Rel, 1e-3), (ErrorMode::Rel, 1e-4), (ErrorMode::Abs, 1e-3)];

/// Every shared field × preset × bound: GPU bytes = CPU bytes, the bound holds, and each
/// backend decodes the other's archive.
#[test]
fn gpu_archives_are_byte_identical_to_cpu_archives() {
    let Some(gpu) = device() else { return };
    let Some(dir) = shared_data() else { return };
    let mut checked = 0;
    for path in shared_fields(&dir) {
        let field = load(&path);
        for preset in fzmod::PRESETS {
            for (mode, value) in BOUNDS {
                let what = format!("{} {} {} {value:e}", field.name, preset.name, mode.name());
                let bound = ErrorBound::new(mode, value).unwrap();
                let mut p = fzmod::preset(preset.name, &field.shape).unwrap();
                p.set_error_bound(bound).unwrap();
                p.set_input_dtype(field.data.dtype()).unwrap();
                assert_eq!(gpu.fallback_reason(&p), None, "{what}");
                let cpu_archive = p.compress(&field.data, &field.shape).unwrap();
                let gpu_archive = p.compress_on(&gpu, &field.data, &field.shape).unwrap();
                assert!(gpu_archive == cpu_archive, "{what}: GPU archive differs from the CPU archive");
                let abs = expected_abs_bound(&field.data, bound);
                let on_gpu = fzmod::decompress_on(&gpu, &cpu_archive).unwrap();
                assert_within(&field.data, &on_gpu.data, abs, &format!("{what} (CPU archive, GPU decode)"));
                let on_cpu = fzmod::decompress(&gpu_archive).unwrap();
                assert!(on_gpu.data.to_le_bytes() == on_cpu.data.to_le_bytes(), "{what}: decoders disagree");
                checked += 1;
            }
        }
    }
    eprintln!("GPU == CPU on {checked} field/preset/bound combinations");
    assert_eq!(checked, 12 * fzmod::PRESETS.len() * BOUNDS.len());
}

#[test]
fn gpu_decoder_rejects_corrupt_archives() {
    let Some(gpu) = device() else { return };
    let golden = std::fs::read(repo_root().join("tests/golden/v1.0_cuszp2_2d.fzm")).unwrap();
    let expected = fzmod::decompress(&golden).unwrap().data.to_le_bytes();
    assert_eq!(fzmod::decompress_on(&gpu, &golden).unwrap().data.to_le_bytes(), expected);
    for len in (0..golden.len()).step_by(97) {
        assert!(fzmod::decompress_on(&gpu, &golden[..len]).is_err());
    }
    let mut bad = golden.clone();
    for i in (0..golden.len()).step_by(13) {
        bad[i] ^= 0x5a;
        if let Ok(d) = fzmod::decompress_on(&gpu, &bad) {
            assert!(d.data.to_le_bytes() == expected, "byte {i}");
        }
        bad[i] = golden[i];
    }
}

/// Block sizes other than the presets' (32·m up to 1024), every metadata layout, f32 and f64.
#[test]
fn other_block_sizes_and_layouts_match_the_cpu() {
    let Some(gpu) = device() else { return };
    let field = load(&repo_root().join("data/navy_uwnd_132x73x144.f32"));
    let fzmod::Buffer::F32(values) = &field.data else { unreachable!() };
    let f64_data = fzmod::Buffer::F64(values.iter().map(|&v| f64::from(v) * 1.1).collect());
    for block in [96u32, 256, 1024] {
        for (selection, metadata) in [("false", "plain"), ("true", "wide"), ("true", "packed")] {
            let toml = format!(
                "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"rel\"\nerror_bound = 1e-4\n\
                 [[stage]]\nname = \"l\"\ntype = \"Lorenzo\"\nblock_size = {block}\ninputs = [{{from = \"q\", port = \"codes\"}}]\n\
                 [[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\nblock_size = {block}\noutlier_selection = {selection}\n\
                 metadata = \"{metadata}\"\ninputs = [{{from = \"l\"}}]\n"
            );
            for data in [&field.data, &f64_data] {
                let mut p = fzmod::from_toml(&toml).unwrap();
                p.set_input_dtype(data.dtype()).unwrap();
                assert_eq!(gpu.fallback_reason(&p), None);
                let cpu = p.compress(data, &field.shape).unwrap();
                let on_gpu = p.compress_on(&gpu, data, &field.shape).unwrap();
                assert!(cpu == on_gpu, "block {block} {metadata} {}", data.dtype());
                let back = fzmod::decompress_on(&gpu, &cpu).unwrap().data;
                assert!(back.to_le_bytes() == fzmod::decompress(&cpu).unwrap().data.to_le_bytes());
            }
        }
    }
}

/// N-D Lorenzo (block_size = 0) on 1-D, 2-D, 3-D and 4-D shapes, f32 and f64.
#[test]
fn nd_lorenzo_matches_the_cpu() {
    let Some(gpu) = device() else { return };
    let field = load(&repo_root().join("data/navy_uwnd_132x73x144.f32"));
    let fzmod::Buffer::F32(values) = &field.data else { unreachable!() };
    let toml = "[[stage]]\nname = \"q\"\ntype = \"Quantizer\"\nerror_bound_mode = \"rel\"\nerror_bound = 1e-4\n\
                [[stage]]\nname = \"l\"\ntype = \"Lorenzo\"\nblock_size = 0\ninputs = [{from = \"q\", port = \"codes\"}]\n\
                [[stage]]\nname = \"c\"\ntype = \"AdaptiveBitpack\"\nblock_size = 32\noutlier_selection = true\n\
                metadata = \"packed\"\ninputs = [{from = \"l\"}]\n";
    for shape in [vec![132 * 73 * 144], vec![132 * 73, 144], vec![132, 73, 144], vec![12, 11, 73, 144]] {
        for data in [field.data.clone(), fzmod::Buffer::F64(values.iter().map(|&v| f64::from(v) * 0.7).collect())] {
            let mut p = fzmod::from_toml(toml).unwrap();
            p.set_input_dtype(data.dtype()).unwrap();
            assert_eq!(gpu.fallback_reason(&p), None);
            let cpu = p.compress(&data, &shape).unwrap();
            let on_gpu = p.compress_on(&gpu, &data, &shape).unwrap();
            assert!(cpu == on_gpu, "shape {shape:?} {}", data.dtype());
            let back = fzmod::decompress_on(&gpu, &cpu).unwrap().data;
            assert!(back.to_le_bytes() == fzmod::decompress(&cpu).unwrap().data.to_le_bytes(), "{shape:?}");
        }
    }
}
