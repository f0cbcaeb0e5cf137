//! Where stages run. The CPU backend (rayon) is the reference; the CUDA backend must write
//! the same archive bytes. `auto` prefers CUDA when a driver, NVRTC and a device are present.

use crate::error::{Error, Result};

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Cpu,
    Cuda,
}

/// A backend ready to run pipelines.
#[derive(Clone, Debug)]
pub enum Backend {
    Cpu,
}

impl Backend {
    /// Resolve a choice. Returns the backend and a note on why it was chosen
    /// (e.g. "no CUDA driver found" when `auto` falls back to the CPU).
    pub fn select(choice: BackendChoice) -> Result<(Backend, String)> {
        match choice {
            BackendChoice::Cpu => Ok((Backend::Cpu, String::new())),
            BackendChoice::Auto => Ok((Backend::Cpu, format!("CUDA not used: {}", cuda_unavailable_reason()))),
            BackendChoice::Cuda => Err(Error::BackendUnavailable(cuda_unavailable_reason())),
        }
    }

    /// Short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
        }
    }

    /// Hardware description for benchmark reports.
    pub fn device_name(&self) -> String {
        match self {
            Backend::Cpu => format!("{} CPU threads", rayon::current_num_threads()),
        }
    }
}

fn cuda_unavailable_reason() -> String {
    "this build has no CUDA backend".into()
}
