//! The Quantizer on the device (kernels in device.cu): value range, bound resolution, codes
//! and the outlier channel, byte for byte as cpu.rs writes them.

use super::channel::{Layout, Run};
use super::{cpu, Quantizer, Resolved};

mod fragment;
mod inline;
use crate::archive::ErrorMode;
use crate::backend::cuda::device::{
    exclusive_scan, grid, scan_partials_len, tile_loop_grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage,
    PendingRecord, Slot, THREADS,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::stage::ErrorBound;
use cudarc::driver::{DeviceRepr, PushKernelArg};

/// Bytes of `struct Params` in device.cu (static_assert there).
pub(crate) const PARAMS_BYTES: usize = 40;
/// Elements per outlier tile (`Q_TILE`) and threads per block of the list walks (`Q_THREADS`).
pub(crate) const TILE: u64 = 2048;
const WALK_THREADS: u64 = 256;
/// Thread blocks of the value-range pass at most (eight per SM of an H100), and elements per
/// block below that: a small input gets few partial ranges, so that `fz_resolve`'s one warp
/// reads a few words instead of 1056 (on a 1 MiB call, 10.5 → 3.5 µs under ncu).
const MINMAX_BLOCKS: u64 = 1056;
const MINMAX_SPAN: u64 = 4096;
/// Threads of `fz_resolve`'s one block (`RESOLVE_THREADS` in device.cu): partial ranges left
/// by a writer can be many (the Mask's bitmap pass leaves one per block, up to 16 385).
const RESOLVE_THREADS: u64 = 1024;

/// Thread blocks (and partial ranges) of the value-range pass over `n` elements.
pub(crate) fn minmax_blocks(n: u64) -> u32 {
    n.div_ceil(MINMAX_SPAN).clamp(1, MINMAX_BLOCKS) as u32
}

/// device.cu, one static so that a fused region includes it once.
static SOURCE: &str = include_str!("device.cu");

/// The `#define` that selects the element type of device.cu.
fn real_define(real: DType) -> String {
    format!("#define REAL_F64 {}\n", u8::from(real == DType::F64))
}

/// The quantizer's standalone program for one element type.
pub(crate) fn program(real: DType) -> Program {
    Program::new(SOURCE, real_define(real))
}

/// First guess at the outlier channel's size: a sixteenth of the input (real fields have far
/// fewer outliers); a run that needs more is repeated with the exact size.
pub(crate) fn channel_guess(n: usize, value_bytes: usize) -> usize {
    (n / 16 * (value_bytes + 1)).max(4096)
}

/// The bound resolution every mode starts with: the finite value range when the bound is
/// relative (from the partial ranges `x`'s writer left, else by a pass over `x`), then
/// `Params` (abs bound, step, reciprocal, f32 margins) on the device.
pub(crate) fn resolve(run: &DeviceRun, program: &Program, x: &DeviceBuffer, bound: ErrorBound) -> Result<DeviceBuffer> {
    let n64 = x.known_len()? as u64;
    let params = run.alloc(DType::U8, PARAMS_BYTES)?;
    let s = run.stream();
    let p = |b: &DeviceBuffer| b.ptr(s);
    let relative = u32::from(bound.mode == ErrorMode::Rel);
    // The partial ranges: `parts` minima at `pmin`, as many maxima at `pmax`.
    let mut own_parts = None;
    let (pmin, pmax, parts) = match x.finite_range() {
        _ if relative == 0 => (0, 0, 0),
        Some(r) => (p(&r.parts), p(&r.parts) + 8 * u64::from(r.count), r.count),
        None => {
            let blocks = minmax_blocks(n64);
            let parts = own_parts.insert(run.alloc(DType::F64, 2 * blocks as usize)?);
            let (pmin, pmax) = (p(parts), p(parts) + 8 * u64::from(blocks));
            // SAFETY: argument list matches device.cu; `x` holds n64 elements, the partial
            // ranges `blocks` each.
            unsafe {
                s.launch_builder(&run.kernel(program, "fz_minmax")?)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&pmin)
                    .arg(&pmax)
                    .launch(grid(u64::from(blocks) * 256, 256))
                    .map_err(device_error)?;
            }
            (pmin, pmax, blocks)
        }
    };
    // SAFETY: argument list matches device.cu; `parts` partial ranges at pmin and pmax (none
    // read for an absolute bound), `params` one Params.
    unsafe {
        s.launch_builder(&run.kernel(program, "fz_resolve")?)
            .arg(&pmin)
            .arg(&pmax)
            .arg(&parts)
            .arg(&relative)
            .arg(&bound.value)
            .arg(&p(&params))
            .launch(grid(RESOLVE_THREADS, RESOLVE_THREADS))
            .map_err(device_error)?;
    }
    drop(own_parts);
    Ok(params)
}

