// LorenzoQuant on the device, after quantizer/device.cu (Params, quant_code, the bound
// resolution, q_tile_starts, the outlier lists, fz_scatter_runs): cpu.rs step for step.
// The two outlier lists are the Quantizer's machinery ("Outlier lists") over ListSource:
// per tile a count and the last entry (lq_list_count), a max-scan for each tile's first gap,
// then the run breaks, the sizes of both layouts, the choice, and the bytes.

#define LQ_SIGN_MAGNITUDE 0
#define LQ_ZIGZAG 1
#define LQ_RADIUS 2

// CodeMapping::encode; false when the delta does not fit a code.
__device__ __forceinline__ bool lq_encode(i32 d, u32 mapping, u32 radius, unsigned short* code) {
    u32 mag = d < 0 ? 0u - (u32)d : (u32)d;
    if (mapping == LQ_SIGN_MAGNITUDE) {
        *code = (unsigned short)(mag | (d < 0 ? 0x8000u : 0u));
        return mag < 0x8000u;
    }
    if (mapping == LQ_ZIGZAG) {
        *code = (unsigned short)(((u32)d << 1) ^ (u32)(d >> 31));
        return d >= -32768 && d < 32768;
    }
    *code = (unsigned short)((u32)d + radius);
    return mag < radius;
}

// CodeMapping::decode.
__device__ __forceinline__ i32 lq_decode(unsigned short c, u32 mapping, u32 radius) {
    if (mapping == LQ_SIGN_MAGNITUDE) return c >> 15 ? -(i32)(c & 0x7fff) : (i32)(c & 0x7fff);
    if (mapping == LQ_ZIGZAG) return (i32)(c >> 1) ^ -(i32)(c & 1);
    return (i32)c - (i32)radius;
}

struct Geometry {
    u64 nz, ny, nx, tz, ty, tx;
};

// Flat tiles (one element deep in z, rows of a power of two up to 32 elements, up to
// LQ_BAND_ROWS rows: FZ-GPU's 16 × 16 among them) run as bands, a thread per column:
// lq_band_forward and lq_band_inverse.
#define LQ_BAND_ROWS 16
#define LQ_BAND_THREADS 256
static_assert(sizeof(Geometry) == 48, "Geometry: lorenzo_quant/device.rs");

// The two outlier lists. The forward kernels mark each Q_TILE of elements in `tile_any`
// (bit 1 << list) when it holds an entry of that list, so that lq_list_count reads the input
// and deltas again only where a list has entries. An OR is the same in any order.
#define LQ_DELTAS 0
#define LQ_VALUES 1
__device__ __forceinline__ void lq_mark(u32* tile_any, u64 i, u32 list) { atomicOr(&tile_any[i / Q_TILE], 1u << list); }

// A delta without a code: its bit in `unfit` (one per element, zeroed; ListSource::has).
__device__ __forceinline__ void lq_mark_unfit(u32* tile_any, u32* unfit, u64 i) {
    atomicOr(&unfit[i >> 5], 1u << (i & 31));
    lq_mark(tile_any, i, LQ_DELTAS);
}

// The deltas without a code are kept compactly, in element order (a second pass writes them,
// once the first has set every `unfit` bit): delta i sits at the rank of its bit, from
// `unfit_base` (the exclusive scan of the unfit bits per group of LQ_RANK_WORDS words) and
// the words before it in its group. An i32 per element had been as large as the input (issue
// 12: a compress's peak device memory); groups keep the scan short (a scan per word cost
// 40 µs on etopo5 ×8).
#define LQ_RANK_WORDS 8
__device__ __forceinline__ u64 lq_delta_rank(const u32* unfit, const u64* unfit_base, u64 i) {
    const u64 w = i >> 5;
    u64 k = unfit_base[w / LQ_RANK_WORDS];
    for (u64 v = w / LQ_RANK_WORDS * LQ_RANK_WORDS; v < w; v++) k += __popc(unfit[v]);
    return k + __popc(unfit[w] & ((1u << (i & 31)) - 1u));
}

// Unfit bits per group of LQ_RANK_WORDS words, the items of unfit_base's scan.
extern "C" __global__ void lq_unfit_counts(const u32* unfit, u64 nwords, u32* counts) {
    u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x, first = g * LQ_RANK_WORDS;
    if (first >= nwords) return;
    u32 c = 0;
    for (u64 w = first; w < min(first + LQ_RANK_WORDS, nwords); w++) c += __popc(unfit[w]);
    counts[g] = c;
}

