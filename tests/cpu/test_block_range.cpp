// kv_block_range against brute force over every (row, key) pair: visited blocks are exactly those some
// valid row can see (or block 0 alone when none can), and the masked class is exactly the visited blocks
// holding an element hidden from some valid row. dense_tile's tile orders are permutations.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

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
    const bool from_bottom = rng() % 2;
    const int first_row = fa4k::tile_first_row(static_cast<int>(rng() % m_blocks), m_blocks, rows, pack, sq, from_bottom);
    const fa4k::BlockRange r = fa4k::kv_block_range(first_row, rows, pack, sq, sk, tile_n, causal);
    const int total = (sk + tile_n - 1) / tile_n;
    std::vector<bool> any_visible(total, false), any_hidden(total, false);
    for (int row = std::max(first_row, 0); row < first_row + rows; ++row) {
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

// Row blocks counted from the bottom cover a sequence's packed rows once, start at a whole token, and under a
// causal mask visit no more K/V blocks in all than blocks counted from the top (d64's 192-row tiles: fewer).
TEST(BlockRange, RowsFromTheBottomCostNoMoreUnderCausal) {
  for (int pack : {1, 2, 8})
    for (int sq : {1, 100, 512, 1000, 1024, 2048, 4097})
      for (int sk : {sq, sq + 300}) {
        const int rows = 192, tile_n = 128, m_blocks = (sq * pack + rows - 1) / rows;
        long long top = 0, bottom = 0;
        for (int m = 0; m < m_blocks; ++m) {
          const int first = fa4k::tile_first_row(m, m_blocks, rows, pack, sq, true);
          ASSERT_EQ(first % pack, 0);
          ASSERT_EQ(first, m == 0 ? sq * pack - m_blocks * rows : fa4k::tile_first_row(m - 1, m_blocks, rows, pack, sq, true) + rows);
          ASSERT_GT(first + rows, 0);
          top += fa4k::tile_blocks(m * rows, rows, pack, sq, sk, tile_n, true, false, -1, 0).n_blocks;
          bottom += fa4k::tile_blocks(first, rows, pack, sq, sk, tile_n, true, false, -1, 0).n_blocks;
        }
        ASSERT_EQ(fa4k::tile_first_row(m_blocks - 1, m_blocks, rows, pack, sq, true) + rows, sq * pack);
        EXPECT_LE(bottom, top) << "pack " << pack << " sq " << sq << " sk " << sk;
        if (pack == 1 && sq == 512 && sk == 512) EXPECT_EQ(top - bottom, 1);
      }
}

// window_block_range (the portable kernels' ranges, and the Plan report's classes) against brute force:
// every block holding a key some valid row sees is visited; every interior block has no key hidden from a
// valid row; the visited ones outside the interior hold a hidden key (the mask is needed there). Windows
// narrower and wider than a block, causal, sq != sk, rows that see no key.
TEST(BlockRange, WindowsMatchBruteForce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const int tile_n = 16 << (rng() % 3);
    const int pack = 1 + rng() % 8;
    const int sq = 1 + rng() % 300, sk = rng() % 400;
    const bool causal = rng() % 2;
    const int left = rng() % 3 == 0 ? -1 : static_cast<int>(rng() % 200);
    const int right = causal ? 0 : rng() % 3 == 0 ? -1 : static_cast<int>(rng() % 50);
    const int rows = 16 << (rng() % 3);
    const int m_blocks = (sq * pack + rows - 1) / rows;
    const int first_row = fa4k::tile_first_row(static_cast<int>(rng() % m_blocks), m_blocks, rows, pack, sq, rng() % 2);
    const fa4k::WindowBlocks w = fa4k::window_block_range(first_row, rows, pack, sq, sk, tile_n, left, right);
    SCOPED_TRACE(::testing::Message() << "tile_n " << tile_n << " pack " << pack << " sq " << sq << " sk " << sk
                                      << " window (" << left << ", " << right << ") rows " << first_row << "+" << rows);
    const int total = (sk + tile_n - 1) / tile_n;
    ASSERT_LE(0, w.n_begin);
    ASSERT_LE(w.n_begin, w.n_end);
    ASSERT_LE(w.n_end, total);
    ASSERT_LE(w.n_begin, w.interior_begin);
    ASSERT_LE(w.interior_begin, w.interior_end);
    ASSERT_LE(w.interior_end, w.n_end);
    for (int n = 0; n < total; ++n) {
      bool any_visible = false, any_hidden = false;
      for (int row = std::max(first_row, 0); row < first_row + rows; ++row) {
        const int token = row / pack;
        if (token >= sq) continue;
        const int diagonal = token + sk - sq;
        for (int c = n * tile_n; c < (n + 1) * tile_n; ++c) {
          const bool visible = c < sk && (right < 0 || c <= diagonal + right) && (left < 0 || c >= diagonal - left);
          (visible ? any_visible : any_hidden) = true;
        }
      }
      const bool visited = n >= w.n_begin && n < w.n_end, interior = n >= w.interior_begin && n < w.interior_end;
      if (any_visible) EXPECT_TRUE(visited) << "block " << n << " holds a visible key but is skipped";
      if (interior) EXPECT_FALSE(any_hidden) << "block " << n << " is interior but hides a key";
      if (visited && !interior) EXPECT_TRUE(any_hidden || !any_visible) << "block " << n << " is masked needlessly";
    }
    // The tile kernels' visit order over the same classes: the highest block first, the top and bottom
    // boundary blocks masked; one fully masked block when no row sees a key.
    const fa4k::BlockRange r = fa4k::window_kv_block_range(first_row, rows, pack, sq, sk, tile_n, left, right);
    if (w.n_end > w.n_begin) {
      EXPECT_EQ(r.n_first, w.n_end - 1);
      EXPECT_EQ(r.n_blocks, w.n_end - w.n_begin);
      EXPECT_EQ(r.n_masked, w.n_end - w.interior_end);
      EXPECT_EQ(r.n_masked_low, w.interior_begin - w.n_begin);
    } else {
      EXPECT_EQ(r.n_blocks, 1);
      EXPECT_EQ(r.n_masked, 1);
      EXPECT_GE(r.n_first, 0);
      EXPECT_LT(r.n_first, std::max(total, 1));
    }
  }
}

}  // namespace

