// The argument block every attention kernel receives by value. Shared verbatim by the host (runtime)
// and the device code, so the layout is defined once. Plain types only: NVRTC sees no system headers.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FA4_PARAMS_HD __host__ __device__ __forceinline__
#else
#define FA4_PARAMS_HD inline
#endif

namespace fa4k {

struct TensorArgs {
  void* ptr;                 // device pointer to element [0, 0, 0, 0]
  long long batch_stride;    // elements
  long long seq_stride;      // elements
  long long head_stride;     // elements; the head dimension itself is contiguous
};

constexpr int kMaxSplitParts = 256;  // split-KV parts of one sequence, at most

// How a split-KV launch cuts a sequence's keys into parts (split_parts): the attention kernels, the combine
// kernel and the host's workspace sizing all read this one rule.
struct SplitRule {
  int num_splits;            // > 0: every sequence in exactly this many parts
  int split_blocks;          // num_splits 0: a decode sequence has one part per this many KV blocks (equal
                             // shares of its blocks, so a part has about this many), or one per
  int short_blocks;          // short_blocks while that gives at most short_parts (0: no such rule) ...
  int short_parts;
  int max_parts;             // ... but at most this many parts (longer ones when it has more blocks)
  int tile_n;                // the decode kernel's keys per KV block
  // Where the parts go: o_partial / lse_partial hold partial_rows rows per part. With num_splits 0 (only
  // decode sequences, of at most seq_rows tokens, are cut) token t of sequence i is row i * seq_rows + t, so
  // a mixed batch's workspace holds only its decode rows; with seq_rows 0, the token's row of q.
  int seq_rows;
  int partial_rows;
  // A split kernel's CTA runs this many consecutive parts of its sequence (the grid's split dimension is
  // ceil(max_splits / parts_per_cta)). One that runs all of a sequence's parts folds them itself, with the
  // combine kernel's arithmetic (portable/merge.cuh, below), so the bits do not depend on the choice; the
  // combine merges only sequences with more parts than this.
  int parts_per_cta;
  int merge_shares;  // the interleaved shares a row's normalised states are summed in (a warp each in the combine)
  // A cut decode sequence of at most fold_blocks KV blocks (0: none) is the fold of its warps' raw part states
  // (portable/merge.cuh): each part writes decode_states of them (one per decode warp), and the CTA that
  // runs all of its sequence's parts folds them in registers instead. A CTA never runs more than fold_blocks
  // blocks of parts, so one that runs all of a sequence's parts folds them.
  int fold_blocks;
  int decode_states;
};

// The most parts a folded sequence has: the combine stages a row's raw states in shared memory (the portable
// decode Plan asserts the bound).
constexpr int kMaxFoldParts = 16;

// The combine's dynamic shared memory of `slots` staged states a warp (CombineArgs::staged_states, 0 or
// kMaxFoldParts): a folded row's parts of one decode warp, or a round of a normalised row's states.
FA4_PARAMS_HD int combine_staging_bytes(int warps, int dv, int slots) { return warps * slots * dv * 4; }

// A decode sequence of `blocks` KV blocks in `parts` parts whose result is its warps' raw part states folded.
FA4_PARAMS_HD bool folded(const SplitRule& r, int blocks, int parts) {
  return r.fold_blocks > 0 && parts > 1 && blocks <= r.fold_blocks;  // (explicit parts cut even empty sequences)
}

// The grid's split dimension: the CTAs of one (m block, head group, sequence).
FA4_PARAMS_HD int split_ctas(const SplitRule& r, int max_splits) {
  return r.parts_per_cta > 1 ? (max_splits + r.parts_per_cta - 1) / r.parts_per_cta : max_splits;
}

// The workspace row of token `token` of sequence `sequence`, whose row in q is q_row (see SplitRule).
FA4_PARAMS_HD long long partial_row(const SplitRule& r, int sequence, long long token, long long q_row) {
  return r.seq_rows ? static_cast<long long>(sequence) * r.seq_rows + token : q_row;
}

// The parts of one sequence whose keys fill `blocks` KV blocks. It depends only on that sequence's own lengths (and on constants of the kernel
// and the device), never on the rest of the batch, so a sequence's result is batch-invariant. With
// num_splits 0 only decode sequences (few query rows: AttentionArgs::decode_seqlen_q) are cut.
FA4_PARAMS_HD int split_parts(const SplitRule& r, bool decode_sequence, int blocks) {
  if (r.num_splits > 0) return r.num_splits;
  if (!decode_sequence) return 1;
  int parts = (blocks + r.split_blocks - 1) / r.split_blocks;
  if (r.short_blocks > 0) {
    const int short_ones = (blocks + r.short_blocks - 1) / r.short_blocks;
    const int most_short = short_ones < r.short_parts ? short_ones : r.short_parts;
    parts = parts > most_short ? parts : most_short;
  }
  return parts < 1 ? 1 : parts < r.max_parts ? parts : r.max_parts;
}

// Part p of a span of `count` KV blocks cut into `parts` starts at block count * p / parts; with count = q *
// parts + rem that is q * p + rem * p / parts (rem * p < 256^2 fits an int). A CTA that runs consecutive
// parts walks them: one division for its first part, then an add and a carry per part (the divisions cost
// the decode kernel ~150 instructions a part).
struct PartWalk {
  int begin, end;  // the part's blocks [begin, end), from the span's first
  int q, rem, parts, frac;  // frac = rem * part % parts

