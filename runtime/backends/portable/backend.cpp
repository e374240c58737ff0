// The portable backend: the FA2-style kernel (kernel_src/portable/flash_fwd.cuh): mma.sync on sm_80 and newer.
//
// Choices, per (d, dv):
// - 4 warps, each owning 32 query rows (two m16 tiles: every K/V fragment read from smem feeds two MMAs)
//   when the fp32 O accumulator then takes at most 128 registers per thread (dv <= 128); otherwise 16
//   rows per warp (dv = 192, 256).
// - KV block of 64 keys, halved to 32 when the fp32 O + S accumulators would exceed 160 registers per
//   thread (d = 128: ptxas then spills at the 255 limit) or the smem (Q + kv_stages * (K + V)) would
//   exceed 99 KB, the opt-in limit of sm_86/89/120, so one plan runs on every sm_80+ part.
// - Two K/V stages (cp.async double buffering); O is staged over the Q buffer at the end.
// Decode shapes (KernelConfig::decode) get the decode kernel instead: decode_plan below.
#include <algorithm>
#include <sstream>

#include "runtime/backend.hpp"

namespace fa4::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kMinTileM = 64;           // 4 warps of 16 rows (the smallest tile of any head dim)
constexpr int kSplitBlocks = 8;         // split-KV, num_splits 0: KV blocks per part of a decode sequence
constexpr int kCombineThreads = 128;    // combine: 4 warps, 1 to 4 of them per (row, head)
constexpr int kKvStages = 2;
constexpr int kSmemLimit = 99 * 1024;   // max dynamic smem per block on sm_86/89/120 (sm_80/90: more)
constexpr int kMaxORegisters = 128;     // fp32 O accumulator registers per thread
constexpr int kMaxAccRegisters = 160;   // fp32 O + S registers per thread (fragments, addresses, stats: the rest of 255)

int smem_for(int tile_m, int tile_n, int d, int dv) {
  return tile_m * d * 2 + kKvStages * tile_n * (d + dv) * 2;
}

// The decode kernel (kernel_src/portable/decode.cuh).
constexpr int kDecodeRows = 16;         // a tile: one m16 MMA tile of packed rows
constexpr int kDecodeChunk = 16;        // keys a warp takes at a time: one k16 step of P V
constexpr int kDecodeMaxStages = 4;     // chunks in each warp's cp.async ring
constexpr int kDecodeSplitBlocks = 8;   // num_splits 0: a part has at least this many KV blocks (warps x 16 keys),
constexpr int kDecodeShortBlocks = 4;   // or this many while the sequence has at most kDecodeShortParts parts:
constexpr int kDecodeShortParts = 16;   // more, shorter CTAs for short sequences (see decode_plan)

// Shared memory of an arch, bytes: the most one block may opt into, and what an SM has (each resident block
// also takes 1 KB of the SM's for the system).
struct ArchSmem {
  int per_block, per_sm;
};
ArchSmem arch_smem(int arch) {
  if (arch == 80 || arch == 87) return {163 * 1024, 164 * 1024};
  if (arch == 90 || arch == 100 || arch == 103 || arch == 110) return {227 * 1024, 228 * 1024};
  return {99 * 1024, 100 * 1024};  // sm_86, 89, 120, 121 (and, conservatively, anything newer)
}


class PortableBackend final : public KernelBackend {
 public:
  Backend id() const override { return Backend::portable; }
  std::string cannot_run_on(int device_arch) const override;
  KernelKey key(KernelKey base, const KernelConfig& config, int device_arch) const override;
  bool supports(const KernelKey& key, std::string* why) const override;
  Plan plan(const KernelKey& key) const override;
  LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) const override;
};

std::string PortableBackend::cannot_run_on(int device_arch) const {
  return device_arch >= 80 ? "" : "the portable kernel needs sm_80 or newer, this device is sm_" + std::to_string(device_arch);
}

