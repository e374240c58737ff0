// The launch step: device properties, kernel arguments and the static schedule, the launch shape, TMA
// maps and cuLaunchKernelEx. Everything backend-specific comes from the backend's object.
#include "runtime/launch.hpp"

#include <algorithm>
#include <limits>

#include "runtime/backend.hpp"
#include "runtime/driver.hpp"

namespace fa4::detail {

DeviceInfo read_device_info(CUdevice device) {
  const DriverApi& d = driver();
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    check_cu(d.cuDeviceGetAttribute(&v, a, device), "cuDeviceGetAttribute");
    return v;
  };
  DeviceInfo info;
  info.arch = device_arch(device);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  return info;
}

namespace {

[[noreturn]] void too_large(const std::string& field, const std::string& rule) {
  throw Error(ErrorCode::invalid_argument, field + ": " + rule);
}

}  // namespace

int64_t served_seqlen_q(const Plan& plan, const Problem& problem) {
  return plan.key.decode ? std::min<int64_t>(problem.params.seqlen_q, problem.decode_seqlen_q) : problem.params.seqlen_q;
}

// The kernels compute row, key and tile indices in 32-bit int (kernel_src/common/params.h). The largest
// values a problem reaches under a plan, each of which must stay at most INT_MAX:
//  - key blocks: (seqlen_k + tile_n - 1) / tile_n (flash_fwd.cuh n_end, block_range.h total);
//  - rows: seqlen_q * gqa_pack rounded up to whole CTAs (flash_fwd.cuh row0 + tile_m; fa4_fwd.cuh the packed
//    row (m_block * 2 + s) * 128 + row, block_range.h first_row + rows - 1);
//  - causal limits of the last, padding, row: row + (seqlen_k - seqlen_q) (flash_fwd.cuh mask_block) and
//    token + seqlen_k, summed before seqlen_q is subtracted (fa4_fwd.cuh softmax_role);
//  - work tiles: ceil(rows / rows per CTA) * heads_q / pack * batch (tile index, grid size).
// Offsets into tensors and the LSE are 64-bit in both kernels.
// Split-KV with num_splits 0: a sequence has at most as many parts as its (head group, part) tiles fit the
// SMs a CTA each (rounded down: 16 parts over 8 head groups on 132 SMs, not 17, whose 136 CTAs put two on 4
// SMs; on the H200 1 x 32k GQA 32/8 read 3558 GB/s in 16 parts against 3417 in 17, and 1 x 4k of 32 kv
// heads 3008 in 4 against 2737 in 5); past that its parts grow longer instead. Decode at batch 1 then spreads
// over the whole GPU, while a large batch of long sequences is not cut into more, shorter parts than it
// needs (the Plan's short parts stop at 16 a sequence: bench/results/2026-12-02-h200-decode-short-parts.md).
constexpr long long kSplitCtasPerSm = 1;
// split_by_batch, with C the launch's CTAs at one part per sequence (batch x head groups x m blocks) and S
// the SMs: parts enough to give every SM one CTA (S / C), each at least C^2 / 2S KV blocks long (the
// combine's work grows with C: a large batch needs long parts to gain from a cut), and at most the larger of
// 16 parts and one per split_blocks blocks (the combine's states per row). Fitted on the H200 (bench_decode.py --splits,
// bench/results/2026-12-01-h200-decode-splits.md): 8 CTAs ran fastest in 16 parts at every length from 1k to
// 128k keys, 32 in 4, 64 in 1 part at 1k keys and 2 at 4k, 256 and more uncut.
constexpr long long kBatchSplitMinCap = 16;

// The q head groups a tile packs (heads_q / gqa_pack), and the longest sequence's KV blocks.
long long head_groups(const Plan& plan, const Problem& problem) {
  return std::max<long long>(1, problem.params.heads_q / plan.key.gqa_pack);
}
long long longest_key_blocks(const Problem& problem, int tile_n) { return (problem.params.seqlen_k + tile_n - 1) / tile_n; }

