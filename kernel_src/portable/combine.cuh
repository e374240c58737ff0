// Merges partial attention states of the same rows: state s holds O_s (normalised over its own keys) and
// LSE_s (natural log of its softmax denominator). Then LSE = log sum_s exp(LSE_s) and
// O = sum_s exp(LSE_s - LSE) O_s, an exact rewrite of softmax over the union of the keys. Used after a
// split-KV kernel (fp32 states in the workspace) and by the public merge (16-bit states: cascade or
// context-parallel attention). States with LSE = -inf (no keys) weigh 0; when every state is empty the row's
// O is 0 and its LSE -inf. The order of the sum is fixed (s = 0, 1, ...): the result is bit-identical from
// run to run. A folded decode sequence (SplitRule::fold_blocks) holds raw states instead, one per decode warp
// and part: warp `share` of the item folds decode warp share's states in part order, and the item's first
// warp merges the folds, with merge.cuh's functions, as a decode CTA that ran all of the sequence's parts
// does (SplitRule::parts_per_cta; the combine skips those rows).
//
// Work: a (row, head) item is shared by warps_per_item warps (CombineArgs), each summing every
// warps_per_item-th state, so a row cut into many parts (decode at batch 1: up to 256) has 4 warps of loads in
// flight instead of one; the warps' sums meet in smem in a fixed order. Lane l reads the LSEs of states l,
// l + 32, ... once and hands each state's weight to the warp by a shuffle; the lanes split the head dim
// (element l, l + 32, ... of lane l: every access of a warp is coalesced). At most 64 registers a thread, so
// 8 CTAs share an SM and a launch of thousands of items is resident at once (at ~120 registers, 4 waves of
// 4 per SM took 15 us for 2048 items of 8 parts on the H200).
#pragma once

#include "common/params.h"
#include "portable/ptx.cuh"
#include "portable/merge.cuh"
#include "portable/softmax.cuh"

namespace fa4p {

constexpr int kCombineWarps = fa4cfg::kThreads / 32;
static_assert(fa4cfg::kHeadDimV % 64 == 0 || fa4cfg::kHeadDimV == 32 || fa4cfg::kHeadDimV == 96,
              "head dims the library takes");

__device__ __forceinline__ float load_state(const void* base, long long index) {
  if constexpr (fa4cfg::kCombineF32States) return static_cast<const float*>(base)[index];
  else return half_to_float<fa4cfg::kBf16>(static_cast<const u16*>(base)[index]);
}

}  // namespace fa4p

