// Mask on the device (common.cu is compiled in front); MASK_F64 selects double input. Values
// are handled as raw bits, so NaN payloads pass untouched.
//
// Forward, by tiles of MASK_TILE elements (no atomics, so nothing depends on the schedule):
// element i is masked when the predicate holds; a *boundary* is an i where masked(i) differs
// from masked(i - 1) (masked(-1) = false), so run 0 is the unmasked one (possibly empty), run
// r > 0 starts at the r-th boundary, and there are R = boundaries + 1 runs; starts[r] is where
// run r begins (starts[0] = 0, starts[R] = n). A bitmap of the masked elements (one u32 word
// per 32 elements) is written once; every later pass reads it instead of the values, and only
// masked values are read again (exceptions, fills). Per-tile counts are scanned on the host's
// launch geometry (tiles), never over n.
#if MASK_F64
typedef u64 Bits;
typedef double Value;
#define MASK_MAG 0x7fffffffffffffffull
#define MASK_INF 0x7ff0000000000000ull
#define VALUE_BYTES 8
__device__ __forceinline__ Value value_of(Bits b) { return __longlong_as_double((long long)b); }
#else
typedef u32 Bits;
typedef float Value;
#define MASK_MAG 0x7fffffffu
#define MASK_INF 0x7f800000u
#define VALUE_BYTES 4
__device__ __forceinline__ Value value_of(Bits b) { return __uint_as_float(b); }
#endif

#define MASK_INFINITY __longlong_as_double(0x7ff0000000000000ll)

// The least and greatest finite value seen (an empty range: +Inf, -Inf).
struct FiniteRange {
    Value lo = (Value)MASK_INFINITY, hi = -(Value)MASK_INFINITY;
    __device__ __forceinline__ void add(Bits b) {
        if ((b & MASK_INF) != MASK_INF) {
            lo = fmin(lo, value_of(b));
            hi = fmax(hi, value_of(b));
        }
    }
};

// cpu.rs Predicate::masked: flags bit 0 NaN, bit 1 ±Inf, bit 2 the fill's bits.
__device__ __forceinline__ bool masked(Bits v, u32 flags, u64 fill) {
    Bits mag = v & MASK_MAG;
    return ((flags & 1) && mag > MASK_INF) || ((flags & 2) && mag == MASK_INF) || ((flags & 4) && (u64)v == fill);
}

__device__ __forceinline__ u32 varint_len(u64 v) {
    u32 k = 1;
    while (v >= 128) {
        v >>= 7;
        k++;
    }
    return k;
}

// LEB128 as archive::Writer::varint, into out[at..] where it fits below `cap`.
__device__ __forceinline__ void varint_put(u8* out, u64 at, u64 cap, u64 v) {
    if (at + varint_len(v) > cap) return;
    while (v >= 128) {
        out[at++] = (u8)(v | 0x80);
        v >>= 7;
    }
    out[at] = (u8)v;
}

#define MASK_TILE 4096               // elements per tile: 4 warps of 32 words of 32 elements
#define MASK_WORDS (MASK_TILE / 32)  // bitmap words per tile, one per thread of a block

// The bits of bitmap word g that stand for elements below n.
__device__ __forceinline__ u32 valid_bits(u64 g, u64 n) {
    u64 first = 32 * g;
    return first + 32 <= n ? FULL_MASK : first >= n ? 0u : (1u << (n - first)) - 1;
}

// The boundaries among the 32 elements of word g.
__device__ __forceinline__ u32 boundary_bits(const u32* bitmap, u64 g, u64 n) {
    u32 w = bitmap[g], prev = g > 0 ? bitmap[g - 1] >> 31 : 0u;
    return (w ^ ((w << 1) | prev)) & valid_bits(g, n);
}

// The sum of v over the thread block (every thread gets it).
__device__ __forceinline__ u64 block_sum(u64 v) {
    u64 total;
    block_exclusive_scan(v, &total);
    return total;
}

// The passes loop over the tiles a block at a time: passes 2 to 4 and the undo on
// tile_loop_grid's few blocks (most tiles of a real field hold no masked element, and such a
// tile costs a loop iteration, not a block launch), pass 1 on up to 16384 (device.rs).
#define FOR_EACH_TILE(tile, ntiles) for (u64 tile = blockIdx.x; tile < (ntiles); tile += gridDim.x)

