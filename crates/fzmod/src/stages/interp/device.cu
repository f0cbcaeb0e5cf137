// Interpolation on the device, after quantizer/device.cu (real, is_finite_real, quantize,
// reconstruct, real_bits, at_most, Params, fz_minmax/fz_resolve, q_tile_starts, varint_len,
// put_varint, block_exclusive_max, fz_scatter_outliers, Q_TILE, Q_THREADS, QI_RUN): cpu.rs and
// walk.rs step for step.
//
// Organisation: where an anchor box fits in shared memory, one thread block per box runs every
// level (ip_encode_box, ip_decode_box); otherwise one kernel launch per (level, pass) over the
// whole grid, values in global memory, exactly the CPU's level-by-level walk (the points of
// one pass are independent: each reads only points of earlier passes or levels). The
// per-level choice is scored by ip_costs (one thread block per sampled anchor block, level
// and candidate; integer sums, atomics) and picked by ip_select on the device; the forward
// kernels read it from device memory, so a pass launch covers the larger of the two sweep
// orders' point counts. The outlier list is written in index order like LorenzoQuant's
// lists: per Q_TILE a count and the last index, a max-scan, per-tile byte sizes, a scan, then
// the bytes, after the anchors' raw values.

struct IGeom {
    u64 nz, ny, nx, anchor;
};
static_assert(sizeof(IGeom) == 32, "IGeom: interp/device.rs");

// walk.rs Kind.
#define IP_LINEAR 0u
#define IP_CUBIC 1u

// cpu.rs feed: the value a point contributes to later predictions.
__device__ __forceinline__ real ip_feed(real v) { return is_finite_real(v) ? v : (real)0; }

// walk.rs stencil, in its exact operation order (no contraction: --fmad=false).
__device__ __forceinline__ real ip_stencil(u32 kind, bool has_a, bool has_c, bool has_d, real a, real b, real c, real d) {
    if (!has_c) return b;
    if (kind == IP_LINEAR || !(has_a || has_d)) return (b + c) * (real)0.5;
    if (has_a && has_d) {
        if (kind == IP_CUBIC) return ((b + c) * (real)9 - (a + d)) * (real)0.0625;
        return ((b + c) * (real)23 - (a + d) * (real)3) / (real)40;
    }
    if (!has_a) return (b * (real)3 + c * (real)6 - d) * (real)0.125;
    return (b * (real)6 + c * (real)3 - a) * (real)0.125;
}

// walk.rs neighbours + predict: the point idx at coordinate i along an axis of extent n whose
// element stride is o, level stride s.
__device__ __forceinline__ real ip_predict(const real* w, u32 kind, u64 idx, u64 i, u64 s, u64 n, u64 o, u64 anchor) {
    u64 base = i & ~(anchor - 1);  // the anchor stride is a power of two
    u64 end = min(base + anchor, n - 1);
    bool has_a = i >= base + 3 * s, has_c = i + s <= end, has_d = i + 3 * s <= end;
    u64 off = s * o;
    real b = w[idx - off];
    real c = has_c ? w[idx + off] : b;
    real a = has_a ? w[idx - 3 * off] : b;
    real d = has_d ? w[idx + 3 * off] : b;
    return ip_stencil(kind, has_a, has_c, has_d, a, b, c, d);
}

// walk.rs passes: pass j of the level with stride s under the choice byte (bit 2: x first).
struct IPass {
    u32 axis;
    u64 start[3], step[3];
};

__device__ __forceinline__ IPass ip_pass(u32 choice, u32 j, u64 s) {
    bool rev = (choice >> 2) & 1u;
    IPass p;
    for (int a = 0; a < 3; a++) {
        p.start[a] = 0;
        p.step[a] = 2 * s;
    }
    for (u32 k = 0; k < j; k++) p.step[rev ? 2 - k : k] = s;
    p.axis = rev ? 2 - j : j;
    p.start[p.axis] = s;
    return p;
}

// The points of a pass inside the box [lo, hi): per axis their count; the t-th of them (z, y,
// x ascending, x fastest) as its element index and its coordinate along the pass axis.
struct ILattice {
    u64 lo[3], cnt[3];
    IPass p;
    __device__ u64 total() const { return cnt[0] * cnt[1] * cnt[2]; }
    __device__ void point(u64 t, const IGeom& g, u64* idx, u64* coord) const {
        u64 kx, r, ky, kz;
        if ((t | cnt[1] | cnt[2]) >> 32 == 0) {  // 32-bit divisions where they suffice
            u32 t32 = (u32)t, r32 = t32 / (u32)cnt[2];
            kx = t32 - r32 * (u32)cnt[2], r = r32, ky = r32 % (u32)cnt[1], kz = r32 / (u32)cnt[1];
        } else {
            kx = t % cnt[2], r = t / cnt[2], ky = r % cnt[1], kz = r / cnt[1];
        }
        u64 z = lo[0] + p.start[0] + kz * p.step[0];
        u64 y = lo[1] + p.start[1] + ky * p.step[1];
        u64 x = lo[2] + p.start[2] + kx * p.step[2];
        *idx = (z * g.ny + y) * g.nx + x;
        *coord = p.axis == 0 ? z : p.axis == 1 ? y : x;
    }
};

