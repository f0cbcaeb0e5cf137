//! `fzmod`: compress, decompress, inspect and benchmark `.fzm` archives.

mod inspect;
mod io;
mod report;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use fzmod::backend::{Backend, BackendChoice};
use fzmod::{Buffer, DType, ErrorBound, ErrorMode, Pipeline, RunOptions};
use io::shown;
use report::{num, Report};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How outputs are written (shown by --help).
const OUTPUTS: &str = "OUTPUTS: `-` is standard output. An existing regular file is refused unless --force; \
a device or FIFO (e.g. /dev/null) is written through, never replaced; a symlink is followed; the input \
itself is refused. Regular files are written as a temporary file beside the target and renamed into \
place only when everything (compare, JSON report) succeeded, so a failed run leaves no files behind.";

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
        #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
        backend: BackendArg,
        /// GPU fusion rules (same output either way).
        #[arg(long, value_enum, default_value_t = Fusion::On)]
        fusion: Fusion,
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
    /// Built-in pipeline (see `fzmod presets`).
    #[arg(long, conflicts_with = "config", required_unless_present = "config")]
    preset: Option<String>,
    /// Pipeline from a TOML file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Error-bound mode: abs, rel (relative to the value range) or noa (= rel). Default: rel
    /// when -e is given; with neither -m nor -e, the pipeline's own bound (presets: rel 1e-3).
    #[arg(short = 'm', long = "mode", allow_hyphen_values = true)]
    mode: Option<String>,
    /// Error bound (> 0). Default: the pipeline's own bound (presets: 1e-3).
    #[arg(short = 'e', long = "error-bound", allow_hyphen_values = true)]
    error_bound: Option<f64>,
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    backend: BackendArg,
    /// GPU fusion rules (same bytes either way): `off` runs every stage's own kernels.
    #[arg(long, value_enum, default_value_t = Fusion::On)]
    fusion: Fusion,
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
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Auto,
    Cpu,
    Cuda,
}

impl From<BackendArg> for BackendChoice {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Cpu => BackendChoice::Cpu,
            BackendArg::Cuda => BackendChoice::Cuda,
        }
    }
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("fzmod: error: {e:#}");
        std::process::exit(1);
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
}

