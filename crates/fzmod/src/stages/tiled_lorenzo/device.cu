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

// Tile groups in shared memory: the standalone inverse below and the region fragments (a
// region tile holds whole tiles) share these. Called with literal tile extents (the
// fragments), they inline to constant divisions.

// Origins [z, y, x] of `tiles` consecutive tile-major tiles from tile `first`.
__device__ __forceinline__ void tl_origins(u64 first, u32 tiles, u64 ny, u64 nx, u32 tz, u32 ty, u32 tx, u64* origin) {
    const u64 nty = (ny + ty - 1) / ty, ntx = (nx + tx - 1) / tx;
    for (u32 t = threadIdx.x; t < tiles; t += blockDim.x) {
        u64 tile = first + t;
        origin[3 * t] = tile / (ntx * nty) * tz;
        origin[3 * t + 1] = tile / ntx % nty * ty;
        origin[3 * t + 2] = tile % ntx * tx;
    }
}

// Inclusive sums along `lines` lines of `len` elements, line l at l * pitch, stepping by
// `stride`, one thread a line.
__device__ __forceinline__ void tl_lines(u32* v, u32 lines, u32 pitch, u32 len, u32 stride) {
    for (u32 l = threadIdx.x; l < lines; l += blockDim.x) {
        u32 at = l * pitch, sum = 0;
        for (u32 k = 0; k < len; k++, at += stride) {
            sum += v[at];
            v[at] = sum;
        }
    }
    __syncthreads();
}

// Undo the deltas of `tiles` whole tiles in `v`, in place. cpu.rs's chain (left, else up, else
// front) sums to: the plane starts along z, then the row starts along y, then each row along x;
// the sums wrap, so this order gives cpu.rs's bits. Rows along x: a warp takes 32 / tx rows
// at once when tx is a power of two up to 32 (segmented shuffles, consecutive lanes on
// consecutive words), else a thread a row.
__device__ __forceinline__ void tl_undelta_tiles(u32* v, u32 tiles, u32 tz, u32 ty, u32 tx) {
    const u32 plane = tx * ty, te = plane * tz, size = tiles * te, lane = threadIdx.x & 31;
    if (tz > 1) tl_lines(v, tiles, te, tz, plane);
    if (ty > 1) tl_lines(v, tiles * tz, plane, ty, tx);
    if (tx > 1 && tx <= 32 && (tx & (tx - 1)) == 0) {
        for (u32 i = threadIdx.x; i < (size + 31) / 32 * 32; i += blockDim.x) {
            u32 val = i < size ? v[i] : 0u, pos = lane & (tx - 1);
            for (u32 o = 1; o < tx; o <<= 1) {
                u32 t = __shfl_up_sync(FULL_MASK, val, o);
                if (pos >= o) val += t;
            }
            if (i < size) v[i] = val;
        }
        __syncthreads();
    } else if (tx > 1) {
        tl_lines(v, tiles * tz * ty, tx, tx, 1);
    }
}

// Every element of the `size` tile-major slots in `v` that lies inside the grid, to its
// natural position: `store(index, code)` (a plain store, or fz_stores in common.cu).
template <class W>
__device__ __forceinline__ void tl_scatter(const u32* v, u32 size, const u64* origin, u32 tz, u32 ty, u32 tx, u64 nz,
                                           u64 ny, u64 nx, W store) {
    const u32 te = tz * ty * tx;
    for (u32 i = threadIdx.x; i < size; i += blockDim.x) {
        u32 t = i / te, local = i - t * te, r = local / tx, lz = r / ty;
        u64 x = origin[3 * t + 2] + (local - r * tx), y = origin[3 * t + 1] + (r - lz * ty), z = origin[3 * t] + lz;
        if (x < nx && y < ny && z < nz) store((z * ny + y) * nx + x, v[i]);
    }
}

// The whole inverse for tiles of at most TL_TILE_MAX elements (cuSZp3's 8×8 and 4×4×4): a
// thread block loads a group of consecutive tile-major tiles (contiguous in `d`) into shared
// memory, undoes the deltas there and writes every element to its natural position — one pass
// instead of a copy, tl_undelta (a thread walking a whole tile) and tl_gather.
#define TL_TILE_MAX 4096
#define TL_THREADS 256
#define TL_GROUP 64

extern "C" __global__ void __launch_bounds__(TL_THREADS) tl_inverse(const i32* d, TileGeometry g, u64 ntiles, u32 delta, i32* out) {
    __shared__ u32 v[TL_TILE_MAX];
    __shared__ u64 origin[3 * TL_GROUP];
    const u32 tx = (u32)g.tx, ty = (u32)g.ty, tz = (u32)g.tz, te = tx * ty * tz;
    const u32 group = min((u32)TL_GROUP, TL_TILE_MAX / te);
    for (u64 first = (u64)blockIdx.x * group; first < ntiles; first += (u64)gridDim.x * group) {
        u32 tiles = (u32)min((u64)group, ntiles - first), size = tiles * te;
        tl_origins(first, tiles, g.ny, g.nx, tz, ty, tx, origin);
        for (u32 i = threadIdx.x; i < size; i += TL_THREADS) v[i] = (u32)d[first * te + i];
        __syncthreads();
        if (delta) tl_undelta_tiles(v, tiles, tz, ty, tx);
        tl_scatter(v, size, origin, tz, ty, tx, g.nz, g.ny, g.nx, [&](u64 at, u32 code) { out[at] = (i32)code; });
        __syncthreads();
    }
}

