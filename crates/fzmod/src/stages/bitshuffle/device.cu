// Bitshuffle on the device: one thread per group of 8 elements × one byte of the element,
// the same 8×8 bit transpose cpu.rs applies (the CPU's 32-word path gives the same bytes;
// fz_transpose8 is common.cu's).

// Thread t owns bytes 8t..8t+8 of the data's group slots: block = 8t / block_bytes (blocks
// are whole groups), group g = k·width + b of that block. The first thread of a block copies
// its tail (only the last block has one). `inverse` swaps source and destination layouts.
extern "C" __global__ void bs_run(const u8* in, u8* out, u64 len, u32 width, u64 block_bytes, u32 inverse) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (len + 7) / 8) return;
    u64 start = t * 8 / block_bytes * block_bytes, g = t - start / 8;
    u64 blen = min(block_bytes, len - start), body = blen / (8 * width) * (8 * width);
    const u8* src = in + start;
    u8* dst = out + start;
    if (g == 0)
        for (u64 i = body; i < blen; i++) dst[i] = src[i];
    if (g * 8 >= body) return;
    u64 plane_len = body / (8 * width), k = g / width, b = g % width;
    u64 x = 0;
    for (int j = 0; j < 8; j++)
        x |= (u64)src[inverse ? (8 * b + j) * plane_len + k : (8 * k + j) * width + b] << (8 * j);
    x = fz_transpose8(x);
    for (int i = 0; i < 8; i++) dst[inverse ? (8 * k + i) * width + b : (8 * b + i) * plane_len + k] = (u8)(x >> (8 * i));
}

// Blocks of at most BS_STAGE bytes (PFPL's 16 KiB): one thread block per shuffle block loads it
// into shared memory, transposes every group there and stores the result, so that global
// memory sees consecutive threads on consecutive words instead of bs_run's byte gathers and
// scatters with a stride of a plane. Same groups, same transposes, same bytes.
#define BS_STAGE 16384
#define BS_THREADS 256

// Byte b of each of a group's 8 elements of W bytes (held in w[0..2W), little endian),
// element e in byte e of the result: byte e·W + b of the group, gathered by byte permutes.
template <int W>
__device__ __forceinline__ u64 plane_gather(const u32* w, int b) {
    u32 lo, hi;
    if (W == 1) {
        lo = w[0], hi = w[1];
    } else if (W == 2) {
        u32 s = b | (b + 2) << 4 | (b + 4) << 8 | (b + 6) << 12;
        lo = __byte_perm(w[0], w[1], s), hi = __byte_perm(w[2], w[3], s);
    } else {
        const int q = W / 4, o = b >> 2;  // words per element; the word of byte b in one
        u32 s = (b & 3) | ((b & 3) + 4) << 4;
        u32 p0 = __byte_perm(w[o], w[q + o], s), p1 = __byte_perm(w[2 * q + o], w[3 * q + o], s);
        u32 p2 = __byte_perm(w[4 * q + o], w[5 * q + o], s), p3 = __byte_perm(w[6 * q + o], w[7 * q + o], s);
        lo = __byte_perm(p0, p1, 0x5410), hi = __byte_perm(p2, p3, 0x5410);
    }
    return (u64)hi << 32 | lo;
}

// The 4×4 byte transpose: out[e·stride] gets byte e of a0, a1, a2, a3 (in that order).
__device__ __forceinline__ void transpose4(u32 a0, u32 a1, u32 a2, u32 a3, u32* out, int stride) {
    u32 u = __byte_perm(a0, a1, 0x5140), v = __byte_perm(a0, a1, 0x7362);
    u32 u2 = __byte_perm(a2, a3, 0x5140), v2 = __byte_perm(a2, a3, 0x7362);
    out[0] = __byte_perm(u, u2, 0x5410), out[stride] = __byte_perm(u, u2, 0x7632);
    out[2 * stride] = __byte_perm(v, v2, 0x5410), out[3 * stride] = __byte_perm(v, v2, 0x7632);
}

