//! CPU reference of the quantizer. The CUDA kernel must reproduce these bits exactly:
//! one multiply, cuSZp's rounding, reconstruction `(q · step) · 2` in the element type,
//! and the bound check in f64.

use super::channel::{self, Layout, Run};
use crate::archive::{Reader, Writer};
use crate::element::{mapped_vec, vec_by_chunks};
use crate::error::{corrupt, Result};
use rayon::prelude::*;
use std::borrow::Cow;

/// Elements per parallel work item; fixed so the output never depends on the thread count.
const CHUNK: usize = 1 << 16;

/// The floating-point element types the quantizer accepts.
pub(crate) trait Float: Copy + Send + Sync + PartialOrd + bytemuck::Pod + 'static {
    const ZERO: Self;
    const INFINITY: Self;
    const NEG_INFINITY: Self;
    fn to_f64(self) -> f64;
    /// Largest value of this type that is ≤ `v` (v ≥ 0), saturating at the type's maximum.
    fn at_most(v: f64) -> Self;
    fn is_finite(self) -> bool;
    /// 0.5 / step, in this type.
    fn half_recip(step: Self) -> Self;
    /// cuSZp's rounding of `x · recip` to a signed code (as cuSZp defines it; docs/FORMAT.md, "Quantizer").
    fn quantize(self, recip: Self) -> i32;
    /// `(q · step) · 2`, evaluated in this type without contraction.
    fn reconstruct(q: i32, step: Self) -> Self;
    /// `|self − r| ≤ accept`, in this type: false for NaN and ±Inf.
    fn close_to(self, r: Self, accept: Self) -> bool;
    /// The fast test's threshold for a bound (device.cu's `accept`): `abs_bound` less 2^-20 of
    /// it, rounded down to this type. A difference of two values of this type, rounded to it,
    /// is within 2^-24 of the exact one, so [`Float::close_to`] with it proves the f64 test
    /// `|x − x'| ≤ abs_bound`; only values it fails need that test.
    fn accept(abs_bound: f64) -> Self {
        Self::at_most(abs_bound * (1.0 - 1.0 / 1048576.0))
    }
    /// The raw bits, zero-extended.
    fn bits(self) -> u64;
    fn write_le(self, w: &mut Writer);
    fn read_le(r: &mut Reader) -> Result<Self>;
    /// Inline words below this value are bins (PFPL format): 2^23 for f32, so every other
    /// word can be a raw f32; all but [`ESCAPE`] for f64, whose raw values never fit inline.
    const BIN_WORDS: u32;
    /// The value's bits as an inline raw word, if the type fits one (f32 only).
    fn raw_word(self) -> Option<u32>;
    /// Inverse of [`Float::raw_word`]; zero for types without inline raw words (never read:
    /// the caller selects it only for non-bin words), so a decode loop needs no branch.
    fn from_raw_word(w: u32) -> Self;

    /// The code of a finite value whose reconstruction `(q · step) · 2` lies within
    /// `abs_bound` (checked in f64): cuSZp's rounded code, or — when that misses because the
    /// value sits within rounding error of a bin edge — the neighbouring code on the value's
    /// side (PFPL rounds its bin width to nearest and keeps such values in a bin; with the
    /// width at most the bound they would otherwise become outliers). `None`: an outlier.
    /// device.cu's `quant_code` makes the same choice.
    fn bin(self, recip: Self, step: Self, abs_bound: f64) -> Option<i32> {
        if !self.is_finite() {
            return None;
        }
        let x = self.to_f64();
        let within = |q: i32| (x - Self::reconstruct(q, step).to_f64()).abs() <= abs_bound;
        let q = self.quantize(recip);
        if within(q) {
            return Some(q);
        }
        let neighbour = if x < Self::reconstruct(q, step).to_f64() { q.checked_sub(1) } else { q.checked_add(1) };
        neighbour.filter(|&n| within(n))
    }
}

