// Correctness of the portable kernel through the public API (fa4::Attention::run with Backend::portable):
// random inputs, outputs poisoned with NaN before every run, EVERY element of O (and of the LSE) compared
// with the float64 CPU reference (small problems) or the float32 GPU reference (large ones), and the
// padding around strided outputs checked untouched.
//
// Coverage: every head dim incl. (192, 128); causal and not; GQA ratios 1, 2, 4, 8 and MQA; sequence
// lengths {1, 17, 128, 1000, 4096} in every pairing (seqlen_q != seqlen_k both ways, so causal rows that
// see no key occur); logits up to |q.k| ~ 1e4 (near one-hot softmax); LSE on and off; contiguous,
// head-major, padded and packed-qkv strides; bf16 and fp16; a non-default softmax scale.
// Tolerances: verify/attention_check.hpp (why: docs/correctness.md).
#include <tuple>

#include "verify/attention_check.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

class PortableAttention : public ::testing::TestWithParam<Case> {};

TEST_P(PortableAttention, MatchesReferenceOnEveryElement) {
  FA4_REQUIRE_GPU();
  PrimaryContext context;
  Options options = Options::from_env();
  options.backend = Backend::portable;
  Attention attention(options);
  expect_case_passes(attention, Backend::portable, GetParam(), "portable");
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  // Every head dim (GQA 2), fp16 with MQA, GQA ratios 1, 2, 4, 8 and MQA.
  cases = head_dim_cases({{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}});
  for (const auto& family : {fp16_mqa_cases({{64, 64}, {128, 128}, {256, 256}, {192, 128}}),
                             gqa_cases({{"gqa1", 8, 8}, {"gqa2", 8, 4}, {"gqa4", 8, 2}, {"gqa8", 16, 2}, {"mqa", 8, 1}}),
                             extreme_logit_cases()})
    cases.insert(cases.end(), family.begin(), family.end());
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
