#include "verify/reference.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <map>
#include <mutex>
#include <stdexcept>

#include "verify/jit_module.hpp"
#include "verify/device.hpp"

namespace fa4::verify {

RefResult reference_attention_cpu(const RefProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v) {
  const int64_t d = p.head_dim, dv = p.head_dim_v, group = p.heads_q / p.heads_kv;
  RefResult r;
  r.o.assign(p.batch * p.seqlen_q * p.heads_q * dv, 0.0);
  r.lse.assign(p.batch * p.heads_q * p.seqlen_q, -std::numeric_limits<double>::infinity());
  std::vector<double> qrow(d), logits(p.seqlen_k), acc(dv);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t kv = h / group;
      for (int64_t row = 0; row < p.seqlen_q; ++row) {
        // The row's keys [first, last], bottom-right aligned (diagonal at key row + seqlen_k - seqlen_q).
        const int64_t diagonal = row + p.seqlen_k - p.seqlen_q;
        int64_t last = p.seqlen_k - 1, first = 0;
        if (p.causal) last = std::min(last, diagonal);
        if (p.window_right >= 0) last = std::min(last, diagonal + p.window_right);
        if (p.window_left >= 0) first = std::max(first, diagonal - p.window_left);
        const double sink = p.sinks.empty() ? -std::numeric_limits<double>::infinity() : p.sinks[h];
        if (last < first) {  // O stays 0; the LSE is the sink's (-inf without)
          r.lse[(b * p.heads_q + h) * p.seqlen_q + row] = sink;
          continue;
        }
        const uint16_t* qp = q + b * p.q.batch + row * p.q.seq + h * p.q.head;
        for (int64_t i = 0; i < d; ++i) qrow[i] = from_half(p.dtype, qp[i]);
        double max_logit = sink;
        for (int64_t c = first; c <= last; ++c) {
          const uint16_t* kp = k + b * p.k.batch + c * p.k.seq + kv * p.k.head;
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += qrow[i] * from_half(p.dtype, kp[i]);
          r.max_abs_logit = std::max(r.max_abs_logit, std::abs(dot));
          logits[c] = dot * p.scale;
          if (p.softcap > 0) logits[c] = p.softcap * std::tanh(logits[c] / p.softcap);
          max_logit = std::max(max_logit, logits[c]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = std::exp(sink - max_logit);  // 0 without sinks
        for (int64_t c = first; c <= last; ++c) {
          const double w = std::exp(logits[c] - max_logit);
          sum += w;
          const uint16_t* vp = v + b * p.v.batch + c * p.v.seq + kv * p.v.head;
          for (int64_t j = 0; j < dv; ++j) acc[j] += w * from_half(p.dtype, vp[j]);
        }
        double* out = &r.o[((b * p.seqlen_q + row) * p.heads_q + h) * dv];
        for (int64_t j = 0; j < dv; ++j) out[j] = acc[j] / sum;
        r.lse[(b * p.heads_q + h) * p.seqlen_q + row] = max_logit + std::log(sum);
      }
    }
  return r;
}

namespace {

// The reference module of the current context, compiled on first use. A module lives and dies with its
// context, and a released primary context comes back as a new one (often with the same handle), so modules
// are kept per context id and never unloaded here: unloading one whose context is gone is an error, and
// the driver frees them with their context.
const JitModule& reference_module() {
  static std::mutex mutex;
  static std::map<unsigned long long, const JitModule*> modules;
  std::lock_guard lock(mutex);
  CUcontext ctx = nullptr;
  FA4_CU(cuCtxGetCurrent(&ctx));
  unsigned long long id = 0;
  FA4_CU(cuCtxGetId(ctx, &id));
  const JitModule*& module = modules[id];
  if (!module) {
    CUdevice dev = 0;
    FA4_CU(cuCtxGetDevice(&dev));
    module = new JitModule(verify_source, "reference/attention_ref.cu", "sm_" + std::to_string(detail::device_arch(dev)));
  }
  return *module;
}

}  // namespace

RefResult reference_attention_gpu(const RefProblem& p, CUdeviceptr q, CUdeviceptr k, CUdeviceptr v) {
  if (p.window_left >= 0 || p.window_right >= 0 || p.softcap > 0 || !p.sinks.empty())
    throw std::invalid_argument("reference_attention_gpu: no variants; use reference_attention_cpu");
  const size_t no = p.batch * p.seqlen_q * p.heads_q * p.head_dim_v, nl = p.batch * p.heads_q * p.seqlen_q;
  DeviceBuffer o(no * 4), lse(nl * 4);
  const CUfunction fn = reference_module().function("attention_ref");

  long long strides[9] = {p.q.batch, p.q.seq, p.q.head, p.k.batch, p.k.seq, p.k.head, p.v.batch, p.v.seq, p.v.head};
  CUdeviceptr o_ptr = o.ptr(), lse_ptr = lse.ptr();
  int ints[9] = {int(p.batch), int(p.seqlen_q), int(p.seqlen_k), int(p.heads_q), int(p.heads_kv), int(p.head_dim),
                 int(p.head_dim_v), p.dtype == DType::bf16, p.causal};
  float scale = static_cast<float>(p.scale);
  void* args[] = {&q, &k, &v, &strides[0], &strides[1], &strides[2], &strides[3], &strides[4], &strides[5],
                  &strides[6], &strides[7], &strides[8], &o_ptr, &lse_ptr, &ints[0], &ints[1], &ints[2], &ints[3],
                  &ints[4], &ints[5], &ints[6], &ints[7], &ints[8], &scale};
  constexpr unsigned kBlock = 128;
  const size_t threads = nl;  // one per (batch, head, row)
  JitModule::launch(fn, static_cast<unsigned>((threads + kBlock - 1) / kBlock), kBlock, 0, args);
  FA4_CU(cuCtxSynchronize());

  const std::vector<float> of = o.download<float>(no), lf = lse.download<float>(nl);
  RefResult r;
  r.o.assign(of.begin(), of.end());
  r.lse.assign(lf.begin(), lf.end());
  return r;
}

}  // namespace fa4::verify
