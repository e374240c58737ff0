// FlashAttention-4-style forward for Blackwell (sm_100a), and, with the same source, for sm_90a where the
// tcgen05 wrappers emulate the PTX semantics. Every number comes from the generated fa4cfg:: preamble (the
// Plan); docs/fa4-algorithm.md explains the algorithm, runtime/backends/sm100/backend.cpp the numbers.
//
// Two CTA shapes (the Plan's kQTiles). Up to dv 128 one CTA = 2 Q tiles of 128 rows (packed rows: token *
// gqa_pack + head in pack) against all needed K/V blocks of 128 rows. 16 warps:
//   0-3 Softmax0, 4-7 Softmax1: thread t owns row t of its tile (TMEM lane t)
//   8-11 Correction: row t of both tiles' O accumulators
//   12 Mma (owns TMEM), 13 Epilogue (TMA store), 14 Load (TMA loads), 15 spare
// Per KV block j and tile s:  S_s = Q_s K_j^T -> softmax_s -> P_s (over S_s; at dv <= 64 in columns of its
// own) ; O_s = O_s * acc + P_s V_j.
// At dv 256 one CTA = 1 Q tile against K/V blocks of 64 rows, 12 warps: 0-3 Softmax0, 4-7 Correction, 8 Mma,
// 9 Epilogue, 10 Load, 11 spare. S is double-buffered: block j's S and P lie in buffer b = j % 2 (P in
// columns of its own), so the Mma warp issues QK(j + 1) before PV(j) and the tensor pipe computes the next S
// while softmax works on this one (sb below names an S buffer; O is the one tile's).
// Variants (window, softcap, sinks) where the key has them. Ragged batches and seqused_k (kVarlen): every
// role walks the same tiles and skips those past their sequence's rows. Paged caches (kPaged): the Load warp
// loads each K/V block piece by piece inside its pages (common/paged.cuh).
#include "common/block_range.h"
#include "common/math.cuh"
#include "common/paged.cuh"
#include "common/params.h"
#include "common/ptx.cuh"
#include "common/tile_copy.cuh"
#include "sm100/tcgen05.cuh"

