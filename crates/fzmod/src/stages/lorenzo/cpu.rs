//! CPU reference of the Lorenzo deltas and their prefix-sum inverses (wrapping i32).

use crate::element::zeroed_vec;
use rayon::prelude::*;

/// Elements per parallel work item in block mode (rounded to whole blocks).
const CHUNK: usize = 1 << 16;

fn block_chunk(block: usize) -> usize {
    CHUNK.div_ceil(block) * block
}

/// `δ_i = q_i − q_{i−1}`, restarting at every multiple of `block`, in place: the codes are
/// not needed afterwards, and a second array of their size would be the compress path's peak.
pub fn block_delta(q: &mut [i32], block: usize) {
    q.par_chunks_mut(block_chunk(block)).for_each(|c| delta_blocks(c, block));
}

/// [`block_delta`] on one core: `q` starts a block (its blocks are whole but the last).
pub(crate) fn delta_blocks(q: &mut [i32], block: usize) {
    for b in q.chunks_mut(block) {
        let mut prev = 0i32;
        for v in b {
            let code = *v;
            *v = code.wrapping_sub(prev);
            prev = code;
        }
    }
}

/// Inverse of [`block_delta`], in place.
pub fn block_prefix(d: &mut [i32], block: usize) {
    d.par_chunks_mut(block_chunk(block)).for_each(|c| prefix_blocks(c, block));
}

/// [`block_prefix`] on one core: `d` starts a block.
pub(crate) fn prefix_blocks(d: &mut [i32], block: usize) {
    for b in d.chunks_mut(block) {
        let mut acc = 0i32;
        for v in b {
            acc = acc.wrapping_add(*v);
            *v = acc;
        }
    }
}

/// N-D Lorenzo (inclusion–exclusion, zero outside the grid) over dims `[z, y, x]`.
pub fn nd_delta(q: &[i32], [_, ny, nx]: [usize; 3]) -> Vec<i32> {
    let mut out = zeroed_vec(q.len());
    if q.is_empty() {
        return out;
    }
    let zero = vec![0i32; nx];
    let row = |z: usize, y: usize, dz: usize, dy: usize| -> &[i32] {
        if z < dz || y < dy {
            &zero
        } else {
            let r = (z - dz) * ny + (y - dy);
            &q[r * nx..(r + 1) * nx]
        }
    };
    out.par_chunks_mut(nx).enumerate().for_each(|(r, o)| {
        let (z, y) = (r / ny, r % ny);
        let (a, b, c, d) = (row(z, y, 0, 0), row(z, y, 0, 1), row(z, y, 1, 0), row(z, y, 1, 1));
        // Along y and z first (rows), then along x.
        let mut prev = 0i32;
        for x in 0..nx {
            let col = a[x].wrapping_sub(b[x]).wrapping_sub(c[x]).wrapping_add(d[x]);
            o[x] = col.wrapping_sub(prev);
            prev = col;
        }
    });
    out
}

/// Inverse of [`nd_delta`], in place: prefix sums along x, then y, then z.
pub fn nd_prefix(d: &mut [i32], [nz, ny, nx]: [usize; 3]) {
    if d.is_empty() {
        return;
    }
    d.par_chunks_mut(nx).for_each(|row| {
        let mut acc = 0i32;
        for v in row {
            acc = acc.wrapping_add(*v);
            *v = acc;
        }
    });
    // Along y: planes at once; with fewer planes than threads (a 2-D array) each plane in
    // column bands at once instead, each band walking its rows in order.
    let threads = rayon::current_num_threads();
    let width = nx.div_ceil(threads).next_multiple_of(16).max(MIN_BAND);
    if nz >= threads || width >= nx {
        d.par_chunks_mut(nx * ny).for_each(|plane| y_prefix(plane, nx));
    } else {
        d.chunks_mut(nx * ny).for_each(|plane| y_prefix_in_bands(plane, nx, width));
    }
    for z in 1..nz {
        let (prev, cur) = d.split_at_mut(z * nx * ny);
        let prev = &prev[(z - 1) * nx * ny..];
        cur[..nx * ny].par_chunks_mut(CHUNK).zip(prev.par_chunks(CHUNK)).for_each(|(c, p)| {
            for (c, p) in c.iter_mut().zip(p) {
                *c = c.wrapping_add(*p);
            }
        });
    }
}

