//! The CUDA backend: a device context, run-time compiled kernels (NVRTC → CUBIN for the
//! device's own `sm_XY`, `--fmad=false`, cached per process and on disk, keyed by source,
//! options, arch and NVRTC version), a grow-only device workspace reused across calls, launch
//! lists that run as CUDA graphs when they repeat (`launches.rs`), the device half of the stage
//! contract (`device.rs`), and the fragment contract with the generator of fused region
//! kernels (`region.rs`). Nothing here names a concrete stage.
//!
//! Built with cudarc's dynamic loading: nothing CUDA is needed to compile, and the driver and
//! NVRTC libraries are probed before any call (cudarc panics on a missing library).

mod compile;
pub mod device;
mod launches;
pub mod region;

pub use compile::Program;
pub(crate) use launches::LaunchList;

use crate::error::{Error, Result};
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, PinnedHostSlice,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One CUDA device with its stream, module cache and workspace. Further *lanes* of it
/// ([`CudaDevice::lanes`]) share its context, modules and learnt capacities and have a stream,
/// workspace, staging ring and graphs of their own, so that a chunk pipeline's transfers and
/// kernels overlap.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: String,
    name: String,
    modules: Arc<Mutex<HashMap<Program, Arc<CudaModule>>>>,
    workspace: Mutex<Workspace>,
    /// Page-locked host buffer every transfer goes through (grow-only).
    staging: Mutex<Staging>,
    /// Launch lists that repeat, as CUDA graphs (`launches.rs`).
    graphs: Mutex<launches::Graphs>,
    /// Dynamic output capacities stage-by-stage compresses measured, by pipeline, element
    /// type and shape (`learnt_capacities`).
    learnt: Arc<Mutex<HashMap<String, Vec<usize>>>>,
    /// The lanes beyond this one, created on first use and kept (their staging is pinned).
    lanes: Mutex<Vec<Arc<CudaDevice>>>,
}

/// Pipelines whose learnt capacities the device keeps (all are forgotten past this many).
const LEARNT_PIPELINES: usize = 256;

/// The pinned staging buffer, and the last upload's final copy out of it: uploads return
/// before their copies complete, so the CPU waits for that copy before it writes (or frees)
/// the buffer again.
#[derive(Default)]
struct Staging {
    host: Option<PinnedHostSlice<u8>>,
    read_by: Option<CudaEvent>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({}, {})", self.name, self.arch)
    }
}

/// Map a driver error to ours: out-of-memory is its own kind.
pub(crate) fn device_error(e: DriverError) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory(e.to_string())
    } else {
        Error::Device(e.to_string())
    }
}

/// Whether NVRTC can be loaded (kernels can be compiled even without a device).
///
/// # Safety
/// Only tries to open the library by name; safe to call anywhere.
pub unsafe fn nvrtc_present() -> bool {
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

fn probe() -> Result<Arc<CudaDevice>, String> {
    // SAFETY: these only try to dlopen the libraries by name.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) found".into());
    }
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("the CUDA driver is present but NVRTC (libnvrtc.so) is not; install the CUDA toolkit \
                    or the nvidia-cuda-nvrtc wheel and put it on LD_LIBRARY_PATH"
            .into());
    }
    let opened = std::panic::catch_unwind(|| -> Result<CudaDevice, DriverError> {
        let ctx = CudaContext::new(0)?;
        let (major, minor) = ctx.compute_capability()?;
        let name = ctx.name()?;
        let stream = ctx.new_stream()?;
        // Each stream (the device's, each lane's) orders all work on its own buffers:
        // per-buffer event tracking would only add waits.
        // SAFETY: no buffer is shared between streams (a job's buffers stay on its lane).
        unsafe { ctx.disable_event_tracking() };
        keep_freed_memory(&ctx);
        let arch = format!("sm_{major}{minor}");
        Ok(CudaDevice::on_stream(ctx, stream, arch, name, Arc::default(), Arc::default()))
    });
    let device = match opened {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => return Err(format!("no usable CUDA device: {e}")),
        Err(_) => return Err("the CUDA driver library could not be used (missing symbols)".into()),
    };
    let major: u32 = device.arch[3..device.arch.len() - 1].parse().unwrap_or(0);
    if major < 8 {
        return Err(format!(
            "{} ({}) is older than compute capability 8.0, which the kernels need",
            device.name, device.arch
        ));
    }
    Ok(Arc::new(device))
}

