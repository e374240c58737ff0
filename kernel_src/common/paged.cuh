// Paged K/V for the TMA kernels (sm90, sm100): a block of kTileN keys loads in pieces of
// paged_piece_rows(kTileN, page_size_log2) keys (common/params.h), each inside one page, one TMA box per
// piece and column box. Device code only.
#pragma once

#include "common/params.h"

namespace fa4k {

// Lane p's piece of the K/V block at key `key0` of sequence `sequence`: its page (-1 past the table's row
// of max_pages_per_seq entries, where the box lies outside the cache and loads zeros) and its slot in the page. Lanes past the block's
// pieces look up nothing. Warp-collective callers shuffle each piece's values to the lane that issues.
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

}  // namespace fa4k
