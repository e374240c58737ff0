// Human-readable views of a Plan (for `fa4rt plan` and the docs).
#pragma once

#include <string>

#include "fa4/plan.hpp"

namespace fa4::detail {

// The sequence lengths (and window) the mask block classes are drawn for.
struct MaskShape {
  int seqlen_q = 0, seqlen_k = 0;
  int window_left = -1, window_right = -1;  // AttentionParams' window (-1: unbounded)
};

// The full report: math contract, streaming-state formulas, MMA contracts, TMEM map with reuse rules,
// shared memory, warp roles, barrier graph, mask block classes for the shape when both lengths are > 0,
// risks and fallback; for sm100 Plans, the speed model's bound and prediction (speed_section).
std::string plan_report(const Plan& plan, const MaskShape& shape, const std::string& counts = "");

// The B200 speed model for an sm100 Plan (tools/fa4rt/speed_model.hpp) from a counts table (empty: the
// table embedded at build time); seqlen: for the causal share (0: 16384).
std::string speed_section(const Plan& plan, int seqlen, const std::string& counts = "");

// The barrier graph in Graphviz DOT: roles as nodes, one edge per barrier (producer -> consumer).
std::string barrier_dot(const Plan& plan);

// Per CTA row block: which K/V blocks are masked, full (no mask code) or skipped, from the block ranges the
// kernels use (kernel_src/common/block_range.h: kv_block_range for sm100, window_block_range for portable).
std::string mask_classes(const Plan& plan, const MaskShape& shape);

}  // namespace fa4::detail
