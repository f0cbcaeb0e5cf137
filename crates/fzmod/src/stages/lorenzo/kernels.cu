// Lorenzo block mode fused between the quantizer and the coder (PRED == 1):
// coder element k = q(k) - q(k - 1), restarting every LBLOCK elements.

#if PRED == 1
// LBLOCK == BLOCK (the host checks), so the delta restarts exactly at lane 0 of register 0 and
// every predecessor is in this warp: element lane + 32 i - 1 is lane - 1 of register i, or
// lane 31 of register i - 1.
template <int N>
__device__ __forceinline__ void block_values(const real (&x)[N], const bool (&valid)[N], int lane, const QParams& p,
                                             i32 (&v)[N], bool (&outlier)[N]) {
    i32 q[N];
    quantize_loaded(x, valid, p, q, outlier);
    for (int i = 0; i < N; i++) {
        i32 prev = __shfl_up_sync(FULL_MASK, q[i], 1);
        i32 wrap = i > 0 ? __shfl_sync(FULL_MASK, q[i > 0 ? i - 1 : 0], 31) : 0;
        if (lane == 0) prev = wrap;
        v[i] = valid[i] ? (i32)((u32)q[i] - (u32)prev) : 0;
    }
}

// Decoding needs LBLOCK == BLOCK: the inverse is an inclusive prefix sum over the coder block,
// elements in the order lane + 32 i.
template <int N>
__device__ __forceinline__ void decode_store(i32 (&v)[N], int lane, u64 blk, const Geometry& g, real step, real* out) {
    u32 carry = 0;
    for (int i = 0; i < N; i++) {
        u32 s = (u32)v[i];
        for (int d = 1; d < 32; d <<= 1) {
            u32 t = __shfl_up_sync(FULL_MASK, s, d);
            if (lane >= d) s += t;
        }
        s += carry;
        carry = __shfl_sync(FULL_MASK, s, 31);
        u64 k = blk * BLOCK + lane + 32 * i;
        if (k < g.ncodes) out[k] = reconstruct((i32)s, step);
    }
}
#endif
