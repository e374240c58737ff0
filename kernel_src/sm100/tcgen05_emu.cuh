// tcgen05.cuh, software emulation for sm_90a (and any sm_90+ target without tcgen05).
// Included only by tcgen05.cuh; the contract is there. Semantics follow the PTX ISA; every violation
// prints "fa4 tcgen05 emulation fault ..." and traps (the CUDA context is then lost).
//
// Memory: each CTA owns one slot of the runtime's scratch (descriptors.h, kEmuTmemSlotBytes):
//   [0, 4096)     Header: allocation state and the queue of issued, not yet committed MMAs.
//   [4096, +256K) TMEM data, 32-bit word (lane, col) at index col * 128 + lane.
//   then          one ThreadState per thread (adversarial mode).
// Asynchrony: an MMA is validated when issued, queued, and executed (by the whole issuing warp) when that
// warp commits -- the latest moment the commit's barrier allows; then one lane arrives on the mbarrier.
// Until the commit, a tcgen05.ld of its destination reads NaN, so a consumer that skips the wait fails.
//
// Two modes, chosen per launch (tmem_bind_scratch):
//   strict       MMAs of one commit run in issue order; tcgen05.ld/st take effect at once.
//   adversarial  the least the PTX ISA promises. At a commit, MMAs run in another order wherever the ISA
//                does not pipeline them (only MMAs with the same accumulator address and shape keep their
//                issue order): reversed, or a seeded random order. tcgen05.st data lands in TMEM only at
//                tcgen05.wait::st; tcgen05.ld destinations hold NaN until tcgen05.wait::ld, which reads TMEM
//                then. And the fence discipline is checked: a tcgen05 operation after a thread sync needs
//                tcgen05.fence::after_thread_sync in between; a thread's arrive after a tcgen05 operation
//                (ld, st, mma, commit) needs tcgen05.fence::before_thread_sync in between. Kernels report their syncs with
//                tcgen05_thread_waited() / tcgen05_thread_arrives().
#pragma once

