// Bad inputs, one table: every entry must end in a typed error (fa4::Error or an FA4_ERR_* code,
// invalid_argument or unsupported) whose message names the field. Each entry runs in a forked child, so a
// crash is counted instead of ending the suite. Prints "bad inputs: N tried, T typed errors, A accepted,
// C crashes".
//
// Host-checkable inputs only: the device rules of run() (a current context, a stream of that context,
// pointers that are device memory) need a GPU and are covered by tests/gpu. AttentionParams entries go
// through validate(), and those whose limit depends on the Plan through validate() + make_plan() +
// fill_schedule(), the steps run() takes before it launches.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "fa4/fa4.h"
#include "fa4/fa4.hpp"
#include "runtime/backend.hpp"
#include "runtime/launch.hpp"
#include "runtime/problem.hpp"
#include "test_util.hpp"

namespace fa4 {
namespace {

using detail::Problem;

struct Outcome {
  bool rejected = false;  // false: the input was accepted
  int code = 0;           // ErrorCode / FA4_ERR_*
  std::string message;
};

struct Case {
  std::string name;
  std::string field;  // the message must name it
  std::function<Outcome()> attempt;
};

template <class F>
Outcome catching(F&& f) {
  try {
    f();
    return {};
  } catch (const Error& e) {
    return {true, static_cast<int>(e.code()), e.what()};
  } catch (const std::exception& e) {
    return {true, static_cast<int>(ErrorCode::internal), e.what()};
  }
}

// ---- AttentionParams ------------------------------------------------------------------------------

constexpr int64_t k2to31 = int64_t{1} << 31;

using test::fake_valid_params;

// A paged KV cache: a page table (at a fake address) over num_pages pages of page_size keys.
void with_pages(AttentionParams& p, int64_t page_size, int64_t num_pages, int64_t max_pages_per_seq) {
  p.page_table = reinterpret_cast<const int32_t*>(uintptr_t{5} << 50);
  p.page_size = page_size, p.num_pages = num_pages, p.max_pages_per_seq = max_pages_per_seq;
}

Case params_case(const std::string& name, const std::string& field, std::function<void(AttentionParams&)> bad) {
  return {"params/" + name, field, [bad] {
            AttentionParams p = fake_valid_params();
            bad(p);
            return catching([&] { detail::validate(p); });
          }};
}

// The steps run() takes before launching: validate, select the key for `arch`, plan, schedule.
Case plan_case(const std::string& name, const std::string& field, Backend backend, int arch,
               std::function<void(AttentionParams&)> bad) {
  return {"plan/" + name, field, [=] {
            AttentionParams p = fake_valid_params();
            bad(p);
            return catching([&] {
              const Problem problem = detail::validate(p);
              const Plan plan = detail::make_plan(detail::key_for_config(detail::config_of(problem, backend, arch), arch));
              fa4k::AttentionArgs args{};
              detail::fill_schedule(plan, problem, args);
            });
          }};
}

// ---- MergeParams ----------------------------------------------------------------------------------

MergeParams valid_merge() {
  MergeParams m;
  m.states = {{reinterpret_cast<const void*>(uintptr_t{1} << 50), reinterpret_cast<const float*>(uintptr_t{2} << 50)},
              {reinterpret_cast<const void*>(uintptr_t{3} << 50), reinterpret_cast<const float*>(uintptr_t{4} << 50)}};
  m.o = reinterpret_cast<void*>(uintptr_t{5} << 50);
  m.batch = 2, m.seqlen = 10, m.heads = 8, m.head_dim_v = 128;
  return m;
}

Case merge_case(const std::string& name, const std::string& field, std::function<void(MergeParams&)> bad) {
  return {"merge/" + name, field, [bad] {
            MergeParams m = valid_merge();
            bad(m);
            return catching([&] { detail::validate_merge(m); });
          }};
}

// ---- KernelConfig ---------------------------------------------------------------------------------

Options quiet_options() {
  Options o;
  o.disk_cache = false;
  o.log_level = LogLevel::off;
  return o;
}

KernelConfig valid_config() {
  KernelConfig c;
  c.arch = 90;
  c.backend = Backend::portable;
  return c;
}

Case prewarm_case(const std::string& name, const std::string& field, std::function<void(KernelConfig&)> bad) {
  return {"prewarm/" + name, field, [bad] {
            KernelConfig c = valid_config();
            bad(c);
            Attention attention(quiet_options());
            const PrewarmReport report = attention.prewarm({c});
            if (report.failures.empty()) return Outcome{};
            return Outcome{true, static_cast<int>(report.failures[0].code), report.failures[0].message};
          }};
}

Case describe_case(const std::string& name, const std::string& field, std::function<void(KernelConfig&)> bad) {
  return {"describe/" + name, field, [bad] {
            KernelConfig c = valid_config();
            bad(c);
            return catching([&] { Attention(quiet_options()).describe(c); });
          }};
}

// ---- Options and the environment ------------------------------------------------------------------

// Sets one variable (in the child) and reads the environment; `construct` also builds an Attention.
Case env_case(const std::string& variable, const std::string& value, bool construct = false) {
  return {"env/" + variable + "='" + value + "'", variable, [=] {
            setenv("FA4_DISK_CACHE", "0", 1);
            setenv(variable.c_str(), value.c_str(), 1);
            return catching([&] {
              const Options o = Options::from_env();
              if (construct) Attention attention(o);
            });
          }};
}

// A regular file (a path under it cannot be a directory, even for root).
std::string regular_file() {
  char path[] = "/tmp/fa4rt-bad-input-XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  return path;
}

Case options_case(const std::string& name, const std::string& field, std::function<void(Options&)> bad) {
  return {"options/" + name, field, [bad] {
            Options o = quiet_options();
            bad(o);
            return catching([&] { Attention attention(o); });
          }};
}

// ---- C ABI ----------------------------------------------------------------------------------------

Outcome c_result(int rc) { return {rc != FA4_OK, rc, fa4_last_error()}; }

fa4_attention* live_handle() {
  setenv("FA4_DISK_CACHE", "0", 1);
  fa4_attention* h = nullptr;
  if (fa4_create(&h) != FA4_OK) ADD_FAILURE() << fa4_last_error();
  return h;
}

fa4_attention* destroyed_handle() {
  fa4_attention* h = live_handle();
  fa4_destroy(h);
  return h;
}

fa4_params c_params() {
  const AttentionParams v = fake_valid_params();
  fa4_params p{};
  p.q = v.q;
  p.k = v.k;
  p.v = v.v;
  p.o = v.o;
  p.batch = v.batch;
  p.seqlen_q = v.seqlen_q;
  p.seqlen_k = v.seqlen_k;
  p.heads_q = v.heads_q;
  p.heads_kv = v.heads_kv;
  p.head_dim = v.head_dim;
  p.dtype = FA4_DTYPE_BF16;
  return p;
}

fa4_config c_config() {
  fa4_config c{};
  c.dtype = FA4_DTYPE_BF16;
  c.head_dim = 128;
  c.q_heads_per_kv = 1;
  c.arch = 90;
  return c;
}

Case c_case(const std::string& name, const std::string& field, std::function<int()> call) {
  return {"c_abi/" + name, field, [call] { return c_result(call()); }};
}

Case c_run_case(const std::string& name, const std::string& field, std::function<void(fa4_params&)> bad) {
  return c_case("fa4_run " + name, field, [bad] {
    fa4_params p = c_params();
    bad(p);
    return fa4_run(live_handle(), &p, nullptr);
  });
}

Case c_prewarm_case(const std::string& name, const std::string& field, std::function<void(fa4_config&)> bad) {
  return c_case("fa4_prewarm " + name, field, [bad] {
    fa4_config c = c_config();
    bad(c);
    return fa4_prewarm(live_handle(), &c, 1, nullptr);
  });
}

// ---- the table ------------------------------------------------------------------------------------

std::vector<Case> bad_inputs() {
  using P = AttentionParams;
  const auto at = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };
  // 2^35 work tiles: 2^20 batches x 2^12 heads x 8 row blocks of 1024 tokens.
  const auto over_2_to_31_tiles = [](int64_t head_dim) {
    return [head_dim](P& p) {
      p.head_dim = head_dim;
      p.batch = int64_t{1} << 20;
      p.heads_q = p.heads_kv = int64_t{1} << 12;
      p.seqlen_q = p.seqlen_k = 1024;
    };
  };
  std::vector<Case> t = {
      // pointers
      params_case("q null", "q", [](P& p) { p.q = nullptr; }),
      params_case("k null", "k", [](P& p) { p.k = nullptr; }),
      params_case("v null", "v", [](P& p) { p.v = nullptr; }),
      params_case("o null", "o", [](P& p) { p.o = nullptr; }),
      params_case("q misaligned by 8", "q", [=](P& p) { p.q = at((uintptr_t{1} << 50) + 8); }),
      params_case("k misaligned by 2", "k", [=](P& p) { p.k = at((uintptr_t{2} << 50) + 2); }),
      params_case("v misaligned by 1", "v", [=](P& p) { p.v = at((uintptr_t{3} << 50) + 1); }),
      params_case("o misaligned by 4", "o", [](P& p) { p.o = reinterpret_cast<void*>((uintptr_t{4} << 50) + 4); }),
      params_case("lse misaligned", "lse", [](P& p) {
        p.return_lse = true;
        p.lse = reinterpret_cast<float*>((uintptr_t{5} << 50) + 2);
      }),
      params_case("return_lse without lse", "lse", [](P& p) { p.return_lse = true; }),
      params_case("lse without return_lse", "lse", [](P& p) { p.lse = reinterpret_cast<float*>(uintptr_t{5} << 50); }),
      params_case("q ends past 2^64", "q", [=](P& p) { p.q = at(~uintptr_t{0} - 4095); }),
      params_case("lse ends past 2^64", "lse", [](P& p) {
        p.return_lse = true;
        p.lse = reinterpret_cast<float*>(~uintptr_t{0} - 63);
      }),
      // dtype
      params_case("dtype 7", "dtype", [](P& p) { p.dtype = static_cast<DType>(7); }),
      params_case("dtype -1", "dtype", [](P& p) { p.dtype = static_cast<DType>(-1); }),
      // sizes
      params_case("batch 0", "batch", [](P& p) { p.batch = 0; }),
      params_case("batch -1", "batch", [](P& p) { p.batch = -1; }),
      params_case("batch 2^31", "batch", [](P& p) { p.batch = k2to31; }),
      params_case("seqlen_q 0", "seqlen_q", [](P& p) { p.seqlen_q = 0; }),
      params_case("seqlen_q -5", "seqlen_q", [](P& p) { p.seqlen_q = -5; }),
      params_case("seqlen_q 2^31", "seqlen_q", [](P& p) { p.seqlen_q = k2to31; }),
      params_case("seqlen_k 0", "seqlen_k", [](P& p) { p.seqlen_k = 0; }),
      params_case("seqlen_k INT64_MIN", "seqlen_k", [](P& p) { p.seqlen_k = INT64_MIN; }),
      params_case("seqlen_k 2^40", "seqlen_k", [](P& p) { p.seqlen_k = int64_t{1} << 40; }),
      params_case("heads_q 0", "heads_q", [](P& p) { p.heads_q = 0; }),
      params_case("heads_q -8", "heads_q", [](P& p) { p.heads_q = -8; }),
      params_case("heads_q 2^31", "heads_q", [](P& p) { p.heads_q = k2to31; }),
      params_case("heads_kv 0", "heads_kv", [](P& p) { p.heads_kv = 0; }),
      params_case("heads_kv -2", "heads_kv", [](P& p) { p.heads_kv = -2; }),
      params_case("heads_kv 3 (8 q heads)", "heads_q", [](P& p) { p.heads_kv = 3; }),
      params_case("heads_kv 16 > heads_q 8", "heads_q", [](P& p) { p.heads_kv = 16; }),
      params_case("head_dim 0", "head_dim", [](P& p) { p.head_dim = 0; }),
      params_case("head_dim -128", "head_dim", [](P& p) { p.head_dim = -128; }),
      params_case("head_dim 80", "head_dim", [](P& p) { p.head_dim = 80; }),
      params_case("head_dim 512", "head_dim", [](P& p) { p.head_dim = 512; }),
      params_case("head_dim 2^40", "head_dim", [](P& p) { p.head_dim = int64_t{1} << 40; }),
      params_case("head_dim_v -1", "head_dim_v", [](P& p) { p.head_dim_v = -1; }),
      params_case("head_dim_v 64 with 128", "head_dim_v", [](P& p) { p.head_dim_v = 64; }),
      params_case("head_dim_v 128 with 64", "head_dim_v", [](P& p) {
        p.head_dim = 64;
        p.head_dim_v = 128;
      }),
      // softmax_scale
      params_case("softmax_scale NaN", "softmax_scale", [](P& p) { p.softmax_scale = std::nanf(""); }),
      params_case("softmax_scale +inf", "softmax_scale", [](P& p) { p.softmax_scale = INFINITY; }),
      params_case("softmax_scale -inf", "softmax_scale", [](P& p) { p.softmax_scale = -INFINITY; }),
      params_case("softmax_scale -1", "softmax_scale", [](P& p) { p.softmax_scale = -1.f; }),
      params_case("softmax_scale -0", "softmax_scale", [](P& p) { p.softmax_scale = -0.f; }),
      params_case("softmax_scale -1e-45", "softmax_scale", [](P& p) { p.softmax_scale = -1e-45f; }),
      params_case("softmax_scale 3e38", "softmax_scale", [](P& p) { p.softmax_scale = 3e38f; }),
      params_case("softmax_scale FLT_MAX", "softmax_scale", [](P& p) { p.softmax_scale = FLT_MAX; }),
      // strides
      params_case("q_stride.batch negative", "q_stride.batch", [](P& p) { p.q_stride = {-100 * 8 * 128, 8 * 128, 128}; }),
      params_case("q_stride.seq negative", "q_stride.seq", [](P& p) { p.q_stride = {100 * 8 * 128, -8 * 128, 128}; }),
      params_case("k_stride.head negative", "k_stride.head", [](P& p) { p.k_stride = {300 * 2 * 128, 2 * 128, -128}; }),
      params_case("v_stride.seq unaligned", "v_stride.seq", [](P& p) { p.v_stride = {300 * 2 * 260, 2 * 130, 130}; }),
      params_case("o_stride.head unaligned", "o_stride.head", [](P& p) { p.o_stride = {100 * 8 * 132, 8 * 132, 132}; }),
      params_case("o_stride.batch unaligned", "o_stride.batch", [](P& p) { p.o_stride = {100 * 8 * 128 + 4, 8 * 128, 128}; }),
      params_case("q_stride.seq overlapping heads", "q_stride.seq", [](P& p) { p.q_stride = {100 * 8 * 128, 4 * 128, 128}; }),
      params_case("k_stride.head overlapping dims", "k_stride.head", [](P& p) { p.k_stride = {300 * 2 * 128, 2 * 128, 64}; }),
      params_case("q_stride all equal", "q_stride", [](P& p) { p.q_stride = {128, 128, 128}; }),
      params_case("v_stride.batch 0 with batch 2", "v_stride.batch", [](P& p) { p.v_stride = {0, 2 * 128, 128}; }),
      params_case("o_stride.seq 2^39", "o_stride.seq", [](P& p) { p.o_stride = {int64_t{1} << 38, int64_t{1} << 39, 128}; }),
      params_case("v_stride.batch 2^40", "v_stride.batch", [](P& p) { p.v_stride = {int64_t{1} << 40, 2 * 128, 128}; }),
      params_case("k offsets overflow 64 bits", "k_stride.batch", [](P& p) {
        p.k_stride = {int64_t{1} << 38, 2 * 128, 128};
        p.batch = int64_t{1} << 30;
      }),
      params_case("contiguous strides overflow 64 bits", "q_stride", [](P& p) {
        p.seqlen_q = k2to31 - 1;
        p.heads_q = p.heads_kv = k2to31 - 1;
      }),
      // aliasing
      params_case("o == q", "o", [](P& p) { p.o = const_cast<void*>(p.q); }),
      params_case("o inside v", "o", [](P& p) { p.o = static_cast<char*>(const_cast<void*>(p.v)) + 4096; }),
      params_case("o == k", "o", [](P& p) { p.o = const_cast<void*>(p.k); }),
      params_case("lse inside o", "lse", [](P& p) {
        p.return_lse = true;
        p.lse = reinterpret_cast<float*>(static_cast<char*>(p.o) + 64);
      }),
      params_case("lse inside q", "lse", [](P& p) {
        p.return_lse = true;
        p.lse = reinterpret_cast<float*>(const_cast<void*>(p.q));
      }),
      // serving shapes: what has a host-side value (device arrays are the caller's promise: correctness.md)
      params_case("cu_seqlens_q misaligned", "cu_seqlens_q", [](P& p) {
        p.cu_seqlens_q = reinterpret_cast<const int32_t*>((uintptr_t{5} << 50) + 2);
      }),
      params_case("page_table misaligned", "page_table", [](P& p) {
        with_pages(p, 64, 10, 5);
        p.page_table = reinterpret_cast<const int32_t*>((uintptr_t{5} << 50) + 1);
      }),
      params_case("total_q without cu_seqlens_q", "total_q", [](P& p) { p.total_q = 50; }),
      params_case("total_q above batch * seqlen_q (max_seqlen_q too small)", "total_q", [](P& p) {
        p.cu_seqlens_q = reinterpret_cast<const int32_t*>(uintptr_t{5} << 50);
        p.total_q = p.batch * p.seqlen_q + 1;
      }),
      params_case("total_q negative", "total_q", [](P& p) {
        p.cu_seqlens_q = reinterpret_cast<const int32_t*>(uintptr_t{5} << 50);
        p.total_q = -1;
      }),
      params_case("total_k above batch * seqlen_k (max_seqlen_k too small)", "total_k", [](P& p) {
        p.cu_seqlens_k = reinterpret_cast<const int32_t*>(uintptr_t{5} << 50);
        p.total_k = p.batch * p.seqlen_k + 1;
      }),
      params_case("total_k without cu_seqlens_k", "total_k", [](P& p) { p.total_k = 10; }),
      params_case("page_size 8", "page_size", [](P& p) {
        with_pages(p, 8, 100, 40);
      }),
      params_case("page_size 96 (not a power of two)", "page_size", [](P& p) {
        with_pages(p, 96, 100, 40);
      }),
      params_case("page_size 512", "page_size", [](P& p) {
        with_pages(p, 512, 100, 40);
      }),
      params_case("num_pages 0", "num_pages", [](P& p) {
        with_pages(p, 64, 0, 5);
      }),
      params_case("max_pages_per_seq 0", "max_pages_per_seq", [](P& p) {
        with_pages(p, 64, 10, 0);
      }),
      params_case("seqlen_k beyond the page-table row", "seqlen_k", [](P& p) {
        with_pages(p, 64, 10, 4);  // 256 keys < seqlen_k 300
      }),
      params_case("total_k with a page table", "total_k", [](P& p) {
        with_pages(p, 64, 10, 5);
        p.cu_seqlens_k = reinterpret_cast<const int32_t*>(uintptr_t{6} << 50);
        p.total_k = 300;
      }),
      params_case("page_size without page_table", "page_table", [](P& p) { p.page_size = 64; }),
      params_case("window_left -2", "window_left", [](P& p) { p.window_left = -2; }),
      params_case("window_right -7", "window_right", [](P& p) { p.window_right = -7; }),
      params_case("window_left 2^31", "window_left", [](P& p) { p.window_left = int64_t{1} << 31; }),
      params_case("causal with window_right 3", "window_right", [](P& p) {
        p.causal = true;
        p.window_right = 3;
      }),
      params_case("softcap -1", "softcap", [](P& p) { p.softcap = -1.f; }),
      params_case("softcap NaN", "softcap", [](P& p) { p.softcap = std::nanf(""); }),
      params_case("softcap inf", "softcap", [](P& p) { p.softcap = INFINITY; }),
      params_case("softcap 3e38 (softcap * log2(e) overflows)", "softcap", [](P& p) { p.softcap = 3e38f; }),
      params_case("softcap 1e-45 (scale / cap overflows)", "softcap", [](P& p) { p.softcap = 1e-45f; }),
      params_case("sinks misaligned", "sinks", [](P& p) { p.sinks = reinterpret_cast<const float*>(uintptr_t{0x1002}); }),
      params_case("num_splits -1", "num_splits", [](P& p) { p.num_splits = -1; }),
      params_case("num_splits 257", "num_splits", [](P& p) { p.num_splits = 257; }),
      params_case("split_by_batch with num_splits 3", "split_by_batch", [](P& p) { p.num_splits = 3, p.split_by_batch = true; }),
      params_case("workspace misaligned", "workspace", [](P& p) {
        p.workspace = reinterpret_cast<void*>((uintptr_t{7} << 50) + 128);
        p.workspace_bytes = 1 << 20;
      }),
      params_case("workspace_bytes without workspace", "workspace", [](P& p) { p.workspace_bytes = 4096; }),
      merge_case("one state", "states", [](MergeParams& m) { m.states.resize(1); }),
      merge_case("nine states", "states", [](MergeParams& m) { m.states.resize(9, m.states[0]); }),
      merge_case("state o null", "states[1].o", [](MergeParams& m) { m.states[1].o = nullptr; }),
      merge_case("state lse misaligned", "states[0].lse", [](MergeParams& m) {
        m.states[0].lse = reinterpret_cast<const float*>((uintptr_t{2} << 50) + 2);
      }),
      merge_case("o is a state", "o", [](MergeParams& m) { m.o = const_cast<void*>(m.states[1].o); }),
      merge_case("head_dim_v 100", "head_dim_v", [](MergeParams& m) { m.head_dim_v = 100; }),
      merge_case("seqlen 0", "seqlen", [](MergeParams& m) { m.seqlen = 0; }),
      merge_case("total without cu_seqlens", "total", [](MergeParams& m) { m.total = 5; }),
      merge_case("total above batch * seqlen", "total", [](MergeParams& m) {
        m.cu_seqlens = reinterpret_cast<const int32_t*>(uintptr_t{6} << 50);
        m.total = 21;
      }),
      merge_case("dtype 7", "dtype", [](MergeParams& m) { m.dtype = static_cast<DType>(7); }),
      // 32-bit index limits of the kernels (Plan-dependent)
      plan_case("portable seqlen_k 2^31-1", "seqlen_k", Backend::portable, 90, [](P& p) { p.seqlen_k = k2to31 - 1; }),
      plan_case("portable seqlen_k 2^31-31 (tile_n 32)", "seqlen_k", Backend::portable, 90, [](P& p) { p.seqlen_k = k2to31 - 31; }),
      plan_case("portable seqlen_q 2^31-1", "seqlen_q", Backend::portable, 80, [](P& p) {
        p.batch = 1;  // batch strides of 2^39 elements and more are rejected on their own
        p.seqlen_q = k2to31 - 1;
      }),
      plan_case("portable causal token + seqlen_k", "seqlen_k", Backend::portable, 90, [](P& p) {
        p.head_dim = 64;  // tile_n 64, tile_m 128
        p.heads_q = p.heads_kv;  // no packing: the padded tile's last token is 127
        p.causal = true;
        p.seqlen_q = 40;  // above the decode kernel's rows: limit 2^31 - 1 - 127 + 40
        p.seqlen_k = k2to31 - 64;
      }),
      plan_case("portable work tiles", "batch", Backend::portable, 90, over_2_to_31_tiles(32)),
      plan_case("sm100 seqlen_k 2^31-1", "seqlen_k", Backend::automatic, 100, [](P& p) { p.seqlen_k = k2to31 - 1; }),
      plan_case("sm100 seqlen_q 2^31-1", "seqlen_q", Backend::automatic, 100, [](P& p) {
        p.batch = 1;
        p.heads_kv = p.heads_q;
        p.seqlen_q = k2to31 - 1;
      }),
      plan_case("sm100 seqlen_q 2^28 x 8 packed heads", "seqlen_q", Backend::sm100, 100, [](P& p) {
        p.batch = 1;
        p.heads_q = 64;
        p.heads_kv = 8;
        p.seqlen_q = int64_t{1} << 28;
      }),
      plan_case("sm100 seqlen_q 2^24 x 128 packed heads", "seqlen_q", Backend::sm100, 100, [](P& p) {
        p.heads_q = 128;
        p.heads_kv = 1;
        p.seqlen_q = int64_t{1} << 24;
      }),
      plan_case("sm100 causal token + seqlen_k", "seqlen_k", Backend::sm100, 100, [](P& p) {
        p.causal = true;
        p.heads_kv = p.heads_q = 1;
        p.seqlen_q = p.seqlen_k = (int64_t{1} << 30) + 1;
      }),
      plan_case("sm100 work tiles", "batch", Backend::sm100, 100, over_2_to_31_tiles(64)),
      plan_case("sm100_emulated seqlen_k 2^31-1", "seqlen_k", Backend::sm100_emulated, 90, [](P& p) { p.seqlen_k = k2to31 - 1; }),
      // KernelConfig through prewarm (a per-configuration failure) and describe (thrown)
      prewarm_case("q_heads_per_kv 0", "q_heads_per_kv", [](KernelConfig& c) { c.q_heads_per_kv = 0; }),
      prewarm_case("q_heads_per_kv -3", "q_heads_per_kv", [](KernelConfig& c) { c.q_heads_per_kv = -3; }),
      prewarm_case("q_heads_per_kv 1000000", "q_heads_per_kv", [](KernelConfig& c) { c.q_heads_per_kv = 1000000; }),
      prewarm_case("q_heads_per_kv 257", "q_heads_per_kv", [](KernelConfig& c) { c.q_heads_per_kv = 257; }),
      prewarm_case("dtype 5", "dtype", [](KernelConfig& c) { c.dtype = static_cast<DType>(5); }),
      prewarm_case("backend 9", "backend", [](KernelConfig& c) { c.backend = static_cast<Backend>(9); }),
      prewarm_case("head_dim 80", "head_dim", [](KernelConfig& c) { c.head_dim = 80; }),
      prewarm_case("head_dim -64", "head_dim", [](KernelConfig& c) { c.head_dim = -64; }),
      prewarm_case("head_dim_v -64", "head_dim_v", [](KernelConfig& c) { c.head_dim_v = -64; }),
      prewarm_case("head dims (192, 64)", "head_dim_v", [](KernelConfig& c) {
        c.head_dim = 192;
        c.head_dim_v = 64;
      }),
      prewarm_case("arch -1", "arch", [](KernelConfig& c) { c.arch = -1; }),
      prewarm_case("arch 75", "arch", [](KernelConfig& c) { c.arch = 75; }),
      prewarm_case("arch 1000000", "arch", [](KernelConfig& c) { c.arch = 1000000; }),
      prewarm_case("arch 0 without a device", "arch", [](KernelConfig& c) { c.arch = 0; }),
      describe_case("q_heads_per_kv 0", "q_heads_per_kv", [](KernelConfig& c) { c.q_heads_per_kv = 0; }),
      describe_case("q_heads_per_kv 1000000", "q_heads_per_kv", [](KernelConfig& c) { c.q_heads_per_kv = 1000000; }),
      describe_case("head_dim 0", "head_dim", [](KernelConfig& c) { c.head_dim = 0; }),
      describe_case("dtype -1", "dtype", [](KernelConfig& c) { c.dtype = static_cast<DType>(-1); }),
      describe_case("arch 7", "arch", [](KernelConfig& c) { c.arch = 7; }),
      describe_case("sm100 backend with head_dim 32", "head dims", [](KernelConfig& c) {
        c.backend = Backend::sm100;
        c.arch = 100;
        c.head_dim = 32;
      }),
      // environment
      env_case("FA4_COMPILE_THREADS", " 4"),
      env_case("FA4_COMPILE_THREADS", "4 "),
      env_case("FA4_COMPILE_THREADS", "+4"),
      env_case("FA4_COMPILE_THREADS", "-1"),
      env_case("FA4_COMPILE_THREADS", "1025"),
      env_case("FA4_COMPILE_THREADS", "99999999999999999999"),
      env_case("FA4_COMPILE_THREADS", "0x10"),
      env_case("FA4_COMPILE_THREADS", "4.0"),
      env_case("FA4_COMPILE_THREADS", "many"),
      env_case("FA4_DISK_CACHE", "2"),
      env_case("FA4_NO_JIT", "yes please"),
      env_case("FA4_SELF_CHECK", " 1"),
      env_case("FA4_LOG_LEVEL", "loud"),
      env_case("FA4_BACKEND", "cuda"),
      env_case("FA4_DUMP_DIR", "/proc/fa4rt-dump", true),
      env_case("FA4_DUMP_DIR", "/proc/self", true),
      {"env/FA4_DUMP_DIR under a regular file", "FA4_DUMP_DIR", [] {
         const std::string file = regular_file();
         setenv("FA4_DISK_CACHE", "0", 1);
         setenv("FA4_DUMP_DIR", (file + "/dump").c_str(), 1);
         const Outcome out = catching([] { Attention attention(Options::from_env()); });
         std::remove(file.c_str());
         return out;
       }},
      {"env/FA4_DUMP_DIR is a regular file", "FA4_DUMP_DIR", [] {
         const std::string file = regular_file();
         setenv("FA4_DISK_CACHE", "0", 1);
         setenv("FA4_DUMP_DIR", file.c_str(), 1);
         const Outcome out = catching([] { Attention attention(Options::from_env()); });
         std::remove(file.c_str());
         return out;
       }},
      // Options set in code
      options_case("max_compile_threads -1", "max_compile_threads", [](Options& o) { o.max_compile_threads = -1; }),
      options_case("max_compile_threads 5000", "max_compile_threads", [](Options& o) { o.max_compile_threads = 5000; }),
      options_case("log_level 42", "log_level", [](Options& o) { o.log_level = static_cast<LogLevel>(42); }),
      options_case("backend 42", "backend", [](Options& o) { o.backend = static_cast<Backend>(42); }),
      options_case("debug_fault 42", "debug_fault", [](Options& o) { o.debug_fault = static_cast<DebugFault>(42); }),
      options_case("dump_dir /proc/fa4rt-dump", "dump_dir", [](Options& o) { o.dump_dir = "/proc/fa4rt-dump"; }),
      // C ABI
      c_case("fa4_create(NULL)", "out", [] { return fa4_create(nullptr); }),
      c_case("fa4_create with FA4_COMPILE_THREADS=' 4'", "FA4_COMPILE_THREADS", [] {
        setenv("FA4_COMPILE_THREADS", " 4", 1);
        fa4_attention* h = reinterpret_cast<fa4_attention*>(uintptr_t{1});
        const int rc = fa4_create(&h);
        return h ? FA4_OK : rc;  // *out must be NULL on failure
      }),
      c_case("fa4_run NULL handle", "handle", [] {
        const fa4_params p = c_params();
        return fa4_run(nullptr, &p, nullptr);
      }),
      c_case("fa4_run destroyed handle", "handle", [] {
        const fa4_params p = c_params();
        return fa4_run(destroyed_handle(), &p, nullptr);
      }),
      c_case("fa4_run garbage handle", "handle", [] {
        const fa4_params p = c_params();
        return fa4_run(reinterpret_cast<fa4_attention*>(uintptr_t{0xdeadbeef}), &p, nullptr);
      }),
      c_case("fa4_destroy twice", "handle", [] { return fa4_destroy(destroyed_handle()); }),
      c_case("fa4_destroy garbage handle", "handle", [] { return fa4_destroy(reinterpret_cast<fa4_attention*>(uintptr_t{0x1234567})); }),
      c_case("fa4_prewarm NULL handle", "handle", [] {
        const fa4_config c = c_config();
        return fa4_prewarm(nullptr, &c, 1, nullptr);
      }),
      c_case("fa4_prewarm destroyed handle", "handle", [] {
        const fa4_config c = c_config();
        return fa4_prewarm(destroyed_handle(), &c, 1, nullptr);
      }),
      c_case("fa4_run NULL params", "params", [] { return fa4_run(live_handle(), nullptr, nullptr); }),
      c_run_case("dtype 2", "dtype", [](fa4_params& p) { p.dtype = 2; }),
      c_run_case("dtype -1", "dtype", [](fa4_params& p) { p.dtype = -1; }),
      c_run_case("q NULL", "q", [](fa4_params& p) { p.q = nullptr; }),
      c_run_case("softmax_scale 3e38", "softmax_scale", [](fa4_params& p) { p.softmax_scale = 3e38f; }),
      c_run_case("heads_kv 0", "heads_kv", [](fa4_params& p) { p.heads_kv = 0; }),
      c_case("fa4_prewarm NULL configs", "configs", [] { return fa4_prewarm(live_handle(), nullptr, 2, nullptr); }),
      c_case("fa4_prewarm count -1", "count", [] {
        const fa4_config c = c_config();
        return fa4_prewarm(live_handle(), &c, -1, nullptr);
      }),
      c_prewarm_case("dtype 9", "configs[0].dtype", [](fa4_config& c) { c.dtype = 9; }),
      c_prewarm_case("q_heads_per_kv 0", "q_heads_per_kv", [](fa4_config& c) { c.q_heads_per_kv = 0; }),
      c_prewarm_case("q_heads_per_kv -3", "q_heads_per_kv", [](fa4_config& c) { c.q_heads_per_kv = -3; }),
      c_prewarm_case("q_heads_per_kv 1000000", "q_heads_per_kv", [](fa4_config& c) { c.q_heads_per_kv = 1000000; }),
      c_prewarm_case("head_dim 80", "head_dim", [](fa4_config& c) { c.head_dim = 80; }),
      c_prewarm_case("arch 1000000", "arch", [](fa4_config& c) { c.arch = 1000000; }),
  };
  return t;
}

// Runs one case in a child process; its outcome comes back through a pipe.
struct Result {
  bool crashed = false;
  Outcome outcome;
};

Result run_isolated(const Case& c) {
  int fds[2];
  if (pipe(fds) != 0) return {true, {}};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Outcome o = c.attempt();
    const std::string text = std::to_string(o.rejected) + "\n" + std::to_string(o.code) + "\n" + o.message;
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);  // no atexit handlers or static destructors of the parent's state in the child
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.crashed = true;
    return r;
  }
  const size_t first = text.find('\n'), second = text.find('\n', first + 1);
  if (first == std::string::npos || second == std::string::npos) {
    r.crashed = true;  // the child died before reporting
    return r;
  }
  r.outcome.rejected = text.substr(0, first) == "1";
  r.outcome.code = std::stoi(text.substr(first + 1, second - first - 1));
  r.outcome.message = text.substr(second + 1);
  return r;
}

