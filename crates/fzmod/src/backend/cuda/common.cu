// The shared header of every fzmod NVRTC program (prepended to each stage's device.cu and to
// each fusion rule's sources): fixed-width types, warp and block scans, and a deterministic
// three-phase exclusive scan. Compiled with --fmad=false: results that reach the archive match
// the CPU bit for bit.

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define FULL_MASK 0xffffffffu
// The sum of `v` over lanes 0..lane of the warp (Kogge–Stone), in u64 and in wrapping u32.
template <class T>
__device__ __forceinline__ T warp_inclusive_sum(T v, int lane) {
    for (int d = 1; d < 32; d <<= 1) {
        T t = __shfl_up_sync(FULL_MASK, v, d);
        if (lane >= d) v += t;
    }
    return v;
}
__device__ __forceinline__ u64 warp_inclusive_scan(u64 v, int lane) { return warp_inclusive_sum(v, lane); }
__device__ __forceinline__ u32 warp_inclusive_scan(u32 v, int lane) { return warp_inclusive_sum(v, lane); }

// Transpose the warp's 32x32 bit matrix (row = lane): afterwards lane c holds the word whose
// bit r is bit c of lane r's input. Five butterfly exchanges instead of 32 ballots. In the
// exchange at distance j a lane keeps the half of its bits that its own lane bit j selects and
// takes the partner's other half, shifted by j: a byte permutation for j = 16 and 8, a rotation
// and a bit select for j = 4, 2, 1. The selectors, masks and rotations depend only on the lane:
// a kernel that transposes many words makes them once (warp_transposer) and keeps them.
struct WarpTransposer {
    u32 perm16, perm8;  // __byte_perm selectors
    u32 keep4, keep2, keep1;  // the bits a lane keeps
    u32 rot4, rot2, rot1;  // right rotation that brings the partner's half into place
};

__device__ __forceinline__ WarpTransposer warp_transposer(int lane) {
    WarpTransposer t;
    t.perm16 = (lane & 16) ? 0x3276 : 0x5410;
    t.perm8 = (lane & 8) ? 0x3715 : 0x6240;
    t.keep4 = (lane & 4) ? 0xf0f0f0f0u : 0x0f0f0f0fu;
    t.keep2 = (lane & 2) ? 0xccccccccu : 0x33333333u;
    t.keep1 = (lane & 1) ? 0xaaaaaaaau : 0x55555555u;
    t.rot4 = (lane & 4) ? 4 : 28;
    t.rot2 = (lane & 2) ? 2 : 30;
    t.rot1 = (lane & 1) ? 1 : 31;
    return t;
}

__device__ __forceinline__ u32 warp_transpose(u32 x, const WarpTransposer& t) {
    x = __byte_perm(x, __shfl_xor_sync(FULL_MASK, x, 16), t.perm16);
    x = __byte_perm(x, __shfl_xor_sync(FULL_MASK, x, 8), t.perm8);
    u32 y = __shfl_xor_sync(FULL_MASK, x, 4);
    x = (x & t.keep4) | (__funnelshift_r(y, y, t.rot4) & ~t.keep4);
    y = __shfl_xor_sync(FULL_MASK, x, 2);
    x = (x & t.keep2) | (__funnelshift_r(y, y, t.rot2) & ~t.keep2);
    y = __shfl_xor_sync(FULL_MASK, x, 1);
    return (x & t.keep1) | (__funnelshift_r(y, y, t.rot1) & ~t.keep1);
}

__device__ __forceinline__ u32 warp_transpose(u32 x, int lane) { return warp_transpose(x, warp_transposer(lane)); }

// 8x8 bit transpose of the rows byte 0..8 of x: afterwards bit c of byte r is the old bit r of
// byte c (three swaps of ever larger blocks; stages/bit_transpose.rs transpose8 on the CPU).
// An involution.
__device__ __forceinline__ u64 fz_transpose8(u64 x) {
    u64 t = (x ^ (x >> 7)) & 0x00aa00aa00aa00aaull;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000cccc0000ccccull;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000f0f0f0f0ull;
    return x ^ t ^ (t << 28);
}

