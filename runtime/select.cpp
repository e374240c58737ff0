// Selection, in one place: which backend serves a configuration on a device. Automatic selection is per
// configuration: the best backend of the device's preference order that supports it, so head dims the
// sm100 kernel does not take run on the portable kernel instead of failing.
#include <algorithm>
#include <array>
#include <atomic>

#include "runtime/backend.hpp"
#include "runtime/nvrtc.hpp"

namespace fa4::detail {
namespace {

// Backends worth trying on a device, best first (at most 3; Backend::automatic ends the list).
std::array<Backend, 3> preference(int device_arch) {
  if (device_arch == 100 || device_arch == 103) return {Backend::sm100, Backend::portable, Backend::automatic};
  if (device_arch == 90) return {Backend::sm90, Backend::portable, Backend::automatic};
  return {Backend::portable, Backend::automatic, Backend::automatic};
}

KernelKey key_of(const KernelBackend& backend, const KernelConfig& config, int device_arch) {
  KernelKey base;
  base.backend = backend.id();
  base.dtype = config.dtype;
  base.head_dim = config.head_dim;
  base.head_dim_v = config.head_dim_v ? config.head_dim_v : config.head_dim;
  base.causal = config.causal;
  base.lse = config.lse;
  base.varlen = config.varlen;
  base.paged = config.paged;
  base.split = config.split;
  base.decode = config.decode;
  base.window = config.window;
  base.softcap = config.softcap;
  base.sinks = config.sinks;
  return backend.key(base, config, device_arch);
}

}  // namespace

int KernelBackend::tma_descriptors(const Plan&, const Problem&, CUtensorMap*) const { return 0; }

std::string dense_prefill_gap(const KernelKey& key, const char* backend, int tile_rows,
                              std::initializer_list<std::pair<int, int>> served) {
  bool dims_ok = false;
  std::string listed;
  for (auto [d, dv] : served) {
    dims_ok |= key.head_dim == d && key.head_dim_v == dv;
    listed += std::string(listed.empty() ? "" : ", ") + "(" + std::to_string(d) + "," + std::to_string(dv) + ")";
  }
  if (!dims_ok)
    return "head dims (" + std::to_string(key.head_dim) + ", " + std::to_string(key.head_dim_v) + ") are not " +
           listed + "; the portable kernel serves them";
  if (key.gqa_pack < 1 || tile_rows % key.gqa_pack) return "gqa_pack must divide " + std::to_string(tile_rows);
  if (key.op != KernelOp::attention) return "the combine kernel is portable";
  if (key.decode) return std::string("decode shapes run on the portable decode kernel (the ") + backend + " kernel's tiles have " +
                         std::to_string(tile_rows) + " rows)";
  if (key.split) return std::string("split-KV runs on the portable kernel (the ") + backend + " kernel writes O directly)";
  return "";
}

LaunchShape tile_grid(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) {
  LaunchShape s;
  const int tiles = scheduled.total_tiles;
  s.grid[0] = static_cast<unsigned>(plan.persistent ? std::min(tiles, std::max(1, sm_count)) : tiles);
  s.block[0] = static_cast<unsigned>(plan.threads);
  s.smem_bytes = static_cast<unsigned>(plan.smem_bytes);
  return s;
}

const KernelBackend& backend_of(Backend id) {
  switch (id) {
    case Backend::portable: return portable_backend();
    case Backend::sm90: return sm90_backend();
    case Backend::sm100: return sm100_backend();
    case Backend::sm100_emulated: return sm100_emulated_backend();
    case Backend::automatic: break;
  }
  throw Error(ErrorCode::internal, "backend_of: 'auto' is not a backend; select a key first");
}

namespace {
std::atomic<int> family_targets_override{-1};
}

bool nvrtc_has_family_targets() {
  if (const int forced = family_targets_override.load(); forced >= 0) return forced != 0;
  const NvrtcVersion v = nvrtc_version_numbers();
  return v.major > 12 || (v.major == 12 && v.minor >= 9);
}

void override_family_targets_for_testing(int has) { family_targets_override = has; }

KernelKey key_for_config(const KernelConfig& config, int device_arch) {
  if (config.backend != Backend::automatic) {
    const KernelBackend& backend = backend_of(config.backend);
    const KernelKey key = key_of(backend, config, device_arch);
    if (!config.decode || supports(key, nullptr)) return key;
    KernelConfig general = config;  // a backend without a decode kernel runs decode shapes on its general one
    general.decode = false;
    return key_of(backend, general, device_arch);
  }
  for (Backend b : preference(device_arch)) {
    if (b == Backend::automatic) break;
    const KernelKey key = key_of(backend_of(b), config, device_arch);
    if (supports(key, nullptr)) return key;
  }
  // Nothing serves it: the error names the last choice (the portable kernel) and its reason.
  const KernelKey key = key_of(portable_backend(), config, device_arch);
  check_supported(key);
  return key;
}

std::string passed_over(const KernelConfig& config, int device_arch) {
  if (config.backend != Backend::automatic) return {};
  std::string out;
  for (Backend b : preference(device_arch)) {
    if (b == Backend::automatic) break;
    std::string why;
    if (supports(key_of(backend_of(b), config, device_arch), &why)) break;
    out += (out.empty() ? "" : "; ") + std::string(to_string(b)) + ": " + why;
  }
  return out;
}

KernelKey fallback_key(const KernelKey& failed, const KernelConfig& config, int device_arch) {
  if (failed.backend == Backend::portable)
    throw Error(ErrorCode::unsupported, failed.name() + ": the portable kernel is the last fallback");
  KernelConfig portable = config;
  portable.backend = Backend::portable;
  return key_for_config(portable, device_arch);  // throws Error(unsupported) with the reason
}

KernelConfig config_of(const Problem& problem, Backend backend, int device_arch) {
  return config_of(problem, backend, device_arch, problem.decode);
}

KernelConfig config_of(const Problem& problem, Backend backend, int device_arch, bool decode_kernel) {
  const AttentionParams& p = problem.params;
  KernelConfig c;
  c.dtype = p.dtype;
  c.head_dim = static_cast<int>(p.head_dim);
  c.head_dim_v = static_cast<int>(p.head_dim_v);
  c.causal = p.causal;
  c.lse = p.return_lse;
  c.q_heads_per_kv = problem.q_heads_per_kv;
  c.varlen = problem.varlen;
  c.paged = problem.paged;
  c.split = problem.split && (decode_kernel || p.num_splits > 1);  // num_splits 0 cuts decode sequences only
  c.decode = decode_kernel;
  c.window = problem.window;
  c.softcap = problem.softcap;
  c.sinks = problem.sinks;
  c.backend = backend;
  c.arch = device_arch;
  return c;
}

bool supports(const KernelKey& key, std::string* why) {
  if (key.backend == Backend::automatic) {
    if (why) *why = "no backend selected";
    return false;
  }
  return backend_of(key.backend).supports(key, why);
}

void check_supported(const KernelKey& key) {
  std::string why;
  if (!supports(key, &why))
    throw Error(ErrorCode::unsupported, "no " + std::string(to_string(key.backend)) + " kernel for " + key.name() + ": " + why);
}

Plan make_plan(const KernelKey& key) {
  check_supported(key);
  return backend_of(key.backend).plan(key);
}

}  // namespace fa4::detail
