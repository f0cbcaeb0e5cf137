// Lorenzo block mode fused between the quantizer and the coder (PRED == 1):
// coder element k = q(k) - q(k - 1), restarting every LBLOCK elements.

#if PRED == 1
__device__ __forceinline__ i32 coder_value(const real* data, u64 k, const Geometry& g, real step, real recip,
                                           double abs_bound, bool* outlier, u64* natural) {
    *natural = k;
    i32 q = quant_code(data[k], step, recip, abs_bound, outlier);
    if (k % LBLOCK == 0) return q;
    bool unused;
    return (i32)((u32)q - (u32)quant_code(data[k - 1], step, recip, abs_bound, &unused));
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