// The CTAs of a split kernel's launch at one part per sequence: batch x head groups x m blocks.
long long ctas_at_one_part(const Plan& plan, const Problem& problem) {
  const long long rows_per_cta = static_cast<long long>(plan.tile_m) * plan.q_tiles;
  const long long m_blocks = (served_seqlen_q(plan, problem) * plan.key.gqa_pack + rows_per_cta - 1) / rows_per_cta;
  return std::max<long long>(1, problem.params.batch) * std::max(1LL, head_groups(plan, problem) * m_blocks);
}

long long sm_slots(const Problem& problem) { return std::max(1LL, static_cast<long long>(problem.sm_count)); }

// Whether a call may have a folded decode sequence (SplitRule::fold_blocks): not where every sequence has
// the longest one's keys, past fold_blocks. Only a left window shortens a decode sequence's span (a right
// one, causal's 0 included, stops at the last token's keys, which are the sequence's last).
bool may_fold(const Problem& problem, const fa4k::SplitRule& rule, int max_splits) {
  const AttentionParams& p = problem.params;
  if (rule.fold_blocks <= 0 || max_splits <= 1) return false;
  const bool same_spans = !p.cu_seqlens_q && !p.cu_seqlens_k && !p.seqused_k && p.window_left < 0;
  return !same_spans || longest_key_blocks(problem, rule.tile_n) <= rule.fold_blocks;
}

// After split-KV a row can have up to kMaxSplits parts: where the cap on a row's parts reaches 16, 4 warps
// share each row's states in the combine (enough loads in flight when one sequence alone is cut into
// hundreds of parts), else one warp takes a row (SplitRule::merge_shares). The cap comes from what bounds a
// row's parts without the batch (num_splits, or the rule's cap: the device and heads only unless
// split_by_batch), never from the call's longest sequence: a sequence's bits stay the same whatever else is
// in the batch.
int merge_shares(int parts_cap) { return parts_cap >= 16 ? 4 : 1; }

// The estimated time of a batch-invariant decode launch of foldable sequences (`ctas` CTAs at one part)
// whose CTAs run k of a sequence's `parts` parts of part_blocks KV blocks each, in units of one KV block
// streamed by one CTA: the longer of the CTAs' chains (waves of SMs x Plan::ctas_per_sm CTAs, each a fixed cost plus its blocks,
// plus its parts' raw states where it does not fold) and the bytes at the device's bandwidth (about
// kBandwidthCtasPerSm CTAs per SM streaming at full speed), plus the combine where k < parts (a fixed cost
// and the states read back). From the H200's and H100's decode timings (d128, bf16): a CTA's fixed cost
// ~3.5 us against ~0.53 us a block, ~62 GB/s a CTA against ~3.2-4 TB/s in all. Waves x k alone ran 64 x 4k
// at 8/1 heads and 4 queries in 256 CTAs of 8 parts, whose raw states (64 MB, written and read back) and
// combine held it to 1257 GB/s on the H100; all 16 parts a CTA ran it at 2286, and none of the 8 choices
// this changes in bench_decode's table ran slower (bench/results/2026-12-08-h100-decode-fold-cost.md).
constexpr double kDecodeCtaFixedBlocks = 6.6;
constexpr double kBandwidthCtasPerSm = 0.4;

// The waves a decode launch fills when each of its `ctas` CTAs at one part instead runs k of `parts` parts:
// ceil(ctas x ceil(parts / k) / W) for W = SMs x Plan::ctas_per_sm CTA slots.
long long decode_waves(const Plan& plan, const Problem& problem, long long ctas, long long parts, long long k) {
  const long long wave = std::max(1, plan.ctas_per_sm) * sm_slots(problem);
  return (ctas * ((parts + k - 1) / k) + wave - 1) / wave;
}

