//! The plugin through its C ABI, as HDF5 calls it: the plugin entry points, then the filter
//! callback on a malloc'd chunk, forward and reverse.

use h5fzmod::params::{FilterParams, Settings, PRESET_IDS};
use h5fzmod::{fzmod_filter, H5PLget_plugin_info, H5PLget_plugin_type, H5ZClass2, FILTER_ID};
use std::ffi::{c_uint, c_void, CStr};

extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
}

const REVERSE: c_uint = 0x0100;

/// A chunk in a malloc'd buffer, as HDF5 hands it to a filter.
struct CBuffer {
    ptr: *mut c_void,
    size: usize,
}

impl CBuffer {
    fn from(bytes: &[u8]) -> CBuffer {
        unsafe {
            let ptr = malloc(bytes.len());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.cast::<u8>(), bytes.len());
            CBuffer { ptr, size: bytes.len() }
        }
    }

    /// Run the filter like HDF5: returns the valid length (0 = failure).
    fn filter(&mut self, flags: c_uint, cd: &[c_uint], nbytes: usize) -> usize {
        unsafe { fzmod_filter(flags, cd.len(), cd.as_ptr(), nbytes, &mut self.size, &mut self.ptr) }
    }

    fn bytes(&self, len: usize) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), len) }
    }
}

impl Drop for CBuffer {
    fn drop(&mut self) {
        unsafe { free(self.ptr) }
    }
}

fn field(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i as f64 * 0.013).sin() * 40.0 + (i % 7) as f64 * 0.01).collect()
}

fn cd_values(preset: &'static str, dtype: fzmod::DType, shape: &[usize], bound: f64) -> Vec<c_uint> {
    let bound = fzmod::ErrorBound::new(fzmod::ErrorMode::Abs, bound).unwrap();
    FilterParams {
        settings: Settings { preset, bound, mask: fzmod::MaskSpec::default() },
        dtype,
        chunk_shape: shape.to_vec(),
    }
    .encode()
    .unwrap()
}

#[test]
fn plugin_entry_points_describe_a_filter() {
    assert_eq!(H5PLget_plugin_type(), 0);
    let class = unsafe { &*H5PLget_plugin_info().cast::<H5ZClass2>() };
    assert_eq!((class.version, class.id), (1, FILTER_ID));
    assert!((256..=511).contains(&class.id), "testing range");
    assert_eq!((class.encoder_present, class.decoder_present), (1, 1));
    assert!(class.can_apply.is_some() && class.set_local.is_some() && class.filter.is_some());
    let name = unsafe { CStr::from_ptr(class.name) }.to_str().unwrap();
    assert!(name.starts_with("fzmod"));
}

