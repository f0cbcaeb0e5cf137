// What the host side of a staged transfer can reach on the GPU machine (issue 16, "the link
// kept busy"): parallel host copies into and out of pinned memory with plain and non-temporal
// stores, alone and while the link carries the pieces before them, for 299 MB (etopo5 x8).
// Build and run on the device: nvcc -O2 -std=c++17 -Xcompiler -fopenmp -o /tmp/host-link scripts/host-link.cu && /tmp/host-link
// The numbers are in docs/PERFORMANCE.md ("The host link").
#include <cuda_runtime.h>
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>
#include <algorithm>
using clk = std::chrono::steady_clock;
static double secs(clk::time_point a) { return std::chrono::duration<double>(clk::now() - a).count(); }
static void nt_copy(char* d, const char* s, size_t n) {  // d, s 64-byte aligned, n multiple of 64
  for (size_t i = 0; i < n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(s + i)), b = _mm_loadu_si128((const __m128i*)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(s + i + 32)), e = _mm_loadu_si128((const __m128i*)(s + i + 48));
    _mm_stream_si128((__m128i*)(d + i), a); _mm_stream_si128((__m128i*)(d + i + 16), b);
    _mm_stream_si128((__m128i*)(d + i + 32), c); _mm_stream_si128((__m128i*)(d + i + 48), e);
  }
  _mm_sfence();
}
static void pcopy(char* d, const char* s, size_t n, int t, bool nt, size_t grain) {
  size_t pieces = (n + grain - 1) / grain;
#pragma omp parallel for num_threads(t) schedule(dynamic, 1)
  for (size_t k = 0; k < pieces; k++) {
    size_t o = k * grain, m = std::min(grain, n - o);
    if (nt) nt_copy(d + o, s + o, m); else memcpy(d + o, s + o, m);
  }
}
int main() {
  const size_t N = 299ull << 20;
  char* src = (char*)aligned_alloc(4096, N); memset(src, 1, N);
  char* dst = (char*)aligned_alloc(4096, N); memset(dst, 2, N);
  char* dev; cudaMalloc(&dev, N);
  cudaStream_t s; cudaStreamCreate(&s);
  char* pin; cudaHostAlloc(&pin, N, 0); memset(pin, 3, N);
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  std::vector<double> t;
  for (int th : {8, 12, 16}) for (bool nt : {false, true}) for (size_t g : {256ull << 10, 1ull << 20, 4ull << 20}) {
    for (int r = 0; r < 7; r++) { auto a = clk::now(); pcopy(pin, src, N, th, nt, g); t.push_back(secs(a)); }
    double up = N / med(t) / 1e9; t.clear();
    for (int r = 0; r < 7; r++) { auto a = clk::now(); pcopy(dst, pin, N, th, nt, g); t.push_back(secs(a)); }
    printf("copy %2d thr nt=%d grain %4zu KiB: to pinned %.1f, from pinned %.1f GB/s\n", th, nt, g >> 10, up, N / med(t) / 1e9); t.clear();
  }
  // Staged upload with a ring of K pieces of P bytes, copies by T threads (nt or not).
  for (size_t P : {8ull << 20, 16ull << 20, 32ull << 20}) for (int th : {12, 16}) for (bool nt : {false, true}) {
    const int K = 3;
    std::vector<cudaEvent_t> ev(K); for (auto& e : ev) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    for (int r = 0; r < 7; r++) {
      std::vector<bool> used(K, false);
      auto a = clk::now(); size_t pieces = (N + P - 1) / P;
      for (size_t k = 0; k < pieces; k++) {
        int slot = k % K; if (used[slot]) cudaEventSynchronize(ev[slot]);
        size_t o = k * P, m = std::min(P, N - o);
        pcopy(pin + slot * P, src + o, m, th, nt, 1 << 20);
        cudaMemcpyAsync(dev + o, pin + slot * P, m, cudaMemcpyHostToDevice, s); cudaEventRecord(ev[slot], s); used[slot] = true;
      }
      cudaStreamSynchronize(s); t.push_back(secs(a));
    }
    double up = N / med(t) / 1e9; t.clear();
    for (int r = 0; r < 7; r++) {
      auto a = clk::now(); size_t pieces = (N + P - 1) / P;
      for (size_t k = 0; k < std::min<size_t>(K, pieces); k++) { size_t o = k * P, m = std::min(P, N - o);
        cudaMemcpyAsync(pin + (k % K) * P, dev + o, m, cudaMemcpyDeviceToHost, s); cudaEventRecord(ev[k % K], s); }
      for (size_t k = 0; k < pieces; k++) {
        int slot = k % K; cudaEventSynchronize(ev[slot]); size_t o = k * P, m = std::min(P, N - o);
        pcopy(dst + o, pin + slot * P, m, th, nt, 1 << 20);
        size_t nk = k + K; if (nk < pieces) { size_t o2 = nk * P, m2 = std::min(P, N - o2);
          cudaMemcpyAsync(pin + slot * P, dev + o2, m2, cudaMemcpyDeviceToHost, s); cudaEventRecord(ev[slot], s); }
      }
      t.push_back(secs(a));
    }
    printf("staged x%d piece %2zu MiB %2d thr nt=%d: upload %.1f, download %.1f GB/s\n", K, P >> 20, th, nt, up, N / med(t) / 1e9); t.clear();
  }
  return 0;
}