// Bits 0..7 of b to bits 0, 4, .., 28: nibble j holds bit j (the Mask's bitmap words, RZE's
// byte-permute selectors).
__device__ __forceinline__ u32 fz_bits_to_nibbles(u32 b) {
    b = (b | (b << 12)) & 0x000f000fu;
    b = (b | (b << 6)) & 0x03030303u;
    return (b | (b << 3)) & 0x11111111u;
}

// Exclusive scan of one value per thread across the thread block; *total gets the sum.
__device__ u64 block_exclusive_scan(u64 v, u64* total) {
    __shared__ u64 warp_sums[32];
    __shared__ u64 block_total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    u64 incl = warp_inclusive_scan(v, lane);
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        u64 w = lane < warps ? warp_sums[lane] : 0;
        u64 wi = warp_inclusive_scan(w, lane);
        if (lane < warps) warp_sums[lane] = wi - w;
        if (lane == 31) block_total = wi;
    }
    __syncthreads();
    u64 result = warp_sums[warp] + incl - v;
    *total = block_total;
    __syncthreads();
    return result;
}

#define SCAN_THREADS 1024
#define SCAN_PER_THREAD 4
#define SCAN_TILE (SCAN_THREADS * SCAN_PER_THREAD)

// Exclusive scan of u32 counts into u64 offsets in three phases whose partial sums have a
// fixed shape (decoding: block payload offsets from the metadata costs).

// Phase 1: the sum of each SCAN_TILE items.
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) fz_scan_reduce(const u32* in, u64 n, u64* partials) {
    u64 base = (u64)blockIdx.x * SCAN_TILE + (u64)threadIdx.x * SCAN_PER_THREAD;
    u64 s = 0;
    for (int j = 0; j < SCAN_PER_THREAD; j++)
        if (base + j < n) s += in[base + j];
    u64 total;
    block_exclusive_scan(s, &total);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// Phase 2 (one thread block): exclusive scan of the partial sums, in place.
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) fz_scan_partials(u64* partials, u64 nparts) {
    u64 carry = 0;
    for (u64 base = 0; base < nparts; base += SCAN_THREADS) {
        u64 i = base + threadIdx.x;
        u64 v = i < nparts ? partials[i] : 0;
        u64 total;
        u64 e = block_exclusive_scan(v, &total);
        if (i < nparts) partials[i] = carry + e;
        carry += total;
    }
}

// The offsets of scan tile `tile` (out[i] = carry + the items of the tile before i; out[n] =
// the grand total, written by the tile holding item n - 1); returns the tile's sum.
__device__ __forceinline__ u64 scan_tile(const u32* in, u64 n, u64 tile, u64 carry, u64* out) {
    u64 base = tile * SCAN_TILE + (u64)threadIdx.x * SCAN_PER_THREAD;
    u32 items[SCAN_PER_THREAD];
    u64 s = 0;
    for (int j = 0; j < SCAN_PER_THREAD; j++) {
        items[j] = base + j < n ? in[base + j] : 0;
        s += items[j];
    }
    u64 total;
    u64 run = carry + block_exclusive_scan(s, &total);
    for (int j = 0; j < SCAN_PER_THREAD; j++) {
        if (base + j < n) out[base + j] = run;
        run += items[j];
        if (base + j + 1 == n) out[n] = run;
    }
    return total;
}

// Phase 3: out[i] = sum of in[0..i); out[n] = the grand total.
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) fz_scan_apply(const u32* in, u64 n, const u64* partials, u64* out) {
    scan_tile(in, n, blockIdx.x, partials[blockIdx.x], out);
}

// The whole scan in one thread block, its tiles in turn (short scans: one launch instead of
// three, the same offsets).
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) fz_scan_small(const u32* in, u64 n, u64* out) {
    if (n == 0 && threadIdx.x == 0) out[0] = 0;
    u64 carry = 0;
    for (u64 tile = 0; tile * SCAN_TILE < n; tile++) carry += scan_tile(in, n, tile, carry, out);
}

// *out = *a + b (a stage's archived length: a scanned total plus a fixed header).
extern "C" __global__ void fz_add_u64(const u64* a, u64 b, u64* out) { *out = *a + b; }

