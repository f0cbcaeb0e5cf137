//! `fzmod`: compress, decompress, inspect and benchmark `.fzm` archives.

mod inspect;
mod io;
mod memory;
mod progress;
mod report;
mod stream;
mod sweep;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use fzmod::backend::{Backend, BackendChoice};
use fzmod::{Buffer, DType, DecodeLimits, Decoder, ErrorBound, ErrorMode, Pipeline, RunOptions};
use io::shown;
use report::{num, Report};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How outputs are written (shown by --help).
const OUTPUTS: &str = "OUTPUTS: `-` is standard output. An existing regular file is refused unless --force; \
a device or FIFO (e.g. /dev/null) is written through, never replaced; a symlink is followed; the input \
itself is refused. Regular files are written as a hidden temporary file `.NAME.PID.tmp` beside the \
target and published only when everything (compare, JSON report, printed report) succeeded, so a failed \
run leaves no files behind. Publishing never replaces a file without --force, not even one that another \
process created while this run worked (that run then fails with 'already exists'). A temporary file left \
by a killed run is removed by the next run writing the same name.

EXIT STATUS: 0 success; 1 failure: a bound violation found by --compare or roundtrip (nothing is \
written then), or any other error, reported on one line naming the file, stage or value at fault; \
2 a command line the parser rejects.";

