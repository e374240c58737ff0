// The argument block every attention kernel receives by value. Shared verbatim by the host (runtime)
// and the device code, so the layout is defined once. Plain types only: NVRTC sees no system headers.
#pragma once

namespace fa4k {

struct TensorArgs {
  void* ptr;                 // device pointer to element [0, 0, 0, 0]
  long long batch_stride;    // elements
  long long seq_stride;      // elements
  long long head_stride;     // elements; the head dimension itself is contiguous
};

struct AttentionArgs {
  TensorArgs q, k, v, o;
  float* lse;                // fp32 [batch, heads_q, seqlen_q], written when the kernel's LSE flag is set
  int batch;
  int seqlen_q;
  int seqlen_k;
  int heads_q;
  int heads_kv;
  int q_heads_per_kv;        // heads_q / heads_kv; q head h reads kv head h / q_heads_per_kv
  float softmax_scale;
  float scale_log2;          // softmax_scale * log2(e): logits enter exp2 through one FMA
  int num_m_blocks;          // ceil(seqlen_q * pack / tile_m): row tiles per (batch, kv head group)
  int total_tiles;           // work items of the static scheduler (persistent kernels)
  void* tmem_scratch;        // sm100 emulation only: per-CTA TMEM backing store; null otherwise
  unsigned long long tmem_scratch_bytes;
  unsigned emulation_seed;   // sm100 adversarial emulation: 0 reverses unordered MMAs, else seeds a random order
};

}  // namespace fa4k
