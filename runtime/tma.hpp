// TMA descriptors (CUtensorMap) for the [batch, seq, head, dim] tensors, built at run time.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "fa4/plan.hpp"

namespace fa4::detail {

// A tensor [batch, seq, head, dim] of 16-bit elements with element strides; dim is contiguous.
// heads_per_group = 0: a 4-D map, coordinates {dim, head, seq, batch}.
// heads_per_group = g >= 1: heads split into (heads / g groups, g heads), a 5-D map with coordinates
// {dim, head in group, group, seq, batch}; a box then holds rows (seq, head in group), seq-major, which is
// how GQA packing puts the q heads of one kv head into one tile.
struct TmaTensor {
  const void* ptr = nullptr;
  int64_t batch = 0, seq = 0, heads = 0, dim = 0;
  int64_t batch_stride = 0, seq_stride = 0, head_stride = 0;  // elements
  int64_t heads_per_group = 0;
  DType dtype = DType::bf16;
  std::string name;  // "q", "k", ... for error messages
};

// A box of box_rows sequence rows x box_heads heads x box_cols dim elements, swizzled.
struct TmaBoxSpec {
  int box_cols = 64;
  int box_rows = 128;
  int swizzle_bytes = 128;  // 0 (none), 32, 64, 128
  int box_heads = 1;        // 5-D maps only: heads of the group per box
  int col_boxes = 1;        // 4-D tensors only: > 1 (= dim / box_cols) makes a 5-D map {box col, seq, col box,
                            // head, batch} whose one copy brings every column box of box_rows rows, box after box
};

// Checks every rule of cuTensorMapEncodeTiled (global address 16-B aligned, byte strides multiples of 16
// and < 2^40, dims in [1, 2^32], box dims in [1, 256], inner box bytes a multiple of 16 and within the
// swizzle span) and throws Error(invalid_argument) naming the tensor, the field and the rule.
void check_tma_rules(const TmaTensor& tensor, const TmaBoxSpec& box);

// Builds the descriptor (after check_tma_rules). Out-of-bounds reads are zero-filled; stores clip at the
// tensor edge. Needs the driver.
CUtensorMap make_tma_descriptor(const TmaTensor& tensor, const TmaBoxSpec& box);

struct Problem;
// The four maps of the TMA kernels (sm90, sm100), in kernel-argument order q, k, v, o, from the Plan's
// boxes: K and V as 4-D maps (5-D when a box's col_boxes brings the whole row); Q and O as 5-D maps {dim,
// head in pack, head group, seq, batch}, so one box holds box_rows / gqa_pack tokens of the pack's q heads
// (GQA packing). A ragged q/o (or k/v) is one batch of total_q (total_k) rows; a paged cache num_pages
// batches of page_size rows, loaded in boxes of fa4k::paged_piece_rows rows. Returns 4.
int attention_maps(const Plan& plan, const Problem& problem, CUtensorMap* out);

}  // namespace fa4::detail