  FA4_PARAMS_HD static PartWalk at(int first, int count, int parts, int part) {
    PartWalk w;
    w.q = count / parts, w.rem = count % parts, w.parts = parts;
    w.begin = first + w.q * part + w.rem * part / parts;
    w.frac = w.rem * part % parts;
    w.end = w.begin + w.q + (w.frac + w.rem >= parts);
    return w;
  }
  FA4_PARAMS_HD void next() {
    frac += rem;
    if (frac >= parts) frac -= parts;
    begin = end;
    end = begin + q + (frac + rem >= parts);
  }
};
static_assert(static_cast<long long>(kMaxSplitParts) * kMaxSplitParts <= 0x7fffffff, "PartWalk: rem * part fits an int");

// The KV blocks (of tile_n keys) holding the keys any query of a sequence sees, [first, first + count):
// all of them, or a sliding window's span (window_right 0 for causal; -1: unbounded). Split-KV cuts this
// span, so a window's parts hold only keys it reads.
struct KeyBlocks {
  int first, count;
};
FA4_PARAMS_HD KeyBlocks key_blocks(int seqlen_q, int seqlen_k, int window_left, int window_right, int tile_n) {
  const long long diag = static_cast<long long>(seqlen_k) - seqlen_q;
  long long lo = window_left >= 0 ? diag - window_left : 0;
  long long hi = window_right >= 0 ? seqlen_q - 1 + diag + window_right : seqlen_k - 1;
  lo = lo < 0 ? 0 : lo;
  hi = hi > seqlen_k - 1 ? seqlen_k - 1 : hi;
  KeyBlocks b;
  b.first = static_cast<int>(lo / tile_n);
  b.count = hi < lo ? 0 : static_cast<int>(hi / tile_n) - b.first + 1;
  return b;
}

struct AttentionArgs {
  TensorArgs q, k, v, o;     // ragged q/o: seq_stride steps over the packed rows (batch_stride unused);
                             // paged k/v: batch_stride steps over pages, seq_stride over a page's slots
  float* lse;                // fp32, written when the kernel's LSE flag is set: [batch, heads_q, seqlen_q],
                             // or [heads_q, total_q] when ragged
  int batch;
  int seqlen_q;              // ragged: the longest sequence
  int seqlen_k;              // ragged or paged: the longest sequence
  int heads_q;
  int heads_kv;
  int q_heads_per_kv;        // heads_q / heads_kv; q head h reads kv head h / q_heads_per_kv
  float softmax_scale;
  float scale_log2;          // softmax_scale * log2(e): logits enter exp2 through one FMA (softcap: cap *
                             // log2(e), the scores become tanh(s * softmax_scale / cap))
  // Variants, read when the kernel's flag is set: a window's sides (-1 unbounded; causal sets window_right
  // 0), softcap's tanh(s * softcap_scale), softcap_scale = softmax_scale / cap (common/math.cuh
  // softcap_tanh), and the sinks' fp32 [heads_q] logits.
  int window_left, window_right;
  float softcap_scale;
  const float* sinks;
  int num_m_blocks;          // ceil(seqlen_q * pack / tile_m): row tiles per (batch, kv head group)
  int total_tiles;           // work items of the static scheduler (persistent kernels)
  int tile_section;          // dense causal tiles: (batch, head group)s per L2 section (0: each head's tiles in
                             // turn; block_range.h dense_tile)
  void* scratch;             // the per-stream device scratch a Plan asks for (scratch_bytes_per_cta, zeroed when
                             // allocated): the sm100 emulation's TMEM backing store, the sm90 causal and
                             // ragged scheduler's tile counters (left zero at exit); null otherwise
  unsigned long long scratch_bytes;
  unsigned emulation_mode;   // sm100 emulation: 0 strict, 1 adversarial (fa4::Emulation)
  unsigned emulation_seed;   // adversarial: 0 reverses unordered MMAs, else seeds a random order

