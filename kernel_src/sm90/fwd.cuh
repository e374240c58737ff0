// FlashAttention-3-class forward for Hopper (sm_90a): TMA loads of Q, K, V and a TMA store of O, wgmma
// for both GEMMs (S = Q K^T from shared memory, O += P V with P from registers), a producer warp feeding
// two or three consumer warpgroups (the Plan's tile rows / 64) through mbarrier rings. Every number comes
// from the generated fa4cfg:: preamble (the Plan, runtime/backends/sm90/backend.cpp).
//
// A persistent grid: each CTA walks tiles of kTileM packed rows (token * gqa_pack + head in pack), each against
// every K/V block its rows see, highest block first (the masked ones come first). Where later rows see more
// keys (causal), a sequence's row blocks are counted from its last row (kRowsFromBottom), so its partial block
// is the top one, the cheapest. Full dense tiles are dealt out statically; causal and windowed tiles, longest
// first (later_rows_longer; dense causal ones across the heads of an L2 section, a.tile_section), and ragged
// tiles (kVarlen: sequence by sequence, lengths from the device arrays) are taken from a counter in the
// stream's scratch as CTAs come free. The scheduler warp
// picks each tile, finds its sequence and K/V blocks, and announces all of it to the other roles through a
// small shared-memory ring. Warps, with C consumers:
//   4c .. 4c + 3 Consumer c: rows 64c .. 64c + 63 of the tile (the wgmma M of 64)
//   4C Producer: one thread issues the TMA loads (Q once per tile; K and V rings; paged: lane p piece p)
//   4C + 1 Storer: one thread issues the TMA store of each tile's O, so no consumer waits for it (a partial
//     tile whose box would leave its sequence, ragged or starting before token 0: the warp copies its rows)
//   4C + 2 Scheduler: draws and decodes the tiles (a role of its own: the producer warpgroup's registers are few)
//   4C + 3 idle; setmaxnreg moves the warpgroup's registers to the consumers, which hold S, P and O at once
// A consumer overlaps its softmax of block j with its own PV of block j-1 on the tensor cores:
//   issue S_j = Q K_j^T, issue O += P_(j-1) V_(j-1); wait for S_j; softmax (max, exp2, row sum);
//   wait for the PV; O *= exp2(m_old - m_new); P_j = bf16(S_j).
// and the consumers take turns to issue (ping-pong in a ring of named barriers), so one's softmax runs
// while another's wgmmas occupy the tensor cores. Each consumer writes its rows of O into shared memory
// (O's own buffer, or where none fits the last block's K or V slot) and goes on to the next tile.
#include "common/block_range.h"
#include "common/math.cuh"
#include "common/paged.cuh"
#include "common/params.h"
#include "common/ptx.cuh"
#include "common/smem_layout.h"
#include "common/tile_copy.cuh"
#include "sm90/wgmma.cuh"

