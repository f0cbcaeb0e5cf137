//! Fused regions (docs/ARCHITECTURE.md, "Fragments and fused regions"): a chain of stages whose
//! device work is tile-local runs as one generated NVRTC kernel. Each stage contributes a
//! *fragment* — device functions in its own folder and a call the generator pastes in — and
//! the generator wraps them in one load, the calls in order, and (when the chain ends in a
//! coder) one decoupled look-back that places each tile's variable-size output. Nothing here
//! names a concrete stage; the executor decides which chains form a region.
//!
//! The tile contract every fragment follows: a thread block owns one tile of `$count`
//! elements starting at element `$first` of the stream. A transform reads `$in` and writes
//! `$out`, distinct buffers; all pointers are shared memory except the region's own input in
//! the forward direction (`$in` of the first stage) and its own output in the inverse (`$out`
//! of the first stage's inverse), which are global. An inverse may use its `$in` as scratch.
//! Every call is made by all threads of the block; the generator puts a barrier after each.

use super::device::{grid, DeviceBuffer, DeviceForwarded, DeviceRun, PendingRecord};
use super::{device_error, Program};
use crate::element::DType;
use crate::error::{corrupt, Error, Result};
use cudarc::driver::{DeviceRepr, PushKernelArg};

/// Bytes of each of the two shared-memory tile buffers, and of the scratch area.
pub const TILE_BUFFER_BYTES: usize = 16384;
pub const SCRATCH_BYTES: usize = 10240;
/// Runtime values (device addresses, sizes) one region can pass its fragments.
const MAX_ARGS: usize = 24;
const THREADS: u32 = 256;
/// Thread blocks per SM the shared memory allows (two tile buffers and the scratch, about
/// 44 KiB with the driver's reserve, of 228 KiB); registers are capped to match.
const MIN_BLOCKS: u32 = 5;
/// Thread blocks a region launch uses at most (they loop over the tiles).
const MAX_BLOCKS: u64 = 132 * 16;

/// How a stage's work divides a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per element of the stage's input and output streams.
    pub in_width: usize,
    pub out_width: usize,
    /// One output element per input element (a quantizer, a map); else the stage keeps the
    /// byte count (a shuffle of words into bytes).
    pub same_count: bool,
    /// Bytes of its input one unit of its work covers (its width when element-wise); a
    /// region's tiles are multiples of it. A coder's granule is its chunk, and a region's
    /// tile is exactly one.
    pub granule: usize,
    pub coder: bool,
}

impl Geometry {
    /// Output bytes for `bytes` of input.
    fn out_bytes(&self, bytes: usize) -> usize {
        if self.same_count {
            bytes / self.in_width * self.out_width
        } else {
            bytes
        }
    }
}

/// Bytes per region element (element of the first stage's input) of every stage's input
/// stream, then of the last stage's output.
fn rates(geometries: &[Geometry]) -> Vec<usize> {
    let mut rates = vec![geometries[0].in_width];
    for g in geometries {
        rates.push(g.out_bytes(*rates.last().expect("non-empty")));
    }
    rates
}

/// The code of a fragment call: C source with placeholders (`$in`, `$out`, `$bytes`, `$first`,
/// `$count`, `$tile`, `$scratch`; coders also `$seg`, `$size`, `$stage`) and `$0`, `$1`, … for
/// its runtime values, which depend only on the stage's parameters, so that a region's program
/// does too (compiled ahead by `stages::compile_all`, cached like any program).
pub type Code = String;

/// After the region kernel: a transform's other output ports (1, 2, …) and its record.
pub type FinishForward = Box<dyn FnOnce(&mut DeviceRun) -> Result<(Vec<DeviceBuffer>, PendingRecord)>>;
/// After the inverse region kernel: checks and patches on the region's output (given to the
/// first stage only), e.g. outliers put back.
pub type FinishInverse = Box<dyn FnOnce(&mut DeviceRun, Option<&DeviceBuffer>) -> Result<()>>;

/// A stage's part of a forward region: the runtime values its code names.
pub enum ForwardPart {
    Transform {
        args: Vec<u64>,
        finish: FinishForward,
    },
    /// The coder's segment: a table of `table_bytes` (its entries written by `entry_code`),
    /// then the tiles' payloads in order; its length goes to the slot at `length_at`.
    Coder {
        args: Vec<u64>,
        table_bytes: u64,
        segment: DeviceBuffer,
        length_at: u64,
        record: PendingRecord,
    },
}

impl ForwardPart {
    /// A transform with no runtime values, no other outputs and a record known up front.
    pub fn fixed(record: Vec<u8>) -> ForwardPart {
        ForwardPart::with_args(Vec::new(), record)
    }

    /// A transform with runtime values, no other outputs and a record known up front.
    pub fn with_args(args: Vec<u64>, record: Vec<u8>) -> ForwardPart {
        ForwardPart::Transform { args, finish: Box::new(move |_| Ok((Vec::new(), Box::new(move |_| Ok(record))))) }
    }
}

/// A stage's part of an inverse region, with the byte count of its input where its record
/// states one (the region checks that they agree).
pub enum InversePart {
    Transform {
        args: Vec<u64>,
        input_bytes: Option<usize>,
        finish: FinishInverse,
    },
    /// `keep` holds the buffers its arguments point to until the kernel has run.
    Coder {
        args: Vec<u64>,
        input_bytes: usize,
        keep: Vec<DeviceBuffer>,
    },
}

impl InversePart {
    /// A transform with no runtime values, no stated length and nothing to do afterwards.
    pub fn fixed() -> InversePart {
        InversePart::Transform { args: Vec::new(), input_bytes: None, finish: Box::new(|_, _| Ok(())) }
    }
}