// Where the second pass writes kept deltas: rank order, nothing at or past `capacity` (the
// run is repeated with room for all of them when the total exceeds it).
struct KeptDeltas {
    const u32* unfit;
    const u64* unfit_base;
    i32* deltas;
    u64 capacity;
    __device__ void put(u64 i, i32 d) const {
        u64 k = lq_delta_rank(unfit, unfit_base, i);
        if (k < capacity) deltas[k] = d;
    }
};
static_assert(sizeof(KeptDeltas) == 32, "KeptDeltas: lorenzo_quant/device.rs");

// Pass 1: pre-quantized values (0 for value outliers, quantizer/cpu.rs codes_or_outliers); *any (a zeroed
// slot) becomes nonzero when there is a value outlier, for lq_predict.
extern "C" __global__ void lq_prequant(const real* x, u64 n, const Params* params, i32* p, u64* any, u32* tile_any) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool outlier;
    p[i] = quant_code(x[i], load_params(params), &outlier);
    if (outlier) {
        *any = 1;  // every writer stores the same value: no atomic needed
        lq_mark(tile_any, i, LQ_VALUES);
    }
}

// The p of the last element before lane `lane` in its segment of lanes (bit set in `seg`)
// that is no outlier (bit set in `kept`): h of that lane from a shuffle, else `carry`. Every
// lane of the warp calls it.
__device__ __forceinline__ u32 lq_carried(u32 h, unsigned kept, unsigned seg, u32 lane, u32 carry) {
    unsigned before = kept & seg & ((1u << lane) - 1u);
    u32 from = __shfl_sync(FULL_MASK, h, before ? 31 - __clz(before) : lane);
    return before ? from : carry;
}

// Pass 1b (cpu.rs predict_value_outliers): every value outlier takes its Lorenzo prediction,
// so its delta is 0. Along a tile row the zero delta says h = p − g stays constant, g being
// the row's terms behind in y and z (0 outside the tile): an outlier takes g plus the h of
// the last element before it in the tile row that is not an outlier (0 if none). A warp per
// tile, its rows in order (each reads the rows behind it, final by then), its lanes along x.
// Nothing to do unless lq_prequant found an outlier.
extern "C" __global__ void lq_predict(const real* x, const Params* params, Geometry g, const u64* any, i32* p) {
    if (*any == 0) return;
    const QParams q = load_params(params);
    const u64 txs = (g.nx + g.tx - 1) / g.tx, tys = (g.ny + g.ty - 1) / g.ty, tzs = (g.nz + g.tz - 1) / g.tz;
    const u64 plane = g.ny * g.nx, warps = ((u64)gridDim.x * blockDim.x) >> 5;
    const u32 lane = threadIdx.x & 31;
    for (u64 t = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < txs * tys * tzs; t += warps) {
        const u64 z0 = t / (txs * tys) * g.tz, y0 = t / txs % tys * g.ty, x0 = t % txs * g.tx;
        const u64 dz = min(g.tz, g.nz - z0), dy = min(g.ty, g.ny - y0), dx = min(g.tx, g.nx - x0);
        for (u64 r = 0; r < dz * dy; r++) {
            const u64 lz = r / dy, ly = r % dy, row = ((z0 + lz) * g.ny + y0 + ly) * g.nx + x0;
            u32 carry = 0;
            for (u64 c = 0; c < dx; c += 32) {
                const u64 i = row + c + lane;
                const bool in = c + lane < dx;
                bool outlier = false;
                if (in) quant_code(x[i], q, &outlier);
                const unsigned outliers = __ballot_sync(FULL_MASK, outlier), inside = __ballot_sync(FULL_MASK, in);
                if (outliers == 0 && c + 32 >= dx) break;  // the row's last chunk: its carry is not needed
                u32 behind = 0;
                if (in && ly > 0) behind += (u32)p[i - g.nx];
                if (in && lz > 0) behind += (u32)p[i - plane];
                if (in && ly > 0 && lz > 0) behind -= (u32)p[i - plane - g.nx];
                u32 h = in ? (u32)p[i] - behind : 0u;
                const u32 carried = lq_carried(h, inside & ~outliers, FULL_MASK, lane, carry);
                if (outlier) {
                    h = carried;
                    p[i] = (i32)(behind + h);
                }
                carry = __shfl_sync(FULL_MASK, h, 31 - __clz(inside));
            }
            __syncwarp();  // the next rows read this one
        }
    }
}

