//! CPU reference of AdaptiveBitpack: block costs, metadata, sign regions and bit-planes.
//!
//! Within a block of B elements, S = ceil(B/8). Sign region and every plane are S bytes;
//! bit j of byte k belongs to element 8k+j; plane p holds bit p of |v|.

use crate::element::{concat_on_all_cores, try_vec_by_chunks, DType};
use crate::error::{corrupt, Result};
use crate::stages::bit_transpose::transpose8;
use rayon::prelude::*;
use std::marker::PhantomData;

/// Largest block (the seed's limit); sizes the per-thread block scratch.
const MAX_BLOCK: usize = super::MAX_BLOCK as usize;

/// Blocks per parallel work item.
const BLOCKS_PER_TASK: usize = 2048;

/// Per-block metadata layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// No selection; 1 byte per block = rate.
    Plain,
    /// Selection; 2 bytes per block `[rate][sel]` (seed layout).
    Wide,
    /// Selection; 1 byte per block, cuSZp2-style packing with the rate-32 escape.
    Packed,
}

impl Layout {
    pub fn code(self) -> u8 {
        match self {
            Layout::Plain => 0,
            Layout::Wide => 1,
            Layout::Packed => 2,
        }
    }
    pub fn from_code(c: u8) -> Result<Layout> {
        match c {
            0 => Ok(Layout::Plain),
            1 => Ok(Layout::Wide),
            2 => Ok(Layout::Packed),
            _ => Err(corrupt!("AdaptiveBitpack metadata layout code {c}")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Layout::Plain => "plain",
            Layout::Wide => "wide",
            Layout::Packed => "packed",
        }
    }
    pub fn meta_bytes(self) -> usize {
        if self == Layout::Wide {
            2
        } else {
            1
        }
    }
}

/// Signed code types the coder accepts.
pub trait Code: Copy + Send + Sync + Default + bytemuck::Zeroable + 'static {
    const DTYPE: DType;
    /// Largest rate a block of this type can need.
    const MAX_RATE: u32;
    fn split(self) -> (bool, u32);
    /// Sign and magnitude back to a value, wrapping where the magnitude does not fit (the
    /// decoder checks [`Code::fits`] for the whole block at once, off the per-element path).
    fn join_wrapping(negative: bool, mag: u32) -> Self;
    /// Whether `mag` with that sign is a value of this type.
    fn fits(negative: bool, mag: u32) -> bool;
    /// The slice as i32 codes, for the decode's vector form (i32 only).
    fn as_i32s(values: &mut [Self]) -> Option<&mut [i32]>;
}

impl Code for i32 {
    const DTYPE: DType = DType::I32;
    const MAX_RATE: u32 = 32;
    fn split(self) -> (bool, u32) {
        (self < 0, self.unsigned_abs())
    }
    #[inline]
    fn join_wrapping(negative: bool, mag: u32) -> Self {
        // Two's complement negation as a mask: (m ^ −1) + 1 = −m, (m ^ 0) + 0 = m.
        let n = i32::from(negative);
        ((mag as i32) ^ n.wrapping_neg()).wrapping_add(n)
    }
    #[inline]
    fn fits(negative: bool, mag: u32) -> bool {
        mag <= i32::MAX as u32 + u32::from(negative)
    }
    fn as_i32s(values: &mut [Self]) -> Option<&mut [i32]> {
        Some(values)
    }
}

impl Code for i16 {
    const DTYPE: DType = DType::I16;
    const MAX_RATE: u32 = 16;
    fn split(self) -> (bool, u32) {
        (self < 0, u32::from(self.unsigned_abs()))
    }
    #[inline]
    fn join_wrapping(negative: bool, mag: u32) -> Self {
        let n = i16::from(negative);
        ((mag as i16) ^ n.wrapping_neg()).wrapping_add(n)
    }
    #[inline]
    fn fits(negative: bool, mag: u32) -> bool {
        mag <= i16::MAX as u32 + u32::from(negative)
    }
    fn as_i32s(_: &mut [Self]) -> Option<&mut [i32]> {
        None
    }
}

fn bitlen(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// How one block is coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BlockCode {
    rate: u32,
    /// Bytes of the raw first magnitude; 0 = plain block.
    outlier_bytes: u32,
}

