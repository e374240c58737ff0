// The sm90 backend: the FlashAttention-3-class forward kernel for Hopper (kernel_src/sm90/fwd.cuh), compiled
// for sm_90a (wgmma, setmaxnreg). The Plan holds every tile, stage, buffer, warp role, register budget,
// barrier and TMA box the kernel uses.
#include <algorithm>

#include "fa4/error.hpp"
#include "runtime/backend.hpp"
#include "runtime/tma.hpp"

namespace fa4::detail {
namespace {

constexpr int kWgRows = 64;          // rows per consumer warpgroup (the wgmma M)
constexpr int kSmemBudget = 232448;  // sm_90 opt-in shared memory per block
constexpr int kMaxStages = 4;        // deeper rings buy nothing once loads hide behind two blocks of MMAs

int round_up(int x, int to) { return (x + to - 1) / to * to; }

// Rows per tile: three consumer warpgroups at d <= 64, where a row's softmax costs as much as its two GEMMs
// and a third warpgroup keeps the tensor cores fed while two run softmax; two elsewhere, where S, P and O
// of a 64-row slice need more registers than a third warpgroup would leave each, and with fp16 softcap (its
// forms spill at 160 registers; bf16 softcap fits, and its MUFU-heavy softmax needs the third warpgroup most:
// 0.58 of the plain kernel's speed with two, bench/results/2026-12-05-h100-sm90-short-rows.md).
int tile_m(const KernelKey& key) {
  return key.head_dim <= 64 && !(key.softcap && key.dtype == DType::fp16) ? 3 * kWgRows : 2 * kWgRows;
}

// Registers per thread after setmaxnreg: 128 * producer + consumer threads * consumer <= the CTA's launch
// allocation (Plan::launch_registers; setmaxnreg moves registers between its warpgroups; an increase past
// it waits forever). ptxas compiles the consumer code against its own budget, so S, P and O fit in
// registers at once.
struct RegisterSplit {
  int producer, consumer;
};
RegisterSplit register_split(int consumers, int launch_registers) {
  const int producer = consumers == 2 ? 40 : 32;  // the scheduler's ragged search fits in 32
  return {producer, ((consumers + 1) * launch_registers - producer) / consumers / 8 * 8};
}

// Keys per K/V block: the QK wgmma's N. As wide as a consumer's registers hold S (N/2 fp32), P (N/4) and O
// (dv/2) at once and two stages of K and V fit beside Q, and where possible O's own buffer too (then the
// next tile's Q loads while O is stored); three consumers' S, P and O leave room for 128. At d <= 128, 128:
// a block that divides the usual sequence lengths (160 left a 512-key sequence's last block a fifth full:
// d128 32x512 ran at 430 TFLOP/s against 510 with 128, 16x1024 at 533 against 583, equal from 8k on); causal
// tiles of 128 mask fewer keys of the diagonal blocks. d256 keeps 80 (64: as fast over the sweep, 2 %
// slower on long non-causal rows; causal: +1 to +3 % up to 2k tokens, -2 to -3 % from 4k). (192, 128): 128
// when causal, where O is then staged in the ring (two stages of 128 keys leave no room for its buffer):
// H100, +4 to +11 % up to 2k tokens, +0 to +5 % at 4k and 8k, even at 16k; 112 with O's own buffer
// otherwise, where 128 lost 1 to 8 % from 4k (bench/results/2026-12-07-h100-sm90-fa4cute-sweep.md).
// A paged block loads in pieces of fa4k::paged_piece_rows keys (the page, at most the largest power of two
// dividing the width), one TMA copy a lane. Pieces of 32 or more rows fill the ring as fast as whole blocks
// (tools/tma_page_probe.cu, from HBM: 4405 GB/s in pieces of 32, 4360 in blocks of 128), so a paged cache
// keeps the width when it is a multiple of 32 (128, 192) and narrows to the power of two below it otherwise
// (112 and 80 would load in pieces of 16).
int tile_n(int head_dim, int consumers, bool causal, bool paged) {
  const int n = head_dim <= 64    ? (causal || consumers == 3 ? 128 : 192)
                : head_dim <= 128 ? 128
                : head_dim <= 192 ? (causal ? 128 : 112)
                                  : 80;
  if (!paged || n % 32 == 0) return n;
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  return pow2;
}

// How a tile's shared memory is shared out (one place, for the key's GQA packing and the Plan): the deepest
// K/V ring that fits; O gets its own buffer unless that leaves fewer than two stages. Then (d256, causal
// (192, 128)) each consumer stages its 64 rows in a slot of the tile's last K/V block, free once that block's
// QKs and PVs are done, and the next tile's Q loads after the last QKs as with a buffer of its own. (O staged
// over Q made that load wait for the O store: 3-7 % of d256 rows up to 2k keys; O stored from the consumers'
// registers lost 4 %, Q prefetched into L2 gained nothing: bench/results/2026-12-05-h100-sm90-short-rows.md.)
// A second Q buffer where it fits beside that ring (d64 to d128 with O in its own buffer, but not d64 with
// fp16 softcap and its 192-key blocks): the next tile's Q loads while this one's last blocks run instead of
// after every consumer's last QK (H200: d128 32x512 +4 %, 1x16k +4 %; issuing the next tile's first QK before
// staging O as well gained less: bench/results/2026-12-06-h200-sm90-two-q-buffers.md).
constexpr int kTileSlots = 2;       // the announced tiles' ring (Plan::tiles_ahead says how far ahead) ...
constexpr int kAnnounceBytes = 64;  // ... each with its sequence and K/V blocks (the kernel's Work)
int barrier_bytes(int stages, int q_stages) {
  return 8 * (3 + 2 * q_stages + 4 * stages + 2 * kTileSlots) + kAnnounceBytes * kTileSlots;
}

struct SmemSplit {
  int q_bytes, k_slot, v_slot, o_bytes;  // a Q tile, a K and a V block, the O tile
  int stages = 0, q_stages = 1;
  bool o_in_ring = false;
};
// (stages < 2: nothing fits, a head dim the backend does not serve; plan() throws.)
SmemSplit smem_split(const KernelKey& key) {
  const int rows = tile_m(key), n = tile_n(key.head_dim, rows / kWgRows, key.causal, key.paged);
  SmemSplit s{rows * key.head_dim * 2, n * key.head_dim * 2, n * key.head_dim_v * 2, rows * key.head_dim_v * 2};
  auto fits = [&](int stages, bool o_in_ring, int q_stages) {
    int end = round_up(q_stages * s.q_bytes, 1024) + stages * (s.k_slot + s.v_slot);
    if (!o_in_ring) end = round_up(end, 1024) + s.o_bytes;
    return round_up(end, 16) + barrier_bytes(stages, q_stages) <= kSmemBudget;
  };
  for (bool o_in_ring : {false, true}) {
    s.o_in_ring = o_in_ring;
    s.stages = kMaxStages;
    while (s.stages >= 2 && !fits(s.stages, o_in_ring, 1)) --s.stages;
    if (s.stages >= 2) break;
  }
  s.q_stages = !s.o_in_ring && fits(s.stages, false, 2) ? 2 : 1;
  return s;
}

// Q heads of one kv head packed into a tile's rows: whole tokens a tile. Where O is staged in the ring, each
// warpgroup's 64 rows are stored as a box of their own: whole tokens a warpgroup too.
int gqa_pack(const KernelKey& key, int q_heads_per_kv) {
  const int whole = smem_split(key).o_in_ring ? kWgRows : tile_m(key);
  return q_heads_per_kv > 1 && whole % q_heads_per_kv == 0 ? q_heads_per_kv : 1;
}

class Sm90Backend final : public KernelBackend {
 public:
  Backend id() const override { return Backend::sm90; }
  std::string cannot_run_on(int device_arch) const override {
    return device_arch == 90 ? "" : "sm90 needs an sm_90 device (wgmma), this one is sm_" + std::to_string(device_arch);
  }
  KernelKey key(KernelKey base, const KernelConfig& config, int) const override {
    base.arch = 90;
    base.variant = ArchVariant::specific;
    base.gqa_pack = gqa_pack(base, config.q_heads_per_kv);
    return base;
  }
  bool supports(const KernelKey& key, std::string* why) const override;
  Plan plan(const KernelKey& key) const override;
  LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) const override {
    return tile_grid(plan, scheduled, sm_count);
  }
  int tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out) const override {
    return attention_maps(plan, problem, out);
  }
};

