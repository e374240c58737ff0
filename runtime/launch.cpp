// The launch step: device properties, kernel arguments and the static schedule, the launch shape, TMA
// maps and cuLaunchKernelEx. Everything backend-specific comes from the backend's object.
#include "runtime/launch.hpp"

#include "runtime/backend.hpp"
#include "runtime/driver.hpp"

namespace fa4::detail {

DeviceInfo read_device_info(CUdevice device) {
  const DriverApi& d = driver();
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    check_cu(d.cuDeviceGetAttribute(&v, a, device), "cuDeviceGetAttribute");
    return v;
  };
  DeviceInfo info;
  info.arch = device_arch(device);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  return info;
}

void fill_schedule(const Plan& plan, const Problem& problem, fa4k::AttentionArgs& args) {
  const AttentionParams& p = problem.params;
  const long long pack = plan.key.gqa_pack;
  const long long rows = p.seqlen_q * pack;  // packed rows per (batch, kv-head group)
  const long long rows_per_cta = static_cast<long long>(plan.tile_m) * plan.q_tiles;
  const long long m_blocks = (rows + rows_per_cta - 1) / rows_per_cta;
  const long long tiles = m_blocks * (p.heads_q / pack) * p.batch;
  if (tiles > 0x7fffffffLL)
    throw Error(ErrorCode::invalid_argument,
                "batch * heads_q * ceil(seqlen_q / " + std::to_string(rows_per_cta) +
                    "): must be below 2^31 work tiles, got " + std::to_string(tiles));
  args.num_m_blocks = static_cast<int>(m_blocks);
  args.total_tiles = static_cast<int>(tiles);
}

LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) {
  return backend_of(plan.key.backend).launch_shape(plan, scheduled, sm_count);
}

unsigned long long PreparedLaunch::scratch_bytes(const Plan& plan) const {
  return static_cast<unsigned long long>(shape.grid[0]) * shape.grid[1] * shape.grid[2] * plan.scratch_bytes_per_cta;
}

PreparedLaunch prepare_launch(const Plan& plan, const Problem& problem, int sm_count) {
  PreparedLaunch l;
  l.args = make_kernel_args(problem);
  fill_schedule(plan, problem, l.args);
  l.shape = launch_shape(plan, l.args, sm_count);
  return l;
}

void enqueue(const PreparedLaunch& launch, const Plan& plan, const Problem& problem, CUfunction function, CUstream stream) {
  CUtensorMap maps[kMaxTmaDescriptors];
  const int map_count = backend_of(plan.key.backend).tma_descriptors(plan, problem, maps);
  void* params[1 + kMaxTmaDescriptors] = {const_cast<fa4k::AttentionArgs*>(&launch.args)};
  for (int i = 0; i < map_count; ++i) params[1 + i] = &maps[i];
  const LaunchConfig config(launch.shape, stream);
  check_cu(driver().cuLaunchKernelEx(config.get(), function, params, nullptr), "cuLaunchKernelEx");
}

LaunchConfig::LaunchConfig(const LaunchShape& shape, CUstream stream) {
  config_.gridDimX = shape.grid[0];
  config_.gridDimY = shape.grid[1];
  config_.gridDimZ = shape.grid[2];
  config_.blockDimX = shape.block[0];
  config_.blockDimY = shape.block[1];
  config_.blockDimZ = shape.block[2];
  config_.sharedMemBytes = shape.smem_bytes;
  config_.hStream = stream;
  if (shape.cluster[0] * shape.cluster[1] * shape.cluster[2] > 1) {
    cluster_.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster_.value.clusterDim.x = shape.cluster[0];
    cluster_.value.clusterDim.y = shape.cluster[1];
    cluster_.value.clusterDim.z = shape.cluster[2];
    config_.attrs = &cluster_;
    config_.numAttrs = 1;
  }
}

}  // namespace fa4::detail
