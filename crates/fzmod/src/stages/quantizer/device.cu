// Quantizer on the device: the exact arithmetic of cpu.rs. REAL_F64 selects double input.
// The first part (arithmetic, value range, bound resolution, outlier scatter) is shared with
// the fused cuSZp program (stages/cuszp_fusion), which includes this file; the standalone
// stage kernels follow.

// Quantizer step resolved on the device (or uploaded for decoding).
struct Params {
    double abs_bound;
    double step;    // half bin width, a value of the element type
    double recip;   // 0.5 / step in the element type
    double accept;  // f32 fast path: |x - x'| computed in f32 <= accept  =>  within the bound
    double reject;  // f32 fast path: |x - x'| computed in f32 >= reject  =>  outside (NaN: never)
};

static_assert(sizeof(Params) == 40, "Params: PARAMS_BYTES in quantizer/device.rs and cuszp_fusion/mod.rs");

#if REAL_F64
typedef double real;
__device__ __forceinline__ bool is_finite_real(real x) { return ((__double_as_longlong(x) >> 52) & 0x7ff) != 0x7ff; }
__device__ __forceinline__ i32 trunc_to_i32(real d) { return __double2int_rz(d); }
__device__ __forceinline__ u64 real_bits(real x) { return (u64)__double_as_longlong(x); }
__device__ __forceinline__ real bits_real(u64 b) { return __longlong_as_double((i64)b); }
#else
typedef float real;
__device__ __forceinline__ bool is_finite_real(real x) { return ((__float_as_uint(x) >> 23) & 0xff) != 0xff; }
__device__ __forceinline__ i32 trunc_to_i32(real d) { return __float2int_rz(d); }
__device__ __forceinline__ u64 real_bits(real x) { return (u64)__float_as_uint(x); }
__device__ __forceinline__ real bits_real(u64 b) { return __uint_as_float((u32)b); }
#endif

// cuSZp rounding: trunc(d + 0.5) (saturating, NaN -> 0), one lower when !(d >= -0.5).
__device__ __forceinline__ i32 quantize(real x, real recip) {
    real d = x * recip;
    i32 t = trunc_to_i32(d + (real)0.5);
    if (!(d >= (real)-0.5)) t = (i32)((u32)t - 1u);
    return t;
}

__device__ __forceinline__ real reconstruct(i32 q, real step) { return ((real)q * step) * (real)2; }

// The quantizer's parameters in registers.
struct QParams {
    real step, recip;
    double abs_bound;
    float accept, reject;
};

__device__ __forceinline__ QParams load_params(const Params* p) {
    QParams q;
    q.step = (real)p->step;
    q.recip = (real)p->recip;
    q.abs_bound = p->abs_bound;
    q.accept = (float)p->accept;
    q.reject = (float)p->reject;
    return q;
}

// The code of x, or 0 with *outlier set when x must go to the outlier channel. The bound
// check is the CPU's f64 test |x - x'| <= b; for f32 a rounded f32 difference decides it when
// it is clearly inside [accept] or outside [reject] (margins of 2^-20 relative), exactly as
// the f64 test would, and the f64 test runs only in between.
//
// A finite value whose rounded code misses sits within rounding error of a bin edge: the
// neighbouring code on its side is tried under the exact f64 test (cpu.rs Float::bin).
//
// The common case (inside the bound, which also says x is finite) is inlined; everything
// else is one out-of-line call, so kernels that quantize many elements per thread stay small
// enough for the instruction cache. It returns the code in the low 32 bits and the outlier
// flag in bit 32 (a pointer to the caller's flag would put that flag in local memory).
__device__ __noinline__ u64 quant_code_rare(real x, i32 q, real r, QParams p) {
#if REAL_F64
    bool ok = fabs(x - r) <= p.abs_bound;
#else
    float e = fabsf(x - r);
    bool ok = e <= p.accept || (!(e >= p.reject) && fabs((double)x - (double)r) <= p.abs_bound);
#endif
    if (!is_finite_real(x)) return 1ull << 32;
    if (!ok) {
        bool below = (double)x < (double)r;
        if (q != (below ? (i32)0x80000000 : (i32)0x7fffffff)) {
            i32 n = below ? q - 1 : q + 1;
            ok = fabs((double)x - (double)reconstruct(n, p.step)) <= p.abs_bound;
            q = n;
        }
    }
    return ok ? (u64)(u32)q : 1ull << 32;
}

__device__ __forceinline__ i32 quant_code(real x, const QParams& p, bool* outlier) {
    i32 q = quantize(x, p.recip);
    real r = reconstruct(q, p.step);
#if REAL_F64
    const bool inside = fabs(x - r) <= p.abs_bound;
#else
    const bool inside = fabsf(x - r) <= p.accept;
#endif
    if (inside) {
        *outlier = false;
        return q;
    }
    u64 rare = quant_code_rare(x, q, r, p);
    *outlier = rare >> 32;
    return (i32)(u32)rare;
}