/// A forward between the codes and the outlier channel: the resolved parameters and each
/// outlier tile's statistics (`tile_next` only for indexed outliers).
pub(super) struct Encoding {
    pub params: DeviceBuffer,
    pub tile_count: DeviceBuffer,
    pub tile_next: Option<DeviceBuffer>,
    pub n: usize,
    pub ntiles: u64,
}

impl Quantizer {
    /// Resolve the bound on `x` and allocate the tile statistics.
    pub(super) fn begin(&self, run: &DeviceRun, x: &DeviceBuffer, bound: ErrorBound) -> Result<Encoding> {
        let n = x.known_len()?;
        let ntiles = (n as u64).div_ceil(TILE).max(1);
        let params = resolve(run, &program(self.input), x, bound)?;
        let tile_count = run.alloc(DType::U32, ntiles as usize)?;
        let tile_next = if self.inline_outliers { None } else { Some(run.alloc(DType::U64, ntiles as usize)?) };
        Ok(Encoding { params, tile_count, tile_next, n, ntiles })
    }

    /// `q_encode` on the input at device address `x`: the codes into `codes` (n elements) and
    /// the tile statistics.
    pub(super) fn encode(&self, run: &DeviceRun, x: u64, enc: &Encoding, codes: u64) -> Result<()> {
        let encode = run.kernel(&program(self.input), "q_encode")?;
        let tile_next = enc.tile_next.as_ref().ok_or_else(|| Error::Device("no tile_next".into()))?;
        let s = run.stream();
        // SAFETY: argument list matches device.cu; `x` and `codes` hold n elements, the tile
        // arrays ntiles.
        unsafe {
            s.launch_builder(&encode)
                .arg(&x)
                .arg(&(enc.n as u64))
                .arg(&enc.params.ptr(s))
                .arg(&codes)
                .arg(&enc.tile_count.ptr(s))
                .arg(&tile_next.ptr(s))
                .launch(grid(enc.ntiles * 256, 256))
                .map_err(device_error)?;
        }
        Ok(())
    }

    /// The outlier channel and the record, after the codes: the channel kernels read the
    /// input (at device address `x`) again, only in tiles that have outliers.
    pub(super) fn channel(
        &self,
        run: &mut DeviceRun,
        x: u64,
        words: Option<u64>,
        enc: Encoding,
        bound: ErrorBound,
    ) -> Result<(DeviceBuffer, PendingRecord)> {
        if self.inline_outliers {
            return self.inline_channel(run, x, words, enc, bound);
        }
        let program = program(self.input);
        let Encoding { params, tile_count, tile_next, n, ntiles } = enc;
        let tile_next = tile_next.ok_or_else(|| Error::Device("indexed outliers without tile_next".into()))?;
        let (outliers_slot, outliers_at) = run.slot()?;
        let s = run.stream().clone();
        // SAFETY: argument list matches device.cu; the tile arrays hold ntiles entries.
        unsafe {
            s.launch_builder(&run.kernel(&program, "q_tile_starts")?)
                .arg(&tile_next.ptr(&s))
                .arg(&tile_count.ptr(&s))
                .arg(&ntiles)
                .arg(&outliers_at)
                .launch(grid(1024, 1024))
                .map_err(device_error)?;
        }
        let args = ListArgs { x, params: params.ptr(&s), entries: outliers_at, ..ListArgs::default() };
        let list = OutlierList { prefix: "q", args, tile_count, tile_next, n, ntiles };
        let guess = channel_guess(n, self.input.size());
        let (channel, layout_slot, lists) = write_lists(run, &program, vec![list], guess)?;
        let (abs_slot, abs_at) = run.slot()?;
        let (step_slot, step_at) = run.slot()?;
        // SAFETY: argument list matches device.cu; every address is a live u64.
        unsafe {
            s.launch_builder(&run.kernel(&program, "q_export")?)
                .arg(&params.ptr(&s))
                .arg(&abs_at)
                .arg(&step_at)
                .launch(grid(1, 1))
                .map_err(device_error)?;
        }
        drop(lists);
        let stage = self.clone();
        let record: PendingRecord = Box::new(move |sc| {
            let resolved = Resolved {
                abs_bound: sc.f64(abs_slot),
                step: sc.f64(step_slot),
                num_elements: n as u64,
                num_outliers: sc.u64(outliers_slot),
                layout: layout_of(sc.u64(layout_slot)),
            };
            stage.record(bound, None, &resolved)
        });
        Ok((channel, record))
    }
}

