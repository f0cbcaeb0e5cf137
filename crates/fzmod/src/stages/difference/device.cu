// Difference on the device (words.cu is compiled in front). The inverse's chunked prefix sums
// come from one global scan: the wrapping sum of a chunk's first k words is the difference
// of two global prefix sums, taken modulo the word width.

// out[i] = map(w[i] - w[i-1]), w[-1] = 0 at the start of every chunk.
extern "C" __global__ void diff_forward(const void* in, void* out, u64 n, u32 bits, u64 chunk, u32 op) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 prev = i % chunk == 0 ? 0u : word_load(in, i - 1, bits);
    word_store(out, i, bits, word_apply(word_load(in, i, bits) - prev, bits, op));
}

// Inverse, step 1: the differences with the map undone, widened to u32 for the scan.
extern "C" __global__ void diff_undo(const void* in, u32* d, u64 n, u32 bits, u32 op) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = word_undo(word_load(in, i, bits), bits, op);
}

// Inverse, step 3: sums[i] = d[0] + ... + d[i-1] (exact in u64); the chunk's prefix is
// sums[i + 1] - sums[chunk start], wrapped to the word.
extern "C" __global__ void diff_finish(const u64* sums, void* out, u64 n, u32 bits, u64 chunk) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) word_store(out, i, bits, (u32)(sums[i + 1] - sums[i / chunk * chunk]) & word_mask(bits));
}
