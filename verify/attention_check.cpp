#include "verify/attention_check.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "verify/reference.hpp"
#include "verify/device.hpp"

namespace fa4::verify {
namespace {

struct Tolerance {
  double atol, rtol, rel_l2;
};
Tolerance tolerance(DType dtype) { return dtype == DType::bf16 ? Tolerance{2e-2, 2e-2, 1e-2} : Tolerance{4e-3, 4e-3, 2e-3}; }
constexpr double kLseAtol = 2e-3, kLseRtol = 1e-4;
constexpr double kCpuReferenceMaxWork = 2e8;  // multiply-adds; above this the GPU reference is used

// Where one [batch, seq, head, dim] tensor lives: a buffer, an element offset into it, strides.
struct View {
  int buffer = 0;
  int64_t offset = 0;
  Strides strides;
  int64_t extent[4] = {0, 0, 0, 0};
  int64_t end() const {  // one past the last element
    return offset + (extent[0] - 1) * strides.batch + (extent[1] - 1) * strides.seq + (extent[2] - 1) * strides.head +
           extent[3];
  }
};

View make_view(Layout layout, int buffer, int64_t b, int64_t s, int64_t h, int64_t dim) {
  View v;
  v.buffer = buffer;
  v.extent[0] = b, v.extent[1] = s, v.extent[2] = h, v.extent[3] = dim;
  switch (layout) {
    case Layout::contiguous:
    case Layout::packed_qkv:  // (inputs handled by the caller; O stays contiguous)
      v.strides = {s * h * dim, h * dim, dim};
      break;
    case Layout::head_major:
      v.strides = {h * s * dim, dim, s * dim};
      break;
    case Layout::padded: {  // gaps between heads, rows and batches (all multiples of 8 elements)
      const int64_t head = dim + 8, seq = h * head + 16;
      v.strides = {s * seq + 32, seq, head};
      break;
    }
  }
  return v;
}

std::string describe(const Case& c, const Shape& s) {
  std::ostringstream out;
  out << c.name << ": b=" << c.batch << " sq=" << s.seqlen_q << " sk=" << s.seqlen_k << " hq=" << c.heads_q
      << " hkv=" << c.heads_kv << " d=" << c.d << " dv=" << c.dv << (c.causal ? " causal" : "") << " "
      << to_string(c.dtype);
  return out.str();
}

}  // namespace

CheckResult check_attention(Attention& attention, Backend expected, const Case& c, const Shape& shape, uint64_t seed,
                            int timing_runs) {
  CheckResult result;
  std::ostringstream failures;
  const int64_t b = c.batch, sq = shape.seqlen_q, sk = shape.seqlen_k, hq = c.heads_q, hkv = c.heads_kv;

  // Input views and host buffers (packed: one [b, s, hq + 2 hkv, d] buffer holding q, k and v).
  View q, k, v;
  if (c.layout == Layout::packed_qkv) {
    if (sq != sk || c.d != c.dv) throw std::invalid_argument(c.name + ": packed qkv needs seqlen_q == seqlen_k and d == dv");
    const int64_t row = (hq + 2 * hkv) * c.d;
    const Strides st{sq * row, row, c.d};
    q = make_view(Layout::contiguous, 0, b, sq, hq, c.d);
    k = make_view(Layout::contiguous, 0, b, sk, hkv, c.d);
    v = make_view(Layout::contiguous, 0, b, sk, hkv, c.dv);
    q.strides = k.strides = v.strides = st;
    k.offset = hq * c.d;
    v.offset = (hq + hkv) * c.d;
  } else {
    q = make_view(c.layout, 0, b, sq, hq, c.d);
    k = make_view(c.layout, 1, b, sk, hkv, c.d);
    v = make_view(c.layout, 2, b, sk, hkv, c.dv);
  }
  const View o = make_view(c.layout, 0, b, sq, hq, c.dv);

  std::vector<std::vector<uint16_t>> host(3);
  for (const View* t : {&q, &k, &v})
    host[t->buffer].resize(std::max<size_t>(host[t->buffer].size(), static_cast<size_t>(t->end())));
  for (int i = 0; i < 3; ++i)
    if (!host[i].empty())
      host[i] = random_halves(c.dtype, host[i].size(), i == 2 || c.layout == Layout::packed_qkv ? 1.f : c.qk_range,
                              seed * 7 + i);
  std::vector<DeviceBuffer> dev;
  for (const auto& h : host) {
    dev.emplace_back(h.size() * 2);
    if (!h.empty()) dev.back().upload(h);
  }
  auto device_ptr = [&](const View& t) { return dev[t.buffer].ptr() + t.offset * 2; };

  // Outputs, poisoned; the LSE buffer has a guard tail that must stay poisoned.
  const size_t o_elems = static_cast<size_t>(o.end());
  DeviceBuffer o_dev(o_elems * 2);
  o_dev.upload(std::vector<uint16_t>(o_elems, kPoisonHalf));
  const size_t lse_elems = static_cast<size_t>(b * hq * sq), lse_guard = 64;
  DeviceBuffer lse_dev((lse_elems + lse_guard) * 4);
  lse_dev.fill_bytes(0xff);  // NaN

  AttentionParams p;
  p.q = reinterpret_cast<const void*>(device_ptr(q));
  p.k = reinterpret_cast<const void*>(device_ptr(k));
  p.v = reinterpret_cast<const void*>(device_ptr(v));
  p.o = o_dev.get();
  p.return_lse = c.lse;
  p.lse = c.lse ? static_cast<float*>(lse_dev.get()) : nullptr;
  p.batch = b;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = c.d;
  p.head_dim_v = c.dv;
  if (c.layout != Layout::contiguous) {  // contiguous goes through the all-zero default
    p.q_stride = q.strides;
    p.k_stride = k.strides;
    p.v_stride = v.strides;
    p.o_stride = o.strides;
  }
  p.dtype = c.dtype;
  p.causal = c.causal;
  p.softmax_scale = c.softmax_scale;
  p.softcap = c.softcap;
  p.window_left = c.window_left, p.window_right = c.window_right;
  std::vector<float> sinks;
  DeviceBuffer sinks_dev(c.sinks ? static_cast<size_t>(hq) * 4 : 4);
  if (c.sinks) {
    std::mt19937_64 rng(seed * 13 + 5);
    std::normal_distribution<float> around(c.sink_mean, 2.f);
    for (int64_t h = 0; h < hq; ++h) sinks.push_back(around(rng));
    sinks_dev.upload(sinks);
    p.sinks = static_cast<const float*>(sinks_dev.get());
  }

  const Backend selected = attention.plan(p).key.backend;
  if (selected != expected)
    throw std::logic_error(c.name + ": the Plan selected " + to_string(selected) + ", expected " + to_string(expected));
  attention.run(p, nullptr);
  FA4_CU(cuCtxSynchronize());
  const std::vector<uint16_t> out = o_dev.download<uint16_t>(o_elems);
  if (timing_runs > 0) {  // the same inputs and outputs again: the values written are the same
    CUevent begin = nullptr, end = nullptr;
    FA4_CU(cuEventCreate(&begin, CU_EVENT_DEFAULT));
    FA4_CU(cuEventCreate(&end, CU_EVENT_DEFAULT));
    std::vector<float> times;
    for (int i = 0; i < timing_runs; ++i) {
      FA4_CU(cuEventRecord(begin, nullptr));
      attention.run(p, nullptr);
      FA4_CU(cuEventRecord(end, nullptr));
      FA4_CU(cuEventSynchronize(end));
      float ms = 0;
      FA4_CU(cuEventElapsedTime(&ms, begin, end));
      times.push_back(ms);
    }
    detail::driver().cuEventDestroy(begin);
    detail::driver().cuEventDestroy(end);
    std::sort(times.begin(), times.end());
    result.kernel_ms = times[times.size() / 2];
  }
  const std::vector<float> lse = lse_dev.download<float>(lse_elems + lse_guard);

  RefProblem rp;
  rp.batch = b, rp.seqlen_q = sq, rp.seqlen_k = sk, rp.heads_q = hq, rp.heads_kv = hkv;
  rp.head_dim = c.d, rp.head_dim_v = c.dv, rp.dtype = c.dtype, rp.causal = c.causal;
  rp.scale = c.softmax_scale != 0 ? c.softmax_scale : 1.0f / std::sqrt(static_cast<float>(c.d));  // validate.cpp's default
  rp.q = q.strides, rp.k = k.strides, rp.v = v.strides;
  rp.softcap = c.softcap;
  rp.sinks.assign(sinks.begin(), sinks.end());
  rp.window_left = c.window_left, rp.window_right = c.window_right;  // causal is the reference's own flag
  const bool variants = c.softcap > 0 || c.sinks || c.window_left >= 0 || c.window_right >= 0;
  const bool on_cpu = rp.work() <= kCpuReferenceMaxWork;
  if (variants && !on_cpu)
    throw std::logic_error(c.name + ": variant cases need the CPU reference; make the case smaller");
  const RefResult ref = on_cpu ? reference_attention_cpu(rp, host[q.buffer].data() + q.offset,
                                                         host[k.buffer].data() + k.offset, host[v.buffer].data() + v.offset)
                               : reference_attention_gpu(rp, device_ptr(q), device_ptr(k), device_ptr(v));
  if (c.min_abs_logit > 0 && !(on_cpu && ref.max_abs_logit >= c.min_abs_logit))
    throw std::logic_error(c.name + ": the inputs did not produce extreme logits on the CPU reference");

  // Every element of O.
  const Tolerance tol = tolerance(c.dtype);
  std::vector<bool> logical(o_elems, false);
  result.o.assign(static_cast<size_t>(b * sq * hq * c.dv), 0.f);
  size_t bad = 0, nonfinite = 0;
  double max_err = 0, err2 = 0, ref2 = 0;
  std::ostringstream first_bad;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t s = 0; s < sq; ++s)
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t j = 0; j < c.dv; ++j) {
          const int64_t at = bi * o.strides.batch + s * o.strides.seq + h * o.strides.head + j;
          logical[at] = true;
          const double got = from_half(c.dtype, out[at]);
          const double want = ref.o[((bi * sq + s) * hq + h) * c.dv + j];
          result.o[((bi * sq + s) * hq + h) * c.dv + j] = static_cast<float>(got);
          if (!std::isfinite(got)) ++nonfinite;
          const double err = std::abs(got - want);
          max_err = std::isfinite(err) ? std::max(max_err, err) : max_err;
          err2 += std::isfinite(err) ? err * err : 0;
          ref2 += want * want;
          if (!(err <= tol.atol + tol.rtol * std::abs(want))) {
            if (bad++ < 5)
              first_bad << "\n  o[b=" << bi << ", s=" << s << ", h=" << h << ", j=" << j << "] = " << got
                        << ", reference " << want;
          }
        }
  const double rel_l2 = std::sqrt(err2) / std::max(std::sqrt(ref2), 1e-30);
  if (nonfinite) failures << "\n" << nonfinite << " NaN/inf in O (poison left unwritten or a NaN leak)";
  if (bad)
    failures << "\n" << bad << " of " << b * sq * hq * c.dv << " O elements out of tolerance (max error " << max_err
             << ", reference " << (on_cpu ? "CPU fp64" : "GPU fp32") << ")" << first_bad.str();
  if (!(rel_l2 <= tol.rel_l2)) failures << "\nrelative L2 error of O " << rel_l2 << " > " << tol.rel_l2;
  size_t touched = 0;
  for (size_t i = 0; i < o_elems; ++i)
    if (!logical[i] && out[i] != kPoisonHalf) ++touched;
  if (touched) failures << "\n" << touched << " elements outside O's logical extent (stride padding) were written";

  // Every LSE value, and the guard past its end.
  size_t lse_bad = 0;
  std::ostringstream lse_first;
  for (size_t i = 0; c.lse && i < lse_elems; ++i) {
    const double want = ref.lse[i], got = lse[i];
    const bool ok = std::isinf(want) ? (std::isinf(got) && got < 0)
                                     : std::abs(got - want) <= kLseAtol + kLseRtol * std::abs(want);
    if (!ok && lse_bad++ < 5) lse_first << "\n  lse[" << i << "] = " << got << ", reference " << want;
  }
  if (lse_bad) failures << "\n" << lse_bad << " LSE values out of tolerance" << lse_first.str();
  for (size_t i = c.lse ? lse_elems : 0; i < lse_elems + lse_guard; ++i)
    if (!std::isnan(lse[i])) {
      failures << "\nLSE buffer element " << i << " was written" << (c.lse ? " (past the end)" : " with return_lse off");
      break;
    }

  result.failures = failures.str();
  result.passed = result.failures.empty();
  result.max_error = max_err;
  result.rel_l2 = rel_l2;
  std::ostringstream summary;
  summary << describe(c, shape) << ": max |err| " << max_err << ", rel L2 " << rel_l2
          << (on_cpu ? " (CPU fp64 ref)" : " (GPU fp32 ref)");
  result.summary = summary.str();
  return result;
}

