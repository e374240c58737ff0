// Attention::prewarm's progress callback: one call per configuration, serialised, counting up to the total,
// saying which were compiled and which failed, consistent with the returned report.
#include <gtest/gtest.h>

#include <vector>

#include "cache_fixtures.hpp"
#include "fa4/fa4.hpp"
#include "test_util.hpp"

namespace fa4 {
namespace {

struct Event {
  size_t done, total;
  const KernelConfig* config;
  bool compiled;
  bool failed;
  ErrorCode code;
};

TEST(PrewarmProgress, OneCallPerConfigurationMatchingTheReport) {
  Options o;
  o.disk_cache = false;
  o.max_compile_threads = 2;
  Attention attention(o);
  std::vector<KernelConfig> configs(3);
  for (KernelConfig& c : configs) {
    c.arch = 90;
    c.backend = Backend::portable;
    c.head_dim = 64;
  }
  configs[1].causal = true;
  configs[2].arch = 100;  // no sm100 kernel for head_dim 32: fails
  configs[2].backend = Backend::sm100;
  configs[2].head_dim = 32;

  std::vector<Event> events;
  const PrewarmReport report = attention.prewarm(configs, [&](const PrewarmProgress& p) {
    events.push_back({p.done, p.total, p.config, p.compiled, p.failure != nullptr,
                      p.failure ? p.failure->code : ErrorCode::internal});
  });
  ASSERT_EQ(events.size(), 3u);
  int compiled = 0, failed = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].done, i + 1);
    EXPECT_EQ(events[i].total, 3u);
    ASSERT_TRUE(events[i].config >= configs.data() && events[i].config < configs.data() + configs.size());
    const bool bad = events[i].config == &configs[2];
    EXPECT_EQ(events[i].failed, bad);
    if (bad) EXPECT_EQ(events[i].code, ErrorCode::unsupported);
    compiled += events[i].compiled;
    failed += events[i].failed;
  }
  EXPECT_EQ(compiled, report.compiled);
  EXPECT_EQ(compiled, 2);
  EXPECT_EQ(failed, static_cast<int>(report.failures.size()));

  // Again: both come from memory now.
  events.clear();
  const PrewarmReport again = attention.prewarm({configs[0], configs[1]}, [&](const PrewarmProgress& p) {
    events.push_back({p.done, p.total, p.config, p.compiled, p.failure != nullptr, ErrorCode::internal});
  });
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[0].compiled || events[1].compiled);
  EXPECT_EQ(again.from_cache, 2);
}

// A split-KV configuration's parts are merged by the combine kernel: prewarm builds it too (into the cache,
// and into the current context when there is one), so a captured split call finds every kernel ready.
TEST(PrewarmProgress, SplitConfigurationsBuildTheirCombineKernel) {
  test::TempDir dir;
  Options o;
  o.cache_dir = dir.path();
  Attention attention(o);
  KernelConfig c;
  c.arch = 90;
  c.head_dim = 64;
  c.q_heads_per_kv = 4;
  c.decode = c.split = true;
  const PrewarmReport report = attention.prewarm({c});
  ASSERT_TRUE(report.failures.empty()) << report.failures[0].message;
  EXPECT_EQ(test::files_in(dir.path()).size(), 2u) << "the decode kernel and its combine";
  c.split = false;
  attention.prewarm({c});
  EXPECT_EQ(test::files_in(dir.path()).size(), 3u) << "an unsplit kernel brings no combine";
}

}  // namespace
}  // namespace fa4