// The bitmap words of the warp's 1024 elements from `base` (lane l gets word l), the values
// copied unless `values` is null, and the unmasked finite ones added to r.
__device__ __forceinline__ u32 mask_words(const Bits* x, u64 n, u64 base, u32 flags, u64 fill, Bits* values, FiniteRange& r) {
    int lane = threadIdx.x & 31;
    u32 mine = 0;
#if !MASK_F64
    if (base + 1024 <= n && ((u64)x | (u64)values) % 16 == 0) {
        // 16-byte loads: load k of lane l holds elements 128 k + 4 l .. + 3, so word 4 k + m
        // (this lane's when lane = 4 k + m) takes four bits from each of lanes 8 m .. 8 m + 7.
        // All eight loads first: a copy's store could alias a later load as far as the
        // compiler knows, which would serialise them.
        const uint4* in = (const uint4*)(x + base);
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = in[32 * k + lane];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (values) ((uint4*)(values + base))[32 * k + lane] = v[k];
            u32 e[4] = {v[k].x, v[k].y, v[k].z, v[k].w}, word = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                bool m = masked(e[j], flags, fill);
                word |= fz_bits_to_nibbles(__ballot_sync(FULL_MASK, m) >> (8 * (lane & 3)) & 0xffu) << j;
                if (!m) r.add(e[j]);
            }
            if (lane >> 2 == k) mine = word;
        }
        return mine;
    }
#endif
    // Lane l reads element 32 j + l, and the ballot is word j.
    for (int j = 0; j < 32; j++) {
        u64 i = base + 32 * j + lane;
        Bits v = i < n ? x[i] : 0;
        if (values && i < n) values[i] = v;
        bool m = i < n && masked(v, flags, fill);
        u32 w = __ballot_sync(FULL_MASK, m);
        if (lane == j) mine = w;
        if (i < n && !m) r.add(v);
    }
    return mine;
}

// Pass 1: the bitmap, each tile's boundary count and the range of the unmasked finite values
// (a block's partial minimum at range[block], its maximum at range[parts + block], parts =
// blocks + 1: the range of the filled values, since a fill copies an unmasked value;
// mask_first adds the +0 of an input masked throughout), and the values copied unless `values`
// is null (pass 4 fills the masked ones, in the copy or in x itself: the only pass over all
// elements).
extern "C" __global__ void __launch_bounds__(MASK_WORDS) mask_bitmap(const Bits* x, u64 n, u64 ntiles, u32 flags, u64 fill,
                                                                     u32* bitmap, u32* tile_bounds, Bits* values, double* range) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    FiniteRange r;
    FOR_EACH_TILE(tile, ntiles) {
        u64 base = tile * MASK_TILE + (u64)warp * 1024;
        // The element before the warp's, loaded ahead of the words (its latency overlaps).
        Bits before = lane == 0 && base > 0 && base - 1 < n ? x[base - 1] : 0;
        u32 mine = mask_words(x, n, base, flags, fill, values, r);
        u64 g = tile * MASK_WORDS + threadIdx.x;
        bitmap[g] = mine;
        u32 prev = __shfl_up_sync(FULL_MASK, mine, 1) >> 31;
        if (lane == 0) prev = base > 0 && base - 1 < n && masked(before, flags, fill);
        u64 total = block_sum(__popc((mine ^ ((mine << 1) | prev)) & valid_bits(g, n)));
        if (threadIdx.x == 0) tile_bounds[tile] = (u32)total;
    }
    for (int o = 16; o > 0; o >>= 1) {
        r.lo = fmin(r.lo, __shfl_xor_sync(FULL_MASK, r.lo, o));
        r.hi = fmax(r.hi, __shfl_xor_sync(FULL_MASK, r.hi, o));
    }
    __shared__ Value warp_lo[MASK_WORDS / 32], warp_hi[MASK_WORDS / 32];
    if (lane == 0) {
        warp_lo[warp] = r.lo;
        warp_hi[warp] = r.hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < MASK_WORDS / 32; w++) {
            r.lo = fmin(r.lo, warp_lo[w]);
            r.hi = fmax(r.hi, warp_hi[w]);
        }
        range[blockIdx.x] = (double)r.lo;
        range[gridDim.x + 1 + blockIdx.x] = (double)r.hi;
    }
}

