// Fast fp32 math every attention kernel shares (sm_80+): the MUFU approximations, softcapping and the
// attention-sink merge, so the variants mean the same on every backend. Device code only.
#pragma once

namespace fa4k {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float exp2_approx(float x) {  // exp2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {  // ~1 ulp; no IEEE-division subroutine call
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Softcapping (before the mask): s = cap * tanh(s * softmax_scale / cap). Returns the tanh only, of
// s * softcap_scale (AttentionArgs::softcap_scale = softmax_scale / cap): the host folds cap into
// scale_log2, so the exponent's one FMA applies it. One MUFU operation (tanh.approx, as FlashAttention 3
// and 4 do): the softmax's exponential already fills the MUFU pipe, and an exact tanh (an exponential and a
// reciprocal, or a division by Newton steps) ran at 0.62-0.69x of the kernel without softcap on the H200.
// Its relative error, at most 2^-10.99, moves a capped score by up to cap * 2^-11 (0.015 at a cap of 30).
__device__ __forceinline__ float softcap_tanh(float s, float softcap_scale) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(s * softcap_scale));
  return y;
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
__device__ __forceinline__ bool softcap_bias_fixed(bool softcap, bool bf16, float scale_log2) {
  return softcap && bf16 && scale_log2 >= 1.f && scale_log2 <= kSoftcapBoundLog2;
}
__device__ __forceinline__ float softcap_fixed_max(float scale_log2) { return 1.f - kSoftcapShiftLog2 / scale_log2; }

// Attention sinks: the sink's logit joins a finished row's denominator. Returns the row's new LSE (natural
// log) and scales `o_scale` by exp(lse - new lse); a row without keys (LSE -inf) keeps O = 0 and gets the
// sink's LSE. A sink of -inf adds nothing (and must not turn -inf - -inf into NaN).
__device__ __forceinline__ float add_sink(float lse, float sink, float& o_scale) {
  if (sink == neg_inf()) return lse;
  const float top = fmaxf(lse, sink);
  const float with_sink = top + logf(expf(lse - top) + expf(sink - top));
  o_scale *= expf(lse - with_sink);
  return with_sink;
}

}  // namespace fa4k
