//! The device half of the stage contract (docs/ARCHITECTURE.md, "The stage contract").
//!
//! A stage with a device implementation runs forward and inverse on [`DeviceBuffer`]s inside a
//! [`DeviceRun`]. It declares every output's capacity before it launches; sizes that depend on
//! the data (payload bytes, outlier counts) and values decode needs (a resolved bound) are
//! written by its kernels into *scalar slots*, which the executor reads back once, after the
//! last stage. The stage's parameter record is then produced from those values by the
//! [`PendingRecord`] it returned, with the same record writer the CPU path uses.

use super::{device_error, CudaDevice};
use crate::element::DType;
use crate::error::{Error, Result};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;

/// A scalar slot: one u64 on the device, read back after the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(usize);

/// How many elements a device buffer holds.
#[derive(Clone, Copy, Debug)]
pub enum Len {
    /// Known on the host before launch.
    Known(usize),
    /// Written by a kernel into `slot`; at most `capacity` elements were stored. A count above
    /// the capacity means the buffer overflowed and the run is repeated with that capacity.
    Device { slot: Slot, capacity: usize },
}

impl Len {
    /// Elements the buffer has room for.
    pub fn capacity(&self) -> usize {
        match *self {
            Len::Known(n) => n,
            Len::Device { capacity, .. } => capacity,
        }
    }
}

/// Where a device buffer's bytes live.
enum Memory {
    /// Allocated by fzmod (stream-ordered, freed when its last holder drops it).
    Owned(Arc<CudaSlice<u8>>),
    /// The caller's memory (a CuPy or PyTorch array), valid for as long as the buffer is used.
    Borrowed(u64),
}

/// A typed buffer in device memory.
pub struct DeviceBuffer {
    pub dtype: DType,
    mem: Memory,
    pub len: Len,
    range: Option<Arc<FiniteRange>>,
}

/// Partial minima and maxima of the finite values a buffer holds, left on the device by the
/// kernel that wrote them (the Mask's bitmap pass reads every value anyway): a stage that needs
/// the value range combines `count` partials instead of reading the buffer again.
pub struct FiniteRange {
    /// `count` f64 minima, then `count` f64 maxima (an empty part: +Inf and −Inf).
    pub parts: DeviceBuffer,
    pub count: u32,
}

impl DeviceBuffer {
    /// Wrap `len` elements of `dtype` the caller owns at device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to at least `len` elements of `dtype` in memory of fzmod's CUDA device
    /// (primary context of device 0), stay valid and unwritten while the buffer is used, and
    /// be suitably aligned for `dtype`.
    pub unsafe fn borrowed(dtype: DType, ptr: u64, len: usize) -> DeviceBuffer {
        DeviceBuffer { dtype, mem: Memory::Borrowed(ptr), len: Len::Known(len), range: None }
    }

    /// A second holder of the same memory (what a kernel enqueued later still reads, after
    /// the first holder has moved on).
    pub fn share(&self) -> DeviceBuffer {
        let mem = match &self.mem {
            Memory::Owned(m) => Memory::Owned(Arc::clone(m)),
            Memory::Borrowed(ptr) => Memory::Borrowed(*ptr),
        };
        DeviceBuffer { dtype: self.dtype, mem, len: self.len, range: self.range.clone() }
    }

    /// The same buffer, stating the partial ranges of the finite values its writer left.
    pub fn with_finite_range(self, range: FiniteRange) -> DeviceBuffer {
        DeviceBuffer { range: Some(Arc::new(range)), ..self }
    }

    /// The partial ranges of its finite values, where its writer left them.
    pub fn finite_range(&self) -> Option<&FiniteRange> {
        self.range.as_deref()
    }

    /// Whether fzmod allocated this memory and no other `DeviceBuffer` shares it.
    fn is_sole_holder(&self) -> bool {
        matches!(&self.mem, Memory::Owned(m) if Arc::strong_count(m) == 1)
    }

