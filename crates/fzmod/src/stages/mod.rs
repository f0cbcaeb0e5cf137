//! One folder per stage: parameters and record (mod.rs), CPU reference (cpu.rs), device
//! implementation (device.rs + device.cu). Fusion rules live in their own folders beside the
//! stages they fuse.

pub mod adaptive_bitpack;
pub mod bit_transpose;
pub mod bitplane_rze;
pub mod bitshuffle;
#[cfg(feature = "cuda")]
pub mod cuszp_fusion;
pub mod difference;
pub mod lorenzo;
pub mod lorenzo_quant;
pub mod quantizer;
pub mod rze;
pub mod store;
pub mod tiled_lorenzo;
pub mod word_map;
pub mod words;

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
];

/// The fusion rules the GPU executor tries, in order, before running stages one by one.
#[cfg(feature = "cuda")]
pub static FUSION_RULES: &[&dyn crate::backend::cuda::executor::FusionRule] = &[&cuszp_fusion::CuszpFusion];

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
    ];
    for real in [DType::F32, DType::F64] {
        programs.push(quantizer::device::program(real));
        programs.push(lorenzo_quant::device::program(real));
    }
    for code in [DType::I16, DType::I32] {
        for layout in
            [adaptive_bitpack::Layout::Plain, adaptive_bitpack::Layout::Wide, adaptive_bitpack::Layout::Packed]
        {
            programs.push(adaptive_bitpack::device::program(code, layout));
        }
    }
    programs.extend(cuszp_fusion::programs());
    programs
}
