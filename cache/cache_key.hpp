// Content-addressed cache keys: XXH3-128 over everything that determines a cubin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fa4::cache {

// Bump when the entry format or the key recipe changes: old entries then simply miss.
constexpr uint32_t kSchemaVersion = 2;  // 2: entries record their configuration name and creation time

struct CacheKey {
  uint64_t high = 0;
  uint64_t low = 0;
  std::string hex() const;  // 32 lowercase hex digits, high then low
  bool operator==(const CacheKey& o) const { return high == o.high && low == o.low; }
  bool operator!=(const CacheKey& o) const { return !(*this == o); }
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const { return static_cast<size_t>(k.low ^ (k.high * 0x9E3779B97F4A7C15ull)); }
};

// What goes into a key. No paths, no time, nothing machine-specific beyond the compiler version.
struct KeyInputs {
  std::string_view source;                            // the full generated source
  const std::vector<std::string>* options = nullptr;  // NVRTC options, in order (null: none)
  std::string_view nvrtc_version;                     // "13.0"
  std::string_view target;                            // "sm_100a"
  std::string_view library_version;                   // fa4::version()
  uint32_t schema_version = kSchemaVersion;           // always kSchemaVersion outside tests
};

// XXH3-128 over the schema version and each input, every field length-prefixed so that no two
// different inputs can serialise to the same bytes.
CacheKey make_cache_key(const KeyInputs& inputs);

// XXH3-64 of a byte range: the checksum stored in disk entries.
uint64_t checksum(const void* data, size_t size);

}  // namespace fa4::cache
