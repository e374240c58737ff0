// tcgen05.cuh, hardware implementation (sm_100a family): one PTX instruction per function.
// Included only by tcgen05.cuh; see the contract there. PTX forms and sources: docs/blackwell-facts.md.
#pragma once

namespace fa4::sm100 {

constexpr bool kTcgen05Emulated = false;

__device__ __forceinline__ void tmem_bind_scratch(void*, u64, u32, u32) {}
__device__ __forceinline__ void tcgen05_thread_waited() {}
__device__ __forceinline__ void tcgen05_thread_arrives() {}
__device__ __forceinline__ void tmem_exit_check() {}

__device__ __forceinline__ void tmem_alloc(u32* smem_result, u32 ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_u32(smem_result)),
               "r"(ncols)
               : "memory");
}

__device__ __forceinline__ void tmem_dealloc(u32 taddr, u32 ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
}

__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// The issuing thread's forms: one instruction each (the SS and TS operand forms of tcgen05.mma, and the
// commit), from the thread that issues every MMA and commit.
__device__ __forceinline__ void mma_f16_ss_issue(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %4, 0;"
      " tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p; }" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((u32)accumulate)
      : "memory");
}

__device__ __forceinline__ void mma_f16_ts_issue(u32 d_tmem, u32 a_tmem, u64 b_desc, u32 idesc, bool accumulate) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %4, 0;"
      " tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p; }" ::"r"(d_tmem),
      "r"(a_tmem), "l"(b_desc), "r"(idesc), "r"((u32)accumulate)
      : "memory");
}

__device__ __forceinline__ void mma_commit_issue(u64* mbar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_u32(mbar))
               : "memory");
}

// The warp-collective forms: each call elects the issuing lane itself.
__device__ __forceinline__ void mma_f16_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate) {
  if (elect_one_sync()) mma_f16_ss_issue(d_tmem, a_desc, b_desc, idesc, accumulate);
}
__device__ __forceinline__ void mma_f16_ts(u32 d_tmem, u32 a_tmem, u64 b_desc, u32 idesc, bool accumulate) {
  if (elect_one_sync()) mma_f16_ts_issue(d_tmem, a_tmem, b_desc, idesc, accumulate);
}
__device__ __forceinline__ void mma_commit(u64* mbar) {
  if (elect_one_sync()) mma_commit_issue(mbar);
}

// ---------------------------------------------------------------------------------------------
// 32x32b.xN: native forms up to x32; x64 and x128 are consecutive x32 instructions (same result).
#define FA4_R4(i) "r"(r[i]), "r"(r[i + 1]), "r"(r[i + 2]), "r"(r[i + 3])
#define FA4_W4(i) "=r"(r[i]), "=r"(r[i + 1]), "=r"(r[i + 2]), "=r"(r[i + 3])
#define FA4_R16(i) FA4_R4(i), FA4_R4(i + 4), FA4_R4(i + 8), FA4_R4(i + 12)
#define FA4_W16(i) FA4_W4(i), FA4_W4(i + 4), FA4_W4(i + 8), FA4_W4(i + 12)
#define FA4_REGS16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define FA4_REGS32 FA4_REGS16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"

template <int N>
__device__ __forceinline__ void tmem_ld_32x32b(u32 taddr, u32 (&r)[N]) {
  static_assert(N >= 1 && N <= 128 && (N & (N - 1)) == 0, "tcgen05.ld 32x32b: N is a power of 2 in 1..128");
  if constexpr (N == 1) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(r[0]) : "r"(taddr) : "memory");
  } else if constexpr (N == 2) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(taddr)
                 : "memory");
  } else if constexpr (N == 4) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];" : FA4_W4(0) : "r"(taddr) : "memory");
  } else if constexpr (N == 8) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
                 : FA4_W4(0), FA4_W4(4)
                 : "r"(taddr)
                 : "memory");
  } else if constexpr (N == 16) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 {" FA4_REGS16 "}, [%16];" : FA4_W16(0) : "r"(taddr) : "memory");
  } else if constexpr (N == 32) {
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x32.b32 {" FA4_REGS32 "}, [%32];"
                 : FA4_W16(0), FA4_W16(16)
                 : "r"(taddr)
                 : "memory");
  } else {
#pragma unroll
    for (int c = 0; c < N; c += 32) {
      u32(&part)[32] = *reinterpret_cast<u32(*)[32]>(&r[c]);
      tmem_ld_32x32b<32>(taddr + c, part);
    }
  }
}