namespace {
std::vector<Case> both_masks(Case c) {
  std::vector<Case> out;
  for (bool causal : {false, true}) {
    c.causal = causal;
    out.push_back(c);
    out.back().name += mask_name(causal);
  }
  return out;
}
void append(std::vector<Case>& to, const std::vector<Case>& from) { to.insert(to.end(), from.begin(), from.end()); }
}  // namespace

std::vector<Case> head_dim_cases(const HeadDims& dims) {
  std::vector<Case> cases;
  for (auto [d, dv] : dims) {
    Case c;
    c.name = "bf16_" + dim_name(d, dv) + "_";
    c.d = d, c.dv = dv, c.batch = 2, c.heads_q = 4, c.heads_kv = 2;
    c.shapes = {{257, 190}, {130, 333}};
    append(cases, both_masks(c));
  }
  return cases;
}

std::vector<Case> fp16_mqa_cases(const HeadDims& dims) {
  std::vector<Case> cases;
  for (auto [d, dv] : dims) {
    Case c;
    c.name = "fp16_" + dim_name(d, dv) + "_";
    c.dtype = DType::fp16, c.d = d, c.dv = dv, c.heads_q = 4, c.heads_kv = 1;
    c.shapes = {{200, 300}, {300, 200}};
    append(cases, both_masks(c));
  }
  return cases;
}

