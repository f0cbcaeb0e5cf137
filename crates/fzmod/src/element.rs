//! Element types and the typed buffers that flow between stages.
//!
//! The on-disk type codes are fixed forever (see docs/FORMAT.md, "Element types").

use crate::error::{corrupt, Error, Result};

/// Element type of a port, a segment or the pipeline input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    U8 = 0,
    U16 = 1,
    U32 = 2,
    U64 = 3,
    I8 = 4,
    I16 = 5,
    I32 = 6,
    I64 = 7,
    F32 = 8,
    F64 = 9,
}

impl DType {
    const ALL: [DType; 10] = [
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F32,
        DType::F64,
    ];

    /// The on-disk code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Inverse of [`DType::code`]; `None` for codes this build does not define.
    pub fn from_code(code: u8) -> Option<DType> {
        DType::ALL.get(code as usize).copied()
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// Short name used by the CLI (`f32`, `i32`, ...).
    pub fn short_name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Long name used in TOML pipelines (`float32`, `int32`, ...), as FZGPUModules spells them.
    pub fn toml_name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parse either spelling.
    pub fn parse(name: &str) -> Result<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.short_name() == name || d.toml_name() == name)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown element type '{name}'")))
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.short_name())
    }
}

/// A typed array flowing along one edge of the stage graph.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

macro_rules! le_codec {
    ($bytes:expr, $t:ty, $variant:ident) => {{
        let size = std::mem::size_of::<$t>();
        Buffer::$variant(if cfg!(target_endian = "little") {
            copied($bytes)
        } else {
            $bytes
                .chunks_exact(size)
                .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk of element size")))
                .collect()
        })
    }};
}

/// A borrowed array: its element type and its elements' memory (native byte order). The
/// device path uploads straight from it, so callers' slices are never copied on the host.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    dtype: DType,
    bytes: &'a [u8],
}

impl<'a> View<'a> {
    /// A view of a typed slice.
    pub fn of<T: Element>(values: &'a [T]) -> View<'a> {
        View { dtype: T::DTYPE, bytes: bytemuck::cast_slice(values) }
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }
    pub fn native_bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// The elements `range` of this view.
    pub fn slice(&self, range: std::ops::Range<usize>) -> View<'a> {
        let size = self.dtype.size();
        View { dtype: self.dtype, bytes: &self.bytes[range.start * size..range.end * size] }
    }
    /// The elements as `T`, when they are of that type and aligned for it (views of typed
    /// slices always are).
    pub fn typed<T: Element>(&self) -> Option<&'a [T]> {
        (self.dtype == T::DTYPE).then(|| bytemuck::try_cast_slice(self.bytes).ok()).flatten()
    }
    /// An owned copy (for stages that run on the CPU).
    ///
    /// Floats (the CPU path's copy of a caller's slice) go into a vector advised for huge
    /// pages, as `zeroed_vec`: a fresh 37 MB copy otherwise costs ~9,000 page faults, which
    /// made borrowed-slice compression on the CPU ~10 % slower than an advised copy.
    pub fn to_buffer(&self) -> Result<Buffer> {
        let whole = self.bytes.len().is_multiple_of(self.dtype.size());
        match self.dtype {
            DType::F32 if whole && cfg!(target_endian = "little") => Ok(Buffer::F32(advised_copy(self.bytes))),
            DType::F64 if whole && cfg!(target_endian = "little") => Ok(Buffer::F64(advised_copy(self.bytes))),
            _ => Buffer::from_le_bytes(self.dtype, self.bytes),
        }
    }
}

/// Rust element types that map to a [`DType`] and a [`Buffer`] variant.
pub trait Element: bytemuck::Pod + Send + Sync {
    const DTYPE: DType;
    /// The values, if `b` holds this type.
    fn slice(b: &Buffer) -> Option<&[Self]>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn slice(b: &Buffer) -> Option<&[Self]> {
                match b {
                    Buffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
element!(f32, F32);
element!(f64, F64);
element!(i16, I16);
element!(u16, U16);
element!(u32, U32);
element!(i32, I32);
element!(u8, U8);

impl Buffer {
    /// A borrowed view of the elements.
    pub fn view(&self) -> View<'_> {
        View { dtype: self.dtype(), bytes: self.native_bytes() }
    }

    /// Element type of the buffer.
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::U8(_) => DType::U8,
            Buffer::U16(_) => DType::U16,
            Buffer::U32(_) => DType::U32,
            Buffer::I16(_) => DType::I16,
            Buffer::I32(_) => DType::I32,
            Buffer::F32(_) => DType::F32,
            Buffer::F64(_) => DType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Buffer::U8(v) => v.len(),
            Buffer::U16(v) => v.len(),
            Buffer::U32(v) => v.len(),
            Buffer::I16(v) => v.len(),
            Buffer::I32(v) => v.len(),
            Buffer::F32(v) => v.len(),
            Buffer::F64(v) => v.len(),
        }
    }