namespace fa4::sm100::fwd {

using namespace fa4cfg;

// ---- Plan facts, renamed for the code below ------------------------------------------------------
constexpr int kD = kHeadDim;
constexpr int kDv = kHeadDimV;
constexpr int kM = kTileM;                 // rows per Q tile (= MMA M)
constexpr int kN = kTileN;                 // rows per K/V block (= QK MMA N, PV MMA K)
constexpr int kPack = kGqaPack;            // q heads per kv head packed into a tile
constexpr Swizzle kSwizzle = swizzle_from_bytes(kTmaQSwizzle);
constexpr int kBoxCols = kTmaQBoxCols;     // elements per TMA box row
constexpr bool kOAliasesQ = kSmemOOffset == kSmemQOffset;
// P_s lies over S_s (Plan): the next QK's keys over P_s wait for PV_s's commit on PvDone.
constexpr bool kPvDone = kTmemP0Col >= kTmemS0Col && kTmemP0Col < kTmemS0Col + kTmemS0Cols;
// There P_s is S_s's top columns: the keys below it (S column = key) are outside P, so that part of the next
// QK may be issued before the PvDone wait and keep the tensor pipe busy across it.
constexpr int kKeysBelowP = kPvDone ? kTmemP0Col - kTmemS0Col : 0;
constexpr int kPvSteps = kN / 16;
// The PV's k-steps issued once PvReady says the softmax has stored the P they read (the Plan's
// pv_early_steps); PLast releases the rest. Softmax stores P 32 keys (two k-steps) at a time.
constexpr int kPvEarly = kPvEarlySteps > 0 ? kPvEarlySteps : kPvSteps;
static_assert(kPvEarly % 2 == 0 && kPvEarly <= kPvSteps && (kPvEarly < kPvSteps) == (kBarPLastCount > 0),
              "Plan: the PV's early k-steps end on a stored part of P; PLast where the PV is split");
static_assert(!kPvDone || (kTmemP0Col + kTmemP0Cols == kTmemS0Col + kTmemS0Cols &&
                           kTmemP1Col - kTmemS1Col == kKeysBelowP && kKeysBelowP % 16 == 0),
              "Plan: P_s over the top columns of S_s, at the same offset in both tiles, on a QK MMA's N step");
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;  // a thread's registers at launch (__launch_bounds__ below)
#define FA4_NEG_INF __int_as_float(0xff800000u)
static_assert(kM == 128 && ((kQTiles == 2 && kN == 128) || (kQTiles == 1 && kN == 64)),
              "the warp roles serve 2 Q tiles of 128 x 128 or 1 of 128 x 64");
// One tile: P has columns of its own, and PvDone tells correction that O holds the previous PV.
static_assert(kQTiles == 2 ? kPvDone == (kBarPvDoneCount > 0) : !kPvDone && kBarPvDoneCount == 2, "Plan: PvDone's use");
static_assert(kD % kBoxCols == 0 && kDv % kBoxCols == 0, "head dims are whole TMA boxes");
static_assert(kTmemO0Col + kQTiles * kDv <= fa4cfg::kTmemColumns, "TMEM map exceeds the allocation");
// O of tile s (the Plan's O1 follows O0; Sm100Plan.Invariants checks). One tile: its only O, whatever S buffer.
__device__ __forceinline__ u32 o_col(int s) { return kTmemO0Col + (kQTiles == 2 ? s * kDv : 0); }
static_assert(kEmulated || kWaitTimeoutMs <= 4000, "the hardware watchdog's 32-bit clock wraps after 4.29 s");
static_assert(kTcgen05Emulated == kEmulated, "the compile target selected the other tcgen05 implementation than the Plan");

// The values of fa4::DebugFault (plan.hpp), in order.
enum class Fault {
  none, skip_rescale, early_normalize, tmem_reuse_race, wrong_gqa_map,
  assume_mma_order, skip_wait_st, skip_wait_ld, skip_relay_fence, trap, hang, spin
};
constexpr Fault kFault = static_cast<Fault>(kDebugFault);

// ---- barriers --------------------------------------------------------------------------------------
__device__ __forceinline__ u32 globaltimer_ns_low() {
  u32 t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  return t;
}

// The grid's first wait to time out names its barrier; every other one traps without a word. (When every
// thread of a deadlocked grid printed at once, the H200 sometimes never finished the printf calls: no trap,
// a hang.)
__device__ u32 g_deadlock_reported;
__device__ __noinline__ void report_deadlock(const char* what, u32 parity) {
  if (atomicExch(&g_deadlock_reported, 1u) == 0u)
    printf("fa4_sm100_fwd: block %d warp %d lane %d waited more than %d ms on %s (parity %u): deadlock, trapping\n",
           blockIdx.x, threadIdx.x / 32, threadIdx.x % 32, kWaitTimeoutMs, what, parity);
}

// Every wait of the kernel: a whole warp (or, on hardware, the Mma role's one thread) waits for a barrier
// phase. A wait that outlasts the Plan's watchdog
// traps (a hang becomes an error); emulated builds name the barrier first. Hardware builds make no call
// here: a call would make the register-heavy roles spill around it.
// Hardware waits sleep in the try-wait (suspend-time hint) rather than spin: waiting warps leave the issue
// slots of their sub-partition to the softmax and MMA warps. The hint is far below the watchdog's limit.
constexpr u32 kSuspendHintNs = 1000000;
__device__ __forceinline__ bool try_wait(u64* bar, u32 parity) {
  if constexpr (kEmulated) return mbarrier_try_wait_parity(bar, parity);
  return mbarrier_try_wait_parity_suspend(bar, parity, kSuspendHintNs);
}

__device__ __forceinline__ void wait(u64* bar, u32 parity, const char* what) {
  // On hardware a phase already complete costs two instructions (test, branch): a try-wait with a hint
  // expands to four (the sleep and a second check, predicated off), paid on every wait of the steady loops.
  const bool done = kEmulated ? try_wait(bar, parity) : mbarrier_test_wait_parity(bar, parity);
  if (!done) {
    if constexpr (kEmulated) {  // a millisecond count: long limits; registers do not matter here
      u32 tick = globaltimer_ns_low(), waited_ms = 0;
      while (!try_wait(bar, parity)) {
        if (globaltimer_ns_low() - tick < 1000000u) continue;
        tick += 1000000u;
        if (++waited_ms > kWaitTimeoutMs) {
          report_deadlock(what, parity);
          __trap();
        }
      }
    } else if constexpr (kWaitTimeoutMs > 0) {
      // One register: the 32-bit nanosecond clock wraps after 4.29 s, so the limit stays below that (Plan).
      const u32 start = globaltimer_ns_low();
      while (!try_wait(bar, parity))
        if (globaltimer_ns_low() - start > kWaitTimeoutMs * 1000000u) __trap();
    } else {
      while (!try_wait(bar, parity)) {
      }
    }
  }
  tcgen05_thread_waited();
  // Callers are whole warps (reconverged at the loop's exit), or on hardware the Mma role's one thread.
  // Emulated builds also reconverge with a __syncwarp (the emulator's collectives expect it); on hardware
  // it would cost a divergence check per wait, and the .sync.aligned tcgen05.ld that follows relies on the
  // compiler's reconvergence at the loop exit instead (a hardware-only assumption: no emulated test sees it).
  if constexpr (kEmulated) __syncwarp();
}

// Every thread-side arrive of the kernel (tcgen05.commit arrives are the MMA warp's own).
__device__ __forceinline__ void signal(u64* bar) {
  tcgen05_thread_arrives();
  mbarrier_arrive(bar);
}

__device__ __forceinline__ float exp2_mufu(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp2 of a pair on the FMA pipe, packed: 2^x = 2^floor(x) * 2^f, f in [0, 1), with a cubic for 2^f
// (max rel. error ~1e-4, far below bf16 rounding). Adding 1.5 * 2^23 rounded down puts floor(x) in the
// low mantissa bits (exact: the difference below is an integer); shifting those bits by 23 lands them in
// the exponent field of 2^f's encoding. Inputs are clamped at -127, where the result is exactly 0 (the
// masked -inf too); between -127 and -126 it is a denormal below 2^-126 (ex2.approx.ftz gives 0 there).
__device__ __forceinline__ F32x2 exp2_fma2(F32x2 x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  const F32x2 clamped = {fmaxf(x.x, -127.f), fmaxf(x.y, -127.f)};
  const F32x2 shifted = f32x2_add_rm(clamped, {kRound, kRound});
  const F32x2 floor_x = f32x2_add(shifted, {-kRound, -kRound});
  const F32x2 f = f32x2_fma(floor_x, {-1.f, -1.f}, clamped);
  F32x2 p = f32x2_fma(f, {0.0771190891f, 0.0771190891f}, {0.2275643945f, 0.2275643945f});
  p = f32x2_fma(f, p, {0.6951461434f, 0.6951461434f});
  p = f32x2_fma(f, p, {1.f, 1.f});
  return {__uint_as_float((__float_as_uint(shifted.x) << 23) + __float_as_uint(p.x)),
          __uint_as_float((__float_as_uint(shifted.y) << 23) + __float_as_uint(p.y))};
}

// ---- shared memory ---------------------------------------------------------------------------------
// Two of each but the ring's: per Q tile, or per S buffer (a tile's, or in a one-tile CTA a block parity's:
// s_full, pv_ready, pv_done, p_last, stats_full). A one-tile CTA leaves the second of the others unused (kept: the
// same layout for both shapes; ptxas allocates the two-tile roles' registers differently, and spills, with
// another).
struct Barriers {
  u64 q_full[2], q_empty[2];
  u64 kv_full[kKvStages], kv_empty[kKvStages];  // adjacent: MmaRing reaches a slot's KvEmpty from its KvFull
  u64 s_full[2], pv_ready[2], pv_done[2], p_last[2];
  u64 stats_full[2], final_full[2], final_empty[2];
  u64 o_full[2], o_staged[2], o_free[2];
};
// Ragged, padded or paged caches (kVarlen, kPaged) also have the Load warp's own barrier right after these
// (Smem::v_tail).
static_assert(sizeof(Barriers) + (kVarlen || kPaged ? sizeof(u64) : 0) <= kSmemBarsBytes, "barrier block larger than the Plan's Bars buffer");

struct Smem {
  char* base;  // 1024-B aligned (checked at kernel start)
  __device__ char* q(int s) const { return base + kSmemQOffset + s * kSmemQStride; }
  __device__ char* o(int s) const { return base + kSmemOOffset + s * kSmemOStride; }  // inside q(s) when aliased
  __device__ char* slot(int i) const { return base + kSmemKVOffset + i * kSmemKVStride; }
  __device__ Barriers& bars() const { return *reinterpret_cast<Barriers*>(base + kSmemBarsOffset); }
  // kVarlen, kPaged: the barrier a tile's top V block lands on, which the Load warp cleans past the sequence's keys
  // before the Mma warp may read it (load_role).
  __device__ u64* v_tail() const { return reinterpret_cast<u64*>(base + kSmemBarsOffset + sizeof(Barriers)); }
  // Mailbox, per row: which 0, acc_scale of the block in S buffer s; which 1, tile s's O normalisation factor
  // (a one-tile CTA uses the first three of the four).
  __device__ float* stats(int s, int which) const {
    return reinterpret_cast<float*>(base + kSmemStatsOffset) + (s * 2 + which) * kM;
  }
  __device__ u32* tmem_base() const { return reinterpret_cast<u32*>(base + kSmemTmemAddrOffset); }
};

// A ring position: slot index and the phase parity of its barriers.
struct Ring {
  int index = 0;
  u32 phase = 0;
  __device__ void advance() {
    if (++index == kKvStages) index = 0, phase ^= 1;
  }
};

// The Mma warp's ring position: the same walk as Ring's, kept as the shared address of the slot's KvFull
// barrier (full = first + 8 * index; the slot's KvEmpty lies kKvStages barriers above). Waits and commits
// take the address as it is (an index cost a multiply and an add per barrier), and the slot's descriptors
// are one multiply-add of it (MmaOperands). Alone, per K/V block: d64 157 -> 157 (the barriers' IMAD + VIADD
// gone, a subtraction and a shift per descriptor base instead), d128 205 -> 203, (192,128) 241 -> 240; with
// MmaOperands below, d64 209 -> 200 per 32 MMAs, d128 205 -> 197, (192,128) 193 -> 185.
struct MmaRing {
  u32 full, phase = 0;
  u32 first, end;  // the addresses of kv_full[0] and one past the last
  __device__ explicit MmaRing(Barriers& b)
      : full(smem_u32(&b.kv_full[0])), first(full), end(full + kKvStages * sizeof(u64)) {}
  __device__ void advance() {
    full += sizeof(u64);
    if (full == end) full = first, phase ^= 1;
  }
  // From a K slot to its block's V slot. A tile takes K and V of each block in turn, so with an even number
  // of stages every K sits at an even index and its V right after it, never past the end.
  __device__ void advance_to_v() {
    if constexpr (kKvStages % 2 == 0) full += sizeof(u64);
    else advance();
  }
  // The barriers as pointers into sm's shared window (the compiler folds the conversions back to `full`).
  __device__ u64* kv_full(const Smem& sm) const { return reinterpret_cast<u64*>(sm.base + (full - smem_u32(sm.base))); }
  __device__ u64* kv_empty(const Smem& sm) const { return kv_full(sm) + kKvStages; }
  // `full` under a name ptxas cannot tell is the same (min with the last slot's address): tile 1's MMAs
  // build their own descriptors from it instead of sharing tile 0's from vector registers (see mma_two_tiles).
  __device__ u32 full_renamed() const { return min(full, end - static_cast<u32>(sizeof(u64))); }
};

// ---- work decomposition ----------------------------------------------------------------------------
// A CTA's work item: kQTiles Q tiles of packed rows (common/block_range.h), and its sequence's lengths and rows
// (the dense shape, or from the device arrays when kVarlen).
struct Work {
  int m_block, group, batch;
  fa4k::BlockRange blocks;
  fa4k::SequenceSpan seq;
};

// False for a ragged tile past its sequence's rows (tiles are laid out for the longest sequence), or of a
// decode-sized sequence the decode kernel serves (AttentionArgs::decode_seqlen_q).
__device__ __forceinline__ bool decompose(const fa4k::AttentionArgs& a, int tile, Work& w) {
  const bool longest_first = fa4k::later_rows_longer(kCausal, kWindow, a.window_right);
  const fa4k::TilePosition t =
      fa4k::dense_tile(tile, a.num_m_blocks, a.heads_q / kPack, longest_first, a.tile_section, a.batch);
  w.m_block = t.m_block, w.group = t.group, w.batch = t.batch;
  w.seq = {a.seqlen_q, a.seqlen_k, 0, 0, w.batch, w.batch};
  if constexpr (kVarlen) {
    w.seq = fa4k::sequence_span(a, w.batch);
    if (w.m_block * kQTiles * kM >= w.seq.seqlen_q * kPack || w.seq.seqlen_q <= a.decode_seqlen_q) return false;
  }
  w.blocks = fa4k::tile_blocks(w.m_block * kQTiles * kM, kQTiles * kM, kPack, w.seq.seqlen_q, w.seq.seqlen_k, kN, kCausal, kWindow, a.window_left,
                               a.window_right);
  return true;
}

// A CTA's tiles, the same for every role: blockIdx.x, then every gridDim.x-th, past the ones decompose skips.
struct TileWalk {
  int tile = static_cast<int>(blockIdx.x) - static_cast<int>(gridDim.x);
  int taken = 0;  // tiles returned so far
  Work w;
  __device__ bool next(const fa4k::AttentionArgs& a) {
    for (tile += gridDim.x; tile < a.total_tiles; tile += gridDim.x)
      if (decompose(a, tile, w)) return ++taken, true;
    return false;
  }
};

__device__ __forceinline__ int kv_head_of(const fa4k::AttentionArgs& a, const Work& w) {
  if constexpr (kFault == Fault::wrong_gqa_map) return (kPack > 1 ? w.group * kPack : w.group) % a.heads_kv;
  return fa4k::dense_kv_head(w.group, kPack, a.q_heads_per_kv);
}

// ---- Load warp ---------------------------------------------------------------------------------------
__device__ void load_role(const fa4k::AttentionArgs& a, const Smem& sm, const TmaDescriptor* tq, const TmaDescriptor* tk,
                          const TmaDescriptor* tv) {
  Barriers& b = sm.bars();
  Ring ring;
  u32 tile_phase = 0, tail_phase = 0;
  for (TileWalk walk; walk.next(a); tile_phase ^= 1) {
    const Work& w = walk.w;
    const int kv_head = kv_head_of(a, w);
    for (int s = 0; s < kQTiles; ++s) {
      wait(&b.q_empty[s], tile_phase ^ 1, "q_empty");
      if (elect_one_sync()) {
        mbarrier_arrive_expect_tx(&b.q_full[s], kM * kD * 2);
        const int token0 = w.seq.q_row0 + (w.m_block * kQTiles + s) * kM / kPack;
        for (int box = 0; box < kD / kBoxCols; ++box)
          tma_load_5d(sm.q(s) + box * kM * kBoxCols * 2, tq, &b.q_full[s], box * kBoxCols, 0, w.group, token0, w.seq.q_batch);
      }
      __syncwarp();
    }
    // Paged (kPaged): each block's pages are looked up one block ahead, lane p for piece p.
    const int log2 = kPaged ? a.page_size_log2 : 0, piece = kPaged ? fa4k::paged_piece_rows(kN, log2) : kN;
    fa4k::PagedPiece next{};
    if constexpr (kPaged) next = fa4k::paged_piece<kN>(a, w.batch, w.blocks.n_first * kN, log2, piece);
    for (int j = 0; j < w.blocks.n_blocks; ++j) {
      const int n = w.blocks.n_first - j;
      const fa4k::PagedPiece here = next;
      if (kPaged && j + 1 < w.blocks.n_blocks) next = fa4k::paged_piece<kN>(a, w.batch, (n - 1) * kN, log2, piece);
      // The top block's rows past the sequence's keys (kVarlen: the next sequence's; a padded or paged cache's
      // unused slots, which may hold NaN): their P is 0, but 0 * NaN is NaN, so V's are zeroed before the Mma
      // warp may read the slot. The copy lands on the Load warp's own barrier; KvFull follows the zeros.
      const int valid = w.seq.seqlen_k - n * kN;
      const bool clean = (kVarlen || kPaged) && j == 0 && valid < kN;
      for (int is_v = 0; is_v < 2; ++is_v) {
        wait(&b.kv_empty[ring.index], ring.phase ^ 1, "kv_empty");
        u64* full = &b.kv_full[ring.index];
        if (is_v && clean) full = sm.v_tail();
        const int dim = is_v ? kDv : kD;
        static_assert(kTmaVColBoxes == 1 && kTmaKColBoxes == 1, "the UMMA operands want K and V box by box");
        fa4k::load_kv_block<kN, kBoxCols, 1, kPaged>(sm.slot(ring.index), is_v ? tv : tk, full, dim, kv_head,
                                                  kPaged ? here.slot : w.seq.k_row0 + n * kN, kPaged ? here.page : w.seq.k_batch,
                                                  piece, elect_one_sync());
        __syncwarp();
        if (is_v && clean) {
          wait(full, tail_phase, "v_tail");
          tail_phase ^= 1;
          fa4k::zero_tile_rows<kN, kDv, kBoxCols * 2>(sm.slot(ring.index), valid > 0 ? valid : 0, threadIdx.x % 32, 32);
          fence_proxy_async_shared();  // the zeros are visible to the MMAs (async proxy)
          __syncwarp();
          if (elect_one_sync()) signal(&b.kv_full[ring.index]);
          __syncwarp();
        }
        ring.advance();
      }
    }
  }
  // Producer tail: wait until the MMA warp's commits have released every slot and Q buffer, so that no
  // commit arrival lands in shared memory after the CTA has exited.
  for (int i = 0; i < kKvStages; ++i) {
    wait(&b.kv_empty[ring.index], ring.phase ^ 1, "kv_empty(exit)");
    ring.advance();
  }
  for (int s = 0; s < kQTiles; ++s) wait(&b.q_empty[s], tile_phase ^ 1, "q_empty(exit)");
}

// ---- Mma warp ----------------------------------------------------------------------------------------
// On hardware one thread (the lane elect.sync picks once) runs this role: its waits, every MMA and every
// commit (so the commits track its MMAs), with no warp-level elect or convergence bookkeeping. The emulator's MMAs are
// warp-collective, so emulated builds run it on the whole warp. Descriptors are built once, and a K/V slot
// or k-step moves only their start field.
constexpr u32 kIdescQk = make_idesc_f16(kM, kN, kBf16 ? Format::bf16 : Format::f16, Major::K, Major::K);
constexpr u32 kIdescPv = make_idesc_f16(kM, kDv, kBf16 ? Format::bf16 : Format::f16, Major::K, Major::MN);

// A slot is named by its KvFull barrier's address (MmaRing): its descriptors are a base plus that address
// times the slot's distance per barrier (slot i: k0 + i * stride / 16 = k_bar + full * kUnitsPerBar, mod
// 2^64, with k_bar = k0 - kv_full[0]'s address * kUnitsPerBar), one wide multiply-add (d64, per K/V block,
// with Q from this K below: 157 -> 152, d128 203 -> 199, (192,128) 240 -> 234).
struct MmaOperands {
  u64 k_bar;     // k_bar + kUnitsPerBar * full: the slot read as K (K-major), k-step 0
  u64 v_bar;     // the same read as V (MN-major)
  u32 q_bar[kQTiles];  // kUnitsPerBar * full - q_bar[s]: the slot's distance above Q tile s, in start-field units
  u32 t0;        // TMEM base
  static constexpr u32 kUnitsPerBar = kSmemKVStride / 16 / sizeof(u64);
  __device__ explicit MmaOperands(const Smem& sm, u32 tmem) : t0(tmem) {
    // Distances in 16-byte units, the start field's: no signed division or masking left to the compiler.
    static_assert(kSmemKVStride % (16 * sizeof(u64)) == 0 && kSmemQStride % 16 == 0 && (kSmemQOffset - kSmemKVOffset) % 16 == 0,
                  "Plan: slots and Q tiles 16-byte aligned, whole units of the descriptors' start field per barrier");
    constexpr OperandStep qk = kmajor_step(kSwizzle, kN, 0), pv = mnmajor_step(kSwizzle, kN, 0);
    const u64 bar0 = kUnitsPerBar * static_cast<u64>(smem_u32(&sm.bars().kv_full[0]));
    k_bar = make_smem_desc(smem_u32(sm.slot(0)), qk.lbo, qk.sbo, kSwizzle) - bar0;
    v_bar = make_smem_desc(smem_u32(sm.slot(0)), pv.lbo, pv.sbo, kSwizzle) - bar0;
    // 32-bit arithmetic: the distance itself is small and positive, so its value mod 2^32 is exact.
    for (int s = 0; s < kQTiles; ++s) q_bar[s] = static_cast<u32>(bar0) - (kSmemKVOffset - kSmemQOffset - s * kSmemQStride) / 16;
  }

  // S_s = Q_s K^T over the head dim, K = 16 per instruction, K in the slot named by `full`, for keys
  // [kKey0, kKey0 + kKeys) of the block (S columns of the same numbers; one MMA group of N = kKeys). Q_s's
  // descriptor is K's moved back by the distance between the buffers (same layout fields): derived from the
  // run-time slot, it stays one base per group instead of one hoisted descriptor per k-step. Each k-step's K
  // descriptor is then its Q descriptor moved forward again (Q and K tiles have the same rows, so a k-step is
  // the same offset in both): ptxas keeps the whole chain in uniform registers (one 64-bit uniform add per
  // descriptor) instead of advancing K in vector registers and moving each step to uniform ones (285 -> 270
  // instructions per 32 MMAs at d128). Q lies below the ring, so the distance is positive: zero-extended
  // both ways (the forward move sign-extended it before, and ptxas rebuilt K from Q in two vector
  // instructions per tile; with tile 1's K renamed in mma_two_tiles, d64 152 -> 150 per K/V block, d128
  // 199 -> 197, (192,128) 234 -> 231). Key kKey0 is that many rows into each of K's boxes. One tile: K
  // blocks have half Q's rows, so a k-step past a box is a different offset in each, and K's descriptor
  // steps on its own. S goes to S buffer `sb`.
  template <int kKey0 = 0, int kKeys = kN>
  __device__ __forceinline__ void qk(int s, u32 full, int sb) const {
    static_assert(kmajor_step(kSwizzle, kM, 0).sbo == kmajor_step(kSwizzle, kN, 0).sbo, "Q and K share the K-major layout");
    static_assert(kSmemQOffset + kQTiles * kSmemQStride <= kSmemKVOffset, "Plan: the Q tiles below the K/V ring");
    static_assert(kKey0 % 8 == 0 && kKey0 + kKeys <= kN, "whole 8-row groups of the block");
    constexpr u32 kIdesc = kKeys == kN ? kIdescQk : make_idesc_f16(kM, kKeys, kBf16 ? Format::bf16 : Format::f16, Major::K, Major::K);
    constexpr u32 kRowBytes = tile_offset(kSwizzle, kN, kKey0, 0);
    const u64 k = k_bar + static_cast<u64>(full) * kUnitsPerBar;
    const u32 k_above_q = full * kUnitsPerBar - q_bar[s];
    const u64 q = k - k_above_q;
    const u32 t = opaque(t0);
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const u64 q_step = desc_advance(q, kmajor_step(kSwizzle, kM, kk * 16).start);
      const u64 k_step = kM == kN ? q_step + k_above_q : desc_advance(k, kmajor_step(kSwizzle, kN, kk * 16).start);
      mma_f16_ss_issue(t + (sb ? kTmemS1Col : kTmemS0Col) + kKey0, q_step, desc_advance(k_step, kRowBytes), kIdesc, kk > 0);
    }
  }
  __device__ __forceinline__ void qk(int s, u32 full) const { qk(s, full, s); }

  // O_s (+)= P_s V: A = P from TMEM (8 columns per K = 16 step), B = V (MN-major: dv contiguous). V's
  // slot descriptor is built per PV, and ptxas advances each k-step in uniform registers (one uniform
  // 64-bit add per MMA). (Built from the slot index it had to be opaque for that: 270 -> 263 instructions
  // per 32 MMAs at d128; built from the address it needs no opaque: same counts.)
  // k-steps [kStep0, kStep0 + kSteps) of it: keys 16 kStep0 on.
  template <int kStep0 = 0, int kSteps = kPvSteps>
  __device__ __forceinline__ void pv(int s, u32 full, bool accumulate) const {
    const u64 v = v_bar + static_cast<u64>(full) * kUnitsPerBar;
    const u32 t = opaque(t0);
#pragma unroll
    for (int kk = kStep0; kk < kStep0 + kSteps; ++kk)
      mma_f16_ts_issue(t + o_col(s), t + (s ? kTmemP1Col : kTmemP0Col) + kk * 8,
                       desc_advance(v, mnmajor_step(kSwizzle, kN, kk * 16).start), kIdescPv, accumulate || kk > 0);
  }
};

__device__ __forceinline__ void mma_two_tiles(const fa4k::AttentionArgs& a, const Smem& sm, u32 tmem) {
  Barriers& b = sm.bars();
  const MmaOperands op(sm, tmem);
  MmaRing ring(b);
  u32 tile_phase = 0;
  // PV number k of tile s (counted over the CTA's tiles) waits on PvReady[s] and PLast[s] in phase k % 2, and
  // its commit is awaited on PvDone[s] in the same phase (one PvDone wait per PV, in order: a tile's last at
  // the next tile's start or the role's end). Every step runs one PV of each tile, so one parity serves all
  // these barriers: the current step's, flipped after it (one per tile and kind before: d128 213 -> 209
  // instructions per 32 MMAs).
  u32 pv_parity = 0;
  // Where P_s lies inside S_s's columns (kPvDone), PV_s reads them and the next QK into S_s overwrites them.
  // The PTX ISA orders two MMAs of one thread only when they share accumulator and shape, so that QK waits
  // for the PV's commit: every QK into S_s but the CTA's first (few registers: this warp has 56). Where P_s
  // has columns of its own, the QK follows at once.
  // The two ordering defects leave the PvDone barrier out: no commit, no wait.
  constexpr bool kAwaitsPv = kPvDone && kFault != Fault::assume_mma_order && kFault != Fault::tmem_reuse_race;
  auto acquire = [&](u64* bar, u32 parity, const char* name) {
    wait(bar, parity, name);
    tcgen05_fence_after_thread_sync();
  };
  // PV_s (V in slot `full`; its PvReady already waited for): the k-steps whose P was stored before PvReady,
  // then, after PLast, the rest; committed to PvDone where the next QK waits for it.
  auto pv = [&](int s, u32 full, bool accumulate) {
    op.pv<0, kPvEarly>(s, full, accumulate);
    if constexpr (kPvEarly < kPvSteps) {
      acquire(&b.p_last[s], pv_parity, "p_last");
      op.pv<kPvEarly, kPvSteps - kPvEarly>(s, full, true);
    }
    if constexpr (kAwaitsPv) mma_commit_issue(&b.pv_done[s]);
  };
  // A QK into S_s (K in slot `full`), behind the PV that reads P_s where `after_pv`: the keys below P_s first,
  // then the wait, then the keys over P_s, so the tensor pipe has MMAs across the wait's round trip. (A
  // finer split, the keys over P's lower half behind a commit after the PV's first half, shortens the wait
  // but reads Q from shared memory once more: each group's k-steps read all of Q, and at N = 32 a k-step
  // is shared-memory bound at 2.5x its tensor time; docs/speed-model.md.)
  auto qk_behind_pv = [&](int s, u32 full, u32 parity, bool after_pv) {
    if constexpr (kAwaitsPv) {
      op.qk<0, kKeysBelowP>(s, full, s);
      if (after_pv) acquire(&b.pv_done[s], parity, "pv_done");
      op.qk<kKeysBelowP, kN - kKeysBelowP>(s, opaque(full), s);  // rebuilt: no descriptors held across the wait
    } else {
      op.qk(s, full);
    }
  };
  TileWalk walk;
  for (; walk.next(a); tile_phase ^= 1) {
    const Work& w = walk.w;
    for (int s = 0; s < kQTiles; ++s) wait(&b.q_full[s], tile_phase, "q_full");
    // Prologue: S for block 0 of both tiles.
    wait(ring.kv_full(sm), ring.phase, "kv_full(K)");
    tcgen05_fence_after_thread_sync();
    for (int s = 0; s < kQTiles; ++s) {
      qk_behind_pv(s, ring.full, pv_parity ^ 1, walk.taken > 1);  // the previous tile's last PV_s reads P_s
      mma_commit_issue(&b.s_full[s]);
    }
    mma_commit_issue(ring.kv_empty(sm));
    ring.advance_to_v();
    // Block j's step: PV of block j-1 (accumulating past the first), then QK of block j (not on the last).
    // The first and last steps are peeled off the loop, which then tests neither (d128, per 32 MMAs: the last
    // step's peel 248 -> 228, the first's 3 fewer). At d > 128 ptxas then hoists the twelve Q k-step
    // descriptors into vector registers, and spills: the loop stays whole there.
    auto kv_step = [&](const bool last, const bool accumulate) {
      MmaRing v_pos = ring;  // V of block j-1
      wait(v_pos.kv_full(sm), v_pos.phase, "kv_full(V)");
      ring.advance();
      MmaRing k_pos = ring;  // K of block j
      if (!last) {
        wait(k_pos.kv_full(sm), k_pos.phase, "kv_full(K)");
        ring.advance_to_v();
      }
      tcgen05_fence_after_thread_sync();
      if (last && !kOAliasesQ)
        for (int s = 0; s < kQTiles; ++s) mma_commit_issue(&b.q_empty[s]);  // every QK of the tile is issued
#pragma unroll
      for (int s = 0; s < kQTiles; ++s) {
        // The deliberate race: S_j overwrites P_(j-1) before the PV that reads it (issued before P is even
        // written: the softmax reads S_(j-1), or stores P, under a pending MMA).
        if (kFault == Fault::tmem_reuse_race && !last) op.qk(s, k_pos.full);
        wait(&b.pv_ready[s], pv_parity, "pv_ready");
        tcgen05_fence_after_thread_sync();
        // Tile 1 names V's and K's slots renamed (min with the last slot): the same slots, but ptxas cannot
        // tell, so it does not share tile 0's descriptors (it kept shared ones in vector registers, moved to
        // uniform ones before every MMA: 32 moves a block at d128); each group builds its own in uniform
        // registers (d128: 263 -> 248 instructions per 32 MMAs naming V as the slot before K's, 2 fewer with
        // one VIMNMX; K's renamed too: see MmaOperands::qk).
        pv(s, s == 0 ? v_pos.full : v_pos.full_renamed(), accumulate);
        if (last) {
          mma_commit_issue(&b.o_full[s]);
          if (s == 1) mma_commit_issue(v_pos.kv_empty(sm));
        } else {
          if (kFault != Fault::tmem_reuse_race) qk_behind_pv(s, s == 0 ? k_pos.full : k_pos.full_renamed(), pv_parity, true);
          mma_commit_issue(&b.s_full[s]);
          if (s == 1) {  // both tiles' MMAs of V(j-1) and K(j) are issued
            mma_commit_issue(v_pos.kv_empty(sm));
            mma_commit_issue(k_pos.kv_empty(sm));
          }
        }
      }
      pv_parity ^= 1;
    };
    if constexpr (kD <= 128) {
      if (w.blocks.n_blocks > 1) kv_step(false, false);
      for (int j = 2; j < w.blocks.n_blocks; ++j) kv_step(false, true);
      kv_step(true, w.blocks.n_blocks > 1);
    } else {
      for (int j = 1; j <= w.blocks.n_blocks; ++j) kv_step(j == w.blocks.n_blocks, j > 1);
    }
  }
  // Leave no PvDone arrival in flight when the CTA exits (there are none where P has columns of its own; the
  // Load warp drains the KvEmpty and QEmpty arrivals, the other roles wait for theirs).
  if (kAwaitsPv && walk.taken > 0)
    for (int s = 0; s < kQTiles; ++s) acquire(&b.pv_done[s], pv_parity ^ 1, "pv_done");
}

// One Q tile, S double-buffered: block j's S in buffer j % 2. Per tile: QK(0), then for each block j
// QK(j + 1) into the other buffer (as soon as its K has landed) ahead of PV(j), which waits for P(j) and O's
// rescale (PvReady). P has columns of its own, so QK(j + 2) may rewrite S(j)'s buffer right behind PV(j):
// the commit softmax waits on for S(j + 2) also covers PV(j), before softmax writes P(j + 2). Each PV commits
// to PvDone, where correction waits before it rescales O: here S(j) does not tell that PV(j - 1) is done.
__device__ __forceinline__ void mma_one_tile(const fa4k::AttentionArgs& a, const Smem& sm, u32 tmem) {
  Barriers& b = sm.bars();
  const MmaOperands op(sm, tmem);
  MmaRing ring(b);  // K of the next block to issue a QK for
  u32 tile_phase = 0, ready_bits = 0, done_bits = 0;  // bit sb: the parity of PvReady[sb]'s, PvDone[sb]'s next phase
  u32 used = 0;  // bit sb: a PV has read P from S buffer sb
  auto issue_qk = [&](int sb, bool last) {
    wait(ring.kv_full(sm), ring.phase, "kv_full(K)");
    tcgen05_fence_after_thread_sync();
    op.qk(0, ring.full, sb);
    mma_commit_issue(&b.s_full[sb]);
    mma_commit_issue(ring.kv_empty(sm));
    if (last && !kOAliasesQ) mma_commit_issue(&b.q_empty[0]);  // every QK of the tile is issued
    ring.advance();  // to V of the same block
  };
  for (TileWalk walk; walk.next(a); tile_phase ^= 1) {
    const Work& w = walk.w;
    const int n = w.blocks.n_blocks;
    wait(&b.q_full[0], tile_phase, "q_full");
    issue_qk(0, n == 1);
    for (int j = 0; j < w.blocks.n_blocks; ++j) {  // (n_blocks in the header: tools/sass_report.py finds the loop by it)
      const int sb = j & 1;
      MmaRing v_pos = ring;  // V of block j
      ring.advance();        // K of block j + 1
      if (j + 1 < n) issue_qk(sb ^ 1, j + 2 == n);
      wait(v_pos.kv_full(sm), v_pos.phase, "kv_full(V)");
      wait(&b.pv_ready[sb], (ready_bits >> sb) & 1, "pv_ready");
      ready_bits ^= 1u << sb;
      tcgen05_fence_after_thread_sync();
      op.pv(sb, v_pos.full, j > 0);
      mma_commit_issue(v_pos.kv_empty(sm));
      mma_commit_issue(&b.pv_done[sb]);
      done_bits ^= 1u << sb, used |= 1u << sb;
      if (j + 1 == n) mma_commit_issue(&b.o_full[0]);
    }
  }
  // Leave no PvDone arrival in flight when the CTA exits: wait for each buffer's last.
  for (int sb = 0; sb < 2; ++sb)
    if ((used >> sb) & 1) wait(&b.pv_done[sb], ((done_bits >> sb) & 1) ^ 1, "pv_done(exit)");
}

__device__ void mma_role(const fa4k::AttentionArgs& a, const Smem& sm, u32 tmem) {
  if constexpr (kQTiles == 2) mma_two_tiles(a, sm, tmem);
  else mma_one_tile(a, sm, tmem);
}

// ---- Softmax warpgroups ------------------------------------------------------------------------------
__device__ void softmax_role(const fa4k::AttentionArgs& a, const Smem& sm, u32 tmem, int s) {
  Barriers& b = sm.bars();
  const int row = threadIdx.x % 128;  // this thread's row of tile s = its TMEM lane
  const u32 lane_base = static_cast<u32>((row / 32) * 32) << 16;
  const float scale_log2 = a.scale_log2;
  // S buffer sb of a block (two tiles: tile s's; one tile: the block's parity) and the P inside or beside it.
  // s_phase: two tiles, S_s's parity; one tile, bit sb for S buffer sb.
  auto s_col = [&](int sb) { return tmem + lane_base + (sb ? kTmemS1Col : kTmemS0Col); };
  auto p_col = [&](int sb) { return tmem + lane_base + (sb ? kTmemP1Col : kTmemP0Col); };
  const u32 tile_s_addr = s_col(s), tile_p_addr = p_col(s);
  u32 s_phase = 0, tile_phase = 0;
  for (TileWalk walk; walk.next(a); tile_phase ^= 1) {
    const Work& w = walk.w;
    const int packed_row = (w.m_block * kQTiles + s) * kM + row;  // packed row -> (token, q head)
    const int token = packed_row / kPack;
    // Keys this row may see: first <= c < limit (bottom-right causal and window alignment, the seqlen_k
    // tail). A block is masked when it is one of the first n_masked or the last n_masked_low visited.
    const int seqlen_k = w.seq.seqlen_k;
    const long long diag = static_cast<long long>(seqlen_k) - w.seq.seqlen_q;
    const int limit = kCausal || kWindow ? fa4k::visible_last_key(token, diag, seqlen_k, kWindow ? a.window_right : 0) + 1
                                         : seqlen_k;
    const int first = kWindow ? fa4k::visible_first_key(token, diag, seqlen_k, a.window_left) : 0;
    const int low_masked_from = w.blocks.n_blocks - w.blocks.n_masked_low;
    float row_max = FA4_NEG_INF, row_sum = 0.f;
    for (int j = 0; j < w.blocks.n_blocks; ++j) {
      const int n = w.blocks.n_first - j;
      const int sb = kQTiles == 2 ? s : j & 1;
      const u32 s_addr = kQTiles == 2 ? tile_s_addr : s_col(sb), p_addr = kQTiles == 2 ? tile_p_addr : p_col(sb);
      wait(&b.s_full[sb], kQTiles == 2 ? s_phase : (s_phase >> sb) & 1, "s_full");
      s_phase ^= kQTiles == 2 ? 1u : 1u << sb;
      tcgen05_fence_after_thread_sync();
      if (kFault == Fault::skip_wait_st && j > 0) tmem_wait_st();  // the defect: P(j-1) lands only now
      float x[kN];
#pragma unroll
      for (int c = 0; c < kN; c += 32) {
        u32 raw[32];
        tmem_ld_32x32b<32>(s_addr + c, raw);
        if (kFault != Fault::skip_wait_ld) tmem_wait_ld();
#pragma unroll
        for (int i = 0; i < 32; ++i) x[c + i] = __uint_as_float(raw[i]);
        if (kFault == Fault::skip_wait_ld) tmem_wait_ld();  // the defect: registers used before the wait
      }
      if constexpr (kSoftcap) {  // before the mask; scale_log2 carries the cap
#pragma unroll
        for (int c = 0; c < kN; ++c) x[c] = fa4k::softcap_tanh(x[c], a.softcap_scale);
      }
      if (j < w.blocks.n_masked || j >= low_masked_from) {
        const int valid = limit - n * kN, valid_from = first - n * kN;  // columns [valid_from, valid) are visible
#pragma unroll
        for (int c = 0; c < kN; ++c)
          if (c >= valid || (kWindow && c < valid_from)) x[c] = FA4_NEG_INF;
      }
      float block_max = x[0];
#pragma unroll
      for (int c = 1; c < kN; ++c) block_max = fmaxf(block_max, x[c]);

      // Lazy rescale: keep the old max while the new one exceeds it by at most 2^threshold in exp2 units.
      // Branch-free: a row that has seen only masked keys gets diff = NaN (no rescale, max stays -inf);
      // its first visible block gets diff = -inf (acc_scale 0, the new max).
      float new_max = fmaxf(row_max, block_max), acc_scale = 1.f;
      if constexpr (kFault != Fault::skip_rescale) {
        const float diff = (row_max - new_max) * scale_log2;
        const bool rescale = diff < -kRescaleThresholdLog2;
        acc_scale = rescale ? exp2_mufu(diff) : 1.f;
        new_max = rescale ? new_max : row_max;
      }
      row_max = new_max;
      // No wait for the mailbox: correction read the slot's previous value (two tiles: block j-1's; one tile:
      // block j-2's, the same S buffer) before its PvReady, which that block's PV waited for, and S_j, which
      // this thread has seen, was committed after that PV. (Correction consumes the value before that arrive,
      // in __any_sync; a read not consumed before it would need an empty barrier again: the PTX ISA does not
      // say a commit's arrive orders the loads behind it.)
      sm.stats(sb, 0)[row] = acc_scale;
      // Two tiles: correction rescales O on this signal, trusting PV(j-1) complete because this thread saw
      // S_j: the fence carries that completion (acquired at s_full) across the relay. (One tile: correction
      // waits for PV(j-1) on PvDone itself.)
      if (kFault != Fault::skip_relay_fence) tcgen05_fence_before_thread_sync();
      signal(&b.stats_full[sb]);

      // Exponents two columns at a time (packed FFMA2/FADD2 on sm_100a). One pair in kSoftExp2Every goes to
      // the FMA pipe (one value in kSoftExp2Every, as the Plan says); four partial sums shorten the chain.
      // P goes to TMEM 32 keys (16 columns) at a time, each part as soon as its exponents are done; once the
      // parts the PV's first kPvEarlySteps k-steps read are stored, PvReady lets the Mma warp start them
      // while the rest is exponentiated (PLast then releases the rest of the PV).
      const float bias = (row_max == FA4_NEG_INF ? 0.f : row_max) * scale_log2;
      const F32x2 scale2 = {scale_log2, scale_log2}, neg_bias2 = {-bias, -bias};
      F32x2 sum2[4] = {};
      // Every thread arrives for its own row (no warp sync, no leader test: 2 instructions a hand-over).
      auto hand_over = [&](u64* bar) {
        if (kFault != Fault::skip_wait_st) tmem_wait_st();
        tcgen05_fence_before_thread_sync();
        signal(bar);
      };
#pragma unroll
      for (int part = 0; part < kN / 32; ++part) {
        const int c0 = part * 32;
#pragma unroll
        for (int c = c0; c < c0 + 32; c += 2) {
          const F32x2 arg = f32x2_fma({x[c], x[c + 1]}, scale2, neg_bias2);
          const int pair = c / 2;
          const F32x2 e = (kSoftExp2Every && pair % kSoftExp2Every == kSoftExp2Every - 1)
                              ? exp2_fma2(arg)
                              : F32x2{exp2_mufu(arg.x), exp2_mufu(arg.y)};
          x[c] = e.x;
          x[c + 1] = e.y;
          sum2[pair % 4] = f32x2_add(sum2[pair % 4], e);
        }
        // The defect divides by the row sum so far (earlier blocks and this block's parts up to this one).
        float p_scale = 1.f;
        if constexpr (kFault == Fault::early_normalize) {
          const F32x2 partial = f32x2_add(f32x2_add(sum2[0], sum2[1]), f32x2_add(sum2[2], sum2[3]));
          p_scale = 1.f / fmaf(row_sum, acc_scale, partial.x + partial.y);
        }
        u32 packed[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) packed[i] = pack_half2<kBf16>(x[c0 + 2 * i] * p_scale, x[c0 + 2 * i + 1] * p_scale);
        tmem_st_32x32b<16>(p_addr + c0 / 2, packed);
        if (c0 + 32 == kPvEarly * 16) hand_over(&b.pv_ready[sb]);
        if (kPvEarly < kPvSteps && c0 + 32 == kN) hand_over(&b.p_last[sb]);
      }
      const F32x2 sum01 = f32x2_add(f32x2_add(sum2[0], sum2[1]), f32x2_add(sum2[2], sum2[3]));
      row_sum = fmaf(row_sum, acc_scale, sum01.x + sum01.y);
    }
    if (kFault == Fault::skip_wait_st) tmem_wait_st();
    // Final round: the factor O is normalised by (1 / row_sum; with a sink in the denominator, less) to
    // correction, in a slot of its own (correction may not have read the last block's acc_scale yet), once it
    // has read the previous tile's; the LSE straight to memory. Rows that saw no key: O = 0 and LSE = -inf
    // (the sink's with sinks). Rows past seqlen_q are computed but neither stored nor logged.
    float o_factor = row_sum > 0.f ? 1.f / row_sum : 0.f;
    const int q_head = kPack > 1 ? w.group * kPack + packed_row % kPack : w.group;
    float lse = row_sum > 0.f ? (row_max * scale_log2 + __log2f(row_sum)) * kLn2 : FA4_NEG_INF;
    if constexpr (kSinks) lse = fa4k::add_sink(lse, a.sinks[q_head], o_factor);
    wait(&b.final_empty[s], tile_phase ^ 1, "final_empty");
    sm.stats(s, 1)[row] = o_factor;
    signal(&b.final_full[s]);
    if (kWriteLse && token < w.seq.seqlen_q) a.lse[fa4k::lse_offset(a, w.batch, q_head, w.seq.q_row0, token)] = lse;
  }
}

// ---- Correction warpgroup ----------------------------------------------------------------------------
// Multiplies this thread's row of O_s (dv fp32 columns in TMEM) by `factor`.
__device__ __forceinline__ void scale_o_row(u32 o_addr, float factor) {
#pragma unroll
  for (int c = 0; c < kDv; c += 16) {
    u32 v[16];
    tmem_ld_32x32b<16>(o_addr + c, v);
    tmem_wait_ld();
#pragma unroll
    for (int i = 0; i < 16; i += 2) {  // packed FMUL2
      const F32x2 o = f32x2_mul({__uint_as_float(v[i]), __uint_as_float(v[i + 1])}, {factor, factor});
      v[i] = __float_as_uint(o.x);
      v[i + 1] = __float_as_uint(o.y);
    }
    tmem_st_32x32b<16>(o_addr + c, v);
    // At most 128 columns stored between waits: the emulator's adversarial mode holds a thread's stores until
    // its wait::st, 128 words at most (dv 256 waits once more, halfway).
    if constexpr (kDv > 128)
      if ((c + 16) % 128 == 0 && c + 16 < kDv) tmem_wait_st();
  }
  tmem_wait_st();
}

__device__ void correction_role(const fa4k::AttentionArgs& a, const Smem& sm, u32 tmem) {
  Barriers& b = sm.bars();
  const int row = threadIdx.x % 128;
  const u32 lane_base = static_cast<u32>((row / 32) * 32) << 16;
  u32 stats_phase[2] = {0, 0}, tile_phase = 0;
  u32 stats_bits = 0, done_bits = 0;  // one tile: bit sb, the parity of StatsFull[sb]'s, PvDone[sb]'s next phase
  for (TileWalk walk; walk.next(a); tile_phase ^= 1) {
    const Work& w = walk.w;
    if constexpr (kQTiles == 1) {
      // Block j's acc_scale comes with S buffer j % 2. O holds PV(j-1) only once PvDone[(j-1) % 2] says so:
      // S_j was committed before that PV was issued (mma_one_tile). Block 0's PV overwrites O.
      for (int j = 0; j < w.blocks.n_blocks; ++j) {
        const int sb = j & 1;
        wait(&b.stats_full[sb], (stats_bits >> sb) & 1, "stats_full");
        stats_bits ^= 1u << sb;
        const float acc_scale = sm.stats(sb, 0)[row];
        if (j > 0) {
          if (__any_sync(0xffffffffu, acc_scale != 1.f)) {
            wait(&b.pv_done[sb ^ 1], (done_bits >> (sb ^ 1)) & 1, "pv_done");
            tcgen05_fence_after_thread_sync();
            scale_o_row(tmem + lane_base + o_col(0), acc_scale);
          }
          done_bits ^= 1u << (sb ^ 1);  // PV(j-1)'s phase, awaited or not
        }
        tcgen05_fence_before_thread_sync();
        __syncwarp();
        if (threadIdx.x % 32 == 0) signal(&b.pv_ready[sb]);
      }
      done_bits ^= 1u << ((w.blocks.n_blocks - 1) & 1);  // the tile's last PV, which OFull covers
    } else {
      for (int j = 0; j < w.blocks.n_blocks; ++j)
        for (int s = 0; s < 2; ++s) {
          wait(&b.stats_full[s], stats_phase[s], "stats_full");
          stats_phase[s] ^= 1;
          const float acc_scale = sm.stats(s, 0)[row];
          // O_s holds PV(j-1) (complete: softmax saw S_j, committed after it). Block 0's PV overwrites O.
          if (j > 0 && __any_sync(0xffffffffu, acc_scale != 1.f)) {
            tcgen05_fence_after_thread_sync();
            scale_o_row(tmem + lane_base + o_col(s), acc_scale);
          }
          tcgen05_fence_before_thread_sync();
          __syncwarp();
          if (threadIdx.x % 32 == 0) signal(&b.pv_ready[s]);
        }
    }
    for (int s = 0; s < kQTiles; ++s) {
      wait(&b.final_full[s], tile_phase, "final_full");
      const float inv = sm.stats(s, 1)[row];  // 1 / row_sum, or less with a sink; 0 for rows that saw no key
      signal(&b.final_empty[s]);
      wait(&b.o_full[s], tile_phase, "o_full");
      wait(&b.o_free[s], tile_phase ^ 1, "o_free");
      tcgen05_fence_after_thread_sync();

      const u32 o_addr = tmem + lane_base + o_col(s);
      char* o_tile = sm.o(s);
      const int o_row = opaque(row);
#pragma unroll
      for (int c = 0; c < kDv; c += 16) {
        u32 v[16];
        tmem_ld_32x32b<16>(o_addr + c, v);
        tmem_wait_ld();
        uint4 out[2];
        u32* o32 = reinterpret_cast<u32*>(out);
#pragma unroll
        for (int i = 0; i < 8; ++i) {  // packed FMUL2, then one conversion per pair
          const F32x2 o = f32x2_mul({__uint_as_float(v[2 * i]), __uint_as_float(v[2 * i + 1])}, {inv, inv});
          o32[i] = pack_half2<kBf16>(o.x, o.y);
        }
        // Two 16-byte chunks of this row, at their swizzled places in the TMA box layout.
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<uint4*>(o_tile + swizzle_address(tile_offset(kSwizzle, kM, o_row, c + 8 * h), kSwizzle)) = out[h];
      }
      fence_proxy_async_shared();
      tcgen05_fence_before_thread_sync();  // fence discipline: O's tcgen05.ld precede the signal
      signal(&b.o_staged[s]);
    }
  }
}

// ---- Epilogue warp -----------------------------------------------------------------------------------
__device__ void epilogue_role(const fa4k::AttentionArgs& a, const Smem& sm, const TmaDescriptor* to) {
  Barriers& b = sm.bars();
  u32 tile_phase = 0;
  for (TileWalk walk; walk.next(a); tile_phase ^= 1) {
    const Work& w = walk.w;
    for (int s = 0; s < kQTiles; ++s) {
      wait(&b.o_staged[s], tile_phase, "o_staged");
      const int token0 = (w.m_block * kQTiles + s) * kM / kPack;
      const int rows = w.seq.seqlen_q * kPack - (w.m_block * kQTiles + s) * kM;  // rows of tile s inside its sequence
      if (kVarlen && a.cu_seqlens_q && rows < kM) {
        // The last tile of a ragged sequence ends inside the packed rows, where a whole box would overwrite the
        // next sequence's: the warp copies its own rows (none when the sequence ended in tile 0).
        fa4k::store_tile_rows<kM, kDv, kPack, kSwizzle>(sm.o(s), 0, rows > 0 ? rows : 0, a.o, w.seq.q_batch, w.seq.q_row0 + token0,
                                                        w.group, threadIdx.x % 32, 32);
        __syncwarp();
        if (elect_one_sync()) {
          signal(&b.o_free[s]);
          if (kOAliasesQ) signal(&b.q_empty[s]);
        }
      } else if (elect_one_sync()) {
        for (int box = 0; box < kDv / kBoxCols; ++box)
          tma_store_5d(to, sm.o(s) + box * kM * kBoxCols * 2, box * kBoxCols, 0, w.group, w.seq.q_row0 + token0, w.seq.q_batch);
        bulk_commit_group();
        bulk_wait_group_read<0>();
        signal(&b.o_free[s]);
        if (kOAliasesQ) signal(&b.q_empty[s]);  // the O store has read the Q buffer
      }
      __syncwarp();
    }
  }
  if (elect_one_sync()) bulk_wait_group<0>();
  __syncwarp();
}

}  // namespace fa4::sm100::fwd

