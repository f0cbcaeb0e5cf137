// Difference on the device (words.cu is compiled in front). The inverse's chunked prefix sums
// come from one global scan: the wrapping sum of a chunk's first k words is the difference
// of two global prefix sums, taken modulo the word width.

// out[i] = map(w[i] - w[i-1]), w[-1] = 0 at the start of every chunk.
extern "C" __global__ void diff_forward(const void* in, void* out, u64 n, u32 bits, u64 chunk, u32 op) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // 32-bit division where it fits: a quarter of the cost of 64-bit division.
    bool first = (n >> 32 == 0 && chunk >> 32 == 0) ? (u32)i % (u32)chunk == 0 : i % chunk == 0;
    u32 prev = first ? 0u : word_load(in, i - 1, bits);
    word_store(out, i, bits, word_apply(word_load(in, i, bits) - prev, bits, op));
}

// Inverse, step 1: the differences with the map undone, widened to u32 for the scan.
extern "C" __global__ void diff_undo(const void* in, u32* d, u64 n, u32 bits, u32 op) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = word_undo(word_load(in, i, bits), bits, op);
}

// Inverse, step 3: sums[i] = d[0] + ... + d[i-1] (exact in u64); the chunk's prefix is
// sums[i + 1] - sums[chunk start], wrapped to the word.
extern "C" __global__ void diff_finish(const u64* sums, void* out, u64 n, u32 bits, u64 chunk) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) word_store(out, i, bits, (u32)(sums[i + 1] - sums[i / chunk * chunk]) & word_mask(bits));
}

// The whole inverse of chunks of at most DIFF_CHUNK_MAX words (16 KiB of u16; PFPL's 16 KiB
// chunks are 4096 u32): one
// thread block per chunk loads it once into shared memory and undoes the map; each warp scans
// its eighth of the chunk 32 words at a time (shuffles, consecutive lanes on consecutive
// words: no bank conflicts), then adds the totals of the warps before it; the prefix sums are
// written out — one pass instead of the global scan's five. Sums wrap to the word as cpu.rs's
// do, so the grouping does not change a bit.
#define DIFF_CHUNK_MAX 8192
#define DIFF_THREADS 256

extern "C" __global__ void __launch_bounds__(DIFF_THREADS) diff_inverse_chunks(const void* in, void* out, u64 n, u32 bits, u64 chunk, u32 op) {
    __shared__ u32 w[DIFF_CHUNK_MAX];
    __shared__ u32 warp_total[DIFF_THREADS / 32];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = DIFF_THREADS / 32;
    u64 chunks = (n + chunk - 1) / chunk;
    for (u64 c = blockIdx.x; c < chunks; c += gridDim.x) {
        u64 start = c * chunk;
        u32 len = (u32)min(chunk, n - start), per = (len + 32 * warps - 1) / (32 * warps) * 32;
        for (u32 i = threadIdx.x; i < len; i += DIFF_THREADS) w[i] = word_undo(word_load(in, start + i, bits), bits, op);
        __syncthreads();
        u32 lo = min(len, warp * per), hi = min(len, lo + per), carry = 0;
        for (u32 k0 = lo; k0 < hi; k0 += 32) {
            u32 k = k0 + lane, val = k < hi ? w[k] : 0u;
            val = warp_inclusive_scan(val, lane);
            val += carry;
            if (k < hi) w[k] = val;
            carry = __shfl_sync(FULL_MASK, val, 31);
        }
        if (lane == 0) warp_total[warp] = carry;
        __syncthreads();
        u32 offset = 0;
        for (u32 j = 0; j < warp; j++) offset += warp_total[j];
        for (u32 k = lo + lane; k < hi; k += 32) w[k] += offset;
        __syncthreads();
        for (u32 i = threadIdx.x; i < len; i += DIFF_THREADS) word_store(out, start + i, bits, w[i] & word_mask(bits));
        __syncthreads();
    }
}

// ---- Fragment of a fused region (backend/cuda/region.rs): whole chunks per tile ----

// Forward: `bytes` bytes of words, out[i] = map(w[i] - w[i-1]) with w[-1] = 0 at every chunk
// start (tiles start at chunk boundaries).
__device__ __forceinline__ void diff_tile_forward(const void* in, void* out, u32 bytes, u32 bits, u32 chunk, u32 op) {
    for (u32 i = threadIdx.x; i < bytes / (bits / 8); i += blockDim.x) {
        u32 prev = i % chunk == 0 ? 0u : word_load(in, i - 1, bits);
        word_store(out, i, bits, word_apply(word_load(in, i, bits) - prev, bits, op));
    }
}