/// The layout `ch_choose` wrote (`CH_RUNS` = 1).
pub(crate) fn layout_of(code: u64) -> Layout {
    if code == 1 {
        Layout::Runs
    } else {
        Layout::Indexed
    }
}

/// `struct ListArgs` of device.cu, passed by value: what a list's source reads (the
/// Quantizer's uses `x` and `params`; LorenzoQuant's also the `unfit` bits, the kept deltas
/// in rank order (`unfit_base`: the scan of the unfit bits per group of words; room for
/// `deltas_capacity`), the list and the code mapping).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ListArgs {
    pub x: u64,
    pub params: u64,
    pub unfit: u64,
    pub unfit_base: u64,
    pub deltas: u64,
    pub deltas_capacity: u64,
    /// The list's entry count (written by `q_tile_starts`): kernels skip a list without entries.
    pub entries: u64,
    pub list: u32,
    pub mapping: u32,
    pub radius: u32,
    pub pad: u32,
}

const _: () = assert!(std::mem::size_of::<ListArgs>() == 72);
// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for ListArgs {}

/// One outlier list on the device (device.cu, "Outlier lists"): the kernels
/// `{prefix}_tile_break` and `{prefix}_list_walk` read it through `args`; `tile_count` and
/// `tile_next` come from the stage's count pass, `tile_next` already max-scanned by
/// `q_tile_starts`.
pub(crate) struct OutlierList {
    pub prefix: &'static str,
    pub args: ListArgs,
    pub tile_count: DeviceBuffer,
    pub tile_next: DeviceBuffer,
    pub n: usize,
    pub ntiles: u64,
}

/// A sized list: its run breaks and, per layout (indexed, runs), the tile byte counts and
/// offsets (the last offset is the list's total).
struct SizedList {
    list: OutlierList,
    tile_break: DeviceBuffer,
    bytes: [DeviceBuffer; 2],
    offsets: [DeviceBuffer; 2],
}

/// What must stay allocated until the channel kernels ran (stream-ordered frees would let a
/// later allocation reuse it first).
pub(crate) struct Lists {
    _held: Vec<SizedList>,
}

impl SizedList {
    /// `{prefix}_list_walk`: write = 0 sizes both layouts, 1 writes the chosen one at `bases`.
    fn walk(&self, run: &DeviceRun, program: &Program, target: [u64; 4], bases: [u64; 2], write: u32) -> Result<()> {
        let s = run.stream();
        let walk = run.kernel(program, &format!("{}_list_walk", self.list.prefix))?;
        let p = |b: &DeviceBuffer| b.ptr(s);
        let l = &self.list;
        let [layout_at, channel_len_at, out, capacity] = target;
        let n64 = l.n as u64;
        let (count, next, brk) = (p(&l.tile_count), p(&l.tile_next), p(&self.tile_break));
        let (bytes, offsets) = (self.bytes.each_ref().map(p), self.offsets.each_ref().map(p));
        // SAFETY: argument list matches device.cu; the tile arrays hold ntiles (+ 1) entries,
        // and the kernel writes nothing past `capacity` bytes of `out`.
        unsafe {
            s.launch_builder(&walk)
                .arg(&l.args)
                .arg(&n64)
                .arg(&count)
                .arg(&next)
                .arg(&brk)
                .arg(&l.ntiles)
                .arg(&bytes[0])
                .arg(&bytes[1])
                .arg(&layout_at)
                .arg(&offsets[0])
                .arg(&offsets[1])
                .arg(&bases[0])
                .arg(&bases[1])
                .arg(&channel_len_at)
                .arg(&out)
                .arg(&capacity)
                .arg(&write)
                .launch(tile_loop_grid(l.ntiles, WALK_THREADS))
                .map_err(device_error)?;
        }
        Ok(())
    }

