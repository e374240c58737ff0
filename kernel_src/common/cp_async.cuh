// cp.async (sm_80+): 16-byte global -> shared copies that bypass L1, shared by the portable kernels and the
// sm90 kernel's paged gather. Shared-memory operands are 32-bit shared-window addresses. Device code only.
#pragma once

namespace fa4k {

// src_bytes = 0 reads nothing and writes 16 zero bytes.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1; cp.async.cg.shared.global [%0], [g], 16, %2; }"
               :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
// The mbarrier at `bar` gets one more pending arrival now, and that arrival once all of this thread's
// earlier cp.asyncs have landed: its phase cannot complete before them.
__device__ __forceinline__ void cp_async_mbarrier_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}

}  // namespace fa4k
