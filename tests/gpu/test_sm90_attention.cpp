// The Hopper kernel (Backend::sm90: TMA, wgmma, a producer warpgroup and two consumer warpgroups, three at
// d64) on the H200, through the public API. Random inputs, outputs poisoned before every run, EVERY element of O and
// of the LSE compared with the float64 CPU reference (small problems) or the float32 GPU reference (large
// ones), the padding around strided outputs checked untouched (verify/attention_check.hpp).
//
// Coverage: every head dim it takes, (64,64), (96,96), (128,128), (192,128), (256,256); bf16 and fp16; GQA
// ratios 1, 3 (does not divide the 128-row tile: one q head per tile), 4, 8 and MQA (packed tiles), and at
// d64 (192-row tiles) 3, 6 and 24 packed, 5 not, and at d256 (O stored a warpgroup at a time) 8, 32 and 64; sequence
// lengths with tails and seqlen_q != seqlen_k both ways (causal rows that see no key); near one-hot softmax
// (many max changes) with two and three consumer warpgroups; LSE on and off; strided layouts; persistent grids with more tiles than SMs, where
// barrier phases and the Q/O buffers carry from tile to tile.
#include <tuple>

#include "verify/attention_check.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

Options sm90_options() {
  Options o = Options::from_env();
  o.backend = Backend::sm90;
  o.self_check = false;  // a wrong result must fail here, not fall back
  return o;
}

std::vector<Case> sm90_cases() {
  std::vector<Case> cases = head_dim_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});
  for (const auto& family : {fp16_mqa_cases({{64, 64}, {128, 128}, {192, 128}, {256, 256}}),
                             gqa_cases({{"gqa1", 4, 4}, {"gqa3", 6, 2}, {"gqa4", 8, 2}, {"gqa8", 16, 2}, {"mqa", 8, 1}}),
                             extreme_logit_cases({{64, 64}, {128, 128}, {256, 256}})})
    cases.insert(cases.end(), family.begin(), family.end());
  for (auto [q, kv] : {std::pair{6, 2}, {10, 2}, {12, 2}, {24, 1}})  // three consumer warpgroups' tiles, packed or not
    for (bool causal : {false, true}) {
      Case c;
      c.name = "gqa" + std::to_string(q / kv) + "_bf16_d64_" + mask_name(causal);
      c.d = c.dv = 64, c.causal = causal, c.batch = 2, c.heads_q = q, c.heads_kv = kv;
      c.shapes = {{300, 300}, {100, 260}, {700, 130}};
      cases.push_back(c);
    }
  for (auto [q, kv] : {std::pair{16, 2}, {32, 1}, {64, 1}})  // d256 stores O a warpgroup at a time: whole tokens
    for (bool causal : {false, true}) {                      // of 8, 32 and 64 q heads in each 64 rows
      Case c;
      c.name = "gqa" + std::to_string(q / kv) + "_bf16_d256_" + mask_name(causal);
      c.d = c.dv = 256, c.causal = causal, c.batch = 2, c.heads_q = q, c.heads_kv = kv;
      c.shapes = {{100, 260}, {67, 130}};
      cases.push_back(c);
    }
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      Case c;
      c.name = "seqlens_bf16_d" + std::to_string(d) + "_" + mask_name(causal);
      c.d = c.dv = d, c.causal = causal, c.heads_q = 2, c.heads_kv = 1;
      c.shapes = {{1, 1}, {1, 17}, {17, 1}, {128, 128}, {17, 1000}, {1000, 17}, {1000, 1000}, {4096, 4096}, {129, 4096}};
      cases.push_back(c);
    }
  const std::vector<Case> layouts = strided_layout_cases();
  cases.insert(cases.end(), layouts.begin(), layouts.end());
  // Variants (issue 11), every head dim, and on a persistent grid.
  const std::vector<Case> variants = variant_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});
  cases.insert(cases.end(), variants.begin(), variants.end());
  return cases;
}