double fold_cost(const Plan& plan, const Problem& problem, long long ctas, long long parts, long long part_blocks, long long k) {
  const long long sms = sm_slots(problem), waves = decode_waves(plan, problem, ctas, parts, k);
  // A part's raw states (O per decode warp) in KV blocks' bytes.
  const long long rows = std::min<long long>(plan.tile_m, served_seqlen_q(plan, problem) * plan.key.gqa_pack);
  const double state_blocks = static_cast<double>(plan.threads / 32 * rows * plan.key.head_dim_v * 4) /
                              (static_cast<double>(plan.tile_n) * (plan.key.head_dim + plan.key.head_dim_v) * 2);
  const bool combined = k < parts;
  const double states = combined ? static_cast<double>(ctas) * parts * state_blocks : 0;
  const double streams = kBandwidthCtasPerSm * sms;
  const double chains = waves * (kDecodeCtaFixedBlocks + k * (part_blocks + (combined ? state_blocks : 0)));
  const double bytes = (static_cast<double>(ctas) * parts * part_blocks + states) / streams;
  const double combine = combined ? kDecodeCtaFixedBlocks + states / streams : 0;
  return std::max(chains, bytes) + combine;
}

fa4k::SplitRule split_rule(const Plan& plan, const Problem& problem) {
  const AttentionParams& p = problem.params;
  fa4k::SplitRule r{};
  r.tile_n = plan.tile_n;
  r.parts_per_cta = 1;
  r.merge_shares = 1;
  if (!plan.key.split) return r;
  r.num_splits = static_cast<int>(p.num_splits);
  r.split_blocks = plan.split_blocks;
  r.short_blocks = plan.short_split_blocks;
  r.short_parts = plan.short_split_parts;
  // Batch-invariant decode folds its short sequences (explicit parts run a CTA each: nothing to fold).
  if (p.num_splits == 0 && plan.fold_split_blocks > 0) {
    r.fold_blocks = plan.fold_split_blocks;
    r.decode_states = plan.threads / 32;  // a raw state per decode warp (decode.cuh)
  }
  // num_splits 0 cuts only decode sequences: the workspace holds min(seqlen_q, decode tokens) rows per
  // sequence (a mixed batch's prompts take one short slot each, not their length).
  r.seq_rows = p.num_splits == 0 ? static_cast<int>(served_seqlen_q(plan, problem)) : 0;
  const long long partial_rows = r.seq_rows ? p.batch * r.seq_rows : problem.rows;
  if (partial_rows > 0x7fffffffLL)
    too_large("batch", "times the decode tokens per sequence (" + std::to_string(r.seq_rows) +
                           ") must be below 2^31 workspace rows for split-KV, got " + std::to_string(partial_rows));
  r.partial_rows = static_cast<int>(partial_rows);
  if (p.num_splits == 0 && p.split_by_batch) {
    const long long ctas = ctas_at_one_part(plan, problem), sms = sm_slots(problem);
    const long long blocks = longest_key_blocks(problem, plan.tile_n);
    const long long c = std::min(ctas, sms + 1);  // past sms nothing is cut: keeps c^2 in range
    r.split_blocks = static_cast<int>(std::clamp((c * c + 2 * sms - 1) / (2 * sms), 1LL, 1LL << 30));
    r.short_blocks = 0;
    r.fold_blocks = r.decode_states = 0;  // parts that follow the batch: nothing to keep batch-invariant
    const long long most = std::min(sms / ctas, std::max(kBatchSplitMinCap, (blocks + plan.split_blocks - 1) / plan.split_blocks));
    r.max_parts = static_cast<int>(std::clamp(most, 1LL, static_cast<long long>(kMaxSplits)));
    r.merge_shares = merge_shares(r.max_parts);
    return r;
  }
  const long long groups = head_groups(plan, problem);
  const long long slots = kSplitCtasPerSm * sm_slots(problem);
  r.max_parts = static_cast<int>(std::min<long long>(kMaxSplits, std::max(1LL, slots / groups)));
  r.merge_shares = merge_shares(p.num_splits > 0 ? static_cast<int>(p.num_splits) : r.max_parts);
  // Batch-invariant decode: a sequence's parts depend on its length only, but the CTAs that run them may
  // follow the batch. A CTA runs k consecutive parts, through rings that no part restarts; one that runs all
  // of a sequence's parts folds them itself (no combine for that sequence: decode.cuh). The C x ceil(parts /
  // k) CTAs of a launch fill ceil(CTAs / W) waves of W = SMs x Plan::ctas_per_sm slots and use C x parts /
  // (waves x W x k) of the slot time: the k that uses most, the larger on a tie (fewer partials), of at most
  // Plan::fold_split_blocks blocks (a long CTA leaves a ragged tail; a CTA that runs all of a sequence's parts
  // must fold them). All of the parts (no raw states written and read back, no combine) where fold_cost
  // expects that to take less time.
  if (p.num_splits == 0 && plan.key.decode && r.fold_blocks > 0) {
    const long long ctas = ctas_at_one_part(plan, problem);
    const long long blocks = longest_key_blocks(problem, plan.tile_n);
    const long long parts = fa4k::split_parts(r, true, static_cast<int>(blocks));
    const long long part_blocks = std::max(1LL, (blocks + parts - 1) / parts);
    const long long most = std::min(parts, std::max(1LL, r.fold_blocks / part_blocks));
    auto cost = [&](long long k) { return decode_waves(plan, problem, ctas, parts, k) * k; };
    long long best = 1, best_cost = std::numeric_limits<long long>::max();
    for (long long k = 1; k <= most; ++k)
      if (cost(k) <= best_cost) best = k, best_cost = cost(k);
    if (most == parts &&
        fold_cost(plan, problem, ctas, parts, part_blocks, parts) < fold_cost(plan, problem, ctas, parts, part_blocks, best))
      best = parts;
    r.parts_per_cta = static_cast<int>(best);
  }
  return r;
}

