// Blackwell (sm_100a) descriptor encodings and shared-memory address math, host + device.
//
// One place for the bit layouts of docs/blackwell-facts.md: the 32-bit instruction descriptor of
// tcgen05.mma kind::f16, the 64-bit shared-memory matrix descriptor, the TMEM address format and the
// emulator's TMEM scratch size. The operand layouts and swizzles it describes are common/smem_layout.h's.
// The same header compiles under g++ (runtime, CPU tests) and NVRTC (kernels): no system headers.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA4_SM100_HD __host__ __device__ __forceinline__
#else
#define FA4_SM100_HD inline
#endif

#include "common/smem_layout.h"
#include "common/types.h"

namespace fa4::sm100 {

// The shared-memory layouts (common/smem_layout.h), under this namespace's names.
using fa4::Major;
using fa4::Swizzle;
using fa4::swizzle_span;
using fa4::swizzle_bits;
using fa4::swizzle_from_bytes;
using fa4::swizzle_address;
using fa4::tma_box_offset;
using fa4::canonical_offset;
using fa4::tile_offset;
using fa4::OperandStep;
using fa4::kmajor_step;
using fa4::mnmajor_step;
using fa4::desc_encode;
using fa4::desc_advance;
using fa4::make_wgmma_desc;

enum class Format : u32 { f16 = 0, bf16 = 1 };  // A/B formats of kind::f16 (bits 9:7 and 12:10)

// ---------------------------------------------------------------------------------------------
// tcgen05 shared-memory matrix descriptor (docs/blackwell-facts.md, shared memory descriptor).
//   13:0 start >> 4 | 29:16 LBO >> 4 | 45:32 SBO >> 4 | 48:46 = 0b001 | 51:49 base offset |
//   52 LBO mode | 63:61 layout type. Bits 15:14, 31:30, 60:53 are reserved (zero).
FA4_SM100_HD constexpr u64 make_smem_desc(u32 smem_addr, u32 lbo_bytes, u32 sbo_bytes, Swizzle s) {
  return desc_encode(smem_addr) | (desc_encode(lbo_bytes) << 16) | (desc_encode(sbo_bytes) << 32) |
         (1ull << 46) | ((u64)s << 61);
}

struct SmemDesc {
  u32 start;        // shared::cta byte address
  u32 lbo;          // bytes
  u32 sbo;          // bytes
  u32 base_offset;  // bits 51:49
  u32 lbo_mode;     // bit 52
  Swizzle swizzle;
};

enum class DescError : u32 {
  ok = 0,
  smem_reserved_bits,    // a reserved bit of the smem descriptor is set
  smem_version,          // bits 48:46 are not 0b001
  smem_layout_invalid,   // layout type 3, 5 or 7
  smem_layout_unsupported,  // layout type 1 (128B with 32-byte atoms): not emulated
  smem_base_offset,      // base offset != 0: not emulated
  smem_lbo_mode,         // LBO mode 1 (absolute): not emulated
  smem_start_unaligned,  // swizzled start not inside the first row of a repeat (needs a base offset)
  idesc_sparse,          // bits 2:0 (sparsity) set: dense kind::f16 only
  idesc_saturate,        // bit 3: only for integer kinds
  idesc_d_format,        // D format other than F32 (1)
  idesc_reserved_bits,   // bit 6, 23 or 29 set
  idesc_ab_format,       // A or B format not F16/BF16, or A != B
  idesc_m,               // M not 64 or 128
  idesc_n,               // N not a multiple of 8 (M=64) / 16 (M=128) in [8|16, 256]
  idesc_max_shift,       // bits 31:30 set (only for .ws)
  idesc_ts_a_major,      // TS form with A MN-major (A in TMEM is always K-major)
};

FA4_SM100_HD constexpr const char* desc_error_name(DescError e) {
  switch (e) {
    case DescError::ok: return "ok";
    case DescError::smem_reserved_bits: return "smem descriptor: reserved bit set (15:14, 31:30 or 60:53)";
    case DescError::smem_version: return "smem descriptor: bits 48:46 must be 0b001";
    case DescError::smem_layout_invalid: return "smem descriptor: layout type 3, 5 or 7 is invalid";
    case DescError::smem_layout_unsupported: return "smem descriptor: layout 1 (128B, 32B atom) is not emulated";
    case DescError::smem_base_offset: return "smem descriptor: non-zero base offset is not emulated";
    case DescError::smem_lbo_mode: return "smem descriptor: LBO mode 1 is not emulated";
    case DescError::smem_start_unaligned:
      return "smem descriptor: swizzled start address must lie in the first row of a swizzle repeat";
    case DescError::idesc_sparse: return "instruction descriptor: sparsity bits 2:0 must be 0";
    case DescError::idesc_saturate: return "instruction descriptor: saturate (bit 3) is invalid for kind::f16";
    case DescError::idesc_d_format: return "instruction descriptor: D format must be F32 (bits 5:4 = 1)";
    case DescError::idesc_reserved_bits: return "instruction descriptor: reserved bit 6, 23 or 29 set";
    case DescError::idesc_ab_format: return "instruction descriptor: A/B formats must both be F16 or both BF16";
    case DescError::idesc_m: return "instruction descriptor: M must be 64 or 128";
    case DescError::idesc_n: return "instruction descriptor: N must be 8..256 step 8 (M=64) or 16..256 step 16 (M=128)";
    case DescError::idesc_max_shift: return "instruction descriptor: max shift (bits 31:30) is only for .ws";
    case DescError::idesc_ts_a_major: return "instruction descriptor: TS form needs A K-major (bit 15 = 0)";
  }
  return "unknown";
}

// Decodes and validates a descriptor as the emulator executes it.
FA4_SM100_HD constexpr DescError decode_smem_desc(u64 d, SmemDesc& out) {
  constexpr u64 kReserved = (3ull << 14) | (3ull << 30) | (0xFFull << 53);
  if (d & kReserved) return DescError::smem_reserved_bits;
  if (((d >> 46) & 7u) != 1u) return DescError::smem_version;
  const u32 layout = (u32)(d >> 61);
  if (layout == 3 || layout == 5 || layout == 7) return DescError::smem_layout_invalid;
  if (layout == 1) return DescError::smem_layout_unsupported;
  out.start = (u32)(d & 0x3FFFu) << 4;
  out.lbo = (u32)((d >> 16) & 0x3FFFu) << 4;
  out.sbo = (u32)((d >> 32) & 0x3FFFu) << 4;
  out.base_offset = (u32)((d >> 49) & 7u);
  out.lbo_mode = (u32)((d >> 52) & 1u);
  out.swizzle = (Swizzle)layout;
  if (out.base_offset != 0) return DescError::smem_base_offset;
  if (out.lbo_mode != 0) return DescError::smem_lbo_mode;
  const u32 span = swizzle_span(out.swizzle);
  if (span != 0 && out.start % (8 * span) >= span) return DescError::smem_start_unaligned;
  return DescError::ok;
}

// Shared-memory byte address of element (mn, k) of the operand a (validated) descriptor describes.
FA4_SM100_HD constexpr u32 operand_address(const SmemDesc& d, Major major, u32 mn, u32 k) {
  return swizzle_address(d.start + canonical_offset(major, d.swizzle, d.lbo, d.sbo, mn, k), d.swizzle);
}

// ---------------------------------------------------------------------------------------------
// Instruction descriptor, kind::f16 (docs/blackwell-facts.md, instruction descriptor): 5:4 D format (F32 = 1),
// 9:7 A format, 12:10 B format, 13/14 negate A/B, 15/16 A/B major (1 = MN-major), 22:17 N >> 3, 28:24 M >> 4.
FA4_SM100_HD constexpr u32 make_idesc_f16(u32 m, u32 n, Format ab, Major a_major, Major b_major) {
  return (1u << 4) | ((u32)ab << 7) | ((u32)ab << 10) | ((u32)a_major << 15) | ((u32)b_major << 16) |
         ((n >> 3) << 17) | ((m >> 4) << 24);
}

struct InstrDesc {
  u32 m, n;
  Format format;  // A and B (equal)
  Major a_major, b_major;
  bool negate_a, negate_b;
};

FA4_SM100_HD constexpr bool valid_mma_shape(u32 m, u32 n) {
  if (m == 64) return n >= 8 && n <= 256 && n % 8 == 0;
  if (m == 128) return n >= 16 && n <= 256 && n % 16 == 0;
  return false;
}

FA4_SM100_HD constexpr DescError decode_idesc_f16(u32 idesc, InstrDesc& out) {
  if (idesc & 7u) return DescError::idesc_sparse;
  if (idesc & (1u << 3)) return DescError::idesc_saturate;
  if (((idesc >> 4) & 3u) != 1u) return DescError::idesc_d_format;
  if (idesc & ((1u << 6) | (1u << 23) | (1u << 29))) return DescError::idesc_reserved_bits;
  if ((idesc >> 30) != 0) return DescError::idesc_max_shift;
  const u32 a_format = (idesc >> 7) & 7u, b_format = (idesc >> 10) & 7u;
  if (a_format > 1 || a_format != b_format) return DescError::idesc_ab_format;
  out.format = (Format)a_format;
  out.negate_a = (idesc >> 13) & 1u;
  out.negate_b = (idesc >> 14) & 1u;
  out.a_major = (Major)((idesc >> 15) & 1u);
  out.b_major = (Major)((idesc >> 16) & 1u);
  out.n = ((idesc >> 17) & 0x3Fu) << 3;
  out.m = ((idesc >> 24) & 0x1Fu) << 4;
  if (out.m != 64 && out.m != 128) return DescError::idesc_m;
  if (!valid_mma_shape(out.m, out.n)) return DescError::idesc_n;
  return DescError::ok;
}

// ---------------------------------------------------------------------------------------------
// Tensor memory: 128 lanes x 512 columns of 32 bits per CTA; address = lane << 16 | column.
constexpr u32 kTmemLanes = 128;
constexpr u32 kTmemColumns = 512;
FA4_SM100_HD constexpr u32 tmem_addr(u32 lane, u32 col) { return (lane << 16) | col; }
FA4_SM100_HD constexpr u32 tmem_lane(u32 addr) { return addr >> 16; }
FA4_SM100_HD constexpr u32 tmem_col(u32 addr) { return addr & 0xFFFFu; }

// TMEM lane (relative to the D/A lane base) holding row `row` of an M-row accumulator or TS A operand:
// M=128 (layout D): lane = row. M=64 (layout F): 16 rows per 32-lane quadrant, lane = 32*(row/16) + row%16.
FA4_SM100_HD constexpr u32 mma_row_lane(u32 m, u32 row) { return m == 128 ? row : 32 * (row / 16) + row % 16; }

// ---------------------------------------------------------------------------------------------
// Emulated TMEM scratch (sm_90a builds of the sm100 backend). One slot per CTA, slot index = linear
// block index; the runtime allocates grid_size * kEmuTmemSlotBytes, zero-filled once. A slot is a
// header (allocation state, pending-MMA queue; zero when idle, left zero by every normal exit), then
// the data, 32-bit word (lane, col) at data + (col * 128 + lane) * 4 (column-major: a warp's access
// to one column is one coalesced 128-byte line), then one state block per thread for the adversarial
// mode (tcgen05.st data waiting for wait::st, tcgen05.ld destinations waiting for wait::ld, fence state).
constexpr u64 kEmuTmemHeaderBytes = 4096;
constexpr u64 kEmuTmemDataBytes = (u64)kTmemLanes * kTmemColumns * 4;
constexpr u32 kEmuMaxThreads = 512;          // threads per CTA the emulation keeps state for
constexpr u64 kEmuThreadStateBytes = 1024;
constexpr u64 kEmuTmemSlotBytes = kEmuTmemHeaderBytes + kEmuTmemDataBytes + kEmuMaxThreads * kEmuThreadStateBytes;
constexpr u32 kEmuMmaQueueCapacity = 120;  // uncommitted MMAs per CTA (FA4 issues <= ~40 per commit)

}  // namespace fa4::sm100
