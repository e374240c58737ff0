// Cache keys: XXH3-128 over length-prefixed fields; every input matters, nothing else does.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>

#include "cache/cache_key.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace fa4::cache {
namespace {

struct Inputs {
  std::string source = "extern \"C\" __global__ void k() {}\n";
  std::vector<std::string> options = {"-arch=sm_100a", "-std=c++17", "-default-device"};
  std::string nvrtc = "13.0";
  std::string target = "sm_100a";
  std::string library = "0.1.0";
  uint32_t schema = kSchemaVersion;

  CacheKey key() const {
    KeyInputs in;
    in.source = source;
    in.options = &options;
    in.nvrtc_version = nvrtc;
    in.target = target;
    in.library_version = library;
    in.schema_version = schema;
    return make_cache_key(in);
  }
};

TEST(CacheKey, Deterministic) {
  const Inputs a;
  const Inputs b;  // separate strings with equal contents
  EXPECT_EQ(a.key(), a.key());
  EXPECT_EQ(a.key(), b.key());
  EXPECT_NE(a.key().high, 0u);
  EXPECT_NE(a.key().low, 0u);
}

TEST(CacheKey, EveryInputChangesTheKey) {
  const CacheKey base = Inputs{}.key();
  const std::vector<std::pair<const char*, std::function<void(Inputs&)>>> changes = {
      {"source: one character", [](Inputs& in) { in.source[10] ^= 1; }},
      {"source: trailing newline removed", [](Inputs& in) { in.source.pop_back(); }},
      {"options: one changed", [](Inputs& in) { in.options[1] = "-std=c++20"; }},
      {"options: one added", [](Inputs& in) { in.options.push_back("-lineinfo"); }},
      {"options: one removed", [](Inputs& in) { in.options.pop_back(); }},
      {"options: order", [](Inputs& in) { std::swap(in.options[0], in.options[1]); }},
      {"nvrtc version", [](Inputs& in) { in.nvrtc = "13.1"; }},
      {"target", [](Inputs& in) { in.target = "sm_90a"; }},
      {"library version", [](Inputs& in) { in.library = "0.1.1"; }},
      {"schema version", [](Inputs& in) { in.schema += 1; }},
  };
  for (const auto& [what, change] : changes) {
    Inputs in;
    change(in);
    EXPECT_NE(in.key(), base) << what;
  }
}

TEST(CacheKey, FieldsAreLengthPrefixed) {
  // Pairs whose fields concatenate to the same bytes must still get different keys.
  auto key = [](std::string source, std::vector<std::string> options, std::string nvrtc, std::string target) {
    Inputs in;
    in.source = std::move(source);
    in.options = std::move(options);
    in.nvrtc = std::move(nvrtc);
    in.target = std::move(target);
    return in.key();
  };
  EXPECT_NE(key("ab", {"c"}, "13.0", "sm_100a"), key("a", {"bc"}, "13.0", "sm_100a"));
  EXPECT_NE(key("s", {"-a", "-b"}, "13.0", "sm_100a"), key("s", {"-a-b"}, "13.0", "sm_100a"));
  EXPECT_NE(key("s", {}, "13.0", "sm_100a"), key("s", {""}, "13.0", "sm_100a"));
  EXPECT_NE(key("s", {"x"}, "13.0", "sm_100a"), key("s", {"x", ""}, "13.0", "sm_100a"));
  EXPECT_NE(key("s", {}, "13.0", "sm_100a"), key("s", {}, "13.0s", "m_100a"));
  EXPECT_NE(key("s", {}, "13.0", "sm_100a"), key("s", {}, "13.", "0sm_100a"));
}

TEST(CacheKey, NullOptionsMeanNoOptions) {
  Inputs in;
  in.options.clear();
  KeyInputs raw;
  raw.source = in.source;
  raw.options = nullptr;
  raw.nvrtc_version = in.nvrtc;
  raw.target = in.target;
  raw.library_version = in.library;
  EXPECT_EQ(make_cache_key(raw), in.key());
}

TEST(CacheKey, HexIs32LowercaseDigitsHighThenLow) {
  EXPECT_EQ((CacheKey{0x0123456789abcdefull, 0xfedcba9876543210ull}.hex()), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ((CacheKey{0, 1}.hex()), "00000000000000000000000000000001");
  EXPECT_EQ((CacheKey{~0ull, 0}.hex()), "ffffffffffffffff0000000000000000");
  const std::string hex = Inputs{}.key().hex();
  ASSERT_EQ(hex.size(), 32u);
  for (char c : hex) EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f')) << hex;
}

TEST(CacheKey, HashFunctorUsesBothHalves) {
  const CacheKeyHash hash;
  EXPECT_NE(hash(CacheKey{1, 7}), hash(CacheKey{2, 7}));
  EXPECT_NE(hash(CacheKey{7, 1}), hash(CacheKey{7, 2}));
}

TEST(CacheKey, ChecksumIsXxh3_64) {
  std::vector<unsigned char> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  EXPECT_EQ(checksum(data.data(), data.size()), XXH3_64bits(data.data(), data.size()));
  EXPECT_EQ(checksum(nullptr, 0), 0x2D06800538D394C2ull);  // XXH3-64 of no bytes (reference value)
  const uint64_t before = checksum(data.data(), data.size());
  data[500] ^= 0x10;
  EXPECT_NE(checksum(data.data(), data.size()), before);
}

}  // namespace
}  // namespace fa4::cache
