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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
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
        "error_bound_abs",
        "max_abs_error",
        "psnr_db",
        "nrmse",
        "seconds",
        "backend",
        "preset",
    ] {
        assert!(!report[key].is_null(), "JSON report lacks {key}: {report}");
    }
    assert!(report["max_abs_error"].as_f64().unwrap() <= report["error_bound_abs"].as_f64().unwrap());
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
