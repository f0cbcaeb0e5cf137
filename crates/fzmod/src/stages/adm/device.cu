// ADM on the device (MANS's adaptive data mapping, cpu.rs for the rules): one warp per
// 512-word block, lane l owning words 16l .. 16l + 16, as in MANS. Blocks are staged in shared
// memory by coalesced loads; every value that reaches the output is an integer function of the
// block's words, so the bytes are cpu.rs's on any schedule.
//
// Defines: ADM_T (the word type), ADM_BYTES (its size).

#define ADM_BLOCK 512
#define ADM_PER_LANE 16
#define ADM_LANES 32
#define ADM_WARPS 4
#define ADM_SPAN 126ull

// Load block `b` (`len` words) into `words` (zero past len) with consecutive lanes on
// consecutive words; returns the sum of its words across the warp.
__device__ __forceinline__ u64 adm_stage(const ADM_T* in, u64 b, u32 len, ADM_T* words) {
    int lane = threadIdx.x & 31;
    u64 sum = 0;
    for (u32 i = lane; i < ADM_BLOCK; i += 32) {
        ADM_T v = i < len ? in[b * ADM_BLOCK + i] : (ADM_T)0;
        words[i] = v;
        sum += v;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, o);
    __syncwarp();
    return sum;
}

// Signal length (bits) of `v` around centre `c`, and its code byte in *code.
__device__ __forceinline__ u64 adm_map(u64 v, u64 c, u32* code) {
    if (v == c) {
        *code = 1;
        return 1;
    }
    u64 diff = v > c ? v - c : c - v;
    u64 k = (diff + ADM_SPAN - 1) / ADM_SPAN;
    *code = (u32)((diff - ADM_SPAN * (k - 1)) << 1 | (v < c ? 1u : 0u));
    return k;
}

// The warp's block geometry for grid-stride iteration: one warp per block.
#define ADM_FOR_EACH_BLOCK(b, nblocks)                                                                \
    for (u64 b = (u64)blockIdx.x * ADM_WARPS + (threadIdx.x >> 5); b < nblocks; b += (u64)gridDim.x * ADM_WARPS)

// Pass 1: centre, code bytes, length byte (0 = raw) and the block's payload size in sizes[b];
// the centre and length byte go straight into the side table.
extern "C" __global__ void __launch_bounds__(ADM_WARPS * 32)
adm_measure(const ADM_T* in, u64 n, u64 nblocks, u8* codes, u8* side, u32* sizes) {
    __shared__ ADM_T staged[ADM_WARPS][ADM_BLOCK];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    ADM_T* words = staged[warp];
    ADM_FOR_EACH_BLOCK(b, nblocks) {
        u32 len = (u32)min((u64)ADM_BLOCK, n - b * ADM_BLOCK);
        u64 c = adm_stage(in, b, len, words) / len;
        u32 lo = lane * ADM_PER_LANE, hi = min(len, lo + ADM_PER_LANE);
        u64 bits = 0;
        u32 lane_codes[ADM_PER_LANE];
        for (u32 j = 0; j < ADM_PER_LANE; j++) {
            lane_codes[j] = 0;
            if (lo + j < hi) bits += adm_map(words[lo + j], c, &lane_codes[j]);
        }
        for (int o = 16; o > 0; o >>= 1) bits = max(bits, __shfl_xor_sync(FULL_MASK, bits, o));
        u64 per_lane = (bits + 7) / 8;
        bool raw = ADM_LANES * per_lane >= (u64)len * ADM_BYTES;
        u8* out = codes + b * ADM_BLOCK + lo;
        if (hi == lo + ADM_PER_LANE && ((u64)out & 15) == 0) {
            // A whole lane: one 16-byte store.
            uint4 q;
            u32* w = (u32*)&q;
            for (int j = 0; j < 4; j++)
                w[j] = raw ? 0
                           : lane_codes[4 * j] | lane_codes[4 * j + 1] << 8 | lane_codes[4 * j + 2] << 16 |
                                 lane_codes[4 * j + 3] << 24;
            *(uint4*)out = q;
        } else {
            for (u32 j = 0; lo + j < hi; j++) out[j] = raw ? 0 : (u8)lane_codes[j];
        }
        if (lane == 0) {
            u64 centre = raw ? 0 : c;
            for (int i = 0; i < ADM_BYTES; i++) side[b * ADM_BYTES + i] = (u8)(centre >> (8 * i));
            side[nblocks * ADM_BYTES + b] = raw ? 0 : (u8)per_lane;
            sizes[b] = raw ? len * ADM_BYTES : ADM_LANES * (u32)per_lane;
        }
        __syncwarp();
    }
}

