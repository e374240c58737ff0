// The first-use self-check on an H200, with the sm100 kernel emulated: it runs in a child process, so a
// kernel that traps, deadlocks or never ends cannot take the engine down. After each, the configuration
// runs on the portable kernel with correct results and the caller's context still works (a portable run
// checked element by element in the same context). Verdicts are remembered on disk by device and cubin.
#include "test_util.hpp"

namespace fa4::test {
namespace {

// Emulated sm100 with the self-check on, a fault compiled in, and a cache of its own (so that no verdict
// from an earlier run is remembered) that finds the compiled kernels in the shared test cache.
struct CheckedEngine {
  TempDir cache;
  Options options = Options::from_env();
  CheckedEngine(DebugFault fault, int timeout_ms) {
    options.backend = Backend::sm100_emulated;
    options.self_check = true;
    options.debug_fault = fault;
    options.self_check_timeout_ms = timeout_ms;
    if (!options.cache_dir.empty()) options.cache_bundles = {options.cache_dir};
    options.cache_dir = cache.path();
  }
};

Case small_case() {
  Case c;
  c.name = "self_check";
  c.batch = 1, c.heads_q = 8, c.heads_kv = 2;
  c.shapes = {{300, 520}};
  return c;
}

// The caller's context after a child's failure: a portable run, every element checked.
void expect_context_works() {
  Options o = Options::from_env();
  o.backend = Backend::portable;
  Attention portable(o);
  const Case c = small_case();
  const CheckResult r = check_attention(portable, Backend::portable, c, c.shapes.front(), 99);
  EXPECT_TRUE(r.passed) << "the engine's context no longer works: " << r.failures;
}

// Runs the case on an engine whose self-check must fail with `why`; the portable kernel serves instead.
void expect_fallback(DebugFault fault, int timeout_ms, const std::string& why) {
  PrimaryContext context;
  CapturedLog log;
  CheckedEngine engine(fault, timeout_ms);
  Attention attention(engine.options);
  const Case c = small_case();
  const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 7);
  EXPECT_TRUE(r.passed) << "after the failed self-check the portable kernel must serve: " << r.failures;
  const std::string text = log.text();
  EXPECT_NE(text.find("in a child process"), std::string::npos) << text;
  EXPECT_NE(text.find("failed its self-check"), std::string::npos) << text;
  EXPECT_NE(text.find(why), std::string::npos) << "expected '" << why << "' in:\n" << text;
  std::cout << "[self-check] " << to_string(fault) << ": " << text.substr(text.find("failed its self-check")) << "\n";
  expect_context_works();
}

TEST(SelfCheck, ACorrectKernelPassesInAChildAndTheVerdictIsRememberedOnDisk) {
  FA4_REQUIRE_SM90();
  PrimaryContext context;
  CheckedEngine engine(DebugFault::none, 120000);
  const Case c = small_case();
  {
    CapturedLog log;
    Attention attention(engine.options);
    const CheckResult r = check_attention(attention, Backend::sm100_emulated, c, c.shapes.front(), 3);
    EXPECT_TRUE(r.passed) << r.failures;
    EXPECT_NE(log.text().find("in a child process"), std::string::npos) << log.text();
    EXPECT_EQ(log.text().find("failed its self-check"), std::string::npos) << log.text();
  }
  {
    CapturedLog log;
    Attention again(engine.options);  // a new engine, as after a restart: the verdict comes from the disk
    const CheckResult r = check_attention(again, Backend::sm100_emulated, c, c.shapes.front(), 4);
    EXPECT_TRUE(r.passed) << r.failures;
    EXPECT_EQ(log.text().find("in a child process"), std::string::npos) << "the check ran again:\n" << log.text();
  }
}

TEST(SelfCheck, AWrongKernelFallsBackLoudly) {
  FA4_REQUIRE_SM90();
  expect_fallback(DebugFault::early_normalize, 120000, "outputs differ");
}

TEST(SelfCheck, ATrapInTheChildLeavesTheEngineWorking) {
  FA4_REQUIRE_SM90();
  expect_fallback(DebugFault::trap, 120000, "faulted");
}

TEST(SelfCheck, ADeadlockBecomesATrapThroughTheBoundedWaits) {
  FA4_REQUIRE_SM90();
  expect_fallback(DebugFault::hang, 120000, "faulted");
}

TEST(SelfCheck, AKernelThatNeverEndsIsKilledAtTheTimeLimit) {
  FA4_REQUIRE_SM90();
  expect_fallback(DebugFault::spin, 20000, "did not finish within 20000 ms");
}

}  // namespace
}  // namespace fa4::test