namespace fa4::sm90::fwd {

using namespace fa4cfg;

// ---- Plan facts, renamed for the code below ------------------------------------------------------
constexpr int kD = kHeadDim;
constexpr int kDv = kHeadDimV;
constexpr int kM = kTileM;        // packed rows per tile
constexpr int kN = kTileN;        // keys per K/V block (= the QK wgmma's N)
constexpr int kPack = kGqaPack;   // q heads per kv head packed into a tile
constexpr int kWgRows = 64;       // rows per consumer warpgroup (the wgmma M)
constexpr Swizzle kSwizzle = swizzle_from_bytes(kTmaQSwizzle);
constexpr u32 kSpan = swizzle_span(kSwizzle);
constexpr int kBoxCols = kTmaQBoxCols;
// O staged in its own buffer, or (where none fits beside two K/V stages: d256) in the slots of the tile's last
// K/V block, consumer 0's rows in the K slot and consumer 1's in the V slot (the Plan places O at K's offset).
constexpr bool kOInRing = kSmemOOffset == kSmemKOffset;
constexpr int kORows = kOInRing ? kWgRows : kM;  // rows of a staged O tile (a TMA store box's)
constexpr int kQStages = kBarQFullCount;  // Q buffers: two where they fit, so the next tile's Q loads early
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kConsumers = kM / kWgRows;
constexpr u32 kConsumerWarps = 4 * kConsumers;
constexpr u32 kConsumerThreads = 128 * kConsumers;
constexpr u32 kStoreBarrier = 1;  // named barrier: every consumer's O rows are staged (0 is __syncthreads)
constexpr u32 kTurnBarrier = 2;   // 2 + w: consumer w may issue its wgmmas
constexpr u32 kTailBarrier = kTurnBarrier + kConsumers;  // a tile's top V block is cleaned (clean_v_tail)
constexpr int kTileSlots = kBarTileFullCount;  // the announced tiles' ring (the Plan's)
static_assert(kTilesAhead >= 1 && kTilesAhead <= kTileSlots, "the Plan's tiles_ahead: 1 to the ring's slots");
constexpr u32 kTileReaders = kConsumerWarps + 1 + 1;  // consumer warps, the storer and the producer
// Causal and windowed tiles differ in length (dealt out statically, a window's 16k x 16k problem ran at 0.87
// of causal on the H200), and a ragged batch's tiles are found only on the device: hand them out as CTAs
// come free.
constexpr bool kDynamicTiles = kCausal || kWindow || kVarlen;
static_assert(kDynamicTiles == (kScratchBytesPerCta > 0), "dynamic tiles need the Plan's scratch for their counters");
static_assert(kBarTileEmptyArrivals == kTileReaders, "the Plan's tile ring: every reader releases a slot");
static_assert(kBarKEmptyArrivals == kConsumerWarps && kBarVEmptyArrivals == kConsumerWarps, "one release per consumer warp");
static_assert(kBarQEmptyArrivals == kConsumerWarps, "Q is released per consumer warp");
static_assert(kBarQEmptyCount == kQStages && (kQStages == 1 || kQStages == 2) && kSmemQBytes == kQStages * kSmemQStride,
              "one Q buffer or two");
static_assert(!kOInRing || (kConsumers == 2 && kORows * kDv * 2 <= kSmemKStride && kORows * kDv * 2 <= kSmemVStride &&
                            kORows % kPack == 0 && kTmaOBoxRows * kPack == kORows &&
                            kBarOSlotKArrivals == 4 && kBarOSlotVArrivals == 4),
              "O in the ring: two consumers, each one's rows fit a K or V slot and are whole tokens, a box each");
#define FA4_NEG_INF __int_as_float(0xff800000u)
static_assert((kConsumers == 2 || kConsumers == 3) && kM == kConsumers * kWgRows && kThreads == 128 * (kConsumers + 1) &&
                  kRoleProducerFirstWarp == kConsumerWarps,
              "two or three consumer warpgroups of 64 rows and a producer warpgroup");
static_assert(kD % 16 == 0 && kN % 16 == 0 && kD % kBoxCols == 0 && kDv % kBoxCols == 0, "whole MMA steps and TMA boxes");
// The wgmma descriptors carry base offset 0: every tile and box starts on a swizzle repeat (8 rows of kSpan).
static_assert(kSmemQOffset % (8 * kSpan) == 0 && kSmemOOffset % (8 * kSpan) == 0 && kSmemKOffset % (8 * kSpan) == 0 &&
                  kSmemVOffset % (8 * kSpan) == 0 && kSmemQStride % (8 * kSpan) == 0 && kSmemKStride % (8 * kSpan) == 0 &&
                  kSmemVStride % (8 * kSpan) == 0 &&
                  (kN * kSpan) % (8 * kSpan) == 0,
              "tiles start on swizzle repeats");
static_assert(kWaitTimeoutMs <= 4000, "the watchdog's 32-bit nanosecond clock wraps after 4.29 s");

using QkMma = Wgmma<kN, kBf16>;
using PvMma = Wgmma<kDv, kBf16>;

// ---- synchronization -------------------------------------------------------------------------------
__device__ __forceinline__ u32 globaltimer_ns_low() {
  u32 t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  return t;
}

// Waits for a barrier phase. The producer's waits trap after the Plan's watchdog (a hang becomes an error);
// the consumers' cannot: a trap path among the wgmmas makes ptxas serialize them and spill. A consumer
// waits only for loads the producer issued after its own bounded waits, so a lost signal still traps there.
// The consumers' waits read no clock: the read is volatile, and its latency sat on their critical path (4% of
// the stall samples of a d128 prefill).
template <bool kWatchdog>
__device__ __forceinline__ void wait(u64* bar, u32 parity) {
  if (mbarrier_try_wait_parity(bar, parity)) return;
  if constexpr (!kWatchdog || kWaitTimeoutMs == 0) {
    while (!mbarrier_try_wait_parity(bar, parity)) {
    }
  } else {
    const u32 start = globaltimer_ns_low();
    while (!mbarrier_try_wait_parity(bar, parity))
      if (globaltimer_ns_low() - start > kWaitTimeoutMs * 1000000u) __trap();
  }
}

// The scheduler's wait for an announced tile's release by every reader (the producer's after its last load):
// up to a whole tile. Counted in milliseconds, with 60 times the watchdog's limit, so that a long tile under
// a debugger or compute-sanitizer does not trap and a lost signal still does.
__device__ __forceinline__ void wait_slot(u64* bar, u32 parity) {
  u32 tick = globaltimer_ns_low(), waited_ms = 0;
  while (!mbarrier_try_wait_parity(bar, parity)) {
    if (globaltimer_ns_low() - tick < 1000000u) continue;
    tick += 1000000u;
    if (kWaitTimeoutMs > 0 && ++waited_ms > 60u * kWaitTimeoutMs) __trap();
  }
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Ties registers to this point: reads after it see the values a completed wgmma wrote, and the compiler
// cannot move their uses above the wgmma_wait before it.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

using fa4k::exp2_approx;

// ---- shared memory ---------------------------------------------------------------------------------
// A tile as the scheduler announces it: its row block and that block's first packed row (fa4k::tile_first_row:
// below 0 for a partial block counted from the bottom), head group and sequence, that sequence's lengths and
// rows, and the K/V blocks it visits. m_block < 0: no more tiles.
struct Work {
  int m_block, first_row, group, batch;
  fa4k::SequenceSpan seq;
  fa4k::BlockRange blocks;
};

struct Barriers {
  u64 q_full[kQStages], q_empty[kQStages];
  u64 k_full[kKvStages], k_empty[kKvStages];
  u64 v_full[kKvStages], v_empty[kKvStages];
  u64 o_empty;  // the store has read the O buffer (in the ring: the storer has passed the store barrier)
  u64 o_slot_k, o_slot_v;  // O in the ring: consumer 1's last QK, consumer 0's last PV is complete
  u64 tile_full[kTileSlots], tile_empty[kTileSlots];
  Work tile[kTileSlots];  // the announced tiles
};
static_assert(sizeof(Barriers) <= kSmemBarsBytes, "barrier block larger than the Plan's Bars buffer");

struct Smem {
  char* base;  // 1024-B aligned (checked at kernel start)
  __device__ char* q(int i) const { return base + kSmemQOffset + i * kSmemQStride; }
  __device__ char* o() const { return base + kSmemOOffset; }  // O's own buffer (in the ring: the storer's part())
  __device__ char* k(int i) const { return base + kSmemKOffset + i * kSmemKStride; }
  __device__ char* v(int i) const { return base + kSmemVOffset + i * kSmemVStride; }
  __device__ Barriers& bars() const { return *reinterpret_cast<Barriers*>(base + kSmemBarsOffset); }
};

// A ring position: stage index and the phase parity of its barriers.
template <int kStages>
struct StageRing {
  int index = 0;
  u32 phase = 0;
  __device__ void advance() {
    if (++index == kStages) index = 0, phase ^= 1;
  }
};
using Ring = StageRing<kKvStages>;  // K and V blocks
using QRing = StageRing<kQStages>;  // Q tiles

// ---- tiles -------------------------------------------------------------------------------------------
// The scheduler's counters in the scratch: the next tile to hand out, and how many CTAs have drawn their
// last (the CTA that completes that count zeroes both for the stream's next launch).
struct TileCounters {
  int next, finished;
};

// The scheduler warp's source of tile indices (warp-collective): this CTA's static share, or the shared
// counter. A CTA's indices only increase.
struct TileSource {
  int static_next = static_cast<int>(blockIdx.x);
  __device__ int draw(const fa4k::AttentionArgs& a) {
    if constexpr (!kDynamicTiles) {
      const int tile = static_next;
      static_next += gridDim.x;
      return tile;
    } else {
      int tile = 0;
      if (threadIdx.x % 32 == 0) tile = atomicAdd(&static_cast<TileCounters*>(a.scratch)->next, 1);
      return __shfl_sync(0xffffffffu, tile, 0);
    }
  }
  // This CTA draws no more.
  __device__ void finish(const fa4k::AttentionArgs& a) {
    if constexpr (kDynamicTiles) {
      TileCounters* c = static_cast<TileCounters*>(a.scratch);
      if (threadIdx.x % 32 == 0) {
        __threadfence();  // this CTA's last draw is ordered before its count of finished
        if (atomicAdd(&c->finished, 1) == static_cast<int>(gridDim.x) - 1) {
          __threadfence();  // acquire: every CTA's last draw is ordered before the reset
          atomicExch(&c->next, 0);
          atomicExch(&c->finished, 0);
        }
      }
    }
  }
};

// Ragged tiles go sequence by sequence; a sequence has ceil(seqlen_q * pack / kM) row blocks per head group
// (none when the decode kernel serves it: AttentionArgs::decode_seqlen_q), the row blocks of a head group
// fastest (longest first when causal). The scheduler warp finds a tile's sequence from a running count of
// the tiles before it, 32 sequences per step; as a CTA's tiles only increase, it never steps back.
struct VarlenCursor {
  int seq0 = 0;          // the first sequence of the current step
  int tiles_before = 0;  // tiles of the sequences before seq0
  // Tile `tile`'s sequence, its index among that sequence's tiles and the sequence's row blocks; false when
  // the batch has fewer tiles.
  __device__ bool find(const fa4k::AttentionArgs& a, int tile, int& batch, int& local, int& m_blocks) {
    const int lane = threadIdx.x % 32;
    const int groups = a.heads_q / kPack;
    for (; seq0 < a.batch; seq0 += 32) {
      const int s = seq0 + lane;
      int mb = 0;
      if (s < a.batch) {
        const int seqlen_q = a.cu_seqlens_q ? a.cu_seqlens_q[s + 1] - a.cu_seqlens_q[s] : a.seqlen_q;
        mb = seqlen_q <= a.decode_seqlen_q ? 0 : (seqlen_q * kPack + kM - 1) / kM;
      }
      const int tiles = mb * groups;
      int through = tiles;  // tiles of sequences seq0 .. s
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int x = __shfl_up_sync(0xffffffffu, through, o);
        if (lane >= o) through += x;
      }
      const unsigned holds = __ballot_sync(0xffffffffu, tile < tiles_before + through);
      if (holds) {
        const int owner = __ffs(holds) - 1;
        batch = seq0 + owner;
        local = tile - tiles_before - __shfl_sync(0xffffffffu, through - tiles, owner);
        m_blocks = __shfl_sync(0xffffffffu, mb, owner);
        return true;
      }
      tiles_before += __shfl_sync(0xffffffffu, through, 31);
    }
    return false;
  }
};

// The scheduler warp's next tile (warp-collective); false when there is none.
__device__ __forceinline__ bool next_work(const fa4k::AttentionArgs& a, TileSource& source, VarlenCursor& cursor, Work& w) {
  const int tile = source.draw(a);
  const bool longest_first = fa4k::later_rows_longer(kCausal, kWindow, a.window_right);
  int m_blocks = a.num_m_blocks;
  if constexpr (kVarlen) {
    int local;
    if (!cursor.find(a, tile, w.batch, local, m_blocks)) return false;
    w.seq = fa4k::sequence_span(a, w.batch);
    w.group = local / m_blocks;
    w.m_block = longest_first ? m_blocks - 1 - local % m_blocks : local % m_blocks;
  } else {
    if (tile >= a.total_tiles) return false;
    const fa4k::TilePosition t = fa4k::dense_tile(tile, a.num_m_blocks, a.heads_q / kPack, longest_first,
                                                      a.tile_section, a.batch);
    w.m_block = t.m_block, w.group = t.group, w.batch = t.batch;
    w.seq = {a.seqlen_q, a.seqlen_k, 0, 0, w.batch, w.batch};
  }
  w.first_row = fa4k::tile_first_row(w.m_block, m_blocks, kM, kPack, w.seq.seqlen_q, kRowsFromBottom && longest_first);
  w.blocks = fa4k::tile_blocks(w.first_row, kM, kPack, w.seq.seqlen_q, w.seq.seqlen_k, kN, kCausal, kWindow, a.window_left,
                               a.window_right);
  return true;
}

// The other roles follow the scheduler's announcements: next() copies the next tile; or peek() waits for
// it and leaves it in shared memory until release() (a role with few registers reads it there).
struct TileFeed {
  int slot = 0;
  u32 phase = 0;
  __device__ const Work& peek(Barriers& b) {
    wait<false>(&b.tile_full[slot], phase);
    return b.tile[slot];
  }
  __device__ void release(Barriers& b) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbarrier_arrive(&b.tile_empty[slot]);
    if (++slot == kTileSlots) slot = 0, phase ^= 1;
  }
  __device__ Work next(Barriers& b) {
    const Work w = peek(b);
    release(b);
    return w;
  }
};

