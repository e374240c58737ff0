// How fast can one SM fill its K/V ring from a paged cache, by page size and by who issues the copies?
// The sm90 kernel loads a block of 128 keys (one kv head, d128: 32 KB) piece by piece inside pages: pages
// of 16 keys ran at 0.65x of contiguous keys, whether one thread issued TMA boxes or one warp cp.async
// (bench/results/2026-11-30-h200-softcap-small-pages.md). This probe measures the load side alone: every SM
// streams blocks from shuffled pages into a 2-slot ring that a consumer thread releases at once, and prints
// GB/s for TMA pieces (2 boxes of 64 columns per piece, 128B swizzle) issued by one thread or by one lane per
// piece, and for cp.async gathers by 1, 2 and 4 warps, with the pool in L2 (16 MB) and in HBM (1 GB).
//   nvcc -arch=sm_90a -O2 -o tma_page_probe tools/tma_page_probe.cu -lcuda && ./tma_page_probe
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

typedef unsigned long long u64;
constexpr int kHeads = 16, kD = 128, kRowBytes = kD * 2, kBlock = 128, kSlotBytes = kBlock * kRowBytes;

__device__ __forceinline__ unsigned s32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void init(u64* b, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(s32(b)), "r"(n) : "memory"); }
__device__ __forceinline__ void arrive(u64* b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(s32(b)) : "memory"); }
__device__ __forceinline__ void expect_tx(u64* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(s32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wait(u64* b, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(s32(b)), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_4d(void* dst, const CUtensorMap* map, u64* bar, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];"
               :: "r"(s32(dst)), "l"(map), "r"(s32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_arrive_noinc(u64* b) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(s32(b)) : "memory");
}
__device__ __forceinline__ unsigned swz(unsigned off) { return off ^ (((off >> 7) & 7) << 4); }  // 128B swizzle

// warps 0..copiers-1 produce with cp.async (copiers = 0: warp 0's lane 0 issues the TMA boxes; -1: lane p of
// warp 0 issues piece p's), the last warp consumes.
__global__ void __launch_bounds__(160, 1)
    probe(const __grid_constant__ CUtensorMap map, const char* pool, const int* table, int page_log2, int blocks, int copiers) {
  extern __shared__ __align__(1024) char smem[];
  char* ring = reinterpret_cast<char*>((reinterpret_cast<size_t>(smem) + 1023) & ~size_t(1023));
  u64* full = reinterpret_cast<u64*>(ring + 2 * kSlotBytes);
  u64* empty = full + 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, piece = 1 << page_log2;
  const int producers = copiers > 0 ? copiers * 32 : 1;
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i) init(&full[i], producers), init(&empty[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int* pages = table + static_cast<long long>(blockIdx.x) * blocks * (kBlock >> page_log2);
  if (warp == 4) {  // consumer: release each block as soon as it lands
    if (lane == 0)
      for (int b = 0; b < blocks; ++b) {
        wait(&full[b & 1], (b >> 1) & 1);
        arrive(&empty[b & 1]);
      }
  } else if (copiers <= 0) {
    if (warp == 0)
      for (int b = 0; b < blocks; ++b) {
        const int s = b & 1, head = (blockIdx.x + b) % kHeads;
        wait(&empty[s], ((b >> 1) & 1) ^ 1);
        if (lane == 0) expect_tx(&full[s], kSlotBytes);
        __syncwarp();
        for (int p = copiers == 0 ? 0 : lane; p < kBlock / piece; p += copiers == 0 ? 1 : 32)
          if (copiers < 0 || lane == 0)
            for (int box = 0; box < 2; ++box)
              tma_4d(ring + s * kSlotBytes + box * kBlock * 128 + p * piece * 128, &map, &full[s], box * 64, head, 0,
                     pages[b * (kBlock / piece) + p]);
        __syncwarp();
      }
  } else if (warp < copiers) {
    const int t = threadIdx.x;
    for (int b = 0; b < blocks; ++b) {
      const int s = b & 1, head = (blockIdx.x + b) % kHeads;
      wait(&empty[s], ((b >> 1) & 1) ^ 1);
      for (int i = t; i < kBlock * 16; i += producers) {  // 16 chunks of 16 bytes per row
        const int r = i / 16, c = i % 16;
        const long long row = static_cast<long long>(pages[b * (kBlock / piece) + (r >> page_log2)]) * piece + (r & (piece - 1));
        cp16(s32(ring + s * kSlotBytes) + swz((c / 8) * kBlock * 128 + r * 128 + (c % 8) * 16),
             pool + (row * kHeads + head) * kRowBytes + c * 16);
      }
      cp_arrive_noinc(&full[s]);
    }
  }
}

int main() {
  if (cuInit(0) != CUDA_SUCCESS) return puts("no CUDA device"), 1;
  CUdevice dev;
  CUcontext ctx;
  cuDeviceGet(&dev, 0);
  cuDevicePrimaryCtxRetain(&ctx, dev);
  cuCtxSetCurrent(ctx);
  int sms = 0;
  cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  const int smem = 2 * kSlotBytes + 1024 + 64, blocks = 2000;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("| pool | page | TMA, 1 thread | TMA, a lane per piece | cp.async 1 warp | 2 warps | 4 warps |  (GB/s of K into %d SMs)\n"
         "|---|---|---|---|---|---|---|\n", sms);
  for (long long pool_bytes : {16ll << 20, 1ll << 30}) {
    const long long rows = pool_bytes / (kHeads * kRowBytes);
    char* pool;
    cudaMalloc(&pool, pool_bytes);
    cudaMemset(pool, 1, pool_bytes);
    for (int page_log2 : {4, 5, 6, 7}) {
      const int piece = 1 << page_log2, per_block = kBlock / piece;
      const long long num_pages = rows / piece;
      std::vector<int> table(static_cast<size_t>(sms) * blocks * per_block);
      std::mt19937 rng(page_log2);
      for (int& p : table) p = static_cast<int>(rng() % num_pages);
      int* dtable;
      cudaMalloc(&dtable, table.size() * sizeof(int));
      cudaMemcpy(dtable, table.data(), table.size() * sizeof(int), cudaMemcpyHostToDevice);
      CUtensorMap map;
      const cuuint64_t dims[4] = {kD, kHeads, static_cast<cuuint64_t>(piece), static_cast<cuuint64_t>(num_pages)};
      const cuuint64_t strides[3] = {kRowBytes, kHeads * kRowBytes, static_cast<cuuint64_t>(piece) * kHeads * kRowBytes};
      const cuuint32_t box[4] = {64, 1, static_cast<cuuint32_t>(piece), 1}, unit[4] = {1, 1, 1, 1};
      if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, pool, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return puts("cuTensorMapEncodeTiled failed"), 1;
      printf("| %lld MB | %d |", pool_bytes >> 20, piece);
      for (int copiers : {0, -1, 1, 2, 4}) {
        cudaEvent_t a, b;
        cudaEventCreate(&a), cudaEventCreate(&b);
        probe<<<sms, 160, smem>>>(map, pool, dtable, page_log2, 50, copiers);  // warm-up
        cudaEventRecord(a);
        probe<<<sms, 160, smem>>>(map, pool, dtable, page_log2, blocks, copiers);
        cudaEventRecord(b);
        if (cudaEventSynchronize(b) != cudaSuccess) return printf("kernel failed: %s\n", cudaGetErrorString(cudaGetLastError())), 1;
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        printf(" %.0f |", static_cast<double>(sms) * blocks * kSlotBytes / (ms * 1e6));
      }
      printf("\n");
      cudaFree(dtable);
    }
    cudaFree(pool);
  }
  return 0;
}
