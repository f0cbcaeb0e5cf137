// ANS on the device: rANS over bytes with dietgpu's geometry (cpu.rs for the rules). Four
// standalone kernels: a byte histogram, its normalisation (one thread block), the encoder (one
// warp per 4 KiB block, placed by a decoupled look-back) and the decoder (one warp per block).
// Words a round emits get their slots from a ballot, in lane order, as cpu.rs writes them.

#define ANS_BLOCK 4096
#define ANS_WARPS 4
#define ANS_STATE_LOW (1u << 15)
#define ANS_RAW 0xffffffffu
#define ANS_PROBS_BYTES 512
#define ANS_STATES_BYTES 128
// Room for a block's words: at most max_words(4096) = 1982, plus one round beyond it.
#define ANS_MAX_WORDS 2048

typedef unsigned short u16;

// cpu.rs max_words: the most words a coded block of `len` bytes holds; -1 when none fits.
__device__ __forceinline__ int ans_max_words(u32 len) {
    return len > ANS_STATES_BYTES ? 2 * (int)((len - ANS_STATES_BYTES - 1) / 4) : -1;
}
__device__ __forceinline__ u32 ans_coded_len(u32 words) { return ANS_STATES_BYTES + 4 * ((words + 1) / 2); }

// Byte counts into counts[256] (u64, zeroed before the launch); per-block shared counters.
extern "C" __global__ void __launch_bounds__(256) ans_histogram(const u8* in, u64 n, u64* counts) {
    __shared__ u32 h[256];
    h[threadIdx.x] = 0;
    __syncthreads();
    u64 stride = (u64)gridDim.x * blockDim.x, t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 head = ((u64)in & 3) ? min(n, 4 - ((u64)in & 3)) : 0;
    for (u64 i = t; i < head; i += stride) atomicAdd(&h[in[i]], 1u);
    const u32* words = (const u32*)(in + head);
    u64 nwords = (n - head) / 4;
    for (u64 i = t; i < nwords; i += stride) {
        u32 v = words[i];
        atomicAdd(&h[v & 255], 1u);
        atomicAdd(&h[v >> 8 & 255], 1u);
        atomicAdd(&h[v >> 16 & 255], 1u);
        atomicAdd(&h[v >> 24], 1u);
    }
    for (u64 i = head + 4 * nwords + t; i < n; i += stride) atomicAdd(&h[in[i]], 1u);
    __syncthreads();
    if (h[threadIdx.x]) atomicAdd((unsigned long long*)&counts[threadIdx.x], (unsigned long long)h[threadIdx.x]);
}

// floor(c · s / t) exactly for c ≤ t and s ≤ 2^11 (cpu.rs takes it in 128 bits): the quotient
// is below 2^11, found bit by bit by comparing 128-bit products.
__device__ u32 ans_scale(u64 c, u64 s, u64 t) {
    u64 hi = __umul64hi(c, s), lo = c * s;
    u64 q = 0;
    for (int bit = 11; bit >= 0; bit--) {
        u64 next = q | 1ull << bit, next_hi = __umul64hi(next, t), next_lo = next * t;
        if (next_hi < hi || (next_hi == hi && next_lo <= lo)) q = next;
    }
    return (u32)q;
}

// One thread block of 256 threads, thread s for symbol s (cpu.rs normalise): the probabilities
// as u16 LE into probs, and table[s] = prob | cdf << 16 for the encoder.
extern "C" __global__ void __launch_bounds__(256) ans_normalise(const u64* counts, u32 bits, u8* probs, u32* table) {
    __shared__ u64 best[256];
    u32 s = threadIdx.x;
    u64 c = counts[s], total, present;
    block_exclusive_scan(c, &total);
    block_exclusive_scan(c > 0, &present);
    u64 spread = (1ull << bits) - present;
    u32 p = c ? 1 + ans_scale(c, spread, total) : 0;
    // The most frequent symbol, the smallest on ties: the largest (count, 255 − s).
    best[s] = c << 8 | (255 - s);
    __syncthreads();
    for (u32 half = 128; half > 0; half >>= 1) {
        if (s < half) best[s] = max(best[s], best[s + half]);
        __syncthreads();
    }
    u64 sum;
    block_exclusive_scan(p, &sum);
    if (s == 255 - (u32)(best[0] & 255)) p += (1u << bits) - (u32)sum;
    u64 cdf = block_exclusive_scan(p, &sum);
    probs[2 * s] = (u8)p;
    probs[2 * s + 1] = (u8)(p >> 8);
    table[s] = p | (u32)cdf << 16;
}

// Blocks are placed by the decoupled look-back of common.cu (fz_look_back) over their sizes,
// taken in ticket order, so every block waited for is running or done.

