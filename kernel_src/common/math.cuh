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

// Softcapping (before the mask): s = cap * tanh(s * softmax_scale / cap), tanh(x) = 1 - 2 / (e^(2x) + 1)
// through exp2 and rcp, with exp2_scale = 2 log2(e) softmax_scale / cap (AttentionArgs::softcap_exp2): an
// absolute error of about cap * 1e-7 in the capped score (tanh.approx would give a relative 2^-11, 0.015 at
// a score of 30). exp2 overflowing to +inf gives cap, underflowing to 0 gives -cap.
__device__ __forceinline__ float softcap_score(float s, float exp2_scale, float cap) {
  return fmaf(-2.f * cap, rcp_approx(exp2_approx(s * exp2_scale) + 1.f), cap);
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