    /// Device address of the list's total bytes in `layout` (0 indexed, 1 runs).
    fn total_at(&self, s: &std::sync::Arc<cudarc::driver::CudaStream>, layout: usize) -> u64 {
        self.offsets[layout].ptr(s) + 8 * self.list.ntiles
    }
}

/// Write `lists` back to back as one outlier channel (a capacity of `guess` bytes first) in
/// the smaller layout, the indexed one on a tie (channel.rs `smaller`). Returns the channel,
/// the slot of the chosen layout, and what must live until the kernels ran.
pub(crate) fn write_lists(
    run: &mut DeviceRun,
    program: &Program,
    lists: Vec<OutlierList>,
    guess: usize,
) -> Result<(DeviceBuffer, Slot, Lists)> {
    let s = run.stream().clone();
    let p = |b: &DeviceBuffer| b.ptr(&s);
    let break_scan = run.kernel(program, "ch_break_scan")?;
    let mut sized = Vec::new();
    for list in lists {
        let nt = list.ntiles as usize;
        let tile_break = run.alloc(DType::U64, nt)?;
        let bytes = [run.alloc(DType::U32, nt)?, run.alloc(DType::U32, nt)?];
        let offsets = [run.alloc(DType::U64, nt + 1)?, run.alloc(DType::U64, nt + 1)?];
        let partials = run.alloc(DType::U64, scan_partials_len(list.ntiles))?;
        let breaks = run.kernel(program, &format!("{}_tile_break", list.prefix))?;
        let n64 = list.n as u64;
        // SAFETY: argument lists match device.cu; the tile arrays hold ntiles entries.
        unsafe {
            s.launch_builder(&breaks)
                .arg(&list.args)
                .arg(&n64)
                .arg(&list.ntiles)
                .arg(&p(&list.tile_count))
                .arg(&p(&tile_break))
                .launch(tile_loop_grid(list.ntiles, WALK_THREADS))
                .map_err(device_error)?;
            s.launch_builder(&break_scan)
                .arg(&p(&tile_break))
                .arg(&list.ntiles)
                .arg(&n64)
                .arg(&list.args.entries)
                .launch(grid(1024, 1024))
                .map_err(device_error)?;
        }
        let l = SizedList { list, tile_break, bytes, offsets };
        l.walk(run, program, [0; 4], [0; 2], 0)?;
        for k in 0..2 {
            exclusive_scan(run, program, p(&l.bytes[k]), l.list.ntiles, p(&partials), p(&l.offsets[k]))?;
        }
        sized.push(l);
    }
    let (channel, channel_len) = run.alloc_dynamic(DType::U8, guess)?;
    let (layout_slot, layout_at) = run.slot()?;
    let totals = |k: usize, layout: usize| sized.get(k).map_or(0, |l| l.total_at(&s, layout));
    // SAFETY: argument list matches device.cu; the totals are live u64s (or null).
    unsafe {
        s.launch_builder(&run.kernel(program, "ch_choose")?)
            .arg(&totals(0, 0))
            .arg(&totals(0, 1))
            .arg(&totals(1, 0))
            .arg(&totals(1, 1))
            .arg(&layout_at)
            .arg(&channel_len)
            .launch(grid(1, 1))
            .map_err(device_error)?;
    }
    let target = [layout_at, channel_len, p(&channel), channel.len.capacity() as u64];
    for (k, l) in sized.iter().enumerate() {
        // A list starts after the ones before it (LorenzoQuant: the values after the deltas).
        let bases = match k {
            0 => [0, 0],
            _ => [sized[k - 1].total_at(&s, 0), sized[k - 1].total_at(&s, 1)],
        };
        l.walk(run, program, target, bases, 1)?;
    }
    Ok((channel, layout_slot, Lists { _held: sized }))
}