bool Sm90Backend::supports(const KernelKey& key, std::string* why) const {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (key.backend != id()) return no("not an sm90 key");
  if (key.fault != DebugFault::none) return no("debug faults are built into the sm100 kernel only");
  const std::string gap = dense_prefill_gap(key, "sm90", tile_m(key),
                                            {{64, 64}, {96, 96}, {128, 128}, {256, 256}, {192, 128}});
  return gap.empty() || no(gap);
}

Plan Sm90Backend::plan(const KernelKey& key) const {  // make_plan checked the key
  Plan p;
  p.key = key;
  p.kernel_name = "fa4_sm90_fwd";
  p.source = "sm90/fwd.cuh";
  const int consumers = tile_m(key) / kWgRows, consumer_warps = 4 * consumers;
  p.threads = 128 * (consumers + 1);
  const RegisterSplit regs = register_split(consumers, p.launch_registers());
  p.tile_m = consumers * kWgRows;
  p.tile_n = tile_n(key.head_dim, consumers, key.causal, key.paged);
  // One CTA per SM walks the tiles. Full dense tiles all cost the same and are dealt out statically; causal
  // and windowed tiles (longest first) and ragged ones (found on the device, sequence by sequence) are drawn
  // from two int counters in the stream's scratch as CTAs come free.
  p.persistent = true;
  // Causal tiles longest first across the heads of an L2 section (as on sm100): head after head, the last
  // head's longest tile starts when little else is left and runs alone (d256 causal 1x16k: up to 12% of the
  // call); across heads it starts early. A section's K/V keeps to under two thirds of the 50 MB L2. Not for
  // heads of under 1 MiB of K/V: head after head, a head's few tiles run together and read its K/V from HBM
  // once, and the last head's longest tile is short (H100, sections against none: d128 causal 32x512 -7 %,
  // 16x1024 -3 %, 8x2048 +-0; d256 causal 16x1024 to 1x16k +5 to +12 %:
  // bench/results/2026-12-07-h100-sm90-ring-l2.md).
  if (key.causal) p.l2_section_bytes = 32ll << 20, p.l2_section_min_head_bytes = 1ll << 20;
  if (key.causal || key.window || key.varlen) p.scratch_bytes_per_cta = 8;
  // Row blocks counted from a sequence's last row where later rows see more keys: the partial block is then
  // the top one, which visits the fewest K/V blocks (d64 causal 512 tokens in 192-row tiles: 8 block visits
  // a head instead of 9).
  p.rows_from_bottom = key.causal || key.window;
  p.rescale_threshold_log2 = 8;  // lazy rescale: P may reach 2^8 before the max (and O) are updated
  p.wait_timeout_ms = 4000;       // the producer's barrier waits trap after this: a hang becomes an error

  // Shared memory: 128B swizzle when every row is a whole number of 128-B spans, else 64B (d = 96).
  const int d = key.head_dim, dv = key.head_dim_v, n = p.tile_n;
  const int swizzle = (d % 64 == 0 && dv % 64 == 0) ? 128 : 64;
  const int box_cols = swizzle / 2;
  const SmemSplit split = smem_split(key);
  const int rows = p.tile_m, q_bytes = split.q_bytes, o_bytes = split.o_bytes, k_slot = split.k_slot, v_slot = split.v_slot;
  const int stages = split.stages, q_stages = split.q_stages;
  const bool o_in_ring = split.o_in_ring;
  // Tiles drawn ahead. Two (the ring's depth): a CTA draws its next tile as it starts one, and a second Q
  // buffer can load that tile's Q early. Dense causal tiles with one Q buffer: one, drawn once the producer
  // has issued this tile's loads. Drawn earlier, longest first, CTAs still busy took the next L2 section's
  // longest tiles and SMs idled at the end (H100, d256 causal 1x16k: 0.84 of cycles active, 0.92 with one
  // ahead; d256 causal rows +0.5 to +8 %). With a second Q buffer one ahead lost up to 5 % at d128 and was
  // -3 to +1 % at d64: bench/results/2026-12-07-h100-sm90-causal-balance.md. Causal (192, 128), also one
  // ahead: two ahead was even (0.99-1.01 of it, bench/results/2026-12-07-h100-sm90-fa4cute-sweep.md).
  p.tiles_ahead = key.causal && !key.varlen && q_stages == 1 ? 1 : kTileSlots;
  if (stages < 2) throw Error(ErrorCode::internal, key.name() + ": fewer than two K/V stages fit in shared memory");
  const int o_part_bytes = kWgRows * dv * 2;
  if (o_in_ring && (consumers != 2 || k_slot < o_part_bytes || v_slot < o_part_bytes || kWgRows % key.gqa_pack != 0))
    throw Error(ErrorCode::internal, key.name() + ": O can be staged in the ring only by two consumers, 64 rows to a K or V slot");
  p.kv_stages = stages;

  int offset = 0;
  auto add = [&](const std::string& name, int bytes, int stride, const std::string& contents, int align = 1024) {
    offset = round_up(offset, align);
    p.smem.push_back({name, offset, bytes, stride, contents});
    offset += bytes;
  };
  const std::string boxes = "TMA boxes of " + std::to_string(box_cols) + " columns, " + std::to_string(swizzle) + "B swizzle";
  add("Q", q_stages * q_bytes, q_bytes,
      std::to_string(q_stages) + " Q tile(s) of " + std::to_string(rows) + " rows x d, " + boxes);
  add("K", stages * k_slot, k_slot, std::to_string(stages) + " K blocks of " + std::to_string(n) + " rows x d");
  add("V", stages * v_slot, v_slot, std::to_string(stages) + " V blocks of " + std::to_string(n) + " rows x dv");
  if (o_in_ring)
    p.smem.push_back({"O", p.smem[1].offset, o_bytes, 0,
                      "O in the slots of the tile's last K/V block for the TMA store: rows 0-63 in the K slot, 64-127 in the V "
                      "slot, a box of 64 rows each (the slots are refilled after the store has read them)"});
  else
    add("O", o_bytes, 0, "the O tile for the TMA store, same box layout as Q");
  add("Bars", barrier_bytes(stages, q_stages), 0, "mbarriers (see the barrier list) and the announced tiles", 16);
  p.smem_bytes = round_up(offset, 16);

  for (int c = 0; c < consumers; ++c)
    p.roles.push_back({"Consumer" + std::to_string(c), 4 * c, 4, regs.consumer,
                       "rows " + std::to_string(c * kWgRows) + "-" + std::to_string(c * kWgRows + kWgRows - 1) +
                           (c == 0 ? ": S = Q K^T (wgmma SS), online softmax, O += P V (wgmma RS) overlapped with the next "
                                     "softmax, its rows of O normalised into shared memory"
                                   : ", the same")});
  p.roles.push_back({"Producer", consumer_warps, 1, regs.producer,
                     "one thread issues the TMA loads of the K and V rings and Q, K a column box a copy, V every box of "
                     "its rows in one (paged: lane p looks up and loads piece p of each block)"});
  p.roles.push_back({"Storer", consumer_warps + 1, 1, regs.producer,
                     "one thread issues the TMA store of O once every consumer has staged its rows (the warp copies the rows "
                     "of a partial tile whose box would leave its sequence: ragged, or starting before token 0)"});
  p.roles.push_back({"Scheduler", consumer_warps + 2, 1, regs.producer,
                     "draws the tiles (ragged: finds each one's sequence) and announces them with their K/V blocks"});
  p.roles.push_back({"Spare", consumer_warps + 3, 1, regs.producer,
                     "idle (the producer warpgroup gives its registers to the consumers)"});
  p.barriers = {
      {"QFull", q_stages, 1, true, "Producer", "Consumers", "Q tile landed (" + std::to_string(q_bytes) + " B)"},
      {"QEmpty", q_stages, consumer_warps, false, "Consumers (one per warp)", "Producer", "every QK of the tile is complete"},
      {"KFull", stages, 1, true, "Producer", "Consumers", "K block landed"},
      {"KEmpty", stages, consumer_warps, false, o_in_ring ? "Consumers (one per warp; a tile's last block: Storer)" : "Consumers (one per warp)",
       "Producer", o_in_ring ? "the QK reading the K block is complete (the last block: O's store has read the slot)"
                             : "the QK reading the K block is complete"},
      {"VFull", stages, 1, true, "Producer", "Consumers", "V block landed"},
      {"VEmpty", stages, consumer_warps, false, o_in_ring ? "Consumers (one per warp; a tile's last block: Storer)" : "Consumers (one per warp)",
       "Producer", o_in_ring ? "the PV reading the V block is complete (the last block: O's store has read the slot)"
                             : "the PV reading the V block is complete"},
      {"OEmpty", 1, 1, false, "Storer", "Consumers", o_in_ring ? "the storer has passed the store barrier (O is staged in the ring: KEmpty, VEmpty say it was read)" : "the O store has read the O buffer"},
      {"OSlotK", 1, 4, false, "Consumer1 (one per warp)", "Consumer0",
       o_in_ring ? "consumer 1's last QK of the tile is complete: consumer 0 may stage its O rows in that K slot" : "unused: O has its own buffer"},
      {"OSlotV", 1, 4, false, "Consumer0 (one per warp)", "Consumer1",
       o_in_ring ? "consumer 0's last PV of the tile is complete: consumer 1 may stage its O rows in that V slot" : "unused: O has its own buffer"},
      {"TileFull", kTileSlots, 1, false, "Scheduler", "Consumers, Storer, Producer", "the next tile (or none) is announced"},
      {"TileEmpty", kTileSlots, consumer_warps + 2, false, "Consumers, Storer, Producer (one per warp)", "Scheduler", "the announcement is read"},
  };
  p.tma = {
      {"Q", box_cols, rows / key.gqa_pack, swizzle},
      {"K", box_cols, n, swizzle},
      // One copy brings a V piece's every column box: a paged block of pages of 16 goes in half the copies.
      {"V", box_cols, n, swizzle, dv / box_cols},
      {"O", box_cols, (o_in_ring ? kWgRows : rows) / key.gqa_pack, swizzle},
  };
  p.risks = {
      "Bounded waits: the producer's barrier waits trap after " + std::to_string(p.wait_timeout_ms) +
          " ms (a preempted or debugged kernel could trip it); the consumers' waits do not (a trap path among the "
          "wgmmas makes ptxas serialize them), so a consumer waits only on loads the producer issued.",
      "The consumers take turns to issue wgmmas (ping-pong, in a ring of " + std::to_string(consumers) +
          ") and all hold the same blocks, so their loops must stay in step: a change that lets one warpgroup skip a "
          "block deadlocks the turn barriers.",
      "Causal and ragged tiles are drawn from counters in the stream's scratch, which the last CTA to finish drawing "
      "zeroes for the next launch: a kernel killed mid-launch (a trap) leaves them set, but a trap also ends the context.",
      "Ragged batches: the scheduler warp finds each tile's sequence by reading cu_seqlens_q 32 sequences at a time; "
      "run() never reads them, so lengths that break their rules (decreasing, past total_q) are not caught.",
      "Paged KV: a K/V block loads in pieces inside one page (fa4k::paged_piece_rows: pages of 16 give 16-key "
      "pieces, so K takes 8 TMA copies per column box of a 128-key block and V 8 in all, a lane each; V's slot is "
      "then laid out piece by piece, which its PV descriptors follow); page indices are not checked on the device "
      "(one outside the cache loads zeros).",
      "Fallback: head dims other than (64,64), (96,96), (128,128), (256,256), (192,128), decode-sized sequences "
      "and split-KV use the portable kernels.",
  };
  if (o_in_ring)
    p.risks.push_back("O is staged in the slots of each tile's last K/V block: the storer, not the consumers, frees them, "
                      "so the ring's next loads there wait for the O store's read.");
  return p;
}

}  // namespace

const KernelBackend& sm90_backend() {
  static const Sm90Backend backend;
  return backend;
}

}  // namespace fa4::detail