macro_rules! impl_float {
    ($t:ty, $bytes:expr, $bin_words:expr, $raw:expr, $from_raw:expr, $trunc:expr) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const INFINITY: Self = <$t>::INFINITY;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn at_most(v: f64) -> Self {
                let c = (v as $t).min(<$t>::MAX);
                if (c as f64) > v {
                    c.next_down()
                } else {
                    c
                }
            }
            #[inline]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            fn half_recip(step: Self) -> Self {
                0.5 / step
            }
            #[inline]
            fn quantize(self, recip: Self) -> i32 {
                let d = self * recip;
                // Truncation toward zero with the same saturation and NaN → 0 as
                // `trunc(…) as i32`, without a libm call: the loop stays vectorizable.
                let t = $trunc(d + 0.5);
                if d >= -0.5 {
                    t
                } else {
                    t.wrapping_sub(1)
                }
            }
            #[inline]
            fn reconstruct(q: i32, step: Self) -> Self {
                (q as $t * step) * 2.0
            }
            #[inline]
            fn close_to(self, r: Self, accept: Self) -> bool {
                (self - r).abs() <= accept
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn write_le(self, w: &mut Writer) {
                w.bytes.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(r: &mut Reader) -> Result<Self> {
                let b = r.take($bytes)?;
                Ok(<$t>::from_le_bytes(b.try_into().expect("element size")))
            }
            const BIN_WORDS: u32 = $bin_words;
            fn raw_word(self) -> Option<u32> {
                $raw(self)
            }
            #[inline]
            fn from_raw_word(w: u32) -> Self {
                $from_raw(w)
            }
        }
    };
}
impl_float!(f32, 4, 1 << 23, |v: f32| Some(v.to_bits()), f32::from_bits, saturating_i32_of_f32);
impl_float!(f64, 8, ESCAPE, |_| None, |_| 0.0, saturating_i32);

/// `v as i32` (toward zero, saturating, NaN → 0) in a form that vectorises: LLVM turns the
/// saturating f64 → i32 cast into a scalar compare-and-select per lane, while a clamp (every
/// i32 bound is exact in f64) and an unchecked conversion are packed min, max and cvttpd2dq.
#[inline(always)]
fn saturating_i32(v: f64) -> i32 {
    let c = v.clamp(f64::from(i32::MIN), f64::from(i32::MAX));
    if c.is_nan() {
        0
    } else {
        // SAFETY: c is finite and within i32's range.
        unsafe { c.to_int_unchecked() }
    }
}

/// `v as i32` for f32 in a form that vectorises, as [`saturating_i32`]: i32::MAX is not an
/// f32, so the clamp stops at the largest f32 below 2^31 (no f32 lies between it and 2^31) and
/// values from 2^31 up are selected to i32::MAX afterwards.
#[inline(always)]
fn saturating_i32_of_f32(v: f32) -> i32 {
    const BELOW_2_31: f32 = 2_147_483_520.0;
    let c = v.clamp(i32::MIN as f32, BELOW_2_31);
    // SAFETY: c is finite (NaN is not taken) and within i32's range.
    let t = if c.is_nan() { 0 } else { unsafe { c.to_int_unchecked() } };
    if v >= 2_147_483_648.0 {
        i32::MAX
    } else {
        t
    }
}

/// Smallest and largest finite value, in f64 (exact for both element types); `None` when
/// there is no finite value.
pub(crate) fn finite_min_max<T: Float>(x: &[T]) -> Option<(f64, f64)> {
    let (lo, hi) = x
        .par_chunks(CHUNK)
        .map(chunk_min_max)
        .reduce(|| (f64::INFINITY, f64::NEG_INFINITY), |a, b| (a.0.min(b.0), a.1.max(b.1)));
    (lo <= hi).then_some((lo, hi))
}