__device__ __forceinline__ ILattice ip_lattice(const IPass& p, const u64* lo, const u64* hi) {
    ILattice l;
    l.p = p;
    for (int a = 0; a < 3; a++) {
        l.lo[a] = lo[a];
        u64 first = lo[a] + p.start[a];
        l.cnt[a] = hi[a] > first ? (hi[a] - first - 1) / p.step[a] + 1 : 0;
    }
    return l;
}

__device__ __forceinline__ u64 ip_axis_extent(const IGeom& g, u32 axis) { return axis == 0 ? g.nz : axis == 1 ? g.ny : g.nx; }
__device__ __forceinline__ u64 ip_axis_stride(const IGeom& g, u32 axis) { return axis == 0 ? g.ny * g.nx : axis == 1 ? g.nx : 1; }

// cpu.rs Params::code / outlier_code / level_code.
__device__ __forceinline__ unsigned short ip_code(i32 q, u32 radius, u32 zigzag) {
    if (zigzag) return (unsigned short)(((u32)q << 1) ^ (u32)(q >> 31));
    return (unsigned short)(u32)(q + (i32)radius);
}
__device__ __forceinline__ unsigned short ip_marker(u32 radius, u32 zigzag) { return zigzag ? (unsigned short)(2 * radius - 1) : (unsigned short)0; }
__device__ __forceinline__ i32 ip_level_code(unsigned short c, u32 radius, u32 zigzag) {
    if (zigzag) return (i32)(c >> 1) ^ -(i32)(c & 1);
    return (i32)c - (i32)radius;
}

// cpu.rs quantize_point's `within`.
__device__ __forceinline__ bool ip_within(real x, real p, i32 q, real step, u32 radius, double abs_bound, real* r) {
    *r = p + reconstruct(q, step);
    u32 mag = q < 0 ? 0u - (u32)q : (u32)q;
    return mag < radius && is_finite_real(*r) && fabs((double)x - (double)*r) <= abs_bound;
}

// cpu.rs quantize_point: true with (q, r), or false for an outlier. For f32 the fast test of
// cpu.rs RowCodes::quantize comes first: the rounded code whose reconstruction lies within
// `accept` in f32 (Params::accept) passes every check below, with the same code and value,
// so only the points it rejects pay the f64 ones.
__device__ __forceinline__ bool ip_quantize(real x, real p, real step, real recip, u32 radius, double abs_bound, float accept,
                                            i32* qo, real* ro) {
    real e = x - p;
#if !REAL_F64
    {
        i32 q = quantize(e, recip);
        real r = p + reconstruct(q, step);
        u32 mag = q < 0 ? 0u - (u32)q : (u32)q;
        if (mag < radius && fabsf(x - r) <= accept) {
            *qo = q;
            *ro = r;
            return true;
        }
    }
#endif
    // Range check before any conversion (NaN fails it).
    if (!(fabs((double)(e * recip)) < (double)radius)) return false;
    i32 q = quantize(e, recip);
    real r;
    if (ip_within(x, p, q, step, radius, abs_bound, &r)) {
        *qo = q;
        *ro = r;
        return true;
    }
    i32 side = (double)x < (double)(p + reconstruct(q, step)) ? q - 1 : q + 1;
    if (ip_within(x, p, side, step, radius, abs_bound, &r)) {
        *qo = side;
        *ro = r;
        return true;
    }
    return false;
}

// cpu.rs point_cost.
__device__ __forceinline__ u64 ip_point_cost(real x, real p, real recip) {
    real e = x - p;
    if (!(fabs((double)(e * recip)) < 1048576.0)) return 21;
    i32 q = quantize(e, recip);
    u32 mag = q < 0 ? 0u - (u32)q : (u32)q;
    return (u64)(32 - __clz(mag));
}

// ---- Forward ----

// cpu.rs level_steps: lsteps[2(l-1)] = h_l, lsteps[2(l-1)+1] = r_l (values of the element
// type, as f64), finest level first.
extern "C" __global__ void ip_level_steps(const Params* params, u32 levels, double alpha, double beta, double* lsteps) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    double abs_bound = params->abs_bound, power = 1.0;
    for (u32 l = 0; l < levels; l++) {
        if (l > 0) power = __dmul_rn(power, alpha);
        real step = at_most(__ddiv_rn(abs_bound, fmin(power, beta)));
        real recip = (double)step > 0.0 ? (real)0.5 / step : (real)0;
        lsteps[2 * l] = (double)step;
        lsteps[2 * l + 1] = (double)recip;
    }
}

#define IP_COST_THREADS 256
#define IP_CANDIDATES 6

