//! File handling of the CLI.
//!
//! Inputs are read with a bound: exactly the bytes the shape needs, checked against a regular
//! file's size before anything is read, so `/dev/zero` or an endless pipe cannot exhaust memory.
//!
//! Outputs are checked before any work starts and written only when all of it succeeded:
//! `-` is standard output; an existing device or FIFO is written through, never replaced; a
//! symlink is followed; the input itself and existing regular files (without `--force`) are
//! refused; a regular file is written as a temporary file beside it and renamed into place,
//! so a failure at any point leaves nothing behind.

use anyhow::{bail, Context, Result};
use fzmod::{Buffer, DType};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The path that means standard input or standard output.
const STDIO: &str = "-";

fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == STDIO
}

/// How a path is named in messages (`-` is standard input).
pub fn shown(path: &Path) -> String {
    if is_stdio(path) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}

pub fn shape_string(shape: &[usize]) -> String {
    shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// Bytes of a raw array of `shape` and `dtype`.
fn byte_count(dtype: DType, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .with_context(|| format!("shape {} is too large", shape_string(shape)))
}

/// Fail unless a regular file at `path` holds exactly the array's bytes; other kinds of
/// input (stdin, FIFOs, devices) have no size to check and are read with a bound instead.
pub fn check_size(path: &Path, dtype: DType, shape: &[usize]) -> Result<()> {
    if is_stdio(path) {
        return Ok(());
    }
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    check_metadata(path, &meta, dtype, shape)
}

fn check_metadata(path: &Path, meta: &std::fs::Metadata, dtype: DType, shape: &[usize]) -> Result<()> {
    let expected = byte_count(dtype, shape)?;
    if meta.is_dir() {
        bail!("{} is a directory, not a raw array", path.display());
    }
    if meta.is_file() && meta.len() != expected as u64 {
        bail!(
            "{}: file has {} bytes, but shape {} of {dtype} needs {expected}",
            path.display(),
            meta.len(),
            shape_string(shape)
        );
    }
    Ok(())
}

/// Read a raw little-endian array of exactly `shape` (`-` = standard input).
pub fn read_array(path: &Path, dtype: DType, shape: &[usize]) -> Result<Buffer> {
    let expected = byte_count(dtype, shape)?;
    let bytes = if is_stdio(path) {
        read_exactly(std::io::stdin().lock(), expected, path, shape, dtype)?
    } else {
        let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let meta = file.metadata().with_context(|| format!("cannot read {}", path.display()))?;
        check_metadata(path, &meta, dtype, shape)?;
        read_exactly(file, expected, path, shape, dtype)?
    };
    Ok(Buffer::from_le_bytes(dtype, &bytes)?)
}

/// Read `n` bytes and no more; a source that ends sooner is an error.
fn read_exactly(source: impl Read, n: usize, path: &Path, shape: &[usize], dtype: DType) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    source.take(n as u64).read_to_end(&mut bytes).with_context(|| format!("cannot read {}", shown(path)))?;
    if bytes.len() != n {
        bail!(
            "{} ended after {} bytes, but shape {} of {dtype} needs {n}",
            shown(path),
            bytes.len(),
            shape_string(shape)
        );
    }
    Ok(bytes)
}

/// Read an archive (`-` = standard input). A regular file is read whole; any other source
/// only as far as the archive's header announces, so `/dev/zero` or an endless pipe is
/// refused or stopped instead of being read until memory runs out.
pub fn read_archive(path: &Path) -> Result<Vec<u8>> {
    let context = || format!("cannot read {}", shown(path));
    if is_stdio(path) {
        return read_announced(std::io::stdin().lock(), path);
    }
    let file = File::open(path).with_context(context)?;
    if file.metadata().with_context(context)?.is_file() {
        std::fs::read(path).with_context(context)
    } else {
        read_announced(file, path)
    }
}

/// Read the preamble and header of an archive stream, then exactly the length they announce.
fn read_announced(mut source: impl Read, path: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut read_up_to = |bytes: &mut Vec<u8>, total: u64| -> Result<()> {
        let missing = total.saturating_sub(bytes.len() as u64);
        (&mut source).take(missing).read_to_end(bytes).with_context(|| format!("cannot read {}", shown(path)))?;
        if (bytes.len() as u64) < total {
            bail!("{} ended after {} bytes, inside the archive ({total} bytes expected)", shown(path), bytes.len());
        }
        Ok(())
    };
    read_up_to(&mut bytes, fzmod::archive::PREAMBLE_BYTES as u64)?;
    if !bytes.starts_with(&fzmod::archive::MAGIC) {
        bail!("{}: {}", shown(path), fzmod::Error::BadMagic);
    }
    let body_len = u32::from_le_bytes(bytes[12..16].try_into().expect("preamble read")) as u64;
    read_up_to(&mut bytes, fzmod::archive::PREAMBLE_BYTES as u64 + body_len + 4)?;
    let total = fzmod::archive::announced_len(&bytes).with_context(|| format!("in {}", shown(path)))?;
    read_up_to(&mut bytes, total)?;
    Ok(bytes)
}