impl BlockCode {
    fn cost(self, s: usize) -> usize {
        match (self.outlier_bytes, self.rate) {
            (0, 0) => 0,
            (0, r) => s * (r as usize + 1),
            (ob, r) => ob as usize + s * (r as usize + 1),
        }
    }

    fn choose(mags: &[u32], layout: Layout, s: usize) -> BlockCode {
        let fr_all = bitlen(mags.iter().fold(0, |a, &m| a | m));
        let plain = BlockCode { rate: fr_all, outlier_bytes: 0 };
        if layout == Layout::Plain || mags.is_empty() {
            return plain;
        }
        let fr_rest = bitlen(mags[1..].iter().fold(0, |a, &m| a | m));
        let ob = bitlen(mags[0]).div_ceil(8);
        let outlier = BlockCode { rate: fr_rest, outlier_bytes: ob };
        // Ties go to plain; |v0| = 0 always picks plain, so outlier blocks have ob ≥ 1.
        if ob == 0 || plain.cost(s) <= outlier.cost(s) {
            plain
        } else {
            outlier
        }
    }

    fn write_meta(self, layout: Layout, out: &mut Vec<u8>) {
        let outlier = self.outlier_bytes > 0;
        match layout {
            Layout::Plain => out.push(self.rate as u8),
            Layout::Wide => {
                let sel = if outlier { 1 | ((self.outlier_bytes as u8 - 1) << 1) } else { 0 };
                out.extend_from_slice(&[self.rate as u8, sel]);
            }
            Layout::Packed if outlier => out.push(0x80 | ((self.outlier_bytes as u8 - 1) << 5) | self.rate as u8),
            Layout::Packed => out.push(self.rate as u8),
        }
    }

    fn read_meta(meta: &[u8], layout: Layout, max_rate: u32) -> Result<BlockCode> {
        let code = match layout {
            Layout::Plain => BlockCode { rate: u32::from(meta[0]), outlier_bytes: 0 },
            Layout::Wide => {
                let (rate, sel) = (u32::from(meta[0]), meta[1]);
                if sel & !0b111 != 0 || (sel & 1 == 0 && sel != 0) {
                    return Err(corrupt!("AdaptiveBitpack selection byte {sel:#04x}"));
                }
                let ob = if sel & 1 == 1 { u32::from(sel >> 1) + 1 } else { 0 };
                BlockCode { rate, outlier_bytes: ob }
            }
            Layout::Packed => {
                let m = meta[0];
                if m & 0x80 == 0 {
                    BlockCode { rate: u32::from(m), outlier_bytes: 0 }
                } else {
                    BlockCode { rate: u32::from(m & 0x1f), outlier_bytes: u32::from((m >> 5) & 3) + 1 }
                }
            }
        };
        if code.rate > max_rate || code.outlier_bytes > max_rate / 8 {
            return Err(corrupt!("AdaptiveBitpack block rate {} / outlier bytes {}", code.rate, code.outlier_bytes));
        }
        Ok(code)
    }
}

/// Append the sign region and `rate` planes of `mags`: byte `k` of plane `p` holds bit `p`
/// of magnitudes `8k..8k + 8`, element `8k + j` in bit `j`.
fn write_planes(signs: &[bool], mags: &[u32], rate: u32, s: usize, out: &mut Vec<u8>) {
    let base = out.len();
    out.resize(base + s * (rate as usize + 1), 0);
    let (sign_region, planes) = out[base..].split_at_mut(s);
    for (k, group) in signs.chunks(8).enumerate() {
        sign_region[k] = group.iter().enumerate().fold(0u8, |b, (j, &neg)| b | (u8::from(neg) << j));
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let whole = mags.len() / 8 * 8;
        // SAFETY: the CPU has AVX2.
        unsafe { super::cpu_avx2::write_planes(&mags[..whole], rate as usize, s, planes) };
        return write_planes_from(mags, whole / 8, rate, s, planes);
    }
    write_planes_from(mags, 0, rate, s, planes);
}

