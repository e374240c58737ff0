// Every validation rule: its own error, naming the field and the rule, before anything runs.
#include <gtest/gtest.h>

#include <cmath>

#include <cfloat>

#include "runtime/backend.hpp"
#include "runtime/launch.hpp"
#include "runtime/problem.hpp"
#include "test_util.hpp"

namespace fa4::detail {
namespace {

using test::fake_valid_params;

void expect_error(const AttentionParams& p, ErrorCode code, const std::string& field, const std::string& rule) {
  try {
    validate(p);
    ADD_FAILURE() << "expected an error for " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(field, 0), 0u) << "message must start with the field: " << what;
    EXPECT_NE(what.find(rule), std::string::npos) << "message must state the rule '" << rule << "': " << what;
  }
}

TEST(Validate, AcceptsAValidProblemAndResolvesDefaults) {
  const Problem problem = validate(fake_valid_params());
  EXPECT_EQ(problem.q_heads_per_kv, 4);
  EXPECT_EQ(problem.params.head_dim_v, 128);
  EXPECT_FLOAT_EQ(problem.params.softmax_scale, 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(problem.params.q_stride.seq, 8 * 128);
  EXPECT_EQ(problem.params.q_stride.batch, 100 * 8 * 128);
  EXPECT_EQ(problem.params.k_stride.head, 128);
  EXPECT_EQ(problem.params.k_stride.batch, 300 * 2 * 128);
}

TEST(Validate, NullPointers) {
  for (const char* field : {"q", "k", "v", "o"}) {
    AttentionParams p = fake_valid_params();
    if (*field == 'q') p.q = nullptr;
    if (*field == 'k') p.k = nullptr;
    if (*field == 'v') p.v = nullptr;
    if (*field == 'o') p.o = nullptr;
    expect_error(p, ErrorCode::invalid_argument, field, "must not be null");
  }
}

TEST(Validate, MisalignedPointer) {
  AttentionParams p = fake_valid_params();
  p.k = static_cast<const char*>(p.k) + 8;
  expect_error(p, ErrorCode::invalid_argument, "k", "16-byte aligned");
}

TEST(Validate, UnsupportedHeadDim) {
  AttentionParams p = fake_valid_params();
  p.head_dim = 80;
  expect_error(p, ErrorCode::unsupported, "head_dim", "must be one of 32, 64, 96, 128, 192, 256");
}

TEST(Validate, UnsupportedHeadDimV) {
  AttentionParams p = fake_valid_params();
  p.head_dim_v = 64;
  expect_error(p, ErrorCode::unsupported, "head_dim_v", "must equal head_dim, or be 128 with head_dim 192");
  p.head_dim = 192;
  p.head_dim_v = 128;
  EXPECT_NO_THROW(validate(p));
}

TEST(Validate, UnsupportedDtype) {
  AttentionParams p = fake_valid_params();
  p.dtype = static_cast<DType>(7);
  expect_error(p, ErrorCode::invalid_argument, "dtype", "must be bf16 or fp16");
}

TEST(Validate, NonPositiveSizes) {
  struct Case {
    const char* field;
    int64_t AttentionParams::*member;
  } cases[] = {{"batch", &AttentionParams::batch},     {"seqlen_q", &AttentionParams::seqlen_q},
               {"seqlen_k", &AttentionParams::seqlen_k}, {"heads_q", &AttentionParams::heads_q},
               {"heads_kv", &AttentionParams::heads_kv}, {"head_dim", &AttentionParams::head_dim}};
  for (const Case& c : cases)
    for (int64_t bad : {0, -3}) {
      AttentionParams p = fake_valid_params();
      p.*c.member = bad;
      expect_error(p, ErrorCode::invalid_argument, c.field, "must be > 0");
    }
}

TEST(Validate, SeqlenBeyond32Bits) {
  AttentionParams p = fake_valid_params();
  p.seqlen_k = int64_t{1} << 31;
  expect_error(p, ErrorCode::invalid_argument, "seqlen_k", "must be below 2^31");
}

TEST(Validate, HeadsNotAMultipleOfKvHeads) {
  AttentionParams p = fake_valid_params();
  p.heads_kv = 3;
  expect_error(p, ErrorCode::invalid_argument, "heads_q", "must be a multiple of heads_kv");
}

TEST(Validate, NegativeStride) {
  AttentionParams p = fake_valid_params();
  p.v_stride = {-300 * 2 * 128, 2 * 128, 128};
  expect_error(p, ErrorCode::invalid_argument, "v_stride.batch", "must be >= 0");
}

TEST(Validate, OverlappingStrides) {
  AttentionParams p = fake_valid_params();
  p.q_stride = {100 * 8 * 128, 4 * 128, 128};  // seq stride covers only 4 of the 8 heads
  expect_error(p, ErrorCode::invalid_argument, "q_stride.seq", "overlaps");
  p = fake_valid_params();
  p.k_stride = {300 * 2 * 128, 2 * 128, 64};  // heads overlap within a row of 128
  expect_error(p, ErrorCode::invalid_argument, "k_stride.head", "overlaps");
}

TEST(Validate, HeadMajorAndPaddedLayoutsAreAccepted) {
  AttentionParams p = fake_valid_params();
  p.q_stride = {8 * 100 * 128, 128, 100 * 128};  // [b, h, s, d] in memory
  p.k_stride = {2 * 300 * 136, 136, 300 * 136};  // padded rows
  EXPECT_NO_THROW(validate(p));
}

TEST(Validate, StrideNotAMultipleOf8Elements) {
  AttentionParams p = fake_valid_params();
  p.o_stride = {100 * 8 * 132 + 4, 8 * 132 + 4, 132};
  expect_error(p, ErrorCode::invalid_argument, "o_stride.batch", "multiple of 8 elements");
}

TEST(Validate, OffsetsOverflow) {
  AttentionParams p = fake_valid_params();
  p.k_stride = {int64_t{1} << 38, 2 * 128, 128};
  p.batch = int64_t{1} << 30;
  expect_error(p, ErrorCode::invalid_argument, "k_stride.batch", "offsets overflow 64 bits");
}

TEST(Validate, OutputAliasingAnInput) {
  AttentionParams p = fake_valid_params();
  p.o = const_cast<void*>(p.v);
  expect_error(p, ErrorCode::invalid_argument, "o", "must not overlap input v");
  p = fake_valid_params();
  p.o = static_cast<char*>(const_cast<void*>(p.q)) + 1024;  // partial overlap
  expect_error(p, ErrorCode::invalid_argument, "o", "must not overlap input q");
}

TEST(Validate, LseRequestedWithoutPointer) {
  AttentionParams p = fake_valid_params();
  p.return_lse = true;
  expect_error(p, ErrorCode::invalid_argument, "lse", "must not be null when return_lse is set");
}

TEST(Validate, LsePointerWithoutRequest) {
  AttentionParams p = fake_valid_params();
  p.lse = reinterpret_cast<float*>(uintptr_t{5} << 50);
  expect_error(p, ErrorCode::invalid_argument, "lse", "return_lse is false");
}

TEST(Validate, LseOverlappingOutput) {
  AttentionParams p = fake_valid_params();
  p.return_lse = true;
  p.lse = reinterpret_cast<float*>(static_cast<char*>(p.o) + 64);
  expect_error(p, ErrorCode::invalid_argument, "lse", "must not overlap o");
}

TEST(Validate, BadSoftmaxScale) {
  for (float scale : {-1.0f, std::nanf(""), INFINITY}) {
    AttentionParams p = fake_valid_params();
    p.softmax_scale = scale;
    expect_error(p, ErrorCode::invalid_argument, "softmax_scale", "finite and >= 0");
  }
}

TEST(Validate, SoftmaxScaleLimits) {
  for (float scale : {-0.0f, 3e38f, FLT_MAX}) {
    AttentionParams p = fake_valid_params();
    p.softmax_scale = scale;
    expect_error(p, ErrorCode::invalid_argument, "softmax_scale", "got");
  }
  AttentionParams p = fake_valid_params();
  p.softmax_scale = FLT_MAX / 1.4426950408889634f * 0.999f;  // the largest scales whose log2(e) product is finite
  EXPECT_TRUE(std::isfinite(make_kernel_args(validate(p)).scale_log2));
  p.softmax_scale = 1e-30f;
  EXPECT_NO_THROW(validate(p));
  p.softmax_scale = 0.0f;
  EXPECT_FLOAT_EQ(validate(p).params.softmax_scale, 1.0f / std::sqrt(128.0f));
}

TEST(Validate, ContiguousStridesThatOverflow) {
  AttentionParams p = fake_valid_params();
  p.seqlen_q = (int64_t{1} << 31) - 1;
  p.heads_q = p.heads_kv = (int64_t{1} << 31) - 1;
  expect_error(p, ErrorCode::invalid_argument, "q_stride", "overflows 64 bits");
}

// check_index_range: each 32-bit limit is exact for the plan it is checked against (the largest value
// passes, one more fails), for both kernels and with GQA packing.
struct Scenario {
  Backend backend;
  int arch;
  int64_t heads_q, heads_kv, head_dim;
};

Plan plan_for(const Scenario& s, const Problem& problem) { return make_plan(key_for_config(config_of(problem, s.backend, s.arch), s.arch)); }

AttentionParams big_params(const Scenario& s) {
  AttentionParams p = fake_valid_params();
  p.batch = 1;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.head_dim;
  return p;
}

bool schedules(const Scenario& s, const AttentionParams& p) {
  const Problem problem = validate(p);
  fa4k::AttentionArgs args{};
  try {
    fill_schedule(plan_for(s, problem), problem, args);
    return true;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    return false;
  }
}

TEST(Validate, IndexLimitsAreExact) {
  constexpr int64_t kIntMax = 0x7fffffff;
  for (const Scenario& s : {Scenario{Backend::portable, 90, 8, 2, 128}, Scenario{Backend::portable, 80, 4, 4, 64},
                            Scenario{Backend::sm100, 100, 8, 8, 128}, Scenario{Backend::sm100, 100, 8, 2, 128},
                            Scenario{Backend::sm100_emulated, 90, 128, 1, 64}}) {
    AttentionParams p = big_params(s);
    const Problem small = validate(p);
    const Plan plan = plan_for(s, small);
    SCOPED_TRACE(plan.key.name());
    const int64_t pack = plan.key.gqa_pack, rows_per_cta = int64_t{plan.tile_m} * plan.q_tiles;

    p.seqlen_k = kIntMax - plan.tile_n + 1;  // key blocks: seqlen_k + tile_n - 1 <= INT_MAX
    EXPECT_TRUE(schedules(s, p));
    p.seqlen_k += 1;
    EXPECT_FALSE(schedules(s, p));

    p = big_params(s);
    p.seqlen_q = kIntMax / rows_per_cta * rows_per_cta / pack;  // packed rows rounded up to CTAs <= INT_MAX
    EXPECT_TRUE(schedules(s, p));
    p.seqlen_q += 1;
    EXPECT_FALSE(schedules(s, p));

    p = big_params(s);  // causal: the last padded row's limit
    p.causal = true;
    p.seqlen_q = 1;  // one token, a whole CTA of padding rows (a decode shape: the decode kernel's plan)
    const Plan one = plan_for(s, validate(p));
    const int64_t one_pack = one.key.gqa_pack, one_rows_per_cta = int64_t{one.tile_m} * one.q_tiles;
    const int64_t last_row = (one_pack + one_rows_per_cta - 1) / one_rows_per_cta * one_rows_per_cta - 1;
    p.seqlen_k = s.backend == Backend::portable ? kIntMax - last_row / one_pack + 1 : kIntMax - last_row / one_pack;
    p.seqlen_k = std::min(p.seqlen_k, kIntMax - one.tile_n + 1);
    EXPECT_TRUE(schedules(s, p));
    if (p.seqlen_k < kIntMax - one.tile_n + 1) {
      p.seqlen_k += 1;
      EXPECT_FALSE(schedules(s, p));
    }
  }
}

TEST(Validate, KernelConfigRules) {
  KernelConfig c;
  c.arch = 90;
  EXPECT_NO_THROW(validate_config(c));
  c.q_heads_per_kv = kMaxQHeadsPerKv;
  EXPECT_NO_THROW(validate_config(c));
  c.q_heads_per_kv = 0;
  EXPECT_THROW(validate_config(c), Error);
  c.q_heads_per_kv = 1;
  c.arch = 0;  // the current device, resolved later
  EXPECT_NO_THROW(validate_config(c));
  c.arch = 75;
  try {
    validate_config(c);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_EQ(std::string(e.what()).rfind("arch: ", 0), 0u) << e.what();
  }
}

TEST(Validate, KernelArgumentsCarryTheResolvedProblem) {
  AttentionParams p = fake_valid_params();
  p.softmax_scale = 0.5f;
  const fa4k::AttentionArgs a = make_kernel_args(validate(p));
  EXPECT_EQ(a.q.ptr, p.q);
  EXPECT_EQ(a.k.seq_stride, 2 * 128);
  EXPECT_EQ(a.q_heads_per_kv, 4);
  EXPECT_FLOAT_EQ(a.scale_log2, 0.5f * 1.4426950408889634f);
  EXPECT_EQ(a.lse, nullptr);
}

}  // namespace
}  // namespace fa4::detail

namespace fa4::detail {
namespace {

// Causal resolves window_right to 0; validating the resolved params again (the first-use self-check does)
// must give the same kernel, not a sliding-window one. Only a left side makes a causal problem a window.
TEST(Validate, CausalStaysCausalWhenValidatedAgain) {
  AttentionParams p = fake_valid_params();
  p.causal = true;
  const Problem first = validate(p);
  EXPECT_FALSE(first.window);
  EXPECT_EQ(first.params.window_right, 0);
  const Problem again = validate(first.params);
  EXPECT_FALSE(again.window);
  p.window_left = 100;
  EXPECT_TRUE(validate(p).window);
  p.causal = false;
  p.window_left = -1;
  p.window_right = 0;
  EXPECT_TRUE(validate(p).window);  // a right side of 0 without causal is a window (the same mask)
}

}  // namespace
}  // namespace fa4::detail
