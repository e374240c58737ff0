#include "runtime/self_check.hpp"

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "runtime/driver.hpp"
#include "runtime/half.hpp"

namespace fa4::detail {
namespace {

struct DeviceMemory {
  CUdeviceptr ptr = 0;
  explicit DeviceMemory(size_t bytes) { check_cu(driver().cuMemAlloc(&ptr, bytes), "cuMemAlloc (self-check)"); }
  ~DeviceMemory() { driver().cuMemFree(ptr); }
  void* get() const { return reinterpret_cast<void*>(ptr); }
};

struct Stream {
  CUstream s = nullptr;
  Stream() { check_cu(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate (self-check)"); }
  ~Stream() { driver().cuStreamDestroy(s); }
};

}  // namespace

std::string self_check(const KernelKey& key, const SelfCheckLaunch& launch) {
  // Small, but with tails in both sequence lengths, seqlen_q != seqlen_k and several q heads per kv head.
  AttentionParams p;
  p.batch = 2;
  p.seqlen_q = 190;
  p.seqlen_k = 333;
  p.heads_kv = 2;
  p.heads_q = 2 * std::max(2, key.gqa_pack);
  p.head_dim = key.head_dim;
  p.head_dim_v = key.head_dim_v;
  p.dtype = key.dtype;
  p.causal = key.causal;
  p.return_lse = key.lse;

  const size_t nq = p.batch * p.seqlen_q * p.heads_q * p.head_dim;
  const size_t nk = p.batch * p.seqlen_k * p.heads_kv * p.head_dim;
  const size_t nv = p.batch * p.seqlen_k * p.heads_kv * p.head_dim_v;
  const size_t no = p.batch * p.seqlen_q * p.heads_q * p.head_dim_v;
  const size_t nl = p.batch * p.heads_q * p.seqlen_q;
  DeviceMemory q(nq * 2), k(nk * 2), v(nv * 2), o_candidate(no * 2), o_reference(no * 2), lse_candidate(nl * 4),
      lse_reference(nl * 4);

  std::mt19937 rng(20261130);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  for (auto [buffer, count] : {std::pair<const DeviceMemory*, size_t>{&q, nq}, {&k, nk}, {&v, nv}}) {
    std::vector<uint16_t> host(count);
    for (uint16_t& h : host) h = to_half(key.dtype, dist(rng));
    check_cu(driver().cuMemcpyHtoD(buffer->ptr, host.data(), count * 2), "cuMemcpyHtoD (self-check)");
  }
  Stream stream;
  for (const DeviceMemory* out : {&o_candidate, &o_reference, &lse_candidate, &lse_reference})
    check_cu(driver().cuMemsetD8Async(out->ptr, 0xff, out == &o_candidate || out == &o_reference ? no * 2 : nl * 4, stream.s),
             "cuMemsetD8Async (self-check)");  // NaN everywhere: unwritten outputs cannot pass

  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  for (bool candidate : {true, false}) {
    p.o = (candidate ? o_candidate : o_reference).get();
    p.lse = p.return_lse ? static_cast<float*>((candidate ? lse_candidate : lse_reference).get()) : nullptr;
    launch(candidate, validate(p), stream.s);
  }
  check_cu(driver().cuStreamSynchronize(stream.s), "cuStreamSynchronize (self-check)");

  std::vector<uint16_t> a(no), b(no);
  check_cu(driver().cuMemcpyDtoH(a.data(), o_candidate.ptr, no * 2), "cuMemcpyDtoH (self-check)");
  check_cu(driver().cuMemcpyDtoH(b.data(), o_reference.ptr, no * 2), "cuMemcpyDtoH (self-check)");
  const double tolerance = key.dtype == DType::bf16 ? 3e-2 : 1e-2;
  size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (size_t i = 0; i < no; ++i) {
    const double x = from_half(key.dtype, a[i]), y = from_half(key.dtype, b[i]);
    const double diff = std::fabs(x - y);
    if (!(diff <= tolerance * (1 + std::fabs(y)))) {
      if (!bad++) first_bad = i;
      if (!(diff <= worst)) worst = diff;
    }
  }
  std::ostringstream why;
  if (bad)
    why << bad << " of " << no << " outputs differ (first at flat index " << first_bad << ", worst |diff| " << worst << ")";
  if (p.return_lse) {
    std::vector<float> la(nl), lb(nl);
    check_cu(driver().cuMemcpyDtoH(la.data(), lse_candidate.ptr, nl * 4), "cuMemcpyDtoH (self-check)");
    check_cu(driver().cuMemcpyDtoH(lb.data(), lse_reference.ptr, nl * 4), "cuMemcpyDtoH (self-check)");
    size_t bad_lse = 0;
    for (size_t i = 0; i < nl; ++i)
      if (!(la[i] == lb[i] || std::fabs(la[i] - lb[i]) <= 1e-2 * (1 + std::fabs(lb[i])))) ++bad_lse;
    if (bad_lse) why << (bad ? "; " : "") << bad_lse << " of " << nl << " LSE values differ";
  }
  return why.str();
}

}  // namespace fa4::detail