// Pass 2: each block's payload at payload + offsets[b]: its raw words (LE), or the lanes' signal
// streams (a one bit then k − 1 zero bits per word, MSB first, ones after the last), assembled
// in shared memory and copied out by the whole warp. A block that would end past `capacity`
// bytes of the side stream is not written (the host repeats the run with room for all).
extern "C" __global__ void __launch_bounds__(ADM_WARPS * 32)
adm_payload(const ADM_T* in, u64 n, u64 nblocks, const u64* offsets, u8* side, u64 table, u64 capacity) {
    __shared__ ADM_T staged[ADM_WARPS][ADM_BLOCK];
    __shared__ u8 signals[ADM_WARPS][ADM_BLOCK * ADM_BYTES];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    ADM_T* words = staged[warp];
    u8* area = signals[warp];
    ADM_FOR_EACH_BLOCK(b, nblocks) {
        u32 len = (u32)min((u64)ADM_BLOCK, n - b * ADM_BLOCK);
        if (table + offsets[b + 1] > capacity) continue;
        u8* dst = side + table + offsets[b];
        u32 per = side[nblocks * ADM_BYTES + b];
        if (per == 0) {
            const u8* src = (const u8*)(in + b * ADM_BLOCK);
            for (u32 i = lane; i < len * ADM_BYTES; i += 32) dst[i] = src[i];
            continue;
        }
        u64 c = adm_stage(in, b, len, words) / len;
        u8* stream = area + lane * per;
        for (u32 i = 0; i < per; i++) stream[i] = 0xff;
        u32 lo = lane * ADM_PER_LANE, hi = min(len, lo + ADM_PER_LANE), pos = 0;
        for (u32 i = lo; i < hi; i++) {
            u32 code;
            u32 k = (u32)adm_map(words[i], c, &code);
            for (u32 p = pos + 1; p < pos + k; p++) stream[p >> 3] &= (u8) ~(0x80u >> (p & 7));
            pos += k;
        }
        __syncwarp();
        for (u32 i = lane; i < ADM_LANES * per; i += 32) dst[i] = area[i];
        __syncwarp();
    }
}

// Inverse, pass 1: each block's payload bytes (cpu.rs payload_len), for the scan that places
// them. A length byte cpu.rs payload_starts refuses counts as raw here; adm_decode flags it.
extern "C" __global__ void adm_payload_lens(const u8* side, u64 n, u64 nblocks, u32* lens) {
    u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) return;
    u32 len = (u32)min((u64)ADM_BLOCK, n - b * ADM_BLOCK), per = side[nblocks * ADM_BYTES + b];
    lens[b] = per == 0 || ADM_LANES * per >= len * ADM_BYTES ? len * ADM_BYTES : ADM_LANES * per;
}

