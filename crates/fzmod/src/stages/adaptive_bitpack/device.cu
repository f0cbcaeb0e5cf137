// AdaptiveBitpack on the device: the block codes and byte layout of cpu.rs. One warp per coder
// block; lane k builds byte k of the sign region and of every plane (elements 8k..8k+7).
// CODE_I16 selects i16 codes (max rate 16); otherwise i32. LAYOUT: 0 plain, 1 wide, 2 packed.

#if CODE_I16
typedef short code_t;
#define MAX_RATE 16u
#else
typedef int code_t;
#define MAX_RATE 32u
#endif

#define AB_WARPS 4

__device__ __forceinline__ u32 magnitude(code_t v) { return v < 0 ? (u32)0 - (u32)(i32)v : (u32)v; }
__device__ __forceinline__ u32 bitlen(u32 v) { return 32 - __clz(v); }

// Payload bytes of a block: nothing when empty, else the raw first magnitude, a sign region
// and `rate` planes of `s` bytes each.
__device__ __forceinline__ u64 block_cost(u32 rate, u32 ob, u64 s) {
    return (rate == 0 && ob == 0) ? 0 : ob + s * (rate + 1);
}

// Encode pass 1: choose each block's code, write its metadata and its payload size.
extern "C" __global__ void __launch_bounds__(AB_WARPS * 32)
ab_choose(const code_t* v, u64 n, u64 b, u8* meta, u32* cost) {
    u64 blk = (u64)blockIdx.x * AB_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    u64 start = blk * b;
    if (start >= n) return;
    u64 count = min(b, n - start);
    u32 rest = 0;
    for (u64 i = 1 + lane; i < count; i += 32) rest |= magnitude(v[start + i]);
    for (int o = 16; o > 0; o >>= 1) rest |= __shfl_xor_sync(FULL_MASK, rest, o);
    if (lane != 0) return;
    u32 first = magnitude(v[start]);
    u64 s = (b + 7) / 8;
    u32 rate = bitlen(first | rest), ob = 0;
    if (LAYOUT != 0) {
        u32 ob_alt = (bitlen(first) + 7) / 8, rate_alt = bitlen(rest);
        // Ties go to plain; a zero first magnitude always does.
        if (ob_alt != 0 && block_cost(rate, 0, s) > block_cost(rate_alt, ob_alt, s)) {
            rate = rate_alt;
            ob = ob_alt;
        }
    }
    if (LAYOUT == 0) {
        meta[blk] = (u8)rate;
    } else if (LAYOUT == 1) {
        meta[2 * blk] = (u8)rate;
        meta[2 * blk + 1] = ob ? (u8)(1 | ((ob - 1) << 1)) : 0;
    } else {
        meta[blk] = ob ? (u8)(0x80 | ((ob - 1) << 5) | rate) : (u8)rate;
    }
    cost[blk] = (u32)block_cost(rate, ob, s);
}

// Encode pass 2: the payloads at the scanned offsets (rate and first-magnitude bytes re-read
// from the metadata just written).
__device__ __forceinline__ void read_code(const u8* meta, u64 blk, u32* rate, u32* ob) {
    if (LAYOUT == 0) {
        *rate = meta[blk];
        *ob = 0;
    } else if (LAYOUT == 1) {
        *rate = meta[2 * blk];
        u8 sel = meta[2 * blk + 1];
        *ob = (sel & 1) ? (sel >> 1) + 1 : 0;
    } else {
        u8 m = meta[blk];
        *rate = (m & 0x80) ? (m & 0x1f) : m;
        *ob = (m & 0x80) ? ((m >> 5) & 3) + 1 : 0;
    }
}