    /// The raw device address, for kernel arguments and copies.
    pub fn ptr(&self, stream: &Arc<CudaStream>) -> u64 {
        match &self.mem {
            Memory::Owned(m) => address(m, stream),
            Memory::Borrowed(ptr) => *ptr,
        }
    }

    /// The element count when it is known on the host.
    pub fn known_len(&self) -> Result<usize> {
        match self.len {
            Len::Known(n) => Ok(n),
            Len::Device { .. } => Err(Error::Device("a stage needs a host-known length it was not given".into())),
        }
    }
}

/// The device address of a buffer. Event tracking is off (a buffer's own stream orders all
/// work on it), so taking the address records nothing.
pub fn address(mem: &CudaSlice<u8>, stream: &Arc<CudaStream>) -> u64 {
    let (ptr, _sync) = mem.device_ptr(stream);
    ptr
}

/// Scalar slot values after a run.
pub struct Scalars(Vec<u64>);

impl Scalars {
    pub fn u64(&self, slot: Slot) -> u64 {
        self.0[slot.0]
    }
    pub fn f64(&self, slot: Slot) -> f64 {
        f64::from_bits(self.0[slot.0])
    }
}

/// Builds a stage's record once the scalar slots are known.
pub type PendingRecord = Box<dyn FnOnce(&Scalars) -> Result<Vec<u8>> + Send>;

/// A device forward run: one buffer per output port, and the record to come.
pub struct DeviceForwarded {
    pub outputs: Vec<DeviceBuffer>,
    pub record: PendingRecord,
}

/// The device implementation of a stage: the same forward and inverse contract as the CPU
/// reference, on device buffers, producing the same bytes.
pub trait DeviceStage: Sync {
    /// Forward: one buffer per input port in, one per output port out. No host
    /// synchronisation: data-dependent sizes stay in scalar slots.
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded>;
    /// Inverse on a stage decoded from its record. May synchronise (to check a payload).
    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>>;
}

/// Room for scalar slots in one run; stages take a handful each.
const MAX_SLOTS: usize = 256;

/// The context stages launch into: the device, its stream, the pipeline's shape, scalar
/// slots, and the capacities learnt from an earlier run that overflowed.
pub struct DeviceRun<'a> {
    pub dev: &'a CudaDevice,
    /// Shape of the pipeline input, C order.
    pub shape: Vec<usize>,
    scalars: CudaSlice<u8>,
    used_slots: usize,
    /// Capacity of every dynamic allocation, in allocation order (checked after the run).
    dynamic: Vec<(Slot, usize)>,
    /// Exact capacities measured by an overflowing earlier run, in allocation order.
    learnt: Vec<usize>,
    /// Slots kernels set non-zero when a payload is inconsistent, with what that means; read
    /// once after the run instead of a synchronisation per check.
    flags: Vec<(Slot, String)>,
    /// Host copies of device buffers, by device address: the archive's segments, which the
    /// decode plan holds. A stage reading one (a head, a table, a side channel) gets the
    /// bytes without a transfer, so the stream never waits for the host in between.
    mirrors: Vec<(u64, &'a [u8])>,
    /// The device address of the pipeline input when the job owns it and one stage alone
    /// reads it: that stage may write into it (`DeviceRun::may_overwrite`).
    overwritable: Option<u64>,
    /// What undoes those writes, enqueued when the walk ends.
    undo: Vec<Undo>,
    /// Device addresses of the buffers the inverse being run may use up (`may_consume`).
    consumable: Vec<u64>,
}

/// Enqueues the kernels that undo a stage's writes into the pipeline input.
pub type Undo = Box<dyn FnOnce(&DeviceRun) -> Result<()> + Send>;

impl<'a> DeviceRun<'a> {
    pub(crate) fn new(dev: &'a CudaDevice, shape: Vec<usize>, learnt: Vec<usize>) -> Result<Self> {
        dev.bind()?;
        let scalars = dev.stream.alloc_zeros::<u8>(8 * MAX_SLOTS).map_err(device_error)?;
        Ok(DeviceRun {
            dev,
            shape,
            scalars,
            used_slots: 0,
            dynamic: Vec::new(),
            learnt,
            flags: Vec::new(),
            mirrors: Vec::new(),
            overwritable: None,
            undo: Vec::new(),
            consumable: Vec::new(),
        })
    }

