// Ties the tcgen05 emulator to silicon (sm_90a only). Hopper's wgmma reads shared memory through
// descriptors with the same canonical layouts as tcgen05.mma (start, LBO, SBO, swizzle); only the
// version/base-offset fields and the layout-type encoding differ. One CTA (one warpgroup) TMA-loads A
// (128 x K) and B (N x K), multiplies them with real wgmma m64n128k16 (two M halves, N/128 N parts) and
// with the emulated tcgen05.mma decoding the Blackwell descriptors of the same tiles, and writes both.
// Host side: tests/gpu/test_sm100_emulation.cpp.
#include "probe/sm100_probe.h"
#include "probe/probe_wait.cuh"
#include "common/ptx.cuh"
#include "sm100/tcgen05.cuh"

namespace {

using namespace fa4;
using namespace fa4::sm100;

__device__ __forceinline__ unsigned char* align_1024(unsigned char* p) {
  const u32 addr = smem_u32(p);
  return p + ((1024u - (addr & 1023u)) & 1023u);
}

// A tile of `rows` x `cols` (cols contiguous) as boxes of span/2 columns, box j at j * rows * span.
__device__ __forceinline__ void load_tile(unsigned char* dst, const TmaDescriptor* map, u64* bar, u32 rows, u32 cols,
                                          u32 span) {
  const u32 width = span / 2;
  for (u32 j = 0; j < (cols + width - 1) / width; ++j) tma_load_4d(dst + j * rows * span, map, bar, width * j, 0, 0, 0);
}
__device__ __forceinline__ u32 tile_bytes(u32 rows, u32 cols, u32 span) {
  return (cols + span / 2 - 1) / (span / 2) * rows * span;
}

// Byte offset of operand element (mn, k) in its tile, and the LBO/SBO of the tile's layout.
__device__ __forceinline__ u32 operand_offset(Swizzle sw, bool mn_major, u32 mn_rows, u32 k_rows, u32 mn, u32 k) {
  return mn_major ? tile_offset(sw, k_rows, k, mn) : tile_offset(sw, mn_rows, mn, k);
}
__device__ __forceinline__ u32 operand_lbo(Swizzle sw, bool mn_major, u32 k_rows) {
  return mn_major ? k_rows * swizzle_span(sw) : 16u;
}

#define FA4_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                  "+f"(d[i + 6]), "+f"(d[i + 7])
#define FA4_D64 FA4_D8(0), FA4_D8(8), FA4_D8(16), FA4_D8(24), FA4_D8(32), FA4_D8(40), FA4_D8(48), FA4_D8(56)
#define FA4_WGMMA(TYPE, TA, TB)                                                                                   \
  asm volatile(                                                                                                   \
      "{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"                                                                  \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." #TYPE "." #TYPE                                             \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21,"     \
      " %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42," \
      " %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}," \
      " %64, %65, p, 1, 1, " #TA ", " #TB "; }"                                                                   \
      : FA4_D64                                                                                                   \
      : "l"(a_desc), "l"(b_desc), "r"(scale_d))

// D[64 x 128] (+)= A * B^T; imm-trans = 1 selects an MN-major operand.
__device__ __forceinline__ void wgmma_64x128(float (&d)[64], u64 a_desc, u64 b_desc, u32 scale_d, bool bf16, bool a_mn,
                                             bool b_mn) {
  const u32 variant = (bf16 ? 4u : 0u) | (a_mn ? 2u : 0u) | (b_mn ? 1u : 0u);
  switch (variant) {
    case 0: FA4_WGMMA(f16, 0, 0); break;
    case 1: FA4_WGMMA(f16, 0, 1); break;
    case 2: FA4_WGMMA(f16, 1, 0); break;
    case 3: FA4_WGMMA(f16, 1, 1); break;
    case 4: FA4_WGMMA(bf16, 0, 0); break;
    case 5: FA4_WGMMA(bf16, 0, 1); break;
    case 6: FA4_WGMMA(bf16, 1, 0); break;
    default: FA4_WGMMA(bf16, 1, 1); break;
  }
}
#undef FA4_WGMMA
#undef FA4_D64
#undef FA4_D8

// Keeps the compiler from touching the accumulators across wgmma.wait_group.
__device__ __forceinline__ void fence_accumulators(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128, 1)
    wgmma_compare(const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                  const fa4probe::WgmmaArgs args) {
  extern __shared__ unsigned char smem_raw[];
  tmem_bind_scratch(args.tmem_scratch, args.tmem_scratch_bytes);
  unsigned char* smem = align_1024(smem_raw);
  unsigned char* sa = smem + fa4probe::kProbeSmemA;
  unsigned char* sb = smem + fa4probe::kProbeSmemB;
  u64* tma_bar = reinterpret_cast<u64*>(smem + fa4probe::kProbeSmemBars);
  u64* mma_bar = tma_bar + 1;
  u32* tmem_slot = reinterpret_cast<u32*>(tma_bar + 2);
  const u32 warp = warp_id(), lane = lane_id();
  const u32 n = args.n, k = args.k;
  const bool a_mn = args.a_mn_major, b_mn = args.b_mn_major, bf16 = args.bf16;
  const Swizzle sw = swizzle_from_bytes(args.swizzle_bytes);
  const u32 span = swizzle_span(sw);
  constexpr u32 kM = 128;  // rows of the A tile

  if (threadIdx.x == 0) {
    mbarrier_init(tma_bar, 1);
    mbarrier_init(mma_bar, 1);
    fence_mbarrier_init();
  }
  if (warp == 0) {
    tmem_alloc(tmem_slot, 256);
    tmem_relinquish_alloc_permit();
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const u32 tmem = *tmem_slot;

  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(tma_bar, tile_bytes(a_mn ? k : kM, a_mn ? kM : k, span) +
                                           tile_bytes(b_mn ? k : n, b_mn ? n : k, span));
    load_tile(sa, &tma_a, tma_bar, a_mn ? k : kM, a_mn ? kM : k, span);
    load_tile(sb, &tma_b, tma_bar, b_mn ? k : n, b_mn ? n : k, span);
  }
  fa4probe::wait_or_trap(tma_bar, 0, "the TMA loads of A and B");

  // Real wgmma: warpgroup-wide, 64 rows x 128 columns per instruction.
  for (u32 mh = 0; mh < kM / 64; ++mh) {
    for (u32 nh = 0; nh < n / 128; ++nh) {
      float d[64];
#pragma unroll
      for (int i = 0; i < 64; ++i) d[i] = 0.f;
      fence_accumulators(d);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      for (u32 s = 0; s < k / 16; ++s) {
        const u64 a_desc = make_wgmma_desc(smem_u32(sa) + operand_offset(sw, a_mn, kM, k, 64 * mh, 16 * s),
                                           operand_lbo(sw, a_mn, k), 8 * span, sw);
        const u64 b_desc = make_wgmma_desc(smem_u32(sb) + operand_offset(sw, b_mn, n, k, 128 * nh, 16 * s),
                                           operand_lbo(sw, b_mn, k), 8 * span, sw);
        wgmma_64x128(d, a_desc, b_desc, s > 0 ? 1u : 0u, bf16, a_mn, b_mn);
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      fence_accumulators(d);
      // Accumulator fragment: warp w owns rows 16w..16w+15; d[4i + {0,1}] row lane/4, d[4i + {2,3}] row
      // lane/4 + 8; columns 8i + 2 * (lane % 4) + {0, 1}.
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const u32 row = 64 * mh + 16 * warp + lane / 4, col = 128 * nh + 8 * i + 2 * (lane % 4);
        args.d_wgmma[row * n + col] = d[4 * i];
        args.d_wgmma[row * n + col + 1] = d[4 * i + 1];
        args.d_wgmma[(row + 8) * n + col] = d[4 * i + 2];
        args.d_wgmma[(row + 8) * n + col + 1] = d[4 * i + 3];
      }
    }
  }

  // Emulated tcgen05.mma over the same tiles, Blackwell descriptors, one instruction per K step.
  const u32 m = args.m_emu;
  if (warp == 0) {
    const u32 idesc = make_idesc_f16(m, n, bf16 ? Format::bf16 : Format::f16, a_mn ? Major::MN : Major::K,
                                     b_mn ? Major::MN : Major::K);
    for (u32 s = 0; s < k / 16; ++s) {
      const u64 a_desc = make_smem_desc(smem_u32(sa) + operand_offset(sw, a_mn, kM, k, 0, 16 * s),
                                        operand_lbo(sw, a_mn, k), 8 * span, sw);
      const u64 b_desc = make_smem_desc(smem_u32(sb) + operand_offset(sw, b_mn, n, k, 0, 16 * s),
                                        operand_lbo(sw, b_mn, k), 8 * span, sw);
      mma_f16_ss(tmem, a_desc, b_desc, idesc, s > 0);
    }
    mma_commit(mma_bar);
  }
  fa4probe::wait_or_trap(mma_bar, 0, "the MMA commit");
  tcgen05_fence_after_thread_sync();
  const int row = m == 128 ? (int)(32 * warp + lane) : (lane < 16 ? (int)(16 * warp + lane) : -1);
  for (u32 c0 = 0; c0 < n; c0 += 8) {
    u32 r[8];
    tmem_ld_32x32b<8>(tmem + tmem_addr(32 * warp, c0), r);
    tmem_wait_ld();
    if (row >= 0)
      for (int j = 0; j < 8; ++j) args.d_emu[row * n + c0 + j] = __uint_as_float(r[j]);
  }

  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 0) {
    tmem_dealloc(tmem, 256);
    tmem_exit_check();
  }
}