__device__ __forceinline__ int kv_head_of(const fa4k::AttentionArgs& a, const Work& w) {
  return fa4k::dense_kv_head(w.group, kPack, a.q_heads_per_kv);
}

// The tile's first token in the Q/O maps' seq coordinate (its sequence's row offset added when ragged).
__device__ __forceinline__ int first_token(const Work& w) { return w.seq.q_row0 + w.first_row / kPack; }

// ---- Producer and scheduler ----------------------------------------------------------------------------
// The producer loads K and V of each announced tile's blocks into the rings (K first: S needs it first), and
// the tile's Q: with two Q buffers first of all (its buffer is free since the tile before last, so it lands
// while the consumers finish the previous tile); with one, after the first block's K and V, so they load
// while the previous tile's last QKs still hold the buffer. One thread issues the
// copies (K a column box a copy, V a whole row width: its slot is laid out piece by piece); a paged block's
// pieces, lane p piece p.

static_assert(kSpan == kBoxCols * 2, "a TMA box's row is one swizzle span (fa4k::load_kv_block)");

__device__ __forceinline__ void load_tile(const fa4k::AttentionArgs& a, const Smem& sm, const Work& w, Ring& ring, QRing& q,
                                          const TmaDescriptor* tq, const TmaDescriptor* tk, const TmaDescriptor* tv) {
  Barriers& b = sm.bars();
  const bool leader = threadIdx.x % 32 == 0;
  auto load_q = [&] {
    wait<true>(&b.q_empty[q.index], q.phase ^ 1);
    if (leader) {
      mbarrier_arrive_expect_tx(&b.q_full[q.index], kM * kD * 2);
      for (int box = 0; box < kD / kBoxCols; ++box)
        tma_load_5d(sm.q(q.index) + box * kM * kSpan, tq, &b.q_full[q.index], box * kBoxCols, 0, w.group, first_token(w),
                    w.seq.q_batch);
    }
    q.advance();
  };
  if constexpr (kQStages > 1) load_q();
  const int kv_head = kv_head_of(a, w);
  const int log2 = kPaged ? a.page_size_log2 : 0, piece = kPaged ? fa4k::paged_piece_rows(kN, log2) : kN;
  const int top = w.seq.k_row0 + w.blocks.n_first * kN;  // the first block's first key (row)
  // Paged: each block's pages are looked up one block ahead, so the table read hides behind the waits.
  fa4k::PagedPiece next{};
  if constexpr (kPaged) next = fa4k::paged_piece<kN>(a, w.batch, top, log2, piece);
  for (int j = 0; j < w.blocks.n_blocks; ++j) {
    const fa4k::PagedPiece here = next;
    if (kPaged && j + 1 < w.blocks.n_blocks) next = fa4k::paged_piece<kN>(a, w.batch, top - (j + 1) * kN, log2, piece);
    const int row = kPaged ? here.slot : top - j * kN, batch = kPaged ? here.page : w.seq.k_batch;
    wait<true>(&b.k_empty[ring.index], ring.phase ^ 1);
    fa4k::load_kv_block<kN, kBoxCols, 1, kPaged>(sm.k(ring.index), tk, &b.k_full[ring.index], kD, kv_head, row, batch, piece, leader);
    wait<true>(&b.v_empty[ring.index], ring.phase ^ 1);
    fa4k::load_kv_block<kN, kBoxCols, kTmaVColBoxes, kPaged>(sm.v(ring.index), tv, &b.v_full[ring.index], kDv, kv_head, row, batch, piece, leader);
    ring.advance();
    if (kQStages == 1 && j == 0) load_q();
  }
}

