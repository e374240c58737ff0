#include "test_util.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace fa4::test {

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
void DeviceBuffer::fill_bytes(uint8_t value) { FA4_CU(cuMemsetD8(ptr_, value, bytes_)); }

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);         // NaN
  if (x >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);        // overflow -> inf
  if (x < 0x38800000) {                                                    // subnormal or zero
    const int shift = 113 - static_cast<int>(x >> 23);
    if (shift > 24) return static_cast<uint16_t>(sign);
    uint32_t mant = (x & 0x7fffff) | 0x800000;
    const uint32_t half_bit = 1u << (shift + 12);
    uint32_t r = mant >> (shift + 13);
    const uint32_t rem = mant & ((half_bit << 1) - 1);
    if (rem > half_bit || (rem == half_bit && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((x - 0x38000000) >> 13);
  const uint32_t rem = x & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  uint32_t u = exp == 31 ? (sign | 0x7f800000 | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint16_t> random_halves(DType dtype, size_t count, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> out(count);
  for (auto& v : out) v = to_half(dtype, dist(rng));
  return out;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "fa4rt-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
  std::filesystem::remove_all(path_, ec);
}

}  // namespace fa4::test
