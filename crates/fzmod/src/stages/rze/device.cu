// RZE on the device: one thread block per chunk (chunks <= 65535 bytes, so every bitmap
// fits in shared memory). Bit ranks come from a block scan over runs of consecutive bits, so
// kept bytes and words land in index order exactly as cpu.rs writes them.

#define RZE_THREADS 256
// Bitmap bytes of a 65535-byte chunk: B0 <= 8192, B1 <= 1024, B2 <= 128, B3 <= 16.
#define RZE_MAP_BYTES (8192 + 1024 + 128 + 16)
// Chunks up to this many bytes (PFPL's 16 KiB) are assembled in shared memory and then copied
// out by consecutive threads: each thread of the rank walks writes a run of consecutive bytes,
// which straight to global memory would be 32 scattered byte stores per warp instruction.
#define RZE_STAGE 16384

// The decoder reads each encoded chunk into shared memory first (fz_block_copy), so that its
// rank walks read runs of consecutive bytes from there. (Staging the encoder's input too was
// measured slower: 130 against 117 us per call on etopo5; the third 16 KiB costs occupancy.)

struct Maps {
    u32 len[4];  // bytes of B0..B3
    u8* at[4];   // where they live in shared memory
};

__device__ __forceinline__ Maps rze_maps(u8* shared, u32 words) {
    Maps m;
    m.len[0] = (words + 7) / 8;
    for (int l = 1; l < 4; l++) m.len[l] = (m.len[l - 1] + 7) / 8;
    m.at[0] = shared;
    m.at[1] = shared + 8192;
    m.at[2] = shared + 8192 + 1024;
    m.at[3] = shared + 8192 + 1024 + 128;
    return m;
}

__device__ __forceinline__ u32 map_bit(const u8* map, u32 i) { return map[i >> 3] >> (i & 7) & 1u; }

// Set bits of a bitmap of `bytes` bytes, summed over the block (every thread gets the total).
__device__ __forceinline__ u32 block_popcount(const u8* map, u32 bytes) {
    u32 local = 0;
    for (u32 q = threadIdx.x; q < bytes; q += blockDim.x) local += __popc(map[q]);
    u64 total;
    block_exclusive_scan(local, &total);
    return (u32)total;
}

// Visit bits [0, items) of `map` in runs of consecutive bits per thread: f(i, set, rank), rank
// = set bits before i. Every thread of the block must call it.
template <typename F>
__device__ __forceinline__ void rank_walk(const u8* map, u32 items, F f) {
    u32 per = (items + blockDim.x - 1) / blockDim.x;
    u32 lo = min(items, threadIdx.x * per), hi = min(items, lo + per);
    u32 local = 0;
    for (u32 i = lo; i < hi; i++) local += map_bit(map, i);
    u64 total;
    u32 rank = (u32)block_exclusive_scan(local, &total);
    for (u32 i = lo; i < hi; i++) {
        u32 set = map_bit(map, i);
        f(i, set, rank);
        rank += set;
    }
}

// Build B0..B3 of one chunk in shared memory; returns its encoded size (cpu.rs encode_chunk).
__device__ u32 rze_build(const u8* src, u32 len, u32 word, const Maps& m, u32* pops) {
    u32 words = len / word;
    for (u32 q = threadIdx.x; q < m.len[0]; q += blockDim.x) {
        u32 v = 0;
        for (u32 j = 0; j < 8; j++) {
            u32 i = 8 * q + j;
            if (i >= words) break;
            u32 nonzero = 0;
            for (u32 b = 0; b < word; b++) nonzero |= src[i * word + b];
            if (nonzero) v |= 1u << j;
        }
        m.at[0][q] = (u8)v;
    }
    __syncthreads();
    for (int l = 1; l < 4; l++) {
        const u8* prev = m.at[l - 1];
        for (u32 q = threadIdx.x; q < m.len[l]; q += blockDim.x) {
            u32 v = 0;
            for (u32 j = 0; j < 8; j++) {
                u32 k = 8 * q + j;
                if (k >= m.len[l - 1]) break;
                if (prev[k] != (k ? prev[k - 1] : 0)) v |= 1u << j;
            }
            m.at[l][q] = (u8)v;
        }
        __syncthreads();
    }
    for (int l = 0; l < 4; l++) pops[l] = block_popcount(m.at[l], m.len[l]);
    return m.len[3] + pops[3] + pops[2] + pops[1] + pops[0] * word + len % word;
}

