//! The one error type of the library. Every failure on user data is one of these variants;
//! decoding never panics on any input.

/// Result alias used throughout fzmod.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `work(k)` for every k in `0..count` at once on the thread pool: the results in k's order,
/// or the error of the smallest k that failed (whatever order the pool ran them in).
pub(crate) fn at_once<T: Send>(count: usize, work: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    use rayon::prelude::*;
    let results: Vec<Result<T>> = (0..count).into_par_iter().map(&work).collect();
    results.into_iter().collect()
}

/// Everything that can go wrong, grouped so callers can match on the kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes do not start with the fzmod magic.
    #[error("not an fzmod archive (bad magic bytes)")]
    BadMagic,
    /// The archive was written by a newer, incompatible format major version.
    #[error("archive format {major}.{minor} is not supported (this build reads {supported}.x)")]
    UnsupportedVersion { major: u16, minor: u16, supported: u16 },
    /// The archive ends before a field or segment it announces.
    #[error("archive truncated: {0}")]
    Truncated(String),
    /// A CRC-32C does not match the bytes it covers.
    #[error("checksum mismatch in {what}: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { what: String, stored: u32, computed: u32 },
    /// A field holds an impossible value (size, count, enum code, layout).
    #[error("corrupt archive: {0}")]
    Corrupt(String),
    /// The archive names a stage type this build does not know.
    #[error("unknown stage type id {0} (archive written by a newer fzmod?)")]
    UnknownStage(u16),
    /// A caller-supplied argument is out of range or inconsistent (shape, bound, dtype).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A relative bound over a stream read once (a pipe) without the value range it is
    /// resolved from: state the range, read from a seekable input, or use an absolute bound.
    #[error("value range needed: {0}")]
    RangeNeeded(String),
    /// The stage graph is not a valid pipeline (names the stage and port at fault).
    #[error("pipeline: {0}")]
    Pipeline(String),
    /// A TOML pipeline file could not be understood.
    #[error("config: {0}")]
    Config(String),
    /// An error raised inside a stage, with the stage's name as context; its kind is the
    /// kind of `cause`. The message already holds the cause's, so it is not also given as
    /// `source()` (a reporter that prints the chain, such as anyhow's `{:#}`, then said it twice).
    #[error("stage '{stage}': {cause}")]
    Stage { stage: String, cause: Box<Error> },
    /// The requested backend cannot run here (no driver, no NVRTC, no device).
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// The device could not allocate the memory a run needs.
    #[error("device out of memory: {0}")]
    OutOfMemory(String),
    /// Any other device-side failure (kernel compile, launch, copy).
    #[error("device error: {0}")]
    Device(String),
    /// Operating-system I/O failure (its message in this one's; not also `source()`).
    #[error("I/O error: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// What went wrong, without the message: what callers (and the Python exceptions) match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The archive bytes are not a valid archive (magic, version, truncation, checksum,
    /// impossible value, unknown stage).
    CorruptArchive,
    /// The caller's arguments, pipeline or configuration are wrong, or a limit refuses them.
    InvalidArgument,
    /// No usable GPU backend.
    BackendUnavailable,
    /// The device ran out of memory.
    OutOfMemory,
    /// Any other device failure.
    Device,
    /// Operating-system I/O.
    Io,
}

impl Error {
    /// The kind of this error (a stage's context does not change it).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BadMagic
            | Error::UnsupportedVersion { .. }
            | Error::Truncated(_)
            | Error::Checksum { .. }
            | Error::Corrupt(_)
            | Error::UnknownStage(_) => ErrorKind::CorruptArchive,
            Error::InvalidArgument(_) | Error::RangeNeeded(_) | Error::Pipeline(_) | Error::Config(_) => {
                ErrorKind::InvalidArgument
            }
            Error::Stage { cause, .. } => cause.kind(),
            Error::BackendUnavailable(_) => ErrorKind::BackendUnavailable,
            Error::OutOfMemory(_) => ErrorKind::OutOfMemory,
            Error::Device(_) => ErrorKind::Device,
            Error::Io(_) => ErrorKind::Io,
        }
    }

    /// Name the stage at fault as context, keeping the kind (the innermost stage wins).
    pub fn in_stage(self, stage: &str) -> Error {
        match self {
            Error::Stage { .. } => self,
            other => Error::Stage { stage: stage.to_string(), cause: Box::new(other) },
        }
    }

    /// The error without stage context (what a match on the variant should look at).
    pub fn root(&self) -> &Error {
        match self {
            Error::Stage { cause, .. } => cause.root(),
            other => other,
        }
    }
}

/// Shorthand for an `Error::Corrupt` with a formatted message.
macro_rules! corrupt {
    ($($arg:tt)*) => { $crate::error::Error::Corrupt(format!($($arg)*)) };
}
pub(crate) use corrupt;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_context_keeps_the_kind() {
        let e = corrupt!("bad rate").in_stage("coder").in_stage("outer");
        assert_eq!(e.kind(), ErrorKind::CorruptArchive);
        assert_eq!(e.to_string(), "stage 'coder': corrupt archive: bad rate");
        assert!(matches!(e.root(), Error::Corrupt(_)));
        assert_eq!(Error::Config("x".into()).in_stage("q").kind(), ErrorKind::InvalidArgument);
        assert_eq!(Error::OutOfMemory("x".into()).in_stage("q").kind(), ErrorKind::OutOfMemory);
    }

    /// A message says everything once: no error hands on a `source()` its message already
    /// holds, so a reporter that prints the chain does not repeat it.
    #[test]
    fn messages_hold_their_causes_once() {
        use std::error::Error as _;
        let io = Error::from(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "ended early"));
        for e in [io, corrupt!("bad rate").in_stage("coder")] {
            assert!(e.source().is_none(), "{e}");
        }
    }
}