int max_splits(const Plan& plan, const Problem& problem, const fa4k::SplitRule& rule) {
  if (!plan.key.split) return 1;
  // The longest sequence's parts: split_parts grows with the key blocks.
  return fa4k::split_parts(rule, plan.key.decode, static_cast<int>(longest_key_blocks(problem, rule.tile_n)));
}
int max_splits(const Plan& plan, const Problem& problem) { return max_splits(plan, problem, split_rule(plan, problem)); }

// Work tiles of one (head group, sequence): every m block, times the parts of a split-KV kernel (tile.cuh).
long long tiles_per_head(const Plan& plan, const Problem& problem, long long m_blocks) {
  if (!plan.key.split) return m_blocks;
  const fa4k::SplitRule rule = split_rule(plan, problem);
  return m_blocks * fa4k::split_ctas(rule, max_splits(plan, problem, rule));
}

SplitLayout split_layout(const Plan& plan, const Problem& problem, bool any_smaller_batch) {
  SplitLayout l;
  if (!plan.key.split) return l;
  const auto align = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const fa4k::SplitRule rule = split_rule(plan, problem);
  l.max_splits = max_splits(plan, problem, rule);
  // Parts x workspace rows. With split_by_batch a smaller problem may need more: b sequences uncut take b
  // x seq_rows rows; cut, at most SMs / (head groups) sequence parts (one m block each: the fewest CTAs per
  // part, so the most parts), and at most b x the longest one's blocks.
  // A folded sequence's parts hold a raw state per decode warp (params.h AttentionArgs); a workspace for
  // any smaller call, for the longest sequence that folds.
  const long long fold_blocks = std::min<long long>(rule.fold_blocks, longest_key_blocks(problem, rule.tile_n));
  const bool folds = any_smaller_batch ? rule.fold_blocks > 0 && l.max_splits > 1 : may_fold(problem, rule, l.max_splits);
  const long long folded = folds ? fa4k::split_parts(rule, true, static_cast<int>(fold_blocks)) * rule.decode_states : 0;
  long long states = std::max<long long>(l.max_splits, folded) * rule.partial_rows;
  const AttentionParams& p = problem.params;
  if (any_smaller_batch && p.num_splits == 0 && p.split_by_batch) {
    const long long cut =
        std::min(longest_key_blocks(problem, rule.tile_n) * p.batch, sm_slots(problem) / head_groups(plan, problem));
    states = std::max<long long>(p.batch, cut) * rule.seq_rows;
  }
  states *= p.heads_q;
  l.o_bytes = align(states * static_cast<size_t>(problem.params.head_dim_v) * 4);
  l.lse_bytes = align(states * 4);
  l.sum_bytes = folded > 0 ? l.lse_bytes : 0;
  return l;
}

