//! Lorenzo on the device (kernels in device.cu): block and N-D deltas and their prefix sums.

use super::Lorenzo;
use crate::backend::cuda::device::{grid, DeviceBuffer, DeviceForwarded, DeviceRun, DeviceStage, THREADS};
use crate::backend::cuda::region::{
    Code, ForwardPart, Fragment, Geometry, InversePart, Region, RegionArgs, StoredInverse,
};
use crate::backend::cuda::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::PushKernelArg;

/// Warps per thread block of the prefix kernels (`LZ_WARPS`).
const WARPS: u64 = 4;
/// Elements of a contiguous line per warp of the three-pass scan (`LZ_CHUNK`).
const CHUNK: u64 = 8192;
/// Elements of a strided line per thread (`LZ_COLUMN`).
const COLUMN: u64 = 256;
/// The longest row a block of the plane scan holds (`LZ_PLANE_ROW`), the most warps a block
/// has (`LZ_PLANE_WARPS`) and the most columns a thread takes (`LZ_PLANE_ROUNDS` · 32).
const PLANE_ROW: u64 = 6144;
const PLANE_WARPS: u64 = 16;
const PLANE_THREAD_COLUMNS: u64 = 12 * 32;
/// Narrower rows keep the axis-at-a-time scans: a plane block of one warp would hold too few
/// loads in flight (about a row a block, 32 blocks an SM).
const PLANE_MIN_ROW: u64 = 256;

static SOURCE: &str = include_str!("device.cu");

pub(crate) fn program() -> Program {
    Program::new(SOURCE, String::new())
}

impl DeviceStage for Lorenzo {
    fn forward(&self, run: &mut DeviceRun, inputs: &[&DeviceBuffer]) -> Result<DeviceForwarded> {
        let [q] = inputs else { return Err(Error::Pipeline("Lorenzo takes one input".into())) };
        if let Some(alone) = Region::alone(self, false) {
            return alone.forward_alone(run, q, DType::I32);
        }
        let n = q.known_len()?;
        let g = self.grid_for(&run.shape, n)?;
        let out = run.alloc(DType::I32, n)?;
        let s = run.stream().clone();
        let (qp, op, n64) = (q.ptr(&s), out.ptr(&s), n as u64);
        let launch = grid(n64, u64::from(THREADS));
        // SAFETY: argument lists match device.cu; both buffers hold n elements.
        unsafe {
            if self.block_size > 0 {
                let f = run.kernel(&program(), "lz_block_delta")?;
                let block = u64::from(self.block_size);
                s.launch_builder(&f).arg(&qp).arg(&n64).arg(&block).arg(&op).launch(launch).map_err(device_error)?;
            } else {
                let f = run.kernel(&program(), "lz_nd_delta")?;
                let [nz, ny, nx] = g.dims.map(|d| d as u64);
                s.launch_builder(&f)
                    .arg(&qp)
                    .arg(&nz)
                    .arg(&ny)
                    .arg(&nx)
                    .arg(&op)
                    .launch(launch)
                    .map_err(device_error)?;
            }
        }
        let record = self.record(g);
        Ok(DeviceForwarded { outputs: vec![out], record: Box::new(move |_| Ok(record)) })
    }

