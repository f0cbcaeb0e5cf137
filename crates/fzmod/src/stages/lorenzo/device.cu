// Lorenzo on the device: the wrapping i32 arithmetic of cpu.rs. Grid extents z, y, x.

// Block mode: d[i] = q[i] - q[i - 1], restarting every `block` elements.
extern "C" __global__ void lz_block_delta(const i32* q, u64 n, u64 block, i32* d) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 prev = i % block ? (u32)q[i - 1] : 0u;
    d[i] = (i32)((u32)q[i] - prev);
}

// N-D mode: inclusion-exclusion over the unit cube behind element i at (z, y, x), zero outside
// the grid.
template <class Q>
__device__ __forceinline__ u32 lz_nd_delta_at(Q q, u64 i, u64 z, u64 y, u64 x, u64 ny, u64 nx) {
    u32 s = (u32)fz_own(q, i);
    for (int c = 1; c < 8; c++) {
        u64 dz = c >> 2, dy = (c >> 1) & 1, dx = c & 1;
        if (z < dz || y < dy || x < dx) continue;
        u32 v = (u32)q[i - dz * ny * nx - dy * nx - dx];
        s = ((dz + dy + dx) & 1) ? s - v : s + v;
    }
    return s;
}

extern "C" __global__ void lz_nd_delta(const i32* q, u64 nz, u64 ny, u64 nx, i32* d) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nz * ny * nx) return;
    u64 x = i % nx, row = i / nx, y = row % ny, z = row / ny;
    d[i] = (i32)lz_nd_delta_at(q, i, z, y, x, ny, nx);
}

// A grid's element e as the two terms of its delta that the x difference completes: its value
// less the one a plane back (`own`), and the same for the element a row above it (`up`), zero
// where z or y is 0. `v` is e's value, already read; `plane` is 0 in a 2-D grid.
template <class Q>
__device__ __forceinline__ void lz_column_terms(Q q, u32 e, u32 v, u32 nx, u32 plane, u32& own, u32& up) {
    const bool back = plane && e >= plane, row = (plane ? e % plane : e) >= nx;
    own = v - (back ? (u32)q[e - plane] : 0u);
    up = row ? (u32)q[e - nx] - (back ? (u32)q[e - nx - plane] : 0u) : 0u;
}

// A 2-D or 3-D grid of fewer than 2^32 elements read through a loader, where every read
// computes the loaded stage's value (a quantization): each element's column terms
// (lz_column_terms: four reads an element instead of eight in 3-D, two instead of four in
// 2-D) go to shared memory (`out` and `above`), then each warp takes a run of the tile in
// rounds of 32 and takes the x difference, the left neighbours' terms from the lane before
// (the run's first from the element before it, read before anything is overwritten).
template <class Q>
__device__ __forceinline__ void lz_region_grid_forward(Q q, u32* out, u32* above, u32 first, u32 count, u32 nx,
                                                       u32 plane) {
    for (u32 i0 = threadIdx.x; i0 < count; i0 += FZ_GATHER * blockDim.x) {
        u32 own[FZ_GATHER], up[FZ_GATHER];
#pragma unroll
        for (u32 k = 0; k < FZ_GATHER; k++) {
            u32 i = i0 + k * blockDim.x, e = first + i;
            own[k] = up[k] = 0u;
            if (i < count) lz_column_terms(q, e, (u32)fz_own(q, e), nx, plane, own[k], up[k]);
        }
#pragma unroll
        for (u32 k = 0; k < FZ_GATHER; k++) {
            u32 i = i0 + k * blockDim.x;
            if (i < count) {
                out[i] = own[k];
                above[i] = up[k];
            }
        }
    }
    __syncthreads();
    const u32 warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u32 span = (count + warps * 32 - 1) / (warps * 32) * 32, start = min(count, warp * span),
              end = min(count, start + span);
    // The element before the run: in the tile, or (the tile's first) read through the loader.
    u32 left = 0, up_left = 0;
    if (start < end && start > 0) {
        left = out[start - 1];
        up_left = above[start - 1];
    } else if (start < end && first > 0) {
        const u32 e = first - 1;
        lz_column_terms(q, e, (u32)q[e], nx, plane, left, up_left);
    }
    __syncthreads();
    for (u32 i = start + lane; i - lane < end; i += 32) {
        const bool in = i < end;
        const u32 e = first + i, cur = in ? out[i] : 0u, up = in ? above[i] : 0u;
        u32 l = __shfl_up_sync(FULL_MASK, cur, 1), ul = __shfl_up_sync(FULL_MASK, up, 1);
        if (lane == 0) {
            l = left;
            ul = up_left;
        }
        left = __shfl_sync(FULL_MASK, cur, 31);
        up_left = __shfl_sync(FULL_MASK, up, 31);
        // Wrapping u32 sums, the same as lz_nd_delta_at's in any order.
        if (in) out[i] = cur - up - (e % nx ? l - ul : 0u);
    }
}

