// Invariants of the portable kernel's Plan (runtime/backends/portable/backend.cpp) for every supported configuration,
// the reasons it gives for unsupported keys, and its launch shape.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "fa4/fa4.hpp"
#include "runtime/codegen.hpp"
#include "runtime/backend.hpp"
#include "runtime/launch.hpp"
#include "test_util.hpp"

namespace fa4::detail {
namespace {

constexpr int kSmemLimit = 99 * 1024;  // sm_86/89/120 opt-in: every portable plan must fit it

std::vector<KernelKey> all_keys() {
  std::vector<KernelKey> keys;
  for (int arch : {80, 86, 89, 90, 100, 120})
    for (const KernelConfig& c : supported_configs(Backend::portable, arch)) keys.push_back(key_for_config(c, arch));
  return keys;
}

KernelKey portable_key(int d, int dv, int arch = 90) {
  KernelKey key;
  key.backend = Backend::portable;
  key.arch = arch;
  key.head_dim = d;
  key.head_dim_v = dv;
  return key;
}

TEST(PortablePlan, EveryDtypeHeadDimMaskAndLseIsSupported) {
  for (int arch : {80, 90, 100, 120}) {
    const std::vector<KernelConfig> configs = supported_configs(Backend::portable, arch);
    EXPECT_EQ(configs.size(), 7u * 2 * 2 * 2) << "arch " << arch;  // 7 (d, dv) pairs x dtype x causal x lse
  }
}

TEST(PortablePlan, InvariantsHoldForEveryConfiguration) {
  const std::regex identifier("[A-Z][A-Za-z0-9]*");
  for (const KernelKey& key : all_keys()) {
    SCOPED_TRACE(key.name());
    const Plan plan = make_plan(key);
    const int d = key.head_dim, dv = key.head_dim_v;
    EXPECT_EQ(plan.key, key);
    EXPECT_EQ(plan.kernel_name, "fa4_portable_fwd");
    EXPECT_EQ(plan.source, "portable/flash_fwd.cuh");
    EXPECT_EQ(plan.threads, 32 * plan.warps_m);
    EXPECT_EQ(plan.q_tiles, 1);
    EXPECT_FALSE(plan.persistent);

    // Tiles: each warp owns one or two m16 tiles; KV blocks and head dims are whole ldmatrix.x4 blocks and
    // whole 64-byte swizzle rows; the cp.async tile loads split evenly over the threads.
    ASSERT_GT(plan.warps_m, 0);
    EXPECT_EQ(plan.tile_m % plan.warps_m, 0);
    const int rows_per_warp = plan.tile_m / plan.warps_m;
    EXPECT_TRUE(rows_per_warp == 16 || rows_per_warp == 32) << rows_per_warp;
    EXPECT_EQ(plan.tile_n % 32, 0);
    EXPECT_EQ(d % 32, 0);
    EXPECT_EQ(dv % 32, 0);
    for (int rows : {plan.tile_m, plan.tile_n})
      for (int cols : {d, dv}) EXPECT_EQ(rows * (cols / 8) % plan.threads, 0) << rows << "x" << cols;
    EXPECT_GE(plan.kv_stages, 2);
    // Accumulators the planner budgets: fp32 O + S per thread.
    EXPECT_LE(rows_per_warp * dv / 32 + rows_per_warp * plan.tile_n / 32, 160);

    // Shared memory: Q, the K and V rings, O staged over Q; 128-byte aligned, inside smem_bytes, no overlap
    // except O within Q.
    const SmemBuffer& q = test::smem_buffer(plan, "Q");
    const SmemBuffer& k = test::smem_buffer(plan, "K");
    const SmemBuffer& v = test::smem_buffer(plan, "V");
    const SmemBuffer& o = test::smem_buffer(plan, "O");
    EXPECT_EQ(q.bytes, plan.tile_m * d * 2);
    EXPECT_EQ(k.bytes, plan.kv_stages * plan.tile_n * d * 2);
    EXPECT_EQ(v.bytes, plan.kv_stages * plan.tile_n * dv * 2);
    EXPECT_EQ(o.bytes, plan.tile_m * dv * 2);
    EXPECT_EQ(o.offset, q.offset);
    EXPECT_LE(o.bytes, q.bytes);
    for (const SmemBuffer& b : plan.smem) {
      EXPECT_TRUE(std::regex_match(b.name, identifier)) << b.name;
      EXPECT_EQ(b.offset % 128, 0) << b.name;
      EXPECT_GT(b.bytes, 0) << b.name;
      EXPECT_LE(b.offset + b.bytes, plan.smem_bytes) << b.name;
      EXPECT_FALSE(b.contents.empty()) << b.name;
    }
    EXPECT_EQ((plan.tile_n * d * 2) % 128, 0) << "K stages stay 128-byte aligned";
    EXPECT_EQ((plan.tile_n * dv * 2) % 128, 0) << "V stages stay 128-byte aligned";
    const SmemBuffer* distinct[] = {&q, &k, &v};
    for (int i = 0; i < 3; ++i)
      for (int j = i + 1; j < 3; ++j)
        EXPECT_TRUE(distinct[i]->offset + distinct[i]->bytes <= distinct[j]->offset ||
                    distinct[j]->offset + distinct[j]->bytes <= distinct[i]->offset)
            << distinct[i]->name << " overlaps " << distinct[j]->name;
    EXPECT_EQ(plan.smem_bytes, q.bytes + k.bytes + v.bytes);
    EXPECT_LE(plan.smem_bytes, kSmemLimit);

    ASSERT_EQ(plan.roles.size(), 1u);
    EXPECT_EQ(plan.roles[0].name, "Compute");
    EXPECT_EQ(plan.roles[0].first_warp, 0);
    EXPECT_EQ(plan.roles[0].warps, plan.warps_m);
    EXPECT_EQ(plan.roles[0].registers, 0);
    EXPECT_TRUE(plan.tmem.empty());
    EXPECT_TRUE(plan.barriers.empty());
    EXPECT_TRUE(plan.tma.empty());
    EXPECT_FALSE(plan.risks.empty());
  }
}

TEST(PortablePlan, PreambleCarriesEveryBufferTheKernelReads) {
  const Plan plan = make_plan(portable_key(128, 128));
  const std::string source = assemble_source(plan);
  for (const char* name : {"kSmemQOffset", "kSmemKBytes", "kSmemVOffset", "kSmemOOffset", "kTileM", "kTileN",
                           "kWarpsM", "kKvStages", "kSmemBytes", "kRescaleThresholdLog2"})
    EXPECT_NE(source.find(std::string("constexpr int ") + name + " ="), std::string::npos) << name;
  EXPECT_NE(source.find("fa4_portable_fwd"), std::string::npos);
}

TEST(PortablePlan, RejectsWhatTheKernelCannotRunWithAReason) {
  struct Bad {
    KernelKey key;
    const char* reason;  // a word the explanation must contain
  };
  std::vector<Bad> bad;
  bad.push_back({portable_key(128, 128, 75), "sm_80"});
  bad.push_back({portable_key(80, 80), "head_dim"});
  bad.push_back({portable_key(16, 16), "head_dim"});
  bad.push_back({portable_key(512, 512), "head_dim"});
  bad.push_back({portable_key(128, 64), "head_dim_v"});
  bad.push_back({portable_key(192, 64), "head_dim_v"});
  KernelKey packed = portable_key(128, 128);
  packed.gqa_pack = 3;  // packed rows must tile the 64-row tile evenly
  bad.push_back({packed, "gqa_pack"});
  KernelKey fault = portable_key(128, 128);
  fault.fault = DebugFault::skip_rescale;
  bad.push_back({fault, "fault"});
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.key.name());
    std::string why;
    EXPECT_FALSE(portable_backend().supports(b.key, &why));
    EXPECT_NE(why.find(b.reason), std::string::npos) << why;
    EXPECT_FALSE(portable_backend().supports(b.key, nullptr));  // no crash without a reason pointer
    try {
      make_plan(b.key);
      ADD_FAILURE() << "make_plan accepted an unsupported key";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::unsupported);
      EXPECT_NE(std::string(e.what()).find(b.reason), std::string::npos) << e.what();
    }
  }
  std::string why;
  EXPECT_TRUE(portable_backend().supports(portable_key(192, 128), &why)) << why;
  EXPECT_TRUE(portable_backend().supports(portable_key(32, 32, 120), &why)) << why;
}

