// The FA4 sm100 kernel, statically: Plan invariants and an NVRTC compile of every supported configuration
// for sm_100a (resource report: no spills, shared memory within the limit) and for its sm_90a emulation.
#include <gtest/gtest.h>

#include "fa4/fa4.hpp"
#include "runtime/codegen.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/backend.hpp"
#include "test_util.hpp"

namespace fa4 {
namespace {

constexpr int kSmemLimit = 232448;  // 227 KB opt-in per block on sm_100 (and sm_90)

std::vector<KernelKey> sm100_keys(Backend backend) {
  std::vector<KernelKey> keys;
  const int arch = backend == Backend::sm100 ? 100 : 90;
  for (const KernelConfig& c : supported_configs(backend, arch)) keys.push_back(detail::key_for_config(c, arch));
  // GQA packing variants of one configuration.
  for (int ratio : {4, 8, 32}) {
    KernelConfig c;
    c.backend = backend;
    c.q_heads_per_kv = ratio;
    keys.push_back(detail::key_for_config(c, arch));
  }
  // Softcapping, sinks and windows, alone and together, on every head dim it serves.
  for (auto [d, dv] : supported_head_dims())
    for (int variant : {1, 2, 4, 7}) {
      KernelConfig c;
      c.backend = backend;
      c.head_dim = d, c.head_dim_v = dv, c.causal = variant != 2, c.lse = true;
      c.softcap = variant & 1, c.sinks = variant & 2, c.window = variant & 4;
      const KernelKey key = detail::key_for_config(c, arch);
      if (detail::supports(key, nullptr)) keys.push_back(key);
    }
  // Ragged batches (varlen) and paged caches, alone, GQA-packed and with every variant, on every head dim it
  // serves.
  for (auto [d, dv] : supported_head_dims())
    for (int variant : {0, 1, 2, 3, 4}) {
      KernelConfig c;
      c.backend = backend;
      c.head_dim = d, c.head_dim_v = dv, c.causal = variant % 3 != 0, c.lse = true, c.varlen = variant != 3;
      c.paged = variant >= 3;
      c.q_heads_per_kv = variant == 1 || variant == 3 ? 8 : 1;
      c.softcap = c.sinks = c.window = variant == 2 || variant == 4;
      const KernelKey key = detail::key_for_config(c, arch);
      if (detail::supports(key, nullptr)) keys.push_back(key);
    }
  return keys;
}

std::string key_label(const testing::TestParamInfo<KernelKey>& info) { return info.param.name(); }

class Sm100Plan : public testing::TestWithParam<KernelKey> {};

TEST_P(Sm100Plan, Invariants) {
  const Plan p = detail::make_plan(GetParam());
  EXPECT_LE(p.smem_bytes, kSmemLimit);
  EXPECT_LE(p.tmem_columns, 512);
  EXPECT_EQ(p.registers_total(), p.threads * p.launch_registers())
      << "setmaxnreg budgets must use exactly the CTA's registers at launch (an increase past them waits forever)";
  EXPECT_EQ(p.q_tiles == 2, p.key.head_dim_v <= 128) << "two Q tiles while S and O of both fit in TMEM";
  EXPECT_GE(p.kv_stages, 2) << "K and V alternate in the ring: fewer than 2 slots deadlocks";
  for (const TmemRegion& r : p.tmem) EXPECT_LE(r.first_column + r.columns, p.tmem_columns) << r.name;
  // S and O regions are disjoint; P lies inside its S.
  auto region = [&](const std::string& name) {
    for (const TmemRegion& r : p.tmem)
      if (r.name == name) return r;
    ADD_FAILURE() << "no TMEM region " << name;
    return TmemRegion{};
  };
  std::vector<std::string> o_regions = {"O0"};
  if (p.q_tiles == 2) {
    o_regions.push_back("O1");
    EXPECT_EQ(region("O1").first_column, region("O0").first_column + p.key.head_dim_v) << "the kernel's o_col(s)";
  }
  for (const char* s : {"S0", "S1"})
    for (const std::string& o : o_regions)
      EXPECT_TRUE(region(s).first_column + region(s).columns <= region(o).first_column ||
                  region(o).first_column + region(o).columns <= region(s).first_column);
  // P_s lies inside S_s, and then the next QK into S_s waits for PvDone; or P_s has columns of its own,
  // disjoint from every other region, and only a one-tile CTA's correction waits on PvDone.
  auto disjoint = [](const TmemRegion& a, const TmemRegion& b) {
    return a.first_column + a.columns <= b.first_column || b.first_column + b.columns <= a.first_column;
  };
  const int pv_done = test::barrier(p, "PvDone").instances;
  for (int t = 0; t < 2; ++t) {
    const TmemRegion ps = region("P" + std::to_string(t)), st = region("S" + std::to_string(t));
    const bool inside = ps.first_column >= st.first_column && ps.first_column + ps.columns <= st.first_column + st.columns;
    if (inside) {
      EXPECT_EQ(pv_done, p.q_tiles) << ps.name << " lies in " << st.name << ": the QK into it must wait for PvDone";
    } else {
      EXPECT_EQ(pv_done, p.q_tiles == 1 ? 2 : 0) << ps.name << " has its own columns: only one tile's correction waits on PvDone";
      for (const TmemRegion& r : p.tmem)
        if (r.name != ps.name) EXPECT_TRUE(disjoint(ps, r)) << ps.name << " vs " << r.name;
    }
  }
  EXPECT_EQ(region("P0").first_column >= 2 * p.tile_n, p.q_tiles == 1 || p.key.head_dim_v <= 64)
      << "P has its own columns exactly where they fit";
  // Shared-memory buffers do not overlap and fit. O may be staged over Q, but then O tile s lies inside
  // Q tile s: the epilogue releases Q tile s after storing O tile s, and nothing else may still live there.
  for (size_t i = 0; i < p.smem.size(); ++i) {
    EXPECT_LE(p.smem[i].offset + p.smem[i].bytes, p.smem_bytes) << p.smem[i].name;
    for (size_t j = i + 1; j < p.smem.size(); ++j) {
      const SmemBuffer &a = p.smem[i], &b = p.smem[j];
      if (a.name == "Q" && b.name == "O" && b.offset < a.offset + a.bytes) {
        const int o_tile_bytes = p.tile_m * p.key.head_dim_v * 2;
        for (int s = 0; s < p.q_tiles; ++s) {
          const int q_first = a.offset + s * a.stride, o_first = b.offset + s * b.stride;
          EXPECT_GE(o_first, q_first) << "O tile " << s << " starts before Q tile " << s;
          EXPECT_LE(o_first + o_tile_bytes, q_first + a.stride) << "O tile " << s << " leaves Q tile " << s;
        }
        continue;
      }
      EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset) << a.name << " vs " << b.name;
    }
  }
  // Warp roles cover the warps exactly once.
  std::vector<int> owner(p.threads / 32, 0);
  for (const WarpRole& r : p.roles)
    for (int w = r.first_warp; w < r.first_warp + r.warps; ++w) owner.at(w)++;
  for (int w = 0; w < static_cast<int>(owner.size()); ++w) EXPECT_EQ(owner[w], 1) << "warp " << w;
}

INSTANTIATE_TEST_SUITE_P(Hardware, Sm100Plan, testing::ValuesIn(sm100_keys(Backend::sm100)), key_label);

class Sm100Compile : public testing::TestWithParam<KernelKey> {};

// Compiles with ptxas --verbose and checks the resource report of the kernel entry.
TEST_P(Sm100Compile, CompilesWithoutSpills) {
  const KernelKey key = GetParam();
  const Plan plan = detail::make_plan(key);
  const std::string source = detail::assemble_source(plan);
  std::vector<std::string> options = detail::compile_options(key);
  options.push_back("--ptxas-options=--verbose");
  const detail::CompiledKernel k = detail::nvrtc_compile(source, options, key.name(), "");
  ASSERT_GT(k.cubin.size(), 1000u);
  const detail::ResourceUsage r = detail::parse_ptxas_report(k.log);
  ASSERT_TRUE(r.found) << k.log;
  if (key.backend == Backend::sm100) {
    EXPECT_EQ(r.spill_store_bytes, 0) << "spill stores in " << key.name() << "\n" << k.log;
    EXPECT_EQ(r.spill_load_bytes, 0) << "spill loads in " << key.name() << "\n" << k.log;
    EXPECT_EQ(r.stack_bytes, 0) << "local memory in " << key.name() << "\n" << k.log;
  }
  // The launch allocates the reported count a thread; the setmaxnreg budgets share out exactly the cap.
  if (key.backend == Backend::sm100)
    EXPECT_EQ(r.registers, plan.launch_registers()) << "launch bounds (" << plan.threads << " threads, 1 CTA/SM)";
  else
    EXPECT_LE(r.registers, plan.launch_registers()) << "launch bounds (" << plan.threads << " threads, 1 CTA/SM)";
  std::cout << key.name() << ": " << k.milliseconds << " ms, " << r.registers << " registers, spills " << r.spill_store_bytes
            << "/" << r.spill_load_bytes << " B\n";
}

INSTANTIATE_TEST_SUITE_P(Hardware, Sm100Compile, testing::ValuesIn(sm100_keys(Backend::sm100)), key_label);
INSTANTIATE_TEST_SUITE_P(Emulated, Sm100Compile, testing::ValuesIn(sm100_keys(Backend::sm100_emulated)), key_label);

TEST(Sm100Fault, EveryDebugFaultCompiles) {
  for (DebugFault f : {DebugFault::skip_rescale, DebugFault::early_normalize, DebugFault::tmem_reuse_race,
                       DebugFault::wrong_gqa_map, DebugFault::assume_mma_order, DebugFault::skip_wait_st,
                       DebugFault::skip_wait_ld, DebugFault::skip_relay_fence, DebugFault::trap, DebugFault::hang,
                       DebugFault::spin}) {
    KernelConfig c;
    c.backend = Backend::sm100_emulated;
    c.q_heads_per_kv = 4;
    KernelKey key = detail::key_for_config(c, 90);
    key.fault = f;
    const Plan plan = detail::make_plan(key);
    EXPECT_NO_THROW(detail::nvrtc_compile(detail::assemble_source(plan), detail::compile_options(key), key.name(), ""))
        << to_string(f);
  }
}

// The adversarial emulation checks the fence discipline at the kernel's own wait() and signal() helpers,
// so the kernel must not arrive on a barrier any other way (the TMA loads' expect_tx arrives come from the
// load warp, which does no tcgen05 work).
TEST(Sm100Kernel, ThreadSyncsGoThroughTheCheckedHelpers) {
  const std::string source(detail::embedded_source("sm100/fa4_fwd.cuh"));
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = source.find(what); at != std::string::npos; at = source.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("mbarrier_arrive("), 1u) << "mbarrier_arrive( outside signal()";
  // Waits: the mbarrier try-waits only in try_wait(), the test-wait (hardware's fast path) and try_wait() only
  // in wait() (as (bar, parity)).
  EXPECT_EQ(count("mbarrier_wait_parity("), 0u) << "an unchecked mbarrier wait";
  EXPECT_EQ(count("mbarrier_try_wait_parity"), 2u) << "mbarrier try-waits outside try_wait()";
  EXPECT_EQ(count("mbarrier_test_wait_parity"), 1u) << "an mbarrier test-wait outside wait()";
  EXPECT_EQ(count("try_wait("), count("try_wait(bar, parity)") + 1) << "try_wait() called outside wait()";
  EXPECT_GE(count("try_wait(bar, parity)"), 1u);
  EXPECT_EQ(source.find("named_barrier_"), std::string::npos) << "named barriers bypass the fence-discipline hooks";
}

}  // namespace
}  // namespace fa4
