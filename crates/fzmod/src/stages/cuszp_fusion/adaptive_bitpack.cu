// AdaptiveBitpack on the device, one warp per coder block of BLOCK = 32 * M elements
// (element lane + 32 i lives in register i of that lane). Sign words and bit-planes come
// from warp transposes: word i of a plane is bytes 4i..4i+3 of that plane, bit j of byte k
// = element 8k + j, exactly the byte layout of docs/FORMAT.md 6.4. The value each lane
// codes come from block_values(), supplied by the predictor source compiled before this one.
// LAYOUT: 0 plain, 1 wide, 2 packed.

#define M (BLOCK / 32)
#define S (BLOCK / 8)

struct BlockCode {
    u32 rate;
    u32 ob;  // raw first-magnitude bytes; 0 = plain block
};

__device__ __forceinline__ u32 bitlen(u32 v) { return 32 - __clz(v); }

__device__ __forceinline__ u32 block_cost(BlockCode c) {
    if (c.ob == 0) return c.rate ? S * (c.rate + 1) : 0;
    return c.ob + S * (c.rate + 1);
}

__device__ __forceinline__ u32 magnitude(i32 v) { return v < 0 ? 0u - (u32)v : (u32)v; }

// The selection rule of the CPU reference; the same result on every lane.
__device__ __forceinline__ BlockCode choose_code(const u32 (&mag)[M], int lane) {
    u32 all = 0, rest = 0;
    for (int i = 0; i < M; i++) {
        all |= mag[i];
        if (i > 0 || lane > 0) rest |= mag[i];
    }
    all = __reduce_or_sync(FULL_MASK, all);
    BlockCode plain = {bitlen(all), 0};
#if LAYOUT == 0
    return plain;
#else
    rest = __reduce_or_sync(FULL_MASK, rest);
    u32 first = __shfl_sync(FULL_MASK, mag[0], 0);
    BlockCode outlier = {bitlen(rest), (bitlen(first) + 7) / 8};
    if (outlier.ob == 0 || block_cost(plain) <= block_cost(outlier)) return plain;
    return outlier;
#endif
}

// A block's metadata bits (one byte, two for the wide layout), as read_meta reads them.
__device__ __forceinline__ u32 meta_bits(BlockCode c) {
#if LAYOUT == 0
    return c.rate;
#elif LAYOUT == 1
    return c.rate | (c.ob ? (1 | ((c.ob - 1) << 1)) : 0) << 8;
#else
    return c.ob ? 0x80 | ((c.ob - 1) << 5) | c.rate : c.rate;
#endif
}

__device__ __forceinline__ void write_meta(u8* meta, u64 blk, u32 bits) {
#if LAYOUT == 1
    *(unsigned short*)(meta + 2 * blk) = (unsigned short)bits;  // little-endian: rate, then the selector
#else
    meta[blk] = (u8)bits;
#endif
}

__device__ __forceinline__ BlockCode read_meta(const u8* meta, u64 blk, u32* err) {
    BlockCode c;
#if LAYOUT == 0
    c.rate = meta[blk];
    c.ob = 0;
#elif LAYOUT == 1
    u32 sel = meta[2 * blk + 1];
    c.rate = meta[2 * blk];
    c.ob = (sel & 1) ? (sel >> 1) + 1 : 0;
    if ((sel & ~7u) || (!(sel & 1) && sel)) c.rate = 99;
#else
    u32 m = meta[blk];
    c.rate = (m & 0x80) ? (m & 0x1f) : m;
    c.ob = (m & 0x80) ? ((m >> 5) & 3) + 1 : 0;
#endif
    if (c.rate > 32 || c.ob > 4) {
        *err = 1;
        c.rate = 0;
        c.ob = 0;
    }
    return c;
}