// The run count, the ends of `starts`, and the bits every masked element is restored to: the
// first masked element's (the first boundary's), 0 when none is masked. One warp.
extern "C" __global__ void mask_first(const Bits* x, u64 n, const u32* bitmap, const u64* tile_off, u64 ntiles,
                                      u64* starts, u64 starts_cap, u64* starts_len, u64* runs, u64* restore, double* range,
                                      u64 parts) {
    int lane = threadIdx.x;
    u64 bounds = tile_off[ntiles];
    u64 first = n;
    if (bounds > 0) {
        u64 lo = 0, hi = ntiles - 1;  // the first tile with a boundary
        while (lo < hi) {
            u64 mid = (lo + hi) / 2;
            if (tile_off[mid + 1] > 0) hi = mid;
            else lo = mid + 1;
        }
        for (u64 g0 = lo * MASK_WORDS; first == n; g0 += 32) {
            u32 w = bitmap[g0 + lane];
            u32 any = __ballot_sync(FULL_MASK, w != 0);
            if (any) {
                int at = __ffs(any) - 1;
                u32 word = __shfl_sync(FULL_MASK, w, at);
                first = 32 * (g0 + at) + __ffs(word) - 1;
            }
        }
    }
    if (lane == 0) {
        // The last partial range (after the tiles' own): +0 when the fills are all +0.
        bool everything = n > 0 && bounds == 1 && first == 0;
        range[parts - 1] = everything ? 0.0 : MASK_INFINITY;
        range[2 * parts - 1] = everything ? 0.0 : -MASK_INFINITY;
        *runs = bounds + 1;
        *starts_len = bounds + 2;
        *restore = first < n ? (u64)x[first] : 0;
        if (bounds + 2 <= starts_cap) {
            starts[0] = 0;
            starts[bounds + 1] = n;
        }
    }
}

// The byte size of exception entry i (varint index, raw bits), 0 when i is not one.
__device__ __forceinline__ u32 exception_bytes(const Bits* x, u64 i, u64 restore) {
    return (u64)x[i] != restore ? varint_len(i) + VALUE_BYTES : 0;
}

// Pass 2, a thread per bitmap word: the boundaries into starts[1..R), and each tile's
// exception bytes.
extern "C" __global__ void __launch_bounds__(MASK_WORDS) mask_starts(const Bits* x, u64 n, u64 ntiles, const u32* bitmap,
                                                                     const u64* tile_off, const u64* restore, u64* starts,
                                                                     u64 starts_cap, u32* tile_exceptions) {
    bool room = tile_off[ntiles] + 2 <= starts_cap;
    u64 rest = *restore;
    FOR_EACH_TILE(tile, ntiles) {
        u64 g = tile * MASK_WORDS + threadIdx.x;
        u32 b = boundary_bits(bitmap, g, n), w = bitmap[g];
        if (!__syncthreads_or(b | w)) {  // no run starts here, no exception
            if (threadIdx.x == 0) tile_exceptions[tile] = 0;
            continue;
        }
        u64 total;
        u64 at = 1 + tile_off[tile] + block_exclusive_scan(__popc(b), &total);
        for (; b && room; b &= b - 1) starts[at++] = 32 * g + __ffs(b) - 1;
        u64 bytes = 0;
        for (; w; w &= w - 1) bytes += exception_bytes(x, 32 * g + __ffs(w) - 1, rest);
        bytes = block_sum(bytes);
        if (threadIdx.x == 0) tile_exceptions[tile] = (u32)bytes;
    }
}

// The varint bytes of the runs that start in word g: run 0 (tile 0's first word), then one
// per boundary, `first_run` being the index of the word's first boundary's run.
__device__ __forceinline__ u32 run_bytes(const u64* starts, u64 g, u32 b, u64 first_run) {
    u32 bytes = g == 0 ? varint_len(starts[1]) : 0;
    for (u64 r = first_run; b; b &= b - 1, r++) bytes += varint_len(starts[r + 1] - starts[r]);
    return bytes;
}

