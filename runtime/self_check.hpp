// First-use self-check of a fast kernel against the portable kernel.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>

#include "fa4/plan.hpp"
#include "runtime/problem.hpp"

namespace fa4::detail {

// launch(candidate, problem, stream) enqueues the candidate (true) or the reference (false) kernel.
using SelfCheckLaunch = std::function<void(bool candidate, const Problem& problem, CUstream stream)>;

// Runs both kernels on a small random problem of the key's configuration (with sequence tails and, for
// GQA keys, several q heads per kv head) in the current context and compares O (and LSE). Returns an
// empty string when they agree within the dtype's tolerance, else what differed.
std::string self_check(const KernelKey& key, const SelfCheckLaunch& launch);

}  // namespace fa4::detail
