// The sm100 backend: the FA4-style forward kernel for Blackwell (sm_100 family) and, from the same source,
// its tcgen05 emulation on sm_90a (Backend::sm100_emulated). The Plan holds every tile, stage, buffer, TMEM
// column, warp role, register budget, barrier and TMA box the kernel uses.
#include <algorithm>

#include "fa4/error.hpp"
#include "kernel_src/sm100/descriptors.h"
#include "runtime/backend.hpp"
#include "runtime/tma.hpp"

namespace fa4::detail {
namespace {

constexpr int kTile = 128;              // M of both MMAs: the rows of a Q tile
constexpr int kSmemBudget = 232448;     // sm_100 (and sm_90) opt-in shared memory per block

int round_up(int x, int to) { return (x + to - 1) / to * to; }

// Two CTA shapes, by the TMEM columns a Q tile takes (S, then O's dv). Up to dv 128 two Q tiles of 128 rows
// run against K/V blocks of 128 keys and their softmax warpgroups ping-pong (S 128 + O dv columns each). At
// dv 256 two tiles would need 768 of the 512 columns: one Q tile runs against blocks of 64 keys with S
// double-buffered (S0, S1 for blocks j and j + 1), so QK(j + 1) runs while the one softmax warpgroup works
// on block j; 64-key K/V slots leave a ring of several of them beside the 64 KiB Q tile.
struct CtaShape {
  int q_tiles, tile_n, warps;
};
CtaShape cta_shape(int dv) { return dv <= 128 ? CtaShape{2, kTile, 16} : CtaShape{1, kTile / 2, 12}; }

// Register budgets per thread (softmax, correction, other), given by warpgroup; they sum to the CTA's
// registers at launch: 128 a thread at 512 threads, 168 at 384 (setmaxnreg moves registers between
// warpgroups; an increase past the launch allocation waits forever).
struct Registers {
  int softmax, correction, other;
};
// Two tiles: softmax holds a whole 128-column S row; the MMA warp (in "other") needs 56 once it waits for
// each PV before the next QK and every wait carries its watchdog clock: with 48 it spills at d64/d96/d128,
// and correction fits in 72. At dv <= 64 the correction's O rows and the MMA warp's descriptors are small,
// so softmax gets 200 (FA4's d64 split); at larger dv the correction (O staging) and MMA warp (causal
// bookkeeping) need 72 and 56 to stay free of spills, and so do the 48-register roles when they walk a
// window's block ranges. One tile (384 threads, 3 x 168): softmax holds a 64-column S row, the MMA warp
// sixteen QK k-steps' descriptors.
Registers registers_for(const CtaShape& shape, int dv, bool window) {
  if (shape.q_tiles == 1) return Registers{192, 184, 128};
  return dv <= 64 && !window ? Registers{200, 64, 48} : Registers{192, 72, 56};
}

// Q heads per kv head that one tile packs: all of them when they divide the 128-row tile.
int gqa_pack(int q_heads_per_kv) { return q_heads_per_kv > 1 && kTile % q_heads_per_kv == 0 ? q_heads_per_kv : 1; }

class Sm100Backend final : public KernelBackend {
 public:
  explicit Sm100Backend(bool emulated) : emulated_(emulated) {}
  Backend id() const override { return emulated_ ? Backend::sm100_emulated : Backend::sm100; }
  std::string cannot_run_on(int device_arch) const override;
  KernelKey key(KernelKey base, const KernelConfig& config, int device_arch) const override;
  bool supports(const KernelKey& key, std::string* why) const override;
  Plan plan(const KernelKey& key) const override;
  LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) const override;
  int tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out) const override;

 private:
  bool emulated_;
};

std::string Sm100Backend::cannot_run_on(int device_arch) const {
  if (emulated_)
    return device_arch == 90 ? "" : "sm100_emulated runs only on sm_90 devices, this one is sm_" + std::to_string(device_arch);
  return device_arch == 100 || device_arch == 103
             ? ""
             : "sm100 needs an sm_100/sm_103 device, this one is sm_" + std::to_string(device_arch) +
                   " (use sm100_emulated on sm_90, or portable)";
}