fn prepare(path: &Path, job: &Job) -> Result<Prepared> {
    let dtype = DType::parse(&job.dtype)?;
    let shape = fzmod::parse_shape(&job.shape)?;
    let mut pipeline = match (&job.preset, &job.config) {
        (Some(name), _) => fzmod::preset(name, &shape)?,
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            fzmod::from_toml(&text).with_context(|| format!("in {}", file.display()))?
        }
        (None, None) => bail!("give --preset or --config"),
    };
    let bound = match (job.mode.as_deref(), job.error_bound) {
        (mode, Some(value)) => {
            Some(ErrorBound::new(mode.map(ErrorMode::parse).transpose()?.unwrap_or(ErrorMode::Rel), value)?)
        }
        (Some(mode), None) => {
            let value =
                pipeline.error_bound().context("-m given without -e, and the pipeline has no default bound")?.value;
            Some(ErrorBound::new(ErrorMode::parse(mode)?, value)?)
        }
        (None, None) => None,
    };
    if let Some(b) = bound {
        pipeline.set_error_bound(b)?;
    }
    pipeline.set_input_dtype(dtype)?;
    pipeline.finalize()?;
    let input = io::read_array(path, dtype, &shape)?;
    let (backend, note) = Backend::select(job.backend.into())?;
    Ok(Prepared { input, shape, pipeline, backend, note, opts: job.fusion.into() })
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

    /// Write the data and the JSON report (all or nothing), then print the report.
    fn finish(
        &self,
        report: &Report,
        data: Option<(&io::Destination, &[u8])>,
        json: Option<&io::Destination>,
    ) -> Result<()> {
        let text = serde_json::to_string_pretty(&report.to_json())?;
        let mut outputs: Vec<(&io::Destination, &[u8])> = data.into_iter().collect();
        outputs.extend(json.map(|j| (j, text.as_bytes())));
        io::write_all(&outputs)?;
        self.print(report, data.is_some_and(|(d, _)| d.is_stdout()));
        Ok(())
    }

    /// Print the human report, on standard error when standard output carries the data.
    fn print(&self, report: &Report, data_on_stdout: bool) {
        if !self.report {
            return;
        }
        if data_on_stdout {
            report.print(&mut std::io::stderr().lock());
        } else {
            report.print(&mut std::io::stdout().lock());
        }
    }

    /// Refuse a result outside its bound: print the report, write nothing, exit 1.
    fn check_bound(&self, report: &Report, data_on_stdout: bool) -> Result<()> {
        if let Some(why) = report.violation() {
            self.print(report, data_on_stdout);
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
    match cli.command {
        Command::Compress { input, output, job, out } => {
            let dest = io::destination(&output, out.force, &[&input])?;
            let json = out.json_destination(&[&input], Some(&dest))?;
            let p = prepare(&input, &job)?;
            let message = format!("compressing {} on {}", shown(&input), p.backend.name());
            let (archive, secs) =
                timed(message, out.quiet, || p.pipeline.compress_with(&p.backend, &p.input, &p.shape, p.opts));
            let archive = archive.with_context(|| format!("compressing {}", shown(&input)))?;
            let header = fzmod::inspect(&archive)?;
            let mut r = Report::from_header(&header);
            r.input = shown(&input);
            (r.backend, r.backend_note) = (p.backend.name().into(), p.note);
            r.compressed_bytes = archive.len() as u64;
            r.compress_seconds = Some(secs);
            out.finish(&r, Some((&dest, &archive)), json.as_ref())
        }
        Command::Decompress { input, output, compare, backend, fusion, out } => {
            let inputs: Vec<&Path> = std::iter::once(input.as_path()).chain(compare.as_deref()).collect();
            let dest = io::destination(&output, out.force, &inputs)?;
            let json = out.json_destination(&inputs, Some(&dest))?;
            let bytes = io::read_archive(&input)?;
            let header = fzmod::inspect(&bytes).with_context(|| format!("decompressing {}", input.display()))?;
            let shape: Vec<usize> = header.shape.iter().map(|&d| d as usize).collect();
            if let Some(original) = &compare {
                io::check_size(original, header.dtype, &shape)?;
            }
            let (backend, note) = Backend::select(backend.into())?;
            let message = format!("decompressing {} on {}", input.display(), backend.name());
            let (decoded, secs) = timed(message, out.quiet, || fzmod::decompress_with(&backend, &bytes, fusion.into()));
            let decoded = decoded.with_context(|| format!("decompressing {}", input.display()))?;
            let mut r = Report::from_header(&decoded.header);
            r.input = input.display().to_string();
            r.backend = decoded.backend.into();
            r.backend_note = note;
            r.compressed_bytes = bytes.len() as u64;
            r.decompress_seconds = Some(secs);
            if let Some(original) = &compare {
                let original = io::read_array(original, decoded.header.dtype, &shape)?;
                r.quality = Some(fzmod::compare(&original, &decoded.data)?);
            }
            out.check_bound(&r, dest.is_stdout())?;
            out.finish(&r, Some((&dest, &decoded.data.to_le_bytes())), json.as_ref())
        }
        Command::Roundtrip { input, output, job, out } => {
            let dest = output.map(|o| io::destination(&o, out.force, &[&input])).transpose()?;
            let json = out.json_destination(&[&input], dest.as_ref())?;
            let p = prepare(&input, &job)?;
            let message = format!("compressing {} on {}", shown(&input), p.backend.name());
            let (archive, c_secs) =
                timed(message, out.quiet, || p.pipeline.compress_with(&p.backend, &p.input, &p.shape, p.opts));
            let archive = archive?;
            let (decoded, d_secs) =
                timed("decompressing".into(), out.quiet, || fzmod::decompress_with(&p.backend, &archive, p.opts));
            let decoded = decoded?;
            let mut r = Report::from_header(&decoded.header);
            r.input = shown(&input);
            (r.backend, r.backend_note) = (p.backend.name().into(), p.note);
            r.compressed_bytes = archive.len() as u64;
            r.compress_seconds = Some(c_secs);
            r.decompress_seconds = Some(d_secs);
            r.quality = Some(fzmod::compare(&p.input, &decoded.data)?);
            let on_stdout = dest.as_ref().is_some_and(io::Destination::is_stdout);
            out.check_bound(&r, on_stdout)?;
            out.finish(&r, dest.as_ref().map(|d| (d, archive.as_slice())), json.as_ref())
        }
        Command::Bench { input, job, runs, json, force } => {
            let json = json.map(|j| io::destination(&j, force, &[&input])).transpose()?;
            bench(&input, &job, runs as usize, json.as_ref())
        }
        Command::Inspect { input, json } => {
            let bytes = io::read_archive(&input)?;
            let header = fzmod::inspect(&bytes).with_context(|| format!("in {}", input.display()))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&inspect::to_json(&header, bytes.len()))?);
            } else {
                print!("{}", inspect::to_text(&header, bytes.len()));
            }
            Ok(())
        }
        Command::Presets => {
            for p in fzmod::PRESETS {
                println!("{:<16} {}", p.name, p.summary);
            }
            Ok(())
        }
        Command::Stages => {
            for k in fzmod::stage::registry() {
                println!("{:<16} id {:<3} {}", k.name, k.id, k.summary);
            }
            Ok(())
        }
    }
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
    (median, v[0], v[v.len() - 1])
}

