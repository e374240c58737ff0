#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "fa4/error.hpp"

namespace fa4::detail {
namespace {

#define FA4_SYMBOL_NAME(name) #name
#define FA4_EXPANDED_SYMBOL_NAME(name) FA4_SYMBOL_NAME(name)

struct LoadedDriver {
  DriverApi api;
  std::string failure;  // empty when usable
};

const LoadedDriver& loaded() {
  static const LoadedDriver instance = [] {
    LoadedDriver d;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      d.failure = "no CUDA driver: dlopen(libcuda.so.1) failed";
      return d;
    }
#define FA4_LOAD_DRIVER_SYMBOL(name)                                                               \
  d.api.name = reinterpret_cast<decltype(d.api.name)>(dlsym(lib, FA4_EXPANDED_SYMBOL_NAME(name))); \
  if (!d.api.name && d.failure.empty())                                                            \
    d.failure = std::string("CUDA driver lacks ") + FA4_EXPANDED_SYMBOL_NAME(name);
    FA4_DRIVER_FUNCTIONS(FA4_LOAD_DRIVER_SYMBOL)
#undef FA4_LOAD_DRIVER_SYMBOL
    if (!d.failure.empty()) return d;
    if (CUresult r = d.api.cuInit(0); r != CUDA_SUCCESS) {
      const char* name = "?";
      d.api.cuGetErrorName(r, &name);
      d.failure = std::string("cuInit failed: ") + name;
      return d;
    }
    int count = 0;
    if (d.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
      d.failure = "the CUDA driver sees no device";
    return d;
  }();
  return instance;
}

}  // namespace

bool driver_available() { return loaded().failure.empty(); }

std::string driver_unavailable_reason() { return loaded().failure; }

const DriverApi& driver() {
  const LoadedDriver& d = loaded();
  if (!d.failure.empty()) throw Error(ErrorCode::cuda_error, d.failure);
  return d.api;
}

int device_arch(CUdevice device) {
  int major = 0, minor = 0;
  check_cu(driver().cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute");
  check_cu(driver().cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute");
  return major * 10 + minor;
}

void check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = "CUDA_ERROR_UNKNOWN";
  const char* text = "";
  const DriverApi& api = loaded().api;
  if (api.cuGetErrorName) api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(result, &text);
  throw Error(ErrorCode::cuda_error, std::string(what) + " failed: " + name + " (" + text + ")");
}

}  // namespace fa4::detail