namespace fa4::sm100 {

constexpr bool kTcgen05Emulated = true;

namespace emu {

struct MmaOp {  // one issued tcgen05.mma
  u64 a;        // A smem descriptor (SS) or A TMEM address (TS)
  u64 b;        // B smem descriptor
  u32 d;        // D TMEM address
  u32 idesc;
  u32 flags;  // kAccumulate | kTs
  u32 unused;
};
constexpr u32 kAccumulate = 1, kTs = 2;

struct Header {
  u32 lock;                // alloc/dealloc spin lock
  u32 alloc_mask;          // bit i: columns [32i, 32i + 32) allocated
  u32 relinquished;        // relinquish_alloc_permit was called
  u32 queue_count;         // issued, uncommitted MMAs
  u32 queue_warp;          // 1 + the warp that issued them (0: none)
  u32 commits;             // commits with MMAs so far (seeds the adversarial order; reset at exit)
  u32 unused[2];
  unsigned char alloc_units[16];  // allocation starting at unit i: its size in 32-column units
  MmaOp queue[kEmuMmaQueueCapacity];
};
static_assert(sizeof(Header) <= kEmuTmemHeaderBytes, "emulated TMEM header exceeds its reserved bytes");

constexpr u32 kBoundMagic = 0xFA4E3100u;
constexpr u32 kModeStrict = 0, kModeAdversarial = 1;  // fa4::Emulation
__shared__ u64 g_slot;   // this CTA's slot address (generic), written by tmem_bind_scratch
__shared__ u32 g_bound;  // kBoundMagic once bound
__shared__ u32 g_mode;   // kModeStrict or kModeAdversarial
__shared__ u32 g_seed;   // adversarial: 0 reverses the unordered MMAs of a commit, else seeds a random order

// Per-thread state of the adversarial mode: tcgen05.st data not yet landed, tcgen05.ld destinations not
// yet filled, and the fence-discipline flags.
constexpr u32 kPendingStOps = 16, kPendingStWords = 128, kPendingLdOps = 8;
struct ThreadState {
  u32 flags;
  u32 st_ops, st_words, ld_ops;
  u32 st_addr[kPendingStOps], st_count[kPendingStOps];  // per op: TMEM address of this thread's lane, words
  u32 ld_addr[kPendingLdOps], ld_count[kPendingLdOps];
  u64 ld_dst[kPendingLdOps];                            // the caller's registers (generic address)
  u32 st_data[kPendingStWords];
};
static_assert(sizeof(ThreadState) <= kEmuThreadStateBytes, "emulated thread state exceeds its reserved bytes");
constexpr u32 kTouched = 1;  // a tcgen05 operation since the last fence::before_thread_sync
constexpr u32 kSynced = 2;   // a thread sync since the last fence::after_thread_sync

constexpr u32 kFullMask = 0xFFFFFFFFu;

__device__ __forceinline__ u64 block_index() {
  return blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
}

// Prints once per warp (first active lane) and traps.
__device__ __noinline__ void fault(const char* what, u32 a, u32 b) {
  if (lane_id() == (u32)(__ffs(__activemask()) - 1))
    printf("fa4 tcgen05 emulation fault (block %llu, warp %u): %s [%u, %u]\n", block_index(), warp_id(), what, a, b);
  __trap();
}

__device__ __forceinline__ volatile Header* header() {
  if (g_bound != kBoundMagic) fault("tmem_bind_scratch() was not called before a tcgen05 operation", 0, 0);
  return reinterpret_cast<volatile Header*>(g_slot);
}
__device__ __forceinline__ u32* tmem_data() { return reinterpret_cast<u32*>(g_slot + kEmuTmemHeaderBytes); }
__device__ __forceinline__ bool adversarial() { return g_mode == kModeAdversarial; }
__device__ __forceinline__ u32 thread_index() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
__device__ __forceinline__ ThreadState* thread_state() {
  return reinterpret_cast<ThreadState*>(g_slot + kEmuTmemHeaderBytes + kEmuTmemDataBytes +
                                        (u64)thread_index() * kEmuThreadStateBytes);
}

// Fence discipline (adversarial mode): every tcgen05 operation of a thread passes here.
__device__ __forceinline__ void note_tcgen05_op(const char* what) {
  if (!adversarial()) return;
  ThreadState* t = thread_state();
  if (t->flags & kSynced) fault(what, 0, 0);
  t->flags |= kTouched;
}
__device__ __forceinline__ u32 word_index(u32 lane, u32 col) { return col * kTmemLanes + lane; }

__device__ __forceinline__ void require_uniform(u32 v, const char* what) {
  if (__any_sync(kFullMask, __shfl_sync(kFullMask, v, 0) != v)) fault(what, v, 0);
}
__device__ __forceinline__ void require_uniform64(u64 v, const char* what) {
  require_uniform((u32)v, what);
  require_uniform((u32)(v >> 32), what);
}

__device__ __forceinline__ bool valid_ncols(u32 n) { return n >= 32 && n <= 512 && (n & (n - 1)) == 0; }

__device__ __forceinline__ void lock(volatile Header* h) {
  while (atomicCAS(const_cast<u32*>(&h->lock), 0u, 1u) != 0u) {
  }
  __threadfence();
}
__device__ __forceinline__ void unlock(volatile Header* h) {
  __threadfence();
  atomicExch(const_cast<u32*>(&h->lock), 0u);
}

// Columns [col, col + n) lie inside allocated 32-column units.
__device__ __forceinline__ bool columns_allocated(volatile Header* h, u32 col, u32 n) {
  if (n == 0 || col + n > kTmemColumns) return false;
  const u32 mask = h->alloc_mask;
  for (u32 u = col / 32; u <= (col + n - 1) / 32; ++u)
    if (!((mask >> u) & 1u)) return false;
  return true;
}

// Does TMEM lane `lane` belong to the rows of an M-row MMA operand whose lane base is `base`?
__device__ __forceinline__ bool mma_lane(u32 m, u32 base, u32 lane) {
  if (lane < base || lane >= base + kTmemLanes) return false;
  return m == 128 || (lane - base) % 32 < 16;
}

// ---------------------------------------------------------------------------------------------
// Operand reads (shared memory through the decoded descriptor, TMEM for TS)

__device__ __forceinline__ float half_to_float(u32 bits, bool bf16) {
  if (bf16) return __uint_as_float(bits << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)bits));
  return f;
}

__device__ __forceinline__ void smem_load16(u32 addr, u32 (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr));
}
__device__ __forceinline__ u32 smem_load_u16(u32 addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}