/// The planes' bytes of the 8-element groups of `mags` from group `first` on.
fn write_planes_from(mags: &[u32], first: usize, rate: u32, s: usize, planes: &mut [u8]) {
    for (k, group) in mags.chunks(8).enumerate().skip(first) {
        for byte_of_mag in 0..rate.div_ceil(8) as usize {
            let rows = group
                .iter()
                .enumerate()
                .fold(0u64, |x, (j, &m)| x | (u64::from((m >> (8 * byte_of_mag)) as u8) << (8 * j)));
            let cols = transpose8(rows).to_le_bytes();
            for (i, &plane_byte) in cols.iter().enumerate() {
                let p = 8 * byte_of_mag + i;
                if p < rate as usize {
                    planes[p * s + k] = plane_byte;
                }
            }
        }
    }
}

/// Per-thread scratch for one block, reused across blocks: clearing a whole
/// `MAX_BLOCK`-sized stack array per block costs more than coding a small block.
struct Scratch {
    signs: Vec<bool>,
    mags: Vec<u32>,
    /// Sign-and-magnitude codes of a narrow block (decoder), rates below 8 and below 16.
    codes8: Vec<u8>,
    codes16: Vec<u16>,
}

impl Scratch {
    fn new() -> Scratch {
        // Whole 8-element groups: the decoder fills magnitudes 8 at a time.
        let groups = MAX_BLOCK.next_multiple_of(8);
        let (codes8, codes16) = (vec![0; groups], vec![0; groups]);
        Scratch { signs: vec![false; MAX_BLOCK], mags: vec![0; groups], codes8, codes16 }
    }
}

/// Encode one block of `count ≤ b` values.
fn encode_block<T: Code>(
    vals: &[T],
    layout: Layout,
    s: usize,
    scratch: &mut Scratch,
    meta: &mut Vec<u8>,
    payload: &mut Vec<u8>,
) {
    for (i, v) in vals.iter().enumerate() {
        (scratch.signs[i], scratch.mags[i]) = v.split();
    }
    let (signs, mags) = (&scratch.signs[..vals.len()], &mut scratch.mags[..vals.len()]);
    let code = BlockCode::choose(mags, layout, s);
    code.write_meta(layout, meta);
    if code.outlier_bytes > 0 {
        payload.extend_from_slice(&mags[0].to_le_bytes()[..code.outlier_bytes as usize]);
        mags[0] = 0;
        write_planes(signs, mags, code.rate, s, payload);
    } else if code.rate > 0 {
        write_planes(signs, mags, code.rate, s, payload);
    }
}

/// Encode `v` in blocks of `b` elements.
pub fn encode<T: Code>(v: &[T], b: usize, layout: Layout) -> Vec<u8> {
    let parts: Vec<(Vec<u8>, Vec<u8>)> = v
        .par_chunks(b * BLOCKS_PER_TASK)
        .map(|task| {
            let (mut meta, mut payload) = (Vec::new(), Vec::new());
            encode_blocks(task, b, layout, &mut meta, &mut payload);
            (meta, payload)
        })
        .collect();
    let metas = parts.iter().map(|(m, _)| m.as_slice());
    concat_on_all_cores(metas.chain(parts.iter().map(|(_, p)| p.as_slice())))
}

/// Encode `v` (whole blocks of `b` but the last) on one core, its blocks' metadata appended
/// to `meta` and their payloads to `payload`: a work item of [`encode`], or a fused region's
/// block (cpu_fragment.rs), whose pieces are joined alike (metadata, then payloads).
pub(crate) fn encode_blocks<T: Code>(v: &[T], b: usize, layout: Layout, meta: &mut Vec<u8>, payload: &mut Vec<u8>) {
    let (s, mut scratch) = (b.div_ceil(8), Scratch::new());
    for block in v.chunks(b) {
        encode_block(block, layout, s, &mut scratch, meta, payload);
    }
}

/// Decode one block into `out` (its real elements only).
fn decode_block<T: Code>(
    code: BlockCode,
    payload: &[u8],
    s: usize,
    scratch: &mut Scratch,
    out: &mut [T],
) -> Result<()> {
    if code.outlier_bytes == 0 && code.rate == 0 {
        out.fill(T::default());
        return Ok(());
    }
    let ob = code.outlier_bytes as usize;
    let (first, rest) = payload.split_at(ob);
    let (sign_region, planes) = rest.split_at(s);
    let rate = code.rate as usize;
    let mut raw = [0u8; 4];
    raw[..ob].copy_from_slice(first);
    let outlier = (ob > 0).then(|| u32::from_le_bytes(raw));
    if rate < 16 && decode_narrow(sign_region, planes, rate, outlier, scratch, out) {
        return Ok(());
    }
    // Wide rates, and narrow blocks that failed their check (decoded again here to say why).
    decode_wide(sign_region, planes, rate, outlier, &mut scratch.mags[..8 * s], out)
}