// The scheduler warp: draws, decodes and announces every tile, then announces the end.
__device__ __forceinline__ void scheduler(const fa4k::AttentionArgs& a, const Smem& sm) {
  Barriers& b = sm.bars();
  TileSource source;
  VarlenCursor cursor;
  // Tile t is drawn once every role has taken tile t - kTilesAhead (t's slot is then free too: the roles take
  // tiles in order), not as soon as its slot is free: claimed tiles waiting here would unbalance the tail.
  // `fill` is t's slot; `taken` holds tile t - kTilesAhead, kTileSlots - kTilesAhead positions further round
  // the ring (`fill` itself at the ring's depth), and its release completes that slot's previous phase.
  StageRing<kTileSlots> fill, behind;
  for (int i = kTilesAhead; i < kTileSlots; ++i) behind.advance();
  const StageRing<kTileSlots>& taken = kTilesAhead == kTileSlots ? fill : behind;
  for (bool more = true; more;) {
    if (threadIdx.x % 32 == 0) wait_slot(&b.tile_empty[taken.index], taken.phase ^ 1);
    __syncwarp();
    Work w;
    more = next_work(a, source, cursor, w);
    if (!more) {
      source.finish(a);
      w.m_block = -1;
    }
    if (threadIdx.x % 32 == 0) {
      b.tile[fill.index] = w;
      mbarrier_arrive(&b.tile_full[fill.index]);  // release: the readers' acquire sees the tile
    }
    __syncwarp();
    fill.advance();
    if constexpr (kTilesAhead < kTileSlots) behind.advance();
  }
}

__device__ __forceinline__ void producer(const fa4k::AttentionArgs& a, const Smem& sm, const TmaDescriptor* tq, const TmaDescriptor* tk,
                                         const TmaDescriptor* tv) {
  Barriers& b = sm.bars();
  Ring ring;
  QRing q;
  TileFeed feed;
  for (;;) {
    const Work& w = feed.peek(b);
    const bool done = w.m_block < 0;
    if (!done) load_tile(a, sm, w, ring, q, tq, tk, tv);
    feed.release(b);
    if (done) break;
  }
}

