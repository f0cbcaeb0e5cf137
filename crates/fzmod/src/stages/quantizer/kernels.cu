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
__device__ __forceinline__ i32 quant_code(real x, const QParams& p, bool* outlier) {
    i32 q = quantize(x, p.recip);
    real r = reconstruct(q, p.step);
#if REAL_F64
    bool ok = fabs(x - r) <= p.abs_bound;
#else
    float e = fabsf(x - r);
    bool ok = e <= p.accept || (!(e >= p.reject) && fabs((double)x - (double)r) <= p.abs_bound);
#endif
    ok = ok && is_finite_real(x);
    *outlier = !ok;
    return ok ? q : 0;
}

#define MINMAX_THREADS 256

// Per-thread-block min and max of the finite values (order-independent, hence exact).
extern "C" __global__ void __launch_bounds__(MINMAX_THREADS) fz_minmax(const real* x, u64 n, double* pmin, double* pmax) {
    double lo = __longlong_as_double(0x7ff0000000000000ll), hi = -lo;
    u64 start = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;
    // 16-byte loads for the bulk (the buffer is 256-byte aligned), scalar loads for the tail.
    const u64 per = 16 / sizeof(real);
    const uint4* vec = (const uint4*)x;
    for (u64 i = start; i < n / per; i += stride) {
        uint4 w = vec[i];
        const real* e = (const real*)&w;
        for (int j = 0; j < (int)per; j++) {
            if (is_finite_real(e[j])) {
                lo = fmin(lo, (double)e[j]);
                hi = fmax(hi, (double)e[j]);
            }
        }
    }
    for (u64 i = n / per * per + start; i < n; i += stride) {
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
