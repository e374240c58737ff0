// tcgen05.cuh, software emulation for sm_90a (and any sm_90+ target without tcgen05).
// Included only by tcgen05.cuh; the contract is there. Semantics follow the PTX ISA; every violation
// prints "fa4 tcgen05 emulation fault ..." and traps (the CUDA context is then lost).
//
// Memory: each CTA owns one slot of the runtime's scratch (descriptors.h, kEmuTmemSlotBytes):
//   [0, 4096)     Header: allocation state and the queue of issued, not yet committed MMAs.
//   [4096, +256K) TMEM data, 32-bit word (lane, col) at index col * 128 + lane.
// Asynchrony: an MMA is validated when issued, queued, and executed (by the whole issuing warp, in
// issue order) when that warp commits; then one lane arrives on the mbarrier. Until the commit, a
// tcgen05.ld of its destination reads NaN, so a consumer that skips the wait fails loudly.
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
  u32 unused[3];
  unsigned char alloc_units[16];  // allocation starting at unit i: its size in 32-column units
  MmaOp queue[kEmuMmaQueueCapacity];
};
static_assert(sizeof(Header) <= kEmuTmemHeaderBytes, "emulated TMEM header exceeds its reserved bytes");

constexpr u32 kBoundMagic = 0xFA4E3100u;
__shared__ u64 g_slot;   // this CTA's slot address (generic), written by tmem_bind_scratch
__shared__ u32 g_bound;  // kBoundMagic once bound

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

}  // namespace emu

// =============================================================================================
// The interface

__device__ __forceinline__ void tmem_bind_scratch(void* scratch, u64 bytes) {
  const u64 block = emu::block_index();
  if (scratch == nullptr) emu::fault("tmem_bind_scratch: the emulated kernel got no TMEM scratch", 0, 0);
  if ((reinterpret_cast<u64>(scratch) & 255u) != 0) emu::fault("tmem_bind_scratch: scratch must be 256-byte aligned", 0, 0);
  if ((block + 1) * kEmuTmemSlotBytes > bytes)
    emu::fault("tmem_bind_scratch: scratch holds fewer slots than the grid has CTAs [block, MiB]", (u32)block,
               (u32)(bytes >> 20));
  emu::g_slot = reinterpret_cast<u64>(scratch) + block * kEmuTmemSlotBytes;
  emu::g_bound = emu::kBoundMagic;
}

__device__ __forceinline__ void tmem_exit_check() {
  __syncwarp();
  volatile emu::Header* h = emu::header();
  if (lane_id() == 0) {
    if (h->alloc_mask != 0)
      emu::fault("kernel exit with TMEM columns still allocated [32-column unit mask]", h->alloc_mask, 0);
    if (h->queue_count != 0) emu::fault("kernel exit with uncommitted MMAs [count]", h->queue_count, 0);
    h->relinquished = 0;  // the header is all zero again for the next launch
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

// Executes this warp's queued MMAs in issue order, then arrives once. A warp with nothing queued (another
// warp's MMAs are not its own) arrives at once, as on hardware.
__device__ __forceinline__ void mma_commit(u64* mbar) {
  __syncwarp();
  emu::require_uniform(smem_u32(mbar), "tcgen05.commit: mbarrier address must be warp-uniform");
  volatile emu::Header* h = emu::header();
  const bool mine = h->queue_warp == warp_id() + 1;
  const u32 count = mine ? h->queue_count : 0u;
  for (u32 i = 0; i < count; ++i) {
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

template <int N>
__device__ __forceinline__ void tmem_ld_32x32b(u32 taddr, u32 (&r)[N]) {
  static_assert(N >= 1 && N <= 128 && (N & (N - 1)) == 0, "tcgen05.ld 32x32b: N is a power of 2 in 1..128");
  __syncwarp();
  emu::check_warp_access(taddr, N, "tcgen05.ld: lane outside the warp's quadrant [address lane, allowed first lane]",
                         "tcgen05.ld: columns not allocated [first, count]");
  const u32 lane = tmem_lane(taddr) + lane_id(), col = tmem_col(taddr);
  const u32* data = emu::tmem_data();
#pragma unroll
  for (int j = 0; j < N; ++j) r[j] = data[emu::word_index(lane, col + j)];
  // Destinations of issued, uncommitted MMAs read as NaN (the consumer did not wait for the commit).
  volatile emu::Header* h = emu::header();
  const u32 count = h->queue_count;
  for (u32 i = 0; i < count; ++i) {
    const emu::Footprint f = emu::footprint(h->queue[i]);
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (emu::covers_d(f, lane, col + j)) r[j] = 0x7FC00000u;
  }
}

template <int N>
__device__ __forceinline__ void tmem_st_32x32b(u32 taddr, const u32 (&r)[N]) {
  static_assert(N >= 1 && N <= 128 && (N & (N - 1)) == 0, "tcgen05.st 32x32b: N is a power of 2 in 1..128");
  __syncwarp();
  emu::check_warp_access(taddr, N, "tcgen05.st: lane outside the warp's quadrant [address lane, allowed first lane]",
                         "tcgen05.st: columns not allocated [first, count]");
  const u32 lane = tmem_lane(taddr) + lane_id(), col = tmem_col(taddr);
  volatile emu::Header* h = emu::header();
  const u32 count = h->queue_count;
  bool race = false;
  for (u32 i = 0; i < count; ++i) {
    const emu::Footprint f = emu::footprint(h->queue[i]);
    for (int j = 0; j < N; ++j) race |= emu::covers_d(f, lane, col + j) || emu::covers_a(f, lane, col + j);
  }
  if (__any_sync(emu::kFullMask, race))
    emu::fault("tcgen05.st: into TMEM an uncommitted MMA reads or writes [first column, count]", col, N);
  u32* data = emu::tmem_data();
#pragma unroll
  for (int j = 0; j < N; ++j) data[emu::word_index(lane, col + j)] = r[j];
}

__device__ __forceinline__ void tmem_wait_ld() { __syncwarp(); }
__device__ __forceinline__ void tmem_wait_st() {
  __syncwarp();
  __threadfence_block();
}
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() { __threadfence_block(); }
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() { __threadfence_block(); }

// Two scalar round-to-nearest operations (never contracted), the same results as the f32x2 forms.
__device__ __forceinline__ F32x2 f32x2_add(F32x2 a, F32x2 b) { return {__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y)}; }
__device__ __forceinline__ F32x2 f32x2_mul(F32x2 a, F32x2 b) { return {__fmul_rn(a.x, b.x), __fmul_rn(a.y, b.y)}; }
__device__ __forceinline__ F32x2 f32x2_fma(F32x2 a, F32x2 b, F32x2 c) {
  return {__fmaf_rn(a.x, b.x, c.x), __fmaf_rn(a.y, b.y, c.y)};
}

}  // namespace fa4::sm100