/// A stage whose device work can join a region (implemented beside its `DeviceStage`).
pub trait Fragment: Sync {
    /// The sources defining its device functions, in include order (each included once per
    /// program, compared by address).
    fn sources(&self) -> Vec<&'static str>;
    /// `#define` lines its sources need (e.g. the element type).
    fn defines(&self) -> String {
        String::new()
    }
    /// Its geometry; `None` when this instance does not fuse (e.g. a chunk larger than a
    /// tile buffer).
    fn geometry(&self) -> Option<Geometry>;
    /// Forward: a transform's statement from `$in` to `$out`; a coder's expression, the size
    /// of the tile encoded (its state kept in `$scratch` for `emit_code`).
    fn forward_code(&self) -> Code;
    /// A coder's statement writing the encoded tile of `$size` bytes into `$out` (after a
    /// barrier, once the size is published: later tiles' placement need not wait for it).
    fn emit_code(&self) -> Code {
        Code::new()
    }
    /// A coder's statement writing tile `$tile`'s table entry for `$size` bytes into `$seg`,
    /// run by every thread of the block (the emit's state still in `$scratch`).
    fn entry_code(&self) -> Code {
        Code::new()
    }
    /// Inverse: a transform's statement from `$in` to `$out`; a coder's expression decoding
    /// tile `$tile` of `$seg` into `$out` (`$stage` is a second tile buffer), false when the
    /// tile is inconsistent.
    fn inverse_code(&self) -> Code;
    /// Whether it reads its input out of stream order (a reshape into tiles, a stencil over
    /// the grid): such a stage comes first in a region, reads the region's input as
    /// `$global_in` (its inverse writes the region's output as `$global_out`), and the
    /// region's elements are those of its output. Reading no `$in`, it may use the other tile
    /// buffer, `$spare`, as scratch.
    fn gathers(&self) -> bool {
        false
    }
    /// Whether its inverse joins regions too (not when it needs a global pass, as N-D
    /// Lorenzo's prefix sums over a 2-D or 3-D grid do, though its forward gathers).
    fn inverse_fuses(&self) -> bool {
        true
    }
    /// Whether its inverse writes the region's output out of stream order (a gatherer's
    /// scatter), so that it must come first in an inverse region. A gatherer whose inverse
    /// keeps stream order (a stencil along a line) says no.
    fn inverse_scatters(&self) -> bool {
        self.gathers()
    }
    /// A stage whose inverse is an inclusive prefix sum of u32 words (wrapping) over the whole
    /// stream: its statement adding `$carry`, the sum of every earlier tile's words, to the
    /// tile's `$count` words at `$out`. Its `inverse_code` is then an expression: the prefix
    /// sums within the tile from `$in` to `$out`, whose value is the tile's total. The region
    /// finds each carry by a decoupled look-back in ticket order.
    fn inverse_carry_code(&self) -> Option<Code> {
        None
    }
    /// An element-wise stage that the gatherer right after it runs inside its loads (the
    /// Quantizer before TiledLorenzo or N-D Lorenzo): each element the gatherer reads from
    /// the region's input goes through this stage where it is read, so this stage's main
    /// output never reaches memory. A statement run once per tile (e.g. its runtime values
    /// into registers) and an expression, its output for element `$index` of `$global_in`;
    /// `$own` is true on the one read of each element the gatherer makes as that element's
    /// own (`fz_own` in common.cu), where the stage may count (atomically: in any order, the
    /// same totals).
    fn load_code(&self) -> Option<(Code, Code)> {
        None
    }
    /// Prepare the forward when it runs inside a gatherer's loads (`load_code`): its runtime
    /// values, and a finisher that makes its other outputs and its record after the region.
    fn forward_loaded(&self, _run: &mut DeviceRun, _input: &DeviceBuffer, _n: usize) -> Result<ForwardPart> {
        Err(Error::Pipeline("this stage does not run inside a gatherer's loads".into()))
    }
    /// The same in the inverse: an element-wise stage whose inverse the scattering stage right
    /// after it runs inside its stores (the Quantizer's reconstruction after TiledLorenzo's
    /// scatter), so that the codes between them never reach memory. A statement run once per
    /// tile and a statement storing its inverse of code `$value` (a u32) as element `$index`
    /// of `$global_out`; its `inverse` part is prepared as usually (its values, named alike,
    /// and its finisher, which gets the region's output).
    fn store_code(&self) -> Option<(Code, Code)> {
        None
    }
    /// Whether its inverse is a global pass (not a region) whose last kernel can store through
    /// the element-wise stage before it (that stage's `store_code`), given as a
    /// [`StoredInverse`] to `inverse_stored`.
    fn inverse_stores(&self) -> bool {
        false
    }
    /// That inverse from its output ports: the stored stage's output, made by the kernels only
    /// (`stored`'s finisher runs after it).
    fn inverse_stored(
        &self,
        _run: &mut DeviceRun,
        _outputs: &[&DeviceBuffer],
        _stored: &StoredInverse,
    ) -> Result<DeviceBuffer> {
        Err(Error::Pipeline("this stage's inverse does not store through another stage".into()))
    }
    /// Region elements when it comes first on `n` elements of its input (a gatherer's output).
    fn region_elements(&self, _run: &DeviceRun, n: usize) -> Result<usize> {
        Ok(n)
    }
    /// Elements of the region's output when it comes first in an inverse of `n` region
    /// elements (a gatherer's input; it has checked `n` against its record).
    fn inverse_elements(&self, n: usize) -> Result<usize> {
        Ok(n)
    }
    /// Prepare the forward on `n` elements of its input: `input` is the region's input when
    /// this stage comes first.
    fn forward(&self, run: &mut DeviceRun, input: Option<&DeviceBuffer>, n: usize) -> Result<ForwardPart>;
    /// Prepare the inverse from its output ports (port 0 is produced inside the region).
    fn inverse(&self, run: &mut DeviceRun, outputs: &[Option<&DeviceBuffer>]) -> Result<InversePart>;
}

