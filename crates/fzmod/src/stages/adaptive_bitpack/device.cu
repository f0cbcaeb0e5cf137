// AdaptiveBitpack on the device: the block codes and byte layout of cpu.rs. A group of lanes per
// coder block; its lane j builds bytes j, j + lanes, … of the sign region and of every plane
// (byte k: elements 8k..8k+7). The encode runs in regions only (the fragment at the end); the
// decode also alone (ab_decode).
// CODE_I16 selects i16 codes (max rate 16); otherwise i32. LAYOUT: 0 plain, 1 wide, 2 packed.

#if CODE_I16
typedef short code_t;
#define MAX_RATE 16u
#else
typedef int code_t;
#define MAX_RATE 32u
#endif

#define AB_WARPS 4

// A coder block's byte columns (8 elements each) go to a group of `lanes` lanes, a power of
// two up to 32 (host: group_lanes): blocks of 32 elements take 4 lanes, 8 blocks a warp, so
// that no lane idles where a warp per block left 28 of 32 without a column.
struct AbLanes {
    u64 blk;     // the group's block
    u32 j;       // this lane's place in its group
};
__device__ __forceinline__ AbLanes ab_lanes(u32 lanes) {
    const u32 lane = threadIdx.x & 31, per_warp = 32 / lanes;
    u64 warp = (u64)blockIdx.x * AB_WARPS + (threadIdx.x >> 5);
    u32 group = lane / lanes;
    return {warp * per_warp + group, lane - group * lanes};
}

__device__ __forceinline__ u32 magnitude(code_t v) { return v < 0 ? (u32)0 - (u32)(i32)v : (u32)v; }
__device__ __forceinline__ u32 bitlen(u32 v) { return 32 - __clz(v); }

// A byte column's 8 codes, loaded or stored as 16-byte words where they lie whole and aligned
// in memory (a warp's lanes then move 16 bytes each, not 4 or 2: a quarter or an eighth of the
// memory requests), else one by one up to `count`. `first` is the column's first index in a
// block of `count` codes.
#define AB_WORDS (2 * (int)sizeof(code_t))  // u32 words of 8 codes
__device__ __forceinline__ bool ab_vector(const code_t* at, u64 first, u64 count) {
    return first + 8 <= count && ((u64)at & 15) == 0;
}
__device__ __forceinline__ void ab_load8(const code_t* at, u64 first, u64 count, code_t c[8]) {
    if (ab_vector(at, first, count)) {
        u32 w[AB_WORDS];
#pragma unroll
        for (int q = 0; q < AB_WORDS / 4; q++) {
            const uint4 word = reinterpret_cast<const uint4*>(at)[q];
            w[4 * q] = word.x, w[4 * q + 1] = word.y, w[4 * q + 2] = word.z, w[4 * q + 3] = word.w;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) c[j] = sizeof(code_t) == 4 ? (code_t)w[j] : (code_t)(w[j / 2] >> (16 * (j & 1)));
    } else {
        for (int j = 0; j < 8; j++) c[j] = first + j < count ? at[j] : (code_t)0;
    }
}
__device__ __forceinline__ void ab_store8(code_t* at, u64 first, u64 count, const code_t c[8]) {
    if (ab_vector(at, first, count)) {
        u32 w[AB_WORDS];
#pragma unroll
        for (int j = 0; j < AB_WORDS; j++)
            w[j] = sizeof(code_t) == 4 ? (u32)c[j] : ((u32)(unsigned short)c[2 * j] | (u32)(unsigned short)c[2 * j + 1] << 16);
#pragma unroll
        for (int q = 0; q < AB_WORDS / 4; q++)
            reinterpret_cast<uint4*>(at)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
    } else {
        for (int j = 0; j < 8 && first + j < count; j++) at[j] = c[j];
    }
}

// Payload bytes of a block: nothing when empty, else the raw first magnitude, a sign region
// and `rate` planes of `s` bytes each.
__device__ __forceinline__ u64 block_cost(u32 rate, u32 ob, u64 s) {
    return (rate == 0 && ob == 0) ? 0 : ob + s * (rate + 1);
}

