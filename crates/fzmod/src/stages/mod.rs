//! One folder per stage: parameters and record (mod.rs), CPU reference (cpu.rs), device
//! implementation (device.rs + device.cu). Fusion rules live in their own folders beside the
//! stages they fuse.

pub mod adaptive_bitpack;
pub mod adm;
pub mod ans;
pub mod bit_transpose;
pub mod bitplane_rze;
pub mod bitshuffle;
#[cfg(feature = "cuda")]
pub mod cuszp_fusion;
pub mod difference;
pub mod huffman;
pub mod interp;
pub mod lorenzo;
pub mod lorenzo_quant;
pub mod mask;
pub mod prefix_sum;
pub mod quantizer;
pub mod rze;
pub mod store;
pub mod tiled_lorenzo;
pub mod word_map;
pub mod words;

use crate::error::{Error, Result};
use crate::stage::StageKind;

/// The registry: every stage type this build can construct or decode.
pub static ALL: &[&StageKind] = &[
    &quantizer::KIND,
    &lorenzo::KIND,
    &tiled_lorenzo::KIND,
    &adaptive_bitpack::KIND,
    &store::KIND,
    &lorenzo_quant::KIND,
    &bitplane_rze::KIND,
    &difference::KIND,
    &word_map::ZIGZAG,
    &word_map::NEGABINARY,
    &bitshuffle::KIND,
    &rze::KIND,
    &mask::KIND,
    &huffman::KIND,
    &adm::KIND,
    &ans::KIND,
    &interp::KIND,
];

/// Every stage type this build knows.
pub fn registry() -> &'static [&'static StageKind] {
    ALL
}

/// Look a stage type up by on-disk id.
pub fn kind_by_id(id: u16) -> Result<&'static StageKind> {
    ALL.iter().copied().find(|k| k.id == id).ok_or(Error::UnknownStage(id))
}

/// Look a stage type up by TOML name.
pub fn kind_by_name(name: &str) -> Result<&'static StageKind> {
    ALL.iter().copied().find(|k| k.name == name).ok_or_else(|| {
        let known: Vec<_> = ALL.iter().map(|k| k.name).collect();
        Error::Config(format!("unknown stage type '{name}' (known: {})", known.join(", ")))
    })
}

/// The fusion rules the GPU executor tries, in order, before running stages one by one.
#[cfg(feature = "cuda")]
pub static FUSION_RULES: &[&dyn crate::graph::fusion::FusionRule] = &[&cuszp_fusion::CuszpFusion];

/// Compile every device program this build has (each stage's, each fusion rule's variants)
/// for `arch` without a device (NVRTC only); returns how many.
#[cfg(feature = "cuda")]
pub fn compile_all(arch: &str) -> crate::error::Result<usize> {
    crate::backend::cuda::compile_programs(&device_programs(), arch)
}

/// Every device program: each stage's variants and each fusion rule's.
#[cfg(feature = "cuda")]
pub(crate) fn device_programs() -> Vec<crate::backend::cuda::Program> {
    use crate::element::DType;
    let mut programs = vec![
        lorenzo::device::program(),
        tiled_lorenzo::device::program(),
        words::device::program(),
        difference::device::program(),
        bitshuffle::device::program(),
        rze::device::program(),
        bitplane_rze::device::program(),
        ans::device::program(),
    ];
    for symbol in huffman::SYMBOL_TYPES {
        programs.push(huffman::device::program(symbol));
    }
    for real in [DType::F32, DType::F64] {
        programs.push(quantizer::device::program(real));
        programs.push(lorenzo_quant::device::program(real));
        programs.push(interp::device::program(real));
        programs.push(mask::device::program(real));
    }
    for word in [DType::U16, DType::U32] {
        programs.push(adm::device::program(word));
    }
    for code in [DType::I16, DType::I32] {
        for layout in
            [adaptive_bitpack::Layout::Plain, adaptive_bitpack::Layout::Wide, adaptive_bitpack::Layout::Packed]
        {
            programs.push(adaptive_bitpack::device::program(code, layout));
        }
    }
    programs.extend(cuszp_fusion::programs());
    programs.extend(region_programs());
    programs
}