    /// Let the stage that alone reads `input` (the pipeline input the job uploaded) write into
    /// it in place.
    pub(crate) fn allow_overwrite(&mut self, input: &DeviceBuffer) {
        self.overwritable = Some(input.ptr(self.stream()));
    }

    /// Whether a stage may write into its input `input` instead of a copy: a filled copy of a
    /// 299 MB input is what kept a masked compress above 2 × (input + archive) of device
    /// memory. A stage that does gives `undo_at_walk_end` the kernels that put the input back
    /// (a job's walk runs again after an overflow, and a job may be run many times).
    pub fn may_overwrite(&self, input: &DeviceBuffer) -> bool {
        self.overwritable == Some(input.ptr(self.stream()))
    }

    /// Before a stage inverse: of `outputs`, those reconstructed by an earlier inverse of this
    /// walk are the stage's alone once nothing else shares them (no archived segment, which
    /// stays cached for the next call, and no buffer another holder reads).
    pub(crate) fn set_consumable(&mut self, made: &[&DeviceBuffer]) {
        let stream = self.stream().clone();
        self.consumable = made.iter().filter(|b| b.is_sole_holder()).map(|b| b.ptr(&stream)).collect();
    }

    /// Whether an inverse may write into `output` in place: nothing reads it after this stage.
    pub fn may_consume(&self, output: &DeviceBuffer) -> bool {
        self.consumable.contains(&output.ptr(self.stream()))
    }

    /// Register what undoes a stage's writes into the pipeline input; it runs when the walk
    /// ends, after every stage, whether the walk finished, stopped early or failed.
    pub fn undo_at_walk_end(&mut self, undo: Undo) {
        self.undo.push(undo);
    }

    /// Enqueue the registered undos, last first.
    pub(crate) fn end_walk(&mut self) -> Result<()> {
        while let Some(undo) = self.undo.pop() {
            undo(self)?;
        }
        Ok(())
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.dev.stream
    }

    /// A kernel of `program` (compiled once per process, cached on disk).
    pub fn kernel(&self, program: &super::Program, name: &str) -> Result<CudaFunction> {
        self.dev.function(program, name)
    }

    /// A fresh scalar slot (zeroed) and its device address.
    pub fn slot(&mut self) -> Result<(Slot, u64)> {
        if self.used_slots == MAX_SLOTS {
            return Err(Error::Device(format!("a pipeline needs more than {MAX_SLOTS} device scalars")));
        }
        let slot = Slot(self.used_slots);
        self.used_slots += 1;
        Ok((slot, address(&self.scalars, &self.dev.stream) + 8 * slot.0 as u64))
    }

    /// An error flag (a zeroed u64 slot; kernels `atomicOr` a u32 into its low word, or a u64) that
    /// [`DeviceRun::check_flags`] turns into a corrupt-archive error saying `message`. Kernels
    /// after the one that sets it must stay within their buffers whatever it found.
    pub fn error_flag(&mut self, message: String) -> Result<u64> {
        let (slot, at) = self.slot()?;
        self.flags.push((slot, message));
        Ok(at)
    }

    /// Wait for the stream and fail with the first raised flag's message.
    pub(crate) fn check_flags(&self) -> Result<()> {
        if self.flags.is_empty() {
            return Ok(());
        }
        let Ok(scalars) = self.read_scalars()? else {
            return Err(Error::Device("a decode's device outputs overflowed".into()));
        };
        match self.flags.iter().find(|(slot, _)| scalars.u64(*slot) != 0) {
            Some((_, message)) => Err(crate::error::corrupt!("{message}")),
            None => Ok(()),
        }
    }

