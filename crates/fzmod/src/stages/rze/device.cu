// RZE on the device: one thread block per chunk (chunks <= 65535 bytes, so every bitmap
// fits in shared memory). Bit ranks come from a block scan over runs of consecutive bits (a
// warp scan for the decoder's two small upper levels), so kept bytes and words land in index
// order exactly as cpu.rs writes them.

#define RZE_THREADS 256
// Bitmap bytes of a 65535-byte chunk: B0 <= 8192, B1 <= 1024, B2 <= 128, B3 <= 16.
#define RZE_MAP_BYTES (8192 + 1024 + 128 + 16)
// Encoded chunks up to this many bytes (PFPL's 16 KiB) are assembled in shared memory and then
// copied out by consecutive threads: each thread of the rank walks writes a run of consecutive
// bytes, which straight to global memory would be 32 scattered byte stores per warp
// instruction. The decoder writes straight to its output: with byte words a lane stores 8
// consecutive bytes, coalesced (wider words, rare, pay scattered stores for the occupancy).
#define RZE_STAGE 16384

// The decoder reads each encoded chunk into shared memory first (fz_block_copy), so that its
// rank walks read runs of consecutive bytes from there. (Staging the encoder's input too was
// measured slower: 130 against 117 us per call on etopo5; the third 16 KiB costs occupancy.)

struct Maps {
    u32 len[4];  // bytes of B0..B3
    u8* at[4];   // where they live in shared memory
};

// The bitmaps of a chunk of `words` words in `shared`, laid out for B0 of at most `b0` bytes
// (8192 for any chunk; 2048 for a 16 KiB one: RZE_WARP_MAPS bytes in all).
__device__ __forceinline__ Maps rze_maps(u8* shared, u32 words, u32 b0 = 8192) {
    Maps m;
    m.len[0] = (words + 7) / 8;
    for (int l = 1; l < 4; l++) m.len[l] = (m.len[l - 1] + 7) / 8;
    m.at[0] = shared;
    m.at[1] = shared + b0;
    m.at[2] = m.at[1] + b0 / 8;
    m.at[3] = m.at[2] + b0 / 64;
    return m;
}
// Bitmap bytes of a 16 KiB chunk (2048 + 256 + 32 + 4), rounded to 16.
#define RZE_WARP_MAPS 2352

// Bits [first, first + B) of `map` below `hi` (B = 8 or 32, first a multiple of B and below
// hi): one load (maps are 4-byte aligned and readable up to their length rounded up to 4).
template <int B>
__device__ __forceinline__ u32 map_bits(const u8* map, u32 first, u32 hi) {
    u32 w = B == 32 ? *(const u32*)(map + first / 8) : map[first / 8];
    return hi - first >= B ? w : w & ((1u << (hi - first)) - 1);
}

// Visit bits [0, items[l]) of N bitmaps maps[l], B = 8 or 32 at a time: g(l, first, bits,
// rank) for the bits [first, first + B) of map l (those at and beyond items[l] cleared), rank
// = set bits of map l before `first`. Each warp takes a contiguous share of every map and
// walks it 32·B bits per round, lane k on the round's k-th B bits (a warp scan of their
// popcounts ranks them); one block scan ranks the warps' shares of all N maps (a map has
// fewer than 2^16 bits, so the N counts share a u64 in 16-bit fields). Map l is walked only
// when ok(l, its set bits) holds. Returns the set bits of map l in bits 16l.. Every thread of
// the block must call it. B = 8 keeps a lane's stores next to its neighbours' where each bit
// stands for a byte of output (the decoder); B = 32 takes a quarter of the rounds.
template <int N, int B, typename Ok, typename G>
__device__ __forceinline__ u64 rank_walk_maps(const u8* const* maps, const u32* items, Ok ok, G g) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    u32 lo[N], hi[N];
    u64 local = 0;
#pragma unroll
    for (int l = 0; l < N; l++) {
        u32 per = ((items[l] + warps - 1) / warps + 32 * B - 1) / (32 * B) * (32 * B);
        lo[l] = min(items[l], warp * per), hi[l] = min(items[l], lo[l] + per);
        u32 count = 0;
        for (u32 first = lo[l] + B * lane; first < hi[l]; first += 32 * B) count += __popc(map_bits<B>(maps[l], first, hi[l]));
        local += (u64)count << (16 * l);
    }
    for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(FULL_MASK, local, o);
    u64 totals;
    u64 ranks = __shfl_sync(FULL_MASK, block_exclusive_scan(lane == 0 ? local : 0ull, &totals), 0);
