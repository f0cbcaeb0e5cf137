//! Allocation of the C-order copy of a non-contiguous input. A fresh multi-megabyte `Vec` is
//! faulted in 4 KiB pages, which on a 37 MB array costs about as much as the copy itself;
//! asking for transparent huge pages (as numpy does for its own arrays of 4 MiB and more)
//! makes it 512 times fewer faults. Where THP is off or the call fails, the advice is simply
//! ignored.

/// Below this, the faults do not matter (numpy's threshold for the same advice).
const HUGE_PAGE_ADVICE_BYTES: usize = 4 << 20;

/// An empty vector with room for `len` elements, its memory advised for huge pages.
pub fn vec_for_copy<T>(len: usize) -> Vec<T> {
    let values: Vec<T> = Vec::with_capacity(len);
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    if bytes >= HUGE_PAGE_ADVICE_BYTES {
        advise_huge_pages(values.as_ptr().cast::<u8>(), bytes);
    }
    values
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *const u8, bytes: usize) {
    use std::ffi::{c_int, c_void};
    extern "C" {
        fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
    }
    const MADV_HUGEPAGE: c_int = 14;
    const PAGE: usize = 4096;
    // madvise wants a page-aligned start: advise the whole pages inside the allocation.
    let first = (start as usize).next_multiple_of(PAGE);
    let end = (start as usize + bytes) / PAGE * PAGE;
    if end > first {
        // SAFETY: the range lies inside memory this process owns (the vector's capacity);
        // MADV_HUGEPAGE changes how it is backed, never its contents. The result is ignored
        // on purpose: the advice is an optimisation.
        unsafe { madvise(first as *mut c_void, end - first, MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *const u8, _bytes: usize) {}