// Region fragments (contract: backend/cuda/region.rs). The region's elements are the
// tile-major slots, and a region tile of `count` slots from slot `first` holds whole tiles.
// The forward gathers from the region's input `q` (the natural grid in global memory, or a
// loader: fz_elements in common.cu) each element once, as its own read (a loader quantizes it
// there), into the shared tile `out`, or with deltas into the spare tile buffer first, from
// which it takes the deltas of tl_forward: every neighbour lies inside the tile and the grid.
// A slot's place in the grid comes from three tables in `scratch`, made once per region tile
// (the gather is bound by its instructions, not by memory): each tile's natural origin and
// the extents of its part inside the grid (x | y << 8 | z << 16), and the natural offset of
// each row of a tile, (lz * ny + ly) * nx.
template <class Q>
__device__ __forceinline__ void tl_region_forward(Q q, u32* out, u32* spare, u64 first, u32 count, u8* scratch, u64 nz,
                                                  u64 ny, u64 nx, u32 tz, u32 ty, u32 tx, bool delta) {
    const u32 te = tz * ty * tx, tiles = count / te, rows = tz * ty;
    u64* origin = (u64*)scratch;
    u64* row_at = origin + tiles;
    u32* inside = (u32*)(row_at + rows);
    const u64 nty = (ny + ty - 1) / ty, ntx = (nx + tx - 1) / tx;
    for (u32 t = threadIdx.x; t < tiles; t += blockDim.x) {
        u64 tile = first / te + t;
        u64 z = tile / (ntx * nty) * tz, y = tile / ntx % nty * ty, x = tile % ntx * tx;
        origin[t] = (z * ny + y) * nx + x;
        inside[t] = (u32)min((u64)tx, nx - x) | (u32)min((u64)ty, ny - y) << 8 | (u32)min((u64)tz, nz - z) << 16;
    }
    for (u32 r = threadIdx.x; r < rows; r += blockDim.x) row_at[r] = ((u64)(r / ty) * ny + r % ty) * nx;
    __syncthreads();
    // Slot i: its tile t, its row r in the tile and its place (lz, ly, lx) there.
    auto place = [&](u32 i, u32* t, u32* r, u32* lz, u32* ly, u32* lx) {
        *t = i / te;
        u32 local = i - *t * te;
        *r = local / tx, *lx = local - *r * tx, *lz = *r / ty, *ly = *r - *lz * ty;
        u32 in = inside[*t];
        return *lx < (in & 255u) && *ly < (in >> 8 & 255u) && *lz < (in >> 16);
    };
    u32* codes = delta ? spare : out;
    fz_gather(codes, count, [&](u32 i) {
        u32 t, r, lz, ly, lx;
        return place(i, &t, &r, &lz, &ly, &lx) ? (u32)fz_own(q, origin[t] + row_at[r] + lx) : 0u;
    });
    if (!delta) return;
    __syncthreads();
    // Without branches: the predecessor's distance back (0: none, which reads the slot itself).
    for (u32 i = threadIdx.x; i < count; i += blockDim.x) {
        u32 t, r, lz, ly, lx;
        bool in = place(i, &t, &r, &lz, &ly, &lx);
        u32 back = lx > 0 ? 1u : ly > 0 ? tx : lz > 0 ? tx * ty : 0u;
        u32 code = codes[i], before = codes[i - back];
        out[i] = in ? code - (back ? before : 0u) : 0u;
    }
}

// The inverse: deltas undone in `v` (the region's shared tile), elements scattered through
// `store` (fz_stores: to the region's output, or through the Quantizer's reconstruction).
template <class W>
__device__ __forceinline__ void tl_region_inverse(u32* v, W store, u64 first, u32 count, u8* scratch, u64 nz, u64 ny,
                                                  u64 nx, u32 tz, u32 ty, u32 tx, bool delta) {
    const u32 te = tz * ty * tx;
    u64* origin = (u64*)scratch;
    tl_origins(first / te, count / te, ny, nx, tz, ty, tx, origin);
    __syncthreads();
    if (delta) tl_undelta_tiles(v, count / te, tz, ty, tx);
    tl_scatter(v, count, origin, tz, ty, tx, nz, ny, nx, store);
}

// A region's fragment calls these two with the tile packed as tz << 16 | ty << 8 | tx (a
// runtime value, so that one program serves every tile): cuSZp3's defaults (mod.rs,
// Tile::default_for) run as specialised copies, other tiles with runtime extents.
#define TL_PACK(tz, ty, tx) (((u64)(tz) << 16) | ((u64)(ty) << 8) | (u64)(tx))
#define TL_BY_TILE(call, tile)                                                     \
    switch (tile) {                                                                \
        case TL_PACK(1, 1, 64): call(1u, 1u, 64u); break;                          \
        case TL_PACK(1, 8, 8): call(1u, 8u, 8u); break;                            \
        case TL_PACK(4, 4, 4): call(4u, 4u, 4u); break;                            \
        default: call((u32)(tile >> 16), (u32)(tile >> 8) & 255u, (u32)tile & 255u); \
    }

template <class Q>
__device__ __forceinline__ void tl_region_forward_packed(Q q, u32* out, u32* spare, u64 first, u32 count, u8* scratch,
                                                         u64 nz, u64 ny, u64 nx, u64 tile, bool delta) {
#define TL_FORWARD(tz, ty, tx) tl_region_forward(q, out, spare, first, count, scratch, nz, ny, nx, tz, ty, tx, delta)
    TL_BY_TILE(TL_FORWARD, tile)
#undef TL_FORWARD
}

template <class W>
__device__ __forceinline__ void tl_region_inverse_packed(u32* v, W store, u64 first, u32 count, u8* scratch, u64 nz,
                                                         u64 ny, u64 nx, u64 tile, bool delta) {
#define TL_INVERSE(tz, ty, tx) tl_region_inverse(v, store, first, count, scratch, nz, ny, nx, tz, ty, tx, delta)
    TL_BY_TILE(TL_INVERSE, tile)
#undef TL_INVERSE
}