extern "C" __global__ void __launch_bounds__(AB_WARPS * 32)
ab_write(const code_t* v, u64 n, u64 b, const u64* offsets, u8* out, u64 meta_len, u64 capacity) {
    u64 blk = (u64)blockIdx.x * AB_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    u64 start = blk * b;
    // A block past the room is left out: the archived length tells the host to rerun.
    if (start >= n || meta_len + offsets[blk + 1] > capacity) return;
    u64 count = min(b, n - start), s = (b + 7) / 8;
    u32 rate, ob;
    read_code(out, blk, &rate, &ob);
    if (rate == 0 && ob == 0) return;
    u8* dst = out + meta_len + offsets[blk];
    if (lane == 0)
        for (u32 j = 0; j < ob; j++) dst[j] = (u8)(magnitude(v[start]) >> (8 * j));
    u8* region = dst + ob;
    for (u64 k = lane; k < s; k += 32) {
        u32 signs = 0, mags[8];
        for (int j = 0; j < 8; j++) {
            u64 i = 8 * k + j;
            code_t c = i < count ? v[start + i] : (code_t)0;
            mags[j] = (i == 0 && ob) ? 0 : magnitude(c);
            signs |= (u32)(c < 0) << j;
        }
        region[k] = (u8)signs;
        for (u32 p = 0; p < rate; p++) {
            u32 byte = 0;
            for (int j = 0; j < 8; j++) byte |= ((mags[j] >> p) & 1u) << j;
            region[s * (p + 1) + k] = (u8)byte;
        }
    }
}

// Decode pass 1: validate each block's metadata and give its payload size; *err != 0 marks
// an invalid block (which one does not matter: the archive is refused).
extern "C" __global__ void ab_costs(const u8* meta, u64 nblocks, u64 b, u32* cost, u32* err) {
    u64 blk = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (blk >= nblocks) return;
    u32 rate, ob;
    read_code(meta, blk, &rate, &ob);
    bool bad = rate > MAX_RATE || ob > MAX_RATE / 8;
    if (LAYOUT == 1) {
        u8 sel = meta[2 * blk + 1];
        bad = bad || (sel & ~7u) != 0 || ((sel & 1) == 0 && sel != 0);
    }
    if (bad) atomicOr(err, 1u);
    cost[blk] = bad ? 0 : (u32)block_cost(rate, ob, (b + 7) / 8);
}

// Decode pass 2: one warp per block; a magnitude that does not fit the code type is an error,
// and so is a sign on a zero magnitude (a second encoding of 0; cpu.rs refuses it too).
extern "C" __global__ void __launch_bounds__(AB_WARPS * 32)
ab_decode(const u8* in, u64 meta_len, const u64* offsets, u64 n, u64 b, code_t* v, u32* err) {
    u64 blk = (u64)blockIdx.x * AB_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    u64 start = blk * b;
    if (start >= n) return;
    u64 count = min(b, n - start), s = (b + 7) / 8;
    u32 rate, ob;
    read_code(in, blk, &rate, &ob);
    const u8* src = in + meta_len + offsets[blk];
    u32 first = 0;
    for (u32 j = 0; j < ob; j++) first |= (u32)src[j] << (8 * j);
    const u8* region = src + ob;
    bool empty = rate == 0 && ob == 0;
    for (u64 k = lane; k < s; k += 32) {
        u32 signs = empty ? 0 : region[k], mags[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (u32 p = 0; p < rate; p++) {
            u32 byte = region[s * (p + 1) + k];
            for (int j = 0; j < 8; j++) mags[j] |= ((byte >> j) & 1u) << p;
        }
        for (int j = 0; j < 8; j++) {
            u64 i = 8 * k + j;
            if (i >= count) break;
            u32 m = (i == 0 && ob) ? first : mags[j];
            bool neg = (signs >> j) & 1;
            u32 limit = neg ? (1u << (MAX_RATE - 1)) : (1u << (MAX_RATE - 1)) - 1u;
            if (m > limit || (neg && m == 0)) atomicOr(err, 2u);
            v[start + i] = (code_t)(neg ? (i32)((u32)0 - m) : (i32)m);
        }
    }
}
