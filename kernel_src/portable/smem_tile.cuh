// Shared-memory tiles of 16-bit rows (row-major, head dim contiguous) and their global -> shared loads.
//
// Swizzle: the 16-byte chunk c of row r is stored at chunk c ^ f(r), so the 8 rows an ldmatrix phase reads
// at the same logical chunk land in 8 different 16-byte bank groups (no bank conflicts):
//   rows of a multiple of 8 chunks (d = 64, 128, 192, 256): f(r) = r % 8 (3 swizzle bits);
//   rows of 4 or 12 chunks (d = 32, 96): chunk c of row r sits in bank group 4 * (r % 2) + c % 4, so
//   f(r) = (r / 2) % 4, XORed into the low two chunk bits, separates 8 consecutive rows (2 bits).
// Both permute chunks within a row, so tiles stay dense (no padding). Verified by brute force for
// 4..32 chunks: ldmatrix reads, cp.async writes and the O staging writes are all conflict-free.
//
// Addressing without live-register blowup: a thread computes offset(row0, chunk0) of its lane once;
// fragments at (row0 + R, chunk0 + C) then cost one XOR with a constant and an immediate (moved()).
// Offsets are relative to the tile; bank-conflict freedom needs tile bases aligned to 128 bytes (the
// buffer and stage sizes of the plan are multiples of 128 bytes; the dynamic smem array is __align__(128)).
#pragma once

#include "portable/ptx.cuh"

namespace fa4p {

template <int kRowChunks>
struct Swizzle {
  static_assert(kRowChunks % 4 == 0, "rows must be a multiple of 64 bytes");
  static constexpr int kBits = kRowChunks % 8 == 0 ? 3 : 2;
  static constexpr int kMask = (1 << kBits) - 1;
  static constexpr int kPitch = kRowChunks * 16;  // bytes per row

  static __device__ __forceinline__ int f(int row) { return kBits == 3 ? (row & 7) : ((row >> 1) & 3); }

  static __device__ __forceinline__ u32 offset(int row, int chunk) {
    return static_cast<u32>(row * kPitch + ((chunk ^ f(row)) << 4));
  }

  // offset(row0 + R, chunk0 + C) from lane_offset = offset(row0, chunk0), valid when both sums are
  // carry-free where the swizzle looks: R a multiple of 8 (or row0 < 2^a with R a multiple of 2^a), and
  // chunk0 < 2^b with C a multiple of 2^b (chunk0 + C < the row's chunks). R and C are compile-time
  // constants after unrolling, so this is one XOR and an immediate.
  static __device__ __forceinline__ u32 moved(u32 lane_offset, int R, int C) {
    return (lane_offset ^ static_cast<u32>((f(R) ^ (C & kMask)) << 4)) + static_cast<u32>(R * kPitch + ((C & ~kMask) << 4));
  }
};

// Copies rows [0, kRows) x elements [0, kCols) of a global tile into a swizzled shared tile with cp.async;
// row r is at row_src(r) (a strided tile, packed GQA rows, a paged cache). Rows >= rows_valid are
// zero-filled and not read, so no garbage (and no NaN) enters the MMAs. All kThreads threads call it; the
// caller commits the group.
//
// Thread layout: kLanes consecutive threads cover one row, kLanes = the largest power of two dividing
// the row's chunk count (4 for 12 chunks, 8 for 24, 32 for 32), each taking chunks c0, c0 + kLanes, ...;
// rows r0, r0 + kRowStep, ... with kRowStep = kThreads / kLanes a power of two.
template <int kRows, int kCols, int kThreads, class RowSrc>
__device__ __forceinline__ void load_rows(u32 dst, const RowSrc& row_src, int rows_valid, int tid) {
  using Swz = Swizzle<kCols / 8>;
  constexpr int kChunks = kCols / 8;
  constexpr int kLanes = (kChunks & -kChunks) < kThreads ? (kChunks & -kChunks) : kThreads;
  constexpr int kRowStep = kThreads / kLanes;
  static_assert((kRowStep & (kRowStep - 1)) == 0 && kRows % kRowStep == 0, "rows split evenly among the threads");
  static_assert(kLanes >= (1 << Swz::kBits) || kChunks == kLanes, "a thread's chunks share one swizzle group");
  const int r0 = tid / kLanes;
  const int c0 = tid % kLanes;
  const u32 lane_offset = Swz::offset(r0, c0);
  if (rows_valid >= kRows) {  // a full tile (every block but the sequence tail): no per-row guards
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i) {
      const u16* p = row_src(r0 + i * kRowStep) + c0 * 8;
#pragma unroll
      for (int j = 0; j < kChunks / kLanes; ++j)
        cp_async_16(dst + Swz::moved(lane_offset, i * kRowStep, j * kLanes), p + j * kLanes * 8, 16);
    }
    return;
  }
  const u16* row0 = row_src(0);  // row 0 of a tile always exists: a safe dummy source
#pragma unroll
  for (int i = 0; i < kRows / kRowStep; ++i) {
    const int r = r0 + i * kRowStep;
    const bool valid = r < rows_valid;
    const u16* p = valid ? row_src(r) + c0 * 8 : row0;
#pragma unroll
    for (int j = 0; j < kChunks / kLanes; ++j)
      cp_async_16(dst + Swz::moved(lane_offset, i * kRowStep, j * kLanes), valid ? p + j * kLanes * 8 : row0, valid ? 16 : 0);
  }
}

// A strided tile: row r at src + r * row_stride.
template <int kRows, int kCols, int kThreads>
__device__ __forceinline__ void load_tile(u32 dst, const u16* src, long long row_stride, int rows_valid, int tid) {
  load_rows<kRows, kCols, kThreads>(dst, [&](int r) { return src + r * row_stride; }, rows_valid, tid);
}

}  // namespace fa4p