namespace fa4 {
namespace {

// The tile kernels walk row blocks backwards exactly when later_rows_longer says later ones are not shorter:
// with a bounded right side (causal: 0) no row block has fewer K/V blocks than an earlier one, save the one
// block a window's alignment may cost; unbounded on the right, none has more (save that one), so the forward
// order is the longest first there.
TEST(DenseTile, LongestFirstFollowsTheWindowsRightSide) {
  for (int sq : {1, 300, 1000})
    for (int sk : {sq, sq + 333})
      for (int left : {-1, 0, 100, 511})
        for (int right : {-1, 0}) {
          if (left < 0 && right < 0) continue;  // no window
          const bool backwards = fa4k::later_rows_longer(false, true, right);
          EXPECT_EQ(backwards, right >= 0);
          int most = 0, fewest = 1 << 30;
          for (int m = 0; m * 128 < sq; ++m) {
            const int n = fa4k::tile_blocks(m * 128, 128, 1, sq, sk, 128, false, true, left, right).n_blocks;
            if (backwards) EXPECT_GE(n, most - 1) << "sq " << sq << " sk " << sk << " left " << left << " m " << m;
            else EXPECT_LE(n, fewest + 1) << "sq " << sq << " sk " << sk << " left " << left << " m " << m;
            most = std::max(most, n), fewest = std::min(fewest, n);
          }
        }
  EXPECT_TRUE(fa4k::later_rows_longer(true, false, -1));
  EXPECT_FALSE(fa4k::later_rows_longer(false, false, 0));
}

// Every tile order visits each (m block, head group, batch) exactly once. The L2-sectioned causal order
// keeps a section's heads together (tiles of one section are contiguous) and, within a section, never
// visits a shorter m block before a longer one; without sections each head's tiles stay in turn.
TEST(DenseTile, EveryOrderIsAPermutationAndSectionsGoLongestFirst) {
  for (int num_m : {1, 3, 8})
    for (int groups : {1, 2, 5})
      for (int batch : {1, 3})
        for (int section : {0, 1, 2, 4, 7, 64}) {
          const int heads = groups * batch, tiles = num_m * heads;
          std::vector<int> seen(tiles, 0);
          int section_of_prev = -1, prev_m = 1 << 30;
          for (int tile = 0; tile < tiles; ++tile) {
            const fa4k::TilePosition t = fa4k::dense_tile(tile, num_m, groups, true, section, batch);
            ASSERT_GE(t.m_block, 0);
            ASSERT_LT(t.m_block, num_m);
            ASSERT_GE(t.group, 0);
            ASSERT_LT(t.group, groups);
            ASSERT_GE(t.batch, 0);
            ASSERT_LT(t.batch, batch);
            ++seen[(t.batch * groups + t.group) * num_m + t.m_block];
            const int bh = t.batch * groups + t.group;
            if (section > 0) {
              const int sec = bh / section;
              EXPECT_GE(sec, section_of_prev) << "sections run one after another";
              if (sec == section_of_prev) EXPECT_LE(t.m_block, prev_m) << "longest first within a section";
              section_of_prev = sec;
              prev_m = t.m_block;
            } else {
              EXPECT_EQ(t.m_block, num_m - 1 - tile % num_m) << "each head's tiles in turn, longest first";
            }
          }
          for (int i = 0; i < tiles; ++i)
            EXPECT_EQ(seen[i], 1) << "num_m " << num_m << " groups " << groups << " batch " << batch << " section "
                                  << section << " item " << i;
        }
}

}  // namespace
}  // namespace fa4