// ---- Storer ------------------------------------------------------------------------------------------
// Once every consumer has staged its O rows: one thread's TMA store of the tile (a box of kORows rows per
// staged part), and when it has read them, their buffer is free again: o_empty, or in the ring the last
// block's K and V slots, whose releases the consumers left to this warp. A partial tile whose box would
// write outside its sequence, the warp copies its own rows instead: a ragged sequence's (the box would
// overwrite the next or previous sequence's rows) and any tile counted from the bottom that starts before
// its sequence (a TMA store at a token below 0 faults; past the map's end, as a dense tile's last rows
// are when counted from the top, TMA drops them).
__device__ __forceinline__ void storer(const fa4k::AttentionArgs& a, const Smem& sm, const TmaDescriptor* to) {
  Barriers& b = sm.bars();
  TileFeed feed;
  int first_slot = 0;  // O in the ring: the K/V slot of each tile's first block, and so of its last
  for (Work w = feed.next(b); w.m_block >= 0; w = feed.next(b)) {
    const int slot = (first_slot + w.blocks.n_blocks - 1) % kKvStages;
    first_slot = slot + 1 == kKvStages ? 0 : slot + 1;
    auto part = [&](int c) { return kOInRing ? (c == 0 ? sm.k(slot) : sm.v(slot)) : sm.o() + c * kORows * kSpan; };
    named_barrier_sync(kStoreBarrier, kConsumerThreads + 32);
    if (kOInRing && threadIdx.x % 32 == 0) mbarrier_arrive(&b.o_empty);  // the consumers may arrive for the next tile
    const int first = w.first_row < 0 ? -w.first_row : 0;           // the tile's rows inside its
    const int end = min(kM, w.seq.seqlen_q * kPack - w.first_row);  // sequence: [first, end)
    const bool copy = (kRowsFromBottom && first > 0) || (kVarlen && a.cu_seqlens_q && end < kM);  // (else none)
    if (copy) {
      for (int c = 0; c < kM / kORows; ++c)
        fa4k::store_tile_rows<kORows, kDv, kPack, kSwizzle>(part(c), max(first - c * kORows, 0), min(end - c * kORows, kORows),
                                                            a.o, w.seq.q_batch, first_token(w) + c * kORows / kPack, w.group,
                                                            threadIdx.x % 32, 32);
      // In the ring, the producer's next TMA load (async proxy) may overwrite what these lanes just read.
      if constexpr (kOInRing) fence_proxy_async_shared();
      __syncwarp();
    } else if (threadIdx.x % 32 == 0) {
      for (int c = 0; c < kM / kORows; ++c)
        for (int box = 0; box < kDv / kBoxCols; ++box)
          tma_store_5d(to, part(c) + box * kORows * kSpan, box * kBoxCols, 0, w.group, first_token(w) + c * kORows / kPack,
                       w.seq.q_batch);
      bulk_commit_group();
      bulk_wait_group_read<0>();
    }
    if (threadIdx.x % 32 == 0) {
      if constexpr (kOInRing) {
        mbarrier_arrive(&b.k_empty[slot], kConsumerWarps);
        mbarrier_arrive(&b.v_empty[slot], kConsumerWarps);
      } else {
        mbarrier_arrive(&b.o_empty);
      }
    }
    __syncwarp();
  }
  if (threadIdx.x % 32 == 0) bulk_wait_group<0>();  // the last stores are complete before the CTA exits
}

// ---- Consumers ---------------------------------------------------------------------------------------
// The wgmmas' shared-memory operands: a descriptor per operand tile (Q's rows of this consumer, a K slot, a
// V slot), built before the consumer's turn so that none of its arithmetic sits between the turn barrier
// and the first wgmma; a k-step adds its offset (desc_advance).
__device__ __forceinline__ u64 q_operand(const char* q_tile, int wg) {
  constexpr OperandStep qa = kmajor_step(kSwizzle, kM, 0);
  return make_wgmma_desc(smem_u32(q_tile) + wg * kWgRows * kSpan, qa.lbo, qa.sbo, kSwizzle);
}
__device__ __forceinline__ u64 k_operand(const char* k_tile) {
  constexpr OperandStep kb = kmajor_step(kSwizzle, kN, 0);
  return make_wgmma_desc(smem_u32(k_tile), kb.lbo, kb.sbo, kSwizzle);
}
// V MN-major (dv contiguous), its slot laid out in pieces of v_piece keys (kN unless paged: fa4k::load_kv_block,
// one copy a piece): LBO and SBO are every k-step's.
__device__ __forceinline__ u64 v_operand(const char* v_tile, int v_piece) {
  const OperandStep vb = pieced_mnmajor_step(kSwizzle, kN, kDv, v_piece, 0);
  return make_wgmma_desc(smem_u32(v_tile), vb.lbo, vb.sbo, kSwizzle);
}

// S (64 x kN) = Q rows [64 wg, 64 wg + 64) times K^T, both K-major, kD / 16 steps.
__device__ __forceinline__ void issue_qk(float (&s)[kN / 2], u64 q, u64 k) {
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
    QkMma::ss(s, desc_advance(q, kmajor_step(kSwizzle, kM, kk * 16).start),
              desc_advance(k, kmajor_step(kSwizzle, kN, kk * 16).start), kk > 0 ? 1u : 0u);
}

// O (64 x kDv) (+)= P V: P from registers (the S fragment of 16 keys per step).
static_assert(kTmaVColBoxes == kDv / kBoxCols, "V loads whole rows a copy (the Plan's col_boxes)");
__device__ __forceinline__ void issue_pv(float (&o)[kDv / 2], const u32 (&p)[kN / 16][4], u64 v, bool accumulate,
                                         int v_piece) {
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
    PvMma::rs(o, p[kk], desc_advance(v, pieced_mnmajor_step(kSwizzle, kN, kDv, v_piece, kk * 16).start),
              accumulate || kk > 0 ? 1u : 0u);
}

// Accumulator fragment of a 64-row wgmma (per warp 16 rows): s[4g + 2r + e] is row lane/4 + 8r, column
// 8g + 2 (lane % 4) + e. The four lanes of a quad hold one row pair; row statistics reduce over the quad.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Softcap with bf16 P and a modest cap: a fixed max, no running one (common/params.h).
__device__ __forceinline__ bool softcap_bias_fixed(const fa4k::AttentionArgs& a) {
  return fa4k::softcap_bias_fixed(kSoftcap, kBf16, a.scale_log2);
}

// The keys row r of a thread's two (packed rows packed_row0 + 8 r) may see: [first[r], limit[r]) (bottom-right
// causal and window alignment, the seqlen_k tail). Computed where a block is masked, from the tile, so that
// no register holds them across the K/V loop.
__device__ __forceinline__ void row_keys(const fa4k::AttentionArgs& a, const Work& w, int packed_row0, int (&first)[2],
                                         int (&limit)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int token = (packed_row0 + 8 * r) / kPack, seqlen_k = w.seq.seqlen_k;
    const long long diag = static_cast<long long>(seqlen_k) - w.seq.seqlen_q;
    limit[r] = kCausal || kWindow ? fa4k::visible_last_key(token, diag, seqlen_k, kWindow ? a.window_right : 0) + 1 : seqlen_k;
    first[r] = kWindow ? fa4k::visible_first_key(token, diag, seqlen_k, a.window_left) : 0;
  }
}