/// [`finite_min_max`] of one chunk, the identities when it has no finite value. Sixteen lanes
/// of independent compare-and-select minima and maxima in the element type (a fold is one
/// serial chain of `min`, which stays scalar, and widening every f32 to f64 first made the
/// loop shuffle-bound), widened once at the end; extremes are exact in any order and the
/// widening is exact, so the result is the fold's. On AVX2 twice as wide.
fn chunk_min_max<T: Float>(c: &[T]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { chunk_min_max_avx2(c) };
    }
    chunk_min_max_inline(c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn chunk_min_max_avx2<T: Float>(c: &[T]) -> (f64, f64) {
    chunk_min_max_inline(c)
}

#[inline(always)]
fn chunk_min_max_inline<T: Float>(c: &[T]) -> (f64, f64) {
    const LANES: usize = 16;
    let (mut lo, mut hi) = ([T::INFINITY; LANES], [T::NEG_INFINITY; LANES]);
    let mut take = |j: usize, v: T| {
        // A non-finite value changes no lane: NaN fails every comparison and an infinity
        // those of its own side, so only the other side's infinity is swapped for the
        // identity. Two selects on the value, not one on an `is_finite` mask: for f64 LLVM
        // packed that mask's lanes through shuffles (three times the cycles per value).
        let low = if v == T::NEG_INFINITY { T::INFINITY } else { v };
        let high = if v == T::INFINITY { T::NEG_INFINITY } else { v };
        lo[j] = if low < lo[j] { low } else { lo[j] };
        hi[j] = if high > hi[j] { high } else { hi[j] };
    };
    let (groups, rest) = c.as_chunks::<LANES>();
    for g in groups {
        for (j, &v) in g.iter().enumerate() {
            take(j, v);
        }
    }
    for (j, &v) in rest.iter().enumerate() {
        take(j, v);
    }
    let lo = lo.into_iter().fold(f64::INFINITY, |a, v| a.min(v.to_f64()));
    (lo, hi.into_iter().fold(f64::NEG_INFINITY, |a, v| a.max(v.to_f64())))
}

/// Output of [`quantize`].
pub(crate) struct Quantized<T> {
    pub codes: Vec<i32>,
    /// Outlier channel bytes in `layout` (channel.rs).
    pub outliers: Vec<u8>,
    pub layout: Layout,
    pub num_outliers: u64,
    pub step: T,
}

/// `kernel(chunk index, values, codes)` over pieces of [`CHUNK`] values. Values handed over
/// (`Cow::Owned`) of the codes' size (f32 to 32-bit codes) take the codes in their own memory
/// (a fresh array would cost its page clearing; each piece's values are first copied to a
/// scratch that stays in cache); borrowed values (the caller's array, read in place) and
/// other sizes get a new array. Returns the codes and the kernel's results in order.
fn codes_of<T: Float, C: bytemuck::Pod + Send + Sync, R: Send>(
    x: Cow<'_, [T]>,
    kernel: impl Fn(usize, &[T], &mut [C]) -> R + Sync,
) -> (Vec<C>, Vec<R>) {
    let x = match x {
        Cow::Owned(x) => bytemuck::try_cast_vec::<T, C>(x).map_err(|(_, x)| Cow::Owned(x)),
        borrowed => Err(borrowed),
    };
    match x {
        Ok(mut codes) => {
            let results = codes
                .par_chunks_mut(CHUNK)
                .enumerate()
                .map_init(Vec::new, |scratch: &mut Vec<T>, (k, c)| {
                    scratch.clear();
                    scratch.extend_from_slice(bytemuck::cast_slice(c));
                    kernel(k, scratch, c)
                })
                .collect();
            (codes, results)
        }
        Err(x) => vec_by_chunks(x.len(), CHUNK, |k, c| kernel(k, &x[k * CHUNK..][..c.len()], c)),
    }
}

/// The codes of `x` into `codes` ([`Float::bin`]'s choice), 0 for the values that cannot be
/// quantized within the bound, which are returned with their index (`base` + position) in
/// index order. A branch-free first pass in the element type (it vectorizes, at twice the
/// lanes of f64 for f32) keeps the rounded code where the fast test proves the bound
/// ([`Float::accept`]); only a slice with values it does not keep is walked again, with the
/// f64 test, to retry the neighbouring bin and list the outliers. LorenzoQuant pre-quantizes
/// with it too. On AVX2 the first pass runs twice as wide (the same operations).
pub(crate) fn codes_or_outliers<T: Float>(
    x: &[T],
    codes: &mut [i32],
    base: usize,
    step: T,
    abs_bound: f64,
) -> Vec<(usize, T)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { codes_or_outliers_avx2(x, codes, base, step, abs_bound) };
    }
    codes_or_outliers_inline(x, codes, base, step, abs_bound)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn codes_or_outliers_avx2<T: Float>(
    x: &[T],
    codes: &mut [i32],
    base: usize,
    step: T,
    abs_bound: f64,
) -> Vec<(usize, T)> {
    codes_or_outliers_inline(x, codes, base, step, abs_bound)
}

/// [`codes_or_outliers`] for the target's baseline features (or the caller's, inlined).
#[inline(always)]
pub(crate) fn codes_or_outliers_inline<T: Float>(
    x: &[T],
    codes: &mut [i32],
    base: usize,
    step: T,
    abs_bound: f64,
) -> Vec<(usize, T)> {
    let recip = T::half_recip(step);
    let accept = T::accept(abs_bound);
    // Whether any value is unsure, or-ed in 32-bit lanes: a usize count would widen the
    // vectors to 64-bit lanes and halve them.
    let mut unsure = 0u32;
    for (c, &v) in codes.iter_mut().zip(x) {
        let q = v.quantize(recip);
        *c = q;
        unsure |= u32::from(!v.close_to(T::reconstruct(q, step), accept));
    }
    let mut outliers = Vec::new();
    if unsure == 0 {
        return outliers;
    }
    // Whether `v` keeps its rounded code: finite and reconstructed within the bound (f64).
    // `&`, not `&&`: a short-circuit kept the loop scalar.
    let keeps = |v: T, q: i32| v.is_finite() & ((v.to_f64() - T::reconstruct(q, step).to_f64()).abs() <= abs_bound);
    for (i, (c, &v)) in codes.iter_mut().zip(x).enumerate() {
        if !keeps(v, *c) {
            match v.bin(recip, step, abs_bound) {
                Some(q) => *c = q,
                None => {
                    *c = 0;
                    outliers.push((base + i, v));
                }
            }
        }
    }
    outliers
}