/// Stream-ordered frees return memory to the device's pool; by default the pool gives it back
/// to the driver at every synchronisation, so each call paid to map its buffers again. Keep it
/// (best effort: an error only costs speed).
fn keep_freed_memory(ctx: &CudaContext) {
    let mut pool = std::ptr::null_mut();
    let mut keep = u64::MAX;
    // SAFETY: plain driver queries on the context's own device; `keep` outlives the call.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS {
            let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
            let _ = sys::cuMemPoolSetAttribute(pool, attr, (&mut keep as *mut u64).cast());
        }
    }
}

impl CudaDevice {
    fn on_stream(
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        arch: String,
        name: String,
        modules: Arc<Mutex<HashMap<Program, Arc<CudaModule>>>>,
        learnt: Arc<Mutex<HashMap<String, Vec<usize>>>>,
    ) -> CudaDevice {
        CudaDevice {
            ctx,
            stream,
            arch,
            name,
            modules,
            workspace: Mutex::new(Workspace::default()),
            staging: Mutex::new(Staging::default()),
            graphs: Mutex::new(launches::Graphs::default()),
            learnt,
            lanes: Mutex::new(Vec::new()),
        }
    }

    /// `n` lanes of this device (itself first): each runs whole jobs on a stream of its own,
    /// so one lane's upload, another's kernels and a third's download share the time. A job's
    /// buffers stay on its lane (event tracking is off: nothing is shared between streams).
    pub(crate) fn lanes(self: &Arc<Self>, n: usize) -> Result<Vec<Arc<CudaDevice>>> {
        let mut extra = self.lanes.lock().map_err(|_| Error::Device("lanes poisoned".into()))?;
        while extra.len() + 1 < n {
            let stream = self.ctx.new_stream().map_err(device_error)?;
            let (arch, name) = (self.arch.clone(), self.name.clone());
            let (modules, learnt) = (Arc::clone(&self.modules), Arc::clone(&self.learnt));
            extra.push(Arc::new(CudaDevice::on_stream(self.ctx.clone(), stream, arch, name, modules, learnt)));
        }
        Ok(std::iter::once(Arc::clone(self)).chain(extra.iter().take(n.saturating_sub(1)).cloned()).collect())
    }