TEST(PortablePlan, LaunchShapeCoversEveryTileOnce) {
  struct Shape {
    int64_t batch, seqlen_q, heads_q;
  };
  for (const Shape& s : {Shape{1, 1, 1}, Shape{2, 127, 4}, Shape{3, 129, 8}, Shape{1, 4096, 16}, Shape{5, 1000, 3}})
    for (auto [d, dv] : {std::pair{64, 64}, {128, 128}, {192, 128}, {256, 256}}) {
      const Plan plan = make_plan(portable_key(d, dv));
      Problem problem;
      problem.params.batch = s.batch;
      problem.params.seqlen_q = s.seqlen_q;
      problem.params.seqlen_k = 77;
      problem.params.heads_q = s.heads_q;
      problem.params.heads_kv = 1;
      problem.params.head_dim = d;
      problem.params.head_dim_v = dv;
      problem.q_heads_per_kv = static_cast<int>(s.heads_q);
      fa4k::AttentionArgs args{};
      fill_schedule(plan, problem, args);
      const LaunchShape shape = launch_shape(plan, args, 132);
      const int64_t m_blocks = (s.seqlen_q + plan.tile_m - 1) / plan.tile_m;
      EXPECT_EQ(shape.grid[0], m_blocks * s.heads_q * s.batch) << d << " " << s.seqlen_q;
      EXPECT_EQ(shape.grid[1], 1u);
      EXPECT_EQ(shape.grid[2], 1u);
      EXPECT_EQ(shape.block[0], static_cast<unsigned>(plan.threads));
      EXPECT_EQ(shape.smem_bytes, static_cast<unsigned>(plan.smem_bytes));
      EXPECT_EQ(shape.cluster[0] * shape.cluster[1] * shape.cluster[2], 1u);
      EXPECT_EQ(args.num_m_blocks, m_blocks);
      EXPECT_EQ(static_cast<unsigned>(args.total_tiles), shape.grid[0]);
    }
}