// Chunk placement by a decoupled look-back, so that each chunk is built once: chunks are
// taken in ticket order; a chunk publishes its size (AGGREGATE) as soon as it is built, then
// warp 0 sums its predecessors' published values 32 at a time, back to the nearest one that
// holds its whole prefix (INCLUSIVE), and publishes its own. Every chunk it waits for holds an
// earlier ticket, so it is running or done: no deadlock. Where a chunk lands depends only on
// the sizes before it, never on the schedule: the bytes are cpu.rs's.
#define RZE_AGGREGATE (1ull << 62)
#define RZE_INCLUSIVE (2ull << 62)
#define RZE_VALUE (RZE_AGGREGATE - 1)

// The sum of the sizes of chunks [0, c), by warp 0 of the block (lane 0 gets it).
__device__ __forceinline__ u64 rze_look_back(volatile u64* state, u64 c) {
    int lane = threadIdx.x & 31;
    u64 exclusive = 0;
    for (long long end = (long long)c - 1;; end -= 32) {
        long long k = end - lane;
        u64 v = RZE_INCLUSIVE;  // before chunk 0: an empty prefix
        if (k >= 0)
            do v = state[k];
            while (v >> 62 == 0);
        u32 inclusive = __ballot_sync(FULL_MASK, v >> 62 == 2);
        int stop = inclusive ? __ffs(inclusive) - 1 : 31;
        u64 part = lane <= stop ? v & RZE_VALUE : 0;
        for (int o = 16; o > 0; o >>= 1) part += __shfl_down_sync(FULL_MASK, part, o);
        exclusive += __shfl_sync(FULL_MASK, part, 0);
        if (inclusive) return exclusive;
    }
}

// The size table (2 bytes per chunk) and every chunk, raw when encoding would not shrink it, at
// 2·nchunks + the sizes of the chunks before it; *out_len gets the segment's length. `state`
// holds a ticket counter and one word per chunk, zeroed before the launch. Nothing is written
// past `capacity`.
extern "C" __global__ void __launch_bounds__(RZE_THREADS)
rze_encode(const u8* in, u64 n, u64 chunk, u32 word, u64 nchunks, u64* state, u8* out, u64 capacity, u64* out_len) {
    __shared__ u8 shared[RZE_MAP_BYTES];
    __shared__ __align__(16) u8 stage[RZE_STAGE];
    __shared__ u64 ticket, offset;
    volatile u64* chunks = (volatile u64*)(state + 1);
    for (;;) {
        if (threadIdx.x == 0) ticket = atomicAdd((unsigned long long*)state, 1ull);
        __syncthreads();
        u64 c = ticket;
        if (c >= nchunks) return;
        const u8* src = in + c * chunk;
        u32 len = (u32)min(chunk, n - c * chunk);
        Maps m = rze_maps(shared, len / word);
        u32 pops[4];
        u32 size = rze_build(src, len, word, m, pops);
        bool raw = size >= len;
        if (raw) size = len;
        if (threadIdx.x == 0 && c > 0) chunks[c] = RZE_AGGREGATE | size;
        if (threadIdx.x < 32) {
            u64 before = rze_look_back(chunks, c);
            if (threadIdx.x == 0) {
                chunks[c] = RZE_INCLUSIVE | (before + size);
                offset = before;
                if (c == nchunks - 1) *out_len = 2 * nchunks + before + size;
            }
        }
        __syncthreads();
        if (2 * nchunks + offset + size <= capacity) {
            if (threadIdx.x == 0) {
                out[2 * c] = (u8)size;
                out[2 * c + 1] = (u8)(size >> 8);
            }
            u8* dst = out + 2 * nchunks + offset;
            if (raw) {
                fz_block_copy(dst, src, len);
            } else {
                bool staged = size <= RZE_STAGE;
                u8* w = staged ? stage : dst;
                for (u32 i = threadIdx.x; i < m.len[3]; i += blockDim.x) w[i] = m.at[3][i];
                u32 pos = m.len[3];
                for (int l = 3; l > 0; l--) {
                    const u8* below = m.at[l - 1];
                    rank_walk(m.at[l], m.len[l - 1], [&](u32 k, u32 set, u32 rank) {
                        if (set) w[pos + rank] = below[k];
                    });
                    pos += pops[l];
                }
                rank_walk(m.at[0], len / word, [&](u32 i, u32 set, u32 rank) {
                    if (set)
                        for (u32 b = 0; b < word; b++) w[pos + rank * word + b] = src[i * word + b];
                });
                pos += pops[0] * word;
                for (u32 t = threadIdx.x; t < len % word; t += blockDim.x) w[pos + t] = src[len / word * word + t];
                if (staged) {
                    __syncthreads();
                    fz_block_copy(dst, stage, size);
                }
            }
        }
        __syncthreads();
    }
}

