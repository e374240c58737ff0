// The launch step: kernel arguments, the static schedule, the launch shape and cuLaunchKernelEx.
#pragma once

#include <cuda.h>

#include "fa4/fa4.hpp"
#include "runtime/problem.hpp"

namespace fa4::detail {

// Properties of a device that planning, selection and launching depend on.
struct DeviceInfo {
  int arch = 0;            // compute capability x10
  int sm_count = 0;
  int smem_optin = 0;      // max dynamic shared memory per block (opt-in), bytes
};
DeviceInfo read_device_info(CUdevice device);

// Split-KV: the most parts any sequence can have, and the workspace they take (partial O, then partial LSE,
// then the raw states' row sums of folded sequences, each 256-byte aligned; params.h AttentionArgs).
struct SplitLayout {
  int max_splits = 1;
  size_t o_bytes = 0, lse_bytes = 0, sum_bytes = 0;
  size_t bytes() const { return o_bytes + lse_bytes + sum_bytes; }
  // The kernel's workspace pointers. Every split kernel of a call writes by the split plan's layout, which
  // the combine reads (a mixed batch's prefill kernel too).
  void bind(fa4k::AttentionArgs& args, void* workspace) const {
    char* w = static_cast<char*>(workspace);
    args.o_partial = reinterpret_cast<float*>(w);
    args.lse_partial = reinterpret_cast<float*>(w + o_bytes);
    args.sum_partial = sum_bytes ? reinterpret_cast<float*>(w + o_bytes + lse_bytes) : nullptr;
  }
};
// The workspace of a split launch. any_smaller_batch (Attention::workspace_size): enough also for every
// batch up to problem's, at most its lengths (split_by_batch may cut a smaller batch into more parts).
SplitLayout split_layout(const Plan& plan, const Problem& problem, bool any_smaller_batch = false);
fa4k::SplitRule split_rule(const Plan& plan, const Problem& problem);
// The most parts any sequence has (the longest one's); the second form for a caller that has the rule.
int max_splits(const Plan& plan, const Problem& problem);
int max_splits(const Plan& plan, const Problem& problem, const fa4k::SplitRule& rule);
// The longest seqlen_q among the sequences a plan's kernel serves: a mixed batch's decode kernel takes only
// its decode-sized ones (Problem::decode_seqlen_q).
int64_t served_seqlen_q(const Plan& plan, const Problem& problem);
long long tiles_per_head(const Plan& plan, const Problem& problem, long long m_blocks);

// The combine kernel that merges partial states of an attention key's output (dtype, dv, LSE): fp32 states
// (after split-KV) or 16-bit ones (Attention::merge). Portable: it runs on every device.
KernelKey combine_key(const KernelKey& of, int device_arch, bool f32_states);
KernelConfig combine_config(const KernelKey& combine);
// Its arguments after a split-KV launch of `plan` (the states in `workspace`), and for a merge.
fa4k::CombineArgs split_combine_args(const Plan& plan, const Problem& problem, void* workspace);
fa4k::CombineArgs merge_args(const MergeProblem& problem);
// Launches the combine kernel over every (row, head) (a grid-stride loop, a few CTAs per SM). With
// `overlap_previous` (sm_90+, right after the split kernel) it is a programmatic dependent launch: it is
// launched while the previous kernel finishes and waits for that kernel's results itself (griddepcontrol).
void enqueue_combine(const Plan& plan, const fa4k::CombineArgs& args, CUfunction function, int sm_count, CUstream stream,
                     bool overlap_previous = false);

// Throws Error(invalid_argument) naming the field when the kernel of this plan would overflow its 32-bit
// index arithmetic on this problem (key blocks, packed rows, causal limits, work tiles).
void check_index_range(const Plan& plan, const Problem& problem);
// Fills the scheduler fields of the kernel arguments (num_m_blocks, total_tiles) for this plan, after
// check_index_range.
void fill_schedule(const Plan& plan, const Problem& problem, fa4k::AttentionArgs& args);
// The launch shape of a plan for kernel arguments that fill_schedule has completed.
LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count);

// One launch of a Plan's kernel for a problem: its arguments (scheduled) and its shape. A plan with
// scratch_bytes_per_cta needs scratch_bytes() of device memory in args.scratch before enqueue.
struct PreparedLaunch {
  fa4k::AttentionArgs args;
  LaunchShape shape;
  unsigned long long scratch_bytes(const Plan& plan) const;
};
PreparedLaunch prepare_launch(const Plan& plan, const Problem& problem, int sm_count);

// Builds the TMA maps and enqueues `function` (the Plan's kernel) on `stream`.
void enqueue(const PreparedLaunch& launch, const Plan& plan, const Problem& problem, CUfunction function, CUstream stream);

// The cuLaunchKernelEx configuration of a launch shape (it points at its own attributes: not copyable).
class LaunchConfig {
 public:
  LaunchConfig(const LaunchShape& shape, CUstream stream, bool programmatic_dependent = false);
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
  const CUlaunchConfig* get() const { return &config_; }

 private:
  CUlaunchConfig config_{};
  CUlaunchAttribute attrs_[2]{};
};

}  // namespace fa4::detail