// The 16 K-elements of row `mn` of an operand (A row m or B column n).
__device__ __forceinline__ void load_operand_row(const SmemDesc& d, Major major, u32 mn, bool bf16, bool negate,
                                                 float (&out)[16]) {
  const float sign = negate ? -1.f : 1.f;
  if (major == Major::K) {  // 8 consecutive K elements are one 16-byte chunk in every K-major layout
#pragma unroll
    for (u32 half = 0; half < 2; ++half) {
      u32 v[4];
      smem_load16(operand_address(d, Major::K, mn, 8 * half), v);
#pragma unroll
      for (u32 j = 0; j < 8; ++j) out[8 * half + j] = sign * half_to_float((v[j / 2] >> (16 * (j % 2))) & 0xFFFFu, bf16);
    }
  } else {
#pragma unroll
    for (u32 k = 0; k < 16; ++k) out[k] = sign * half_to_float(smem_load_u16(operand_address(d, Major::MN, mn, k)), bf16);
  }
}

// TS: A row `row` lives in TMEM lane a_lane + mma_row_lane(m, row), two elements per column
// (element 2c in bits 15:0, 2c + 1 in bits 31:16), 8 columns for K = 16.
__device__ __forceinline__ void load_tmem_row(u32 a_tmem, u32 m, u32 row, bool bf16, bool negate, float (&out)[16]) {
  const u32* data = tmem_data();
  const u32 lane = tmem_lane(a_tmem) + mma_row_lane(m, row);
  const float sign = negate ? -1.f : 1.f;
#pragma unroll
  for (u32 c = 0; c < 8; ++c) {
    const u32 w = data[word_index(lane, tmem_col(a_tmem) + c)];
    out[2 * c] = sign * half_to_float(w & 0xFFFFu, bf16);
    out[2 * c + 1] = sign * half_to_float(w >> 16, bf16);
  }
}

// ---------------------------------------------------------------------------------------------
// Issue-time validation: everything the hardware would reject or that the emulator cannot model.

__device__ __forceinline__ void check_smem_desc(u64 desc) {
  SmemDesc d{};
  const DescError e = decode_smem_desc(desc, d);
  if (e != DescError::ok) fault(desc_error_name(e), (u32)e, (u32)(desc >> 32));
}

__device__ __noinline__ void issue(u32 d_tmem, u64 a, u64 b_desc, u32 idesc, bool accumulate, bool ts) {
  __syncwarp();
  require_uniform(d_tmem, "tcgen05.mma: D address must be warp-uniform (warp-collective call)");
  require_uniform64(a, "tcgen05.mma: A operand must be warp-uniform (warp-collective call)");
  require_uniform64(b_desc, "tcgen05.mma: B descriptor must be warp-uniform (warp-collective call)");
  require_uniform(idesc, "tcgen05.mma: instruction descriptor must be warp-uniform (warp-collective call)");
  require_uniform(accumulate, "tcgen05.mma: enable-input-d must be warp-uniform (warp-collective call)");
  note_tcgen05_op("fence discipline: tcgen05.mma after a thread sync without tcgen05.fence::after_thread_sync");
  volatile Header* h = header();

  InstrDesc id{};
  const DescError e = decode_idesc_f16(idesc, id);
  if (e != DescError::ok) fault(desc_error_name(e), (u32)e, idesc);
  if (ts && id.a_major != Major::K) fault(desc_error_name(DescError::idesc_ts_a_major), idesc, 0);
  check_smem_desc(b_desc);
  if (!ts) check_smem_desc(a);

  if (tmem_lane(d_tmem) != 0) fault("tcgen05.mma (cta_group::1): D lane field must be 0", tmem_lane(d_tmem), 0);
  if (!columns_allocated(h, tmem_col(d_tmem), id.n))
    fault("tcgen05.mma: D columns [first, count] are not allocated", tmem_col(d_tmem), id.n);
  if (ts) {
    const u32 a_tmem = (u32)a;
    if ((a >> 32) != 0 || tmem_lane(a_tmem) != tmem_lane(d_tmem))
      fault("tcgen05.mma TS: A and D must share the TMEM lane base [A lane, D lane]", tmem_lane(a_tmem),
            tmem_lane(d_tmem));
    if (!columns_allocated(h, tmem_col(a_tmem), 8))
      fault("tcgen05.mma TS: A columns [first, count] are not allocated", tmem_col(a_tmem), 8);
    const u32 ac = tmem_col(a_tmem), dc = tmem_col(d_tmem);
    if (ac < dc + id.n && dc < ac + 8) fault("tcgen05.mma TS: A columns overlap D columns [A col, D col]", ac, dc);
  }

  if (lane_id() == 0) {
    const u32 count = h->queue_count;
    const u32 me = warp_id() + 1;
    if (count != 0 && h->queue_warp != me)
      fault("tcgen05.mma: another warp has uncommitted MMAs (emulation: one issuing warp per commit) [warp+1]",
            h->queue_warp, me);
    if (count == kEmuMmaQueueCapacity) fault("tcgen05.mma: too many MMAs issued without a commit", count, 0);
    volatile MmaOp& op = h->queue[count];
    op.a = a;
    op.b = b_desc;
    op.d = d_tmem;
    op.idesc = idesc;
    op.flags = (accumulate ? kAccumulate : 0u) | (ts ? kTs : 0u);
    __threadfence_block();
    h->queue_warp = me;
    h->queue_count = count + 1;
  }
  __syncwarp();
}

