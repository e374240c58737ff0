// The first-use self-check without a GPU: its problem reaches the paths it must (more work tiles than the
// device runs at once, tails, rows that see no key) and selects exactly the key under test; the parent side
// of the child protocol classifies what a child does (passes, fails, faults, crashes, hangs) and never hangs
// or throws itself. The GPU side (a trapping or hanging kernel in the child, the engine's context intact)
// is in tests/gpu/test_self_check.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/backend.hpp"
#include "runtime/launch.hpp"
#include "runtime/self_check.hpp"
#include "test_util.hpp"

namespace fa4 {
namespace {

// The fast kernels' keys (every configuration, GQA packed or not, with and without each variant, dense and,
// where the backend takes them, ragged and paged).
std::vector<KernelKey> fast_kernel_keys() {
  std::vector<KernelKey> keys;
  for (Backend b : {Backend::sm100, Backend::sm100_emulated, Backend::sm90})
    for (int qh : {1, 3, 4, 8, 16})
      for (const KernelConfig& c : supported_configs(b, b == Backend::sm100 ? 100 : 90))
        for (int variant = 0; variant < 32; ++variant) {
          KernelConfig g = c;
          g.q_heads_per_kv = qh;
          g.softcap = variant & 1, g.sinks = variant & 2, g.window = variant & 4, g.varlen = variant & 8;
          g.paged = variant & 16;
          const KernelKey key = detail::key_for_config(g, g.arch);
          if (detail::supports(key, nullptr)) keys.push_back(key);
        }
  return keys;
}

TEST(SelfCheck, ProblemCoversPersistentGridsTailsAndEmptyRowsAndSelectsTheKey) {
  for (int sm_count : {132, 148}) {
    for (const KernelKey& key : fast_kernel_keys()) {
      SCOPED_TRACE(key.name() + " on " + std::to_string(sm_count) + " SMs");
      detail::SelfCheckArrays arrays;
      AttentionParams p = detail::self_check_problem(key, sm_count, &arrays);
      if (key.sinks) p.sinks = reinterpret_cast<const float*>(0xb00000000);  // the caller's device logits
      if (key.varlen) {  // the caller's device arrays: two sequences of other lengths, within the maxima
        ASSERT_EQ(arrays.cu_seqlens_q.size(), 3u);
        ASSERT_EQ(arrays.seqused_k.size(), 2u);
        EXPECT_EQ(arrays.cu_seqlens_q[2], p.total_q);
        for (int i = 0; i < 2; ++i) {
          EXPECT_LE(arrays.cu_seqlens_q[i + 1] - arrays.cu_seqlens_q[i], p.seqlen_q);
          EXPECT_LE(arrays.seqused_k[i], p.seqlen_k);
          EXPECT_GT(arrays.cu_seqlens_q[i + 1] - arrays.cu_seqlens_q[i], kDecodeMaxRows) << "no sequence is decode-sized";
          if (!key.paged)  // ragged K/V with unused rows after each sequence's keys
            EXPECT_GT(arrays.cu_seqlens_k[i + 1] - arrays.cu_seqlens_k[i], arrays.seqused_k[i]);
        }
        if (!key.paged) EXPECT_EQ(arrays.cu_seqlens_k[2], p.total_k);
        p.cu_seqlens_q = reinterpret_cast<const int32_t*>(0xc00000000);
        p.seqused_k = reinterpret_cast<const int32_t*>(0xd00000000);
        if (!key.paged) p.cu_seqlens_k = reinterpret_cast<const int32_t*>(0xf00000000);
      }
      if (key.paged) {  // every page once, shuffled, smaller than a key block
        ASSERT_EQ(arrays.page_table.size(), static_cast<size_t>(p.batch * p.max_pages_per_seq));
        std::vector<int32_t> sorted = arrays.page_table;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
        EXPECT_GE(sorted.front(), 0);
        EXPECT_LT(sorted.back(), p.num_pages);
        EXPECT_NE(arrays.page_table, sorted) << "shuffled";
        p.page_table = reinterpret_cast<const int32_t*>(0xe00000000);
      }
      p.q = p.k = p.v = reinterpret_cast<const void*>(0x10000000);
      p.o = reinterpret_cast<void*>(0x900000000);
      p.lse = p.return_lse ? reinterpret_cast<float*>(0xa00000000) : nullptr;
      const detail::Problem problem = detail::validate(p);
      KernelConfig c = detail::config_of(problem, key.backend, key.arch);
      EXPECT_EQ(detail::key_for_config(c, key.backend == Backend::sm100 ? 100 : 90), key) << "the check must run this very kernel";
      const Plan plan = detail::make_plan(key);
      fa4k::AttentionArgs args{};
      detail::fill_schedule(plan, problem, args);
      EXPECT_GT(args.total_tiles, 2 * sm_count) << "persistent CTAs must walk several tiles";
      EXPECT_NE(p.seqlen_q % plan.tile_m, 0) << "a row tail";
      EXPECT_NE(p.seqlen_k % plan.tile_n, 0) << "a key tail";
      if (key.causal) EXPECT_GT(p.seqlen_q, p.seqlen_k) << "causal: the first rows see no key";
    }
  }
}

// A stand-in for fa4rt-selfcheck: a shell script that behaves as told.
struct FakeHelper {
  test::TempDir dir;
  std::string path = dir.path() + "/fake-selfcheck";
  explicit FakeHelper(const std::string& body) {
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
  }
};

detail::SelfCheckVerdict run(const FakeHelper& helper, int timeout_ms = 10000) {
  detail::SelfCheckRequest r;
  r.config.backend = Backend::sm100_emulated;
  r.expected_key = "sm100_emulated_sm90a_bf16_d128";
  r.device = "0000:00:00.0";
  r.options.disk_cache = false;
  r.options.self_check_timeout_ms = timeout_ms;
  r.helper = helper.path;
  return detail::self_check_in_child(r);
}

TEST(SelfCheck, ChildProtocolPassesOnlyOnPass) {
  EXPECT_TRUE(run(FakeHelper("echo noise; echo 'PASS it agrees'; exit 0")).passed);
  const detail::SelfCheckVerdict mismatch = run(FakeHelper("echo 'FAIL 12 of 100 outputs differ'; exit 1"));
  EXPECT_FALSE(mismatch.passed);
  EXPECT_NE(mismatch.detail.find("12 of 100"), std::string::npos) << mismatch.detail;
  EXPECT_FALSE(run(FakeHelper("echo PASS; exit 4")).passed) << "a PASS line with a failing status is not a pass";
  EXPECT_FALSE(run(FakeHelper("exit 0")).passed) << "silence is not a pass";
}

TEST(SelfCheck, ChildFaultsCrashesAndMissingHelpersAreFailedVerdicts) {
  const detail::SelfCheckVerdict trapped = run(FakeHelper("echo 'FAIL cuda_error: cuStreamSynchronize: CUDA_ERROR_LAUNCH_FAILED'; exit 3"));
  EXPECT_FALSE(trapped.passed);
  EXPECT_NE(trapped.detail.find("faulted"), std::string::npos) << trapped.detail;
  const detail::SelfCheckVerdict crashed = run(FakeHelper("kill -SEGV $$"));
  EXPECT_FALSE(crashed.passed);
  EXPECT_NE(crashed.detail.find("signal 11"), std::string::npos) << crashed.detail;
  detail::SelfCheckRequest r;
  r.helper = "/nonexistent/fa4rt-selfcheck";
  r.options.self_check_timeout_ms = 5000;
  const detail::SelfCheckVerdict missing = detail::self_check_in_child(r);
  EXPECT_FALSE(missing.passed);
}

// Within 2 s the process is gone or a zombie (killed, waiting for its new parent to reap it).
bool gone(int pid) {
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, name, state;
    if (!(stat >> pid_field >> name >> state) || state == "Z") return true;
    ::usleep(20000);
  }
  return false;
}

TEST(SelfCheck, AHangingChildIsKilledAtTheTimeLimitWithWhatItStartedTooAndNothingHangs) {
  test::TempDir marker;
  const std::string pid_file = marker.path() + "/grandchild.pid";
  // The child starts a grandchild of its own and then hangs; both must be gone after the verdict.
  const FakeHelper helper("sleep 300 & echo $! > " + pid_file + "; echo started; sleep 300");
  const auto start = std::chrono::steady_clock::now();
  const detail::SelfCheckVerdict v = run(helper, 700);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("did not finish within 700 ms"), std::string::npos) << v.detail;
  EXPECT_NE(v.detail.find("started"), std::string::npos) << "the verdict carries what the child last said: " << v.detail;
  EXPECT_LT(seconds, 5.0);
  int grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(gone(grandchild)) << "the grandchild " << grandchild << " was not killed with the child";
}

TEST(SelfCheck, TheHelperIsFoundThroughTheOptionsOrBesideTheBinary) {
  Options o;
  o.self_check_helper = "/some/where/fa4rt-selfcheck";
  EXPECT_EQ(detail::find_self_check_helper(o), "/some/where/fa4rt-selfcheck");
  // This test binary lives in build/tests/, the helper in build/: not beside it, so the search finds none
  // or the one ../libexec/fa4rt/ would hold; never something else.
  const std::string found = detail::find_self_check_helper(Options{});
  EXPECT_TRUE(found.empty() || found.find("fa4rt-selfcheck") != std::string::npos) << found;
}

}  // namespace
}  // namespace fa4
