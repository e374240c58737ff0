// Options::from_env: the one place the library reads its FA4_* environment variables (README.md).
#include <cstdlib>
#include <string>

#include "base/log.hpp"
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
  if (const char* v = env("FA4_EMULATION")) {
    const std::string e = v;
    if (e != "strict" && e != "adversarial")
      throw Error(ErrorCode::invalid_argument, "FA4_EMULATION='" + e + "': must be strict or adversarial");
    o.emulation = e == "strict" ? Emulation::strict : Emulation::adversarial;
  }
  if (const char* v = env("FA4_EMULATION_SEED")) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end || *v == '-' || n > 0xffffffffUL)
      throw Error(ErrorCode::invalid_argument, std::string("FA4_EMULATION_SEED='") + v + "': must be an integer in [0, 2^32)");
    o.emulation_seed = static_cast<unsigned>(n);
  }
  return o;
}

}  // namespace fa4