// Dynamic shared memory, declared 1024-B aligned (the swizzle atom), addressed through the __shared__ array
// so the compiler keeps shared-space loads and stores. Hardware builds have no static shared memory; the
// emulator's 16 bytes push the base by 1 KB, which the emulated Plan's budget leaves room for.
__device__ __forceinline__ fa4::sm100::fwd::Smem smem_layout() {
  extern __shared__ __align__(1024) char smem_raw[];
  return {smem_raw};
}

extern "C" __global__ void __launch_bounds__(fa4cfg::kThreads, 1)
    fa4_sm100_fwd(const fa4k::AttentionArgs args, const __grid_constant__ fa4::TmaDescriptor tma_q,
                  const __grid_constant__ fa4::TmaDescriptor tma_k,
                  const __grid_constant__ fa4::TmaDescriptor tma_v,
                  const __grid_constant__ fa4::TmaDescriptor tma_o) {
  using namespace fa4;
  using namespace fa4::sm100;
  using namespace fa4::sm100::fwd;
  tmem_bind_scratch(args.scratch, args.scratch_bytes, args.emulation_mode, args.emulation_seed);
  if constexpr (kFault == Fault::trap) __trap();
  // The warp index through a shuffle: ptxas then knows it is warp-uniform, so the role branches below do
  // not make it assume divergence (and emit convergence checks before every elect and warp sync).
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
  {
    const Smem sm = smem_layout();
    Barriers& b = sm.bars();
    if (threadIdx.x == 0) {
      if (smem_u32(sm.base) % 1024) {
        printf("fa4_sm100_fwd: dynamic shared memory is not 1024-byte aligned\n");
        __trap();
      }
      for (int s = 0; s < kQTiles; ++s) {
        mbarrier_init(&b.q_full[s], kBarQFullArrivals);
        mbarrier_init(&b.q_empty[s], kBarQEmptyArrivals);
        mbarrier_init(&b.final_full[s], kBarFinalFullArrivals);
        mbarrier_init(&b.final_empty[s], kBarFinalEmptyArrivals);
        mbarrier_init(&b.o_full[s], kBarOFullArrivals);
        mbarrier_init(&b.o_staged[s], kBarOStagedArrivals);
        mbarrier_init(&b.o_free[s], kBarOFreeArrivals);
      }
      for (int sb = 0; sb < 2; ++sb) {
        mbarrier_init(&b.s_full[sb], kBarSFullArrivals);
        mbarrier_init(&b.pv_ready[sb], kBarPvReadyArrivals);
        if (kBarPvDoneCount > 0) mbarrier_init(&b.pv_done[sb], kBarPvDoneArrivals);
        if (kBarPLastCount > 0) mbarrier_init(&b.p_last[sb], kBarPLastArrivals);
        mbarrier_init(&b.stats_full[sb], kBarStatsFullArrivals);
      }
      for (int i = 0; i < kKvStages; ++i) {
        mbarrier_init(&b.kv_full[i], kBarKvFullArrivals);
        mbarrier_init(&b.kv_empty[i], kBarKvEmptyArrivals);
      }
      if constexpr (kVarlen || kPaged) mbarrier_init(sm.v_tail(), kBarVTailArrivals);
      fence_mbarrier_init();
    }
    if (warp == kRoleLoadFirstWarp && elect_one_sync()) {
      tma_prefetch_descriptor(&tma_q);
      tma_prefetch_descriptor(&tma_k);
      tma_prefetch_descriptor(&tma_v);
      tma_prefetch_descriptor(&tma_o);
    }
    if (warp == kRoleMmaFirstWarp) {
      tmem_alloc(sm.tmem_base(), fa4cfg::kTmemColumns);
      tmem_relinquish_alloc_permit();
    }
  }
  tcgen05_fence_before_thread_sync();
  __syncthreads();
  tcgen05_fence_after_thread_sync();

  // Register budgets (setmaxnreg) only on hardware: in emulated builds the MMA warp runs the emulator.
  // Nothing stays live across setmaxnreg (each role re-derives its addresses), so nothing is spilled there.
  if (warp < kRoleCorrectionFirstWarp) {
    if constexpr (!kEmulated) setmaxnreg_to<kRoleSoftmax0Regs, kLaunchRegs>();
    const Smem sm = smem_layout();
    softmax_role(args, sm, *sm.tmem_base(), warp / 4);
  } else if (warp < kRoleMmaFirstWarp) {
    if constexpr (!kEmulated) setmaxnreg_to<kRoleCorrectionRegs, kLaunchRegs>();
    const Smem sm = smem_layout();
    correction_role(args, sm, *sm.tmem_base());
  } else {
    if constexpr (!kEmulated) setmaxnreg_to<kRoleMmaRegs, kLaunchRegs>();
    const Smem sm = smem_layout();
    if (warp == kRoleMmaFirstWarp) {
      if constexpr (kFault == Fault::hang) wait(&sm.bars().o_full[0], 0, "o_full (deliberate hang)");  // only Mma arrives
      if (kEmulated || elect_one_sync()) mma_role(args, sm, *sm.tmem_base());  // one thread on hardware (---- Mma warp)
    }
    else if (warp == kRoleEpilogueFirstWarp) epilogue_role(args, sm, &tma_o);
    else if (warp == kRoleLoadFirstWarp) load_role(args, sm, &tma_q, &tma_k, &tma_v);
    else if constexpr (kFault == Fault::spin)
      for (;;) asm volatile("nanosleep.u32 1000000;");  // the spare warp never ends, and never waits on a barrier
  }

  tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (warp == kRoleMmaFirstWarp) {
    tcgen05_fence_after_thread_sync();
    tmem_dealloc(*smem_layout().tmem_base(), fa4cfg::kTmemColumns);
    tmem_exit_check();
  }
}