/// A block of rate below 16 (the common case), in two flat passes: per 8 elements one 8×8
/// transpose per byte of their magnitudes, with the sign region riding as the top plane, so
/// each element's sign and magnitude land in one code (a byte below rate 8, else two); then
/// one loop joins them into `out`. `outlier` is element 0's raw magnitude. Whether every
/// value is canonical and fits (`false`: the caller decodes again to say why).
fn decode_narrow<T: Code>(
    sign_region: &[u8],
    planes: &[u8],
    rate: usize,
    outlier: Option<u32>,
    scratch: &mut Scratch,
    out: &mut [T],
) -> bool {
    let s = sign_region.len();
    let (low, high) = planes[..rate * s].split_at(rate.min(8) * s);
    let rows = |group: &[u8], k: usize| {
        group.chunks_exact(s).enumerate().fold(0u64, |x, (i, p)| x | u64::from(p[k]) << (8 * i))
    };
    // With an outlier, element 0's sign is left out here and joined below with its value.
    let outlier_sign = u8::from(outlier.is_some());
    let sign_rows =
        sign_region.iter().enumerate().map(|(k, &signs)| u64::from(signs & !(outlier_sign * u8::from(k == 0))) << 56);
    let mut bad = if rate < 8 {
        let codes = &mut scratch.codes8[..8 * s];
        for ((k, c), sign_row) in codes.chunks_exact_mut(8).enumerate().zip(sign_rows) {
            c.copy_from_slice(&transpose8(rows(low, k) | sign_row).to_le_bytes());
        }
        join_codes(codes, 7, out)
    } else {
        let codes = &mut scratch.codes16[..8 * s];
        for ((k, c), sign_row) in codes.chunks_exact_mut(8).enumerate().zip(sign_rows) {
            let (low, high) =
                (transpose8(rows(low, k)).to_le_bytes(), transpose8(rows(high, k) | sign_row).to_le_bytes());
            c.iter_mut().zip(low.into_iter().zip(high)).for_each(|(c, (l, h))| *c = u16::from_le_bytes([l, h]));
        }
        join_codes(codes, 15, out)
    };
    if let Some(m) = outlier {
        let negative = sign_region[0] & 1 == 1;
        out[0] = T::join_wrapping(negative, m);
        bad |= !T::fits(negative, m) | (negative & (m == 0));
    }
    !bad
}

/// Join codes (sign at bit `top`, magnitude below it: fewer than 16 bits fit every code type)
/// into `out`, branch-free; whether any is a sign on a zero magnitude (not canonical).
fn join_codes<C: Copy + Into<u32>, T: Code>(codes: &[C], top: u32, out: &mut [T]) -> bool {
    let mut bad = 0u32;
    for (o, &c) in out.iter_mut().zip(codes) {
        let c: u32 = c.into();
        let (negative, mag) = (c >> top, c & ((1 << top) - 1));
        bad |= negative & u32::from(mag == 0);
        *o = T::join_wrapping(negative == 1, mag);
    }
    bad != 0
}

