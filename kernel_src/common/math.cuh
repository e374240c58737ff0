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