// cpu.rs select, the sums: block (sample, level k * 6 + candidate) adds the cost of the
// candidate's passes of level k (coarsest first) inside sampled anchor block sample ·
// block_stride, predicting from the original values, to costs[k * 6 + candidate].
extern "C" __global__ void __launch_bounds__(IP_COST_THREADS)
ip_costs(const real* x, IGeom g, u64 block_stride, u32 levels, const double* lsteps, u64* costs) {
    u32 k = blockIdx.y / IP_CANDIDATES, cand = blockIdx.y % IP_CANDIDATES;
    u32 l = levels - k;
    u64 s = 1ull << (l - 1);
    real recip = (real)lsteps[2 * (l - 1) + 1];
    u32 choice = (cand >> 1) | (cand & 1u) << 2;
    u32 kind = cand >> 1;
    u64 a = g.anchor, bx = (g.nx + a - 1) / a, by = (g.ny + a - 1) / a;
    u64 b = (u64)blockIdx.x * block_stride;
    u64 lo[3] = {b / (by * bx) * a, b / bx % by * a, b % bx * a};
    u64 hi[3] = {min(lo[0] + a, g.nz), min(lo[1] + a, g.ny), min(lo[2] + a, g.nx)};
    u64 cost = 0;
    for (u32 j = 0; j < 3; j++) {
        ILattice lat = ip_lattice(ip_pass(choice, j, s), lo, hi);
        u64 n = ip_axis_extent(g, lat.p.axis), o = ip_axis_stride(g, lat.p.axis), total = lat.total();
        for (u64 t = threadIdx.x; t < total; t += blockDim.x) {
            u64 idx, i;
            lat.point(t, g, &idx, &i);
            cost += ip_point_cost(x[idx], ip_predict(x, kind, idx, i, s, n, o, a), recip);
        }
    }
    u64 sum;
    block_exclusive_scan(cost, &sum);
    if (threadIdx.x == 0 && sum > 0) atomicAdd(&costs[blockIdx.y], sum);
}

// cpu.rs select, the choice: per level the least sum, ties to the earlier candidate.
extern "C" __global__ void ip_select(const u64* costs, u32 levels, u32* choices) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (u32 k = 0; k < levels; k++) {
        u32 best = 0;
        for (u32 c = 1; c < IP_CANDIDATES; c++)
            if (costs[k * IP_CANDIDATES + c] < costs[k * IP_CANDIDATES + best]) best = c;
        choices[k] = (best >> 1) | (best & 1u) << 2;
    }
}

// The anchor grid's t-th point (C order) as an element index.
__device__ __forceinline__ u64 ip_anchor_index(u64 t, const IGeom& g) {
    u64 ax = (g.nx + g.anchor - 1) / g.anchor, ay = (g.ny + g.anchor - 1) / g.anchor;
    // anchors per axis: (n - 1) / A + 1 = ceil(n / A) for n >= 1
    u64 x = t % ax, r = t / ax, y = r % ay, z = r / ay;
    return (z * g.anchor * g.ny + y * g.anchor) * g.nx + x * g.anchor;
}

// Anchors: code of q = 0, fed value (when the levels run pass by pass over w), raw bytes into
// the side port in anchor-grid C order.
extern "C" __global__ void ip_anchors(const real* x, IGeom g, u64 count, unsigned short code0, real* w, unsigned short* codes, u8* side) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    u64 idx = ip_anchor_index(t, g);
    real v = x[idx];
    codes[idx] = code0;
    if (w) w[idx] = ip_feed(v);
    u64 bits = real_bits(v);
    for (int b = 0; b < (int)sizeof(real); b++) side[t * sizeof(real) + b] = (u8)(bits >> (8 * b));
}

// One pass of one level over the whole grid: level k (coarsest first, stride s), pass j of the
// choice the device selected. lsteps index l - 1 = levels - 1 - k.
extern "C" __global__ void ip_encode_pass(const real* x, real* w, unsigned short* codes, IGeom g, const u32* choices, u32 k, u32 j,
                                          u64 s, const double* lsteps, u32 levels, const Params* params, u32 radius, u32 zigzag,
                                          u32* any_outlier) {
    u32 choice = choices[k];
    u64 lo[3] = {0, 0, 0}, hi[3] = {g.nz, g.ny, g.nx};
    ILattice lat = ip_lattice(ip_pass(choice, j, s), lo, hi);
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= lat.total()) return;
    u64 idx, i;
    lat.point(t, g, &idx, &i);
    u32 axis = lat.p.axis;
    u32 lv = levels - 1 - k;
    real step = (real)lsteps[2 * lv], recip = (real)lsteps[2 * lv + 1];
    real p = ip_predict(w, choice & 3u, idx, i, s, ip_axis_extent(g, axis), ip_axis_stride(g, axis), g.anchor);
    real xv = x[idx];
    i32 q;
    real r;
    if (ip_quantize(xv, p, step, recip, radius, params->abs_bound, (float)params->accept, &q, &r)) {
        codes[idx] = ip_code(q, radius, zigzag);
        w[idx] = r;
    } else {
        codes[idx] = ip_marker(radius, zigzag);
        w[idx] = ip_feed(xv);
        atomicOr(any_outlier, 1u);
    }
}