// A block's code from its first magnitude and the OR of the others' (cpu.rs choose).
__device__ __forceinline__ void ab_code(u32 first, u32 rest, u64 s, u32* rate, u32* ob) {
    *rate = bitlen(first | rest);
    *ob = 0;
    if (LAYOUT != 0) {
        u32 ob_alt = (bitlen(first) + 7) / 8, rate_alt = bitlen(rest);
        // Ties go to plain; a zero first magnitude always does.
        if (ob_alt != 0 && block_cost(*rate, 0, s) > block_cost(rate_alt, ob_alt, s)) {
            *rate = rate_alt;
            *ob = ob_alt;
        }
    }
}

// The group's block code: lane j of `lanes` reads the byte columns j, j + lanes, … of the
// block's `count` codes at `v` (as ab_put_block will: 16-byte words where aligned, where one
// code at a time from a shared tile would be an 8-way bank conflict for blocks of 32 i32);
// every lane of the group gets the code.
__device__ __forceinline__ void ab_choose_block(const code_t* v, u64 count, u64 s, u32 j, u32 lanes, u32* rate, u32* ob) {
    u32 first = 0, rest = 0;
    for (u64 k = j; k < s; k += lanes) {
        code_t c[8];
        ab_load8(v + 8 * k, 8 * k, count, c);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            if (k == 0 && e == 0) {
                first = magnitude(c[0]);
            } else {
                rest |= magnitude(c[e]);
            }
        }
    }
    for (u32 o = lanes / 2; o > 0; o >>= 1) rest |= __shfl_xor_sync(FULL_MASK, rest, o, lanes);
    first = __shfl_sync(FULL_MASK, first, 0, lanes);
    ab_code(first, rest, s, rate, ob);
}

__device__ __forceinline__ void write_code(u8* meta, u64 blk, u32 rate, u32 ob) {
    if (LAYOUT == 0) {
        meta[blk] = (u8)rate;
    } else if (LAYOUT == 1) {
        meta[2 * blk] = (u8)rate;
        meta[2 * blk + 1] = ob ? (u8)(1 | ((ob - 1) << 1)) : 0;
    } else {
        meta[blk] = ob ? (u8)(0x80 | ((ob - 1) << 5) | rate) : (u8)rate;
    }
}

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

// Byte q of each of the 8 magnitudes, element e in byte e.
__device__ __forceinline__ u64 ab_bytes_of(const u32 m[8], u32 q) {
    const u32 sel = q | (q + 4) << 4;  // byte q of the first operand, then of the second
    u32 lo = __byte_perm(__byte_perm(m[0], m[1], sel), __byte_perm(m[2], m[3], sel), 0x5410);
    u32 hi = __byte_perm(__byte_perm(m[4], m[5], sel), __byte_perm(m[6], m[7], sel), 0x5410);
    return (u64)hi << 32 | lo;
}

// Lane j's share of a block's payload (its `count` codes at `v`, its code) written at `dst`.
__device__ __forceinline__ void ab_put_block(const code_t* v, u64 count, u64 s, u32 rate, u32 ob, u32 j, u32 lanes, u8* dst) {
    if (rate == 0 && ob == 0) return;
    if (j == 0)
        for (u32 b = 0; b < ob; b++) dst[b] = (u8)(magnitude(v[0]) >> (8 * b));
    u8* region = dst + ob;
    for (u64 k = j; k < s; k += lanes) {
        u32 signs = 0, mags[8];
        code_t c[8];
        ab_load8(v + 8 * k, 8 * k, count, c);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            mags[e] = (k == 0 && e == 0 && ob) ? 0 : magnitude(c[e]);
            signs |= (u32)(c[e] < 0) << e;
        }
        region[k] = (u8)signs;
        // Eight planes at a time: byte q of each magnitude is a row of an 8x8 bit matrix, and
        // row p of its transpose is plane 8q + p's byte of the column (bit e: element e);
        // about 20 instructions instead of 8 shifts and masks per plane. The decode takes the
        // same transpose back.
        for (u32 q = 0; 8 * q < rate; q++) {
            const u64 planes = fz_transpose8(ab_bytes_of(mags, q));
            for (u32 p = 8 * q; p < min(rate, 8 * q + 8); p++) region[s * (p + 1) + k] = (u8)(planes >> (8 * (p - 8 * q)));
        }
    }
}

