// The C ABI (include/fa4/fa4.h): translates to the C++ API and turns exceptions into codes.
#include "fa4/fa4.h"

#include <string>

#include "fa4/fa4.hpp"

struct fa4_attention {
  fa4::Attention attention;
};

namespace {

thread_local std::string last_error;

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

fa4::DType dtype_of(int32_t d, const char* field) {
  if (d == FA4_DTYPE_BF16) return fa4::DType::bf16;
  if (d == FA4_DTYPE_FP16) return fa4::DType::fp16;
  throw fa4::Error(fa4::ErrorCode::invalid_argument,
                   std::string(field) + ": must be FA4_DTYPE_BF16 (0) or FA4_DTYPE_FP16 (1), got " + std::to_string(d));
}

fa4::Strides strides_of(const int64_t s[3]) { return {s[0], s[1], s[2]}; }

void require(const void* p, const char* field) {
  if (!p) throw fa4::Error(fa4::ErrorCode::invalid_argument, std::string(field) + ": must not be null");
}

}  // namespace

extern "C" {

int fa4_create(fa4_attention** out) {
  return guarded([&] {
    require(out, "out");
    *out = new fa4_attention{fa4::Attention(fa4::Options::from_env())};
  });
}

void fa4_destroy(fa4_attention* handle) { delete handle; }

int fa4_run(fa4_attention* handle, const fa4_params* c, void* stream) {
  return guarded([&] {
    require(handle, "handle");
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
    handle->attention.run(p, static_cast<CUstream>(stream));
  });
}

int fa4_prewarm(fa4_attention* handle, const fa4_config* configs, int32_t count, int32_t* failures) {
  return guarded([&] {
    require(handle, "handle");
    if (count < 0) throw fa4::Error(fa4::ErrorCode::invalid_argument, "count: must be >= 0");
    if (count) require(configs, "configs");
    std::vector<fa4::KernelConfig> list;
    for (int32_t i = 0; i < count; ++i) {
      fa4::KernelConfig k;
      k.dtype = dtype_of(configs[i].dtype, "configs[].dtype");
      k.head_dim = configs[i].head_dim;
      k.head_dim_v = configs[i].head_dim_v;
      k.causal = configs[i].causal != 0;
      k.lse = configs[i].lse != 0;
      k.q_heads_per_kv = configs[i].q_heads_per_kv > 0 ? configs[i].q_heads_per_kv : 1;
      k.arch = configs[i].arch;
      k.backend = handle->attention.options().backend;
      list.push_back(k);
    }
    const fa4::PrewarmReport report = handle->attention.prewarm(list);
    if (failures) *failures = static_cast<int32_t>(report.failures.size());
    if (!report.failures.empty())
      throw fa4::Error(report.failures.front().code, report.failures.front().config.name() + ": " + report.failures.front().message);
  });
}

const char* fa4_last_error(void) { return last_error.c_str(); }

const char* fa4_version(void) { return fa4::version(); }

}  // extern "C"