    /// A buffer of `len` elements (contents undefined).
    pub fn alloc(&self, dtype: DType, len: usize) -> Result<DeviceBuffer> {
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| Error::OutOfMemory(format!("{len} × {dtype}")))?;
        // SAFETY: every kernel writes the elements it later reads; buffers are never read
        // before a kernel or a copy fills them.
        let mem = unsafe { self.dev.stream.alloc::<u8>(bytes.max(1)) }.map_err(device_error)?;
        Ok(DeviceBuffer { dtype, mem: Memory::Owned(Arc::new(mem)), len: Len::Known(len), range: None })
    }

    /// A buffer whose length a kernel writes into a slot. `guess` elements are allocated, or
    /// the exact count an earlier overflowing run measured.
    pub fn alloc_dynamic(&mut self, dtype: DType, guess: usize) -> Result<(DeviceBuffer, u64)> {
        let capacity = self.learnt.get(self.dynamic.len()).copied().unwrap_or(guess).max(guess);
        let mut buffer = self.alloc(dtype, capacity)?;
        let (slot, addr) = self.slot()?;
        buffer.len = Len::Device { slot, capacity };
        self.dynamic.push((slot, capacity));
        Ok((buffer, addr))
    }

    /// Wait for the stream and read every slot (the one synchronisation of a compress).
    /// `Err(capacities)` when a dynamic buffer overflowed: the exact capacities to rerun with.
    pub(crate) fn read_scalars(&self) -> Result<std::result::Result<Scalars, Vec<usize>>> {
        let mut host = vec![0u8; 8 * self.used_slots];
        if !host.is_empty() {
            self.dev.stream.memcpy_dtoh(&self.scalars.slice(0..host.len()), &mut host).map_err(device_error)?;
        }
        self.dev.stream.synchronize().map_err(device_error)?;
        let scalars =
            Scalars(host.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect());
        let needed: Vec<usize> = self.dynamic.iter().map(|&(slot, _)| scalars.u64(slot) as usize).collect();
        if self.dynamic.iter().zip(&needed).any(|(&(_, cap), &need)| need > cap) {
            return Ok(Err(self.dynamic.iter().zip(needed).map(|(&(_, cap), need)| cap.max(need)).collect()));
        }
        Ok(Ok(scalars))
    }

    /// Read one scalar slot now (synchronises; for transfer points, not for stages).
    pub(crate) fn read_slot(&self, slot: Slot) -> Result<u64> {
        let mut word = [0u8; 8];
        self.dev.download_from(address(&self.scalars, &self.dev.stream) + 8 * slot.0 as u64, &mut word)?;
        Ok(u64::from_le_bytes(word))
    }

    /// Copy host bytes into a new device buffer.
    pub fn upload(&self, dtype: DType, bytes: &[u8]) -> Result<DeviceBuffer> {
        let b = self.alloc(dtype, bytes.len() / dtype.size())?;
        self.dev.upload_to(bytes, b.ptr(self.stream()))?;
        Ok(b)
    }

    /// A new buffer holding the first `len` elements of `src`.
    pub fn copy(&self, src: &DeviceBuffer, len: usize) -> Result<DeviceBuffer> {
        let dst = self.alloc(src.dtype, len)?;
        let bytes = len * src.dtype.size();
        if bytes > 0 {
            let s = self.stream();
            // SAFETY: both ranges lie in live buffers of at least `bytes` bytes.
            unsafe { cudarc::driver::result::memcpy_dtod_async(dst.ptr(s), src.ptr(s), bytes, s.cu_stream()) }
                .map_err(device_error)?;
        }
        Ok(dst)
    }

    /// Set every byte of a buffer to zero (enqueued).
    pub fn zero(&self, b: &DeviceBuffer) -> Result<()> {
        let s = self.stream();
        let bytes = b.len.capacity() * b.dtype.size();
        // SAFETY: the range is the buffer's own.
        unsafe { cudarc::driver::result::memset_d8_async(b.ptr(s), 0, bytes, s.cu_stream()) }.map_err(device_error)
    }

    /// Read one u64 element of a buffer (synchronises).
    pub fn read_u64(&self, b: &DeviceBuffer, index: usize) -> Result<u64> {
        let mut word = [0u8; 8];
        self.dev.download_from(b.ptr(self.stream()) + 8 * index as u64, &mut word)?;
        Ok(u64::from_le_bytes(word))
    }

    /// Copy the first `len` elements of a buffer into a new host [`Buffer`].
    pub fn download_buffer(&self, b: &DeviceBuffer, len: usize) -> Result<crate::element::Buffer> {
        let mut host = crate::element::Buffer::zeroed(b.dtype, len)?;
        self.dev.download_from(b.ptr(self.stream()), host.native_bytes_mut())?;
        Ok(host)
    }

    /// Copy the first `dst.len()` bytes of a buffer into `dst`.
    pub fn download_into(&self, b: &DeviceBuffer, dst: &mut [u8]) -> Result<()> {
        self.dev.download_from(b.ptr(self.stream()), dst)
    }

    /// [`DeviceRun::download_into`], returning the CRC-32C of the bytes, taken as they pass.
    pub(crate) fn download_checked(&self, b: &DeviceBuffer, dst: &mut [u8]) -> Result<u32> {
        self.dev.download_checked_from(b.ptr(self.stream()), dst)
    }

    /// Declare `host` a copy of the bytes `b` holds (which no kernel of this run writes).
    pub(crate) fn mirror(&mut self, b: &DeviceBuffer, host: &'a [u8]) {
        let at = b.ptr(self.stream());
        self.mirrors.push((at, host));
    }

    /// Copy the first `len` elements of a buffer to the host (from its mirror when it has one).
    pub fn download(&self, b: &DeviceBuffer, len: usize) -> Result<Vec<u8>> {
        let bytes = len * b.dtype.size();
        let at = b.ptr(self.stream());
        if let Some((_, host)) = self.mirrors.iter().find(|(m, host)| *m == at && host.len() >= bytes) {
            return Ok(host[..bytes].to_vec());
        }
        let mut out = crate::element::zeroed_vec(bytes);
        self.dev.download_from(at, &mut out)?;
        Ok(out)
    }
}