// Per Q_TILE: outliers (codes equal to the marker) and (last outlier index + 1), as
// q_tile_starts takes them. A block loops over tiles (device.rs tile_loop_grid), and reads the
// codes only when the encode flagged an outlier: real fields mostly have none, and the codes
// are half the input's bytes.
extern "C" __global__ void __launch_bounds__(Q_THREADS)
ip_list_count(const unsigned short* codes, unsigned short marker, u64 n, u64 ntiles, const u32* any_outlier, u32* tile_count,
              u64* tile_next) {
    if (*any_outlier == 0) {
        for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < ntiles; t += (u64)gridDim.x * blockDim.x) {
            tile_count[t] = 0;
            tile_next[t] = 0;
        }
        return;
    }
    for (u64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        u64 first = tile * Q_TILE + (u64)threadIdx.x * QI_RUN;
        u32 count = 0;
        u64 next = 0;
        if (first + QI_RUN <= n) {
            // A thread's QI_RUN = 8 codes as one 16-byte load (a warp reads 512 bytes at once).
            uint4 v = *(const uint4*)(codes + first);
            u32 words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 8; j++)
                if ((unsigned short)(words[j / 2] >> (16 * (j & 1))) == marker) {
                    count++;
                    next = first + j + 1;
                }
        } else {
            for (int j = 0; j < QI_RUN && first + j < n; j++)
                if (codes[first + j] == marker) {
                    count++;
                    next = first + j + 1;
                }
        }
        q_tile_summary(count, next, tile_count + tile, tile_next + tile);
    }
}

// One tile of ip_list_bytes.
__device__ __forceinline__ void ip_tile_bytes(const unsigned short* codes, unsigned short marker, const real* x, u64 n, u64 tile,
                                              const u64* tile_next, u32* tile_bytes, u8* out, u32 write) {
    u64 first = tile * Q_TILE + (u64)threadIdx.x * QI_RUN;
    u64 last = 0;
    for (int j = 0; j < QI_RUN && first + j < n; j++)
        if (codes[first + j] == marker) last = first + j + 1;
    u64 next = block_exclusive_max(last, tile_next[tile]);
    u64 bytes = 0;
    for (u64 i = first, prev = next; i < min(n, first + QI_RUN); i++)
        if (codes[i] == marker) {
            bytes += varint_len(i - prev) + sizeof(real);
            prev = i + 1;
        }
    u64 total;
    u64 at = block_exclusive_scan(bytes, &total);
    if (!write) {
        if (threadIdx.x == 0) tile_bytes[tile] = (u32)total;
        return;
    }
    u8* o = out + at;
    for (u64 i = first, prev = next; i < min(n, first + QI_RUN); i++)
        if (codes[i] == marker) {
            o = put_varint(i - prev, o);
            u64 bits = real_bits(x[i]);
            for (int b = 0; b < (int)sizeof(real); b++) *o++ = (u8)(bits >> (8 * b));
            prev = i + 1;
        }
}

// `write` = 0: tile_bytes[tile] = the tile's entry bytes (varint gap + raw value each).
// `write` = 1: the entries at base + offsets[tile] of `out`, when base + offsets[ntiles] fits
// `capacity`. A block loops over tiles; tiles without outliers are skipped, and without any
// outlier the sizes are zeroed in coalesced strides.
extern "C" __global__ void __launch_bounds__(Q_THREADS)
ip_list_bytes(const unsigned short* codes, unsigned short marker, const real* x, u64 n, const u32* any_outlier, const u32* tile_count,
              const u64* tile_next, u64 ntiles, u32* tile_bytes, u64 base, const u64* offsets, u8* out, u64 capacity, u32 write) {
    if (*any_outlier == 0) {
        for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; !write && t < ntiles; t += (u64)gridDim.x * blockDim.x)
            tile_bytes[t] = 0;
        return;
    }
    if (write && base + offsets[ntiles] > capacity) return;
    for (u64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        if (tile_count[tile] == 0) {
            if (!write && threadIdx.x == 0) tile_bytes[tile] = 0;
            continue;
        }
        ip_tile_bytes(codes, marker, x, n, tile, tile_next, tile_bytes, write ? out + base + offsets[tile] : out, write);
    }
}