/// Any block: magnitudes from the planes into `mags` (8 per sign byte), then joined with
/// their signs into `out`.
fn decode_wide<T: Code>(
    sign_region: &[u8],
    planes: &[u8],
    rate: usize,
    outlier: Option<u32>,
    mags: &mut [u32],
    out: &mut [T],
) -> Result<()> {
    let s = sign_region.len();
    if rate == 0 {
        mags.fill(0);
    }
    // Planes 8c..8c+8 give byte c of every magnitude: one 8×8 transpose per 8 elements. The
    // first byte stores, the others OR in, so the magnitudes need no clearing first.
    for c in 0..rate.div_ceil(8) {
        let group = &planes[8 * c * s..(8 * c + 8).min(rate) * s];
        for (k, m) in mags.chunks_exact_mut(8).enumerate() {
            let rows = group.chunks_exact(s).enumerate().fold(0u64, |x, (i, p)| x | u64::from(p[k]) << (8 * i));
            let cols = transpose8(rows).to_le_bytes();
            if c == 0 {
                m.iter_mut().zip(cols).for_each(|(m, b)| *m = u32::from(b));
            } else {
                m.iter_mut().zip(cols).for_each(|(m, b)| *m |= u32::from(b) << (8 * c));
            }
        }
    }
    if let Some(m) = outlier {
        mags[0] = m;
    }
    // Branch-free joins; the block's validity is folded on the way and explained only when
    // it fails. The encoder writes a sign only for negative values: a set sign on a zero
    // magnitude ("−0") is a second encoding of 0, which a canonical archive never holds.
    let mut valid = true;
    for ((o, m), &signs) in out.chunks_mut(8).zip(mags.chunks_exact(8)).zip(sign_region) {
        for (j, (o, &m)) in o.iter_mut().zip(m).enumerate() {
            let negative = signs >> j & 1 == 1;
            valid &= T::fits(negative, m) & !(negative & (m == 0));
            *o = T::join_wrapping(negative, m);
        }
    }
    if !valid {
        let negative = |i: usize| sign_region[i / 8] >> (i % 8) & 1 == 1;
        if let Some(i) = (0..out.len()).find(|&i| negative(i) && mags[i] == 0) {
            return Err(corrupt!("AdaptiveBitpack sign bit set on a zero magnitude (non-canonical) at element {i}"));
        }
        let i = (0..out.len()).find(|&i| !T::fits(negative(i), mags[i])).expect("a failed check has a cause");
        return Err(corrupt!("AdaptiveBitpack magnitude {} does not fit {}", mags[i], T::DTYPE));
    }
    Ok(())
}

/// Decode `n` elements coded in blocks of `b`.
pub fn decode<T: Code>(bytes: &[u8], n: usize, b: usize, layout: Layout) -> Result<Vec<T>> {
    let segment = Segment::<T>::read(bytes, n, b, layout)?;
    try_vec_by_chunks(n, b * BLOCKS_PER_TASK, |k, out| segment.decode(k * BLOCKS_PER_TASK, out))
}

/// A segment of `T` codes, checked as a whole before any block is decoded: every block's
/// code (task by task, [`BLOCKS_PER_TASK`] blocks each) and where each task's payload starts.
pub(crate) struct Segment<'a, T> {
    tasks: Vec<Vec<BlockCode>>,
    task_offsets: Vec<usize>,
    payload: &'a [u8],
    b: usize,
    codes: PhantomData<T>,
}

impl<'a, T: Code> Segment<'a, T> {
    /// The blocks of `n` elements coded in blocks of `b` in `bytes`.
    pub(crate) fn read(bytes: &'a [u8], n: usize, b: usize, layout: Layout) -> Result<Self> {
        let s = b.div_ceil(8);
        let blocks = n.div_ceil(b);
        let mb = layout.meta_bytes();
        let meta_len = blocks.checked_mul(mb).filter(|&m| m <= bytes.len());
        let meta_len = meta_len
            .ok_or_else(|| corrupt!("AdaptiveBitpack: metadata for {blocks} blocks exceeds {} bytes", bytes.len()))?;
        let (meta, payload) = bytes.split_at(meta_len);
        // Each task's block codes and payload bytes on all cores (a serial pass over every
        // block's metadata held many-core decodes back), then the tasks' offsets in order; the
        // error is that of the first corrupt block.
        let task_meta: Vec<&[u8]> = meta.chunks(mb * BLOCKS_PER_TASK).collect();
        let tasks = crate::error::at_once(task_meta.len(), |t| {
            let codes = task_meta[t]
                .chunks_exact(mb)
                .map(|m| BlockCode::read_meta(m, layout, T::MAX_RATE))
                .collect::<Result<Vec<_>>>()?;
            let bytes: usize = codes.iter().map(|c| c.cost(s)).sum();
            Ok((codes, bytes))
        })?;
        let mut task_offsets = Vec::with_capacity(tasks.len());
        let mut offset = 0usize;
        for (_, bytes) in &tasks {
            task_offsets.push(offset);
            offset += bytes;
        }
        if offset != payload.len() {
            return Err(corrupt!("AdaptiveBitpack: blocks need {offset} payload bytes, segment has {}", payload.len()));
        }
        let tasks = tasks.into_iter().map(|(codes, _)| codes).collect();
        Ok(Segment { tasks, task_offsets, payload, b, codes: PhantomData })
    }

