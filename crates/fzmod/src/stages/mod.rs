//! One folder per stage: parameters and record, CPU reference, CUDA kernel source.

pub mod adaptive_bitpack;
pub mod bitplane_rze;
pub mod lorenzo;
pub mod lorenzo_quant;
pub mod quantizer;
pub mod tiled_lorenzo;

use crate::stage::StageKind;

/// The registry: every stage type this build can construct or decode.
pub static ALL: &[&StageKind] = &[
    &quantizer::KIND,
    &lorenzo::KIND,
    &tiled_lorenzo::KIND,
    &adaptive_bitpack::KIND,
    &lorenzo_quant::KIND,
    &bitplane_rze::KIND,
];