#define MINMAX_THREADS 256

// Per-thread-block min and max of the finite values (order-independent, hence exact).
extern "C" __global__ void __launch_bounds__(MINMAX_THREADS) fz_minmax(const real* x, u64 n, double* pmin, double* pmax) {
    double lo = __longlong_as_double(0x7ff0000000000000ll), hi = -lo;
    u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;
    // 16-byte loads for the bulk, scalar loads for the tail. A caller's device array (CuPy,
    // PyTorch) need only be aligned for its element type: then every load is scalar.
    const u64 per = 16 / sizeof(real);
    const uint4* vec = (const uint4*)x;
    const u64 vectors = (u64)x % 16 == 0 ? n / per : 0;
    for (u64 i = start; i < vectors; i += stride) {
        uint4 w = vec[i];
        const real* e = (const real*)&w;
        for (int j = 0; j < (int)per; j++) {
            if (is_finite_real(e[j])) {
                lo = fmin(lo, (double)e[j]);
                hi = fmax(hi, (double)e[j]);
            }
        }
    }
    for (u64 i = vectors * per + start; i < n; i += stride) {
        if (is_finite_real(x[i])) {
            lo = fmin(lo, (double)x[i]);
            hi = fmax(hi, (double)x[i]);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        lo = fmin(lo, __shfl_xor_sync(FULL_MASK, lo, o));
        hi = fmax(hi, __shfl_xor_sync(FULL_MASK, hi, o));
    }
    __shared__ double slo[MINMAX_THREADS / 32], shi[MINMAX_THREADS / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { slo[warp] = lo; shi[warp] = hi; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < MINMAX_THREADS / 32; w++) { lo = fmin(lo, slo[w]); hi = fmax(hi, shi[w]); }
        pmin[blockIdx.x] = lo;
        pmax[blockIdx.x] = hi;
    }
}

// Largest element-type value <= v (v >= 0), saturating at the type's maximum.
__device__ real at_most(double v) {
#if REAL_F64
    return v > 1.7976931348623157e308 ? 1.7976931348623157e308 : v;
#else
    float c = (float)v;
    if (c > 3.40282347e38f) c = 3.40282347e38f;
    if ((double)c > v) c = nextafterf(c, 0.0f);
    return c;
#endif
}

#define RESOLVE_THREADS 1024

// One thread block (whole warps, up to RESOLVE_THREADS): combine the partial ranges and
// resolve the bound (rel: value x range). Minima and maxima are exact in any order.
extern "C" __global__ void __launch_bounds__(RESOLVE_THREADS)
fz_resolve(const double* pmin, const double* pmax, u32 nparts, u32 relative, double value, Params* out) {
    double lo = __longlong_as_double(0x7ff0000000000000ll), hi = -lo;
    for (u32 i = threadIdx.x; i < nparts; i += blockDim.x) { lo = fmin(lo, pmin[i]); hi = fmax(hi, pmax[i]); }
    for (int o = 16; o > 0; o >>= 1) {
        lo = fmin(lo, __shfl_xor_sync(FULL_MASK, lo, o));
        hi = fmax(hi, __shfl_xor_sync(FULL_MASK, hi, o));
    }
    __shared__ double warp_lo[RESOLVE_THREADS / 32], warp_hi[RESOLVE_THREADS / 32];
    if ((threadIdx.x & 31) == 0) {
        warp_lo[threadIdx.x >> 5] = lo;
        warp_hi[threadIdx.x >> 5] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < blockDim.x / 32; w++) {
            lo = fmin(lo, warp_lo[w]);
            hi = fmax(hi, warp_hi[w]);
        }
        // As resolve_abs_bound (quantizer/mod.rs): when max - min overflows (f64 inputs
        // spanning more than DBL_MAX) scale each end first; products kept unfused to match.
        // Both ends are finite, so hi - lo is finite or +inf.
        double range = lo <= hi ? hi - lo : 0.0;
        bool overflow = range == __longlong_as_double(0x7ff0000000000000ll);
        double abs_bound = !relative ? value
                         : overflow ? __dsub_rn(__dmul_rn(value, hi), __dmul_rn(value, lo))
                         : __dmul_rn(value, range);
        real step = at_most(abs_bound);
        real recip = (real)0.5 / step;
        out->abs_bound = abs_bound;
        out->step = (double)step;
        out->recip = (double)recip;
        // Margins for the f32 fast path of quant_code (rounded outwards).
        double lo_margin = abs_bound * (1.0 - 0x1p-20), hi_margin = abs_bound * (1.0 + 0x1p-20);
        float accept = (float)lo_margin, reject = (float)hi_margin;
        if ((double)accept > lo_margin) accept = nextafterf(accept, 0.0f);
        if ((double)reject < hi_margin) reject = nextafterf(reject, __int_as_float(0x7f800000));
        if (reject > 3.40282347e38f) reject = __int_as_float(0x7fc00000);  // no fast reject
        out->accept = (double)accept;
        out->reject = (double)reject;
    }
}

