#include "runtime/tma.hpp"

#include "fa4/error.hpp"
#include "runtime/driver.hpp"

namespace fa4::detail {
namespace {

[[noreturn]] void fail(const TmaTensor& t, const std::string& field, const std::string& rule) {
  throw Error(ErrorCode::invalid_argument, t.name + ": TMA " + field + " " + rule);
}

constexpr int64_t kElementBytes = 2;
constexpr int64_t kMaxStrideBytes = int64_t{1} << 40;
constexpr int64_t kMaxDim = int64_t{1} << 32;

// A dimension of extent 1 is never stepped, so its stride is free; TMA still wants a valid one.
int64_t stride_bytes(int64_t extent, int64_t stride_elements, int64_t fallback_bytes) {
  return extent == 1 ? fallback_bytes : stride_elements * kElementBytes;
}

}  // namespace

void check_tma_rules(const TmaTensor& t, const TmaBoxSpec& box) {
  if (!t.ptr) fail(t, "global address", "must not be null");
  if (reinterpret_cast<uintptr_t>(t.ptr) % 16) fail(t, "global address", "must be 16-byte aligned");
  const int64_t dims[4] = {t.dim, t.heads, t.seq, t.batch};
  const char* dim_names[4] = {"dim", "heads", "seq", "batch"};
  for (int i = 0; i < 4; ++i)
    if (dims[i] < 1 || dims[i] > kMaxDim)
      fail(t, std::string("global ") + dim_names[i], "must be in [1, 2^32], got " + std::to_string(dims[i]));
  const int64_t strides[3] = {t.head_stride, t.seq_stride, t.batch_stride};
  const char* stride_names[3] = {"head_stride", "seq_stride", "batch_stride"};
  for (int i = 0; i < 3; ++i) {
    if (dims[i + 1] == 1) continue;
    const int64_t bytes = strides[i] * kElementBytes;
    if (bytes <= 0 || bytes % 16 || bytes >= kMaxStrideBytes)
      fail(t, stride_names[i], "must be a positive multiple of 16 bytes below 2^40, got " + std::to_string(bytes) + " bytes");
  }
  if (box.box_cols < 1 || box.box_cols > 256 || box.box_rows < 1 || box.box_rows > 256)
    fail(t, "box", "dims must be in [1, 256], got " + std::to_string(box.box_cols) + " x " + std::to_string(box.box_rows));
  const int inner_bytes = box.box_cols * static_cast<int>(kElementBytes);
  if (inner_bytes % 16) fail(t, "box_cols", "* 2 bytes must be a multiple of 16, got " + std::to_string(inner_bytes));
  if (box.swizzle_bytes != 0 && box.swizzle_bytes != 32 && box.swizzle_bytes != 64 && box.swizzle_bytes != 128)
    fail(t, "swizzle", "must be 0, 32, 64 or 128 bytes, got " + std::to_string(box.swizzle_bytes));
  if (box.swizzle_bytes && inner_bytes > box.swizzle_bytes)
    fail(t, "box_cols", "* 2 bytes (" + std::to_string(inner_bytes) + ") must not exceed the " +
                            std::to_string(box.swizzle_bytes) + "-byte swizzle span");
  if (box.box_cols > t.dim) fail(t, "box_cols", "must not exceed the head dim " + std::to_string(t.dim));
}

CUtensorMap make_tma_descriptor(const TmaTensor& t, const TmaBoxSpec& box) {
  check_tma_rules(t, box);
  const int64_t row_bytes = (t.dim * kElementBytes + 15) / 16 * 16;
  cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.dim), static_cast<cuuint64_t>(t.heads),
                        static_cast<cuuint64_t>(t.seq), static_cast<cuuint64_t>(t.batch)};
  cuuint64_t strides[3] = {static_cast<cuuint64_t>(stride_bytes(t.heads, t.head_stride, row_bytes)),
                           static_cast<cuuint64_t>(stride_bytes(t.seq, t.seq_stride, row_bytes)),
                           static_cast<cuuint64_t>(stride_bytes(t.batch, t.batch_stride, row_bytes))};
  cuuint32_t box_dims[4] = {static_cast<cuuint32_t>(box.box_cols), 1, static_cast<cuuint32_t>(box.box_rows), 1};
  cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMapSwizzle swizzle = box.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : box.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : box.swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                         : CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMap map;
  check_cu(driver().cuTensorMapEncodeTiled(
               &map, t.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
               const_cast<void*>(t.ptr), dims, strides, box_dims, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
               swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           ("cuTensorMapEncodeTiled for " + t.name).c_str());
  return map;
}

}  // namespace fa4::detail
