// Seeded randomized property test, for every backend the GPU runs (portable; on sm_90 also sm90 and sm100
// emulated, strict and adversarial): random shapes, strides, sequence lengths (seqlen_q != seqlen_k, causal
// rows that see no key), GQA ratios including non-divisors of 128, softmax scales and logit magnitudes; every element checked
// against the float64 / float32 reference. Each run draws a new seed and prints it; FA4_TEST_SEED=<seed>
// replays a run, FA4_TEST_CASES=<n> sets how many problems each backend gets (default 24).
#include <chrono>
#include <cstdlib>
#include <random>

#include "runtime/backend.hpp"
#include "test_util.hpp"

namespace fa4::test {
namespace {

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("FA4_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(s, nullptr, 10));
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

int case_count() {
  const char* s = std::getenv("FA4_TEST_CASES");
  return s ? std::max(1, std::atoi(s)) : 24;
}

// One random problem a backend supports. The shapes stay small enough for the float64 CPU reference most of
// the time; the larger ones use the float32 GPU reference.
Case random_case(std::mt19937_64& rng, const std::vector<std::pair<int, int>>& dims, int index) {
  auto pick = [&](auto const& options) { return options[rng() % options.size()]; };
  auto uniform = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  Case c;
  const auto [d, dv] = pick(dims);
  c.d = d, c.dv = dv;
  c.dtype = rng() % 2 ? DType::bf16 : DType::fp16;
  c.causal = rng() % 2;
  c.lse = rng() % 4 != 0;
  c.batch = uniform(1, 3);
  c.heads_kv = uniform(1, 3);
  c.heads_q = c.heads_kv * pick(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 12, 16});
  c.layout = pick(std::vector<Layout>{Layout::contiguous, Layout::contiguous, Layout::head_major, Layout::padded});
  c.qk_range = pick(std::vector<float>{0.5f, 1.f, 2.f, 4.f});
  c.softmax_scale = rng() % 3 ? 0.f : 0.02f + 0.5f * static_cast<float>(rng() % 1000) / 1000.f;
  // Lengths: tiny, around tile sizes, and long; the two sides drawn independently (sq > sk makes causal rows
  // that see no key).
  const std::vector<int> lengths = {1, 2, 17, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 300, 511, 700, 1024, 1500};
  int sq = pick(lengths), sk = pick(lengths);
  if (rng() % 3 == 0) sq = uniform(1, 1600), sk = uniform(1, 1600);
  c.shapes = {{sq, sk}};
  c.name = "random" + std::to_string(index);
  return c;
}

std::string describe(const Case& c) {
  std::ostringstream s;
  s << to_string(c.dtype) << " d" << c.d << "/" << c.dv << (c.causal ? " causal" : "") << (c.lse ? " lse" : "")
    << " b" << c.batch << " hq" << c.heads_q << "/" << c.heads_kv << " sq" << c.shapes[0].seqlen_q << " sk"
    << c.shapes[0].seqlen_k << " layout" << static_cast<int>(c.layout) << " qk" << c.qk_range << " scale"
    << c.softmax_scale;
  return s.str();
}

struct Target {
  const char* name;
  Backend backend;
  Emulation mode;
};

class Property : public ::testing::TestWithParam<Target> {};

TEST_P(Property, RandomProblemsMatchTheReferenceOnEveryElement) {
  const Target t = GetParam();
  if (t.backend == Backend::sm100_emulated || t.backend == Backend::sm90) FA4_REQUIRE_SM90();
  else FA4_REQUIRE_GPU();
  PrimaryContext context;
  Options o = Options::from_env();
  o.backend = t.backend;
  o.emulation = t.mode;
  o.self_check = false;
  Attention attention(o);
  std::vector<std::pair<int, int>> dims;
  for (auto [d, dv] : supported_head_dims()) {
    KernelConfig c;
    c.head_dim = d, c.head_dim_v = dv, c.backend = t.backend;
    if (detail::supports(detail::key_for_config(c, 90), nullptr)) dims.push_back({d, dv});
  }
  const uint64_t seed = run_seed() ^ std::hash<std::string>{}(t.name);
  std::cout << "[property] " << t.name << ": seed " << run_seed() << " (replay: FA4_TEST_SEED=" << run_seed() << ")\n";
  std::mt19937_64 rng(seed);
  for (int i = 0; i < case_count(); ++i) {
    const Case c = random_case(rng, dims, i);
    const CheckResult r = check_attention(attention, t.backend, c, c.shapes[0], rng());
    EXPECT_TRUE(r.passed) << "case " << i << " of seed " << run_seed() << ": " << describe(c) << "\n" << r.summary << r.failures;
    std::cout << "[property] " << t.name << " " << i << ": " << describe(c) << ": max |err| " << r.max_error
              << (r.passed ? "" : "  FAILED") << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Property,
                         ::testing::Values(Target{"portable", Backend::portable, Emulation::strict},
                                           Target{"sm90", Backend::sm90, Emulation::strict},
                                           Target{"sm100_emulated_strict", Backend::sm100_emulated, Emulation::strict},
                                           Target{"sm100_emulated_adversarial", Backend::sm100_emulated,
                                                  Emulation::adversarial}),
                         [](const ::testing::TestParamInfo<Target>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fa4::test
