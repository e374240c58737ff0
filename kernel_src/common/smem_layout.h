// Shared-memory operand layouts of the tensor-core MMAs, host + device: the 128B/64B/32B swizzles that TMA
// writes and the MMAs read, the canonical K-major and MN-major layouts an operand descriptor describes
// (identical for Hopper's wgmma and Blackwell's tcgen05.mma), tiles as TMA boxes lay them out, and the
// descriptor fields of one K = 16 step. Hopper's wgmma descriptor is here; Blackwell's (which adds a version
// field and a 3-bit layout type) is in sm100/descriptors.h. No system headers: g++ and NVRTC both compile it.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA4_LAYOUT_HD __host__ __device__ __forceinline__
#else
#define FA4_LAYOUT_HD inline
#endif

#include "common/types.h"

namespace fa4 {

// ---------------------------------------------------------------------------------------------
// Operand majorness and swizzle modes.

enum class Major : u32 { K = 0, MN = 1 };  // which dimension of an operand is contiguous

// The values are tcgen05's smem-descriptor layout types (bits 63:61); make_wgmma_desc maps them to wgmma's.
// 1 (128B with 32-byte atoms) exists on Blackwell but is not used by fa4 and not emulated.
enum class Swizzle : u32 { none = 0, b128_base32 = 1, b128 = 2, b64 = 4, b32 = 6 };

// Bytes spanned by one swizzled row (0 for none) and log2 of the 16-byte chunks it XORs.
FA4_LAYOUT_HD constexpr u32 swizzle_span(Swizzle s) {
  return s == Swizzle::b128 ? 128u : s == Swizzle::b64 ? 64u : s == Swizzle::b32 ? 32u : 0u;
}
FA4_LAYOUT_HD constexpr u32 swizzle_bits(Swizzle s) {
  return s == Swizzle::b128 ? 3u : s == Swizzle::b64 ? 2u : s == Swizzle::b32 ? 1u : 0u;
}
FA4_LAYOUT_HD constexpr Swizzle swizzle_from_bytes(u32 bytes) {
  return bytes == 128 ? Swizzle::b128 : bytes == 64 ? Swizzle::b64 : bytes == 32 ? Swizzle::b32 : Swizzle::none;
}

// ---------------------------------------------------------------------------------------------
// Swizzle (docs/blackwell-facts.md, swizzle): address bits [4, 4+b) ^= bits [7, 7+b), b = 3/2/1 for
// 128B/64B/32B. Applied to the absolute shared-memory byte address, exactly as TMA writes and as
// the MMA reads; an involution. The pattern repeats every 8 rows of `span` bytes (1024/512/256 B).
FA4_LAYOUT_HD constexpr u32 swizzle_address(u32 addr, Swizzle s) {
  return addr ^ (((addr >> 7) & ((1u << swizzle_bits(s)) - 1u)) << 4);
}

// Byte offset inside one TMA box of `row_bytes`-byte rows (the box starts on a swizzle repeat
// boundary) where TMA stores byte `byte_in_row` of row `row`.
FA4_LAYOUT_HD constexpr u32 tma_box_offset(u32 row, u32 byte_in_row, u32 row_bytes, Swizzle s) {
  return swizzle_address(row * row_bytes + byte_in_row, s);
}

// ---------------------------------------------------------------------------------------------
// Canonical operand layouts (PTX ISA "Shared Memory Matrix Layout", identical for wgmma and tcgen05).
// Byte offset, before the swizzle, of element (mn, k) of one MMA operand (M x K for A, N x K for B)
// from the descriptor's start address; 16-bit elements, T = 8 elements = 16 bytes, c = span / 16:
//   K-major,  none    : ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
//   K-major,  swizzled: ((8,m),(T,2k)) : ((cT,SBO),(1,T))      (LBO unused)
//   MN-major, none    : ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
//   MN-major, swizzled: ((T,c,m),(8,k)) : ((1,T,LBO),(cT,SBO))
FA4_LAYOUT_HD constexpr u32 canonical_offset(Major major, Swizzle s, u32 lbo, u32 sbo, u32 mn, u32 k) {
  const u32 span = swizzle_span(s);
  if (major == Major::K) {
    if (span == 0) return (mn % 8) * 16 + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo;
    return (mn % 8) * span + (mn / 8) * sbo + k * 2;  // k < span/2: one MMA's K fits in a row
  }
  if (span == 0) return (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo;
  const u32 width = span / 2;  // elements per swizzled row
  return (mn % width) * 2 + (mn / width) * lbo + (k % 8) * span + (k / 8) * sbo;
}

// ---------------------------------------------------------------------------------------------
// Tiles as TMA loads them: a `rows` x `cols` tile of 16-bit elements whose contiguous dimension
// (cols) is cut into boxes of span/2 elements; box j sits at byte j * rows * span. For a K-major
// operand rows = M (or N) and cols = K; for an MN-major operand rows = K and cols = M (or N).
// (rows must be a multiple of 8 so that every box starts on a swizzle repeat boundary.)
FA4_LAYOUT_HD constexpr u32 tile_offset(Swizzle s, u32 rows, u32 row, u32 col) {
  const u32 span = swizzle_span(s);
  return (col / (span / 2)) * rows * span + row * span + (col % (span / 2)) * 2;
}

// The XOR that row `row` of such a tile applies to the 16-byte chunk bits of its bytes:
// swizzle_address(tile_offset(s, rows, row, col), s) == (tile_offset(s, rows, row, c) ^ swizzle_row_xor(s, row))
// + (col - c) * 2 for c = col rounded down to 8 (rows a multiple of 8, the tile on a swizzle repeat). A loop
// over a row's chunks computes the XOR once instead of swizzling every address.
FA4_LAYOUT_HD constexpr u32 swizzle_row_xor(Swizzle s, u32 row) {
  return ((row * swizzle_span(s) >> 7) & ((1u << swizzle_bits(s)) - 1u)) << 4;
}

// Descriptor fields for one K=16 MMA step of such a tile (start relative to the tile base).
struct OperandStep {
  u32 start;  // bytes from the tile base
  u32 lbo;    // bytes
  u32 sbo;    // bytes
};
// K-major (rows = MN extent): SBO = 8 rows; K advances inside the 128-byte row (+32 B per step)
// and then to the next box. LBO is unused by swizzled K-major layouts; 16 B by convention.
FA4_LAYOUT_HD constexpr OperandStep kmajor_step(Swizzle s, u32 rows, u32 k0) {
  return {tile_offset(s, rows, 0, k0), 16u, 8u * swizzle_span(s)};
}
// MN-major (rows = K extent): SBO = the next 8 K rows; LBO = the next box of span/2 MN elements.
FA4_LAYOUT_HD constexpr OperandStep mnmajor_step(Swizzle s, u32 k_rows, u32 k0) {
  return {tile_offset(s, k_rows, k0, 0), k_rows * swizzle_span(s), 8u * swizzle_span(s)};
}

// A tile of `rows` rows and `cols` 16-bit columns laid out in pieces of `piece` rows (a power of two dividing
// rows, or rows itself), each piece its boxes of `span`-byte rows one after another (a copy of whole rows,
// fa4k::load_kv_block): where row `row` of the first box lies; the piece's next box is piece * span on.
// piece = rows is the box-by-box tile.
// (T: u32 for descriptors, int where the kernels index shared memory.)
template <class T>
FA4_LAYOUT_HD constexpr T pieced_row_offset(T rows, T cols, T span, T piece, T row) {
  const T in_piece = piece == rows ? row : row & (piece - 1);
  return (row - in_piece) * cols * 2 + in_piece * span;
}

// mnmajor_step for such a tile: a K=16 step lies inside one piece, whose boxes are piece * span apart.
// piece = rows gives mnmajor_step.
FA4_LAYOUT_HD constexpr OperandStep pieced_mnmajor_step(Swizzle s, u32 rows, u32 cols, u32 piece, u32 k0) {
  return {pieced_row_offset(rows, cols, swizzle_span(s), piece, k0), piece * swizzle_span(s), 8u * swizzle_span(s)};
}

// Descriptor address fields: bytes >> 4 in 14 bits (shared memory addresses are below 256 KiB).
FA4_LAYOUT_HD constexpr u64 desc_encode(u32 bytes) { return (u64)((bytes & 0x3FFFFu) >> 4); }

// The descriptor (wgmma's or tcgen05's) of the operand `bytes` past the one `desc` describes, both 16-byte
// aligned: the start address field is the low 14 bits, and shared-memory addresses stay below 256 KiB, so
// nothing carries out of it. One add per MMA where building each descriptor costs a mask and shifts.
FA4_LAYOUT_HD constexpr u64 desc_advance(u64 desc, u32 bytes) { return desc + (bytes >> 4); }

// Hopper wgmma descriptor over the same canonical layout: no version field, and a 2-bit layout type
// at 63:62 (0 none, 1 128B, 2 64B, 3 32B). The sm90 kernel's
// operands, and the probe that ties the tcgen05 emulator to silicon.
FA4_LAYOUT_HD constexpr u64 make_wgmma_desc(u32 smem_addr, u32 lbo_bytes, u32 sbo_bytes, Swizzle s) {
  const u64 layout = s == Swizzle::b128 ? 1u : s == Swizzle::b64 ? 2u : s == Swizzle::b32 ? 3u : 0u;
  return desc_encode(smem_addr) | (desc_encode(lbo_bytes) << 16) | (desc_encode(sbo_bytes) << 32) | (layout << 62);
}

}  // namespace fa4