// Pass 3: each tile's run bytes (starts is complete now).
extern "C" __global__ void __launch_bounds__(MASK_WORDS) mask_run_bytes(u64 n, u64 ntiles, const u32* bitmap, const u64* tile_off,
                                                                        const u64* starts, u64 starts_cap, u32* tile_runs) {
    bool overflowed = tile_off[ntiles] + 2 > starts_cap;  // then the run is repeated
    FOR_EACH_TILE(tile, ntiles) {
        u64 g = tile * MASK_WORDS + threadIdx.x;
        u32 b = boundary_bits(bitmap, g, n);
        // Without a boundary, only tile 0 has bytes: run 0's length.
        if (overflowed || !__syncthreads_or(b)) {
            if (threadIdx.x == 0) tile_runs[tile] = overflowed || tile > 0 ? 0 : varint_len(starts[1]);
            continue;
        }
        u64 total;
        u64 first_run = 1 + tile_off[tile] + block_exclusive_scan(__popc(b), &total);
        u64 bytes = block_sum(run_bytes(starts, g, b, first_run));
        if (threadIdx.x == 0) tile_runs[tile] = (u32)bytes;
    }
}

// Whether the starts and the segment had room: only then are the masked values filled (a run
// that overflowed is repeated, and the fills written into x itself must be undone exactly).
__device__ __forceinline__ bool mask_fits(const u64* tile_off, u64 ntiles, u64 starts_cap, const u64* run_off,
                                          const u64* exc_off, u64 cap) {
    return tile_off[ntiles] + 2 <= starts_cap && run_off[ntiles] + exc_off[ntiles] <= cap;
}

// Pass 4: the segment (run varints, then exceptions; nothing past `cap`) and the fills of the
// masked values (a masked run takes the value before it, or the one after it when it leads, or
// +0 when it is everything). First a thread per word (segment), then the warps over the masked
// elements. `values` may be x itself: a fill reads only unmasked elements, and a masked
// element is read (as an exception) only by its own tile, before the barrier.
extern "C" __global__ void __launch_bounds__(MASK_WORDS) mask_write(const Bits* x, u64 n, u64 ntiles, const u32* bitmap,
                                                                    const u64* tile_off, const u64* starts, u64 starts_cap,
                                                                    const u64* run_off, const u64* exc_off, const u64* restore,
                                                                    Bits* values, u8* seg, u64 cap, u64* seg_len) {
    __shared__ u32 s_word[MASK_WORDS], s_bounds[MASK_WORDS];
    __shared__ u64 s_before[MASK_WORDS];
    if (tile_off[ntiles] + 2 > starts_cap) {
        // The starts overflowed, so the run is repeated: ask for room for any segment of these
        // runs and exceptions, so that the repeat does not overflow in turn.
        if (blockIdx.x == 0 && threadIdx.x == 0) *seg_len = (tile_off[ntiles] + 1) * varint_len(n) + exc_off[ntiles];
        return;
    }
    bool fits = mask_fits(tile_off, ntiles, starts_cap, run_off, exc_off, cap);
    u64 rest = *restore;
    FOR_EACH_TILE(tile, ntiles) {
        u64 g = tile * MASK_WORDS + threadIdx.x;
        u32 b = boundary_bits(bitmap, g, n), w = bitmap[g];
        // A tile with neither a boundary nor a masked element writes nothing (tile 0 always
        // writes the first run's length and the segment's). The barrier also keeps the
        // previous tile's readers of the shared words ahead of this tile's writers.
        if (!__syncthreads_or(b | w) && tile > 0) continue;
        u64 total;
        u64 before = block_exclusive_scan(__popc(b), &total);
        s_word[threadIdx.x] = w;
        s_bounds[threadIdx.x] = b;
        s_before[threadIdx.x] = tile_off[tile] + before;
        u64 first_run = 1 + tile_off[tile] + before;
        u64 at = run_off[tile] + block_exclusive_scan(run_bytes(starts, g, b, first_run), &total);
        if (g == 0) {
            varint_put(seg, at, cap, starts[1]);
            at += varint_len(starts[1]);
        }
        for (u64 r = first_run; b; b &= b - 1, r++) {
            u64 len = starts[r + 1] - starts[r];
            varint_put(seg, at, cap, len);
            at += varint_len(len);
        }
        u64 bytes = 0;
        for (u32 m = w; m; m &= m - 1) bytes += exception_bytes(x, 32 * g + __ffs(m) - 1, rest);
        at = run_off[ntiles] + exc_off[tile] + block_exclusive_scan(bytes, &total);
        for (u32 m = w; m; m &= m - 1) {
            u64 i = 32 * g + __ffs(m) - 1;
            u64 v = (u64)x[i];
            if (v == rest) continue;
            if (at + varint_len(i) + VALUE_BYTES <= cap) {
                varint_put(seg, at, cap, i);
                for (int k = 0; k < VALUE_BYTES; k++) seg[at + varint_len(i) + k] = (u8)(v >> (8 * k));
            }
            at += varint_len(i) + VALUE_BYTES;
        }
        if (g == 0) *seg_len = run_off[ntiles] + exc_off[ntiles];
        __syncthreads();
        if (!fits) continue;
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        for (int j = 0; j < 32; j++) {
            int k = warp * 32 + j;  // the block's word of these 32 elements
            u64 i = tile * MASK_TILE + 32 * (u64)k + lane;
            if (i >= n) break;
            if (!(s_word[k] >> lane & 1)) continue;
            // Element i lies in run r = the boundaries up to and including it.
            u64 r = s_before[k] + __popc(s_bounds[k] & ((2u << lane) - 1));
            u64 s = starts[r], e = starts[r + 1];
            values[i] = s > 0 ? x[s - 1] : e < n ? x[e] : (Bits)0;
        }
    }
}

