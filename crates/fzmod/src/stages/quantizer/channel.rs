//! The outlier lists of the float front ends (Quantizer 6.1, LorenzoQuant 6.5 in
//! docs/FORMAT.md): entries in increasing index order, in one of two layouts.
//!
//! - **Indexed** (every archive before the run layout): per outlier `varint gap` + value.
//! - **Runs**: per maximal run of consecutive outliers with bit-identical values, one entry
//!   `varint head` (`gap << 2 | run << 1 | repeat`), `varint (len − 2)` when `run`, and the
//!   value unless `repeat` (the value equals the previous entry's). A masked or NaN-riddled
//!   field (land as NaN or a fill value: long runs of one value, or isolated repeats of it)
//!   then costs a few bytes per run instead of one entry per point.
//!
//! The writer encodes both and keeps the smaller (the indexed layout on a tie, so archives
//! that gain nothing keep their old bytes); the record says which. Parsing yields runs either
//! way (an indexed entry is a run of one), so the decoders fill ranges.

use crate::archive::{Reader, Writer};
use crate::error::{corrupt, Result};

/// How an outlier list is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Indexed,
    Runs,
}

/// `len` consecutive elements from `start` that all decode to `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run<V> {
    pub start: usize,
    pub len: usize,
    pub value: V,
}

/// Head bits of a run-layout entry.
const RUN: u64 = 2;
const REPEAT: u64 = 1;

/// Append `list` (indices strictly increasing) in `layout`; `put` writes one value. Values
/// are compared with `==`, so callers pass raw bits for floats (NaN payloads and −0.0 kept).
pub(crate) fn write_list<V: Copy + PartialEq>(
    w: &mut Writer,
    list: &[(u64, V)],
    layout: Layout,
    mut put: impl FnMut(&mut Writer, V),
) {
    let mut next = 0u64;
    match layout {
        Layout::Indexed => {
            for &(index, value) in list {
                w.varint(index - next);
                put(w, value);
                next = index + 1;
            }
        }
        Layout::Runs => {
            let mut previous: Option<V> = None;
            let mut k = 0;
            while k < list.len() {
                let (start, value) = list[k];
                let mut len = 1;
                while k + len < list.len() && list[k + len] == (start + len as u64, value) {
                    len += 1;
                }
                let repeat = previous == Some(value);
                let run = len >= 2;
                // Indices stay below 2^62 (an array of 2^62 elements does not exist).
                let flags = if run { RUN } else { 0 } | if repeat { REPEAT } else { 0 };
                w.varint(((start - next) << 2) | flags);
                if run {
                    w.varint(len as u64 - 2);
                }
                if !repeat {
                    put(w, value);
                }
                previous = Some(value);
                next = start + len as u64;
                k += len;
            }
        }
    }
}

/// Read a list of `count` outliers among `n` elements written by [`write_list`]: every run
/// inside `n`, in increasing order without overlap, the lengths adding up to `count` exactly,
/// no repeat before a value was given. `what` names the list in errors.
pub(crate) fn read_list<V: Copy>(
    r: &mut Reader,
    count: u64,
    n: usize,
    layout: Layout,
    what: &str,
    mut get: impl FnMut(&mut Reader) -> Result<V>,
) -> Result<Vec<Run<V>>> {
    // Each entry takes at least one byte and stands for at least one outlier: never reserve
    // more than both allow.
    let mut runs = Vec::with_capacity((count as usize).min(r.remaining()));
    let (mut next, mut seen) = (0u64, 0u64);
    let mut previous: Option<V> = None;
    while seen < count {
        let head = r.varint()?;
        let (gap, len, repeat) = match layout {
            Layout::Indexed => (head, 1, false),
            Layout::Runs => {
                let len = if head & RUN != 0 { r.varint()?.checked_add(2) } else { Some(1) };
                let len = len.ok_or_else(|| corrupt!("{what}: run length overflows"))?;
                (head >> 2, len, head & REPEAT != 0)
            }
        };
        let start = next.checked_add(gap);
        let end = start.and_then(|s| s.checked_add(len)).filter(|&e| e <= n as u64);
        let (Some(start), Some(end)) = (start, end) else {
            return Err(corrupt!("{what}: outlier run {} lies outside {n} elements", runs.len()));
        };
        if len > count - seen {
            return Err(corrupt!("{what}: runs hold more than the {count} outliers recorded"));
        }
        let value = match (repeat, previous) {
            (false, _) => get(r)?,
            (true, Some(v)) => v,
            (true, None) => return Err(corrupt!("{what}: the first run repeats a value")),
        };
        runs.push(Run { start: start as usize, len: len as usize, value });
        previous = Some(value);
        (next, seen) = (end, seen + len);
    }
    Ok(runs)
}