    /// `work(lane, k)` for every k in `0..count` on up to [`LANES`] lanes: lane j takes
    /// k = j, j + lanes, … in order on a thread of its own and stops at its first error. The
    /// results come back in k's order, or the error of the smallest k that failed, so neither
    /// the lanes nor their timing can change what the caller sees.
    pub(crate) fn in_lanes<T: Send>(
        self: &Arc<Self>,
        count: usize,
        work: impl Fn(&Arc<CudaDevice>, usize) -> Result<T> + Sync,
    ) -> Result<Vec<T>> {
        let lanes = self.lanes(LANES.min(count).max(1))?;
        let step = lanes.len();
        let done: Vec<Vec<(usize, Result<T>)>> = std::thread::scope(|s| {
            let work = &work;
            let threads: Vec<_> = lanes
                .iter()
                .enumerate()
                .map(|(j, lane)| {
                    s.spawn(move || {
                        let mut results = Vec::new();
                        for k in (j..count).step_by(step) {
                            let r = work(lane, k);
                            let failed = r.is_err();
                            results.push((k, r));
                            if failed {
                                break;
                            }
                        }
                        results
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        });
        let mut slots: Vec<Option<Result<T>>> = (0..count).map(|_| None).collect();
        for (k, r) in done.into_iter().flatten() {
            slots[k] = Some(r);
        }
        // A lane's untried items all follow its error, which this walk meets first.
        slots.into_iter().map(|r| r.unwrap_or_else(|| Err(Error::Device("a lane stopped early".into())))).collect()
    }

    /// The process-wide device (opened once), or why there is none.
    pub fn get() -> Result<Arc<CudaDevice>> {
        static DEVICE: OnceLock<Result<Arc<CudaDevice>, String>> = OnceLock::new();
        DEVICE.get_or_init(probe).clone().map_err(Error::BackendUnavailable)
    }

    /// "NVIDIA H100 80GB HBM3 (sm_90)".
    pub fn description(&self) -> String {
        format!("{} ({})", self.name, self.arch)
    }

    /// The device's architecture, e.g. `sm_90` (what kernels are compiled for).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The high-water mark of device memory fzmod allocated (every buffer comes from the
    /// device's default pool) since the last [`CudaDevice::reset_peak`].
    pub fn peak_device_bytes(&self) -> u64 {
        let mut high = 0u64;
        // SAFETY: reads one attribute of the device's default pool into `high`.
        unsafe {
            let mut pool = std::ptr::null_mut();
            if sys::cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS {
                let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
                let _ = sys::cuMemPoolGetAttribute(pool, attr, (&mut high as *mut u64).cast());
            }
        }
        high
    }

    /// Start a new high-water mark for [`CudaDevice::peak_device_bytes`].
    pub fn reset_peak(&self) {
        let mut zero = 0u64;
        // SAFETY: resets one attribute of the device's default pool.
        unsafe {
            let mut pool = std::ptr::null_mut();
            if sys::cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS {
                let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
                let _ = sys::cuMemPoolSetAttribute(pool, attr, (&mut zero as *mut u64).cast());
            }
        }
    }

    /// Device time of the work `enqueue` puts on the stream, from CUDA events, in seconds.
    pub(crate) fn time(&self, enqueue: impl FnOnce() -> Result<()>) -> Result<f64> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.ctx.new_event(flags).map_err(device_error)?;
        let end = self.ctx.new_event(flags).map_err(device_error)?;
        start.record(&self.stream).map_err(device_error)?;
        enqueue()?;
        end.record(&self.stream).map_err(device_error)?;
        end.synchronize().map_err(device_error)?;
        Ok(f64::from(start.elapsed_ms(&end).map_err(device_error)?) / 1e3)
    }

    /// Run `f` on the pinned staging buffer, grown to at least `len` bytes, once the copies of
    /// the last upload out of it have completed. `f` returns the event after its own last copy
    /// out of the buffer when it does not wait for it (an upload).
    fn with_staging<T>(&self, len: usize, f: impl FnOnce(&mut [u8]) -> Result<(T, Option<CudaEvent>)>) -> Result<T> {
        let mut staging = self.staging.lock().map_err(|_| Error::Device("staging buffer poisoned".into()))?;
        if let Some(read) = staging.read_by.take() {
            read.synchronize().map_err(device_error)?;
        }
        if staging.host.as_ref().is_none_or(|p| p.len() < len) {
            staging.host = None;
            // SAFETY: the contents are written before they are read. Flags 0: cacheable, so the
            // CPU reads downloads at full speed.
            staging.host =
                Some(unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len.max(1), 0) }.map_err(device_error)?);
        }
        let host = staging.host.as_mut().expect("allocated above").as_mut_slice().map_err(device_error)?;
        let (result, read_by) = f(&mut host[..len])?;
        staging.read_by = read_by;
        Ok(result)
    }

    /// Host → device through the pinned staging buffer (see [`CudaDevice::upload_to`]).
    pub(crate) fn upload(&self, bytes: &[u8], dst: &mut CudaSlice<u8>) -> Result<()> {
        self.upload_to(bytes, device::address(dst, &self.stream))
    }

    /// Host → device address `dst`, enqueued on the stream: the kernels enqueued before keep
    /// running and those after see the data. Small copies (a stage's tables and lists) go
    /// from the caller's memory: CUDA stages pageable memory before the call returns and does
    /// not wait for the stream. Large ones go in pieces through a ring of [`STAGING_PIECES`]
    /// pinned pieces: the CPU copies piece k + 1 while the link carries the pieces before it,
    /// and the call returns once the last piece is enqueued (a decoder's block table then
    /// does not stall the kernels before it; the next transfer waits for the ring instead).
    pub(crate) fn upload_to(&self, bytes: &[u8], dst: u64) -> Result<()> {
        self.bind()?;
        if bytes.len() <= SMALL_UPLOAD {
            // SAFETY: the destination range lies in the caller's buffer; a pageable source is
            // copied into driver staging memory before memcpy_htod_async returns.
            return unsafe { cudarc::driver::result::memcpy_htod_async(dst, bytes, self.stream.cu_stream()) }
                .map_err(device_error);
        }
        let piece = TRANSFER_PIECE.min(bytes.len());
        self.with_staging(STAGING_PIECES * piece, |host| {
            let mut ring: Vec<&mut [u8]> = host.chunks_mut(piece).collect();
            let mut in_flight: Vec<Option<CudaEvent>> = (0..ring.len()).map(|_| None).collect();
            for (k, chunk) in bytes.chunks(piece).enumerate() {
                let slot = k % ring.len();
                if let Some(done) = in_flight[slot].take() {
                    done.synchronize().map_err(device_error)?;
                }
                let staged = &mut ring[slot][..chunk.len()];
                parallel_copy(staged, chunk);
                let at = dst + (k * piece) as u64;
                // SAFETY: `staged` is pinned and not written again until this copy's event (or
                // a later one on the stream) has completed; the destination range lies in the
                // caller's buffer.
                unsafe { cudarc::driver::result::memcpy_htod_async(at, staged, self.stream.cu_stream()) }
                    .map_err(device_error)?;
                in_flight[slot] = Some(self.stream.record_event(None).map_err(device_error)?);
            }
            // The stream runs the copies in order: the last one's event covers them all.
            let last = (bytes.len().div_ceil(piece) - 1) % ring.len();
            Ok(((), in_flight[last].take()))
        })
    }

    /// Device → host through the pinned staging buffer.
    pub(crate) fn download(&self, src: &CudaSlice<u8>, len: usize) -> Result<Vec<u8>> {
        let mut out = crate::element::zeroed_vec(len);
        self.download_from(device::address(src, &self.stream), &mut out)?;
        Ok(out)
    }

    /// Device → `dst` (its whole length), like [`CudaDevice::download_from`].
    pub(crate) fn download_into(&self, src: &CudaSlice<u8>, dst: &mut [u8]) -> Result<()> {
        self.download_from(device::address(src, &self.stream), dst)
    }

    /// [`CudaDevice::download_into`], returning the CRC-32C of the bytes, taken by the cores
    /// that copy them out of the pinned pieces (while the bytes are in their caches).
    pub(crate) fn download_checked(&self, src: &CudaSlice<u8>, dst: &mut [u8]) -> Result<u32> {
        self.download_checked_from(device::address(src, &self.stream), dst)
    }

    /// [`CudaDevice::download_from`] with the CRC-32C of the bytes (see `download_checked`).
    pub(crate) fn download_checked_from(&self, src: u64, dst: &mut [u8]) -> Result<u32> {
        let mut pieces = Vec::new();
        self.download_pieces(src, dst, |out, staged| pieces.extend(parallel_copy_checked(out, staged)))?;
        Ok(crate::archive::checksum_of_pieces(pieces))
    }

    /// Device address `src` → `dst` (its whole length), in pieces through the ring of pinned
    /// pieces: the link fills the next pieces while the CPU copies the oldest one out.
    pub(crate) fn download_from(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.download_pieces(src, dst, parallel_copy)
    }

    /// The ring of [`CudaDevice::download_from`], `copy_out` moving each landed piece from its
    /// pinned slot into its place in `dst`, in order.
    fn download_pieces(&self, src: u64, dst: &mut [u8], mut copy_out: impl FnMut(&mut [u8], &[u8])) -> Result<()> {
        self.bind()?;
        let piece = TRANSFER_PIECE.min(dst.len()).max(1);
        self.with_staging(STAGING_PIECES * piece, |host| {
            let mut ring: Vec<&mut [u8]> = host.chunks_mut(piece).collect();
            let len = dst.len();
            let pieces = len.div_ceil(piece);
            let enqueue = |k: usize, staged: &mut [u8]| -> Result<CudaEvent> {
                let n = piece.min(len - k * piece);
                // SAFETY: `staged` is pinned and read only after this copy's event completes;
                // the source range lies in a live device buffer.
                unsafe {
                    cudarc::driver::result::memcpy_dtoh_async(
                        &mut staged[..n],
                        src + (k * piece) as u64,
                        self.stream.cu_stream(),
                    )
                }
                .map_err(device_error)?;
                self.stream.record_event(None).map_err(device_error)
            };
            let slots = ring.len();
            let mut landed = std::collections::VecDeque::with_capacity(slots);
            for (k, staged) in ring.iter_mut().enumerate().take(pieces) {
                landed.push_back(enqueue(k, staged)?);
            }
            for (k, out) in dst.chunks_mut(piece).enumerate() {
                let done = landed.pop_front().expect("piece k was enqueued");
                done.synchronize().map_err(device_error)?;
                copy_out(out, &ring[k % slots][..out.len()]);
                if k + slots < pieces {
                    landed.push_back(enqueue(k + slots, &mut *ring[k % slots])?);
                }
            }
            Ok(((), None))
        })
    }

    /// Device address `src` → device address `dst`, `bytes` long (enqueued on the stream).
    pub(crate) fn copy_on_device(&self, src: u64, dst: u64, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the callers pass ranges that lie in live device buffers of `bytes` bytes.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }
            .map_err(device_error)
    }

