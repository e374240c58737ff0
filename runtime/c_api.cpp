// The C ABI (include/fa4/fa4.h): translates to the C++ API and turns exceptions into codes.
//
// Handles are opaque ids, never addresses: every call looks its handle up in a registry instead of
// dereferencing it, so a destroyed, unknown or garbage handle is an error, not a use of freed memory. Ids
// are never reused, so a stale handle cannot reach a later handle's object. The registry holds shared
// owners: a call in flight keeps its Attention alive while another thread destroys the handle.
#include "fa4/fa4.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fa4/fa4.hpp"

namespace {

thread_local std::string last_error;

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<uintptr_t, std::shared_ptr<fa4::Attention>> live;
  uintptr_t next_id = 1;
};

// Never destroyed: handles may be used (or destroyed) from other static destructors.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

[[noreturn]] void invalid(const std::string& message) { throw fa4::Error(fa4::ErrorCode::invalid_argument, message); }

void require(const void* p, const char* field) {
  if (!p) invalid(std::string(field) + ": must not be null");
}

std::shared_ptr<fa4::Attention> lookup(fa4_attention* handle) {
  require(handle, "handle");
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<uintptr_t>(handle));
  if (it == r.live.end()) invalid("handle: not a live fa4 handle (already destroyed?)");
  return it->second;
}

template <class F>
int guarded(F&& f) {
  try {
    last_error.clear();
    f();
    return FA4_OK;
  } catch (const fa4::Error& e) {
    last_error = e.what();
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    last_error = e.what();
    return FA4_ERR_INTERNAL;
  }
}

fa4::DType dtype_of(int32_t d, const std::string& field) {
  if (d == FA4_DTYPE_BF16) return fa4::DType::bf16;
  if (d == FA4_DTYPE_FP16) return fa4::DType::fp16;
  invalid(field + ": must be FA4_DTYPE_BF16 (0) or FA4_DTYPE_FP16 (1), got " + std::to_string(d));
}

fa4::Strides strides_of(const int64_t s[3]) { return {s[0], s[1], s[2]}; }

// A versioned struct (fa4.h): its struct_size must be one this library reads. Only the current size exists so
// far; a version that appends fields will also accept the older sizes, copying struct_size bytes into a
// zeroed struct.
template <class T>
const T& versioned(const T* in, const char* field, const char* type) {
  require(in, field);
  if (in->struct_size != sizeof(T))
    invalid(std::string(field) + ".struct_size: must be sizeof(" + type + ") = " + std::to_string(sizeof(T)) +
            " (the fa4.h this library was built with), got " + std::to_string(in->struct_size));
  return *in;
}

// fa4_params and, when given, fa4_serving as one AttentionParams (NULL serving: a dense call).
fa4::AttentionParams params_of(const fa4_params* c, const fa4_serving* serving) {
  require(c, "params");
  fa4::AttentionParams p;
  p.q = c->q;
  p.k = c->k;
  p.v = c->v;
  p.o = c->o;
  p.lse = c->lse;
  p.return_lse = c->return_lse != 0;
  p.batch = c->batch;
  p.seqlen_q = c->seqlen_q;
  p.seqlen_k = c->seqlen_k;
  p.heads_q = c->heads_q;
  p.heads_kv = c->heads_kv;
  p.head_dim = c->head_dim;
  p.head_dim_v = c->head_dim_v;
  p.q_stride = strides_of(c->q_stride);
  p.k_stride = strides_of(c->k_stride);
  p.v_stride = strides_of(c->v_stride);
  p.o_stride = strides_of(c->o_stride);
  p.dtype = dtype_of(c->dtype, "dtype");
  p.causal = c->causal != 0;
  p.softmax_scale = c->softmax_scale;
  if (!serving) return p;
  const fa4_serving& s = versioned(serving, "serving", "fa4_serving");
  p.cu_seqlens_q = s.cu_seqlens_q;
  p.total_q = s.total_q;
  p.cu_seqlens_k = s.cu_seqlens_k;
  p.total_k = s.total_k;
  p.seqused_k = s.seqused_k;
  p.page_table = s.page_table;
  p.page_size = s.page_size;
  p.num_pages = s.num_pages;
  p.max_pages_per_seq = s.max_pages_per_seq;
  p.num_splits = s.num_splits;
  p.split_by_batch = s.split_by_batch != 0;
  p.workspace = s.workspace;
  p.workspace_bytes = s.workspace_bytes;
  if (s.window) {
    p.window_left = s.window_left;
    p.window_right = s.window_right;
  }
  p.softcap = s.softcap;
  p.sinks = s.sinks;
  return p;
}

// fa4_prewarm and fa4_prewarm_ex: `config(i)` translates entry i; the first failure's code and message.
template <class F>
void prewarm(fa4_attention* handle, bool has_configs, int32_t count, int32_t* failures, F&& config) {
  const std::shared_ptr<fa4::Attention> attention = lookup(handle);
  if (count < 0) invalid("count: must be >= 0, got " + std::to_string(count));
  if (count && !has_configs) invalid("configs: must not be null");
  std::vector<fa4::KernelConfig> list;
  for (int32_t i = 0; i < count; ++i) {
    fa4::KernelConfig k = config(i, "configs[" + std::to_string(i) + "]");
    k.backend = attention->options().backend;
    list.push_back(k);
  }
  const fa4::PrewarmReport report = attention->prewarm(list);
  if (failures) *failures = static_cast<int32_t>(report.failures.size());
  if (!report.failures.empty())
    throw fa4::Error(report.failures.front().code, report.failures.front().config.name() + ": " + report.failures.front().message);
}

