// The arithmetic of merging attention states into one row, shared by the combine kernel (combine.cuh) and
// the decode kernel (decode.cuh), which call these functions in the same order: a row's bits do not depend
// on which kernel merged it, so a sequence's output stays the same whatever else is in the batch.
// - Normalised states (O_s over its own keys, LSE_s the natural log of its denominator): one warp per (row,
//   head), lane l holding the LSEs of states l, l + 32, ... (kChunks registers) and elements l, l + 32, ...
//   of the row's O. The states are summed in `shares` interleaved shares (share p: states p, p + shares,
//   ...; the combine gives each share a warp), then the shares in order.
// - Raw states (O unnormalised, the row max its exponentials were taken against, the row sum): the decode
//   kernel's warps at a part's end. A folded sequence (SplitRule::fold_blocks) is each warp's part states
//   folded in part order (fold_weights, fold_term), then the warps' folds merged (warp_merge_weights), as
//   the decode kernel merges its warps at the end of an uncut sequence.
#pragma once

#include "common/params.h"
#include "portable/ptx.cuh"

namespace fa4p {

constexpr int kMergePerLane = fa4cfg::kHeadDimV / 32;  // elements of O per lane
constexpr float kMergeLog2e = 1.4426950408889634f;
constexpr int kMergeSplitChunks = (fa4k::kMaxSplitParts + 31) / 32;  // LSE registers for a split's parts

// Folds raw state b into the running raw state a: max = max(max_a, max_b), then x = a x_a + b x_b for O and
// the sum (fold_term), with a = exp2((max_a - max) scale_log2), 0 for a side without keys (max -inf).
__device__ __forceinline__ void fold_weights(float& max_a, float max_b, float scale_log2, float& a, float& b) {
  const float max = fmaxf(max_a, max_b);
  a = max_a == neg_inf() ? 0.f : exp2_approx((max_a - max) * scale_log2);
  b = max_b == neg_inf() ? 0.f : exp2_approx((max_b - max) * scale_log2);
  max_a = max;
}
__device__ __forceinline__ float fold_term(float x_a, float a, float x_b, float b) { return fmaf(x_b, b, x_a * a); }

// The weights of n <= kMax raw states against their largest max, the factor the weighted sum of their O
// (fmaf(weight[w], O_w, acc) in w order, from 0) is multiplied by, and the row's LSE (natural log, -inf
// without keys; before an attention sink).
template <int kMax, class MaxOf, class SumOf>
__device__ __forceinline__ float warp_merge_weights(int n, MaxOf max_of, SumOf sum_of, float scale_log2, float (&weight)[kMax],
                                                    float& inv) {
  float max = neg_inf(), sum = 0.f;
#pragma unroll
  for (int w = 0; w < kMax; ++w)
    if (w < n) max = fmaxf(max, max_of(w));
#pragma unroll
  for (int w = 0; w < kMax; ++w) {
    weight[w] = w >= n || max == neg_inf() ? 0.f : exp2_approx((max_of(w) - max) * scale_log2);
    if (w < n) sum = fmaf(weight[w], sum_of(w), sum);
  }
  inv = sum > 0.f ? rcp_approx(sum) : 0.f;
  const float kLn2 = 0.693147180559945309f;
  return sum > 0.f ? (max * scale_log2 + log2_approx(sum)) * kLn2 : neg_inf();
}

// The states' weights exp(LSE_s - max LSE) in lane order (0 for an empty or absent state), with the max and
// the weights' sum in a fixed butterfly order (every lane ends with the same bits). lse_of(s) reads state
// s's LSE (s < n_states).
template <int kChunks, class LseOf>
__device__ __forceinline__ void merge_weights(int n_states, int lane, LseOf lse_of, float (&weight)[kChunks],
                                              float& max_lse, float& sum) {
  max_lse = neg_inf(), sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int s = c * 32 + lane;
    weight[c] = s < n_states ? lse_of(s) : neg_inf();
    max_lse = fmaxf(max_lse, weight[c]);
  }
  for (int width = 16; width >= 1; width /= 2) max_lse = fmaxf(max_lse, shfl_xor(max_lse, width));
  if (max_lse == neg_inf()) return;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    weight[c] = exp2f((weight[c] - max_lse) * kMergeLog2e);
    sum += weight[c];
  }
  for (int width = 16; width >= 1; width /= 2) sum += shfl_xor(sum, width);
}