// FUSED_WARPS and BLOCKS_PER_WARP come from mod.rs (Chain::tile_shape): a tile holds at most
// 8192 elements, whose payloads are staged in at most 35 KB of shared memory.
#define BLOCKS_PER_TILE (FUSED_WARPS * BLOCKS_PER_WARP)
#define LOOK_BACK 128  // tiles inspected per look-back step
#define LOAD_BATCH (BLOCKS_PER_WARP < 8 ? BLOCKS_PER_WARP : 8)
// A warp's staging area: its blocks' payloads at their worst, rounded up to 16 bytes, and
// 16 bytes more that copy_staged may read past the end (at most 4352 + 16 bytes).
#define STAGE_BYTES ((BLOCKS_PER_WARP * (4 + 33 * S) + 15) / 16 * 16 + 16)
// Resident tiles per SM asked of the register allocator where that costs no spills (f32
// without the N-D predictor): five at 32-element blocks (48 registers), four at 64.
#define MIN_TILES_PER_SM (REAL_F64 || PRED == 3 ? 1 : M == 1 ? 5 : M == 2 ? 4 : 1)
static_assert(BLOCKS_PER_WARP <= 32, "lane j holds the metadata of the warp's block j");

// The warps' staging areas, one after another (file scope: indexed, not through a pointer).
__shared__ __align__(16) u8 s_stage[FUSED_WARPS * STAGE_BYTES];

// Store a word at byte offset `at` of a warp's staging area; `aligned` (at % 4 == 0) is the
// same on every lane that stores.
__device__ __forceinline__ void stage_word(u32 at, u32 w, bool aligned) {
    if (aligned) {
        *(u32*)(s_stage + at) = w;
    } else {
        s_stage[at] = (u8)w; s_stage[at + 1] = (u8)(w >> 8); s_stage[at + 2] = (u8)(w >> 16); s_stage[at + 3] = (u8)(w >> 24);
    }
}

