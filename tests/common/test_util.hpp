// Shared helpers for the test suites: GPU availability, device memory, random data, dtype conversion.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fa4/fa4.hpp"
#include "runtime/driver.hpp"
#include "runtime/half.hpp"

namespace fa4::test {

// Skips the current test, printing SKIPPED and the reason, when no CUDA device can be used.
#define FA4_REQUIRE_GPU()                                                               \
  do {                                                                                  \
    if (!::fa4::detail::driver_available())                                             \
      GTEST_SKIP() << "SKIPPED: no CUDA device (" << ::fa4::detail::driver_unavailable_reason() << ")"; \
  } while (0)

// Skips unless device 0 is an sm_90 GPU: the tcgen05 emulation (sm_90a code) runs only there.
#define FA4_REQUIRE_SM90()                                                                              \
  do {                                                                                                  \
    FA4_REQUIRE_GPU();                                                                                  \
    CUdevice dev0 = 0;                                                                                  \
    FA4_CU(cuDeviceGet(&dev0, 0));                                                                      \
    if (const int arch = ::fa4::detail::device_arch(dev0); arch != 90)                                  \
      GTEST_SKIP() << "SKIPPED: the tcgen05 emulation runs on sm_90 devices, this one is sm_" << arch; \
  } while (0)

// Makes the primary context of `ordinal` current for the lifetime of the object.
class PrimaryContext {
 public:
  explicit PrimaryContext(int ordinal = 0);
  ~PrimaryContext();
  CUcontext get() const { return ctx_; }
  CUdevice device() const { return dev_; }

 private:
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

// Device allocation in the current context.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  template <class T> void upload(const std::vector<T>& v) { upload(v.data(), v.size() * sizeof(T)); }
  template <class T> std::vector<T> download(size_t count) const {
    std::vector<T> v(count);
    download(v.data(), count * sizeof(T));
    return v;
  }
  void fill_bytes(uint8_t value);  // synchronous memset

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// IEEE binary16 / bfloat16 conversions (round to nearest even), shared with the library.
using detail::bf16_to_float;
using detail::float_to_bf16;
using detail::float_to_fp16;
using detail::fp16_to_float;
using detail::from_half;
using detail::to_half;

// `count` random 16-bit values drawn uniformly from [-scale, scale].
std::vector<uint16_t> random_halves(DType dtype, size_t count, float scale, uint64_t seed);

// A bit pattern that is NaN in both bf16 and fp16, used to poison outputs before a kernel runs.
constexpr uint16_t kPoisonHalf = 0x7fff;

// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fa4::test

namespace fa4 {
// Parameterised tests print keys by name.
inline void PrintTo(const KernelKey& key, std::ostream* os) { *os << key.name(); }
}  // namespace fa4
