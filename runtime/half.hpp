// Host-side bf16 / fp16 conversions (round to nearest even), for the self-check, tools and tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "fa4/plan.hpp"

namespace fa4::detail {

inline uint16_t float_to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);   // NaN
  if (x >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds past 65504: inf
  if (x < 0x38800000) {                                              // fp16 subnormal or zero
    const int drop = 126 - static_cast<int>(x >> 23);                // bits below the 2^-24 unit
    if (drop >= 25) return static_cast<uint16_t>(sign);              // below half the smallest subnormal
    const uint32_t mant = (x & 0x7fffff) | 0x800000;
    uint32_t r = mant >> drop;
    const uint32_t rem = mant & ((1u << drop) - 1), half = 1u << (drop - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (x - 0x38000000) >> 13;
  const uint32_t rem = x & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  const uint32_t u = exp == 31 ? (sign | 0x7f800000 | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t to_half(DType t, float f) { return t == DType::bf16 ? float_to_bf16(f) : float_to_fp16(f); }
inline float from_half(DType t, uint16_t h) { return t == DType::bf16 ? bf16_to_float(h) : fp16_to_float(h); }

}  // namespace fa4::detail