// Pass 2: block b's payload at table + offsets[b] (the scanned lengths, nblocks + 1 of them).
// cpu.rs payload_starts's checks, made here: a length byte whose signal area is not smaller
// than the raw words, or payloads that do not end exactly at the side stream's end, set
// *table_err, and a block whose payload would leave the stream is not read. Any signal that
// does not match its code, leaves the word range or breaks the padding, or a raw block with a
// centre or code bytes, sets *err.
extern "C" __global__ void __launch_bounds__(ADM_WARPS * 32)
adm_decode(const u8* codes, const u8* side, const u64* offsets, u64 table, u64 side_len, u64 n, u64 nblocks, ADM_T* out, u32* err,
           u32* table_err) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && table + offsets[nblocks] != side_len) atomicOr(table_err, 1u);
    __shared__ u8 signals[ADM_WARPS][ADM_BLOCK * ADM_BYTES];
    // A lane decodes ADM_PER_LANE consecutive words: codes in and words out go through shared
    // memory so that global loads and stores stay coalesced.
    __shared__ u8 block_codes[ADM_WARPS][ADM_BLOCK];
    __shared__ ADM_T words[ADM_WARPS][ADM_BLOCK];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u8* area = signals[warp];
    ADM_FOR_EACH_BLOCK(b, nblocks) {
        u32 len = (u32)min((u64)ADM_BLOCK, n - b * ADM_BLOCK);
        const u8* src = side + table + offsets[b];
        u32 per = side[nblocks * ADM_BYTES + b];
        if ((per != 0 && ADM_LANES * per >= len * ADM_BYTES) || table + offsets[b + 1] > side_len) {
            if (lane == 0) atomicOr(table_err, 1u);
            continue;
        }
        u64 c = 0;
        for (int i = 0; i < ADM_BYTES; i++) c |= (u64)side[b * ADM_BYTES + i] << (8 * i);
        bool ok = true;
        if (per == 0) {
            for (u32 i = lane; i < len; i += 32) {
                ADM_T v = 0;
                for (int j = 0; j < ADM_BYTES; j++) v |= (ADM_T)src[i * ADM_BYTES + j] << (8 * j);
                out[b * ADM_BLOCK + i] = v;
                ok = ok && codes[b * ADM_BLOCK + i] == 0;
            }
            ok = ok && c == 0;
        } else {
            for (u32 i = lane; i < ADM_LANES * per; i += 32) area[i] = src[i];
            for (u32 i = lane; i < len; i += 32) block_codes[warp][i] = codes[b * ADM_BLOCK + i];
            __syncwarp();
            const u8* stream = area + lane * per;
            u32 end = 8 * per, pos = 0;
            u32 lo = lane * ADM_PER_LANE, hi = min(len, lo + ADM_PER_LANE);
            for (u32 i = lo; i < hi && ok; i++) {
                ok = pos < end && (stream[pos >> 3] >> (7 - (pos & 7)) & 1);
                u32 next = pos + 1;
                while (next < end && !(stream[next >> 3] >> (7 - (next & 7)) & 1)) next++;
                u64 k = next - pos;
                pos = next;
                u32 code = block_codes[warp][i];
                u64 v = 0;
                if (code == 1) {
                    ok = ok && k == 1;
                    v = c;
                } else if (code >= 2 && code <= 253) {
                    u64 diff = (u64)(code >> 1) + ADM_SPAN * (k - 1);
                    if (code & 1) {
                        ok = ok && diff <= c;
                        v = c - diff;
                    } else {
                        v = c + diff;
                        ok = ok && v <= (u64)(ADM_T)~(ADM_T)0;
                    }
                } else {
                    ok = false;
                }
                words[warp][i] = (ADM_T)v;
            }
            for (u32 p = pos; p < end && ok; p++) ok = stream[p >> 3] >> (7 - (p & 7)) & 1;
            // One encoding per block: the longest lane needs its last signal byte.
            u32 longest = pos;
            for (int o = 16; o > 0; o >>= 1) longest = max(longest, __shfl_xor_sync(FULL_MASK, longest, o));
            ok = ok && (longest + 7) / 8 == per;
            __syncwarp();
            // (After a failed signal the rest of the block is stale: *err is raised below.)
            for (u32 i = lane; i < len; i += 32) out[b * ADM_BLOCK + i] = words[warp][i];
            __syncwarp();
        }
        if (!ok) atomicOr(err, 1u);
    }
}
