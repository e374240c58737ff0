// Inputs for the cache tests: random cubin bytes and distinct, well-formed cache keys.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"

namespace fa4::test {

inline std::vector<char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> bytes(n);
  for (char& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

// A key as the runtime would make it, for a source text `name`.
inline cache::CacheKey test_key(const std::string& name) {
  cache::KeyInputs in;
  in.source = name;
  in.nvrtc_version = "13.0";
  in.target = "sm_100a";
  in.library_version = "test";
  return cache::make_cache_key(in);
}

}  // namespace fa4::test
