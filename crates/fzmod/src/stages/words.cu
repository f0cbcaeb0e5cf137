// Word maps of words.rs on the device: 16- or 32-bit words held in u32 registers, masked to
// their width, so one kernel serves both widths and every op wraps as the CPU's does.

#define WMAP_NONE 0
#define WMAP_NEGABINARY 1
#define WMAP_ZIGZAG 2

__device__ __forceinline__ u32 word_mask(u32 bits) { return bits == 16 ? 0xffffu : 0xffffffffu; }

// The forward map `op` of one word (words.rs: zigzag, negabinary).
__device__ __forceinline__ u32 word_apply(u32 v, u32 bits, u32 op) {
    u32 m = word_mask(bits), a = 0xaaaaaaaau & m;
    if (op == WMAP_NEGABINARY) return ((v + a) ^ a) & m;
    if (op == WMAP_ZIGZAG) return ((v << 1) ^ (0u - ((v >> (bits - 1)) & 1u))) & m;
    return v & m;
}

// Inverse of word_apply.
__device__ __forceinline__ u32 word_undo(u32 v, u32 bits, u32 op) {
    u32 m = word_mask(bits), a = 0xaaaaaaaau & m;
    if (op == WMAP_NEGABINARY) return ((v ^ a) - a) & m;
    if (op == WMAP_ZIGZAG) return ((v >> 1) ^ (0u - (v & 1u))) & m;
    return v & m;
}

__device__ __forceinline__ u32 word_load(const void* p, u64 i, u32 bits) {
    return bits == 16 ? (u32)((const unsigned short*)p)[i] : ((const u32*)p)[i];
}

__device__ __forceinline__ void word_store(void* p, u64 i, u32 bits, u32 v) {
    if (bits == 16) ((unsigned short*)p)[i] = (unsigned short)v;
    else ((u32*)p)[i] = v;
}

// out[i] = map(in[i]) (inverse map when `undo`): Zigzag and Negabinary, both directions.
extern "C" __global__ void w_map(const void* in, void* out, u64 n, u32 bits, u32 op, u32 undo) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 v = word_load(in, i, bits);
    word_store(out, i, bits, undo ? word_undo(v, bits, op) : word_apply(v, bits, op));
}

// Fragment of a fused region (backend/cuda/region.rs): `bytes` bytes of words mapped from `in`
// into `out` (inverse map when `undo`), consecutive threads on consecutive words.
__device__ __forceinline__ void w_map_tile(const void* in, void* out, u32 bytes, u32 bits, u32 op, u32 undo) {
    for (u32 i = threadIdx.x; i < bytes / (bits / 8); i += blockDim.x) {
        u32 v = word_load(in, i, bits);
        word_store(out, i, bits, undo ? word_undo(v, bits, op) : word_apply(v, bits, op));
    }
}
