// The one interface to Blackwell's tcgen05 instructions (TMEM, MMA, commit, ld/st, fences) and packed
// f32x2 arithmetic. Two implementations behind it, chosen by the compile target, not by a macro:
//   sm_100a / sm_103a / sm_100f family  -> tcgen05_hw.cuh: the real PTX.
//   any other target with __CUDA_ARCH__ >= 900 (sm_90a) -> tcgen05_emu.cuh: a software emulation of the
//       PTX ISA semantics, strict where hardware is strict (violations printf a message and __trap()).
// Facts and sources: docs/blackwell-facts.md. Encodings and address math: sm100/descriptors.h.
//
// Contract for kernels (the FA4 kernel includes only common/ptx.cuh and this header):
//  1. Every thread calls tmem_bind_scratch(args.tmem_scratch, args.tmem_scratch_bytes, mode, seed) at
//     kernel start, before the first CTA barrier. (No-op on hardware. Emulated: the CTA's slot is
//     scratch + linear_block_index * kEmuTmemSlotBytes; the scratch must hold grid_size slots, zeroed once;
//     mode 0 strict, 1 adversarial, see tcgen05_emu.cuh.) The emulation keeps the slot address and mode in
//     static __shared__ variables, so emulated builds have 24 bytes of static shared memory: align the
//     dynamic shared-memory base at run time (1024 B) instead of assuming it.
//  2. Warp-collective calls, made by all 32 lanes of one converged warp with warp-uniform arguments:
//     tmem_alloc/dealloc/relinquish, mma_f16_ss/ts, mma_commit, tmem_ld/st, tmem_wait_ld/st,
//     tmem_exit_check. On hardware the MMA and commit wrappers elect one lane (elect.sync, always the
//     same lane) which issues; the emulation queues MMAs and the whole warp executes the queue at commit.
//     The *_issue forms are for a kernel whose MMA role runs in one thread on hardware: that thread calls
//     them (its commits track its MMAs); in emulation the whole warp runs the role and calls them.
//     At any time at most one warp of a CTA has issued, uncommitted MMAs (the emulator traps otherwise).
//  3. The warp that allocated TMEM calls tmem_exit_check() as its last action, after tmem_dealloc.
//     Emulated: traps if columns are still allocated or MMAs were never committed, and leaves the slot
//     header clean for the next launch. (No-op on hardware.)
//  4. fa4::sm100::kTcgen05Emulated tells which implementation was compiled (static_assert it against the
//     Plan's fa4cfg::kEmulated). Emulated MMAs run on the issuing warp at commit time, so that warp needs
//     registers for the emulator: skip setmaxnreg_dec for it in emulated builds.
//  5. Ordering as on hardware: MMA results are read only after waiting for the mbarrier their commit
//     arrives on, then tcgen05_fence_after_thread_sync(). Emulated: until the commit, a tcgen05.ld of
//     a pending MMA's destination returns NaN, and a tcgen05.st into a pending MMA's destination or TS
//     operand traps.
//  6. Nothing beyond what the PTX ISA promises: MMAs of different accumulators or shapes may execute in
//     either order (order them through a commit and a wait), tcgen05.st data is in place only after
//     tcgen05_wait_st(), tcgen05.ld registers only after tcgen05_wait_ld(). Fence discipline: between a
//     thread sync and a later tcgen05 operation, tcgen05_fence_after_thread_sync(); between tcgen05 work
//     and a later arrive, tcgen05_fence_before_thread_sync(). Kernels call tcgen05_thread_waited() after
//     each barrier wait and tcgen05_thread_arrives() before each arrive of a thread (no-ops on hardware),
//     so the adversarial emulation can check the discipline.
#pragma once

#include "sm100/descriptors.h"
#include "common/ptx.cuh"