// The record's values: abs bound, step, the choice bytes packed 8 per word (level 0 in the
// low byte), and the side port's length (anchors, then the outlier list).
extern "C" __global__ void ip_export(const Params* params, const u32* choices, u32 levels, const u64* list_bytes, u64 anchor_bytes,
                                     u64* abs_bound, u64* step, u64* choices_lo, u64* choices_hi, u64* side_len) {
    *abs_bound = (u64)__double_as_longlong(params->abs_bound);
    *step = (u64)__double_as_longlong(params->step);
    u64 packed[2] = {0, 0};
    for (u32 k = 0; k < levels; k++) packed[k / 8] |= (u64)(choices[k] & 0xffu) << (8 * (k % 8));
    *choices_lo = packed[0];
    *choices_hi = packed[1];
    *side_len = anchor_bytes + *list_bytes;
}

// ---- Whole anchor boxes in shared memory ----
//
// Every stencil stays inside its anchor segment, so all levels of one closed anchor box
// [lo, lo + A] (clipped to the grid) depend on that box alone: one thread block takes a box
// through every level in shared memory, where the box fits (device.rs `box_launch`; 1-D and
// 2-D grids, small 3-D ones). The box is read with coalesced rows at the start and its owned
// part written the same way at the end. A box owns its points below lo + A on every axis; the
// far faces it shares with the next box are computed by both alike (same inputs, same
// operations) and written by their owner. The passes' lattices are worked out once per block
// (a table in shared memory): a box holds few points per pass and thread.

#define IP_BOX_THREADS 128
// Blocks per SM the shared memory allows a 2-D box of A = 64 (65 × 72 values and codes and
// the pass table, 32 KiB): registers are capped to match.
#define IP_BOX_MIN_BLOCKS 7
#define IP_MAX_LEVELS 12

// t / d for t · d < 2^32 (box sizes) by a multiply-high with m = ⌈2^32 / d⌉ (0 for d = 1).
__device__ __forceinline__ u32 ip_magic(u32 d) { return d > 1 ? 0xffffffffu / d + 1 : 0; }
__device__ __forceinline__ u32 ip_div(u32 t, u32 m) { return m ? __umulhi(t, m) : t; }

// The box of thread block b: its first element's grid index; per axis its first grid
// coordinate, closed extent and owned extent; the row pitch of its shared arrays (device.rs
// box_launch: the x extent rounded up to 8 elements, so that every shared row of values and
// of u16 codes starts 16-byte aligned).
struct IBox {
    u64 first;
    u32 ext[3], own[3], pitch;
    // Local coordinates → shared-memory slot and grid index.
    __device__ u32 slot(u32 z, u32 y, u32 x) const { return (z * ext[1] + y) * pitch + x; }
    __device__ u64 index(const IGeom& g, u32 z, u32 y, u32 x) const { return first + ((u64)z * g.ny + y) * g.nx + x; }
};

__device__ __forceinline__ IBox ip_box(const IGeom& g, u64 b) {
    u64 a = g.anchor, bx = (g.nx + a - 1) / a, by = (g.ny + a - 1) / a;
    u64 c[3] = {b / (by * bx), b / bx % by, b % bx};
    u64 n[3] = {g.nz, g.ny, g.nx}, lo[3];
    IBox box;
#pragma unroll
    for (int k = 0; k < 3; k++) {
        lo[k] = c[k] * a;
        box.ext[k] = (u32)min(a, n[k] - 1 - lo[k]) + 1;
        box.own[k] = (u32)min(a, n[k] - lo[k]);
    }
    box.pitch = (box.ext[2] + 7) & ~7u;
    box.first = (lo[0] * g.ny + lo[1]) * g.nx + lo[2];
    return box;
}

// One pass inside the box: its points' lattice (per axis first local coordinate, log2 step,
// count; multiply-high divisors of the x and y counts), the axis it interpolates along with
// its shared-memory stride and last box coordinate, the stride s and the level's choice.
struct IBoxPass {
    u32 first[3], log_step[3], cnt[3], magic_x, magic_y, total;
    u32 axis, stride, end, s, kind, level;
    // The t-th point's local coordinates (z, y, x ascending, x fastest).
    __device__ void point(u32 t, u32* c) const {
        u32 r = ip_div(t, magic_x), kz = ip_div(r, magic_y);
        c[0] = first[0] + (kz << log_step[0]);
        c[1] = first[1] + ((r - kz * cnt[1]) << log_step[1]);
        c[2] = first[2] + ((t - r * cnt[2]) << log_step[2]);
    }
    // The coordinate along the pass axis, by selects: an index c[axis] would put c in local
    // memory (a store and a load per point).
    __device__ u32 along(const u32* c) const { return axis == 0 ? c[0] : axis == 1 ? c[1] : c[2]; }
};

static_assert(sizeof(IBoxPass) * 3 * IP_MAX_LEVELS <= 4096, "the pass table fits what device.rs BOX_SHARED_LIMIT leaves");