/// Both layouts of the lists that share one channel (LorenzoQuant: deltas then values; the
/// Quantizer: one list), written by `write(writer, layout)`: the smaller, the indexed layout
/// on a tie.
pub(crate) fn smaller(mut write: impl FnMut(&mut Writer, Layout)) -> (Vec<u8>, Layout) {
    let (mut indexed, mut runs) = (Writer::default(), Writer::default());
    write(&mut indexed, Layout::Indexed);
    write(&mut runs, Layout::Runs);
    if runs.bytes.len() < indexed.bytes.len() {
        (runs.bytes, Layout::Runs)
    } else {
        (indexed.bytes, Layout::Indexed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(w: &mut Writer, v: u32) {
        w.u32(v);
    }

    fn parse(bytes: &[u8], count: u64, n: usize, layout: Layout) -> Result<Vec<Run<u32>>> {
        let mut r = Reader::new(bytes, "test list");
        let runs = read_list(&mut r, count, n, layout, "test list", |r| r.u32())?;
        r.finish()?;
        Ok(runs)
    }

    /// The runs expanded to one (index, value) per outlier.
    fn expand(runs: &[Run<u32>]) -> Vec<(u64, u32)> {
        runs.iter().flat_map(|r| (r.start..r.start + r.len).map(move |i| (i as u64, r.value))).collect()
    }

    fn encode(list: &[(u64, u32)], layout: Layout) -> Vec<u8> {
        let mut w = Writer::default();
        write_list(&mut w, list, layout, raw);
        w.bytes
    }

    #[test]
    fn runs_layout_bytes() {
        let nan = 0x7fc0_0001u32;
        // A run of 3 NaN at 2, a lone NaN at 6 (repeat), a lone 7 at 7 (adjacent, other value).
        let list = [(2, nan), (3, nan), (4, nan), (6, nan), (7, 7)];
        let bytes = encode(&list, Layout::Runs);
        let mut want = vec![(2 << 2) | 2, 1];
        want.extend_from_slice(&nan.to_le_bytes());
        want.push((1 << 2) | 1);
        want.push(0);
        want.extend_from_slice(&7u32.to_le_bytes());
        assert_eq!(bytes, want);
        assert_eq!(expand(&parse(&bytes, 5, 8, Layout::Runs).unwrap()), list);
    }

    #[test]
    fn reader_refuses_inconsistent_runs() {
        let good = encode(&[(1, 9), (2, 9)], Layout::Runs);
        assert!(parse(&good, 2, 3, Layout::Runs).is_ok());
        assert!(parse(&good, 2, 2, Layout::Runs).is_err(), "run past n");
        assert!(parse(&good, 1, 3, Layout::Runs).is_err(), "longer than the count");
        assert!(parse(&good, 3, 3, Layout::Runs).is_err(), "count not reached");
        assert!(parse(&[REPEAT as u8], 1, 3, Layout::Runs).is_err(), "repeat first");
        let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(parse(&[&[2][..], &huge].concat(), 5, 9, Layout::Runs).is_err(), "length overflows");
        for cut in 0..good.len() {
            assert!(parse(&good[..cut], 2, 3, Layout::Runs).is_err());
        }
    }

    #[test]
    fn the_smaller_layout_is_chosen_indexed_on_ties() {
        let sparse = [(100u64, 1u32), (300, 2)];
        let (bytes, layout) = smaller(|w, l| write_list(w, &sparse, l, raw));
        assert_eq!((layout, bytes), (Layout::Indexed, encode(&sparse, Layout::Indexed)));
        let (_, layout) = smaller(|w, l| write_list(w, &[], l, raw));
        assert_eq!(layout, Layout::Indexed);
        let masked: Vec<(u64, u32)> = (0..1000).filter(|i| i % 2 == 0).map(|i| (i, 5)).collect();
        let (bytes, layout) = smaller(|w, l| write_list(w, &masked, l, raw));
        assert_eq!(layout, Layout::Runs);
        assert_eq!(bytes.len(), 4 + masked.len(), "one byte per lone repeat, the value once");
    }

    fn pattern() -> impl Strategy<Value = (usize, Vec<(u64, u32)>)> {
        (1usize..300, 0u8..6, any::<u64>()).prop_map(|(n, kind, seed)| {
            let mut s = seed | 1;
            let mut rnd = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let values = [0x7fc0_0000u32, 0xffc0_1234, 0x8000_0000, 0, 0xd01502f9];
            let list = (0..n as u64)
                .filter_map(|i| {
                    let keep = match kind {
                        0 => false,
                        1 => true,
                        2 => i % 2 == 1,
                        3 => (i / 17) % 2 == 0,
                        4 => i == 0 || i + 1 == n as u64,
                        _ => rnd() % 3 == 0,
                    };
                    keep.then(|| {
                        (i, if kind == 5 { values[rnd() as usize % 5] } else { values[(i / 40) as usize % 5] })
                    })
                })
                .collect();
            (n, list)
        })
    }

    proptest! {
        #[test]
        fn both_layouts_round_trip_bit_exact((n, list) in pattern()) {
            for layout in [Layout::Indexed, Layout::Runs] {
                let bytes = encode(&list, layout);
                prop_assert_eq!(expand(&parse(&bytes, list.len() as u64, n, layout).unwrap()), list.clone());
            }
        }
    }
}
