// The FA4 sm100 kernel on an H200: the same kernel source compiled for sm_90a, where the tcgen05 wrappers
// emulate the PTX semantics (Backend::sm100_emulated). Every element is checked against the reference
// (verify/attention_check.hpp). Each deliberate failure mode (DebugFault) must make the check FAIL;
// the first-use self-check must catch a broken kernel and fall back to the portable one.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "verify/attention_check.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

Options emulated(bool self_check = false, DebugFault fault = DebugFault::none, Emulation mode = Emulation::strict) {
  Options o = Options::from_env();
  o.backend = Backend::sm100_emulated;
  o.self_check = self_check;
  o.debug_fault = fault;
  o.emulation = mode;
  return o;
}

std::vector<Case> emulated_cases() {
  std::vector<Case> cases;
  // Every head dim (GQA 2, packed), fp16 with MQA, GQA ratios 1, 4, 8, MQA (packed tiles) and 3 (does not
  // divide 128: explicit head mapping, no packing), extreme logits (many lazy rescales).
  cases = head_dim_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});
  for (const auto& family : {fp16_mqa_cases({{64, 64}, {128, 128}, {192, 128}, {256, 256}}),
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
  const std::vector<Case> layouts = strided_layout_cases();  // LSE off; strided layouts
  cases.insert(cases.end(), layouts.begin(), layouts.end());
  const std::vector<Case> variants = variant_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});  // issue 11
  cases.insert(cases.end(), variants.begin(), variants.end());
  return cases;
}

// Every sm100 configuration (head dims x causal x LSE x GQA packed or explicit) on problems with more work
// tiles than the H200 has SMs (persistent CTAs walk several tiles, so barrier phases and buffer reuse carry
// across tiles), with tails on both sequence lengths; plus the shapes that exposed the (192, 128) defect
// (O staged over Q: the next tile's Q load landed on the other O tile).
std::vector<Case> coverage_cases() {
  std::vector<Case> cases = persistent_tile_cases({{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});
  for (auto [batch, seqlen, causal] : {std::tuple{2, 2048, false}, {4, 2048, false}, {4, 1024, true}}) {
    Case c;
    c.name = "defect1_d192_dv128_b" + std::to_string(batch) + "_s" + std::to_string(seqlen) + "_" + mask_name(causal);
    c.d = 192, c.dv = 128, c.causal = causal, c.batch = batch, c.heads_q = c.heads_kv = 16;
    c.shapes = {{seqlen, seqlen}};
    cases.push_back(c);
  }
  // dv 256, one Q tile against 64-key blocks with S double-buffered: odd and even block counts (a tile's last
  // block in either S buffer, the next tile starting in S0), a key tail inside a block, rows that see no key,
  // and more tiles than SMs, extreme logits (lazy rescales of the 256-column O) included.
  for (bool causal : {false, true}) {
    Case c;
    c.name = std::string("one_tile_d256_") + mask_name(causal);
    c.d = c.dv = 256, c.causal = causal, c.batch = 3, c.heads_q = 24, c.heads_kv = 8;
    c.shapes = {{640, 640}, {300, 193}, {129, 1}, {1, 129}};
    cases.push_back(c);
    c.name = std::string("one_tile_extreme_d256_") + mask_name(causal);
    c.batch = 1, c.heads_q = 2, c.heads_kv = 1, c.qk_range = 14.f, c.min_abs_logit = 2e3;
    c.shapes = {{260, 520}};
    cases.push_back(c);
  }
  return cases;
}

// Each case in both emulation modes: strict, and adversarial (what the PTX ISA does not promise is done
// differently: unordered MMAs reversed, tcgen05.st/ld landing at their waits, the fence discipline checked).
using ModeCase = std::tuple<Emulation, Case>;
class Sm100Attention : public ::testing::TestWithParam<ModeCase> {};

TEST_P(Sm100Attention, EmulatedKernelMatchesReferenceOnEveryElement) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  const auto& [mode, c] = GetParam();
  Attention attention(emulated(false, DebugFault::none, mode));
  expect_case_passes(attention, Backend::sm100_emulated, c, mode == Emulation::strict ? "sm100-emulated" : "sm100-adversarial");
}

std::string mode_case_name(const ::testing::TestParamInfo<ModeCase>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Cases, Sm100Attention,
                         ::testing::Combine(::testing::Values(Emulation::strict, Emulation::adversarial),
                                            ::testing::ValuesIn(emulated_cases())),
                         mode_case_name);