// The fields fa4_config and fa4_config_ex share.
template <class C>
fa4::KernelConfig config_of(const C& c, const std::string& field) {
  fa4::KernelConfig k;
  k.dtype = dtype_of(c.dtype, field + ".dtype");
  k.head_dim = c.head_dim;
  k.head_dim_v = c.head_dim_v;
  k.causal = c.causal != 0;
  k.lse = c.lse != 0;
  k.q_heads_per_kv = c.q_heads_per_kv;  // prewarm rejects values outside [1, kMaxQHeadsPerKv]
  k.arch = c.arch;
  return k;
}

}  // namespace

extern "C" {

int fa4_create(fa4_attention** out) {
  return guarded([&] {
    require(out, "out");
    *out = nullptr;
    auto attention = std::make_shared<fa4::Attention>(fa4::Options::from_env());
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    const uintptr_t id = r.next_id++;
    r.live.emplace(id, std::move(attention));
    *out = reinterpret_cast<fa4_attention*>(id);
  });
}

int fa4_destroy(fa4_attention* handle) {
  if (!handle) {
    last_error.clear();
    return FA4_OK;
  }
  std::shared_ptr<fa4::Attention> dying;  // released after the lock, or by the last call still using it
  return guarded([&] {
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    auto it = r.live.find(reinterpret_cast<uintptr_t>(handle));
    if (it == r.live.end()) invalid("handle: not a live fa4 handle (already destroyed?)");
    dying = std::move(it->second);
    r.live.erase(it);
  });
}

int fa4_run(fa4_attention* handle, const fa4_params* params, void* stream) {
  return fa4_run_serving(handle, params, nullptr, stream);
}

int fa4_run_serving(fa4_attention* handle, const fa4_params* params, const fa4_serving* serving, void* stream) {
  return guarded([&] {
    const std::shared_ptr<fa4::Attention> attention = lookup(handle);
    attention->run(params_of(params, serving), static_cast<CUstream>(stream));
  });
}

int fa4_workspace_size(fa4_attention* handle, const fa4_params* params, const fa4_serving* serving, size_t* out) {
  if (out) *out = 0;
  return guarded([&] {
    const std::shared_ptr<fa4::Attention> attention = lookup(handle);
    require(out, "out");
    *out = attention->workspace_size(params_of(params, serving));
  });
}

int fa4_merge(fa4_attention* handle, const fa4_merge_params* merge, void* stream) {
  return guarded([&] {
    const std::shared_ptr<fa4::Attention> attention = lookup(handle);
    const fa4_merge_params& c = versioned(merge, "merge", "fa4_merge_params");
    if (c.num_states < 0) invalid("num_states: must not be negative, got " + std::to_string(c.num_states));
    if (c.num_states) require(c.states, "states");
    fa4::MergeParams m;
    for (int32_t i = 0; i < c.num_states; ++i) m.states.push_back({c.states[i].o, c.states[i].lse});
    m.state_stride = strides_of(c.state_stride);
    m.o = c.o;
    m.o_stride = strides_of(c.o_stride);
    m.lse = c.lse;
    m.batch = c.batch;
    m.seqlen = c.seqlen;
    m.heads = c.heads;
    m.head_dim_v = c.head_dim_v;
    m.cu_seqlens = c.cu_seqlens;
    m.total = c.total;
    m.dtype = dtype_of(c.dtype, "dtype");
    attention->merge(m, static_cast<CUstream>(stream));
  });
}

int fa4_prewarm(fa4_attention* handle, const fa4_config* configs, int32_t count, int32_t* failures) {
  if (failures) *failures = 0;
  return guarded([&] {
    prewarm(handle, configs != nullptr, count, failures, [&](int32_t i, const std::string& field) {
      return config_of(configs[i], field);
    });
  });
}

int fa4_prewarm_ex(fa4_attention* handle, const fa4_config_ex* configs, int32_t count, int32_t* failures) {
  if (failures) *failures = 0;
  return guarded([&] {
    prewarm(handle, configs != nullptr, count, failures, [&](int32_t i, const std::string& field) {
      const fa4_config_ex& c = versioned(&configs[i], field.c_str(), "fa4_config_ex");
      fa4::KernelConfig k = config_of(c, field);
      k.varlen = c.varlen != 0;
      k.paged = c.paged != 0;
      k.split = c.split != 0;
      k.decode = c.decode != 0;
      k.window = c.window != 0;
      k.softcap = c.softcap != 0;
      k.sinks = c.sinks != 0;
      return k;
    });
  });
}

const char* fa4_last_error(void) { return last_error.c_str(); }

const char* fa4_version(void) { return fa4::version(); }

}  // extern "C"