    fn inverse(&self, run: &mut DeviceRun, outputs: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>> {
        let (g, d, n) = self.deltas(outputs)?;
        if let Some(alone) = Region::alone(self, true) {
            return alone.inverse_alone(run, outputs, DType::I32);
        }
        if self.block_size == 0 {
            let grid = nd_prefix(run, d, g.dims.map(|d| d as u64), None)?;
            return Ok(vec![grid]);
        }
        // Deltas nothing else reads (a decode region's output) take the sums in place; others'
        // are copied.
        let out = if run.may_consume(d) { d.share() } else { run.copy(d, n)? };
        let s = run.stream().clone();
        let op = out.ptr(&s);
        let f = run.kernel(&program(), "lz_block_prefix")?;
        let (n64, block) = (n as u64, u64::from(self.block_size));
        let blocks = n64.div_ceil(block);
        // SAFETY: argument list matches device.cu; every block lies inside the n elements.
        unsafe {
            s.launch_builder(&f)
                .arg(&op)
                .arg(&n64)
                .arg(&block)
                .launch(grid(blocks * 32, WARPS * 32))
                .map_err(device_error)?;
        }
        Ok(vec![out])
    }
}

/// Block mode is the chunked Difference of i32 words with no map (cpu.rs: the same wrapping
/// delta, restarting every block), so it joins a region through the Difference's tile
/// functions. N-D mode's forward reads neighbours across the grid: a gatherer that starts a
/// region. Its inverse over a line is one prefix sum in stream order, which a region runs
/// tile by tile with a look-back for the carry; over a 2-D or 3-D grid (sums along every
/// axis) it joins no region.
impl Fragment for Lorenzo {
    fn sources(&self) -> Vec<&'static str> {
        if self.block_size == 0 {
            return vec![SOURCE];
        }
        vec![crate::stages::words::device::SOURCE, crate::stages::difference::device::SOURCE]
    }

    fn geometry(&self) -> Option<Geometry> {
        let granule = if self.block_size == 0 { 4 } else { 4 * self.block_size as usize };
        Some(Geometry { in_width: 4, out_width: 4, same_count: true, granule, coder: false })
    }

    fn gathers(&self) -> bool {
        self.block_size == 0
    }

    fn inverse_fuses(&self) -> bool {
        self.block_size > 0 || self.grid.is_some_and(|g| g.dims[..2] == [1, 1])
    }

    fn inverse_scatters(&self) -> bool {
        false
    }

    fn inverse_stores(&self) -> bool {
        self.block_size == 0 && self.grid.is_some() && !self.inverse_fuses()
    }

    fn inverse_stored(
        &self,
        run: &mut DeviceRun,
        outputs: &[&DeviceBuffer],
        stored: &StoredInverse,
    ) -> Result<DeviceBuffer> {
        let (g, d, n) = self.deltas(outputs)?;
        let out = stored.output(run, n)?;
        nd_prefix(run, d, g.dims.map(|d| d as u64), Some((stored, &out)))?;
        Ok(out)
    }

    fn inverse_carry_code(&self) -> Option<Code> {
        (self.block_size == 0).then(|| "lz_region_add_carry((u32*)$out, $count, $carry)".into())
    }

    fn forward_code(&self) -> Code {
        if self.block_size == 0 {
            return "lz_region_nd_forward(fz_elements<i32>($global_in), (u32*)$out, (u32*)$spare, $first, $count, $0, $1, $2)".into();
        }
        format!("diff_tile_forward($in, $out, $bytes, 32u, {}u, 0u)", self.block_size)
    }

    fn inverse_code(&self) -> Code {
        if self.block_size == 0 {
            return "lz_region_line_sums((const u32*)$in, (u32*)$out, $count, (u32*)$scratch)".into();
        }
        format!("diff_tile_inverse($in, $out, $bytes, 32u, {}u, 0u, $scratch)", self.block_size)
    }

    fn forward(&self, run: &mut DeviceRun, _input: Option<&DeviceBuffer>, n: usize) -> Result<ForwardPart> {
        let g = self.grid_for(&run.shape, n)?;
        Ok(ForwardPart::with_args(g.dims.map(|d| d as u64).to_vec(), self.record(g)))
    }

    fn inverse(&self, _run: &mut DeviceRun, _outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart> {
        let g = self.grid.ok_or_else(|| Error::Pipeline("Lorenzo inverse needs a decoded record".into()))?;
        // A record's grid fits a usize; its bytes need not (a corrupt one must not wrap).
        let bytes = g.len().checked_mul(4).ok_or_else(|| corrupt!("Lorenzo grid {:?}", g.dims))?;
        Ok(InversePart::Transform { args: Vec::new(), input_bytes: Some(bytes), finish: Box::new(|_, _| Ok(())) })
    }
}

impl Lorenzo {
    /// An inverse's deltas: the decoded grid, the one output buffer and its length, which must
    /// be the grid's.
    fn deltas<'b>(&self, outputs: &[&'b DeviceBuffer]) -> Result<(crate::shape::Grid, &'b DeviceBuffer, usize)> {
        let g = self.grid.ok_or_else(|| Error::Pipeline("Lorenzo inverse needs a decoded record".into()))?;
        let [d] = outputs else { return Err(Error::Pipeline("Lorenzo inverse takes one buffer".into())) };
        let n = d.known_len()?;
        if n != g.len() {
            return Err(corrupt!("Lorenzo: {n} elements for grid {:?}", g.dims));
        }
        Ok((g, d, n))
    }
}