impl Quantizer {
    /// The outlier runs of `channel` on the device (`fz_scatter_runs`' triples) and their
    /// count: the channel is small, so the CPU's own validating parser reads it.
    fn outlier_runs(&self, run: &DeviceRun, channel: &DeviceBuffer, n: usize) -> Result<(DeviceBuffer, u64)> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
        let bytes = run.download(channel, channel.known_len()?)?;
        let (triples, count) = parsed_runs(self.input, &bytes, r.num_outliers, n, r.layout)?;
        Ok((run.upload(DType::U64, &triples)?, count))
    }

    /// Put the outlier runs back into `out` (after its codes were reconstructed).
    fn scatter_runs(&self, run: &DeviceRun, runs: &DeviceBuffer, count: u64, out: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let scatter = run.kernel(&program(self.input), "fz_scatter_runs")?;
        let s = run.stream();
        // SAFETY: argument list matches device.cu; every run was checked against the output's
        // length by the parser.
        unsafe {
            s.launch_builder(&scatter)
                .arg(&runs.ptr(s))
                .arg(&count)
                .arg(&out)
                .launch(grid(count.min(1 << 20) * 32, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        Ok(())
    }
}

/// The outlier channel of `real` values parsed and checked on the host (channel.rs), as the
/// (start, len, value bits) u64 triples `fz_scatter_runs` takes, and the number of runs.
pub(crate) fn parsed_runs(real: DType, bytes: &[u8], count: u64, n: usize, layout: Layout) -> Result<(Vec<u8>, u64)> {
    let runs: Vec<Run<u64>> = if real == DType::F32 {
        let runs = cpu::parse_outliers::<f32>(bytes, count, n, layout)?;
        runs.into_iter().map(|r| Run { start: r.start, len: r.len, value: u64::from(r.value.to_bits()) }).collect()
    } else {
        let runs = cpu::parse_outliers::<f64>(bytes, count, n, layout)?;
        runs.into_iter().map(|r| Run { start: r.start, len: r.len, value: r.value.to_bits() }).collect()
    };
    Ok((run_triples(&runs), runs.len() as u64))
}

/// Runs as little-endian u64 triples (start, len, value).
pub(crate) fn run_triples(runs: &[Run<u64>]) -> Vec<u8> {
    runs.iter().flat_map(|r| [r.start as u64, r.len as u64, r.value]).flat_map(u64::to_le_bytes).collect()
}

impl DeviceStage for Quantizer {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let bound = self.bound.ok_or_else(|| Error::InvalidArgument("no error bound set".into()))?;
        let [x] = inputs else { return Err(Error::Pipeline("Quantizer takes one input".into())) };
        let enc = self.begin(run, x, bound)?;
        let program = program(self.input);
        let s = run.stream().clone();
        let p = |b: &DeviceBuffer| b.ptr(&s);
        let n64 = enc.n as u64;
        let tile_grid = grid(enc.ntiles * 256, 256);
        let codes = if self.inline_outliers {
            let words = run.alloc(DType::U32, enc.n)?;
            let encode = run.kernel(&program, "qi_encode")?;
            // SAFETY: argument list matches device.cu; `words` holds n elements, the tile
            // counts ntiles.
            unsafe {
                s.launch_builder(&encode)
                    .arg(&p(x))
                    .arg(&n64)
                    .arg(&p(&enc.params))
                    .arg(&p(&words))
                    .arg(&p(&enc.tile_count))
                    .launch(tile_grid)
                    .map_err(device_error)?;
            }
            words
        } else {
            let codes = run.alloc(DType::I32, enc.n)?;
            self.encode(run, p(x), &enc, p(&codes))?;
            codes
        };
        let words = self.inline_outliers.then(|| p(&codes));
        let (channel, record) = self.channel(run, p(x), words, enc, bound)?;
        Ok(DeviceForwarded { outputs: vec![codes, channel], record })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let r = self.resolved.ok_or_else(|| Error::Pipeline("Quantizer inverse needs a decoded record".into()))?;
        let [codes, channel] = outputs else {
            return Err(Error::Pipeline("Quantizer inverse needs codes and outliers".into()));
        };
        let n = codes.known_len()?;
        if n as u64 != r.num_elements {
            return Err(crate::error::corrupt!("Quantizer: {n} codes for {} elements", r.num_elements));
        }
        if self.inline_outliers {
            return self.inverse_inline(run, codes, channel, r);
        }
        let (runs, count) = self.outlier_runs(run, channel, n)?;
        let decode = run.kernel(&program(self.input), "q_decode")?;
        let out = run.alloc(self.input, n)?;
        let s = run.stream().clone();
        let n64 = n as u64;
        // SAFETY: argument list matches device.cu; `codes` and `out` hold n elements.
        unsafe {
            s.launch_builder(&decode)
                .arg(&codes.ptr(&s))
                .arg(&n64)
                .arg(&r.step)
                .arg(&out.ptr(&s))
                .launch(grid(n64, u64::from(THREADS)))
                .map_err(device_error)?;
        }
        self.scatter_runs(run, &runs, count, out.ptr(&s))?;
        Ok(vec![out])
    }
}
