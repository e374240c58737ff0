// Test kernels for the sm100 primitives, one source for sm_100a (real tcgen05) and sm_90a (emulated):
//   tcgen05_gemm      : TMA (128B swizzle, K- or MN-major) -> SS or TS MMAs -> commit -> tcgen05.ld -> global.
//   tcgen05_roundtrip : tcgen05.st then tcgen05.ld with every 32x32b.xN shape.
//   f32x2_probe       : packed f32x2 add/mul/fma.
// Host side: tests/gpu/test_sm100_emulation.cpp (and tests/cpu/test_sm100_compile.cpp compiles it).
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

// One 64-element-wide, 128B-swizzled TMA box per 64 columns of the tensor [1, rows, 1, cols].
__device__ __forceinline__ u32 load_tile(unsigned char* dst, const TmaDescriptor* map, u64* bar, u32 rows, u32 cols) {
  const u32 boxes = (cols + 63) / 64;
  for (u32 j = 0; j < boxes; ++j) tma_load_4d(dst + j * rows * 128, map, bar, 64 * j, 0, 0, 0);
  return boxes * rows * 128;
}

// Descriptor of K-step `s` (K elements 16s..16s+15) of a tile loaded by load_tile.
__device__ __forceinline__ u64 step_desc(unsigned char* tile, bool mn_major, u32 mn, u32 k, u32 s) {
  const OperandStep st = mn_major ? mnmajor_step(Swizzle::b128, k, 16 * s) : kmajor_step(Swizzle::b128, mn, 16 * s);
  return make_smem_desc(smem_u32(tile) + st.start, st.lbo, st.sbo, Swizzle::b128);
}

// The accumulator row held by this thread's TMEM lane (32x32b: thread i <-> lane 32 * (warp % 4) + i).
__device__ __forceinline__ int accumulator_row(u32 m, u32 warp, u32 lane) {
  if (m == 128) return (int)(32 * warp + lane);
  return lane < 16 ? (int)(16 * warp + lane) : -1;  // M = 64: 16 rows per lane quadrant (layout F)
}

