// The Hopper kernel (Backend::sm90), statically: Plan invariants and an NVRTC compile of every supported
// configuration for sm_90a: no spills, no local memory, and no wgmma serialized by ptxas (its C75xx
// "Potential Performance Loss" notes: a wgmma pipeline that ptxas cannot keep asynchronous).
#include <gtest/gtest.h>

#include "fa4/fa4.hpp"
#include "runtime/backend.hpp"
#include "runtime/codegen.hpp"
#include "runtime/launch.hpp"
#include "runtime/nvrtc.hpp"
#include "test_util.hpp"

namespace fa4 {
namespace {

constexpr int kSmemLimit = 232448;  // 227 KB opt-in per block on sm_90

std::vector<KernelKey> sm90_keys() {
  std::vector<KernelKey> keys;
  for (const KernelConfig& c : supported_configs(Backend::sm90, 90)) keys.push_back(detail::key_for_config(c, 90));
  for (int ratio : {4, 8, 32}) {  // GQA packing variants
    KernelConfig c;
    c.backend = Backend::sm90;
    c.q_heads_per_kv = ratio;
    keys.push_back(detail::key_for_config(c, 90));
  }
  for (auto [d, dv] : supported_head_dims())  // softcapping, sinks and windows, alone and together, every head dim
    for (int variant : {1, 2, 4, 7}) {
      KernelConfig c;
      c.backend = Backend::sm90;
      c.head_dim = d, c.head_dim_v = dv, c.causal = variant != 2, c.lse = true;
      c.softcap = variant & 1, c.sinks = variant & 2, c.window = variant & 4;
      const KernelKey key = detail::key_for_config(c, 90);
      if (detail::supports(key, nullptr)) keys.push_back(key);
    }
  for (auto [d, dv] : supported_head_dims())  // ragged batches and paged caches, alone and with every variant
    for (int variant : {0, 1, 2, 3}) {
      KernelConfig c;
      c.backend = Backend::sm90;
      c.head_dim = d, c.head_dim_v = dv, c.causal = variant & 1, c.lse = true, c.varlen = variant != 3;
      c.paged = variant >= 2;
      c.softcap = c.sinks = c.window = variant & 2;
      c.q_heads_per_kv = variant == 1 ? 8 : 1;
      c.dtype = variant == 2 ? DType::fp16 : DType::bf16;
      const KernelKey key = detail::key_for_config(c, 90);
      if (detail::supports(key, nullptr)) keys.push_back(key);
    }
  return keys;
}

std::string key_label(const testing::TestParamInfo<KernelKey>& info) { return info.param.name(); }

TEST(Sm90Backend, ServesEveryDenseHeadDimButTheSmallest) {
  int served = 0;
  for (auto [d, dv] : supported_head_dims()) {
    KernelConfig c;
    c.backend = Backend::sm90;
    c.head_dim = d;
    c.head_dim_v = dv;
    const bool ok = detail::supports(detail::key_for_config(c, 90), nullptr);
    EXPECT_EQ(ok, d != 32 && !(d == 192 && dv == 192)) << d << "," << dv;
    served += ok;
  }
  EXPECT_EQ(served, 5);
}

// GQA packing puts whole tokens in a tile; where O is stored a warpgroup's 64 rows at a time from the K/V
// ring (dv 256, and causal (192, 128) with its 128-key blocks), whole tokens in each warpgroup's rows too.
// Every packed key plans.
TEST(Sm90Backend, PacksWholeTokensPerTileAndPerWarpgroupWhereOIsInTheRing) {
  for (auto [d, dv] : supported_head_dims())
    for (bool causal : {false, true})
      for (int ratio : {2, 8, 32, 64, 96, 128}) {
        KernelConfig c;
        c.backend = Backend::sm90;
        c.head_dim = d, c.head_dim_v = dv, c.q_heads_per_kv = ratio, c.causal = causal;
        const KernelKey key = detail::key_for_config(c, 90);
        if (!detail::supports(key, nullptr)) continue;
        const Plan p = detail::make_plan(key);
        // O staged in the ring (at K's offset): each warpgroup's 64 rows stored as a box of their own.
        const bool o_in_ring = test::smem_buffer(p, "O").offset == test::smem_buffer(p, "K").offset;
        EXPECT_EQ(o_in_ring, dv == 256 || (causal && d == 192)) << key.name();
        const int whole = o_in_ring ? 64 : p.tile_m;
        EXPECT_EQ(key.gqa_pack, whole % ratio == 0 ? ratio : 1) << key.name() << " q heads per kv " << ratio;
      }
}

// Dense causal tiles go longest first across the heads of an L2 section when a head group's K/V is 1 MiB or
// more, and head after head below that (then a head's few tiles share its K/V in L2 as they run together).
TEST(Sm90Backend, CausalTilesBySectionsOnlyForHeadsOfAMebibyteOrMore) {
  struct Case {
    int d, batch, seqlen, heads_q, heads_kv, section;
  };
  // d128: 512 tokens of K and V = 256 KiB a head, 2048 = 1 MiB (32 heads a 32 MiB section), 16k = 8 MiB (4).
  // d256 at 1024 tokens: 1 MiB. GQA 32/8 packed: a group is one kv head. MQA unpacked: all q heads share one.
  for (const Case& c : {Case{128, 32, 512, 16, 16, 0}, Case{128, 8, 2048, 16, 16, 32}, Case{128, 1, 16384, 16, 16, 4},
                        Case{256, 16, 1024, 8, 8, 32}, Case{256, 32, 512, 8, 8, 0}, Case{128, 8, 2048, 32, 8, 32},
                        Case{128, 1, 4096, 2, 2, 2}})
    for (bool causal : {true, false}) {
      KernelConfig config;
      config.backend = Backend::sm90;
      config.head_dim = config.head_dim_v = c.d, config.causal = causal, config.q_heads_per_kv = c.heads_q / c.heads_kv;
      const Plan plan = detail::make_plan(detail::key_for_config(config, 90));
      detail::Problem problem;
      problem.params.batch = c.batch;
      problem.params.seqlen_q = problem.params.seqlen_k = c.seqlen;
      problem.params.heads_q = c.heads_q, problem.params.heads_kv = c.heads_kv;
      problem.params.head_dim = problem.params.head_dim_v = c.d;
      problem.params.causal = causal;
      problem.q_heads_per_kv = c.heads_q / c.heads_kv;
      fa4k::AttentionArgs args{};
      detail::fill_schedule(plan, problem, args);
      EXPECT_EQ(args.tile_section, causal ? c.section : 0) << plan.key.name() << " " << c.batch << "x" << c.seqlen;
    }
}

// Ragged batches, seqused_k (varlen) and paged KV run on the sm90 kernel; split-KV and the decode kernel's
// shapes stay on the portable kernels, and automatic selection on sm_90 follows.
TEST(Sm90Backend, TakesRaggedAndPagedButNotSplitsOrDecode) {
  for (int serving : {1, 2, 3}) {
    KernelConfig c;
    c.varlen = serving & 1, c.paged = serving & 2;
    c.backend = Backend::sm90;
    std::string why;
    EXPECT_TRUE(detail::supports(detail::key_for_config(c, 90), &why)) << why;
    c.backend = Backend::automatic;
    const KernelKey key = detail::key_for_config(c, 90);
    EXPECT_EQ(key.backend, Backend::sm90);
    EXPECT_EQ(key.varlen, c.varlen) << "the ragged kernel is its own key";
    EXPECT_EQ(key.paged, c.paged);
    for (bool split : {false, true}) {
      KernelConfig o = c;
      o.split = split, o.decode = !split;
      EXPECT_EQ(detail::key_for_config(o, 90).backend, Backend::portable) << serving << split;
    }
    c.backend = Backend::sm90, c.split = true;
    EXPECT_FALSE(detail::supports(detail::key_for_config(c, 90), nullptr));
  }
}

class Sm90Plan : public testing::TestWithParam<KernelKey> {};

TEST_P(Sm90Plan, Invariants) {
  const Plan p = detail::make_plan(GetParam());
  EXPECT_EQ(p.key.target(), "sm_90a");
  EXPECT_LE(p.smem_bytes, kSmemLimit);
  // setmaxnreg only moves registers within what the CTA was launched with: threads x the most ptxas gives
  // each (65536 / threads, in steps of 8). Asking for more makes the consumers' increase wait forever.
  EXPECT_LE(p.registers_total(), p.threads * p.launch_registers()) << "setmaxnreg budgets exceed the CTA's registers";
  EXPECT_GE(p.kv_stages, 2);
  EXPECT_EQ(p.tile_n % 16, 0) << "PV steps over 16 keys";
  EXPECT_LE(p.tile_n, 256) << "one TMA box and one wgmma N";
  // Buffers fit and do not overlap, except O staged in the ring (then at K's offset: its 64-row halves in a K
  // and a V slot, each slot large enough).
  for (size_t i = 0; i < p.smem.size(); ++i) {
    EXPECT_LE(p.smem[i].offset + p.smem[i].bytes, p.smem_bytes) << p.smem[i].name;
    EXPECT_EQ(p.smem[i].name == "Bars" ? 0 : p.smem[i].offset % 1024, 0) << p.smem[i].name << ": swizzle atoms need 1024-B alignment";
    for (size_t j = i + 1; j < p.smem.size(); ++j) {
      const SmemBuffer &a = p.smem[i], &b = p.smem[j];
      if (b.name == "O" && a.offset == b.offset) {
        EXPECT_EQ(a.name, "K") << "O staged in the ring lies at K's offset";
        const SmemBuffer& v = test::smem_buffer(p, "V");
        EXPECT_LE(b.bytes / 2, std::min(a.stride, v.stride)) << "half of O in one K or V slot";
        continue;
      }
      EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset) << a.name << " vs " << b.name;
    }
  }
  // Q in one or two buffers (the kernel's kQStages, from the QFull count): two wherever they fit beside the
  // deepest K/V ring with O in a buffer of its own, one when O is staged in the ring or no second one fits.
  const SmemBuffer &q = test::smem_buffer(p, "Q"), &o = test::smem_buffer(p, "O");
  ASSERT_GT(q.stride, 0);
  const int q_stages = q.bytes / q.stride;
  EXPECT_EQ(q.bytes, q_stages * q.stride);
  EXPECT_TRUE(q_stages == 1 || q_stages == 2);
  const bool o_in_ring = o.offset == test::smem_buffer(p, "K").offset;
  if (o_in_ring) EXPECT_EQ(q_stages, 1) << "O in the ring: no room for a second Q buffer";
  if (q_stages == 1 && !o_in_ring)
    EXPECT_GT(p.smem_bytes + q.stride, kSmemLimit) << "a second Q buffer fits beside " << p.kv_stages << " K/V stages";
  EXPECT_EQ(test::barrier(p, "QFull").instances, q_stages);
  EXPECT_EQ(test::barrier(p, "QEmpty").instances, q_stages);
  // Tiles are drawn the tile ring's depth ahead (a second Q buffer loads the next tile's Q early), dense
  // causal ones with one Q buffer only one, so that no CTA holds the next L2 section's longest tile while it
  // is still busy.
  const BarrierSpec& tile_ring = test::barrier(p, "TileFull");
  EXPECT_EQ(p.tiles_ahead, p.key.causal && !p.key.varlen && q_stages == 1 ? 1 : tile_ring.instances);
  // Roles cover the 12 warps once; the consumers are whole warpgroups (wgmma), and setmaxnreg gives one
  // budget to each warpgroup, so the roles of one warpgroup share it.
  std::vector<int> owner(p.threads / 32, 0), regs(p.threads / 128, -1);
  for (const WarpRole& r : p.roles) {
    if (r.name.rfind("Consumer", 0) == 0) EXPECT_TRUE(r.first_warp % 4 == 0 && r.warps == 4) << r.name;
    for (int w = r.first_warp; w < r.first_warp + r.warps; ++w) {
      owner.at(w)++;
      if (regs.at(w / 4) < 0) regs.at(w / 4) = r.registers;
      EXPECT_EQ(regs.at(w / 4), r.registers) << r.name << ": one register budget per warpgroup";
    }
  }
  for (int w = 0; w < static_cast<int>(owner.size()); ++w) EXPECT_EQ(owner[w], 1) << "warp " << w;
}

INSTANTIATE_TEST_SUITE_P(Configs, Sm90Plan, testing::ValuesIn(sm90_keys()), key_label);

class Sm90Compile : public testing::TestWithParam<KernelKey> {};

TEST_P(Sm90Compile, CompilesWithoutSpillsOrSerializedWgmma) {
  const KernelKey key = GetParam();
  const Plan plan = detail::make_plan(key);
  std::vector<std::string> options = detail::compile_options(key);
  options.push_back("--ptxas-options=--verbose");
  const detail::CompiledKernel k = detail::nvrtc_compile(detail::assemble_source(plan), options, key.name(), "");
  ASSERT_GT(k.cubin.size(), 1000u);
  const detail::ResourceUsage r = detail::parse_ptxas_report(k.log);
  ASSERT_TRUE(r.found) << k.log;
  EXPECT_EQ(r.spill_store_bytes, 0) << "spill stores in " << key.name() << "\n" << k.log;
  EXPECT_EQ(r.spill_load_bytes, 0) << "spill loads in " << key.name() << "\n" << k.log;
  EXPECT_EQ(r.stack_bytes, 0) << "local memory in " << key.name() << "\n" << k.log;
  EXPECT_EQ(k.log.find("Potential Performance Loss"), std::string::npos) << key.name() << "\n" << k.log;
  EXPECT_LE(r.registers, plan.launch_registers()) << "launch bounds (" << plan.threads << " threads, 1 CTA/SM) cap the entry";
  std::cout << key.name() << ": " << k.milliseconds << " ms, " << r.registers << " registers\n";
}

INSTANTIATE_TEST_SUITE_P(Configs, Sm90Compile, testing::ValuesIn(sm90_keys()), key_label);

// Every combination of flags at the two head dims whose consumers have the fewest registers to spare: d64
// (three consumer warpgroups at 160 registers, two with fp16 softcap) and d256 (S, P and a 128-column O in
// 232). ptxas's allocation is not monotone in the flags (a form with all variants may fit where one with
// fewer spills), so each form is compiled.
std::vector<KernelKey> tight_keys() {
  std::vector<KernelKey> keys;
  for (int d : {64, 256})
    for (int flags = 0; flags < 512; ++flags) {
      KernelConfig c;
      c.backend = Backend::sm90;
      c.head_dim = c.head_dim_v = d;
      c.dtype = flags & 1 ? DType::fp16 : DType::bf16;
      c.causal = flags & 2, c.lse = flags & 4, c.varlen = flags & 8, c.paged = flags & 16;
      c.softcap = flags & 32, c.window = flags & 64, c.sinks = flags & 128;
      c.q_heads_per_kv = flags & 256 ? 8 : 1;  // GQA packing
      const KernelKey key = detail::key_for_config(c, 90);
      if (detail::supports(key, nullptr)) keys.push_back(key);
    }
  return keys;
}

INSTANTIATE_TEST_SUITE_P(TightForms, Sm90Compile, testing::ValuesIn(tight_keys()), key_label);

}  // namespace
}  // namespace fa4
