//! The `fzmod` binary: happy path with the shipped field, and bad arguments that must fail
//! with one clear line, a non-zero exit and no output file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIELD: &str = "data/navy_uwnd_132x73x144.f32";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fzmod-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

fn fzmod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fzmod")).current_dir(repo()).args(args).output().unwrap()
}

/// Start with standard input, output and error piped.
fn spawn_piped(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_fzmod"))
        .current_dir(repo())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Run with `stdin` piped in.
fn fzmod_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = spawn_piped(args);
    // The child may stop reading early (that is the point of a bound): ignore a broken pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

/// A compress command line for the shipped field, writing to `out`, plus `extra` arguments.
fn compress_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["compress", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--preset", "cuszp", "-o", out];
    args.extend_from_slice(extra);
    args
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// An error inside a stage names the file and the stage and says its cause once.
#[test]
fn a_stage_error_is_one_line_that_says_it_once() {
    let out = scratch("tiny-bound.fzm");
    let o = fzmod(&compress_args(out.to_str().unwrap(), &["-m", "abs", "-e", "1e-300"]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(FIELD) && err.contains("stage 'quant'"), "{err}");
    assert_eq!(err.matches("not a finite normal number").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!out.exists());
}

#[test]
fn roundtrip_reports_ratio_error_and_speed() {
    let json = scratch("rt.json");
    let archive = scratch("rt.fzm");
    let o = fzmod(&[
        "roundtrip",
        FIELD,
        "--dtype",
        "f32",
        "--shape",
        "132x73x144",
        "--preset",
        "cuszp3-outlier",
        "-m",
        "rel",
        "-e",
        "1e-3",
        "--backend",
        "cpu",
        "--report",
        "-o",
        archive.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("within bound") && text.contains("GB/s"), "{text}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in [
        "original_bytes",
        "compressed_bytes",
        "ratio",
        "error_mode",
        "abs_bound",
        "max_abs_error",
        "psnr_db",
        "nrmse",
        "compress_plus_decompress_seconds",
        "bits_per_value",
        "max_error_position",
        "backend",
        "preset",
    ] {
        assert!(!report[key].is_null(), "JSON report lacks {key}: {report}");
    }
    assert!(report["max_abs_error"].as_f64().unwrap() <= report["abs_bound"].as_f64().unwrap());
    assert_eq!(report["original_bytes"], 5_550_336);

    // The written archive decompresses and compares through the other subcommands.
    let raw = scratch("rt.f32");
    let o =
        fzmod(&["decompress", archive.to_str().unwrap(), "-o", raw.to_str().unwrap(), "--compare", FIELD, "--report"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("within bound"));
    assert_eq!(std::fs::metadata(&raw).unwrap().len(), 5_550_336);
    let o = fzmod(&["inspect", archive.to_str().unwrap(), "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(h["stages"].as_array().unwrap().len(), 3);
}

fn assert_fails_cleanly(args: &[&str], output: &Path, expect: &str) {
    let o = fzmod(args);
    assert!(!o.status.success(), "{args:?} succeeded");
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected: {err}");
    assert!(err.contains(expect), "{args:?}: '{err}' lacks '{expect}'");
    assert!(!output.exists(), "{args:?} left {}", output.display());
}

#[test]
fn bad_arguments_fail_with_one_line_and_no_output() {
    let out = scratch("bad.fzm");
    let o = out.to_str().unwrap();
    let base = ["compress", FIELD, "-o", o, "--dtype", "f32"];
    let with = |extra: &[&'static str]| -> Vec<&str> { base.iter().copied().chain(extra.iter().copied()).collect() };
    assert_fails_cleanly(&with(&["--shape", "132x73x145", "--preset", "cuszp"]), &out, "needs");
    assert_fails_cleanly(&with(&["--shape", "132x73x144", "--preset", "nope"]), &out, "unknown preset");
    assert_fails_cleanly(&with(&["--shape", "132x73x144", "--preset", "cuszp", "-e", "0"]), &out, "error bound");
    assert_fails_cleanly(&with(&["--shape", "132x73x144", "--preset", "cuszp", "-e", "-1e-3"]), &out, "error bound");
    assert_fails_cleanly(&with(&["--shape", "132x73x144", "--preset", "cuszp", "-e", "NaN"]), &out, "error bound");
    assert_fails_cleanly(&with(&["--shape", "132x0x144", "--preset", "cuszp"]), &out, "bad shape");
    assert_fails_cleanly(&with(&["--shape", "99999999999x99999999999", "--preset", "cuszp"]), &out, "too large");
    assert_fails_cleanly(&with(&["--shape", "132x73x144", "--preset", "cuszp", "-m", "pw"]), &out, "mode");
    assert_fails_cleanly(
        &["compress", "no/such/file.f32", "-o", o, "--dtype", "f32", "--shape", "4", "--preset", "cuszp"],
        &out,
        "no/such/file.f32",
    );

    let corrupt = scratch("corrupt.fzm");
    std::fs::write(&corrupt, b"\x89FZM\r\n\x1a\n\x01\x00\x00\x00\xff\xff\x00\x00").unwrap();
    let raw = scratch("corrupt.f32");
    assert_fails_cleanly(&["decompress", corrupt.to_str().unwrap(), "-o", raw.to_str().unwrap()], &raw, "truncated");
}

#[test]
fn cuda_backend_is_either_used_or_refused_clearly() {
    let o = fzmod(&[
        "roundtrip",
        FIELD,
        "--dtype",
        "f32",
        "--shape",
        "132x73x144",
        "--preset",
        "cuszp",
        "--backend",
        "cuda",
    ]);
    if !o.status.success() {
        assert!(stderr(&o).contains("backend unavailable"), "{}", stderr(&o));
    }
}

#[test]
fn outputs_never_replace_devices_inputs_or_existing_files() {
    use std::os::unix::fs::FileTypeExt;
    // A device is written through, not replaced by a regular file. It is reached through a
    // symlink of our own: a regression that replaces the output path then replaces only the
    // link, not the machine's /dev/null (which as root it would).
    let null_link = scratch("null-link");
    std::os::unix::fs::symlink("/dev/null", &null_link).unwrap();
    let o = fzmod(&compress_args(null_link.to_str().unwrap(), &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&null_link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device(), "/dev/null was replaced");

    // `-o -` writes the archive to standard output, byte for byte what a file gets.
    let file = scratch("stdout-check.fzm");
    assert!(fzmod(&compress_args(file.to_str().unwrap(), &[])).status.success());
    let o = fzmod(&compress_args("-", &["--report"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(&file).unwrap(), "stdout archive differs from the file archive");
    assert!(stderr(&o).contains("ratio"), "the report goes to stderr when the data is on stdout");

    // An existing regular file is refused, untouched, unless --force.
    let existing = scratch("existing.fzm");
    std::fs::write(&existing, b"keep me").unwrap();
    assert_fails_cleanly(&compress_args(existing.to_str().unwrap(), &[]), Path::new("/nonexistent"), "--force");
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    let o = fzmod(&compress_args(existing.to_str().unwrap(), &["-f"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&existing).unwrap(), std::fs::read(&file).unwrap());

    // The input is refused as output, by its own name or through a symlink, and survives.
    let input = scratch("input-copy.f32");
    std::fs::copy(repo().join(FIELD), &input).unwrap();
    let link = scratch("link-to-input");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    for out in [&input, &link] {
        let mut args = compress_args(out.to_str().unwrap(), &["--force"]);
        args[1] = input.to_str().unwrap();
        assert_fails_cleanly(&args, Path::new("/nonexistent"), "is the input");
        assert_eq!(std::fs::metadata(&input).unwrap().len(), 5_550_336, "the input was damaged");
    }

    // A symlink to another file is followed: the link stays, its target gets the archive.
    let target = scratch("link-target.fzm");
    let other_link = scratch("link-to-target");
    std::os::unix::fs::symlink(&target, &other_link).unwrap();
    let o = fzmod(&compress_args(other_link.to_str().unwrap(), &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&other_link).unwrap().file_type().is_symlink(), "symlink replaced");
    assert_eq!(std::fs::read(&target).unwrap(), std::fs::read(&file).unwrap());

    // A FIFO is written through (a reader drains it), not replaced.
    let fifo = scratch("archive.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let o = fzmod(&compress_args(fifo.to_str().unwrap(), &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(reader.join().unwrap(), std::fs::read(&file).unwrap());
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "FIFO replaced");
}

#[test]
fn a_failing_later_step_leaves_no_output_behind() {
    let archive = scratch("later-failure.fzm");
    let a = archive.to_str().unwrap();
    assert_fails_cleanly(&compress_args(a, &["--json", "no/such/dir/report.json"]), &archive, "no/such/dir");

    // decompress --compare against an original of the wrong size: refused before writing.
    assert!(fzmod(&compress_args(a, &[])).status.success());
    let raw = scratch("later-failure.f32");
    let short = scratch("short-original.f32");
    std::fs::write(&short, vec![0u8; 4000]).unwrap();
    assert_fails_cleanly(
        &["decompress", a, "-o", raw.to_str().unwrap(), "--compare", short.to_str().unwrap()],
        &raw,
        "needs 5550336",
    );
    // Archive and JSON report naming the same file: refused up front.
    let both = scratch("both.fzm");
    let b = both.to_str().unwrap();
    assert_fails_cleanly(&compress_args(b, &["--json", b]), &both, "same file");
}

#[test]
fn decompress_compare_exits_nonzero_when_the_bound_is_violated() {
    let archive = scratch("violated.fzm");
    let a = archive.to_str().unwrap();
    assert!(fzmod(&compress_args(a, &[])).status.success());
    // The "original" differs from the compressed field by far more than the bound at one element.
    let mut other = std::fs::read(repo().join(FIELD)).unwrap();
    other[4 * 1234..4 * 1235].copy_from_slice(&1000.0f32.to_le_bytes());
    let original = scratch("violated-original.f32");
    std::fs::write(&original, other).unwrap();
    let raw = scratch("violated.f32");
    let o = fzmod(&["decompress", a, "-o", raw.to_str().unwrap(), "--compare", original.to_str().unwrap(), "--report"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("BOUND VIOLATED"));
    assert!(stderr(&o).contains("BOUND VIOLATED") && stderr(&o).contains("[0, 8, 82]"), "{}", stderr(&o));
    assert!(!raw.exists(), "output written despite the violation");
}

#[test]
fn inputs_are_read_with_the_shapes_bound() {
    let out = scratch("bounded.fzm");
    let o = out.to_str().unwrap();
    let args = |input: &'static str, shape: &'static str| {
        vec!["compress", input, "--dtype", "f32", "--shape", shape, "--preset", "cuszp", "-o", o, "-f"]
    };
    // An endless device: exactly 1000 values are read.
    let run = fzmod(&args("/dev/zero", "1000"));
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(fzmod::inspect(&std::fs::read(&out).unwrap()).unwrap().shape, vec![1000]);
    std::fs::remove_file(&out).unwrap();
    // A regular file of the wrong size is refused with its name, the expected and actual size.
    assert_fails_cleanly(&args(FIELD, "1000"), &out, "navy_uwnd_132x73x144.f32: file has 5550336 bytes");
    assert_fails_cleanly(&args(FIELD, "1000"), &out, "needs 4000");
    // Standard input: exactly the shape's bytes; fewer is an error naming what was missing.
    let values: Vec<u8> = (0..1000u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let run = fzmod_with_stdin(&args("-", "1000"), &values);
    assert!(run.status.success(), "{}", stderr(&run));
    std::fs::remove_file(&out).unwrap();
    let run = fzmod_with_stdin(&args("-", "1000"), &values[..3000]);
    assert!(!run.status.success() && !out.exists());
    assert!(stderr(&run).contains("ended after 3000 bytes") && stderr(&run).contains("needs 4000"), "{}", stderr(&run));
}

#[test]
fn inspect_reports_a_segment_of_a_missing_stage_without_panicking() {
    use fzmod::archive::{self, ErrorMode, Header, InputRef, SegmentEntry, StageRecord};
    let store = fzmod::stages::kind_by_name("Store").unwrap();
    let header = Header {
        version: (archive::FORMAT_MAJOR, archive::FORMAT_MINOR),
        dtype: fzmod::DType::F32,
        shape: vec![1],
        error_mode: ErrorMode::Abs,
        error_bound: 0.0,
        preset: String::new(),
        stages: vec![StageRecord {
            type_id: store.id,
            name: "store".into(),
            param_version: 1,
            params: vec![8, 1],
            inputs: vec![InputRef::External],
        }],
        // Stage 1 is one past the last stage (index 0).
        segments: vec![SegmentEntry { stage: 1, port: 0, dtype: fzmod::DType::F32, offset: 0, len: 0, crc32c: 0 }],
        chunking: None,
    };
    let path = scratch("stage-past-the-end.fzm");
    std::fs::write(&path, archive::write(header, &[vec![0; 4]])).unwrap();
    for extra in [None, Some("--json")] {
        let mut args = vec!["inspect", path.to_str().unwrap()];
        args.extend(extra);
        let o = fzmod(&args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("names stage 1"), "{}", stderr(&o));
    }
}

#[test]
fn the_report_says_when_the_input_was_stored_as_is() {
    // Uniform noise at a bound far below its spacing: no pipeline can beat the raw bytes.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..20_000)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / 16_777_216.0).to_le_bytes()
        })
        .collect();
    let input = scratch("noise.f32");
    std::fs::write(&input, &noise).unwrap();
    let archive = scratch("noise.fzm");
    let json = scratch("noise.json");
    let o = fzmod(&[
        "roundtrip",
        input.to_str().unwrap(),
        "--dtype",
        "f32",
        "--shape",
        "20000",
        "--preset",
        "cuszp2",
        "-m",
        "abs",
        "-e",
        "1e-9",
        "-o",
        archive.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--report",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("stored       as is"), "{text}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["stored_raw"], true);
    assert!(report["compressed_bytes"].as_u64().unwrap() <= 80_000 + 256, "{report}");
    assert_eq!(report["max_abs_error"], 0.0);
    let o = fzmod(&["inspect", archive.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("lossless fallback"));
}

#[test]
fn degenerate_fields_and_bench_output_read_sensibly() {
    let constant = scratch("constant.f32");
    std::fs::write(&constant, 7.5f32.to_le_bytes().repeat(4096)).unwrap();
    let nan = scratch("nan.f32");
    std::fs::write(&nan, f32::NAN.to_le_bytes().repeat(4096)).unwrap();
    for (file, expect) in [(&constant, "PSNR         inf"), (&nan, "value range  none")] {
        let o = fzmod(&[
            "roundtrip",
            file.to_str().unwrap(),
            "--dtype",
            "f32",
            "--shape",
            "64,64",
            "--preset",
            "cuszp2",
            "--report",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains(expect) && !text.contains("inf .. -inf") && !text.contains("PSNR         0"), "{text}");
    }
    let bench =
        |runs| fzmod(&["bench", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--preset", "cuszp", "--runs", runs]);
    assert!(!bench("0").status.success(), "--runs 0 accepted");
    let o = bench("1");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("bound        rel 1e-3\n") && !text.contains("Some("), "{text}");
}

#[test]
fn bench_times_chunked_archives_and_a_sweep_refuses_chunks() {
    let mut args = vec!["bench", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--backend", "cpu"];
    args.extend(["--preset", "cuszp2", "--runs", "2", "--chunk", "16x73x144"]);
    let o = fzmod(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // 132 planes in slabs of 16: 9 chunks, timed as whole calls from and into host memory.
    assert!(text.contains("chunks [16, 73, 144], 9 of them") && text.contains("chunked archive"), "{text}");
    assert!(text.contains("compress     median") && text.contains("max abs error"), "{text}");
    args.extend(["--sweep", "1e-2,1e-3"]);
    args.retain(|a| *a != "--runs" && *a != "2");
    let o = fzmod(&args);
    assert!(!o.status.success() && stderr(&o).contains("--chunk is for a single bench"), "{}", stderr(&o));
}

#[test]
fn bench_sweep_prints_a_rate_distortion_table_json_and_a_plot() {
    let (json, plot) = (scratch("sweep.json"), scratch("sweep.svg"));
    let mut args = vec!["bench", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--backend", "cpu", "--runs", "1"];
    args.extend(["--sweep", "1e-2,1e-4", "--presets", "pfpl,cusz,cuszp2"]);
    args.extend(["--json", json.to_str().unwrap(), "--plot", plot.to_str().unwrap()]);
    let o = fzmod(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // A title, a header and one line per preset and bound.
    assert_eq!(text.lines().count(), 2 + 6, "{text}");
    assert!(
        text.contains("pfpl") && text.contains("rel 1e-4") && stderr(&o).contains("sweep: cusz rel 1e-2"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let points = j["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    for p in points {
        let bound = p["bound"].as_f64().unwrap();
        // The bound is relative to the field's range: a tighter bound gives a higher PSNR.
        assert!(p["ratio"].as_f64().unwrap() > 1.0 && p["psnr_db"].as_f64().unwrap() > 20.0, "{p}");
        assert!(bound == 1e-2 || bound == 1e-4, "{p}");
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 3);
    assert_eq!(svg.matches("<circle").count(), 6);
    // A sweep needs bounds, and its own options need a sweep.
    let o = fzmod(&["bench", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--presets", "pfpl"]);
    assert!(!o.status.success() && stderr(&o).contains("--sweep"), "{}", stderr(&o));
}

/// Run and give up after `seconds` (a regression that reads forever must fail, not hang).
fn fzmod_within(args: &[&str], stdin: std::process::Stdio, seconds: u64) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_fzmod"))
        .current_dir(repo())
        .args(args)
        .stdin(stdin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_within(child, args, seconds)
}

/// Wait for `child`, killing it and failing the test after `seconds`.
fn wait_within(mut child: std::process::Child, args: &[&str], seconds: u64) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{args:?} still running after {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn archives_from_streams_are_read_only_as_far_as_they_announce() {
    let archive = scratch("stream.fzm");
    let a = archive.to_str().unwrap();
    assert!(fzmod(&compress_args(a, &[])).status.success());
    // An endless device is refused at its first bytes.
    let o = fzmod_within(&["inspect", "/dev/zero"], std::process::Stdio::null(), 20);
    assert!(!o.status.success() && stderr(&o).contains("bad magic"), "{}", stderr(&o));
    // From standard input, with more bytes after the archive: exactly the archive is read.
    let mut piped = std::fs::read(&archive).unwrap();
    piped.extend_from_slice(&[0xAB; 1000]);
    let raw = scratch("stream.f32");
    let o = fzmod_with_stdin(&["decompress", "-", "-o", raw.to_str().unwrap()], &piped);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::metadata(&raw).unwrap().len(), 5_550_336);
    // A stream that ends inside the archive says so.
    let o = fzmod_with_stdin(&["inspect", "-"], &piped[..1000]);
    assert!(!o.status.success() && stderr(&o).contains("ended after 1000 bytes"), "{}", stderr(&o));
}

/// Run with `head` and then endless zero bytes on standard input, giving up after `seconds`
/// (a regression that buffers the stream must fail the test, not hang it).
fn fzmod_fed_endlessly(args: &[&str], head: Vec<u8>, seconds: u64) -> Output {
    use std::io::Write;
    let mut child = spawn_piped(args);
    let mut stdin = child.stdin.take().unwrap();
    // Ends with a broken pipe once the child stops reading or exits.
    let feeder = std::thread::spawn(move || {
        let zeros = vec![0u8; 1 << 16];
        let _ = stdin.write_all(&head);
        while stdin.write_all(&zeros).is_ok() {}
    });
    let out = wait_within(child, args, seconds);
    feeder.join().unwrap();
    out
}

#[test]
fn config_files_are_read_with_a_bound() {
    let out = scratch("config-bound.fzm");
    let o = out.to_str().unwrap();
    let args = |config: &'static str| {
        vec!["compress", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--config", config, "-o", o]
    };
    // An endless file is refused after the first MiB instead of being read until memory runs out.
    let run = fzmod_within(&args("/dev/zero"), std::process::Stdio::null(), 20);
    assert!(!run.status.success() && !out.exists());
    assert!(stderr(&run).contains("/dev/zero is larger than 1.0 MiB"), "{}", stderr(&run));
    // So is a regular file of 2 MiB, by its name.
    let big = scratch("big.toml");
    std::fs::write(&big, vec![b'#'; 2 << 20]).unwrap();
    let mut a = args("/dev/zero");
    a[7] = big.to_str().unwrap();
    assert_fails_cleanly(&a, &out, "big.toml is larger than 1.0 MiB");
    // A pipeline file that does not parse is named in the message.
    let bad = scratch("bad-pipeline.toml");
    std::fs::write(&bad, "[[stage]]\ntype = \"NoSuchStage\"\n").unwrap();
    a[7] = bad.to_str().unwrap();
    assert_fails_cleanly(&a, &out, "pipeline file");
    assert_fails_cleanly(&a, &out, "bad-pipeline.toml");
}

/// The first bytes of an archive whose header announces `data_len` bytes of segments (the
/// header checksum is wrong, but a reader must refuse the length before it gets that far).
fn header_announcing(data_len: u64) -> Vec<u8> {
    let mut body = Vec::new();
    let mut v = data_len;
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            body.push(low);
            break;
        }
        body.push(low | 0x80);
    }
    body.resize(8, 0);
    let mut head = fzmod::archive::MAGIC.to_vec();
    head.extend_from_slice(&1u16.to_le_bytes());
    head.extend_from_slice(&0u16.to_le_bytes());
    head.extend_from_slice(&(body.len() as u32).to_le_bytes());
    head.extend_from_slice(&body);
    head.extend_from_slice(&[0; 4]);
    head
}

#[test]
fn reads_are_bounded_by_what_the_header_announces_and_by_max_memory() {
    let raw = scratch("announce.f32");
    let r = raw.to_str().unwrap();
    // A header announcing a TiB, then endless zeros on standard input: refused at once, by
    // the explicit limit and by the default one (half the physical memory).
    let tib = header_announcing(1 << 40);
    let o = fzmod_fed_endlessly(&["decompress", "-", "-o", r, "--max-memory", "64M"], tib.clone(), 20);
    assert!(!o.status.success() && !raw.exists());
    let err = stderr(&o);
    assert!(err.contains("as its header announces") && err.contains("--max-memory limit of 64.0 MiB"), "{err}");
    let o = fzmod_fed_endlessly(&["decompress", "-", "-o", r], tib, 20);
    assert!(!o.status.success() && stderr(&o).contains("--max-memory"), "{}", stderr(&o));

    // A genuine archive is refused above the limit, from a stream or a file, and read below it.
    let archive = scratch("announce.fzm");
    let a = archive.to_str().unwrap();
    assert!(fzmod(&compress_args(a, &[])).status.success());
    let bytes = std::fs::read(&archive).unwrap();
    let o = fzmod_with_stdin(&["inspect", "-", "--max-memory", "1K"], &bytes);
    assert!(!o.status.success() && stderr(&o).contains("--max-memory limit of 1024 bytes"), "{}", stderr(&o));
    assert_fails_cleanly(&["inspect", a, "--max-memory", "1K"], Path::new("/nonexistent"), "--max-memory");
    let o = fzmod_with_stdin(&["inspect", "-", "--max-memory", "1.5GiB"], &bytes);
    assert!(o.status.success(), "{}", stderr(&o));

    // A raw array from a stream is refused by its shape before a byte is read.
    let out = scratch("announce-raw.fzm");
    let o = fzmod_fed_endlessly(
        &["compress", "-", "--dtype", "f32", "--shape", "1000000", "-o", out.to_str().unwrap(), "--max-memory", "1M"],
        Vec::new(),
        20,
    );
    assert!(!o.status.success() && !out.exists());
    assert!(stderr(&o).contains("raw input standard input") && stderr(&o).contains("--max-memory"), "{}", stderr(&o));

    // Decoding is refused when the decoded array would exceed the limit (a constant field
    // compresses to almost nothing, so the archive alone passes).
    let constant = scratch("announce-constant.f32");
    std::fs::write(&constant, 1.25f32.to_le_bytes().repeat(1 << 20)).unwrap();
    let small = scratch("announce-constant.fzm");
    let c = ["compress", constant.to_str().unwrap(), "--dtype", "f32", "--shape", "1048576", "-m", "abs", "-e", "0.5"];
    assert!(fzmod(&[&c[..], &["-o", small.to_str().unwrap()]].concat()).status.success());
    assert!(std::fs::metadata(&small).unwrap().len() < 1 << 20);
    assert_fails_cleanly(&["decompress", small.to_str().unwrap(), "-o", r, "--max-memory", "1M"], &raw, "decoding");

    // Sizes are parsed with their unit; nonsense is a usage error.
    let o = fzmod(&["inspect", a, "--max-memory", "12 parsecs"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn concurrent_writers_without_force_never_replace_each_other() {
    let dir = scratch("race");
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("race.fzm");
    let t = target.to_str().unwrap().to_string();
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_fzmod"))
                .current_dir(repo())
                .args(compress_args(&t, &[]))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let won = outputs.iter().filter(|o| o.status.success()).count();
    assert_eq!(won, 1, "{won} of 8 writers succeeded");
    for o in outputs.iter().filter(|o| !o.status.success()) {
        assert!(stderr(o).contains("already exists") && stderr(o).contains("--force"), "{}", stderr(o));
    }
    let archive = std::fs::read(&target).unwrap();
    assert_eq!(fzmod::inspect(&archive).unwrap().shape, vec![132, 73, 144]);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("race.fzm")], "temporary files left behind");
}

#[test]
fn temporary_files_of_killed_runs_are_removed_by_the_next_run() {
    let dir = scratch("stale");
    std::fs::create_dir_all(&dir).unwrap();
    // No process has this PID (Linux caps PIDs at 2^22); this test's own process runs.
    let dead = dir.join(".out.fzm.999999999.tmp");
    let alive = dir.join(format!(".out.fzm.{}.tmp", std::process::id()));
    let other = dir.join(".out.fzm.notapid.tmp");
    for f in [&dead, &alive, &other] {
        std::fs::write(f, b"partial").unwrap();
    }
    let out = dir.join("out.fzm");
    let o = fzmod(&compress_args(out.to_str().unwrap(), &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!dead.exists(), "the temporary file of a dead process stayed");
    assert!(alive.exists() && other.exists(), "a file that is not a stale temporary file was removed");
}

#[test]
fn reports_that_cannot_be_written_fail_the_run() {
    let full = || std::fs::File::options().write(true).open("/dev/full").unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_fzmod"))
            .current_dir(repo())
            .args(args)
            .stdout(full())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap()
    };
    let out = scratch("full.fzm");
    let o = run(&compress_args(out.to_str().unwrap(), &["--report"]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write to standard output"), "{}", stderr(&o));
    assert!(!out.exists(), "the archive was published although its report failed");
    assert!(fzmod(&compress_args(out.to_str().unwrap(), &[])).status.success());
    for args in
        [vec!["inspect", out.to_str().unwrap()], vec!["inspect", out.to_str().unwrap(), "--json"], vec!["presets"]]
    {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot write to standard output"), "{}", stderr(&o));
    }
}

#[test]
fn bounds_backends_and_presets_follow_the_library_policy() {
    let out = scratch("policy.fzm");
    let o = out.to_str().unwrap();
    // -m abs alone would reuse the preset's relative 1e-3 as an absolute bound: refused.
    assert_fails_cleanly(&compress_args(o, &["-m", "abs"]), &out, "without a value");
    // -m rel alone keeps the preset's (relative) bound.
    assert!(fzmod(&compress_args(o, &["-m", "rel"])).status.success());
    std::fs::remove_file(&out).unwrap();
    // Without --preset and --config, the library's default preset.
    let plain = fzmod(&["compress", FIELD, "--dtype", "f32", "--shape", "132x73x144", "-o", o]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    assert_eq!(fzmod::inspect(&std::fs::read(&out).unwrap()).unwrap().preset, fzmod::DEFAULT_PRESET);
    std::fs::remove_file(&out).unwrap();
    // An unknown preset points at --config too.
    let mut args = compress_args(o, &[]);
    args[7] = "nope";
    assert_fails_cleanly(&args, &out, "--config");
    // Backend names are the library's: `gpu` is an alias of cuda.
    let o = fzmod(&["roundtrip", FIELD, "--dtype", "f32", "--shape", "132x73x144", "--backend", "GPU"]);
    assert!(o.status.success() || stderr(&o).contains("backend unavailable"), "{}", stderr(&o));
    // A command line the parser rejects exits with 2.
    assert_eq!(fzmod(&["compress"]).status.code(), Some(2));
}

#[test]
fn inspect_and_reports_use_the_shared_fact_names() {
    let archive = scratch("facts.fzm");
    let json = scratch("facts.json");
    let a = archive.to_str().unwrap();
    let o = fzmod(&[
        "roundtrip",
        FIELD,
        "--dtype",
        "f32",
        "--shape",
        "132x73x144",
        "-o",
        a,
        "--json",
        json.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let o = fzmod(&["inspect", a, "--json"]);
    let inspected: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let facts = serde_json::to_value(fzmod::ArchiveFacts::of(
        &fzmod::inspect(&std::fs::read(&archive).unwrap()).unwrap(),
        std::fs::metadata(&archive).unwrap().len() as usize,
    ))
    .unwrap();
    // Every archive fact appears under its shared name in both, with the same value; inspect
    // adds to each stage, so only the stages' shared keys are compared there.
    for (key, value) in facts.as_object().unwrap() {
        if key == "stages" {
            for (i, stage) in value.as_array().unwrap().iter().enumerate() {
                for (k, v) in stage.as_object().unwrap() {
                    assert_eq!(&inspected["stages"][i][k], v, "inspect stage {i} {k}");
                }
            }
            assert_eq!(&report[key], value, "report {key}");
        } else {
            assert_eq!(&inspected[key], value, "inspect {key}");
            assert_eq!(&report[key], value, "report {key}");
        }
    }
    assert_eq!(report["dtype"], "float32");
    for key in ["abs_bound", "compressed_bytes", "special_value_mismatches", "within_bound", "max_abs_error"] {
        assert!(!report[key].is_null(), "report lacks {key}: {report}");
    }
    assert_eq!(report["within_bound"], true);
}

#[test]
fn chunked_compress_and_region_decode() {
    let archive = scratch("chunked.fzm");
    let (a, full, region) = (archive.to_str().unwrap(), scratch("chunked-full.raw"), scratch("chunked-box.raw"));
    let out = fzmod(&[
        "compress",
        FIELD,
        "-o",
        a,
        "--dtype",
        "f32",
        "--shape",
        "132x73x144",
        "--chunk",
        "16x40x72",
        "-q",
        "--backend",
        "cpu",
        "-f",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = fzmod(&["decompress", a, "-o", full.to_str().unwrap(), "-q", "--backend", "cpu", "-f"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = fzmod(&[
        "decompress",
        a,
        "-o",
        region.to_str().unwrap(),
        "--region",
        "10:20,5,-4:",
        "-q",
        "--backend",
        "cpu",
        "-f",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (full, got) = (std::fs::read(full).unwrap(), std::fs::read(region).unwrap());
    let want: Vec<u8> = (10..20)
        .flat_map(|z| (140..144).map(move |x| ((z * 73 + 5) * 144 + x) * 4))
        .flat_map(|at| full[at..at + 4].to_vec())
        .collect();
    assert_eq!(got, want);
    // Under `auto` a small region decodes on the CPU (a CUDA start would cost more), the same
    // values; the report says why.
    let out = fzmod(&["decompress", a, "-o", "-", "--region", "10:20,5,-4:", "--backend", "auto", "--report"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("decodes on the CPU"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, want);
    for (bad, needle) in
        [("10:20,5", "3 dimensions"), ("0:133,:,:", "133"), ("0:4:2,:,:", "step 2"), ("3:3,:,:", "empty")]
    {
        let out = fzmod(&["decompress", a, "-o", "-", "--region", bad, "--backend", "cpu"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(needle), "{bad}: {err}");
    }
    let out = fzmod(&["inspect", a]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("format       2.0"));
}

/// `compress --stream` from a file and from a pipe, to a file and to a pipe: with a rel bound
/// resolved by a first pass over the file, every decode (file, pipe, region, --compare) gives the seekable archive's values, a rel
/// bound from a pipe needs --range, and a cut stream fails without leaving an output.
#[test]
fn streamed_compress_and_decode_through_files_and_pipes() {
    let shape = ["--dtype", "f32", "--shape", "132x73x144", "--chunk", "16x40x72", "--backend", "cpu", "-q", "-f"];
    let run = |args: &[&str], stdin: Option<&[u8]>| {
        let all: Vec<&str> = args.iter().chain(shape.iter().filter(|_| args[0] == "compress")).copied().collect();
        let o = match stdin {
            Some(bytes) => fzmod_with_stdin(&all, bytes),
            None => fzmod(&all),
        };
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o
    };
    let (seek, file) = (scratch("seekable.fzm"), scratch("streamed.fzm"));
    let (seek, file) = (seek.to_str().unwrap(), file.to_str().unwrap());
    run(&["compress", FIELD, "-o", seek], None);
    run(&["compress", FIELD, "-o", file, "--stream"], None);
    let (seekable, streamed) = (std::fs::read(seek).unwrap(), std::fs::read(file).unwrap());
    assert_eq!(u16::from_le_bytes([streamed[10], streamed[11]]), 1, "format 2.1");
    assert_ne!(seekable, streamed);
    let field = std::fs::read(repo().join(FIELD)).unwrap();
    // A pipe in, a pipe out: rel needs --range (refused otherwise, with nothing written).
    let piped = scratch("piped.fzm");
    let refused = fzmod_with_stdin(
        &["compress", "-", "-o", piped.to_str().unwrap(), "--stream", "--dtype", "f32", "--shape", "132x73x144"],
        &field,
    );
    assert!(!refused.status.success() && stderr(&refused).contains("--range MIN,MAX"), "{}", stderr(&refused));
    assert!(!piped.exists());
    let to_pipe = run(&["compress", "-", "-o", "-", "--stream", "-m", "abs", "-e", "0.01"], Some(&field));
    let from_range = run(&["compress", "-", "-o", "-", "--stream", "--range=-40,40"], Some(&field));
    let full = |args: &[&str], stdin: Option<&[u8]>| run(args, stdin).stdout;
    let want = full(&["decompress", seek, "-o", "-"], None);
    assert_eq!(full(&["decompress", file, "-o", "-"], None), want, "streamed file");
    assert_eq!(full(&["decompress", "-", "-o", "-"], Some(&streamed)), want, "streamed pipe");
    for archive in [&to_pipe.stdout, &from_range.stdout] {
        let decoded = full(&["decompress", "-", "-o", "-"], Some(archive));
        assert_eq!(decoded.len(), field.len());
    }
    let region = |input: &str, stdin: Option<&[u8]>| {
        full(&["decompress", input, "-o", "-", "--region", "10:40,5:9,-30:"], stdin)
    };
    assert_eq!(region(file, None), region(seek, None), "region of a streamed file");
    assert_eq!(region("-", Some(&streamed)), region(seek, None), "region of a streamed pipe");
    let compared = run(&["decompress", file, "-o", "/dev/null", "--compare", FIELD, "--report"], None);
    assert!(String::from_utf8_lossy(&compared.stdout).contains("within bound"));
    let shown = String::from_utf8_lossy(&run(&["inspect", file], None).stdout).to_string();
    assert!(shown.contains("format       2.1") && shown.contains("in the trailer"), "{shown}");
    // Cut anywhere, the stream fails with an error and leaves no output file.
    let out = scratch("cut.raw");
    for cut in [64, streamed.len() / 2, streamed.len() - 20] {
        let o = fzmod_with_stdin(&["decompress", "-", "-o", out.to_str().unwrap()], &streamed[..cut]);
        assert!(!o.status.success() && stderr(&o).contains("truncated"), "{cut}: {}", stderr(&o));
        assert!(!out.exists(), "{cut}: a partial output was left behind");
    }
    // The progress line goes to standard error only, and only when asked off a terminal.
    let o = run(&["compress", FIELD, "-o", "-", "--stream", "--progress"], None);
    assert!(stderr(&o).contains("chunks") && stderr(&o).contains("MB/s"), "{}", stderr(&o));
    assert_eq!(full(&["decompress", "-", "-o", "-"], Some(&o.stdout)), want);
    assert!(stderr(&run(&["compress", FIELD, "-o", "-", "--stream"], None)).is_empty());
}