/// Where the last pass of the N-D sums puts each value: into the i32 grid at an address (in
/// place), or through the stage stored in it into that stage's output.
#[derive(Clone, Copy)]
enum Sink<'a, 'f> {
    Grid(u64),
    Stored(&'a StoredInverse<'f>, &'a DeviceBuffer),
}

/// The N-D inverse of the deltas `d` over grid `[nz, ny, nx]` (not a line: a region takes
/// those): the prefix sums along every axis into an i32 grid, which it returns, or with
/// `stored`, its last pass storing through that stage into its output (the grid returned is
/// then scratch, or `d` itself). Deltas nothing else reads take the sums in place.
fn nd_prefix(
    run: &mut DeviceRun,
    d: &DeviceBuffer,
    [nz, ny, nx]: [u64; 3],
    stored: Option<(&StoredInverse, &DeviceBuffer)>,
) -> Result<DeviceBuffer> {
    let n = (nz * ny * nx) as usize;
    let s = run.stream().clone();
    // (lines, inner, outer stride, length, stride) of the y and z axes.
    let (y_axis, z_axis) = ([nz * nx, nx, ny * nx, ny, nx], [ny * nx, ny * nx, 0, nz, ny * nx]);
    if nz > 0 && ny > 1 && (PLANE_MIN_ROW..=PLANE_ROW).contains(&nx) {
        // The band sums read the deltas and write elsewhere: a single plane's go straight
        // to the stored stage.
        if let (1, Some((st, out))) = (nz, stored) {
            plane_prefix(run, d.ptr(&s), Sink::Stored(st, out), [nz, ny, nx])?;
            return Ok(d.share());
        }
        let grid = if run.may_consume(d) { d.share() } else { run.alloc(DType::I32, n)? };
        plane_prefix(run, d.ptr(&s), Sink::Grid(grid.ptr(&s)), [nz, ny, nx])?;
        strided_prefix(run, grid.ptr(&s), z_axis, stored)?;
        return Ok(grid);
    }
    // The axis-at-a-time sums work in place, so others' deltas are copied.
    let grid = if run.may_consume(d) { d.share() } else { run.copy(d, n)? };
    let gp = grid.ptr(&s);
    contiguous_prefix(run, gp, nz * ny, nx)?;
    if nz == 1 {
        strided_prefix(run, gp, y_axis, stored)?;
    } else {
        strided_prefix(run, gp, y_axis, None)?;
        strided_prefix(run, gp, z_axis, stored)?;
    }
    Ok(grid)
}

/// Inclusive prefix sums along x of `lines` contiguous lines of `len` elements at `d`: one warp a
/// line when lines are short, else three passes over `CHUNK`-element pieces (device.cu).
fn contiguous_prefix(run: &DeviceRun, d: u64, lines: u64, len: u64) -> Result<()> {
    let s = run.stream().clone();
    let (inner, outer_stride, inner_stride) = (1u64, len, 0u64);
    // SAFETY (each launch): argument lists match device.cu; every piece lies inside its line.
    if len <= CHUNK {
        let f = run.kernel(&program(), "lz_axis_prefix")?;
        let stride = 1u64;
        unsafe {
            s.launch_builder(&f)
                .arg(&d)
                .arg(&lines)
                .arg(&inner)
                .arg(&outer_stride)
                .arg(&inner_stride)
                .arg(&len)
                .arg(&stride)
                .launch(grid(lines * 32, WARPS * 32))
                .map_err(device_error)?;
        }
        return Ok(());
    }
    let chunks = len.div_ceil(CHUNK);
    let sums = run.alloc(DType::U32, (lines * chunks) as usize)?;
    let sp = sums.ptr(&s);
    let (f_sums, f_carries, f_prefix) = (
        run.kernel(&program(), "lz_chunk_sums")?,
        run.kernel(&program(), "lz_chunk_carries")?,
        run.kernel(&program(), "lz_chunk_prefix")?,
    );
    // Passes 1 and 3 take the same arguments: a warp per piece.
    let pieces = |f| unsafe {
        s.launch_builder(f)
            .arg(&d)
            .arg(&lines)
            .arg(&inner)
            .arg(&outer_stride)
            .arg(&inner_stride)
            .arg(&len)
            .arg(&chunks)
            .arg(&sp)
            .launch(grid(lines * chunks * 32, WARPS * 32))
            .map(|_| ())
            .map_err(device_error)
    };
    pieces(&f_sums)?;
    unsafe {
        s.launch_builder(&f_carries)
            .arg(&sp)
            .arg(&lines)
            .arg(&chunks)
            .launch(grid(lines * 32, WARPS * 32))
            .map_err(device_error)?;
    }
    pieces(&f_prefix)
}

/// Inclusive prefix sums along a strided axis (`[lines, inner, outer_stride, len, stride]`:
/// line l starts at (l / inner) · outer_stride + l % inner): a thread walks `COLUMN` elements of
/// one line, a warp 32 adjacent lines; long lines take three passes (device.cu).
fn strided_prefix(
    run: &DeviceRun,
    d: u64,
    axis: [u64; 5],
    stored: Option<(&StoredInverse, &DeviceBuffer)>,
) -> Result<()> {
    let [lines, inner, outer_stride, len, stride] = axis;
    // A line of one element is its own sum: only a stored stage still has work.
    if len == 0 || (len == 1 && stored.is_none()) {
        return Ok(());
    }
    let s = run.stream().clone();
    let pieces = len.div_ceil(COLUMN);
    let sums = run.alloc(DType::U32, if pieces > 1 { (lines * pieces) as usize } else { 1 })?;
    let sp = sums.ptr(&s);
    let threads = u64::from(THREADS);
    // SAFETY (each launch): argument lists match device.cu; every piece lies inside its line.
    // Passes 1 and 3 take the same arguments: a thread per piece.
    let (f_sums, f_carries, f_prefix) = (
        run.kernel(&program(), "lz_column_sums")?,
        run.kernel(&program(), "lz_column_carries")?,
        run.kernel(&program(), "lz_column_prefix")?,
    );
    // The stored kernel takes the stage's values and its output first (StoredInverse::output:
    // the grid's elements).
    let pieces_pass = |f, stored: Option<(&RegionArgs, u64)>| unsafe {
        let mut launch = s.launch_builder(f);
        if let Some((values, out)) = &stored {
            launch.arg(*values).arg(out);
        }
        launch
            .arg(&d)
            .arg(&lines)
            .arg(&inner)
            .arg(&outer_stride)
            .arg(&len)
            .arg(&stride)
            .arg(&pieces)
            .arg(&sp)
            .launch(grid(lines * pieces, threads))
            .map(|_| ())
            .map_err(device_error)
    };
    if pieces > 1 {
        pieces_pass(&f_sums, None)?;
        unsafe {
            s.launch_builder(&f_carries)
                .arg(&sp)
                .arg(&lines)
                .arg(&pieces)
                .launch(grid(lines, threads))
                .map_err(device_error)?;
        }
    }
    match stored {
        None => pieces_pass(&f_prefix, None),
        Some((st, out)) => {
            let f = run.kernel(&column_program(st), "lz_column_prefix_stored")?;
            pieces_pass(&f, Some((&st.values()?, out.ptr(&s))))
        }
    }
}

/// The last strided pass storing through `stored` (lz_column_prefix_run in device.cu).
pub(crate) fn column_program(stored: &StoredInverse) -> Program {
    let params =
        "const i32* d, u64 lines, u64 inner, u64 outer_stride, u64 len, u64 stride, u64 pieces, const u32* carries";
    let call = "lz_column_prefix_run(d, store, lines, inner, outer_stride, len, stride, pieces, carries)";
    stored.program(&[SOURCE], "lz_column_prefix_stored", "", params, call)
}

/// The band pass storing through `stored` (lz_band_prefix_run in device.cu).
pub(crate) fn band_program(stored: &StoredInverse) -> Program {
    let params = "const i32* in, u64 ny, u64 nx, u64 band, u64 plane_bands, const u32* carries";
    let call = "lz_band_prefix_run(in, store, ny, nx, band, plane_bands, carries)";
    stored.program(&[SOURCE], "lz_band_prefix_stored", "LZ_BAND_PREFIX_BOUNDS", params, call)
}

/// Rows of a band of the plane scan over `nz` planes of `ny` rows: 8–32, about a thousand
/// blocks where the planes have the rows (shorter bands would grow the sums, 4 words of
/// traffic per band and column; fewer would idle SMs).
fn band_rows(nz: u64, ny: u64) -> u64 {
    (nz * ny).div_ceil(1024).clamp(8, 32)
}

/// The x and y prefix sums of each of `nz` planes of `ny` rows of `nx` ≤ `PLANE_ROW` elements,
/// from the deltas at `d` into `sink` (a grid that may be `d`), in bands of rows (device.cu):
/// the bands' column sums, their carries down each plane, then a block a band, row by row.
fn plane_prefix(run: &DeviceRun, d: u64, sink: Sink, [nz, ny, nx]: [u64; 3]) -> Result<()> {
    let band = band_rows(nz, ny);
    let plane_bands = ny.div_ceil(band);
    let bands = nz * plane_bands;
    let column_groups = nx.div_ceil(32);
    // As few warps as hold a row: more blocks, so more rows in flight, on each SM.
    let threads = 32 * nx.div_ceil(PLANE_THREAD_COLUMNS).min(PLANE_WARPS);
    let s = run.stream().clone();
    // Planes of one band (no more rows than a band) have no carries: no sums either (null).
    let sums = if plane_bands > 1 { Some(run.alloc(DType::U32, (bands * nx) as usize)?) } else { None };
    let sp = sums.as_ref().map_or(0, |b| b.ptr(&s));
    let (f_prefix, values, out) = match sink {
        Sink::Grid(out) => (run.kernel(&program(), "lz_band_prefix")?, None, out),
        Sink::Stored(st, out) => {
            (run.kernel(&band_program(st), "lz_band_prefix_stored")?, Some(st.values()?), out.ptr(&s))
        }
    };
    // SAFETY (each launch): argument lists match device.cu; every band lies inside its plane,
    // `sums` holds a word per band and column (or is null, and no band has carries).
    if sums.is_some() {
        let (f_sums, f_carries) = (run.kernel(&program(), "lz_band_sums")?, run.kernel(&program(), "lz_band_carries")?);
        // Up to 32 warps a plane's 32 columns, no more than it has bands.
        let carry_threads = 32 * plane_bands.min(32);
        unsafe {
            s.launch_builder(&f_sums)
                .arg(&d)
                .arg(&ny)
                .arg(&nx)
                .arg(&band)
                .arg(&plane_bands)
                .arg(&bands)
                .arg(&sp)
                .launch(grid(bands * nx, u64::from(THREADS)))
                .map_err(device_error)?;
            s.launch_builder(&f_carries)
                .arg(&sp)
                .arg(&nx)
                .arg(&plane_bands)
                .arg(&column_groups)
                .launch(grid(nz * column_groups * carry_threads, carry_threads))
                .map_err(device_error)?;
        }
    }
    unsafe {
        let mut prefix = s.launch_builder(&f_prefix);
        // The stored kernel takes the stage's values and its output first, then the deltas.
        match &values {
            Some(values) => prefix.arg(values).arg(&out).arg(&d),
            None => prefix.arg(&d).arg(&out),
        };
        prefix
            .arg(&ny)
            .arg(&nx)
            .arg(&band)
            .arg(&plane_bands)
            .arg(&sp)
            .launch(grid(bands * threads, threads))
            .map_err(device_error)?;
    }
    Ok(())
}
