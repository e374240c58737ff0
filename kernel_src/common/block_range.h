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
  int n_blocks;  // K/V blocks visited, from block n_first down to n_first - n_blocks + 1
  int n_first;   // the highest visited block
  int n_masked;  // the first n_masked visited blocks contain a masked element for some row
};

// Rows [first_row, first_row + rows) of the packed row space (token * pack + head in pack) against K/V
// blocks of tile_n keys. Causal is bottom-right aligned: token r sees keys c <= r + seqlen_k - seqlen_q.
// Blocks above every row's diagonal are never visited; a CTA whose rows see no key still visits one
// (fully masked) block, so its O = 0 and LSE = -inf come out of the normal path.
FA4_BLOCKS_HD BlockRange kv_block_range(int first_row, int rows, int pack, int seqlen_q, int seqlen_k, int tile_n,
                                        bool causal) {
  const int total = (seqlen_k + tile_n - 1) / tile_n;
  const int first_token = first_row / pack;
  int last_token = (first_row + rows - 1) / pack;
  if (last_token > seqlen_q - 1) last_token = seqlen_q - 1;
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
  return r;
}

}  // namespace fa4k