std::vector<Case> gqa_cases(const std::vector<Heads>& heads) {
  std::vector<Case> cases;
  for (const Heads& h : heads) {
    Case c;
    c.name = std::string(h.name) + "_bf16_d128_";
    c.batch = 2, c.heads_q = h.q, c.heads_kv = h.kv;
    c.shapes = {{300, 300}, {100, 260}};
    append(cases, both_masks(c));
  }
  return cases;
}

std::vector<Case> extreme_logit_cases(const HeadDims& dims) {
  std::vector<Case> cases;
  for (auto [d, dv] : dims)
    for (DType dtype : {DType::bf16, DType::fp16}) {
      Case c;
      c.name = std::string("extreme_") + to_string(dtype) + "_" + dim_name(d, dv) + "_";
      c.d = d, c.dv = dv, c.dtype = dtype, c.heads_q = 2, c.heads_kv = 1;
      c.qk_range = 26.f;  // d products of up to 676: max |q.k| around 1e4 at d128 (8e3 at d64, 2e4 at d256)
      c.min_abs_logit = 5e3;
      c.shapes = {{300, 400}, {400, 300}};
      append(cases, both_masks(c));
    }
  return cases;
}

std::vector<Case> persistent_tile_cases(const HeadDims& dims) {
  std::vector<Case> cases;
  for (auto [d, dv] : dims)
    for (bool causal : {false, true})
      for (bool lse : {false, true})
        for (bool packed : {false, true}) {
          Case c;
          c.name = "tiles_" + dim_name(d, dv) + "_" + mask_name(causal) + (lse ? "_lse" : "") + (packed ? "_gqa4" : "_gqa3");
          c.d = d, c.dv = dv, c.causal = causal, c.lse = lse, c.batch = 2;
          c.heads_kv = 8, c.heads_q = packed ? 32 : 24;
          c.shapes = {{600, 700}, {700, 600}};
          cases.push_back(c);
        }
  return cases;
}