__device__ void store_accumulator(u32 tmem, const fa4probe::GemmArgs& args, float* out) {
  const u32 warp = warp_id(), lane = lane_id();
  const int row = accumulator_row(args.m, warp, lane);
  for (int c0 = 0; c0 < args.n; c0 += 8) {
    u32 r[8];
    tmem_ld_32x32b<8>(tmem + tmem_addr(32 * warp, c0), r);
    tmem_wait_ld();
    if (row >= 0)
      for (int j = 0; j < 8; ++j) out[row * args.n + c0 + j] = __uint_as_float(r[j]);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128, 1)
    tcgen05_gemm(const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                 const fa4probe::GemmArgs args) {
  extern __shared__ unsigned char smem_raw[];
  tmem_bind_scratch(args.tmem_scratch, args.tmem_scratch_bytes);
  unsigned char* smem = align_1024(smem_raw);
  unsigned char* sa = smem + fa4probe::kProbeSmemA;
  unsigned char* sb = smem + fa4probe::kProbeSmemB;
  u64* tma_bar = reinterpret_cast<u64*>(smem + fa4probe::kProbeSmemBars);
  u64* mma_bar = tma_bar + 1;
  u32* tmem_slot = reinterpret_cast<u32*>(tma_bar + 2);
  const u32 warp = warp_id(), lane = lane_id();
  const u32 m = args.m, n = args.n, k = args.k;
  constexpr u32 kAColumn = 256;  // TS: A in TMEM columns 256.., D in 0..n-1

  if (threadIdx.x == 0) {
    mbarrier_init(tma_bar, 1);
    mbarrier_init(mma_bar, 1);
    fence_mbarrier_init();
  }
  if (warp == 0) {
    tmem_alloc(tmem_slot, 512);
    tmem_relinquish_alloc_permit();
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const u32 tmem = *tmem_slot;

  if (threadIdx.x == 0) {
    // Expect the bytes of every box first (all boxes count their full size, out-of-bounds included).
    const u32 a_bytes = args.ts ? 0u : ((args.a_mn_major ? m : k) + 63) / 64 * (args.a_mn_major ? k : m) * 128;
    const u32 b_bytes = ((args.b_mn_major ? n : k) + 63) / 64 * (args.b_mn_major ? k : n) * 128;
    mbarrier_arrive_expect_tx(tma_bar, a_bytes + b_bytes);
    if (!args.ts) load_tile(sa, &tma_a, tma_bar, args.a_mn_major ? k : m, args.a_mn_major ? m : k);
    load_tile(sb, &tma_b, tma_bar, args.b_mn_major ? k : n, args.b_mn_major ? n : k);
  }

  if (args.ts) {  // every warp copies its rows of A into its TMEM lanes, two elements per column
    const int row = accumulator_row(m, warp, lane);
    for (u32 c0 = 0; c0 < k / 2; c0 += 8) {
      u32 r[8];
      for (int j = 0; j < 8; ++j) {
        const unsigned short* src = args.a_rows + (row < 0 ? 0 : row) * args.a_ld + 2 * (c0 + j);
        r[j] = row < 0 ? 0u : (u32)src[0] | ((u32)src[1] << 16);
      }
      tmem_st_32x32b<8>(tmem + tmem_addr(32 * warp, kAColumn + c0), r);
    }
    tmem_wait_st();
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();

  if (warp == 0) {  // the MMA warp (warp-collective calls)
    fa4probe::wait_or_trap(tma_bar, 0, "the TMA loads of A and B");
    tcgen05_fence_after_thread_sync();
    const u32 idesc = make_idesc_f16(m, n, args.bf16 ? Format::bf16 : Format::f16,
                                     args.a_mn_major ? Major::MN : Major::K, args.b_mn_major ? Major::MN : Major::K);
    for (u32 s = 0; s < k / 16; ++s) {
      const u64 b_desc = step_desc(sb, args.b_mn_major, n, k, s);
      if (args.ts)
        mma_f16_ts(tmem, tmem + kAColumn + 8 * s, b_desc, idesc, s > 0);
      else
        mma_f16_ss(tmem, step_desc(sa, args.a_mn_major, m, k, s), b_desc, idesc, s > 0);
    }
    if (!args.read_before_commit) mma_commit(mma_bar);
  }

  if (args.read_before_commit) {  // a consumer that does not wait for the commit
    __syncthreads();              // the MMAs are issued
    tcgen05_fence_after_thread_sync();
    store_accumulator(tmem, args, args.d_early);
    tcgen05_fence_before_thread_sync();
    __syncthreads();
    if (warp == 0) mma_commit(mma_bar);
  }
  fa4probe::wait_or_trap(mma_bar, 0, "the MMA commit");
  tcgen05_fence_after_thread_sync();
  store_accumulator(tmem, args, args.d);

  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 0) {
    tmem_dealloc(tmem, 512);
    tmem_exit_check();
  }
}

// Warp w stores in[w*32 + i][0..255] into its lanes with x128, x64, ..., x1, x1 and reads them back
// with x1, x1, x2, ..., x128 into out (same layout). 128 threads, one CTA.
extern "C" __global__ void __launch_bounds__(128, 1)
    tcgen05_roundtrip(const u32* in, u32* out, void* tmem_scratch, unsigned long long tmem_scratch_bytes) {
  __shared__ u32 tmem_slot;
  tmem_bind_scratch(tmem_scratch, tmem_scratch_bytes);
  const u32 warp = warp_id();
  if (warp == 0) tmem_alloc(&tmem_slot, 256);
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const u32 base = tmem_slot + tmem_addr(32 * warp, 0);
  const u32* src = in + threadIdx.x * 256;
  u32* dst = out + threadIdx.x * 256;
  {
    u32 r128[128], r64[64], r32[32], r16[16], r8[8], r4[4], r2[2], r1[1], r1b[1];
    for (int j = 0; j < 128; ++j) r128[j] = src[j];
    for (int j = 0; j < 64; ++j) r64[j] = src[128 + j];
    for (int j = 0; j < 32; ++j) r32[j] = src[192 + j];
    for (int j = 0; j < 16; ++j) r16[j] = src[224 + j];
    for (int j = 0; j < 8; ++j) r8[j] = src[240 + j];
    for (int j = 0; j < 4; ++j) r4[j] = src[248 + j];
    for (int j = 0; j < 2; ++j) r2[j] = src[252 + j];
    r1[0] = src[254];
    r1b[0] = src[255];
    tmem_st_32x32b<128>(base + 0, r128);
    tmem_st_32x32b<64>(base + 128, r64);
    tmem_st_32x32b<32>(base + 192, r32);
    tmem_st_32x32b<16>(base + 224, r16);
    tmem_st_32x32b<8>(base + 240, r8);
    tmem_st_32x32b<4>(base + 248, r4);
    tmem_st_32x32b<2>(base + 252, r2);
    tmem_st_32x32b<1>(base + 254, r1);
    tmem_st_32x32b<1>(base + 255, r1b);
    tmem_wait_st();
  }
  {
    u32 r1[1], r1b[1], r2[2], r4[4], r8[8], r16[16], r32[32], r64[64], r128[128];
    tmem_ld_32x32b<1>(base + 0, r1);
    tmem_ld_32x32b<1>(base + 1, r1b);
    tmem_ld_32x32b<2>(base + 2, r2);
    tmem_ld_32x32b<4>(base + 4, r4);
    tmem_ld_32x32b<8>(base + 8, r8);
    tmem_ld_32x32b<16>(base + 16, r16);
    tmem_ld_32x32b<32>(base + 32, r32);
    tmem_ld_32x32b<64>(base + 64, r64);
    tmem_ld_32x32b<128>(base + 128, r128);
    tmem_wait_ld();
    dst[0] = r1[0];
    dst[1] = r1b[0];
    for (int j = 0; j < 2; ++j) dst[2 + j] = r2[j];
    for (int j = 0; j < 4; ++j) dst[4 + j] = r4[j];
    for (int j = 0; j < 8; ++j) dst[8 + j] = r8[j];
    for (int j = 0; j < 16; ++j) dst[16 + j] = r16[j];
    for (int j = 0; j < 32; ++j) dst[32 + j] = r32[j];
    for (int j = 0; j < 64; ++j) dst[64 + j] = r64[j];
    for (int j = 0; j < 128; ++j) dst[128 + j] = r128[j];
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == 0) {
    tmem_dealloc(tmem_slot, 256);
    tmem_exit_check();
  }
}

// out[3 * i + {0, 1, 2}] = add, mul, fma of pairs: a = in[6i..6i+1], b = in[6i+2..], c = in[6i+4..]
// (each output is an F32x2, so out holds 6 floats per i).
extern "C" __global__ void f32x2_probe(const float* in, float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const F32x2 a{in[6 * i], in[6 * i + 1]}, b{in[6 * i + 2], in[6 * i + 3]}, c{in[6 * i + 4], in[6 * i + 5]};
  const F32x2 s = f32x2_add(a, b), p = f32x2_mul(a, b), f = f32x2_fma(a, b, c);
  out[6 * i] = s.x;
  out[6 * i + 1] = s.y;
  out[6 * i + 2] = p.x;
  out[6 * i + 3] = p.y;
  out[6 * i + 4] = f.x;
  out[6 * i + 5] = f.y;
}
