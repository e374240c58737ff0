// The C ABI's handle rules (include/fa4/fa4.h): a NULL, destroyed or unknown handle is an error, never a
// use of freed memory; ids are not reused; destroying a handle another thread is using is safe. Its serving
// calls, host side: bad serving, merge and prewarm_ex inputs come back as typed errors naming the field; a
// NULL fa4_serving is fa4_run; fa4_workspace_size answers as Attention::workspace_size does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fa4/fa4.h"
#include "fa4/fa4.hpp"
#include "test_util.hpp"

namespace {

class CApi : public ::testing::Test {
 protected:
  void SetUp() override { setenv("FA4_DISK_CACHE", "0", 1); }
  void TearDown() override { unsetenv("FA4_DISK_CACHE"); }
};

bool names_handle(const char* message) { return std::string(message).rfind("handle: ", 0) == 0; }

TEST_F(CApi, CreateDestroyAndNullDestroy) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(fa4_prewarm(h, nullptr, 0, nullptr), FA4_OK) << fa4_last_error();
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
  EXPECT_EQ(fa4_destroy(nullptr), FA4_OK) << "destroying NULL is a no-op";
  EXPECT_STREQ(fa4_last_error(), "");
}

TEST_F(CApi, DestroyedHandlesAreRejectedAndNeverReused) {
  fa4_attention* first = nullptr;
  ASSERT_EQ(fa4_create(&first), FA4_OK);
  ASSERT_EQ(fa4_destroy(first), FA4_OK);
  fa4_attention* second = nullptr;
  ASSERT_EQ(fa4_create(&second), FA4_OK);
  EXPECT_NE(first, second) << "a stale handle must not reach a later handle's object";

  EXPECT_EQ(fa4_destroy(first), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(names_handle(fa4_last_error())) << fa4_last_error();
  EXPECT_EQ(fa4_prewarm(first, nullptr, 0, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(names_handle(fa4_last_error())) << fa4_last_error();
  fa4_params params{};
  EXPECT_EQ(fa4_run(first, &params, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(names_handle(fa4_last_error())) << fa4_last_error();
  EXPECT_EQ(fa4_prewarm(second, nullptr, 0, nullptr), FA4_OK) << "the live handle is unaffected";
  EXPECT_EQ(fa4_destroy(second), FA4_OK);
}

TEST_F(CApi, PrewarmReportsEveryBadConfiguration) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK);
  fa4_config configs[2] = {};
  configs[0].head_dim = 128;
  configs[0].q_heads_per_kv = 0;  // was silently taken as 1
  configs[0].arch = 90;
  configs[1].head_dim = 80;
  configs[1].q_heads_per_kv = 1;
  configs[1].arch = 90;
  int32_t failures = -1;
  const int rc = fa4_prewarm(h, configs, 2, &failures);
  EXPECT_TRUE(rc == FA4_ERR_INVALID_ARGUMENT || rc == FA4_ERR_UNSUPPORTED) << rc;
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

// One thread keeps calling into a handle while another destroys it: every call either succeeds or reports
// the dead handle; nothing touches freed memory (run this under ASan/TSan to see it).
TEST_F(CApi, DestroyWhileAnotherThreadUsesTheHandle) {
  for (int round = 0; round < 20; ++round) {
    fa4_attention* h = nullptr;
    ASSERT_EQ(fa4_create(&h), FA4_OK);
    std::atomic<bool> started{false};
    std::atomic<int> bad{0};
    std::thread user([&] {
      for (int i = 0; i < 2000; ++i) {
        started = true;
        const int rc = fa4_prewarm(h, nullptr, 0, nullptr);
        if (rc != FA4_OK && !(rc == FA4_ERR_INVALID_ARGUMENT && names_handle(fa4_last_error()))) ++bad;
      }
    });
    while (!started) std::this_thread::yield();
    EXPECT_EQ(fa4_destroy(h), FA4_OK);
    user.join();
    EXPECT_EQ(bad, 0);
  }
}

// ---- serving calls ---------------------------------------------------------------------------------

// test::fake_valid_params as the C structs (fake device addresses: these calls stop before the device).
fa4_params c_params() {
  const fa4::AttentionParams v = fa4::test::fake_valid_params();
  fa4_params p{};
  p.q = v.q, p.k = v.k, p.v = v.v, p.o = v.o;
  p.batch = v.batch, p.seqlen_q = v.seqlen_q, p.seqlen_k = v.seqlen_k;
  p.heads_q = v.heads_q, p.heads_kv = v.heads_kv, p.head_dim = v.head_dim;
  p.dtype = FA4_DTYPE_BF16;
  return p;
}

// A field added to a versioned struct goes at its end, past every earlier one (never into padding, where an
// older caller's struct_size would not show it is absent).
static_assert(offsetof(fa4_serving, split_by_batch) > offsetof(fa4_serving, sinks) &&
                  offsetof(fa4_serving, split_by_batch) + sizeof(int32_t) <= sizeof(fa4_serving),
              "fa4_serving: split_by_batch is its last field");

fa4_serving c_serving() {
  fa4_serving s{};
  s.struct_size = sizeof(fa4_serving);
  return s;
}

const int32_t* fake_int32s(uintptr_t n) { return reinterpret_cast<const int32_t*>(n << 50); }

// The C++ API's view of the same call, for comparisons.
fa4::AttentionParams cpp_params(const fa4_params& c, const fa4_serving& s) {
  fa4::AttentionParams p = fa4::test::fake_valid_params();
  p.cu_seqlens_q = s.cu_seqlens_q, p.total_q = s.total_q, p.cu_seqlens_k = s.cu_seqlens_k, p.total_k = s.total_k;
  p.seqused_k = s.seqused_k, p.page_table = s.page_table, p.page_size = s.page_size, p.num_pages = s.num_pages;
  p.max_pages_per_seq = s.max_pages_per_seq, p.num_splits = s.num_splits;
  p.workspace = s.workspace, p.workspace_bytes = s.workspace_bytes;
  p.seqlen_q = c.seqlen_q, p.seqlen_k = c.seqlen_k;
  return p;
}

// A return code and fa4_last_error, compared as a pair.
struct Outcome {
  int code;
  std::string message;
  bool operator==(const Outcome& o) const { return code == o.code && message == o.message; }
};
std::ostream& operator<<(std::ostream& os, const Outcome& o) { return os << o.code << " '" << o.message << "'"; }
Outcome outcome(int rc) { return {rc, fa4_last_error()}; }

struct BadServing {
  const char* name;
  const char* field;  // the message must begin with it
  std::function<void(fa4_params&, fa4_serving&)> bad;
  bool sizing_checks = true;  // fa4_workspace_size rejects it too (it ignores workspace_bytes without a workspace)
};

TEST_F(CApi, BadServingInputsAreTypedErrorsNamingTheField) {
  const std::vector<BadServing> cases = {
      {"struct_size 0", "serving.struct_size", [](fa4_params&, fa4_serving& s) { s.struct_size = 0; }},
      {"struct_size short", "serving.struct_size", [](fa4_params&, fa4_serving& s) { s.struct_size -= 8; }},
      {"struct_size from a newer header", "serving.struct_size", [](fa4_params&, fa4_serving& s) { s.struct_size += 8; }},
      {"total_q without cu_seqlens_q", "total_q", [](fa4_params&, fa4_serving& s) { s.total_q = 50; }},
      {"total_q above batch * seqlen_q", "total_q", [](fa4_params& p, fa4_serving& s) {
         s.cu_seqlens_q = fake_int32s(5);
         s.total_q = p.batch * p.seqlen_q + 1;
       }},
      {"cu_seqlens_k misaligned", "cu_seqlens_k", [](fa4_params&, fa4_serving& s) {
         s.cu_seqlens_k = reinterpret_cast<const int32_t*>((uintptr_t{5} << 50) + 2);
         s.total_k = 10;
       }},
      {"seqused_k misaligned", "seqused_k", [](fa4_params&, fa4_serving& s) {
         s.seqused_k = reinterpret_cast<const int32_t*>((uintptr_t{5} << 50) + 1);
       }},
      {"page_size 96", "page_size", [](fa4_params&, fa4_serving& s) {
         s.page_table = fake_int32s(5), s.page_size = 96, s.num_pages = 100, s.max_pages_per_seq = 40;
       }},
      {"page_size 512", "page_size", [](fa4_params&, fa4_serving& s) {
         s.page_table = fake_int32s(5), s.page_size = 512, s.num_pages = 100, s.max_pages_per_seq = 40;
       }},
      {"num_pages 0", "num_pages", [](fa4_params&, fa4_serving& s) {
         s.page_table = fake_int32s(5), s.page_size = 64, s.max_pages_per_seq = 5;
       }},
      {"seqlen_k beyond the page-table row", "seqlen_k", [](fa4_params&, fa4_serving& s) {
         s.page_table = fake_int32s(5), s.page_size = 64, s.num_pages = 10, s.max_pages_per_seq = 4;
       }},
      {"page_size without page_table", "page_table", [](fa4_params&, fa4_serving& s) { s.page_size = 64; }},
      {"num_splits -1", "num_splits", [](fa4_params&, fa4_serving& s) { s.num_splits = -1; }},
      {"num_splits 257", "num_splits", [](fa4_params&, fa4_serving& s) { s.num_splits = 257; }},
      {"split_by_batch with num_splits 2", "split_by_batch", [](fa4_params&, fa4_serving& s) {
         s.num_splits = 2, s.split_by_batch = 1;
       }},
      {"workspace misaligned", "workspace", [](fa4_params&, fa4_serving& s) {
         s.workspace = reinterpret_cast<void*>((uintptr_t{7} << 50) + 128);
         s.workspace_bytes = 1 << 20;
       }},
      {"workspace_bytes without workspace", "workspace", [](fa4_params&, fa4_serving& s) { s.workspace_bytes = 4096; }, false},
      {"a bad dense field with serving", "head_dim", [](fa4_params& p, fa4_serving&) { p.head_dim = 0; }},
  };
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  for (const BadServing& c : cases) {
    fa4_params p = c_params();
    fa4_serving s = c_serving();
    c.bad(p, s);
    const Outcome run = outcome(fa4_run_serving(h, &p, &s, nullptr));
    EXPECT_EQ(run.code, FA4_ERR_INVALID_ARGUMENT) << c.name << ": " << run;
    EXPECT_EQ(run.message.rfind(std::string(c.field) + ": ", 0), 0u) << c.name << ": " << run;
    if (!c.sizing_checks) continue;
    size_t bytes = 1;
    EXPECT_EQ(outcome(fa4_workspace_size(h, &p, &s, &bytes)), run) << c.name << ": fa4_workspace_size checks the same";
    EXPECT_EQ(bytes, 0u) << c.name << ": *out is 0 on failure";
  }
  const fa4_params p = c_params();
  EXPECT_EQ(fa4_workspace_size(h, &p, nullptr, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa4_last_error(), "out: must not be null");
  EXPECT_EQ(fa4_run_serving(h, nullptr, nullptr, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa4_last_error(), "params: must not be null");
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

// A NULL fa4_serving, and an all-zero one, are fa4_run: the same outcome for valid and invalid dense calls
// (without a GPU the valid ones stop at the device: the same error).
TEST_F(CApi, NullServingIsADenseRun) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  const std::vector<std::function<void(fa4_params&)>> variants = {
      [](fa4_params&) {},
      [](fa4_params& p) { p.causal = 1; },
      [](fa4_params& p) { p.head_dim = 80; },
      [](fa4_params& p) { p.q = nullptr; },
      [](fa4_params& p) { p.dtype = 7; },
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    fa4_params p = c_params();
    variants[i](p);
    const fa4_serving zero = c_serving();
    const Outcome dense = outcome(fa4_run(h, &p, nullptr));
    EXPECT_NE(dense.code, FA4_OK) << "variant " << i << ": no device here, so nothing can run";
    EXPECT_EQ(outcome(fa4_run_serving(h, &p, nullptr, nullptr)), dense) << "variant " << i;
    EXPECT_EQ(outcome(fa4_run_serving(h, &p, &zero, nullptr)), dense) << "variant " << i;
  }
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

// fa4_workspace_size gives what Attention::workspace_size gives, or the same error (a split size needs the
// device's Plan: without a current context both report it).
TEST_F(CApi, WorkspaceSizeMatchesTheCppApi) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  fa4::Options options = fa4::Options::from_env();
  fa4::Attention attention(options);
  struct Variant {
    const char* name;
    std::function<void(fa4_params&, fa4_serving&)> set;
  };
  const std::vector<Variant> variants = {
      {"dense, no split", [](fa4_params&, fa4_serving& s) { s.num_splits = 1; }},
      {"ragged, no split", [](fa4_params& p, fa4_serving& s) {
         s.cu_seqlens_q = fake_int32s(5), s.total_q = p.batch * p.seqlen_q, s.num_splits = 1;
       }},
      {"paged decode, num_splits 0", [](fa4_params& p, fa4_serving& s) {
         p.seqlen_q = 1;
         s.page_table = fake_int32s(5), s.page_size = 64, s.num_pages = 20, s.max_pages_per_seq = 5;
       }},
      {"dense, 4 splits", [](fa4_params&, fa4_serving& s) { s.num_splits = 4; }},
      {"bad page size", [](fa4_params&, fa4_serving& s) {
         s.page_table = fake_int32s(5), s.page_size = 48, s.num_pages = 20, s.max_pages_per_seq = 7;
       }},
  };
  for (const Variant& v : variants) {
    fa4_params p = c_params();
    fa4_serving s = c_serving();
    v.set(p, s);
    size_t c_bytes = 1;
    const Outcome c = outcome(fa4_workspace_size(h, &p, &s, &c_bytes));
    Outcome cpp{FA4_OK, ""};
    size_t cpp_bytes = 0;
    try {
      cpp_bytes = attention.workspace_size(cpp_params(p, s));
    } catch (const fa4::Error& e) {
      cpp = {static_cast<int>(e.code()), e.what()};
    }
    EXPECT_EQ(c, cpp) << v.name;
    EXPECT_EQ(c_bytes, cpp_bytes) << v.name;
  }
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

TEST_F(CApi, BadMergeInputsAreTypedErrorsNamingTheField) {
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  const fa4_merge_state states[3] = {{reinterpret_cast<const void*>(uintptr_t{1} << 50), reinterpret_cast<const float*>(uintptr_t{2} << 50)},
                                     {reinterpret_cast<const void*>(uintptr_t{3} << 50), reinterpret_cast<const float*>(uintptr_t{4} << 50)},
                                     {nullptr, reinterpret_cast<const float*>(uintptr_t{6} << 50)}};
  const auto valid = [&] {
    fa4_merge_params m{};
    m.struct_size = sizeof(fa4_merge_params);
    m.num_states = 2;
    m.states = states;
    m.o = reinterpret_cast<void*>(uintptr_t{5} << 50);
    m.batch = 2, m.seqlen = 10, m.heads = 8, m.head_dim_v = 128;
    return m;
  };
  const std::vector<std::pair<const char*, std::function<void(fa4_merge_params&)>>> cases = {
      {"merge.struct_size", [](fa4_merge_params& m) { m.struct_size = 4; }},
      {"merge.struct_size", [](fa4_merge_params& m) { m.struct_size += 8; }},
      {"num_states", [](fa4_merge_params& m) { m.num_states = -1; }},
      {"states", [](fa4_merge_params& m) { m.num_states = 1; }},
      {"states", [](fa4_merge_params& m) { m.states = nullptr; }},
      {"states[2].o", [](fa4_merge_params& m) { m.num_states = 3; }},
      {"o", [&states](fa4_merge_params& m) { m.o = const_cast<void*>(states[1].o); }},
      {"head_dim_v", [](fa4_merge_params& m) { m.head_dim_v = 100; }},
      {"total", [](fa4_merge_params& m) { m.total = 5; }},
      {"dtype", [](fa4_merge_params& m) { m.dtype = 3; }},
  };
  for (const auto& [field, bad] : cases) {
    fa4_merge_params m = valid();
    bad(m);
    const int rc = fa4_merge(h, &m, nullptr);
    const std::string message = fa4_last_error();
    EXPECT_TRUE(rc == FA4_ERR_INVALID_ARGUMENT || rc == FA4_ERR_UNSUPPORTED) << field << ": " << rc << " " << message;
    EXPECT_EQ(message.rfind(std::string(field) + ": ", 0), 0u) << field << ": " << message;
  }
  EXPECT_EQ(fa4_merge(h, nullptr, nullptr), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa4_last_error(), "merge: must not be null");
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

// fa4_prewarm_ex checks every entry's struct_size, and passes the serving flags on: the sm100 backend does
// not serve split-KV, so a split configuration for it fails where fa4_prewarm's cannot say split.
TEST_F(CApi, PrewarmExChecksSizesAndPassesTheServingFlags) {
  setenv("FA4_BACKEND", "sm100", 1);
  fa4_attention* h = nullptr;
  ASSERT_EQ(fa4_create(&h), FA4_OK) << fa4_last_error();
  unsetenv("FA4_BACKEND");
  fa4_config_ex configs[2] = {};
  for (fa4_config_ex& c : configs) {
    c.struct_size = sizeof(fa4_config_ex);
    c.dtype = FA4_DTYPE_BF16;
    c.head_dim = 128;
    c.q_heads_per_kv = 1;
    c.arch = 100;
    c.split = 1;
  }
  configs[1].struct_size = sizeof(fa4_config);
  int32_t failures = -1;
  EXPECT_EQ(fa4_prewarm_ex(h, configs, 2, &failures), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(fa4_last_error()).rfind("configs[1].struct_size: ", 0), 0u) << fa4_last_error();
  EXPECT_EQ(fa4_prewarm_ex(h, nullptr, 1, &failures), FA4_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa4_last_error(), "configs: must not be null");

  EXPECT_EQ(fa4_prewarm_ex(h, configs, 1, &failures), FA4_ERR_UNSUPPORTED);
  EXPECT_EQ(failures, 1);
  EXPECT_NE(std::string(fa4_last_error()).find("split-KV"), std::string::npos) << fa4_last_error();
  EXPECT_EQ(fa4_prewarm_ex(h, configs, 0, &failures), FA4_OK);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(fa4_destroy(h), FA4_OK);
}

}  // namespace
