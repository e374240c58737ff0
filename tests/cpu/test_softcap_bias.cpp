// Softcap's fixed bias (common/params.h): where the kernels take probabilities against a fixed maximum, every
// exponent they form, exp2(t * scale_log2 - m * scale_log2) for a capped score t in [-1, 1] (tanh.approx may
// overshoot by 2^-11) and m = softcap_fixed_max, stays inside the range the bias promises: no bf16 P
// overflows, no P underflows, a P times any |V| >= 2^-24 stays normal, and O stays below fp32's limit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_src/common/params.h"

namespace {

TEST(SoftcapBias, FixedOnlyForBf16AndModestCaps) {
  constexpr float kLog2e = 1.4426950408889634f;
  EXPECT_TRUE(fa4k::softcap_bias_fixed(true, true, 30.f * kLog2e));  // Grok's cap
  EXPECT_TRUE(fa4k::softcap_bias_fixed(true, true, 60.f * kLog2e));
  EXPECT_FALSE(fa4k::softcap_bias_fixed(true, true, 63.f * kLog2e));   // past the bound: running max
  EXPECT_FALSE(fa4k::softcap_bias_fixed(true, false, 30.f * kLog2e));  // fp16 P: running max
  EXPECT_FALSE(fa4k::softcap_bias_fixed(false, true, 30.f * kLog2e));  // no softcap
  EXPECT_FALSE(fa4k::softcap_bias_fixed(true, true, 1e-37f * kLog2e));  // 80 / scale_log2 would overflow
  EXPECT_FALSE(fa4k::softcap_bias_fixed(true, true, 0.5f));
}

TEST(SoftcapBias, ExponentsStayInsideTheirRange) {
  const float lo = fa4k::kSoftcapShiftLog2 - 2.f * fa4k::kSoftcapBoundLog2 - 1.f, hi = fa4k::kSoftcapShiftLog2 + 1.f;
  // What the range must keep: P in bf16 (8-bit exponent) never overflows, P times |V| >= 2^-24 stays a normal
  // fp32 number, O = sum over up to 2^31 keys of P |V| with |V| <= 2^16 stays below fp32's limit.
  EXPECT_LE(hi, 127.f - 31.f - 16.f + 1.f);
  EXPECT_GE(lo - 24.f, -126.f);
  int checked = 0;
  for (float s = 0.25f; s <= 100.f; s *= 1.01f) {
    if (!fa4k::softcap_bias_fixed(true, true, s)) continue;
    const float m = fa4k::softcap_fixed_max(s);
    ASSERT_TRUE(std::isfinite(m)) << s;
    const float bias = m * s;  // as the kernels form it (sm90: m * scale_log2; portable: -max * scale_log2)
    for (float t : {-1.f - 0x1p-11f, -1.f, -0.5f, 0.f, 0.5f, 1.f, 1.f + 0x1p-11f}) {
      const float e = std::fma(t, s, -bias);
      ASSERT_GE(e, lo) << "scale_log2 " << s << ", t " << t;
      ASSERT_LE(e, hi) << "scale_log2 " << s << ", t " << t;
      ASSERT_GT(std::exp2(e), 0.f);
      ASSERT_TRUE(std::isfinite(std::exp2(e) * 65536.f * 2147483648.f));
    }
    ++checked;
  }
  EXPECT_GT(checked, 400);  // the sweep reached caps from 0.7 to 62
}

}  // namespace