// One kernel per device arch (plain target: the driver never JIT-compiles PTX). The q heads of one kv head
// share a tile's rows when they divide the smallest tile (64 rows): decode then reads each K/V byte once for
// all of them. Per-sequence lengths are read in every kernel, so varlen needs no kernel of its own.
KernelKey PortableBackend::key(KernelKey base, const KernelConfig& config, int device_arch) const {
  base.arch = device_arch;
  base.variant = ArchVariant::generic;
  const int ratio = config.q_heads_per_kv;
  // Decode tiles pack every ratio up to kDecodeMaxRows (their rows need not divide a tile).
  base.gqa_pack = config.decode ? ratio : ratio > 1 && kMinTileM % ratio == 0 ? ratio : 1;
  base.varlen = false;
  return base;
}

bool PortableBackend::supports(const KernelKey& key, std::string* why) const {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (key.backend != Backend::portable) return no("backend is not portable");
  if (key.arch < 80) return no("arch " + std::to_string(key.arch) + ": the portable kernel needs sm_80 or newer (mma.sync bf16, cp.async)");
  if (key.dtype != DType::bf16 && key.dtype != DType::fp16) return no("dtype: must be bf16 or fp16");
  if (!head_dims_supported(key.head_dim, key.head_dim_v))
    return no("head_dim " + std::to_string(key.head_dim) + " / head_dim_v " + std::to_string(key.head_dim_v) +
              ": must be (32|64|96|128|192|256) with head_dim_v == head_dim, or (192, 128)");
  if (key.decode && key.op != KernelOp::attention) return no("decode is an attention kernel");
  if (key.decode && (key.gqa_pack < 1 || key.gqa_pack > kDecodeMaxRows))
    return no("gqa_pack " + std::to_string(key.gqa_pack) + ": the decode kernel packs 1 to " + std::to_string(kDecodeMaxRows) +
              " q heads per kv head");
  if (!key.decode && (key.gqa_pack < 1 || kMinTileM % key.gqa_pack))
    return no("gqa_pack " + std::to_string(key.gqa_pack) + ": must divide " + std::to_string(kMinTileM) + " (the smallest tile's rows)");
  if (key.fault != DebugFault::none) return no(std::string("debug fault ") + to_string(key.fault) + ": only the sm100 kernels inject faults");
  if (key.op == KernelOp::combine && (key.gqa_pack != 1 || key.paged || key.causal))
    return no("a combine kernel has no packing, paging or mask");
  return true;
}

// The combine kernel: 1 to 4 warps per (row, head) (CombineArgs::warps_per_item), a grid-stride loop
// (enqueue_combine sizes the grid).
Plan combine_plan(const KernelKey& key) {
  Plan plan;
  plan.key = key;
  plan.kernel_name = "fa4_combine";
  plan.source = "portable/combine.cuh";
  plan.threads = kCombineThreads;
  plan.roles = {{"Merge", 0, kCombineThreads / 32, 0, "1 to 4 warps per (row, head): max of the LSEs, weighted sum of the states"}};
  // After a split decode kernel that folds (decode_plan: dv <= 128), a folded row's raw states are staged,
  // every part's at once, and a normalised row's in rounds of as many; a launch asks for it where its rows
  // need it (CombineArgs::staged_states).
  if (key.split && key.head_dim_v <= 128) {
    plan.smem_bytes = fa4k::combine_staging_bytes(kCombineThreads / 32, key.head_dim_v, fa4k::kMaxFoldParts);
    plan.smem = {{"Staging", 0, plan.smem_bytes, fa4k::kMaxFoldParts * key.head_dim_v * 4,
                  "dynamic: warp w's decode warp's raw O of every part of a folded row, or a round of a normalised "
                  "row's states (CombineArgs::staged_states a warp), fp32"}};
  }
  return plan;
}

