//! The one error type of the library. Every failure on user data is one of these variants;
//! decoding never panics on any input.

/// Result alias used throughout fzmod.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    /// The stage graph is not a valid pipeline (names the stage and port at fault).
    #[error("pipeline: {0}")]
    Pipeline(String),
    /// A TOML pipeline file could not be understood.
    #[error("config: {0}")]
    Config(String),
    /// A stage refused its input or its stored parameters.
    #[error("stage '{stage}': {message}")]
    Stage { stage: String, message: String },
    /// The requested backend cannot run here (no driver, no NVRTC, no device).
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// The device could not allocate the memory a run needs.
    #[error("device out of memory: {0}")]
    OutOfMemory(String),
    /// Any other device-side failure (kernel compile, launch, copy).
    #[error("device error: {0}")]
    Device(String),
    /// Operating-system I/O failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Attach the name of the stage at fault to an error raised inside it.
    pub fn in_stage(self, stage: &str) -> Error {
        match self {
            Error::Stage { .. } => self,
            Error::InvalidArgument(m) | Error::Corrupt(m) | Error::Pipeline(m) => {
                Error::Stage { stage: stage.to_string(), message: m }
            }
            other => other,
        }
    }
}

/// Shorthand for an `Error::Corrupt` with a formatted message.
macro_rules! corrupt {
    ($($arg:tt)*) => { $crate::error::Error::Corrupt(format!($($arg)*)) };
}
pub(crate) use corrupt;