    /// True when the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len() * self.dtype().size()
    }

    /// Little-endian bytes, borrowed where the host is little-endian (writing decoded values
    /// out costs no copy there).
    pub fn le_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        if cfg!(target_endian = "little") {
            std::borrow::Cow::Borrowed(self.native_bytes())
        } else {
            std::borrow::Cow::Owned(self.to_le_bytes())
        }
    }

    /// Little-endian bytes, as stored in an archive segment.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        if cfg!(target_endian = "little") {
            return copied(self.native_bytes());
        }
        match self {
            Buffer::U8(v) => v.clone(),
            Buffer::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buffer::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buffer::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buffer::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buffer::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buffer::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// Reorder little-endian bytes read into [`Buffer::native_bytes_mut`] into native order
    /// (nothing to do on little-endian hosts).
    pub fn from_le_in_place(&mut self) {
        if cfg!(target_endian = "little") {
            return;
        }
        match self {
            Buffer::U8(_) => {}
            Buffer::U16(v) => v.iter_mut().for_each(|x| *x = u16::from_le(*x)),
            Buffer::U32(v) => v.iter_mut().for_each(|x| *x = u32::from_le(*x)),
            Buffer::I16(v) => v.iter_mut().for_each(|x| *x = i16::from_le(*x)),
            Buffer::I32(v) => v.iter_mut().for_each(|x| *x = i32::from_le(*x)),
            Buffer::F32(v) => v.iter_mut().for_each(|x| *x = f32::from_bits(u32::from_le(x.to_bits()))),
            Buffer::F64(v) => v.iter_mut().for_each(|x| *x = f64::from_bits(u64::from_le(x.to_bits()))),
        }
    }

    /// The elements' memory as bytes (little-endian on little-endian hosts).
    pub fn native_bytes(&self) -> &[u8] {
        match self {
            Buffer::U8(v) => v,
            Buffer::U16(v) => bytemuck::cast_slice(v),
            Buffer::U32(v) => bytemuck::cast_slice(v),
            Buffer::I16(v) => bytemuck::cast_slice(v),
            Buffer::I32(v) => bytemuck::cast_slice(v),
            Buffer::F32(v) => bytemuck::cast_slice(v),
            Buffer::F64(v) => bytemuck::cast_slice(v),
        }
    }

    /// `len` zero elements of `dtype` (a destination for device downloads).
    pub fn zeroed(dtype: DType, len: usize) -> Result<Buffer> {
        Ok(match dtype {
            DType::U8 => Buffer::U8(zeroed_vec(len)),
            DType::I16 => Buffer::I16(zeroed_vec(len)),
            DType::U16 => Buffer::U16(zeroed_vec(len)),
            DType::U32 => Buffer::U32(zeroed_vec(len)),
            DType::I32 => Buffer::I32(zeroed_vec(len)),
            DType::F32 => Buffer::F32(zeroed_vec(len)),
            DType::F64 => Buffer::F64(zeroed_vec(len)),
            other => return Err(Error::InvalidArgument(format!("element type {other} is not supported as a buffer"))),
        })
    }

    /// A buffer of `len` elements of `dtype` written chunk by chunk on every core, as
    /// [`vec_by_chunks`] does (each chunk of `chunk` elements zeroed where it lies and handed
    /// to `fill` as native bytes; results in chunk order).
    pub(crate) fn by_chunks<R: Send>(
        dtype: DType,
        len: usize,
        chunk: usize,
        fill: impl Fn(usize, &mut [u8]) -> R + Sync,
    ) -> Result<(Buffer, Vec<R>)> {
        fn typed<T: bytemuck::Pod + Send, R: Send>(
            len: usize,
            chunk: usize,
            fill: impl Fn(usize, &mut [u8]) -> R + Sync,
            buffer: fn(Vec<T>) -> Buffer,
        ) -> (Buffer, Vec<R>) {
            let (v, results) = vec_by_chunks(len, chunk, |k, piece: &mut [T]| fill(k, bytemuck::cast_slice_mut(piece)));
            (buffer(v), results)
        }
        Ok(match dtype {
            DType::U8 => typed(len, chunk, fill, Buffer::U8),
            DType::I16 => typed(len, chunk, fill, Buffer::I16),
            DType::U16 => typed(len, chunk, fill, Buffer::U16),
            DType::U32 => typed(len, chunk, fill, Buffer::U32),
            DType::I32 => typed(len, chunk, fill, Buffer::I32),
            DType::F32 => typed(len, chunk, fill, Buffer::F32),
            DType::F64 => typed(len, chunk, fill, Buffer::F64),
            other => return Err(Error::InvalidArgument(format!("element type {other} is not supported as a buffer"))),
        })
    }

    /// The elements' memory as writable bytes (native byte order).
    pub fn native_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Buffer::U8(v) => v,
            Buffer::I16(v) => bytemuck::cast_slice_mut(v),
            Buffer::U16(v) => bytemuck::cast_slice_mut(v),
            Buffer::I32(v) => bytemuck::cast_slice_mut(v),
            Buffer::U32(v) => bytemuck::cast_slice_mut(v),
            Buffer::F32(v) => bytemuck::cast_slice_mut(v),
            Buffer::F64(v) => bytemuck::cast_slice_mut(v),
        }
    }

    /// Rebuild a buffer from little-endian bytes; the length must be a whole number of elements.
    pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> Result<Buffer> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(corrupt!("{} bytes is not a whole number of {dtype} elements", bytes.len()));
        }
        Ok(match dtype {
            DType::U8 => Buffer::U8(copied(bytes)),
            DType::U16 => le_codec!(bytes, u16, U16),
            DType::U32 => le_codec!(bytes, u32, U32),
            DType::I16 => le_codec!(bytes, i16, I16),
            DType::I32 => le_codec!(bytes, i32, I32),
            DType::F32 => le_codec!(bytes, f32, F32),
            DType::F64 => le_codec!(bytes, f64, F64),
            other => return Err(Error::InvalidArgument(format!("element type {other} is not supported as a buffer"))),
        })
    }
}

