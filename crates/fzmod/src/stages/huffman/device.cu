// Huffman on the device (cpu.rs and book.rs are the reference; the bytes are theirs).
// HUF_SYM (the symbol type) and HUF_BITS (its width) are defined by device.rs.
//
// Forward, with no host synchronisation: per-block shared histograms added into a global one
// (integer adds: the order does not matter) → the book, built by one thread block from the
// histogram with book.rs's sequential rules → each chunk's word count → an exclusive scan
// (common.cu) → each chunk's bits assembled in shared memory (OR is order-independent) and
// copied to its place. Inverse: one thread per chunk, first-level table in shared memory.

#define HUF_CHUNK 4096
#define HUF_MAX_LEN 20
#define HUF_MAX_ENTRIES 4097
#define HUF_TABLE_BITS 11
#define HUF_THREADS 256
#define HUF_PER_THREAD (HUF_CHUNK / HUF_THREADS)
#define HUF_MAX_WORDS ((HUF_CHUNK * (HUF_MAX_LEN + HUF_BITS) + 31) / 32)
// Deepest minimum-redundancy code of weights summing below 2^64 (Fibonacci weights: 92).
#define HUF_DEPTHS 128
#define HUF_BOOK_THREADS 1024
#define HUF_DECODE_THREADS 128

typedef HUF_SYM sym_t;
typedef unsigned short u16;

// Entry counts (entries 0..=bklen; symbols >= bklen count as the escape). hist is zeroed.
extern "C" __global__ void __launch_bounds__(HUF_THREADS)
huf_histogram(const sym_t* in, u64 n, u32 bklen, u64* hist) {
    __shared__ u32 local[HUF_MAX_ENTRIES];
    for (u32 i = threadIdx.x; i <= bklen; i += blockDim.x) local[i] = 0;
    __syncthreads();
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += stride) {
        u64 i = base + threadIdx.x;
        u32 e = i < n ? min((u32)in[i], bklen) : 0xffffffffu;
        // Lanes holding the same entry add once: skewed codes would serialise on one bin.
        u32 peers = __match_any_sync(FULL_MASK, e);
        if (i < n && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&local[e], __popc(peers));
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i <= bklen; i += blockDim.x)
        if (local[i]) atomicAdd((unsigned long long*)&hist[i], (unsigned long long)local[i]);
}

// book.rs minimum_redundancy (Moffat and Katajainen 1995), one thread, weights ascending.
__device__ void huf_minimum_redundancy(u64* a, u32 n) {
    a[0] += a[1];
    u32 root = 0, leaf = 2;
    for (u32 next = 1; next < n - 1; next++) {
        if (leaf >= n || a[root] < a[leaf]) {
            a[next] = a[root];
            a[root++] = next;
        } else {
            a[next] = a[leaf++];
        }
        if (leaf >= n || (root < next && a[root] < a[leaf])) {
            a[next] += a[root];
            a[root++] = next;
        } else {
            a[next] += a[leaf++];
        }
    }
    a[n - 2] = 0;
    for (int next = (int)n - 3; next >= 0; next--) a[next] = a[a[next]] + 1;
    u64 avail = 1, used = 0, depth = 0;
    int root2 = (int)n - 2, next = (int)n - 1;
    while (avail > 0) {
        while (root2 >= 0 && a[root2] == depth) {
            used++;
            root2--;
        }
        while (avail > used) {
            a[next--] = depth;
            avail--;
        }
        avail = 2 * used;
        depth++;
        used = 0;
    }
}

// book.rs limit_lengths (JPEG T.81 Annex K.3).
__device__ void huf_limit(u32* per_len) {
    for (int i = HUF_DEPTHS - 1; i > HUF_MAX_LEN; i--) {
        while (per_len[i] > 0) {
            int j = i - 2;
            while (per_len[j] == 0) j--;
            per_len[i] -= 2;
            per_len[i - 1] += 1;
            per_len[j + 1] += 2;
            per_len[j] -= 1;
        }
    }
}