#pragma unroll
    for (int l = 0; l < N; l++) {
        if (!ok(l, (u32)(totals >> (16 * l)) & 0xffffu)) continue;
        u32 rank = (u32)(ranks >> (16 * l)) & 0xffffu;
        for (u32 base = lo[l]; base < hi[l]; base += 32 * B) {
            u32 first = base + B * lane;
            u32 bits = first < hi[l] ? map_bits<B>(maps[l], first, hi[l]) : 0u;
            u32 count = __popc(bits), inclusive = count;
            inclusive = warp_inclusive_scan(inclusive, lane);
            if (first < hi[l]) g(l, first, bits, rank + inclusive - count);
            rank += __shfl_sync(FULL_MASK, inclusive, 31);
        }
    }
    return totals;
}

// rank_walk_maps of one map, a byte at a time: g(first, bits, rank) for the bits
// [first, first + 8) below `items`; walked only when ok(set bits); returns the set bits.
template <typename Ok, typename G>
__device__ __forceinline__ u32 rank_walk_bytes(const u8* map, u32 items, Ok ok, G g) {
    auto byte = [&](int, u32 first, u32 bits, u32 r) { g(first, bits, r); };
    return (u32)rank_walk_maps<1, 8>(&map, &items, [&](int, u32 total) { return ok(total); }, byte);
}

// Visit bits [0, items) of `map`: f(i, set, rank), rank = set bits before i; walked only when
// ok(set bits); returns the set bits.
template <typename Ok, typename F>
__device__ __forceinline__ u32 rank_walk(const u8* map, u32 items, Ok ok, F f) {
    return rank_walk_bytes(map, items, ok, [&](u32 first, u32 bits, u32 r) {
        for (u32 j = 0; j < 8 && first + j < items; j++) {
            u32 set = bits >> j & 1u;
            f(first + j, set, r);
            r += set;
        }
    });
}

// Bit j set where byte j of x is nonzero. Each half's nonzero bytes get their high bit from a
// carry-free add; the low half's flags shifted to bits 8k and the high half's to 8k + 4 are
// gathered into bits 24.. by one multiply: 0x01020408 moves bit 8k (and 8k + 4) up by 24 - 7k
// to 24 + k (28 + k), and every other product bit lands on a distinct place below 24 or past
// 31, so no carry reaches the result.
__device__ __forceinline__ u32 nonzero_bytes(u64 x) {
    const u32 lo = (u32)x, hi = (u32)(x >> 32);
    const u32 t_lo = (((lo & 0x7f7f7f7fu) + 0x7f7f7f7fu) | lo) & 0x80808080u;
    const u32 t_hi = (((hi & 0x7f7f7f7fu) + 0x7f7f7f7fu) | hi) & 0x80808080u;
    return ((t_lo >> 7 | t_hi >> 3) * 0x01020408u) >> 24;
}

// Bytes first, first + step, ... of map B_l (l >= 1): bit j of byte q is set where byte 8q + j
// of B_(l-1) differs from the byte before it (0 before byte 0), eight bytes compared at once
// (B_(l-1) is 8-byte aligned and readable up to its length rounded up to 8; the bits past it
// are cleared). Returns their set bits.
__device__ __forceinline__ u32 rze_level(const Maps& m, int l, u32 first, u32 step) {
    const u8* prev = m.at[l - 1];
    const u32 items = m.len[l - 1];
    u32 count = 0;
    for (u32 q = first; q < m.len[l]; q += step) {
        const u64 x = *(const u64*)(prev + 8 * q);
        const u64 before = x << 8 | (q ? prev[8 * q - 1] : 0u);
        u32 v = nonzero_bytes(x ^ before);
        if (items - 8 * q < 8) v &= (1u << (items - 8 * q)) - 1;
        m.at[l][q] = (u8)v;
        count += __popc(v);
    }
    return count;
}

