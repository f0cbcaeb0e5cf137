//! File handling of the CLI.
//!
//! Outputs are checked before any work starts and written only when all of it succeeded:
//! `-` is standard output; an existing device or FIFO is written through, never replaced; a
//! symlink is followed; the input itself and existing regular files (without `--force`) are
//! refused; a regular file is written as a temporary file `.NAME.PID.tmp` beside it and
//! published only at the end, so a failure at any point leaves nothing behind. Publishing
//! never replaces a file unless --force: see [`publish`]. A run killed outright (kill -9)
//! cannot clean up; its temporary file is removed by the next run that writes the same name
//! (see [`remove_stale_temps`]).
//!
//! Everything read is bounded by what can be valid and by the --max-memory limit, checked
//! before buffering: a `--config` pipeline file by [`MAX_CONFIG_BYTES`], a raw array by its
//! shape, an archive stream by the length its header announces.

use anyhow::{bail, Context, Result};
use fzmod::metrics::human_bytes;
use fzmod::{Buffer, DType};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The path that means standard input or standard output.
const STDIO: &str = "-";

pub fn is_stdio(path: &Path) -> bool {
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

/// Refuse to hold `bytes` of `what` when that is more than the --max-memory limit; called
/// before anything is buffered, so a header or shape that asks for too much costs nothing.
pub fn within_limit(what: &str, bytes: u64, max_memory: u64) -> Result<()> {
    if bytes > max_memory {
        bail!(
            "{what} needs {bytes} bytes ({}), more than the --max-memory limit of {}; \
             raise --max-memory if that is genuine",
            human_bytes(bytes),
            human_bytes(max_memory)
        );
    }
    Ok(())
}

/// The largest pipeline file `--config` reads. A pipeline is a few hundred bytes of TOML;
/// the cap keeps `--config /dev/zero` (or any endless or huge file) from being read until
/// memory runs out.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Read a `--config` pipeline file of at most [`MAX_CONFIG_BYTES`].
pub fn read_config(path: &Path) -> Result<String> {
    let context = || format!("cannot read pipeline file {}", path.display());
    let mut bytes = Vec::new();
    let file = File::open(path).with_context(context)?;
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).with_context(context)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!(
            "pipeline file {} is larger than {}, the most a pipeline file may be",
            path.display(),
            human_bytes(MAX_CONFIG_BYTES)
        );
    }
    String::from_utf8(bytes).map_err(|e| anyhow::anyhow!("pipeline file {} is not UTF-8 text: {e}", path.display()))
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

/// Read a raw little-endian array of exactly `shape` (`-` = standard input), refused before
/// reading when the shape needs more than `max_memory` bytes.
pub fn read_array(path: &Path, dtype: DType, shape: &[usize], max_memory: u64) -> Result<Buffer> {
    let expected = byte_count(dtype, shape)?;
    let what = format!("raw input {} (shape {} of {dtype})", shown(path), shape_string(shape));
    within_limit(&what, expected as u64, max_memory)?;
    // The values are read straight into the array the pipeline takes: one copy, from the
    // kernel, whatever the size.
    let mut values = Buffer::zeroed(dtype, expected / dtype.size()).with_context(|| what.clone())?;
    let filled = if is_stdio(path) {
        fill_exactly(&mut std::io::stdin().lock(), values.native_bytes_mut())
    } else {
        let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let meta = file.metadata().with_context(|| format!("cannot read {}", path.display()))?;
        check_metadata(path, &meta, dtype, shape)?;
        fill_exactly(&mut &file, values.native_bytes_mut())
    };
    let filled = filled.with_context(|| format!("cannot read {}", shown(path)))?;
    if filled != expected {
        bail!(
            "{} ended after {filled} bytes, but shape {} of {dtype} needs {expected}",
            shown(path),
            shape_string(shape)
        );
    }
    values.from_le_in_place();
    Ok(values)
}