    /// Decode the blocks from block `first` on into `out` (whole blocks but the segment's
    /// last): a work item of [`decode`], or a fused region's block (cpu_fragment.rs).
    pub(crate) fn decode(&self, first: usize, mut out: &mut [T]) -> Result<()> {
        let (b, s) = (self.b, self.b.div_ceil(8));
        let mut block = first;
        while !out.is_empty() {
            // The rest of `block`'s task, whose payload follows that of the blocks before it.
            let (t, skip) = (block / BLOCKS_PER_TASK, block % BLOCKS_PER_TASK);
            let (before, codes) = self.tasks[t].split_at(skip);
            let at = self.task_offsets[t] + before.iter().map(|c| c.cost(s)).sum::<usize>();
            let len = (b * codes.len()).min(out.len());
            let (here, rest) = std::mem::take(&mut out).split_at_mut(len);
            decode_task(codes, &self.payload[at..], s, b, here)?;
            (block, out) = (block + codes.len(), rest);
        }
        Ok(())
    }
}

/// Decode one task's blocks, whose payloads follow each other from the start of `payload`.
fn decode_task<T: Code>(codes: &[BlockCode], payload: &[u8], s: usize, b: usize, out: &mut [T]) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if s.is_multiple_of(4) && std::arch::is_x86_feature_detected!("avx2") {
        if let Some(out) = T::as_i32s(out) {
            // SAFETY: the CPU has AVX2.
            return unsafe { decode_task_avx2(codes, payload, s, b, out) };
        }
    }
    let (mut at, mut scratch) = (0, Scratch::new());
    for (block, code) in out.chunks_mut(b).zip(codes) {
        let cost = code.cost(s);
        decode_block(*code, &payload[at..at + cost], s, &mut scratch, block)?;
        at += cost;
    }
    Ok(())
}

/// [`decode_task`] of i32 codes with whole narrow blocks in AVX2 (32 elements per vector);
/// other blocks, and narrow ones that fail their check, go through [`decode_block`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn decode_task_avx2(codes: &[BlockCode], payload: &[u8], s: usize, b: usize, out: &mut [i32]) -> Result<()> {
    let (mut at, mut scratch) = (0, Scratch::new());
    for (block, code) in out.chunks_mut(b).zip(codes) {
        let cost = code.cost(s);
        let bytes = &payload[at..at + cost];
        let ob = code.outlier_bytes as usize;
        let narrow = code.rate < 16 && block.len() == 8 * s && (ob > 0 || code.rate > 0);
        if !narrow || !narrow_block(bytes, ob, s, code.rate as usize, block) {
            decode_block(*code, bytes, s, &mut scratch, block)?;
        }
        at += cost;
    }
    Ok(())
}