void check_index_range(const Plan& plan, const Problem& problem) {
  constexpr long long kIntMax = 0x7fffffffLL;
  const AttentionParams& p = problem.params;
  const long long seqlen_q = served_seqlen_q(plan, problem);
  // Messages are built only on failure: run() calls this on every launch.
  auto kernel = [&] { return std::string("the ") + to_string(plan.key.backend) + " kernel"; };
  const long long tile_n = plan.tile_n;
  const long long pack = plan.key.gqa_pack;
  const long long rows_per_cta = static_cast<long long>(plan.tile_m) * plan.q_tiles;

  if (p.seqlen_k > kIntMax - (tile_n - 1))
    too_large("seqlen_k", "must be at most 2^31 - " + std::to_string(tile_n) + " = " + std::to_string(kIntMax - tile_n + 1) +
                              " for " + kernel() + " (it counts key blocks as (seqlen_k + " + std::to_string(tile_n - 1) +
                              ") / " + std::to_string(tile_n) + " in 32 bits), got " + std::to_string(p.seqlen_k));
  const long long max_rows = kIntMax / rows_per_cta * rows_per_cta;  // whole CTAs whose row indices fit
  if (seqlen_q * pack > max_rows)
    too_large("seqlen_q", "must be at most " + std::to_string(max_rows / pack) + " for " + kernel() +
                              (pack > 1 ? " packing " + std::to_string(pack) + " q heads per tile" : std::string()) +
                              " (its 32-bit row index reaches seqlen_q * " + std::to_string(pack) + " rounded up to " +
                              std::to_string(rows_per_cta) + " rows), got " + std::to_string(seqlen_q));
  const long long rows = seqlen_q * pack;
  const long long m_blocks = (rows + rows_per_cta - 1) / rows_per_cta;
  if (p.causal) {
    const long long last_row = m_blocks * rows_per_cta - 1;
    const bool portable = plan.key.backend == Backend::portable;
    // The largest seqlen_k whose causal limit for that row fits.
    const long long max_k = portable ? kIntMax - last_row / pack + seqlen_q : kIntMax - last_row / pack;
    if (p.seqlen_k > max_k)
      too_large("seqlen_k", "must be at most " + std::to_string(max_k) + " with causal masking and seqlen_q " +
                                std::to_string(seqlen_q) + " for " + kernel() + " (its 32-bit causal limit " +
                                (portable ? "token + seqlen_k - seqlen_q" : "token + seqlen_k") +
                                " reaches that for the last padded row), got " + std::to_string(p.seqlen_k));
  }
  // A CTA's next tile index (its tile plus the grid) stays in an int too: a persistent grid has at most as
  // many CTAs as SMs (below 2^16), any other a CTA per tile.
  const long long tiles = tiles_per_head(plan, problem, m_blocks) * (p.heads_q / pack) * p.batch;
  const long long grid = plan.persistent ? 1 << 16 : tiles;
  if (tiles > kIntMax - grid)
    too_large("batch * heads_q * ceil(seqlen_q / " + std::to_string(rows_per_cta) + ")",
              std::string("must be below ") + (plan.persistent ? "2^31 - 2^16" : "2^30") +
                  " work tiles (a tile index plus the grid stays below 2^31), got " + std::to_string(tiles));
}

