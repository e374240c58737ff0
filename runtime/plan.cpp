// Names and keys of the public plan.hpp types, and the supported configurations. Selection lives in
// select.cpp, each backend's numbers in runtime/backends/<name>/.
#include <algorithm>
#include <sstream>
#include <thread>

#include "fa4/fa4.hpp"
#include "runtime/backend.hpp"

namespace fa4 {

const char* to_string(DType dtype) { return dtype == DType::bf16 ? "bf16" : "fp16"; }

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::automatic: return "auto";
    case Backend::portable: return "portable";
    case Backend::sm100: return "sm100";
    case Backend::sm100_emulated: return "sm100_emulated";
    case Backend::sm90: return "sm90";
  }
  return "?";
}

Backend backend_from_string(const std::string& name) {
  for (Backend b : {Backend::automatic, Backend::portable, Backend::sm90, Backend::sm100, Backend::sm100_emulated})
    if (name == to_string(b)) return b;
  throw Error(ErrorCode::invalid_argument,
              "backend '" + name + "': must be one of auto, portable, sm90, sm100, sm100_emulated");
}

const char* to_string(DebugFault fault) {
  switch (fault) {
    case DebugFault::none: return "none";
    case DebugFault::skip_rescale: return "skip_rescale";
    case DebugFault::early_normalize: return "early_normalize";
    case DebugFault::tmem_reuse_race: return "tmem_reuse_race";
    case DebugFault::wrong_gqa_map: return "wrong_gqa_map";
    case DebugFault::assume_mma_order: return "assume_mma_order";
    case DebugFault::skip_wait_st: return "skip_wait_st";
    case DebugFault::skip_wait_ld: return "skip_wait_ld";
    case DebugFault::skip_relay_fence: return "skip_relay_fence";
    case DebugFault::trap: return "trap";
    case DebugFault::hang: return "hang";
    case DebugFault::spin: return "spin";
  }
  return "?";
}

const char* to_string(Emulation emulation) { return emulation == Emulation::strict ? "strict" : "adversarial"; }

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
  static const char* suffix[] = {"", "a", "f"};
  return "sm_" + std::to_string(arch) + suffix[static_cast<int>(variant)];
}

std::string KernelKey::name() const {
  std::ostringstream s;
  s << to_string(backend) << "_sm" << target().substr(3) << (op == KernelOp::combine ? "_combine" : "") << "_"
    << to_string(dtype) << "_d" << head_dim;
  if (head_dim_v != head_dim) s << "_dv" << head_dim_v;
  if (causal) s << "_causal";
  if (lse) s << "_lse";
  if (gqa_pack != 1) s << "_gqa" << gqa_pack;
  if (varlen) s << "_varlen";
  if (paged) s << "_paged";
  if (split) s << (op == KernelOp::combine ? "_f32states" : "_split");
  if (decode) s << "_decode";
  if (window) s << "_window";
  if (softcap) s << "_softcap";
  if (sinks) s << "_sinks";
  if (fault != DebugFault::none) s << "_fault_" << to_string(fault);
  return s.str();
}

bool KernelKey::operator==(const KernelKey& o) const {
  return op == o.op && backend == o.backend && arch == o.arch && variant == o.variant && dtype == o.dtype &&
         head_dim == o.head_dim && head_dim_v == o.head_dim_v && causal == o.causal && lse == o.lse &&
         gqa_pack == o.gqa_pack && varlen == o.varlen && paged == o.paged && split == o.split && decode == o.decode &&
         window == o.window && softcap == o.softcap && sinks == o.sinks && fault == o.fault;
}

int Plan::launch_registers() const { return 65536 / threads / 8 * 8; }

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
  s << (causal ? "/causal" : "/full") << (lse ? "/lse" : "") << "/qh_per_kv" << q_heads_per_kv << (varlen ? "/varlen" : "")
    << (paged ? "/paged" : "") << (split ? "/split" : "") << (decode ? "/decode" : "")
    << (window ? "/window" : "") << (softcap ? "/softcap" : "") << (sinks ? "/sinks" : "");
  return s.str();
}

const char* version() { return FA4_VERSION_STRING; }

bool decode_shape(int64_t seqlen_q, int64_t q_heads_per_kv) {
  return std::max<int64_t>(seqlen_q, 1) * q_heads_per_kv <= kDecodeMaxRows;
}

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
          c.backend = backend;
          c.arch = arch;
          try {
            if (!detail::supports(detail::key_for_config(c, arch), nullptr)) continue;
          } catch (const Error&) {  // automatic: no backend serves it
            continue;
          }
          out.push_back(c);
        }
  return out;
}

}  // namespace fa4