/// Region elements per tile for stages of these geometries, `None` when no tile fits the
/// buffers and every granule, or a coder is not last.
pub fn tile_elements(geometries: &[Geometry]) -> Option<usize> {
    let (last, body) = geometries.split_last()?;
    if body.iter().any(|g| g.coder) || geometries.iter().any(|g| g.granule == 0 || g.in_width == 0) {
        return None;
    }
    let rates = rates(geometries);
    // A tile's bytes at stage k are tile × rates[k]: a multiple of the stage's granule.
    let step =
        geometries.iter().zip(&rates).try_fold(1usize, |l, (g, &r)| lcm(l, g.granule / gcd(g.granule, r.max(1))))?;
    // Every stream inside the region lives in a tile buffer (the first input is read from
    // global memory).
    let widest = rates[1..].iter().copied().max()?.max(1);
    let room = TILE_BUFFER_BYTES / widest;
    let tile = if last.coder {
        let r = rates[geometries.len() - 1];
        (last.granule.is_multiple_of(r)).then_some(last.granule / r)?
    } else {
        room / step * step
    };
    (tile > 0 && tile <= room && tile.is_multiple_of(step)).then_some(tile)
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn lcm(a: usize, b: usize) -> Option<usize> {
    (a / gcd(a, b)).checked_mul(b)
}

/// `struct RegionArgs` of the generated kernel, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RegionArgs([u64; MAX_ARGS]);
// SAFETY: plain #[repr(C)] integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for RegionArgs {}

/// How many runtime values `code` names (`$0` … `$k`).
fn arg_count(code: &str) -> usize {
    let mut count = 0;
    for (i, _) in code.match_indices('$') {
        let digits: String = code[i + 1..].chars().take_while(char::is_ascii_digit).collect();
        if let Ok(k) = digits.parse::<usize>() {
            count = count.max(k + 1);
        }
    }
    count
}

/// Paste `code` in: `$k` by its slot of the argument block (from `base`), then the named
/// placeholders from `names`.
fn expand(code: &str, base: usize, names: &[(&str, &str)]) -> String {
    let mut code = code.to_string();
    // Highest index first, so that `$1` does not eat the prefix of `$12`.
    for k in (0..arg_count(&code)).rev() {
        code = code.replace(&format!("${k}"), &format!("A.a[{}]", base + k));
    }
    for (name, value) in names {
        code = code.replace(name, value);
    }
    code
}

/// The sources of every fragment, each once, then the kernel.
fn program(fragments: &[&dyn Fragment], kernel: String) -> Program {
    let mut text = String::new();
    for f in fragments {
        text.push_str(&f.defines());
    }
    let mut seen: Vec<(*const u8, usize)> = Vec::new();
    for source in fragments.iter().flat_map(|f| f.sources()) {
        if !seen.contains(&(source.as_ptr(), source.len())) {
            seen.push((source.as_ptr(), source.len()));
            text.push_str(source);
            text.push('\n');
        }
    }
    text.push_str(&format!(
        "#define REGION_BUF {TILE_BUFFER_BYTES}\n#define REGION_SCRATCH {SCRATCH_BYTES}\n\
         struct RegionArgs {{ u64 a[{MAX_ARGS}]; }};\n"
    ));
    text.push_str(&kernel);
    Program::generated(text)
}

const SHARED: &str =
    "    __shared__ __align__(16) u8 buf0[REGION_BUF];\n    __shared__ __align__(16) u8 buf1[REGION_BUF];\n    \
                      __shared__ __align__(16) u8 scratch[REGION_SCRATCH];\n";

/// The shared tile buffer stream `k` of a region lives in (they alternate).
fn buffer(k: usize) -> &'static str {
    if k.is_multiple_of(2) {
        "buf0"
    } else {
        "buf1"
    }
}

/// Slot bases of each code's runtime values in the argument block.
fn bases(codes: &[Code]) -> Result<Vec<usize>> {
    let mut bases = Vec::with_capacity(codes.len());
    let mut used = 0;
    for code in codes {
        bases.push(used);
        used += arg_count(code);
    }
    if used > MAX_ARGS {
        return Err(Error::Device(format!("a fused region needs {used} kernel arguments, more than {MAX_ARGS}")));
    }
    Ok(bases)
}

/// The argument block: each code's values (as many as it names) at its base.
fn block(args: &[Vec<u64>], codes: &[Code], bases: &[usize]) -> Result<RegionArgs> {
    let mut block = [0u64; MAX_ARGS];
    for ((a, code), &b) in args.iter().zip(codes).zip(bases) {
        let count = arg_count(code);
        let values =
            a.get(..count).ok_or_else(|| Error::Device(format!("a fragment names {count} values, has {}", a.len())))?;
        block[b..b + count].copy_from_slice(values);
    }
    Ok(RegionArgs(block))
}

/// A region: its stages' fragments and geometries in forward order, and its tile (of the
/// stages after a nested one).
pub struct Region<'f> {
    pub fragments: Vec<&'f dyn Fragment>,
    pub geometries: Vec<Geometry>,
    pub tile: usize,
    /// The first stage runs inside the gatherer after it: in its loads forward
    /// (`Fragment::load_code`), in its stores inverse (`Fragment::store_code`).
    pub nested: bool,
}

/// What a forward region produced: each transform's finisher, and the coder's segment and
/// record or the last stage's output stream.
pub struct ForwardOutput {
    pub finishers: Vec<FinishForward>,
    pub output: DeviceBuffer,
    pub coder_record: Option<PendingRecord>,
}

