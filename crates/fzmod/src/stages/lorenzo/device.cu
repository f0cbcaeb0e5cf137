// Lorenzo on the device: the wrapping i32 arithmetic of cpu.rs. Grid extents z, y, x.

// Block mode: d[i] = q[i] - q[i - 1], restarting every `block` elements.
extern "C" __global__ void lz_block_delta(const i32* q, u64 n, u64 block, i32* d) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 prev = i % block ? (u32)q[i - 1] : 0u;
    d[i] = (i32)((u32)q[i] - prev);
}

// N-D mode: inclusion-exclusion over the unit cube behind each element, zero outside the grid.
extern "C" __global__ void lz_nd_delta(const i32* q, u64 nz, u64 ny, u64 nx, i32* d) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nz * ny * nx) return;
    u64 x = i % nx, row = i / nx, y = row % ny, z = row / ny;
    u32 s = (u32)q[i];
    for (int c = 1; c < 8; c++) {
        u64 dz = c >> 2, dy = (c >> 1) & 1, dx = c & 1;
        if (z < dz || y < dy || x < dx) continue;
        u32 v = (u32)q[i - dz * ny * nx - dy * nx - dx];
        s = ((dz + dy + dx) & 1) ? s - v : s + v;
    }
    d[i] = (i32)s;
}

// Inclusive prefix sum of `len` elements starting at `base`, stride `stride`, by one warp.
__device__ __forceinline__ void warp_prefix(i32* d, u64 base, u64 stride, u64 len) {
    int lane = threadIdx.x & 31;
    u32 carry = 0;
    for (u64 k0 = 0; k0 < len; k0 += 32) {
        u64 k = k0 + lane;
        u32 v = k < len ? (u32)d[base + k * stride] : 0u;
        for (int o = 1; o < 32; o <<= 1) {
            u32 t = __shfl_up_sync(FULL_MASK, v, o);
            if (lane >= o) v += t;
        }
        v += carry;
        if (k < len) d[base + k * stride] = (i32)v;
        carry = __shfl_sync(FULL_MASK, v, 31);
    }
}

#define LZ_WARPS 4

// Block mode inverse: one warp per block.
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32) lz_block_prefix(i32* d, u64 n, u64 block) {
    u64 b = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (b * block >= n) return;
    warp_prefix(d, b * block, 1, min(block, n - b * block));
}

// N-D inverse, one axis at a time: `lines` lines of `len` elements, `stride` apart; line l
// starts at (l / inner) * outer_stride + (l % inner) * inner_stride.
extern "C" __global__ void __launch_bounds__(LZ_WARPS * 32)
lz_axis_prefix(i32* d, u64 lines, u64 inner, u64 outer_stride, u64 inner_stride, u64 len, u64 stride) {
    u64 l = (u64)blockIdx.x * LZ_WARPS + (threadIdx.x >> 5);
    if (l >= lines) return;
    warp_prefix(d, (l / inner) * outer_stride + (l % inner) * inner_stride, stride, len);
}
