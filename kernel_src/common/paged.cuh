// K/V blocks of the TMA kernels (sm90, sm100) into their rings: dense or ragged in one piece; paged in
// pieces of paged_piece_rows(kTileN, page_size_log2) keys (common/params.h), each inside one page, one TMA
// copy per piece and column box, or per piece (load_kv_block's kColBoxes). Device code only.
#pragma once

#include "common/params.h"
#include "common/ptx.cuh"

namespace fa4k {

// Lane p's piece of the K/V block at key `key0` of sequence `sequence`: its page (-1 past the table's row
// of max_pages_per_seq entries, where the box lies outside the cache and loads zeros) and its slot in the
// page. Lanes past the block's pieces look up nothing.
struct PagedPiece {
  int page, slot;
};
template <int kTileN>
__device__ __forceinline__ PagedPiece paged_piece(const AttentionArgs& a, int sequence, int key0, int log2, int piece) {
  const int offset = static_cast<int>(threadIdx.x % 32) * piece;
  const bool used = offset < kTileN;
  const int key = key0 + (used ? offset : 0), index = key >> log2;
  PagedPiece p;
  p.page = used && index < a.max_pages_per_seq ? a.page_table[static_cast<long long>(sequence) * a.max_pages_per_seq + index]
                                               : -1;
  p.slot = key & ((1 << log2) - 1);
  return p;
}

// One K or V block of kTileN rows and `dim` columns into a ring slot, landing on `full`: `leader` arrives on it
// expecting the block's bytes, then the copies go out. Dense or ragged: `leader` issues one piece of every
// row at (row, batch). Paged: lane p issues piece p (pieces of `piece` rows) from its own `row` (slot) and
// `batch` (page), so a block's pieces go out in parallel: with pages of 16, one thread issuing every box
// fills an SM's ring at 0.77x of pages of 64 from HBM, a lane per piece at 0.99x (tools/tma_page_probe.cu).
// A piece is dim / kBoxCols TMA boxes of kBoxCols columns (kBoxCols * 2 bytes a row). kColBoxes = 1: one
// copy a box, and the slot is laid out box by box, each box all kTileN rows (what a wgmma or UMMA operand
// with kTileN rows along M/N needs). kColBoxes = dim / kBoxCols: one copy a piece (a 5-D map, the Plan's
// TmaBox::col_boxes) and the slot piece by piece, each piece its boxes one after another: fewer, larger
// copies, for an operand read in steps of at most a piece's rows along K (V in O += P V).
template <int kTileN, int kBoxCols, int kColBoxes, bool kPaged>
__device__ __forceinline__ void load_kv_block(char* dst, const fa4::TmaDescriptor* map, fa4::u64* full, int dim, int kv_head,
                                              int row, int batch, int piece, bool leader) {
  static_assert(kTileN <= 32 * 16, "a block of pages of 16 has at most one piece per lane");
  if (leader) fa4::mbarrier_arrive_expect_tx(full, kTileN * dim * 2);
  const int p = kPaged ? static_cast<int>(threadIdx.x % 32) : 0;
  if (kPaged ? p < kTileN / piece : leader) {
    if constexpr (kColBoxes > 1) {
      fa4::tma_load_5d(dst + p * piece * dim * 2, map, full, 0, row, 0, kv_head, batch);
    } else {
      for (int box = 0; box < dim / kBoxCols; ++box)
        fa4::tma_load_4d(dst + box * kTileN * kBoxCols * 2 + p * piece * kBoxCols * 2, map, full, box * kBoxCols, kv_head, row, batch);
    }
  }
}

}  // namespace fa4k
