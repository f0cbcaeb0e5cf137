//! NVRTC compilation of the kernel sources into CUBIN for one architecture.
//!
//! Options are fixed for bit-exactness with the CPU reference: no fused multiply-add, no
//! flush-to-zero, IEEE division and square root.

use crate::error::{Error, Result};
use cudarc::nvrtc::{result, sys};
use std::ffi::{c_char, CString};

/// The header every program starts with (types and scans shared by all kernels).
pub(crate) const COMMON: &str = include_str!("common.cu");

/// One NVRTC compilation unit: `#define` lines, the shared header, then the unit's source
/// (a stage's `device.cu`, or a fusion rule's sources).
#[derive(Clone, Debug)]
pub struct Program {
    pub defines: String,
    pub unit: std::borrow::Cow<'static, str>,
}

impl Program {
    /// What identifies the program in the module cache: a static unit by its address (hashing
    /// and comparing tens of kilobytes of source on every kernel lookup cost more host time
    /// than a short kernel takes on the device), a generated one by its text.
    fn identity(&self) -> (&str, Result<(usize, usize), &str>) {
        let unit = match &self.unit {
            std::borrow::Cow::Borrowed(text) => Ok((text.as_ptr() as usize, text.len())),
            std::borrow::Cow::Owned(text) => Err(text.as_str()),
        };
        (&self.defines, unit)
    }
}

impl PartialEq for Program {
    fn eq(&self, other: &Program) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for Program {}

impl std::hash::Hash for Program {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (defines, unit) = self.identity();
        defines.hash(state);
        // A generated unit's text through CRC-32C (hardware, ~10 GB/s), not the map's hasher.
        unit.map_err(|text| (text.len(), crc32c::crc32c(text.as_bytes()))).hash(state);
    }
}

impl Program {
    pub fn new(unit: &'static str, defines: String) -> Program {
        Program { defines, unit: unit.into() }
    }

    /// A program generated at run time (a fused region's kernel).
    pub fn generated(unit: String) -> Program {
        Program { defines: String::new(), unit: unit.into() }
    }

    /// The complete source text NVRTC compiles.
    pub(crate) fn source(&self) -> String {
        format!("{}\n{COMMON}\n{}", self.defines, self.unit)
    }
}

/// Options that keep device arithmetic identical to the CPU's; line information (which does
/// not change the code) when `FZMOD_LINEINFO` names a folder for profiling (see [`cubin`]).
pub(crate) fn options(arch: &str) -> Vec<String> {
    ["--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "-std=c++17"]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--gpu-architecture={arch}")])
        .chain(line_info_folder().map(|_| "-lineinfo".to_string()))
        .collect()
}

/// `FZMOD_LINEINFO`: each compiled source is also written there, under the name NVRTC gives
/// its line information, so a profiler (`ncu --import-source yes`) shows kernels by source line.
fn line_info_folder() -> Option<std::path::PathBuf> {
    std::env::var_os("FZMOD_LINEINFO").filter(|v| !v.is_empty()).map(Into::into)
}

fn nvrtc(what: &str, e: result::NvrtcError) -> Error {
    Error::Device(format!("NVRTC {what}: {e}"))
}

/// Compile `program` for `arch` (e.g. `sm_90`).
pub(crate) fn cubin(program: &Program, arch: &str) -> Result<Vec<u8>> {
    let text = program.source();
    let name = match line_info_folder() {
        Some(dir) => {
            let path = dir.join(format!("fzmod-{:08x}.cu", crc32c::crc32c(text.as_bytes())));
            std::fs::create_dir_all(&dir)
                .and_then(|_| std::fs::write(&path, &text))
                .map_err(|e| Error::Device(format!("FZMOD_LINEINFO: writing {}: {e}", path.display())))?;
            Some(
                CString::new(path.to_string_lossy().as_bytes())
                    .map_err(|_| Error::Device("NUL in FZMOD_LINEINFO".into()))?,
            )
        }
        None => None,
    };
    let source = CString::new(text).map_err(|_| Error::Device("kernel source contains NUL".into()))?;
    let prog = result::create_program(&source, name.as_deref()).map_err(|e| nvrtc("create", e))?;
    let out = (|| {
        // SAFETY: `prog` was created above and is destroyed below, once.
        if let Err(e) = unsafe { result::compile_program(prog, &options(arch)) } {
            let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
            let log: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            let log = String::from_utf8_lossy(&log);
            return Err(Error::Device(format!("NVRTC compile ({e}) for {arch}:\n{}\n{log}", program.defines)));
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

/// NVRTC's version, part of the disk-cache key.
fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (the device probe checked it); the call only writes two ints.
    let _ = unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result();
    (major, minor)
}

/// Where compiled images are kept between runs: `$FZMOD_CACHE_DIR` (`off` disables), else
/// `$XDG_CACHE_HOME/fzmod`, else `~/.cache/fzmod`. `None` when none can be created.
fn cache_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let dir = match std::env::var_os("FZMOD_CACHE_DIR") {
        Some(d) if d == "off" || d.is_empty() => return None,
        Some(d) => PathBuf::from(d),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
            .join("fzmod"),
    };
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

const CACHE_MAGIC: &[u8; 8] = b"FZMCUBIN";

/// Everything the image depends on; stored in the entry and compared on every load.
fn cache_key(program: &Program, arch: &str) -> String {
    let source = program.source();
    let (major, minor) = nvrtc_version();
    format!(
        "arch {arch}\nnvrtc {major}.{minor}\noptions {:?}\nsource {:08x}:{}\n{}",
        options(arch),
        crc32c::crc32c(source.as_bytes()),
        source.len(),
        program.defines
    )
}

fn cache_path(dir: &std::path::Path, key: &str) -> std::path::PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    dir.join(format!("{:016x}.cubin", h.finish()))
}

fn read_entry(path: &std::path::Path, key: &str) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(CACHE_MAGIC)?;
    let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let stored = rest.get(4..4 + len)?;
    (stored == key.as_bytes()).then(|| rest[4 + len..].to_vec())
}

/// Best effort: a cache that cannot be written only costs the next run a compile.
fn write_entry(path: &std::path::Path, key: &str, image: &[u8]) {
    let mut bytes = CACHE_MAGIC.to_vec();
    bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(image);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, &bytes).and_then(|_| std::fs::rename(&tmp, path)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// A compiled image from the disk cache, if one with exactly this key is there.
pub(crate) fn cached(program: &Program, arch: &str) -> Option<Vec<u8>> {
    let key = cache_key(program, arch);
    read_entry(&cache_path(&cache_dir()?, &key), &key)
}

/// Compile and store the image in the disk cache (when there is one).
pub(crate) fn compile_and_cache(program: &Program, arch: &str) -> Result<Vec<u8>> {
    let image = cubin(program, arch)?;
    if let Some(dir) = cache_dir() {
        let key = cache_key(program, arch);
        write_entry(&cache_path(&dir, &key), &key, &image);
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_entries_are_returned_only_for_their_exact_key() {
        let dir = std::env::temp_dir().join(format!("fzmod-cache-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = cache_path(&dir, "key a");
        write_entry(&path, "key a", b"image bytes");
        assert_eq!(read_entry(&path, "key a").as_deref(), Some(&b"image bytes"[..]));
        assert_eq!(read_entry(&path, "key b"), None);
        let full = std::fs::read(&path).unwrap();
        for cut in 0..8 + 4 + 5 {
            std::fs::write(&path, &full[..cut]).unwrap();
            assert_eq!(read_entry(&path, "key a"), None, "cut {cut}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