impl Region<'_> {
    fn coded(&self) -> bool {
        self.geometries.last().is_some_and(|g| g.coder)
    }

    fn transforms(&self) -> usize {
        self.fragments.len() - usize::from(self.coded())
    }

    /// A nested first stage's setup and load expression.
    fn load_code(&self) -> Option<(Code, Code)> {
        self.nested.then(|| self.fragments[0].load_code()).flatten()
    }

    /// A nested first stage's setup and store statement.
    fn store_code(&self) -> Option<(Code, Code)> {
        self.nested.then(|| self.fragments[0].store_code()).flatten()
    }

    /// The inverse codes: each stage's (a nested stage's setup and store together).
    fn inverse_codes(&self) -> Vec<Code> {
        let mut codes: Vec<Code> = self.fragments.iter().map(|f| f.inverse_code()).collect();
        if let Some((setup, store)) = self.store_code() {
            codes[0] = format!("{setup} {store}");
        }
        codes
    }

    /// The forward codes: each stage's (a loaded stage's setup and load together), then the
    /// coder's emit and table entry.
    fn forward_codes(&self) -> Vec<Code> {
        let mut codes: Vec<Code> = self.fragments.iter().map(|f| f.forward_code()).collect();
        if let Some((setup, load)) = self.load_code() {
            codes[0] = format!("{setup} {load}");
        }
        if self.coded() {
            let coder = self.fragments.last().expect("a region has stages");
            codes.extend([coder.emit_code(), coder.entry_code()]);
        }
        codes
    }

    /// The forward kernel `region_forward`. With a coder, blocks take tiles by ticket and place
    /// them by the decoupled look-back: a tile publishes its size as soon as it is known, is
    /// written into shared memory, and only then looks back, so that its successors rarely wait
    /// for it. A block takes its next ticket while its tile is still being written (that
    /// atomic's latency hides behind the emit); no deadlock follows, because the smallest
    /// unfinished ticket is always the one its block is working on, and every tile it waits
    /// for is smaller.
    pub fn forward_program(&self) -> Result<Program> {
        let codes = self.forward_codes();
        let bases = bases(&codes)?;
        let rates = rates(&self.geometries);
        let transforms = self.transforms();
        // A loaded stage becomes the loader the gatherer reads the region's input through.
        let mut body = match self.load_code() {
            Some((setup, load)) => {
                let names = [("$global_in", "input"), ("$index", "i"), ("$own", "own")];
                format!(
                    "        {};\n        auto load = fz_load([&](u64 i, bool own) {{ return {}; }});\n",
                    expand(&setup, bases[0], &names),
                    expand(&load, bases[0], &names)
                )
            }
            None => String::new(),
        };
        for k in usize::from(self.nested)..transforms {
            let bytes = format!("count * {}u", rates[k]);
            let names = [
                ("$global_in", if self.nested { "load" } else { "input" }),
                ("$in", if k == 0 { "src" } else { buffer(k - 1) }),
                ("$out", buffer(k)),
                ("$spare", buffer(k + 1)),
                ("$bytes", &bytes),
            ];
            body.push_str(&format!(
                "        {};\n        __syncthreads();\n",
                expand(&codes[k], bases[k], &with_common(&names))
            ));
        }
        let (tile, in_width, last_width) = (self.tile, rates[0], rates[transforms]);
        let head = format!(
            "    u64 first = t * {tile}ull;\n        u32 count = (u32)min((u64){tile}, n - first);\n        \
             const u8* src = input + first * {in_width}ull;\n"
        );
        let kernel = if self.coded() {
            let bytes = format!("count * {}u", rates[transforms]);
            // A coder alone reads its tile staged in shared memory, as it would in a chain.
            if transforms == 0 {
                body.push_str(&format!(
                    "        fz_block_load(buf1, src, (u64)count * {in_width}u);\n        __syncthreads();\n"
                ));
            }
            let coded_in = if transforms == 0 { buffer(1) } else { buffer(transforms - 1) };
            let staged = buffer(transforms);
            let names = [("$in", coded_in), ("$out", staged), ("$bytes", bytes.as_str())];
            let encode = expand(&codes[transforms], bases[transforms], &with_common(&names));
            let emit_names = [("$in", coded_in), ("$out", staged), ("$bytes", bytes.as_str()), ("$size", "size")];
            let emit = expand(&codes[transforms + 1], bases[transforms + 1], &with_common(&emit_names));
            let tile_body = self.specialised(&format!("{body}        size = {encode};\n"));
            let tile_emit = self.specialised(&format!("        {emit};\n"));
            let entry_names = [("$seg", "seg"), ("$bytes", bytes.as_str()), ("$size", "size")];
            let entry = expand(&codes[transforms + 2], bases[transforms + 2], &with_common(&entry_names));
            format!(
                "extern \"C\" __global__ void __launch_bounds__({THREADS}, {MIN_BLOCKS}) region_forward(RegionArgs A, const u8* input, u64 n, \
                 u64 ntiles, u64 table, u64* state, u8* seg, u64 capacity, u64* seg_len) {{\n{SHARED}    __shared__ u64 ticket, offset;\n    \
                 volatile u64* published = (volatile u64*)(state + 1);\n    \
                 if (threadIdx.x == 0) ticket = atomicAdd((unsigned long long*)state, 1ull);\n    __syncthreads();\n    for (;;) {{\n        \
                 u64 t = ticket;\n        if (t >= ntiles) return;\n    {head}        u32 size;\n{tile_body}        __syncthreads();\n        \
                 if (threadIdx.x == 0) {{\n            if (t > 0) published[t] = FZ_AGGREGATE | size;\n            \
                 ticket = atomicAdd((unsigned long long*)state, 1ull);\n        }}\n{tile_emit}        __syncthreads();\n        \
                 if (threadIdx.x < 32) {{\n            \
                 u64 before = fz_look_back(published, t);\n            if (threadIdx.x == 0) {{\n                \
                 published[t] = FZ_INCLUSIVE | (before + size);\n                offset = before;\n                \
                 if (t == ntiles - 1) *seg_len = table + before + size;\n            }}\n        }}\n        __syncthreads();\n        \
                 if (table + offset + size <= capacity) {{\n            {entry};\n            \
                 fz_block_copy(seg + table + offset, {staged}, size);\n        }}\n        __syncthreads();\n    }}\n}}\n"
            )
        } else {
            let last = buffer(transforms - 1);
            format!(
                "extern \"C\" __global__ void __launch_bounds__({THREADS}, {MIN_BLOCKS}) region_forward(RegionArgs A, const u8* input, u64 n, \
                 u64 ntiles, u8* out) {{\n{SHARED}    for (u64 t = blockIdx.x; t < ntiles; t += gridDim.x) {{\n    {head}{}    }}\n}}\n",
                self.specialised(&format!(
                        "{body}        fz_block_copy(out + first * {last_width}ull, {last}, (u64)count * {last_width}u);\n        \
                         __syncthreads();\n"
                    )
                )
            )
        };
        Ok(program(&self.fragments, kernel))
    }

    /// `code` (which reads the tile's element count `count`) twice: for full tiles with the
    /// count a constant, so that every fragment's loops have known trip counts, and for the
    /// last, partial tile.
    fn specialised(&self, code: &str) -> String {
        let tile = self.tile;
        format!("        if (count == {tile}u) {{\n        const u32 count = {tile}u;\n{code}        }} else {{\n{code}        }}\n")
    }

    /// Stages whose inverse is a prefix sum over the stream (`Fragment::inverse_carry_code`).
    fn scans(&self) -> usize {
        self.fragments.iter().filter(|f| f.inverse_carry_code().is_some()).count()
    }

    /// A scanning stage's inverse: the tile's sums, then the look-back for the sum of the
    /// tiles before it (scan `j` publishes in its own part of `state`), then the carry added.
    fn scanned(sums: &str, carry: &str, j: usize) -> String {
        format!(
            "        {{\n        u32 scan_total = {sums};\n        __syncthreads();\n        if (threadIdx.x < 32) {{\n            \
             volatile u64* published = (volatile u64*)(state + 1 + {j}ull * ntiles);\n            \
             if (threadIdx.x == 0 && t > 0) published[t] = FZ_AGGREGATE | scan_total;\n            \
             u64 before = fz_look_back(published, t);\n            if (threadIdx.x == 0) {{\n                \
             published[t] = FZ_INCLUSIVE | ((before + scan_total) & 0xffffffffull);\n                \
             scan_carry = (u32)before;\n            }}\n        }}\n        __syncthreads();\n        {carry};\n        }}\n"
        )
    }

    /// The inverse kernel `region_inverse`. Tiles are independent, or, when a stage scans,
    /// taken by ticket so that the look-back waits only for tiles that blocks are working on.
    pub fn inverse_program(&self) -> Result<Program> {
        let codes = self.inverse_codes();
        let bases = bases(&codes)?;
        let rates = rates(&self.geometries);
        let transforms = self.transforms();
        // The last stream inside the region lands in buffer(transforms), decoded or loaded.
        let top = buffer(transforms);
        let mut body = if self.coded() {
            let bytes = format!("count * {}u", rates[transforms]);
            let names =
                [("$out", top), ("$stage", buffer(transforms + 1)), ("$seg", "seg"), ("$bytes", bytes.as_str())];
            let decode = expand(&codes[transforms], bases[transforms], &with_common(&names));
            format!("        if (!({decode}) && threadIdx.x == 0) atomicOr(err, 1u);\n        __syncthreads();\n")
        } else {
            let w = rates[transforms];
            format!(
                "        fz_block_load({top}, seg + first * {w}ull, (u64)count * {w}u);\n        __syncthreads();\n"
            )
        };
        // A nested stage becomes the storer the gatherer writes the region's output through.
        if let Some((setup, store)) = self.store_code() {
            let names = [("$global_out", "out"), ("$index", "i"), ("$value", "v")];
            body = format!(
                "        {};\n        auto store = fz_store([&](u64 i, u32 v) {{ {}; }});\n{body}",
                expand(&setup, bases[0], &names),
                expand(&store, bases[0], &names)
            );
        }
        let mut scan = 0;
        for k in (usize::from(self.nested)..transforms).rev() {
            let bytes = format!("count * {}u", rates[k + 1]);
            let names = [
                ("$global_out", if self.nested { "store" } else { "out" }),
                ("$in", buffer(k + 1)),
                ("$out", if k == 0 { "dst" } else { buffer(k) }),
                ("$bytes", bytes.as_str()),
                ("$carry", "scan_carry"),
            ];
            let code = expand(&codes[k], bases[k], &with_common(&names));
            match self.fragments[k].inverse_carry_code() {
                Some(carry) => {
                    body.push_str(&Self::scanned(&code, &expand(&carry, bases[k], &with_common(&names)), scan));
                    scan += 1;
                }
                None => body.push_str(&format!("        {code};\n")),
            }
            body.push_str("        __syncthreads();\n");
        }
        let (tile, out_width) = (self.tile, rates[0]);
        if transforms == 0 {
            // A coder alone: its decoded tile is the region's output.
            body.push_str(&format!(
                "        fz_block_copy(dst, {top}, (u64)count * {out_width}u);\n        __syncthreads();\n"
            ));
        }
        let tile_head = format!(
            "        u64 first = t * {tile}ull;\n        u32 count = (u32)min((u64){tile}, n - first);\n        \
             u8* dst = out + first * {out_width}ull;\n{}",
            self.specialised(&body)
        );
        let signature = format!(
            "extern \"C\" __global__ void __launch_bounds__({THREADS}, {MIN_BLOCKS}) region_inverse(RegionArgs A, const u8* seg, u64 n, \
             u64 ntiles, u8* out, u32* err"
        );
        let kernel = if scan == 0 {
            format!("{signature}) {{\n{SHARED}    for (u64 t = blockIdx.x; t < ntiles; t += gridDim.x) {{\n{tile_head}    }}\n}}\n")
        } else {
            format!(
                "{signature}, u64* state) {{\n{SHARED}    __shared__ u64 ticket;\n    __shared__ u32 scan_carry;\n    \
                 if (threadIdx.x == 0) ticket = atomicAdd((unsigned long long*)state, 1ull);\n    __syncthreads();\n    \
                 for (;;) {{\n        u64 t = ticket;\n        if (t >= ntiles) return;\n{tile_head}        __syncthreads();\n        \
                 if (threadIdx.x == 0) ticket = atomicAdd((unsigned long long*)state, 1ull);\n        __syncthreads();\n    }}\n}}\n"
            )
        };
        Ok(program(&self.fragments, kernel))
    }

    /// Enqueue the region on `input` (`len` elements of the first stage's input); the last
    /// stage's output stream has element type `out_dtype`.
    pub fn forward(
        &self,
        run: &mut DeviceRun,
        input: &DeviceBuffer,
        len: usize,
        out_dtype: DType,
    ) -> Result<ForwardOutput> {
        let loaded = usize::from(self.nested);
        let n = self.fragments[loaded].region_elements(run, len)?;
        let program = self.forward_program()?;
        let codes = self.forward_codes();
        let bases = bases(&codes)?;
        let mut args = Vec::new();
        let mut finishers = Vec::new();
        let mut coder = None;
        let rates = rates(&self.geometries);
        for (k, (f, g)) in self.fragments.iter().zip(&self.geometries).enumerate() {
            // Each stage is told the length of its own input, in its elements (a loaded
            // stage keeps the count).
            let len = if k <= loaded { len } else { n * rates[k] / g.in_width };
            let part = if k < loaded {
                f.forward_loaded(run, input, len)?
            } else {
                f.forward(run, (k == 0).then_some(input), len)?
            };
            match part {
                ForwardPart::Transform { args: a, finish } => {
                    args.push(a);
                    finishers.push(finish);
                }
                ForwardPart::Coder { args: a, table_bytes, segment, length_at, record } => {
                    // The size expression, the emit and the table entry share the coder's values.
                    args.extend([a.clone(), a.clone(), a]);
                    coder = Some((table_bytes, segment, length_at, record));
                }
            }
        }
        let block = block(&args, &codes, &bases)?;
        let ntiles = n.div_ceil(self.tile) as u64;
        let s = run.stream().clone();
        let config = grid(ntiles.clamp(1, MAX_BLOCKS) * u64::from(THREADS), u64::from(THREADS));
        let (n64, source) = (n as u64, input.ptr(&s));
        let f = region_kernel(run, &program, "region_forward")?;
        match coder {
            Some((table, segment, length_at, record)) => {
                let state = run.alloc(DType::U64, ntiles as usize + 1)?;
                run.zero(&state)?;
                let cap = segment.len.capacity() as u64;
                if ntiles > 0 {
                    // SAFETY: the argument list matches the generated kernel; `state` holds
                    // ntiles + 1 words, nothing is written past `cap` bytes of the segment, and
                    // every fragment's values were sized by its stage for n elements.
                    unsafe {
                        s.launch_builder(&f)
                            .arg(&block)
                            .arg(&source)
                            .arg(&n64)
                            .arg(&ntiles)
                            .arg(&table)
                            .arg(&state.ptr(&s))
                            .arg(&segment.ptr(&s))
                            .arg(&cap)
                            .arg(&length_at)
                            .launch(config)
                            .map_err(device_error)?;
                    }
                }
                Ok(ForwardOutput { finishers, output: segment, coder_record: Some(record) })
            }
            None => {
                let out = run.alloc(out_dtype, n * rates[self.fragments.len()] / out_dtype.size())?;
                if ntiles > 0 {
                    // SAFETY: the argument list matches the generated kernel; `out` holds the
                    // last stage's output for n region elements.
                    unsafe {
                        s.launch_builder(&f)
                            .arg(&block)
                            .arg(&source)
                            .arg(&n64)
                            .arg(&ntiles)
                            .arg(&out.ptr(&s))
                            .launch(config)
                            .map_err(device_error)?;
                    }
                }
                Ok(ForwardOutput { finishers, output: out, coder_record: None })
            }
        }
    }

    /// Enqueue the inverse of `parts` (forward order) reading `last_output` (the coder's
    /// segment, or the last stage's output stream) into a new buffer of `out_dtype`.
    pub fn inverse(
        &self,
        run: &mut DeviceRun,
        parts: Vec<InversePart>,
        last_output: &DeviceBuffer,
        out_dtype: DType,
    ) -> Result<(DeviceBuffer, Vec<FinishInverse>)> {
        let program = self.inverse_program()?;
        let codes = self.inverse_codes();
        let bases = bases(&codes)?;
        let rates = rates(&self.geometries);
        let nested = usize::from(self.nested);
        let (mut args, mut finishers, mut stated, mut keep) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut nested_bytes = None;
        for (k, part) in parts.into_iter().enumerate() {
            match part {
                // A nested stage states the length of the gatherer's grid, not of its elements.
                InversePart::Transform { args: a, input_bytes, finish } => {
                    args.push(a);
                    finishers.push(finish);
                    match k < nested {
                        true => nested_bytes = input_bytes,
                        false => stated.extend(input_bytes.map(|b| (k, b))),
                    }
                }
                InversePart::Coder { args: a, input_bytes, keep: buffers } => {
                    args.push(a);
                    stated.push((k, input_bytes));
                    keep = buffers;
                }
            }
        }
        if !self.coded() {
            stated.push((self.fragments.len(), last_output.known_len()? * last_output.dtype.size()));
        }
        // Every length a record states must describe the same number of region elements.
        let &(k0, b0) = stated.first().ok_or_else(|| corrupt!("no stage of a fused region states its length"))?;
        let n = b0 / rates[k0];
        if let Some(&(k, b)) = stated.iter().find(|&&(k, b)| n.checked_mul(rates[k]) != Some(b)) {
            return Err(corrupt!("stage {k} of a fused region states {b} bytes, stage {k0} {b0}"));
        }
        let ntiles = n.div_ceil(self.tile) as u64;
        let elements = self.fragments[nested].inverse_elements(n)?;
        let out_bytes =
            elements.checked_mul(rates[0]).ok_or_else(|| corrupt!("a fused region of {elements} elements"))?;
        if let Some(b) = nested_bytes.filter(|&b| b != out_bytes) {
            return Err(corrupt!("stage 0 of a fused region states {b} bytes, stage 1 {elements} elements"));
        }
        let out = run.alloc(out_dtype, out_bytes / out_dtype.size())?;
        let err = run.error_flag("a fused region's coded tiles do not match their table".into())?;
        let f = region_kernel(run, &program, "region_inverse")?;
        // The scans' look-back: the ticket counter, then each scan's tile words.
        let state = match self.scans() {
            0 => None,
            scans => {
                let state = run.alloc(DType::U64, 1 + scans * ntiles as usize)?;
                run.zero(&state)?;
                Some(state)
            }
        };
        let s = run.stream().clone();
        if ntiles > 0 {
            let config = grid(ntiles.min(MAX_BLOCKS) * u64::from(THREADS), u64::from(THREADS));
            let block = block(&args, &codes, &bases)?;
            let (seg, n64, dst) = (last_output.ptr(&s), n as u64, out.ptr(&s));
            let mut launch = s.launch_builder(&f);
            launch.arg(&block).arg(&seg).arg(&n64).arg(&ntiles).arg(&dst).arg(&err);
            let state_ptr = state.as_ref().map(|b| b.ptr(&s));
            if let Some(p) = &state_ptr {
                launch.arg(p);
            }
            // SAFETY: the argument list matches the generated kernel (the look-back state
            // exactly when it scans, one word per tile and scan beyond the ticket); `out`
            // holds n region elements, and the fragments' values were validated by their
            // stages against the buffers they read.
            unsafe { launch.launch(config) }.map_err(device_error)?;
        }
        // Freed stream-ordered, after the kernel that reads them.
        drop(keep);
        Ok((out, finishers))
    }
}

