// TiledLorenzo on the device: the tile-major layout and wrapping deltas of cpu.rs.
// Grid extents (nz, ny, nx) and tile extents (tz, ty, tx), x fastest.

struct TileGeometry {
    u64 nz, ny, nx;  // grid
    u64 tz, ty, tx;  // tile
    u64 nty, ntx;    // tiles along y and x
};
static_assert(sizeof(TileGeometry) == 64, "TileGeometry: tiled_lorenzo/device.rs");

// Natural index of tile-major slot k, or -1 for padding.
__device__ __forceinline__ long long natural_of_slot(u64 k, const TileGeometry& g) {
    u64 te = g.tz * g.ty * g.tx, t = k / te, local = k % te;
    u64 lx = local % g.tx, ly = (local / g.tx) % g.ty, lz = local / (g.tx * g.ty);
    u64 x = (t % g.ntx) * g.tx + lx, y = ((t / g.ntx) % g.nty) * g.ty + ly, z = t / (g.ntx * g.nty) * g.tz + lz;
    if (x >= g.nx || y >= g.ny || z >= g.nz) return -1;
    return (long long)((z * g.ny + y) * g.nx + x);
}

extern "C" __global__ void tl_forward(const i32* q, TileGeometry g, u32 delta, u64 padded, i32* out) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= padded) return;
    long long i = natural_of_slot(k, g);
    if (i < 0) {
        out[k] = 0;
        return;
    }
    u64 local = k % (g.tz * g.ty * g.tx);
    u64 lx = local % g.tx, ly = (local / g.tx) % g.ty, lz = local / (g.tx * g.ty);
    u32 pred = 0;
    if (delta) {
        if (lx > 0) pred = (u32)q[i - 1];
        else if (ly > 0) pred = (u32)q[i - g.nx];
        else if (lz > 0) pred = (u32)q[i - g.nx * g.ny];
    }
    out[k] = (i32)((u32)q[i] - pred);
}

// Inverse deltas, one thread per tile, in the order cpu.rs adds them (in place).
extern "C" __global__ void tl_undelta(i32* d, TileGeometry g, u64 ntiles) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntiles) return;
    u64 te = g.tz * g.ty * g.tx;
    i32* slot = d + t * te;
    for (u64 i = 0; i < te; i++) {
        u64 lx = i % g.tx, ly = (i / g.tx) % g.ty, lz = i / (g.tx * g.ty);
        u32 pred = lx > 0 ? (u32)slot[i - 1] : ly > 0 ? (u32)slot[i - g.tx] : lz > 0 ? (u32)slot[i - g.tx * g.ty] : 0u;
        slot[i] = (i32)((u32)slot[i] + pred);
    }
}

// Tile-major -> natural order.
extern "C" __global__ void tl_gather(const i32* d, TileGeometry g, i32* out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= g.nz * g.ny * g.nx) return;
    u64 x = i % g.nx, y = (i / g.nx) % g.ny, z = i / (g.nx * g.ny);
    u64 t = ((z / g.tz) * g.nty + y / g.ty) * g.ntx + x / g.tx;
    u64 local = ((z % g.tz) * g.ty + y % g.ty) * g.tx + x % g.tx;
    out[i] = d[t * g.tz * g.ty * g.tx + local];
}
