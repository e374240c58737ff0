#include "verify/device.hpp"

#include <random>

namespace fa4::verify {

using detail::driver;

PrimaryContext::PrimaryContext(int ordinal) {
  FA4_CU(cuDeviceGet(&dev_, ordinal));
  FA4_CU(cuDevicePrimaryCtxRetain(&ctx_, dev_));
  FA4_CU(cuCtxSetCurrent(ctx_));
}

PrimaryContext::~PrimaryContext() {
  if (ctx_) driver().cuDevicePrimaryCtxRelease(dev_);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) { FA4_CU(cuMemAlloc(&ptr_, bytes ? bytes : 1)); }

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver().cuMemFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) { FA4_CU(cuMemcpyHtoD(ptr_, host, bytes)); }
void DeviceBuffer::download(void* host, size_t bytes) const { FA4_CU(cuMemcpyDtoH(host, ptr_, bytes)); }
// cuMemsetD8 is asynchronous for device memory (legacy stream): wait, so that it cannot land after a
// kernel enqueued next on a non-blocking stream.
void DeviceBuffer::fill_bytes(uint8_t value) {
  FA4_CU(cuMemsetD8(ptr_, value, bytes_));
  FA4_CU(cuCtxSynchronize());
}

std::vector<uint16_t> random_halves(DType dtype, size_t count, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> out(count);
  for (auto& v : out) v = to_half(dtype, dist(rng));
  return out;
}

}  // namespace fa4::verify
