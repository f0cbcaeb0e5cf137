// Quantizer fragments of the fused cuSZp program (the arithmetic is quantizer/device.cu).

// Quantize the values a lane loaded (see load_lane in the coder); invalid elements (padding,
// past the end) get code 0 and are never outliers.
template <int N>
__device__ __forceinline__ void quantize_loaded(const real (&x)[N], const bool (&valid)[N], const QParams& p, i32 (&q)[N],
                                                bool (&outlier)[N]) {
    for (int i = 0; i < N; i++) {
        outlier[i] = false;
        q[i] = valid[i] ? quant_code(x[i], p, &outlier[i]) : 0;
    }
}

#if PRED != 2
// Natural element of coder element k (the identity, except past the end).
__device__ __forceinline__ u64 natural_index(u64 k, const Geometry& g) { return k < g.ncodes ? k : NO_INDEX; }
#endif

#if PRED == 0
// Quantizer straight into the coder: coder element k is natural element k.
template <int N>
__device__ __forceinline__ void block_values(const real* data, u64 blk, const Geometry& g, const real (&x)[N],
                                             const bool (&valid)[N], int lane, const QParams& p, i32 (&v)[N],
                                             bool (&outlier)[N]) {
    quantize_loaded(x, valid, p, v, outlier);
}

template <int N>
__device__ __forceinline__ void decode_store(i32 (&v)[N], int lane, u64 blk, const Geometry& g, real step, real* out,
                                             i32* deltas) {
    for (int i = 0; i < N; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        if (k < g.ncodes) out[k] = reconstruct(v[i], step);
    }
}
#endif
