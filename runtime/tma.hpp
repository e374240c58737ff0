// TMA descriptors (CUtensorMap) for the [batch, seq, head, dim] tensors, built at run time.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "fa4/plan.hpp"

namespace fa4::detail {

// A 4-D tensor [batch, seq, head, dim] of 16-bit elements with element strides; dim is contiguous.
struct TmaTensor {
  const void* ptr = nullptr;
  int64_t batch = 0, seq = 0, heads = 0, dim = 0;
  int64_t batch_stride = 0, seq_stride = 0, head_stride = 0;  // elements
  DType dtype = DType::bf16;
  std::string name;  // "q", "k", ... for error messages
};

// A box of box_rows sequence rows x box_cols dim elements of one (batch, head), swizzled.
struct TmaBoxSpec {
  int box_cols = 64;
  int box_rows = 128;
  int swizzle_bytes = 128;  // 0 (none), 32, 64, 128
};

// Checks every rule of cuTensorMapEncodeTiled (global address 16-B aligned, byte strides multiples of 16
// and < 2^40, dims in [1, 2^32], box dims in [1, 256], inner box bytes a multiple of 16 and within the
// swizzle span) and throws Error(invalid_argument) naming the tensor, the field and the rule.
void check_tma_rules(const TmaTensor& tensor, const TmaBoxSpec& box);

// Builds the descriptor (after check_tma_rules). Coordinates are {dim, head, seq, batch}; out-of-bounds
// reads are zero-filled; stores clip at the tensor edge. Needs the driver.
CUtensorMap make_tma_descriptor(const TmaTensor& tensor, const TmaBoxSpec& box);

}  // namespace fa4::detail