// Online softmax of one block: softcaps the scores (kSoftcap), masks keys outside row_keys (when `masked`),
// updates the row max m and the thread's partial row sum l, leaves exp2(S * scale_log2 - m * scale_log2) in
// s and the factor the previous O must be multiplied by in scale. With softcap_bias_fixed, m stays at the
// fixed bias (the consumer sets it per tile) and scale at 1.
__device__ __forceinline__ void softmax_block(float (&s)[kN / 2], float (&m)[2], float (&l)[2], float (&scale)[2],
                                              bool masked, int key0, const Work& w, int packed_row0,
                                              const fa4k::AttentionArgs& a) {
  const float scale_log2 = a.scale_log2;  // with softcap: cap * log2(e) (the scores become tanh)
  if constexpr (kSoftcap) {
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) s[i] = fa4k::softcap_tanh(s[i], a.softcap_scale);
  }
  const int col0 = key0 + 2 * static_cast<int>(threadIdx.x % 4);
  if (masked) {
    int first[2], limit[2];
    row_keys(a, w, packed_row0, first, limit);
#pragma unroll
    for (int g = 0; g < kN / 8; ++g)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (col0 + 8 * g + e >= limit[r] || (kWindow && col0 + 8 * g + e < first[r])) s[4 * g + 2 * r + e] = FA4_NEG_INF;
  }
  // Max and sum over a row's kN / 4 values in four independent chains (one chain is latency-bound).
  constexpr int kChains = 4;
  static_assert((kN / 4) % kChains == 0, "a row's values split evenly over the chains");
  const bool fixed = softcap_bias_fixed(a);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float chain[kChains];
    float bias = m[r] * scale_log2;
    scale[r] = 1.f;
    if (!fixed) {
#pragma unroll
      for (int c = 0; c < kChains; ++c) chain[c] = s[4 * (c / 2) + 2 * r + c % 2];
#pragma unroll
      for (int i = kChains; i < kN / 4; ++i) chain[i % kChains] = fmaxf(chain[i % kChains], s[4 * (i / 2) + 2 * r + i % 2]);
      const float block_max = fmaxf(fmaxf(chain[0], chain[1]), fmaxf(chain[2], chain[3]));
      // Lazy rescale: keep the old max while the new one exceeds it by at most 2^threshold in exp2 units (P
      // then stays below 2^threshold); a row's first keys (m = -inf) always take the new max.
      float new_max = fmaxf(m[r], quad_max(block_max));
      if ((m[r] - new_max) * scale_log2 >= -kRescaleThresholdLog2) new_max = m[r];
      bias = new_max == FA4_NEG_INF ? 0.f : new_max * scale_log2;  // a row that has seen no key yet
      scale[r] = new_max == m[r] ? 1.f : exp2_approx(fmaf(m[r], scale_log2, -bias));  // 0 when m was -inf
      m[r] = new_max;
    }
    // Each chain starts at its first value, not at 0 (0 + x is an add ptxas must keep: x could be -0; an
    // exponential never is, so the sums are the same bits).
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      float& x = s[4 * (i / 2) + 2 * r + i % 2];
      x = exp2_approx(fmaf(x, scale_log2, -bias));
      chain[i % kChains] = i < kChains ? x : chain[i % kChains] + x;
    }
    l[r] = fmaf(l[r], scale[r], (chain[0] + chain[1]) + (chain[2] + chain[3]));
  }
}

