// Runtime behaviour on a GPU: threads, prewarm, graph capture, contexts, devices, errors that write nothing.
// Correctness of the numbers is test_portable_attention.cpp's job; here every result is compared bit for
// bit with a plain single-threaded run of the same (deterministic) kernel.
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace fa4::test {
namespace {

using detail::driver;

// One problem with its device buffers, in the context current at construction.
struct Problem {
  AttentionParams params;
  DeviceBuffer q, k, v, o, lse;

  Problem(int64_t seqlen_q, int64_t seqlen_k, bool causal, uint64_t seed, DType dtype = DType::bf16) {
    params.batch = 2;
    params.seqlen_q = seqlen_q;
    params.seqlen_k = seqlen_k;
    params.heads_q = 4;
    params.heads_kv = 2;
    params.head_dim = 64;
    params.dtype = dtype;
    params.causal = causal;
    params.return_lse = true;
    const size_t nq = 2 * seqlen_q * 4 * 64, nk = 2 * seqlen_k * 2 * 64;
    q = DeviceBuffer(nq * 2);
    k = DeviceBuffer(nk * 2);
    v = DeviceBuffer(nk * 2);
    o = DeviceBuffer(nq * 2);
    lse = DeviceBuffer(2 * 4 * seqlen_q * 4);
    q.upload(random_halves(dtype, nq, 1.f, seed));
    k.upload(random_halves(dtype, nk, 1.f, seed + 1));
    v.upload(random_halves(dtype, nk, 1.f, seed + 2));
    poison();
    params.q = q.get();
    params.k = k.get();
    params.v = v.get();
    params.o = o.get();
    params.lse = static_cast<float*>(lse.get());
  }
  void poison() {
    o.fill_bytes(0xff);
    lse.fill_bytes(0xff);
  }
  std::vector<uint16_t> output() const { return o.download<uint16_t>(o.bytes() / 2); }
  std::vector<float> lse_values() const { return lse.download<float>(lse.bytes() / 4); }
};

bool all_finite(const std::vector<uint16_t>& h) {
  for (uint16_t x : h)
    if ((x & 0x7f80) == 0x7f80) return false;  // bf16 inf/NaN
  return true;
}

// Runs body(t) on `threads` host threads, each with ctx current; an exception in one is a test failure.
void run_in_threads(const PrimaryContext& ctx, int threads, const std::function<void(int)>& body) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        FA4_CU(cuCtxSetCurrent(ctx.get()));
        body(t);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
      }
    });
  for (auto& t : pool) t.join();
}

Options test_options() {
  Options o = Options::from_env();
  o.backend = Backend::portable;
  return o;
}

TEST(Runtime, RunIsDeterministicAndWritesEveryElement) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  Attention attention(test_options());
  Problem p(300, 500, true, 1);
  attention.run(p.params, nullptr);
  FA4_CU(cuCtxSynchronize());
  const auto first = p.output();
  const auto first_lse = p.lse_values();
  EXPECT_TRUE(all_finite(first));
  p.poison();
  attention.run(p.params, nullptr);
  FA4_CU(cuCtxSynchronize());
  EXPECT_EQ(p.output(), first);
  EXPECT_EQ(p.lse_values(), first_lse);
}

TEST(Runtime, InvalidInputWritesNothing) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  Attention attention(test_options());
  Problem p(64, 64, false, 2);
  const auto before = p.output();
  AttentionParams bad = p.params;
  bad.heads_kv = 3;  // 4 % 3 != 0
  EXPECT_THROW(attention.run(bad, nullptr), Error);
  bad = p.params;
  bad.o = const_cast<void*>(bad.q);
  EXPECT_THROW(attention.run(bad, nullptr), Error);
  FA4_CU(cuCtxSynchronize());
  EXPECT_EQ(p.output(), before);
}