void fill_schedule(const Plan& plan, const Problem& problem, fa4k::AttentionArgs& args) {
  check_index_range(plan, problem);
  const AttentionParams& p = problem.params;
  const long long pack = plan.key.gqa_pack;
  const long long rows_per_cta = static_cast<long long>(plan.tile_m) * plan.q_tiles;
  const long long m_blocks = (served_seqlen_q(plan, problem) * pack + rows_per_cta - 1) / rows_per_cta;
  args.num_m_blocks = static_cast<int>(m_blocks);
  args.total_tiles = static_cast<int>(tiles_per_head(plan, problem, m_blocks) * (p.heads_q / pack) * p.batch);
  // Causal tile order by L2 sections: as many (batch, head group)s as keep their K/V within the Plan's bytes
  // (dense batches: a ragged one's sequences differ in length), for head groups of the Plan's minimum K/V.
  args.tile_section = 0;
  if (plan.l2_section_bytes > 0 && p.causal && !plan.key.varlen) {
    // K/V bytes per head group: a packed group is one kv head; unpacked q heads share theirs.
    const long long kv_bytes = static_cast<long long>(p.seqlen_k) * (plan.key.head_dim + plan.key.head_dim_v) * 2 /
                               (pack > 1 ? 1 : std::max<long long>(1, p.heads_q / std::max<long long>(1, p.heads_kv)));
    const long long heads = (p.heads_q / pack) * p.batch;
    const long long per_section = std::max(1LL, plan.l2_section_bytes / std::max(1LL, kv_bytes));
    if (kv_bytes >= plan.l2_section_min_head_bytes) args.tile_section = static_cast<int>(std::min(heads, per_section));
  }
  args.split = split_rule(plan, problem);
  args.max_splits = max_splits(plan, problem, args.split);
  // Which sequences this kernel serves: the decode kernel those up to decode_seqlen_q, the prefill kernel of
  // a mixed batch the others (0: all).
  args.decode_seqlen_q = plan.key.decode || problem.mixed ? problem.decode_seqlen_q : 0;
}

LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) {
  return backend_of(plan.key.backend).launch_shape(plan, scheduled, sm_count);
}

unsigned long long PreparedLaunch::scratch_bytes(const Plan& plan) const {
  return static_cast<unsigned long long>(shape.grid[0]) * shape.grid[1] * shape.grid[2] * plan.scratch_bytes_per_cta;
}

PreparedLaunch prepare_launch(const Plan& plan, const Problem& problem, int sm_count) {
  PreparedLaunch l;
  l.args = make_kernel_args(problem);
  fill_schedule(plan, problem, l.args);
  l.shape = launch_shape(plan, l.args, sm_count);
  return l;
}

void enqueue(const PreparedLaunch& launch, const Plan& plan, const Problem& problem, CUfunction function, CUstream stream) {
  CUtensorMap maps[kMaxTmaDescriptors];
  const int map_count = backend_of(plan.key.backend).tma_descriptors(plan, problem, maps);
  void* params[1 + kMaxTmaDescriptors] = {const_cast<fa4k::AttentionArgs*>(&launch.args)};
  for (int i = 0; i < map_count; ++i) params[1 + i] = &maps[i];
  const LaunchConfig config(launch.shape, stream);
  check_cu(driver().cuLaunchKernelEx(config.get(), function, params, nullptr), "cuLaunchKernelEx");
}

KernelKey combine_key(const KernelKey& of, int device_arch, bool f32_states) {
  KernelKey k;
  k.op = KernelOp::combine;
  k.backend = Backend::portable;
  k.arch = device_arch;
  k.dtype = of.dtype;
  k.head_dim = k.head_dim_v = of.head_dim_v;
  k.lse = of.lse;
  k.split = f32_states;
  return k;
}

KernelConfig combine_config(const KernelKey& combine) {
  KernelConfig c;
  c.dtype = combine.dtype;
  c.head_dim = c.head_dim_v = combine.head_dim_v;
  c.lse = combine.lse;
  c.backend = Backend::portable;
  c.arch = combine.arch;
  return c;
}