// P as the A operand of the PV wgmma: step kk (keys 16 kk .. 16 kk + 15) is s[8 kk .. 8 kk + 7] packed in pairs.
__device__ __forceinline__ void pack_p(const float (&s)[kN / 2], u32 (&p)[kN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) p[kk][i] = pack_half2<kBf16>(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
}

// O *= the rows' max change; skipped (uniformly) when no row of the warp moved its max, as in most blocks
// once the maxima settle.
__device__ __forceinline__ void rescale_o(float (&o)[kDv / 2], const float (&scale)[2]) {
  if (__all_sync(0xffffffffu, scale[0] == 1.f && scale[1] == 1.f)) return;
#pragma unroll
  for (int i = 0; i < kDv / 2; ++i) o[i] *= scale[(i / 2) % 2];
}

// Ping-pong: a consumer issues its wgmmas only in its turn and hands the turn to the next one (in a ring)
// once they are issued. Every consumer has the same number of issue points per tile (same blocks), so the
// turns go round strictly; the last consumer hands consumer 0 the first turn. A turn barrier counts the
// consumer that waits and the one that arrives.
__device__ __forceinline__ void take_turn(int wg) { named_barrier_sync(kTurnBarrier + wg, 2 * 128); }
__device__ __forceinline__ void pass_turn(int wg) {
  named_barrier_arrive(kTurnBarrier + (wg + 1 == kConsumers ? 0 : wg + 1), 2 * 128);
}

// P's A fragments tied to this point, as fence_registers ties accumulators: after a wgmma_wait, no write to
// them (P's next packing) moves above the wait that retired the wgmma reading them (the PTX ISA forbids
// changing a wgmma's register operands before then, and the wait's memory clobber does not order registers).
__device__ __forceinline__ void fence_fragments(u32 (&p)[kN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(p[kk][i])::"memory");
}

// wgmma.fence orders earlier register writes before the wgmmas that read them, but only for writes the
// compiler has already placed: tying the registers here keeps it from moving O's rescale or P's packing
// past the fence into the issue window.
__device__ __forceinline__ void fence_operands(float (&o)[kDv / 2], u32 (&p)[kN / 16][4]) {
  fence_registers(o);
  fence_fragments(p);
  wgmma_fence();
}

// A ragged, padded or paged cache (kVarlen, kPaged) has rows past a sequence's keys in the tile's top K/V
// block: the next sequence's, or a cache's unused slots, which may hold anything, NaN included. Their scores
// are masked, so P is 0 there, but 0 * NaN is NaN: before the block's PV, consumer 0 zeroes those V rows
// (whole swizzled rows, every box) and both consumers meet (outside the turns, so neither waits on the
// other's turn).
__device__ __forceinline__ void clean_v_tail(char* v_tile, const Work& w, int wg, int v_piece) {
  if constexpr (kVarlen || kPaged) {
    int valid = w.seq.seqlen_k - w.blocks.n_first * kN;  // rows of the top block inside the sequence
    if (valid >= kN) return;
    valid = valid > 0 ? valid : 0;  // (lengths that break their rules must not write outside the slot)
    if (wg == 0) {
      fa4k::zero_tile_rows<kN, kDv, kSpan>(v_tile, valid, threadIdx.x % 128, 128, v_piece);
      fence_proxy_async_shared();  // the zeros are visible to the wgmmas (async proxy)
    }
    named_barrier_sync(kTailBarrier, kConsumerThreads);
  }
}

// One arrival per consumer warp (the Plan's arrival counts): the warp's wgmmas that read the buffer are complete.
__device__ __forceinline__ void release(u64* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbarrier_arrive(bar);
}

__device__ __forceinline__ void consumer(const fa4k::AttentionArgs& a, const Smem& sm, int wg) {
  Barriers& b = sm.bars();
  const int lane = threadIdx.x % 32;
  const int row0 = wg * kWgRows + (threadIdx.x / 32 % 4) * 16 + lane / 4;  // rows row0 and row0 + 8 of the tile
  Ring ring;
  QRing q;
  TileFeed feed;
  u32 tile_phase = 0;  // O's buffer
  const int v_piece = kPaged ? fa4k::paged_piece_rows(kN, a.page_size_log2) : kN;  // V slots' layout
  if (wg == kConsumers - 1) pass_turn(wg);
  for (Work w = feed.next(b); w.m_block >= 0; w = feed.next(b), tile_phase ^= 1) {
    // A block is masked when it is one of the first n_masked or the last n_masked_low visited.
    const int low_masked_from = w.blocks.n_blocks - w.blocks.n_masked_low;
    float o[kDv / 2], s[kN / 2], m[2] = {FA4_NEG_INF, FA4_NEG_INF}, l[2] = {0.f, 0.f}, scale[2];
    if (softcap_bias_fixed(a)) m[0] = m[1] = fa4k::softcap_fixed_max(a.scale_log2);
    u32 p[kN / 16][4];
#pragma unroll
    for (int i = 0; i < kDv / 2; ++i) o[i] = 0.f;
    wait<false>(&b.q_full[q.index], q.phase);

    // Trip t issues, in the consumer's turn, S_t = Q K_t^T and O += P_(t-1) V_(t-1) (trip 0 only S_0, outside
    // the turns: the other consumer has nothing to overlap), then runs S_t's softmax while that PV does, and
    // packs P_t once the PV has read P_(t-1); the last PV follows the loop. The softmax and P's packing end the
    // trip, so that the loop's back edge keeps ptxas from sinking them past the next turn barrier, where they
    // would delay the first wgmma. One copy of the softmax (its unrolled steps are most of the kernel's compile
    // time). Every wgmma is retired in the trip that issued it: ptxas serializes every wgmma of the kernel when
    // some path reads a result past a wait it may have skipped (with the last PV inside the loop, it did).
    const int n = w.blocks.n_blocks;  // >= 1: a tile whose rows see no key visits one block, fully masked
    Ring v_pos = ring;  // the V that P multiplies
    // Q's descriptor is the tile's; each use takes an opaque copy, so that its k-step offsets are added where
    // they are used, not hoisted out of the loop as a register each.
    const u64 q_desc = q_operand(sm.q(q.index), wg);
    // Block i's V is in its slot (v_pos), and block 0's rows past a ragged or paged sequence are zeroed.
    auto v_ready = [&](int i) {
      wait<false>(&b.v_full[v_pos.index], v_pos.phase);
      if (i == 0) clean_v_tail(sm.v(v_pos.index), w, wg, v_piece);
    };
    for (int t = 0; t < n; ++t) {
      const bool pv = t > 0;
      // The turn's descriptors, built before it (opaque: ptxas would otherwise build them after the barrier).
      const u64 qd = opaque(q_desc), kd = opaque(k_operand(sm.k(ring.index)));
      const u64 vd = opaque(v_operand(sm.v(v_pos.index), v_piece));
      // Waits first: wgmmas issued in straight-line code after one fence stay asynchronous (ptxas serializes
      // them when a spin loop sits between fence and issue).
      wait<false>(&b.k_full[ring.index], ring.phase);
      if (pv) v_ready(t - 1);
      if (pv) take_turn(wg);
      fence_registers(s);
      fence_operands(o, p);
      issue_qk(s, qd, kd);
      wgmma_commit();
      if (pv) {
        issue_pv(o, p, vd, t > 1, v_piece);
        wgmma_commit();
        pass_turn(wg);
        wgmma_wait<1>();  // S_t is complete; PV_(t-1) may still run
      } else {
        wgmma_wait<0>();  // S_0
      }
      fence_registers(s);
      if (!kOInRing || t < n - 1) release(&b.k_empty[ring.index]);  // (O in the ring: the last K's, the storer)
      if (t == n - 1) release(&b.q_empty[q.index]);                   // every QK of this consumer has read Q
      if (kOInRing && wg == 1 && t == n - 1) release(&b.o_slot_k);   // consumer 0 may stage O over that K
      softmax_block(s, m, l, scale, t < w.blocks.n_masked || t >= low_masked_from, (w.blocks.n_first - t) * kN, w,
                    w.first_row + row0, a);
      if (pv) {
        wgmma_wait<0>();  // PV_(t-1)
        fence_registers(o);
        fence_fragments(p);  // P_t's packing below overwrites the fragments PV_(t-1) read
        release(&b.v_empty[v_pos.index]);
        rescale_o(o, scale);
      }
      pack_p(s, p);  // (not before the wait: the running PV reads P_(t-1) from these registers)
      v_pos = ring;
      ring.advance();
    }
    // The last PV (outside the turns).
    v_ready(n - 1);
    fence_operands(o, p);
    issue_pv(o, p, opaque(v_operand(sm.v(v_pos.index), v_piece)), n > 1, v_piece);
    wgmma_commit();
    wgmma_wait<0>();  // the last PV
    fence_registers(o);
    if constexpr (!kOInRing) release(&b.v_empty[v_pos.index]);

    // Epilogue: normalise, LSE (with the sink in the denominator), O through swizzled shared memory to a
    // TMA store.
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(l[r]);
      inv[r] = sum > 0.f ? 1.f / sum : 0.f;  // rows that saw no key: O = 0, LSE = -inf
      if constexpr (kWriteLse || kSinks) {
        const int packed_row = w.first_row + row0 + 8 * r;  // (first_row: a multiple of kPack)
        const int q_head = kPack > 1 ? w.group * kPack + (row0 + 8 * r) % kPack : w.group;
        float lse = sum > 0.f ? (m[r] * a.scale_log2 + __log2f(sum)) * kLn2 : FA4_NEG_INF;
        if constexpr (kSinks) lse = fa4k::add_sink(lse, a.sinks[q_head], inv[r]);
        const int token = packed_row / kPack;
        if (kWriteLse && lane % 4 == 0 && packed_row >= 0 && token < w.seq.seqlen_q)
          a.lse[fa4k::lse_offset(a, w.batch, q_head, w.seq.q_row0, token)] = lse;
      }
    }
    // This consumer's rows of O: in O's own buffer once the previous tile's store has read it, or in the last
    // block's K slot (consumer 0) or V slot (consumer 1) once the other consumer's last QK or PV has read it.
    // Consumer 0 waits before it signals, so neither can run a tile ahead of the other's wait.
    char* o_tile = sm.o();
    int o_row0 = row0;
    if constexpr (kOInRing) {
      if (wg == 0) {
        wait<false>(&b.o_slot_k, tile_phase);
        release(&b.o_slot_v);
      } else {
        wait<false>(&b.o_slot_v, tile_phase);
      }
      o_tile = wg == 0 ? sm.k(v_pos.index) : sm.v(v_pos.index);
      o_row0 -= wg * kWgRows;
    } else {
      wait<false>(&b.o_empty, tile_phase ^ 1);
    }
    o_tile += 4 * (lane % 4);  // columns 8 g + 2 (lane % 4): bytes below the swizzled chunk bits
    const u32 row_xor = swizzle_row_xor(kSwizzle, row0);  // row0 + 8's too (and the part's own rows: 64 apart)
#pragma unroll
    for (int g = 0; g < kDv / 8; ++g)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<u32*>(o_tile + (tile_offset(kSwizzle, kORows, o_row0 + 8 * r, 8 * g) ^ row_xor)) =
            pack_half2<kBf16>(o[4 * g + 2 * r] * inv[r], o[4 * g + 2 * r + 1] * inv[r]);
    fence_proxy_async_shared();
    // In the ring nothing else keeps a consumer from reaching the store barrier a tile ahead: the storer
    // signals OEmpty once it has passed the barrier, so that one generation never mixes two tiles' arrivals.
    if constexpr (kOInRing) wait<false>(&b.o_empty, tile_phase ^ 1);
    named_barrier_arrive(kStoreBarrier, kConsumerThreads + 32);
    q.advance();
  }
}

}  // namespace fa4::sm90::fwd