// ---------------------------------------------------------------------------------------------
// Execution at commit time: the whole warp; lane t computes rows t, t + 32, ... of D.

__device__ __noinline__ void execute(const MmaOp& op) {
  InstrDesc id{};
  decode_idesc_f16(op.idesc, id);  // validated at issue
  SmemDesc bd{}, ad{};
  decode_smem_desc(op.b, bd);
  const bool ts = op.flags & kTs;
  if (!ts) decode_smem_desc(op.a, ad);
  const bool bf16 = id.format == Format::bf16;
  const bool accumulate = op.flags & kAccumulate;
  u32* data = tmem_data();
  const u32 rows_per_lane = id.m / 32;  // 2 or 4
  const u32 lane = lane_id();

  float a[4][16];
#pragma unroll
  for (u32 j = 0; j < 4; ++j) {
    if (j < rows_per_lane) {
      if (ts)
        load_tmem_row((u32)op.a, id.m, lane + 32 * j, bf16, id.negate_a, a[j]);
      else
        load_operand_row(ad, id.a_major, lane + 32 * j, bf16, id.negate_a, a[j]);
    }
  }
  for (u32 n = 0; n < id.n; ++n) {
    float b[16];
    load_operand_row(bd, id.b_major, n, bf16, id.negate_b, b);  // same address in all lanes: broadcast
#pragma unroll
    for (u32 j = 0; j < 4; ++j) {
      if (j < rows_per_lane) {
        float sum = 0.f;
#pragma unroll
        for (u32 k = 0; k < 16; ++k) sum = fmaf(a[j][k], b[k], sum);
        u32& word = data[word_index(tmem_lane(op.d) + mma_row_lane(id.m, lane + 32 * j), tmem_col(op.d) + n)];
        word = __float_as_uint(accumulate ? __uint_as_float(word) + sum : sum);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// tcgen05.ld / st checks

__device__ __forceinline__ void check_warp_access(u32 taddr, u32 n, const char* what_lane, const char* what_cols) {
  require_uniform(taddr, "tcgen05.ld/st: TMEM address must be warp-uniform");
  const u32 first_lane = 32 * (warp_id() % 4);
  if (tmem_lane(taddr) != first_lane) fault(what_lane, tmem_lane(taddr), first_lane);
  if (!columns_allocated(header(), tmem_col(taddr), n)) fault(what_cols, tmem_col(taddr), n);
}

// The TMEM footprint of a queued op: D (lanes of its M rows, n columns) and, for TS, A (8 columns).
struct Footprint {
  u32 m, n, d, a;
  bool ts;
};
__device__ __forceinline__ Footprint footprint(const volatile MmaOp& op) {
  const u32 idesc = op.idesc;
  return {((idesc >> 24) & 0x1Fu) << 4, ((idesc >> 17) & 0x3Fu) << 3, op.d, (u32)op.a, (op.flags & kTs) != 0};
}
__device__ __forceinline__ bool covers_d(const Footprint& f, u32 lane, u32 col) {
  return mma_lane(f.m, tmem_lane(f.d), lane) && col >= tmem_col(f.d) && col < tmem_col(f.d) + f.n;
}
__device__ __forceinline__ bool covers_a(const Footprint& f, u32 lane, u32 col) {
  return f.ts && mma_lane(f.m, tmem_lane(f.a), lane) && col >= tmem_col(f.a) && col < tmem_col(f.a) + 8;
}

// The PTX ISA pipelines (executes in issue order) two MMAs of one thread only when they have the same
// accumulator address and shape; any other pair may execute in either order.
__device__ __forceinline__ bool pipelined(const volatile MmaOp& a, const volatile MmaOp& b) {
  const u32 shape_bits = (0x1Fu << 24) | (0x3Fu << 17);  // M >> 4 and N >> 3 of the instruction descriptor
  return a.d == b.d && (a.idesc & shape_bits) == (b.idesc & shape_bits);
}

__device__ __forceinline__ u32 mix(u32 x) {  // a 32-bit integer hash (warp-uniform inputs, uniform result)
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

// The order in which a commit executes the queued MMAs: issue order (strict); else, among the MMAs whose
// pipelined predecessors have run, the latest issued (seed 0) or a seeded random one. Warp-uniform.
__device__ __noinline__ void execution_order(volatile Header* h, u32 count, u32 commit_serial, unsigned char* order) {
  if (!adversarial()) {
    for (u32 i = 0; i < count; ++i) order[i] = (unsigned char)i;
    return;
  }
  u64 done[2] = {0, 0};  // kEmuMmaQueueCapacity <= 128
  u32 rng = mix(g_seed ^ mix((u32)block_index() * 0x9E3779B9u + commit_serial));
  for (u32 placed = 0; placed < count; ++placed) {
    u32 ready[kEmuMmaQueueCapacity];
    u32 n_ready = 0;
    for (u32 k = 0; k < count; ++k) {
      if ((done[k / 64] >> (k % 64)) & 1u) continue;
      bool free = true;
      for (u32 i = 0; i < k && free; ++i)
        free = ((done[i / 64] >> (i % 64)) & 1u) || !pipelined(h->queue[i], h->queue[k]);
      if (free) ready[n_ready++] = k;
    }
    rng = mix(rng + placed);
    const u32 pick = g_seed == 0 ? ready[n_ready - 1] : ready[rng % n_ready];
    order[placed] = (unsigned char)pick;
    done[pick / 64] |= u64{1} << (pick % 64);
  }
}

}  // namespace emu

// =============================================================================================
// The interface

__device__ __forceinline__ void tmem_bind_scratch(void* scratch, u64 bytes, u32 mode, u32 seed) {
  const u64 block = emu::block_index();
  if (blockDim.x * blockDim.y * blockDim.z > kEmuMaxThreads)
    emu::fault("tmem_bind_scratch: the emulation keeps state for at most kEmuMaxThreads threads per CTA",
               blockDim.x * blockDim.y * blockDim.z, kEmuMaxThreads);
  if (mode != emu::kModeStrict && mode != emu::kModeAdversarial) emu::fault("tmem_bind_scratch: unknown emulation mode", mode, 0);
  if (scratch == nullptr) emu::fault("tmem_bind_scratch: the emulated kernel got no TMEM scratch", 0, 0);
  if ((reinterpret_cast<u64>(scratch) & 255u) != 0) emu::fault("tmem_bind_scratch: scratch must be 256-byte aligned", 0, 0);
  if ((block + 1) * kEmuTmemSlotBytes > bytes)
    emu::fault("tmem_bind_scratch: scratch holds fewer slots than the grid has CTAs [block, MiB]", (u32)block,
               (u32)(bytes >> 20));
  emu::g_slot = reinterpret_cast<u64>(scratch) + block * kEmuTmemSlotBytes;
  emu::g_bound = emu::kBoundMagic;
  emu::g_mode = mode;
  emu::g_seed = seed;
  // This thread's adversarial state starts clean (a previous launch in this slot may have left flags).
  emu::ThreadState* t = reinterpret_cast<emu::ThreadState*>(emu::g_slot + kEmuTmemHeaderBytes + kEmuTmemDataBytes +
                                                            (u64)emu::thread_index() * kEmuThreadStateBytes);
  t->flags = t->st_ops = t->st_words = t->ld_ops = 0;
}

__device__ __forceinline__ void tmem_exit_check() {
  __syncwarp();
  volatile emu::Header* h = emu::header();
  if (lane_id() == 0) {
    if (h->alloc_mask != 0)
      emu::fault("kernel exit with TMEM columns still allocated [32-column unit mask]", h->alloc_mask, 0);
    if (h->queue_count != 0) emu::fault("kernel exit with uncommitted MMAs [count]", h->queue_count, 0);
    h->relinquished = 0;  // the header is all zero again for the next launch
    h->commits = 0;
  }
  __syncwarp();
}

__device__ __forceinline__ void tmem_alloc(u32* smem_result, u32 ncols) {
  __syncwarp();
  emu::require_uniform(ncols, "tcgen05.alloc: nCols must be warp-uniform");
  emu::require_uniform(smem_u32(smem_result), "tcgen05.alloc: destination must be warp-uniform");
  if (!emu::valid_ncols(ncols)) emu::fault("tcgen05.alloc: nCols must be a power of 2 in 32..512", ncols, 0);
  volatile emu::Header* h = emu::header();
  if (lane_id() == 0) {
    emu::lock(h);
    if (h->relinquished) emu::fault("tcgen05.alloc after tcgen05.relinquish_alloc_permit", ncols, 0);
    const u32 units = ncols / 32;
    const u32 want = (1u << units) - 1u;
    u32 first = 16;
    for (u32 u = 0; u < 16; u += units)
      if ((h->alloc_mask & (want << u)) == 0) {
        first = u;
        break;
      }
    if (first == 16)
      emu::fault("tcgen05.alloc: over-allocation (would block forever) [requested columns, allocated unit mask]",
                 ncols, h->alloc_mask);
    h->alloc_mask = h->alloc_mask | (want << first);
    h->alloc_units[first] = (unsigned char)units;
    emu::unlock(h);
    *smem_result = tmem_addr(0, first * 32);
  }
  __syncwarp();
}

__device__ __forceinline__ void tmem_dealloc(u32 taddr, u32 ncols) {
  __syncwarp();
  emu::require_uniform(taddr, "tcgen05.dealloc: address must be warp-uniform");
  emu::require_uniform(ncols, "tcgen05.dealloc: nCols must be warp-uniform");
  if (!emu::valid_ncols(ncols)) emu::fault("tcgen05.dealloc: nCols must be a power of 2 in 32..512", ncols, 0);
  if (tmem_lane(taddr) != 0 || tmem_col(taddr) % 32 != 0 || tmem_col(taddr) + ncols > kTmemColumns)
    emu::fault("tcgen05.dealloc: address is not an allocation start [lane, column]", tmem_lane(taddr), tmem_col(taddr));
  volatile emu::Header* h = emu::header();
  if (lane_id() == 0) {
    emu::lock(h);
    const u32 unit = tmem_col(taddr) / 32, units = ncols / 32;
    if (h->alloc_units[unit] != units)
      emu::fault("tcgen05.dealloc: columns were not allocated as one block of nCols (double free?) [column, nCols]",
                 tmem_col(taddr), ncols);
    for (u32 i = 0; i < h->queue_count; ++i) {
      const u32 col = tmem_col(h->queue[i].d);
      if (col >= tmem_col(taddr) && col < tmem_col(taddr) + ncols)
        emu::fault("tcgen05.dealloc: an uncommitted MMA writes these columns [column, nCols]", tmem_col(taddr), ncols);
    }
    const u32 want = (1u << units) - 1u;
    h->alloc_mask = h->alloc_mask & ~(want << unit);
    h->alloc_units[unit] = 0;
    emu::unlock(h);
  }
  __syncwarp();
}

__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  __syncwarp();
  volatile emu::Header* h = emu::header();
  if (lane_id() == 0) h->relinquished = 1;
  __syncwarp();
}

__device__ __forceinline__ void mma_f16_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate) {
  emu::issue(d_tmem, a_desc, b_desc, idesc, accumulate, false);
}

__device__ __forceinline__ void mma_f16_ts(u32 d_tmem, u32 a_tmem, u64 b_desc, u32 idesc, bool accumulate) {
  emu::issue(d_tmem, a_tmem, b_desc, idesc, accumulate, true);
}

// Executes this warp's queued MMAs (in issue order, or adversarially reordered), then arrives once. A warp
// with nothing queued (another warp's MMAs are not its own) arrives at once, as on hardware.
__device__ __noinline__ void mma_commit_emulated(u64* mbar) {
  __syncwarp();
  emu::require_uniform(smem_u32(mbar), "tcgen05.commit: mbarrier address must be warp-uniform");
  emu::note_tcgen05_op("fence discipline: tcgen05.commit after a thread sync without tcgen05.fence::after_thread_sync");
  volatile emu::Header* h = emu::header();
  const bool mine = h->queue_warp == warp_id() + 1;
  const u32 count = mine ? h->queue_count : 0u;
  unsigned char order[kEmuMmaQueueCapacity];
  if (count) {
    const u32 serial = h->commits;  // read by every lane before lane 0 bumps it: the order is warp-uniform
    __syncwarp();
    if (lane_id() == 0) h->commits = serial + 1;
    emu::execution_order(h, count, serial, order);
  }
  for (u32 n = 0; n < count; ++n) {
    const u32 i = order[n];
    emu::MmaOp op;
    op.a = h->queue[i].a;
    op.b = h->queue[i].b;
    op.d = h->queue[i].d;
    op.idesc = h->queue[i].idesc;
    op.flags = h->queue[i].flags;
    emu::execute(op);
    __syncwarp();  // the next op may read what another lane wrote (TS after a different-M op)
    __threadfence_block();
  }
  for (u32 i = lane_id(); i < count; i += 32) {  // the header is all zero whenever nothing is pending
    h->queue[i].a = 0;
    h->queue[i].b = 0;
    h->queue[i].d = 0;
    h->queue[i].idesc = 0;
    h->queue[i].flags = 0;
  }
  __syncwarp();
  if (lane_id() == 0) {
    if (mine) {
      h->queue_count = 0;
      h->queue_warp = 0;
    }
    __threadfence_block();
    mbarrier_arrive(mbar);
  }
  __syncwarp();
}
__device__ __forceinline__ void mma_commit(u64* mbar) { mma_commit_emulated(mbar); }

// The issuing thread's forms: emulated MMAs are warp-collective, so here the whole warp is "the thread".
__device__ __forceinline__ void mma_f16_ss_issue(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate) {
  mma_f16_ss(d_tmem, a_desc, b_desc, idesc, accumulate);
}
__device__ __forceinline__ void mma_f16_ts_issue(u32 d_tmem, u32 a_tmem, u64 b_desc, u32 idesc, bool accumulate) {
  mma_f16_ts(d_tmem, a_tmem, b_desc, idesc, accumulate);
}
__device__ __forceinline__ void mma_commit_issue(u64* mbar) { mma_commit(mbar); }

namespace emu {

// What a tcgen05.ld of `n` columns of this thread's lane reads now: TMEM, or NaN where an issued,
// uncommitted MMA writes (the consumer did not wait for the commit).
__device__ __forceinline__ void read_lane(u32 lane, u32 col, u32 n, u32* out) {
  const u32* data = tmem_data();
  for (u32 j = 0; j < n; ++j) out[j] = data[word_index(lane, col + j)];
  volatile Header* h = header();
  const u32 count = h->queue_count;
  for (u32 i = 0; i < count; ++i) {
    const Footprint f = footprint(h->queue[i]);
    for (u32 j = 0; j < n; ++j)
      if (covers_d(f, lane, col + j)) out[j] = 0x7FC00000u;
  }
}

// A tcgen05.st into TMEM that an uncommitted MMA reads or writes traps (in any lane of the warp).
__device__ __forceinline__ void check_store_race(u32 lane, u32 col, u32 n) {
  volatile Header* h = header();
  const u32 count = h->queue_count;
  bool race = false;
  for (u32 i = 0; i < count; ++i) {
    const Footprint f = footprint(h->queue[i]);
    for (u32 j = 0; j < n; ++j) race |= covers_d(f, lane, col + j) || covers_a(f, lane, col + j);
  }
  if (__any_sync(kFullMask, race))
    fault("tcgen05.st: into TMEM an uncommitted MMA reads or writes [first column, count]", col, n);
}

}  // namespace emu

namespace emu {

// Strict: reads at once. Adversarial: the registers hold NaN until tcgen05.wait::ld, which reads TMEM then.
__device__ __noinline__ void load(u32 taddr, u32* r, u32 n) {
  __syncwarp();
  check_warp_access(taddr, n, "tcgen05.ld: lane outside the warp's quadrant [address lane, allowed first lane]",
                    "tcgen05.ld: columns not allocated [first, count]");
  note_tcgen05_op("fence discipline: tcgen05.ld after a thread sync without tcgen05.fence::after_thread_sync");
  const u32 lane = tmem_lane(taddr) + lane_id(), col = tmem_col(taddr);
  if (!adversarial()) {
    read_lane(lane, col, n, r);
    return;
  }
  ThreadState* t = thread_state();
  if (t->ld_ops == kPendingLdOps) fault("tcgen05.ld: too many loads before tcgen05.wait::ld (emulation limit)", n, 0);
  t->ld_addr[t->ld_ops] = tmem_addr(lane, col);
  t->ld_count[t->ld_ops] = n;
  t->ld_dst[t->ld_ops] = reinterpret_cast<u64>(r);
  ++t->ld_ops;
  for (u32 j = 0; j < n; ++j) r[j] = 0x7FC00001u;  // NaN: the data has not arrived yet
}

// Strict: writes at once. Adversarial: the data lands in TMEM at tcgen05.wait::st.
__device__ __noinline__ void store(u32 taddr, const u32* r, u32 n) {
  __syncwarp();
  check_warp_access(taddr, n, "tcgen05.st: lane outside the warp's quadrant [address lane, allowed first lane]",
                    "tcgen05.st: columns not allocated [first, count]");
  note_tcgen05_op("fence discipline: tcgen05.st after a thread sync without tcgen05.fence::after_thread_sync");
  const u32 lane = tmem_lane(taddr) + lane_id(), col = tmem_col(taddr);
  check_store_race(lane, col, n);
  if (!adversarial()) {
    u32* data = tmem_data();
    for (u32 j = 0; j < n; ++j) data[word_index(lane, col + j)] = r[j];
    return;
  }
  ThreadState* t = thread_state();
  if (t->st_ops == kPendingStOps || t->st_words + n > kPendingStWords)
    fault("tcgen05.st: too many stores before tcgen05.wait::st (emulation limit) [ops, words]", t->st_ops, t->st_words);
  t->st_addr[t->st_ops] = tmem_addr(lane, col);
  t->st_count[t->st_ops] = n;
  ++t->st_ops;
  for (u32 j = 0; j < n; ++j) t->st_data[t->st_words + j] = r[j];
  t->st_words += n;
}

}  // namespace emu

template <int N>
__device__ __forceinline__ void tmem_ld_32x32b(u32 taddr, u32 (&r)[N]) {
  static_assert(N >= 1 && N <= 128 && (N & (N - 1)) == 0, "tcgen05.ld 32x32b: N is a power of 2 in 1..128");
  emu::load(taddr, r, N);
}

template <int N>
__device__ __forceinline__ void tmem_st_32x32b(u32 taddr, const u32 (&r)[N]) {
  static_assert(N >= 1 && N <= 128 && (N & (N - 1)) == 0, "tcgen05.st 32x32b: N is a power of 2 in 1..128");
  emu::store(taddr, r, N);
}

__device__ __forceinline__ void tmem_wait_ld() {
  __syncwarp();
  if (!emu::adversarial()) return;
  emu::ThreadState* t = emu::thread_state();
  for (u32 i = 0; i < t->ld_ops; ++i)
    emu::read_lane(tmem_lane(t->ld_addr[i]), tmem_col(t->ld_addr[i]), t->ld_count[i], reinterpret_cast<u32*>(t->ld_dst[i]));
  t->ld_ops = 0;
  __syncwarp();
}

__device__ __forceinline__ void tmem_wait_st() {
  __syncwarp();
  if (emu::adversarial()) {
    emu::ThreadState* t = emu::thread_state();
    u32* data = emu::tmem_data();
    for (u32 i = 0, w = 0; i < t->st_ops; w += t->st_count[i], ++i) {
      const u32 lane = tmem_lane(t->st_addr[i]), col = tmem_col(t->st_addr[i]);
      for (u32 j = 0; j < t->st_count[i]; ++j) data[emu::word_index(lane, col + j)] = t->st_data[w + j];
    }
    t->st_ops = t->st_words = 0;
  }
  __syncwarp();
  __threadfence_block();
}

__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  __threadfence_block();
  if (emu::adversarial()) emu::thread_state()->flags &= ~emu::kTouched;
}

__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  __threadfence_block();
  if (emu::adversarial()) emu::thread_state()->flags &= ~emu::kSynced;
}