namespace {

// Where row r of a state, and of the output, lives: dense [batch, seq, heads, dv] / LSE [batch, heads, seq],
// or ragged [total, heads, dv] / LSE [heads, total] (the combine kernel then takes batch 0, token = row).
void set_lse_layout(long long rows, long long seqlen, long long heads, bool ragged, long long& batch, long long& head,
                    long long& row) {
  batch = ragged ? 0 : heads * seqlen;
  head = ragged ? rows : seqlen;
  row = 1;
}

}  // namespace

// The combine's CTAs resident on an SM (its __launch_bounds__ in combine.cuh): the grid at most fills them,
// and each CTA loops over items past that.
constexpr long long kCombineCtasPerSm = 8;

fa4k::CombineArgs split_combine_args(const Plan& plan, const Problem& problem, void* workspace) {
  const AttentionParams& p = problem.params;
  const SplitLayout layout = split_layout(plan, problem);
  fa4k::CombineArgs a{};
  const fa4k::SplitRule rule = split_rule(plan, problem);
  const long long rows = problem.rows, heads = p.heads_q, dv = p.head_dim_v, parts_rows = rule.partial_rows;
  a.state_o[0] = workspace;
  a.state_lse[0] = reinterpret_cast<const float*>(static_cast<const char*>(workspace) + layout.o_bytes);
  a.state_sum = reinterpret_cast<const float*>(static_cast<const char*>(workspace) + layout.o_bytes + layout.lse_bytes);
  a.o_state_stride = parts_rows * heads * dv;  // fp32 [split][partial rows][heads][dv]
  a.lse_state_stride = heads * parts_rows;     // fp32 [split][heads][partial rows]
  a.n_states = layout.max_splits;
  a.state_layout = {nullptr, 0, heads * dv, dv};  // rows: params.h partial_row
  a.lse_batch_stride = 0;
  a.lse_head_stride = parts_rows;
  a.lse_row_stride = 1;
  a.o = {p.o, p.o_stride.batch, p.o_stride.seq, p.o_stride.head};
  a.lse = p.return_lse ? p.lse : nullptr;
  set_lse_layout(rows, p.seqlen_q, heads, p.cu_seqlens_q != nullptr, a.out_lse_batch_stride, a.out_lse_head_stride,
                 a.out_lse_row_stride);
  a.batch = static_cast<int>(p.batch);
  a.seqlen = static_cast<int>(p.seqlen_q);
  a.heads = static_cast<int>(heads);
  a.total_rows = static_cast<int>(p.total_q);
  a.cu_seqlens = p.cu_seqlens_q;
  a.split = 1;
  a.cu_seqlens_k = p.cu_seqlens_k;
  a.seqused_k = p.seqused_k;
  a.sinks = p.sinks;  // added once, to the merged rows
  a.window_left = static_cast<int>(p.window_left);
  a.window_right = static_cast<int>(p.window_right);
  a.seqlen_k = static_cast<int>(p.seqlen_k);
  a.decode_seqlen_q = problem.decode_seqlen_q;
  a.scale_log2 = kernel_scale_log2(p);
  a.rule = rule;
  // A warp per share of a normalised row (the shares fix the order of its sum: split_rule), and per decode
  // warp's states of a folded one.
  a.warps_per_item = std::max(rule.merge_shares, rule.decode_states);
  // The combine's staging (32 KB of shared memory at dv 128, which keeps it from starting beside the decode
  // kernel's CTAs), kMaxFoldParts states a warp: where the call may have folded rows (a decode warp's parts at
  // once), and where a warp's share of a normalised row is more than one round of its registers' loads (4
  // states), then 16 a round trip: on the H200 the combine of 8 x 128k, 8/1 heads (132 parts a row, 33 a warp)
  // took 22 us after a 134 us decode kernel. The bits are the same either way. Only after a decode kernel that
  // folds (Plan::fold_split_blocks: dv <= 128), whose combine Plan has the buffer.
  const int share = (layout.max_splits + a.warps_per_item - 1) / a.warps_per_item;
  const bool staged = may_fold(problem, rule, layout.max_splits) || (plan.fold_split_blocks > 0 && share > 4);
  a.staged_states = staged ? fa4k::kMaxFoldParts : 0;
  return a;
}