// Passes 1 and 2 at once for the flat tiles of lq_band_inverse: a thread per column of a band
// of `ty` rows pre-quantizes its column (loaded at once), and each element's delta takes its
// left neighbours from the lane before it in the tile row (a shuffle within groups of `tx`
// lanes) and the row above from the thread's own previous row — no pre-quantized copy in
// memory. Terms outside the tile are 0, as in lq_delta, whose codes it writes; a delta
// without a code gets its unfit bit (lq_mark_unfit).
//
// The kernel was bound by instruction issue, so the rows of a band run as one of a few
// compiled forms (lq_band_rows): MAPPING fixed, and FULL bands (LQ_BAND_ROWS rows, every
// column of the block inside the grid) without row or column checks. KEEP: the second pass
// (lq_band_keep), which writes only the kept deltas, no codes or marks.
template <u32 MAPPING, bool FULL, bool KEEP>
__device__ __forceinline__ void lq_band_rows(const real* x, const QParams& q, u64 base, u64 nx, u32 rows, bool inside, u32 tx,
                                             u32 radius, unsigned short* codes, u32* tile_any, u32* unfit, const KeptDeltas& kept_deltas) {
    const u32 lane = threadIdx.x & 31;
    const bool first = (lane & (tx - 1)) == 0, here_inside = FULL || inside;
    real v[LQ_BAND_ROWS];
    const real* src = x + base;
#pragma unroll
    for (u32 r = 0; r < LQ_BAND_ROWS; r++, src += nx) v[r] = FULL || (r < rows && inside) ? *src : (real)0;
    // This lane's segment of the warp: the lanes of its tile row up to itself.
    const unsigned seg = ~((1u << (lane & ~(tx - 1))) - 1u);
    u32 above = 0, above_left = 0;
    unsigned short* code_at = codes + base;
#pragma unroll
    for (u32 r = 0; r < LQ_BAND_ROWS; r++, code_at += nx) {
        if (!FULL && r >= rows) break;
        bool outlier = false;
        u32 here = here_inside ? (u32)quant_code(v[r], q, &outlier) : 0u;
        // A value outlier takes its prediction (lq_predict; the terms behind are `above`).
        const unsigned kept = __ballot_sync(FULL_MASK, !outlier);
        if (kept != FULL_MASK) {
            u32 h = lq_carried(here - above, kept, seg, lane, 0u);
            if (outlier) here = above + h;
        }
        u32 left = __shfl_up_sync(FULL_MASK, here, 1, tx);
        if (first) left = 0;
        i32 d = (i32)(here - left - above + above_left);
        above_left = left, above = here;
        unsigned short code;
        const bool fits = lq_encode(d, MAPPING, radius, &code);
        if (KEEP) {
            if (!fits && here_inside) kept_deltas.put(base + r * nx, d);
            continue;
        }
        if (!fits) code = 0;
        if (here_inside) *code_at = code;
        if (__any_sync(FULL_MASK, outlier || !fits) && here_inside) {
            const u64 at = base + r * nx;
            if (outlier) lq_mark(tile_any, at, LQ_VALUES);
            if (!fits) lq_mark_unfit(tile_any, unfit, at);
        }
    }
}

// This thread's place in the band kernels' grid (a row of blocks across x per band of `ty`
// rows): its column's first element, the band's rows, whether the column is inside the grid
// and whether the block's band is full (LQ_BAND_ROWS rows, every column inside); false past
// the last band.
struct LqBand {
    u64 base;
    u32 rows;
    bool inside, full;
};

__device__ __forceinline__ bool lq_band(const Geometry& g, LqBand* b) {
    const u64 columns = (g.nx + LQ_BAND_THREADS - 1) / LQ_BAND_THREADS, bands = (g.ny + g.ty - 1) / g.ty;
    const u64 band = blockIdx.x / columns, col0 = blockIdx.x % columns * LQ_BAND_THREADS, col = col0 + threadIdx.x;
    if (band >= g.nz * bands) return false;
    const u64 y0 = band % bands * g.ty;
    b->base = (band / bands * g.ny + y0) * g.nx + col;
    b->rows = (u32)min(g.ty, g.ny - y0);
    b->inside = col < g.nx;
    b->full = b->rows == LQ_BAND_ROWS && col0 + LQ_BAND_THREADS <= g.nx;
    return true;
}