/// Quantize with the strict-bound check; failures become code 0 plus an outlier entry.
pub(crate) fn quantize<T: Float>(x: Cow<'_, [T]>, abs_bound: f64) -> Quantized<T> {
    let step = T::at_most(abs_bound);
    let (codes, per_chunk) =
        codes_of(x, |chunk, x: &[T], codes: &mut [i32]| codes_or_outliers(x, codes, chunk * CHUNK, step, abs_bound));
    let list: Vec<(u64, u64)> = per_chunk.into_iter().flatten().map(|(i, v)| (i as u64, v.bits())).collect();
    let (outliers, layout) = encode_outliers(&list, std::mem::size_of::<T>());
    Quantized { codes, outliers, layout, num_outliers: list.len() as u64, step }
}

/// The outlier channel of `(index, raw bits)` in index order, in the smaller layout
/// (channel.rs): per entry a varint gap (and run head), then `value_bytes` little-endian bytes.
pub(crate) fn encode_outliers(sorted: &[(u64, u64)], value_bytes: usize) -> (Vec<u8>, Layout) {
    channel::smaller(|w, layout| {
        channel::write_list(w, sorted, layout, |w, bits| w.bytes.extend_from_slice(&bits.to_le_bytes()[..value_bytes]))
    })
}

/// `f` of every code, in the codes' own memory where the value type has their size (f32 from
/// 32-bit codes: a fresh array would cost its page clearing), else into a new array. Returns
/// the values and how many codes `count` holds for (escapes, for the inline format).
fn map_codes<C: bytemuck::Pod + Send + Sync, T: Float>(
    codes: Vec<C>,
    f: impl Fn(C) -> T + Sync,
    count: impl Fn(C) -> bool + Sync,
) -> (Vec<T>, usize) {
    match bytemuck::try_cast_vec::<C, T>(codes) {
        Ok(mut values) => {
            // Each slot holds its code's bits until it is overwritten with the value.
            let n = values.par_chunks_mut(CHUNK).map(|o| map_codes_in_place(o, &f, &count)).sum();
            (values, n)
        }
        Err((_, codes)) => {
            let values = mapped_vec(&codes, CHUNK, f);
            let n = codes.par_chunks(CHUNK).map(|c| c.iter().filter(|&&c| count(c)).count()).sum();
            (values, n)
        }
    }
}

/// `f` of every code of `codes` into `out` (a block of a fused region: codes and values in
/// separate buffers); returns how many codes `count` holds for. On AVX2 8 lanes at a time.
pub(crate) fn map_codes_into<C: bytemuck::Pod, T: Float>(
    codes: &[C],
    out: &mut [T],
    f: &impl Fn(C) -> T,
    count: &impl Fn(C) -> bool,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { map_codes_into_avx2(codes, out, f, count) };
    }
    map_codes_into_inline(codes, out, f, count)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn map_codes_into_avx2<C: bytemuck::Pod, T: Float>(
    codes: &[C],
    out: &mut [T],
    f: &impl Fn(C) -> T,
    count: &impl Fn(C) -> bool,
) -> usize {
    map_codes_into_inline(codes, out, f, count)
}

#[inline(always)]
fn map_codes_into_inline<C: bytemuck::Pod, T: Float>(
    codes: &[C],
    out: &mut [T],
    f: &impl Fn(C) -> T,
    count: &impl Fn(C) -> bool,
) -> usize {
    let mut n = 0u32;
    for (v, &c) in out.iter_mut().zip(codes) {
        *v = f(c);
        n += u32::from(count(c));
    }
    n as usize
}

/// [`map_codes`] of one chunk in place (`C` and `T` of one size); on AVX2 8 lanes at a time.
fn map_codes_in_place<C: bytemuck::Pod, T: Float>(
    o: &mut [T],
    f: &impl Fn(C) -> T,
    count: &impl Fn(C) -> bool,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { map_codes_in_place_avx2(o, f, count) };
    }
    map_codes_in_place_inline(o, f, count)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn map_codes_in_place_avx2<C: bytemuck::Pod, T: Float>(
    o: &mut [T],
    f: &impl Fn(C) -> T,
    count: &impl Fn(C) -> bool,
) -> usize {
    map_codes_in_place_inline(o, f, count)
}