// The book of `hist` (one block of HUF_BOOK_THREADS): `table[s]` = code << 8 | length per entry,
// the stored book at the head of `out`, its byte length in *book_len (Book::from_counts, write).
extern "C" __global__ void __launch_bounds__(HUF_BOOK_THREADS)
huf_book(const u64* hist, u32 bklen, u32* table, u8* out, u64* book_len) {
    __shared__ u64 w[HUF_MAX_ENTRIES];
    __shared__ u16 order[HUF_MAX_ENTRIES];
    __shared__ u8 len[HUF_MAX_ENTRIES];
    __shared__ u32 per_len[HUF_DEPTHS];
    __shared__ u32 next_code[HUF_MAX_LEN + 1];
    __shared__ u32 lo, count;
    u32 entries = bklen + 1;
    // Used entries in index order.
    u32 per = (entries + blockDim.x - 1) / blockDim.x;
    u32 first = min(entries, threadIdx.x * per), last = min(entries, first + per);
    u32 mine = 0;
    for (u32 s = first; s < last; s++) mine += hist[s] > 0;
    u64 total;
    u32 at = (u32)block_exclusive_scan(mine, &total);
    u32 m = (u32)total;
    for (u32 s = first; s < last; s++)
        if (hist[s] > 0) order[at++] = (u16)s;
    for (u32 s = threadIdx.x; s < entries; s += blockDim.x) len[s] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        lo = m ? order[0] : 0;
        count = m == 1 ? 1 : m ? order[m - 1] - order[0] + 1 : 0;
    }
    for (u32 i = threadIdx.x; i < m; i += blockDim.x) w[i] = hist[order[i]];
    __syncthreads();
    // Weight order (count ascending, entry descending) by counting ranks; keys are distinct.
    const int most = (HUF_MAX_ENTRIES + HUF_BOOK_THREADS - 1) / HUF_BOOK_THREADS;
    u32 rank[most], sym[most];
    u64 weight[most];
    for (int k = 0; k < most; k++) {
        u32 i = threadIdx.x + k * blockDim.x;
        if (i >= m) break;
        u64 wi = w[i];
        u32 si = order[i], r = 0;
        for (u32 j = 0; j < m; j++) r += w[j] < wi || (w[j] == wi && order[j] > si);
        rank[k] = r;
        weight[k] = wi;
        sym[k] = si;
    }
    __syncthreads();
    for (int k = 0; k < most; k++) {
        u32 i = threadIdx.x + k * blockDim.x;
        if (i >= m) break;
        w[rank[k]] = weight[k];
        order[rank[k]] = (u16)sym[k];
    }
    __syncthreads();
    if (threadIdx.x == 0 && m >= 2) {
        huf_minimum_redundancy(w, m);
        for (int d = 0; d < HUF_DEPTHS; d++) per_len[d] = 0;
        for (u32 i = 0; i < m; i++) per_len[w[i]]++;
        huf_limit(per_len);
        u32 pos = m;
        for (u32 l = 1; l <= HUF_MAX_LEN; l++)
            for (u32 k = 0; k < per_len[l]; k++) len[order[--pos]] = (u8)l;
        // Canonical first codes (RFC 1951 3.2.2).
        u32 code = 0;
        for (u32 l = 1; l <= HUF_MAX_LEN; l++) {
            next_code[l] = code;
            code = (code + per_len[l]) << 1;
        }
    }
    __syncthreads();
    // Each code: its length's first code plus the entries of that length before it.
    for (u32 s = threadIdx.x; s < entries; s += blockDim.x) {
        u32 l = len[s], before = 0;
        if (l)
            for (u32 t = 0; t < s; t++) before += len[t] == l;
        table[s] = l ? (next_code[l] + before) << 8 | l : 0;
    }
    // The stored book: lo, count, lengths (count >= 2), zero padding to 4 bytes.
    u32 stored = 8 + (count >= 2 ? count : 0), padded = (stored + 3) & ~3u;
    for (u32 i = threadIdx.x; i < padded; i += blockDim.x) {
        u32 v = i < 4 ? lo >> (8 * i) : i < 8 ? count >> (8 * (i - 4)) : i < stored ? len[lo + i - 8] : 0;
        out[i] = (u8)v;
    }
    if (threadIdx.x == 0) *book_len = padded;
}

