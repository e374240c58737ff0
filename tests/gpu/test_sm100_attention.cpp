// The FA4 sm100 kernel on an H200: the same kernel source compiled for sm_90a, where the tcgen05 wrappers
// emulate the PTX semantics (Backend::sm100_emulated). Every element is checked against the reference
// (verify/attention_check.hpp). Each deliberate failure mode (DebugFault) must make the check FAIL;
// the first-use self-check must catch a broken kernel and fall back to the portable one.
#include <spdlog/sinks/ostream_sink.h>
#include <sys/wait.h>

#include <sstream>

#include "verify/attention_check.hpp"
#include "base/log.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

Options emulated(bool self_check = false, DebugFault fault = DebugFault::none) {
  Options o = Options::from_env();
  o.backend = Backend::sm100_emulated;
  o.self_check = self_check;
  o.debug_fault = fault;
  return o;
}

std::vector<Case> emulated_cases() {
  std::vector<Case> cases;
  // Every head dim (GQA 2, packed), fp16 with MQA, GQA ratios 1, 4, 8, MQA (packed tiles) and 3 (does not
  // divide 128: explicit head mapping, no packing), extreme logits (many lazy rescales).
  cases = head_dim_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}});
  for (const auto& family : {fp16_mqa_cases({{64, 64}, {128, 128}, {192, 128}}),
                             gqa_cases({{"gqa1", 4, 4}, {"gqa3", 6, 2}, {"gqa4", 8, 2}, {"gqa8", 16, 2}, {"mqa", 8, 1}}),
                             extreme_logit_cases()})
    cases.insert(cases.end(), family.begin(), family.end());
  // Sequence lengths with tails and seqlen_q != seqlen_k (causal rows that see no key: sq > sk).
  for (bool causal : {false, true}) {
    Case c;
    c.name = "seqlens_bf16_d128_" + mask_name(causal);
    c.causal = causal, c.heads_q = 2, c.heads_kv = 1;
    c.shapes = {{1, 1}, {1, 17}, {17, 1}, {128, 128}, {17, 1000}, {1000, 17}, {1000, 1000}, {4096, 4096}, {129, 4096}};
    cases.push_back(c);
  }
  // More tiles than SMs: persistent CTAs walk several tiles (barrier phases carry across tiles).
  {
    Case c;
    c.name = "persistent_bf16_d64_full";
    c.d = c.dv = 64, c.batch = 4, c.heads_q = 16, c.heads_kv = 16;
    c.shapes = {{700, 700}};
    cases.push_back(c);
  }
  // LSE off; strided layouts.
  {
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
  }
  return cases;
}

class Sm100Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Sm100Attention, EmulatedKernelMatchesReferenceOnEveryElement) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  Attention attention(emulated());
  expect_case_passes(attention, Backend::sm100_emulated, GetParam(), "sm100-emulated");
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm100Attention, ::testing::ValuesIn(emulated_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---- failure modes: each deliberate defect must make the emulated check fail ----------------------------
constexpr int kExitWrongResult = 3, kExitCudaError = 4;

// Runs in the death-test child: a fresh process, so a trap cannot take the parent's context with it.
[[noreturn]] void run_with_fault(DebugFault fault, const Case& c) {
  try {
    PrimaryContext context;
    Attention attention(emulated(false, fault));
    const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 11);
    std::fprintf(stderr, "%s: %s%s\n", to_string(fault), r.summary.c_str(), r.failures.substr(0, 600).c_str());
    std::exit(r.passed ? 0 : kExitWrongResult);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", to_string(fault), e.what());
    std::exit(e.code() == ErrorCode::cuda_error ? kExitCudaError : 1);
  }
}

Case fault_case(DebugFault fault) {
  Case c;
  c.name = std::string("fault_") + to_string(fault);
  c.batch = 1, c.heads_q = 8, c.heads_kv = 2;  // GQA 4: a wrong head mapping reads another kv head
  c.shapes = {{300, 520}};
  if (fault == DebugFault::skip_rescale) {  // rescaling happens only when the running max jumps
    c.heads_q = 2, c.heads_kv = 1, c.qk_range = 26.f;
  }
  return c;
}

class Sm100FaultDeathTest : public ::testing::TestWithParam<DebugFault> {};

TEST_P(Sm100FaultDeathTest, EmulatedCheckFailsWhenTheDefectIsCompiledIn) {
  FA4_REQUIRE_SM90();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const DebugFault fault = GetParam();
  // A TMEM reuse race may trap in the emulator (tcgen05.st into a pending MMA's region) or give wrong
  // numbers, depending on timing; the other defects must give wrong numbers.
  auto caught = [fault](int status) {
    if (!WIFEXITED(status)) return false;
    const int code = WEXITSTATUS(status);
    return code == kExitWrongResult || (fault == DebugFault::tmem_reuse_race && code == kExitCudaError);
  };
  EXPECT_EXIT(run_with_fault(fault, fault_case(fault)), caught, "") << "the defect " << to_string(fault) << " went unnoticed";
}

INSTANTIATE_TEST_SUITE_P(Faults, Sm100FaultDeathTest,
                         ::testing::Values(DebugFault::skip_rescale, DebugFault::early_normalize,
                                           DebugFault::tmem_reuse_race, DebugFault::wrong_gqa_map),
                         [](const ::testing::TestParamInfo<DebugFault>& info) { return std::string(to_string(info.param)); });

// The normal build passes the very case each defect fails.
TEST(Sm100Fault, NormalBuildPassesTheFaultCases) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  Attention attention(emulated());
  for (DebugFault f : {DebugFault::skip_rescale, DebugFault::wrong_gqa_map}) {
    const Case c = fault_case(f);
    const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 11);
    EXPECT_TRUE(r.passed) << r.summary << r.failures;
  }
}

// ---- selection and the first-use self-check -------------------------------------------------------------
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) { detail::log().sinks().push_back(sink_); }
  ~CapturedLog() {
    auto& sinks = detail::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST(Sm100Selection, AutomaticBackendOnHopperIsPortable) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  Options o = Options::from_env();
  o.backend = Backend::automatic;
  Attention attention(o);
  Case c;
  c.name = "auto";
  c.heads_q = 2, c.heads_kv = 1;
  c.shapes = {{100, 100}};
  const CheckResult r = check_attention(attention, Backend::portable, c, c.shapes.front(), 5);
  EXPECT_TRUE(r.passed) << r.failures;
}

TEST(Sm100Selection, SelfCheckPassesForTheCorrectKernel) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  CapturedLog log;
  Attention attention(emulated(/*self_check=*/true));
  Case c = fault_case(DebugFault::early_normalize);
  const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 6);
  EXPECT_TRUE(r.passed) << r.failures;
  EXPECT_EQ(log.text().find("self-check"), std::string::npos) << log.text();
}

TEST(Sm100Selection, SelfCheckCatchesABrokenKernelAndFallsBackLoudly) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  CapturedLog log;
  Attention attention(emulated(/*self_check=*/true, DebugFault::early_normalize));
  Case c = fault_case(DebugFault::early_normalize);
  const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 7);
  EXPECT_TRUE(r.passed) << "after the failed self-check the portable kernel must serve: " << r.failures;
  EXPECT_NE(log.text().find("self-check of sm100_emulated"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("FAILED"), std::string::npos) << log.text();
}

}  // namespace
}  // namespace fa4::test