TEST(Runtime, ManyThreadsRunAndPrewarmConcurrently) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  Attention reference_runner(test_options());
  Problem reference(200, 333, false, 3);
  reference_runner.run(reference.params, nullptr);
  FA4_CU(cuCtxSynchronize());
  const auto expected = reference.output();

  Attention attention(test_options());  // fresh: every thread races on the first use
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<Problem>> problems;
  for (int t = 0; t < kThreads; ++t) problems.push_back(std::make_unique<Problem>(200, 333, false, 3));
  run_in_threads(ctx, kThreads, [&](int t) {
    if (t % 2) {
      KernelConfig c;
      c.head_dim = 64;
      c.lse = true;
      c.q_heads_per_kv = 2;
      c.backend = Backend::portable;
      EXPECT_TRUE(attention.prewarm({c, c}).failures.empty()) << "thread " << t;
    }
    CUstream stream;
    FA4_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 5; ++i) attention.run(problems[t]->params, stream);
    FA4_CU(cuStreamSynchronize(stream));
    FA4_CU(cuStreamDestroy(stream));
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(problems[t]->output(), expected) << "thread " << t;
}

// CU_STREAM_PER_THREAD names each thread's own stream under one handle: the sm90 causal kernel's tile
// counters (its device scratch) must be each thread's own, or two threads' launches draw each other's tiles
// and leave rows of O unwritten.
TEST(Runtime, PerThreadStreamsOfSeveralThreadsKeepTheirOwnTileCounters) {
  FA4_REQUIRE_SM90();
  PrimaryContext ctx;
  Attention attention(Options::from_env());  // automatic: the sm90 kernel, causal tiles drawn from counters
  Problem reference(4096, 4096, true, 5);    // 172 work tiles: more than the SMs, so CTAs draw several
  attention.run(reference.params, nullptr);
  FA4_CU(cuCtxSynchronize());
  ASSERT_EQ(attention.plan(reference.params).key.backend, Backend::sm90);
  const auto expected = reference.output();
  const auto expected_lse = reference.lse_values();
  ASSERT_TRUE(all_finite(expected));

  constexpr int kThreads = 4, kRuns = 12;
  std::vector<std::unique_ptr<Problem>> problems;
  for (int t = 0; t < kThreads; ++t) problems.push_back(std::make_unique<Problem>(4096, 4096, true, 5));
  std::atomic<int> wrong{0};
  run_in_threads(ctx, kThreads, [&](int t) {
    Problem& p = *problems[t];
    for (int i = 0; i < kRuns; ++i) {
      p.poison();
      attention.run(p.params, CU_STREAM_PER_THREAD);
      FA4_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
      if (p.output() != expected || p.lse_values() != expected_lse) ++wrong;
    }
  });
  EXPECT_EQ(wrong, 0) << "runs (of " << kThreads * kRuns << ") whose O or LSE differ from a lone run";
}

TEST(Runtime, GraphCaptureAndReplay) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  Attention attention(test_options());
  Problem p(256, 256, true, 4);
  CUstream stream;
  FA4_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  // A miss during capture is a clear error, and the capture stays usable.
  FA4_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  try {
    attention.run(p.params, stream);
    ADD_FAILURE() << "a cache miss during capture must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::graph_capture) << e.what();
    EXPECT_NE(std::string(e.what()).find("prewarm"), std::string::npos) << e.what();
  }
  CUgraph graph = nullptr;
  FA4_CU(cuStreamEndCapture(stream, &graph));
  if (graph) FA4_CU(cuGraphDestroy(graph));

  // After prewarm the same call captures, and replays give the direct run's result.
  KernelConfig c;
  c.head_dim = 64;
  c.causal = true;
  c.lse = true;
  c.q_heads_per_kv = 2;
  c.backend = Backend::portable;
  ASSERT_TRUE(attention.prewarm({c}).failures.empty());
  attention.run(p.params, stream);
  FA4_CU(cuStreamSynchronize(stream));
  const auto expected = p.output();
  p.poison();

  FA4_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  attention.run(p.params, stream);
  FA4_CU(cuStreamEndCapture(stream, &graph));
  CUgraphExec exec = nullptr;
  FA4_CU(cuGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) {
    p.poison();
    FA4_CU(cuGraphLaunch(exec, stream));
    FA4_CU(cuStreamSynchronize(stream));
    EXPECT_EQ(p.output(), expected) << "replay " << i;
  }
  FA4_CU(cuGraphExecDestroy(exec));
  FA4_CU(cuGraphDestroy(graph));
  FA4_CU(cuStreamDestroy(stream));
}