#[inline(always)]
fn map_codes_in_place_inline<C: bytemuck::Pod, T: Float>(
    o: &mut [T],
    f: &impl Fn(C) -> T,
    count: &impl Fn(C) -> bool,
) -> usize {
    // A chunk's count fits 32 bits, as wide as the lanes.
    let mut n = 0u32;
    for v in o {
        let c: C = bytemuck::try_cast(*v).expect("same size, as the vector cast");
        *v = f(c);
        n += u32::from(count(c));
    }
    n as usize
}

/// Inverse: reconstruct every code, then put the outliers back bit for bit.
pub(crate) fn reconstruct<T: Float>(
    codes: Vec<i32>,
    step: T,
    outliers: &[u8],
    num_outliers: u64,
    layout: Layout,
) -> Result<Vec<T>> {
    let n = codes.len();
    let runs = parse_outliers(outliers, num_outliers, n, layout)?;
    let (mut out, _) = map_codes(codes, |q| T::reconstruct(q, step), |_| false);
    for r in runs {
        out[r.start..r.start + r.len].fill(r.value);
    }
    Ok(out)
}

/// Decode the outlier channel into runs, every run checked against `n` and the count.
pub(crate) fn parse_outliers<T: Float>(bytes: &[u8], count: u64, n: usize, layout: Layout) -> Result<Vec<Run<T>>> {
    let mut r = Reader::new(bytes, "Quantizer outlier channel");
    let runs = channel::read_list(&mut r, count, n, layout, "Quantizer outlier channel", T::read_le)?;
    r.finish()?;
    Ok(runs)
}

/// Inline word that sends the value to the outlier channel (raw values in index order).
pub(crate) const ESCAPE: u32 = u32::MAX;

/// PFPL's QABS word for one value (PFPL, Fallin et al., IPDPS'25; docs/FORMAT.md): `zigzag(q)` when it is a bin word and
/// the reconstruction passes the double check; else the raw f32 bits when they cannot be
/// mistaken for a bin or the escape; else [`ESCAPE`] (`true`: the value goes to the channel).
#[inline]
pub(crate) fn inline_word<T: Float>(x: T, recip: T, step: T, abs_bound: f64) -> (u32, bool) {
    if let Some(q) = x.bin(recip, step, abs_bound) {
        let w = ((q << 1) ^ (q >> 31)) as u32;
        if w < T::BIN_WORDS {
            return (w, false);
        }
    }
    match x.raw_word() {
        Some(raw) if raw >= T::BIN_WORDS && raw != ESCAPE => (raw, false),
        _ => (ESCAPE, true),
    }
}

/// Output of [`quantize_inline`].
pub(crate) struct InlineQuantized {
    pub words: Vec<u32>,
    /// Raw values of the escaped elements, LE, in index order.
    pub outliers: Vec<u8>,
    pub num_outliers: u64,
}

/// Quantize to PFPL inline words with the strict-bound double check.
pub(crate) fn quantize_inline<T: Float>(x: Cow<'_, [T]>, abs_bound: f64) -> InlineQuantized {
    let step = T::at_most(abs_bound);
    let (words, escaped) = codes_of(x, |_, x: &[T], words: &mut [u32]| inline_words(x, words, step, abs_bound));
    let mut w = Writer::default();
    let mut num_outliers = 0u64;
    for v in escaped.into_iter().flatten() {
        v.write_le(&mut w);
        num_outliers += 1;
    }
    InlineQuantized { words, outliers: w.bytes, num_outliers }
}

/// [`inline_word`] of every value of `x` into `words`; returns the escaped values in index
/// order. As in [`codes_or_outliers`], a branch-free first pass keeps the zigzag bin word
/// where the fast test proves the bound and the word is a bin (exactly what [`inline_word`]
/// returns for such a value), and only a slice with a value it does not keep is walked again
/// with [`inline_word`] itself. On AVX2 the first pass runs twice as wide.
pub(crate) fn inline_words<T: Float>(x: &[T], words: &mut [u32], step: T, abs_bound: f64) -> Vec<T> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { inline_words_avx2(x, words, step, abs_bound) };
    }
    inline_words_inline(x, words, step, abs_bound)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn inline_words_avx2<T: Float>(x: &[T], words: &mut [u32], step: T, abs_bound: f64) -> Vec<T> {
    inline_words_inline(x, words, step, abs_bound)
}