// Hardware: the sm_100f family target (one cubin that loads on sm_100 and sm_103) where NVRTC has family
// targets, else the device's own arch-specific target (sm_100a or sm_103a). Emulated: sm_90a.
KernelKey Sm100Backend::key(KernelKey base, const KernelConfig& config, int device_arch) const {
  base.variant = emulated_ || !nvrtc_has_family_targets() ? ArchVariant::specific : ArchVariant::family;
  base.arch = emulated_ ? 90 : base.variant == ArchVariant::family || device_arch != 103 ? 100 : 103;
  base.gqa_pack = gqa_pack(config.q_heads_per_kv);
  return base;
}

bool Sm100Backend::supports(const KernelKey& key, std::string* why) const {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (key.backend != id()) return no(std::string("not a ") + to_string(id()) + " key");
  const std::string gap =
      dense_prefill_gap(key, "sm100", kTile, {{64, 64}, {96, 96}, {128, 128}, {192, 128}, {256, 256}});
  return gap.empty() || no(gap);
}

Plan Sm100Backend::plan(const KernelKey& key) const {  // make_plan checked the key
  Plan p;
  p.key = key;
  p.kernel_name = "fa4_sm100_fwd";
  p.source = "sm100/fa4_fwd.cuh";
  const int d = key.head_dim, dv = key.head_dim_v;
  const CtaShape shape = cta_shape(dv);
  const int tiles = shape.q_tiles, tile_n = shape.tile_n;
  p.threads = shape.warps * 32;
  p.tile_m = kTile;
  p.tile_n = tile_n;
  p.q_tiles = tiles;
  // Static persistent scheduling for full problems; causal and windowed grids (tiles of unequal lengths) launch
  // every tile, longest first. The emulation always runs persistent: each resident CTA needs its own TMEM slot
  // (kEmuTmemSlotBytes, 772 KiB). Ragged tiles are laid out for the longest sequence, so many hold no rows: a
  // persistent grid skips them.
  p.persistent = !(key.causal || key.window) || key.backend == Backend::sm100_emulated || key.varlen;
  // Causal tiles longest first across the heads of an L2 section: a quarter of the B200's L2 (126 MB) holds
  // the section's K/V, the rest the Q/O streams and other sections' tails.
  if (key.causal) p.l2_section_bytes = 32ll << 20;
  p.soft_exp2_every = key.head_dim <= 128 ? 8 : 0;  // share of exp2 on the FMA pipe (FA4: 1 in 8 for d <= 128)
  // Two tiles: P is handed to the PV in two parts, as in FA4: the PV's first 6 of 8 k-steps start once softmax
  // has stored the keys they read (96 of 128) and run while it exponentiates the rest.
  p.pv_early_steps = shape.q_tiles == 2 ? shape.tile_n / 16 * 3 / 4 : 0;
  p.rescale_threshold_log2 = 8;
  // Bounded waits: a barrier wait longer than this traps (a hang becomes an error the self-check can see). On
  // hardware a legitimate wait lasts microseconds and the one-register clock caps the limit at 4 s; emulated
  // MMAs are slow and test processes share the GPU, so the emulation allows 30 s.
  p.wait_timeout_ms = key.fault == DebugFault::hang ? 1000 : key.backend == Backend::sm100_emulated ? 30000 : 4000;

  // Shared memory: 128B swizzle when every row is a whole number of 128-B spans, else 64B (d = 96).
  const int swizzle = (d % 64 == 0 && dv % 64 == 0) ? 128 : 64;
  const int box_cols = swizzle / 2;
  const int q_bytes = tiles * kTile * d * 2;
  const int o_bytes = tiles * kTile * dv * 2;
  const int slot_bytes = tile_n * std::max(d, dv) * 2;  // K and V alternate in one ring of equal slots
  // The emulator keeps a few bytes of static shared memory, which push the 1024-aligned dynamic base by 1 KB.
  const int budget = kSmemBudget - (key.backend == Backend::sm100_emulated ? 1024 : 0);
  const int stats_bytes = (2 + tiles) * kTile * 4;  // mailbox: per row, an acc_scale per S buffer, an O factor per tile
  const bool v_tail = key.varlen || key.paged;  // a sequence's keys may end inside a block, before unused rows
  // The list below, two of each but the ring's (one tile: the second Q tile's unused), 2 a ring slot, VTail.
  auto barrier_bytes = [&](int stages) { return 8 * (12 * 2 + 2 * stages + (v_tail ? 1 : 0)); };
  auto tail_bytes = [&](int stages) { return round_up(barrier_bytes(stages), 16) + stats_bytes + 16; };
  // Largest ring that fits; two tiles give O buffers of its own unless that leaves fewer than two slots. One
  // tile stages O over Q whatever: its ring then holds 5 slots of 64 keys, and K(j + 2) and V(j + 2) load
  // while the MMAs read K(j + 1) and V(j), where an O buffer of its own would leave 3 (the next K's load
  // waits for PV(j) to free a slot, once a block).
  auto fits = [&](int stages, bool alias) {
    const int ring_end = round_up(q_bytes, 1024) + stages * slot_bytes;
    const int o_end = alias ? ring_end : round_up(ring_end, 1024) + o_bytes;
    return o_end + tail_bytes(stages) <= budget;
  };
  bool o_aliases_q = tiles == 1;
  int stages = 16;
  while (stages >= 2 && !fits(stages, o_aliases_q)) --stages;
  if (stages < 2 && !o_aliases_q) {  // stage O through the Q buffers (free once the tile's last S MMA has completed)
    o_aliases_q = true;
    stages = 16;
    while (stages >= 2 && !fits(stages, true)) --stages;
  }
  if (stages < 2)
    throw Error(ErrorCode::internal, key.name() + ": fewer than two K/V stages fit in shared memory");
  p.kv_stages = stages;

  int offset = 0;
  auto add = [&](const std::string& name, int bytes, int stride, const std::string& contents, int align = 1024) {
    offset = round_up(offset, align);
    p.smem.push_back({name, offset, bytes, stride, contents});
    offset += bytes;
  };
  const int q_tile_bytes = kTile * d * 2, o_tile_bytes = kTile * dv * 2;
  add("Q", q_bytes, q_tile_bytes,
      std::to_string(tiles) + " Q tile(s) of 128 rows x d, TMA boxes of " + std::to_string(box_cols) + " columns, " + std::to_string(swizzle) + "B swizzle");
  add("KV", stages * slot_bytes, slot_bytes,
      std::to_string(stages) + " ring slots of " + std::to_string(slot_bytes) + " B; K and V blocks alternate");
  if (o_aliases_q) {
    // O tile s lies inside Q tile s (dv <= d), so releasing Q tile s after O tile s's store frees nothing that the
    // other O tile still uses.
    if (dv > d) throw Error(ErrorCode::internal, key.name() + ": O can be staged over Q only when dv <= d");
    p.smem.push_back({"O", p.smem[0].offset, (tiles - 1) * q_tile_bytes + o_tile_bytes, q_tile_bytes,
                      "O tile s inside Q tile s for the TMA store (Q tile s is released only after O tile s's store)"});
  } else {
    add("O", o_bytes, o_tile_bytes, std::to_string(tiles) + " O tile(s) of 128 rows x dv for the TMA store, same box layout as Q");
  }
  add("Bars", barrier_bytes(stages), 0, "mbarriers (see the barrier list)", 16);
  add("Stats", stats_bytes, 0,
      "mailbox: per row, [acc_scale of the block in S0, O factor of tile 0, acc_scale of the block in S1, O factor of tile 1 "
      "(two tiles)]", 16);
  add("TmemAddr", 16, 0, "TMEM base address written by tcgen05.alloc", 16);
  p.smem_bytes = round_up(offset, 16);

  // TMEM, two tiles: S0, S1 (fp32, 128 columns each), O0, O1 (dv columns each), P_s (bf16 pairs, 64 columns).
  // P_s gets columns of its own where they fit (dv <= 64): then the next QK into S_s needs no wait, since the
  // commit that tells softmax S_s is ready also covers the PV issued before it. Otherwise P_s lies over S_s's
  // upper half and that QK's keys over it wait for the PV that reads P_s (PvDone: the PTX ISA does not order
  // MMAs of different accumulators); its keys below P_s go first, before the wait. One tile: S0 and S1 (64
  // columns each) for the blocks' parities, P0 and P1 (32 each) of their own, O (256); QK(j + 2) into S_(j % 2)
  // is issued after PV(j), so its commit covers it.
  const int s_cols = tile_n, p_cols = tile_n / 2;
  const bool p_own_columns = tiles == 1 || 2 * s_cols + 2 * dv + 2 * p_cols <= static_cast<int>(sm100::kTmemColumns);
  const int p_first = tiles == 1 ? 2 * s_cols : p_own_columns ? 2 * s_cols + 2 * dv : s_cols / 2;
  const int p_step = p_own_columns ? p_cols : s_cols;
  const int o_first = tiles == 1 ? 256 : 2 * s_cols;  // one tile: O after S and P, at a column a power of two
  p.tmem_columns = static_cast<int>(sm100::kTmemColumns);  // all of TMEM: one CTA per SM
  const std::string next_qk = tiles == 1 ? "the QK MMA two blocks on" : "the next QK MMA of tile 0";
  const std::string s_note = p_own_columns
                                 ? "rewritten by " + next_qk + ", issued right behind the PV (P0 has columns of its own)"
                                 : "rewritten by " + next_qk + ": its first " + std::to_string(s_cols / 2) +
                                       " keys (below P0) right behind the PV, the rest only once the PV that reads P0 has "
                                       "completed (PvDone: the PTX ISA does not order MMAs of different accumulators)";
  p.tmem = {
      {"S0", 0, s_cols, s_note},
      {"S1", s_cols, s_cols, tiles == 1 ? "as S0, for the odd blocks" : "as S0, for tile 1"},
      {"P0", p_first, p_cols,
       p_own_columns ? "bf16 pairs; written by softmax 0 once S0 of the next block is ready (which covers the PV reading P0)"
                     : "bf16 pairs over S0's upper half; written by softmax 0 after it has read all of S0 into registers"},
      {"P1", p_first + p_step, p_cols, tiles == 1 ? "as P0, for S1" : "as P0, for tile 1"},
      {"O0", o_first, dv, "accumulated by PV; rescaled by correction only between PV(j-1) completing and PV(j) issuing (PvReady)"},
  };
  if (tiles == 2) p.tmem.push_back({"O1", o_first + dv, dv, "as O0, for tile 1"});

  const Registers r = registers_for(shape, dv, key.window);
  if (tiles == 2) {
    p.roles = {
        {"Softmax0", 0, 4, r.softmax, "S0 from TMEM, mask, row max, lazy rescale, exp2, P0 to TMEM, row sum, LSE"},
        {"Softmax1", 4, 4, r.softmax, "the same for Q tile 1 (ping-pong with Softmax0)"},
        {"Correction", 8, 4, r.correction, "rescale O0/O1 when the max moved, final 1/row_sum, O to swizzled smem"},
    };
  } else {
    p.roles = {
        {"Softmax0", 0, 4, r.softmax, "S0 or S1 (the block's parity) from TMEM, mask, row max, lazy rescale, exp2, P to TMEM, row sum, LSE"},
        {"Correction", 4, 4, r.correction, "rescale O when the max moved (once PvDone has the previous PV), final 1/row_sum, O to swizzled smem"},
    };
  }
  const int w0 = 4 * (tiles + 1);  // the last warpgroup
  p.roles.push_back({"Mma", w0, 1, r.other, "allocates TMEM; issues QK (SS) and PV (TS) MMAs and their commits"});
  p.roles.push_back({"Epilogue", w0 + 1, 1, r.other, "TMA store of O tiles"});
  p.roles.push_back({"Load", w0 + 2, 1, r.other, "TMA loads of Q tiles and the K/V ring"});
  p.roles.push_back({"Spare", w0 + 3, 1, r.other, "idle (keeps the last warpgroup whole for setmaxnreg)"});

  const int q_tx = kTile * d * 2;
  const std::string pv_done_note =
      tiles == 1 ? "commit after PV(j): correction may rescale O (S(j+1)'s commit came before this PV)"
      : p_own_columns ? "not used: P has columns of its own"
                      : "commit after PV: P may be overwritten by the next QK into S";
  p.barriers = {
      {"QFull", tiles, 1, true, "Load", "Mma", "Q tile landed (" + std::to_string(q_tx) + " B)"},
      {"QEmpty", tiles, 1, false, o_aliases_q ? "Epilogue" : "Mma", "Load",
       o_aliases_q ? "O store has read the Q buffer" : "commit after the tile's last QK MMA"},
      {"KvFull", stages, 1, true, "Load", "Mma", "K or V block landed"},
      {"KvEmpty", stages, 1, false, "Mma", "Load", "commit after the MMAs reading the slot"},
      {"SFull", 2, 1, false, "Mma", "Softmax",
       tiles == 1 ? "commit after S = Q K^T into the buffer (also: the PV two blocks back is complete)"
                  : "commit after S = Q K^T (also: the previous PV is complete)"},
      {"PvReady", 2, kTile + 4, false, "Softmax+Correction", "Mma",
       tiles == 2 ? "P of the PV's first " + std::to_string(p.pv_early_steps) + " k-steps stored (128 softmax threads) and O rescaled (4 correction warps)"
                  : "P stored (128 softmax threads) and O rescaled (4 correction warps)"},
      {"PLast", tiles == 2 ? 2 : 0, kTile, false, "Softmax", "Mma",
       tiles == 2 ? "the rest of P stored (128 softmax threads): the PV's last k-steps may go" : "not used: P is handed over whole"},
      {"PvDone", tiles == 2 && p_own_columns ? 0 : 2, 1, false, "Mma", tiles == 1 ? "Correction" : "Mma", pv_done_note},
      {"StatsFull", 2, kTile, false, "Softmax", "Correction",
       "acc_scale of the block in the mailbox; no empty barrier: softmax rewrites it only after S of a later block, "
       "committed after a PV that waited for correction's PvReady, which follows its read"},
      {"FinalFull", tiles, kTile, false, "Softmax", "Correction", "the tile's O factor (1 / row_sum, with a sink less) in the mailbox"},
      {"FinalEmpty", tiles, kTile, false, "Correction", "Softmax", "O factor read"},
      {"OFull", tiles, 1, false, "Mma", "Correction", "commit after the tile's last PV"},
      {"OStaged", tiles, kTile, false, "Correction", "Epilogue", "normalised O in swizzled smem (after fence.proxy.async)"},
      {"OFree", tiles, 1, false, "Epilogue", "Correction", "TMA store has read the O buffer"},
      {"VTail", v_tail ? 1 : 0, 1, true, "Load", "Load",
       v_tail ? "the top V block of a tile landed; the Load warp zeroes its rows past the sequence's keys, then "
                "arrives on KvFull"
                  : "not used: dense keys end at the tensor's edge (TMA fills zeros)"},
  };

  p.tma = {
      {"Q", box_cols, kTile / key.gqa_pack, swizzle},
      {"K", box_cols, tile_n, swizzle},
      {"V", box_cols, tile_n, swizzle},
      {"O", box_cols, kTile / key.gqa_pack, swizzle},
  };
  if (key.backend == Backend::sm100_emulated) p.scratch_bytes_per_cta = static_cast<long long>(sm100::kEmuTmemSlotBytes);

  p.risks = {
      "TS-form P packing (element 2c in bits 15:0) and the accumulator lane map follow the PTX ISA reading in "
      "docs/blackwell-facts.md; the emulator encodes the same reading, so only a real sm_100 run can refute it: "
      "the first-use self-check against the portable kernel catches a mismatch and falls back.",
      "setmaxnreg is skipped in emulated (sm_90a) builds: the emulated MMAs run in the MMA warp, which needs far more "
      "than its hardware budget of " + std::to_string(r.other) + " registers.",
      "Emulated causal and windowed plans are persistent (the same tile loop, walking tiles longest first), the "
      "hardware dense causal and windowed ones are not.",
      "Ragged batches: every role walks the tiles of the longest sequence's layout and skips those past their "
      "sequence's rows (each reads cu_seqlens for it); tiles are dealt out statically, so a ragged batch balances "
      "less well than the sm90 kernel's drawn tiles. run() never reads the lengths: ones that break their rules "
      "are not caught.",
      "Fallback: head_dim 32 and head-dim pairs other than (64,64), (96,96), (128,128), (192,128), (256,256), "
      "split-KV and decode-sized sequences use the portable kernels.",
      "Paged caches: a K/V block loads in pieces inside pages (one TMA box per piece and column box, lane p of the "
      "Load warp issuing piece p), so pages much smaller than a block cost small copies (the sm90 kernel, issuing "
      "pieces the same way but V a whole piece a copy, measured 0.93-0.98x of contiguous K/V at pages of 16, "
      "0.98-1.00x from 32 up; its box-by-box V had 0.87-0.89x at 16).",
      p_own_columns
          ? "MMA order needs no assumption here: P has TMEM columns of its own, so QK(j) follows PV(j-1) at once "
            "without overwriting what the PV reads."
          : "MMA order is explicit, not assumed: FA4 issues QK(j) right behind PV(j-1) and relies on the tensor pipe "
            "running one thread's MMAs in issue order, which the PTX ISA promises only for MMAs of the same "
            "accumulator and shape. Here the QK's keys over P wait for PV's commit (PvDone); its keys below P are "
            "issued before the wait and run during it, the rest of the commit round trip can idle the tensor pipe "
            "once per tile and block. Experiment on a B200: run the assume_mma_order build (DebugFault) "
            "on long problems against the reference (a mismatch falsifies the in-order assumption) and time both "
            "builds; only if it holds and the gap matters, adopt it as a named hardware assumption.",
      "Bounded waits: a barrier wait longer than " + std::to_string(p.wait_timeout_ms) +
          " ms traps (emulated builds first print the barrier's name); a preempted or debugged kernel could trip it.",
  };
  if (o_aliases_q) p.risks.push_back("O is staged over Q: the next tile's Q load waits for the previous O store.");
  if (tiles == 1)
    p.risks.push_back(
        "One Q tile (dv 256): QK(j + 1) is issued before PV(j), so correction waits for PV(j - 1) on PvDone before it "
        "rescales O. No planted defect tests that wait: in the emulation a correction that skipped it would read O "
        "before PV(j - 1) ran only by timing (the emulated PV is slow, so most likely), not by construction. The "
        "tmem_reuse_race and assume_mma_order builds break nothing here (P has columns of its own).");
  return p;
}

LaunchShape Sm100Backend::launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) const {
  return tile_grid(plan, scheduled, sm_count);
}

int Sm100Backend::tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out) const {
  return attention_maps(plan, problem, out);
}

}  // namespace

const KernelBackend& sm100_backend() {
  static const Sm100Backend backend(false);
  return backend;
}

const KernelBackend& sm100_emulated_backend() {
  static const Sm100Backend backend(true);
  return backend;
}

}  // namespace fa4::detail
