// Emulator violation probes (sm_90a): tcgen05_fault(mode) performs one violation of fa4probe::FaultMode
// (sm100_probe.h), which must trap; mode kFaultNone walks the same path without it and must not.
// One CTA of 128 threads. Host side: tests/gpu/test_sm100_emulation.cpp (death tests).
#include "probe/sm100_probe.h"
#include "probe/probe_wait.cuh"
#include "common/ptx.cuh"
#include "sm100/tcgen05.cuh"

extern "C" __global__ void __launch_bounds__(128, 1)
    tcgen05_fault(int mode, unsigned* out, void* tmem_scratch, unsigned long long tmem_scratch_bytes) {
  using namespace fa4;
  using namespace fa4::sm100;
  using namespace fa4probe;
  // A: 128 x 16 and B: 16 x 16, K-major without swizzle (8-row x 16-byte core matrices: LBO = 128 B
  // to the second K half, SBO = 256 B to the next 8 rows).
  __shared__ __align__(1024) unsigned short operands[128 * 16 + 16 * 16];
  __shared__ u64 bar;
  __shared__ u32 slot, extra_slot;
  tmem_bind_scratch(tmem_scratch, tmem_scratch_bytes);
  const u32 warp = warp_id();
  const u32 ncols = mode == kFaultOverAllocation ? 512 : 64;

  for (u32 i = threadIdx.x; i < 128 * 16 + 16 * 16; i += blockDim.x) operands[i] = 0x3F80;  // 1.0 bf16
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    fence_mbarrier_init();
  }
  if (warp == 0) {
    tmem_alloc(&slot, ncols);
    if (mode == kFaultOverAllocation) tmem_alloc(&extra_slot, 32);
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const u32 tmem = slot;

  // One M=128, N=16 MMA into columns 0..15.
  const bool with_mma = mode == kFaultNone || mode == kFaultBadDescriptor || mode == kFaultStoreIntoPending;
  if (warp == 0 && with_mma) {
    const u32 a = smem_u32(operands), b = a + 128 * 16 * 2;
    u64 a_desc = make_smem_desc(a, 128, 256, Swizzle::none);
    if (mode == kFaultBadDescriptor) a_desc &= ~(1ull << 46);  // version bits 48:46 = 0b000
    mma_f16_ss(tmem, a_desc, make_smem_desc(b, 128, 256, Swizzle::none),
               make_idesc_f16(128, 16, Format::bf16, Major::K, Major::K), false);
  }
  __syncthreads();
  if (warp == 0 && mode == kFaultStoreIntoPending) {
    const u32 r[1] = {1u};
    tmem_st_32x32b<1>(tmem, r);  // column 0 is the pending MMA's destination
  }
  if (warp == 0 && with_mma) mma_commit(&bar);
  if (with_mma) wait_or_trap(&bar, 0, "the MMA commit");
  tcgen05_fence_after_thread_sync();

  // Every warp stores and reloads one column of its own lane quadrant (column 32).
  u32 first_lane = 32 * (warp % 4);
  if (mode == kFaultLaneQuadrant && warp == 1) first_lane = 0;  // warp 1 owns lanes 32..63
  u32 taddr = tmem + tmem_addr(first_lane, 32);
  if (mode == kFaultNonUniformAddress) taddr += lane_id() % 2;
  const u32 v[1] = {threadIdx.x + 1000u};
  u32 r[1];
  tmem_st_32x32b<1>(taddr, v);
  tmem_wait_st();
  tmem_ld_32x32b<1>(taddr, r);
  tmem_wait_ld();
  out[threadIdx.x] = r[0];

  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 0) {
    if (mode != kFaultLeak) tmem_dealloc(tmem, ncols);
    if (mode == kFaultDoubleFree) tmem_dealloc(tmem, ncols);
    tmem_exit_check();
  }
}
