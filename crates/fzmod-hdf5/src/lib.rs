//! fzmod as an HDF5 filter plugin.
//!
//! HDF5 loads every shared library in `HDF5_PLUGIN_PATH` and asks it, through
//! [`H5PLget_plugin_type`] and [`H5PLget_plugin_info`], for a filter class ([`H5ZClass2`]).
//! The plugin does not link libhdf5, so it loads into any HDF5 ≥ 1.10 (h5py's, the
//! command-line tools'); the few HDF5 calls its dataset callbacks make are looked up in the
//! HDF5 that loaded it ([`hdf5`]).
//!
//! When a dataset is created, `can_apply` refuses what the filter cannot compress (anything
//! but little-endian float32/float64: the creation fails, even for an optional filter) and
//! `set_local` writes the dataset's element type and chunk shape into the filter's
//! `cd_values` ([`params`]), after the user's preset and bound. Decoding reads only the
//! archive.
//!
//! Filter id [`FILTER_ID`] is in the range HDF5 reserves for testing (256–511): it is **not
//! registered** with The HDF Group.

pub mod hdf5;
pub mod params;

use std::ffi::{c_char, c_int, c_uint, c_void};

/// Unregistered filter id, from HDF5's testing range (256–511).
pub const FILTER_ID: c_int = 400;

/// `H5Z_FLAG_REVERSE`: the filter is asked to decode.
const FLAG_REVERSE: c_uint = 0x0100;
/// `H5Z_CLASS_T_VERS`.
const CLASS_VERSION: c_int = 1;
/// `H5PL_TYPE_FILTER`.
const PLUGIN_TYPE_FILTER: c_int = 0;

/// `H5Z_filter_func_t`.
pub type FilterFn = unsafe extern "C" fn(
    flags: c_uint,
    cd_nelmts: usize,
    cd_values: *const c_uint,
    nbytes: usize,
    buf_size: *mut usize,
    buf: *mut *mut c_void,
) -> usize;

/// `H5Z_class2_t`, field for field (hid_t is 64-bit since HDF5 1.10).
#[repr(C)]
pub struct H5ZClass2 {
    pub version: c_int,
    pub id: c_int,
    pub encoder_present: c_uint,
    pub decoder_present: c_uint,
    pub name: *const c_char,
    pub can_apply: Option<unsafe extern "C" fn(i64, i64, i64) -> c_int>,
    pub set_local: Option<unsafe extern "C" fn(i64, i64, i64) -> c_int>,
    pub filter: Option<FilterFn>,
}

/// The class lives in a static that HDF5 reads; the raw name pointer makes it `!Sync` by
/// default, but it points to a `'static` string and is never written.
struct SharedClass(H5ZClass2);
unsafe impl Sync for SharedClass {}

static CLASS: SharedClass = SharedClass(H5ZClass2 {
    version: CLASS_VERSION,
    id: FILTER_ID,
    encoder_present: 1,
    decoder_present: 1,
    name: c"fzmod: error-bounded float compression (unregistered testing id)".as_ptr(),
    can_apply: Some(can_apply),
    set_local: Some(set_local),
    filter: Some(fzmod_filter),
});

/// Plugin entry point: this library provides a filter.
#[no_mangle]
pub extern "C" fn H5PLget_plugin_type() -> c_int {
    PLUGIN_TYPE_FILTER
}

/// Plugin entry point: the filter class.
#[no_mangle]
pub extern "C" fn H5PLget_plugin_info() -> *const c_void {
    std::ptr::from_ref(&CLASS.0).cast()
}

/// `can_apply`: 1 for a dataset of little-endian float32/float64, else -1 with the reason on
/// stderr. Not 0: HDF5 skips an *optional* filter that answers 0 and would store the data
/// uncompressed without a word, and h5py makes every filter optional.
///
/// # Safety
/// Called by HDF5 with its own ids.
pub unsafe extern "C" fn can_apply(_dcpl: hdf5::Hid, type_id: hdf5::Hid, _space: hdf5::Hid) -> c_int {
    report(std::panic::catch_unwind(|| element_type(type_id).map(|_| ())))
}

/// `set_local`: store the dataset's element type and chunk shape after the user's settings
/// in the filter's `cd_values`; -1 (the dataset is not created) when they cannot be read or
/// the settings are invalid.
///
/// # Safety
/// Called by HDF5 with its own ids.
pub unsafe extern "C" fn set_local(dcpl: hdf5::Hid, type_id: hdf5::Hid, _space: hdf5::Hid) -> c_int {
    report(std::panic::catch_unwind(|| store_dataset_layout(dcpl, type_id)))
}

/// A callback's result as HDF5's `herr_t`/`htri_t` (1 or -1), the reason for -1 on stderr.
fn report(result: std::thread::Result<Result<(), String>>) -> c_int {
    match result.unwrap_or_else(|_| Err("internal error (panic) in the fzmod filter".to_string())) {
        Ok(()) => 1,
        Err(message) => {
            eprintln!("fzmod HDF5 filter: {message}");
            -1
        }
    }
}

/// The fzmod element type of HDF5 type `type_id`, or why the filter cannot take it.
fn element_type(type_id: hdf5::Hid) -> Result<fzmod::DType, String> {
    let api = hdf5::api()?;
    // SAFETY: HDF5's functions on the id HDF5 handed us.
    let (class, size, order) = unsafe { ((api.get_class)(type_id), (api.get_size)(type_id), (api.get_order)(type_id)) };
    match (class, size, order) {
        (hdf5::CLASS_FLOAT, 4, hdf5::ORDER_LE) => Ok(fzmod::DType::F32),
        (hdf5::CLASS_FLOAT, 8, hdf5::ORDER_LE) => Ok(fzmod::DType::F64),
        (hdf5::CLASS_FLOAT, _, _) => Err(format!(
            "compresses little-endian float32 and float64 datasets, not a {size}-byte float of byte order {order}"
        )),
        _ => Err(format!("compresses float32 and float64 datasets, not HDF5 type class {class} of {size} bytes")),
    }
}

