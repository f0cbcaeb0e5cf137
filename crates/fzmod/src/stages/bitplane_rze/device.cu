// BitplaneRZE on the device, a warp per 1024-word chunk in every kernel: bp_count counts the
// chunk's kept groups, a scan places the chunks, bp_encode writes them. Row r of a chunk is
// words 32r..32r+31; a warp_transpose of a row gives every lane p the row's word of plane p,
// the CPU's 32×32 transpose. Kept blocks are ranked by flag order, so the bytes match cpu.rs.

#define BP_THREADS 256
#define BP_HEADER 128
#define BP_FLAG_WORDS 8

// Word `wi` of the codes (two codes, zero-padded past n).
__device__ __forceinline__ u32 bp_word(const unsigned short* codes, u64 n, u64 wi) {
    return 2 * wi + 1 < n ? ((const u32*)codes)[wi] : 2 * wi < n ? codes[2 * wi] : 0u;
}

__device__ __forceinline__ void put32(u8* out, u64 at, u32 v) { *(u32*)(out + at) = v; }

// Pass 1, a warp per chunk: every chunk's flags (at their fixed place) and kept-word count,
// without the transpose. Group g of plane p is non-empty exactly when bit p is set in some
// word of rows 4g..4g+3, so the OR of those 128 words gives group g's flag of every plane.
extern "C" __global__ void __launch_bounds__(BP_THREADS)
bp_count(const unsigned short* codes, u64 n, u64 nchunks, u32* counts, u8* out, u64 capacity) {
    const u64 c = ((u64)blockIdx.x * BP_THREADS + threadIdx.x) >> 5;
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

// Lane p's view of chunk c's flags: the 8 group flags of plane p (bit g = group g; flag
// 8p + g is bit (8p + g) % 32 of flag word p / 4) and the rank of its first kept block among
// the chunk's kept blocks (the set flags before flag 8p).
__device__ __forceinline__ u32 bp_plane_flags(const u32* chunk_flags, int lane, u32* rank) {
    u32 word = lane < BP_FLAG_WORDS ? chunk_flags[lane] : 0u, mine = 0;
    *rank = 0;
#pragma unroll
    for (int w = 0; w < BP_FLAG_WORDS; w++) {
        u32 f = __shfl_sync(FULL_MASK, word, w);
        if (w < lane / 4) *rank += __popc(f);
        if (w == lane / 4) mine = f;
    }
    u32 shift = 8 * (lane % 4);
    *rank += __popc(mine & ((1u << shift) - 1u));
    return (mine >> shift) & 0xffu;
}

// Pass 2 (after the scan of the counts into `offsets`): the header, every chunk's start and
// kept blocks at offsets[c] words, and the archive length into *out_len. The flags are the
// ones bp_count wrote. Nothing is written past `capacity` bytes.
extern "C" __global__ void __launch_bounds__(BP_THREADS)
bp_encode(const unsigned short* codes, u64 n, u64 nchunks, const u64* offsets, u8* out, u64 capacity, u64* out_len) {
    const u64 c = ((u64)blockIdx.x * BP_THREADS + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (c >= nchunks) return;  // whole warps
    u64 flags_end = BP_HEADER + 4 * BP_FLAG_WORDS * nchunks, starts_end = flags_end + 4 * nchunks;
    u64 total_bytes = starts_end + 4 * offsets[nchunks];
    if (c == 0 && lane == 0) {
        *out_len = total_bytes;
        if (total_bytes <= capacity) {
            *(u64*)out = n;
            u32 entries[5] = {0, BP_HEADER, (u32)flags_end, (u32)starts_end, (u32)total_bytes};
            for (int i = 0; i < 5; i++) put32(out, 8 + 4 * i, entries[i]);
            for (int i = 28; i < BP_HEADER; i += 4) put32(out, i, 0);
        }
    }
    if (total_bytes > capacity) return;
    if (lane == 0) put32(out, flags_end + 4 * c, (u32)offsets[c]);
    // All 32 rows in flight first (memory-level parallelism), then the transposes.
    u32 words[32];
#pragma unroll
    for (int r = 0; r < 32; r++) words[r] = bp_word(codes, n, c * 1024 + 32 * r + lane);
    u32 rank;
    u32 mine = bp_plane_flags((const u32*)(out + BP_HEADER) + BP_FLAG_WORDS * c, lane, &rank);
    u8* stream = out + starts_end + 4 * offsets[c];
#pragma unroll
    for (int g = 0; g < 8; g++) {
        u32 block[4];
#pragma unroll
        for (int j = 0; j < 4; j++) block[j] = warp_transpose(words[4 * g + j], lane);
        if ((mine >> g) & 1u) {
            for (int j = 0; j < 4; j++) put32(stream, 16 * rank + 4 * j, block[j]);
            rank++;
        }
    }
}

// Inverse. The lengths were checked on the host (cpu.rs layout); the metadata is checked here,
// as cpu.rs check does: chunk 0 compares the header, every chunk that its blocks lie in the
// `stream_words` of the bitstream (a chunk that does not decodes as zeros), and `words_sum`
// collects the kept words for bp_check_total. Failures set `bad`. Lane p gathers plane p's
// kept blocks, then each row is transposed back into 32 words.
extern "C" __global__ void __launch_bounds__(BP_THREADS)
bp_decode(const u8* archive, u64 n, u64 nchunks, u64 stream_words, unsigned short* codes, u64* words_sum, u32* bad) {
    const u64 c = ((u64)blockIdx.x * BP_THREADS + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (c >= nchunks) return;  // whole warps
    u64 flags_end = BP_HEADER + 4 * BP_FLAG_WORDS * nchunks, starts_end = flags_end + 4 * nchunks;
    if (c == 0) {
        u32 entries[7] = {(u32)n, (u32)(n >> 32), 0, BP_HEADER, (u32)flags_end, (u32)starts_end,
                          (u32)(starts_end + 4 * stream_words)};
        u32 expected = lane < 7 ? entries[lane] : 0u;
        if (__any_sync(FULL_MASK, ((const u32*)archive)[lane] != expected) && lane == 0) atomicOr(bad, 1u);
    }
    u64 start = ((const u32*)(archive + flags_end))[c];
    u32 rank;
    u32 mine = bp_plane_flags((const u32*)(archive + BP_HEADER) + BP_FLAG_WORDS * c, lane, &rank);
    u64 kept_words = 4 * (u64)__shfl_sync(FULL_MASK, rank + __popc(mine), 31);
    if (lane == 0) atomicAdd(words_sum, kept_words);
    if (start + kept_words > stream_words) {
        if (lane == 0) atomicOr(bad, 1u);
        mine = 0;
    }
    const u32* stream = (const u32*)(archive + starts_end) + start;
    u32 blocks[32];
#pragma unroll
    for (int g = 0; g < 8; g++) {
        bool set = (mine >> g) & 1u;
#pragma unroll
        for (int j = 0; j < 4; j++) blocks[4 * g + j] = set ? stream[4 * rank + j] : 0u;
        rank += set;
    }
#pragma unroll
    for (int r = 0; r < 32; r++) {
        u32 w = warp_transpose(blocks[r], lane);
        u64 wi = c * 1024 + 32 * r + lane;
        if (2 * wi + 1 < n) {
            ((u32*)codes)[wi] = w;
        } else if (2 * wi < n) {
            codes[2 * wi] = (unsigned short)w;
        }
    }
}

// After bp_decode: the chunks' kept words fill the bitstream exactly.
extern "C" __global__ void bp_check_total(const u64* words_sum, u64 stream_words, u32* bad) {
    if (*words_sum != stream_words) atomicOr(bad, 1u);
}