// Build B0..B3 of one chunk in shared memory; returns its encoded size (cpu.rs encode_chunk).
// Three barriers: B0 by the block, B1 by the block, B2 and B3 (at most 128 and 16 bytes) by
// warp 0, the four maps' bit counts summed in shared memory (a sum: the order of the adds
// does not matter). Calls must be separated by a barrier (`counted` is reused).
__device__ u32 rze_build(const u8* src, u32 len, u32 word, const Maps& m, u32* pops) {
    __shared__ u64 counted;  // set bits of map l in bits 16l.. (a map has < 2^16 bits)
    if (threadIdx.x == 0) counted = 0;
    u32 words = len / word;
    bool wide = word == 1 && ((u64)src & 7) == 0;
    u64 local = 0;  // this thread's share of `counted`
    for (u32 q = threadIdx.x; q < m.len[0]; q += blockDim.x) {
        u32 v = 0;
        if (wide && 8 * q + 8 <= words) {
            v = nonzero_bytes(*(const u64*)(src + 8 * q));  // eight byte-words at once
        } else {
            for (u32 j = 0; j < 8; j++) {
                u32 i = 8 * q + j;
                if (i >= words) break;
                u32 nonzero = 0;
                for (u32 b = 0; b < word; b++) nonzero |= src[i * word + b];
                if (nonzero) v |= 1u << j;
            }
        }
        m.at[0][q] = (u8)v;
        local += __popc(v);
    }
    __syncthreads();
    local += (u64)rze_level(m, 1, threadIdx.x, blockDim.x) << 16;
    __syncthreads();
    if (threadIdx.x < 32) {
        local += (u64)rze_level(m, 2, threadIdx.x, 32) << 32;
        __syncwarp();
        local += (u64)rze_level(m, 3, threadIdx.x, 32) << 48;
    }
    for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(FULL_MASK, local, o);
    if ((threadIdx.x & 31) == 0) atomicAdd((unsigned long long*)&counted, (unsigned long long)local);
    __syncthreads();
    const u64 total = counted;
    for (int l = 0; l < 4; l++) pops[l] = (u32)(total >> (16 * l)) & 0xffffu;
    return m.len[3] + pops[3] + pops[2] + pops[1] + pops[0] * word + len % word;
}

// Chunks are placed by the decoupled look-back of common.cu (fz_look_back): each chunk is
// built once, and where it lands depends only on the sizes before it: the bytes are cpu.rs's.

// Write the encoded chunk (maps built by rze_build, `size` from it) to `w`, which may be shared
// or global memory.
__device__ __forceinline__ void rze_emit(const u8* src, u32 len, u32 word, const Maps& m, const u32* pops, u8* w) {
    for (u32 i = threadIdx.x; i < m.len[3]; i += blockDim.x) w[i] = m.at[3][i];
    // Map l + 1 selects the kept bytes of map l, B0 the kept words; the four walk at once
    // (where each one's bytes go follows from the bit counts).
    const u8* maps[4] = {m.at[3], m.at[2], m.at[1], m.at[0]};
    const u32 items[4] = {m.len[2], m.len[1], m.len[0], len / word};
    u32 at[4];
    at[0] = m.len[3];
    for (int l = 1; l < 4; l++) at[l] = at[l - 1] + pops[4 - l];
    rank_walk_maps<4, 32>(maps, items, [](int, u32) { return true; }, [&](int l, u32 first, u32 bits, u32 r) {
        for (; bits; bits &= bits - 1, r++) {
            u32 i = first + __ffs(bits) - 1;
            if (l < 3) {
                w[at[l] + r] = m.at[2 - l][i];
            } else {
                for (u32 b = 0; b < word; b++) w[at[3] + r * word + b] = src[i * word + b];
            }
        }
    });
    u32 pos = at[3] + pops[0] * word;
    for (u32 t = threadIdx.x; t < len % word; t += blockDim.x) w[pos + t] = src[len / word * word + t];
}

// Chunk c's entry of the size table.
__device__ __forceinline__ void rze_table_entry(u8* seg, u64 c, u32 size) {
    seg[2 * c] = (u8)size;
    seg[2 * c + 1] = (u8)(size >> 8);
}

// The size table (2 bytes per chunk) and every chunk, raw when encoding would not shrink it, at
// 2·nchunks + the sizes of the chunks before it; *out_len gets the segment's length. `state`
// holds a ticket counter and one word per chunk, zeroed before the launch. Nothing is written
// past `capacity`.
extern "C" __global__ void __launch_bounds__(RZE_THREADS)
rze_encode(const u8* in, u64 n, u64 chunk, u32 word, u64 nchunks, u64* state, u8* out, u64 capacity, u64* out_len) {
    __shared__ __align__(16) u8 shared[RZE_MAP_BYTES];
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
        if (threadIdx.x == 0 && c > 0) chunks[c] = FZ_AGGREGATE | size;
        if (threadIdx.x < 32) {
            u64 before = fz_look_back(chunks, c);
            if (threadIdx.x == 0) {
                chunks[c] = FZ_INCLUSIVE | (before + size);
                offset = before;
                if (c == nchunks - 1) *out_len = 2 * nchunks + before + size;
            }
        }
        __syncthreads();
        if (2 * nchunks + offset + size <= capacity) {
            if (threadIdx.x == 0) rze_table_entry(out, c, size);
            u8* dst = out + 2 * nchunks + offset;
            if (raw) {
                fz_block_copy(dst, src, len);
            } else if (size <= RZE_STAGE) {
                rze_emit(src, len, word, m, pops, stage);
                __syncthreads();
                fz_block_copy(dst, stage, size);
            } else {
                rze_emit(src, len, word, m, pops, dst);
            }
        }
        __syncthreads();
    }
}

