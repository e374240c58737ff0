// Reference attention for the correctness tests: float64 on the CPU over host copies (small shapes) and a
// simple float32 GPU kernel (verify/kernels/reference/attention_ref.cu) for large ones. Both follow the
// correctness contract (docs/correctness.md): element strides, GQA (kv head = h / (h_q / h_kv)), causal
// and windows bottom-right, softcapping and sinks (CPU), LSE in natural log, rows without keys give O = 0
// and LSE = -inf (the sink's logit with sinks).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fa4/fa4.hpp"

namespace fa4::verify {

struct RefProblem {
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64, head_dim_v = 64;
  DType dtype = DType::bf16;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;  // sliding window (fa4::AttentionParams), -1: unbounded
  double softcap = 0;        // > 0: scores become softcap * tanh(score / softcap)
  std::vector<double> sinks; // one logit per q head joining each row's denominator (empty: none)
  double scale = 0;          // the softmax scale the kernel used (already resolved, never 0)
  Strides q, k, v;           // element strides of the inputs (resolved, never all-zero)

  // Multiply-adds of the reference, to choose between the CPU and the GPU version.
  double work() const { return double(batch) * heads_q * seqlen_q * seqlen_k * (head_dim + head_dim_v); }
};

struct RefResult {
  std::vector<double> o;      // [batch, seqlen_q, heads_q, head_dim_v] contiguous
  std::vector<double> lse;    // [batch, heads_q, seqlen_q]
  double max_abs_logit = 0;   // max |q . k| over visible pairs, before scaling (CPU reference only)
};

// Float64 reference; q, k, v point at element [0, 0, 0, 0] of host copies laid out with p's strides.
RefResult reference_attention_cpu(const RefProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v);

// Float32 reference on the current context's device; q, k, v are device pointers with p's strides.
// Compiles the reference kernel once per process. Synchronises. No variants (window, softcap, sinks): those
// are checked against the CPU reference.
RefResult reference_attention_gpu(const RefProblem& p, CUdeviceptr q, CUdeviceptr k, CUdeviceptr v);

}  // namespace fa4::verify