// The same deltas as a region fragment (backend/cuda/region.rs): a gatherer, its neighbours
// lie anywhere in the grid `q` (global memory, or a loader: fz_elements in common.cu). A 1-D
// grid takes the plain difference; grids of fewer than 2^32 elements split indices in 32 bits.
template <class Q>
__device__ __forceinline__ void lz_region_nd_forward(Q q, u32* out, u32* spare, u64 first, u32 count, u64 nz,
                                                     u64 ny, u64 nx) {
    if (fz_is_loader<Q>::value && nz * ny > 1 && nz * ny * nx <= 0xffffffffull) {
        lz_region_grid_forward(q, out, spare, (u32)first, count, (u32)nx, nz > 1 ? (u32)(ny * nx) : 0u);
    } else if (nz == 1 && ny == 1) {
        for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
            u64 k = first + i;
            out[i] = (u32)fz_own(q, k) - (k > 0 ? (u32)q[k - 1] : 0u);
        }
    } else if (nz * ny * nx <= 0xffffffffull) {
        const u32 w = (u32)nx, h = (u32)ny;
        for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
            u32 k = (u32)first + i, row = k / w, x = k - row * w, z = row / h, y = row - z * h;
            out[i] = lz_nd_delta_at(q, k, z, y, x, ny, nx);
        }
    } else {
        for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
            u64 k = first + i, row = k / nx, x = k - row * nx, z = row / ny, y = row - z * ny;
            out[i] = lz_nd_delta_at(q, k, z, y, x, ny, nx);
        }
    }
}

// The inverse over a line in a region: the tile's inclusive prefix sums (each warp scans a
// run of consecutive elements in rounds of 32, then adds the totals of the warps before it,
// kept in `scratch`); returns the tile's total to every thread. The region adds the sum of
// the tiles before it (lz_region_add_carry). Wrapping u32 sums: any split gives cpu.rs's.
__device__ __forceinline__ u32 lz_region_line_sums(const u32* in, u32* out, u32 count, u32* scratch) {
    const u32 warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u32 span = (count + warps - 1) / warps, start = min(count, warp * span), end = min(count, start + span);
    u32 carry = 0;
    for (u32 k0 = start; k0 < end; k0 += 32) {
        u32 k = k0 + lane, v = k < end ? in[k] : 0u;
        v = warp_inclusive_scan(v, lane);
        v += carry;
        if (k < end) out[k] = v;
        carry = __shfl_sync(FULL_MASK, v, 31);
    }
    if (lane == 0) scratch[warp] = carry;
    __syncthreads();
    u32 before = 0, total = 0;
    for (u32 w = 0; w < warps; w++) {
        u32 s = scratch[w];
        if (w < warp) before += s;
        total += s;
    }
    if (before)
        for (u32 k = start + lane; k < end; k += 32) out[k] += before;
    return total;
}

__device__ __forceinline__ void lz_region_add_carry(u32* out, u32 count, u32 carry) {
    if (carry)
        for (u32 i = threadIdx.x; i < count; i += blockDim.x) out[i] += carry;
}

// Inclusive prefix sum of `len` elements starting at `base`, stride `stride`, by one warp,
// starting from `carry` (the sum of what precedes them on their line).
__device__ __forceinline__ void warp_prefix(i32* d, u64 base, u64 stride, u64 len, u32 carry = 0) {
    int lane = threadIdx.x & 31;
    for (u64 k0 = 0; k0 < len; k0 += 32) {
        u64 k = k0 + lane;
        u32 v = k < len ? (u32)d[base + k * stride] : 0u;
        v = warp_inclusive_scan(v, lane);
        v += carry;
        if (k < len) d[base + k * stride] = (i32)v;
        carry = __shfl_sync(FULL_MASK, v, 31);
    }
}

