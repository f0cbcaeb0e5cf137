//! File helpers: typed reads with clear errors, and writes that never leave partial files.

use anyhow::{bail, Context, Result};
use fzmod::{Buffer, DType};
use std::path::Path;

/// Read a raw little-endian array and check it against the shape.
pub fn read_array(path: &Path, dtype: DType, shape: &[usize]) -> Result<Buffer> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .with_context(|| format!("shape {} is too large", shape_string(shape)))?;
    if bytes.len() != expected {
        bail!(
            "{}: file has {} bytes, but shape {} of {dtype} needs {expected}",
            path.display(),
            bytes.len(),
            shape_string(shape)
        );
    }
    Ok(Buffer::from_le_bytes(dtype, &bytes)?)
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder, then a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().context("output path has no file name")?;
    let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

pub fn shape_string(shape: &[usize]) -> String {
    shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}
