// Correctness of the portable kernel through the public API (fa4::Attention::run with Backend::portable):
// random inputs, outputs poisoned with NaN before every run, EVERY element of O (and of the LSE) compared
// with the float64 CPU reference (small problems) or the float32 GPU reference (large ones), and the
// padding around strided outputs checked untouched.
//
// Coverage: every head dim incl. (192, 128); causal and not; GQA ratios 1, 2, 4, 8 and MQA; sequence
// lengths {1, 17, 128, 1000, 4096} in every pairing (seqlen_q != seqlen_k both ways, so causal rows that
// see no key occur); logits up to |q.k| ~ 1e4 (near one-hot softmax); LSE on and off; contiguous,
// head-major, padded and packed-qkv strides; bf16 and fp16; a non-default softmax scale.
//
// Tolerance (per element, |out - ref| <= atol + rtol * |ref|, plus a relative L2 norm of the error):
//   bf16: atol = rtol = 2e-2, L2 1e-2 (P and O are rounded to 8-bit mantissas, 2^-9 relative each);
//   fp16: atol = rtol = 4e-3, L2 2e-3 (11-bit mantissas);
//   LSE (fp32): 2e-3 + 1e-4 * |ref|; -inf exactly where the row sees no key.
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <tuple>

#include "reference.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

enum class Layout { contiguous, head_major, padded, packed_qkv };

struct Shape {
  int64_t seqlen_q, seqlen_k;
};

struct Case {
  std::string name;
  DType dtype = DType::bf16;
  int d = 128, dv = 128;
  bool causal = false;
  bool lse = true;
  int64_t batch = 1, heads_q = 1, heads_kv = 1;
  std::vector<Shape> shapes;
  Layout layout = Layout::contiguous;
  float qk_range = 1.f;          // q and k uniform in [-qk_range, qk_range]; v in [-1, 1]
  float softmax_scale = 0.f;     // 0: the library default 1/sqrt(d)
  double min_abs_logit = 0;      // the case must reach at least this max |q.k| (extreme-logit cases)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // readable test listings

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

class PortableAttention : public ::testing::TestWithParam<Case> {};

void run_shape(Attention& attention, const Case& c, const Shape& shape, uint64_t seed) {
  SCOPED_TRACE(describe(c, shape));
  const int64_t b = c.batch, sq = shape.seqlen_q, sk = shape.seqlen_k, hq = c.heads_q, hkv = c.heads_kv;

  // Input views and host buffers (packed: one [b, s, hq + 2 hkv, d] buffer holding q, k and v).
  View q, k, v;
  if (c.layout == Layout::packed_qkv) {
    ASSERT_EQ(sq, sk);
    ASSERT_EQ(c.d, c.dv);
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

  ASSERT_EQ(attention.plan(p).key.backend, Backend::portable);
  attention.run(p, nullptr);
  FA4_CU(cuCtxSynchronize());
  const std::vector<uint16_t> out = o_dev.download<uint16_t>(o_elems);
  const std::vector<float> lse = lse_dev.download<float>(lse_elems + lse_guard);

  RefProblem rp;
  rp.batch = b, rp.seqlen_q = sq, rp.seqlen_k = sk, rp.heads_q = hq, rp.heads_kv = hkv;
  rp.head_dim = c.d, rp.head_dim_v = c.dv, rp.dtype = c.dtype, rp.causal = c.causal;
  rp.scale = c.softmax_scale != 0 ? c.softmax_scale : 1.0f / std::sqrt(static_cast<float>(c.d));  // validate.cpp's default
  rp.q = q.strides, rp.k = k.strides, rp.v = v.strides;
  const bool on_cpu = rp.work() <= kCpuReferenceMaxWork;
  const RefResult ref = on_cpu ? reference_attention_cpu(rp, host[q.buffer].data() + q.offset,
                                                         host[k.buffer].data() + k.offset, host[v.buffer].data() + v.offset)
                               : reference_attention_gpu(rp, device_ptr(q), device_ptr(k), device_ptr(v));
  if (c.min_abs_logit > 0) {
    ASSERT_TRUE(on_cpu) << "extreme-logit cases must be small enough for the CPU reference";
    EXPECT_GE(ref.max_abs_logit, c.min_abs_logit) << "the inputs did not produce extreme logits";
  }

  // Every element of O.
  const Tolerance tol = tolerance(c.dtype);
  std::vector<bool> logical(o_elems, false);
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
  EXPECT_EQ(nonfinite, 0u) << "NaN/inf in O (poison left unwritten or a NaN leak)";
  EXPECT_EQ(bad, 0u) << bad << " of " << b * sq * hq * c.dv << " O elements out of tolerance (max error " << max_err
                     << ", reference " << (on_cpu ? "CPU fp64" : "GPU fp32") << ")" << first_bad.str();
  EXPECT_LE(rel_l2, tol.rel_l2) << "relative L2 error of O, max element error " << max_err;
  size_t touched = 0;
  for (size_t i = 0; i < o_elems; ++i)
    if (!logical[i] && out[i] != kPoisonHalf) ++touched;
  EXPECT_EQ(touched, 0u) << "elements outside O's logical extent (stride padding) were written";

  // Every LSE value, and the guard past its end.
  size_t lse_bad = 0;
  std::ostringstream lse_first;
  for (size_t i = 0; c.lse && i < lse_elems; ++i) {
    const double want = ref.lse[i], got = lse[i];
    const bool ok = std::isinf(want) ? (std::isinf(got) && got < 0)
                                     : std::abs(got - want) <= kLseAtol + kLseRtol * std::abs(want);
    if (!ok && lse_bad++ < 5) lse_first << "\n  lse[" << i << "] = " << got << ", reference " << want;
  }
  EXPECT_EQ(lse_bad, 0u) << lse_bad << " LSE values out of tolerance" << lse_first.str();
  for (size_t i = c.lse ? lse_elems : 0; i < lse_elems + lse_guard; ++i)
    if (!std::isnan(lse[i])) {
      ADD_FAILURE() << "LSE buffer element " << i << " was written" << (c.lse ? " (past the end)" : " with return_lse off");
      break;
    }

  std::cout << "[portable] " << describe(c, shape) << ": max |err| " << max_err << ", rel L2 " << rel_l2
            << (on_cpu ? " (CPU fp64 ref)" : " (GPU fp32 ref)") << "\n";
}

TEST_P(PortableAttention, MatchesReferenceOnEveryElement) {
  FA4_REQUIRE_GPU();
  PrimaryContext context;
  Options options = Options::from_env();
  options.backend = Backend::portable;
  Attention attention(options);
  const Case& c = GetParam();
  uint64_t seed = std::hash<std::string>{}(c.name);
  for (const Shape& shape : c.shapes) run_shape(attention, c, shape, ++seed);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const std::pair<int, int> dims[] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}};
  auto dim_name = [](int d, int dv) { return "d" + std::to_string(d) + (d != dv ? "_dv" + std::to_string(dv) : ""); };
  auto mask_name = [](bool causal) { return causal ? std::string("causal") : std::string("full"); };