// Bits at and beyond `valid` of a bitmap must be zero (only its last byte can hold them).
__device__ __forceinline__ bool padding_ok(const u8* map, u32 bytes, u32 valid) {
    return valid % 8 == 0 || bytes == 0 || (map[bytes - 1] >> (valid % 8)) == 0;
}

#define RZE_BAD 0xffffffffu

// B3 -> B2 -> B1 of a chunk's decode by one warp (B3 read from `enc`; B2 and B1 hold at most
// 128 and 1024 bytes). Byte k of map l - 1 is the next kept byte where bit k of map l is set,
// else a repeat of the one before. Returns where B0's kept bytes start in `enc`, or RZE_BAD
// when a map's padding or its kept bytes disagree with `size`.
__device__ u32 rze_expand_upper_warp(const u8* enc, u32 size, const Maps& m, u32 lane) {
    for (u32 i = lane; i < m.len[3]; i += 32) m.at[3][i] = enc[i];
    __syncwarp();
    u32 pos = m.len[3];
    for (int l = 3; l > 1; l--) {
        const u32 items = m.len[l - 1];
        u32 count = 0;
        for (u32 first = 8 * lane; first < items; first += 256) count += __popc(map_bits<8>(m.at[l], first, items));
        for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(FULL_MASK, count, o);
        if (!padding_ok(m.at[l], m.len[l], items) || count > size - pos) return RZE_BAD;
        u8* below = m.at[l - 1];
        u32 rank = 0;
        for (u32 base = 0; base < items; base += 256) {
            const u32 first = base + 8 * lane;
            const u32 bits = first < items ? map_bits<8>(m.at[l], first, items) : 0u;
            u32 inclusive = __popc(bits);
            inclusive = warp_inclusive_scan(inclusive, lane);
            u32 r = rank + inclusive - __popc(bits);
            for (u32 j = 0; j < 8 && first + j < items; j++) {
                const u32 set = bits >> j & 1u;
                below[first + j] = set ? enc[pos + r] : r ? enc[pos + r - 1] : 0;
                r += set;
            }
            rank += __shfl_sync(FULL_MASK, inclusive, 31);
        }
        __syncwarp();
        pos += count;
    }
    return pos;
}

// The same for a whole block: warp 0 expands (a block walk of so few bits is mostly its
// barriers). Every thread of the block must call it.
__device__ u32 rze_expand_upper(const u8* enc, u32 size, const Maps& m) {
    __shared__ u32 upper;
    if (threadIdx.x < 32) {
        u32 pos = rze_expand_upper_warp(enc, size, m, threadIdx.x);
        if (threadIdx.x == 0) upper = pos;
    }
    __syncthreads();
    return upper;
}

// Bytes [at, at + n) (1 <= n <= 8, all below `end`) in the low bytes of a u64, read as the
// aligned words that hold them where the last of those words ends by `end`, else byte by
// byte (the bytes after the n are whatever those words hold). The first word may start up
// to 3 bytes before `at`: callers read inside a buffer that begins on a word boundary.
__device__ __forceinline__ u64 bytes8(const u8* at, u32 n, const u8* end) {
    if (((u64)(at + n - 1) | 3) >= (u64)end) {
        u64 v = 0;
        for (u32 k = 0; k < n; k++) v |= (u64)at[k] << (8 * k);
        return v;
    }
    const u32 off = (u32)(u64)at & 3;
    const u32* w = (const u32*)(at - off);
    const u32 a = w[0], b = off + n > 4 ? w[1] : 0u, c = off + n > 8 ? w[2] : 0u;
    const u32 lo = __funnelshift_r(a, b, 8 * off), hi = __funnelshift_r(b, c, 8 * off);
    return (u64)hi << 32 | lo;
}