// Lane j's share of a block decoded from `src` into its `count` codes at `v`; false where a
// magnitude does not fit the code type or a zero has a sign (a second encoding of 0; cpu.rs
// refuses it too).
__device__ __forceinline__ bool ab_get_block(const u8* src, u64 count, u64 s, u32 rate, u32 ob, u32 j, u32 lanes, code_t* v) {
    u32 first = 0;
    for (u32 b = 0; b < ob; b++) first |= (u32)src[b] << (8 * b);
    const u8* region = src + ob;
    const bool empty = rate == 0 && ob == 0;
    bool bad = false;
    for (u64 k = j; k < s; k += lanes) {
        u32 signs = empty ? 0 : region[k], mags[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (u32 q = 0; 8 * q < rate; q++) {
            // All eight loads issued before the first is used (a loop to `rate` waited for each).
            u64 planes = 0;
#pragma unroll
            for (u32 p = 0; p < 8; p++)
                planes |= (u64)(8 * q + p < rate ? region[s * (8 * q + p + 1) + k] : 0) << (8 * p);
            const u64 bytes = fz_transpose8(planes);
#pragma unroll
            for (int e = 0; e < 8; e++) mags[e] |= (u32)(bytes >> (8 * e) & 0xff) << (8 * q);
        }
        code_t c[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            u32 m = (k == 0 && e == 0 && ob) ? first : mags[e];
            bool neg = (signs >> e) & 1;
            u32 limit = neg ? (1u << (MAX_RATE - 1)) : (1u << (MAX_RATE - 1)) - 1u;
            bad |= 8 * k + e < count && (m > limit || (neg && m == 0));
            c[e] = (code_t)(neg ? (i32)((u32)0 - m) : (i32)m);
        }
        ab_store8(v + 8 * k, 8 * k, count, c);
    }
    return !bad;
}

// Whether block `blk` (its code read) lies exactly at its scanned place inside the payload.
__device__ __forceinline__ bool ab_placed(const u64* offsets, u64 blk, u64 payload, u32 rate, u32 ob, u64 s) {
    return rate <= MAX_RATE && offsets[blk + 1] <= payload && offsets[blk] + block_cost(rate, ob, s) == offsets[blk + 1];
}

// Decode pass 1: validate each block's metadata and give its payload size; *err != 0 marks
// an invalid block (which one does not matter: the archive is refused).
extern "C" __global__ void ab_costs(const u8* meta, u64 nblocks, u64 b, u32* cost, u64* err) {
    u64 blk = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (blk >= nblocks) return;
    u32 rate, ob;
    read_code(meta, blk, &rate, &ob);
    bool bad = rate > MAX_RATE || ob > MAX_RATE / 8;
    if (LAYOUT == 1) {
        u8 sel = meta[2 * blk + 1];
        bad = bad || (sel & ~7u) != 0 || ((sel & 1) == 0 && sel != 0);
    }
    if (bad) atomicOr(err, 1ull);
    cost[blk] = bad ? 0 : (u32)block_cost(rate, ob, (b + 7) / 8);
}

// The scanned payload sizes must fill the payload exactly.
extern "C" __global__ void ab_check_total(const u64* offsets, u64 nblocks, u64 payload, u64* err) {
    if (offsets[nblocks] != payload) atomicOr(err, 1ull);
}

// Decode pass 2: a group of lanes per block, as the encode; a block not where its code puts it
// is not read (a flag is up) and decodes to zeros, so that no later kernel reads unwritten
// memory.
extern "C" __global__ void __launch_bounds__(AB_WARPS * 32)
ab_decode(const u8* in, u64 meta_len, const u64* offsets, u64 payload, u64 n, u64 b, u32 lanes, code_t* v,
          u64* err) {
    const AbLanes g = ab_lanes(lanes);
    const u64 blk = g.blk, start = blk * b;
    if (start >= n) return;
    u64 count = min(b, n - start), s = (b + 7) / 8;
    u32 rate, ob;
    read_code(in, blk, &rate, &ob);
    if (!ab_placed(offsets, blk, payload, rate, ob, s)) {
        for (u64 i = g.j; i < count; i += lanes) v[start + i] = 0;
        return;
    }
    if (!ab_get_block(in + meta_len + offsets[blk], count, s, rate, ob, g.j, lanes, v + start)) atomicOr(err, 1ull);
}

// ---- Fragment of a fused region (backend/cuda/region.rs): a tile of whole blocks ----
// The tile's blocks go to the lane groups of the thread block in turn. Scratch: each block's
// code (rate | ob << 8), then its place in the tile's payload (an exclusive sum of the
// costs), then the tile's total.

// The size of the tile's payload (its `count` codes at `in`, of blocks of `b`); the codes
// and places stay in `scratch` for ab_region_emit.
__device__ u32 ab_region_size(const u8* in, u32 count, u32 b, u32 lanes, u8* scratch) {
    const code_t* v = (const code_t*)in;
    const u32 blocks = (count + b - 1) / b, groups = blockDim.x / lanes, s = (b + 7) / 8;
    u32* codes = (u32*)scratch;
    u32* places = codes + blocks;
    for (u32 g0 = 0; g0 < blocks; g0 += groups) {
        const u32 blk = g0 + threadIdx.x / lanes, j = threadIdx.x % lanes;
        const u32 start = min(blk, blocks) * b, n = blk < blocks ? min(b, count - start) : 0u;
        u32 rate, ob;
        ab_choose_block(v + start, n, s, j, lanes, &rate, &ob);
        if (j == 0 && blk < blocks) {
            codes[blk] = rate | ob << 8;
            places[blk] = (u32)block_cost(rate, ob, s);
        }
    }
    __syncthreads();
    // Warp 0 turns the costs into places: each lane sums a run of blocks, a warp scan, then
    // each lane writes its run's places.
    if (threadIdx.x < 32) {
        const u32 lane = threadIdx.x, run = (blocks + 31) / 32, lo = min(blocks, lane * run), hi = min(blocks, lo + run);
        u32 sum = 0;
        for (u32 k = lo; k < hi; k++) sum += places[k];
        u32 before = warp_inclusive_scan(sum, lane) - sum;
        for (u32 k = lo; k < hi; k++) {
            u32 c = places[k];
            places[k] = before;
            before += c;
        }
        if (lane == 31) places[blocks] = before;
    }
    __syncthreads();
    return places[blocks];
}

// Write the tile's payload (ab_region_size's places) into `out`.
__device__ void ab_region_emit(const u8* in, u32 count, u32 b, u32 lanes, const u8* scratch, u8* out) {
    const code_t* v = (const code_t*)in;
    const u32 blocks = (count + b - 1) / b, groups = blockDim.x / lanes, s = (b + 7) / 8;
    const u32* codes = (const u32*)scratch;
    const u32* places = codes + blocks;
    for (u32 g0 = 0; g0 < blocks; g0 += groups) {
        const u32 blk = g0 + threadIdx.x / lanes, j = threadIdx.x % lanes;
        if (blk < blocks) {
            const u32 code = codes[blk], start = blk * b;
            ab_put_block(v + start, min(b, count - start), s, code & 0xff, code >> 8, j, lanes, out + places[blk]);
        }
    }
}

// The tile's blocks' codes into the metadata at the segment's start (the region's table):
// tile `t` holds blocks t · tile_blocks on.
__device__ void ab_region_entry(u8* seg, u64 t, u32 count, u32 b, u32 tile_blocks, const u8* scratch) {
    const u32 blocks = (count + b - 1) / b;
    const u32* codes = (const u32*)scratch;
    for (u32 blk = threadIdx.x; blk < blocks; blk += blockDim.x)
        write_code(seg, t * tile_blocks + blk, codes[blk] & 0xff, codes[blk] >> 8);
}

// Decode tile `t` (its `count` codes, blocks of `b`) into `out`: each block is read only where
// its code and the scan (`offsets`, over the whole segment) place it inside the `payload`
// after `meta_len` bytes of metadata. Every thread gets false when a block is misplaced or a
// value invalid.
__device__ bool ab_region_decode(const u8* seg, const u64* offsets, u64 meta_len, u64 payload, u64 t, u32 count, u32 b,
                                 u32 lanes, u32 tile_blocks, u8* out) {
    code_t* v = (code_t*)out;
    const u32 blocks = (count + b - 1) / b, groups = blockDim.x / lanes, s = (b + 7) / 8;
    bool ok = true;
    for (u32 g0 = 0; g0 < blocks; g0 += groups) {
        const u32 blk = g0 + threadIdx.x / lanes, j = threadIdx.x % lanes;
        if (blk >= blocks) continue;
        const u64 at = t * tile_blocks + blk;
        const u32 start = blk * b, n = min(b, count - start);
        u32 rate, ob;
        read_code(seg, at, &rate, &ob);
        if (ab_placed(offsets, at, payload, rate, ob, s)) {
            ok &= ab_get_block(seg + meta_len + offsets[at], n, s, rate, ob, j, lanes, v + start);
        } else {
            for (u32 i = j; i < n; i += lanes) v[start + i] = 0;
            ok = false;
        }
    }
    return !__syncthreads_or(!ok);
}