/// One whole narrow block through [`super::cpu_avx2::decode_narrow`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn narrow_block(bytes: &[u8], ob: usize, s: usize, rate: usize, out: &mut [i32]) -> bool {
    let (first, rest) = bytes.split_at(ob);
    let (sign_region, planes) = rest.split_at(s);
    let mut raw = [0u8; 4];
    raw[..ob].copy_from_slice(first);
    let outlier = (ob > 0).then(|| u32::from_le_bytes(raw));
    super::cpu_avx2::decode_narrow(sign_region, planes, rate, outlier, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The narrow path against the wide one on any block bytes: the same values, and
        /// accepted exactly when the wide path accepts.
        #[test]
        fn narrow_blocks_decode_as_wide_ones(
            bytes in prop::collection::vec(any::<u8>(), 128), rate in 0usize..16, s in 1usize..9,
            outlier in prop::option::of(any::<u32>()), len in 1usize..65, some_signs in any::<bool>(),
        ) {
            let len = len.min(8 * s);
            let (mut signs, planes) = (bytes[..s].to_vec(), &bytes[8..8 + rate * s]);
            if some_signs {
                signs.iter_mut().for_each(|b| *b &= 0x0f);
            }
            let mut scratch = Scratch::new();
            let (mut narrow, mut wide) = (vec![0i32; len], vec![0i32; len]);
            let ok = decode_narrow(&signs, planes, rate, outlier, &mut scratch, &mut narrow);
            let wide_ok = decode_wide(&signs, planes, rate, outlier, &mut vec![0; 8 * s], &mut wide).is_ok();
            prop_assert_eq!(ok, wide_ok);
            if ok {
                prop_assert_eq!(narrow, wide);
            }
            let outlier = outlier.map(|m| m >> 15);
            let (mut narrow, mut wide) = (vec![0i16; len], vec![0i16; len]);
            let ok = decode_narrow(&signs, planes, rate, outlier, &mut scratch, &mut narrow);
            let wide_ok = decode_wide(&signs, planes, rate, outlier, &mut vec![0; 8 * s], &mut wide).is_ok();
            prop_assert_eq!(ok, wide_ok);
            if ok {
                prop_assert_eq!(narrow, wide);
            }
        }

        /// The AVX2 narrow decode against the portable one on any whole i32 block: the same
        /// values, and accepted exactly when the portable form accepts.
        #[cfg(target_arch = "x86_64")]
        #[test]
        fn avx2_narrow_blocks_decode_as_portable_ones(
            bytes in prop::collection::vec(any::<u8>(), 16 * 17), rate in 0usize..16, quads in 1usize..5,
            outlier in prop::option::of(any::<u32>()), sparse_signs in any::<bool>(), first_zero in any::<bool>(),
        ) {
            prop_assume!(std::arch::is_x86_feature_detected!("avx2"));
            let s = 4 * quads;
            let (mut signs, mut planes) = (bytes[..s].to_vec(), bytes[16..16 + rate * s].to_vec());
            if sparse_signs {
                signs.iter_mut().for_each(|b| *b &= 0x11);
            }
            if first_zero {
                // Element 0 of magnitude 0: its sign decides, unless an outlier replaces it.
                planes.iter_mut().step_by(s).for_each(|b| *b &= !1);
                signs[0] |= 1;
            }
            let planes = &planes[..];
            let (mut portable, mut avx2) = (vec![0i32; 8 * s], vec![0i32; 8 * s]);
            let ok = decode_narrow(&signs, planes, rate, outlier, &mut Scratch::new(), &mut portable);
            // SAFETY: the CPU has AVX2 (assumed above).
            let avx2_ok = unsafe { super::super::cpu_avx2::decode_narrow(&signs, planes, rate, outlier, &mut avx2) };
            prop_assert_eq!(ok, avx2_ok);
            if ok {
                prop_assert_eq!(portable, avx2);
            }
        }

        /// The AVX2 planes against the portable ones on any magnitudes of the rate.
        #[cfg(target_arch = "x86_64")]
        #[test]
        fn avx2_planes_are_the_portable_ones(
            mags in prop::collection::vec(any::<u32>(), 1..300), rate in 0u32..=32,
        ) {
            prop_assume!(std::arch::is_x86_feature_detected!("avx2"));
            let mags: Vec<u32> = mags.iter().map(|&m| m.checked_shr(32 - rate).unwrap_or(0)).collect();
            let signs: Vec<bool> = mags.iter().map(|&m| m % 3 == 1).collect();
            let s = mags.len().div_ceil(8);
            let mut avx2 = vec![7u8];
            write_planes(&signs, &mags, rate, s, &mut avx2);
            let mut portable = vec![7u8; 1 + s * (rate as usize + 1)];
            let (sign_region, planes) = portable[1..].split_at_mut(s);
            for (k, group) in signs.chunks(8).enumerate() {
                sign_region[k] = group.iter().enumerate().fold(0, |b, (j, &neg)| b | (u8::from(neg) << j));
            }
            planes.fill(0);
            write_planes_from(&mags, 0, rate, s, planes);
            prop_assert_eq!(avx2, portable);
        }

        #[test]
        fn round_trip_i32(v in prop::collection::vec(prop_oneof![any::<i32>(), -40i32..40, Just(i32::MIN), Just(0)], 0..2000),
                          b in 1usize..=1024, layout in prop_oneof![Just(Layout::Plain), Just(Layout::Wide), Just(Layout::Packed)]) {
            let bytes = encode(&v, b, layout);
            prop_assert_eq!(decode::<i32>(&bytes, v.len(), b, layout).unwrap(), v);
        }

        #[test]
        fn round_trip_i16(v in prop::collection::vec(any::<i16>(), 0..1500), b in 1usize..=300,
                          layout in prop_oneof![Just(Layout::Plain), Just(Layout::Wide), Just(Layout::Packed)]) {
            let bytes = encode(&v, b, layout);
            prop_assert_eq!(decode::<i16>(&bytes, v.len(), b, layout).unwrap(), v);
        }
    }

    #[test]
    fn plain_block_layout_follows_the_seed() {
        // Block of 8: values 1, −2, 3, 0, 0, 0, 0, −1 → rate 2, S = 1.
        let v = [1i32, -2, 3, 0, 0, 0, 0, -1];
        let bytes = encode(&v, 8, Layout::Plain);
        // rate byte, sign byte (elements 1 and 7), plane 0 (elements 0, 2, 7), plane 1 (1, 2).
        assert_eq!(bytes, vec![2, 0b1000_0010, 0b1000_0101, 0b0000_0110]);
    }

    #[test]
    fn outlier_block_layout_follows_the_seed() {
        // A large first element then small deltas: the outlier form wins.
        let mut v = vec![1000i32];
        v.extend([1, -1, 0, 1, 0, 0, 0].iter());
        let wide = encode(&v, 8, Layout::Wide);
        // [rate 1][sel: outlier, ob 2 → 0b011] | 1000 LE (2 B) | signs | plane 0
        assert_eq!(wide, vec![1, 0b011, 0xe8, 0x03, 0b0000_0100, 0b0001_0110]);
        let packed = encode(&v, 8, Layout::Packed);
        assert_eq!(packed[0], 0x80 | (1 << 5) | 1);
        assert_eq!(&packed[1..], &wide[2..]);
    }

    #[test]
    fn a_sign_on_a_zero_magnitude_is_corrupt() {
        // The seed block: elements 3..=6 are 0; setting element 3's sign bit encodes "−0".
        let v = [1i32, -2, 3, 0, 0, 0, 0, -1];
        let mut bytes = encode(&v, 8, Layout::Plain);
        bytes[1] |= 1 << 3;
        let err = decode::<i32>(&bytes, 8, 8, Layout::Plain).unwrap_err().to_string();
        assert!(err.contains("non-canonical"), "{err}");
        // The same for a whole-zero value in an i16 block.
        let mut bytes = encode(&[0i16, 5], 2, Layout::Plain);
        bytes[1] |= 1;
        assert!(decode::<i16>(&bytes, 2, 2, Layout::Plain).is_err());
    }

    #[test]
    fn a_magnitude_beyond_the_type_is_corrupt() {
        // i16 block of 2 at rate 16: magnitude 0x8000 fits only with a sign, 0x9000 never.
        let mut bytes = encode(&[-32768i16, 1], 2, Layout::Plain);
        assert_eq!(decode::<i16>(&bytes, 2, 2, Layout::Plain).unwrap(), [-32768, 1]);
        bytes[1] = 0; // clear the sign: +32768 does not fit
        let err = decode::<i16>(&bytes, 2, 2, Layout::Plain).unwrap_err().to_string();
        assert!(err.contains("does not fit"), "{err}");
    }

    #[test]
    fn rate_32_uses_the_packed_escape() {
        let v = [5, i32::MIN, 7, 1];
        let bytes = encode(&v, 4, Layout::Packed);
        assert_eq!(bytes[0], 0x20);
        assert_eq!(decode::<i32>(&bytes, 4, 4, Layout::Packed).unwrap(), v);
    }

    #[test]
    fn corrupt_metadata_is_rejected() {
        let v: Vec<i32> = (0..64).collect();
        let mut bytes = encode(&v, 32, Layout::Wide);
        bytes[1] = 0b1000; // reserved selection bits
        assert!(decode::<i32>(&bytes, 64, 32, Layout::Wide).is_err());
        let bytes = encode(&v, 32, Layout::Plain);
        assert!(decode::<i32>(&bytes[..bytes.len() - 1], 64, 32, Layout::Plain).is_err());
        let mut bad_rate = bytes.clone();
        bad_rate[0] = 33;
        assert!(decode::<i32>(&bad_rate, 64, 32, Layout::Plain).is_err());
    }
}