/// Fill `dst` from `source`; returns how many bytes arrived (fewer when the source ends).
fn fill_exactly(source: &mut impl Read, dst: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < dst.len() {
        match source.read(&mut dst[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Append from `source` until `bytes` holds `total` bytes or the source ends. Reads in chunks
/// and grows the buffer only by what arrived, so a length announced by a header costs memory
/// only as far as the bytes really come.
fn fill_to(source: &mut impl Read, bytes: &mut Vec<u8>, total: u64) -> std::io::Result<()> {
    let mut chunk = vec![0u8; 1 << 16];
    while (bytes.len() as u64) < total {
        let want = (total - bytes.len() as u64).min(chunk.len() as u64) as usize;
        match source.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An archive to decode: its bytes, or — for a streamed archive (docs/FORMAT.md §8.5) — a
/// reader positioned at its start, to be decoded frame by frame.
pub enum ArchiveInput {
    Whole(Vec<u8>),
    Stream(Box<dyn Read>),
}

/// Read an archive (`-` = standard input) of at most `max_memory` bytes. A regular file is
/// read whole after its size is checked; any other source only as far as the archive's
/// header announces, and only after that length is checked against the limit, so
/// `/dev/zero`, an endless pipe or a header announcing a terabyte is refused or stopped
/// instead of being read until memory runs out. A streamed archive, whose header announces
/// no length, is read to its end under the same limit.
pub fn read_archive(path: &Path, max_memory: u64) -> Result<Vec<u8>> {
    match open_archive(path, max_memory)? {
        ArchiveInput::Whole(bytes) => Ok(bytes),
        ArchiveInput::Stream(source) => read_whole(source, path, max_memory),
    }
}

/// The rest of a streamed archive, to its end, refused past `max_memory` bytes.
pub fn read_whole(source: Box<dyn Read>, path: &Path, max_memory: u64) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut limited = source.take(max_memory.saturating_add(1));
    limited.read_to_end(&mut bytes).with_context(|| format!("cannot read {}", shown(path)))?;
    within_limit(&format!("the streamed archive on {}", shown(path)), bytes.len() as u64, max_memory)?;
    Ok(bytes)
}

/// Open an archive (`-` = standard input): a streamed one as a reader (decoded in bounded
/// memory, whatever its length), any other read as [`read_archive`] describes.
pub fn open_archive(path: &Path, max_memory: u64) -> Result<ArchiveInput> {
    let context = || format!("cannot read {}", shown(path));
    if is_stdio(path) {
        return read_announced(Box::new(std::io::stdin().lock()), path, max_memory);
    }
    let mut file = File::open(path).with_context(context)?;
    let meta = file.metadata().with_context(context)?;
    if !meta.is_file() {
        return read_announced(Box::new(file), path, max_memory);
    }
    let streamed = is_streamed_file(&file);
    // The peek shares the file's position: start over from the first byte.
    std::io::Seek::rewind(&mut file).with_context(context)?;
    if streamed {
        return Ok(ArchiveInput::Stream(Box::new(file)));
    }
    within_limit(&format!("archive {}", path.display()), meta.len(), max_memory)?;
    // Exactly the size just checked: a file that grows meanwhile cannot slip past the limit.
    let mut bytes = Vec::new();
    fill_to(&mut file, &mut bytes, meta.len()).with_context(context)?;
    Ok(ArchiveInput::Whole(bytes))
}

/// Does this regular file start with the header of a streamed archive? (Read at offsets,
/// which moves the position the file shares with its clone.)
fn is_streamed_file(file: &File) -> bool {
    use fzmod::archive::source::{ArchiveSource, FileSource};
    let Ok(source) = file.try_clone().and_then(|f| FileSource::new(f).map_err(std::io::Error::other)) else {
        return false;
    };
    let Ok(pre) = source.read_at(0, fzmod::archive::PREAMBLE_BYTES) else { return false };
    let Ok(len) = fzmod::archive::header_len(&pre) else { return false };
    source.read_at(0, len).ok().and_then(|h| fzmod::archive::parse_head(&h).ok()).is_some_and(|h| h.is_streamed())
}

/// Read the preamble and header of an archive stream, then exactly the length they announce;
/// each length is checked against `max_memory` before it is read. A streamed archive is
/// handed back as a reader that starts with the bytes read so far.
fn read_announced(mut source: Box<dyn Read>, path: &Path, max_memory: u64) -> Result<ArchiveInput> {
    let mut bytes = Vec::new();
    let read_up_to = |source: &mut Box<dyn Read>, bytes: &mut Vec<u8>, total: u64| -> Result<()> {
        within_limit(&format!("the archive on {}, as its header announces,", shown(path)), total, max_memory)?;
        fill_to(source, bytes, total).with_context(|| format!("cannot read {}", shown(path)))?;
        if (bytes.len() as u64) < total {
            bail!("{} ended after {} bytes, inside the archive ({total} bytes expected)", shown(path), bytes.len());
        }
        Ok(())
    };
    read_up_to(&mut source, &mut bytes, fzmod::archive::PREAMBLE_BYTES as u64)?;
    if !bytes.starts_with(&fzmod::archive::MAGIC) {
        bail!("{}: {}", shown(path), fzmod::Error::BadMagic);
    }
    let body_len = u32::from_le_bytes(bytes[12..16].try_into().expect("preamble read")) as u64;
    read_up_to(&mut source, &mut bytes, fzmod::archive::PREAMBLE_BYTES as u64 + body_len + 4)?;
    if fzmod::archive::parse_head(&bytes).is_ok_and(|h| h.is_streamed()) {
        return Ok(ArchiveInput::Stream(Box::new(std::io::Cursor::new(bytes).chain(source))));
    }
    let total = fzmod::archive::announced_len(&bytes).with_context(|| format!("in {}", shown(path)))?;
    read_up_to(&mut source, &mut bytes, total)?;
    Ok(ArchiveInput::Whole(bytes))
}

/// Open a raw input for reading in order (`-` = standard input).
pub fn open_input(path: &Path) -> Result<Box<dyn Read>> {
    if is_stdio(path) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    Ok(Box::new(File::open(path).with_context(|| format!("cannot read {}", path.display()))?))
}

/// Is `path` a regular file (which can be read twice: a first pass, then the data)?
pub fn is_regular_file(path: &Path) -> bool {
    !is_stdio(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Where one output goes; checked by [`destination`] before any work is done.
#[derive(Debug)]
pub struct Destination {
    target: Target,
}

#[derive(Debug)]
enum Target {
    Stdout,
    /// The human report when standard output carries the data.
    Stderr,
    /// An existing device, FIFO or socket: opened and written, never replaced.
    WriteThrough(PathBuf),
    /// A regular file (symlinks resolved): staged beside it, then published.
    Regular {
        path: PathBuf,
        /// --force: an existing file is replaced; without it nothing ever is.
        force: bool,
        /// The file existed when checked (only possible with --force).
        existed: bool,
    },
}

impl Destination {
    pub fn is_stdout(&self) -> bool {
        matches!(self.target, Target::Stdout)
    }

    /// Where the human report goes: standard error when standard output carries the data.
    pub fn report(data_on_stdout: bool) -> Destination {
        Destination { target: if data_on_stdout { Target::Stderr } else { Target::Stdout } }
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
            Target::Regular { path: resolved, force, existed: true }
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
            Target::Regular { path: dir.join(name), force, existed: false }
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

/// The temporary file that stages `path`: hidden, beside it (so publishing it is a link or
/// rename within one folder), and named after this process so that a later run can tell a
/// leftover of a killed run from one still being written.
fn temp_path(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().context("output path has no file name")?.to_string_lossy();
    Ok(path.with_file_name(format!(".{name}.{}.tmp", std::process::id())))
}

/// Remove the temporary files that killed runs (kill -9, power loss) left beside `path`:
/// `.NAME.PID.tmp` whose process no longer runs, judged by /proc/PID. Only where /proc lists
/// processes (Linux); elsewhere such files stay. A process of another PID namespace or host
/// writing to the same folder looks dead here: its temporary file goes, and that run then
/// fails to publish instead of publishing something wrong.
fn remove_stale_temps(path: &Path) {
    let proc = Path::new("/proc");
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    if !proc.join("self").exists() {
        return;
    }
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let pid = file.to_str().and_then(|f| f.strip_prefix(&prefix)?.strip_suffix(".tmp")?.parse::<u32>().ok());
        // This process stages each path once, so a file with its own PID is a leftover too.
        if pid.is_some_and(|pid| pid == std::process::id() || !proc.join(pid.to_string()).exists()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Put the staged `tmp` in place at `path`. With `force`, a rename (replacing any file
/// there). Without, a hard link, which fails atomically when `path` exists — also when another
/// process created it after the check at the start — so nothing is ever replaced; on a file
/// system without hard links, a file created exclusively and filled from `tmp` instead.
fn publish(tmp: &Path, path: &Path, force: bool) -> std::io::Result<()> {
    if force {
        return std::fs::rename(tmp, path);
    }
    match std::fs::hard_link(tmp, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {
            let mut staged = File::open(tmp)?;
            let mut out = OpenOptions::new().write(true).create_new(true).open(path)?;
            if let Err(e) = std::io::copy(&mut staged, &mut out).and_then(|_| out.sync_all()) {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        }
    }
    // Published; the temporary name is only a second link to it now.
    let _ = std::fs::remove_file(tmp);
    Ok(())
}

/// Temporary files not yet published; dropping this removes them.
#[derive(Default)]
struct Staged {
    /// (temporary file, final path, --force, whether the final path existed before)
    files: Vec<(PathBuf, PathBuf, bool, bool)>,
}

impl Staged {
    fn stage(&mut self, path: &Path, force: bool, existed: bool, bytes: &[u8]) -> Result<()> {
        let mut file = self.create(path, force, existed)?;
        file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The temporary file that stages `path`, registered before anything is written to it,
    /// so a partial temporary file is removed too.
    fn create(&mut self, path: &Path, force: bool, existed: bool) -> Result<File> {
        remove_stale_temps(path);
        let tmp = temp_path(path)?;
        let created = OpenOptions::new().write(true).create_new(true).open(&tmp);
        let file = created.with_context(|| format!("cannot write {}", tmp.display()))?;
        self.files.push((tmp, path.to_path_buf(), force, existed));
        Ok(file)
    }

    /// Publish every staged file. If one fails, the files this run created are removed again
    /// (files it replaced with --force cannot be restored, but renames in one folder of a file
    /// just written practically never fail).
    fn commit(mut self) -> Result<()> {
        let mut done: Vec<(PathBuf, bool)> = Vec::new();
        for (tmp, path, force, existed) in std::mem::take(&mut self.files) {
            if let Err(e) = publish(&tmp, &path, force) {
                let _ = std::fs::remove_file(&tmp);
                for (created, existed) in done {
                    if !existed {
                        let _ = std::fs::remove_file(created);
                    }
                }
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    bail!(
                        "{} already exists (another process created it while this run worked); \
                         nothing was replaced; use --force (-f) to overwrite it",
                        path.display()
                    );
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
        for (tmp, ..) in &self.files {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Write `text` to standard output (or error), flushed: a report or listing that cannot be
/// written (a full disk, `/dev/full`, a closed pipe) fails the run instead of vanishing.
pub fn print(text: &[u8], to_stderr: bool) -> Result<()> {
    let (result, name) = if to_stderr {
        let mut err = std::io::stderr().lock();
        (err.write_all(text).and_then(|_| err.flush()), "standard error")
    } else {
        let mut out = std::io::stdout().lock();
        (out.write_all(text).and_then(|_| out.flush()), "standard output")
    };
    result.with_context(|| format!("cannot write to {name}"))
}

/// Write every output or none of the regular files: these are staged first, then streams,
/// devices and the report (in the order given) are written, then the staged files are
/// published. A failure before publishing leaves no regular file behind.
pub fn write_all(outputs: &[(&Destination, &[u8])]) -> Result<()> {
    let mut staged = Staged::default();
    for (dest, bytes) in outputs {
        if let Target::Regular { path, force, existed } = &dest.target {
            staged.stage(path, *force, *existed, bytes)?;
        }
    }
    for (dest, bytes) in outputs {
        match &dest.target {
            Target::Stdout => print(bytes, false)?,
            Target::Stderr => print(bytes, true)?,
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

/// An output written as it is produced (a streamed compress or decode): standard output, a
/// device or FIFO written through, or a regular file staged beside its target and published
/// by [`Sink::commit`] only (dropped before that, it leaves nothing behind).
pub struct Sink {
    out: Box<dyn Write>,
    staged: Staged,
    name: String,
}

impl Destination {
    /// Open this destination for writing as data is produced.
    pub fn sink(&self) -> Result<Sink> {
        let mut staged = Staged::default();
        let (out, name): (Box<dyn Write>, String) = match &self.target {
            Target::Stdout => (Box::new(std::io::stdout().lock()), "standard output".into()),
            Target::Stderr => (Box::new(std::io::stderr().lock()), "standard error".into()),
            Target::WriteThrough(path) => {
                let file = OpenOptions::new().write(true).open(path);
                (Box::new(file.with_context(|| format!("cannot open {}", path.display()))?), path.display().to_string())
            }
            Target::Regular { path, force, existed } => {
                let file = staged.create(path, *force, *existed)?;
                (Box::new(std::io::BufWriter::with_capacity(1 << 20, file)), path.display().to_string())
            }
        };
        Ok(Sink { out, staged, name })
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Sink {
    /// Flush everything written (a full disk or closed pipe fails here at the latest).
    pub fn flush_all(&mut self) -> Result<()> {
        self.out.flush().with_context(|| format!("cannot write {}", self.name))
    }

    /// Publish a staged regular file (see [`publish`]); streams were written through already.
    pub fn commit(mut self) -> Result<()> {
        self.flush_all()?;
        drop(self.out);
        self.staged.commit()
    }
}
