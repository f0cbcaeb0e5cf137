//! NVRTC compilation of the kernel sources into CUBIN for one architecture.
//!
//! Options are fixed for bit-exactness with the CPU reference: no fused multiply-add, no
//! flush-to-zero, IEEE division and square root.

use crate::error::{Error, Result};
use cudarc::nvrtc::{result, sys};
use std::ffi::{c_char, CString};

/// Every kernel source, in the order they are concatenated (later ones use earlier ones).
pub(crate) const SOURCES: [&str; 5] = [
    include_str!("common.cu"),
    include_str!("../../stages/quantizer/kernels.cu"),
    include_str!("../../stages/lorenzo/kernels.cu"),
    include_str!("../../stages/tiled_lorenzo/kernels.cu"),
    include_str!("../../stages/adaptive_bitpack/kernels.cu"),
];

/// Options that keep device arithmetic identical to the CPU's.
pub(crate) fn options(arch: &str) -> Vec<String> {
    ["--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "-std=c++17"]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--gpu-architecture={arch}")])
        .collect()
}

fn nvrtc(what: &str, e: result::NvrtcError) -> Error {
    Error::Device(format!("NVRTC {what}: {e}"))
}

/// Compile the sources with `defines` (`#define` lines) for `arch` (e.g. `sm_90`).
pub(crate) fn cubin(defines: &str, arch: &str) -> Result<Vec<u8>> {
    let source = std::iter::once(defines).chain(SOURCES).collect::<Vec<_>>().join("\n");
    let source = CString::new(source).map_err(|_| Error::Device("kernel source contains NUL".into()))?;
    let prog = result::create_program(&source, None).map_err(|e| nvrtc("create", e))?;
    let out = (|| {
        // SAFETY: `prog` was created above and is destroyed below, once.
        if let Err(e) = unsafe { result::compile_program(prog, &options(arch)) } {
            let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
            let log: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            let log = String::from_utf8_lossy(&log);
            return Err(Error::Device(format!("NVRTC compile ({e}) for {arch}:\n{defines}\n{log}")));
        }
        let mut size = 0usize;
        unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result().map_err(|e| nvrtc("CUBIN size", e))?;
        let mut image = vec![0u8; size];
        unsafe { sys::nvrtcGetCUBIN(prog, image.as_mut_ptr() as *mut c_char) }
            .result()
            .map_err(|e| nvrtc("CUBIN", e))?;
        Ok(image)
    })();
    // SAFETY: created above, not yet destroyed.
    let _ = unsafe { result::destroy_program(prog) };
    out
}