fn store_dataset_layout(dcpl: hdf5::Hid, type_id: hdf5::Hid) -> Result<(), String> {
    let api = hdf5::api()?;
    let dtype = element_type(type_id)?;
    let mut dims = [0u64; hdf5::MAX_RANK];
    // SAFETY: `dims` holds the MAX_RANK entries we announce.
    let ndims = unsafe { (api.get_chunk)(dcpl, hdf5::MAX_RANK as c_int, dims.as_mut_ptr()) };
    let ndims = usize::try_from(ndims).map_err(|_| "the dataset is not chunked".to_string())?;
    let chunk_shape = dims[..ndims.min(hdf5::MAX_RANK)]
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("chunk dimension {d} too large")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut flags: c_uint = 0;
    // Only the user's words are read back; set_local rewrites the rest.
    let mut cd = [0 as c_uint; params::MAX_SETTINGS_WORDS];
    let mut cd_len = cd.len();
    let mut config: c_uint = 0;
    // SAFETY: every pointer names a live buffer of the size passed; no name is asked for.
    let got = unsafe {
        (api.get_filter_by_id)(
            dcpl,
            FILTER_ID,
            &mut flags,
            &mut cd_len,
            cd.as_mut_ptr(),
            0,
            std::ptr::null_mut(),
            &mut config,
        )
    };
    if got < 0 {
        return Err("cannot read the filter's cd_values from the dataset's creation properties".into());
    }
    // HDF5 reports how many values the filter has, even beyond the buffer it filled.
    let settings = params::Settings::decode(&cd[..cd_len.min(cd.len())])?;
    let full = params::FilterParams { settings, dtype, chunk_shape }.encode()?;
    // SAFETY: `full` holds the `full.len()` values we pass.
    if unsafe { (api.modify_filter)(dcpl, FILTER_ID, flags, full.len(), full.as_ptr()) } < 0 {
        return Err("cannot store the dataset's element type and chunk shape in cd_values".into());
    }
    Ok(())
}

// HDF5 releases the buffer it hands to a filter, and the one the filter returns, with the C
// allocator (`H5MM_xfree` is `free` in release builds), so the filter allocates with it too.
extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
}

/// The filter callback: encodes (or, with `H5Z_FLAG_REVERSE`, decodes) `nbytes` at `*buf`,
/// replaces `*buf` with a new buffer of `*buf_size` bytes and returns the valid length; 0
/// tells HDF5 it failed (the reason goes to stderr, as HDF5 has no message channel for it).
///
/// # Safety
/// `*buf` must hold `nbytes` readable bytes allocated by `malloc`; `cd_values` must hold
/// `cd_nelmts` values. HDF5 guarantees both.
pub unsafe extern "C" fn fzmod_filter(
    flags: c_uint,
    cd_nelmts: usize,
    cd_values: *const c_uint,
    nbytes: usize,
    buf_size: *mut usize,
    buf: *mut *mut c_void,
) -> usize {
    if buf.is_null() || buf_size.is_null() || (*buf).is_null() {
        return 0;
    }
    let input = std::slice::from_raw_parts((*buf).cast::<u8>(), nbytes);
    let cd = if cd_values.is_null() { &[][..] } else { std::slice::from_raw_parts(cd_values, cd_nelmts) };
    // Never unwind into C: a panic is reported as a failure like any error.
    let result = std::panic::catch_unwind(|| if flags & FLAG_REVERSE != 0 { decode(input) } else { encode(cd, input) })
        .unwrap_or_else(|_| Err("internal error (panic) in the fzmod filter".to_string()));
    match result {
        Ok(output) => {
            let fresh = malloc(output.len().max(1));
            if fresh.is_null() {
                eprintln!("fzmod HDF5 filter: out of memory ({} bytes)", output.len());
                return 0;
            }
            std::ptr::copy_nonoverlapping(output.as_ptr(), fresh.cast::<u8>(), output.len());
            free(*buf);
            *buf = fresh;
            *buf_size = output.len();
            output.len()
        }
        Err(message) => {
            eprintln!("fzmod HDF5 filter: {message}");
            0
        }
    }
}

fn encode(cd_values: &[c_uint], chunk: &[u8]) -> Result<Vec<u8>, String> {
    let p = params::FilterParams::decode(cd_values)?;
    let elements = p.chunk_shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).unwrap_or(usize::MAX);
    if elements.checked_mul(p.dtype.size()) != Some(chunk.len()) {
        return Err(format!(
            "chunk of {} bytes does not hold {:?} {} elements (cd_values disagree with the dataset)",
            chunk.len(),
            p.chunk_shape,
            p.dtype
        ));
    }
    let data = fzmod::Buffer::from_le_bytes(p.dtype, chunk).map_err(|e| e.to_string())?;
    let pipeline = fzmod::preset(p.settings.preset, &p.chunk_shape).map_err(|e| e.to_string())?;
    let mut pipeline = fzmod::with_mask(&pipeline, p.settings.mask).map_err(|e| e.to_string())?;
    pipeline.set_error_bound(p.settings.bound).map_err(|e| e.to_string())?;
    pipeline.set_input_dtype(p.dtype).map_err(|e| e.to_string())?;
    pipeline.compress(&data, &p.chunk_shape).map_err(|e| e.to_string())
}

fn decode(archive: &[u8]) -> Result<Vec<u8>, String> {
    let decoded = fzmod::decompress(archive).map_err(|e| e.to_string())?;
    Ok(decoded.data.to_le_bytes())
}