/// The narrowest column band of [`y_prefix_in_bands`]: 1 KiB of each row.
const MIN_BAND: usize = 256;

/// Prefix sums along y of one plane of rows of `nx`, row after row.
fn y_prefix(plane: &mut [i32], nx: usize) {
    for y in 1..plane.len() / nx {
        let (prev, cur) = plane.split_at_mut(y * nx);
        let prev = &prev[(y - 1) * nx..];
        for (c, p) in cur[..nx].iter_mut().zip(prev) {
            *c = c.wrapping_add(*p);
        }
    }
}

/// [`y_prefix`] in bands of `width` columns at once: each band adds its rows in the same
/// order, so every sum is the row walk's.
fn y_prefix_in_bands(plane: &mut [i32], nx: usize, width: usize) {
    let mut bands: Vec<Vec<&mut [i32]>> = (0..nx.div_ceil(width)).map(|_| Vec::new()).collect();
    for row in plane.chunks_mut(nx) {
        for (band, part) in bands.iter_mut().zip(row.chunks_mut(width)) {
            band.push(part);
        }
    }
    bands.into_par_iter().for_each(|mut rows| {
        for y in 1..rows.len() {
            let (prev, cur) = rows.split_at_mut(y);
            for (c, p) in cur[0].iter_mut().zip(prev[y - 1].iter()) {
                *c = c.wrapping_add(*p);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn block_round_trip(q in prop::collection::vec(any::<i32>(), 0..3000), block in 1usize..200) {
            let mut d = q.clone();
            block_delta(&mut d, block);
            prop_assert!(d.len() == q.len() && d.first() == q.first());
            block_prefix(&mut d, block);
            prop_assert_eq!(d, q);
        }

        #[test]
        fn y_bands_give_the_row_walk(ny in 1usize..40, nx in 1usize..70, width in 1usize..80, seed in any::<u64>()) {
            let plane: Vec<i32> = (0..(ny * nx) as u64).map(|i| (i.wrapping_mul(seed | 1) >> 5) as i32).collect();
            let (mut walked, mut banded) = (plane.clone(), plane);
            y_prefix(&mut walked, nx);
            y_prefix_in_bands(&mut banded, nx, width);
            prop_assert_eq!(banded, walked);
        }

        #[test]
        fn nd_round_trip(nz in 1usize..5, ny in 1usize..9, nx in 1usize..40, seed in any::<u64>()) {
            let n = nz * ny * nx;
            let q: Vec<i32> = (0..n as u64).map(|i| (i.wrapping_mul(seed | 1) >> 7) as i32).collect();
            let mut d = nd_delta(&q, [nz, ny, nx]);
            nd_prefix(&mut d, [nz, ny, nx]);
            prop_assert_eq!(d, q);
        }
    }

    #[test]
    fn nd_delta_of_a_plane_is_sparse() {
        // q = x + 2y + 3z is annihilated everywhere except the faces: inclusion–exclusion works.
        let (nz, ny, nx) = (3, 4, 5);
        let q: Vec<i32> =
            (0..nz * ny * nx).map(|i| ((i % nx) + 2 * ((i / nx) % ny) + 3 * (i / (nx * ny))) as i32).collect();
        let d = nd_delta(&q, [nz, ny, nx]);
        let interior_nonzero = (1..nz)
            .flat_map(|z| (1..ny).flat_map(move |y| (1..nx).map(move |x| (z * ny + y) * nx + x)))
            .filter(|&i| d[i] != 0)
            .count();
        assert_eq!(interior_nonzero, 0);
        assert_eq!(d[0], 0);
    }
}
