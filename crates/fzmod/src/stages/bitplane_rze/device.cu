// BitplaneRZE on the device: a warp per 1024-word chunk counts its kept groups (bp_count),
// a scan places the chunks, then one thread block of 32 warps per chunk writes it
// (bp_encode): warp r holds row r (word 32r + lane); a ballot per plane is the CPU's 32×32
// transpose. Kept blocks are ranked by flag order, so the bytes match cpu.rs.

#define BP_THREADS 1024
#define BP_HEADER 128
#define BP_FLAG_WORDS 8

// Word `wi` of the codes (two codes, zero-padded past n).
__device__ __forceinline__ u32 bp_word(const unsigned short* codes, u64 n, u64 wi) {
    return 2 * wi + 1 < n ? ((const u32*)codes)[wi] : 2 * wi < n ? codes[2 * wi] : 0u;
}

// t[plane][row], bit `lane` = bit `plane` of word 32·row + lane of chunk c.
__device__ __forceinline__ void bp_transpose(const unsigned short* codes, u64 n, u64 c, u32 (*t)[32]) {
    int lane = threadIdx.x & 31, row = threadIdx.x >> 5;
    u64 wi = c * 1024 + (u64)row * 32 + lane;
    // Two codes per word, little-endian: one 4-byte load where both exist.
    u32 w = bp_word(codes, n, wi);
    for (int p = 0; p < 32; p++) {
        u32 b = __ballot_sync(FULL_MASK, (w >> p) & 1u);
        if (lane == 0) t[p][row] = b;
    }
    __syncthreads();
}

// For flag f = threadIdx.x < 256 (plane f / 8, group f % 8): whether it is set, and its rank
// among the chunk's set flags; flags[] gets the chunk's 8 flag words. Every thread calls it.
__device__ __forceinline__ bool bp_rank(const u32 (*t)[32], u32* flags, u32* rank) {
    int f = threadIdx.x, lane = f & 31;
    bool set = false;
    if (f < 256) {
        const u32* block = &t[f >> 3][4 * (f & 7)];
        set = (block[0] | block[1] | block[2] | block[3]) != 0;
        u32 ballot = __ballot_sync(FULL_MASK, set);
        if (lane == 0) flags[f >> 5] = ballot;
        *rank = __popc(ballot & ((1u << lane) - 1u));
    }
    __syncthreads();
    if (f < 256)
        for (int w = 0; w < (f >> 5); w++) *rank += __popc(flags[w]);
    return set;
}

__device__ __forceinline__ void put32(u8* out, u64 at, u32 v) { *(u32*)(out + at) = v; }

// Pass 1, a warp per chunk: every chunk's flags (at their fixed place) and kept-word count,
// without the transpose. Group g of plane p is non-empty exactly when bit p is set in some
// word of rows 4g..4g+3, so the OR of those 128 words gives group g's flag of every plane.
#define BP_COUNT_THREADS 256
extern "C" __global__ void __launch_bounds__(BP_COUNT_THREADS)
bp_count(const unsigned short* codes, u64 n, u64 nchunks, u32* counts, u8* out, u64 capacity) {
    const u64 c = ((u64)blockIdx.x * BP_COUNT_THREADS + threadIdx.x) >> 5;
    const u32 lane = threadIdx.x & 31;
    if (c >= nchunks) return;  // whole warps
    u32 words[32];
#pragma unroll
    for (int k = 0; k < 32; k++) words[k] = bp_word(codes, n, c * 1024 + 32 * k + lane);
    u32 any[8];
#pragma unroll
    for (int g = 0; g < 8; g++) {
        any[g] = words[4 * g] | words[4 * g + 1] | words[4 * g + 2] | words[4 * g + 3];
        for (int o = 16; o > 0; o >>= 1) any[g] |= __shfl_xor_sync(FULL_MASK, any[g], o);
    }
    // Flag f = 8p + g is bit f % 32 of flag word f / 32: lane w < 8 assembles word w
    // (planes 4w..4w+3).
    u32 flags = 0;
    if (lane < BP_FLAG_WORDS)
        for (u32 k = 0; k < 4; k++)
            for (u32 g = 0; g < 8; g++) flags |= (any[g] >> (4 * lane + k) & 1u) << (8 * k + g);
    u32 kept = __popc(flags);
    for (int o = 4; o > 0; o >>= 1) kept += __shfl_xor_sync(FULL_MASK, kept, o);
    if (lane < BP_FLAG_WORDS && BP_HEADER + 4 * BP_FLAG_WORDS * nchunks <= capacity)
        put32(out, BP_HEADER + 4 * (BP_FLAG_WORDS * c + lane), flags);
    if (lane == 0) counts[c] = 4 * kept;
}

