// Huffman on the device (cpu.rs and book.rs are the reference; the bytes are theirs).
// HUF_SYM (the symbol type) and HUF_BITS (its width) are defined by device.rs.
//
// Forward, with no host synchronisation: per-block shared histograms added into a global one
// (integer adds: the order does not matter) → the book, built by one thread block from the
// histogram with book.rs's sequential rules → each chunk's bits assembled in shared memory
// (OR is order-independent) and copied to its place, found by a decoupled look-back. Inverse: one warp per chunk (its lanes resynchronise, see huf_decode),
// the decode tables in shared memory.

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
#define HUF_DECODE_THREADS 256

typedef HUF_SYM sym_t;
typedef unsigned short u16;

// Entry counts (entries 0..=bklen; symbols >= bklen count as the escape). hist is zeroed.
// Each thread reads 16 bytes of symbols at a time and adds a run of one entry at once: the
// codes of smooth fields repeat their commonest entry, whose adds would otherwise serialise.
extern "C" __global__ void __launch_bounds__(HUF_THREADS)
huf_histogram(const sym_t* in, u64 n, u32 bklen, u64* hist) {
    __shared__ u32 local[HUF_MAX_ENTRIES];
    for (u32 i = threadIdx.x; i <= bklen; i += blockDim.x) local[i] = 0;
    __syncthreads();
    const u32 per = 16 / sizeof(sym_t), mask = sizeof(sym_t) == 4 ? 0xffffffffu : (1u << (8 * sizeof(sym_t))) - 1;
    u64 stride = (u64)gridDim.x * blockDim.x, first = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u32 run_entry = 0, run = 0;
    auto add = [&](u32 v) {
        u32 e = min(v, bklen);
        if (e == run_entry) {
            run++;
            return;
        }
        if (run) atomicAdd(&local[run_entry], run);
        run_entry = e;
        run = 1;
    };
    // Whole 16-byte groups where `in` is aligned (a caller's array may not be), then the rest.
    u64 groups = ((size_t)in & 15) == 0 ? n / per : 0;
    for (u64 g = first; g < groups; g += stride) {
        uint4 v = ((const uint4*)in)[g];
        u32 words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (u32 b = 0; b < 32; b += 8 * sizeof(sym_t)) add((words[k] >> b) & mask);
    }
    for (u64 i = groups * per + first; i < n; i += stride) add((u32)in[i]);
    if (run) atomicAdd(&local[run_entry], run);
    __syncthreads();
    for (u32 i = threadIdx.x; i <= bklen; i += blockDim.x)
        if (local[i]) atomicAdd((unsigned long long*)&hist[i], (unsigned long long)local[i]);
}