#define LZ_WARPS 4

// Block mode inverse: one warp per block.
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32) lz_block_prefix(i32* d, u64 n, u64 block) {
    u64 b = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (b * block >= n) return;
    warp_prefix(d, b * block, 1, min(block, n - b * block));
}

// N-D inverse, one axis at a time: `lines` lines of `len` elements, `stride` apart; line l
// starts at (l / inner) * outer_stride + (l % inner) * inner_stride.
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32)
lz_axis_prefix(i32* d, u64 lines, u64 inner, u64 outer_stride, u64 inner_stride, u64 len, u64 stride) {
    u64 l = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (l >= lines) return;
    warp_prefix(d, (l / inner) * outer_stride + (l % inner) * inner_stride, stride, len);
}

// Long lines are scanned in three passes, so that a single line of 75 M elements (a 1-D array)
// runs on the whole device instead of one warp. The sums wrap in u32 like cpu.rs, and wrapping
// addition is associative: any split gives the CPU's bytes. Lines along x (contiguous) are
// split into LZ_CHUNK-element pieces, one warp each; lines along y and z (stride > 1, adjacent
// lines adjacent in memory) into LZ_COLUMN-element pieces, one thread each, a warp taking 32
// adjacent lines so that every access is coalesced.
#define LZ_CHUNK 8192
#define LZ_COLUMN 256

__device__ __forceinline__ u64 line_base(u64 l, u64 inner, u64 outer_stride, u64 inner_stride) {
    return (l / inner) * outer_stride + (l % inner) * inner_stride;
}

// Contiguous lines, pass 1: the sum of each piece (line w / chunks, piece w % chunks).
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32)
lz_chunk_sums(const i32* d, u64 lines, u64 inner, u64 outer_stride, u64 inner_stride, u64 len, u64 chunks, u32* sums) {
    u64 w = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (w >= lines * chunks) return;
    int lane = threadIdx.x & 31;
    u64 base = line_base(w / chunks, inner, outer_stride, inner_stride);
    u64 start = (w % chunks) * LZ_CHUNK, end = min(len, start + LZ_CHUNK);
    u32 s = 0;
    for (u64 k = start + lane; k < end; k += 32) s += (u32)d[base + k];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(FULL_MASK, s, o);
    if (lane == 0) sums[w] = s;
}

// Contiguous lines, pass 2: each line's piece sums become exclusive carries, one warp a line.
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32) lz_chunk_carries(u32* sums, u64 lines, u64 chunks) {
    u64 l = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (l >= lines) return;
    int lane = threadIdx.x & 31;
    u32 carry = 0;
    for (u64 c0 = 0; c0 < chunks; c0 += 32) {
        u64 c = c0 + lane;
        u32 v = c < chunks ? sums[l * chunks + c] : 0u, incl = v;
        incl = warp_inclusive_scan(incl, lane);
        if (c < chunks) sums[l * chunks + c] = carry + incl - v;
        carry += __shfl_sync(FULL_MASK, incl, 31);
    }
}

// Contiguous lines, pass 3: each piece scanned from its carry.
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32)
lz_chunk_prefix(i32* d, u64 lines, u64 inner, u64 outer_stride, u64 inner_stride, u64 len, u64 chunks, const u32* carries) {
    u64 w = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (w >= lines * chunks) return;
    u64 base = line_base(w / chunks, inner, outer_stride, inner_stride);
    u64 start = (w % chunks) * LZ_CHUNK;
    warp_prefix(d, base + start, 1, min((u64)LZ_CHUNK, len - start), carries[w]);
}

// Strided lines (line l starts at (l / inner) * outer_stride + l % inner): thread t takes line
// t % lines, piece t / lines; sums and carries are stored piece-major, line fastest.
__device__ __forceinline__ bool column_piece(u64 t, u64 lines, u64 inner, u64 outer_stride, u64 len, u64* base, u64* start, u64* end) {
    u64 l = t % lines, c = t / lines;
    *base = (l / inner) * outer_stride + l % inner;
    *start = c * LZ_COLUMN;
    *end = min(len, *start + LZ_COLUMN);
    return *start < len;
}