// A decoder's group of 8 bytes from the kept bytes at `from` (bit j of `bits` set: byte j is
// the next kept byte; every kept byte lies below `end`). An unset byte is 0, or with REPEAT
// the kept byte before it (0 at the start of the stream: `first`). By byte permutes of a pool
// whose byte 0 is the byte before `from` (the repeat, or 0) and bytes 1.. the kept ones: byte
// j takes pool byte (set bits up to j), its inclusive prefix count, or 0 where unset and not
// repeated. The kept bytes are read once, as words, instead of one byte load per set bit.
template <bool REPEAT>
__device__ __forceinline__ u64 expand_group(const u8* from, u32 bits, bool first, const u8* end) {
    if (bits == 0xffu) return bytes8(from, 8, end);
    u64 pool;
    if (REPEAT) {
        pool = bytes8(from - 1, __popc(bits) + 1, end);
        if (first) pool &= ~0xffull;
    } else {
        // Pool byte 0 is always 0 here: a group without kept bytes reads nothing.
        if (bits == 0) return 0;
        pool = bytes8(from, __popc(bits), end) << 8;
    }
    const u32 x = fz_bits_to_nibbles(bits), upto = x * 0x11111111u;
    const u32 sel = REPEAT ? upto : upto & x * 15u;
    const u32 lo = (u32)pool, hi = (u32)(pool >> 32);
    return (u64)__byte_perm(lo, hi, sel >> 16) << 32 | __byte_perm(lo, hi, sel & 0xffffu);
}

// Store the group `v` of 8 bytes at dst + first (8-byte aligned) where all of them lie below
// `items`, else its bytes below `items`.
__device__ __forceinline__ void store_group(u8* dst, u32 first, u32 items, u64 v) {
    if (first + 8 <= items) {
        *(u64*)(dst + first) = v;
    } else {
        for (u32 j = 0; first + j < items; j++) dst[first + j] = (u8)(v >> (8 * j));
    }
}

// Decode one chunk of `size` encoded bytes at `enc` into `len` bytes at `dst` (shared or global
// memory); false when its bitmaps and payload disagree. `input` is a shared-memory staging
// buffer of RZE_STAGE bytes, `shared` RZE_MAP_BYTES for the bitmaps.
__device__ bool rze_decode_chunk(const u8* enc, u32 size, u32 len, u32 word, u8* shared, u8* input, u8* dst) {
    u32 words = len / word;
    Maps m = rze_maps(shared, words);
    if (size == len) {
        fz_block_copy(dst, enc, len);
        return true;
    }
    if (size <= RZE_STAGE) {
        fz_block_copy(input, enc, size);
        __syncthreads();
        enc = input;
    }
    if (size < m.len[3]) return false;
    u32 pos = rze_expand_upper(enc, size, m);
    if (pos == RZE_BAD) return false;
    // B1 -> B0 (up to 8192 bytes) by the whole block, 8 bytes per lane.
    if (!padding_ok(m.at[1], m.len[1], m.len[0])) return false;
    const u8* end = enc + size;
    auto fits = [&](u32 count) { return count <= size - pos; };
    u32 expanded = rank_walk_bytes(m.at[1], m.len[0], fits, [&](u32 first, u32 bits, u32 r) {
        store_group(m.at[0], first, m.len[0], expand_group<true>(enc + pos + r, bits, r == 0, end));
    });
    if (!fits(expanded)) return false;
    __syncthreads();
    pos += expanded;
    if (!padding_ok(m.at[0], m.len[0], words)) return false;
    auto exact = [&](u32 count) { return pos + count * word + len % word == size; };
    u32 count;
    if (word == 1 && ((u64)dst & 7) == 0) {
        // Byte words: a lane's eight bytes in one 8-byte store.
        count = rank_walk_bytes(m.at[0], words, exact, [&](u32 first, u32 bits, u32 r) {
            store_group(dst, first, words, expand_group<false>(enc + pos + r, bits, true, end));
        });
    } else {
        count = rank_walk(m.at[0], words, exact, [&](u32 i, u32 set, u32 rank) {
            for (u32 b = 0; b < word; b++) dst[i * word + b] = set ? enc[pos + rank * word + b] : 0;
        });
    }
    if (!exact(count)) return false;
    pos += count * word;
    for (u32 t = threadIdx.x; t < len % word; t += blockDim.x) dst[words * word + t] = enc[pos + t];
    return true;
}

// Inverse: chunk c's payload starts at `starts[c]` (the table was validated on the host);
// any inconsistency inside a chunk sets *err and leaves that chunk. Chunks decode straight into
// `out`: without a shared-memory stage for the decoded chunk a block takes 26 KB, and eight
// blocks of 32 registers fill an SM (the walks wait on shared memory and barriers: more
// blocks hide more of that).
extern "C" __global__ void __launch_bounds__(RZE_THREADS, 8)
rze_decode(const u8* seg, const u64* starts, u64 n, u64 chunk, u32 word, u64 nchunks, u8* out, u32* err) {
    __shared__ __align__(16) u8 shared[RZE_MAP_BYTES];
    __shared__ __align__(16) u8 input[RZE_STAGE];
    for (u64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
        u32 size = (u32)seg[2 * c] | (u32)seg[2 * c + 1] << 8;
        u32 len = (u32)min(chunk, n - c * chunk);
        if (!rze_decode_chunk(seg + starts[c], size, len, word, shared, input, out + c * chunk) && threadIdx.x == 0) {
            atomicOr(err, 1u);
        }
        __syncthreads();
    }
}