template <bool KEEP>
__device__ __forceinline__ void lq_band_pass(const real* x, const QParams& q, const Geometry& g, const LqBand& b, u32 mapping, u32 radius,
                                             unsigned short* codes, u32* tile_any, u32* unfit, const KeptDeltas& kept) {
    const u32 tx = (u32)g.tx;
#define LQ_BAND_PASS(M)                                                                                        \
    (b.full ? lq_band_rows<M, true, KEEP>(x, q, b.base, g.nx, b.rows, b.inside, tx, radius, codes, tile_any, unfit, kept) \
            : lq_band_rows<M, false, KEEP>(x, q, b.base, g.nx, b.rows, b.inside, tx, radius, codes, tile_any, unfit, kept))
    if (mapping == LQ_SIGN_MAGNITUDE) LQ_BAND_PASS(LQ_SIGN_MAGNITUDE);
    else if (mapping == LQ_ZIGZAG) LQ_BAND_PASS(LQ_ZIGZAG);
    else LQ_BAND_PASS(LQ_RADIUS);
#undef LQ_BAND_PASS
}

extern "C" __global__ void __launch_bounds__(LQ_BAND_THREADS)
lq_band_forward(const real* x, const Params* params, Geometry g, u32 mapping, u32 radius, unsigned short* codes, u32* tile_any,
                u32* unfit) {
    LqBand b;
    if (!lq_band(g, &b)) return;
    lq_band_pass<false>(x, load_params(params), g, b, mapping, radius, codes, tile_any, unfit, KeptDeltas{});
}

// The second pass over the bands: nothing to do when no element is unfit (`unfit_total`, the
// scan's total: the common case, whose bitmap reads cost as much as a pass); else a warp none
// of whose columns holds an unfit element returns at once (its rows' work is warp-local), and
// the others compute their deltas again and keep the unfit ones.
extern "C" __global__ void __launch_bounds__(LQ_BAND_THREADS)
lq_band_keep(const real* x, const Params* params, Geometry g, u32 mapping, u32 radius, u32* unfit, KeptDeltas kept,
             const u64* unfit_total) {
    LqBand b;
    if (*unfit_total == 0 || !lq_band(g, &b)) return;
    bool any = false;
    for (u32 r = 0; r < b.rows && b.inside; r++) {
        u64 at = b.base + r * g.nx;
        any |= unfit[at >> 5] >> (at & 31) & 1u;
    }
    if (!__any_sync(FULL_MASK, any)) return;
    lq_band_pass<true>(x, load_params(params), g, b, mapping, radius, nullptr, nullptr, unfit, kept);
}

// The Lorenzo delta of element i inside its tile (wrapping, cpu.rs lorenzo_delta).
__device__ __forceinline__ i32 lq_delta_at(const i32* p, const Geometry& g, u64 i, u64 n) {
    u64 x, y, z;
    bool has[3];
    if (n >> 32 == 0) {
        // 32-bit division where everything fits: a quarter of the cost of 64-bit division.
        u32 j = (u32)i, nx = (u32)g.nx, ny = (u32)g.ny, row = j / nx;
        x = j - row * nx, y = row % ny, z = row / ny;
        has[0] = (u32)z % (u32)g.tz != 0, has[1] = (u32)y % (u32)g.ty != 0, has[2] = (u32)x % (u32)g.tx != 0;
    } else {
        x = i % g.nx, y = i / g.nx % g.ny, z = i / (g.nx * g.ny);
        has[0] = z % g.tz != 0, has[1] = y % g.ty != 0, has[2] = x % g.tx != 0;
    }
    u32 plane[2];
    for (int dz = 0; dz < 2; dz++) {
        u32 m[2][2];
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++) {
                bool inside = (dz == 0 || has[0]) && (dy == 0 || has[1]) && (dx == 0 || has[2]);
                m[dy][dx] = inside ? (u32)p[((z - dz) * g.ny + (y - dy)) * g.nx + (x - dx)] : 0u;
            }
        plane[dz] = m[0][0] - m[0][1] - m[1][0] + m[1][1];
    }
    return (i32)(plane[0] - plane[1]);
}