// Strided lines, pass 1: the sum of each piece.
extern "C" __global__ void lz_column_sums(const i32* d, u64 lines, u64 inner, u64 outer_stride, u64 len, u64 stride, u64 pieces, u32* sums) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x, base, start, end;
    if (t >= lines * pieces || !column_piece(t, lines, inner, outer_stride, len, &base, &start, &end)) return;
    u32 s = 0;
    for (u64 k = start; k < end; k++) s += (u32)d[base + k * stride];
    sums[t] = s;
}

// Strided lines, pass 2: exclusive carries of each line's pieces, one thread a line.
extern "C" __global__ void lz_column_carries(u32* sums, u64 lines, u64 pieces) {
    u64 l = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= lines) return;
    u32 carry = 0;
    for (u64 c = 0; c < pieces; c++) {
        u32 v = sums[c * lines + l];
        sums[c * lines + l] = carry;
        carry += v;
    }
}

// Strided lines, pass 3: each piece scanned from its carry (all carries 0 when one piece),
// each sum stored through `store` (fz_stores in common.cu): in place as an i32, or through the
// inverse of the element-wise stage before Lorenzo (Lorenzo::inverse_stored).
template <class S>
__device__ __forceinline__ void lz_column_prefix_run(const i32* d, const S& store, u64 lines, u64 inner, u64 outer_stride, u64 len, u64 stride, u64 pieces, const u32* carries) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x, base, start, end;
    if (t >= lines * pieces || !column_piece(t, lines, inner, outer_stride, len, &base, &start, &end)) return;
    u32 s = pieces > 1 ? carries[t] : 0u;
    for (u64 k = start; k < end; k++) {
        s += (u32)d[base + k * stride];
        store(base + k * stride, s);
    }
}

extern "C" __global__ void lz_column_prefix(i32* d, u64 lines, u64 inner, u64 outer_stride, u64 len, u64 stride, u64 pieces, const u32* carries) {
    lz_column_prefix_run(d, fz_stores((u8*)d), lines, inner, outer_stride, len, stride, pieces, carries);
}

// Planes whose rows fit one block (nx ≤ LZ_PLANE_ROW): the x and y sums of a plane together,
// in three passes over bands of `band` rows (a band never crosses a plane), which reads the
// deltas twice and writes the values once, where an axis at a time reads them three times and
// writes them twice. out[y][x] = out[y - 1][x] + (the prefix sum of row y up to x), so a block
// walks its band row by row, each thread keeping its columns of the row above in registers;
// the row above its band's first is the x prefix of the column sums of the bands above. A
// block holds only about a row of loads in flight, so narrower rows take fewer warps a block
// (as few as hold the row in LZ_PLANE_ROUNDS rounds; host: plane_prefix) and more blocks an SM.
#define LZ_PLANE_WARPS 16
#define LZ_PLANE_ROUNDS 12
#define LZ_PLANE_ROW (LZ_PLANE_WARPS * LZ_PLANE_ROUNDS * 32)

// Pass 1: sums[b * nx + x] = the sum of column x over the rows of band b, a thread a column.
extern "C" __global__ void lz_band_sums(const i32* d, u64 ny, u64 nx, u64 band, u64 plane_bands, u64 bands, u32* sums) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= bands * nx) return;
    u64 b = t / nx, x = t - b * nx, plane = b / plane_bands, y0 = (b - plane * plane_bands) * band;
    u64 rows = min(band, ny - y0);
    const i32* p = d + (plane * ny + y0) * nx + x;
    u32 s = 0;
    for (u64 k = 0; k < rows; k++) s += (u32)p[k * nx];
    sums[t] = s;
}

// Pass 2: each band's column sums become the sums of the bands above it in its plane. A block
// takes 32 columns (lanes) of one plane, each of its warps (up to 32, no more than the plane
// has bands) a run of its bands.
extern "C" __global__ void __launch_bounds__(1024) lz_band_carries(u32* sums, u64 nx, u64 plane_bands, u64 column_groups) {
    __shared__ u32 totals[32][33];
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const u64 plane = blockIdx.x / column_groups, x = (blockIdx.x - plane * column_groups) * 32 + lane;
    const u64 run = (plane_bands + warps - 1) / warps, first = min(plane_bands, warp * run),
              end = min(plane_bands, first + run);
    u32* column = sums + plane * plane_bands * nx + x;
    u32 s = 0;
    if (x < nx)
        for (u64 b = first; b < end; b++) s += column[b * nx];
    totals[warp][lane] = s;
    __syncthreads();
    u32 carry = 0;
    for (u32 w = 0; w < warp; w++) carry += totals[w][lane];
    if (x < nx)
        for (u64 b = first; b < end; b++) {
            u32 v = column[b * nx];
            column[b * nx] = carry;
            carry += v;
        }
}