// The decode kernel's plan on every arch and head dim: 16-row tiles, one 16-key chunk per warp per KV block,
// rings of at least two chunks that fit the arch's shared memory, the merge buffers over the rings, and two
// CTAs per SM on sm_90 up to d = 128 (so one CTA's epilogue hides under the other's loads).
TEST(PortablePlan, DecodePlansFitEveryArch) {
  for (int arch : {80, 86, 89, 90, 100, 120})
    for (const HeadDims& h : supported_head_dims()) {
      KernelKey key = portable_key(h.head_dim, h.head_dim_v, arch);
      key.decode = true;
      key.gqa_pack = 8;
      key.split = true;
      SCOPED_TRACE(key.name());
      const Plan plan = make_plan(key);
      EXPECT_EQ(plan.kernel_name, "fa4_portable_decode");
      EXPECT_EQ(plan.source, "portable/decode.cuh");
      EXPECT_EQ(plan.tile_m, 16);
      const int warps = plan.threads / 32;
      EXPECT_TRUE(warps == 2 || warps == 4) << warps;
      EXPECT_EQ(plan.tile_n, 16 * warps);
      EXPECT_GE(plan.kv_stages, 2);
      EXPECT_GT(plan.split_blocks, 0);
      const int per_block = arch == 80 ? 163 * 1024 : arch == 90 || arch == 100 ? 227 * 1024 : 99 * 1024;
      EXPECT_LE(plan.smem_bytes, per_block);
      const SmemBuffer& k = test::smem_buffer(plan, "K");
      const SmemBuffer& v = test::smem_buffer(plan, "V");
      const SmemBuffer& stats = test::smem_buffer(plan, "Stats");
      EXPECT_EQ(k.bytes, warps * plan.kv_stages * 16 * h.head_dim * 2);
      EXPECT_EQ(v.bytes, warps * plan.kv_stages * 16 * h.head_dim_v * 2);
      EXPECT_LE(8 * h.head_dim_v * 4, k.stride) << "half a warp's fp32 O over one K stage";
      EXPECT_LE(8 * h.head_dim_v * 4, v.stride) << "the other half over one V stage";
      EXPECT_GE(stats.offset, v.offset + v.bytes) << "Stats outlives the rings' reuse";
      EXPECT_GE(stats.bytes, warps * (16 * 2 * 4 + 4)) << "each warp's row max and sum, and its O's stage";
      EXPECT_TRUE(plan.ctas_per_sm == 1 || plan.ctas_per_sm == 2) << plan.ctas_per_sm;
      EXPECT_LE(plan.ctas_per_sm * (plan.smem_bytes + 1024), arch == 80 ? 164 * 1024 : arch == 86 || arch == 89 || arch == 120 ? 100 * 1024 : 228 * 1024);
      for (const SmemBuffer& b : plan.smem) {
        EXPECT_EQ(b.offset % 128, 0) << b.name;
        EXPECT_LE(b.offset + b.bytes, plan.smem_bytes) << b.name;
      }
      if (arch == 90 && h.head_dim <= 128) EXPECT_EQ(plan.ctas_per_sm, 2);
    }
}