// ---- A warp per chunk (chunks of at most RZE_STAGE bytes) ----

// Visit bits [0, items) of `map` (4-byte aligned, readable up to its length rounded up to 4)
// by the warp in rounds of 1024: each lane takes 32 bits, one warp scan ranks them, and then
// the round's 128 bytes of bits go out in four steps, lane k on byte 32s + k, so that
// neighbouring lanes handle neighbouring bytes (and their outputs coalesce): g(first, bits,
// rank) for the bits [first, first + 8), rank = set bits before `first`. A scan per 32 bits
// instead of per 8 takes a quarter of the shuffles. The walk stops before a round that would
// take the set bits past `limit` (so that no g reads past what the caller allows) and returns
// that count, above `limit`; else it returns the map's set bits.
// With SPARSE, g is called only for bytes with set bits, and rounds without any are skipped
// (an encoder's emit; a decoder writes the zeros of the others).
template <bool SPARSE = false, typename G>
__device__ __forceinline__ u32 warp_walk_bytes(const u8* map, u32 items, u32 limit, u32 lane, G g) {
    u32 rank = 0;
    for (u32 base = 0; base < items; base += 1024) {
        const u32 first32 = base + 32 * lane;
        const u32 word = first32 < items ? map_bits<32>(map, first32, items) : 0u;
        const u32 inclusive = warp_inclusive_scan((u32)__popc(word), lane);
        const u32 total = rank + __shfl_sync(FULL_MASK, inclusive, 31);
        if (total > limit) return total;
        if (SPARSE && total == rank) continue;
        const u32 before = rank + inclusive - __popc(word);
#pragma unroll
        for (u32 s = 0; s < 4; s++) {
            const u32 owner = 8 * s + lane / 4, shift = 8 * (lane % 4);
            const u32 bits = __shfl_sync(FULL_MASK, word, owner);
            const u32 r = __shfl_sync(FULL_MASK, before, owner) + __popc(bits & ((1u << shift) - 1));
            const u32 first = base + 256 * s + 8 * lane;
            const u32 own = bits >> shift & 0xffu;
            if (first < items && (!SPARSE || own)) g(first, own, r);
        }
        rank = total;
    }
    return rank;
}

// Copy `len` bytes by one warp, 8-byte stores where `dst` is aligned, the source read by the
// words that hold it (bytes8: no read past src + len).
__device__ void warp_copy(u8* dst, const u8* src, u32 len, u32 lane) {
    const u32 head = min(len, (u32)(0u - (u32)(u64)dst) & 7u), body = (len - head) / 8 * 8;
    for (u32 i = lane; i < head; i += 32) dst[i] = src[i];
    for (u32 i = head + 8 * lane; i < head + body; i += 256) *(u64*)(dst + i) = bytes8(src + i, 8, src + len);
    for (u32 i = head + body + lane; i < len; i += 32) dst[i] = src[i];
}

// rze_decode_chunk by one warp, its bitmaps in `maps` (RZE_WARP_MAPS bytes), the chunk read
// where it lies (its kept bytes by the words that hold them, which may reach into the next
// chunk: only memory before `readable` is read, so that the chunk's last groups need not read
// byte by byte).
__device__ bool rze_decode_chunk_warp(const u8* enc, u32 size, u32 len, u32 word, u8* maps, u8* dst, u32 lane, const u8* readable) {
    const u32 words = len / word;
    if (size == len) {
        warp_copy(dst, enc, len, lane);
        return true;
    }
    Maps m = rze_maps(maps, words, 2048);
    if (size < m.len[3]) return false;
    u32 pos = rze_expand_upper_warp(enc, size, m, lane);
    if (pos == RZE_BAD || !padding_ok(m.at[1], m.len[1], m.len[0])) return false;
    // No count pass first: each walk stops before it would read past the kept bytes there are.
    u32 count = warp_walk_bytes(m.at[1], m.len[0], size - pos, lane, [&](u32 first, u32 bits, u32 r) {
        store_group(m.at[0], first, m.len[0], expand_group<true>(enc + pos + r, bits, r == 0, readable));
    });
    if (count > size - pos) return false;
    __syncwarp();
    pos += count;
    if (!padding_ok(m.at[0], m.len[0], words) || size - pos < len % word) return false;
    const u32 kept = (size - pos - len % word) / word;
    if (word == 1 && ((u64)dst & 7) == 0) {
        count = warp_walk_bytes(m.at[0], words, kept, lane, [&](u32 first, u32 bits, u32 r) {
            store_group(dst, first, words, expand_group<false>(enc + pos + r, bits, true, readable));
        });
    } else {
        count = warp_walk_bytes(m.at[0], words, kept, lane, [&](u32 first, u32 bits, u32 r) {
            for (u32 j = 0; j < 8 && first + j < words; j++) {
                const u32 set = bits >> j & 1u;
                for (u32 b = 0; b < word; b++) dst[(first + j) * word + b] = set ? enc[pos + r * word + b] : 0;
                r += set;
            }
        });
    }
    if (pos + count * word + len % word != size) return false;
    pos += count * word;
    for (u32 t = lane; t < len % word; t += 32) dst[words * word + t] = enc[pos + t];
    return true;
}

