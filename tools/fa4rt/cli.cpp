// Argument reading and small helpers shared by the fa4rt commands.
#include "tools/fa4rt/cli.hpp"

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "cache/disk_cache.hpp"
#include "runtime/driver.hpp"

namespace fa4::cli {

bool Flags::next() {
  if (next_ >= args_.size()) return false;
  flag_ = args_[next_++];
  return true;
}

std::string Flags::value() {
  if (next_ >= args_.size()) throw UsageError(flag_ + " needs a value");
  return args_[next_++];
}

int Flags::number(int min) {
  const std::string v = value();
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < min || n > 1 << 30)
    throw UsageError(flag_ + " needs an integer in [" + std::to_string(min) + ", 2^30], got '" + v + "'");
  return static_cast<int>(n);
}

int Flags::q_heads_per_kv() {
  const int n = number();
  if (n < 1 || n > kMaxQHeadsPerKv)
    throw UsageError(flag_ + " needs an integer in [1, " + std::to_string(kMaxQHeadsPerKv) + "], got " + std::to_string(n));
  return n;
}

void Flags::unknown() const {
  throw UsageError(flag_.rfind("-", 0) == 0 ? "unknown option " + flag_ : "unexpected argument '" + flag_ + "'");
}

bool read_target_flag(Flags& flags, KernelConfig& config) {
  if (flags.flag() == "--arch") config.arch = flags.number();
  else if (flags.flag() == "--backend") {
    const std::string name = flags.value();
    try {
      config.backend = backend_from_string(name);
    } catch (const Error& e) {
      throw UsageError(std::string("--") + e.what());  // "--backend 'x': must be one of ..."
    }
  } else return false;
  return true;
}

bool read_config_flag(Flags& flags, KernelConfig& config) {
  const std::string& f = flags.flag();
  if (read_target_flag(flags, config)) return true;
  if (f == "--dtype") {
    const std::string d = flags.value();
    if (d != "bf16" && d != "fp16") throw UsageError("--dtype must be bf16 or fp16, got '" + d + "'");
    config.dtype = d == "bf16" ? DType::bf16 : DType::fp16;
  } else if (f == "--d") config.head_dim = flags.number();
  else if (f == "--dv") config.head_dim_v = flags.number();
  else if (f == "--causal") config.causal = true;
  else if (f == "--lse") config.lse = true;
  else if (f == "--qh-per-kv") config.q_heads_per_kv = flags.q_heads_per_kv();
  else if (f == "--varlen") config.varlen = true;
  else if (f == "--paged") config.paged = true;
  else if (f == "--window") config.window = true;
  else if (f == "--softcap") config.softcap = true;
  else if (f == "--sinks") config.sinks = true;
  else if (f == "--decode") config.decode = true;
  else if (f == "--split") config.split = true;
  else return false;
  return true;
}

int target_arch(const KernelConfig& config) {
  if (config.arch) return config.arch;
  if (detail::driver_available()) {
    CUdevice dev = 0;
    FA4_CU(cuDeviceGet(&dev, 0));
    return detail::device_arch(dev);
  }
  return 100;
}

std::string cache_directory(const Options& options) {
  return options.cache_dir.empty() ? cache::default_cache_dir() : options.cache_dir;
}

DirectorySize directory_size(const std::string& dir) {
  DirectorySize size;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto bytes = it->file_size(ec);
    if (ec) continue;  // removed meanwhile
    size.kernels += it->path().extension() == ".cubin";
    size.bytes += bytes;
  }
  return size;
}

std::string describe_size(const DirectorySize& size) {
  std::ostringstream s;
  s << size.kernels << (size.kernels == 1 ? " kernel, " : " kernels, ");
  if (size.bytes < 1024 * 1024) s << size.bytes / 1024 << " KB";
  else s << std::fixed << std::setprecision(1) << size.bytes / (1024.0 * 1024.0) << " MB";
  return s.str();
}

}  // namespace fa4::cli
