// Names, keys and the dispatch from keys to the backend planners. The backends' numbers live in
// plan_portable.cpp and plan_sm100.cpp.
#include <algorithm>
#include <sstream>
#include <thread>

#include "fa4/fa4.hpp"
#include "runtime/planner.hpp"

namespace fa4 {

const char* to_string(DType dtype) { return dtype == DType::bf16 ? "bf16" : "fp16"; }

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::automatic: return "auto";
    case Backend::portable: return "portable";
    case Backend::sm100: return "sm100";
    case Backend::sm100_emulated: return "sm100_emulated";
  }
  return "?";
}

Backend backend_from_string(const std::string& name) {
  for (Backend b : {Backend::automatic, Backend::portable, Backend::sm100, Backend::sm100_emulated})
    if (name == to_string(b)) return b;
  throw Error(ErrorCode::invalid_argument,
              "backend '" + name + "': must be one of auto, portable, sm100, sm100_emulated");
}

const char* to_string(DebugFault fault) {
  switch (fault) {
    case DebugFault::none: return "none";
    case DebugFault::skip_rescale: return "skip_rescale";
    case DebugFault::early_normalize: return "early_normalize";
    case DebugFault::tmem_reuse_race: return "tmem_reuse_race";
    case DebugFault::wrong_gqa_map: return "wrong_gqa_map";
  }
  return "?";
}

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::cuda_error: return "cuda_error";
    case ErrorCode::compile_error: return "compile_error";
    case ErrorCode::not_cached: return "not_cached";
    case ErrorCode::graph_capture: return "graph_capture";
    case ErrorCode::self_check_failed: return "self_check_failed";
    case ErrorCode::cache_error: return "cache_error";
    case ErrorCode::internal: return "internal";
  }
  return "?";
}

std::string KernelKey::target() const {
  switch (backend) {
    case Backend::sm100: return "sm_100a";
    case Backend::sm100_emulated: return "sm_90a";
    default: return "sm_" + std::to_string(arch);
  }
}

std::string KernelKey::name() const {
  std::ostringstream s;
  s << to_string(backend) << "_sm" << arch << "_" << to_string(dtype) << "_d" << head_dim;
  if (head_dim_v != head_dim) s << "_dv" << head_dim_v;
  if (causal) s << "_causal";
  if (lse) s << "_lse";
  if (gqa_pack != 1) s << "_gqa" << gqa_pack;
  if (fault != DebugFault::none) s << "_fault_" << to_string(fault);
  return s.str();
}

bool KernelKey::operator==(const KernelKey& o) const {
  return backend == o.backend && arch == o.arch && dtype == o.dtype && head_dim == o.head_dim &&
         head_dim_v == o.head_dim_v && causal == o.causal && lse == o.lse && gqa_pack == o.gqa_pack &&
         fault == o.fault;
}

int Plan::registers_total() const {
  int total = 0;
  for (const WarpRole& r : roles) total += r.warps * 32 * r.registers;
  return total;
}

std::string KernelConfig::name() const {
  std::ostringstream s;
  s << to_string(backend) << "/" << (arch ? "sm" + std::to_string(arch) : std::string("current")) << "/"
    << to_string(dtype) << "/d" << head_dim;
  if (head_dim_v && head_dim_v != head_dim) s << "x" << head_dim_v;
  s << (causal ? "/causal" : "/full") << (lse ? "/lse" : "") << "/qh_per_kv" << q_heads_per_kv;
  return s.str();
}

const char* version() { return FA4_VERSION_STRING; }

const std::vector<HeadDims>& supported_head_dims() {
  static const std::vector<HeadDims> dims = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}};
  return dims;
}

bool head_dims_supported(int64_t head_dim, int64_t head_dim_v) {
  for (const HeadDims& h : supported_head_dims())
    if (h.head_dim == head_dim && h.head_dim_v == head_dim_v) return true;
  return false;
}

std::vector<KernelConfig> supported_configs(Backend backend, int arch) {
  std::vector<KernelConfig> out;
  const Backend resolved = detail::resolve_backend(backend, arch);
  for (auto [d, dv] : supported_head_dims())
    for (DType dtype : {DType::bf16, DType::fp16})
      for (bool causal : {false, true})
        for (bool lse : {false, true}) {
          KernelConfig c;
          c.dtype = dtype;
          c.head_dim = d;
          c.head_dim_v = dv;
          c.causal = causal;
          c.lse = lse;
          c.backend = resolved;
          c.arch = arch;
          if (!detail::supports(detail::key_for_config(c, arch), nullptr)) continue;
          out.push_back(c);
        }
  return out;
}

}  // namespace fa4

namespace fa4::detail {

Backend resolve_backend(Backend requested, int arch) {
  if (requested != Backend::automatic) return requested;
  return (arch == 100 || arch == 103) ? Backend::sm100 : Backend::portable;
}

int sm100_gqa_pack(int q_heads_per_kv);  // plan_sm100.cpp

KernelKey key_for_config(const KernelConfig& config, int arch) {
  KernelKey key;
  key.backend = resolve_backend(config.backend, arch);
  key.arch = key.backend == Backend::sm100 ? 100 : key.backend == Backend::sm100_emulated ? 90 : arch;
  key.dtype = config.dtype;
  key.head_dim = config.head_dim;
  key.head_dim_v = config.head_dim_v ? config.head_dim_v : config.head_dim;
  key.causal = config.causal;
  key.lse = config.lse;
  key.gqa_pack = key.backend == Backend::portable ? 1 : sm100_gqa_pack(config.q_heads_per_kv);
  return key;
}

KernelConfig config_of(const Problem& problem, Backend backend, int arch) {
  const AttentionParams& p = problem.params;
  KernelConfig c;
  c.dtype = p.dtype;
  c.head_dim = static_cast<int>(p.head_dim);
  c.head_dim_v = static_cast<int>(p.head_dim_v);
  c.causal = p.causal;
  c.lse = p.return_lse;
  c.q_heads_per_kv = problem.q_heads_per_kv;
  c.backend = backend;
  c.arch = arch;
  return c;
}

KernelKey select_key(const Problem& problem, Backend backend, int arch) {
  return key_for_config(config_of(problem, backend, arch), arch);
}

bool supports(const KernelKey& key, std::string* why) {
  return key.backend == Backend::portable ? portable_supports(key, why) : sm100_supports(key, why);
}

void check_supported(const KernelKey& key) {
  std::string why;
  if (!supports(key, &why)) throw Error(ErrorCode::unsupported, "no " + std::string(to_string(key.backend)) + " kernel for " +
                                                   key.name() + ": " + why);
}

Plan make_plan(const KernelKey& key) {
  check_supported(key);
  return key.backend == Backend::portable ? make_portable_plan(key) : make_sm100_plan(key);
}

LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) {
  return plan.key.backend == Backend::portable ? portable_launch_shape(plan, scheduled)
                                               : sm100_launch_shape(plan, scheduled, sm_count);
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

int tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out) {
  return plan.key.backend == Backend::portable ? 0 : sm100_tma_descriptors(plan, problem, out);
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

}  // namespace fa4::detail
