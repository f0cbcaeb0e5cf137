//! fzmod as an HDF5 filter plugin.
//!
//! HDF5 loads every shared library in `HDF5_PLUGIN_PATH` and asks it, through
//! [`H5PLget_plugin_type`] and [`H5PLget_plugin_info`], for a filter class ([`H5ZClass2`]).
//! Only those two symbols and the filter callback cross the C ABI; the plugin does not link
//! libhdf5, so it loads into any HDF5 ≥ 1.10 (h5py's, the command-line tools').
//!
//! Filter id [`FILTER_ID`] is in the range HDF5 reserves for testing (256–511): it is **not
//! registered** with The HDF Group. Chunk shape, element type, preset and bound travel in
//! the filter's `cd_values` ([`params`]); decoding reads only the archive.

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

/// `H5Z_class2_t`, field for field (hid_t is 64-bit since HDF5 1.10; the two callbacks
/// that take hid_t are left null, as `set_local` would need libhdf5 to read the dataset).
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
    can_apply: None,
    set_local: None,
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
    let mut pipeline = fzmod::preset(p.preset, &p.chunk_shape).map_err(|e| e.to_string())?;
    pipeline.set_error_bound(p.bound).map_err(|e| e.to_string())?;
    pipeline.set_input_dtype(p.dtype).map_err(|e| e.to_string())?;
    pipeline.compress(&data, &p.chunk_shape).map_err(|e| e.to_string())
}

fn decode(archive: &[u8]) -> Result<Vec<u8>, String> {
    let decoded = fzmod::decompress(archive).map_err(|e| e.to_string())?;
    Ok(decoded.data.to_le_bytes())
}