// Copy `len` bytes with one warp, on 4-byte words where both ends and the length allow.
__device__ __forceinline__ void ans_warp_copy(u8* dst, const u8* src, u32 len) {
    int lane = threadIdx.x & 31;
    if (((u64)dst | (u64)src | len) % 4 == 0) {
        for (u32 i = lane; i < len / 4; i += 32) ((u32*)dst)[i] = ((const u32*)src)[i];
    } else {
        for (u32 i = lane; i < len; i += 32) dst[i] = src[i];
    }
}

// The segment after its probabilities: a word count per block (ANS_RAW when raw), then each
// block at head + the sizes of the blocks before it; *out_len gets the segment's length.
// `state` holds a ticket counter and a look-back word per block, zeroed before the launch. A
// block that would end past `capacity` bytes is not written (the host repeats the run with
// room for all; the head always fits).
extern "C" __global__ void __launch_bounds__(ANS_WARPS * 32) ans_encode(
    const u8* in, u64 n, u64 nblocks, u32 bits, const u32* table, u64* state, u8* out, u64* out_len, u64 capacity) {
    // x / p by a multiply (Granlund and Montgomery's round-up method): with l = ceil(log2 p)
    // and m = floor(2^32 (2^l - p) / p) + 1, x / p = (umulhi(x, m) + x) >> l for every
    // x < 2^31, which the state is below whenever it is divided (it was renormalised under
    // p << (31 - bits)). Exact, so the bytes are cpu.rs's; a division costs ~20 instructions.
    // One 8-byte entry per symbol, read once per round: {m, p | l << 12 | cdf << 16}
    // (p ≤ 2^11, l ≤ 11, cdf < 2^11).
    __shared__ uint2 coder[256];
    for (u32 i = threadIdx.x; i < 256; i += blockDim.x) {
        u32 e = table[i], p = e & 0xffff, l = p <= 1 ? 0 : 32 - __clz(p - 1);
        coder[i] = make_uint2(p == 0 ? 0 : (u32)(((((u64)1 << l) - p) << 32) / p + 1), p | l << 12 | (e >> 16) << 16);
    }
    __shared__ __align__(16) u8 staged[ANS_WARPS][ANS_BLOCK];
    __shared__ __align__(4) u16 words[ANS_WARPS][ANS_MAX_WORDS];
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 before_me = (1u << lane) - 1;
    volatile u64* flags = (volatile u64*)(state + 1);
    u64 head = ANS_PROBS_BYTES + 4 * nblocks;
    u8* mine = staged[warp];
    u16* emitted = words[warp];
    for (;;) {
        u64 c = 0;
        if (lane == 0) c = atomicAdd((unsigned long long*)state, 1ull);
        c = __shfl_sync(FULL_MASK, c, 0);
        if (c >= nblocks) return;
        u32 len = (u32)min((u64)ANS_BLOCK, n - c * ANS_BLOCK);
        // Staged: reading the symbols round by round from global memory instead measured
        // 12 % slower, despite twice the occupancy.
        ans_warp_copy(mine, in + c * ANS_BLOCK, len);
        __syncwarp();
        int cap = ans_max_words(len);
        bool raw = cap < 0;
        u32 x = ANS_STATE_LOW;
        int w = 0;
        // One round: lane `lane` codes byte r · 32 + lane (`active`: inside the block).
        auto round = [&](u32 r, bool active) {
            uint2 e = coder[active ? mine[r * 32 + lane] : 0];
            u32 p = e.y & 0xfff;
            bool emit = active && x >= p << (31 - bits);
            u32 mask = __ballot_sync(FULL_MASK, emit);
            if (emit) {
                emitted[w + __popc(mask & before_me)] = (u16)x;
                x >>= 16;
            }
            w += __popc(mask);
            if (active) {
                u32 q = (__umulhi(x, e.x) + x) >> (e.y >> 12 & 15);
                x = (q << bits) + (x - q * p) + (e.y >> 16);
            }
            raw = w > cap;
        };
        if (len == ANS_BLOCK) {  // every lane active in every round: no checks
            for (u32 r = 0; !raw && r < ANS_BLOCK / 32; r++) round(r, true);
        } else {
            for (u32 r = 0; !raw && r * 32 < len; r++) round(r, r * 32 + lane < len);
        }
        u32 size = raw ? len : ans_coded_len(w);
        if (lane == 0 && c > 0) flags[c] = FZ_AGGREGATE | size;
        u64 before = fz_look_back(flags, c);
        if (lane == 0) {
            flags[c] = FZ_INCLUSIVE | (before + size);
            ((u32*)(out + ANS_PROBS_BYTES))[c] = raw ? ANS_RAW : (u32)w;
            if (c == nblocks - 1) *out_len = head + before + size;
        }
        __syncwarp();
        if (head + before + size > capacity) continue;
        u8* dst = out + head + before;
        if (raw) {
            ans_warp_copy(dst, mine, len);
        } else {
            // Coded blocks start 4-byte aligned: the head and every block before are multiples of 4.
            ((u32*)dst)[lane] = x;
            for (int i = lane; 2 * i < w; i += 32) {
                u32 hi = 2 * i + 1 < w ? emitted[2 * i + 1] : 0;
                ((u32*)(dst + ANS_STATES_BYTES))[i] = emitted[2 * i] | hi << 16;
            }
        }
        __syncwarp();
    }
}

