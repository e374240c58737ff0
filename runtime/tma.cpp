#include "runtime/tma.hpp"

#include <algorithm>

#include "fa4/error.hpp"
#include "runtime/driver.hpp"
#include "runtime/problem.hpp"

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
  if (t.heads_per_group) {
    if (t.heads_per_group < 1 || t.heads % t.heads_per_group)
      fail(t, "heads_per_group", "must divide heads (" + std::to_string(t.heads) + "), got " + std::to_string(t.heads_per_group));
    if (box.box_heads < 1 || box.box_heads > t.heads_per_group || box.box_heads > 256)
      fail(t, "box_heads", "must be in [1, heads_per_group], got " + std::to_string(box.box_heads));
  } else if (box.box_heads != 1) {
    fail(t, "box_heads", "must be 1 for a 4-D map, got " + std::to_string(box.box_heads));
  }
  if (box.col_boxes != 1 && (t.heads_per_group || box.col_boxes * box.box_cols != t.dim))
    fail(t, "col_boxes", "must be 1, or head dim / box_cols (" + std::to_string(t.dim) + " / " + std::to_string(box.box_cols) +
                             ") on a map without head groups, got " + std::to_string(box.col_boxes));
}

CUtensorMap make_tma_descriptor(const TmaTensor& t, const TmaBoxSpec& box) {
  check_tma_rules(t, box);
  const int64_t row_bytes = (t.dim * kElementBytes + 15) / 16 * 16;
  const cuuint64_t head_stride = stride_bytes(t.heads, t.head_stride, row_bytes);
  const cuuint64_t seq_stride = stride_bytes(t.seq, t.seq_stride, row_bytes);
  const cuuint64_t batch_stride = stride_bytes(t.batch, t.batch_stride, row_bytes);
  const auto u64 = [](int64_t v) { return static_cast<cuuint64_t>(v); };
  const auto u32 = [](int v) { return static_cast<cuuint32_t>(v); };
  cuuint32_t rank = 4;
  cuuint64_t dims[5] = {u64(t.dim), u64(t.heads), u64(t.seq), u64(t.batch), 1};
  cuuint64_t strides[4] = {head_stride, seq_stride, batch_stride, 0};
  cuuint32_t box_dims[5] = {u32(box.box_cols), 1, u32(box.box_rows), 1, 1};
  if (t.heads_per_group) {
    const int64_t g = t.heads_per_group;
    const cuuint64_t group_stride = g == t.heads ? head_stride * g : u64(t.head_stride * g * kElementBytes);
    rank = 5;
    const cuuint64_t d5[5] = {u64(t.dim), u64(g), u64(t.heads / g), u64(t.seq), u64(t.batch)};
    const cuuint64_t s5[4] = {g == 1 ? row_bytes : head_stride, group_stride, seq_stride, batch_stride};
    const cuuint32_t b5[5] = {u32(box.box_cols), u32(box.box_heads), 1, u32(box.box_rows), 1};
    std::copy(d5, d5 + 5, dims);
    std::copy(s5, s5 + 4, strides);
    std::copy(b5, b5 + 5, box_dims);
  } else if (box.col_boxes > 1) {  // the column boxes as a dimension of their own, outside the rows
    rank = 5;
    const cuuint64_t d5[5] = {u64(box.box_cols), u64(t.seq), u64(box.col_boxes), u64(t.heads), u64(t.batch)};
    const cuuint64_t s5[4] = {seq_stride, u64(box.box_cols * kElementBytes), head_stride, batch_stride};
    const cuuint32_t b5[5] = {u32(box.box_cols), u32(box.box_rows), u32(box.col_boxes), 1, 1};
    std::copy(d5, d5 + 5, dims);
    std::copy(s5, s5 + 4, strides);
    std::copy(b5, b5 + 5, box_dims);
  }
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMapSwizzle swizzle = box.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : box.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : box.swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                         : CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMap map;
  const CUresult result = driver().cuTensorMapEncodeTiled(
               &map, t.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank,
               const_cast<void*>(t.ptr), dims, strides, box_dims, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
               swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) check_cu(result, ("cuTensorMapEncodeTiled for " + t.name).c_str());  // message built only on failure
  return map;
}

int attention_maps(const Plan& plan, const Problem& problem, CUtensorMap* out) {
  const AttentionParams& p = problem.params;
  const int pack = plan.key.gqa_pack;
  // Paged K/V: boxes of one piece of a block inside a page (the kernel loads a block piece by piece).
  int page_log2 = 0;
  while (p.page_table && (int64_t{1} << page_log2) < p.page_size) ++page_log2;
  auto box = [&](const std::string& name) {
    for (const TmaBox& b : plan.tma)
      if (b.tensor == name) {
        const bool kv = name == "K" || name == "V";
        return TmaBoxSpec{b.box_cols, kv && p.page_table ? fa4k::paged_piece_rows(b.box_rows, page_log2) : b.box_rows,
                          b.swizzle_bytes, kv ? 1 : pack, b.col_boxes};
      }
    throw Error(ErrorCode::internal, "plan has no TMA box for " + name);
  };
  auto tensor = [&](const char* name, const void* ptr, int64_t batch, int64_t seq, int64_t heads, int64_t dim, const Strides& st,
                    int64_t group) {
    TmaTensor t;
    t.ptr = ptr;
    t.batch = batch;
    t.seq = seq;
    t.heads = heads;
    t.dim = dim;
    t.batch_stride = st.batch;
    t.seq_stride = st.seq;
    t.head_stride = st.head;
    t.heads_per_group = group;
    t.dtype = p.dtype;
    t.name = name;
    return t;
  };
  // Q and O as 5-D maps {dim, head in pack, head group, seq, batch}: one box = 128/pack tokens x pack heads.
  // Batch and rows of each side: dense [batch, seqlen]; ragged one batch of total rows (the kernel adds a
  // sequence's row offset to its coordinates); paged [num_pages, page_size].
  const bool ragged_q = p.cu_seqlens_q, ragged_k = p.cu_seqlens_k && !p.page_table;
  const int64_t q_batch = ragged_q ? 1 : p.batch, q_rows = ragged_q ? std::max<int64_t>(p.total_q, 1) : p.seqlen_q;
  const int64_t k_batch = p.page_table ? p.num_pages : ragged_k ? 1 : p.batch;
  const int64_t k_rows = p.page_table ? p.page_size : ragged_k ? std::max<int64_t>(p.total_k, 1) : p.seqlen_k;
  out[0] = make_tma_descriptor(tensor("q", p.q, q_batch, q_rows, p.heads_q, p.head_dim, p.q_stride, pack), box("Q"));
  out[1] = make_tma_descriptor(tensor("k", p.k, k_batch, k_rows, p.heads_kv, p.head_dim, p.k_stride, 0), box("K"));
  out[2] = make_tma_descriptor(tensor("v", p.v, k_batch, k_rows, p.heads_kv, p.head_dim_v, p.v_stride, 0), box("V"));
  out[3] = make_tma_descriptor(tensor("o", p.o, q_batch, q_rows, p.heads_q, p.head_dim_v, p.o_stride, pack), box("O"));
  return 4;
}

}  // namespace fa4::detail