__device__ __forceinline__ u32 load_word(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

// Stage one block's payload at byte `at` of the warp's staging area: [|v0| (ob bytes, outlier
// blocks)][sign words][plane words], word i of plane p at (p + 1) M + i. Below 32 planes one
// transpose of (magnitude << 1 | sign) gives lane 0 the sign word and lane p + 1 plane p, so
// every word lands at (lane M + i) in one store.
__device__ __forceinline__ void stage_block(u32 at, BlockCode c, u32 (&mag)[M], const i32 (&v)[M], int lane) {
    if (c.ob) {
        u32 first = __shfl_sync(FULL_MASK, mag[0], 0);
        if ((u32)lane < c.ob) s_stage[at + lane] = (u8)(first >> (8 * lane));
        if (lane == 0) mag[0] = 0;
        at += c.ob;
    }
    bool aligned = (at & 3) == 0;
    for (int i = 0; i < M; i++) {
        if (c.rate < 32) {
            u32 word = warp_transpose(mag[i] << 1 | (u32)(v[i] < 0), lane);
            if ((u32)lane <= c.rate) stage_word(at + 4 * (lane * M + i), word, aligned);
        } else {
            u32 signs = __ballot_sync(FULL_MASK, v[i] < 0);
            u32 plane = warp_transpose(mag[i], lane);
            if (lane == i) stage_word(at + 4 * i, signs, aligned);
            stage_word(at + 4 * ((lane + 1) * M + i), plane, aligned);
        }
    }
}

// Copy `len` staged bytes to `dst` (any alignment) with the warp: whole 4-byte words of the
// destination, each a funnel shift of two aligned staged words, and single bytes at the ends.
// `stage` is 4-byte aligned and readable 4 bytes past `len`.
__device__ __forceinline__ void copy_staged(const u8* stage, u32 len, u8* dst, int lane) {
    u32 head = (4 - (u32)((u64)dst & 3)) & 3;
    if (head > len) head = len;
    if ((u32)lane < head) dst[lane] = stage[lane];
    u32 words = (len - head) / 4, shift = 8 * (head & 3);
    const u32* src = (const u32*)stage;  // staged byte head + 4w starts in src[w] at byte `head`
    u32* out = (u32*)(dst + head);
    for (u32 w = lane; w < words; w += 32) out[w] = __funnelshift_r(src[w], src[w + 1], shift);
    u32 done = head + 4 * words;
    if ((u32)lane < len - done) dst[done + lane] = stage[done + lane];
}

// Load this lane's natural elements of coder block `blk`; padding and the tail are invalid.
template <int N>
__device__ __forceinline__ void load_lane(const real* data, u64 blk, int lane, const Geometry& g, real (&x)[N], bool (&valid)[N]) {
    for (int i = 0; i < N; i++) {
        u64 e = natural_index(blk * BLOCK + lane + 32 * i, g);
        valid[i] = e != NO_INDEX;
        x[i] = valid[i] ? data[e] : (real)0;
    }
}

__device__ __forceinline__ u64 warp_sum(u64 v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// One pass: every thread block takes the next tile of BLOCKS_PER_TILE coder blocks (a ticket
// keeps tiles in launch order, so the look-back below always makes progress), codes them in
// registers, learns where its payload and outliers start from its predecessors (decoupled
// look-back: flag 1 = tile totals published, 2 = inclusive prefix published), then writes.
// Offsets are pure prefix sums by block index: the bytes never depend on scheduling.
// state: [ticket, flags...] as u32; sums: per tile {aggregate bytes, aggregate outliers,
// inclusive bytes, inclusive outliers}; totals: [payload bytes, outliers] of the whole input.
// Outliers beyond outlier_capacity, and payload bytes beyond payload_capacity, are counted but
// not stored; the host then grows the list or the payload to the exact size and runs again.
extern "C" __global__ void __launch_bounds__(FUSED_WARPS * 32, MIN_TILES_PER_SM)
fz_compress(const real* data, const Params* params, Geometry g, u8* out, u64 payload_capacity, u64* outlier_index,
            u64* outlier_bits, u64 outlier_capacity, u32* state, u64* sums, u64* totals) {
    __shared__ u32 s_tile;
    __shared__ u64 s_bytes[FUSED_WARPS], s_outliers[FUSED_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(state, 1u);
    __syncthreads();
    u32 tile = s_tile;
    u64 ntiles = (g.nblocks + BLOCKS_PER_TILE - 1) / BLOCKS_PER_TILE;
    volatile u32* flags = state + 1;
    QParams qp = load_params(params);

    // Phase 1: code every block of the tile and stage its payload, packed, in this warp's
    // staging area; outlier masks wait in shared memory for phase 2, and lane j keeps the
    // metadata of the warp's block j. Loads go out LOAD_BATCH blocks at a time to keep
    // requests in flight.
    __shared__ u32 s_outlier_mask[BLOCKS_PER_TILE * M];
    const u32 stage = warp * STAGE_BYTES;  // this warp's area in s_stage
    u32 warp_bytes = 0, meta = 0;
    u64 warp_outliers = 0;
    const u64 first_blk = ((u64)tile * FUSED_WARPS + warp) * BLOCKS_PER_WARP;
    // Where coder element k is natural element k and the warp's blocks lie inside the input,
    // loads need neither bounds nor index arithmetic (every warp but the last).
    const bool inside = PRED != 2 && (first_blk + BLOCKS_PER_WARP) * BLOCK <= g.ncodes;
    const real* batch = data + first_blk * BLOCK + lane;  // this lane's first element of the batch
    for (int j0 = 0; j0 < BLOCKS_PER_WARP; j0 += LOAD_BATCH, batch += LOAD_BATCH * BLOCK) {
        real x[LOAD_BATCH][M];
        bool valid[LOAD_BATCH][M];
        if (inside) {
#pragma unroll
            for (int jj = 0; jj < LOAD_BATCH; jj++) {
                for (int i = 0; i < M; i++) {
                    x[jj][i] = j0 + jj < BLOCKS_PER_WARP ? batch[jj * BLOCK + 32 * i] : (real)0;
                    valid[jj][i] = j0 + jj < BLOCKS_PER_WARP;
                }
            }
        } else {
#pragma unroll
            for (int jj = 0; jj < LOAD_BATCH; jj++) {
                u64 blk = first_blk + j0 + jj;
                if (j0 + jj < BLOCKS_PER_WARP && blk < g.nblocks) {
                    load_lane(data, blk, lane, g, x[jj], valid[jj]);
                } else {
                    for (int i = 0; i < M; i++) { x[jj][i] = 0; valid[jj][i] = false; }
                }
            }
        }
#pragma unroll
        for (int jj = 0; jj < LOAD_BATCH; jj++) {
            int j = j0 + jj, local = warp * BLOCKS_PER_WARP + j;
            u64 blk = first_blk + j;
            if (j >= BLOCKS_PER_WARP) break;
            i32 v[M];
            bool outlier[M];
            u32 mag[M];
            block_values(data, blk, g, x[jj], valid[jj], lane, qp, v, outlier);
            for (int i = 0; i < M; i++) {
                mag[i] = magnitude(v[i]);
                u32 mask = __ballot_sync(FULL_MASK, outlier[i]);
                warp_outliers += __popc(mask);
                if (lane == 0) s_outlier_mask[local * M + i] = mask;
            }
            BlockCode code = choose_code(mag, lane);
            if (lane == j) meta = meta_bits(code);
            // Blocks past the end are all padding: rate 0, no payload.
            if (code.rate || code.ob) stage_block(stage + warp_bytes, code, mag, v, lane);
            warp_bytes += block_cost(code);
        }
    }
    if (lane < BLOCKS_PER_WARP && first_blk + lane < g.nblocks) write_meta(out, first_blk + lane, meta);
    if (lane == 0) { s_bytes[warp] = warp_bytes; s_outliers[warp] = warp_outliers; }
    __syncthreads();
    if (warp == 0) {
        u64 b = lane < FUSED_WARPS ? s_bytes[lane] : 0, o = lane < FUSED_WARPS ? s_outliers[lane] : 0;
        u64 bi = warp_inclusive_scan(b, lane), oi = warp_inclusive_scan(o, lane);
        u64 tile_bytes = __shfl_sync(FULL_MASK, bi, 31), tile_outliers = __shfl_sync(FULL_MASK, oi, 31);
        volatile u64* agg_bytes = sums;
        volatile u64* agg_outliers = sums + ntiles;
        volatile u64* inc_bytes = sums + 2 * ntiles;
        volatile u64* inc_outliers = sums + 3 * ntiles;
        u64 before_bytes = 0, before_outliers = 0;
        if (tile > 0) {
            if (lane == 0) {
                agg_bytes[tile] = tile_bytes;
                agg_outliers[tile] = tile_outliers;
                __threadfence();
                flags[tile] = 1;
            }
            // Warp-wide look-back over LOOK_BACK tiles a step (lane l inspects the tiles at
            // distances l, l + 32, ... behind the window): stop at the nearest tile with an
            // inclusive prefix, summing the aggregates of the tiles in between. When every tile
            // of a small input runs at once, few have an inclusive prefix yet, and a step of 32
            // tiles took a dependent round of loads per 32 tiles (fz_compress 15 µs at 1 MiB).
            for (i64 window = (i64)tile - 1;;) {
                i64 k[LOOK_BACK / 32];
                u32 f[LOOK_BACK / 32];
                int stop = LOOK_BACK;  // distance of the nearest inclusive prefix in this step
#pragma unroll
                for (int j = 0; j < LOOK_BACK / 32; j++) {
                    k[j] = window - lane - 32 * j;
                    f[j] = k[j] >= 0 ? flags[k[j]] : 2;
                }
#pragma unroll
                for (int j = LOOK_BACK / 32 - 1; j >= 0; j--) {
                    u32 inclusive = __ballot_sync(FULL_MASK, f[j] == 2);
                    if (inclusive) stop = 32 * j + __ffs(inclusive) - 1;
                }
                bool waiting = false;
#pragma unroll
                for (int j = 0; j < LOOK_BACK / 32; j++) waiting |= 32 * j + lane < stop && f[j] == 0;
                if (__any_sync(FULL_MASK, waiting)) continue;  // a tile we need is still coding: spin
                __threadfence();
                u64 b = 0, o = 0;
#pragma unroll
                for (int j = 0; j < LOOK_BACK / 32; j++) {
                    int d = 32 * j + lane;
                    if (d < stop) {
                        b += agg_bytes[k[j]];
                        o += agg_outliers[k[j]];
                    } else if (d == stop && k[j] >= 0) {
                        b += inc_bytes[k[j]];
                        o += inc_outliers[k[j]];
                    }
                }
                before_bytes += warp_sum(b);
                before_outliers += warp_sum(o);
                if (stop < LOOK_BACK) break;
                window -= LOOK_BACK;
            }
        }
        if (lane == 0) {
            inc_bytes[tile] = before_bytes + tile_bytes;
            inc_outliers[tile] = before_outliers + tile_outliers;
            __threadfence();
            flags[tile] = 2;
            if (tile == ntiles - 1) {
                totals[0] = before_bytes + tile_bytes;
                totals[1] = before_outliers + tile_outliers;
            }
        }
        before_bytes = __shfl_sync(FULL_MASK, before_bytes, 0);
        before_outliers = __shfl_sync(FULL_MASK, before_outliers, 0);
        if (lane < FUSED_WARPS) {
            s_bytes[lane] = before_bytes + bi - b;
            s_outliers[lane] = before_outliers + oi - o;
        }
    }
    __syncthreads();
    // Phase 2: copy the staged payload to the warp's offset (nothing past the payload room:
    // the host sees the total and runs again) and list the outliers, if the warp has any.
    u64 at_bytes = s_bytes[warp], at_outliers = s_outliers[warp];
    if (at_bytes < payload_capacity) {
        u64 room = payload_capacity - at_bytes;
        copy_staged(s_stage + stage, room < warp_bytes ? (u32)room : warp_bytes, out + g.meta_len + at_bytes, lane);
    }
    if (warp_outliers == 0) return;
    for (int j = 0; j < BLOCKS_PER_WARP; j++) {
        int local = warp * BLOCKS_PER_WARP + j;
        u64 blk = first_blk + j;
        if (blk >= g.nblocks) break;
        for (int i = 0; i < M; i++) {
            u32 mask = s_outlier_mask[local * M + i];
            u64 slot = at_outliers + __popc(mask & ((1u << lane) - 1));
            if ((mask >> lane & 1) && slot < outlier_capacity) {  // the host re-runs with more room
                u64 e = natural_index(blk * BLOCK + lane + 32 * i, g);
                outlier_index[slot] = e;
                outlier_bits[slot] = real_bits(data[e]);
            }
            at_outliers += __popc(mask);
        }
    }
}

// Decoding, pass 1: each block's payload cost from its metadata.
extern "C" __global__ void fz_block_cost(const u8* meta, u64 nblocks, u32* cost, u32* err) {
    u64 blk = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (blk < nblocks) cost[blk] = block_cost(read_meta(meta, blk, err));
}

// Decoding, pass 2: one warp per block; the predictor's decode_store inverts and writes (or,
// for N-D Lorenzo, stores the deltas for the prefix-sum kernels).
extern "C" __global__ void __launch_bounds__(DECODE_WARPS * 32)
fz_decode(const u8* segment, u64 payload_len, const u64* offsets, const Params* params, Geometry g, real* out,
          i32* deltas, u32* err) {
    int lane = threadIdx.x & 31;
    u64 blk = (u64)blockIdx.x * DECODE_WARPS + (threadIdx.x >> 5);
    if (blk >= g.nblocks) return;
    u32 unused_err = 0;
    BlockCode c = read_meta(segment, blk, &unused_err);
    u64 start = offsets[blk];
    u32 cost = block_cost(c);
    if (start + cost > payload_len) {
        if (lane == 0) *err = 1;
        return;
    }
    const u8* p = segment + g.meta_len + start;
    u32 mag[M], neg[M];
    u32 first = 0;
    for (u32 b = 0; b < c.ob; b++) first |= (u32)p[b] << (8 * b);
    p += c.ob;
    if (c.rate < 32) {
        // The inverse of stage_block: lane q loads word q of the block's sign and plane words
        // for register i, one transpose gives every lane its element's sign (bit 0) and
        // magnitude (bits 1..rate).
        WarpTransposer t = warp_transposer(lane);
        for (int i = 0; i < M; i++) {
            u32 word = cost > 0 && (u32)lane <= c.rate ? load_word(p + 4 * (lane * M + i)) : 0;
            word = warp_transpose(word, t);
            mag[i] = word >> 1;
            neg[i] = word & 1;
        }
    } else {
        for (int i = 0; i < M; i++) mag[i] = neg[i] = 0;
        for (u32 plane = 0; plane <= c.rate; plane++) {
            for (int i = 0; i < M; i++) {
                u32 bit = (load_word(p + 4 * (plane * M + i)) >> lane) & 1;
                if (plane == 0) neg[i] = bit;
                else mag[i] |= bit << (plane - 1);
            }
        }
    }
    if (c.ob && lane == 0) mag[0] = first;
    i32 v[M];
    bool bad = false;
    for (int i = 0; i < M; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        // As cpu.rs: a magnitude beyond i32, or a sign on a zero (non-canonical), is corrupt.
        bad |= k < g.ncodes && (mag[i] > (neg[i] ? 0x80000000u : 0x7fffffffu) || (neg[i] && mag[i] == 0));
        v[i] = neg[i] ? (i32)(0u - mag[i]) : (i32)mag[i];
    }
    if (bad) *err = 1;
    decode_store(v, lane, blk, g, (real)params->step, out, deltas);
}
