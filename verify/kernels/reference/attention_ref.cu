// Test-only float32 reference attention on the GPU, deliberately simple and independent of the kernels
// under test: one thread per (batch, q head, query row), two passes over the visible keys (max, then
// exp-sum and the weighted V sum), natural exp/log, no tiling, no shared memory, no tensor cores.
// Layout and semantics as in docs/correctness.md: Q [b, s_q, h_q, d], K/V [b, s_k, h_kv, d(v)] with element
// strides, causal bottom-right (row r sees keys c <= r + s_k - s_q), GQA kv head = h / (h_q / h_kv).
// Outputs: O fp32 [b, s_q, h_q, dv] contiguous; LSE fp32 [b, h_q, s_q]; rows without keys: O = 0, LSE -inf.

constexpr int kRefMaxHeadDim = 256;

__device__ float ref_load(const unsigned short* p, long long i, int is_bf16) {
  const unsigned short h = p[i];
  if (is_bf16) return __uint_as_float(static_cast<unsigned>(h) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

extern "C" __global__ void attention_ref(const unsigned short* q, const unsigned short* k, const unsigned short* v,
                                         long long q_batch, long long q_seq, long long q_head,
                                         long long k_batch, long long k_seq, long long k_head,
                                         long long v_batch, long long v_seq, long long v_head,
                                         float* o, float* lse, int batch, int seqlen_q, int seqlen_k, int heads_q,
                                         int heads_kv, int head_dim, int head_dim_v, int is_bf16, int causal,
                                         float scale) {
  const long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int row = static_cast<int>(index % seqlen_q);
  const long long bh = index / seqlen_q;
  const int h = static_cast<int>(bh % heads_q);
  const long long b = bh / heads_q;
  if (b >= batch) return;
  const int kv = h / (heads_q / heads_kv);

  float qv[kRefMaxHeadDim];
  const long long q_off = b * q_batch + row * q_seq + h * q_head;
  for (int i = 0; i < head_dim; ++i) qv[i] = ref_load(q, q_off + i, is_bf16);

  int last = seqlen_k - 1;  // last visible key
  if (causal && row + seqlen_k - seqlen_q < last) last = row + seqlen_k - seqlen_q;

  float* out = o + ((b * seqlen_q + row) * heads_q + h) * head_dim_v;
  float* lse_out = lse + (b * heads_q + h) * seqlen_q + row;
  if (last < 0) {
    for (int j = 0; j < head_dim_v; ++j) out[j] = 0.f;
    *lse_out = __int_as_float(0xff800000);
    return;
  }

  auto logit = [&](int c) {
    const long long k_off = b * k_batch + c * k_seq + kv * k_head;
    float dot = 0.f;
    for (int i = 0; i < head_dim; ++i) dot += qv[i] * ref_load(k, k_off + i, is_bf16);
    return dot * scale;
  };

  float max_logit = logit(0);
  for (int c = 1; c <= last; ++c) max_logit = fmaxf(max_logit, logit(c));

  float acc[kRefMaxHeadDim];
  for (int j = 0; j < head_dim_v; ++j) acc[j] = 0.f;
  float sum = 0.f;
  for (int c = 0; c <= last; ++c) {
    const float p = expf(logit(c) - max_logit);
    sum += p;
    const long long v_off = b * v_batch + c * v_seq + kv * v_head;
    for (int j = 0; j < head_dim_v; ++j) acc[j] += p * ref_load(v, v_off + j, is_bf16);
  }
  for (int j = 0; j < head_dim_v; ++j) out[j] = acc[j] / sum;
  *lse_out = max_logit + logf(sum);
}