// A split-KV decode problem on 132 SMs: one token of 32 q heads over 8 kv heads, d 128.
Problem split_decode_problem() {
  Problem problem;
  problem.params.batch = 1;
  problem.params.seqlen_q = 1;
  problem.params.heads_q = 32;
  problem.params.heads_kv = 8;
  problem.params.head_dim = problem.params.head_dim_v = 128;
  problem.q_heads_per_kv = 4;
  problem.decode = true;
  problem.decode_seqlen_q = kDecodeMaxRows / 4;
  problem.split = true;
  problem.sm_count = 132;
  return problem;
}

// The decode kernel walks a CTA's consecutive parts with PartWalk::next (an add and a carry): every part,
// from every starting part, must be the closed form's first + count * p / parts.
TEST(PortablePlan, PartWalkMatchesTheClosedForm) {
  for (int count : {1, 2, 7, 63, 64, 255, 256, 257, 1000, 2047, 4096, 65535}) {
    for (int parts = 1; parts <= std::min(count, fa4k::kMaxSplitParts); parts = parts < 20 ? parts + 1 : parts * 3 / 2) {
      for (int start : {0, 1, parts / 2, parts - 1}) {
        fa4k::PartWalk w = fa4k::PartWalk::at(5, count, parts, start);
        for (int p = start; p < parts; ++p, w.next()) {
          const long long begin = 5 + 1LL * count * p / parts, end = 5 + 1LL * count * (p + 1) / parts;
          ASSERT_EQ(w.begin, begin) << "count " << count << ", parts " << parts << ", from " << start << ", part " << p;
          ASSERT_EQ(w.end, end) << "count " << count << ", parts " << parts << ", from " << start << ", part " << p;
        }
      }
    }
  }
}

// The part count of num_splits 0 (params.h split_parts): parts of short_blocks while a sequence has at most
// short_parts of them, then of split_blocks, within [1, max_parts].
TEST(PortablePlan, SplitPartsAreShortUntilTheShortRuleRunsOut) {
  fa4k::SplitRule r{};
  r.split_blocks = 8, r.short_blocks = 4, r.short_parts = 16, r.max_parts = 256;
  for (auto [blocks, parts] : {std::pair{0, 1}, {1, 1}, {4, 1}, {5, 2}, {16, 4}, {63, 16}, {64, 16}, {65, 16},
                               {128, 16}, {129, 17}, {512, 64}, {4096, 256}}) {
    SCOPED_TRACE(std::to_string(blocks) + " blocks");
    EXPECT_EQ(fa4k::split_parts(r, true, blocks), parts);
    EXPECT_EQ(fa4k::split_parts(r, false, blocks), 1) << "only decode sequences are cut";
  }
  r.short_blocks = 0;  // no short rule (split_by_batch)
  EXPECT_EQ(fa4k::split_parts(r, true, 16), 2);
  EXPECT_EQ(fa4k::split_parts(r, true, 129), 17);
}