INSTANTIATE_TEST_SUITE_P(Coverage, Sm100Attention,
                         ::testing::Combine(::testing::Values(Emulation::strict, Emulation::adversarial),
                                            ::testing::ValuesIn(coverage_cases())),
                         mode_case_name);

// ---- failure modes: each deliberate defect must make the emulated check fail ----------------------------
constexpr int kExitWrongResult = 3, kExitCudaError = 4;

// Runs in the death-test child: a fresh process, so a trap cannot take the parent's context with it. What it
// saw goes to `report` (the parent prints it: how each defect was caught).
[[noreturn]] void run_with_fault(DebugFault fault, Emulation mode, const Case& c, const std::string& report) {
  std::ostringstream line;
  int code = 1;
  try {
    PrimaryContext context;
    Options options = emulated(false, fault, mode);
    // The reversed order (seed 0) runs each commit's PV before the QK issued ahead of it, which hides this
    // defect; a seeded order runs some of them the other way.
    if (fault == DebugFault::tmem_reuse_race) options.emulation_seed = 7;
    Attention attention(options);
    const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 11);
    line << (r.passed ? "passed: " : "wrong results: ") << r.summary << r.failures.substr(0, 300);
    code = r.passed ? 0 : kExitWrongResult;
  } catch (const Error& e) {
    line << (e.code() == ErrorCode::cuda_error ? "the kernel trapped: " : "error: ") << e.what();
    code = e.code() == ErrorCode::cuda_error ? kExitCudaError : 1;
  }
  std::string text = line.str();
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::ofstream(report) << text << "\n";
  std::exit(code);
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

// A defect, the emulation mode it runs in, and whether that mode must catch it (a wrong result, or a trap
// where the emulator sees the violation) or must pass it.
struct FaultRun {
  DebugFault fault;
  Emulation mode;
  bool caught;
};

class Sm100FaultDeathTest : public ::testing::TestWithParam<FaultRun> {};

TEST_P(Sm100FaultDeathTest, EmulatedCheckCatchesTheDefectInTheModesThatMust) {
  FA4_REQUIRE_SM90();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const FaultRun run = GetParam();
  auto outcome = [run](int status) {
    if (!WIFEXITED(status)) return false;
    const int code = WEXITSTATUS(status);
    if (!run.caught) return code == 0;
    return code == kExitWrongResult || code == kExitCudaError;
  };
  // The death test's child re-runs this body in a new process (threadsafe style): name the file after the
  // parent's pid, which the child sees as its parent's.
  const bool in_child = !GTEST_FLAG_GET(internal_run_death_test).empty();
  const std::string report = "/tmp/fa4rt-fault-report-" + std::to_string(in_child ? getppid() : getpid()) + "-" +
                             to_string(run.fault) + "-" + to_string(run.mode);
  EXPECT_EXIT(run_with_fault(run.fault, run.mode, fault_case(run.fault), report), outcome, "")
      << to_string(run.fault) << " in " << to_string(run.mode) << " emulation: "
      << (run.caught ? "went unnoticed" : "was expected to pass (the strict emulator runs in issue order)");
  std::string seen;
  std::getline(std::ifstream(report), seen);
  std::remove(report.c_str());
  std::cout << "[fault] " << to_string(run.fault) << " (" << to_string(run.mode) << "): " << seen << "\n";
}

// The arithmetic defects fail in both modes. The ordering defects rely on what the PTX ISA does not promise:
// the strict emulator (in-order MMAs, immediate tcgen05.ld/st, no fence checks) passes them, the adversarial
// one catches each.
std::vector<FaultRun> fault_runs() {
  std::vector<FaultRun> runs;
  for (DebugFault f : {DebugFault::skip_rescale, DebugFault::early_normalize, DebugFault::tmem_reuse_race,
                       DebugFault::wrong_gqa_map})
    for (Emulation m : {Emulation::strict, Emulation::adversarial}) runs.push_back({f, m, true});
  for (DebugFault f : {DebugFault::assume_mma_order, DebugFault::skip_wait_st, DebugFault::skip_wait_ld,
                       DebugFault::skip_relay_fence}) {
    runs.push_back({f, Emulation::strict, false});
    runs.push_back({f, Emulation::adversarial, true});
  }
  return runs;
}

INSTANTIATE_TEST_SUITE_P(Faults, Sm100FaultDeathTest, ::testing::ValuesIn(fault_runs()),
                         [](const ::testing::TestParamInfo<FaultRun>& info) {
                           return std::string(to_string(info.param.fault)) + "_" + to_string(info.param.mode);
                         });

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

}  // namespace
}  // namespace fa4::test