fn bench(input: &Path, job: &Job, runs: usize, json: Option<&io::Destination>) -> Result<()> {
    let p = prepare(input, job)?;
    let bytes = p.input.byte_len() as f64;
    let message = format!("benchmarking {} runs on {}", runs, p.backend.name());
    let (timing, _) = timed(message, false, || p.pipeline.bench_on(&p.backend, &p.input, &p.shape, runs, p.opts));
    let timing = timing?;
    let quality = fzmod::compare(&p.input, &timing.decoded)?;
    let gb = |secs: &[f64]| stats(secs.iter().map(|s| bytes / s / 1e9).collect());
    let (c_med, c_min, c_max) = gb(&timing.compress_seconds);
    let (d_med, d_min, d_max) = gb(&timing.decompress_seconds);
    let ratio = bytes / timing.archive_bytes as f64;
    let bound = p.pipeline.error_bound().map_or("none".into(), |b| format!("{} {:e}", b.mode.name(), b.value));
    println!("dataset      {} ({} {})", shown(input), p.input.dtype(), job.shape);
    println!("pipeline     {}", if p.pipeline.preset.is_empty() { "custom" } else { &p.pipeline.preset });
    println!("backend      {} ({}) — {}", p.backend.name(), p.backend.device_name(), timing.method);
    println!("bound        {bound}");
    println!("ratio        {}   max abs error {}", num(ratio), num(quality.max_abs_error));
    println!("runs         {runs} (after 1 warm-up)");
    println!("compress     median {} GB/s  (min {}, max {})", num(c_med), num(c_min), num(c_max));
    println!("decompress   median {} GB/s  (min {}, max {})", num(d_med), num(d_min), num(d_max));
    for note in &timing.notes {
        println!("device path  {note}");
    }
    if let Some((c, d)) = timing.end_to_end_seconds {
        println!(
            "end-to-end   compress {} / decompress {} GB/s including transfers",
            num(bytes / c / 1e9),
            num(bytes / d / 1e9)
        );
    }
    if let Some(peak) = timing.peak_device_bytes {
        println!("peak device  {} MiB", num(peak as f64 / (1 << 20) as f64));
    }
    if let Some(dest) = json {
        let v = serde_json::json!({
            "dataset": shown(input), "dtype": p.input.dtype().short_name(), "shape": job.shape,
            "preset": p.pipeline.preset, "backend": p.backend.name(), "device": p.backend.device_name(),
            "timing_method": timing.method, "runs": runs, "ratio": ratio, "max_abs_error": quality.max_abs_error,
            "compress_gbps": {"median": c_med, "min": c_min, "max": c_max},
            "decompress_gbps": {"median": d_med, "min": d_min, "max": d_max},
            "end_to_end_seconds": timing.end_to_end_seconds.map(|(c, d)| serde_json::json!({"compress": c, "decompress": d})),
            "peak_device_bytes": timing.peak_device_bytes, "device_path": timing.notes,
        });
        io::write_all(&[(dest, serde_json::to_string_pretty(&v)?.as_bytes())])?;
    }
    Ok(())
}