// Decoding: put the outliers back, bit for bit.
extern "C" __global__ void fz_scatter_outliers(const u64* index, const u64* bits, u64 count, real* out) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count) out[index[k]] = bits_real(bits[k]);
}

// Decoding an outlier channel (channel.rs): `runs` holds `count` (start, len, bits) triples,
// parsed and checked on the host. A warp per run, its lanes along the run, so a long run (a
// masked region) is as parallel as many short ones.
extern "C" __global__ void fz_scatter_runs(const u64* runs, u64 count, real* out) {
    u64 warps = ((u64)gridDim.x * blockDim.x) >> 5, lane = threadIdx.x & 31;
    for (u64 k = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; k < count; k += warps) {
        u64 start = runs[3 * k], len = runs[3 * k + 1];
        real v = bits_real(runs[3 * k + 2]);
        for (u64 i = lane; i < len; i += 32) out[start + i] = v;
    }
}


// ---- Standalone stage kernels (quantizer/device.rs) ----
// Forward: q_encode writes the codes and counts each tile's outliers; the outlier channel is
// then written as an outlier list (below), read again only in tiles that have outliers.

#define Q_TILE 2048
#define Q_THREADS 256
// Each thread of a tile walk owns this many consecutive elements (Q_TILE = 256 × 8).
#define QI_RUN (Q_TILE / Q_THREADS)

// A tile's list statistics from its Q_THREADS threads' own: the sum of their entry counts
// into *tile_count and the greatest (last entry index) + 1 into *tile_next, by thread 0.
__device__ void q_tile_summary(u32 count, u64 next, u32* tile_count, u64* tile_next) {
    u64 total;
    block_exclusive_scan(count, &total);
    __shared__ u64 block_next[Q_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) next = max(next, __shfl_xor_sync(FULL_MASK, next, o));
    if ((threadIdx.x & 31) == 0) block_next[threadIdx.x >> 5] = next;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < Q_THREADS / 32; w++) next = max(next, block_next[w]);
        *tile_count = (u32)total;
        *tile_next = next;
    }
    __syncthreads();  // block_next is the next tile's
}

// The codes of one tile of `len` elements (x and codes point at its start, `base` is its
// first index): thread 0 gets the tile's outlier count and (last outlier index) + 1, or 0.
__device__ void q_code_tile(const real* x, u32 len, u64 base, const QParams& p, i32* codes, u32* tile_count, u64* tile_next) {
    u32 count = 0;
    u64 next = 0;
    for (u32 i = threadIdx.x; i < len; i += Q_THREADS) {
        bool outlier;
        i32 code = quant_code(x[i], p, &outlier);
        codes[i] = code;
        if (outlier) {
            count++;
            next = base + i + 1;
        }
    }
    q_tile_summary(count, next, tile_count, tile_next);
}

// Codes and per-tile outlier counts; tile_next[t] = (last outlier index in tile t) + 1, or 0.
extern "C" __global__ void __launch_bounds__(Q_THREADS)
q_encode(const real* x, u64 n, const Params* params, i32* codes, u32* tile_count, u64* tile_next) {
    u64 base = (u64)blockIdx.x * Q_TILE;
    u32 len = (u32)min((u64)Q_TILE, n - base);
    q_code_tile(x + base, len, base, load_params(params), codes + base, tile_count + blockIdx.x, tile_next + blockIdx.x);
}