// Bits at and beyond `valid` of a bitmap must be zero (only its last byte can hold them).
__device__ __forceinline__ bool padding_ok(const u8* map, u32 bytes, u32 valid) {
    return valid % 8 == 0 || bytes == 0 || (map[bytes - 1] >> (valid % 8)) == 0;
}

// Inverse: chunk c's payload starts at `starts[c]` (the table was validated on the host);
// any inconsistency inside a chunk sets *err and leaves that chunk.
extern "C" __global__ void __launch_bounds__(RZE_THREADS)
rze_decode(const u8* seg, const u64* starts, u64 n, u64 chunk, u32 word, u64 nchunks, u8* out, u32* err) {
    __shared__ u8 shared[RZE_MAP_BYTES];
    __shared__ __align__(16) u8 stage[RZE_STAGE];
    __shared__ __align__(16) u8 input[RZE_STAGE];
    for (u64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
        const u8* enc = seg + starts[c];
        u32 size = (u32)seg[2 * c] | (u32)seg[2 * c + 1] << 8;
        u32 len = (u32)min(chunk, n - c * chunk), words = len / word;
        u8* dst = out + c * chunk;
        Maps m = rze_maps(shared, words);
        if (size == len) {
            fz_block_copy(dst, enc, len);
        } else {
            if (size <= RZE_STAGE) {
                fz_block_copy(input, enc, size);
                __syncthreads();
                enc = input;
            }
            for (u32 i = threadIdx.x; i < m.len[3]; i += blockDim.x) m.at[3][i] = enc[i];
            __syncthreads();
            u32 pos = m.len[3];
            bool ok = true;
            for (int l = 3; l > 0 && ok; l--) {
                u32 count = block_popcount(m.at[l], m.len[l]);
                ok = padding_ok(m.at[l], m.len[l], m.len[l - 1]) && pos + count <= size;
                if (!ok) break;
                u8* below = m.at[l - 1];
                rank_walk(m.at[l], m.len[l - 1], [&](u32 k, u32 set, u32 rank) {
                    below[k] = set ? enc[pos + rank] : rank ? enc[pos + rank - 1] : 0;
                });
                __syncthreads();
                pos += count;
            }
            u32 count = ok ? block_popcount(m.at[0], m.len[0]) : 0;
            ok = ok && padding_ok(m.at[0], m.len[0], words) && pos + count * word + len % word == size;
            if (!ok) {
                if (threadIdx.x == 0) atomicOr(err, 1u);
            } else {
                bool staged = len <= RZE_STAGE;
                u8* w = staged ? stage : dst;
                rank_walk(m.at[0], words, [&](u32 i, u32 set, u32 rank) {
                    for (u32 b = 0; b < word; b++) w[i * word + b] = set ? enc[pos + rank * word + b] : 0;
                });
                pos += count * word;
                for (u32 t = threadIdx.x; t < len % word; t += blockDim.x) w[words * word + t] = enc[pos + t];
                if (staged) {
                    __syncthreads();
                    fz_block_copy(dst, stage, len);
                }
            }
        }
        __syncthreads();
    }
}