// Undo pass 4's fills written into x itself (the pipeline input a job owns, at the end of its
// walk), tile by tile: every masked element gets the restore bits back, then the tile's
// exceptions (index varint, raw bits; in index order) their own, read back from the segment.
extern "C" __global__ void __launch_bounds__(MASK_WORDS) mask_unfill(Bits* x, u64 n, u64 ntiles, const u32* bitmap,
                                                                     const u64* tile_off, u64 starts_cap, const u64* run_off,
                                                                     const u64* exc_off, const u64* restore, const u8* seg,
                                                                     u64 cap) {
    if (!mask_fits(tile_off, ntiles, starts_cap, run_off, exc_off, cap)) return;
    Bits rest = (Bits)*restore;
    FOR_EACH_TILE(tile, ntiles) {
        u64 g = tile * MASK_WORDS + threadIdx.x;
        u32 w = bitmap[g];
        if (!__syncthreads_or(w)) continue;
        for (u32 m = w; m; m &= m - 1) x[32 * g + __ffs(m) - 1] = rest;
        __syncthreads();
        if (threadIdx.x != 0) continue;
        for (u64 at = run_off[ntiles] + exc_off[tile], end = run_off[ntiles] + exc_off[tile + 1]; at < end;) {
            u64 i = 0;
            u8 b;
            int shift = 0;
            do {  // the varint pass 4 wrote (LEB128)
                b = seg[at++];
                i |= (u64)(b & 0x7f) << shift;
                shift += 7;
            } while (b & 0x80);
            Bits v = 0;
            for (int k = 0; k < VALUE_BYTES; k++) v |= (Bits)seg[at + k] << (8 * k);
            at += VALUE_BYTES;
            x[i] = v;
        }
    }
}

// Inverse: element i is masked when it lies in one of the `count` masked runs [mstart, mend)
// (sorted, disjoint; validated on the host), found by binary search.
extern "C" __global__ void mask_restore(const Bits* values, u64 n, const u64* mstart, const u64* mend, u64 count,
                                        u64 restore, Bits* out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 lo = 0, hi = count;  // the first run starting after i is at `lo`
    while (lo < hi) {
        u64 mid = (lo + hi) / 2;
        if (mstart[mid] <= i) lo = mid + 1;
        else hi = mid;
    }
    out[i] = lo > 0 && i < mend[lo - 1] ? (Bits)restore : values[i];
}

// Inverse in place: the `total` masked elements, k-th at run r = the last with first[r] <= k
// (first = the masked elements before each run), get the restore value; unmasked ones are
// neither read nor written.
extern "C" __global__ void mask_fill_runs(const u64* mstart, const u64* first, u64 count, u64 total, u64 restore,
                                          Bits* out) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= total) return;
    u64 lo = 0, hi = count;  // the first run whose first element is after k is at `lo`
    while (lo < hi) {
        u64 mid = (lo + hi) / 2;
        if (first[mid] <= k) lo = mid + 1;
        else hi = mid;
    }
    out[mstart[lo - 1] + (k - first[lo - 1])] = (Bits)restore;
}

extern "C" __global__ void mask_scatter(const u64* index, const u64* bits, u64 count, Bits* out) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count) out[index[k]] = (Bits)bits[k];
}