// Pass j of level k (coarsest first) under `choice` (walk.rs passes: axes swept before the
// pass at multiples of s, its own at odd multiples of s, later ones at multiples of 2s).
__device__ IBoxPass ip_box_pass(const IBox& box, u32 levels, u32 k, u32 j, u32 choice) {
    IBoxPass p;
    u32 log_s = levels - 1 - k;
    bool reverse = (choice >> 2) & 1u;
    p.axis = reverse ? 2 - j : j;
    p.s = 1u << log_s;
    p.kind = choice & 3u;
    p.level = log_s;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        u32 place = reverse ? 2 - a : a;
        p.first[a] = place == j ? p.s : 0;
        p.log_step[a] = place < j ? log_s : log_s + 1;
        p.cnt[a] = box.ext[a] > p.first[a] ? ((box.ext[a] - 1 - p.first[a]) >> p.log_step[a]) + 1 : 0;
    }
    p.total = p.cnt[0] * p.cnt[1] * p.cnt[2];
    p.magic_x = ip_magic(p.cnt[2]);
    p.magic_y = ip_magic(p.cnt[1]);
    p.stride = p.axis == 0 ? box.ext[1] * box.pitch : p.axis == 1 ? box.pitch : 1;
    p.end = (p.axis == 0 ? box.ext[0] : p.axis == 1 ? box.ext[1] : box.ext[2]) - 1;  // no local array
    return p;
}

// The pass table of a box: thread t < 3 · levels writes pass t % 3 of level t / 3.
__device__ __forceinline__ void ip_box_passes(const IBox& box, u32 levels, const u32* choices, IBoxPass* table) {
    if (threadIdx.x < 3 * levels) table[threadIdx.x] = ip_box_pass(box, levels, threadIdx.x / 3, threadIdx.x % 3, choices[threadIdx.x / 3]);
}

// t over [0, count) across the block, K per thread in flight: at(t) gives the t-th item's
// place; it is read (from the grid when to_shared) and then written to the other side.
struct IPlace {
    u64 grid;
    u32 shared;
};
template <typename W, int K, typename At>
__device__ __forceinline__ void ip_box_batches(u32 count, At at, W* grid, W* shared, bool to_shared) {
    for (u32 base = threadIdx.x; base < count; base += K * blockDim.x) {
        W v[K];
        IPlace p[K];
#pragma unroll
        for (u32 k = 0; k < K; k++) {
            u32 t = base + k * blockDim.x;
            if (t < count) {
                p[k] = at(t);
                v[k] = to_shared ? grid[p[k].grid] : shared[p[k].shared];
            }
        }
#pragma unroll
        for (u32 k = 0; k < K; k++)
            if (base + k * blockDim.x < count) {
                if (to_shared) {
                    shared[p[k].shared] = v[k];
                } else {
                    grid[p[k].grid] = v[k];
                }
            }
    }
}

// Move the part of the box of extents e (its closed extents or its owned ones) between the
// grid array `grid` and the box's shared array `shared`: to the shared array when to_shared,
// else back. Where every grid row of the box starts 16-byte aligned (the array, the box's
// first index and the row length nx all allow it), the rows move as 16-byte words (shared
// rows are aligned by the pitch) and only their last e[2] mod 16 / sizeof(T) elements one by
// one: a box copy was a fifth of the box kernels' instructions element by element.
template <typename T>
__device__ __forceinline__ void ip_box_move(T* grid, T* shared, const IBox& box, const IGeom& g, const u32* e, bool to_shared) {
    constexpr u32 V = 16 / sizeof(T);
    u32 rows = e[0] * e[1], my = ip_magic(e[1]);
    bool aligned = ((u64)grid & 15) == 0 && box.first % V == 0 && g.nx % V == 0;
    u32 vectors = aligned ? e[2] / V : 0, rest = e[2] - vectors * V;
    // Row r of the part is (z, y) = (r / e[1], r mod e[1]); element x of it lies at
    // index(z, y, x) in the grid and slot(z, y, x) in shared memory.
    auto place = [&](u32 r, u32 x) {
        u32 z = ip_div(r, my), y = r - z * e[1];
        return IPlace{box.index(g, z, y, x), box.slot(z, y, x)};
    };
    u32 mv = ip_magic(vectors), mr = ip_magic(rest);
    auto word = [&](u32 t) {
        u32 r = ip_div(t, mv);
        IPlace p = place(r, (t - r * vectors) * V);
        return IPlace{p.grid / V, p.shared / V};
    };
    ip_box_batches<uint4, 2>(rows * vectors, word, (uint4*)grid, (uint4*)shared, to_shared);
    auto element = [&](u32 t) {
        u32 r = ip_div(t, mr);
        return place(r, vectors * V + t - r * rest);
    };
    ip_box_batches<T, 4>(rows * rest, element, grid, shared, to_shared);
}

// ip_predict inside a box: local coordinate i along the pass axis.
__device__ __forceinline__ real ip_predict_box(const real* w, const IBoxPass& p, u32 at, u32 i) {
    bool has_a = i >= 3 * p.s, has_c = i + p.s <= p.end, has_d = i + 3 * p.s <= p.end;
    u32 off = p.s * p.stride;
    real b = w[at - off];
    real c = has_c ? w[at + off] : b;
    real a = has_a ? w[at - 3 * off] : b;
    real d = has_d ? w[at + 3 * off] : b;
    return ip_stencil(p.kind, has_a, has_c, has_d, a, b, c, d);
}

