// Bitshuffle on the device: one thread per group of 8 elements × one byte of the element,
// the same 8×8 bit transpose cpu.rs applies (the CPU's 32-word path gives the same bytes).

// bit_transpose.rs: transpose8.
__device__ __forceinline__ u64 transpose8(u64 x) {
    u64 t = (x ^ (x >> 7)) & 0x00aa00aa00aa00aaull;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000cccc0000ccccull;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000f0f0f0f0ull;
    return x ^ t ^ (t << 28);
}

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
    x = transpose8(x);
    for (int i = 0; i < 8; i++) dst[inverse ? (8 * k + i) * width + b : (8 * b + i) * plane_len + k] = (u8)(x >> (8 * i));
}

// Blocks of at most BS_STAGE bytes (PFPL's 16 KiB): one thread block per shuffle block loads it
// into shared memory, transposes every group there and stores the result, so that global
// memory sees consecutive threads on consecutive words instead of bs_run's byte gathers and
// scatters with a stride of a plane. Same groups, same transposes, same bytes.
#define BS_STAGE 16384
#define BS_THREADS 256

// byte `i` of the words `w` (little endian).
__device__ __forceinline__ u32 byte_of(const u32* w, int i) { return (w[i >> 2] >> (8 * (i & 3))) & 0xffu; }

// The group side of bs_block where both ends are 16-byte aligned (every PFPL block): thread k
// moves group k's 8·W contiguous bytes as whole 8- or 16-byte words and its plane bytes one by
// one, so that consecutive threads touch consecutive plane bytes (no bank conflicts) and the
// group's words stay in registers (the loops are unrolled).
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
        } else {
#pragma unroll
            for (int j = 0; j < 2 * W; j++) w[j] = 0;
        }
#pragma unroll
        for (int b = 0; b < W; b++) {
            u64 x = 0;
#pragma unroll
            for (int j = 0; j < 8; j++)
                x |= (u64)(INVERSE ? src[(8 * b + j) * plane_len + k] : byte_of(w, j * W + b)) << (8 * j);
            x = transpose8(x);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                u32 v = (u32)(x >> (8 * i)) & 0xffu;
                if (INVERSE) w[(i * W + b) >> 2] |= v << (8 * ((i * W + b) & 3));
                else dst[(8 * b + i) * plane_len + k] = (u8)v;
            }
        }
        if (INVERSE) {
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
        x = transpose8(x);
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