// How a gatherer (backend/cuda/region.rs) reads a fused region's input: element i of
// `fz_elements<T>(input)`, either the input itself as T, or — when the stage before the
// gatherer runs inside its loads (the Quantizer) — a loader whose element i is that stage's
// output for input element i, computed where it is read. A gatherer reads each element of the
// grid once as `fz_own(q, i)` (its own slot; neighbours as `q[i]`): a loaded stage that
// counts something per element (the Quantizer's outliers) counts on that read only.
template <class F>
struct fz_loader {
    F f;
    __device__ __forceinline__ auto operator[](u64 i) const { return f(i, false); }
    __device__ __forceinline__ auto own(u64 i) const { return f(i, true); }
};
// Whether a gatherer reads through a loader (each read computes the loaded stage's value), so
// that reading an element once into shared memory pays.
template <class Q>
struct fz_is_loader {
    static constexpr bool value = false;
};
template <class F>
struct fz_is_loader<fz_loader<F>> {
    static constexpr bool value = true;
};
template <class T>
__device__ __forceinline__ T fz_own(const T* q, u64 i) { return q[i]; }
template <class F>
__device__ __forceinline__ auto fz_own(const fz_loader<F>& q, u64 i) { return q.own(i); }
template <class F>
__device__ __forceinline__ fz_loader<F> fz_load(F f) { return {f}; }
template <class T>
__device__ __forceinline__ const T* fz_elements(const u8* input) { return (const T*)input; }
template <class T, class F>
__device__ __forceinline__ const fz_loader<F>& fz_elements(const fz_loader<F>& loader) { return loader; }

// out[i] = value(i) for the `count` elements of a gatherer's tile, FZ_GATHER loads in flight a
// thread: `out` (shared memory) may alias the grid as far as the compiler knows, so a load
// placed after a store waits for that store's own load, one round trip to DRAM an element.
#define FZ_GATHER 4
template <class F>
__device__ __forceinline__ void fz_gather(u32* out, u32 count, F value) {
    for (u32 i0 = threadIdx.x; i0 < count; i0 += FZ_GATHER * blockDim.x) {
        u32 got[FZ_GATHER];
#pragma unroll
        for (u32 k = 0; k < FZ_GATHER; k++) {
            u32 i = i0 + k * blockDim.x;
            got[k] = i < count ? value(i) : 0u;
        }
#pragma unroll
        for (u32 k = 0; k < FZ_GATHER; k++)
            if (i0 + k * blockDim.x < count) out[i0 + k * blockDim.x] = got[k];
    }
}

// The inverse's counterpart: a scattering gatherer stores element i of its output (a u32 code)
// through `fz_stores(output)`, either as an i32 into the output itself, or — when the stage
// before the gatherer runs inside its stores (the Quantizer's reconstruction) — through a
// storer that writes that stage's inverse of the code instead.
template <class F>
struct fz_storer {
    F f;
    __device__ __forceinline__ void operator()(u64 i, u32 v) const { f(i, v); }
};
template <class F>
__device__ __forceinline__ fz_storer<F> fz_store(F f) { return {f}; }
__device__ __forceinline__ auto fz_stores(u8* output) {
    return fz_store([=](u64 i, u32 v) { ((i32*)output)[i] = (i32)v; });
}
template <class F>
__device__ __forceinline__ const fz_storer<F>& fz_stores(const fz_storer<F>& storer) { return storer; }