/// Bytes one core takes at a time in the helpers below that work on every core.
const PIECE_BYTES: usize = 1 << 20;

/// Native-order element bytes copied into a fresh vector advised for huge pages (its pages
/// are untouched until the copy writes them once). Not zeroed first: a small vector comes
/// from memory the allocator reuses, which zeroing would write twice (on a 740 KB field that
/// memset was ~3 % of a compress call). Copied in 1 MiB pieces on every core: the first
/// write of each fresh page is a fault the kernel answers by zeroing it, and on one core those
/// faults were 14 % of all samples of a 2-thread `interp-fast` compress of 150 MB.
fn advised_copy<T: bytemuck::Pod + Send>(bytes: &[u8]) -> Vec<T> {
    use rayon::prelude::*;
    let size = std::mem::size_of::<T>();
    let n = bytes.len() / size;
    let mut values = Vec::<T>::with_capacity(n);
    #[cfg(target_os = "linux")]
    advise_huge_pages(values.as_ptr() as usize, n * size);
    let piece = (PIECE_BYTES / size).max(1);
    values.spare_capacity_mut()[..n].par_chunks_mut(piece).zip(bytes[..n * size].par_chunks(piece * size)).for_each(
        |(slots, src)| {
            // SAFETY: `slots` has room for src.len() / size elements (equal pieces, zipped),
            // and any bytes are a valid `T` (Pod).
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), slots.as_mut_ptr().cast::<u8>(), src.len()) };
        },
    );
    // SAFETY: the pieces above wrote all n · size bytes of the first n elements.
    unsafe { values.set_len(n) };
    values
}

/// Native-order element bytes into a new vector: large ones by [`advised_copy`] (on every
/// core, huge pages), small ones by one copy (a parallel loop costs more than it saves there).
fn copied<T: bytemuck::Pod + Send>(bytes: &[u8]) -> Vec<T> {
    if bytes.len() < 8 * PIECE_BYTES {
        return bytemuck::pod_collect_to_vec(bytes);
    }
    advised_copy(bytes)
}