// Whether block b's word count is one cpu.rs block_starts accepts, and its bytes in the
// segment (a refused count counts as raw; ans_decode flags it).
__device__ __forceinline__ bool ans_block_size(u32 count, u32 len, u32* size) {
    int most = ans_max_words(len);
    bool valid = count == ANS_RAW || (most >= 0 && count <= (u32)most);
    *size = count != ANS_RAW && valid ? ans_coded_len(count) : len;
    return valid;
}

// Inverse, pass 1: each block's bytes, for the scan that places the blocks.
extern "C" __global__ void ans_block_sizes(const u8* seg, u64 n, u64 nblocks, u32* sizes) {
    u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) return;
    ans_block_size(((const u32*)(seg + ANS_PROBS_BYTES))[b], (u32)min((u64)ANS_BLOCK, n - b * ANS_BLOCK), &sizes[b]);
}

// Pass 2: block b at head + offsets[b] (the scanned sizes, nblocks + 1 of them); dtable is
// cpu.rs decode_table. The checks of cpu.rs block_starts, made here: a word count the block
// cannot hold, or blocks that do not end exactly at the segment's end, set *table_err, and a
// block that would leave the segment is not read. A state out of range, non-zero padding, a
// block that reads past its words or does not end on its initial states sets *err.
extern "C" __global__ void __launch_bounds__(ANS_WARPS * 32) ans_decode(
    const u8* seg, const u64* offsets, u64 seg_len, u64 n, u64 nblocks, u32 bits, const u32* dtable, u8* out, u32* err, u32* table_err) {
    const u64 head = ANS_PROBS_BYTES + 4 * nblocks;
    if (blockIdx.x == 0 && threadIdx.x == 0 && head + offsets[nblocks] != seg_len) atomicOr(table_err, 1u);
    // Words are read from global memory and symbols written straight to `out` (a device
    // buffer the run reads only after checking *err): shared memory holds just the table,
    // and the latency-bound rounds get the most warps.
    __shared__ u32 table[1 << 11];
    for (u32 i = threadIdx.x; i < 1u << bits; i += blockDim.x) table[i] = dtable[i];
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 before_me = (1u << lane) - 1, mask = (1u << bits) - 1;
    const u32* counts = (const u32*)(seg + ANS_PROBS_BYTES);
    for (u64 b = (u64)blockIdx.x * ANS_WARPS + warp; b < nblocks; b += (u64)gridDim.x * ANS_WARPS) {
        u32 len = (u32)min((u64)ANS_BLOCK, n - b * ANS_BLOCK);
        const u8* src = seg + head + offsets[b];
        u8* dst = out + b * ANS_BLOCK;
        u32 count = counts[b], size;
        if (!ans_block_size(count, len, &size) || head + offsets[b + 1] > seg_len) {
            if (lane == 0) atomicOr(table_err, 1u);
            continue;
        }
        if (count == ANS_RAW) {
            ans_warp_copy(dst, src, len);
            continue;
        }
        u32 x = ((const u32*)src)[lane];
        // Coded blocks start 4-byte aligned (the head and every block before them are
        // multiples of 4 bytes, raw blocks being whole), so the words are u16s.
        const u16* stream = (const u16*)(src + ANS_STATES_BYTES);
        // An odd count leaves the last word's high half as padding, which must be zero.
        bool ok = x >= ANS_STATE_LOW && x >> 31 == 0 && (count % 2 == 0 || stream[count] == 0);
        ok = __all_sync(FULL_MASK, ok);
        int pos = (int)count;
        for (int r = (int)((len + 31) / 32) - 1; ok && r >= 0; r--) {
            u32 i = r * 32 + lane;
            bool active = i < len;
            if (active) {
                u32 t = table[x & mask];
                dst[i] = (u8)t;
                x = (t >> 8 & 0xfff) * (x >> bits) + (x & mask) - (t >> 20);
            }
            bool need = active && x < ANS_STATE_LOW;
            u32 m = __ballot_sync(FULL_MASK, need);
            int reads = __popc(m);
            ok = reads <= pos;
            pos -= reads;
            if (ok && need) x = x << 16 | stream[pos + __popc(m & before_me)];
        }
        ok = __all_sync(FULL_MASK, ok && pos == 0 && x == ANS_STATE_LOW);
        if (!ok && lane == 0) atomicOr(err, 1u);
    }
}