// Exclusive max-scan of one value per thread across the block, starting from `carry`.
__device__ u64 block_exclusive_max(u64 v, u64 carry) {
    __shared__ u64 warp_max[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 incl = v;
    for (int d = 1; d < 32; d <<= 1) {
        u64 t = __shfl_up_sync(FULL_MASK, incl, d);
        if (lane >= d) incl = max(incl, t);
    }
    if (lane == 31) warp_max[warp] = incl;
    __syncthreads();
    u64 before = carry;
    for (int w = 0; w < warp; w++) before = max(before, warp_max[w]);
    u64 up = __shfl_up_sync(FULL_MASK, incl, 1);
    if (lane > 0) before = max(before, up);
    __syncthreads();
    return before;
}

// Exclusive suffix-min of one value per thread across the block (the minimum over later
// threads), starting from `carry` after the last thread.
__device__ u64 block_exclusive_suffix_min(u64 v, u64 carry) {
    __shared__ u64 warp_min[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 incl = v;
    for (int d = 1; d < 32; d <<= 1) {
        u64 t = __shfl_down_sync(FULL_MASK, incl, d);
        if (lane + d < 32) incl = min(incl, t);
    }
    if (lane == 0) warp_min[warp] = incl;
    __syncthreads();
    u64 after = carry;
    for (int w = warp + 1; w < (int)(blockDim.x >> 5); w++) after = min(after, warp_min[w]);
    u64 down = __shfl_down_sync(FULL_MASK, incl, 1);
    if (lane < 31) after = min(after, down);
    __syncthreads();
    return after;
}

// One thread block of 1024: tile_next becomes an exclusive max-scan (the `next` each tile
// starts from); *num_outliers gets the total count. The counts are summed in coalesced
// strides first: with no outliers nothing reads tile_next, and the block stops there.
// Otherwise each thread takes a contiguous run of tiles: one pass for its maximum, the
// block's max-scan, one pass that writes.
extern "C" __global__ void __launch_bounds__(1024) q_tile_starts(u64* tile_next, const u32* tile_count, u64 ntiles, u64* num_outliers) {
    u64 count = 0, top = 0, total;
    for (u64 t0 = threadIdx.x; t0 < ntiles; t0 += 8 * blockDim.x) {
        u32 c[8];  // eight loads in flight
#pragma unroll
        for (int k = 0; k < 8; k++) c[k] = t0 + k * blockDim.x < ntiles ? tile_count[t0 + k * blockDim.x] : 0;
#pragma unroll
        for (int k = 0; k < 8; k++) count += c[k];
    }
    block_exclusive_scan(count, &total);
    if (threadIdx.x == 0) *num_outliers = total;
    if (total == 0) return;  // the same for every thread
    const u64 per = (ntiles + blockDim.x - 1) / blockDim.x;
    const u64 first = min(ntiles, threadIdx.x * per), last = min(ntiles, first + per);
    for (u64 t = first; t < last; t++) top = max(top, tile_next[t]);
    u64 before = block_exclusive_max(top, 0);
    for (u64 t = first; t < last; t++) {
        u64 next = tile_next[t];
        tile_next[t] = before;
        before = max(before, next);
    }
}

__device__ __forceinline__ u32 varint_len(u64 v) {
    u32 len = 1;
    while (v >= 0x80) {
        v >>= 7;
        len++;
    }
    return len;
}

__device__ __forceinline__ u8* put_varint(u64 v, u8* o) {
    while (v >= 0x80) {
        *o++ = (u8)(v | 0x80);
        v >>= 7;
    }
    *o++ = (u8)v;
    return o;
}

// ---- Outlier lists (channel.rs), shared with LorenzoQuant's two lists ----
// A list source S says whether element i has an entry (has), whether two entries' values are
// bit-identical (same), and writes a value (value_len, put_value). Both layouts are sized,
// the smaller is written (indexed on a tie), all in index order without atomics:
//   1. per tile (Q_TILE elements): entry count, (last entry) + 1 and the first element that
//      does not continue a run (ch_tile_break); q_tile_starts turns the second into an
//      exclusive max-scan (each tile's previous entry), ch_break_scan the third into the first
//      run break after each tile (an exclusive suffix-min);
//   2. ch_list_walk, write = 0: each tile's bytes in both layouts (a block per tile, a thread
//      per QI_RUN consecutive elements; block scans carry the previous entry forwards and the
//      next run break backwards); two exclusive scans give each tile's offsets;
//   3. ch_choose picks the layout; ch_list_walk, write = 1, writes the entries.
// A list without entries (q_tile_starts' total, ListArgs::entries, is 0) only zeroes its
// tile byte counts: its walks, run breaks and break scan return at once.
// A run's entry is written by its first element, which finds the run's end in its own
// elements, else in later threads of the tile, else after the tile.

#define CH_INDEXED 0
#define CH_RUNS 1

// Element i continues the run of element i - 1: both have entries with identical values.
template <typename S>
__device__ __forceinline__ bool ch_continues(const S& s, u64 i) {
    return i > 0 && s.has(i) && s.has(i - 1) && s.same(i, i - 1);
}

// Step 1: the first element of the tile that does not continue a run (~0 when all do; the
// tile's first element when the tile has no entries).
template <typename S>
__device__ void ch_tile_break(const S& s, const u64* entries, u64 n, u64 ntiles, const u32* tile_count, u64* tile_break) {
    if (*entries == 0) return;  // nothing reads tile_break then
    for (u64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        u64 start = tile * Q_TILE;
        if (tile_count[tile] == 0) {  // the whole block
            if (threadIdx.x == 0) tile_break[tile] = start;
            continue;
        }
        u64 first = start + (u64)threadIdx.x * QI_RUN, found = ~0ull;
        for (int j = 0; j < QI_RUN && first + j < n; j++)
            if (!ch_continues(s, first + j)) {
                found = first + j;
                break;
            }
        // Every thread's answer, the smallest first.
        u64 later = block_exclusive_suffix_min(found, ~0ull);
        if (threadIdx.x == 0) tile_break[tile] = min(found, later);
    }
}

// One thread block of 1024: tile_break[t] becomes the first run break after tile t (the
// minimum over the tiles after it), n when there is none; contiguous runs of tiles per thread
// as in q_tile_starts. Nothing to do for a list without entries (*entries, q_tile_starts').
extern "C" __global__ void __launch_bounds__(1024) ch_break_scan(u64* tile_break, u64 ntiles, u64 n, const u64* entries) {
    if (*entries == 0) return;
    const u64 per = (ntiles + blockDim.x - 1) / blockDim.x;
    const u64 first = min(ntiles, threadIdx.x * per), last = min(ntiles, first + per);
    u64 low = ~0ull;
    for (u64 t = first; t < last; t++) low = min(low, tile_break[t]);
    u64 after = block_exclusive_suffix_min(low, n);
    for (u64 t = last; t > first; t--) {
        u64 brk = tile_break[t - 1];
        tile_break[t - 1] = after;
        after = min(after, brk);
    }
}

// Step 2 (write = 0: tile_bytes[layout][tile]) and step 3 (write = 1: the entries of the
// chosen layout, when the whole channel fits the capacity). Blocks loop over tiles
// (tile_loop_grid); tiles without entries are skipped.
template <typename S>
__device__ void ch_list_walk(const S& s, const u64* entries, u64 n, const u32* tile_count, const u64* tile_next,
                             const u64* tile_break, u64 ntiles, u32* bytes_indexed, u32* bytes_runs, const u64* layout_at, const u64* offsets_indexed,
                             const u64* offsets_runs, const u64* base_indexed, const u64* base_runs, const u64* channel_len,
                             u8* out, u64 capacity, u32 write) {
    if (write && *channel_len > capacity) return;
    if (*entries == 0) {  // every tile is empty: no per-tile walk
        for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; !write && t < ntiles; t += (u64)gridDim.x * blockDim.x)
            bytes_indexed[t] = bytes_runs[t] = 0;
        return;
    }
    for (u64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        if (tile_count[tile] == 0) {  // the whole block
            if (!write && threadIdx.x == 0) bytes_indexed[tile] = bytes_runs[tile] = 0;
            continue;
        }
        u64 first = tile * Q_TILE + (u64)threadIdx.x * QI_RUN, stop = min(n, first + QI_RUN);
        u64 last = 0, brk = ~0ull;
        for (u64 i = first; i < stop; i++) {
            if (s.has(i)) last = i + 1;
            if (brk == ~0ull && !ch_continues(s, i)) brk = i;
        }
        if (first >= n) brk = n;
        u64 next = block_exclusive_max(last, tile_next[tile]);
        u64 later = block_exclusive_suffix_min(brk, tile_break[tile]);
        // The end of a run that starts at i: the next element that does not continue it.
        auto run_end = [&](u64 i) {
            for (u64 j = i + 1; j < stop; j++)
                if (!ch_continues(s, j)) return j;
            return later;
        };
        u64 sizes[2] = {0, 0};
        for (u64 i = first, prev = next; i < stop; i++) {
            if (!s.has(i)) continue;
            sizes[CH_INDEXED] += varint_len(i - prev) + s.value_len(i);
            if (!ch_continues(s, i)) {
                u64 len = run_end(i) - i;
                bool repeat = prev > 0 && s.same(i, prev - 1);
                u64 head = (i - prev) << 2 | (len >= 2 ? 2u : 0u) | (repeat ? 1u : 0u);
                sizes[CH_RUNS] += varint_len(head) + (len >= 2 ? varint_len(len - 2) : 0) + (repeat ? 0 : s.value_len(i));
            }
            prev = i + 1;
        }
        u64 total[2];
        u64 at[2] = {block_exclusive_scan(sizes[0], &total[0]), block_exclusive_scan(sizes[1], &total[1])};
        if (!write) {
            if (threadIdx.x == 0) {
                bytes_indexed[tile] = (u32)total[CH_INDEXED];
                bytes_runs[tile] = (u32)total[CH_RUNS];
            }
            continue;
        }
        u32 layout = (u32)*layout_at;
        const u64* offsets = layout == CH_RUNS ? offsets_runs : offsets_indexed;
        const u64* base = layout == CH_RUNS ? base_runs : base_indexed;
        u8* o = out + (base ? *base : 0) + offsets[tile] + at[layout];
        for (u64 i = first, prev = next; i < stop; i++) {
            if (!s.has(i)) continue;
            if (layout == CH_INDEXED) {
                o = put_varint(i - prev, o);
                o = s.put_value(i, o);
            } else if (!ch_continues(s, i)) {
                u64 len = run_end(i) - i;
                bool repeat = prev > 0 && s.same(i, prev - 1);
                o = put_varint((i - prev) << 2 | (len >= 2 ? 2u : 0u) | (repeat ? 1u : 0u), o);
                if (len >= 2) o = put_varint(len - 2, o);
                if (!repeat) o = s.put_value(i, o);
            }
            prev = i + 1;
        }
    }
}

// Step 3's choice: the run layout when the channel (all lists: `lists` totals per layout at
// totals_indexed[k], totals_runs[k]) is smaller in it. Writes the layout and the channel's
// byte length (slots of the record).
extern "C" __global__ void ch_choose(const u64* indexed_a, const u64* runs_a, const u64* indexed_b, const u64* runs_b, u64* layout, u64* channel_len) {
    u64 indexed = *indexed_a + (indexed_b ? *indexed_b : 0), runs = *runs_a + (runs_b ? *runs_b : 0);
    *layout = runs < indexed ? CH_RUNS : CH_INDEXED;
    *channel_len = runs < indexed ? runs : indexed;
}

// What a list source reads, passed by value (ListArgs in quantizer/device.rs): the
// Quantizer's uses x and params, LorenzoQuant's also the deltas and their `unfit` bits, the
// list and the mapping.
struct ListArgs {
    const real* x;
    const Params* params;
    const u32* unfit;
    const u64* unfit_base;
    const i32* deltas;
    u64 deltas_capacity;
    const u64* entries;  // the list's entry count (q_tile_starts)
    u32 list, mapping, radius, pad;
};
static_assert(sizeof(ListArgs) == 72, "ListArgs: quantizer/device.rs");

// The Quantizer's list: the outliers, raw values.
struct QSource {
    const real* x;
    QParams q;
    __device__ bool has(u64 i) const {
        bool outlier;
        quant_code(x[i], q, &outlier);
        return outlier;
    }
    __device__ bool same(u64 i, u64 j) const { return real_bits(x[i]) == real_bits(x[j]); }
    __device__ u32 value_len(u64) const { return (u32)sizeof(real); }
    __device__ u8* put_value(u64 i, u8* o) const {
        u64 bits = real_bits(x[i]);
        for (int b = 0; b < (int)sizeof(real); b++) *o++ = (u8)(bits >> (8 * b));
        return o;
    }
};

extern "C" __global__ void __launch_bounds__(Q_THREADS) q_tile_break(ListArgs a, u64 n, u64 ntiles, const u32* tile_count, u64* tile_break) {
    QSource s = {a.x, load_params(a.params)};
    ch_tile_break(s, a.entries, n, ntiles, tile_count, tile_break);
}

extern "C" __global__ void __launch_bounds__(Q_THREADS)
q_list_walk(ListArgs a, u64 n, const u32* tile_count, const u64* tile_next, const u64* tile_break, u64 ntiles,
            u32* bytes_indexed, u32* bytes_runs, const u64* layout_at, const u64* offsets_indexed, const u64* offsets_runs,
            const u64* base_indexed, const u64* base_runs, const u64* channel_len, u8* out, u64 capacity, u32 write) {
    QSource s = {a.x, load_params(a.params)};
    ch_list_walk(s, a.entries, n, tile_count, tile_next, tile_break, ntiles, bytes_indexed, bytes_runs, layout_at, offsets_indexed,
                 offsets_runs, base_indexed, base_runs, channel_len, out, capacity, write);
}

// Copy the resolved bound and step into scalar slots for the record.
extern "C" __global__ void q_export(const Params* params, u64* abs_bound, u64* step) {
    *abs_bound = (u64)__double_as_longlong(params->abs_bound);
    *step = (u64)__double_as_longlong(params->step);
}

// Inverse: every code reconstructed; the outliers are scattered afterwards.
extern "C" __global__ void q_decode(const i32* codes, u64 n, double step, real* out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = reconstruct(codes[i], (real)step);
}

// ---- PFPL inline words (cpu.rs: inline_word, quantize_inline, reconstruct_inline) ----
// Words come from the same quant_code as the codes above; escaped values go to the channel in
// index order: per tile a count, a scan of the counts, then each tile writes its escapes at
// its offset, ranked within the tile by a block scan over consecutive runs of elements.

#define QI_ESCAPE 0xffffffffu
#if REAL_F64
#define QI_BIN_WORDS QI_ESCAPE
#else
#define QI_BIN_WORDS (1u << 23)
#endif
__device__ __forceinline__ u32 inline_word(real x, const QParams& p) {
    bool outlier;
    i32 q = quant_code(x, p, &outlier);
    u32 w = ((u32)q << 1) ^ (u32)(q >> 31);
    if (!outlier && w < QI_BIN_WORDS) return w;
#if REAL_F64
    return QI_ESCAPE;
#else
    u32 raw = __float_as_uint(x);
    return raw >= QI_BIN_WORDS && raw != QI_ESCAPE ? raw : QI_ESCAPE;
#endif
}

__device__ __forceinline__ real from_inline_word(u32 w, real step) {
    if (w < QI_BIN_WORDS) return reconstruct((i32)(w >> 1) ^ -(i32)(w & 1u), step);
#if REAL_F64
    return 0.0;
#else
    return __uint_as_float(w);  // escapes are overwritten from the channel
#endif
}

// The inline words of one tile of `len` elements (x and words point at its start); thread 0
// writes the tile's escape count.
__device__ void qi_word_tile(const real* x, u32 len, const QParams& p, u32* words, u32* tile_count) {
    u32 count = 0;
    for (u32 i = threadIdx.x; i < len; i += Q_THREADS) {
        u32 w = inline_word(x[i], p);
        words[i] = w;
        count += w == QI_ESCAPE;
    }
    u64 total;
    block_exclusive_scan(count, &total);
    if (threadIdx.x == 0) *tile_count = (u32)total;
}

// Forward: the words and each tile's escape count.
extern "C" __global__ void __launch_bounds__(Q_THREADS)
qi_encode(const real* x, u64 n, const Params* params, u32* words, u32* tile_count) {
    u64 base = (u64)blockIdx.x * Q_TILE;
    qi_word_tile(x + base, (u32)min((u64)Q_TILE, n - base), load_params(params), words + base, tile_count + blockIdx.x);
}

// The rank of each of this thread's escapes inside the tile, in index order: `emit(i, rank)`.
// `is_escape(i)` is read twice per element, before any `emit`.
template <typename IsEscape, typename Emit>
__device__ __forceinline__ void qi_walk_escapes(u64 n, IsEscape is_escape, Emit emit) {
    u64 first = (u64)blockIdx.x * Q_TILE + (u64)threadIdx.x * QI_RUN;
    u32 count = 0;
    for (int j = 0; j < QI_RUN; j++) count += first + j < n && is_escape(first + j);
    u64 total;
    u64 rank = block_exclusive_scan(count, &total);
    for (int j = 0; j < QI_RUN && count > 0; j++) {
        if (first + j < n && is_escape(first + j)) {
            emit(first + j, rank);
            rank++;
            count--;
        }
    }
}

// Forward: the raw values of the escapes, LE, at offsets[tile] values into the channel;
// nothing is written past `capacity` bytes (the true size is offsets[ntiles] values). The
// escapes are found in `words`, or, where a fused region kept the words on chip (null), by
// quantizing again.
extern "C" __global__ void __launch_bounds__(Q_THREADS)
qi_write_channel(const real* x, const u32* words, const Params* params, u64 n, const u32* tile_count, const u64* offsets, u8* out, u64 capacity) {
    if (tile_count[blockIdx.x] == 0 || offsets[blockIdx.x + 1] * sizeof(real) > capacity) return;
    u64 start = offsets[blockIdx.x];
    QParams p = load_params(params);
    auto is_escape = [&](u64 i) { return (words ? words[i] : inline_word(x[i], p)) == QI_ESCAPE; };
    qi_walk_escapes(n, is_escape, [&](u64 i, u64 rank) {
        u64 bits = real_bits(x[i]);
        u8* o = out + (start + rank) * sizeof(real);
        for (int b = 0; b < (int)sizeof(real); b++) o[b] = (u8)(bits >> (8 * b));
    });
}

// The record's values and the channel's byte length.
extern "C" __global__ void qi_export(const Params* params, const u64* total_at, u64* abs_bound, u64* step, u64* num_outliers, u64* channel_len) {
    *abs_bound = (u64)__double_as_longlong(params->abs_bound);
    *step = (u64)__double_as_longlong(params->step);
    *num_outliers = *total_at;
    *channel_len = *total_at * sizeof(real);
}

// Inverse, step 1: each tile's escape count (scanned, then checked on the host).
extern "C" __global__ void __launch_bounds__(Q_THREADS) qi_count(const u32* words, u64 n, u32* tile_count) {
    u64 base = (u64)blockIdx.x * Q_TILE;
    u32 count = 0;
    for (int j = 0; j < QI_RUN; j++) {
        u64 i = base + (u64)j * Q_THREADS + threadIdx.x;
        count += i < n && words[i] == QI_ESCAPE;
    }
    u64 total;
    block_exclusive_scan(count, &total);
    if (threadIdx.x == 0) tile_count[blockIdx.x] = (u32)total;
}

// An escape's decoded value until the channel overwrites it: all bits set, which no word that
// is not an escape decodes to (bins reconstruct finite values; a raw f32 word is never the
// escape word).
#define QI_SENTINEL (~(u64)0 >> (64 - 8 * sizeof(real)))

// Put one escape's value from the channel (the rank-th) at out[i].
__device__ __forceinline__ void qi_read_escape(const u8* channel, u64 rank, real* at) {
    const u8* c = channel + rank * sizeof(real);
    u64 bits = 0;
    for (int b = 0; b < (int)sizeof(real); b++) bits |= (u64)c[b] << (8 * b);
    *at = bits_real(bits);
}

// Inverse, step 2: every word decoded (consecutive threads on consecutive words); then, only in
// tiles that have escapes, the escapes read the channel at their rank (offsets[] holds
// ntiles + 1 scanned counts).
extern "C" __global__ void __launch_bounds__(Q_THREADS)
qi_decode(const u32* words, u64 n, double step, const u64* offsets, const u8* channel, real* out) {
    u64 base = (u64)blockIdx.x * Q_TILE;
    for (int j = 0; j < QI_RUN; j++) {
        u64 i = base + (u64)j * Q_THREADS + threadIdx.x;
        if (i < n) out[i] = from_inline_word(words[i], (real)step);
    }
    u64 start = offsets[blockIdx.x];
    if (offsets[blockIdx.x + 1] == start) return;
    // Another thread decoded the word an escape overwrites: order the two writes.
    __syncthreads();
    qi_walk_escapes(n, [&](u64 i) { return words[i] == QI_ESCAPE; }, [&](u64 i, u64 rank) { qi_read_escape(channel, start + rank, out + i); });
}

// ---- Fragment of a fused region (backend/cuda/region.rs): whole outlier tiles per tile ----

// The code of element i of x, as a gatherer after the Quantizer reads it (region.rs,
// Fragment::load_code). On the element's own read an outlier counts in its tile's statistics
// (zeroed before the region): sums and maxima, the same whatever the order of the atomics.
__device__ __forceinline__ i32 q_load(const real* x, u64 i, const QParams& p, bool own, u32* tile_count, u64* tile_next) {
    bool outlier;
    i32 code = quant_code(x[i], p, &outlier);
    if (outlier && own) {
        atomicAdd(tile_count + i / Q_TILE, 1u);
        atomicMax((unsigned long long*)tile_next + i / Q_TILE, (unsigned long long)(i + 1));
    }
    return code;
}

// Forward: the codes (or inline words) of `count` elements from x (global memory, the tile's
// first element is `first`) into `out`, and each Q_TILE's outlier statistics.
__device__ void q_region_forward(const real* x, void* out, u64 first, u32 count, const Params* params, u32* tile_count, u64* tile_next, bool inline_words) {
    QParams p = load_params(params);
    u64 t0 = first / Q_TILE;
    for (u32 j = 0; j * Q_TILE < count; j++) {
        u32 len = min((u32)Q_TILE, count - j * Q_TILE);
        const real* xj = x + j * Q_TILE;
        if (inline_words) qi_word_tile(xj, len, p, (u32*)out + j * Q_TILE, tile_count + t0 + j);
        else q_code_tile(xj, len, first + j * Q_TILE, p, (i32*)out + j * Q_TILE, tile_count + t0 + j, tile_next + t0 + j);
    }
}

// Inverse: `count` values into `out` (global memory); inline words leave the sentinel at escapes
// and count them per Q_TILE, for qi_patch_escapes.
__device__ void q_region_inverse(const void* in, real* out, u64 first, u32 count, u64 step_bits, u32* tile_count, bool inline_words) {
    real step = (real)__longlong_as_double((i64)step_bits);
    for (u32 j = 0; j * Q_TILE < count; j++) {
        u32 len = min((u32)Q_TILE, count - j * Q_TILE), escapes = 0;
        for (u32 i = j * Q_TILE + threadIdx.x; i < j * Q_TILE + len; i += Q_THREADS) {
            if (inline_words) {
                u32 w = ((const u32*)in)[i];
                escapes += w == QI_ESCAPE;
                out[i] = w == QI_ESCAPE ? bits_real(QI_SENTINEL) : from_inline_word(w, step);
            } else {
                out[i] = reconstruct(((const i32*)in)[i], step);
            }
        }
        if (inline_words) {
            u64 total;
            block_exclusive_scan(escapes, &total);
            if (threadIdx.x == 0) tile_count[first / Q_TILE + j] = (u32)total;
        }
    }
}

// After the inverse region: the escapes of tiles that have any, from the channel of `values`
// values. A count that differs from the record's raises *err (checked after the run) and no
// value past the channel is read.
extern "C" __global__ void __launch_bounds__(Q_THREADS) qi_patch_escapes(real* out, u64 n, const u64* offsets, u64 ntiles, const u8* channel, u64 values, u32* err) {
    if (offsets[ntiles] != values) {
        if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(err, 1u);
        return;
    }
    u64 start = offsets[blockIdx.x];
    if (offsets[blockIdx.x + 1] == start) return;
    qi_walk_escapes(n, [&](u64 i) { return real_bits(out[i]) == QI_SENTINEL; }, [&](u64 i, u64 rank) { qi_read_escape(channel, start + rank, out + i); });
}