/// Where one output goes; checked by [`destination`] before any work is done.
#[derive(Debug)]
pub struct Destination {
    target: Target,
}

#[derive(Debug)]
enum Target {
    Stdout,
    /// An existing device, FIFO or socket: opened and written, never replaced.
    WriteThrough(PathBuf),
    /// A regular file (symlinks resolved): staged beside it, then renamed into place.
    Regular {
        path: PathBuf,
        existed: bool,
    },
}

impl Destination {
    pub fn is_stdout(&self) -> bool {
        matches!(self.target, Target::Stdout)
    }
}

/// Do `a` and `b` name the same existing file (through any symlinks or hard links)?
#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(ma), Ok(mb)) => (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()),
        _ => false,
    }
}

/// Do `a` and `b` name the same existing file (through any symlinks)?
#[cfg(not(unix))]
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(ca), Ok(cb)) => ca == cb,
        _ => false,
    }
}

/// Check an output path against the rules in the module comment. `inputs` are the files this
/// run reads (the output must not be one of them); `-` among them is ignored.
pub fn destination(path: &Path, force: bool, inputs: &[&Path]) -> Result<Destination> {
    if is_stdio(path) {
        return Ok(Destination { target: Target::Stdout });
    }
    if let Some(input) = inputs.iter().filter(|i| !is_stdio(i)).find(|i| same_file(path, i)) {
        bail!("output {} is the input {}; refusing to overwrite it", path.display(), input.display());
    }
    let target = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            if !force {
                bail!("{} already exists; use --force (-f) to overwrite it", path.display());
            }
            let resolved = std::fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))?;
            Target::Regular { path: resolved, existed: true }
        }
        Ok(meta) if meta.is_dir() => bail!("{} is a directory", path.display()),
        Ok(_) => Target::WriteThrough(path.to_path_buf()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Ok(link) = std::fs::read_link(path) {
                // A dangling symlink: follow it and create the file it names.
                let dir = path.parent().unwrap_or(Path::new(""));
                return destination(&dir.join(link), force, inputs);
            }
            let name = path.file_name().with_context(|| format!("{} has no file name", path.display()))?;
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let dir = std::fs::canonicalize(dir)
                .with_context(|| format!("cannot write {}: folder {} does not exist", path.display(), dir.display()))?;
            if !dir.is_dir() {
                bail!("cannot write {}: {} is not a folder", path.display(), dir.display());
            }
            Target::Regular { path: dir.join(name), existed: false }
        }
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
    };
    Ok(Destination { target })
}

/// Fail if two outputs would land in the same regular file.
pub fn distinct(a: &Destination, b: &Destination) -> Result<()> {
    if let (Target::Regular { path: pa, .. }, Target::Regular { path: pb, .. }) = (&a.target, &b.target) {
        if pa == pb {
            bail!("two outputs name the same file {}", pa.display());
        }
    }
    if a.is_stdout() && b.is_stdout() {
        bail!("only one output can go to standard output");
    }
    Ok(())
}

/// Temporary files not yet renamed into place; dropping this removes them.
#[derive(Default)]
struct Staged {
    /// (temporary file, final path, whether the final path existed before)
    files: Vec<(PathBuf, PathBuf, bool)>,
}

impl Staged {
    fn stage(&mut self, path: &Path, existed: bool, bytes: &[u8]) -> Result<()> {
        let name = path.file_name().context("output path has no file name")?.to_string_lossy();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        // Registered before writing, so a partial temporary file is removed too.
        let created = OpenOptions::new().write(true).create_new(true).open(&tmp);
        let mut file = created.with_context(|| format!("cannot write {}", tmp.display()))?;
        self.files.push((tmp, path.to_path_buf(), existed));
        file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Rename every staged file into place. If one rename fails, the files this run created
    /// are removed again (files it replaced cannot be restored, but renames in one folder of
    /// a file we just wrote practically never fail).
    fn commit(mut self) -> Result<()> {
        let mut done: Vec<(PathBuf, bool)> = Vec::new();
        for (tmp, path, existed) in std::mem::take(&mut self.files) {
            if let Err(e) = std::fs::rename(&tmp, &path) {
                let _ = std::fs::remove_file(&tmp);
                for (created, existed) in done {
                    if !existed {
                        let _ = std::fs::remove_file(created);
                    }
                }
                return Err(e).with_context(|| format!("cannot write {}", path.display()));
            }
            done.push((path, existed));
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for (tmp, _, _) in &self.files {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Write every output or none of the regular files: these are staged first, then streams
/// and devices are written, then the staged files are renamed into place.
pub fn write_all(outputs: &[(&Destination, &[u8])]) -> Result<()> {
    let mut staged = Staged::default();
    for (dest, bytes) in outputs {
        if let Target::Regular { path, existed } = &dest.target {
            staged.stage(path, *existed, bytes)?;
        }
    }
    for (dest, bytes) in outputs {
        match &dest.target {
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|_| out.flush()).context("cannot write to standard output")?;
            }
            Target::WriteThrough(path) => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))?;
            }
            Target::Regular { .. } => {}
        }
    }
    staged.commit()
}