// Pass 2: Lorenzo deltas inside tiles and their codes; deltas without a code leave code 0 and
// their unfit bit (lq_delta_keep keeps their values).
extern "C" __global__ void lq_delta(const i32* p, Geometry g, u32 mapping, u32 radius, unsigned short* codes, u32* tile_any, u32* unfit) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x, n = g.nz * g.ny * g.nx;
    if (i >= n) return;
    unsigned short code;
    bool fits = lq_encode(lq_delta_at(p, g, i, n), mapping, radius, &code);
    codes[i] = fits ? code : 0;
    if (!fits) lq_mark_unfit(tile_any, unfit, i);
}

// Pass 3: the deltas of the unfit elements, kept in rank order (none when `unfit_total` is 0).
extern "C" __global__ void lq_delta_keep(const i32* p, Geometry g, KeptDeltas kept, const u64* unfit_total) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x, n = g.nz * g.ny * g.nx;
    if (i < n && *unfit_total > 0 && (kept.unfit[i >> 5] >> (i & 31) & 1u)) kept.put(i, lq_delta_at(p, g, i, n));
}

// One list's entries: whether element i has one, its value's bytes, and writing them.
struct ListSource {
    u32 list, mapping, radius;
    const u32* unfit;
    const u64* unfit_base;
    const i32* deltas;
    u64 deltas_capacity;
    const real* x;
    QParams q;
    // A kept delta (0 past the capacity of a run that is then repeated with more room).
    __device__ i32 delta(u64 i) const {
        u64 k = lq_delta_rank(unfit, unfit_base, i);
        return k < deltas_capacity ? deltas[k] : 0;
    }
    __device__ bool has(u64 i) const {
        if (list == LQ_VALUES) {
            bool outlier;
            quant_code(x[i], q, &outlier);
            return outlier;
        }
        return unfit[i >> 5] >> (i & 31) & 1u;
    }
    // Two entries' values are bit-identical (both have entries).
    __device__ bool same(u64 i, u64 j) const {
        return list == LQ_VALUES ? real_bits(x[i]) == real_bits(x[j]) : delta(i) == delta(j);
    }
    __device__ u32 zz(u64 i) const {
        i32 d = delta(i);
        return ((u32)d << 1) ^ (u32)(d >> 31);
    }
    __device__ u32 value_len(u64 i) const { return list == LQ_VALUES ? (u32)sizeof(real) : varint_len(zz(i)); }
    __device__ u8* put_value(u64 i, u8* o) const {
        if (list == LQ_VALUES) {
            u64 bits = real_bits(x[i]);
            for (int b = 0; b < (int)sizeof(real); b++) *o++ = (u8)(bits >> (8 * b));
            return o;
        }
        return put_varint(zz(i), o);
    }
};

__device__ __forceinline__ ListSource list_source(u32 list, u32 mapping, u32 radius, const u32* unfit, const u64* unfit_base,
                                                  const i32* deltas, u64 deltas_capacity, const real* x, const Params* params) {
    ListSource s;
    s.list = list;
    s.mapping = mapping;
    s.radius = radius;
    s.unfit = unfit;
    s.unfit_base = unfit_base;
    s.deltas = deltas;
    s.deltas_capacity = deltas_capacity;
    s.x = x;
    s.q = load_params(params);
    return s;
}

// Per tile: entries and (last entry index + 1), as q_tile_starts takes them; tiles that
// tile_any does not mark have none. Blocks loop over tiles (most tiles are empty).
extern "C" __global__ void __launch_bounds__(Q_THREADS)
lq_list_count(u32 list, u32 mapping, u32 radius, const u32* unfit, const real* x, const Params* params, u64 n, u64 ntiles,
              const u32* tile_any, u32* tile_count, u64* tile_next) {
    // Counting reads no delta values.
    ListSource src = list_source(list, mapping, radius, unfit, nullptr, nullptr, 0, x, params);
    for (u64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        if (!(tile_any[tile] >> list & 1u)) {  // the whole block
            if (threadIdx.x == 0) tile_count[tile] = 0, tile_next[tile] = 0;
            continue;
        }
        u64 first = tile * Q_TILE + (u64)threadIdx.x * QI_RUN;
        u32 count = 0;
        u64 next = 0;
        for (int j = 0; j < QI_RUN && first + j < n; j++)
            if (src.has(first + j)) {
                count++;
                next = first + j + 1;
            }
        q_tile_summary(count, next, tile_count + tile, tile_next + tile);
    }
}

