//! One folder per stage: parameters and record, CPU reference, CUDA kernel source.

pub mod adaptive_bitpack;
pub mod bit_transpose;
pub mod bitplane_rze;
pub mod bitshuffle;
pub mod difference;
pub mod lorenzo;
pub mod lorenzo_quant;
pub mod negabinary;
pub mod quantizer;
pub mod rze;
pub mod tiled_lorenzo;
pub mod words;
pub mod zigzag;

use crate::stage::StageKind;

/// The registry: every stage type this build can construct or decode.
pub static ALL: &[&StageKind] = &[
    &quantizer::KIND,
    &lorenzo::KIND,
    &tiled_lorenzo::KIND,
    &adaptive_bitpack::KIND,
    &lorenzo_quant::KIND,
    &bitplane_rze::KIND,
    &difference::KIND,
    &zigzag::KIND,
    &negabinary::KIND,
    &bitshuffle::KIND,
    &rze::KIND,
];
