// The first-use check of a fast kernel on a device (docs/verification.md). The kernel and the portable
// kernel run one problem that reaches the kernel's persistent and causal paths (more work tiles than the
// device runs at once, sequence tails, rows that see no key) and every output is compared.
//
// The check runs in a child process (the fa4rt-selfcheck helper): a trap in one CUDA context makes every
// context of its process fail, while a trap in a child leaves the parent's context working. The kernel's
// bounded waits turn a hang into a trap, and a child that outlives its time limit is killed. One file holds
// both sides of the protocol: the parent's self_check_in_child and the child's run_self_check_child.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>
#include <vector>

#include "fa4/fa4.hpp"
#include "runtime/problem.hpp"

namespace fa4::detail {

// The device arrays of a ragged (varlen) or paged check problem, for the caller to place on the device and
// point the params at (as it does for the sinks); empty where unused.
struct SelfCheckArrays {
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k, seqused_k, page_table;
};

// The check's problem for a key on a device with `sm_count` multiprocessors: a ragged batch for a varlen key,
// a paged cache for a paged one.
AttentionParams self_check_problem(const KernelKey& key, int sm_count, SelfCheckArrays* arrays = nullptr);

// launch(candidate, problem, stream) enqueues the candidate (true) or the reference (false) kernel.
using SelfCheckLaunch = std::function<void(bool candidate, const Problem& problem, CUstream stream)>;

// Runs both kernels on the check problem in the current context and compares O (and LSE). Returns an empty
// string when they agree within the dtype's tolerance, else what differed. Throws Error(cuda_error) when a
// kernel faults.
std::string compare_with_reference(const KernelKey& key, int sm_count, const SelfCheckLaunch& launch);

// What the parent asks the child to check.
struct SelfCheckRequest {
  KernelConfig config;       // with the candidate's backend (never automatic)
  std::string expected_key;  // KernelKey::name() the child must select, or it refuses
  std::string device;        // PCI bus id of the device
  Options options;           // cache, JIT, debug fault and emulation settings the child uses
  std::string helper;        // the executable
};

struct SelfCheckVerdict {
  bool passed = false;
  std::string detail;  // what the child reported: the comparison, the fault, the timeout
};

// Runs the check in a child process, waiting at most options.self_check_timeout_ms (then kills it). Never
// throws for what happens in the child: a trap, a crash, a hang or a mismatch is a failed verdict.
SelfCheckVerdict self_check_in_child(const SelfCheckRequest& request);

// The child's side: `args` are what self_check_in_child passes. Prints "PASS ..." or "FAIL ..." as its last
// line; returns the exit status (0 pass, 1 mismatch, 3 a CUDA error such as a trap, 2 bad arguments, 4 other).
int run_self_check_child(const std::vector<std::string>& args);

// The helper executable: options.self_check_helper, else fa4rt-selfcheck beside the library (or the
// executable it is linked into), else in ../libexec/fa4rt/ from there; empty when none exists.
std::string find_self_check_helper(const Options& options);

}  // namespace fa4::detail