__device__ __forceinline__ ListSource list_source(const ListArgs& a) {
    return list_source(a.list, a.mapping, a.radius, a.unfit, a.unfit_base, a.deltas, a.deltas_capacity, a.x, a.params);
}

extern "C" __global__ void __launch_bounds__(Q_THREADS) lq_tile_break(ListArgs a, u64 n, u64 ntiles, const u32* tile_count, u64* tile_break) {
    ch_tile_break(list_source(a), a.entries, n, ntiles, tile_count, tile_break);
}

extern "C" __global__ void __launch_bounds__(Q_THREADS)
lq_list_walk(ListArgs a, u64 n, const u32* tile_count, const u64* tile_next, const u64* tile_break, u64 ntiles,
             u32* bytes_indexed, u32* bytes_runs, const u64* layout_at, const u64* offsets_indexed, const u64* offsets_runs,
             const u64* base_indexed, const u64* base_runs, const u64* channel_len, u8* out, u64 capacity, u32 write) {
    ch_list_walk(list_source(a), a.entries, n, tile_count, tile_next, tile_break, ntiles, bytes_indexed, bytes_runs, layout_at,
                 offsets_indexed, offsets_runs, base_indexed, base_runs, channel_len, out, capacity, write);
}

// The record's values (the channel's length comes from ch_choose).
extern "C" __global__ void lq_export(const Params* params, u64* abs_bound, u64* step) {
    *abs_bound = (u64)__double_as_longlong(params->abs_bound);
    *step = (u64)__double_as_longlong(params->step);
}

// ---- Inverse ----

// Codes to deltas (the delta outliers are scattered in afterwards).
extern "C" __global__ void lq_codes_to_deltas(const unsigned short* codes, u64 n, u32 mapping, u32 radius, i32* d) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = lq_decode(codes[i], mapping, radius);
}

// The delta-outlier runs, (start, len, delta as u32) triples: a warp per run (fz_scatter_runs).
extern "C" __global__ void lq_scatter_delta_runs(const u64* runs, u64 count, i32* d) {
    u64 warps = ((u64)gridDim.x * blockDim.x) >> 5, lane = threadIdx.x & 31;
    for (u64 k = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; k < count; k += warps) {
        u64 start = runs[3 * k], len = runs[3 * k + 1];
        i32 v = (i32)(u32)runs[3 * k + 2];
        for (u64 i = lane; i < len; i += 32) d[start + i] = v;
    }
}

// Wrapping prefix sums along one axis (0 = x, 1 = y, 2 = z) restarting at tile boundaries: one
// thread per tile segment of a line, neighbouring threads on neighbouring lines.
extern "C" __global__ void lq_prefix(i32* d, Geometry g, u32 axis) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 len, stride, start;
    if (axis == 0) {
        u64 segs = (g.nx + g.tx - 1) / g.tx;
        if (t >= g.nz * g.ny * segs) return;
        u64 line = t / segs, s = t % segs;
        start = line * g.nx + s * g.tx;
        len = min(g.tx, g.nx - s * g.tx), stride = 1;
    } else if (axis == 1) {
        u64 bands = (g.ny + g.ty - 1) / g.ty;
        if (t >= g.nz * bands * g.nx) return;
        u64 x = t % g.nx, b = t / g.nx % bands, z = t / (g.nx * bands);
        start = (z * g.ny + b * g.ty) * g.nx + x;
        len = min(g.ty, g.ny - b * g.ty), stride = g.nx;
    } else {
        u64 bands = (g.nz + g.tz - 1) / g.tz, plane = g.ny * g.nx;
        if (t >= bands * plane) return;
        u64 b = t / plane;
        start = b * g.tz * plane + t % plane;
        len = min(g.tz, g.nz - b * g.tz), stride = plane;
    }
    u32 acc = 0;
    for (u64 k = 0; k < len; k++) {
        acc += (u32)d[start + k * stride];
        d[start + k * stride] = (i32)acc;
    }
}

// Values from the summed pre-quantized integers (the value outliers are scattered after).
extern "C" __global__ void lq_reconstruct(const i32* p, u64 n, double step, real* out) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = reconstruct(p[i], (real)step);
}