// Split-KV's rule (params.h split_parts, launch.cpp split_rule): explicit parts as asked; with num_splits 0
// parts of at least short_split_blocks blocks (split_blocks past short_split_parts parts), at most enough
// parts per sequence for a CTA on every SM across the head groups, and only decode sequences are cut; every
// (m block, CTA of parts) is a tile. A sequence's parts do not depend on the batch (the CTAs that run them do).
TEST(PortablePlan, SplitPartsDependOnTheSequenceAndTheDeviceOnly) {
  KernelKey key = portable_key(128, 128);
  key.decode = true, key.gqa_pack = 4, key.split = true;
  const Plan plan = make_plan(key);
  Problem problem = split_decode_problem();
  auto parts = [&](int seqlen_k, int batch) {
    problem.params.batch = batch;
    problem.params.seqlen_k = 131072;
    fa4k::AttentionArgs args{};
    fill_schedule(plan, problem, args);
    return fa4k::split_parts(args.split, true, (seqlen_k + plan.tile_n - 1) / plan.tile_n);
  };
  const int block = plan.tile_n, short_part = plan.short_split_blocks * block;
  EXPECT_EQ(plan.short_split_parts, 16);
  EXPECT_EQ(parts(0, 1), 1);
  EXPECT_EQ(parts(short_part, 1), 1);
  EXPECT_EQ(parts(short_part + 1, 1), 2);
  EXPECT_EQ(parts(2048, 1), 2048 / short_part);
  EXPECT_EQ(parts(131072, 1), 132 / 8) << "capped: the (head group, part) CTAs fit the SMs once";
  EXPECT_EQ(parts(131072, 64), parts(131072, 1)) << "batch-invariant";
  EXPECT_EQ(parts(8192, 256), parts(8192, 1)) << "batch-invariant";
  problem.params.num_splits = 5;
  EXPECT_EQ(parts(100, 1), 5);
  // A sequence longer than the decode class (in a mixed batch) is not cut with num_splits 0.
  problem.params.num_splits = 0;
  fa4k::AttentionArgs args{};
  fill_schedule(plan, problem, args);
  EXPECT_EQ(fa4k::split_parts(args.split, false, 131072 / plan.tile_n), 1);
  EXPECT_EQ(args.decode_seqlen_q, 8);
  // Every (m block, CTA of parts) of a decode sequence is a tile. A CTA runs k consecutive parts, the k whose
  // ceil(CTAs / slots) waves x k is least, the larger on a tie, of at most Plan::fold_split_blocks blocks
  // (4096 keys); or all of them where launch.cpp's fold_cost expects that to be faster (no raw states, no
  // combine). 2 CTAs a SM: 264 slots on 132 SMs.
  EXPECT_EQ(plan.ctas_per_sm, 2);
  EXPECT_EQ(plan.fold_split_blocks * plan.tile_n, 4096);
  struct Case {
    int sms, batch, seqlen_q, seqlen_k, parts, per_cta;
    const char* why;
  };
  for (const Case& c : {
           Case{132, 64, 8, 131072, 16, 1, "16 parts of 8k keys over 1024 CTAs: a CTA each"},
           Case{132, 64, 8, 2 * short_part, 2, 2, "2 parts: 8 waves of one, 4 of two: one CTA runs both"},
           Case{132, 3, 8, 2 * short_part, 2, 2, "48 CTAs at one part: one wave of one part or of both; both save the "
                                                 "combine"},
           Case{132, 8, 1, 8 * short_part, 8, 8, "8 parts, 64 CTAs: 1 wave of 2 (256 CTAs), but 64 CTAs of all 8 stream "
                                                 "the bytes about as fast, with no raw states and no combine"},
           Case{132, 32, 1, 8 * short_part, 8, 8, "8 parts, 256 CTAs: 8 waves of one, 4 of 2, 2 of 4, 1 of all 8"},
           Case{128, 32, 1, 16384, 16, 4, "16 parts of 1k keys, 256 CTAs on 256 slots: 16 waves of one, 4 of 4 "
                                          "and 1 of all 16 (past Plan::fold_split_blocks' 4096 keys)"},
           Case{132, 64, 1, 16 * short_part, 16, 16, "16 short parts, 512 CTAs: 2 waves of all 16, 4 of 8"},
           Case{132, 5, 1, 16 * short_part, 16, 3, "16 parts, 40 CTAs: 1 wave of 3 (240 CTAs, a sequence's last runs one "
                                                   "part); 40 CTAs of all 16 would leave most SMs idle"},
           Case{132, 6, 1, 16 * short_part, 16, 16, "16 parts, 48 CTAs: 3 waves of one, 2 of 2 or 3, or 48 CTAs of all 16, "
                                                    "which stream the bytes about as fast with no combine"},
           Case{132, 8, 1, 0, 1, 1, "no keys: one part"},
       }) {
    SCOPED_TRACE(c.why);
    problem.sm_count = c.sms;
    problem.params.batch = c.batch, problem.params.seqlen_q = c.seqlen_q, problem.params.seqlen_k = c.seqlen_k;
    fill_schedule(plan, problem, args);
    EXPECT_EQ(args.max_splits, c.parts);
    EXPECT_EQ(args.split.parts_per_cta, c.per_cta);
    const int m_blocks = (c.seqlen_q * 4 + 15) / 16;
    EXPECT_EQ(args.total_tiles, 1LL * c.batch * 8 * m_blocks * ((c.parts + c.per_cta - 1) / c.per_cta));
  }
}

