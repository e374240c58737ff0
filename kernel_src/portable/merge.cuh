// The arithmetic of merging partial attention states (O_s normalised over its own keys, LSE_s the natural
// log of its denominator) into one row, shared by the combine kernel (combine.cuh) and the decode kernel's
// own merge of a sequence whose parts it ran all by itself (decode.cuh). Both call these functions in the
// same order, so a row's bits do not depend on which kernel merged it: a sequence's output stays the same
// whatever else is in the batch.
//
// One warp per (row, head): lane l holds the LSEs of states l, l + 32, ... (kChunks registers) and elements
// l, l + 32, ... of the row's O. The states are summed in `shares` interleaved shares (share p: states p,
// p + shares, ...; the combine kernel gives each share a warp), then the shares in order.
#pragma once

#include "common/params.h"
#include "portable/ptx.cuh"

namespace fa4p {

constexpr int kMergePerLane = fa4cfg::kHeadDimV / 32;  // elements of O per lane
constexpr float kMergeLog2e = 1.4426950408889634f;
constexpr int kMergeSplitChunks = (fa4k::kMaxSplitParts + 31) / 32;  // LSE registers for a split's parts

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

// The merged row's LSE (natural log; -inf without keys) and the factor its summed O is multiplied by, the
// attention sink of q head `head` joining the denominator when `sinks` is given.
__device__ __forceinline__ float merge_lse(float max_lse, float sum, const float* sinks, int head, float& inv) {
  inv = sum > 0.f ? 1.f / sum : 0.f;
  float lse = sum > 0.f ? max_lse + logf(sum) : neg_inf();
  if (sinks) lse = fa4k::add_sink(lse, sinks[head], inv);  // once, after the parts are merged
  return lse;
}

// Every share of a row in one warp, as the combine kernel's warps_per_item warps compute them (share 0's
// sum, then each further share's added in order).
template <int kChunks, class LseOf, class RowOf, class Elem>
__device__ __forceinline__ float merge_row(int n_states, int shares, int lane, LseOf lse_of, RowOf row_of, Elem elem,
                                           const float* sinks, int head, float (&acc)[kMergePerLane], float& inv) {
  float weight[kChunks], max_lse, sum;
  merge_weights<kChunks>(n_states, lane, lse_of, weight, max_lse, sum);
#pragma unroll
  for (int i = 0; i < kMergePerLane; ++i) acc[i] = 0.f;
  if (max_lse != neg_inf()) {
    merge_share<kChunks>(n_states, 0, shares, lane, weight, row_of, elem, acc);
    for (int p = 1; p < shares; ++p) {
      float part[kMergePerLane];
#pragma unroll
      for (int i = 0; i < kMergePerLane; ++i) part[i] = 0.f;
      merge_share<kChunks>(n_states, p, shares, lane, weight, row_of, elem, part);
#pragma unroll
      for (int i = 0; i < kMergePerLane; ++i) acc[i] += part[i];
    }
  }
  return merge_lse(max_lse, sum, sinks, head, inv);
}

}  // namespace fa4p
