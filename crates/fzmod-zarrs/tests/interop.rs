//! The fzmod codec in zarrs: round trips (alone and inside sharding, float32 and float64),
//! metadata that names it, and an array written by the Python package opened here.

use fzmod_zarrs::{FzmodCodec, FzmodCodecConfiguration};
use std::path::Path;
use std::sync::Arc;
use zarrs::array::codec::array_to_bytes::sharding::ShardingCodecBuilder;
use zarrs::array::{data_type, Array, ArrayBuilder, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrs_codec::CodecTraitsV3;
use zarrs_metadata::v3::MetadataV3;

const BOUND: f64 = 0.01;

fn field(rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols).map(|k| 10.0 * (0.3 * (k / cols) as f64).sin() + 5.0 * (0.2 * (k % cols) as f64).cos()).collect()
}

fn codec() -> Arc<FzmodCodec> {
    let configuration = FzmodCodecConfiguration { mode: Some("abs".into()), bound: Some(BOUND), ..Default::default() };
    Arc::new(FzmodCodec::new(configuration).unwrap())
}

fn assert_within(original: &[f64], decoded: &[f64]) {
    assert_eq!(original.len(), decoded.len());
    let worst = original.iter().zip(decoded).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(worst <= BOUND, "max error {worst} exceeds {BOUND}");
}

#[test]
fn float32_and_float64_round_trip_and_reopen_from_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FilesystemStore::new(dir.path()).unwrap());
    let values = field(37, 41);
    let f32s: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let as_f64 = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();

    let a = ArrayBuilder::new(vec![37, 41], vec![16, 16], data_type::float32(), 0.0f32)
        .array_to_bytes_codec(codec())
        .build(store.clone(), "/f32")
        .unwrap();
    a.store_metadata().unwrap();
    a.store_array_subset(&a.subset_all(), f32s.clone()).unwrap();
    let b = ArrayBuilder::new(vec![37, 41], vec![16, 16], data_type::float64(), 0.0f64)
        .array_to_bytes_codec(codec())
        .build(store.clone(), "/f64")
        .unwrap();
    b.store_metadata().unwrap();
    b.store_array_subset(&b.subset_all(), values.clone()).unwrap();

    let metadata = std::fs::read_to_string(dir.path().join("f32/zarr.json")).unwrap();
    assert!(metadata.contains("\"name\": \"fzmod\""), "{metadata}");
    // Reopening parses the codec from the metadata: the registered plugin.
    let a = Array::open(store.clone(), "/f32").unwrap();
    let back: Vec<f32> = a.retrieve_array_subset(&a.subset_all()).unwrap();
    assert_within(&as_f64(&f32s), &as_f64(&back));
    let b = Array::open(store, "/f64").unwrap();
    let back: Vec<f64> = b.retrieve_array_subset(&b.subset_all()).unwrap();
    assert_within(&values, &back);
}

#[test]
fn inside_sharding() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FilesystemStore::new(dir.path()).unwrap());
    let values = field(64, 96);
    let inner = vec![16.try_into().unwrap(), 32.try_into().unwrap()];
    let sharding = ShardingCodecBuilder::new(inner, &data_type::float64()).array_to_bytes_codec(codec()).build_arc();
    let a = ArrayBuilder::new(vec![64, 96], vec![32, 96], data_type::float64(), 0.0f64)
        .array_to_bytes_codec(sharding)
        .build(store.clone(), "/sharded")
        .unwrap();
    a.store_metadata().unwrap();
    a.store_array_subset(&a.subset_all(), values.clone()).unwrap();
    let a = Array::open(store, "/sharded").unwrap();
    let back: Vec<f64> = a.retrieve_array_subset(&a.subset_all()).unwrap();
    assert_within(&values, &back);
    let part: Vec<f64> = a.retrieve_array_subset(&ArraySubset::new_with_ranges(&[5..9, 40..50])).unwrap();
    let expected: Vec<f64> =
        (5..9).flat_map(|r| (40..50).map(move |c| (r, c))).map(|(r, c)| values[r * 96 + c]).collect();
    assert_within(&expected, &part);
}

#[test]
fn opens_an_array_written_by_the_python_package() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_written.zarr");
    let store = Arc::new(FilesystemStore::new(path).unwrap());
    let a = Array::open(store, "/").unwrap();
    let back: Vec<f32> = a.retrieve_array_subset(&a.subset_all()).unwrap();
    let expected: Vec<f64> = field(20, 30).iter().map(|&v| f64::from(v as f32)).collect();
    assert_within(&expected, &back.iter().map(|&x| f64::from(x)).collect::<Vec<_>>());
}

#[test]
fn bad_configurations_are_refused() {
    for bad in [
        FzmodCodecConfiguration { preset: "zstd".into(), ..Default::default() },
        FzmodCodecConfiguration { mode: Some("sideways".into()), bound: Some(0.1), ..Default::default() },
        FzmodCodecConfiguration { bound: Some(-1.0), ..Default::default() },
        FzmodCodecConfiguration { backend: "tpu".into(), ..Default::default() },
        // A mode alone once meant that mode at 1e-3: abs 1e-3 is not the preset's rel 1e-3.
        FzmodCodecConfiguration { mode: Some("abs".into()), ..Default::default() },
        FzmodCodecConfiguration { version: 2, ..Default::default() },
    ] {
        assert!(FzmodCodec::new(bad.clone()).is_err(), "{bad:?}");
    }
}

