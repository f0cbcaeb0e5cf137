//! Helpers shared by the integration tests.
#![allow(dead_code)]

use fzmod::{Buffer, DType, ErrorBound, ErrorMode};
use std::path::{Path, PathBuf};

/// The checkout (`$FZMOD_REPO` when the test binary runs elsewhere, e.g. on the GPU machine).
pub fn repo_root() -> PathBuf {
    std::env::var_os("FZMOD_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// `../shared/data` beside the checkout (or `$FZMOD_DATA`); `None` on a user's fresh clone.
/// In CI (`CI=true`) the fields must be there: a missing folder fails the test instead.
pub fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var_os("FZMOD_DATA").map(PathBuf::from).unwrap_or_else(|| repo_root().join("../shared/data"));
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{} not found, and CI=true: the shared fields are required in CI", dir.display());
    } else {
        eprintln!("skipping: {} not found (tests on the shared fields run in CI)", dir.display());
        None
    }
}

/// A raw field whose name ends in `_<shape>.<f32|f64>`.
pub struct Field {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Buffer,
}

pub fn load(path: &Path) -> Field {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let (stem, ext) = name.rsplit_once('.').unwrap();
    let dtype = DType::parse(ext).unwrap();
    let shape = fzmod::parse_shape(stem.rsplit_once('_').unwrap().1).unwrap();
    let bytes = std::fs::read(path).unwrap();
    Field { name, shape, data: Buffer::from_le_bytes(dtype, &bytes).unwrap() }
}

/// Every field in the shared data folder, sorted by name.
pub fn shared_fields(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("f32" | "f64")))
        .collect();
    v.sort();
    v
}

pub fn values(b: &Buffer) -> Vec<f64> {
    match b {
        Buffer::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Buffer::F64(v) => v.clone(),
        _ => panic!("not a float buffer"),
    }
}

fn bits(b: &Buffer) -> Vec<u64> {
    match b {
        Buffer::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        Buffer::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        _ => panic!("not a float buffer"),
    }
}

/// The absolute bound a request means, computed independently of the library.
pub fn expected_abs_bound(data: &Buffer, bound: ErrorBound) -> f64 {
    match bound.mode {
        ErrorMode::Abs => bound.value,
        ErrorMode::Rel => {
            let finite: Vec<f64> = values(data).into_iter().filter(|v| v.is_finite()).collect();
            let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            bound.value * if lo <= hi { hi - lo } else { 0.0 }
        }
    }
}

/// Assert every element is within `abs_bound` (finite) or bit-identical (NaN/Inf).
/// Returns the max abs error.
pub fn assert_within(original: &Buffer, decoded: &Buffer, abs_bound: f64, what: &str) -> f64 {
    assert_eq!(original.dtype(), decoded.dtype(), "{what}: dtype");
    assert_eq!(original.len(), decoded.len(), "{what}: length");
    let (a, b) = (values(original), values(decoded));
    let (ab, bb) = (bits(original), bits(decoded));
    let mut max = 0.0f64;
    for i in 0..a.len() {
        if a[i].is_finite() {
            let err = (a[i] - b[i]).abs();
            assert!(err <= abs_bound, "{what}: element {i}: |{} - {}| = {err:e} > {abs_bound:e}", a[i], b[i]);
            max = max.max(err);
        } else {
            assert_eq!(ab[i], bb[i], "{what}: special value at {i} not bit-identical");
        }
    }
    max
}