// Bits of one symbol: its entry's code length, plus its width when escaped.
__device__ __forceinline__ u32 huf_cost(u32 v, u32 bklen, const u32* table) {
    return (__ldg(&table[min(v, bklen)]) & 0xff) + (v >= bklen ? HUF_BITS : 0);
}

// Payload words of each chunk (a thread sums 16 symbols, the block adds them).
extern "C" __global__ void __launch_bounds__(HUF_THREADS)
huf_sizes(const sym_t* in, u64 n, u32 bklen, const u32* table, u64 nchunks, u32* words) {
    for (u64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
        u64 start = c * HUF_CHUNK;
        u32 bits = 0;
        for (u32 j = 0; j < HUF_PER_THREAD; j++) {
            u64 i = start + j * HUF_THREADS + threadIdx.x;  // coalesced; the sum ignores order
            if (i < n) bits += huf_cost(in[i], bklen, table);
        }
        u64 total;
        block_exclusive_scan(bits, &total);
        if (threadIdx.x == 0) words[c] = (u32)((total + 31) / 32);
    }
}

// OR the `bits` (1..32) low bits of v into buf at bit `pos`, most significant first.
__device__ __forceinline__ void huf_put(u32* buf, u32 pos, u32 v, u32 bits) {
    if (bits == 0) return;
    u32 aligned = v << (32 - bits), word = pos >> 5, shift = pos & 31;
    atomicOr(&buf[word], aligned >> shift);
    if (shift + bits > 32) atomicOr(&buf[word + 1], aligned << (32 - shift));
}

// Each chunk's bits at payload word offsets[c] (the scanned word counts), its count in the
// table after the book; *out_len gets the segment's length. Nothing past `capacity`.
extern "C" __global__ void __launch_bounds__(HUF_THREADS)
huf_encode(const sym_t* in, u64 n, u32 bklen, const u32* table, u64 nchunks, const u64* offsets,
           const u64* book_len, u8* out, u64 capacity, u64* out_len) {
    __shared__ u32 bitbuf[HUF_MAX_WORDS];
    __shared__ sym_t symbols[HUF_CHUNK];
    u64 head = *book_len, payload = head + 4 * nchunks;
    if (blockIdx.x == 0 && threadIdx.x == 0) *out_len = payload + 4 * offsets[nchunks];
    for (u64 c = blockIdx.x; c < nchunks; c += gridDim.x) {
        u64 start = c * HUF_CHUNK;
        u32 len = (u32)min((u64)HUF_CHUNK, n - start);
        u32 words = (u32)(offsets[c + 1] - offsets[c]);
        for (u32 i = threadIdx.x; i < len; i += blockDim.x) symbols[i] = in[start + i];
        for (u32 i = threadIdx.x; i < words; i += blockDim.x) bitbuf[i] = 0;
        __syncthreads();
        u32 first = min(len, threadIdx.x * HUF_PER_THREAD), last = min(len, first + HUF_PER_THREAD);
        u32 bits = 0;
        for (u32 i = first; i < last; i++) bits += huf_cost(symbols[i], bklen, table);
        u64 total;
        u32 pos = (u32)block_exclusive_scan(bits, &total);
        for (u32 i = first; i < last; i++) {
            u32 v = symbols[i], e = __ldg(&table[min(v, bklen)]);
            huf_put(bitbuf, pos, e >> 8, e & 0xff);
            pos += e & 0xff;
            if (v >= bklen) {
                huf_put(bitbuf, pos, v, HUF_BITS);
                pos += HUF_BITS;
            }
        }
        __syncthreads();
        u64 at = payload + 4 * offsets[c];
        if (at + 4ull * words <= capacity) {
            u32* dst = (u32*)(out + at);
            for (u32 i = threadIdx.x; i < words; i += blockDim.x) dst[i] = bitbuf[i];
            if (threadIdx.x == 0) ((u32*)(out + head))[c] = words;
        }
        __syncthreads();
    }
}