template <int N>
__device__ __forceinline__ void tmem_st_32x32b(u32 taddr, const u32 (&r)[N]) {
  static_assert(N >= 1 && N <= 128 && (N & (N - 1)) == 0, "tcgen05.st 32x32b: N is a power of 2 in 1..128");
  if constexpr (N == 1) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%1], {%0};" ::"r"(r[0]), "r"(taddr) : "memory");
  } else if constexpr (N == 2) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x2.b32 [%2], {%0, %1};" ::"r"(r[0]), "r"(r[1]), "r"(taddr)
                 : "memory");
  } else if constexpr (N == 4) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%4], {%0, %1, %2, %3};" ::FA4_R4(0), "r"(taddr) : "memory");
  } else if constexpr (N == 8) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x8.b32 [%8], {%0, %1, %2, %3, %4, %5, %6, %7};" ::FA4_R4(0),
                 FA4_R4(4), "r"(taddr)
                 : "memory");
  } else if constexpr (N == 16) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x16.b32 [%16], {" FA4_REGS16 "};" ::FA4_R16(0), "r"(taddr) : "memory");
  } else if constexpr (N == 32) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x32.b32 [%32], {" FA4_REGS32 "};" ::FA4_R16(0), FA4_R16(16),
                 "r"(taddr)
                 : "memory");
  } else {
#pragma unroll
    for (int c = 0; c < N; c += 32) {
      const u32(&part)[32] = *reinterpret_cast<const u32(*)[32]>(&r[c]);
      tmem_st_32x32b<32>(taddr + c, part);
    }
  }
}

#undef FA4_R4
#undef FA4_W4
#undef FA4_R16
#undef FA4_W16
#undef FA4_REGS16
#undef FA4_REGS32

__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Packed f32x2 (sm_100a): .b64 operands, .x in the low 32 bits.
// mov.b64 of a register pair: no instruction, and the compiler sees two 32-bit values, not a 64-bit
// integer (shift-and-mask arithmetic on the .y half otherwise turns into 64-bit shifts).
__device__ __forceinline__ u64 f32x2_pack(F32x2 v) {
  u64 r;
  asm("mov.b64 %0, {%1, %2};" : "=l"(r) : "f"(v.x), "f"(v.y));
  return r;
}
__device__ __forceinline__ F32x2 f32x2_unpack(u64 v) {
  F32x2 r;
  asm("mov.b64 {%0, %1}, %2;" : "=f"(r.x), "=f"(r.y) : "l"(v));
  return r;
}

__device__ __forceinline__ F32x2 f32x2_add(F32x2 a, F32x2 b) {
  u64 d;
  asm("add.rn.f32x2 %0, %1, %2;" : "=l"(d) : "l"(f32x2_pack(a)), "l"(f32x2_pack(b)));
  return f32x2_unpack(d);
}

__device__ __forceinline__ F32x2 f32x2_add_rm(F32x2 a, F32x2 b) {
  u64 d;
  asm("add.rm.f32x2 %0, %1, %2;" : "=l"(d) : "l"(f32x2_pack(a)), "l"(f32x2_pack(b)));
  return f32x2_unpack(d);
}

__device__ __forceinline__ F32x2 f32x2_mul(F32x2 a, F32x2 b) {
  u64 d;
  asm("mul.rn.f32x2 %0, %1, %2;" : "=l"(d) : "l"(f32x2_pack(a)), "l"(f32x2_pack(b)));
  return f32x2_unpack(d);
}

__device__ __forceinline__ F32x2 f32x2_fma(F32x2 a, F32x2 b, F32x2 c) {
  u64 d;
  asm("fma.rn.f32x2 %0, %1, %2, %3;" : "=l"(d) : "l"(f32x2_pack(a)), "l"(f32x2_pack(b)), "l"(f32x2_pack(c)));
  return f32x2_unpack(d);
}

}  // namespace fa4::sm100