// Share `share` of `shares`: acc += w_s O_s over its states, in state order. row_of(s) locates state s's O
// and elem(row, e) reads its element e. An empty state (weight 0) adds nothing, even if its O is not finite.
template <int kChunks, class RowOf, class Elem>
__device__ __forceinline__ void merge_share(int n_states, int share, int shares, int lane, const float (&weight)[kChunks],
                                            RowOf row_of, Elem elem, float (&acc)[kMergePerLane]) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int count = n_states - c * 32 < 32 ? n_states - c * 32 : 32;
#pragma unroll 4
    for (int t = share; t < count; t += shares) {
      const float w = __shfl_sync(0xffffffffu, weight[c], t);
      const auto row = row_of(c * 32 + t);
#pragma unroll
      for (int i = 0; i < kMergePerLane; ++i) {
        const float x = elem(row, lane + 32 * i);
        acc[i] = w > 0.f ? fmaf(w, x, acc[i]) : acc[i];
      }
    }
  }
}

// One state's fp32 O row (dv elements, 16-byte aligned) into shared memory by the warp's lanes, 16 bytes a
// copy (cp.async: the caller commits and waits).
__device__ __forceinline__ void stage_row(float* dst, const float* src, int lane) {
  constexpr int kPieces = fa4cfg::kHeadDimV / 4;  // 16-byte pieces of a row (dv % 4 == 0)
  for (int v = lane; v < kPieces; v += 32) cp_async_16(shared_address(dst + 4 * v), src + 4 * v, 16);
}

// merge_share with the states' O staged in shared memory, `slots` rows of dv a round trip (the warp's
// `slice`; merge_share's registers hold a few states' loads): the same sums in the same order. row_of(s)
// gives state s's O, fp32, 16-byte aligned.
template <int kChunks, class RowOf>
__device__ __forceinline__ void merge_share_staged(int n_states, int share, int shares, int lane, const float (&weight)[kChunks],
                                                   RowOf row_of, float* slice, int slots, float (&acc)[kMergePerLane]) {
  constexpr int kDv = fa4cfg::kHeadDimV;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int count = n_states - c * 32 < 32 ? n_states - c * 32 : 32;
    for (int t0 = share; t0 < count; t0 += slots * shares) {
      int staged = 0;
      for (int t = t0; t < count && staged < slots; t += shares, ++staged) stage_row(slice + staged * kDv, row_of(c * 32 + t), lane);
      cp_async_commit();
      cp_async_wait<0>();
      __syncwarp();
      for (int b = 0; b < staged; ++b) {
        const float w = __shfl_sync(0xffffffffu, weight[c], t0 + b * shares);
#pragma unroll
        for (int i = 0; i < kMergePerLane; ++i) {
          const float x = slice[b * kDv + lane + 32 * i];
          acc[i] = w > 0.f ? fmaf(w, x, acc[i]) : acc[i];
        }
      }
      __syncwarp();  // every lane has read the slice before the next round's copies land in it
    }
  }
}

// The merged row's LSE (natural log; -inf without keys) and the factor its summed O is multiplied by, the
// attention sink of q head `head` joining the denominator when `sinks` is given.
__device__ __forceinline__ float merge_lse(float max_lse, float sum, const float* sinks, int head, float& inv) {
  inv = sum > 0.f ? 1.f / sum : 0.f;
  float lse = sum > 0.f ? max_lse + logf(sum) : neg_inf();
  if (sinks) lse = fa4k::add_sink(lse, sinks[head], inv);  // once, after the parts are merged
  return lse;
}

}  // namespace fa4p