namespace fa4::sm100 {

// Two fp32 values, the operand of the packed f32x2 instructions.
struct alignas(8) F32x2 {
  float x, y;
};

// --- setup and teardown -----------------------------------------------------------------------
__device__ __forceinline__ void tmem_bind_scratch(void* scratch, u64 bytes, u32 mode = 0, u32 seed = 0);  // all threads
__device__ __forceinline__ void tmem_exit_check();                           // allocating warp, after dealloc

// --- TMEM allocation (tcgen05.alloc / dealloc / relinquish_alloc_permit, cta_group::1) ----------
// ncols: power of 2 in 32..512. The TMEM address (lane 0, first column) is written to *smem_result;
// read it after a CTA barrier.
__device__ __forceinline__ void tmem_alloc(u32* smem_result, u32 ncols);
__device__ __forceinline__ void tmem_dealloc(u32 taddr, u32 ncols);
__device__ __forceinline__ void tmem_relinquish_alloc_permit();

// --- MMA, kind::f16 (bf16/fp16 in, fp32 accumulate), K = 16 per instruction ----------------------
// D[tmem] (+)= A * B^T: A is M x K, B is N x K (majorness, M, N and formats in idesc).
// accumulate = enable-input-d: false -> D = A*B, true -> D += A*B.
__device__ __forceinline__ void mma_f16_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate);  // A, B in smem
__device__ __forceinline__ void mma_f16_ts(u32 d_tmem, u32 a_tmem, u64 b_desc, u32 idesc, bool accumulate);  // A in TMEM
// tcgen05.commit: the mbarrier gets one arrive when all MMAs this warp issued before are complete.
__device__ __forceinline__ void mma_commit(u64* mbar);
// The same three without the election: called by the one thread that issues (hardware), or by the whole
// converged warp (emulation, where they are the warp-collective forms above).
__device__ __forceinline__ void mma_f16_ss_issue(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate);
__device__ __forceinline__ void mma_f16_ts_issue(u32 d_tmem, u32 a_tmem, u64 b_desc, u32 idesc, bool accumulate);
__device__ __forceinline__ void mma_commit_issue(u64* mbar);

// --- TMEM <-> registers, shape 32x32b.xN: thread i <-> lane (taddr lane + i), r[j] <-> column + j ---
// The warp's lane field must be 32 * (warp % 4). N: 1, 2, 4, ..., 128.
template <int N>
__device__ __forceinline__ void tmem_ld_32x32b(u32 taddr, u32 (&r)[N]);
template <int N>
__device__ __forceinline__ void tmem_st_32x32b(u32 taddr, const u32 (&r)[N]);
__device__ __forceinline__ void tmem_wait_ld();  // before using registers from tmem_ld
__device__ __forceinline__ void tmem_wait_st();  // before signalling that tmem_st data is in place

// --- ordering of tcgen05 operations around thread synchronisation (bar, mbarrier) ------------------
__device__ __forceinline__ void tcgen05_fence_before_thread_sync();
__device__ __forceinline__ void tcgen05_fence_after_thread_sync();
__device__ __forceinline__ void tcgen05_thread_waited();   // after a barrier wait of this thread completes
__device__ __forceinline__ void tcgen05_thread_arrives();  // before this thread arrives on a barrier

// --- packed fp32 pairs: one add/mul/fma.rn.f32x2 on sm_100a, two scalar .rn ops elsewhere -----------
__device__ __forceinline__ F32x2 f32x2_add(F32x2 a, F32x2 b);
__device__ __forceinline__ F32x2 f32x2_add_rm(F32x2 a, F32x2 b);  // rounded toward -infinity
__device__ __forceinline__ F32x2 f32x2_mul(F32x2 a, F32x2 b);
__device__ __forceinline__ F32x2 f32x2_fma(F32x2 a, F32x2 b, F32x2 c);  // a * b + c, one rounding

}  // namespace fa4::sm100

#if (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000 || \
                                                  __CUDA_ARCH_FAMILY_SPECIFIC__ == 1030)) ||  \
    defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)
#include "sm100/tcgen05_hw.cuh"
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include "sm100/tcgen05_emu.cuh"
#else
#error "tcgen05.cuh: compile for sm_100a (native tcgen05) or sm_90a (emulation)"
#endif