/// The concatenation of `pieces`, each copied by a task of its own on every core (a coder's
/// chunks joined on one core were a serial tail of its encode, about 1 % of a 2-thread
/// `cuszp2` call on etopo5 ×8); small totals by one core.
pub(crate) fn concat_on_all_cores<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    use rayon::prelude::*;
    let pieces: Vec<&[u8]> = pieces.into_iter().collect();
    let total = pieces.iter().map(|p| p.len()).sum();
    if total < 2 * PIECE_BYTES {
        return pieces.concat();
    }
    let mut out = Vec::<u8>::with_capacity(total);
    #[cfg(target_os = "linux")]
    advise_huge_pages(out.as_ptr() as usize, total);
    let mut places = Vec::with_capacity(pieces.len());
    let mut rest = &mut out.spare_capacity_mut()[..total];
    for p in &pieces {
        let (place, tail) = rest.split_at_mut(p.len());
        places.push(place);
        rest = tail;
    }
    places.into_par_iter().zip(&pieces).for_each(|(place, p)| {
        // SAFETY: `place` has room for exactly p.len() bytes (split above), and the two do not
        // overlap (one is fresh capacity).
        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), place.as_mut_ptr().cast::<u8>(), p.len()) };
    });
    // SAFETY: the places cover the first `total` bytes, each written above.
    unsafe { out.set_len(total) };
    out
}

/// A zeroed vector. Large ones are cleared in 1 MiB pieces on every core, after asking Linux
/// for transparent huge pages: the allocator may hand back memory from its own heap (the CLI
/// keeps freed blocks), which `calloc` clears on one core — that serial pass was 10 % of all
/// samples of a 2-thread `cuszp2` call on etopo5 ×8 — and fresh pages then take their faults
/// on every core instead of in one (filling a fresh 300 MB buffer otherwise costs ~75,000
/// page faults, which dominated host-side download time).
pub(crate) fn zeroed_vec<T: bytemuck::Zeroable + Copy + Send>(len: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    if len.saturating_mul(size) < 8 * PIECE_BYTES {
        return vec![T::zeroed(); len];
    }
    vec_by_chunks(len, PIECE_BYTES / size, |_, _| ()).0
}

/// A vector of `len` elements written chunk by chunk on every core: each chunk of `chunk`
/// elements (the last may be shorter) is zeroed where it lies, while it is in cache, and
/// handed with its index to `fill`, whose results come back in chunk order. Unlike filling a
/// [`zeroed_vec`], no clearing pass runs over the whole vector first (on arrays larger than
/// the caches that pass was 8–10 % of a 2-thread `cuszp2` call); large vectors get huge pages
/// as there.
pub(crate) fn vec_by_chunks<T, R>(
    len: usize,
    chunk: usize,
    fill: impl Fn(usize, &mut [T]) -> R + Sync,
) -> (Vec<T>, Vec<R>)
where
    T: bytemuck::Zeroable + Copy + Send,
    R: Send,
{
    use rayon::prelude::*;
    let mut v = Vec::<T>::with_capacity(len);
    #[cfg(target_os = "linux")]
    advise_huge_pages(v.as_ptr() as usize, len * std::mem::size_of::<T>());
    let results = v.spare_capacity_mut()[..len]
        .par_chunks_mut(chunk.max(1))
        .enumerate()
        .map(|(k, piece)| {
            piece.fill(std::mem::MaybeUninit::new(T::zeroed()));
            // SAFETY: every element of `piece` was written just above.
            let piece = unsafe { &mut *(piece as *mut [std::mem::MaybeUninit<T>] as *mut [T]) };
            fill(k, piece)
        })
        .collect();
    // SAFETY: the pieces cover the first `len` elements, and each was written above.
    unsafe { v.set_len(len) };
    (v, results)
}

/// [`vec_by_chunks`] for a `fill` that can fail: the first chunk's error in chunk order.
pub(crate) fn try_vec_by_chunks<T: bytemuck::Zeroable + Copy + Send>(
    len: usize,
    chunk: usize,
    fill: impl Fn(usize, &mut [T]) -> crate::error::Result<()> + Sync,
) -> crate::error::Result<Vec<T>> {
    let (v, filled) = vec_by_chunks(len, chunk, fill);
    filled.into_iter().collect::<crate::error::Result<()>>()?;
    Ok(v)
}

