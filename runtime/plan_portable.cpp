// TEMPORARY placeholder, replaced by the portable kernel's planner.
#include "runtime/planner.hpp"

namespace fa4::detail {

bool portable_supports(const KernelKey&, std::string* why) {
  if (why) *why = "not built yet";
  return false;
}

Plan make_portable_plan(const KernelKey& key) { check_supported(key); return {}; }

LaunchShape portable_launch_shape(const Plan&, const Problem&, int) { return {}; }

}  // namespace fa4::detail
