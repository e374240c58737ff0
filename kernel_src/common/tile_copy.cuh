// Copies between a staged tile in shared memory (the layout of TMA boxes, common/smem_layout.h) and where a
// TMA box cannot go: the sm90 and sm100 kernels' partial tile of a ragged sequence, the sm90 kernel's tile
// that starts before token 0 (row blocks counted from the bottom), and the rows of a K/V block past its
// sequence's keys.
#pragma once

#include "common/params.h"
#include "common/smem_layout.h"

namespace fa4k {

// Packed rows [first, end) of a staged O tile (kRows rows of kCols 16-bit elements, TMA boxes of swizzle kSw)
// to O, 16 bytes per lane and step over `lanes` lanes: packed row r is token first_token + r / kPack of batch
// `batch` and q head group * kPack + r % kPack (the head itself when kPack is 1; first_token + first / kPack
// is the first token written). Where a whole box would write outside the sequence: into a neighbour's rows,
// or (a dense tile counted from the bottom) at tokens below 0, where a TMA store faults.
template <int kRows, int kCols, int kPack, fa4::Swizzle kSw>
__device__ __forceinline__ void store_tile_rows(const char* tile, int first, int end, const TensorArgs& o, int batch,
                                                int first_token, int group, int lane, int lanes) {
  static_assert(kRows % kPack == 0, "a tile holds whole tokens");
  constexpr int kChunks = kCols / 8;  // 16-byte chunks per row
#pragma unroll 1  // the copying warps have few registers
  for (int i = first * kChunks + lane; i < end * kChunks; i += lanes) {
    const int r = i / kChunks, col = i % kChunks * 8;
    const int head = kPack > 1 ? group * kPack + r % kPack : group;
    const uint4 chunk = *reinterpret_cast<const uint4*>(tile + fa4::swizzle_address(fa4::tile_offset(kSw, kRows, r, col), kSw));
    *reinterpret_cast<uint4*>(static_cast<char*>(o.ptr) + 2 * (batch * o.batch_stride +
                                                               (static_cast<long long>(first_token) + r / kPack) * o.seq_stride +
                                                               head * o.head_stride + col)) = chunk;
  }
}

// Zeroes rows [first, kRows) of a K/V tile of kRows rows and kCols 16-bit columns in boxes of kSpan-byte
// rows (whole rows, so the swizzle does not matter), over `threads` threads from `thread` on. The tile is
// laid out in pieces of `piece` rows (kRows, or a power of two dividing it), each piece box by box
// (fa4k::load_kv_block with whole-row copies); piece = kRows: box by box, each box all the rows.
template <int kRows, int kCols, int kSpan>
__device__ __forceinline__ void zero_tile_rows(char* tile, int first, int thread, int threads, int piece = kRows) {
  constexpr int kChunks = kSpan / 16, kBoxes = kCols * 2 / kSpan;
  const int rows = kRows - first;
#pragma unroll 1
  for (int i = thread; i < rows * kBoxes * kChunks; i += threads) {
    const int chunk = i % kChunks, row = first + i / kChunks % rows, box = i / (kChunks * rows);
    *reinterpret_cast<uint4*>(tile + fa4::pieced_row_offset(kRows, kCols, kSpan, piece, row) + box * piece * kSpan + chunk * 16) =
        make_uint4(0, 0, 0, 0);
  }
}

}  // namespace fa4k