// A decode sequence of at most Plan::fold_split_blocks KV blocks, cut, is its warps' raw part states folded
// (params.h folded); any longer one's parts are normalised states. The decode kernel folds in registers only
// where one CTA runs all of a sequence's parts, so no CTA may run all parts of a longer sequence, in any
// batch, whatever the longest sequence's length; a folded row's parts fit the combine's staging and its raw
// states the workspace of a ragged call (seqused_k). A dense call whose sequences are all too long to fold
// reserves no raw states and stages nothing, causal or not. Explicit num_splits folds nothing.
TEST(PortablePlan, ACtaThatRunsAllOfASequencesPartsFoldsThem) {
  for (int pack : {1, 4, 8}) {
    KernelKey key = portable_key(128, 128);
    key.decode = true, key.gqa_pack = pack, key.split = true;
    const Plan plan = make_plan(key);
    ASSERT_EQ(plan.fold_split_blocks, 64);
    Problem problem = split_decode_problem();
    problem.params.heads_q = 32, problem.params.heads_kv = 32 / pack, problem.q_heads_per_kv = pack;
    problem.params.seqlen_q = 1;
    for (int sms : {108, 132, 148})
      for (int batch : {1, 8, 64, 256, 2048})
        for (int longest : {64, 200, 1000, 2048, 4096, 4097, 8192, 32768, 131072}) {
          SCOPED_TRACE("pack " + std::to_string(pack) + ", " + std::to_string(sms) + " SMs, batch " + std::to_string(batch) +
                       ", longest " + std::to_string(longest));
          problem.sm_count = sms, problem.params.batch = batch, problem.params.seqlen_k = longest;
          fa4k::AttentionArgs args{};
          fill_schedule(plan, problem, args);
          const fa4k::SplitRule& r = args.split;
          const long long blocks_longest = (longest + plan.tile_n - 1) / plan.tile_n;
          for (bool causal : {false, true}) {  // dense: every sequence has the longest one's span
            problem.params.causal = causal, problem.params.window_right = causal ? 0 : -1;
            const SplitLayout dense = split_layout(plan, problem);
            const bool folds = args.max_splits > 1 && blocks_longest <= 64;
            EXPECT_EQ(dense.sum_bytes > 0, folds) << "causal " << causal;
            // Staged: a folded row's every part, or a normalised row's rounds where a warp's share is more than
            // 4 states.
            const fa4k::CombineArgs combine = split_combine_args(plan, problem, nullptr);
            const int share = (args.max_splits + combine.warps_per_item - 1) / combine.warps_per_item;
            EXPECT_EQ(combine.staged_states, folds || share > 4 ? fa4k::kMaxFoldParts : 0) << "causal " << causal;
          }
          problem.params.causal = false, problem.params.window_right = -1;
          const int used = 0;
          problem.params.seqused_k = &used;  // ragged lengths: any sequence may be shorter (never read here)
          const SplitLayout layout = split_layout(plan, problem);
          EXPECT_EQ(split_combine_args(plan, problem, nullptr).staged_states, args.max_splits > 1 ? fa4k::kMaxFoldParts : 0);
          problem.params.seqused_k = nullptr;
          const long long row_states = static_cast<long long>(layout.lse_bytes / 4 / r.partial_rows / problem.params.heads_q);
          for (int keys = 1; keys <= longest; keys += keys < 128 ? 1 : keys / 16) {
            const int blocks = (keys + plan.tile_n - 1) / plan.tile_n, parts = fa4k::split_parts(r, true, blocks);
            if (parts > 1 && parts <= r.parts_per_cta) ASSERT_TRUE(fa4k::folded(r, blocks, parts)) << keys << " keys";
            ASSERT_EQ(fa4k::folded(r, blocks, parts), parts > 1 && blocks <= 64) << keys << " keys";
            if (fa4k::folded(r, blocks, parts)) {
              ASSERT_LE(parts, fa4k::kMaxFoldParts) << keys << " keys";
              ASSERT_GE(row_states, 1LL * parts * r.decode_states) << keys << " keys: the workspace holds the raw states";
              ASSERT_GT(layout.sum_bytes, 0u);
            }
          }
        }
  }
  KernelKey key = portable_key(128, 128);
  key.decode = true, key.gqa_pack = 4, key.split = true;
  Problem problem = split_decode_problem();
  problem.params.num_splits = 5;
  fa4k::AttentionArgs args{};
  fill_schedule(make_plan(key), problem, args);
  EXPECT_EQ(args.split.fold_blocks, 0) << "explicit parts: a CTA each, nothing folded";
  EXPECT_FALSE(fa4k::folded(args.split, 10, 5));
  EXPECT_FALSE(fa4k::folded(args.split, 0, 5)) << "an empty sequence, cut into 5 parts";
}