#[test]
fn compress_then_decompress_every_preset_f32_and_f64() {
    let shape = [24, 40];
    for (_, preset) in PRESET_IDS {
        let values = field(shape[0] * shape[1]);
        let f32s: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let chunks = [
            (fzmod::DType::F64, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()),
            (fzmod::DType::F32, f32s.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ];
        for (dtype, raw) in chunks {
            let cd = cd_values(preset, dtype, &shape, 1e-3);
            let mut buffer = CBuffer::from(&raw);
            let compressed = buffer.filter(0, &cd, raw.len());
            assert!(compressed > 0 && compressed < raw.len(), "{preset} {dtype}: {compressed} bytes");
            assert!(buffer.size >= compressed);
            let archive = fzmod::inspect(buffer.bytes(compressed)).unwrap();
            assert_eq!((archive.preset.as_str(), archive.shape.as_slice()), (preset, &[24u64, 40][..]));
            let restored = buffer.filter(REVERSE, &cd, compressed);
            assert_eq!(restored, raw.len());
            let back = buffer.bytes(restored);
            let pairs: Vec<(f64, f64)> = match dtype {
                fzmod::DType::F64 => back
                    .chunks_exact(8)
                    .zip(&values)
                    .map(|(b, &v)| (f64::from_le_bytes(b.try_into().unwrap()), v))
                    .collect(),
                _ => back
                    .chunks_exact(4)
                    .zip(&f32s)
                    .map(|(b, &v)| (f64::from(f32::from_le_bytes(b.try_into().unwrap())), f64::from(v)))
                    .collect(),
            };
            assert!(pairs.iter().all(|(a, b)| (a - b).abs() <= 1e-3), "{preset} {dtype}");
        }
    }
}

#[test]
fn failures_return_zero_and_keep_the_buffer() {
    let raw: Vec<u8> = field(64).iter().flat_map(|v| v.to_le_bytes()).collect();
    let good = cd_values("cuszp2", fzmod::DType::F64, &[64], 1e-3);
    let mut wrong_shape = good.clone();
    *wrong_shape.last_mut().unwrap() = 65;
    let mut wrong_version = good.clone();
    wrong_version[0] = 3;
    let mut unknown_preset = good.clone();
    unknown_preset[1] = 99;
    for cd in [&good[..3], &wrong_shape, &wrong_version, &unknown_preset, &[][..]] {
        let mut buffer = CBuffer::from(&raw);
        assert_eq!(buffer.filter(0, cd, raw.len()), 0, "{cd:?}");
        assert_eq!(buffer.bytes(raw.len()), &raw[..], "buffer untouched on failure");
    }
    let mut not_an_archive = CBuffer::from(&raw);
    assert_eq!(not_an_archive.filter(REVERSE, &good, raw.len()), 0);
    let mut empty = CBuffer::from(&[0u8]);
    assert_eq!(empty.filter(REVERSE, &good, 0), 0);
}

#[test]
fn cd_values_round_trip() {
    let p = FilterParams {
        settings: Settings {
            preset: "cuszp3-outlier",
            bound: fzmod::ErrorBound::new(fzmod::ErrorMode::Rel, 1e-4).unwrap(),
            mask: fzmod::MaskSpec::default(),
        },
        dtype: fzmod::DType::F32,
        chunk_shape: vec![3, 5, 7],
    };
    let cd = p.encode().unwrap();
    assert_eq!(cd[..3], [1, 4, 1]);
    assert_eq!(&cd[5..], &[8, 3, 3, 5, 7]);
    assert_eq!(FilterParams::decode(&cd).unwrap(), p);
    // What the user writes is the first words; set_local appends the dataset's.
    assert_eq!(p.settings.encode().unwrap(), cd[..5]);
    assert_eq!(Settings::decode(&cd[..5]).unwrap(), p.settings);
    assert!(FilterParams::decode(&cd[..5]).is_err(), "no element type or chunk shape yet");
}

#[test]
fn every_preset_has_an_hdf5_id() {
    for preset in fzmod::PRESETS {
        assert!(PRESET_IDS.iter().any(|(_, name)| *name == preset.name), "{} has no HDF5 id", preset.name);
    }
}

#[test]
fn dataset_callbacks_fail_without_an_hdf5_to_ask() {
    // No libhdf5 is loaded into this test: the callbacks must refuse (HDF5 then fails the
    // dataset's creation) rather than let chunks be written with guessed parameters.
    let class = unsafe { &*H5PLget_plugin_info().cast::<H5ZClass2>() };
    unsafe {
        assert_eq!(class.can_apply.unwrap()(1, 2, 3), -1);
        assert_eq!(class.set_local.unwrap()(1, 2, 3), -1);
    }
}

#[test]
fn masked_cd_values_round_trip_and_compress_a_filled_chunk() {
    let fill = -1e10;
    let p = FilterParams {
        settings: Settings {
            preset: "cuszp2",
            bound: fzmod::ErrorBound::new(fzmod::ErrorMode::Rel, 1e-3).unwrap(),
            mask: fzmod::MaskSpec::nan_and(Some(fill)),
        },
        dtype: fzmod::DType::F32,
        chunk_shape: vec![40, 50],
    };
    let cd = p.encode().unwrap();
    assert_eq!(cd[..3], [2, 1, 1]);
    assert_eq!(cd[5], 1 | 4, "NaN and fill flags");
    assert_eq!(&cd[8..], &[8, 2, 40, 50]);
    assert_eq!(FilterParams::decode(&cd).unwrap(), p);
    assert_eq!(Settings::decode(&cd[..8]).unwrap(), p.settings);
    // Bad flags, a fill without its flag, a NaN fill: refused.
    for (word, value) in [(5, 0), (5, 8), (6, 1)] {
        let mut bad = cd.clone();
        bad[5] = if word == 6 { 1 } else { bad[5] };
        bad[word] = value;
        assert!(FilterParams::decode(&bad).is_err(), "word {word} = {value}");
    }

    // A land-masked chunk: the mask makes it smaller than the same chunk unmasked, and
    // the fill (and a NaN) come back bit for bit.
    let mut values: Vec<f32> = (0..2000).map(|i| 10.0 + (i as f32 * 0.01).sin()).collect();
    for (i, v) in values.iter_mut().enumerate() {
        if (i % 50) < 20 {
            *v = fill as f32;
        }
    }
    values[1999] = f32::NAN;
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut masked = CBuffer::from(&raw);
    let masked_len = masked.filter(0, &cd, raw.len());
    assert!(masked_len > 0);
    let plain_cd = FilterParams { settings: Settings { mask: fzmod::MaskSpec::default(), ..p.settings.clone() }, ..p }
        .encode()
        .unwrap();
    let mut plain = CBuffer::from(&raw);
    let plain_len = plain.filter(0, &plain_cd, raw.len());
    assert!(plain_len > 0 && masked_len < plain_len, "{masked_len} vs {plain_len}");
    let archive = masked.bytes(masked_len).to_vec();
    let mut back = CBuffer::from(&archive);
    let n = back.filter(REVERSE, &cd, archive.len());
    let out: Vec<f32> = back.bytes(n).chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    // rel 1e-3 of the range of the unmasked values, exactly as the user's bound reads.
    let masked_out = |a: &f32| a.is_nan() || *a == fill as f32;
    let valid = values.iter().filter(|a| !masked_out(a)).map(|&a| f64::from(a));
    let (lo, hi) = valid.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), a| (lo.min(a), hi.max(a)));
    let bound = 1e-3 * (hi - lo);
    for (a, b) in values.iter().zip(&out) {
        if masked_out(a) {
            assert_eq!(a.to_bits(), b.to_bits());
        } else {
            assert!((f64::from(*a) - f64::from(*b)).abs() <= bound, "{a} {b} (bound {bound})");
        }
    }
}
