// Which tile a CTA of a portable kernel computes, and where its sequence's rows live (dense, ragged or
// GQA-packed): shared by the prefill (flash_fwd.cuh) and decode (decode.cuh) kernels.
#pragma once

#include "common/block_range.h"
#include "common/params.h"
#include "portable/ptx.cuh"

namespace fa4p {

// Which tile a CTA computes, and its sequence: m fastest so neighbouring CTAs share K/V in L2; causal
// launches the longest rows (highest m_block) first. Per-sequence lengths and row offsets come from the
// device arrays when the call is ragged, else from the dense shape.
// Split-KV: every (m block, CTA of parts) is a tile (a sequence with fewer parts than the grid's skips the
// rest; SplitRule::parts_per_cta consecutive parts a CTA).
struct Tile {
  int m_block, group, batch, split, row0;  // row0: the tile's first packed row
  int seqlen_q, seqlen_k;                  // this sequence's
  long long row_base;                      // global row of token 0: the LSE and the split partials
};
__device__ __forceinline__ Tile tile_of(const fa4k::AttentionArgs& a, int index) {
  const int num_m = a.num_m_blocks;
  const int groups = a.heads_q / fa4cfg::kGqaPack;
  // (parts_per_cta > 1 only reaches kernels whose Plan lets a CTA run several parts: Plan::fold_split_blocks)
  const int splits = !fa4cfg::kSplit          ? 1
                     : fa4cfg::kFoldBlocks > 0 ? fa4k::split_ctas(a.split, a.max_splits)
                                                : a.max_splits;
  Tile t;
  int m;
  if (fa4cfg::kDecode) {  // m, then the head group, then the part: neighbouring CTAs read the same keys of
                          // neighbouring heads (one stretch of memory in a [.., seq, head, dim] cache)
    m = index % num_m;
    t.group = index / num_m % groups;
    t.split = index / (num_m * groups) % splits;
    t.batch = index / (num_m * groups * splits);
  } else {  // m, then the part, then the head group: a head's m blocks share its K/V in L2
    const int per_head = num_m * splits;
    const int i = index % per_head;
    t.group = index / per_head % groups;
    t.batch = index / per_head / groups;
    t.split = i / num_m;
    m = i % num_m;
  }
  t.m_block = fa4cfg::kCausal ? num_m - 1 - m : m;
  t.row0 = t.m_block * fa4cfg::kTileM;
  const fa4k::SequenceSpan span = fa4k::sequence_span(a, t.batch);
  t.seqlen_q = span.seqlen_q;
  t.seqlen_k = span.seqlen_k;
  t.row_base = a.cu_seqlens_q ? span.q_row0 : static_cast<long long>(t.batch) * a.seqlen_q;
  return t;
}

// Token 0, head 0 of the sequence in a [batch, seq, head, dim] tensor, or in a packed ragged one.
__device__ __forceinline__ const u16* sequence_base(const fa4k::TensorArgs& t, const int* cu_seqlens, int batch) {
  const u16* p = static_cast<const u16*>(t.ptr);
  return cu_seqlens ? p + static_cast<long long>(cu_seqlens[batch]) * t.seq_stride : p + batch * t.batch_stride;
}

// Packed row r of head group g: its token and q head.
__device__ __forceinline__ int row_token(int r) { return r / fa4cfg::kGqaPack; }
__device__ __forceinline__ int row_head(int group, int r) { return group * fa4cfg::kGqaPack + r % fa4cfg::kGqaPack; }

// Where the LSE of token `token`, q head `head`, of a tile's sequence goes: [batch, heads_q, seqlen_q], or
// [heads_q, total_q] when ragged.
__device__ __forceinline__ long long lse_index(const fa4k::AttentionArgs& a, const Tile& tile, int head, int token) {
  return fa4k::lse_offset(a, tile.batch, head, tile.row_base, token);
}

// Key row 0 of a tile's kv head in K or V: its sequence's rows (dense or ragged), or, paged, page 0 of the
// cache (a key's page then comes from the page table).
__device__ __forceinline__ const u16* kv_base(const fa4k::AttentionArgs& a, const fa4k::TensorArgs& t, const Tile& tile) {
  const int kv_head = fa4cfg::kGqaPack > 1 ? tile.group : tile.group / a.q_heads_per_kv;
  const u16* base = fa4cfg::kPaged ? static_cast<const u16*>(t.ptr) : sequence_base(t, a.cu_seqlens_k, tile.batch);
  return base + kv_head * t.head_stride;
}

// The keys token t of a sequence sees are [first_key, last_key] (block_range.h; diag = seqlen_k - seqlen_q):
// all of them, or a causal or windowed range (AttentionArgs::window_*, where causal is window_right 0).
__device__ __forceinline__ int last_key(const fa4k::AttentionArgs& a, int token, int diag, int seqlen_k) {
  return fa4k::visible_last_key(token, diag, seqlen_k, fa4cfg::kWindow ? a.window_right : fa4cfg::kCausal ? 0 : -1);
}
__device__ __forceinline__ int first_key(const fa4k::AttentionArgs& a, int token, int diag, int seqlen_k) {
  return fa4k::visible_first_key(token, diag, seqlen_k, fa4cfg::kWindow ? a.window_left : -1);
}

}  // namespace fa4p