    /// Copy host values into a new device buffer (for device-resident callers and tests).
    pub fn to_device<T: crate::element::Element>(&self, values: &[T]) -> Result<device::DeviceBuffer> {
        let run = device::DeviceRun::new(self, Vec::new(), Vec::new())?;
        let buffer = run.upload(T::DTYPE, bytemuck::cast_slice(values))?;
        // The caller may hand the buffer to work on another stream.
        self.synchronize()?;
        Ok(buffer)
    }

    /// Copy a device buffer's elements (its known length) back into host memory.
    pub fn to_host(&self, b: &device::DeviceBuffer) -> Result<crate::element::Buffer> {
        let run = device::DeviceRun::new(self, Vec::new(), Vec::new())?;
        run.download_buffer(b, b.known_len()?)
    }

    /// The device address of a buffer (to hand to other CUDA code).
    pub fn address_of(&self, b: &device::DeviceBuffer) -> u64 {
        b.ptr(&self.stream)
    }

    /// Make the context current on this thread: raw driver calls (copies by address) need it,
    /// and a caller's thread (a Python or Dask worker) may never have used the device.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(device_error)
    }

    /// Wait for everything enqueued so far.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(device_error)
    }

    /// The stream every launch and copy goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Free the buffers the workspace keeps between calls (stream-ordered), its lanes' too: the
    /// next call allocates what it needs again.
    pub fn release_workspace(&self) -> Result<()> {
        self.workspace()?.slots.clear();
        let lanes = self.lanes.lock().map_err(|_| Error::Device("lanes poisoned".into()))?;
        lanes.iter().try_for_each(|lane| lane.release_workspace())
    }

    /// The capacities an earlier compress under `key` (pipeline, element type, shape) had to
    /// grow its dynamic outputs to, so that a repeated call (a codec chunk after chunk) starts
    /// with them instead of repeating its run; empty when none grew.
    pub(crate) fn learnt_capacities(&self, key: &str) -> Vec<usize> {
        self.learnt.lock().map(|m| m.get(key).cloned().unwrap_or_default()).unwrap_or_default()
    }

    /// Remember the capacities a compress under `key` grew to.
    pub(crate) fn learn_capacities(&self, key: &str, capacities: &[usize]) {
        if let Ok(mut m) = self.learnt.lock() {
            if m.len() >= LEARNT_PIPELINES && !m.contains_key(key) {
                m.clear();
            }
            m.insert(key.to_string(), capacities.to_vec());
        }
    }

    /// The grow-only workspace (fusion rules keep their buffers there between calls).
    pub(crate) fn workspace(&self) -> Result<std::sync::MutexGuard<'_, Workspace>> {
        self.workspace.lock().map_err(|_| Error::Device("workspace poisoned".into()))
    }

    /// A kernel of `program` (compiled once per process, cached on disk).
    pub(crate) fn function(&self, program: &Program, name: &str) -> Result<CudaFunction> {
        let module = {
            let mut cache = self.modules.lock().map_err(|_| Error::Device("module cache poisoned".into()))?;
            match cache.get(program) {
                Some(m) => m.clone(),
                None => {
                    let load = |image| self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image));
                    // A disk-cache entry that the driver refuses is replaced by a fresh compile.
                    let m = match compile::cached(program, &self.arch).map(load) {
                        Some(Ok(m)) => m,
                        _ => load(compile::compile_and_cache(program, &self.arch)?).map_err(device_error)?,
                    };
                    cache.insert(program.clone(), m.clone());
                    m
                }
            }
        };
        module.load_function(name).map_err(device_error)
    }
}

