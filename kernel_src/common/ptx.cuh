// PTX wrappers native on every sm_90+ target, shared by the Hopper and Blackwell kernels: shared-memory
// addresses, mbarriers, TMA (4-D and 5-D tile load/store, bulk groups, proxy fence), named barriers, fp32
// to 16-bit pair packing, elect.sync, setmaxnreg. One function per instruction. Device code only.
#pragma once

#include "common/types.h"

namespace fa4 {

// The 128-byte TMA descriptor (CUtensorMap) as a kernel parameter: declare it
// `const __grid_constant__ TmaDescriptor` so its address is a param-space address TMA accepts.
struct alignas(64) TmaDescriptor {
  u64 opaque[16];
};

// shared::cta address of a generic pointer into shared memory.
// The builtin, not inline asm: the compiler folds it into its own address arithmetic (barrier and tile
// addresses become a uniform base plus constants).
__device__ __forceinline__ u32 smem_u32(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// A copy the compiler cannot see through: what is computed from it stays where it is used. Without it,
// a loop-invariant base plus one constant per k-step (descriptors, swizzled addresses) is hoisted out of
// the loop as one live register per step, which spills in register-tight roles.
template <typename T>
__device__ __forceinline__ T opaque(T x) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "opaque: 32- or 64-bit values");
  if constexpr (sizeof(T) == 8)
    asm volatile("" : "+l"(x));
  else
    asm volatile("" : "+r"(x));
  return x;
}

__device__ __forceinline__ u32 lane_id() {
  u32 r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

// Warp index inside the CTA (linear thread index / 32); warp % 4 is its TMEM lane quadrant.
__device__ __forceinline__ u32 warp_id() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32;
}

// ---------------------------------------------------------------------------------------------
// mbarrier (64-bit object in shared memory)

__device__ __forceinline__ void mbarrier_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// Makes mbarrier.init visible to the async proxy (TMA, tcgen05.commit); follow with a CTA barrier.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrives `count` times at once (for arrivals a role makes on behalf of others).
__device__ __forceinline__ void mbarrier_arrive(u64* bar, u32 count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// Arrives once and adds `bytes` to the transaction count the phase waits for (TMA complete_tx).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

// True once the phase with the given parity has completed.
__device__ __forceinline__ bool mbarrier_try_wait_parity(u64* bar, u32 parity) {
  u32 done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// The same with a suspend-time hint: while the phase is incomplete the thread may sleep in the instruction
// for up to `ns` nanoseconds (it wakes when the phase completes) instead of spending issue slots spinning.
__device__ __forceinline__ bool mbarrier_try_wait_parity_suspend(u64* bar, u32 parity, u32 ns) {
  u32 done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity), "r"(ns)
      : "memory");
  return done != 0;
}

// True if the phase with the given parity has completed, without waiting (one instruction on sm_90+).
__device__ __forceinline__ bool mbarrier_test_wait_parity(u64* bar, u32 parity) {
  u32 done;
  asm volatile(
      "{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Consumers start on parity 0; producers waiting on an "empty" barrier start on parity 1.
__device__ __forceinline__ void mbarrier_wait_parity(u64* bar, u32 parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

// ---------------------------------------------------------------------------------------------
// TMA (coordinates {dim, head, seq, batch} for fa4's [batch, seq, head, dim] tensors)

__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// Loads one box into shared memory; completion is counted on `bar` in bytes (OOB rows read as zero).
__device__ __forceinline__ void tma_load_4d(void* smem_dst, const TmaDescriptor* map, u64* bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(smem_u32(smem_dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}

// Stores one box from shared memory (writers: fence_proxy_async_shared + barrier first). OOB is clipped.
__device__ __forceinline__ void tma_store_4d(const TmaDescriptor* map, const void* smem_src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(smem_src))
               : "memory");
}

// 5-D maps for GQA-packed Q and O: coordinates {dim, head in pack, head group, token, batch}.
__device__ __forceinline__ void tma_load_5d(void* dst, const TmaDescriptor* map, u64* bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32(bar))
      : "memory");
}

__device__ __forceinline__ void tma_store_5d(const TmaDescriptor* map, const void* src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32(src))
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most N committed bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Waits until at most N committed bulk groups are incomplete (writes visible).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// Orders generic-proxy shared-memory writes before later async-proxy (TMA store, MMA) reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Named barriers (id 0 is __syncthreads); `threads` is a multiple of 32.

__device__ __forceinline__ void named_barrier_sync(u32 id, u32 threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(u32 id, u32 threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Two fp32 values rounded to one bf16x2 (kBf16) or f16x2 register, `lo` in the low half.
template <bool kBf16>
__device__ __forceinline__ u32 pack_half2(float lo, float hi) {
  u32 r;
  if constexpr (kBf16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// ---------------------------------------------------------------------------------------------
// Warp election and register reallocation

// True in exactly one lane of a converged warp (the same lane on every call with all lanes active).
__device__ __forceinline__ bool elect_one_sync() {
  u32 elected;
  asm volatile(
      "{ .reg .pred p; .reg .b32 r; elect.sync r|p, 0xffffffff; selp.u32 %0, 1, 0, p; }"
      : "=r"(elected)
      :
      : "memory");
  return elected != 0;
}

// Per-thread register budget for the rest of the kernel; N in 24..256, a multiple of 8, the same for
// all warps of a warpgroup (arch-specific targets only: sm_90a, sm_100a).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

// From the launch's kLaunch registers a thread to N: an increase, a decrease, or nothing.
template <int N, int kLaunch>
__device__ __forceinline__ void setmaxnreg_to() {
  if constexpr (N > kLaunch) setmaxnreg_inc<N>();
  else if constexpr (N < kLaunch) setmaxnreg_dec<N>();
}

}  // namespace fa4