// book.rs minimum_redundancy (Moffat and Katajainen 1995), one thread, weights ascending.
// One thread is latency-bound on shared memory: the weights the next decisions compare wait
// in registers (the next two leaves, the next two internal nodes), loaded ahead.
__device__ __forceinline__ void huf_minimum_redundancy(u64* a, u32 n) {
    a[0] += a[1];
    u32 root = 0, leaf = 2;
    // l0, l1 = a[leaf], a[leaf + 1] while below n; r0, r1 = a[root], a[root + 1] once written.
    u64 l0 = n > 2 ? a[2] : 0, l1 = n > 3 ? a[3] : 0, r0 = a[0], r1 = 0;
    for (u32 next = 1; next < n - 1; next++) {
        u64 cur = 0;
#pragma unroll
        for (u32 child = 0; child < 2; child++) {
            // On a tie the leaf goes first (book.rs); the second child never takes the node
            // being built (root < next).
            if (leaf >= n || ((child == 0 || root < next) && r0 < l0)) {
                cur += r0;
                a[root++] = next;
                r0 = r1;
                r1 = root + 1 < next ? a[root + 1] : 0;
            } else {
                cur += l0;
                leaf++;
                l0 = l1;
                l1 = leaf + 1 < n ? a[leaf + 1] : 0;
            }
        }
        a[next] = cur;
        if (root == next) {
            r0 = cur;
        } else if (root + 1 == next) {
            r1 = cur;
        }
    }
    a[n - 2] = 0;
    for (int next = (int)n - 3; next >= 0; next--) a[next] = a[a[next]] + 1;
    u64 avail = 1, used = 0, depth = 0;
    int root2 = (int)n - 2, next = (int)n - 1;
    u64 ahead = a[root2];  // a[root2] (root2 = n - 2 >= 0)
    while (avail > 0) {
        while (root2 >= 0 && ahead == depth) {
            used++;
            root2--;
            ahead = root2 >= 0 ? a[root2] : 0;
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
__device__ __forceinline__ void huf_limit(u32* per_len) {
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
    for (u32 d = threadIdx.x; d < HUF_DEPTHS; d += blockDim.x) per_len[d] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        lo = m ? order[0] : 0;
        count = m == 1 ? 1 : m ? order[m - 1] - order[0] + 1 : 0;
    }
    for (u32 i = threadIdx.x; i < m; i += blockDim.x) w[i] = hist[order[i]];
    __syncthreads();
    // Weight order (count ascending, entry descending; keys are distinct): a bitonic sort
    // whose merges compare mirrored pairs, so every exchange puts the smaller key first and
    // the keys past m (virtual maxima) never move: m entries need no padding.
    u32 span = 1;
    while (span < m) span <<= 1;
    for (u32 k = 2; k <= span; k <<= 1)
        for (u32 j = k / 2; j > 0; j >>= 1) {
            for (u32 p = threadIdx.x; p < span / 2; p += blockDim.x) {
                // Pair p: a in the lower half of its j-group, b its partner (mirrored at j = k/2).
                u32 a = (p / j) * 2 * j + p % j, b = j == k / 2 ? (a | (k - 1)) - (a & (k - 1)) : a + j;
                if (b >= m) continue;
                u64 wa = w[a], wb = w[b];
                u16 oa = order[a], ob = order[b];
                if (wb < wa || (wb == wa && ob > oa)) {
                    w[a] = wb, w[b] = wa;
                    order[a] = ob, order[b] = oa;
                }
            }
            __syncthreads();
        }
    if (threadIdx.x == 0 && m >= 2) huf_minimum_redundancy(w, m);
    __syncthreads();
    for (u32 i = threadIdx.x; m >= 2 && i < m; i += blockDim.x) atomicAdd(&per_len[w[i]], 1u);
    __syncthreads();
    if (threadIdx.x == 0 && m >= 2) {
        huf_limit(per_len);
        // Canonical first codes (RFC 1951 3.2.2).
        u32 code = 0;
        for (u32 l = 1; l <= HUF_MAX_LEN; l++) {
            next_code[l] = code;
            code = (code + per_len[l]) << 1;
        }
    }
    __syncthreads();
    // The limited lengths by weight, the shortest to the heaviest: weight position i (from
    // the top) gets the length whose codes cover it.
    for (u32 i = threadIdx.x; m >= 2 && i < m; i += blockDim.x) {
        u32 l = 1, below = per_len[1], from_top = m - 1 - i;
        while (from_top >= below && l < HUF_MAX_LEN) below += per_len[++l];
        len[order[i]] = (u8)l;
    }
    __syncthreads();
    // Each code: its length's first code plus the entries of that length before it (a block
    // scan per length over each thread's contiguous entries).
    for (u32 l = 1; l <= HUF_MAX_LEN; l++) {
        if (per_len[l] == 0) continue;  // the same for every thread
        u32 here = 0;
        for (u32 s = first; s < last; s++) here += len[s] == l;
        u64 all;
        u32 code = next_code[l] + (u32)block_exclusive_scan(here, &all);
        for (u32 s = first; s < last; s++)
            if (len[s] == l) table[s] = code++ << 8 | l;
    }
    for (u32 s = threadIdx.x; s < entries; s += blockDim.x)
        if (len[s] == 0) table[s] = 0;
    // The stored book: lo, count, lengths (count >= 2), zero padding to 4 bytes.
    u32 stored = 8 + (count >= 2 ? count : 0), padded = (stored + 3) & ~3u;
    for (u32 i = threadIdx.x; i < padded; i += blockDim.x) {
        u32 v = i < 4 ? lo >> (8 * i) : i < 8 ? count >> (8 * (i - 4)) : i < stored ? len[lo + i - 8] : 0;
        out[i] = (u8)v;
    }
    if (threadIdx.x == 0) *book_len = padded;
}

// OR the `bits` (1..32) low bits of v into buf at bit `pos`, most significant first.
__device__ __forceinline__ void huf_put(u32* buf, u32 pos, u32 v, u32 bits) {
    if (bits == 0) return;
    u32 aligned = v << (32 - bits), word = pos >> 5, shift = pos & 31;
    atomicOr(&buf[word], aligned >> shift);
    if (shift + bits > 32) atomicOr(&buf[word + 1], aligned << (32 - shift));
}

// Each chunk's bits after the words of the chunks before it, its word count in the table
// after the book; *out_len gets the segment's length. Nothing past `capacity`. Chunks are
// taken in ticket order and placed by the decoupled look-back of common.cu (fz_look_back)
// over their word counts, so no pass counts them first; `state` holds the ticket counter and
// one look-back word per chunk, zeroed before the launch. A thread reads its 16 symbols in
// 16-byte loads where aligned, gathers their bits in a 64-bit register and ORs whole words
// into the chunk's shared buffer (OR is order-independent).
extern "C" __global__ void __launch_bounds__(HUF_THREADS, 4)
huf_encode(const sym_t* in, u64 n, u32 bklen, const u32* table, u64 nchunks, u64* state,
           const u64* book_len, u8* out, u64 capacity, u64* out_len) {
    __shared__ u32 bitbuf[HUF_MAX_WORDS];
    __shared__ u64 ticket, offset;
    volatile u64* placed = (volatile u64*)(state + 1);
    u64 head = *book_len, payload = head + 4 * nchunks;
    const bool vectors = ((size_t)in & 15) == 0;
    for (;;) {
        if (threadIdx.x == 0) ticket = atomicAdd((unsigned long long*)state, 1ull);
        __syncthreads();
        u64 c = ticket, start = c * HUF_CHUNK;
        if (c >= nchunks) return;
        u32 len = (u32)min((u64)HUF_CHUNK, n - start);
        u32 first = min(len, threadIdx.x * HUF_PER_THREAD), mine = min(len, first + HUF_PER_THREAD) - first;
        // The 16 symbols as 32-bit words, in registers (constant indices once unrolled).
        const u32 per_word = 4 / sizeof(sym_t), sym_bits = 8 * sizeof(sym_t);
        u32 w[HUF_PER_THREAD / per_word];
        if (vectors && mine == HUF_PER_THREAD) {
            const uint4* src = (const uint4*)(in + start + first);
#pragma unroll
            for (u32 k = 0; k < HUF_PER_THREAD / per_word / 4; k++) {
                uint4 q = src[k];
                w[4 * k] = q.x, w[4 * k + 1] = q.y, w[4 * k + 2] = q.z, w[4 * k + 3] = q.w;
            }
        } else {
#pragma unroll
            for (u32 k = 0; k < HUF_PER_THREAD / per_word; k++) w[k] = 0;
#pragma unroll
            for (u32 k = 0; k < HUF_PER_THREAD; k++)
                if (k < mine) w[k / per_word] |= (u32)in[start + first + k] << (sym_bits * (k % per_word));
        }
        u32 v[HUF_PER_THREAD];
#pragma unroll
        for (u32 k = 0; k < HUF_PER_THREAD; k++)
            v[k] = per_word == 1 ? w[k] : (w[k / per_word] >> (sym_bits * (k % per_word))) & ((1u << (sym_bits % 32)) - 1);
        u32 e[HUF_PER_THREAD], bits = 0;
#pragma unroll
        for (u32 k = 0; k < HUF_PER_THREAD; k++) {
            e[k] = __ldg(&table[min(v[k], bklen)]);
            if (k < mine) bits += (e[k] & 0xff) + (v[k] >= bklen ? HUF_BITS : 0);
        }
        u64 total;
        u32 pos = (u32)block_exclusive_scan(bits, &total);
        const u32 words = (u32)((total + 31) / 32);
        if (threadIdx.x == 0 && c > 0) placed[c] = FZ_AGGREGATE | words;
        for (u32 i = threadIdx.x; i < words; i += blockDim.x) bitbuf[i] = 0;
        __syncthreads();
        if (threadIdx.x < 32) {
            u64 before = fz_look_back(placed, c);
            if (threadIdx.x == 0) {
                placed[c] = FZ_INCLUSIVE | (before + words);
                offset = before;
                if (c == nchunks - 1) *out_len = payload + 4 * (before + words);
            }
        }
        u64 acc = 0;
        u32 have = 0;
        // Append the `width` (1..32) low bits of `value`; a full word leaves for the buffer.
        auto append = [&](u32 value, u32 width) {
            acc |= (u64)value << (64 - have - width);
            have += width;
            if (have >= 32) {
                huf_put(bitbuf, pos, (u32)(acc >> 32), 32);
                acc <<= 32;
                have -= 32;
                pos += 32;
            }
        };
#pragma unroll
        for (u32 k = 0; k < HUF_PER_THREAD; k++) {
            if (k >= mine) break;
            if (e[k] & 0xff) append(e[k] >> 8, e[k] & 0xff);
            if (v[k] >= bklen) append(v[k], HUF_BITS);
        }
        if (have) huf_put(bitbuf, pos, (u32)(acc >> (64 - have)), have);
        __syncthreads();
        u64 at = payload + 4 * offset;
        if (at + 4ull * words <= capacity) {
            u32* dst = (u32*)(out + at);
            for (u32 i = threadIdx.x; i < words; i += blockDim.x) dst[i] = bitbuf[i];
            if (threadIdx.x == 0) ((u32*)(out + head))[c] = words;
        }
        __syncthreads();
    }
}

// The decode tables in shared memory (book.rs DecodeTables, and device.rs's pair table).
struct HufTables {
    const u32 *first_level, *pairs, *first, *count, *offset;
    const u16* sorted;
    u32 nsorted, bklen;
};

// A chunk's bits, most significant first, from any bit position; reads past the chunk's words
// see zeros. `have` valid bits wait at the top of `buf`; the word after them is already loaded
// (`ahead`), so a refill never waits for memory.
struct HufBits {
    const u32* words;
    u32 nwords, next, have, ahead;
    u64 buf;
    __device__ u32 word(u32 i) const { return i < nwords ? words[i] : 0; }
    // At least 33 valid bits (every caller consumed at most 32 since the last refill).
    __device__ void refill() {
        if (have > 32) return;
        buf |= (u64)ahead << (32 - have);
        have += 32;
        ahead = word(++next);
    }
    __device__ void seek(u32 bit) {
        next = bit >> 5;
        buf = (u64)word(next) << 32 | word(next + 1);
        buf <<= bit & 31;
        have = 64 - (bit & 31);
        next += 2;
        ahead = word(next);
    }
    __device__ u32 position() const { return 32 * next - have; }
};

// The next symbol (cpu.rs decode) into *sym; an escaped value below bklen clears *ok. With
// `pair`, also the symbol after it where both codes lie in the first-level window (the pair
// table), into sym[1]. Returns the symbols decoded.
__device__ __forceinline__ u32 huf_next(HufBits& r, const HufTables& t, bool* ok, bool pair, u32* sym) {
    r.refill();
    u32 window = (u32)(r.buf >> (64 - HUF_MAX_LEN)), top = window >> (HUF_MAX_LEN - HUF_TABLE_BITS);
    u32 e = t.first_level[top], second = pair ? t.pairs[top] : 0;
    u32 bits = e & 0x7f;
    sym[0] = e >> 8;
    if (e == 0) {
        for (bits = HUF_TABLE_BITS + 1; bits < HUF_MAX_LEN; bits++)
            if ((window >> (HUF_MAX_LEN - bits)) - t.first[bits] < t.count[bits]) break;
        // A complete code matches by HUF_MAX_LEN; the clamp only keeps the read in bounds.
        sym[0] = t.sorted[min(t.offset[bits] + (window >> (HUF_MAX_LEN - bits)) - t.first[bits], t.nsorted - 1)];
    }
    if (second) {
        sym[1] = second >> 8;
        bits += second & 0x7f;
    }
    r.buf <<= bits;
    r.have -= bits;
    if (second) return 2;
    if (sym[0] != t.bklen) return 1;
    r.refill();
    u32 v = (u32)(r.buf >> (64 - HUF_BITS));
    r.buf <<= HUF_BITS;
    r.have -= HUF_BITS;
    *ok = *ok && v >= t.bklen;
    sym[0] = v;
    return 1;
}

// A lane's symbols, contiguous in `out`, written 16 bytes at a time where aligned: lanes of a
// warp write far apart, and one store per symbol would cost the memory system a write request
// each. `lo`, `hi` hold `fill` symbols of the next aligned 16 bytes.
struct HufOut {
    sym_t* at;
    u64 lo, hi;
    u32 fill;
    __device__ void put(u32 v) {
        if (fill == 0 && ((size_t)at & 15) != 0) {
            *at++ = (sym_t)v;
            return;
        }
        u32 bit = fill * 8 * (u32)sizeof(sym_t);
        u64 w = (u64)(sym_t)v;
        if (bit < 64) {
            lo |= w << bit;
        } else {
            hi |= w << (bit - 64);
        }
        if (++fill == 16 / sizeof(sym_t)) {
            *(ulonglong2*)at = make_ulonglong2(lo, hi);
            at += fill;
            lo = hi = 0;
            fill = 0;
        }
    }
    __device__ void flush() {
        for (u32 k = 0; k < fill; k++) {
            u32 bit = k * 8 * (u32)sizeof(sym_t);
            at[k] = (sym_t)(bit < 64 ? lo >> bit : hi >> (bit - 64));
        }
    }
};

// Chunks of at least this many words decode on all 32 lanes of their warp (each lane's bit
// segment, nwords bits, then holds more than the longest code and its escape).
#define HUF_PARALLEL_WORDS 64

// Chunk c on the 32 lanes of a warp (see huf_decode); false where its bits do not check.
__device__ bool huf_decode_chunk(const u32* payload, const u64* starts, u64 n, const HufTables& t, bool single, u64 c,
                                 u32 lane, sym_t* out) {
    u32 nwords = (u32)(starts[c + 1] - starts[c]);
    HufBits r = {payload + starts[c], nwords, 0, 0, 0, 0};
    u64 base = c * HUF_CHUNK;
    u32 len = (u32)min((u64)HUF_CHUNK, n - base);
    bool ok = true, parallel = !single && nwords >= HUF_PARALLEL_WORDS;
    u32 from = 0, todo = 0, at = 0;
    if (parallel) {
        u32 seg = lane * nwords, next_seg = seg + nwords, start = seg, count = 0;
        bool ignored = true;
        u32 sym[2];
        r.seek(seg);
        if (lane < 31)
            while (r.position() < next_seg) count += huf_next(r, t, &ignored, true, sym);
        u32 end = r.position();
        // Rounds until every lane starts where its neighbour ends: then, by induction from lane
        // 0, every start is a true symbol boundary (at most 31 rounds; usually one replay).
        for (;;) {
            u32 neighbour = __shfl_up_sync(FULL_MASK, end, 1), truth_start = lane == 0 ? 0 : neighbour;
            bool moved = false;
            if (lane < 31 && truth_start != start) {
                // The parse from truth_start beside the one from start until both reach the same
                // bit; where they have not met by `end`, the new parse ends past it.
                HufBits truth = r;
                truth.seek(truth_start);
                r.seek(start);
                u32 taken = 0, skipped = 0;
                for (;;) {
                    u32 p = truth.position(), q = r.position();
                    if (p == q) {
                        count = taken + count - skipped;
                        break;
                    }
                    if (p < q) {
                        taken += huf_next(truth, t, &ignored, false, sym);
                    } else if (q < end) {
                        skipped += huf_next(r, t, &ignored, false, sym);
                    } else {
                        count = taken;
                        end = p;
                        moved = true;
                        break;
                    }
                }
            }
            start = truth_start;
            if (!__any_sync(FULL_MASK, moved)) break;
        }
        from = start;
        todo = count;
        at = todo;
        at = warp_inclusive_scan(at, lane);
        at -= todo;
        u32 before_last = __shfl_sync(FULL_MASK, at, 31);
        parallel = before_last <= len;
        if (lane == 31) todo = len - at;
    }
    if (!parallel) {
        // One lane decodes the whole chunk.
        if (lane > 0) return true;
        from = 0;
        todo = len;
        at = 0;
    }
    r.seek(from);
    HufOut o = {out + base + at, 0, 0, 0};
    for (u32 i = 0, sym[2]; i < todo;) {
        u32 got = huf_next(r, t, &ok, i + 1 < todo, sym);
        o.put(sym[0]);
        if (got == 2) o.put(sym[1]);
        i += got;
    }
    o.flush();
    if (lane == 31 || !parallel) {
        u64 used = r.position();
        u32 pad = (32 - used % 32) % 32;
        ok = ok && (used + 31) / 32 == nwords && (nwords == 0 || pad == 0 || (r.words[nwords - 1] & ((1u << pad) - 1)) == 0);
    }
    return ok;
}

// One warp per chunk (huf_decode_chunk). `tables` (book.rs DecodeTables, validated on the host): the first-level
// table (2^11), the pair table (2^11), first code, count and offset per length (21 each), then
// `nsorted` entries in canonical order. `starts[c]` = chunk c's first payload word (nchunks + 1
// values). A chunk whose bits do not fill exactly its words, with zero padding, or an escaped
// value below bklen, sets *err.
//
// The 32 lanes split the chunk's bits into equal segments and decode them at once, the way
// Huffman codes resynchronise (Klein and Wiseman 2003; Weissenberger and Schmidt 2018): lane t
// parses speculatively from the first bit of its segment to the first symbol end at or past
// the next segment. Then, in rounds, lane t + 1 replays the parse from lane t's end next to
// its own until both reach the same bit, which fixes its symbol count and keeps its end; where
// they do not meet within its segment (a long run of one code can keep two parses apart), the
// replayed parse gives lane t + 1 a new end, and lane t + 2 replays in the next round. When no
// end moves, every lane starts at a true symbol boundary; a scan of the counts places every
// lane's symbols and each lane decodes its part. A chunk too short to split, or whose counts
// exceed its length (corrupt bits), is decoded by one lane from the start: both give the
// serial decoder's symbols and checks.
extern "C" __global__ void __launch_bounds__(HUF_DECODE_THREADS)
huf_decode(const u32* payload, const u64* starts, u64 n, u32 bklen, const u32* tables, u32 nsorted, u64 nchunks,
           sym_t* out, u32* err) {
    __shared__ u32 first_level[1 << HUF_TABLE_BITS], pairs[1 << HUF_TABLE_BITS];
    __shared__ u32 first[HUF_MAX_LEN + 1], count[HUF_MAX_LEN + 1], offset[HUF_MAX_LEN + 1];
    __shared__ u16 sorted[HUF_MAX_ENTRIES];
    for (u32 i = threadIdx.x; i < (1u << HUF_TABLE_BITS); i += blockDim.x) {
        first_level[i] = tables[i];
        pairs[i] = tables[(1 << HUF_TABLE_BITS) + i];
    }
    const u32* per_len = tables + (2 << HUF_TABLE_BITS);
    for (u32 i = threadIdx.x; i <= HUF_MAX_LEN; i += blockDim.x) {
        first[i] = per_len[i];
        count[i] = per_len[HUF_MAX_LEN + 1 + i];
        offset[i] = per_len[2 * (HUF_MAX_LEN + 1) + i];
    }
    for (u32 i = threadIdx.x; i < nsorted; i += blockDim.x) sorted[i] = (u16)per_len[3 * (HUF_MAX_LEN + 1) + i];
    __syncthreads();
    const HufTables t = {first_level, pairs, first, count, offset, sorted, nsorted, bklen};
    // A one-entry book spends no bits on its entry: no segment would advance.
    bool single = first_level[0] != 0 && (first_level[0] & 0x7f) == 0;
    u64 c = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (c < nchunks && !huf_decode_chunk(payload, starts, n, t, single, c, threadIdx.x & 31, out)) atomicOr(err, 1u);
}