// The premise of the GPU test ServingShapes.SplitResultsAreBatchInvariant: its sequences of 1500, 1750 and
// 4096 keys (8/2 heads, d128, one or two tokens) have six, seven and sixteen parts and run a CTA a part when
// alone; on any GPU of up to 400 SMs some batch of at most 2048 runs each in one CTA (which folds them itself),
// and some batch runs the sixteen in fewer CTAs but more than one (the combine folds their raw states); on
// Hopper and Blackwell one such batch's last CTA runs fewer parts than the others. The shorter ones may have
// no such batch: where their few CTAs would leave SMs idle, a CTA a part is as fast, and where they fill the
// SMs, fold_cost folds them all.
TEST(PortablePlan, TheInvarianceTestsBatchRunsTheCtaMerge) {
  for (int arch : {80, 86, 90, 100}) {
    KernelKey key = portable_key(128, 128);
    key.arch = arch, key.decode = true, key.gqa_pack = 4, key.split = true;
    const Plan plan = make_plan(key);
    Problem problem = split_decode_problem();
    problem.params.heads_q = 8, problem.params.heads_kv = 2, problem.params.seqlen_q = 2;
    for (auto [keys, parts] : {std::pair{1500, 6}, {1750, 7}, {4096, 16}})
      for (int sms : {108, 132, 148, 400}) {
        SCOPED_TRACE("arch " + std::to_string(arch) + ", " + std::to_string(sms) + " SMs, " + std::to_string(keys) + " keys");
        problem.sm_count = sms;
        problem.params.seqlen_k = keys;
        fa4k::AttentionArgs args{};
        problem.params.batch = 1;
        fill_schedule(plan, problem, args);
        EXPECT_EQ(args.max_splits, parts);
        EXPECT_EQ(args.split.parts_per_cta, 1) << "alone: a CTA a part";
        bool some = false, uneven = false, all = false;
        for (int n = 4; n <= 2048; n += 4) {
          problem.params.batch = n;
          fill_schedule(plan, problem, args);
          const long long ctas_per_sequence = args.total_tiles / (2 * n);
          if (ctas_per_sequence == 1) all = true;
          if (ctas_per_sequence > 1 && ctas_per_sequence < parts) {
            some = true;
            if (parts % args.split.parts_per_cta != 0) uneven = true;
          }
        }
        EXPECT_TRUE(all);
        if (parts == 16) EXPECT_TRUE(some) << "no batch ran the sixteen parts in CTAs of some";
        if (parts == 16 && arch >= 90) EXPECT_TRUE(uneven) << "no batch ran the sixteen parts in CTAs of some, the last of fewer";
      }
  }
  KernelKey wide = portable_key(256, 256);
  wide.decode = true, wide.gqa_pack = 4, wide.split = true;
  EXPECT_EQ(make_plan(wide).fold_split_blocks, 0);
}

// The combine shares a row's states among as many warps as fix the order of its sum: that choice must not
// follow the call's longest sequence, or a sequence's bits would change with its batch.
TEST(PortablePlan, CombineWarpsPerRowDoNotDependOnTheBatch) {
  for (auto [hq, hkv] : {std::pair{8, 2}, {32, 8}, {32, 32}}) {
    KernelKey key = portable_key(128, 128);
    key.decode = true, key.gqa_pack = hq / hkv, key.split = true;
    const Plan plan = make_plan(key);
    Problem problem = split_decode_problem();
    problem.params.heads_q = hq, problem.params.heads_kv = hkv, problem.q_heads_per_kv = hq / hkv;
    problem.decode_seqlen_q = kDecodeMaxRows / (hq / hkv);
    std::set<int> warps;
    for (int batch : {1, 3, 64})
      for (int seqlen_k : {64, 3000, 9000, 131072}) {
        problem.params.batch = batch, problem.params.seqlen_k = seqlen_k;
        warps.insert(split_combine_args(plan, problem, nullptr).warps_per_item);
      }
    EXPECT_EQ(warps.size(), 1u) << hq << "/" << hkv;
  }
}