// The decode kernel: a CTA takes one tile of kDecodeRows packed rows (the q heads of one kv head, times the
// new tokens); each warp streams its own 16-key chunks of the CTA's keys through its own cp.async ring (no
// CTA barrier in the loop), and the warps merge their (O, max, sum) states through smem at a part's end, each
// O over the ring stage of its warp's last chunk (the next part's loads fill the others). The ring is as deep
// as fits two CTAs per SM (so one CTA's epilogue hides under the other's loads), else one; with 2 warps when
// 4 do not fit two stages (d 256 on 99 KB parts).
Plan decode_plan(const KernelKey& key) {
  const int d = key.head_dim, dv = key.head_dim_v;
  const ArchSmem smem = arch_smem(key.arch);
  const int q_bytes = kDecodeRows * d * 2;
  const int k_chunk = kDecodeChunk * d * 2, v_chunk = kDecodeChunk * dv * 2;
  const auto stats_bytes = [](int warps) { return warps * (kDecodeRows * 2 * 4 + 4); };
  int warps = 0, stages = 0, ctas = 0;
  for (int w : {4, 2}) {
    for (int c : {2, 1}) {
      const int budget = std::min(smem.per_block, smem.per_sm / c - 1024);
      const int s = std::min(kDecodeMaxStages, (budget - q_bytes - stats_bytes(w)) / (w * (k_chunk + v_chunk)));
      if (s >= 2) {
        warps = w, stages = s, ctas = c;
        break;
      }
    }
    if (warps) break;
  }
  if (!warps) throw Error(ErrorCode::internal, key.name() + ": no decode ring fits sm_" + std::to_string(key.arch) + "'s shared memory");

  Plan plan;
  plan.key = key;
  plan.kernel_name = "fa4_portable_decode";
  plan.source = "portable/decode.cuh";
  plan.threads = 32 * warps;
  plan.warps_m = 1;
  plan.tile_m = kDecodeRows;
  plan.tile_n = warps * kDecodeChunk;  // a KV block: one chunk per warp (split-KV counts parts in these)
  plan.q_tiles = 1;
  plan.kv_stages = stages;
  plan.split_blocks = key.split ? kDecodeSplitBlocks : 0;
  // A small launch is bound by each CTA's serial chunk chain, a large one by its parts' ends: on the H200
  // parts of 256 keys up to 16 a sequence ran 1 x 1k GQA 32/8 at 0.97 of the best peer (0.74 in parts of
  // 512), 1 x 4k 8/1 at 0.87 (0.71), and 1k-4k rows at a geometric mean of 0.935 against 0.913; past 16
  // parts, longer ones (1 x 32k 8/1: 0.89 in 64 parts of 512 keys, 0.75 in 128 of 256).
  plan.short_split_blocks = key.split ? kDecodeShortBlocks : 0;
  plan.short_split_parts = key.split ? kDecodeShortParts : 0;
  // A CTA may run consecutive parts of up to 4096 keys through its rings, which no part restarts: on the
  // H200 CTAs of 5 parts of 7.7k keys ran 0.93x a CTA a part (8x128k, 32/8 heads). A cut sequence of at most
  // 4096 keys is folded: where a large batch lets one CTA run all of its parts, no part's end waits for
  // another warp. The fold keeps a second O in registers (d128 168 -> 246, no spills); past dv 128 it would
  // spill: one part a CTA, no fold (combine.cuh kRawStates).
  constexpr int kFoldBlocks = 8 * kDecodeSplitBlocks;
  static_assert(kDecodeShortParts <= fa4k::kMaxFoldParts && kFoldBlocks / kDecodeSplitBlocks <= fa4k::kMaxFoldParts,
                "a folded sequence's parts (split_parts of at most kFoldBlocks blocks) fit the combine's staging");
  plan.fold_split_blocks = key.split && dv <= 128 ? kFoldBlocks : 0;
  plan.ctas_per_sm = ctas;
  plan.rescale_threshold_log2 = 8;
  const int k_bytes = warps * stages * k_chunk, v_bytes = warps * stages * v_chunk;
  plan.smem = {
      {"Q", 0, q_bytes, 0, "Q tile: 16 rows x d, swizzled; every warp reads all of it"},
      {"K", q_bytes, k_bytes, k_chunk,
       "K rings: warp w's stage s at chunk w * kv_stages + s, 16 keys x d, swizzled; at a part's end rows 0-7 of "
       "the warp's unnormalised fp32 O over the stage of its last chunk"},
      {"V", q_bytes + k_bytes, v_bytes, v_chunk, "V rings, laid out as K; at a part's end O's rows 8-15"},
      {"Stats", q_bytes + k_bytes + v_bytes, stats_bytes(warps), kDecodeRows * 2 * 4,
       "at a part's end each warp's row max, then row sum, fp32; then each warp's stage holding its O"},
  };
  plan.smem_bytes = q_bytes + k_bytes + v_bytes + stats_bytes(warps);
  plan.roles = {{"Stream", 0, warps, 0,
                 "every warp: cp.async of its own K/V chunks, S = Q K^T and O += P V on 16 rows x 16 keys (mma.sync), "
                 "online softmax; then the merge of the warps' states and the epilogue"}};
  plan.risks.push_back(std::to_string(ctas) + " CTA(s) per SM by shared memory; decode is bound by HBM bandwidth, so "
                       "what matters is the bytes in flight: " + std::to_string(ctas * warps * (stages - 1)) +
                       " chunks of " + std::to_string(k_chunk + v_chunk) + " B per SM");
  return plan;
}

