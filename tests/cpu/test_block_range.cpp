// kv_block_range against brute force over every (row, key) pair: visited blocks are exactly those some
// valid row can see (or block 0 alone when none can), and the masked class is exactly the visited blocks
// holding an element hidden from some valid row.
#include <gtest/gtest.h>

#include <random>

#include "kernel_src/common/block_range.h"

namespace {

TEST(BlockRange, MatchesBruteForce) {
  std::mt19937 rng(7);
  const int tile_n = 128;
  for (int trial = 0; trial < 3000; ++trial) {
    const int pack = 1 << (rng() % 4);
    const int sq = 1 + rng() % 700, sk = 1 + rng() % 700;
    const bool causal = rng() % 2;
    const int rows = 256;
    const int m_blocks = (sq * pack + rows - 1) / rows;
    const int first_row = static_cast<int>(rng() % m_blocks) * rows;
    const fa4k::BlockRange r = fa4k::kv_block_range(first_row, rows, pack, sq, sk, tile_n, causal);
    const int total = (sk + tile_n - 1) / tile_n;
    std::vector<bool> any_visible(total, false), any_hidden(total, false);
    for (int row = first_row; row < first_row + rows; ++row) {
      const int token = row / pack;
      if (token >= sq) continue;
      for (int c = 0; c < total * tile_n; ++c) {
        const bool visible = c < sk && (!causal || c <= token + sk - sq);
        (visible ? any_visible : any_hidden)[c / tile_n] = true;
      }
    }
    int expected_end = 0;
    for (int n = 0; n < total; ++n)
      if (any_visible[n]) expected_end = n + 1;
    SCOPED_TRACE(::testing::Message() << "sq " << sq << " sk " << sk << " pack " << pack << " causal " << causal
                                      << " first_row " << first_row);
    ASSERT_EQ(r.n_blocks, std::max(expected_end, 1));
    ASSERT_EQ(r.n_first, r.n_blocks - 1);
    for (int j = 0; j < r.n_blocks; ++j) {
      const int n = r.n_first - j;
      ASSERT_EQ(j < r.n_masked, static_cast<bool>(any_hidden[n])) << "block " << n;
      if (expected_end) ASSERT_TRUE(any_visible[n]) << "visited block " << n << " is fully hidden";
    }
  }
}

}  // namespace
