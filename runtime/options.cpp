// Options::from_env: the one place the library reads its FA4_* environment variables (README.md).
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/log.hpp"
#include "cache/disk_cache.hpp"
#include "fa4/fa4.hpp"

namespace fa4 {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  const std::string s = v;
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  throw Error(ErrorCode::invalid_argument, std::string(name) + "='" + s + "': must be 0/1, true/false, on/off or yes/no");
}

}  // namespace

Options Options::from_env() {
  Options o;
  o.disk_cache = env_flag("FA4_DISK_CACHE", true);
  // FA4_CACHE_DIR=writable[:bundle...], like PATH: the first is the writable cache (empty: the default),
  // the rest are read-only bundles searched after it.
  if (const char* v = env("FA4_CACHE_DIR")) {
    const std::string dirs = v;
    size_t begin = 0;
    for (bool first = true; begin <= dirs.size(); first = false) {
      const size_t end = std::min(dirs.find(':', begin), dirs.size());
      const std::string dir = dirs.substr(begin, end - begin);
      if (first)
        o.cache_dir = dir;
      else if (!dir.empty())
        o.cache_bundles.push_back(dir);
      begin = end + 1;
    }
  }
  if (const char* v = env("FA4_CACHE_MAX_BYTES")) {
    const std::optional<uint64_t> bytes = cache::parse_byte_size(v);
    if (!bytes)
      throw Error(ErrorCode::invalid_argument, std::string("FA4_CACHE_MAX_BYTES='") + v +
                                                   "': must be a byte count, optionally with K, M, G or T (0: unbounded)");
    o.cache_max_bytes = *bytes;
  }
  if (const char* v = env("FA4_LOG_LEVEL")) o.log_level = detail::parse_log_level(v);
  if (const char* v = env("FA4_BACKEND")) o.backend = backend_from_string(v);
  o.allow_jit = !env_flag("FA4_NO_JIT", false);
  o.self_check = env_flag("FA4_SELF_CHECK", true);
  if (const char* v = env("FA4_COMPILE_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end || n < 0 || n > 1024)
      throw Error(ErrorCode::invalid_argument, std::string("FA4_COMPILE_THREADS='") + v + "': must be an integer in [0, 1024]");
    o.max_compile_threads = static_cast<int>(n);
  }
  if (const char* v = env("FA4_DUMP_DIR")) o.dump_dir = v;
  return o;
}

}  // namespace fa4