// Every configuration (head dims x causal x LSE x packed or not) on problems with more tiles than the H200
// has SMs (each persistent CTA walks several tiles), with tails on both sequence lengths.
std::vector<Case> tile_cases() {
  std::vector<Case> cases = persistent_tile_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});
  Case c;  // long rows: many blocks per tile, both ring stages reused many times
  c.name = "long_bf16_d128_causal";
  c.causal = true, c.batch = 1, c.heads_q = 16, c.heads_kv = 4;
  c.shapes = {{4096, 8192}};
  cases.push_back(c);
  // Every SM busy with several tiles of long rows, non-causal: the steady state under load, where a register
  // operand rewritten while its wgmma is still in flight shows (a P packed before its PV had completed passed
  // every case above; the benchmark's rows of this size came out wrong).
  for (int d : {64, 128}) {
    Case full;
    full.name = "loaded_bf16_d" + std::to_string(d) + "_full";
    full.d = full.dv = d, full.batch = 2, full.heads_q = full.heads_kv = 16;
    full.shapes = {{2048, 2048}};
    cases.push_back(full);
  }
  return cases;
}

class Sm90Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90Attention, MatchesReferenceOnEveryElement) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  Attention attention(sm90_options());
  expect_case_passes(attention, Backend::sm90, GetParam(), "sm90");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Cases, Sm90Attention, ::testing::ValuesIn(sm90_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Tiles, Sm90Attention, ::testing::ValuesIn(tile_cases()), case_name);

// Automatic selection on Hopper, with the first-use self-check on (as engines run it): the sm90 kernel for
// what it takes (so it passed its self-check against the portable kernel, causal included), the portable
// kernel for the rest.
TEST(Sm90Selection, AutomaticBackendOnHopper) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  Options o = Options::from_env();
  o.backend = Backend::automatic;
  o.self_check = true;
  Attention attention(o);
  for (bool causal : {false, true}) {
    Case c;
    c.name = std::string("auto_") + mask_name(causal);
    c.causal = causal, c.heads_q = 2, c.heads_kv = 1;
    c.shapes = {{300, 300}};
    const CheckResult r = check_attention(attention, Backend::sm90, c, c.shapes.front(), 5);
    EXPECT_TRUE(r.passed) << c.name << ": " << r.failures;
  }
  Case d32;
  d32.name = "auto_d32";
  d32.d = d32.dv = 32, d32.heads_q = 2, d32.heads_kv = 1;
  d32.shapes = {{100, 100}};
  const CheckResult r = check_attention(attention, Backend::portable, d32, d32.shapes.front(), 5);
  EXPECT_TRUE(r.passed) << r.failures;
}

// The variants through the first-use self-check (a child process compares each with the portable kernel):
// the check must build the same variant key and pass, so that engines get the sm90 kernel, not a fallback.
TEST(Sm90Selection, VariantsPassTheirSelfCheck) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  TempDir cache;  // no verdict remembered from an earlier run
  Options o = Options::from_env();
  o.backend = Backend::automatic;
  o.self_check = true;
  if (!o.cache_dir.empty()) o.cache_bundles = {o.cache_dir};
  o.cache_dir = cache.path();
  CapturedLog log;
  Attention attention(o);
  for (bool causal : {false, true}) {
    Case c;
    c.name = std::string("auto_softcap_sinks_") + mask_name(causal);
    c.causal = causal, c.heads_q = 8, c.heads_kv = 2, c.softcap = 15.f, c.sinks = true;
    c.shapes = {{300, 200}};
    const CheckResult r = check_attention(attention, Backend::sm90, c, c.shapes.front(), 5);
    EXPECT_TRUE(r.passed) << c.name << ": " << r.failures;
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("in a child process"), std::string::npos) << text;
  EXPECT_EQ(text.find("failed its self-check"), std::string::npos) << text;
}

}  // namespace
}  // namespace fa4::test