// split_by_batch: num_splits 0 also weighs the batch. With C the launch's CTAs at one part per sequence
// (batch x head groups x m blocks): parts enough for a CTA per SM, of at least C^2 / 2 SMs blocks, at most
// 16 or one per split_blocks blocks. The workspace sized for a batch and lengths holds every smaller batch's
// and shorter lengths' parts, though a smaller batch may be cut into more parts.
TEST(PortablePlan, SplitByBatchFillsTheSmsOnceAndItsWorkspaceCoversSmallerCalls) {
  KernelKey key = portable_key(128, 128);
  key.decode = true, key.gqa_pack = 4, key.split = true;
  const Plan plan = make_plan(key);
  Problem problem = split_decode_problem();
  problem.params.split_by_batch = true;
  auto set = [&](int batch, int seqlen_q, int seqlen_k) {
    problem.params.batch = batch;
    problem.params.seqlen_q = seqlen_q;
    problem.params.seqlen_k = seqlen_k;
  };
  auto parts = [&](int seqlen_k, int batch) {
    set(batch, 1, seqlen_k);
    fa4k::AttentionArgs args{};
    fill_schedule(plan, problem, args);
    return fa4k::split_parts(args.split, true, (seqlen_k + plan.tile_n - 1) / plan.tile_n);
  };
  const int block = plan.tile_n;
  EXPECT_EQ(parts(16 * block, 1), 16) << "8 head groups: 16 parts x 8 = 128 CTAs on 132 SMs";
  EXPECT_EQ(parts(1000 * block, 1), 16);
  EXPECT_EQ(parts(5 * block, 1), 5) << "at most a part per KV block";
  EXPECT_EQ(parts(block, 1), 1);
  EXPECT_EQ(parts(100 * block, 4), 4) << "32 CTAs a part: 4 parts";
  EXPECT_EQ(parts(16 * block, 4), 4) << "32 CTAs a part: parts of at least 4 blocks";
  EXPECT_EQ(parts(15 * block, 4), 4);
  EXPECT_EQ(parts(12 * block, 4), 3);
  EXPECT_EQ(parts(64 * block, 8), 2) << "64 CTAs a part: parts of at least 16 blocks, 2 fill the SMs";
  EXPECT_EQ(parts(16 * block, 8), 1);
  EXPECT_EQ(parts(100 * block, 17), 1) << "136 CTAs uncut fill every SM";
  problem.params.heads_q = 8, problem.params.heads_kv = 1, problem.q_heads_per_kv = 8;
  KernelKey one_group = key;
  one_group.gqa_pack = 8;
  const Plan one = make_plan(one_group);
  set(1, 1, 512 * one.tile_n);
  fa4k::AttentionArgs args{};
  fill_schedule(one, problem, args);
  EXPECT_EQ(fa4k::split_parts(args.split, true, 512), 64) << "one CTA a part: a part per 8 blocks, at most";
  EXPECT_EQ(fa4k::split_parts(args.split, true, 40), 40) << "the cap is the longest sequence's";
  set(1, 1, 40 * one.tile_n);
  fill_schedule(one, problem, args);
  EXPECT_EQ(fa4k::split_parts(args.split, true, 40), 16) << "one CTA a part: up to 16 parts";
  problem.params.heads_q = 32, problem.params.heads_kv = 8, problem.q_heads_per_kv = 4;
  // A workspace sized for (batch, seqlen_q, seqlen_k) holds every call up to those sizes.
  for (int batch : {1, 2, 5, 12, 13, 50})
    for (int seqlen_q : {1, 8})
      for (int seqlen_k : {64, 1000, 5000}) {
        set(batch, seqlen_q, seqlen_k);
        const size_t sized = split_layout(plan, problem, /*any_smaller_batch=*/true).bytes();
        for (int b = 1; b <= batch; ++b)
          for (int sq = 1; sq <= seqlen_q; ++sq)
            for (int sk : {1, 64, 65, 700, 1000, 4999, 5000}) {
              if (sk > seqlen_k) continue;
              set(b, sq, sk);
              EXPECT_LE(split_layout(plan, problem).bytes(), sized)
                  << "sized for " << batch << " x (" << seqlen_q << ", " << seqlen_k << "), run at " << b << " x (" << sq
                  << ", " << sk << ")";
            }
      }
}

}  // namespace
}  // namespace fa4::detail
