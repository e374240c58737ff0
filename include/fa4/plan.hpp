// KernelKey and Plan: what selects a kernel, and the one source of truth for how it is built and launched.
// Codegen (the constexpr preamble), the launch and the human-readable report all read the Plan; nothing
// re-derives these numbers elsewhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fa4/export.h"

namespace fa4 {

enum class DType { bf16, fp16 };
FA4_API const char* to_string(DType dtype);

// Which kernel family runs. `automatic` picks sm100 on sm_100 devices and portable elsewhere.
enum class Backend { automatic, portable, sm100, sm100_emulated, sm90 };
constexpr Backend kLastBackend = Backend::sm90;
FA4_API const char* to_string(Backend backend);
FA4_API Backend backend_from_string(const std::string& name);  // "auto", "portable", "sm90", "sm100", "sm100_emulated"

// Deliberate defects, compiled in only on request, that prove the emulated tests catch each failure mode.
enum class DebugFault {
  none,
  skip_rescale,      // O and row_sum are not rescaled when the running max grows
  early_normalize,   // P is divided by the partial row_sum before PV
  tmem_reuse_race,   // S/P region rewritten before its PV consumer released it
  wrong_gqa_map,     // q head h reads kv head h % heads_kv instead of h / q_heads_per_kv
  // Ordering defects that only the adversarial emulation (Emulation::adversarial) can show:
  assume_mma_order,  // QK(j) issued behind PV(j-1) with no wait, trusting MMAs of different shape to run in order
  skip_wait_st,      // P is announced to the MMA warp before tcgen05.wait::st
  skip_wait_ld,      // S registers are used before tcgen05.wait::ld
  skip_relay_fence,  // the softmax-to-correction relay arrives without tcgen05.fence::before_thread_sync
  // Failures of the whole kernel, for the self-check's isolation tests:
  trap,              // every CTA traps at once
  hang,              // a barrier is never signalled: the bounded waits (1 s here) turn the deadlock into a trap
  spin,              // one warp loops forever outside any barrier wait: only the self-check's time limit ends it
};
constexpr DebugFault kLastDebugFault = DebugFault::spin;
FA4_API const char* to_string(DebugFault fault);

// How the sm90a emulation of tcgen05 executes (Backend::sm100_emulated only). A launch argument, not part of
// the key: one emulated cubin runs in either mode.
enum class Emulation {
  strict,       // MMAs run in issue order at their commit; tcgen05.ld/st take effect at once
  adversarial,  // the least the PTX ISA promises: unordered MMAs run in another order (reversed, or seeded
                // random), tcgen05.st lands only at wait::st, tcgen05.ld results only at wait::ld, and a thread
                // sync without the tcgen05 fence on either side of it traps
};
const char* to_string(Emulation emulation);

// The PTX target variant of a compile: sm_90 (generic), sm_90a (arch-specific: that exact chip) or sm_100f
// (family: every chip of that family, e.g. sm_100 and sm_103).
enum class ArchVariant { generic, specific, family };

// The (head_dim, head_dim_v) pairs the library takes: equal dims of 32, 64, 96, 128, 192 or 256, and
// (192, 128). The portable kernel serves all of them; the sm100 kernel a subset (runtime/backends/sm100/backend.cpp).
struct HeadDims {
  int head_dim, head_dim_v;
};
FA4_API const std::vector<HeadDims>& supported_head_dims();
FA4_API bool head_dims_supported(int64_t head_dim, int64_t head_dim_v);

// What a kernel computes: attention, or the merge of partial attention states (split-KV, cascade).
enum class KernelOp { attention, combine };

// Only what changes generated code. Batch, sequence lengths, head counts, strides, pointers and the
// softmax scale are kernel arguments, so a warm-up call and a real call map to the same key.
struct FA4_API KernelKey {
  KernelOp op = KernelOp::attention;
  Backend backend = Backend::portable;
  int arch = 0;                 // compute capability x10 of the compile target: 80, 90, 100, 120, ...
  ArchVariant variant = ArchVariant::generic;
  DType dtype = DType::bf16;
  int head_dim = 128;
  int head_dim_v = 128;
  bool causal = false;
  bool lse = false;             // the kernel writes the log-sum-exp
  int gqa_pack = 1;             // q heads packed into one tile's rows; 1 = no packing
  bool varlen = false;          // per-sequence lengths from device arrays (ragged, seqused_k); backends whose
                                // code reads them in every kernel (portable) keep it false
  bool paged = false;           // K/V rows through a page table
  bool split = false;           // split-KV: partial outputs to a workspace (combine: fp32 partial states)
  bool decode = false;          // the decode kernel: a tile of a few query rows per kv head, warps splitting
                                // the keys (KernelConfig::decode)
  bool window = false;          // variants: a sliding window, softcapping, attention sinks
  bool softcap = false;
  bool sinks = false;
  DebugFault fault = DebugFault::none;

