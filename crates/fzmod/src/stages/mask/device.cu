// Mask on the device (common.cu is compiled in front); MASK_F64 selects double input. Values
// are handled as raw bits, so NaN payloads pass untouched.
//
// Forward, element-wise kernels around two exclusive scans (no atomics, so nothing depends on
// the schedule): b[i] = 1 where a run starts (i > 0 and masked(i) != masked(i-1), or i = 0 and
// x[0] masked: run 0 is always the unmasked one, possibly empty); S = scan(b), so element i lies
// in run S[i+1], which is masked when odd, and there are R = S[n] + 1 runs; starts[r] is where
// run r begins (starts[R] = n). The segment's byte sizes — one varint per run, then one entry
// per exception — are scanned once more into the offsets each thread writes at.

#if MASK_F64
typedef u64 Bits;
#define MASK_MAG 0x7fffffffffffffffull
#define MASK_INF 0x7ff0000000000000ull
#define VALUE_BYTES 8
#else
typedef u32 Bits;
#define MASK_MAG 0x7fffffffu
#define MASK_INF 0x7f800000u
#define VALUE_BYTES 4
#endif

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

// Bits every masked element is restored to: the first masked element's (run 1 starts there).
__device__ __forceinline__ u64 restore_bits(const Bits* x, const u64* S, const u64* starts, u64 n) {
    return S[n] > 0 ? (u64)x[starts[1]] : 0;
}

extern "C" __global__ void mask_bounds(const Bits* x, u64 n, u32 flags, u64 fill, u32* b) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool prev = i > 0 && masked(x[i - 1], flags, fill);
    b[i] = masked(x[i], flags, fill) != prev;
}

extern "C" __global__ void mask_starts(const u64* S, u64 n, u64* starts) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && S[i + 1] != S[i]) starts[S[i + 1]] = i;
    if (i == 0) {
        starts[0] = 0;
        starts[S[n] + 1] = n;
    }
}

// sizes[r] for r <= n: the varint bytes of run r (0 beyond the last run); sizes[n + 1 + i]:
// the bytes of element i's exception entry (varint index, raw bits), 0 if it has none.
extern "C" __global__ void mask_sizes(const Bits* x, u64 n, u32 flags, u64 fill, const u64* S, const u64* starts, u32* sizes) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t <= n) {
        sizes[t] = t <= S[n] ? varint_len(starts[t + 1] - starts[t]) : 0;
    } else if (t < 2 * n + 1) {
        u64 i = t - n - 1;
        bool exception = masked(x[i], flags, fill) && (u64)x[i] != restore_bits(x, S, starts, n);
        sizes[t] = exception ? varint_len(i) + VALUE_BYTES : 0;
    }
}

// The segment (nothing past `cap`) and the filled values: a masked run takes the value before
// it, or the one after it when it leads, or +0 when it is everything.
extern "C" __global__ void mask_write(const Bits* x, u64 n, u32 flags, u64 fill, const u64* S, const u64* starts,
                                      const u64* offsets, Bits* values, u8* seg, u64 cap) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t <= S[n]) varint_put(seg, offsets[t], cap, starts[t + 1] - starts[t]);
    if (t >= n) return;
    Bits v = x[t];
    if (!masked(v, flags, fill)) {
        values[t] = v;
        return;
    }
    u64 r = S[t + 1], s = starts[r], e = starts[r + 1];
    values[t] = s > 0 ? x[s - 1] : e < n ? x[e] : (Bits)0;
    u64 at = offsets[n + 1 + t];
    if (offsets[n + 2 + t] != at && at + varint_len(t) + VALUE_BYTES <= cap) {
        varint_put(seg, at, cap, t);
        at += varint_len(t);
        for (int k = 0; k < VALUE_BYTES; k++) seg[at + k] = (u8)((u64)v >> (8 * k));
    }
}

// The record's values: segment length, run count, restore bits.
extern "C" __global__ void mask_finish(const Bits* x, u64 n, const u64* S, const u64* starts, const u64* offsets,
                                       u64* seg_len, u64* runs, u64* restore) {
    *seg_len = offsets[2 * n + 1];
    *runs = S[n] + 1;
    *restore = restore_bits(x, S, starts, n);
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

extern "C" __global__ void mask_scatter(const u64* index, const u64* bits, u64 count, Bits* out) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count) out[index[k]] = (Bits)bits[k];
}