Plan PortableBackend::plan(const KernelKey& key) const {  // make_plan checked the key
  if (key.op == KernelOp::combine) return combine_plan(key);
  if (key.decode) return decode_plan(key);
  const int d = key.head_dim, dv = key.head_dim_v;
  Plan plan;
  plan.key = key;
  plan.split_blocks = key.split ? kSplitBlocks : 0;
  plan.kernel_name = "fa4_portable_fwd";
  plan.source = "portable/flash_fwd.cuh";
  plan.warps_m = kWarps;
  plan.threads = 32 * kWarps;
  // A warp's accumulators: rows_per_warp x columns fp32 values spread over 32 lanes.
  auto regs = [](int rows_per_warp, int columns) { return rows_per_warp * columns / 32; };
  const int rows_per_warp = regs(32, dv) <= kMaxORegisters ? 32 : 16;
  plan.tile_m = kWarps * rows_per_warp;
  const bool n64_fits = regs(rows_per_warp, dv) + regs(rows_per_warp, 64) <= kMaxAccRegisters &&
                        smem_for(plan.tile_m, 64, d, dv) <= kSmemLimit;
  plan.tile_n = n64_fits ? 64 : 32;
  plan.q_tiles = 1;
  plan.kv_stages = kKvStages;
  plan.persistent = false;
  plan.soft_exp2_every = 0;
  plan.rescale_threshold_log2 = 8;  // lazy rescale: P may reach 2^8 before the max (and O) are updated

  const int q_bytes = plan.tile_m * d * 2;
  const int k_bytes = kKvStages * plan.tile_n * d * 2;
  const int v_bytes = kKvStages * plan.tile_n * dv * 2;
  plan.smem = {
      {"Q", 0, q_bytes, 0, "Q tile: tile_m rows x d, swizzled 16-byte chunks"},
      {"K", q_bytes, k_bytes, plan.tile_n * d * 2, "K ring: kv_stages x tile_n rows x d, swizzled"},
      {"V", q_bytes + k_bytes, v_bytes, plan.tile_n * dv * 2, "V ring: kv_stages x tile_n rows x dv, swizzled"},
      {"O", 0, plan.tile_m * dv * 2, 0, "O staging for coalesced stores: aliases Q, written after the last QK and a CTA barrier"},
  };
  plan.smem_bytes = q_bytes + k_bytes + v_bytes;

  plan.roles = {{"Compute", 0, kWarps, 0,
                 "all warps: cp.async loads of Q/K/V, QK and PV mma.sync, online softmax, epilogue"}};

  std::ostringstream risk;
  risk << "registers: per thread " << regs(rows_per_warp, dv) << " fp32 O + " << regs(rows_per_warp, plan.tile_n)
       << " fp32 S accumulators; the compile test checks ptxas reports no spills";
  plan.risks.push_back(risk.str());
  if (plan.smem_bytes > kSmemLimit)
    plan.risks.push_back("smem " + std::to_string(plan.smem_bytes) + " B exceeds the 99 KB opt-in of sm_86/89/120: "
                         "runs only on sm_80/87/90/100");
  return plan;
}

LaunchShape PortableBackend::launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int) const {
  LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(scheduled.total_tiles);
  shape.block[0] = static_cast<unsigned>(plan.threads);
  shape.smem_bytes = static_cast<unsigned>(plan.smem_bytes);
  return shape;
}

}  // namespace

const KernelBackend& portable_backend() {
  static const PortableBackend backend;
  return backend;
}

}  // namespace fa4::detail