// A launch recorded into a CUDA graph has its capture's own scratch (runtime/scratch.hpp): two graphs
// captured on one stream (in the strictest mode, global) replay at once on two streams, beside eager calls
// on the capture stream, and no launch draws another's tiles (with the capture stream's scratch they did,
// and rows of O went unwritten).
TEST(Runtime, GraphsReplayAtOnceWithTheirOwnTileCounters) {
  FA4_REQUIRE_SM90();
  PrimaryContext ctx;
  Attention attention(Options::from_env());  // automatic: the sm90 kernel, causal tiles drawn from counters
  Problem eager(4096, 4096, true, 5);        // 172 work tiles: more than the SMs, so CTAs draw several
  Streams streams(3);                        // [0] captures and runs eagerly, [1] and [2] replay
  attention.run(eager.params, streams.s[0]);
  FA4_CU(cuStreamSynchronize(streams.s[0]));
  ASSERT_EQ(attention.plan(eager.params).key.backend, Backend::sm90);
  const auto expected = eager.output();
  const auto expected_lse = eager.lse_values();
  ASSERT_TRUE(all_finite(expected));
  const auto matches = [&](const Problem& p) { return p.output() == expected && p.lse_values() == expected_lse; };

  Problem first(4096, 4096, true, 5), second(4096, 4096, true, 5);
  Graph a, b;
  capture_run(attention, first.params, streams.s[0], CU_STREAM_CAPTURE_MODE_GLOBAL, a);
  capture_run(attention, second.params, streams.s[0], CU_STREAM_CAPTURE_MODE_GLOBAL, b);
  constexpr int kRuns = 12;
  int wrong[3] = {};
  for (int i = 0; i < kRuns; ++i) {
    for (Problem* p : {&eager, &first, &second}) p->poison();
    FA4_CU(cuGraphLaunch(a.exec, streams.s[1]));
    FA4_CU(cuGraphLaunch(b.exec, streams.s[2]));
    attention.run(eager.params, streams.s[0]);
    FA4_CU(cuCtxSynchronize());
    wrong[0] += !matches(eager);
    wrong[1] += !matches(first);
    wrong[2] += !matches(second);
  }
  EXPECT_EQ(wrong[0], 0) << "eager runs (of " << kRuns << ") whose O or LSE differ from a lone run";
  EXPECT_EQ(wrong[1], 0) << "replays of the first graph (of " << kRuns << ") that differ";
  EXPECT_EQ(wrong[2], 0) << "replays of the second graph (of " << kRuns << ") that differ";
}

// A capture needs no eager run on its stream first (its scratch is its own), and graphs captured after
// others were destroyed (whose buffers the pool may hand on, still zero) replay right, again and again.
TEST(Runtime, CapturesOnAFreshStreamAndAfterDestroyedGraphs) {
  FA4_REQUIRE_SM90();
  PrimaryContext ctx;
  Attention attention(Options::from_env());
  Problem reference(1000, 3000, true, 6);
  attention.run(reference.params, nullptr);  // loads the kernel (a capture cannot), on another stream
  FA4_CU(cuCtxSynchronize());
  ASSERT_EQ(attention.plan(reference.params).key.backend, Backend::sm90);
  const auto expected = reference.output();
  ASSERT_TRUE(all_finite(expected));
  Streams streams(1);
  Problem p(1000, 3000, true, 6);
  for (int generation = 0; generation < 3; ++generation) {
    Graph g;
    capture_run(attention, p.params, streams.s[0], CU_STREAM_CAPTURE_MODE_GLOBAL, g);
    for (int i = 0; i < 3; ++i) {
      p.poison();
      FA4_CU(cuGraphLaunch(g.exec, streams.s[0]));
      FA4_CU(cuStreamSynchronize(streams.s[0]));
      EXPECT_EQ(p.output(), expected) << "graph " << generation << ", replay " << i;
    }
  }
}

