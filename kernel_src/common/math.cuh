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

// Softcapping (before the mask): s = cap * tanh(s * softmax_scale / cap). Returns the tanh only: the host
// folds cap into scale_log2 (AttentionArgs), so the exponent's one FMA applies it. exp2_scale = 2 log2(e)
// softmax_scale / cap (AttentionArgs::softcap_exp2). tanh|x| = (1 - t) / (1 + t) with t = e^(-2|x|) in (0, 1]
// (never overflows): one MUFU ex2, and the division on the FMA pipe, since the MUFU pipe already carries the
// softmax's exponentials (a quadratic start for 1 / (1 + t), relative error 1/99, then two Newton steps:
// 1e-8). An absolute error of about cap * 3e-7 in the capped score, from ex2's; tanh.approx would give a
// relative 2^-11, 0.015 at a score of 30, and rcp a second MUFU.
__device__ __forceinline__ float softcap_tanh(float s, float exp2_scale) {
  const float t = exp2_approx(-fabsf(s) * exp2_scale);
  const float d = 1.f + t;
  float r = fmaf(fmaf(32.f / 99.f, t, -80.f / 99.f), t, 98.f / 99.f);
  r = fmaf(r, fmaf(-d, r, 1.f), r);
  r = fmaf(r, fmaf(-d, r, 1.f), r);
  return copysignf(fmaf(-t, r, r), s);
}
// The same tanh as 1 - 2 / (e^(2x) + 1) with the division on the MUFU pipe (rcp): two temporaries instead
// of four, for the sm100 softmax, whose 128 scores of a row already fill its registers (the FMA form spills
// there). e^(2x) overflowing to +inf gives 1, underflowing to 0 gives -1; the same error as above.
__device__ __forceinline__ float softcap_tanh_rcp(float s, float exp2_scale) {
  return fmaf(-2.f, rcp_approx(exp2_approx(s * exp2_scale) + 1.f), 1.f);
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
