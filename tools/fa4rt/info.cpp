// `fa4rt info`: what this machine and these settings give the library.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <set>

#include "runtime/driver.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/backend.hpp"
#include "tools/fa4rt/cli.hpp"

namespace fa4::cli {
namespace {

// Compute capabilities of the devices the driver sees (empty without a usable driver).
std::vector<int> print_devices() {
  std::vector<int> archs;
  if (!detail::driver_available()) {
    std::cout << "CUDA driver: not usable: " << detail::driver_unavailable_reason() << "\n";
    return archs;
  }
  const detail::DriverApi& d = detail::driver();
  int version = 0, count = 0;
  FA4_CU(cuDriverGetVersion(&version));
  FA4_CU(cuDeviceGetCount(&count));
  std::cout << "CUDA driver: " << version / 1000 << "." << version % 1000 / 10 << ", " << count
            << (count == 1 ? " device\n" : " devices\n");
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    char name[256] = {};
    int sms = 0;
    size_t memory = 0;
    detail::check_cu(d.cuDeviceGet(&dev, i), "cuDeviceGet");
    detail::check_cu(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    detail::check_cu(d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");
    detail::check_cu(d.cuDeviceTotalMem(&memory, dev), "cuDeviceTotalMem");
    const int arch = detail::device_arch(dev);
    std::cout << "  device " << i << ": " << name << ", sm_" << arch << ", " << sms << " SMs, " << std::fixed
              << std::setprecision(1) << memory / (1024.0 * 1024.0 * 1024.0) << " GiB\n";
    archs.push_back(arch);
  }
  return archs;
}

void print_cache(const Options& options) {
  if (!options.disk_cache) {
    std::cout << "disk cache: off (FA4_DISK_CACHE=0)\n";
    return;
  }
  const std::string dir = cache_directory(options);
  if (dir.empty()) {
    std::cout << "disk cache: none (set FA4_CACHE_DIR, XDG_CACHE_HOME or HOME)\n";
    return;
  }
  const char* source = std::getenv("FA4_CACHE_DIR") && *std::getenv("FA4_CACHE_DIR")   ? "FA4_CACHE_DIR"
                       : std::getenv("XDG_CACHE_HOME") && *std::getenv("XDG_CACHE_HOME") ? "XDG_CACHE_HOME"
                                                                                       : "HOME";
  std::error_code ec;
  std::cout << "disk cache: " << dir << " (from " << source << "; "
            << (std::filesystem::exists(dir, ec) ? describe_size(directory_size(dir)) : std::string("not created yet"))
            << ")\n";
}

// Whether a device of `arch` runs kernels of `backend` (the backend's own rule, which run() checks).
bool runnable(Backend backend, int arch) { return detail::backend_of(backend).cannot_run_on(arch).empty(); }

// The backend run() would choose for each supported head-dim pair on each arch. Backend selection depends on
// the arch and the head dims, so the eight dtype x causal x LSE variants share a row unless they differ.
void print_backends(const Options& options, const std::vector<int>& archs) {
  std::cout << "backend chosen (FA4_BACKEND=" << to_string(options.backend)
            << ") per configuration, bf16/fp16, causal or not, with or without LSE:\n"
            << "  head dims";
  for (size_t i = 0; i < archs.size(); ++i)
    std::cout << "  " << std::setw(i + 1 < archs.size() ? 16 : 0) << std::left << "sm_" + std::to_string(archs[i]);
  std::cout << "\n";
  bool any_unsupported = false;
  for (const HeadDims& dims : supported_head_dims()) {
    std::cout << "  " << std::setw(9) << std::left
              << (dims.head_dim == dims.head_dim_v ? std::to_string(dims.head_dim)
                                                   : std::to_string(dims.head_dim) + "/" + std::to_string(dims.head_dim_v));
    for (size_t i = 0; i < archs.size(); ++i) {
      const int arch = archs[i];
      std::set<std::string> cells;
      for (DType dtype : {DType::bf16, DType::fp16})
        for (bool causal : {false, true})
          for (bool lse : {false, true}) {
            KernelConfig c;
            c.dtype = dtype;
            c.head_dim = dims.head_dim;
            c.head_dim_v = dims.head_dim_v;
            c.causal = causal;
            c.lse = lse;
            c.backend = options.backend;
            const KernelKey key = detail::key_for_config(c, arch);
            const bool ok = detail::supports(key, nullptr) && runnable(key.backend, arch);
            any_unsupported |= !ok;
            cells.insert(ok ? to_string(key.backend) : std::string("unsupported"));
          }
      std::string cell;
      for (const std::string& s : cells) cell += (cell.empty() ? "" : "|") + s;
      std::cout << "  " << std::setw(i + 1 < archs.size() ? 16 : 0) << std::left << cell;
    }
    std::cout << "\n";
  }
  if (any_unsupported)
    std::cout << "  unsupported: the chosen backend has no kernel for these head dims on this arch; run() raises "
                 "fa4::Error (unsupported)\n";
  std::cout << std::right;
}

}  // namespace

const char kInfoUsage[] =
    "usage: fa4rt info\n"
    "\n"
    "Prints the library and NVRTC versions, the CUDA driver version and each device (name, arch, SMs,\n"
    "memory) or why there is none, the disk cache directory and its size, the options from the FA4_*\n"
    "variables, and the backend run() would choose for each supported configuration on each device's arch\n"
    "(on sm_100 and sm_90 when there is no device). Needs no GPU.\n";

int info(const std::vector<std::string>& args) {
  Flags flags(args);
  while (flags.next()) flags.unknown();
  const Options options = Options::from_env();
  std::cout << "fa4rt " << version() << ", NVRTC " << detail::nvrtc_version() << "\n";
  std::vector<int> archs = print_devices();
  std::set<int> seen;
  archs.erase(std::remove_if(archs.begin(), archs.end(), [&](int a) { return !seen.insert(a).second; }), archs.end());
  if (archs.empty()) archs = {100, 90};
  print_cache(options);
  std::cout << "options: backend " << to_string(options.backend) << ", JIT " << (options.allow_jit ? "on" : "off (FA4_NO_JIT)")
            << ", self-check " << (options.self_check ? "on" : "off") << ", compile threads "
            << (options.max_compile_threads ? std::to_string(options.max_compile_threads) : std::string("auto")) << "\n";
  print_backends(options, archs);
  return 0;
}

}  // namespace fa4::cli
