// Lorenzo block mode fused between the quantizer and the coder (PRED == 1):
// coder element k = q(k) - q(k - 1), restarting every LBLOCK elements.

#if PRED == 1
// LBLOCK == BLOCK (the host checks), so the delta restarts exactly at lane 0 of register 0 and
// every predecessor is in this warp: element lane + 32 i - 1 is lane - 1 of register i, or
// lane 31 of register i - 1.
template <int N>
__device__ __forceinline__ void block_values(const real* data, u64 blk, const Geometry& g, const real (&x)[N],
                                             const bool (&valid)[N], int lane, const QParams& p, i32 (&v)[N],
                                             bool (&outlier)[N]) {
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
__device__ __forceinline__ void decode_store(i32 (&v)[N], int lane, u64 blk, const Geometry& g, real step, real* out,
                                             i32* deltas) {
    u32 carry = 0;
    for (int i = 0; i < N; i++) {
        u32 s = (u32)v[i];
        s = warp_inclusive_scan(s, lane);
        s += carry;
        carry = __shfl_sync(FULL_MASK, s, 31);
        u64 k = blk * BLOCK + lane + 32 * i;
        if (k < g.ncodes) out[k] = reconstruct((i32)s, step);
    }
}
#endif

#if PRED == 3
// N-D Lorenzo (block_size = 0) fused between the quantizer and the coder: coder element k is
// natural element k, and its delta is the inclusion-exclusion sum over the 8 corners of the
// unit cube behind it (zero outside the grid); the 7 neighbours are quantized again.
template <int N>
__device__ __forceinline__ void block_values(const real* data, u64 blk, const Geometry& g, const real (&x)[N],
                                             const bool (&valid)[N], int lane, const QParams& p, i32 (&v)[N],
                                             bool (&outlier)[N]) {
    i32 q[N];
    quantize_loaded(x, valid, p, q, outlier);
    for (int i = 0; i < N; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        v[i] = 0;
        if (!valid[i]) continue;
        u64 cx = k % g.nx, row = k / g.nx, cy = row % g.ny, cz = row / g.ny;
        u32 s = (u32)q[i];
        for (int c = 1; c < 8; c++) {
            u32 dz = c >> 2, dy = (c >> 1) & 1, dx = c & 1;
            if (cz < dz || cy < dy || cx < dx) continue;
            bool unused;
            u32 qn = (u32)quant_code(data[k - dz * g.nx * g.ny - dy * g.nx - dx], p, &unused);
            s = ((dz + dy + dx) & 1) ? s - qn : s + qn;
        }
        v[i] = (i32)s;
    }
}

// The inverse is a global prefix sum: store the deltas; fz_prefix_* and fz_reconstruct follow.
template <int N>
__device__ __forceinline__ void decode_store(i32 (&v)[N], int lane, u64 blk, const Geometry& g, real step, real* out,
                                             i32* deltas) {
    for (int i = 0; i < N; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        if (k < g.ncodes) deltas[k] = v[i];
    }
}
#endif

// Inverse N-D Lorenzo: inclusive prefix sums along x (a warp per row), then y (a thread per
// column), then z (a thread per pillar), wrapping in 32 bits, then reconstruction.
extern "C" __global__ void fz_prefix_x(i32* d, Geometry g) {
    u64 row = (u64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= g.nz * g.ny) return;
    u32 carry = 0;
    for (u64 x0 = 0; x0 < g.nx; x0 += 32) {
        u64 x = x0 + lane;
        u32 s = x < g.nx ? (u32)d[row * g.nx + x] : 0;
        s = warp_inclusive_scan(s, lane);
        s += carry;
        if (x < g.nx) d[row * g.nx + x] = (i32)s;
        carry = __shfl_sync(FULL_MASK, s, 31);
    }
}

extern "C" __global__ void fz_prefix_y(i32* d, Geometry g) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= g.nz * g.nx) return;
    u64 base = (t / g.nx) * g.ny * g.nx + t % g.nx;
    u32 acc = 0;
    for (u64 y = 0; y < g.ny; y++) {
        acc += (u32)d[base + y * g.nx];
        d[base + y * g.nx] = (i32)acc;
    }
}

extern "C" __global__ void fz_prefix_z(i32* d, Geometry g) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x, plane = g.ny * g.nx;
    if (t >= plane) return;
    u32 acc = 0;
    for (u64 z = 0; z < g.nz; z++) {
        acc += (u32)d[z * plane + t];
        d[z * plane + t] = (i32)acc;
    }
}

extern "C" __global__ void fz_reconstruct(const i32* q, const Params* params, u64 n, real* out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = reconstruct(q[i], (real)params->step);
}