// The box's anchors (local coordinates 0 or A on each axis): thread k < 8 finds the k-th
// corner, or returns false where the box has no such corner.
__device__ __forceinline__ bool ip_box_anchor(const IBox& box, const IGeom& g, u32* c) {
    if (threadIdx.x >= 8) return false;
    u32 bits[3] = {threadIdx.x >> 2 & 1u, threadIdx.x >> 1 & 1u, threadIdx.x & 1u};
#pragma unroll
    for (int k = 0; k < 3; k++) {
        c[k] = bits[k] * (u32)g.anchor;
        if (c[k] >= box.ext[k]) return false;
    }
    return true;
}

// Forward, every level of one box per thread block (the choices and steps ip_select and
// ip_level_steps left on the device); the anchors' side bytes come from ip_anchors. The box's
// input values wait in `w` until their pass replaces them by their reconstruction.
extern "C" __global__ void __launch_bounds__(IP_BOX_THREADS, IP_BOX_MIN_BLOCKS)
ip_encode_box(const real* x, unsigned short* codes, IGeom g, const u32* choices, u32 levels, const double* lsteps,
              const Params* params, u32 radius, u32 zigzag, unsigned short code0, u32* any_outlier) {
    extern __shared__ __align__(16) unsigned char ip_smem[];
    __shared__ IBoxPass table[3 * IP_MAX_LEVELS];
    IBox box = ip_box(g, blockIdx.x);
    real* w = (real*)ip_smem;
    unsigned short* box_codes = (unsigned short*)(w + box.ext[0] * box.ext[1] * box.pitch);
    double abs_bound = params->abs_bound;
    float accept = (float)params->accept;
    ip_box_passes(box, levels, choices, table);
    ip_box_move<real>((real*)x, w, box, g, box.ext, true);
    __syncthreads();
    u32 c[3];
    if (ip_box_anchor(box, g, c)) {
        u32 at = box.slot(c[0], c[1], c[2]);
        w[at] = ip_feed(w[at]);
        box_codes[at] = code0;
    }
    __syncthreads();
    bool outlier = false;
    for (u32 id = 0; id < 3 * levels; id++) {
        const IBoxPass p = table[id];
        if (p.total == 0) continue;
        real step = (real)lsteps[2 * p.level], recip = (real)lsteps[2 * p.level + 1];
        for (u32 t = threadIdx.x; t < p.total; t += blockDim.x) {
            p.point(t, c);
            u32 at = box.slot(c[0], c[1], c[2]);
            real pred = ip_predict_box(w, p, at, p.along(c));
            real xv = w[at];
            i32 q;
            real r;
            if (ip_quantize(xv, pred, step, recip, radius, abs_bound, accept, &q, &r)) {
                box_codes[at] = ip_code(q, radius, zigzag);
            } else {
                box_codes[at] = ip_marker(radius, zigzag);
                r = ip_feed(xv);
                outlier = true;
            }
            w[at] = r;
        }
        __syncthreads();
    }
    if (__syncthreads_or(outlier) && threadIdx.x == 0) atomicOr(any_outlier, 1u);
    ip_box_move<unsigned short>(codes, box_codes, box, g, box.own, false);
}

// ---- Inverse ----

// Anchor values (anchor-grid C order) into w: fed (before the levels) or raw (after).
extern "C" __global__ void ip_put_anchors(const real* values, IGeom g, u64 count, u32 fed, real* w) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    real v = values[t];
    w[ip_anchor_index(t, g)] = fed ? ip_feed(v) : v;
}

// Which elements the outlier list stores (bit i of `stored`, set by ip_mark_outliers; null
// without outliers): an outlier code's value is `out`'s where its element is stored, else 0, as
// cpu.rs decodes a marker the list lacks (a corrupt archive) from its zeroed output. A bitmap
// of n bits instead of a zeroed output of n values: the decoder writes every other element.
extern "C" __global__ void ip_mark_outliers(const u64* index, u64 count, u32* stored) {
    u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count) atomicOr(&stored[index[k] >> 5], 1u << (index[k] & 31));
}
__device__ __forceinline__ real ip_stored(const real* out, const u32* stored, u64 idx) {
    return stored && (stored[idx >> 5] >> (idx & 31) & 1u) ? out[idx] : (real)0;
}