/// A stage's own device path through its fragment: a region of that stage alone, whose
/// generated kernel moves the stage's bytes faster than a kernel written for the stage
/// (docs/PERFORMANCE.md, "Every stage alone against the DRAM roofline"). The stage keeps
/// kernels of its own for the instances no tile holds.
impl<'f> Region<'f> {
    /// The region of `f` alone (for its inverse when `inverse`), `None` when `f` does not fit
    /// a tile or its inverse needs a global pass.
    pub fn alone(f: &'f dyn Fragment, inverse: bool) -> Option<Region<'f>> {
        if inverse && !f.inverse_fuses() {
            return None;
        }
        let geometry = f.geometry()?;
        let tile = tile_elements(&[geometry])?;
        Some(Region { fragments: vec![f], geometries: vec![geometry], tile, nested: false })
    }

    /// `DeviceStage::forward` of the stage alone on `input`; its main output has element type
    /// `out_dtype`.
    pub fn forward_alone(
        &self,
        run: &mut DeviceRun,
        input: &DeviceBuffer,
        out_dtype: DType,
    ) -> Result<DeviceForwarded> {
        let out = self.forward(run, input, input.known_len()?, out_dtype)?;
        match (out.coder_record, out.finishers.into_iter().next()) {
            (Some(record), _) => Ok(DeviceForwarded { outputs: vec![out.output], record }),
            (None, Some(finish)) => {
                let (side, record) = finish(run)?;
                Ok(DeviceForwarded { outputs: std::iter::once(out.output).chain(side).collect(), record })
            }
            (None, None) => Err(Error::Device("a region of one transform has no finisher".into())),
        }
    }

    /// `DeviceStage::inverse` of the stage alone from its output ports; its input has element
    /// type `in_dtype`.
    pub fn inverse_alone(
        &self,
        run: &mut DeviceRun,
        outputs: &[&DeviceBuffer],
        in_dtype: DType,
    ) -> Result<Vec<DeviceBuffer>> {
        let main = outputs.first().ok_or_else(|| Error::Pipeline("an inverse without its output".into()))?;
        let ports: Vec<Option<&DeviceBuffer>> = outputs.iter().map(|b| Some(*b)).collect();
        let part = self.fragments[0].inverse(run, &ports)?;
        let (input, finishers) = self.inverse(run, vec![part], main, in_dtype)?;
        for finish in finishers {
            finish(run, Some(&input))?;
        }
        Ok(vec![input])
    }
}

/// An element-wise stage's inverse run inside the stores of the last kernel of the global pass
/// after it (N-D Lorenzo's prefix sums storing the Quantizer's reconstruction): the stage's
/// `store_code` wrapped around the global stage's kernel, so the codes between them never
/// reach memory (docs/ARCHITECTURE.md, "Global passes that store through a stage").
pub struct StoredInverse<'f> {
    fragment: &'f dyn Fragment,
    /// Its `store_code`: a statement per kernel and one per stored element.
    setup: Code,
    store: Code,
    args: Vec<u64>,
    input_bytes: Option<usize>,
    dtype: DType,
}

