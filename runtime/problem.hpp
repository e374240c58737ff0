// A validated attention problem: AttentionParams with defaults resolved and every rule checked.
#pragma once

#include <cuda.h>

#include "fa4/fa4.hpp"
#include "kernel_src/common/params.h"

namespace fa4::detail {

constexpr int kMaxSplits = fa4k::kMaxSplitParts;  // split-KV parts per sequence

struct Problem {
  AttentionParams params;  // head_dim_v, strides, softmax_scale and (causal: 0) window_right resolved
  int q_heads_per_kv = 1;
  bool varlen = false;     // per-sequence lengths on the device (cu_seqlens_q/k, seqused_k)
  bool paged = false;      // K/V through a page table
  bool decode = false;     // every sequence is decode-sized (decode_shape): the decode kernel alone
  bool mixed = false;      // a ragged batch above that: the prefill kernel, and the decode kernel for its
                           // decode-sized sequences (each kernel skips the other's)
  int decode_seqlen_q = 0; // decode or mixed: the decode kernel's sequences have seqlen_q <= this
  bool split = false;      // split-KV and the combine (num_splits > 1, or 0 with a workspace and decode
                           // sequences)
  bool window = false;     // variants in use: window_left/right >= 0, softcap > 0, sinks given
  bool softcap = false;
  bool sinks = false;
  int64_t rows = 0;        // query rows of all sequences: total_q when ragged, else batch * seqlen_q
  int sm_count = 0;        // the device's SMs, which size split-KV (launch.cpp split_rule); set by the caller
                           // that knows the device (0: counted as 1)
};

// Host-side rules: sizes, head dims, dtype, strides, overlap, alignment, overflow. Throws
// Error(invalid_argument or unsupported) naming the field and the rule.
Problem validate(const AttentionParams& params);

// The rules a prewarm/describe configuration must satisfy (dtype, backend, head dims, q_heads_per_kv,
// arch), the same way: Error(invalid_argument or unsupported) naming the field.
void validate_config(const KernelConfig& config);

// Device-side rules: a context is current and the stream belongs to it. Returns the current context.
CUcontext validate_on_device(CUstream stream);

// The kernel argument block for a problem (pointers, strides, sizes, scales).
fa4k::AttentionArgs make_kernel_args(const Problem& problem);
// The factor exp2 takes raw scores (or, with softcap, their tanh) by: AttentionArgs::scale_log2.
float kernel_scale_log2(const AttentionParams& params);

// A validated merge: MergeParams with strides resolved.
struct MergeProblem {
  MergeParams params;
  int64_t rows = 0;  // total when ragged, else batch * seqlen
};
MergeProblem validate_merge(const MergeParams& params);

}  // namespace fa4::detail