/// [`inline_words`] for the target's baseline features (or the caller's, inlined).
#[inline(always)]
fn inline_words_inline<T: Float>(x: &[T], words: &mut [u32], step: T, abs_bound: f64) -> Vec<T> {
    let recip = T::half_recip(step);
    let accept = T::accept(abs_bound);
    // Whether any value is unsure, or-ed in 32-bit lanes (see codes_or_outliers_inline).
    let mut unsure = 0u32;
    for (w, &v) in words.iter_mut().zip(x) {
        let q = v.quantize(recip);
        let word = ((q << 1) ^ (q >> 31)) as u32;
        *w = word;
        unsure |= u32::from(!v.close_to(T::reconstruct(q, step), accept) | (word >= T::BIN_WORDS));
    }
    let mut escaped = Vec::new();
    if unsure == 0 {
        return escaped;
    }
    for (w, &v) in words.iter_mut().zip(x) {
        let (word, escape) = inline_word(v, recip, step, abs_bound);
        *w = word;
        if escape {
            escaped.push(v);
        }
    }
    escaped
}

/// The value of inline word `w`: its bin's reconstruction or its raw value; an escape gives
/// 0 (its value comes from the channel).
#[inline(always)]
pub(crate) fn inline_value<T: Float>(w: u32, step: T) -> T {
    let bin = T::reconstruct(((w >> 1) as i32) ^ -((w & 1) as i32), step);
    let raw = if w == ESCAPE { T::ZERO } else { T::from_raw_word(w) };
    if w < T::BIN_WORDS {
        bin
    } else {
        raw
    }
}

