#include "cache/cache_key.hpp"

#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace fa4::cache {

namespace {

// Every field is preceded by its length (8 bytes, little-endian) so that moving bytes from one field
// to the next always changes the hashed stream ("ab"+"c" and "a"+"bc" differ).
void put_u64(XXH3_state_t* state, uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  XXH3_128bits_update(state, bytes, sizeof(bytes));
}

void put_field(XXH3_state_t* state, std::string_view field) {
  put_u64(state, field.size());
  XXH3_128bits_update(state, field.data(), field.size());
}

}  // namespace

std::string CacheKey::hex() const {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return text;
}

CacheKey make_cache_key(const KeyInputs& inputs) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  put_u64(&state, inputs.schema_version);
  put_field(&state, inputs.library_version);
  put_field(&state, inputs.nvrtc_version);
  put_field(&state, inputs.target);
  // The count first, so the option list delimits itself whatever follows it.
  const size_t n_options = inputs.options ? inputs.options->size() : 0;
  put_u64(&state, n_options);
  for (size_t i = 0; i < n_options; ++i) put_field(&state, (*inputs.options)[i]);
  put_field(&state, inputs.source);
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return CacheKey{h.high64, h.low64};
}

uint64_t checksum(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace fa4::cache