// One thread per chunk. `tables` (book.rs DecodeTables, validated on the host): the first-level
// table (2^11), first code, count and offset per length (21 each), then `nsorted` entries in
// canonical order. `starts[c]` = chunk c's first payload word (nchunks + 1 values). A chunk
// whose bits do not fill exactly its words, with zero padding, or an escaped value below bklen,
// sets *err.
extern "C" __global__ void __launch_bounds__(HUF_DECODE_THREADS)
huf_decode(const u32* payload, const u64* starts, u64 n, u32 bklen, const u32* tables, u32 nsorted, u64 nchunks,
           sym_t* out, u32* err) {
    __shared__ u32 first_level[1 << HUF_TABLE_BITS];
    __shared__ u32 first[HUF_MAX_LEN + 1], count[HUF_MAX_LEN + 1], offset[HUF_MAX_LEN + 1];
    __shared__ u16 sorted[HUF_MAX_ENTRIES];
    for (u32 i = threadIdx.x; i < (1u << HUF_TABLE_BITS); i += blockDim.x) first_level[i] = tables[i];
    const u32* per_len = tables + (1 << HUF_TABLE_BITS);
    for (u32 i = threadIdx.x; i <= HUF_MAX_LEN; i += blockDim.x) {
        first[i] = per_len[i];
        count[i] = per_len[HUF_MAX_LEN + 1 + i];
        offset[i] = per_len[2 * (HUF_MAX_LEN + 1) + i];
    }
    for (u32 i = threadIdx.x; i < nsorted; i += blockDim.x) sorted[i] = (u16)per_len[3 * (HUF_MAX_LEN + 1) + i];
    __syncthreads();
    u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nchunks) return;
    const u32* words = payload + starts[c];
    u32 nwords = (u32)(starts[c + 1] - starts[c]), next = 0, have = 0;
    u64 base = c * HUF_CHUNK, buf = 0;
    u32 len = (u32)min((u64)HUF_CHUNK, n - base);
    bool ok = true;
    for (u32 i = 0; i < len; i++) {
        for (; have <= 32; have += 32, next++) buf |= (u64)(next < nwords ? words[next] : 0) << (32 - have);
        u32 window = (u32)(buf >> (64 - HUF_MAX_LEN));
        u32 e = first_level[window >> (HUF_MAX_LEN - HUF_TABLE_BITS)];
        u32 sym = e >> 8, bits = e & 0x7f;
        if (e == 0) {
            for (bits = HUF_TABLE_BITS + 1; bits < HUF_MAX_LEN; bits++)
                if ((window >> (HUF_MAX_LEN - bits)) - first[bits] < count[bits]) break;
            // A complete code matches by HUF_MAX_LEN; the clamp only keeps the read in bounds.
            sym = sorted[min(offset[bits] + (window >> (HUF_MAX_LEN - bits)) - first[bits], nsorted - 1)];
        }
        buf <<= bits;
        have -= bits;
        u32 v = sym;
        if (sym == bklen) {
            for (; have <= 32; have += 32, next++) buf |= (u64)(next < nwords ? words[next] : 0) << (32 - have);
            v = (u32)(buf >> (64 - HUF_BITS));
            buf <<= HUF_BITS;
            have -= HUF_BITS;
            ok = ok && v >= bklen;
        }
        out[base + i] = (sym_t)v;
    }
    u64 used = 32ull * next - have;
    u32 pad = (32 - used % 32) % 32;
    ok = ok && (used + 31) / 32 == nwords && (nwords == 0 || pad == 0 || (words[nwords - 1] & ((1u << pad) - 1)) == 0);
    if (!ok) atomicOr(err, 1u);
}
