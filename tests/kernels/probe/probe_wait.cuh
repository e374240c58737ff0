// A bounded mbarrier wait for the test kernels: a missing arrival (wrong transaction bytes, a lost
// commit) prints which barrier and traps after 10 s instead of hanging the test run.
#pragma once

#include "common/ptx.cuh"

namespace fa4probe {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void wait_or_trap(unsigned long long* bar, unsigned parity, const char* what) {
  const unsigned long long start = global_ns();
  while (!fa4::mbarrier_try_wait_parity(bar, parity)) {
    if (global_ns() - start > 10000000000ull) {
      printf("fa4 probe: block %u thread %u timed out after 10 s waiting for %s\n", blockIdx.x, threadIdx.x, what);
      __trap();
    }
  }
}

}  // namespace fa4probe
