// Small helpers shared by the C++ benchmarks (the test utilities need GoogleTest, the benches do not).
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/driver.hpp"

namespace fa4::bench {

// Device 0's primary context made current, and a non-blocking stream on it; null (after printing SKIPPED and
// the reason) when no CUDA device can be used.
inline CUstream open_device_stream() {
  if (!detail::driver_available()) {
    std::printf("SKIPPED: no CUDA device (%s)\n", detail::driver_unavailable_reason().c_str());
    return nullptr;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  FA4_CU(cuDeviceGet(&dev, 0));
  FA4_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  FA4_CU(cuCtxSetCurrent(ctx));
  CUstream stream = nullptr;
  FA4_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  return stream;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A fresh directory under $TMPDIR (or /tmp), removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fa4rt-bench-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fa4::bench