// Copy `len` bytes with the whole thread block (staging tiles between global and shared
// memory). Whatever the alignments, the bulk moves as 4-byte words into an aligned destination
// (a source off by 1-3 bytes is realigned with funnel shifts; RZE's chunks start anywhere), and
// each thread issues FZ_COPY_BATCH loads before its stores, so that a tile costs a few memory
// latencies rather than one per word. Every aligned word it reads holds a byte of
// [src, src + len), so it stays inside the source's allocation.
#define FZ_COPY_BATCH 4
__device__ __forceinline__ void fz_block_copy(u8* dst, const u8* src, u64 len) {
    u32 head = (u32)min((u64)((4 - ((u64)dst & 3)) & 3), len);
    if (threadIdx.x < head) dst[threadIdx.x] = src[threadIdx.x];
    dst += head, src += head, len -= head;
    u32 shift = (u32)((u64)src & 3);
    // Whole words: with a shifted source, word i also reads the aligned word after it, which
    // for the last word may pass the end: that one goes byte by byte.
    u64 words = len / 4 - (shift != 0 && len >= 4);
    const u32* s = (const u32*)(src - shift);
    u32* d = (u32*)dst;
    for (u64 i0 = threadIdx.x; i0 < words; i0 += FZ_COPY_BATCH * blockDim.x) {
        u32 v[FZ_COPY_BATCH];
#pragma unroll
        for (int k = 0; k < FZ_COPY_BATCH; k++) {
            u64 i = i0 + k * blockDim.x;
            v[k] = i >= words ? 0u : shift == 0 ? s[i] : __funnelshift_r(s[i], s[i + 1], 8 * shift);
        }
#pragma unroll
        for (int k = 0; k < FZ_COPY_BATCH; k++)
            if (i0 + k * blockDim.x < words) d[i0 + k * blockDim.x] = v[k];
    }
    for (u64 i = 4 * words + threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
}

// fz_block_copy for a tile loaded from global into shared memory, where each thread waits for
// its loads: with both ends 16-byte aligned (a tile of a fixed-width stream) it moves 16-byte
// words, so that a 16 KiB tile is one batch of loads per thread, one memory latency. (Stores
// out of shared memory do not wait, and kept fz_block_copy's 4-byte words: 16-byte ones made
// block Lorenzo's region forward slower, 200 -> 294 us on etopo5 x8.)
__device__ __forceinline__ void fz_block_load(u8* dst, const u8* src, u64 len) {
    if ((((u64)dst | (u64)src) & 15) != 0) {
        fz_block_copy(dst, src, len);
        return;
    }
    const u64 vectors = len / 16;
    for (u64 i0 = threadIdx.x; i0 < vectors; i0 += FZ_COPY_BATCH * blockDim.x) {
        uint4 v[FZ_COPY_BATCH];
#pragma unroll
        for (int k = 0; k < FZ_COPY_BATCH; k++)
            if (i0 + k * blockDim.x < vectors) v[k] = ((const uint4*)src)[i0 + k * blockDim.x];
#pragma unroll
        for (int k = 0; k < FZ_COPY_BATCH; k++)
            if (i0 + k * blockDim.x < vectors) ((uint4*)dst)[i0 + k * blockDim.x] = v[k];
    }
    for (u64 i = 16 * vectors + threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
}

// Placement of variable-size chunks (RZE's, a fused region's tiles) by a decoupled look-back:
// chunks are taken in ticket order; a chunk publishes its size (AGGREGATE) as soon as it is
// built, then warp 0 sums its predecessors' published values 32 at a time, back to the nearest
// one that holds its whole prefix (INCLUSIVE), and publishes its own. Every chunk it waits for
// holds an earlier ticket, so it is running or done: no deadlock. Where a chunk lands depends
// only on the sizes before it, never on the schedule.
#define FZ_AGGREGATE (1ull << 62)
#define FZ_INCLUSIVE (2ull << 62)
#define FZ_LOOKBACK_VALUE (FZ_AGGREGATE - 1)

// The sum of the sizes of chunks [0, c), by warp 0 of the block (lane 0 gets it).
__device__ __forceinline__ u64 fz_look_back(volatile u64* state, u64 c) {
    int lane = threadIdx.x & 31;
    u64 exclusive = 0;
    for (long long end = (long long)c - 1;; end -= 32) {
        long long k = end - lane;
        u64 v = FZ_INCLUSIVE;  // before chunk 0: an empty prefix
        if (k >= 0)
            do v = state[k];
            while (v >> 62 == 0);
        u32 inclusive = __ballot_sync(FULL_MASK, v >> 62 == 2);
        int stop = inclusive ? __ffs(inclusive) - 1 : 31;
        u64 part = lane <= stop ? v & FZ_LOOKBACK_VALUE : 0;
        for (int o = 16; o > 0; o >>= 1) part += __shfl_down_sync(FULL_MASK, part, o);
        exclusive += __shfl_sync(FULL_MASK, part, 0);
        if (inclusive) return exclusive;
    }
}