#[derive(Parser)]
#[command(
    name = "fzmod",
    version,
    about = "Error-bounded compression pipelines for scientific arrays",
    after_help = OUTPUTS
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Most memory one thing read or decoded may take (an archive, a raw array, a decoded
    /// array), checked before it is read: 512M, 4G, 1.5GiB or plain bytes (K/M/G/T and
    /// KiB..TiB are powers of 1024, KB..TB powers of 1000). Default: half the physical memory
    /// (8 GiB where unknown).
    #[arg(long, global = true, value_name = "SIZE", value_parser = memory::parse_size)]
    max_memory: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Compress a raw little-endian array into a .fzm archive.
    #[command(after_help = OUTPUTS)]
    Compress {
        /// Raw input, `-` for standard input (see --shape for how much is read).
        input: PathBuf,
        /// Archive to write; `-` writes to standard output (see OUTPUTS below).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        job: Job,
        #[command(flatten)]
        out: Output,
    },
    /// Decompress a .fzm archive into a raw little-endian array.
    #[command(after_help = OUTPUTS)]
    Decompress {
        /// Archive, `-` for standard input.
        input: PathBuf,
        /// Raw array to write; `-` writes to standard output (see OUTPUTS below).
        #[arg(short, long)]
        output: PathBuf,
        /// Original raw file to measure the error against; a bound violation exits with 1 and
        /// writes nothing.
        #[arg(long)]
        compare: Option<PathBuf>,
        /// auto (GPU when usable, else CPU), cpu, or cuda (alias gpu; fails without a GPU).
        #[arg(long, default_value = "auto", value_parser = backend_choice)]
        backend: BackendChoice,
        /// Fusion (same output either way): GPU fusion rules and CPU regions; `off` runs every
        /// stage on its own.
        #[arg(long, value_enum, default_value_t = Fusion::On)]
        fusion: Fusion,
        /// Decode only this box, numpy-style slices in C order: `10:20,0:73,5:100` (`:` a
        /// whole dimension, `7` one index, negative numbers from the end; step 1 only). Of a
        /// chunked archive only the chunks the box meets are read; an unchunked one is decoded
        /// whole and sliced. The output is the box's values in C order.
        #[arg(long, value_name = "SLICES", conflicts_with = "compare", allow_hyphen_values = true)]
        region: Option<String>,
        #[command(flatten)]
        out: Output,
    },
    /// Compress, decompress and compare in one go (the archive is written with -o); a bound
    /// violation exits with 1 and writes nothing.
    #[command(after_help = OUTPUTS)]
    Roundtrip {
        /// Raw input, `-` for standard input.
        input: PathBuf,
        /// Keep the archive in this file (`-` = standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        job: Job,
        #[command(flatten)]
        out: Output,
    },
    /// Time compress and decompress over several runs and print GB/s.
    Bench {
        input: PathBuf,
        #[command(flatten)]
        job: Job,
        /// Timed repetitions (after one warm-up), at least 1.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Overwrite an existing JSON file.
        #[arg(short, long)]
        force: bool,
        /// Rate–distortion sweep over these bounds (comma-separated, in -m's mode, default
        /// rel) for every preset, or the --presets given, or the --config pipeline: a table of
        /// ratio, bits per value, PSNR and GB/s per pipeline and bound.
        #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with = "error_bound")]
        sweep: Option<Vec<f64>>,
        /// The presets of a sweep, comma-separated (default: all).
        #[arg(long, value_delimiter = ',', requires = "sweep", conflicts_with = "config")]
        presets: Option<Vec<String>>,
        /// Write the sweep's plot of PSNR against compression ratio (SVG) to this file.
        #[arg(long, requires = "sweep")]
        plot: Option<PathBuf>,
    },
    /// Show an archive's header, pipeline and segments.
    Inspect {
        /// Archive, `-` for standard input.
        input: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List the built-in presets.
    Presets,
    /// List the stage types this build knows.
    Stages,
}

#[derive(Args)]
struct Job {
    /// Element type of the raw input.
    #[arg(long, value_parser = ["f32", "f64"])]
    dtype: String,
    /// Shape in C order, slowest dimension first: 2161x4320 or 2161,4320. Exactly
    /// product × element size bytes are read: a regular file must have that size, a stream
    /// (`-`, FIFO, device) must deliver that many bytes, and anything after them is not read.
    #[arg(long)]
    shape: String,
    /// Built-in pipeline (see `fzmod presets`); the default applies when --config is not given.
    #[arg(long, conflicts_with = "config", default_value = fzmod::DEFAULT_PRESET)]
    preset: String,
    /// Pipeline from a TOML file (at most 1 MiB).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Error-bound mode: abs, rel (relative to the value range) or noa (= rel). Default: rel
    /// when -e is given; with neither -m nor -e, the pipeline's own bound (presets: rel 1e-3).
    /// -m without -e keeps the pipeline's value only if its bound has that mode.
    #[arg(short = 'm', long = "mode", allow_hyphen_values = true)]
    mode: Option<String>,
    /// Error bound (> 0). Default: the pipeline's own bound (presets: 1e-3).
    #[arg(short = 'e', long = "error-bound", allow_hyphen_values = true)]
    error_bound: Option<f64>,
    /// Put a Mask stage (docs/FORMAT.md 6.16) in front of the pipeline that masks NaN: masked
    /// points are stored as a run-length mask and come back bit for bit; a rel bound is then
    /// relative to the range of the unmasked values.
    #[arg(long)]
    mask_nan: bool,
    /// Put a Mask stage in front of the pipeline that masks this exact value (e.g. a CF
    /// _FillValue such as -1e10), and NaN too: as --mask-nan.
    #[arg(long, allow_hyphen_values = true, value_name = "VALUE")]
    fill_value: Option<f64>,
    /// auto (GPU when usable, else CPU), cpu, or cuda (alias gpu; fails without a GPU).
    #[arg(long, default_value = "auto", value_parser = backend_choice)]
    backend: BackendChoice,
    /// Fusion (same bytes either way): GPU fusion rules and fused CPU regions (a block of the
    /// input through a chain of stages on one core, in cache); `off` runs every stage on its own.
    #[arg(long, value_enum, default_value_t = Fusion::On)]
    fusion: Fusion,
    /// Write a chunked archive (format 2.0) of independent chunks of this shape, for region
    /// decode: `1024x1024`, `64,64,64`, or `auto` (slabs of up to 4 MiB along the slowest
    /// dimensions, the fastest whole; for arrays of 256 MiB and more near-cubic boxes of at most
    /// 1/320 of the array, 1–4 MiB; docs/FORMAT.md §8.4). Chunks compress in parallel on the
    /// CPU and on a GPU's lanes (one chunk's upload, another's kernels, a third's download at
    /// once); the bytes depend on neither. `bench --chunk` times chunked archives end to end.
    #[arg(long, value_name = "SHAPE|auto")]
    chunk: Option<String>,
    /// Chunk index class (with --chunk): implicit, verbatim, hybrid4 or hybrid8. Default: the
    /// most compact class that holds the chunk sizes.
    #[arg(long, value_name = "CLASS", requires = "chunk")]
    index: Option<String>,
    /// Write a streamed chunked archive (format 2.1, docs/FORMAT.md §8.5): the input is read,
    /// compressed and written slab by slab (one chunk extent along the first dimension, the
    /// whole array along the others), so memory stays about one slab whatever the input's
    /// size, from a file or a pipe to a file or a pipe. Chunks: --chunk (default auto). A
    /// relative bound needs the value range first: a regular file is read twice (the range,
    /// then the data: the chunks are those of --chunk without --stream); a pipe needs --range.
    #[arg(long)]
    stream: bool,
    /// With --stream and a relative bound: the value range MIN,MAX the bound is relative to
    /// (instead of a first pass over the input). Values outside it fail the run.
    #[arg(long, value_name = "MIN,MAX", requires = "stream", allow_hyphen_values = true)]
    range: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Fusion {
    On,
    Off,
}

impl From<Fusion> for RunOptions {
    fn from(f: Fusion) -> Self {
        RunOptions { fusion: matches!(f, Fusion::On) }
    }
}

#[derive(Args)]
struct Output {
    /// Print a human-readable report (to standard error when -o is `-`).
    #[arg(long)]
    report: bool,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Overwrite existing output files.
    #[arg(short, long)]
    force: bool,
    /// No progress indicator.
    #[arg(short, long)]
    quiet: bool,
    /// Print the progress of a streamed run (chunks done, MB/s) on standard error even when
    /// it is not a terminal or -q is given (on a terminal it is shown unless -q).
    #[arg(long)]
    progress: bool,
}

/// Backend names as the library spells them, so every front end accepts the same ones.
fn backend_choice(name: &str) -> Result<BackendChoice, fzmod::Error> {
    name.parse()
}

fn main() {
    keep_freed_memory();
    // The main thread is one of the pool's workers (RAYON_NUM_THREADS of them in all): a
    // compress or decompress starts its parallel loops right here instead of handing the walk
    // to a pool thread and sleeping until it is done, a wake-up per call that costs a visible
    // share of a small array's time on one thread.
    let _ = rayon::ThreadPoolBuilder::new().use_current_thread().build_global();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("fzmod: error: {e:#}");
        std::process::exit(1);
    }
}

/// Let glibc's malloc keep freed memory for the next call. By default a freed block of a few
/// hundred KiB or more is unmapped, or trimmed off the top of the heap, so every call of a
/// repeated run (`bench`, several files) faults its buffers' pages in afresh: a quarter of a
/// sub-megabyte array's compress time on one thread, and on many cores the part of a large
/// array's call that does not shrink with threads (the kernel clears each fresh page). Blocks
/// below 1 GiB now come from the heap, which keeps up to 2 GiB free; larger ones are still
/// mapped and returned.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters, under the allocator's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// Everything a compression job needs, resolved from the arguments.
struct Prepared {
    input: Buffer,
    shape: Vec<usize>,
    pipeline: Pipeline,
    backend: Backend,
    note: String,
    opts: RunOptions,
    /// --chunk: write a chunked archive.
    chunks: Option<fzmod::ChunkOptions>,
}

fn prepare(path: &Path, job: &Job, max_memory: u64) -> Result<Prepared> {
    let dtype = DType::parse(&job.dtype).context("--dtype")?;
    let shape = fzmod::parse_shape(&job.shape).with_context(|| format!("--shape {}", job.shape))?;
    let pipeline = job_pipeline(job, &job.preset, job.error_bound, &shape)?;
    if job.stream {
        bail!("--stream is for compress (roundtrip and bench hold the whole array in memory)");
    }
    let input = io::read_array(path, dtype, &shape, max_memory)?;
    let (backend, note) = Backend::select(job.backend)?;
    let chunks = chunk_options(job, &shape)?;
    Ok(Prepared { input, shape, pipeline, backend, note, opts: job.fusion.into(), chunks })
}

/// The job's --chunk and --index (`None` without --chunk).
fn chunk_options(job: &Job, shape: &[usize]) -> Result<Option<fzmod::ChunkOptions>> {
    let Some(text) = &job.chunk else { return Ok(None) };
    let chunk_shape = fzmod::parse_chunk_shape(text, shape).with_context(|| format!("--chunk {text}"))?;
    let d = shape.len().clamp(1, 4) as u8;
    let index = match &job.index {
        None => Vec::new(),
        Some(name) => vec![fzmod::archive::index::IndexClass::parse(name, d)
            .with_context(|| format!("--index {name}: expected implicit, verbatim, hybrid4 or hybrid8"))?],
    };
    Ok(Some(fzmod::ChunkOptions { chunk_shape, index }))
}

impl Prepared {
    /// Compress as the job asks: one archive, or a chunked one with --chunk.
    fn compress(&self) -> fzmod::Result<Vec<u8>> {
        match &self.chunks {
            None => self.pipeline.compress_with(&self.backend, &self.input, &self.shape, self.opts),
            Some(c) => self.pipeline.compress_chunked(&self.backend, &self.input, &self.shape, c, self.opts),
        }
    }
}

/// The job's pipeline (its --config, else `preset`) with the bound (-m and `error_bound`) and
/// element type set, finalized.
fn job_pipeline(job: &Job, preset: &str, error_bound: Option<f64>, shape: &[usize]) -> Result<Pipeline> {
    let dtype = DType::parse(&job.dtype).context("--dtype")?;
    let (pipeline, origin) = match &job.config {
        Some(file) => {
            let text = io::read_config(file)?;
            let origin = format!("pipeline file {}", file.display());
            (fzmod::from_toml(&text).with_context(|| origin.clone())?, origin)
        }
        None => {
            let pipeline = fzmod::preset(preset, shape).with_context(|| {
                format!("--preset {preset} (`fzmod presets` lists them; --config FILE.toml gives your own pipeline)")
            })?;
            (pipeline, format!("preset {preset}"))
        }
    };
    let (pipeline, origin) = if job.mask_nan || job.fill_value.is_some() {
        let spec = fzmod::MaskSpec::nan_and(job.fill_value);
        (
            fzmod::with_mask(&pipeline, spec).with_context(|| format!("--mask-nan/--fill-value for {origin}"))?,
            format!("{origin} (masked)"),
        )
    } else {
        (pipeline, origin)
    };
    let mut pipeline = pipeline;
    let mode = job.mode.as_deref().map(str::parse::<ErrorMode>).transpose().context("-m/--mode")?;
    let bound = ErrorBound::from_parts(mode, error_bound, pipeline.error_bound())
        .with_context(|| format!("error bound (-m/-e) for {origin}"))?;
    if let Some(b) = bound {
        pipeline
            .set_error_bound(b)
            .with_context(|| format!("error bound {} {:e} for {origin}", b.mode.name(), b.value))?;
    }
    pipeline.set_input_dtype(dtype).with_context(|| format!("--dtype {} for {origin}", job.dtype))?;
    pipeline.finalize().with_context(|| origin.clone())?;
    Ok(pipeline)
}

/// The decoder of a run: its backend, fusion option and the --max-memory limit, which the
/// library checks against the archive's needs before any stage runs.
fn decoder(backend: Backend, opts: RunOptions, max_memory: u64) -> Decoder {
    Decoder::new(backend).with_options(opts).with_limits(DecodeLimits::new(max_memory))
}

impl Output {
    /// The JSON report's destination, checked against the inputs and the data output.
    fn json_destination(&self, inputs: &[&Path], data: Option<&io::Destination>) -> Result<Option<io::Destination>> {
        let Some(path) = &self.json else { return Ok(None) };
        let json = io::destination(path, self.force, inputs)?;
        if let Some(data) = data {
            io::distinct(data, &json)?;
        }
        Ok(Some(json))
    }

    /// Write the data, the JSON report and the printed report (all or nothing: a report that
    /// cannot be printed fails the run before any regular file is published).
    fn finish(
        &self,
        report: &Report,
        data: Option<(&io::Destination, &[u8])>,
        json: Option<&io::Destination>,
    ) -> Result<()> {
        let json_text = serde_json::to_string_pretty(&report.to_json()?)?;
        let text = report.to_text();
        let printed = io::Destination::report(data.is_some_and(|(d, _)| d.is_stdout()));
        let mut outputs: Vec<(&io::Destination, &[u8])> = data.into_iter().collect();
        outputs.extend(json.map(|j| (j, json_text.as_bytes())));
        if self.report {
            outputs.push((&printed, text.as_bytes()));
        }
        io::write_all(&outputs)
    }

    /// As [`Output::finish`] for data already written to `sink` as it was produced: the JSON
    /// report and the printed report are written, then the staged data file is published.
    fn finish_streamed(
        &self,
        report: &Report,
        dest: &io::Destination,
        mut sink: io::Sink,
        json: Option<&io::Destination>,
    ) -> Result<()> {
        sink.flush_all()?;
        let json_text = serde_json::to_string_pretty(&report.to_json()?)?;
        let text = report.to_text();
        let printed = io::Destination::report(dest.is_stdout());
        let mut outputs: Vec<(&io::Destination, &[u8])> = json.map(|j| (j, json_text.as_bytes())).into_iter().collect();
        if self.report {
            outputs.push((&printed, text.as_bytes()));
        }
        io::write_all(&outputs)?;
        sink.commit()
    }

    /// Refuse a result outside its bound: print the report, write nothing, exit 1.
    fn check_bound(&self, report: &Report, data_on_stdout: bool) -> Result<()> {
        if let Some(why) = report.violation() {
            if self.report {
                // The violation is the error either way; a report that cannot be printed
                // adds to its message rather than replacing it.
                if let Err(e) = io::print(report.to_text().as_bytes(), data_on_stdout) {
                    bail!("{why}; nothing was written (and the report could not be printed: {e:#})");
                }
            }
            bail!("{why}; nothing was written");
        }
        Ok(())
    }
}

/// A spinner on standard error while one long step runs (only on a terminal, not with -q).
struct Spinner(Option<indicatif::ProgressBar>);

impl Spinner {
    fn start(message: String, quiet: bool) -> Spinner {
        use std::io::IsTerminal;
        if quiet || !std::io::stderr().is_terminal() {
            return Spinner(None);
        }
        let bar = indicatif::ProgressBar::new_spinner().with_message(message);
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Spinner(Some(bar))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

/// Run `f` under a spinner and measure its wall time.
fn timed<T>(message: String, quiet: bool, f: impl FnOnce() -> T) -> (T, f64) {
    let _spinner = Spinner::start(message, quiet);
    let start = Instant::now();
    let v = f();
    (v, start.elapsed().as_secs_f64())
}

fn run(cli: Cli) -> Result<()> {
    let max_memory = cli.max_memory.unwrap_or_else(|| DecodeLimits::default().max_memory);
    match cli.command {
        Command::Compress { input, output, job, out } => {
            let dest = io::destination(&output, out.force, &[&input])?;
            let json = out.json_destination(&[&input], Some(&dest))?;
            if job.stream {
                return stream::compress(&input, &job, &out, &dest, json.as_ref(), max_memory);
            }
            let p = prepare(&input, &job, max_memory)?;
            let message = format!("compressing {} on {}", shown(&input), p.backend.name());
            let (archive, secs) = timed(message, out.quiet, || p.compress());
            let archive = archive.with_context(|| format!("compressing {}", shown(&input)))?;
            let header = fzmod::inspect(&archive).with_context(|| format!("the archive of {}", shown(&input)))?;
            let mut r = Report::new(&header, archive.len(), shown(&input));
            (r.backend, r.backend_note) = (p.backend.name().into(), p.note);
            r.compress_seconds = Some(secs);
            out.finish(&r, Some((&dest, &archive)), json.as_ref())
        }
        Command::Decompress { input, output, compare, backend, fusion, region, out } => {
            let inputs: Vec<&Path> = std::iter::once(input.as_path()).chain(compare.as_deref()).collect();
            let dest = io::destination(&output, out.force, &inputs)?;
            let json = out.json_destination(&inputs, Some(&dest))?;
            if let Some(region) = region {
                let how = (backend, fusion.into(), max_memory);
                return decompress_region(&input, &region, how, &dest, json.as_ref(), &out);
            }
            let bytes = match io::open_archive(&input, max_memory)? {
                io::ArchiveInput::Stream(source) if compare.is_none() => {
                    let (backend, note) = Backend::select(backend)?;
                    let decoder = decoder(backend, fusion.into(), max_memory);
                    return stream::decompress(source, &input, decoder, note, &out, &dest, json.as_ref());
                }
                // --compare holds both arrays anyway: the streamed archive is read whole.
                io::ArchiveInput::Stream(source) => io::read_whole(source, &input, max_memory)?,
                io::ArchiveInput::Whole(bytes) => bytes,
            };
            let what = format!("archive {}", shown(&input));
            let (backend, note) = Backend::select(backend)?;
            let decoder = decoder(backend, fusion.into(), max_memory);
            // Parsed and checked once: the plan gives the header, then runs.
            let plan = decoder.plan(&bytes).with_context(|| what.clone())?;
            let shape: Vec<usize> = plan.header.shape.iter().map(|&d| d as usize).collect();
            if let Some(original) = &compare {
                io::check_size(original, plan.header.dtype, &shape).context("--compare")?;
            }
            let message = format!("decompressing {} on {}", shown(&input), decoder.backend().name());
            let (decoded, secs) = timed(message, out.quiet, || decoder.run(plan));
            let decoded = decoded.with_context(|| format!("decompressing {what}"))?;
            let mut r = Report::new(&decoded.header, bytes.len(), shown(&input));
            r.backend = decoded.backend.into();
            r.backend_note = note;
            r.decompress_seconds = Some(secs);
            if let Some(original_path) = &compare {
                let original = io::read_array(original_path, decoded.header.dtype, &shape, max_memory)?;
                let quality = fzmod::compare(&original, &decoded.data)
                    .with_context(|| format!("comparing {} with {}", shown(&input), shown(original_path)))?;
                r.set_quality(quality);
            }
            out.check_bound(&r, dest.is_stdout())?;
            out.finish(&r, Some((&dest, &decoded.data.le_bytes())), json.as_ref())
        }
        Command::Roundtrip { input, output, job, out } => {
            let dest = output.map(|o| io::destination(&o, out.force, &[&input])).transpose()?;
            let json = out.json_destination(&[&input], dest.as_ref())?;
            let p = prepare(&input, &job, max_memory)?;
            let message = format!("compressing {} on {}", shown(&input), p.backend.name());
            let (archive, c_secs) = timed(message, out.quiet, || p.compress());
            let archive = archive.with_context(|| format!("compressing {}", shown(&input)))?;
            let what = format!("the new archive of {}", shown(&input));
            let decoder = decoder(p.backend.clone(), p.opts, max_memory);
            let (decoded, d_secs) = timed("decompressing".into(), out.quiet, || decoder.decompress(&archive));
            let decoded = decoded.with_context(|| format!("decompressing {what}"))?;
            let mut r = Report::new(&decoded.header, archive.len(), shown(&input));
            (r.backend, r.backend_note) = (p.backend.name().into(), p.note);
            r.compress_seconds = Some(c_secs);
            r.decompress_seconds = Some(d_secs);
            let quality = fzmod::compare(&p.input, &decoded.data)
                .with_context(|| format!("comparing {} with its reconstruction", shown(&input)))?;
            r.set_quality(quality);
            let on_stdout = dest.as_ref().is_some_and(io::Destination::is_stdout);
            out.check_bound(&r, on_stdout)?;
            out.finish(&r, dest.as_ref().map(|d| (d, archive.as_slice())), json.as_ref())
        }
        Command::Bench { input, job, runs, json, force, sweep: Some(bounds), presets, plot } => {
            let json = json.map(|j| io::destination(&j, force, &[&input])).transpose()?;
            let plot = plot.map(|p| io::destination(&p, force, &[&input])).transpose()?;
            let sweep = Sweep { bounds, presets, json, plot };
            bench_sweep(&input, &job, runs as usize, &sweep, max_memory)
        }
        Command::Bench { input, job, runs, json, force, .. } => {
            let json = json.map(|j| io::destination(&j, force, &[&input])).transpose()?;
            bench(&input, &job, runs as usize, json.as_ref(), max_memory)
        }
        Command::Inspect { input, json } => {
            let bytes = io::read_archive(&input, max_memory)?;
            let header = fzmod::inspect(&bytes).with_context(|| format!("archive {}", shown(&input)))?;
            let text = if json {
                serde_json::to_string_pretty(&inspect::to_json(&header, bytes.len())?)? + "\n"
            } else {
                inspect::to_text(&header, bytes.len())
            };
            io::print(text.as_bytes(), false)
        }
        Command::Presets => {
            let text: String = fzmod::PRESETS
                .iter()
                .map(|p| {
                    let default = if p.name == fzmod::DEFAULT_PRESET { " (default)" } else { "" };
                    format!("{:<16} {}{default}\n", p.name, p.summary)
                })
                .collect();
            io::print(text.as_bytes(), false)
        }
        Command::Stages => {
            let text: String = fzmod::stages::registry()
                .iter()
                .map(|k| format!("{:<16} id {:<3} {}\n", k.name, k.id, k.summary))
                .collect();
            io::print(text.as_bytes(), false)
        }
    }
}

/// Values a region decode produces below which `--backend auto` decodes on the CPU: starting
/// a CUDA context costs about 0.3 s (measured on the H100 machine), more than the CPU's cores
/// need for this much (docs/PERFORMANCE.md, "Region decode").
const REGION_ON_CPU_BELOW: u64 = 256 << 20;

/// `decompress --region`: read the header, then only the chunks the box meets (a regular
/// file is read at offsets; a stream is read whole first). `how`: the backend asked for, run
/// options and the memory limit.
fn decompress_region(
    input: &Path,
    region: &str,
    how: (BackendChoice, RunOptions, u64),
    dest: &io::Destination,
    json: Option<&io::Destination>,
    out: &Output,
) -> Result<()> {
    let (choice, opts, max_memory) = how;
    use fzmod::archive::source::{ArchiveSource, CountingSource, FileSource};
    let what = format!("archive {}", shown(input));
    let file = (!io::is_stdio(input))
        .then(|| std::fs::File::open(input))
        .transpose()
        .with_context(|| format!("cannot read {}", shown(input)))?
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
    let bytes;
    let source: Box<dyn ArchiveSource> = match file {
        Some(f) => Box::new(FileSource::new(f).with_context(|| what.clone())?),
        None => {
            bytes = io::read_archive(input, max_memory)?;
            Box::new(bytes.as_slice())
        }
    };
    let counting = CountingSource::new(source.as_ref());
    let head = fzmod::graph::chunks::open(&counting).with_context(|| what.clone())?;
    let ranges = fzmod::parse_region(region, &head.header.shape)
        .with_context(|| format!("--region {region} (the archive's shape is {:?})", head.header.shape))?;
    // What the decode produces: the chunks the box meets, or the whole array of an unchunked
    // archive (decoded whole, then sliced).
    let values = if head.header.chunking.is_some() {
        ranges.iter().map(|r| r.end - r.start).product::<u64>()
    } else {
        head.header.shape.iter().product()
    };
    let decoded_bytes = values.saturating_mul(head.header.dtype.size() as u64);
    let (backend, note) = if choice == BackendChoice::Auto && decoded_bytes < REGION_ON_CPU_BELOW {
        (Backend::Cpu, format!("auto: a region of {decoded_bytes} bytes decodes on the CPU (a CUDA start costs more)"))
    } else {
        Backend::select(choice)?
    };
    let decoder = decoder(backend, opts, max_memory);
    let message = format!("decompressing a region of {} on {}", shown(input), decoder.backend().name());
    let (decoded, secs) = timed(message, out.quiet, || decoder.region_from(&counting, &ranges));
    let decoded = decoded.with_context(|| format!("decompressing {what}"))?;
    let mut r = Report::new(&decoded.header, counting.len() as usize, shown(input));
    r.backend = decoded.backend.into();
    r.backend_note = format!(
        "{note}{}region {region}: {} values, {} of {} archive bytes read",
        if note.is_empty() { "" } else { "; " },
        decoded.data.len(),
        counting.bytes_read(),
        counting.len()
    );
    r.decompress_seconds = Some(secs);
    out.finish(&r, Some((dest, &decoded.data.le_bytes())), json)
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
    (median, v[0], v[v.len() - 1])
}

fn bench(input: &Path, job: &Job, runs: usize, json: Option<&io::Destination>, max_memory: u64) -> Result<()> {
    let p = prepare(input, job, max_memory)?;
    let bytes = p.input.byte_len() as f64;
    let message = format!("benchmarking {} runs on {}", runs, p.backend.name());
    let (timing, _) = timed(message, false, || match &p.chunks {
        Some(c) => p.pipeline.bench_chunked_on(&p.backend, &p.input, &p.shape, c, runs, p.opts),
        None => p.pipeline.bench_on(&p.backend, &p.input, &p.shape, runs, p.opts),
    });
    let timing = timing.with_context(|| format!("benchmarking {}", shown(input)))?;
    let quality = fzmod::compare(&p.input, &timing.decoded)?;
    let gb = |secs: &[f64]| stats(secs.iter().map(|s| bytes / s / 1e9).collect());
    let (c_med, c_min, c_max) = gb(&timing.compress_seconds);
    let (d_med, d_min, d_max) = gb(&timing.decompress_seconds);
    let ratio = bytes / timing.archive_bytes as f64;
    let bound = p.pipeline.error_bound().map_or("none".into(), |b| format!("{} {:e}", b.mode.name(), b.value));
    let mut text = String::new();
    let mut line = |l: String| {
        text += &l;
        text.push('\n');
    };
    line(format!("dataset      {} ({} {})", shown(input), p.input.dtype(), job.shape));
    line(format!("pipeline     {}", if p.pipeline.preset.is_empty() { "custom" } else { &p.pipeline.preset }));
    line(format!("backend      {} ({}) — {}", p.backend.name(), p.backend.device_name(), timing.method));
    line(format!("bound        {bound}"));
    line(format!("ratio        {}   max abs error {}", num(ratio), num(quality.max_abs_error)));
    line(format!("runs         {runs} (after 1 warm-up)"));
    line(format!("compress     median {} GB/s  (min {}, max {})", num(c_med), num(c_min), num(c_max)));
    line(format!("decompress   median {} GB/s  (min {}, max {})", num(d_med), num(d_min), num(d_max)));
    for note in &timing.notes {
        line(format!("device path  {note}"));
    }
    if let Some((c, d)) = timing.end_to_end_seconds {
        line(format!(
            "end-to-end   compress {} / decompress {} GB/s including transfers",
            num(bytes / c / 1e9),
            num(bytes / d / 1e9)
        ));
    }
    if let Some(peak) = timing.peak_device {
        let mib = |b: u64| num(b as f64 / (1 << 20) as f64);
        line(format!("peak device  compress {} MiB, decompress {} MiB", mib(peak.compress), mib(peak.decompress)));
    }
    let json_text = json
        .map(|_| {
            let v = serde_json::json!({
                "dataset": shown(input), "dtype": p.input.dtype().toml_name(), "shape": job.shape,
                "preset": p.pipeline.preset, "backend": p.backend.name(), "device": p.backend.device_name(),
                "timing_method": timing.method, "runs": runs, "ratio": ratio, "max_abs_error": quality.max_abs_error,
                "compress_gbps": {"median": c_med, "min": c_min, "max": c_max},
                "decompress_gbps": {"median": d_med, "min": d_min, "max": d_max},
                "end_to_end_seconds": timing.end_to_end_seconds.map(|(c, d)| serde_json::json!({"compress": c, "decompress": d})),
                "peak_device_bytes": timing.peak_device.map(|p| serde_json::json!({"compress": p.compress, "decompress": p.decompress})),
                "device_path": timing.notes,
            });
            serde_json::to_string_pretty(&v)
        })
        .transpose()?;
    // The table and the JSON file succeed or fail together, like a compress run's outputs.
    let table = io::Destination::report(false);
    let mut outputs: Vec<(&io::Destination, &[u8])> = vec![(&table, text.as_bytes())];
    if let (Some(dest), Some(j)) = (json, &json_text) {
        outputs.push((dest, j.as_bytes()));
    }
    io::write_all(&outputs)
}

/// What `bench --sweep` runs and where its results go.
struct Sweep {
    bounds: Vec<f64>,
    presets: Option<Vec<String>>,
    json: Option<io::Destination>,
    plot: Option<io::Destination>,
}

/// Every pipeline of the sweep at every bound, on one field read once: a table on standard
/// output, and the JSON and SVG files when asked for. Progress goes to standard error.
fn bench_sweep(input: &Path, job: &Job, runs: usize, sweep: &Sweep, max_memory: u64) -> Result<()> {
    if job.chunk.is_some() {
        bail!("a sweep times unchunked archives; --chunk is for a single bench, compress and roundtrip");
    }
    let dtype = DType::parse(&job.dtype).context("--dtype")?;
    let shape = fzmod::parse_shape(&job.shape).with_context(|| format!("--shape {}", job.shape))?;
    let data = io::read_array(input, dtype, &shape, max_memory)?;
    let (backend, _) = Backend::select(job.backend)?;
    let names: Vec<String> = match (&job.config, &sweep.presets) {
        (Some(file), _) => vec![file.display().to_string()],
        (None, Some(names)) => names.clone(),
        (None, None) => fzmod::PRESETS.iter().map(|p| p.name.to_string()).collect(),
    };
    let bytes = data.byte_len() as f64;
    let mut points = Vec::new();
    for name in &names {
        for &bound in &sweep.bounds {
            let pipeline = job_pipeline(job, name, Some(bound), &shape)?;
            let mode = pipeline.error_bound().map_or("none", |b| b.mode.name()).to_string();
            eprintln!("sweep: {name} {mode} {bound:e} ({} runs on {})", runs, backend.name());
            let timing = pipeline
                .bench_on(&backend, &data, &shape, runs, job.fusion.into())
                .with_context(|| format!("benchmarking {name} at {bound:e} on {}", shown(input)))?;
            let quality = fzmod::compare(&data, &timing.decoded)?;
            let gbps = |secs: &[f64]| stats(secs.iter().map(|s| bytes / s / 1e9).collect()).0;
            let ratio = bytes / timing.archive_bytes as f64;
            points.push(sweep::Point {
                pipeline: name.clone(),
                mode,
                bound,
                ratio,
                bits_per_value: 8.0 * dtype.size() as f64 / ratio,
                psnr_db: quality.psnr_db,
                max_abs_error: quality.max_abs_error,
                compress_gbps: gbps(&timing.compress_seconds),
                decompress_gbps: gbps(&timing.decompress_seconds),
            });
        }
    }
    let title = format!("{} ({} {}), {} backend", shown(input), dtype, job.shape, backend.name());
    let table = format!("{title}\n{}", sweep::table(&points));
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "dataset": shown(input), "backend": backend.name(),
        "points": points.iter().map(sweep::Point::to_json).collect::<Vec<_>>(),
    }))?;
    let svg = sweep::svg(&points, &title);
    let report = io::Destination::report(false);
    let mut outputs: Vec<(&io::Destination, &[u8])> = vec![(&report, table.as_bytes())];
    if let Some(dest) = &sweep.json {
        outputs.push((dest, json.as_bytes()));
    }
    if let Some(dest) = &sweep.plot {
        outputs.push((dest, svg.as_bytes()));
    }
    io::write_all(&outputs)
}
