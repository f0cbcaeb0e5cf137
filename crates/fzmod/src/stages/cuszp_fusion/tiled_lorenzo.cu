// TiledLorenzo fused between the quantizer and the coder (PRED == 2). Tile TX x TY x TZ,
// TDELTA = 0 for the reshape-only (cuSZp3 fixed) variant. Coder element k is element
// k % TE of tile k / TE, tiles numbered x fastest (docs/FORMAT.md 6.3).

#if PRED == 2
#define TE (TX * TY * TZ)

// Natural index of coder element k, or NO_INDEX for padding; also its tile-local coordinates.
// Tile counts fit in 32 bits (the host checks), so the run-time divisions are 32-bit.
__device__ __forceinline__ u64 tile_position(u64 k, const Geometry& g, u32* lx, u32* ly, u32* lz) {
    u32 t = (u32)(k / TE);
    u32 lt = (u32)(k % TE);
    *lx = lt % TX;
    *ly = (lt / TX) % TY;
    *lz = lt / (TX * TY);
    u32 ntx = (u32)((g.nx + TX - 1) / TX), nty = (u32)((g.ny + TY - 1) / TY);
    u32 txy = t / ntx;
    u64 x = (u64)(t - txy * ntx) * TX + *lx, y = (u64)(txy % nty) * TY + *ly, z = (u64)(txy / nty) * TZ + *lz;
    if (x >= g.nx || y >= g.ny || z >= g.nz) return NO_INDEX;
    return (z * g.ny + y) * g.nx + x;
}

__device__ __forceinline__ u64 natural_index(u64 k, const Geometry& g) {
    u32 lx, ly, lz;
    return tile_position(k, g, &lx, &ly, &lz);
}

// TE == BLOCK (the host checks): coder block blk is tile blk, and the element a delta refers
// to (left, above or in front, all in the same tile) lives in this warp: fetch it by shuffle.
template <int N>
__device__ __forceinline__ i32 from_tile(const i32 (&q)[N], int local) {
    i32 r = 0;
    for (int j = 0; j < N; j++) {
        i32 t = __shfl_sync(FULL_MASK, q[j], local & 31);
        if (j == (local >> 5)) r = t;
    }
    return r;
}

template <int N>
__device__ __forceinline__ void block_values(const real* data, u64 blk, const Geometry& g, const real (&x)[N],
                                             const bool (&valid)[N], int lane, const QParams& p, i32 (&v)[N],
                                             bool (&outlier)[N]) {
    i32 q[N];
    quantize_loaded(x, valid, p, q, outlier);
    for (int i = 0; i < N; i++) {
        int local = lane + 32 * i;
        int lx = local % TX, ly = (local / TX) % TY, lz = local / (TX * TY);
        int pred = !TDELTA ? -1 : lx > 0 ? local - 1 : ly > 0 ? local - (int)TX : lz > 0 ? local - (int)(TX * TY) : -1;
        i32 before = from_tile(q, pred < 0 ? 0 : pred);
        v[i] = valid[i] ? (i32)((u32)q[i] - (pred < 0 ? 0u : (u32)before)) : 0;
    }
}

// Decoding needs TE == BLOCK: one coder block is one tile. The separable inverse of each
// element is a sum of deltas along its z pillar, y column and x row (all inside the grid).
template <int N>
__device__ __forceinline__ void decode_store(i32 (&v)[N], int lane, u64 blk, const Geometry& g, real step, real* out,
                                             i32* deltas) {
#if TDELTA
    __shared__ u32 tile[DECODE_WARPS][BLOCK];
    u32* d = tile[threadIdx.x >> 5];
    for (int i = 0; i < N; i++) d[lane + 32 * i] = (u32)v[i];
    __syncwarp();
#endif
    for (int i = 0; i < N; i++) {
        u64 k = blk * BLOCK + lane + 32 * i;
        if (k >= g.ncodes) continue;
        u32 lx, ly, lz;
        u64 e = tile_position(k, g, &lx, &ly, &lz);
        if (e == NO_INDEX) continue;
#if TDELTA
        u32 s = 0;
        for (u32 z = 0; z <= lz; z++) s += d[z * TX * TY];
        for (u32 y = 1; y <= ly; y++) s += d[(lz * TY + y) * TX];
        for (u32 x = 1; x <= lx; x++) s += d[(lz * TY + ly) * TX + x];
        out[e] = reconstruct((i32)s, step);
#else
        out[e] = reconstruct(v[i], step);
#endif
    }
}
#endif
