//! The few libhdf5 functions `can_apply` and `set_local` call, found at run time in the HDF5
//! that loaded the plugin. The plugin is not linked against libhdf5: h5py ships its own,
//! privately named copy (loaded `RTLD_LOCAL`, so its symbols are not global), and the HDF5
//! tools use the system's. So: the global symbols first (the tools), then every loaded
//! library whose file name says `hdf5` (h5py's copy), opened again without loading anything
//! (`RTLD_NOLOAD`) to look the symbols up in it. A process with two different HDF5s loaded
//! gets the first one found; their ids are not interchangeable, and the calls then fail
//! (a refused dataset), never write wrong data.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// `hid_t` (64-bit since HDF5 1.10).
pub type Hid = i64;

/// `H5T_FLOAT` of `H5T_class_t`.
pub const CLASS_FLOAT: c_int = 1;
/// `H5T_ORDER_LE` of `H5T_order_t`.
pub const ORDER_LE: c_int = 0;
/// `H5S_MAX_RANK`: the most dimensions a chunk can have.
pub const MAX_RANK: usize = 32;

/// `int H5Pget_chunk(hid_t plist, int max_ndims, hsize_t dims[])`
pub type GetChunk = unsafe extern "C" fn(Hid, c_int, *mut u64) -> c_int;
/// `H5T_class_t H5Tget_class(hid_t type)`, `H5T_order_t H5Tget_order(hid_t type)`
pub type GetTypeEnum = unsafe extern "C" fn(Hid) -> c_int;
/// `size_t H5Tget_size(hid_t type)`
pub type GetSize = unsafe extern "C" fn(Hid) -> usize;
/// `herr_t H5Pget_filter_by_id2(hid_t plist, H5Z_filter_t id, unsigned *flags,
/// size_t *cd_nelmts, unsigned cd_values[], size_t namelen, char name[], unsigned *config)`
pub type GetFilterById =
    unsafe extern "C" fn(Hid, c_int, *mut c_uint, *mut usize, *mut c_uint, usize, *mut c_char, *mut c_uint) -> c_int;
/// `herr_t H5Pmodify_filter(hid_t plist, H5Z_filter_t id, unsigned flags, size_t cd_nelmts,
/// const unsigned cd_values[])`
pub type ModifyFilter = unsafe extern "C" fn(Hid, c_int, c_uint, usize, *const c_uint) -> c_int;

/// The functions, with HDF5's C signatures.
pub struct Api {
    pub get_chunk: GetChunk,
    pub get_class: GetTypeEnum,
    pub get_size: GetSize,
    pub get_order: GetTypeEnum,
    pub get_filter_by_id: GetFilterById,
    pub modify_filter: ModifyFilter,
}

const RTLD_LAZY: c_int = 0x1;
const RTLD_NOLOAD: c_int = 0x4;
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

/// The leading fields of glibc's `struct dl_phdr_info` (only the name is read).
#[repr(C)]
struct PhdrInfo {
    addr: usize,
    name: *const c_char,
}

// In libc since glibc 2.34, in libdl (still present as a stub) before.
#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dl_iterate_phdr(
        callback: unsafe extern "C" fn(*mut PhdrInfo, usize, *mut c_void) -> c_int,
        data: *mut c_void,
    ) -> c_int;
}

/// The API, looked up once per process; `Err` says why it is missing.
pub fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(find).as_ref().map_err(Clone::clone)
}

fn find() -> Result<Api, String> {
    // SAFETY: RTLD_DEFAULT searches the global scope; the handles below come from dlopen of
    // already-loaded libraries and are never closed (the libraries stay loaded anyway).
    if let Some(api) = unsafe { lookup(RTLD_DEFAULT) } {
        return Ok(api);
    }
    for name in loaded_hdf5_libraries() {
        let handle = unsafe { dlopen(name.as_ptr(), RTLD_LAZY | RTLD_NOLOAD) };
        if !handle.is_null() {
            if let Some(api) = unsafe { lookup(handle) } {
                return Ok(api);
            }
        }
    }
    Err("no loaded HDF5 library exports H5Pget_chunk (the filter is loaded by HDF5 itself)".into())
}

/// Every symbol of [`Api`] in `handle`, or `None` if one is missing.
///
/// # Safety
/// `handle` is `RTLD_DEFAULT` or a live dlopen handle.
unsafe fn lookup(handle: *mut c_void) -> Option<Api> {
    let symbol = |name: &CStr| {
        let found = dlsym(handle, name.as_ptr());
        (!found.is_null()).then_some(found)
    };
    // SAFETY (transmutes): each symbol is the HDF5 function of that name, whose C signature
    // the field's type spells out.
    Some(Api {
        get_chunk: std::mem::transmute::<*mut c_void, GetChunk>(symbol(c"H5Pget_chunk")?),
        get_class: std::mem::transmute::<*mut c_void, GetTypeEnum>(symbol(c"H5Tget_class")?),
        get_size: std::mem::transmute::<*mut c_void, GetSize>(symbol(c"H5Tget_size")?),
        get_order: std::mem::transmute::<*mut c_void, GetTypeEnum>(symbol(c"H5Tget_order")?),
        get_filter_by_id: std::mem::transmute::<*mut c_void, GetFilterById>(symbol(c"H5Pget_filter_by_id2")?),
        modify_filter: std::mem::transmute::<*mut c_void, ModifyFilter>(symbol(c"H5Pmodify_filter")?),
    })
}

/// Paths of the loaded libraries whose file name contains `hdf5`.
fn loaded_hdf5_libraries() -> Vec<std::ffi::CString> {
    unsafe extern "C" fn collect(info: *mut PhdrInfo, _size: usize, data: *mut c_void) -> c_int {
        let found = &mut *data.cast::<Vec<std::ffi::CString>>();
        let name = (*info).name;
        if !name.is_null() {
            let path = CStr::from_ptr(name);
            let file = path.to_bytes().rsplit(|&b| b == b'/').next().unwrap_or_default();
            if file.windows(4).any(|w| w == b"hdf5") {
                found.push(path.to_owned());
            }
        }
        0
    }
    let mut found: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback only reads the entries glibc hands it and pushes into `found`.
    unsafe { dl_iterate_phdr(collect, std::ptr::from_mut(&mut found).cast()) };
    found
}
