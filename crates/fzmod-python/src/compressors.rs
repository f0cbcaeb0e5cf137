//! Finalized compressors, reused across calls. Building a pipeline (preset or TOML, bound,
//! finalize) costs more than compressing a small chunk, and codecs (numcodecs, Zarr, HDF5
//! through Dask) call us once per chunk with the same settings and chunk shape: the cache turns
//! every call after the first into a lookup. `fzmod::Compressor` is `Send + Sync`, so one
//! instance serves every thread.

use crate::pipeline::{self, PipelineRequest};
use fzmod::backend::Backend;
use fzmod::Compressor;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Distinct settings kept at once; past that the cache starts over (a program cycling through
/// more shapes than this pays a pipeline build per call, as it did before the cache).
const MAX_ENTRIES: usize = 64;

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    preset: String,
    toml: Option<String>,
    mode: Option<String>,
    bound_bits: Option<u64>,
    mask: (bool, bool, Option<u64>),
    dtype: fzmod::DType,
    shape: Vec<usize>,
    backend: &'static str,
}

type Cache = Mutex<HashMap<Key, Arc<Compressor>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

/// The compressor for `request` on arrays of `dtype` and `shape`, on `backend`.
pub fn get(
    py: Python<'_>,
    request: &PipelineRequest<'_>,
    dtype: fzmod::DType,
    shape: &[usize],
    backend: &Backend,
) -> PyResult<Arc<Compressor>> {
    let key = Key {
        preset: request.preset.to_owned(),
        toml: request.toml.map(str::to_owned),
        mode: request.mode.map(str::to_owned),
        bound_bits: request.bound.map(f64::to_bits),
        mask: (request.mask.nan, request.mask.inf, request.mask.fill.map(f64::to_bits)),
        dtype,
        shape: shape.to_vec(),
        backend: backend.name(),
    };
    if let Some(found) = lock().get(&key) {
        return Ok(found.clone());
    }
    // Built outside the lock: errors are turned into Python exceptions, which imports a module.
    let pipeline = pipeline::build(py, request, dtype, shape)?;
    let built = Arc::new(Compressor::new(pipeline, backend.clone()).map_err(|e| crate::errors::from_library(py, e))?);
    let mut entries = lock();
    if entries.len() >= MAX_ENTRIES {
        entries.clear();
    }
    entries.insert(key, built.clone());
    Ok(built)
}

/// A poisoned lock only means another thread panicked between lookup and insert; the map
/// itself is always consistent, so keep using it.
fn lock() -> std::sync::MutexGuard<'static, HashMap<Key, Arc<Compressor>>> {
    cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
