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

namespace {

[[noreturn]] void too_large(const std::string& field, const std::string& rule) {
  throw Error(ErrorCode::invalid_argument, field + ": " + rule);
}

}  // namespace

// The kernels compute row, key and tile indices in 32-bit int (kernel_src/common/params.h). The largest
// values a problem reaches under a plan, each of which must stay at most INT_MAX:
//  - key blocks: (seqlen_k + tile_n - 1) / tile_n (flash_fwd.cuh n_end, block_range.h total);
//  - rows: seqlen_q * gqa_pack rounded up to whole CTAs (flash_fwd.cuh row0 + tile_m; fa4_fwd.cuh the packed
//    row (m_block * 2 + s) * 128 + row, block_range.h first_row + rows - 1);
//  - causal limits of the last, padding, row: row + (seqlen_k - seqlen_q) (flash_fwd.cuh mask_block) and
//    token + seqlen_k, summed before seqlen_q is subtracted (fa4_fwd.cuh softmax_role);
//  - work tiles: ceil(rows / rows per CTA) * heads_q / pack * batch (tile index, grid size).
// Offsets into tensors and the LSE are 64-bit in both kernels.
void check_index_range(const Plan& plan, const Problem& problem) {
  constexpr long long kIntMax = 0x7fffffffLL;
  const AttentionParams& p = problem.params;
  // Messages are built only on failure: run() calls this on every launch.
  auto kernel = [&] { return std::string("the ") + to_string(plan.key.backend) + " kernel"; };
  const long long tile_n = plan.tile_n;
  const long long pack = plan.key.gqa_pack;
  const long long rows_per_cta = static_cast<long long>(plan.tile_m) * plan.q_tiles;

  if (p.seqlen_k > kIntMax - (tile_n - 1))
    too_large("seqlen_k", "must be at most 2^31 - " + std::to_string(tile_n) + " = " + std::to_string(kIntMax - tile_n + 1) +
                              " for " + kernel() + " (it counts key blocks as (seqlen_k + " + std::to_string(tile_n - 1) +
                              ") / " + std::to_string(tile_n) + " in 32 bits), got " + std::to_string(p.seqlen_k));
  const long long max_rows = kIntMax / rows_per_cta * rows_per_cta;  // whole CTAs whose row indices fit
  if (p.seqlen_q * pack > max_rows)
    too_large("seqlen_q", "must be at most " + std::to_string(max_rows / pack) + " for " + kernel() +
                              (pack > 1 ? " packing " + std::to_string(pack) + " q heads per tile" : std::string()) +
                              " (its 32-bit row index reaches seqlen_q * " + std::to_string(pack) + " rounded up to " +
                              std::to_string(rows_per_cta) + " rows), got " + std::to_string(p.seqlen_q));
  const long long rows = p.seqlen_q * pack;
  const long long m_blocks = (rows + rows_per_cta - 1) / rows_per_cta;
  if (p.causal) {
    const long long last_row = m_blocks * rows_per_cta - 1;
    const bool portable = plan.key.backend == Backend::portable;
    // The largest seqlen_k whose causal limit for that row fits.
    const long long max_k = portable ? kIntMax - last_row + p.seqlen_q : kIntMax - last_row / pack;
    if (p.seqlen_k > max_k)
      too_large("seqlen_k", "must be at most " + std::to_string(max_k) + " with causal masking and seqlen_q " +
                                std::to_string(p.seqlen_q) + " for " + kernel() + " (its 32-bit causal limit " +
                                (portable ? "row + seqlen_k - seqlen_q" : "token + seqlen_k") +
                                " reaches that for the last padded row), got " + std::to_string(p.seqlen_k));
  }
  const long long tiles = m_blocks * (p.heads_q / pack) * p.batch;
  if (tiles > kIntMax)
    too_large("batch * heads_q * ceil(seqlen_q / " + std::to_string(rows_per_cta) + ")",
              "must be below 2^31 work tiles, got " + std::to_string(tiles));
}

void fill_schedule(const Plan& plan, const Problem& problem, fa4k::AttentionArgs& args) {
  check_index_range(plan, problem);
  const AttentionParams& p = problem.params;
  const long long pack = plan.key.gqa_pack;
  const long long rows_per_cta = static_cast<long long>(plan.tile_m) * plan.q_tiles;
  const long long m_blocks = (p.seqlen_q * pack + rows_per_cta - 1) / rows_per_cta;
  args.num_m_blocks = static_cast<int>(m_blocks);
  args.total_tiles = static_cast<int>(m_blocks * (p.heads_q / pack) * p.batch);
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