// The inclusive prefix sum along x of one row held by the block, up to LZ_PLANE_ROUNDS values
// a thread (warp w holds columns [w·rounds·32, (w + 1)·rounds·32), a round 32 of them).
// `totals` holds each warp's sum; callers alternate two so one barrier a row suffices.
__device__ __forceinline__ void lz_plane_row(u32 (&v)[LZ_PLANE_ROUNDS], u32 rounds, u32* totals) {
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    u32 carry = 0;
#pragma unroll
    for (u32 r = 0; r < LZ_PLANE_ROUNDS; r++) {
        if (r >= rounds) break;
        v[r] = warp_inclusive_scan(v[r], lane);
        u32 round_total = __shfl_sync(FULL_MASK, v[r], 31);
        v[r] += carry;
        carry += round_total;
    }
    if (lane == 0) totals[warp] = carry;
    __syncthreads();
    u32 before = lane < warp ? totals[lane] : 0u;
    for (int o = 16; o > 0; o >>= 1) before += __shfl_xor_sync(FULL_MASK, before, o);
#pragma unroll
    for (u32 r = 0; r < LZ_PLANE_ROUNDS; r++) v[r] += before;
}

// Pass 3: a block a band, each value stored through `store` as in lz_column_prefix_run; the
// deltas `in` may be the stored-to grid, each element being read and then written by the same
// thread. Columns fit a u32 (nx ≤ LZ_PLANE_ROW): rows are stepped by pointer.
template <class S>
__device__ __forceinline__ void lz_band_prefix_run(const i32* in, const S& store, u64 ny, u64 nx, u64 band, u64 plane_bands,
                                                   const u32* carries) {
    __shared__ u32 totals[2][LZ_PLANE_WARPS];
    const u64 b = blockIdx.x, plane = b / plane_bands, y0 = (b - plane * plane_bands) * band;
    const u32 rows = (u32)min(band, ny - y0), width = (u32)nx;
    const u32 rounds = (width + blockDim.x - 1) / blockDim.x;
    const u32 x0 = (threadIdx.x >> 5) * rounds * 32 + (threadIdx.x & 31);
    const u32 mine = x0 < width ? min(rounds, (width - x0 + 31) / 32) : 0u;  // rounds inside the row
    u64 row = (plane * ny + y0) * nx;
    in += row;
    // No carries when every plane is one band (nothing lies above a band).
    if (carries) carries += b * nx;
    u32 above[LZ_PLANE_ROUNDS], next[LZ_PLANE_ROUNDS];
#pragma unroll
    for (u32 r = 0; r < LZ_PLANE_ROUNDS; r++) {
        above[r] = carries && r < mine ? carries[x0 + r * 32] : 0u;
        next[r] = r < mine ? (u32)in[x0 + r * 32] : 0u;
    }
    lz_plane_row(above, rounds, totals[1]);
    for (u32 k = 0; k < rows; k++, in += width, row += width) {
        u32 v[LZ_PLANE_ROUNDS];
        const bool more = k + 1 < rows;
#pragma unroll
        for (u32 r = 0; r < LZ_PLANE_ROUNDS; r++) {
            v[r] = next[r];
            next[r] = more && r < mine ? (u32)in[width + x0 + r * 32] : 0u;
        }
        lz_plane_row(v, rounds, totals[k & 1]);
#pragma unroll
        for (u32 r = 0; r < LZ_PLANE_ROUNDS; r++) {
            above[r] += v[r];
            if (r < mine) store(row + x0 + r * 32, above[r]);
        }
    }
}

#define LZ_BAND_PREFIX_BOUNDS __launch_bounds__(LZ_PLANE_WARPS * 32, 2)

extern "C" __global__ void LZ_BAND_PREFIX_BOUNDS
lz_band_prefix(const i32* in, i32* out, u64 ny, u64 nx, u64 band, u64 plane_bands, const u32* carries) {
    lz_band_prefix_run(in, fz_stores((u8*)out), ny, nx, band, plane_bands, carries);
}
