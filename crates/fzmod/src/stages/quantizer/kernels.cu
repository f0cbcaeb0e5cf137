// Quantizer on the device: the exact arithmetic of stages/quantizer/cpu.rs.
// REAL_F64 selects double input; otherwise float.

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

// The code of x, or 0 with *outlier set when x must go to the outlier channel.
__device__ __forceinline__ i32 quant_code(real x, real step, real recip, double abs_bound, bool* outlier) {
    i32 q = quantize(x, recip);
    double err = fabs((double)x - (double)reconstruct(q, step));
    bool ok = is_finite_real(x) && err <= abs_bound;
    *outlier = !ok;
    return ok ? q : 0;
}

#define MINMAX_THREADS 256

// Per-thread-block min and max of the finite values (order-independent, hence exact).
extern "C" __global__ void __launch_bounds__(MINMAX_THREADS) fz_minmax(const real* x, u64 n, double* pmin, double* pmax) {
    double lo = __longlong_as_double(0x7ff0000000000000ll), hi = -lo;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        real v = x[i];
        if (is_finite_real(v)) {
            lo = fmin(lo, (double)v);
            hi = fmax(hi, (double)v);
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

// One warp: combine the partial ranges and resolve the bound (rel: value x range).
extern "C" __global__ void fz_resolve(const double* pmin, const double* pmax, u32 nparts, u32 relative, double value, Params* out) {
    double lo = __longlong_as_double(0x7ff0000000000000ll), hi = -lo;
    for (u32 i = threadIdx.x; i < nparts; i += 32) { lo = fmin(lo, pmin[i]); hi = fmax(hi, pmax[i]); }
    for (int o = 16; o > 0; o >>= 1) {
        lo = fmin(lo, __shfl_xor_sync(FULL_MASK, lo, o));
        hi = fmax(hi, __shfl_xor_sync(FULL_MASK, hi, o));
    }
    if (threadIdx.x == 0) {
        double range = lo <= hi ? hi - lo : 0.0;
        double abs_bound = relative ? value * range : value;
        real step = at_most(abs_bound);
        real recip = (real)0.5 / step;
        out->abs_bound = abs_bound;
        out->step = (double)step;
        out->recip = (double)recip;
    }
}

// Decoding: put the outliers back, bit for bit.
extern "C" __global__ void fz_scatter_outliers(const u64* index, const u64* bits, u64 count, real* out) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count) out[index[k]] = bits_real(bits[k]);
}

#if PRED == 0
// Quantizer straight into the coder: coder element k is natural element k.
__device__ __forceinline__ i32 coder_value(const real* data, u64 k, const Geometry& g, real step, real recip,
                                           double abs_bound, bool* outlier, u64* natural) {
    *natural = k;
    return quant_code(data[k], step, recip, abs_bound, outlier);
}

template <int N>
__device__ __forceinline__ void decode_store(i32 (&v)[N], int lane, u64 blk, const Geometry& g, real step, real* out) {
    for (int i = 0; i < N; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        if (k < g.ncodes) out[k] = reconstruct(v[i], step);
    }
}
#endif
