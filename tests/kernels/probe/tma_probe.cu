// PTX probes for the wrappers of common/ptx.cuh (native on sm_90a and sm_100a). Host side:
// tests/gpu/test_tma_probe.cpp; tests/cpu/test_sm100_compile.cpp compiles this file for both targets.
//   tma_probe      : loads one swizzled box of a [batch, seq, head, dim] tensor into shared memory (poisoned
//                    with 0xA5 first) and copies the raw bytes out, so the host can check every byte against
//                    its swizzle model (sm100/descriptors.h, tma_box_offset) and the zero fill of rows past
//                    seqlen; with `store`, also writes the box back through a second map (TMA store, bulk
//                    group) so the host can check that rows past seqlen are clipped.
//                    One CTA of 128 threads; dynamic shared memory kTmaProbeSmemBytes (sm100_probe.h).
//   ptx_sync_probe : elect.sync (one lane per warp) and a named-barrier handoff between two warpgroups.
//                    One CTA of 256 threads. setmaxnreg runs only when asked (the GPU test does not: the
//                    budgets depend on the kernel's allocation); it is here so both targets compile it.
#include "probe/probe_wait.cuh"
#include "probe/sm100_probe.h"
#include "common/ptx.cuh"

extern "C" __global__ void __launch_bounds__(128, 1)
    tma_probe(const __grid_constant__ fa4::TmaDescriptor map,
              const __grid_constant__ fa4::TmaDescriptor store_map, unsigned char* out, int c_dim, int c_head,
              int c_seq, int c_batch, unsigned box_bytes, int store) {
  using namespace fa4;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* box = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  u64* bar = reinterpret_cast<u64*>(box + fa4probe::kTmaProbeMaxBoxBytes);

  for (u32 i = threadIdx.x; i < box_bytes / 4; i += blockDim.x) reinterpret_cast<u32*>(box)[i] = 0xA5A5A5A5u;
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    fence_mbarrier_init();
  }
  fence_proxy_async_shared();  // the poison is written before TMA overwrites it
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_prefetch_descriptor(&map);
    mbarrier_arrive_expect_tx(bar, box_bytes);
    tma_load_4d(box, &map, bar, c_dim, c_head, c_seq, c_batch);
  }
  fa4probe::wait_or_trap(bar, 0, "the TMA load (transaction bytes)");
  for (u32 i = threadIdx.x; i < box_bytes / 4; i += blockDim.x)
    reinterpret_cast<u32*>(out)[i] = reinterpret_cast<const u32*>(box)[i];
  if (store && threadIdx.x == 0) {
    tma_store_4d(&store_map, box, c_dim, c_head, c_seq, c_batch);
    bulk_commit_group();
    bulk_wait_group_read<0>();  // the box may be reused
    bulk_wait_group<0>();       // the writes are done
  }
}

// out[w] = lanes elected in warp w (1 each); out[8 + i] = value thread i of warpgroup 0 handed over.
extern "C" __global__ void __launch_bounds__(256, 1) ptx_sync_probe(unsigned* out, int use_setmaxnreg) {
  using namespace fa4;
  __shared__ unsigned handoff[128];
  const u32 warp = warp_id();
  if (use_setmaxnreg) {
    if (warp < 4)
      setmaxnreg_inc<128>();
    else
      setmaxnreg_dec<64>();
  }
  if (elect_one_sync()) atomicAdd(&out[warp], 1u);
  if (warp < 4) {
    handoff[threadIdx.x] = 3 * threadIdx.x + 1;
    named_barrier_arrive(1, 256);
  } else {
    named_barrier_sync(1, 256);
    out[8 + threadIdx.x - 128] = handoff[threadIdx.x - 128];
  }
}