/// Inverse of [`quantize_inline`]; the escapes must match the channel exactly.
pub(crate) fn reconstruct_inline<T: Float>(
    words: Vec<u32>,
    step: T,
    outliers: &[u8],
    num_outliers: u64,
) -> Result<Vec<T>> {
    // One branch-free pass. Every word is a bin (below `BIN_WORDS`), the escape, or (f32
    // only, where `BIN_WORDS` < escape) a raw value: f64 puts every non-escape word in the bin
    // range, so no word is invalid. Bin and raw value are both computed and one selected; the
    // escapes are counted on the way and checked against the channel below. Escaped elements
    // are left 0 and filled from the channel afterwards, which needs their positions: the
    // words are gone once decoded in place, so the positions are kept (escapes are rare).
    let positions: Vec<usize> = if num_outliers > 0 {
        words.iter().enumerate().filter(|&(_, &w)| w == ESCAPE).map(|(i, _)| i).collect()
    } else {
        Vec::new()
    };
    let (mut out, escapes) = map_codes(words, |w| inline_value(w, step), |w| w == ESCAPE);
    let escapes = escapes as u64;
    if escapes != num_outliers || Some(outliers.len()) != (escapes as usize).checked_mul(std::mem::size_of::<T>()) {
        return Err(corrupt!(
            "Quantizer: {escapes} escapes, {num_outliers} outliers, {} channel bytes",
            outliers.len()
        ));
    }
    let mut r = Reader::new(outliers, "Quantizer outlier channel");
    for i in positions {
        out[i] = T::read_le(&mut r)?;
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes give the finite range a plain fold gives, wherever the extremes and the
    /// non-finite values sit (lanes, remainders, pieces), and `None` without a finite value.
    #[test]
    fn the_finite_range_is_that_of_a_plain_fold() {
        let plain = |x: &[f32]| {
            let finite = x.iter().filter(|v| v.is_finite()).map(|&v| f64::from(v));
            let lo = finite.clone().fold(f64::INFINITY, f64::min);
            (lo.is_finite()).then(|| (lo, finite.fold(f64::NEG_INFINITY, f64::max)))
        };
        for n in [0usize, 1, 15, 16, 17, 100, (1 << 16) + 33, 3 << 16] {
            let base: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.37).sin()).collect();
            for at in [0, n / 3, n.saturating_sub(1)] {
                for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 7.5, -7.5, f32::MAX, -f32::MAX] {
                    let mut x = base.clone();
                    if let Some(v) = x.get_mut(at) {
                        *v = special;
                    }
                    assert_eq!(finite_min_max(&x), plain(&x), "n {n}, {special} at {at}");
                    let wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                    assert_eq!(finite_min_max(&wide), plain(&x), "f64: n {n}, {special} at {at}");
                }
            }
        }
        assert_eq!(finite_min_max(&[f32::NAN, f32::INFINITY]), None);
    }

    /// The fast test never keeps a value the f64 test would not: differences sampled across
    /// the accept threshold and the bound (and the few values of the type at each), for
    /// bounds and values of every scale.
    #[test]
    fn the_fast_test_implies_the_f64_test() {
        fn check<T: Float>(abs_bound: f64, x: T, from: fn(f64) -> T, up: fn(T) -> T) {
            let accept = T::accept(abs_bound);
            assert!(accept.to_f64() <= abs_bound * (1.0 - 1.0 / 1048576.0));
            let (lo, hi) = (abs_bound * (1.0 - 4.0 / 1048576.0), abs_bound * (1.0 + 4.0 / 1048576.0));
            let mut diffs: Vec<T> = (0..=256).map(|k| from(lo + (hi - lo) * f64::from(k) / 256.0)).collect();
            for start in [accept, from(abs_bound)] {
                diffs.extend(std::iter::successors(Some(start), |&e| Some(up(e))).take(8));
            }
            for e in diffs {
                for r in [from(x.to_f64() + e.to_f64()), from(x.to_f64() - e.to_f64())] {
                    if x.close_to(r, accept) {
                        let (xf, rf) = (x.to_f64(), r.to_f64());
                        assert!((xf - rf).abs() <= abs_bound, "x {xf} r {rf} bound {abs_bound}");
                    }
                }
            }
        }
        for abs_bound in [1e-30, 3.7e-7, 0.01, 1.0, 18.209, 5e5, 3e30] {
            for x in [0.0, 1.0, -2.5, 1234.5678, -9.87e6, 4.2e20] {
                check::<f32>(abs_bound, x as f32, |v| v as f32, f32::next_up);
                check::<f64>(abs_bound, x, |v| v, f64::next_up);
            }
        }
        // NaN and ±Inf are never close.
        assert!(!f32::NAN.close_to(0.0, f32::accept(1.0)));
        assert!(!f32::INFINITY.close_to(0.0, f32::accept(f64::MAX)));
        assert!(!f64::NEG_INFINITY.close_to(1.0, f64::accept(1.0)));
    }

    #[test]
    fn rounding_matches_cuszp_definition() {
        // trunc(d + 0.5) − (d >= −0.5 ? 0 : 1) (cuSZp).
        assert_eq!(1.49f32.quantize(1.0), 1);
        assert_eq!(1.5f32.quantize(1.0), 2);
        assert_eq!((-0.5f32).quantize(1.0), 0);
        assert_eq!((-0.51f32).quantize(1.0), -1);
        assert_eq!((-1.5f32).quantize(1.0), -2); // d + 0.5 = −1 exactly: one lower
        assert_eq!(f32::NAN.quantize(1.0), -1);
    }

    #[test]
    fn saturating_i32_is_the_as_cast() {
        let edges = [i32::MIN as f64, i32::MAX as f64, 2147483647.5, 2147483648.0, -2147483648.5, -2147483649.0];
        let specials = [0.0, -0.0, 0.7, -0.7, 1e300, -1e300, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
        for v in edges.into_iter().chain(specials) {
            assert_eq!(saturating_i32(v), v as i32, "{v}");
        }
    }

    /// Every 257th f32 bit pattern (all exponents, both signs, NaN payloads) and a few ulps
    /// around each i32 bound and 0.
    #[test]
    fn saturating_i32_of_f32_is_the_as_cast() {
        let near = [i32::MIN as f32, 2_147_483_648.0, 0.0, -0.0, 1.0, -1.0].into_iter().flat_map(|e| {
            let b = e.to_bits();
            (0..8u32).flat_map(move |k| [f32::from_bits(b.wrapping_add(k)), f32::from_bits(b.wrapping_sub(k))])
        });
        let specials = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, f32::MIN];
        let sweep = (0..=u32::MAX / 257).map(|k| f32::from_bits(k * 257));
        for v in near.chain(specials).chain(sweep) {
            assert_eq!(saturating_i32_of_f32(v), v as i32, "{v} ({:#x})", v.to_bits());
        }
    }

    #[test]
    fn step_never_exceeds_the_bound() {
        for b in [1e-3, 0.1, 1.0 / 3.0, 7.7e-30, 1e300] {
            assert!(f32::at_most(b) as f64 <= b);
            assert!(f64::at_most(b) <= b);
        }
    }

    #[test]
    fn special_values_go_to_the_outlier_channel_bit_exact() {
        let nan = f32::from_bits(0x7fc0_1234);
        let x = [1.0f32, nan, f32::INFINITY, -f32::INFINITY, 3.0e38, -2.5];
        let q = quantize(x.to_vec().into(), 1e-3);
        assert_eq!(q.num_outliers, 4);
        let y = reconstruct(q.codes.clone(), q.step, &q.outliers, q.num_outliers, q.layout).unwrap();
        for (a, b) in x.iter().zip(&y) {
            if a.is_finite() && a.abs() < 1e30 {
                assert!((a - b).abs() as f64 <= 1e-3);
            } else {
                assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }

    /// The two-pass inline words are [`inline_word`] of each value: bit patterns of every
    /// exponent (NaN, ±Inf, subnormals, values past the bin range, the escape's bits), values
    /// near bin edges and smooth runs, at bounds of every scale, f32 and f64.
    #[test]
    fn inline_words_are_inline_word_of_each_value() {
        fn check<T: Float>(x: &[T], abs_bound: f64) {
            let step = T::at_most(abs_bound);
            let recip = T::half_recip(step);
            let mut words = vec![0u32; x.len()];
            let escaped = inline_words(x, &mut words, step, abs_bound);
            let expected: Vec<(u32, bool)> = x.iter().map(|&v| inline_word(v, recip, step, abs_bound)).collect();
            assert!(words.iter().zip(&expected).all(|(&w, &(e, _))| w == e), "bound {abs_bound}");
            let esc: Vec<u64> = x.iter().zip(&expected).filter(|(_, e)| e.1).map(|(v, _)| v.bits()).collect();
            assert_eq!(escaped.iter().map(|v| v.bits()).collect::<Vec<_>>(), esc, "bound {abs_bound}");
        }
        let mut bits = 0x1234_5678u32;
        let mut next = || {
            bits ^= bits << 13;
            bits ^= bits >> 17;
            bits ^= bits << 5;
            bits
        };
        let patterns: Vec<f32> = (0..4096).map(|_| f32::from_bits(next())).collect();
        let smooth: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.01).sin() * 100.0).collect();
        let edges: Vec<f32> =
            (0..4096).map(|i| (i / 2) as f32 * 0.002 + if i % 2 == 0 { 0.0 } else { 0.001 }).collect();
        for abs_bound in [1e-30, 1e-3, 0.5, 1e3] {
            for x in [&patterns, &smooth, &edges] {
                check(x, abs_bound);
                check(&x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), abs_bound);
            }
            check(&[f32::from_bits(ESCAPE), f32::NAN, f32::INFINITY, 0.0, -0.0], abs_bound);
        }
    }

    #[test]
    fn inline_words_follow_pfpl_and_escape_what_cannot_be_inline() {
        let nan = f32::from_bits(0x7fc0_1234);
        let x = [1.0f32, -1.0, nan, f32::INFINITY, 3.0e38, 0.0, 1e-41, f32::from_bits(ESCAPE), 5.0e6];
        let q = quantize_inline(x[..].into(), 0.5);
        assert_eq!(&q.words[..2], &[2, 1], "zigzag bins");
        assert_eq!(q.words[2], nan.to_bits());
        assert_eq!(q.words[4], 3.0e38f32.to_bits());
        assert_eq!(q.words[5], 0, "+0.0 is bin 0");
        assert_eq!(q.words[8], 5.0e6f32.to_bits(), "|bin| ≥ 2^22 is stored raw");
        assert_eq!((q.words[7], q.num_outliers), (ESCAPE, 1), "a raw word equal to the escape is escaped");
        let y = reconstruct_inline(q.words.clone(), f32::at_most(0.5), &q.outliers, q.num_outliers).unwrap();
        for (a, b) in x.iter().zip(&y) {
            assert!(a.to_bits() == b.to_bits() || (a - b).abs() <= 0.5, "{a} {b}");
        }
        let q64 = quantize_inline(vec![1e300f64, f64::NAN, 7.0].into(), 0.5);
        assert_eq!((q64.words[0], q64.words[1], q64.num_outliers), (ESCAPE, ESCAPE, 2));
        assert!(reconstruct_inline(q64.words.clone(), 0.5f64, &q64.outliers[1..], 2).is_err());
    }

    #[test]
    fn truncated_outlier_channel_is_an_error() {
        let q = quantize(vec![f64::NAN, 1.0, f64::INFINITY].into(), 0.5);
        for cut in 0..q.outliers.len() {
            assert!(reconstruct(q.codes.clone(), q.step, &q.outliers[..cut], q.num_outliers, q.layout).is_err());
        }
    }
}