// The whole inverse after the deltas, for tiles of at most LQ_TILE_MAX elements (all of
// FZ-GPU's): a thread block loads the deltas of up to LQ_GROUP consecutive tiles (LQ_TILE_MAX
// elements in all) once into shared memory, tile after tile, sums them along x, y and z
// restarting at each tile's edges, and writes the values — one pass over memory instead of
// lq_prefix's three and lq_reconstruct's one. A group keeps every thread busy on small tiles
// (a 16×16 tile alone has 16 columns for 256 threads) and makes rows of consecutive tiles
// one contiguous load. The sums wrap in u32 as in cpu.rs, so their order does not change a
// bit; positions outside the grid (edge tiles) hold 0 and only feed positions outside too.
#define LQ_TILE_MAX 4096
#define LQ_TILE_THREADS 256
#define LQ_GROUP 64

// Inclusive sums along `lines` lines of `len` elements in shared memory; line l starts at
// (l / inner) * outer + l % inner and steps by `stride`. Contiguous lines (x) are scanned by a
// warp each, its lanes on 32 consecutive elements at a time; strided lines (y, z) by a thread
// each, adjacent threads on adjacent lines — both without bank conflicts (a warp on a strided
// line would have them).
__device__ __forceinline__ void lq_tile_lines(u32* v, u32 lines, u32 len, u32 stride, u32 inner, u32 outer) {
    if (stride > 1) {
        for (u32 l = threadIdx.x; l < lines; l += LQ_TILE_THREADS) {
            u32 at = l / inner * outer + l % inner, sum = 0;
            for (u32 k = 0; k < len; k++, at += stride) {
                sum += v[at];
                v[at] = sum;
            }
        }
    } else {
        u32 lane = threadIdx.x & 31;
        for (u32 l = threadIdx.x >> 5; l < lines; l += LQ_TILE_THREADS / 32) {
            u32 base = l / inner * outer + l % inner, carry = 0;
            for (u32 k0 = 0; k0 < len; k0 += 32) {
                u32 k = k0 + lane, val = k < len ? v[base + k] : 0u;
                val = warp_inclusive_scan(val, lane);
                val += carry;
                if (k < len) v[base + k] = val;
                carry = __shfl_sync(FULL_MASK, val, 31);
            }
        }
    }
    __syncthreads();
}

// Element i of a group (tile i / m, position i % m inside it, x fastest): its grid index, or
// ~0 outside the grid.
__device__ __forceinline__ u64 lq_group_index(u32 i, u32 m, u32 tx, u32 ty, const u64* origin, const Geometry& g) {
    u32 t = i / m, local = i - t * m, r = local / tx, z = r / ty;
    u64 x = origin[3 * t + 2] + (local - r * tx), y = origin[3 * t + 1] + (r - z * ty), zz = origin[3 * t] + z;
    return (x < g.nx && y < g.ny && zz < g.nz) ? (zz * g.ny + y) * g.nx + x : ~0ull;
}

extern "C" __global__ void __launch_bounds__(LQ_TILE_THREADS) lq_tile_inverse(const i32* d, Geometry g, double step, real* out) {
    __shared__ u32 v[LQ_TILE_MAX];
    __shared__ u64 origin[3 * LQ_GROUP];
    const u32 tx = (u32)g.tx, ty = (u32)g.ty, tz = (u32)g.tz, plane = tx * ty, m = plane * tz;
    const u32 group = min((u32)LQ_GROUP, LQ_TILE_MAX / m);
    const u64 txs = (g.nx + g.tx - 1) / g.tx, tys = (g.ny + g.ty - 1) / g.ty, tzs = (g.nz + g.tz - 1) / g.tz;
    const u64 ntiles = txs * tys * tzs;
    for (u64 first = (u64)blockIdx.x * group; first < ntiles; first += (u64)gridDim.x * group) {
        u32 tiles = (u32)min((u64)group, ntiles - first), size = tiles * m;
        for (u32 t = threadIdx.x; t < tiles; t += LQ_TILE_THREADS) {
            u64 tile = first + t;
            origin[3 * t] = tile / (txs * tys) * g.tz;
            origin[3 * t + 1] = tile / txs % tys * g.ty;
            origin[3 * t + 2] = tile % txs * g.tx;
        }
        __syncthreads();
        for (u32 i = threadIdx.x; i < size; i += LQ_TILE_THREADS) {
            u64 at = lq_group_index(i, m, tx, ty, origin, g);
            v[i] = at != ~0ull ? (u32)d[at] : 0u;
        }
        __syncthreads();
        if (tx > 1) lq_tile_lines(v, tiles * ty * tz, tx, 1, 1, tx);
        if (ty > 1) lq_tile_lines(v, tiles * tx * tz, ty, tx, tx, plane);
        if (tz > 1) lq_tile_lines(v, tiles * plane, tz, plane, plane, m);
        for (u32 i = threadIdx.x; i < size; i += LQ_TILE_THREADS) {
            u64 at = lq_group_index(i, m, tx, ty, origin, g);
            if (at != ~0ull) out[at] = reconstruct((i32)v[i], (real)step);
        }
        __syncthreads();
    }
}

