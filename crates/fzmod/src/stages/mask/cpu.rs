//! CPU reference of Mask: one pass over the runs of masked and unmasked elements fills each
//! masked run and writes the run lengths; the exceptions (masked values whose bits are not the
//! restore value) follow. The inverse parses and validates the segment completely before it
//! writes a value.

use super::Predicate;
use crate::archive::{Reader, Writer};
use crate::error::{corrupt, Result};
use rayon::prelude::*;

/// The element types a mask covers, by their raw bits.
pub trait MaskFloat: Copy + Send + Sync + 'static {
    const BYTES: usize;
    fn bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
}

impl MaskFloat for f32 {
    const BYTES: usize = 4;
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn from_bits(bits: u64) -> Self {
        f32::from_bits(bits as u32)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn is_infinite(self) -> bool {
        f32::is_infinite(self)
    }
}

impl MaskFloat for f64 {
    const BYTES: usize = 8;
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn from_bits(bits: u64) -> Self {
        f64::from_bits(bits)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn is_infinite(self) -> bool {
        f64::is_infinite(self)
    }
}

impl Predicate {
    /// Whether an element is masked (device.cu's `masked` is the same test). Without
    /// short-circuits, so a loop of it over many elements vectorises.
    #[inline]
    pub fn masked<T: MaskFloat>(&self, x: T) -> bool {
        (self.nan & x.is_nan()) | (self.inf & x.is_infinite()) | (self.fill == Some(x.bits()))
    }
}

/// What the forward pass produced besides the filled values.
#[derive(Debug, PartialEq, Eq)]
pub struct Coded {
    /// The `mask` segment: run lengths, then exceptions.
    pub segment: Vec<u8>,
    pub num_runs: u64,
    /// Bits every masked element gets back unless it is an exception: the first masked
    /// element's (0 when none is masked).
    pub restore: u64,
}

/// Forward, in place: masked runs take the value just before them (the one just after for a
/// leading run, +0 when everything is masked).
pub fn forward<T: MaskFloat>(x: &mut [T], p: &Predicate) -> Coded {
    let n = x.len();
    let (mut runs, mut exceptions) = (Writer::default(), Writer::default());
    let (mut num_runs, mut restore) = (0u64, None);
    // Elements before the first masked one, found on all cores: a field without one (most of
    // them) is not walked element by element.
    let clear = first_masked(x, p);
    let mut i = 0;
    loop {
        let start = i;
        i = i.max(clear);
        while i < n && !p.masked(x[i]) {
            i += 1;
        }
        runs.varint((i - start) as u64);
        num_runs += 1;
        if i == n {
            break;
        }
        let start = i;
        while i < n && p.masked(x[i]) {
            let bits = x[i].bits();
            if *restore.get_or_insert(bits) != bits {
                exceptions.varint(i as u64);
                exceptions.bytes.extend_from_slice(&bits.to_le_bytes()[..T::BYTES]);
            }
            i += 1;
        }
        runs.varint((i - start) as u64);
        num_runs += 1;
        let fill = fill_value(x, start, i);
        x[start..i].fill(fill);
        if i == n {
            break;
        }
    }
    runs.bytes.extend_from_slice(&exceptions.bytes);
    Coded { segment: runs.bytes, num_runs, restore: restore.unwrap_or(0) }
}

/// What [`forward`] codes for `x` when nothing in it is masked (its values then pass
/// unchanged), else `None`.
pub fn nothing_masked<T: MaskFloat>(x: &[T], p: &Predicate) -> Option<Coded> {
    (first_masked(x, p) == x.len()).then(|| {
        let mut runs = Writer::default();
        runs.varint(x.len() as u64);
        Coded { segment: runs.bytes, num_runs: 1, restore: 0 }
    })
}

/// The index of the first masked element of `x`, or its length.
fn first_masked<T: MaskFloat>(x: &[T], p: &Predicate) -> usize {
    const CHUNK: usize = 1 << 16;
    // Blocks tested without a branch per element (the test vectorises), then the first
    // masked block searched: an early exit per element kept the scan scalar.
    const BLOCK: usize = 64;
    let any_in = |b: &[T]| b.iter().fold(false, |any, &v| any | p.masked(v));
    let masked_in = |c: &[T]| {
        let b = c.chunks(BLOCK).position(any_in)?;
        c[b * BLOCK..].iter().position(|&v| p.masked(v)).map(|k| b * BLOCK + k)
    };
    match x.par_chunks(CHUNK).position_first(|c| c.chunks(BLOCK).any(any_in)) {
        Some(k) => k * CHUNK + masked_in(&x[k * CHUNK..]).expect("the chunk has a masked element"),
        None => x.len(),
    }
}

/// The fill of the masked run `[start, end)`: its unmasked neighbour, before it if any.
fn fill_value<T: MaskFloat>(x: &[T], start: usize, end: usize) -> T {
    if start > 0 {
        x[start - 1]
    } else if end < x.len() {
        x[end]
    } else {
        T::from_bits(0)
    }
}

/// A validated segment: the masked runs `[start, end)` in order, and the exceptions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub masked: Vec<(u64, u64)>,
    pub exceptions: Vec<(u64, u64)>,
}

/// Parse and check a segment against the record: `num_runs` run lengths (only the first may
/// be 0) summing to exactly `n`, then exceptions in increasing index order, each inside a
/// masked run, masked by `p` and different from `restore`; `restore` itself is masked by `p`
/// (or 0 when nothing is masked). Allocates at most one entry per segment byte.
pub fn parse<T: MaskFloat>(segment: &[u8], n: u64, num_runs: u64, restore: u64, p: &Predicate) -> Result<Parsed> {
    let mut r = Reader::new(segment, "Mask segment");
    let mut parsed = Parsed::default();
    let mut at = 0u64;
    for k in 0..num_runs {
        let len = r.varint()?;
        if k > 0 && len == 0 {
            return Err(corrupt!("Mask: run {k} is empty"));
        }
        let end = at.checked_add(len).filter(|&e| e <= n).ok_or_else(|| corrupt!("Mask: runs exceed {n} elements"))?;
        if k % 2 == 1 {
            parsed.masked.push((at, end));
        }
        at = end;
    }
    if at != n {
        return Err(corrupt!("Mask: {num_runs} runs cover {at} of {n} elements"));
    }
    let consistent = if parsed.masked.is_empty() { restore == 0 } else { p.masked(T::from_bits(restore)) };
    if !consistent {
        return Err(corrupt!("Mask: restore value {restore:#x} does not match the mask"));
    }
    let (mut run, mut next) = (0usize, 0u64);
    while r.remaining() > 0 {
        let index = r.varint()?;
        let bits = read_bits::<T>(&mut r)?;
        while parsed.masked.get(run).is_some_and(|&(_, end)| end <= index) {
            run += 1;
        }
        let inside = parsed.masked.get(run).is_some_and(|&(start, _)| start <= index);
        if index < next || !inside || bits == restore || !p.masked(T::from_bits(bits)) {
            return Err(corrupt!("Mask: exception at {index} is out of order, unmasked or redundant"));
        }
        parsed.exceptions.push((index, bits));
        next = index + 1;
    }
    Ok(parsed)
}

fn read_bits<T: MaskFloat>(r: &mut Reader) -> Result<u64> {
    let mut word = [0u8; 8];
    word[..T::BYTES].copy_from_slice(r.take(T::BYTES)?);
    Ok(u64::from_le_bytes(word))
}

/// Inverse, in place: every masked element gets `restore`, then each exception its bits.
pub fn inverse<T: MaskFloat>(x: &mut [T], parsed: &Parsed, restore: u64) {
    let fill = T::from_bits(restore);
    for &(start, end) in &parsed.masked {
        x[start as usize..end as usize].fill(fill);
    }
    for &(index, bits) in &parsed.exceptions {
        x[index as usize] = T::from_bits(bits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAN: Predicate = Predicate { nan: true, inf: false, fill: None };

    fn round_trip<T: MaskFloat + std::fmt::Debug>(x: &[T], p: &Predicate) -> Coded {
        let mut y = x.to_vec();
        let coded = forward(&mut y, p);
        for (a, b) in x.iter().zip(&y) {
            if !p.masked(*a) {
                assert_eq!(a.bits(), b.bits(), "unmasked values pass unchanged");
            }
            assert!(!p.masked(*b) || x.iter().all(|v| p.masked(*v)), "a fill is masked only when all is");
        }
        let parsed = parse::<T>(&coded.segment, x.len() as u64, coded.num_runs, coded.restore, p).unwrap();
        inverse(&mut y, &parsed, coded.restore);
        let bits = |v: &[T]| v.iter().map(|x| x.bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y), bits(x));
        coded
    }

    /// A value drawn from a few classes: ordinary, NaN with a payload, ±Inf, the fill.
    fn value(class: u8, payload: u32) -> f32 {
        match class % 6 {
            0 | 1 => (payload % 1000) as f32 * 0.25 - 100.0,
            2 => f32::from_bits(0x7f80_0000 | (payload & 0x007f_ffff).max(1) | (payload & 0x8000_0000)),
            3 => f32::NAN,
            4 => [f32::INFINITY, f32::NEG_INFINITY][(payload & 1) as usize],
            _ => -1e10,
        }
    }

    proptest! {
        #[test]
        fn round_trips_bit_exact(
            v in prop::collection::vec((0u8..6, any::<u32>(), 1usize..40), 0..60),
            nan: bool, inf: bool, fill: bool,
        ) {
            // Runs of one class each, so that long runs and alternation both occur.
            let x: Vec<f32> = v.iter().flat_map(|&(c, p, len)| (0..len).map(move |k| value(c, p ^ k as u32))).collect();
            let p = Predicate { nan, inf, fill: fill.then_some(u64::from((-1e10f32).to_bits())) };
            round_trip(&x, &p);
            let wide: Vec<f64> = x.iter().map(|&v| if v.is_nan() { f64::from_bits(0xfff8_0000_dead_0000 | u64::from(v.to_bits())) } else { f64::from(v) }).collect();
            let p = Predicate { fill: fill.then_some((-1e10f64).to_bits()), ..p };
            round_trip(&wide, &p);
        }
    }

    #[test]
    fn runs_and_fills() {
        let x = [f32::NAN, 1.0, 2.0, f32::NAN, f32::NAN, 3.0, f32::NAN];
        let mut y = x;
        let c = forward(&mut y, &NAN);
        assert_eq!(c.segment, [0, 1, 2, 2, 1, 1]);
        assert_eq!((c.num_runs, c.restore), (6, u64::from(f32::NAN.to_bits())));
        assert_eq!(y, [1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0]);
    }

    #[test]
    fn nothing_and_everything_masked() {
        let c = round_trip(&[1.0f32, 2.0, 3.0], &NAN);
        assert_eq!((c.segment.as_slice(), c.num_runs, c.restore), (&[3u8][..], 1, 0));
        let mut y = [f64::NAN; 300];
        let c = forward(&mut y, &NAN);
        assert_eq!((c.segment.as_slice(), c.num_runs), (&[0u8, 0xac, 0x02][..], 2));
        assert!(y.iter().all(|v| v.to_bits() == 0));
        assert_eq!(forward::<f32>(&mut [], &NAN).segment, [0]);
    }

    /// The first masked element far into the array (the search for it runs in chunks on all
    /// cores), at a chunk's edge and just after it.
    #[test]
    fn first_masked_element_deep_in_the_array() {
        for first in [0, 65_535, 65_536, 65_537, 150_000, 199_999] {
            let mut x: Vec<f32> = (0..200_000).map(|i| i as f32).collect();
            x[first] = f32::NAN;
            x[199_999] = f32::NAN;
            let c = round_trip(&x, &NAN);
            let parsed = parse::<f32>(&c.segment, x.len() as u64, c.num_runs, c.restore, &NAN).unwrap();
            assert_eq!(parsed.masked[0], (first as u64, first as u64 + 1), "first masked at {first}");
        }
        let c = round_trip(&vec![1.0f32; 200_000], &NAN);
        assert_eq!((c.segment.as_slice(), c.num_runs), (&[0xc0u8, 0x9a, 0x0c][..], 1));
    }

    /// Without a masked element the coded mask is [`forward`]'s (and the values pass
    /// unchanged); with one, wherever it lies, there is none.
    #[test]
    fn nothing_masked_codes_what_forward_codes() {
        let x: Vec<f32> = (0..200_000).map(|i| i as f32).collect();
        let mut y = x.clone();
        assert_eq!(nothing_masked(&x, &NAN), Some(forward(&mut y, &NAN)));
        for at in [0, 63, 64, 65_600, 199_999] {
            let mut z = x.clone();
            z[at] = f32::NAN;
            assert_eq!(nothing_masked(&z, &NAN), None, "NaN at {at}");
        }
    }

    #[test]
    fn other_masked_bits_are_exceptions() {
        let x = [f32::NAN, f32::from_bits(0xffc0_0001), 5.0, f32::NAN];
        let c = round_trip(&x, &NAN);
        // Runs 0, 2, 1, 1; then index 1 with its bits.
        assert_eq!(c.segment, [0, 2, 1, 1, 1, 0x01, 0x00, 0xc0, 0xff]);
    }

    #[test]
    fn corrupt_segments_are_refused() {
        let x = [1.0f32, f32::NAN, f32::NAN, 4.0];
        let mut y = x;
        let c = forward(&mut y, &NAN);
        let ok = |seg: &[u8], runs, restore| parse::<f32>(seg, 4, runs, restore, &NAN).is_ok();
        assert!(ok(&c.segment, c.num_runs, c.restore));
        for cut in 0..c.segment.len() {
            assert!(!ok(&c.segment[..cut], c.num_runs, c.restore), "truncated at {cut}");
        }
        assert!(!ok(&[1, 2, 2], 3, c.restore), "runs beyond n");
        assert!(!ok(&[1, 0, 3], 3, c.restore), "an empty inner run");
        assert!(!ok(&c.segment, c.num_runs, 0), "a restore value the predicate does not mask");
        assert!(!ok(&[4], 1, c.restore), "a restore value with nothing masked");
        let exception = |index: u8, bits: u32| [&c.segment[..], &[index], &bits.to_le_bytes()[..]].concat();
        assert!(ok(&exception(2, 0xffc0_0000), 3, c.restore));
        assert!(!ok(&exception(0, 0xffc0_0000), 3, c.restore), "an exception outside the mask");
        assert!(!ok(&exception(2, 0x3f80_0000), 3, c.restore), "an exception the predicate does not mask");
        assert!(!ok(&exception(2, f32::NAN.to_bits()), 3, c.restore), "a redundant exception");
        let twice = [exception(2, 0xffc0_0000), vec![2], 0xffc0_0000u32.to_le_bytes().to_vec()].concat();
        assert!(!ok(&twice, 3, c.restore), "exceptions out of order");
    }
}
