// Which K/V blocks a CTA visits and which of them need the mask. Host + device: the sm100 kernel
// schedules with it and the Plan report prints it, so the two cannot disagree.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA4_BLOCKS_HD __host__ __device__ __forceinline__
#else
#define FA4_BLOCKS_HD inline
#endif

namespace fa4k {

struct BlockRange {
  int n_blocks;      // K/V blocks visited, from block n_first down to n_first - n_blocks + 1
  int n_first;       // the highest visited block
  int n_masked;      // the first n_masked visited blocks contain a masked element for some row
  int n_masked_low;  // ... and so do the last n_masked_low (a window's left edge; 0 without a window)
};

// The first and last token of packed rows [first_row, first_row + rows) inside a sequence of seqlen_q tokens:
// rows before it (first_row < 0: tile_first_row counted from the bottom) and past it are left out.
struct TokenSpan {
  int first, last;
};
FA4_BLOCKS_HD TokenSpan row_tokens(int first_row, int rows, int pack, int seqlen_q) {
  TokenSpan t;
  t.first = first_row > 0 ? first_row / pack : 0;
  t.last = (first_row + rows - 1) / pack;
  if (t.last > seqlen_q - 1) t.last = seqlen_q - 1;
  return t;
}

// Rows [first_row, first_row + rows) of the packed row space (token * pack + head in pack) against K/V
// blocks of tile_n keys. Causal is bottom-right aligned: token r sees keys c <= r + seqlen_k - seqlen_q.
// Blocks above every row's diagonal are never visited; a CTA whose rows see no key still visits one
// (fully masked) block, so its O = 0 and LSE = -inf come out of the normal path.
FA4_BLOCKS_HD BlockRange kv_block_range(int first_row, int rows, int pack, int seqlen_q, int seqlen_k, int tile_n,
                                        bool causal) {
  const int total = (seqlen_k + tile_n - 1) / tile_n;
  const TokenSpan tokens = row_tokens(first_row, rows, pack, seqlen_q);
  const int first_token = tokens.first, last_token = tokens.last;
  const int shift = seqlen_k - seqlen_q;
  int end = total;
  if (causal) {
    const int visible = last_token + shift;  // the last token's highest visible key
    end = visible < 0 ? 0 : visible / tile_n + 1;
    if (end > total) end = total;
  }
  BlockRange r;
  r.n_blocks = end > 0 ? end : 1;
  r.n_first = r.n_blocks - 1;
  int first_masked = seqlen_k / tile_n;  // the partial tail block, if there is one
  if (causal) {
    const int full = first_token + shift + 1;  // keys every row of the CTA sees: [0, full)
    const int diagonal = full <= 0 ? 0 : full / tile_n;
    if (diagonal < first_masked) first_masked = diagonal;
  }
  r.n_masked = r.n_first - first_masked + 1;
  if (r.n_masked < 0) r.n_masked = 0;
  r.n_masked_low = 0;
  return r;
}

// The kv head of a dense tile's head group: a packed tile is exactly one kv head's q heads, an unpacked
// tile one q head.
FA4_BLOCKS_HD int dense_kv_head(int group, int pack, int q_heads_per_kv) {
  return pack > 1 ? group : group / q_heads_per_kv;
}

// The portable kernels' key ranges. Token t of a sequence sees keys [first, last] (diag = seqlen_k -
// seqlen_q, bottom-right aligned): right is 0 for causal, a window's right side, or -1 (unbounded); left a
// window's left side or -1. Clamped to [0, seqlen_k] and [-1, seqlen_k - 1]: empty when first > last.
FA4_BLOCKS_HD int visible_last_key(long long token, long long diag, int seqlen_k, int right) {
  long long last = seqlen_k - 1;
  if (right >= 0 && token + diag + right < last) last = token + diag + right;
  return last < -1 ? -1 : static_cast<int>(last);
}
FA4_BLOCKS_HD int visible_first_key(long long token, long long diag, int seqlen_k, int left) {
  if (left < 0) return 0;
  const long long first = token + diag - left;
  return first < 0 ? 0 : first > seqlen_k ? seqlen_k : static_cast<int>(first);
}

// The K/V blocks a portable CTA of packed rows [first_row, first_row + rows) visits, [n_begin, n_end), and the
// interior ones among them, [interior_begin, interior_end) (every row sees every key: no mask code); the
// others it visits are boundary blocks. Blocks outside [n_begin, n_end) hold no key any row sees.
struct WindowBlocks {
  int n_begin, n_end, interior_begin, interior_end;
};
FA4_BLOCKS_HD WindowBlocks window_block_range(int first_row, int rows, int pack, int seqlen_q, int seqlen_k, int tile_n,
                                              int left, int right) {
  const TokenSpan tokens = row_tokens(first_row, rows, pack, seqlen_q);
  const int first_token = tokens.first, last_token = tokens.last;
  const long long diag = static_cast<long long>(seqlen_k) - seqlen_q;
  WindowBlocks w;
  // Visited: from the first row's first key to the last row's last key.
  w.n_begin = visible_first_key(first_token, diag, seqlen_k, left) / tile_n;
  w.n_end = (visible_last_key(last_token, diag, seqlen_k, right) + tile_n) / tile_n;
  if (w.n_end < w.n_begin) w.n_end = w.n_begin;
  // Interior: from the last row's first key (rounded up) to the first row's last key (rounded down).
  const int lo = visible_first_key(last_token, diag, seqlen_k, left);
  const int hi = visible_last_key(first_token, diag, seqlen_k, right);  // < seqlen_k
  w.interior_begin = (lo + tile_n - 1) / tile_n;
  w.interior_end = (hi + 1) / tile_n;
  if (w.interior_begin < w.n_begin) w.interior_begin = w.n_begin;
  if (w.interior_end > w.n_end) w.interior_end = w.n_end;
  if (w.interior_end < w.interior_begin) w.interior_end = w.interior_begin;
  return w;
}

// The tile kernels' visit of a sliding window (causal: right side 0), from window_block_range: the
// visited blocks from the highest down, the top and the bottom ones that hold a key hidden from some row
// (masked), the interior between them. A row block that sees no key still visits one fully masked block,
// so its O = 0 and LSE = -inf come out of the normal path.
FA4_BLOCKS_HD BlockRange window_kv_block_range(int first_row, int rows, int pack, int seqlen_q, int seqlen_k, int tile_n,
                                               int left, int right) {
  const WindowBlocks w = window_block_range(first_row, rows, pack, seqlen_q, seqlen_k, tile_n, left, right);
  BlockRange r;
  if (w.n_end <= w.n_begin) {
    const int total = (seqlen_k + tile_n - 1) / tile_n;
    r.n_first = w.n_begin < total ? w.n_begin : (total > 0 ? total - 1 : 0);
    r.n_blocks = 1, r.n_masked = 1, r.n_masked_low = 0;
    return r;
  }
  r.n_first = w.n_end - 1;
  r.n_blocks = w.n_end - w.n_begin;
  r.n_masked = w.n_end - w.interior_end;
  r.n_masked_low = w.interior_begin - w.n_begin;
  return r;
}

// The first packed row of row block m_block of a sequence's m_blocks (tile kernels, `rows` packed rows a
// block). from_bottom: the blocks end at the sequence's last row instead of starting at its first, so that a
// partial block is the top one, whose rows see the fewest keys when later rows see more (causal; the Plan's
// rows_from_bottom with later_rows_longer); its rows before the sequence (first row < 0) are neither loaded
// (TMA fills zeros) nor stored. A multiple of pack either way.
FA4_BLOCKS_HD int tile_first_row(int m_block, int m_blocks, int rows, int pack, int seqlen_q, bool from_bottom) {
  return m_block * rows - (from_bottom ? m_blocks * rows - seqlen_q * pack : 0);
}

// The K/V blocks of the row block at packed row first_row of a tile kernel (sm90, sm100):
// window_kv_block_range's with a sliding window (causal: its right side 0), kv_block_range's otherwise.
FA4_BLOCKS_HD BlockRange tile_blocks(int first_row, int rows, int pack, int seqlen_q, int seqlen_k, int tile_n, bool causal,
                                     bool window, int left, int right) {
  return window ? window_kv_block_range(first_row, rows, pack, seqlen_q, seqlen_k, tile_n, left, causal ? 0 : right)
                : kv_block_range(first_row, rows, pack, seqlen_q, seqlen_k, tile_n, causal);
}

// Whether a row block sees at least as many keys as the ones before it: the right side is bounded (causal,
// or a window with window_right >= 0), so walking the row blocks backwards goes longest first.
FA4_BLOCKS_HD bool later_rows_longer(bool causal, bool window, int window_right) {
  return causal || (window && window_right >= 0);
}

// Where the tile kernels' (sm90, sm100) work item lies: tile -> (m block, head group, batch), m blocks
// fastest so neighbouring tiles share K/V in L2; `longest_first` (later_rows_longer) reverses them, so each
// head's longest tiles come first. With `section` > 0 (causal), tiles go by L2 sections of that many (batch,
// head group)s instead: within a section, longest first across all of its heads (a balanced tail), heads
// fastest (their K/V stay in L2 together); sections one after another (the last may be smaller; `batch`
// must then be the real batch). The tile's K/V blocks are tile_blocks' for its sequence's lengths.
struct TilePosition {
  int m_block, group, batch;
};
FA4_BLOCKS_HD TilePosition dense_tile(int tile, int num_m_blocks, int groups, bool longest_first, int section = 0,
                                      int batch = 1) {
  TilePosition t;
  if (longest_first && section > 0) {
    const int first = tile / (num_m_blocks * section) * section;  // the section's first (batch, group)
    const int remaining = batch * groups - first;
    const int heads = remaining < section ? remaining : section;   // the last section may be smaller
    const int in_section = tile - first * num_m_blocks;
    const int bh = first + in_section % heads;
    t.m_block = num_m_blocks - 1 - in_section / heads;
    t.group = bh % groups;
    t.batch = bh / groups;
  } else {
    t.m_block = tile % num_m_blocks;
    if (longest_first) t.m_block = num_m_blocks - 1 - t.m_block;
    t.group = (tile / num_m_blocks) % groups;
    t.batch = tile / (num_m_blocks * groups);
  }
  return t;
}

}  // namespace fa4k