fa4k::CombineArgs merge_args(const MergeProblem& problem) {
  const MergeParams& p = problem.params;
  fa4k::CombineArgs a{};
  for (size_t s = 0; s < p.states.size(); ++s) {
    a.state_o[s] = p.states[s].o;
    a.state_lse[s] = p.states[s].lse;
  }
  a.n_states = static_cast<int>(p.states.size());
  a.warps_per_item = 1;  // at most 8 states
  a.state_layout = {nullptr, p.state_stride.batch, p.state_stride.seq, p.state_stride.head};
  const bool ragged = p.cu_seqlens != nullptr;
  set_lse_layout(problem.rows, p.seqlen, p.heads, ragged, a.lse_batch_stride, a.lse_head_stride, a.lse_row_stride);
  a.o = {p.o, p.o_stride.batch, p.o_stride.seq, p.o_stride.head};
  a.lse = p.lse;
  set_lse_layout(problem.rows, p.seqlen, p.heads, ragged, a.out_lse_batch_stride, a.out_lse_head_stride, a.out_lse_row_stride);
  a.batch = static_cast<int>(p.batch);
  a.seqlen = static_cast<int>(p.seqlen);
  a.heads = static_cast<int>(p.heads);
  a.total_rows = static_cast<int>(p.total);
  a.cu_seqlens = p.cu_seqlens;
  return a;
}

void enqueue_combine(const Plan& plan, const fa4k::CombineArgs& args, CUfunction function, int sm_count, CUstream stream,
                     bool overlap_previous) {
  const long long rows = args.cu_seqlens ? args.total_rows : static_cast<long long>(args.batch) * args.seqlen;
  const long long items = rows * args.heads, per_cta = plan.threads / 32 / args.warps_per_item;
  LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(
      std::max(1LL, std::min((items + per_cta - 1) / per_cta, kCombineCtasPerSm * std::max(sm_count, 1))));
  shape.block[0] = static_cast<unsigned>(plan.threads);
  shape.smem_bytes = static_cast<unsigned>(fa4k::combine_staging_bytes(plan.threads / 32, plan.key.head_dim_v, args.staged_states));
  if (shape.smem_bytes > static_cast<unsigned>(plan.smem_bytes))  // (combine_plan)
    throw Error(ErrorCode::internal, "the combine's staging is larger than its Plan's buffer");
  void* params[] = {const_cast<fa4k::CombineArgs*>(&args)};
  const LaunchConfig config(shape, stream, overlap_previous);
  check_cu(driver().cuLaunchKernelEx(config.get(), function, params, nullptr), "cuLaunchKernelEx (combine)");
}

LaunchConfig::LaunchConfig(const LaunchShape& shape, CUstream stream, bool programmatic_dependent) {
  config_.gridDimX = shape.grid[0];
  config_.gridDimY = shape.grid[1];
  config_.gridDimZ = shape.grid[2];
  config_.blockDimX = shape.block[0];
  config_.blockDimY = shape.block[1];
  config_.blockDimZ = shape.block[2];
  config_.sharedMemBytes = shape.smem_bytes;
  config_.hStream = stream;
  config_.attrs = attrs_;
  if (shape.cluster[0] * shape.cluster[1] * shape.cluster[2] > 1) {
    CUlaunchAttribute& a = attrs_[config_.numAttrs++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = shape.cluster[0];
    a.value.clusterDim.y = shape.cluster[1];
    a.value.clusterDim.z = shape.cluster[2];
  }
  if (programmatic_dependent) {
    CUlaunchAttribute& a = attrs_[config_.numAttrs++];
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
}

}  // namespace fa4::detail