// plane_gather's inverse: xs[b] holds byte b of the 8 elements; the group's words to w.
template <int W>
__device__ __forceinline__ void plane_scatter(const u64* xs, u32* w) {
    if (W == 1) {
        w[0] = (u32)xs[0], w[1] = (u32)(xs[0] >> 32);
    } else if (W == 2) {
        for (int h = 0; h < 2; h++) {
            u32 a = (u32)(xs[0] >> (32 * h)), c = (u32)(xs[1] >> (32 * h));
            w[2 * h] = __byte_perm(a, c, 0x5140), w[2 * h + 1] = __byte_perm(a, c, 0x7362);
        }
    } else {
        // Element e's bytes 4r..4r+4 are word e·W/4 + r.
#pragma unroll
        for (int r = 0; r < W / 4; r++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                transpose4((u32)(xs[4 * r] >> (32 * h)), (u32)(xs[4 * r + 1] >> (32 * h)), (u32)(xs[4 * r + 2] >> (32 * h)),
                           (u32)(xs[4 * r + 3] >> (32 * h)), w + 4 * h * (W / 4) + r, W / 4);
    }
}

// The group side of bs_block where both ends are 16-byte aligned (every PFPL block): thread k
// moves group k's 8·W contiguous bytes as whole 8- or 16-byte words and its plane bytes one by
// one, so that consecutive threads touch consecutive plane bytes (no bank conflicts) and the
// group's words stay in registers (the loops are unrolled; bytes move by byte permutes).
template <int W, bool INVERSE>
__device__ __forceinline__ void bs_groups(const u8* src, u8* dst, u32 plane_len) {
    for (u32 k = threadIdx.x; k < plane_len; k += blockDim.x) {
        u32 w[2 * W];  // the group's 8 elements
        if (!INVERSE) {
            if (W == 1) {
                u64 v = *(const u64*)(src + 8 * k);
                w[0] = (u32)v;
                w[1] = (u32)(v >> 32);
            } else {
#pragma unroll
                for (int h = 0; h < W / 2; h++) {
                    uint4 v = ((const uint4*)(src + 8 * W * k))[h];
                    w[4 * h] = v.x, w[4 * h + 1] = v.y, w[4 * h + 2] = v.z, w[4 * h + 3] = v.w;
                }
            }
#pragma unroll
            for (int b = 0; b < W; b++) {
                u64 x = fz_transpose8(plane_gather<W>(w, b));
#pragma unroll
                for (int i = 0; i < 8; i++) dst[(8 * b + i) * plane_len + k] = (u8)(x >> (8 * i));
            }
        } else {
            u64 xs[W];
#pragma unroll
            for (int b = 0; b < W; b++) {
                u32 lo = 0, hi = 0;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    lo |= (u32)src[(8 * b + j) * plane_len + k] << (8 * j);
                    hi |= (u32)src[(8 * b + 4 + j) * plane_len + k] << (8 * j);
                }
                xs[b] = fz_transpose8((u64)hi << 32 | lo);
            }
            plane_scatter<W>(xs, w);
            if (W == 1) {
                *(u64*)(dst + 8 * k) = (u64)w[0] | (u64)w[1] << 32;
            } else {
#pragma unroll
                for (int h = 0; h < W / 2; h++)
                    ((uint4*)(dst + 8 * W * k))[h] = make_uint4(w[4 * h], w[4 * h + 1], w[4 * h + 2], w[4 * h + 3]);
            }
        }
    }
}

// bs_groups for a width and direction known only at run time.
__device__ __forceinline__ void bs_groups_any(const u8* src, u8* dst, u32 plane_len, u32 width, u32 inverse) {
    switch (width * 2 + (inverse ? 1 : 0)) {
        case 2: bs_groups<1, false>(src, dst, plane_len); break;
        case 3: bs_groups<1, true>(src, dst, plane_len); break;
        case 4: bs_groups<2, false>(src, dst, plane_len); break;
        case 5: bs_groups<2, true>(src, dst, plane_len); break;
        case 8: bs_groups<4, false>(src, dst, plane_len); break;
        case 9: bs_groups<4, true>(src, dst, plane_len); break;
        case 16: bs_groups<8, false>(src, dst, plane_len); break;
        default: bs_groups<8, true>(src, dst, plane_len); break;
    }
}

// Shuffle one block of `blen` bytes from `src` to `dst` (distinct; shared memory is fastest).
__device__ __forceinline__ void bs_block(const u8* src, u8* dst, u32 blen, u32 width, u32 inverse) {
    u32 body = blen / (8 * width) * (8 * width), plane_len = body / (8 * width);
    if ((((u64)src | (u64)dst) & 15) == 0) {
        bs_groups_any(src, dst, plane_len, width, inverse);
        for (u32 i = body + threadIdx.x; i < blen; i += blockDim.x) dst[i] = src[i];
        return;
    }
    for (u32 g = threadIdx.x; g < body / 8; g += blockDim.x) {
        u32 k = g / width, b = g % width;
        u64 x = 0;
        for (int j = 0; j < 8; j++)
            x |= (u64)src[inverse ? (8 * b + j) * plane_len + k : (8 * k + j) * width + b] << (8 * j);
        x = fz_transpose8(x);
        for (int i = 0; i < 8; i++) dst[inverse ? (8 * k + i) * width + b : (8 * b + i) * plane_len + k] = (u8)(x >> (8 * i));
    }
    for (u32 i = body + threadIdx.x; i < blen; i += blockDim.x) dst[i] = src[i];
}

extern "C" __global__ void __launch_bounds__(BS_THREADS) bs_blocks(const u8* in, u8* out, u64 len, u32 width, u64 block_bytes, u32 inverse) {
    __shared__ __align__(16) u8 src[BS_STAGE];
    __shared__ __align__(16) u8 dst[BS_STAGE];
    for (u64 start = (u64)blockIdx.x * block_bytes; start < len; start += (u64)gridDim.x * block_bytes) {
        u32 blen = (u32)min(block_bytes, len - start);
        fz_block_copy(src, in + start, blen);
        __syncthreads();
        bs_block(src, dst, blen, width, inverse);
        __syncthreads();
        fz_block_copy(out + start, dst, blen);
        __syncthreads();
    }
}

// Fragment of a fused region (backend/cuda/region.rs): every block of a tile (tiles start at
// block boundaries).
__device__ __forceinline__ void bs_tile(const u8* in, u8* out, u32 bytes, u32 block, u32 width, u32 inverse) {
    for (u32 start = 0; start < bytes; start += block) bs_block(in + start, out + start, min(block, bytes - start), width, inverse);
}
