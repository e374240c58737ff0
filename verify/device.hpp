// Device memory, contexts and random inputs for the checks (tests and `fa4rt selftest`).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "fa4/fa4.hpp"
#include "runtime/driver.hpp"
#include "runtime/half.hpp"

namespace fa4::verify {

// Makes the primary context of `ordinal` current for the lifetime of the object.
class PrimaryContext {
 public:
  explicit PrimaryContext(int ordinal = 0);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
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

}  // namespace fa4::verify