__device__ __forceinline__ void tcgen05_thread_waited() {
  if (emu::adversarial()) emu::thread_state()->flags |= emu::kSynced;
}

__device__ __forceinline__ void tcgen05_thread_arrives() {
  if (emu::adversarial() && (emu::thread_state()->flags & emu::kTouched))
    emu::fault("fence discipline: a thread arrives on a barrier after tcgen05 work without tcgen05.fence::before_thread_sync",
               0, 0);
}

// Two scalar round-to-nearest operations (never contracted), the same results as the f32x2 forms.
__device__ __forceinline__ F32x2 f32x2_add(F32x2 a, F32x2 b) { return {__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y)}; }
__device__ __forceinline__ F32x2 f32x2_add_rm(F32x2 a, F32x2 b) { return {__fadd_rd(a.x, b.x), __fadd_rd(a.y, b.y)}; }
__device__ __forceinline__ F32x2 f32x2_mul(F32x2 a, F32x2 b) { return {__fmul_rn(a.x, b.x), __fmul_rn(a.y, b.y)}; }
__device__ __forceinline__ F32x2 f32x2_fma(F32x2 a, F32x2 b, F32x2 c) {
  return {__fmaf_rn(a.x, b.x, c.x), __fmaf_rn(a.y, b.y, c.y)};
}

}  // namespace fa4::sm100