// The inverse with a warp per chunk, for chunks of at most RZE_STAGE bytes (PFPL's 16 KiB):
// no block barriers, and 2.3 KB of shared memory per chunk in flight instead of 26 KB (the
// block decoder's chunk spends a third of its cycles waiting at barriers). Same contract as
// rze_decode.
extern "C" __global__ void __launch_bounds__(RZE_THREADS)
rze_decode_warps(const u8* seg, const u64* starts, u64 n, u64 chunk, u32 word, u64 nchunks, u8* out, u32* err) {
    __shared__ __align__(16) u8 maps[RZE_THREADS / 32][RZE_WARP_MAPS];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (nchunks == 0) return;
    const u64 last = nchunks - 1;
    const u8* payload_end = seg + starts[last] + ((u32)seg[2 * last] | (u32)seg[2 * last + 1] << 8);
    for (u64 c = (u64)blockIdx.x * (RZE_THREADS / 32) + warp; c < nchunks; c += (u64)gridDim.x * (RZE_THREADS / 32)) {
        const u32 size = (u32)seg[2 * c] | (u32)seg[2 * c + 1] << 8;
        const u32 len = (u32)min(chunk, n - c * chunk);
        if (!rze_decode_chunk_warp(seg + starts[c], size, len, word, maps[warp], out + c * chunk, lane, payload_end) && lane == 0) {
            atomicOr(err, 1u);
        }
        __syncwarp();
    }
}

// Build B0..B3 of one chunk (at most RZE_STAGE bytes, read from global memory) by one warp
// into `m` (rze_maps(.., 2048)); pops[l] gets the set bits of map l, and the result is the
// encoded size (rze_build's, without a block barrier).
__device__ u32 rze_build_warp(const u8* src, u32 len, u32 word, const Maps& m, u32* pops, u32 lane) {
    const u32 words = len / word;
    const bool wide = word == 1 && ((u64)src & 7) == 0;
    u32 count = 0;
#pragma unroll 4
    for (u32 q = lane; q < m.len[0]; q += 32) {
        u32 v = 0;
        if (wide && 8 * q + 8 <= words) {
            v = nonzero_bytes(*(const u64*)(src + 8 * q));
        } else {
            for (u32 j = 0; j < 8 && 8 * q + j < words; j++) {
                u32 nonzero = 0;
                for (u32 b = 0; b < word; b++) nonzero |= src[(8 * q + j) * word + b];
                if (nonzero) v |= 1u << j;
            }
        }
        m.at[0][q] = (u8)v;
        count += __popc(v);
    }
    for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(FULL_MASK, count, o);
    pops[0] = count;
    for (int l = 1; l < 4; l++) {
        __syncwarp();
        count = rze_level(m, l, lane, 32);
        for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(FULL_MASK, count, o);
        pops[l] = count;
    }
    __syncwarp();
    return m.len[3] + pops[3] + pops[2] + pops[1] + pops[0] * word + len % word;
}

// Write the chunk encoded by rze_build_warp to `w` (global memory): B3, then the kept bytes
// of B2, B1 and B0 (each selected by the map above it), the kept words, the tail.
__device__ void rze_emit_warp(const u8* src, u32 len, u32 word, const Maps& m, const u32* pops, u8* w, u32 lane) {
    for (u32 i = lane; i < m.len[3]; i += 32) w[i] = m.at[3][i];
    u32 at = m.len[3];
    for (int l = 3; l > 0; l--) {
        const u8* below = m.at[l - 1];
        warp_walk_bytes<true>(m.at[l], m.len[l - 1], ~0u, lane, [&](u32 first, u32 bits, u32 r) {
            for (; bits; bits &= bits - 1, r++) w[at + r] = below[first + __ffs(bits) - 1];
        });
        at += pops[l];
    }
    const u32 words = len / word;
    const bool wide = word == 1 && ((u64)src & 7) == 0;
    warp_walk_bytes<true>(m.at[0], words, ~0u, lane, [&](u32 first, u32 bits, u32 r) {
        u8* to = w + at + r * word;
        if (wide && first + 8 <= words) {
            const u64 v = *(const u64*)(src + first);
            for (; bits; bits &= bits - 1) *to++ = (u8)(v >> (8 * (__ffs(bits) - 1)));
        } else {
            for (; bits; bits &= bits - 1, to += word) {
                const u32 i = first + __ffs(bits) - 1;
                for (u32 b = 0; b < word; b++) to[b] = src[i * word + b];
            }
        }
    });
    at += pops[0] * word;
    for (u32 t = lane; t < len % word; t += 32) w[at + t] = src[words * word + t];
}