/// Lanes of a chunk pipeline ([`CudaDevice::in_lanes`]): a chunk uploading, one in kernels,
/// one downloading, and one more to cover the host's copies (4 kept the H200 host's link
/// busier than 3 on 16 MiB chunks; 6 gained nothing sure: docs/PERFORMANCE.md).
const LANES: usize = 4;

/// Bytes per piece of a staged transfer, and pieces in the pinned ring: three pieces of
/// 16 MiB kept the H100 host's link busiest in a sweep of 8–32 MiB × 2–4 (docs/PERFORMANCE.md).
const TRANSFER_PIECE: usize = 16 << 20;
const STAGING_PIECES: usize = 3;
/// Uploads up to this size are enqueued without waiting (see [`CudaDevice::upload_to`]).
const SMALL_UPLOAD: usize = 1 << 20;

/// Copy between host buffers on every core: one thread cannot keep up with the PCIe link, and
/// a fresh destination's page faults are spread out too.
fn parallel_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    dst.par_chunks_mut(COPY_GRAIN).zip(src.par_chunks(COPY_GRAIN)).for_each(|(d, s)| stream_copy(d, s));
}

/// Bytes one core copies at a time in [`parallel_copy`].
const COPY_GRAIN: usize = 1 << 20;

/// [`parallel_copy`], with the CRC-32C and length of each 1 MiB grain (in order), taken by
/// the core that copied it while the grain is in its cache.
fn parallel_copy_checked(dst: &mut [u8], src: &[u8]) -> Vec<(u32, usize)> {
    use rayon::prelude::*;
    let grains = dst.par_chunks_mut(COPY_GRAIN).zip(src.par_chunks(COPY_GRAIN));
    grains
        .map(|(d, s)| {
            stream_copy(d, s);
            (crc32c::crc32c(s), s.len())
        })
        .collect()
}