  // Serving shapes (null / 0 when unused): per-sequence lengths come from the device, never from run().
  const int* cu_seqlens_q;   // batch + 1 row offsets into the packed q/o
  const int* cu_seqlens_k;   // batch + 1 row offsets into the packed k/v (not paged)
  const int* seqused_k;      // batch: keys [0, seqused_k[i]) of sequence i
  const int* page_table;     // paged kernels: [batch, max_pages_per_seq] page indices
  int page_size_log2;        // paged kernels: page_size = 1 << page_size_log2
  int max_pages_per_seq;
  int total_q;               // ragged: rows of the packed q/o
  // Sequences with seqlen_q <= decode_seqlen_q run on the decode kernel, the others on the prefill kernel; a
  // ragged batch can hold both (each kernel then skips the other's). 0 when the prefill kernel runs alone.
  int decode_seqlen_q;

  // Split-KV kernels: a sequence's key blocks in parts (split_parts), each part's states written to the
  // workspace and merged by the combine kernel, or folded by the decode CTA that ran all of them
  // (SplitRule::parts_per_cta); a sequence in one part is written directly. State s: a part's normalised O
  // and its LSE (natural log; -inf for a part without keys), s = part; or, for a folded sequence
  // (folded), decode warp w's raw O, row max and row sum, s = part * split.decode_states + w.
  SplitRule split;
  int max_splits;            // the most parts any sequence can have (the grid's split dimension: split_ctas)
  float* o_partial;          // fp32 [states][split.partial_rows][heads_q][dv] (rows: partial_row)
  float* lse_partial;        // fp32 [states][heads_q][split.partial_rows]: the LSE, or a raw state's row max
  float* sum_partial;        // fp32, as lse_partial: a raw state's row sum
};

// Sequence `batch` of a call: the query rows it has and the keys it sees (from the device arrays when the
// call is ragged or has seqused_k, else the dense shape), and where its rows are: its first row in a ragged
// q/o and k/v (0 when that side is dense, or paged) and the batch coordinate of the TMA kernels' maps (0 for
// a ragged side, one batch of packed rows; else the sequence).
struct SequenceSpan {
  int seqlen_q, seqlen_k;
  int q_row0, k_row0;
  int q_batch, k_batch;
};
FA4_PARAMS_HD SequenceSpan sequence_span(const AttentionArgs& a, int batch) {
  SequenceSpan s;
  s.q_batch = a.cu_seqlens_q ? 0 : batch;
  s.k_batch = a.cu_seqlens_k && !a.page_table ? 0 : batch;
  s.q_row0 = a.cu_seqlens_q ? a.cu_seqlens_q[batch] : 0;
  s.seqlen_q = a.cu_seqlens_q ? a.cu_seqlens_q[batch + 1] - s.q_row0 : a.seqlen_q;
  s.k_row0 = a.cu_seqlens_k && !a.page_table ? a.cu_seqlens_k[batch] : 0;
  s.seqlen_k = a.seqused_k      ? a.seqused_k[batch]
               : a.cu_seqlens_k ? a.cu_seqlens_k[batch + 1] - a.cu_seqlens_k[batch]
                                : a.seqlen_k;
  return s;
}

// Where the LSE of token `token` (of its sequence) and q head `head` goes: [batch, heads_q, seqlen_q], or
// [heads_q, total_q] when q is ragged (row_base: the sequence's first row, cu_seqlens_q[batch]).
FA4_PARAMS_HD long long lse_offset(const AttentionArgs& a, int batch, int head, long long row_base, int token) {
  return a.cu_seqlens_q ? static_cast<long long>(head) * a.total_q + row_base + token
                        : (static_cast<long long>(batch) * a.heads_q + head) * a.seqlen_q + token;
}

// Softcap's fixed bias: a capped score lies in [-cap, cap], so with bf16 P (fp32's exponent range) and a cap
// of at most kSoftcapBoundLog2 / log2(e) (about 62) the softmax needs no running max. Against a fixed max
// of cap - kSoftcapShiftLog2 (in exp2 units; in tanh units the value softcap_fixed_max returns) every
// exponent lies in [80 - 180, 80]: a P times any |V| >= 2^-24 stays a normal fp32 number, and O stays below
// 2^80 x 2^31 keys x 2^16 = 2^127. That drops the block max, its shuffles and O's rescale from the softmax,
// which the tanh's MUFU operation has made the critical path. fp16 P (2^-24 to 2^16), caps above the bound
// and caps below 1 / log2(e) (where the fixed max's 80 / scale_log2 could overflow) keep the running max.
// `scale_log2` is AttentionArgs::scale_log2 (cap * log2(e) with softcap).
constexpr float kSoftcapShiftLog2 = 80.f, kSoftcapBoundLog2 = 90.f;
FA4_PARAMS_HD bool softcap_bias_fixed(bool softcap, bool bf16, float scale_log2) {
  return softcap && bf16 && scale_log2 >= 1.f && scale_log2 <= kSoftcapBoundLog2;
}
FA4_PARAMS_HD float softcap_fixed_max(float scale_log2) { return 1.f - kSoftcapShiftLog2 / scale_log2; }

// A paged K/V block of the TMA kernels (sm90, sm100) loads in pieces of this many keys, each inside one page: the
// page size, at most the largest power of two dividing the block's tile_n keys. The host builds the K and V
// maps with boxes of this many rows.
FA4_PARAMS_HD int paged_piece_rows(int tile_n, int page_size_log2) {
  const int pow2 = tile_n & -tile_n;
  return (1 << page_size_log2) < pow2 ? 1 << page_size_log2 : pow2;
}

// The combine kernel's argument block: merges n partial states (O_s, LSE_s) of the same rows into O (and
// LSE): LSE = log sum_s exp(LSE_s), O = sum_s exp(LSE_s - LSE) O_s. State s is at state_o[s] (s < 8) or, when
// o_state_stride is set, at state_o[0] + s * o_state_stride (elements); likewise its LSE.
constexpr int kMaxCombinePointers = 8;
struct CombineArgs {
  const void* state_o[kMaxCombinePointers];   // fp32 or 16-bit, laid out by state_layout
  const float* state_lse[kMaxCombinePointers];
  long long o_state_stride, lse_state_stride;  // 0: explicit pointers
  int n_states;
  int warps_per_item;        // warps sharing one (row, head)'s states: 1, 2 or 4 (a constant per use, so the
                             // order of the sum, and the result, never depends on the batch)
  TensorArgs state_layout;   // element strides of a state's O: batch (dense rows), seq (rows), head
  long long lse_batch_stride, lse_head_stride, lse_row_stride;  // a state's LSE
  TensorArgs o;              // the output (16-bit)
  float* lse;                // the output LSE (null: none)
  long long out_lse_batch_stride, out_lse_head_stride, out_lse_row_stride;
  int batch, seqlen, heads, total_rows;
  const int* cu_seqlens;     // ragged rows (null: dense batch x seqlen)
  // After a split-KV kernel (split = 1): only the rows of sequences with more than one part are merged,
  // each over its own parts (split_parts); the kernel wrote the other rows' final output itself.
  int split;
  const float* state_sum;    // a folded sequence's raw row sums, laid out as the LSEs (SplitRule::fold_blocks)
  int staged_states;         // dynamic shared memory for this many states a warp (combine_staging_bytes; 0: none)
  float scale_log2;          // the attention's (AttentionArgs::scale_log2): raw row maxima's exponent factor
  const int* cu_seqlens_k;
  const int* seqused_k;
  int seqlen_k, decode_seqlen_q;
  int window_left, window_right;  // the attention's (key_blocks: a window's parts)
  SplitRule rule;
  const float* sinks;        // after split-KV: the attention sinks, added once to each merged row (null: none)
};
}  // namespace fa4k