// rze_encode with a warp per chunk, for chunks of at most RZE_STAGE bytes: each warp takes a
// ticket, builds its chunk's bitmaps, publishes the size, looks back and writes the chunk
// straight to `out` (no block barriers; 2.3 KB of shared memory per chunk in flight). Same
// contract and bytes as rze_encode.
extern "C" __global__ void __launch_bounds__(RZE_THREADS)
rze_encode_warps(const u8* in, u64 n, u64 chunk, u32 word, u64 nchunks, u64* state, u8* out, u64 capacity, u64* out_len) {
    __shared__ __align__(16) u8 maps[RZE_THREADS / 32][RZE_WARP_MAPS];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    volatile u64* chunks = (volatile u64*)(state + 1);
    for (;;) {
        u64 c = 0;
        if (lane == 0) c = atomicAdd((unsigned long long*)state, 1ull);
        c = __shfl_sync(FULL_MASK, c, 0);
        if (c >= nchunks) return;
        const u8* src = in + c * chunk;
        const u32 len = (u32)min(chunk, n - c * chunk);
        Maps m = rze_maps(maps[warp], len / word, 2048);
        u32 pops[4];
        u32 size = rze_build_warp(src, len, word, m, pops, lane);
        const bool raw = size >= len;
        if (raw) size = len;
        if (lane == 0 && c > 0) chunks[c] = FZ_AGGREGATE | size;
        const u64 before = fz_look_back(chunks, c);
        if (lane == 0) {
            chunks[c] = FZ_INCLUSIVE | (before + size);
            if (c == nchunks - 1) *out_len = 2 * nchunks + before + size;
        }
        if (2 * nchunks + before + size <= capacity) {
            if (lane == 0) rze_table_entry(out, c, size);
            u8* dst = out + 2 * nchunks + before;
            if (raw) {
                warp_copy(dst, src, len, lane);
            } else {
                rze_emit_warp(src, len, word, m, pops, dst, lane);
            }
        }
        __syncwarp();
    }
}

// ---- Fragment of a fused region (backend/cuda/region.rs): one chunk per tile ----

// The tile's encoded size, from its bitmaps built in `scratch` (`len` <= RZE_STAGE bytes;
// `len` when encoding would not shrink it: the tile is then stored raw). The bit counts go
// to the scratch beyond the bitmaps for rze_region_emit, which runs after a barrier: the
// region publishes the size before the tile is written, so that later tiles' look-backs
// need not wait for this one's emit.
#define RZE_REGION_POPS RZE_MAP_BYTES
__device__ u32 rze_region_size(const u8* in, u32 len, u32 word, u8* scratch) {
    Maps m = rze_maps(scratch, len / word);
    u32 pops[4];
    u32 size = rze_build(in, len, word, m, pops);
    if (threadIdx.x < 4) ((u32*)(scratch + RZE_REGION_POPS))[threadIdx.x] = pops[threadIdx.x];
    return min(size, len);
}

// Write the tile of `size` bytes (rze_region_size's) into `out`.
__device__ void rze_region_emit(const u8* in, u32 len, u32 word, u8* scratch, u32 size, u8* out) {
    if (size == len) {
        fz_block_copy(out, in, len);
        return;
    }
    Maps m = rze_maps(scratch, len / word);
    const u32* p = (const u32*)(scratch + RZE_REGION_POPS);
    u32 pops[4] = {p[0], p[1], p[2], p[3]};
    rze_emit(in, len, word, m, pops, out);
}

// Decode tile c (its payload at seg + starts[c]) into `out`; `stage` is a second tile buffer.
__device__ bool rze_region_decode(const u8* seg, const u64* starts, u64 c, u32 len, u32 word, u8* scratch, u8* stage, u8* out) {
    u32 size = (u32)seg[2 * c] | (u32)seg[2 * c + 1] << 8;
    return rze_decode_chunk(seg + starts[c], size, len, word, scratch, stage, out);
}
