// A program that uses fa4rt the way an engine would, built by .ci/run against an installed fa4rt
// (find_package/, pkg-config) and against the source tree (add_subdirectory/). It needs no GPU: versions,
// an Attention with the disk cache off, a kernel described without compiling, an fa4::Error caught across
// the library boundary, and the C ABI.
#include <fa4/fa4.h>
#include <fa4/fa4.hpp>
#include <fa4/version.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

// The library's private build settings must not reach its users.
#if defined(FMT_HEADER_ONLY) || defined(SPDLOG_HEADER_ONLY) || defined(FA4_VERSION)
#error "fa4rt leaked a private compile definition into its consumer"
#endif

int main() {
  std::printf("fa4rt %s (headers %s, FA4_VERSION_NUMBER %d)\n", fa4::version(), FA4_VERSION_STRING, FA4_VERSION_NUMBER);
  if (std::strcmp(fa4::version(), FA4_VERSION_STRING) != 0) {
    std::fprintf(stderr, "the loaded library is not the release of these headers\n");
    return 1;
  }

  fa4::Options options;
  options.disk_cache = false;  // writes nothing under $HOME
  fa4::Attention attention(options);
  fa4::KernelConfig config;  // the README's example, for a B200
  config.head_dim = 128;
  config.causal = true;
  config.q_heads_per_kv = 4;
  config.arch = 100;
  const fa4::KernelInfo info = attention.describe(config);
  std::printf("kernel %s for %s: %zu bytes of source, cache key %s\n", info.key.name().c_str(), info.key.target().c_str(),
              info.source.size(), info.cache_key_hex.c_str());

  try {
    attention.run(fa4::AttentionParams{}, nullptr);
    std::fprintf(stderr, "run() accepted empty parameters\n");
    return 1;
  } catch (const fa4::Error& e) {
    std::printf("run() with empty parameters: fa4::Error %s: %s\n", fa4::to_string(e.code()), e.what());
  }

  setenv("FA4_DISK_CACHE", "0", 1);  // fa4_create reads the FA4_* variables
  fa4_attention* handle = nullptr;
  if (fa4_create(&handle) != FA4_OK) {
    std::fprintf(stderr, "fa4_create: %s\n", fa4_last_error());
    return 1;
  }
  const int rc = fa4_run(handle, nullptr, nullptr);
  std::printf("C ABI: fa4_version %s; fa4_run(NULL params) = %d: %s\n", fa4_version(), rc, fa4_last_error());
  fa4_destroy(handle);
  return rc == FA4_ERR_INVALID_ARGUMENT ? 0 : 1;
}