TEST(Runtime, TwoContextsOnOneDevice) {
  FA4_REQUIRE_GPU();
  CUdevice dev;
  FA4_CU(cuDeviceGet(&dev, 0));
  CUcontext a = nullptr, b = nullptr;
  FA4_CU(cuCtxCreate(&a, nullptr, 0, dev));
  FA4_CU(cuCtxCreate(&b, nullptr, 0, dev));
  Attention attention(test_options());
  std::vector<uint16_t> results[2];
  CUcontext contexts[2] = {a, b};
  for (int i = 0; i < 2; ++i) {
    FA4_CU(cuCtxSetCurrent(contexts[i]));
    Problem p(130, 257, false, 5);
    attention.run(p.params, nullptr);
    FA4_CU(cuCtxSynchronize());
    results[i] = p.output();
    // A stream of the other context is rejected, naming the rule.
    FA4_CU(cuCtxSetCurrent(contexts[1 - i]));
    CUstream foreign;
    FA4_CU(cuStreamCreate(&foreign, 0));
    FA4_CU(cuCtxSetCurrent(contexts[i]));
    try {
      attention.run(p.params, foreign);
      ADD_FAILURE() << "a stream of another context must be rejected";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stream: belongs to another context"), std::string::npos) << e.what();
    }
    FA4_CU(cuStreamDestroy(foreign));
  }
  EXPECT_TRUE(all_finite(results[0]));
  EXPECT_EQ(results[0], results[1]);
  FA4_CU(cuCtxSetCurrent(nullptr));
  FA4_CU(cuCtxDestroy(a));
  FA4_CU(cuCtxDestroy(b));
}

TEST(Runtime, EveryGpuOfTheMachine) {
  FA4_REQUIRE_GPU();
  int count = 0;
  FA4_CU(cuDeviceGetCount(&count));
  if (count < 2) GTEST_SKIP() << "SKIPPED: this machine has " << count << " GPU (two needed)";
  Attention attention(test_options());
  std::vector<std::vector<uint16_t>> results;
  std::vector<std::thread> threads;
  results.resize(count);
  for (int d = 0; d < count; ++d)
    threads.emplace_back([&, d] {
      try {
        PrimaryContext ctx(d);
        Problem p(1000, 1000, true, 6);
        attention.run(p.params, nullptr);
        FA4_CU(cuCtxSynchronize());
        results[d] = p.output();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "device " << d << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(all_finite(results[0]));
  for (int d = 1; d < count; ++d) EXPECT_EQ(results[d], results[0]) << "device " << d;
}

TEST(Runtime, NoJitModeFailsClearlyOnAMiss) {
  FA4_REQUIRE_GPU();
  PrimaryContext ctx;
  TempDir empty_cache;
  Options o = test_options();
  o.cache_dir = empty_cache.path();
  o.allow_jit = false;
  Attention attention(o);
  Problem p(64, 64, false, 7);
  try {
    attention.run(p.params, nullptr);
    ADD_FAILURE() << "no-JIT mode must not compile";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_cached) << e.what();
  }
  // Once another instance has filled that cache, no-JIT mode loads from disk.
  Options filler = o;
  filler.allow_jit = true;
  KernelConfig c;
  c.head_dim = 64;
  c.lse = true;
  c.q_heads_per_kv = 2;
  c.backend = Backend::portable;
  ASSERT_TRUE(Attention(filler).prewarm({c}).failures.empty());
  Attention from_disk(o);
  EXPECT_NO_THROW(from_disk.run(p.params, nullptr));
  FA4_CU(cuCtxSynchronize());
  EXPECT_TRUE(all_finite(p.output()));
}

}  // namespace
}  // namespace fa4::test