/// Threads per block of the simple element-wise kernels.
pub const THREADS: u32 = 256;

/// Thread blocks of a [`tile_loop_grid`] launch at most: a few per SM, so that kernels whose
/// tiles are mostly empty pay for a loop iteration per tile, not for a block launch per tile.
const TILE_LOOP_BLOCKS: u64 = 2048;

/// A launch of a kernel that loops over `tiles` tiles, a block at a time (`tile += gridDim.x`):
/// one block per tile up to [`TILE_LOOP_BLOCKS`] blocks.
pub fn tile_loop_grid(tiles: u64, threads: u64) -> cudarc::driver::LaunchConfig {
    grid(tiles.min(TILE_LOOP_BLOCKS) * threads, threads)
}

/// A one-dimensional launch of `items` work items, `per_block` per thread block.
pub fn grid(items: u64, per_block: u64) -> cudarc::driver::LaunchConfig {
    let blocks = items.div_ceil(per_block).clamp(1, u64::from(u32::MAX)) as u32;
    cudarc::driver::LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (per_block.min(1024) as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The places of `nblocks` variable-size blocks of a segment, as `nblocks + 1` u64 offsets
/// (the last is the total): `sizes_kernel` of `program`, taking (`segment`, `n`, `nblocks`,
/// `u32* sizes`) with a thread per block, writes each block's size, and a scan sums them.
/// For decoders whose block table would otherwise be walked on the host, per call.
pub fn block_offsets(
    run: &DeviceRun,
    program: &super::Program,
    sizes_kernel: &str,
    segment: &DeviceBuffer,
    n: u64,
    nblocks: u64,
) -> Result<DeviceBuffer> {
    use cudarc::driver::PushKernelArg;
    let count = nblocks as usize;
    let sizes = run.alloc(DType::U32, count)?;
    let partials = run.alloc(DType::U64, scan_partials_len(nblocks))?;
    let offsets = run.alloc(DType::U64, count + 1)?;
    let s = run.stream();
    // SAFETY: the kernel's argument list is the one documented above; `sizes` holds a u32
    // per block and the kernel reads the segment's block table only.
    unsafe {
        s.launch_builder(&run.kernel(program, sizes_kernel)?)
            .arg(&segment.ptr(s))
            .arg(&n)
            .arg(&nblocks)
            .arg(&sizes.ptr(s))
            .launch(grid(nblocks, 256))
            .map_err(device_error)?;
    }
    exclusive_scan(run, program, sizes.ptr(s), nblocks, partials.ptr(s), offsets.ptr(s))?;
    Ok(offsets)
}

/// Items per thread block of the three-phase scan (`SCAN_TILE` in common.cu).
const SCAN_TILE: u64 = 4096;

/// Scans of at most this many tiles run in one thread block (`fz_scan_small`): one launch
/// instead of three (a 1 MiB call's block-offset scan, 8192 items: 11.8 µs under ncu instead
/// of 3.7 + 3.3 + 7.0).
const SMALL_SCAN_TILES: u64 = 4;

/// Whether a scan of `n` items runs as `fz_scan_small` (else the three phases).
pub fn scan_in_one_block(n: u64) -> bool {
    scan_partials_len(n) as u64 <= SMALL_SCAN_TILES
}

/// The room a coder's output gets before its first run: half its input's bytes plus `fixed`
/// bytes of tables and headers, at most its `worst` case. An output larger than that (a
/// ratio below 2) grows to its exact size in a repeated run, so a compress holds its input
/// and about half of it rather than its input and the worst case (issue 12: peak device
/// memory ≤ 2 × (input + archive)).
pub fn first_guess(input_bytes: usize, fixed: usize, worst: usize) -> usize {
    fixed.saturating_add(input_bytes / 2).min(worst)
}

/// u64 partial sums [`exclusive_scan`] needs for `n` items.
pub fn scan_partials_len(n: u64) -> usize {
    n.div_ceil(SCAN_TILE).max(1) as usize
}

/// Exclusive scan of `n` u32 counts at `input` into `n + 1` u64 offsets at `out` (the last is
/// the total), with the scan kernels every program carries (common.cu). Deterministic: the
/// partial sums have a fixed shape.
pub fn exclusive_scan(
    run: &DeviceRun,
    program: &super::Program,
    input: u64,
    n: u64,
    partials: u64,
    out: u64,
) -> Result<()> {
    use cudarc::driver::PushKernelArg;
    let parts = scan_partials_len(n) as u64;
    let s = run.stream();
    if scan_in_one_block(n) {
        // SAFETY: as below; fz_scan_small writes the n + 1 offsets only.
        return unsafe {
            s.launch_builder(&run.kernel(program, "fz_scan_small")?)
                .arg(&input)
                .arg(&n)
                .arg(&out)
                .launch(grid(1024, 1024))
                .map(drop)
                .map_err(device_error)
        };
    }
    let (reduce, spread, apply) = (
        run.kernel(program, "fz_scan_reduce")?,
        run.kernel(program, "fz_scan_partials")?,
        run.kernel(program, "fz_scan_apply")?,
    );
    // SAFETY: argument lists match common.cu; the caller sized `partials` with
    // scan_partials_len(n) and `out` with n + 1 entries.
    unsafe {
        s.launch_builder(&reduce)
            .arg(&input)
            .arg(&n)
            .arg(&partials)
            .launch(grid(parts * 1024, 1024))
            .map_err(device_error)?;
        s.launch_builder(&spread).arg(&partials).arg(&parts).launch(grid(1024, 1024)).map_err(device_error)?;
        s.launch_builder(&apply)
            .arg(&input)
            .arg(&n)
            .arg(&partials)
            .arg(&out)
            .launch(grid(parts * 1024, 1024))
            .map_err(device_error)?;
    }
    Ok(())
}
