// Selection (problem -> KernelKey) and planning (KernelKey -> Plan -> LaunchShape).
#pragma once

#include "fa4/fa4.hpp"
#include "runtime/problem.hpp"

namespace fa4::detail {

// Target properties planning and selection depend on.
struct DeviceInfo {
  int arch = 0;            // compute capability x10
  int sm_count = 0;
  int smem_optin = 0;      // max dynamic shared memory per block (opt-in), bytes
};

// The KernelKey a problem maps to for a given backend choice and arch. prewarm uses key_for_config and
// run() uses select_key; both go through the same function so they cannot disagree.
KernelKey key_for_config(const KernelConfig& config, int arch);
KernelKey select_key(const Problem& problem, Backend backend, int arch);
KernelConfig config_of(const Problem& problem, Backend backend, int arch);

// Resolves Backend::automatic for an arch: sm100 on 100/103, portable elsewhere.
Backend resolve_backend(Backend requested, int arch);

// Whether the key's backend has a kernel for it (why not, in *why).
bool supports(const KernelKey& key, std::string* why);
// Throws Error(unsupported) when the backend has no kernel for this key.
void check_supported(const KernelKey& key);

Plan make_plan(const KernelKey& key);
// Launch shape of a plan for kernel arguments that fill_schedule has completed.
LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count);
// The cuLaunchKernelEx configuration of a launch shape (it points at its own cluster attribute: not copyable).
class LaunchConfig {
 public:
  LaunchConfig(const LaunchShape& shape, CUstream stream);
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
  const CUlaunchConfig* get() const { return &config_; }

 private:
  CUlaunchConfig config_{};
  CUlaunchAttribute cluster_{};
};

// TMA descriptors passed after the argument block (none for the portable kernel); returns how many.
constexpr int kMaxTmaDescriptors = 4;
int tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out);
// Throws Error(invalid_argument) naming the field when the kernel of this plan would overflow its 32-bit
// index arithmetic on this problem (key blocks, packed rows, causal limits, work tiles).
void check_index_range(const Plan& plan, const Problem& problem);
// Fills the scheduler fields of the kernel arguments (num_m_blocks, total_tiles) for this plan, after
// check_index_range.
void fill_schedule(const Plan& plan, const Problem& problem, fa4k::AttentionArgs& args);

// Backend planners (one file each).
Plan make_portable_plan(const KernelKey& key);
LaunchShape portable_launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled);
bool portable_supports(const KernelKey& key, std::string* why);

Plan make_sm100_plan(const KernelKey& key);
// TMA descriptors the sm100 kernel takes after its argument block (q, k, v, o); returns how many.
int sm100_tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out);
LaunchShape sm100_launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count);
bool sm100_supports(const KernelKey& key, std::string* why);

}  // namespace fa4::detail