// The sequence a global row belongs to: dense rows are batch-major; ragged rows by binary search.
__device__ __forceinline__ int sequence_of(const fa4k::CombineArgs& a, long long row) {
  if (!a.cu_seqlens) return static_cast<int>(row / a.seqlen);
  int lo = 0, hi = a.batch - 1;  // the last sequence whose first row is <= row
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.cu_seqlens[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Folded decode rows (raw states) come only from split-KV decode kernels of dv <= 128 (Plan::fold_split_blocks).
constexpr bool kRawStates = fa4cfg::kCombineF32States && fa4cfg::kHeadDimV <= 128;

// Registers for the states' LSEs, 32 states each: a split-KV launch's parts, or a merge's states.
constexpr int kLseChunks = fa4cfg::kCombineF32States ? fa4p::kMergeSplitChunks : (fa4k::kMaxCombinePointers + 31) / 32;

extern "C" __global__ void __launch_bounds__(fa4cfg::kThreads, 8) fa4_combine(const fa4k::CombineArgs args) {
  using namespace fa4p;
  __shared__ float shares[kCombineWarps][fa4cfg::kHeadDimV];
  __shared__ float share_max[kCombineWarps], share_sum[kCombineWarps];  // a folded row's folds
  // Warp w's slice of CombineArgs::staged_states rows of dv (dynamic: combine_staging_bytes): a folded row's
  // raw O of every part of its decode warp at once, or a round of a normalised row's states.
  extern __shared__ __align__(16) float staged[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per_item = args.warps_per_item;
  const int items_per_cta = kCombineWarps / per_item;
  const int share = warp % per_item;  // this warp's states: share, share + per_item, ...
  const long long total_rows = args.cu_seqlens ? args.total_rows : static_cast<long long>(args.batch) * args.seqlen;
  const long long items = total_rows * args.heads;
  // Every warp of a CTA runs the same number of rounds (the smem exchange has CTA barriers).
  for (long long first = static_cast<long long>(blockIdx.x) * items_per_cta; first < items;
       first += static_cast<long long>(gridDim.x) * items_per_cta) {
    const long long item = first + warp / per_item;
    float acc[kMergePerLane];
#pragma unroll
    for (int i = 0; i < kMergePerLane; ++i) acc[i] = 0.f;
    float max_lse = neg_inf(), sum = 0.f;  // a folded row's: this warp's fold's raw max and sum
    bool merged = false;   // this item is merged here (not a row written by the split kernel itself)
    bool raw = false;      // a folded decode row: raw warp states (merge.cuh)
    long long batch = 0, place = 0;
    int head = 0;
    if (item < items) {
      head = static_cast<int>(item % args.heads);
      const long long row = item / args.heads;  // global row: ragged, or batch * seqlen + token
      const int seq = sequence_of(args, row);
      const long long token = args.cu_seqlens ? row - args.cu_seqlens[seq] : row % args.seqlen;
      // Element offsets of this row and head in the states' and the output's layouts (ragged: batch 0, the
      // token counted from the first row of the tensor).
      batch = args.cu_seqlens ? 0 : seq, place = args.cu_seqlens ? row : token;
      int n_states = args.n_states;
      if (args.split) {  // only the cut sequences, each over its own parts
        const int seqlen_q = args.cu_seqlens ? args.cu_seqlens[seq + 1] - args.cu_seqlens[seq] : args.seqlen;
        const int seqlen_k = args.seqused_k     ? args.seqused_k[seq]
                             : args.cu_seqlens_k ? args.cu_seqlens_k[seq + 1] - args.cu_seqlens_k[seq]
                                                 : args.seqlen_k;
        const fa4k::KeyBlocks span =
            fa4k::key_blocks(seqlen_q, seqlen_k, args.window_left, args.window_right, args.rule.tile_n);
        const bool decode_row = seqlen_q <= args.decode_seqlen_q;
        n_states = fa4k::split_parts(args.rule, decode_row, span.count);
        raw = kRawStates && decode_row && fa4k::folded(args.rule, span.count, n_states);
        if (raw && n_states > args.staged_states) __trap();  // (split_combine_args, decode_plan)
      }
      merged = !args.split || n_states > args.rule.parts_per_cta;  // fewer: the split kernel's CTA folded them
      if (merged) {
#if __CUDA_ARCH__ >= 900
        // Launched as a programmatic dependent of the split kernel (enqueue_combine), so the lookups above ran
        // while it finished: its parts are complete and visible from here (a no-op for an ordinary launch).
        asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
        // The states' row: a split kernel's workspace row (no batch stride), else as the output's.
        const long long state_batch = args.split ? 0 : batch;
        const long long state_place = args.split ? fa4k::partial_row(args.rule, seq, token, row) : place;
        const long long in_o = state_batch * args.state_layout.batch_stride + state_place * args.state_layout.seq_stride +
                               head * args.state_layout.head_stride;
        const long long in_lse =
            state_batch * args.lse_batch_stride + head * args.lse_head_stride + state_place * args.lse_row_stride;
        auto state_o = [&](int s) {
          return args.o_state_stride ? static_cast<const char*>(args.state_o[0]) +
                                           s * args.o_state_stride * (fa4cfg::kCombineF32States ? 4 : 2)
                                     : static_cast<const char*>(args.state_o[s]);
        };
        auto state_lse = [&](int s) {
          return (args.lse_state_stride ? args.state_lse[0] + s * args.lse_state_stride : args.state_lse[s])[in_lse];
        };
        if (kRawStates && raw) {
          // Decode warp `share`'s states (part p: state p * decode_states + share) folded in part order, as a
          // decode CTA that runs all the parts folds them in registers. One round trip: every part's O to
          // shared memory at once (n_states <= kMaxFoldParts: split_rule), lane p holding part p's max and sum.
          const int states = args.rule.decode_states;
          if (share < states) {
            float* mine = staged + warp * args.staged_states * fa4cfg::kHeadDimV;
            for (int p = 0; p < n_states; ++p)
              stage_row(mine + p * fa4cfg::kHeadDimV, reinterpret_cast<const float*>(state_o(p * states + share)) + in_o, lane);
            cp_async_commit();
            const int s_lane = lane * states + share;
            const float lane_max = lane < n_states ? state_lse(s_lane) : neg_inf();
            const float lane_sum = lane < n_states ? args.state_sum[s_lane * args.lse_state_stride + in_lse] : 0.f;
            cp_async_wait<0>();
            __syncwarp();
            max_lse = __shfl_sync(0xffffffffu, lane_max, 0), sum = __shfl_sync(0xffffffffu, lane_sum, 0);
#pragma unroll
            for (int i = 0; i < kMergePerLane; ++i) acc[i] = mine[lane + 32 * i];
            for (int p = 1; p < n_states; ++p) {
              float a, b;
              fold_weights(max_lse, __shfl_sync(0xffffffffu, lane_max, p), args.scale_log2, a, b);
              sum = fold_term(sum, a, __shfl_sync(0xffffffffu, lane_sum, p), b);
#pragma unroll
              for (int i = 0; i < kMergePerLane; ++i) acc[i] = fold_term(acc[i], a, mine[p * fa4cfg::kHeadDimV + lane + 32 * i], b);
            }
            __syncwarp();  // every lane has read the slice before the next item's copies land in it
          }
        } else {
          // The weights and this warp's share of the states (merge.cuh, as the decode kernel's own merge).
          float weight[kLseChunks];
          merge_weights<kLseChunks>(n_states, lane, state_lse, weight, max_lse, sum);
          if (max_lse == neg_inf()) {
          } else if (kRawStates && args.staged_states > 0) {  // fp32 states: staged, a round trip per slice
            merge_share_staged<kLseChunks>(n_states, share, per_item, lane, weight,
                                           [&](int s) { return reinterpret_cast<const float*>(state_o(s)) + in_o; },
                                           staged + warp * args.staged_states * fa4cfg::kHeadDimV, args.staged_states, acc);
          } else {
            merge_share<kLseChunks>(n_states, share, per_item, lane, weight, state_o,
                                    [&](const char* o, int e) { return load_state(o, in_o + e); }, acc);
          }
        }
      }
    }
    float inv = 0.f, lse = neg_inf();
    // The shares meet in the item's first warp: a normalised row's in share order; a folded row's folds
    // merged as the decode kernel merges its warps (a folded row has per_item >= decode_states warps:
    // split_combine_args).
    if (per_item > 1) {
#pragma unroll
      for (int i = 0; i < kMergePerLane; ++i) shares[warp][lane + 32 * i] = acc[i];
      if (lane == 0) share_max[warp] = max_lse, share_sum[warp] = sum;
      __syncthreads();
      if (share == 0 && raw) {
        constexpr int kMostStates = 8;
        float weight[kMostStates];
        const int states = args.rule.decode_states;
        lse = warp_merge_weights<kMostStates>(
            states, [&](int w) { return share_max[warp + w]; }, [&](int w) { return share_sum[warp + w]; }, args.scale_log2,
            weight, inv);
#pragma unroll
        for (int i = 0; i < kMergePerLane; ++i) {
          acc[i] = 0.f;
#pragma unroll
          for (int w = 0; w < kMostStates; ++w)
            if (w < states) acc[i] = fmaf(weight[w], shares[warp + w][lane + 32 * i], acc[i]);
        }
        if (args.sinks) lse = fa4k::add_sink(lse, args.sinks[head], inv);
      } else if (share == 0) {
        for (int p = 1; p < per_item; ++p)
#pragma unroll
          for (int i = 0; i < kMergePerLane; ++i) acc[i] += shares[warp + p][lane + 32 * i];
      }
      __syncthreads();
    }
    if (!merged || share != 0) continue;
    if (!raw) lse = merge_lse(max_lse, sum, args.sinks, head, inv);
    u16* out = static_cast<u16*>(args.o.ptr) + batch * args.o.batch_stride + place * args.o.seq_stride + head * args.o.head_stride;
#pragma unroll
    for (int i = 0; i < kMergePerLane; ++i) out[lane + 32 * i] = float_to_half<fa4cfg::kBf16>(acc[i] * inv);
    if (fa4cfg::kWriteLse && lane == 0 && args.lse)
      args.lse[batch * args.out_lse_batch_stride + head * args.out_lse_head_stride + place * args.out_lse_row_stride] = lse;
  }
#if __CUDA_ARCH__ >= 900
  // Every thread waits before it exits, merged rows or not (none may be, e.g. windows shorter than a part):
  // the combine completes only after the split kernel does, so work after it on the stream sees all of O.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