std::vector<Case> variant_cases(const HeadDims& dims) {
  std::vector<Case> cases;
  for (auto [d, dv] : dims)
    for (bool causal : {false, true}) {
      const std::string tail = dim_name(d, dv) + "_" + mask_name(causal);
      Case c;
      c.d = d, c.dv = dv, c.causal = causal, c.heads_q = 8, c.heads_kv = 2;
      c.shapes = {{200, 190}, {130, 333}};  // d256 at 257 x 190 is past the CPU reference's size
      c.name = "softcap_extreme_" + tail;
      c.softcap = 30.f, c.qk_range = 2.5f + 400.f / d;  // |scaled q.k| to ~50
      cases.push_back(c);
      c.softcap = 0.f, c.qk_range = 1.f;
      c.name = "sinks_dominant_" + tail;
      c.sinks = true, c.sink_mean = 12.f;
      cases.push_back(c);
      c.name = "softcap_sinks_fp16_gqa3_" + tail;
      c.dtype = DType::fp16, c.softcap = 8.f, c.sink_mean = 0.f, c.heads_q = 6, c.heads_kv = 2;
      cases.push_back(c);
      // Windows narrower than a block (skipped, interior and both edges' blocks; causal: the rows before the
      // diagonal see no key), and with every variant at once.
      c = Case{};
      c.d = d, c.dv = dv, c.causal = causal, c.heads_q = 8, c.heads_kv = 2;
      c.shapes = {{200, 190}, {130, 333}};
      c.name = "window_narrow_" + tail;
      c.window_left = 37, c.window_right = causal ? -1 : 5;
      cases.push_back(c);
      c.name = "window_softcap_sinks_" + tail;
      c.window_left = 150, c.softcap = 20.f, c.sinks = true;
      cases.push_back(c);
    }
  for (bool causal : {false, true}) {
    Case c;
    c.name = std::string("window_wide_left_d64_") + mask_name(causal);
    c.d = c.dv = 64, c.causal = causal, c.heads_q = 2, c.heads_kv = 1, c.window_left = 500;
    c.shapes = {{700, 900}, {900, 700}};
    cases.push_back(c);
    c = Case{};
    c.name = std::string("variants_persistent_d64_") + mask_name(causal);
    c.d = c.dv = 64, c.causal = causal, c.heads_q = 80, c.heads_kv = 20, c.softcap = 20.f, c.sinks = true;
    c.window_left = 40;
    c.shapes = {{250, 60}};
    cases.push_back(c);
  }
  return cases;
}

std::vector<Case> strided_layout_cases() {
  std::vector<Case> cases;
  Case c;
  c.name = "nolse_bf16_d128_causal";
  c.causal = true, c.lse = false, c.heads_q = 3, c.heads_kv = 3;
  c.shapes = {{257, 190}, {190, 257}};
  cases.push_back(c);
  c = Case{};
  c.name = "packed_qkv_bf16_d128_causal";
  c.causal = true, c.batch = 2, c.heads_q = 8, c.heads_kv = 2, c.layout = Layout::packed_qkv;
  c.shapes = {{300, 300}};
  cases.push_back(c);
  c = Case{};
  c.name = "head_major_bf16_d64_full";
  c.d = c.dv = 64, c.batch = 2, c.heads_q = 4, c.heads_kv = 2, c.layout = Layout::head_major;
  c.shapes = {{257, 190}};
  cases.push_back(c);
  c = Case{};
  c.name = "padded_fp16_d96_causal";
  c.dtype = DType::fp16, c.d = c.dv = 96, c.causal = true, c.batch = 2, c.heads_q = 6, c.heads_kv = 3;
  c.layout = Layout::padded;
  c.shapes = {{130, 333}};
  cases.push_back(c);
  return cases;
}

}  // namespace fa4::verify
