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

[[noreturn]] void bad(const char* name, const std::string& value, const std::string& rule) {
  throw Error(ErrorCode::invalid_argument, std::string(name) + ": " + rule + ", got '" + value + "'");
}

bool env_flag(const char* name, bool fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  const std::string s = v;
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  bad(name, s, "must be 0/1, true/false, on/off or yes/no");
}

// Plain decimal digits only, then the range: strtol would accept " 4" and "+4" and saturate past LONG_MAX.
int env_int(const char* name, int fallback, int min, int max) {
  const char* v = env(name);
  if (!v) return fallback;
  const std::string s = v;
  const std::string rule = "must be a decimal integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  long long n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') bad(name, s, rule + " (digits only: no sign, spaces or other characters)");
    n = n * 10 + (c - '0');
    if (n > max) bad(name, s, rule);
  }
  if (n < min) bad(name, s, rule);
  return static_cast<int>(n);
}

// A parser's own error, prefixed with the variable it came from.
template <class F>
auto parse_env(const char* name, F&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(e.code(), std::string(name) + ": " + e.what());
  }
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
    if (!bytes) bad("FA4_CACHE_MAX_BYTES", v, "must be a byte count, optionally with K, M, G or T (0: unbounded)");
    o.cache_max_bytes = *bytes;
  }
  if (const char* v = env("FA4_LOG_LEVEL")) o.log_level = parse_env("FA4_LOG_LEVEL", [&] { return detail::parse_log_level(v); });
  if (const char* v = env("FA4_BACKEND")) o.backend = parse_env("FA4_BACKEND", [&] { return backend_from_string(v); });
  o.allow_jit = !env_flag("FA4_NO_JIT", false);
  o.self_check = env_flag("FA4_SELF_CHECK", true);
  o.self_check_timeout_ms = env_int("FA4_SELF_CHECK_TIMEOUT_MS", o.self_check_timeout_ms, 1, 24 * 3600 * 1000);
  if (const char* v = env("FA4_SELF_CHECK_HELPER")) o.self_check_helper = v;
  o.max_compile_threads = env_int("FA4_COMPILE_THREADS", 0, 0, kMaxCompileThreads);
  if (const char* v = env("FA4_DUMP_DIR")) o.dump_dir = v;  // checked (created, written) by the Attention constructor
  if (const char* v = env("FA4_EMULATION")) {
    const std::string e = v;
    if (e != "strict" && e != "adversarial") bad("FA4_EMULATION", e, "must be strict or adversarial");
    o.emulation = e == "strict" ? Emulation::strict : Emulation::adversarial;
  }
  o.emulation_seed = static_cast<unsigned>(env_int("FA4_EMULATION_SEED", 0, 0, 0x7fffffff));
  return o;
}

}  // namespace fa4