/// `dst.copy_from_slice(src)` with non-temporal stores on x86-64: a staged transfer writes
/// each destination line once and does not read it back soon, so skipping the cache saves
/// the read of every line a plain store would first fetch (about 45 → 55 GB/s on 16 cores).
fn stream_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy between equal lengths");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        const LINE: usize = 64;
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let body = (dst.len() - head) / LINE * LINE;
        dst[..head].copy_from_slice(&src[..head]);
        // SAFETY: SSE2 is part of x86-64; `d` is 16-byte aligned (`head` above) and every
        // access lies within `body` bytes of both slices.
        unsafe {
            let d = dst.as_mut_ptr().add(head).cast::<__m128i>();
            let s = src.as_ptr().add(head).cast::<__m128i>();
            for i in 0..body / 16 {
                _mm_stream_si128(d.add(i), _mm_loadu_si128(s.add(i)));
            }
            _mm_sfence();
        }
        dst[head + body..].copy_from_slice(&src[head + body..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Grow-only device buffers, named by role, reused across calls.
#[derive(Default)]
pub(crate) struct Workspace {
    slots: HashMap<&'static str, CudaSlice<u8>>,
}

impl Workspace {
    /// Take the buffer `name` with at least `bytes` bytes (contents undefined); give it back
    /// with [`Workspace::put`] so the next call reuses it.
    pub fn take(&mut self, stream: &Arc<CudaStream>, name: &'static str, bytes: usize) -> Result<CudaSlice<u8>> {
        let need = bytes.max(8);
        match self.slots.remove(name) {
            Some(s) if s.len() >= need => Ok(s),
            // A buffer too small is dropped (freed, stream-ordered) and replaced.
            _ => stream.alloc_zeros::<u8>(need).map_err(device_error),
        }
    }

    pub fn put(&mut self, name: &'static str, buffer: CudaSlice<u8>) {
        self.slots.insert(name, buffer);
    }
}

/// Compile `programs` for `arch` without a device (NVRTC only; fills the disk cache), on all
/// cores: NVRTC compiles separate programs concurrently (one after another, the ~100 programs
/// took minutes of a GPU session). The error is that of the first program that fails.
pub fn compile_programs(programs: &[Program], arch: &str) -> Result<usize> {
    crate::error::at_once(programs.len(), |k| compile::compile_and_cache(&programs[k], arch)).map(|images| images.len())
}

#[cfg(test)]
mod tests {
    use super::{parallel_copy, parallel_copy_checked, stream_copy};

    #[test]
    fn streaming_copies_equal_plain_copies_at_every_alignment() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 131 % 251) as u8).collect();
        for offset in 0..20 {
            for len in [0, 1, 15, 16, 63, 64, 65, 200, 4000] {
                let mut dst = vec![0u8; 4100];
                stream_copy(&mut dst[offset..offset + len], &src[7..7 + len]);
                assert_eq!(&dst[offset..offset + len], &src[7..7 + len], "offset {offset}, len {len}");
                assert!(dst[..offset].iter().chain(&dst[offset + len..]).all(|&b| b == 0), "outside the range");
            }
        }
        let big: Vec<u8> = (0..(3 << 20) + 77).map(|i: u32| (i % 253) as u8).collect();
        let mut out = vec![0u8; big.len()];
        parallel_copy(&mut out, &big);
        assert_eq!(out, big);
        let mut again = vec![0u8; big.len()];
        let grains = parallel_copy_checked(&mut again, &big);
        assert_eq!(again, big);
        assert_eq!(grains.len(), 4);
        assert_eq!(crate::archive::checksum_of_pieces(grains), crc32c::crc32c(&big));
    }
}