// The inverse for tiles one element deep in z whose rows hold a power of two of at most 32
// elements and whose columns at most LQ_BAND_ROWS (FZ-GPU's 16 × 16 among them), read
// straight from the codes when no delta outlier patches them (`codes` null: from `d`). A
// thread per column of a band of `ty` rows loads its column at once and sums it in registers;
// the lanes of each tile row (groups of `tx` lanes, aligned with the tiles) then scan across
// it by shuffles, and every value is written as it is known: one read of the codes and one
// write of the values, no shared memory. Sums wrap in u32 as in cpu.rs, so summing along y
// before x gives its bits. Compiled forms as in lq_band_rows: MAPPING fixed (LQ_FROM_DELTAS
// reads `d`), FULL bands without checks.
#define LQ_FROM_DELTAS 3
template <u32 MAPPING, bool FULL>
__device__ __forceinline__ void lq_band_sums(const unsigned short* codes, const i32* d, u64 base, u64 nx, u32 rows, bool inside,
                                             u32 tx, u32 radius, real step, real* out) {
    const u32 lane = threadIdx.x & 31, in_row = lane & (tx - 1);
    u32 v[LQ_BAND_ROWS];
    const unsigned short* code_at = codes + base;
    const i32* delta_at = d + base;
#pragma unroll
    for (u32 r = 0; r < LQ_BAND_ROWS; r++, code_at += nx, delta_at += nx) {
        if (FULL || (r < rows && inside))
            v[r] = MAPPING == LQ_FROM_DELTAS ? (u32)*delta_at : (u32)lq_decode(*code_at, MAPPING, radius);
        else
            v[r] = 0;
    }
    u32 column = 0;
    real* value_at = out + base;
#pragma unroll
    for (u32 r = 0; r < LQ_BAND_ROWS; r++, value_at += nx) {
        if (!FULL && r >= rows) break;
        column += v[r];
        u32 sum = column;
#pragma unroll
        for (u32 o = 1; o < 32; o <<= 1) {
            if (o < tx) {
                u32 t = __shfl_up_sync(FULL_MASK, sum, o, tx);
                if (in_row >= o) sum += t;
            }
        }
        if (FULL || inside) *value_at = reconstruct((i32)sum, step);
    }
}

extern "C" __global__ void __launch_bounds__(LQ_BAND_THREADS)
lq_band_inverse(const unsigned short* codes, const i32* d, u32 mapping, u32 radius, Geometry g, double step, real* out) {
    LqBand b;
    if (!lq_band(g, &b)) return;
    const u32 tx = (u32)g.tx;
    const real s = (real)step;
#define LQ_BAND_INVERSE(M)                                                                             \
    (b.full ? lq_band_sums<M, true>(codes, d, b.base, g.nx, b.rows, b.inside, tx, radius, s, out) \
            : lq_band_sums<M, false>(codes, d, b.base, g.nx, b.rows, b.inside, tx, radius, s, out))
    if (!codes) LQ_BAND_INVERSE(LQ_FROM_DELTAS);
    else if (mapping == LQ_SIGN_MAGNITUDE) LQ_BAND_INVERSE(LQ_SIGN_MAGNITUDE);
    else if (mapping == LQ_ZIGZAG) LQ_BAND_INVERSE(LQ_ZIGZAG);
    else LQ_BAND_INVERSE(LQ_RADIUS);
#undef LQ_BAND_INVERSE
}