#[test]
fn a_nan_padded_edge_chunk_and_the_array_fill_value_are_masked() {
    // (200, 128) in (128, 128) chunks, fill value NaN: the edge chunk is 44 % NaN padding.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FilesystemStore::new(dir.path()).unwrap());
    let values: Vec<f32> = field(200, 128).iter().map(|&v| v as f32).collect();
    let size = |name: &str, codec: Arc<FzmodCodec>| {
        let a = ArrayBuilder::new(vec![200, 128], vec![128, 128], data_type::float32(), f32::NAN)
            .array_to_bytes_codec(codec)
            .build(store.clone(), &format!("/{name}"))
            .unwrap();
        a.store_metadata().unwrap();
        a.store_array_subset(&a.subset_all(), values.clone()).unwrap();
        let back: Vec<f32> = a.retrieve_array_subset(&a.subset_all()).unwrap();
        let widen = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
        assert_within(&widen(&values), &widen(&back));
        let chunk = |i: u32| std::fs::metadata(dir.path().join(format!("{name}/c/{i}/0"))).unwrap().len() as f64;
        (128.0 * 128.0 * 4.0 / chunk(0), 72.0 * 128.0 * 4.0 / chunk(1))
    };
    let (full, edge) = size("masked", codec());
    assert!(edge >= 0.8 * full, "{full} {edge}");
    // No NaN mask and no fill value (else the array's NaN fill value masks NaN anyway).
    let unmasked = FzmodCodecConfiguration {
        mode: Some("abs".into()),
        bound: Some(BOUND),
        mask_nan: false,
        fill_value: None,
        ..Default::default()
    };
    // Without the mask the padding is outlier runs, one per row (docs/FORMAT.md 6.1.1): it
    // costs little too.
    let (full_plain, edge_plain) = size("plain", Arc::new(FzmodCodec::new(unmasked).unwrap()));
    assert!(edge_plain >= 0.8 * full_plain, "{full_plain} {edge_plain}");

    // "array": the array's fill value, unless zero; a number or null as given.
    let c = codec();
    assert_eq!(c.mask(Some(-1e10)), fzmod::MaskSpec::nan_and(Some(-1e10)));
    assert_eq!(c.mask(Some(0.0)), fzmod::MaskSpec::nan_and(None));
    assert_eq!(c.mask(Some(f64::NAN)), fzmod::MaskSpec::nan_and(None));
    let none: FzmodCodecConfiguration = serde_json::from_str(r#"{"fill_value": null, "mask_nan": false}"#).unwrap();
    assert!(FzmodCodec::new(none).unwrap().mask(Some(5.0)).is_empty());
    let inf: FzmodCodecConfiguration = serde_json::from_str(r#"{"fill_value": "-Infinity"}"#).unwrap();
    assert_eq!(FzmodCodec::new(inf).unwrap().mask(None).fill, Some(f64::NEG_INFINITY));
    let bad: FzmodCodecConfiguration = serde_json::from_str(r#"{"fill_value": "land"}"#).unwrap();
    assert!(FzmodCodec::new(bad).is_err());
    // Defaults are not written: metadata stays readable by builds without masks.
    let json = serde_json::to_string(&FzmodCodecConfiguration::default()).unwrap();
    assert!(!json.contains("mask") && !json.contains("fill"), "{json}");
}

fn from_metadata(json: &str) -> Result<zarrs_codec::Codec, zarrs_plugin::PluginCreateError> {
    let metadata: MetadataV3 = serde_json::from_str(json).unwrap();
    <FzmodCodec as CodecTraitsV3>::create(&metadata)
}

#[test]
fn metadata_of_other_versions_or_with_unknown_fields_is_refused() {
    assert!(from_metadata(r#"{"name": "fzmod", "configuration": {"version": 1, "mode": "abs", "bound": 0.5}}"#).is_ok());
    // Written before the version field existed: version 1.
    assert!(from_metadata(r#"{"name": "fzmod", "configuration": {"mode": "abs", "bound": 0.5}}"#).is_ok());
    assert!(from_metadata(r#"{"name": "fzmod", "configuration": {"version": 2}}"#).is_err());
    assert!(from_metadata(r#"{"name": "fzmod", "configuration": {"level": 3}}"#).is_err());
}

#[test]
fn the_metadata_states_the_bound_the_codec_runs_at() {
    let default = FzmodCodec::new(FzmodCodecConfiguration::default()).unwrap();
    let resolved = default.resolved_configuration();
    assert_eq!(
        (resolved.preset.as_str(), resolved.mode.as_deref(), resolved.bound),
        (fzmod::DEFAULT_PRESET, Some("rel"), Some(1e-3))
    );
    let bare_value = FzmodCodec::new(FzmodCodecConfiguration { bound: Some(0.5), ..Default::default() }).unwrap();
    assert_eq!(bare_value.resolved_configuration().mode.as_deref(), Some("rel"));
}

/// Regenerates tests/fixtures/rust_written.zarr, which the Python package's tests open
/// (crates/fzmod-python/tests/test_zarr3.py): `cargo test -- --ignored write_rust_fixture`.
#[test]
#[ignore = "writes the committed fixture"]
fn write_rust_fixture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rust_written.zarr");
    let _ = std::fs::remove_dir_all(&path);
    let store = Arc::new(FilesystemStore::new(path).unwrap());
    let a = ArrayBuilder::new(vec![20, 30], vec![10, 15], data_type::float64(), 0.0f64)
        .array_to_bytes_codec(codec())
        .build(store, "/")
        .unwrap();
    a.store_metadata().unwrap();
    a.store_array_subset(&a.subset_all(), field(20, 30)).unwrap();
}