impl<'f> StoredInverse<'f> {
    /// `fragment` (with `store_code`) prepared by its `Fragment::inverse` as `part`; its output
    /// (the decode's next buffer) has element type `dtype`. Returns its finisher too.
    pub fn new(
        fragment: &'f dyn Fragment,
        part: InversePart,
        dtype: DType,
    ) -> Result<(StoredInverse<'f>, FinishInverse)> {
        let (setup, store) = fragment
            .store_code()
            .ok_or_else(|| Error::Pipeline("this stage does not store through a global pass".into()))?;
        match part {
            InversePart::Transform { args, input_bytes, finish } => {
                Ok((StoredInverse { fragment, setup, store, args, input_bytes, dtype }, finish))
            }
            InversePart::Coder { .. } => Err(Error::Pipeline("a coder cannot store through a global pass".into())),
        }
    }

    /// The program of kernel `name` (with `attributes`, e.g. launch bounds) taking `params`
    /// after the stored stage's values and output, whose body is `call`: a global stage's
    /// function from `sources` that stores element `i` of value `v` through `store`.
    pub fn program(&self, sources: &[&'static str], name: &str, attributes: &str, params: &str, call: &str) -> Program {
        let names = [("$global_out", "stored_out"), ("$index", "i"), ("$value", "v")];
        let mut text = self.fragment.defines();
        for source in self.fragment.sources().into_iter().chain(sources.iter().copied()) {
            text.push_str(source);
            text.push('\n');
        }
        text.push_str(&format!(
            "struct RegionArgs {{ u64 a[{MAX_ARGS}]; }};\n\
             extern \"C\" __global__ void {attributes} {name}(RegionArgs A, u8* stored_out, {params}) {{\n    \
             {};\n    auto store = fz_store([&](u64 i, u32 v) {{ {}; }});\n    {call};\n}}\n",
            expand(&self.setup, 0, &names),
            expand(&self.store, 0, &names)
        ));
        Program::generated(text)
    }

    /// The stored stage's values, passed to the kernel by value.
    pub fn values(&self) -> Result<RegionArgs> {
        block(std::slice::from_ref(&self.args), &[format!("{} {}", self.setup, self.store)], &[0])
    }

    /// The output of `elements` elements, which must be the length the stage's record states.
    pub fn output(&self, run: &DeviceRun, elements: usize) -> Result<DeviceBuffer> {
        let bytes = elements.checked_mul(self.dtype.size()).ok_or_else(|| corrupt!("{elements} elements"))?;
        if let Some(stated) = self.input_bytes.filter(|&b| b != bytes) {
            return Err(corrupt!(
                "a stage stored through a global pass states {stated} bytes, the pass makes {elements} elements"
            ));
        }
        run.alloc(self.dtype, elements)
    }
}

/// A region kernel, asking for the largest shared-memory carveout: its occupancy is bounded
/// by the tile buffers.
fn region_kernel(run: &DeviceRun, program: &Program, name: &str) -> Result<cudarc::driver::CudaFunction> {
    use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
    let f = run.kernel(program, name)?;
    f.set_attribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100).map_err(device_error)?;
    Ok(f)
}

