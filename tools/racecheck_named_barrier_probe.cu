// Does compute-sanitizer racecheck understand a named barrier's non-blocking arrive? A correct program: four
// writer warps stage values in shared memory and arrive on named barrier 1 (bar.arrive); a reader warp waits
// there (bar.sync), reads every value, and arrives on barrier 2, where the writers wait before the next round
// (the sm90 kernel's O staging and storer use the same pattern). Build: nvcc -arch=sm_90a -O2 -o probe2
// tools/racecheck_named_barrier_probe.cu; run it plain (prints ok) and under `compute-sanitizer --tool
// racecheck` (bench/results/2026-12-07-h100-sm90-causal-order-sanitizer.md).
#include <cstdio>
__global__ void staged(int* out, int rounds) {
  __shared__ int buf[128];
  const int warp = threadIdx.x / 32;
  if (warp < 4) {
    for (int r = 0; r < rounds; ++r) {
      if (r > 0) asm volatile("bar.sync 2, 160;" ::: "memory");  // the reader is done with the last round
      buf[threadIdx.x] = r * 1000 + threadIdx.x;
      asm volatile("bar.arrive 1, 160;" ::: "memory");
    }
  } else {
    long long sum = 0;
    for (int r = 0; r < rounds; ++r) {
      asm volatile("bar.sync 1, 160;" ::: "memory");
      for (int i = threadIdx.x % 32; i < 128; i += 32) sum += buf[i];
      if (r + 1 < rounds) asm volatile("bar.arrive 2, 160;" ::: "memory");
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x % 32 == 0) *out = static_cast<int>(sum);
  }
}
int main() {
  int* out; cudaMalloc(&out, 4);
  const int rounds = 8;
  staged<<<1, 160>>>(out, rounds);
  int h = 0; cudaMemcpy(&h, out, 4, cudaMemcpyDeviceToHost);
  long long expect = 0;
  for (int r = 0; r < rounds; ++r) for (int t = 0; t < 128; ++t) expect += r * 1000 + t;
  printf("sum %d (expect %lld): %s\n", h, expect, h == expect ? "ok" : "WRONG");
  return 0;
}