// Pass 2 (after the scan of the counts into `offsets`): the header, every chunk's start and
// kept blocks at offsets[c] words, and the archive length into *out_len. Nothing is written
// past `capacity` bytes.
extern "C" __global__ void __launch_bounds__(BP_THREADS)
bp_encode(const unsigned short* codes, u64 n, u64 nchunks, const u64* offsets, u8* out, u64 capacity, u64* out_len) {
    __shared__ u32 t[32][32];
    __shared__ u32 flags[BP_FLAG_WORDS];
    u64 c = blockIdx.x;
    u64 flags_end = BP_HEADER + 4 * BP_FLAG_WORDS * nchunks, starts_end = flags_end + 4 * nchunks;
    bp_transpose(codes, n, c, t);
    u32 rank = 0;
    bool set = bp_rank(t, flags, &rank);
    u64 total_bytes = starts_end + 4 * offsets[nchunks];
    if (c == 0 && threadIdx.x == 0) {
        *out_len = total_bytes;
        if (total_bytes <= capacity) {
            *(u64*)out = n;
            u32 entries[5] = {0, BP_HEADER, (u32)flags_end, (u32)starts_end, (u32)total_bytes};
            for (int i = 0; i < 5; i++) put32(out, 8 + 4 * i, entries[i]);
            for (int i = 28; i < BP_HEADER; i += 4) put32(out, i, 0);
        }
    }
    if (total_bytes > capacity) return;
    if (threadIdx.x == 0) put32(out, flags_end + 4 * c, (u32)offsets[c]);
    if (set) {
        int f = threadIdx.x;
        const u32* block = &t[f >> 3][4 * (f & 7)];
        for (int j = 0; j < 4; j++) put32(out, starts_end + 4 * (offsets[c] + 4 * rank + j), block[j]);
    }
}

// Inverse (the metadata was checked on the host): each chunk's blocks back into t, then each
// warp transposes its row back into codes.
extern "C" __global__ void __launch_bounds__(BP_THREADS)
bp_decode(const u8* archive, u64 n, u64 nchunks, unsigned short* codes) {
    __shared__ u32 t[32][32];
    u64 c = blockIdx.x;
    u64 flags_end = BP_HEADER + 4 * BP_FLAG_WORDS * nchunks, starts_end = flags_end + 4 * nchunks;
    const u32* flags = (const u32*)(archive + BP_HEADER) + BP_FLAG_WORDS * c;
    const u32* stream = (const u32*)(archive + starts_end) + ((const u32*)(archive + flags_end))[c];
    int f = threadIdx.x, lane = f & 31, row = f >> 5;
    if (f < 256) {
        u32 word = flags[f >> 5];
        bool set = (word >> lane) & 1u;
        u32 rank = __popc(word & ((1u << lane) - 1u));
        for (int w = 0; w < (f >> 5); w++) rank += __popc(flags[w]);
        for (int j = 0; j < 4; j++) t[f >> 3][4 * (f & 7) + j] = set ? stream[4 * rank + j] : 0;
    }
    __syncthreads();
    u32 w = 0;
    for (int p = 0; p < 32; p++) w |= ((t[p][row] >> lane) & 1u) << p;
    u64 wi = c * 1024 + (u64)row * 32 + lane;
    if (2 * wi + 1 < n) {
        ((u32*)codes)[wi] = w;
    } else if (2 * wi < n) {
        codes[2 * wi] = (unsigned short)w;
    }
}