TEST(BadInput, EveryInputIsATypedErrorNamingItsField) {
  const std::vector<Case> cases = bad_inputs();
  int typed = 0, accepted = 0, crashes = 0, untyped = 0;
  for (const Case& c : cases) {
    const Result r = run_isolated(c);
    const Outcome& o = r.outcome;
    const bool typed_code = o.code == static_cast<int>(ErrorCode::invalid_argument) || o.code == static_cast<int>(ErrorCode::unsupported);
    const bool names_field = o.message.find(c.field) != std::string::npos;
    if (r.crashed) {
      ++crashes;
      ADD_FAILURE() << c.name << ": crashed";
    } else if (!o.rejected) {
      ++accepted;
      ADD_FAILURE() << c.name << ": accepted";
    } else if (!typed_code || !names_field) {
      ++untyped;
      ADD_FAILURE() << c.name << ": code " << o.code << ", message does not name '" << c.field << "' or is not typed: " << o.message;
    } else {
      ++typed;
    }
  }
  std::printf("bad inputs: %zu tried, %d typed errors, %d accepted, %d crashes%s\n", cases.size(), typed, accepted,
              crashes, untyped ? (", " + std::to_string(untyped) + " errors untyped or not naming the field").c_str() : "");
  EXPECT_GE(cases.size(), 83u);
  EXPECT_EQ(typed, static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace fa4