/// The placeholders every call site shares, after its own.
fn with_common<'a>(names: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = names.to_vec();
    all.extend([("$first", "first"), ("$count", "count"), ("$tile", "t"), ("$scratch", "scratch")]);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(in_width: usize, out_width: usize, granule: usize, coder: bool) -> Geometry {
        Geometry { in_width, out_width, same_count: true, granule, coder }
    }

    #[test]
    fn tiles_fit_the_buffers_and_every_granule() {
        // PFPL: quantizer (f32 → u32 words, 2048-element outlier tiles), difference chunks of
        // 4096 words, a 16 KiB shuffle into bytes, RZE chunks of 16 KiB.
        let shuffle = Geometry { in_width: 4, out_width: 1, same_count: false, granule: 16384, coder: false };
        let rze = Geometry { in_width: 1, out_width: 1, same_count: false, granule: 16384, coder: true };
        let pfpl = [g(4, 4, 8192, false), g(4, 4, 16384, false), shuffle, rze];
        assert_eq!(tile_elements(&pfpl), Some(4096));
        assert_eq!(rates(&pfpl), [4, 4, 4, 4, 4]);
        // f64 input: the same tile, read as 32 KiB from global memory.
        assert_eq!(tile_elements(&[g(8, 4, 16384, false), shuffle, rze]), Some(4096));
        // Element-wise maps fill a buffer.
        assert_eq!(tile_elements(&[g(8, 4, 8, false), g(4, 4, 4, false)]), Some(4096));
        // A coder that is not last, or a granule no tile holds, does not fuse.
        assert_eq!(tile_elements(&[g(4, 1, 4096, true), g(4, 4, 4, false)]), None);
        assert_eq!(tile_elements(&[g(4, 4, 32768, false), g(4, 4, 4, false)]), None);
        assert_eq!(tile_elements(&[g(4, 4, 12, false), g(4, 4, 4096, false)]), Some(3072));
    }

    #[test]
    fn a_stage_alone_is_a_region_of_one() {
        let p =
            crate::config::from_toml("[[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 16384\nword_size = 1\n")
                .expect("a valid pipeline");
        let rze = p.nodes()[0].stage.fragment().expect("RZE has a fragment");
        let alone = Region::alone(rze, false).expect("a chunk fits a tile");
        assert_eq!(alone.tile, 16384);
        // A coder alone encodes its tile staged in shared memory, and decodes into the output.
        let source = alone.forward_program().expect("a program").source();
        assert!(
            source.contains("fz_block_load(buf1, src, (u64)count * 1u)") && source.contains("rze_region_size(buf1,")
        );
        let source = alone.inverse_program().expect("a program").source();
        assert!(source.contains("fz_block_copy(dst, buf0, (u64)count * 1u)"));
        // An instance no tile holds keeps the stage's own kernels.
        let p =
            crate::config::from_toml("[[stage]]\nname = \"r\"\ntype = \"RZE\"\nchunk_size = 32768\nword_size = 1\n")
                .expect("a valid pipeline");
        assert!(Region::alone(p.nodes()[0].stage.fragment().expect("a fragment"), false).is_none());
    }

    #[test]
    fn placeholders_expand_to_the_argument_block() {
        let code = "f($in, $out, $bytes, $0, $1, $12)";
        assert_eq!(arg_count(code), 13);
        let names = [("$in", "src"), ("$out", "buf0"), ("$bytes", "count * 4u")];
        assert_eq!(expand(code, 2, &names), "f(src, buf0, count * 4u, A.a[2], A.a[3], A.a[14])");
        assert_eq!(arg_count("g($in)"), 0);
    }
}
