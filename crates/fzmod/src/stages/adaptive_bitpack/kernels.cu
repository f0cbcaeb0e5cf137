// AdaptiveBitpack on the device, one warp per coder block of BLOCK = 32 * M elements
// (element lane + 32 i lives in register i of that lane). Sign region and bit-planes are
// warp ballots: ballot word i of a plane is bytes 4i..4i+3 of that plane, bit j of byte k
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

__device__ __forceinline__ void write_meta(u8* meta, u64 blk, BlockCode c) {
#if LAYOUT == 0
    meta[blk] = (u8)c.rate;
#elif LAYOUT == 1
    meta[2 * blk] = (u8)c.rate;
    meta[2 * blk + 1] = c.ob ? (u8)(1 | ((c.ob - 1) << 1)) : 0;
#else
    meta[blk] = c.ob ? (u8)(0x80 | ((c.ob - 1) << 5) | c.rate) : (u8)c.rate;
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

__device__ __forceinline__ void store_word(u8* p, u32 w, bool aligned) {
    if (aligned) {
        *(u32*)p = w;
    } else {
        p[0] = (u8)w; p[1] = (u8)(w >> 8); p[2] = (u8)(w >> 16); p[3] = (u8)(w >> 24);
    }
}

__device__ __forceinline__ u32 load_word(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

// Pass 1: metadata, payload cost and outlier count of every block.
extern "C" __global__ void __launch_bounds__(ENCODE_WARPS * 32)
fz_analyze(const real* data, const Params* params, Geometry g, u8* meta, u32* cost, u32* outliers) {
    int lane = threadIdx.x & 31;
    u64 blk = (u64)blockIdx.x * ENCODE_WARPS + (threadIdx.x >> 5);
    if (blk >= g.nblocks) return;
    QParams qp = load_params(params);
    i32 v[M];
    bool outlier[M];
    u64 natural[M];
    block_values(data, blk, lane, g, qp, v, outlier, natural);
    u32 mag[M];
    u32 count = 0;
    for (int i = 0; i < M; i++) {
        mag[i] = magnitude(v[i]);
        count += __popc(__ballot_sync(FULL_MASK, outlier[i]));
    }
    BlockCode c = choose_code(mag, lane);
    if (lane == 0) {
        write_meta(meta, blk, c);
        cost[blk] = block_cost(c);
        outliers[blk] = count;
    }
}

// Pass 2: payloads at their scanned offsets, outliers at theirs (block order).
extern "C" __global__ void __launch_bounds__(ENCODE_WARPS * 32)
fz_encode(const real* data, const Params* params, Geometry g, const u64* offsets, const u64* outlier_offsets,
          u8* out, u64* outlier_index, u64* outlier_bits) {
    int lane = threadIdx.x & 31;
    u64 blk = (u64)blockIdx.x * ENCODE_WARPS + (threadIdx.x >> 5);
    if (blk >= g.nblocks) return;
    QParams qp = load_params(params);
    i32 v[M];
    bool outlier[M];
    u64 natural[M];
    block_values(data, blk, lane, g, qp, v, outlier, natural);
    u32 mag[M], neg[M];
    u64 at = outlier_offsets[blk];
    for (int i = 0; i < M; i++) {
        mag[i] = magnitude(v[i]);
        neg[i] = v[i] < 0;
        u32 ballot = __ballot_sync(FULL_MASK, outlier[i]);
        if (outlier[i]) {
            u64 slot = at + __popc(ballot & ((1u << lane) - 1));
            outlier_index[slot] = natural[i];
            outlier_bits[slot] = real_bits(data[natural[i]]);
        }
        at += __popc(ballot);
    }
    BlockCode c = choose_code(mag, lane);
    if (c.rate == 0 && c.ob == 0) return;
    u8* p = out + g.meta_len + offsets[blk];
    if (c.ob) {
        if (lane == 0) {
            for (u32 b = 0; b < c.ob; b++) p[b] = (u8)(mag[0] >> (8 * b));
            mag[0] = 0;
        }
        p += c.ob;
    }
    bool aligned = (((u64)p) & 3) == 0;
    for (u32 plane = 0; plane <= c.rate; plane++) {
        for (int i = 0; i < M; i++) {
            u32 bit = plane == 0 ? neg[i] : (mag[i] >> (plane - 1)) & 1;
            u32 word = __ballot_sync(FULL_MASK, bit);
            u32 w = plane * M + i;
            if ((u32)lane == (w & 31)) store_word(p + 4 * w, word, aligned);
        }
    }
}

// Decoding, pass 1: each block's payload cost from its metadata.
extern "C" __global__ void fz_block_cost(const u8* meta, u64 nblocks, u32* cost, u32* err) {
    u64 blk = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (blk < nblocks) cost[blk] = block_cost(read_meta(meta, blk, err));
}

// Decoding, pass 2: one warp per block; the predictor's decode_store inverts and writes.
extern "C" __global__ void __launch_bounds__(DECODE_WARPS * 32)
fz_decode(const u8* segment, u64 payload_len, const u64* offsets, const Params* params, Geometry g, real* out,
          u32* err) {
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
    for (int i = 0; i < M; i++) mag[i] = neg[i] = 0;
    if (cost > 0) {
        u32 first = 0;
        for (u32 b = 0; b < c.ob; b++) first |= (u32)p[b] << (8 * b);
        p += c.ob;
        for (u32 plane = 0; plane <= c.rate; plane++) {
            for (int i = 0; i < M; i++) {
                u32 bit = (load_word(p + 4 * (plane * M + i)) >> lane) & 1;
                if (plane == 0) neg[i] = bit;
                else mag[i] |= bit << (plane - 1);
            }
        }
        if (c.ob && lane == 0) mag[0] = first;
    }
    i32 v[M];
    bool bad = false;
    for (int i = 0; i < M; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        bad |= k < g.ncodes && mag[i] > (neg[i] ? 0x80000000u : 0x7fffffffu);
        v[i] = neg[i] ? (i32)(0u - mag[i]) : (i32)mag[i];
    }
    if (bad) *err = 1;
    decode_store(v, lane, blk, g, (real)params->step, out);
}
