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

int fa4_run(fa4_attention* handle, const fa4_params* c, void* stream) {
  return guarded([&] {
    const std::shared_ptr<fa4::Attention> attention = lookup(handle);
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
    attention->run(p, static_cast<CUstream>(stream));
  });
}

int fa4_prewarm(fa4_attention* handle, const fa4_config* configs, int32_t count, int32_t* failures) {
  if (failures) *failures = 0;
  return guarded([&] {
    const std::shared_ptr<fa4::Attention> attention = lookup(handle);
    if (count < 0) invalid("count: must be >= 0, got " + std::to_string(count));
    if (count) require(configs, "configs");
    std::vector<fa4::KernelConfig> list;
    for (int32_t i = 0; i < count; ++i) {
      fa4::KernelConfig k;
      k.dtype = dtype_of(configs[i].dtype, "configs[" + std::to_string(i) + "].dtype");
      k.head_dim = configs[i].head_dim;
      k.head_dim_v = configs[i].head_dim_v;
      k.causal = configs[i].causal != 0;
      k.lse = configs[i].lse != 0;
      k.q_heads_per_kv = configs[i].q_heads_per_kv;  // prewarm rejects values outside [1, kMaxQHeadsPerKv]
      k.arch = configs[i].arch;
      k.backend = attention->options().backend;
      list.push_back(k);
    }
    const fa4::PrewarmReport report = attention->prewarm(list);
    if (failures) *failures = static_cast<int32_t>(report.failures.size());
    if (!report.failures.empty())
      throw fa4::Error(report.failures.front().code, report.failures.front().config.name() + ": " + report.failures.front().message);
  });
}

const char* fa4_last_error(void) { return last_error.c_str(); }

const char* fa4_version(void) { return fa4::version(); }

}  // extern "C"