  std::string target() const;   // NVRTC target: "sm_80", "sm_90a", "sm_100f", ...
  std::string name() const;     // stable, human-readable, e.g. "portable_sm90_bf16_d128_causal_lse"
  bool operator==(const KernelKey& other) const;
  bool operator!=(const KernelKey& other) const { return !(*this == other); }
};

struct SmemBuffer {
  std::string name;       // identifier used in the generated preamble (kSmem<Name>Offset/Bytes)
  int offset = 0;         // bytes from the start of dynamic shared memory
  int bytes = 0;          // total size, all stages
  int stride = 0;         // bytes from one per-tile (or per-stage) instance to the next; 0: one instance
  std::string contents;   // what lives there, for the report
};

struct TmemRegion {
  std::string name;
  int first_column = 0;
  int columns = 0;
  std::string reuse_rule;  // when the region may be overwritten again
};

struct WarpRole {
  std::string name;
  int first_warp = 0;
  int warps = 0;
  int registers = 0;      // per thread after setmaxnreg (0: no setmaxnreg)
  std::string job;
};

struct BarrierSpec {
  std::string name;
  int instances = 1;      // one per stage
  int arrivals = 1;       // arrival count the mbarrier is initialised with
  bool expects_tx = false;
  std::string producer;
  std::string consumer;
  std::string signal;     // what completion means
};

struct TmaBox {
  std::string tensor;     // "q", "k", "v", "o"
  int box_cols = 0;       // elements along the contiguous head dimension
  int box_rows = 0;       // sequence rows
  int swizzle_bytes = 0;  // 0, 32, 64 or 128
  int col_boxes = 1;      // column boxes one copy brings (1, or head dim / box_cols: the whole row width),
                          // landing one after another, each box_rows x box_cols
};

struct FA4_API Plan {
  KernelKey key;
  std::string kernel_name;   // extern "C" entry point in the generated source
  std::string source;        // kernel_src/ file that holds the kernel (the root of the assembly)
  int threads = 0;           // per CTA
  int tile_m = 0;            // query rows per tile
  int tile_n = 0;            // key rows per KV block
  int warps_m = 0;           // portable: warps along M (each owns tile_m / warps_m rows)
  int q_tiles = 1;           // Q tiles per CTA (sm100 ping-pong softmax)
  int kv_stages = 0;         // shared-memory pipeline depth for K/V
  int smem_bytes = 0;        // dynamic shared memory per CTA
  std::vector<SmemBuffer> smem;
  int tmem_columns = 0;      // allocated TMEM columns (sm100)
  std::vector<TmemRegion> tmem;
  std::vector<WarpRole> roles;
  std::vector<BarrierSpec> barriers;
  std::vector<TmaBox> tma;
  bool persistent = false;   // grid = min(SMs, tiles), tiles walked by a static scheduler
  int tiles_ahead = 0;       // sm90: a CTA draws tile t once every role has taken tile t - tiles_ahead (at most
                             // the TileFull ring's slots; 0: no tile ring)
  bool rows_from_bottom = false;  // sm90: where later rows see more keys (fa4k::later_rows_longer), a sequence's
                                  // row blocks end at its last row, so the partial one is the cheapest
                                  // (fa4k::tile_first_row)
  long long l2_section_bytes = 0;  // dense causal tile order: longest tiles first across the head groups of a
                                   // section whose K/V fit in this many bytes of L2 (0: one head after another)
  long long l2_section_min_head_bytes = 0;  // ... only where a head group's K/V has at least this many bytes
  long long scratch_bytes_per_cta = 0;  // device scratch per CTA of the grid (sm100 emulation: its TMEM backing
                                        // store; sm90 causal: the tile counters); zeroed when allocated
  int soft_exp2_every = 0;   // sm100: one exp2 in this many done on the FMA pipe (0: none)
  int pv_early_steps = 0;    // sm100: the PV's k-steps issued once the softmax has stored the P they read
                             // (PvReady), before the rest of P (PLast); 0: the whole PV waits for all of P
  int rescale_threshold_log2 = 8;
  int wait_timeout_ms = 0;   // sm100: a barrier wait longer than this traps (0: no watchdog)
  int split_blocks = 0;      // split-KV with num_splits 0: KV blocks per part (a constant: batch invariance) ...
  int short_split_blocks = 0;  // ... or this many while that gives a sequence at most short_split_parts
  int short_split_parts = 0;   // parts (decode: short sequences spread over more CTAs; 0: no such rule)
  int fold_split_blocks = 0;  // decode split-KV: a CTA may run consecutive parts of up to this many KV blocks
                              // in all, and a cut sequence of at most this many is its warps' raw part
                              // states folded in part order (SplitRule::fold_blocks; 0: one part a CTA)
  int ctas_per_sm = 0;       // decode: CTAs an SM holds at once (by shared memory); 0: not planned
  std::vector<std::string> risks;  // known risks and the fallback chosen

  int registers_total() const;     // sum over roles of warps * 32 * registers
  int launch_registers() const;    // a thread's registers at launch, one CTA per SM: 65536 / threads in
                                   // steps of 8 (setmaxnreg moves registers within threads x this)
};

// Grid, block and memory for one launch of a Plan on a given problem.
struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned cluster[3] = {1, 1, 1};
  unsigned smem_bytes = 0;
};

}  // namespace fa4