// One pass of one level: the marker keeps the (outlier) value already in place, fed; any other
// code adds its reconstruction to the prediction.
extern "C" __global__ void ip_decode_pass(const unsigned short* codes, real* w, const u32* stored, IGeom g, u32 choice, u32 j, u64 s,
                                          double step_f64, u32 radius, u32 zigzag) {
    u64 lo[3] = {0, 0, 0}, hi[3] = {g.nz, g.ny, g.nx};
    ILattice lat = ip_lattice(ip_pass(choice, j, s), lo, hi);
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= lat.total()) return;
    u64 idx, i;
    lat.point(t, g, &idx, &i);
    u32 axis = lat.p.axis;
    unsigned short c = codes[idx];
    if (c == ip_marker(radius, zigzag)) {
        w[idx] = ip_feed(ip_stored(w, stored, idx));
    } else {
        real p = ip_predict(w, choice & 3u, idx, i, s, ip_axis_extent(g, axis), ip_axis_stride(g, axis), g.anchor);
        w[idx] = p + reconstruct(ip_level_code(c, radius, zigzag), (real)step_f64);
    }
}

// Inverse, every level of one box per thread block: `out` holds the fed anchors and the
// stored outliers in place; the owned part of the box is written back whole.
extern "C" __global__ void __launch_bounds__(IP_BOX_THREADS, IP_BOX_MIN_BLOCKS)
ip_decode_box(const unsigned short* codes, real* out, const u32* stored, IGeom g, const u32* choices, u32 levels, const double* steps,
              u32 radius, u32 zigzag) {
    extern __shared__ __align__(16) unsigned char ip_smem[];
    __shared__ IBoxPass table[3 * IP_MAX_LEVELS];
    IBox box = ip_box(g, blockIdx.x);
    real* w = (real*)ip_smem;
    unsigned short* box_codes = (unsigned short*)(w + box.ext[0] * box.ext[1] * box.pitch);
    ip_box_passes(box, levels, choices, table);
    ip_box_move<unsigned short>((unsigned short*)codes, box_codes, box, g, box.ext, true);
    u32 c[3];
    if (ip_box_anchor(box, g, c)) w[box.slot(c[0], c[1], c[2])] = out[box.index(g, c[0], c[1], c[2])];
    __syncthreads();
    unsigned short marker = ip_marker(radius, zigzag);
    for (u32 id = 0; id < 3 * levels; id++) {
        const IBoxPass p = table[id];
        if (p.total == 0) continue;
        real step = (real)steps[p.level];
        for (u32 t = threadIdx.x; t < p.total; t += blockDim.x) {
            p.point(t, c);
            u32 at = box.slot(c[0], c[1], c[2]);
            unsigned short code = box_codes[at];
            // An outlier's value waits in `out` (its owner may have written it back fed:
            // feeding twice gives the same value).
            w[at] = code == marker ? ip_feed(ip_stored(out, stored, box.index(g, c[0], c[1], c[2])))
                                   : ip_predict_box(w, p, at, p.along(c)) + reconstruct(ip_level_code(code, radius, zigzag), step);
        }
        __syncthreads();
    }
    ip_box_move<real>(out, w, box, g, box.own, false);
}

// ---- Code order (order.rs) ----

// order.rs lattice axis count: points first, first + step, ... below n.
__device__ __forceinline__ u64 ip_axis_count(u64 n, u64 first, u64 step) { return n > first ? (n - 1 - first) / step + 1 : 0; }

// order.rs position: the level-order position of element t. Group 0 holds the anchors; group
// 1 + 7·level + mask − 1 the points whose axes in mask (bit k = axis k) are odd multiples of
// the stride s = A >> (level + 1) and whose other axes are multiples of 2s (level 0 coarsest).
__device__ __forceinline__ u64 ip_level_position(u64 t, const IGeom& g, const u64* offsets) {
    u64 dims[3] = {g.nz, g.ny, g.nx};
    u64 c[3] = {t / (g.ny * g.nx), t / g.nx % g.ny, t % g.nx};
    u64 low[3];
    for (int a = 0; a < 3; a++) low[a] = c[a] == 0 ? g.anchor : min(c[a] & (~c[a] + 1), g.anchor);
    u64 s = min(low[0], min(low[1], low[2]));
    u64 group = 0, first[3] = {0, 0, 0}, step = g.anchor;
    if (s < g.anchor) {
        u32 mask = 0;
        for (int a = 0; a < 3; a++)
            if (low[a] == s) {
                mask |= 1u << a;
                first[a] = s;
            }
        u32 level = __ffsll((long long)(g.anchor / s)) - 2; // log2(A / s) - 1
        group = 1 + 7 * (u64)level + mask - 1;
        step = 2 * s;
    }
    u64 rank = 0;
    for (int a = 0; a < 3; a++) rank = rank * ip_axis_count(dims[a], first[a], step) + (c[a] - first[a]) / step;
    return offsets[group] + rank;
}

// Natural ↔ level order: `inverse` = 0 scatters element t to its position, 1 gathers it back.
extern "C" __global__ void ip_code_order(const unsigned short* in, unsigned short* out, IGeom g, const u64* offsets, u32 inverse) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= g.nz * g.ny * g.nx) return;
    u64 pos = ip_level_position(t, g, offsets);
    if (inverse) {
        out[t] = in[pos];
    } else {
        out[pos] = in[t];
    }
}