extern "C" __global__ void __launch_bounds__(fa4cfg::kThreads, 1)
    fa4_sm90_fwd(const fa4k::AttentionArgs args, const __grid_constant__ fa4::TmaDescriptor tma_q,
                 const __grid_constant__ fa4::TmaDescriptor tma_k, const __grid_constant__ fa4::TmaDescriptor tma_v,
                 const __grid_constant__ fa4::TmaDescriptor tma_o) {
  using namespace fa4;
  using namespace fa4::sm90::fwd;
  extern __shared__ __align__(1024) char smem_raw[];
  const Smem sm{smem_raw};
  const int warp = __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);  // from lane 0: warp-uniform to ptxas
  if (threadIdx.x == 0) {
    if (smem_u32(sm.base) % 1024) __trap();  // the swizzle atoms need 1024-byte alignment
    Barriers& b = sm.bars();
    for (int i = 0; i < kQStages; ++i) {
      mbarrier_init(&b.q_full[i], kBarQFullArrivals);
      mbarrier_init(&b.q_empty[i], kBarQEmptyArrivals);
    }
    for (int i = 0; i < kKvStages; ++i) {
      mbarrier_init(&b.k_full[i], kBarKFullArrivals);
      mbarrier_init(&b.k_empty[i], kBarKEmptyArrivals);
      mbarrier_init(&b.v_full[i], kBarVFullArrivals);
      mbarrier_init(&b.v_empty[i], kBarVEmptyArrivals);
    }
    mbarrier_init(&b.o_empty, kBarOEmptyArrivals);
    mbarrier_init(&b.o_slot_k, kBarOSlotKArrivals);
    mbarrier_init(&b.o_slot_v, kBarOSlotVArrivals);
    for (int i = 0; i < kTileSlots; ++i) {
      mbarrier_init(&b.tile_full[i], kBarTileFullArrivals);
      mbarrier_init(&b.tile_empty[i], kBarTileEmptyArrivals);
    }
    fence_mbarrier_init();
    tma_prefetch_descriptor(&tma_q);
    tma_prefetch_descriptor(&tma_k);
    tma_prefetch_descriptor(&tma_v);
    tma_prefetch_descriptor(&tma_o);
  }
  __syncthreads();
  if (warp >= kRoleProducerFirstWarp) {
    setmaxnreg_dec<kRoleProducerRegs>();
    if (warp == kRoleProducerFirstWarp) producer(args, sm, &tma_q, &tma_k, &tma_v);
    if (warp == kRoleStorerFirstWarp) storer(args, sm, &tma_o);
    if (warp == kRoleSchedulerFirstWarp) scheduler(args, sm);
  } else {
    setmaxnreg_inc<kRoleConsumer0Regs>();
    consumer(args, sm, warp < 4 ? 0 : kConsumers == 2 || warp < 8 ? 1 : 2);  // (a range ptxas sees: fewer registers)
  }
}