  // Every head dim, bf16, GQA 2, tails on both sides, seqlen_q > seqlen_k and <.
  for (auto [d, dv] : dims)
    for (bool causal : {false, true}) {
      Case c;
      c.name = "bf16_" + dim_name(d, dv) + "_" + mask_name(causal);
      c.d = d, c.dv = dv, c.causal = causal, c.batch = 2, c.heads_q = 4, c.heads_kv = 2;
      c.shapes = {{257, 190}, {130, 333}};
      cases.push_back(c);
    }
  // fp16 (MQA).
  for (auto [d, dv] : {std::pair{64, 64}, {128, 128}, {256, 256}, {192, 128}})
    for (bool causal : {false, true}) {
      Case c;
      c.name = "fp16_" + dim_name(d, dv) + "_" + mask_name(causal);
      c.dtype = DType::fp16, c.d = d, c.dv = dv, c.causal = causal, c.heads_q = 4, c.heads_kv = 1;
      c.shapes = {{200, 300}, {300, 200}};
      cases.push_back(c);
    }
  // GQA ratios 1, 2, 4, 8 and MQA.
  struct Heads {
    const char* name;
    int64_t q, kv;
  };
  for (Heads h : {Heads{"gqa1", 8, 8}, {"gqa2", 8, 4}, {"gqa4", 8, 2}, {"gqa8", 16, 2}, {"mqa", 8, 1}})
    for (bool causal : {false, true}) {
      Case c;
      c.name = std::string(h.name) + "_bf16_d128_" + mask_name(causal);
      c.causal = causal, c.batch = 2, c.heads_q = h.q, c.heads_kv = h.kv;
      c.shapes = {{300, 300}, {100, 260}};
      cases.push_back(c);
    }
  // Sequence lengths, every pairing (the large ones use the GPU reference).
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      Case c;
      c.name = "seqlens_bf16_d" + std::to_string(d) + "_" + mask_name(causal);
      c.d = c.dv = d, c.causal = causal, c.heads_q = 4, c.heads_kv = 2;
      for (int64_t sq : {1, 17, 128, 1000, 4096})
        for (int64_t sk : {1, 17, 128, 1000, 4096}) c.shapes.push_back({sq, sk});
      cases.push_back(c);
    }
  // Large GQA problem, batch 2 (GPU reference).
  {
    Case c;
    c.name = "large_gqa4_bf16_d128_causal";
    c.causal = true, c.batch = 2, c.heads_q = 16, c.heads_kv = 4;
    c.shapes = {{2048, 2048}, {1500, 3000}};
    cases.push_back(c);
  }
  // Extreme logits: |q.k| ~ 1e4, softmax close to one-hot; must stay finite and correct.
  for (DType dtype : {DType::bf16, DType::fp16})
    for (bool causal : {false, true}) {
      Case c;
      c.name = std::string("extreme_") + to_string(dtype) + "_d128_" + mask_name(causal);
      c.dtype = dtype, c.causal = causal, c.heads_q = 2, c.heads_kv = 1;
      c.qk_range = 26.f;  // 128 products of up to 676: max |q.k| around 1e4
      c.min_abs_logit = 5e3;
      c.shapes = {{300, 400}, {400, 300}};
      cases.push_back(c);
    }
  // LSE off (the kernels without the LSE store).
  for (auto [dtype, d, causal] : {std::tuple{DType::bf16, 128, false}, {DType::bf16, 128, true}, {DType::fp16, 64, false}}) {
    Case c;
    c.name = std::string("nolse_") + to_string(dtype) + "_d" + std::to_string(d) + "_" + mask_name(causal);
    c.dtype = dtype, c.d = c.dv = d, c.causal = causal, c.lse = false, c.heads_q = 3, c.heads_kv = 3;
    c.shapes = {{257, 190}, {190, 257}};
    cases.push_back(c);
  }
  // Strides.
  {
    Case c;
    c.name = "packed_qkv_bf16_d128_causal";
    c.causal = true, c.batch = 2, c.heads_q = 8, c.heads_kv = 2, c.layout = Layout::packed_qkv;
    c.shapes = {{300, 300}, {33, 33}};
    cases.push_back(c);
    c = Case{};
    c.name = "packed_qkv_fp16_d64_full";
    c.dtype = DType::fp16, c.d = c.dv = 64, c.heads_q = 4, c.heads_kv = 4, c.layout = Layout::packed_qkv;
    c.shapes = {{200, 200}};
    cases.push_back(c);
    c = Case{};
    c.name = "head_major_bf16_d128_full";
    c.batch = 2, c.heads_q = 4, c.heads_kv = 2, c.layout = Layout::head_major;
    c.shapes = {{257, 190}};
    cases.push_back(c);
    c = Case{};
    c.name = "padded_bf16_d96_causal";
    c.d = c.dv = 96, c.causal = true, c.batch = 2, c.heads_q = 6, c.heads_kv = 3, c.layout = Layout::padded;
    c.shapes = {{130, 333}, {333, 130}};
    cases.push_back(c);
    c = Case{};
    c.name = "padded_fp16_d192_dv128_full";
    c.dtype = DType::fp16, c.d = 192, c.dv = 128, c.batch = 2, c.heads_q = 2, c.heads_kv = 1, c.layout = Layout::padded;
    c.shapes = {{200, 150}};
    cases.push_back(c);
  }
  // A non-default softmax scale (large, so the lazy-rescale threshold is crossed often).
  {
    Case c;
    c.name = "scale2_bf16_d64_full";
    c.d = c.dv = 64, c.heads_q = 2, c.heads_kv = 2, c.softmax_scale = 2.f;
    c.shapes = {{300, 500}};
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, PortableAttention, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace fa4::test
