//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod reseal;

use fzmod::{Buffer, DType, ErrorBound, ErrorMode};
use std::path::{Path, PathBuf};

/// The checkout (`$FZMOD_REPO` when the test binary runs elsewhere, e.g. on the GPU machine).
pub fn repo_root() -> PathBuf {
    std::env::var_os("FZMOD_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The twelve real fields of `../shared/data` (README there).
pub const SHARED_FIELDS: [&str; 12] = [
    "echam5_rhumidity_17x96x192.f32",
    "echam5_t_17x96x192.f32",
    "etopo5_2161x4320.f32",
    "hst_acs_47tuc_sci_1024x1024.f32",
    "iris_a1b_tas_240x37x49.f32",
    "levitus_temp_20x180x360.f32",
    "navy_uwnd_132x73x144.f32",
    "navy_vwnd_132x73x144.f32",
    "ncep_hgt500_djf_65x29x49.f64",
    "ncl_vinth2p_T_2x18x64x128.f32",
    "trinidad_dem_1201x2401.f32",
    "um_theta_15x100x100.f32",
];

/// Say that a test did not run, where a plain `cargo test` shows it: libtest captures
/// `eprintln!`, but not writes to the stderr handle itself.
fn skip_note(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Bytes a field file must have, from the `_<shape>.<f32|f64>` end of its name.
fn expected_size(name: &str) -> Option<u64> {
    let (stem, ext) = name.rsplit_once('.')?;
    let dtype = DType::parse(ext).ok()?;
    let shape = fzmod::parse_shape(stem.rsplit_once('_')?.1).ok()?;
    shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64))
}

/// `../shared/data` beside the checkout (or `$FZMOD_DATA`) holding the `needed` fields, or
/// `None` (with a visible skip note) where it is absent, as on a user's fresh clone. A folder
/// that is there but unreadable, or lacks a needed field, or has one of the wrong size, fails
/// the test under `CI=true` (CI must not pass by skipping) and is skipped elsewhere.
pub fn shared_data_for(test: &str, needed: &[&str]) -> Option<PathBuf> {
    let dir = std::env::var_os("FZMOD_DATA").map(PathBuf::from).unwrap_or_else(|| repo_root().join("../shared/data"));
    shared_data_in(dir, test, needed, std::env::var("CI").is_ok_and(|v| v == "true"))
}

/// [`shared_data_for`] with the folder and the CI flag given.
pub fn shared_data_in(dir: PathBuf, test: &str, needed: &[&str], ci: bool) -> Option<PathBuf> {
    if std::fs::symlink_metadata(&dir).is_err() {
        skip_note(test, &format!("{} not found (the tests on the shared fields run in CI)", dir.display()));
        return None;
    }
    let problem = match check_fields(&dir, needed) {
        Ok(()) => return Some(dir),
        Err(problem) => problem,
    };
    if ci {
        panic!("{test}: CI=true and the shared data is broken: {problem}");
    }
    skip_note(test, &problem);
    None
}

/// [`shared_data_for`] for a test that checks its fields itself.
pub fn shared_data() -> Option<PathBuf> {
    shared_data_for("test on the shared fields", &[])
}

fn check_fields(dir: &Path, needed: &[&str]) -> Result<(), String> {
    std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for name in needed {
        let path = dir.join(name);
        let size = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.len();
        let expected = expected_size(name).ok_or_else(|| format!("{name}: no shape in the name"))?;
        if size != expected {
            return Err(format!("{} has {size} bytes, its shape needs {expected}", path.display()));
        }
        std::fs::File::open(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    }
    Ok(())
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

/// A golden archive of tests/golden/: its bytes and its decode, whose CRC must be the one its
/// MANIFEST line records. A missing file is written once by `write` when FZMOD_BLESS is set
/// (and its line appended); goldens are never rewritten.
pub fn golden(file: &str, write: impl FnOnce() -> Vec<u8>) -> (Vec<u8>, fzmod::Decompressed) {
    let dir = repo_root().join("tests/golden");
    let path = dir.join(file);
    let bless = std::env::var_os("FZMOD_BLESS").is_some();
    if !path.exists() && bless {
        std::fs::write(&path, write()).unwrap();
    }
    let archive =
        std::fs::read(&path).unwrap_or_else(|_| panic!("{} missing (FZMOD_BLESS=1 writes it once)", path.display()));
    let decoded = fzmod::decompress(&archive).unwrap();
    let crc = crc32c::crc32c(&decoded.data.to_le_bytes());
    let manifest = dir.join("MANIFEST");
    let text = std::fs::read_to_string(&manifest).unwrap();
    if bless && !text.lines().any(|l| l.starts_with(file)) {
        std::fs::write(&manifest, format!("{text}{file} {crc:08x}\n")).unwrap();
    }
    let text = std::fs::read_to_string(&manifest).unwrap();
    let line = text.lines().find(|l| l.split_whitespace().next() == Some(file)).expect("in the MANIFEST");
    assert_eq!(format!("{crc:08x}"), line.split_whitespace().nth(1).unwrap(), "{file}: decoded CRC");
    (archive, decoded)
}

/// A random non-empty box inside `shape` (one half-open range per dimension), from `state`
/// (a linear congruential generator, so cases are reproducible).
pub fn random_box(shape: &[usize], state: &mut u64) -> Vec<std::ops::Range<u64>> {
    shape
        .iter()
        .map(|&n| {
            *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let a = (*state >> 33) as usize % n;
            let b = a + 1 + (*state >> 13) as usize % (n - a);
            a as u64..b as u64
        })
        .collect()
}

/// Offset of an archive's header CRC (docs/FORMAT.md §1: 16 bytes, then the body).
pub fn header_crc_at(archive: &[u8]) -> usize {
    16 + u32::from_le_bytes(archive[12..16].try_into().unwrap()) as usize
}

/// Recompute the header CRC at `crc_at` (the unmutated archive's) after a mutation, so that
/// the checks behind it see the change.
pub fn reseal_header(archive: &mut [u8], crc_at: usize) {
    let crc = crc32c::crc32c(&archive[..crc_at]);
    archive[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Unsigned LEB128 (docs/FORMAT.md, "Encodings").
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A format 2 header (docs/FORMAT.md §8) built field by field, padded to its data region: an
/// f32 array of `shape` in chunks of `chunk`, abs 0.1 for the array and every chunk. `index`:
/// the chunk count and index record of a seekable archive (minor 0) over `data_len` bytes;
/// `None`: a streamed one (minor 1, data length 0, an empty verbatim index).
pub fn chunked_header(shape: &[u64], chunk: &[u64], data_len: u64, index: Option<(u64, &[u8])>) -> Vec<u8> {
    let mut body = Vec::new();
    varint(&mut body, data_len);
    body.push(8); // f32
    varint(&mut body, shape.len() as u64);
    shape.iter().for_each(|&n| varint(&mut body, n));
    body.push(0); // abs
    body.extend_from_slice(&0.1f64.to_le_bytes());
    varint(&mut body, 0); // no preset
    chunk.iter().for_each(|&n| varint(&mut body, n));
    body.push(0); // chunks: abs, the header's bound
    body.extend_from_slice(&0.1f64.to_le_bytes());
    match index {
        Some((chunks, record)) => {
            varint(&mut body, chunks);
            body.extend_from_slice(record);
        }
        None => body.extend_from_slice(&[0, 1, 0, 0]), // no chunks stated, an empty verbatim index
    }
    let mut archive = vec![0x89, b'F', b'Z', b'M', b'\r', b'\n', 0x1a, b'\n', 2, 0, u8::from(index.is_none()), 0];
    archive.extend_from_slice(&(body.len() as u32).to_le_bytes());
    archive.extend_from_slice(&body);
    archive.extend_from_slice(&crc32c::crc32c(&archive).to_le_bytes());
    archive.resize(archive.len().div_ceil(64) * 64, 0);
    archive
}