/// The fused-region kernels of every preset, both element types and both directions, and
/// those of each of its stages alone (`Region::alone`).
#[cfg(feature = "cuda")]
fn region_programs() -> Vec<crate::backend::cuda::Program> {
    use crate::element::DType;
    let mut programs = Vec::new();
    for preset in crate::config::PRESETS {
        for shape in [vec![1 << 20], vec![1024, 1024]] {
            for real in [DType::F32, DType::F64] {
                let Ok(mut p) = crate::config::preset(preset.name, &shape) else { continue };
                if p.set_input_dtype(real).is_ok() && p.finalize().is_ok() {
                    programs.extend(pipeline_region_programs(&p));
                }
            }
        }
    }
    // N-D Lorenzo's last passes storing the Quantizer's reconstruction (no preset has them).
    for real in [DType::F32, DType::F64] {
        let Ok(q) = quantizer::Quantizer::new(real, None) else { continue };
        let stored = crate::backend::cuda::region::StoredInverse::new(
            &q,
            crate::backend::cuda::region::InversePart::fixed(),
            real,
        );
        if let Ok((stored, _)) = stored {
            programs.extend([lorenzo::device::band_program(&stored), lorenzo::device::column_program(&stored)]);
        }
    }
    // Presets share regions and stages (and 1-D and 2-D shapes mostly fuse alike): each
    // program once.
    let mut seen = std::collections::BTreeSet::new();
    programs.retain(|p| seen.insert(p.source()));
    programs
}

/// The region kernels of a finalized pipeline, both directions, and of each stage alone.
#[cfg(feature = "cuda")]
fn pipeline_region_programs(p: &crate::graph::Pipeline) -> Vec<crate::backend::cuda::Program> {
    use crate::backend::cuda::region::Region;
    let chain = crate::graph::partition::Chain::of_pipeline(p);
    let mut programs: Vec<_> = chain.forward_regions().iter().flat_map(|r| r.region.forward_program()).collect();
    let chain = chain.inverted();
    programs.extend(chain.inverse_regions().iter().flat_map(|r| r.region.inverse_program()));
    for f in p.nodes().iter().filter_map(|n| n.stage.fragment()) {
        programs.extend(Region::alone(f, false).and_then(|r| r.forward_program().ok()));
        programs.extend(Region::alone(f, true).and_then(|r| r.inverse_program().ok()));
    }
    programs
}

#[cfg(all(test, feature = "cuda"))]
mod nvrtc_tests {
    /// Compiles without a device: run where NVRTC is on the library path (gpu-check.sh, or a
    /// development machine with the `nvidia-cuda-nvrtc` wheel).
    #[test]
    #[ignore = "needs NVRTC (libnvrtc.so) on the library path"]
    fn every_device_program_compiles_for_sm_90() {
        // SAFETY: only probes for the library by name.
        assert!(unsafe { crate::backend::cuda::nvrtc_present() }, "NVRTC not found");
        assert!(super::compile_all("sm_90").unwrap() >= 40);
    }

    /// The composed chains the benchmarks run (scripts/chains/), whose gatherers no preset has.
    #[test]
    #[ignore = "needs NVRTC (libnvrtc.so) on the library path"]
    fn composed_chains_compile_for_sm_90() {
        // SAFETY: only probes for the library by name.
        assert!(unsafe { crate::backend::cuda::nvrtc_present() }, "NVRTC not found");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/chains");
        let mut programs = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("scripts/chains") {
            let toml = std::fs::read_to_string(entry.expect("a chain").path()).expect("a chain's TOML");
            for real in [crate::element::DType::F32, crate::element::DType::F64] {
                let mut p = crate::config::from_toml(&toml).expect("a valid chain");
                p.set_input_dtype(real).expect("a float chain");
                p.finalize().expect("a valid chain");
                programs.extend(super::pipeline_region_programs(&p));
            }
        }
        assert!(crate::backend::cuda::compile_programs(&programs, "sm_90").unwrap() >= 8);
    }
}