// The inverse of 32-bit words in chunks that the warps share in whole rounds of 128 words: each
// lane takes four consecutive words (one 16-byte shared-memory access, no bank conflicts) and
// sums them itself, so a warp scan serves four words. Sums wrap as in diff_tile_inverse.
__device__ void diff_tile_inverse_x4(void* in, void* out, u32 n, u32 chunk, u32 op, u8* scratch) {
    u32* warp_total = (u32*)scratch;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, per = chunk / (blockDim.x >> 5);
    uint4* w = (uint4*)in;
    uint4* o = (uint4*)out;
    for (u32 start = 0; start < n; start += chunk) {
        u32 lo = (start + warp * per) / 4, hi = lo + per / 4, carry = 0;
        for (u32 q = lo + lane; q < hi; q += 32) {
            uint4 v = w[q];
            v.x = word_undo(v.x, 32, op);
            v.y = word_undo(v.y, 32, op) + v.x;
            v.z = word_undo(v.z, 32, op) + v.y;
            v.w = word_undo(v.w, 32, op) + v.z;
            u32 inclusive = v.w;
            inclusive = warp_inclusive_scan(inclusive, lane);
            u32 before = carry + inclusive - v.w;
            w[q] = make_uint4(v.x + before, v.y + before, v.z + before, v.w + before);
            carry += __shfl_sync(FULL_MASK, inclusive, 31);
        }
        if (lane == 0) warp_total[warp] = carry;
        __syncthreads();
        u32 offset = 0;
        for (u32 j = 0; j < warp; j++) offset += warp_total[j];
        for (u32 q = lo + lane; q < hi; q += 32) {
            uint4 v = w[q];
            o[q] = make_uint4(v.x + offset, v.y + offset, v.z + offset, v.w + offset);
        }
        __syncthreads();
    }
}

// One warp's inclusive prefix sums of words [lo, hi) of the chunk at `start` (the map undone),
// continuing from `carry`, into `dst` (which may be `in`); returns the carry past `hi`.
__device__ __forceinline__ u32 diff_warp_scan(const void* in, void* dst, u32 start, u32 lo, u32 hi, u32 bits, u32 op,
                                              u32 carry) {
    const u32 lane = threadIdx.x & 31;
    for (u32 k0 = lo; k0 < hi; k0 += 32) {
        u32 k = k0 + lane, v = k < hi ? word_undo(word_load(in, start + k, bits), bits, op) : 0u;
        v = warp_inclusive_scan(v, lane);
        v += carry;
        if (k < hi) word_store(dst, start + k, bits, v & word_mask(bits));
        carry = __shfl_sync(FULL_MASK, v, 31);
    }
    return carry;
}

// The inverse of chunks small enough that every warp gets one (a block Lorenzo's 32 words):
// each warp takes whole chunks in turn, with no block barrier between them; chunks that divide
// 32 words are one segmented warp scan for 32 / chunk of them at once.
__device__ void diff_tile_inverse_per_warp(const void* in, void* out, u32 n, u32 bits, u32 chunk, u32 op) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (chunk <= 32 && (chunk & (chunk - 1)) == 0) {
        for (u32 base = warp * 32; base < n; base += warps * 32) {
            u32 k = base + lane, v = k < n ? word_undo(word_load(in, k, bits), bits, op) : 0u;
            for (u32 o = 1; o < chunk; o <<= 1) {
                u32 t = __shfl_up_sync(FULL_MASK, v, o, chunk);
                if ((lane & (chunk - 1)) >= o) v += t;
            }
            if (k < n) word_store(out, k, bits, v & word_mask(bits));
        }
        return;
    }
    for (u32 start = warp * chunk; start < n; start += warps * chunk) {
        diff_warp_scan(in, out, start, 0, min(chunk, n - start), bits, op, 0);
    }
}

// Inverse, chunk by chunk as diff_inverse_chunks: the map undone and each warp's share scanned
// in place in `in` (shared memory the region lets it overwrite), then the totals of the warps
// before it added on the way to `out`. `scratch` holds the warp totals.
__device__ void diff_tile_inverse(void* in, void* out, u32 bytes, u32 bits, u32 chunk, u32 op, u8* scratch) {
    u32* warp_total = (u32*)scratch;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    u32 n = bytes / (bits / 8);
    if (bits == 32 && chunk % (128 * warps) == 0 && n % chunk == 0 && ((u64)out & 15) == 0) {
        diff_tile_inverse_x4(in, out, n, chunk, op, scratch);
        return;
    }
    if (chunk * warps <= n) {
        diff_tile_inverse_per_warp(in, out, n, bits, chunk, op);
        return;
    }
    for (u32 start = 0; start < n; start += chunk) {
        u32 len = min(chunk, n - start), per = (len + 32 * warps - 1) / (32 * warps) * 32;
        u32 lo = min(len, warp * per), hi = min(len, lo + per);
        u32 carry = diff_warp_scan(in, in, start, lo, hi, bits, op, 0);
        if (lane == 0) warp_total[warp] = carry;
        __syncthreads();
        u32 offset = 0;
        for (u32 j = 0; j < warp; j++) offset += warp_total[j];
        for (u32 k = lo + lane; k < hi; k += 32) word_store(out, start + k, bits, (word_load(in, start + k, bits) + offset) & word_mask(bits));
        __syncthreads();
    }
}
