//! Where stages run. The CPU backend (rayon) is the reference; the CUDA backend writes the
//! same archive bytes. `auto` prefers CUDA when a driver, NVRTC and a device are present.

#[cfg(feature = "cuda")]
pub mod cuda;

use crate::error::Result;

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
    #[cfg(feature = "cuda")]
    Cuda(std::sync::Arc<cuda::CudaDevice>),
}

impl Backend {
    /// Resolve a choice. Returns the backend and a note on why it was chosen
    /// (e.g. "no CUDA driver found" when `auto` falls back to the CPU).
    pub fn select(choice: BackendChoice) -> Result<(Backend, String)> {
        // The CPU is chosen without probing CUDA: a probe on a machine with a GPU starts a
        // CUDA context, a third of a second of a small CLI call.
        if choice == BackendChoice::Cpu {
            return Ok((Backend::Cpu, String::new()));
        }
        match (choice, Backend::cuda()) {
            (_, Ok(gpu)) => Ok((gpu, String::new())),
            (BackendChoice::Cuda, Err(e)) => Err(e),
            (_, Err(e)) => Ok((Backend::Cpu, format!("CUDA not used: {e}"))),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda() -> Result<Backend> {
        cuda::CudaDevice::get().map(Backend::Cuda)
    }

    #[cfg(not(feature = "cuda"))]
    fn cuda() -> Result<Backend> {
        Err(crate::error::Error::BackendUnavailable("this build has no CUDA backend (cargo feature `cuda`)".into()))
    }

    /// Short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => "cuda",
        }
    }

    /// Hardware description for benchmark reports.
    pub fn device_name(&self) -> String {
        match self {
            Backend::Cpu => match rayon::current_num_threads() {
                1 => "1 CPU thread".to_string(),
                n => format!("{n} CPU threads"),
            },
            #[cfg(feature = "cuda")]
            Backend::Cuda(d) => d.description(),
        }
    }
}
