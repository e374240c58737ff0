// TEMPORARY: the sm100 planner arrives with the FA4 kernel (issue 4).
#include "runtime/planner.hpp"

namespace fa4::detail {

int sm100_gqa_pack(int) { return 1; }

bool sm100_supports(const KernelKey&, std::string* why) {
  if (why) *why = "the sm100 kernel is not built yet";
  return false;
}

Plan make_sm100_plan(const KernelKey& key) { check_supported(key); return {}; }

int sm100_tma_descriptors(const Plan&, const Problem&, CUtensorMap*) { return 0; }

LaunchShape sm100_launch_shape(const Plan&, const Problem&, int) { return {}; }

}  // namespace fa4::detail