/// Copy `src` into `dst` (the same length) in 1 MiB pieces on every core: a decoded array
/// copied into the caller's memory by one core was the serial tail of a CPU decode (5 % of a
/// 2-thread `cuszp3-plain` decode of etopo5, with the faults of the caller's fresh pages).
pub(crate) fn copy_on_all_cores(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    assert_eq!(dst.len(), src.len(), "copy_on_all_cores: lengths differ");
    if src.len() < 2 * PIECE_BYTES {
        return dst.copy_from_slice(src);
    }
    dst.par_chunks_mut(PIECE_BYTES).zip(src.par_chunks(PIECE_BYTES)).for_each(|(d, s)| d.copy_from_slice(s));
}

/// `f` of every element of `src`, in parallel chunks of `chunk`, written once into a vector
/// that is not cleared first (clearing costs a pass over its pages); large ones get huge
/// pages as in [`zeroed_vec`].
pub(crate) fn mapped_vec<C: Copy + Sync, T: Send>(src: &[C], chunk: usize, f: impl Fn(C) -> T + Sync) -> Vec<T> {
    use rayon::prelude::*;
    let n = src.len();
    let mut v = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    advise_huge_pages(v.as_ptr() as usize, n * std::mem::size_of::<T>());
    v.spare_capacity_mut()[..n]
        .par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(slots, src)| map_into(slots, src, &f));
    // SAFETY: the first `n` slots were each written above (equal-length chunks, zipped).
    unsafe { v.set_len(n) };
    v
}

/// `f` of every element of `v` in place, in parallel chunks of `chunk`; on AVX2 with its wider
/// lanes.
pub(crate) fn map_in_place<T: Copy + Send>(v: &mut [T], chunk: usize, f: impl Fn(T) -> T + Sync) {
    use rayon::prelude::*;
    v.par_chunks_mut(chunk).for_each(|c| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { map_in_place_avx2(c, &f) };
        }
        map_in_place_inline(c, &f)
    });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn map_in_place_avx2<T: Copy>(c: &mut [T], f: &impl Fn(T) -> T) {
    map_in_place_inline(c, f)
}

#[inline(always)]
fn map_in_place_inline<T: Copy>(c: &mut [T], f: &impl Fn(T) -> T) {
    for x in c {
        *x = f(*x);
    }
}

/// `slots[i] = f(src[i])` (equal lengths); on AVX2 with its wider lanes.
fn map_into<C: Copy, T>(slots: &mut [std::mem::MaybeUninit<T>], src: &[C], f: &impl Fn(C) -> T) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { map_into_avx2(slots, src, f) };
    }
    map_into_inline(slots, src, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn map_into_avx2<C: Copy, T>(slots: &mut [std::mem::MaybeUninit<T>], src: &[C], f: &impl Fn(C) -> T) {
    map_into_inline(slots, src, f)
}

#[inline(always)]
fn map_into_inline<C: Copy, T>(slots: &mut [std::mem::MaybeUninit<T>], src: &[C], f: &impl Fn(C) -> T) {
    for (slot, &c) in slots.iter_mut().zip(src) {
        slot.write(f(c));
    }
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(address: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 4 * HUGE {
        return;
    }
    let start = address.next_multiple_of(HUGE);
    let end = (address + len) / HUGE * HUGE;
    // SAFETY: advice only, over whole huge pages inside the vector's allocation; a kernel
    // without transparent huge pages ignores it.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element is handed to `fill` once, in its chunk (the last one shorter), zeroed, and
    /// the results come back in chunk order, for vectors below and above the huge-page size.
    #[test]
    fn vec_by_chunks_hands_out_every_chunk_zeroed_in_order() {
        for (len, chunk) in [(0, 4), (1, 4), (10, 4), (12, 4), (3 << 20, 1 << 18), ((3 << 20) + 5, 1 << 18)] {
            let (v, firsts) = vec_by_chunks::<u32, _>(len, chunk, |k, piece| {
                assert!(piece.iter().all(|&x| x == 0), "chunk {k} of {len} not zeroed");
                assert_eq!(piece.len(), chunk.min(len - k * chunk), "chunk {k} of {len}");
                for (i, x) in piece.iter_mut().enumerate() {
                    *x = (k * chunk + i) as u32;
                }
                k * chunk
            });
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32), "{len}");
            assert_eq!(firsts, (0..len.div_ceil(chunk)).map(|k| k * chunk).collect::<Vec<_>>(), "{len}");
        }
    }
}
