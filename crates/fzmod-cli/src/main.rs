//! `fzmod`: compress, decompress, inspect and benchmark `.fzm` archives.

mod inspect;
mod io;
mod report;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use fzmod::backend::{Backend, BackendChoice};
use fzmod::{Buffer, DType, ErrorBound, ErrorMode, Pipeline, RunOptions};
use report::Report;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "fzmod", version, about = "Error-bounded compression pipelines for scientific arrays")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compress a raw little-endian array into a .fzm archive.
    Compress {
        input: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        job: Job,
        #[command(flatten)]
        out: Output,
    },
    /// Decompress a .fzm archive into a raw little-endian array.
    Decompress {
        input: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
        /// Original raw file to measure the error against.
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
    /// Compress, decompress and compare in one go (the archive is written with -o).
    Roundtrip {
        input: PathBuf,
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
        /// Timed repetitions (after one warm-up).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Show an archive's header, pipeline and segments.
    Inspect {
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
    /// Shape in C order, slowest dimension first, e.g. 2161x4320.
    #[arg(long)]
    shape: String,
    /// Built-in pipeline (see `fzmod presets`).
    #[arg(long, conflicts_with = "config", required_unless_present = "config")]
    preset: Option<String>,
    /// Pipeline from a TOML file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Error-bound mode: abs, rel (relative to the value range) or noa (= rel).
    #[arg(short = 'm', long = "mode", allow_hyphen_values = true)]
    mode: Option<String>,
    /// Error bound (> 0).
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
    /// Print a human-readable report.
    #[arg(long)]
    report: bool,
    /// Write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
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

fn emit(report: &Report, out: &Output) -> Result<()> {
    if out.report {
        report.print();
    }
    if let Some(path) = &out.json {
        let text = serde_json::to_string_pretty(&report.to_json())?;
        io::write_atomically(path, text.as_bytes())?;
    }
    Ok(())
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let v = f();
    (v, start.elapsed().as_secs_f64())
}

fn progress(msg: &str) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!("fzmod: {msg}");
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Compress { input, output, job, out } => {
            let p = prepare(&input, &job)?;
            progress(&format!("compressing {} on {}", input.display(), p.backend.name()));
            let (archive, secs) = timed(|| p.pipeline.compress_with(&p.backend, &p.input, &p.shape, p.opts));
            let archive = archive.with_context(|| format!("compressing {}", input.display()))?;
            io::write_atomically(&output, &archive)?;
            let header = fzmod::inspect(&archive)?;
            let mut r = Report::from_header(&header);
            r.input = input.display().to_string();
            (r.backend, r.backend_note) = (p.backend.name().into(), p.note);
            r.compressed_bytes = archive.len() as u64;
            r.compress_seconds = Some(secs);
            emit(&r, &out)
        }
        Command::Decompress { input, output, compare, backend, fusion, out } => {
            let bytes = std::fs::read(&input).with_context(|| format!("cannot read {}", input.display()))?;
            let (backend, note) = Backend::select(backend.into())?;
            progress(&format!("decompressing {} on {}", input.display(), backend.name()));
            let (decoded, secs) = timed(|| fzmod::decompress_with(&backend, &bytes, fusion.into()));
            let decoded = decoded.with_context(|| format!("decompressing {}", input.display()))?;
            io::write_atomically(&output, &decoded.data.to_le_bytes())?;
            let mut r = Report::from_header(&decoded.header);
            r.input = input.display().to_string();
            r.backend = decoded.backend.into();
            r.backend_note = note;
            r.compressed_bytes = bytes.len() as u64;
            r.decompress_seconds = Some(secs);
            if let Some(orig) = compare {
                let shape: Vec<usize> = decoded.header.shape.iter().map(|&d| d as usize).collect();
                let original = io::read_array(&orig, decoded.header.dtype, &shape)?;
                r.quality = Some(fzmod::compare(&original, &decoded.data)?);
            }
            emit(&r, &out)
        }
        Command::Roundtrip { input, output, job, out } => {
            let p = prepare(&input, &job)?;
            progress(&format!("compressing {} on {}", input.display(), p.backend.name()));
            let (archive, c_secs) = timed(|| p.pipeline.compress_with(&p.backend, &p.input, &p.shape, p.opts));
            let archive = archive?;
            if let Some(path) = &output {
                io::write_atomically(path, &archive)?;
            }
            progress("decompressing");
            let (decoded, d_secs) = timed(|| fzmod::decompress_with(&p.backend, &archive, p.opts));
            let decoded = decoded?;
            let mut r = Report::from_header(&decoded.header);
            r.input = input.display().to_string();
            (r.backend, r.backend_note) = (p.backend.name().into(), p.note);
            r.compressed_bytes = archive.len() as u64;
            r.compress_seconds = Some(c_secs);
            r.decompress_seconds = Some(d_secs);
            let q = fzmod::compare(&p.input, &decoded.data)?;
            r.quality = Some(q);
            emit(&r, &out)?;
            let bound = r.error_bound_abs.unwrap_or(0.0);
            if q.max_abs_error > bound || q.special_mismatches > 0 {
                bail!("round trip violated the bound: max error {:e} > {bound:e}", q.max_abs_error);
            }
            Ok(())
        }
        Command::Bench { input, job, runs, json } => bench(&input, &job, runs.max(1), json.as_deref()),
        Command::Inspect { input, json } => {
            let bytes = std::fs::read(&input).with_context(|| format!("cannot read {}", input.display()))?;
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

fn bench(input: &Path, job: &Job, runs: usize, json: Option<&Path>) -> Result<()> {
    let p = prepare(input, job)?;
    let bytes = p.input.byte_len() as f64;
    let timing = p.pipeline.bench_on(&p.backend, &p.input, &p.shape, runs, p.opts)?;
    let quality = fzmod::compare(&p.input, &timing.decoded)?;
    let gb = |secs: &[f64]| stats(secs.iter().map(|s| bytes / s / 1e9).collect());
    let (c_med, c_min, c_max) = gb(&timing.compress_seconds);
    let (d_med, d_min, d_max) = gb(&timing.decompress_seconds);
    let ratio = bytes / timing.archive_bytes as f64;
    println!("dataset      {} ({} {})", input.display(), p.input.dtype(), job.shape);
    println!("pipeline     {}", if p.pipeline.preset.is_empty() { "custom" } else { &p.pipeline.preset });
    println!("backend      {} ({}) — {}", p.backend.name(), p.backend.device_name(), timing.method);
    println!("bound        {:?}", p.pipeline.error_bound().map(|b| format!("{} {:e}", b.mode.name(), b.value)));
    println!("ratio        {ratio:.4}   max abs error {:e}", quality.max_abs_error);
    println!("runs         {runs} (after 1 warm-up)");
    println!("compress     median {c_med:.3} GB/s  (min {c_min:.3}, max {c_max:.3})");
    println!("decompress   median {d_med:.3} GB/s  (min {d_min:.3}, max {d_max:.3})");
    for note in &timing.notes {
        println!("device path  {note}");
    }
    if let Some((c, d)) = timing.end_to_end_seconds {
        println!(
            "end-to-end   compress {:.3} / decompress {:.3} GB/s including transfers",
            bytes / c / 1e9,
            bytes / d / 1e9
        );
    }
    if let Some(peak) = timing.peak_device_bytes {
        println!("peak device  {:.1} MiB", peak as f64 / (1 << 20) as f64);
    }
    if let Some(path) = json {
        let v = serde_json::json!({
            "dataset": input.display().to_string(), "dtype": p.input.dtype().short_name(), "shape": job.shape,
            "preset": p.pipeline.preset, "backend": p.backend.name(), "device": p.backend.device_name(),
            "timing_method": timing.method, "runs": runs, "ratio": ratio, "max_abs_error": quality.max_abs_error,
            "compress_gbps": {"median": c_med, "min": c_min, "max": c_max},
            "decompress_gbps": {"median": d_med, "min": d_min, "max": d_max},
            "end_to_end_seconds": timing.end_to_end_seconds.map(|(c, d)| serde_json::json!({"compress": c, "decompress": d})),
            "peak_device_bytes": timing.peak_device_bytes, "device_path": timing.notes,
        });
        io::write_atomically(path, serde_json::to_string_pretty(&v)?.as_bytes())?;
    }
    Ok(())
}
