// The per-block math every portable kernel shares: masking and the online softmax over mma.sync m16n8
// accumulators (M m16 row tiles, N n8 key tiles of S, O n8 tiles of the output per thread).
#pragma once

#include "portable/ptx.cuh"
#include "portable/tile.cuh"

namespace fa4p {

// Sets S to -inf where key col is outside the row's keys [first_key, last_key] (tile.cuh): keys past seqlen_k
// and, when causal or windowed, keys outside the bottom-right aligned range of the row's token
// (token = row / kGqaPack). Thread layout of an m16n8 accumulator: element e sits at row lane/4 + 8 (e/2),
// column 2 (lane%4) + e%2.
template <int M, int N>
__device__ __forceinline__ void mask_block(float (&s)[M][N][4], int warp_row0, int key0, int lane, int seqlen_k,
                                           int diag, const fa4k::AttentionArgs& a) {
#pragma unroll
  for (int mt = 0; mt < M; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int token = (warp_row0 + mt * 16 + (lane >> 2) + 8 * h) / fa4cfg::kGqaPack;
      const int last = last_key(a, token, diag, seqlen_k);
      const int first = first_key(a, token, diag, seqlen_k);
#pragma unroll
      for (int nt = 0; nt < N; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = key0 + nt * 8 + 2 * (lane & 3) + e;
          if (col > last || (fa4cfg::kWindow && col < first)) s[mt][nt][2 * h + e] = neg_inf();
        }
    }
}

// Softcapping (before the mask), common/math.cuh's softcap_tanh on every score of the block.
template <int M, int N>
__device__ __forceinline__ void softcap_block(float (&s)[M][N][4], float softcap_scale) {
#pragma unroll
  for (int mt = 0; mt < M; ++mt)
#pragma unroll
    for (int nt = 0; nt < N; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = fa4k::softcap_tanh(s[mt][nt][e], softcap_scale);
}

using fa4k::add_sink;

// A row's starting max: -inf, or with softcap's fixed bias (bf16, a modest cap: common/params.h) the fixed
// max, which softmax_block then never raises.
__device__ __forceinline__ bool softcap_fixed(float scale_log2) {
  return fa4k::softcap_bias_fixed(fa4cfg::kSoftcap, fa4cfg::kBf16, scale_log2);
}
template <int M>
__device__ __forceinline__ void init_row_max(float (&row_max)[M][2], float scale_log2) {
  const float start = softcap_fixed(scale_log2) ? fa4k::softcap_fixed_max(scale_log2) : neg_inf();
#pragma unroll
  for (int mt = 0; mt < M; ++mt) row_max[mt][0] = row_max[mt][1] = start;
}

// Online softmax over one block, ending in P packed to 16-bit pairs. Row statistics: row_max is the raw
// (unscaled) max the probabilities are taken against, row_sum the thread's partial sum of its columns
// (summed over the quad at the end).
// Lazy rescale: the max is only raised when the block max exceeds it by more than
// 2^kRescaleThresholdLog2 in exp2 units; otherwise P may reach 2^threshold (fine in fp32 sums and in
// bf16/fp16 P) and O needs no rescale. A warp rescales O only when one of its rows raised its max, which
// after the first blocks is rare. A row still entirely masked keeps max -inf and uses 0 in the exponent,
// so no -inf - -inf = NaN arises; its probabilities are 0.
// P[mt][nt][h] holds row g + 8h, columns 2q, 2q+1 of n8 tile nt: the S accumulators of tiles 2kk and
// 2kk+1 are exactly the A fragment of PV k16 step kk, so P never touches smem. Summing and packing right
// after exp2 lets every fp32 probability die at once (fewer registers).
// With softcap_fixed the max stays the fixed one init_row_max set: no block max, no rescale.
// o_zero: O is still all zeros (a decode part's first chunk, where every row raises its max from -inf), so
// its rescale would only multiply zeros: skipped, the same bits.
template <int M, int N, int O>
__device__ __forceinline__ void softmax_block(float (&s)[M][N][4], u32 (&p)[M][N][2],
                                              float (&o)[M][O][4], float (&row_max)[M][2],
                                              float (&row_sum)[M][2], float scale_log2, bool o_zero = false) {
  float rescale[M][2];
  bool any_rescale = false;
  const bool fixed = softcap_fixed(scale_log2);
#pragma unroll
  for (int mt = 0; mt < M; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float block_max = fixed ? row_max[mt][h] : neg_inf();
      if (!fixed) {
#pragma unroll
        for (int nt = 0; nt < N; ++nt) block_max = fmaxf(block_max, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        block_max = fmaxf(block_max, shfl_xor(block_max, 1));  // the 4 threads of a quad share a row
        block_max = fmaxf(block_max, shfl_xor(block_max, 2));
      }
      const float old_max = row_max[mt][h];
      // True when the first visible keys arrive (old_max = -inf); false while both are -inf (NaN).
      const bool raise = (block_max - old_max) * scale_log2 > static_cast<float>(fa4cfg::kRescaleThresholdLog2);
      const float max = raise ? block_max : old_max;
      rescale[mt][h] = raise ? exp2_approx((old_max - block_max) * scale_log2) : 1.f;  // 0 from -inf
      any_rescale |= raise;
      row_max[mt][h] = max;
      const float bias = max == neg_inf() ? 0.f : -max * scale_log2;
      float pair_sum[N];
#pragma unroll
      for (int nt = 0; nt < N; ++nt) {
        const float p0 = exp2_approx(fmaf(s[mt][nt][2 * h], scale_log2, bias));
        const float p1 = exp2_approx(fmaf(s[mt][nt][2 * h + 1], scale_log2, bias));
        pair_sum[nt] = p0 + p1;
        p[mt][nt][h] = pack_half2<fa4cfg::kBf16>(p0, p1);
      }
#pragma unroll
      for (int width = N / 2; width >= 1; width /= 2)  // pairwise: a short dependency chain
#pragma unroll
        for (int i = 0; i < width; ++i) pair_sum[i] += pair_sum[i + width];
      row_sum[mt][h] = row_sum[mt][h] * rescale[mt][h] + pair_sum[0];
    }
  if (any_sync(any_rescale) && !o_zero) {  // warp-uniform branch
#pragma unroll
    for (int mt = 0; mt < M; ++mt)
#pragma unroll
      for (int ot = 0; ot < O; ++ot)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][ot][e] *= rescale[mt][e / 2];
  }
}

}  // namespace fa4p
