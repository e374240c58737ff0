// Does compute-sanitizer racecheck understand mbarrier parity waits? A correct program: one producer thread
// publishes values through a 2-slot shared-memory ring guarded by full/empty mbarriers; two reader warps
// wait, read and release. Build: nvcc -arch=sm_90a -O2 -o probe tools/racecheck_mbarrier_probe.cu; run it
// plain (prints ok) and under `compute-sanitizer --tool racecheck` (bench/results/2026-11-30-h200-sanitizer.md).
#include <cstdio>
typedef unsigned long long u64;
__device__ __forceinline__ unsigned s32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void init(u64* b, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(s32(b)), "r"(n) : "memory"); }
__device__ __forceinline__ void arrive(u64* b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(s32(b)) : "memory"); }
__device__ __forceinline__ void wait(u64* b, unsigned parity) {
  unsigned done = 0;
  while (!done) asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(s32(b)), "r"(parity) : "memory");
}
__global__ void ring(int* out, int n) {
  __shared__ u64 full[2], empty[2];
  __shared__ int slot[2];
  if (threadIdx.x == 0) { for (int i = 0; i < 2; ++i) { init(&full[i], 1); init(&empty[i], 2); } asm volatile("fence.mbarrier_init.release.cluster;"); }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  if (warp == 2) {
    if (threadIdx.x % 32 == 0)
      for (int i = 0; i < n; ++i) {
        wait(&empty[i % 2], ((i / 2) & 1) ^ 1);
        slot[i % 2] = i;
        arrive(&full[i % 2]);
      }
  } else {
    int sum = 0;
    for (int i = 0; i < n; ++i) {
      wait(&full[i % 2], (i / 2) & 1);
      sum += slot[i % 2];
      __syncwarp();
      if (threadIdx.x % 32 == 0) arrive(&empty[i % 2]);
    }
    out[threadIdx.x] = sum;
  }
}
int main() {
  int* out; cudaMalloc(&out, 64 * 4);
  ring<<<1, 96>>>(out, 16);
  int h[64]; cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  printf("sum %d (expect %d): %s\n", h[0], 15 * 16 / 2, h[0] == 120 && h[63] == 120 ? "ok" : "WRONG");
  return 0;
}
