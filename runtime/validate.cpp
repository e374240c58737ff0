// Every rule an attention call must satisfy, checked before anything is launched or written.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/driver.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/problem.hpp"

namespace fa4::detail {
namespace {

constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;  // kernel arguments are 32-bit
constexpr float kLog2e = 1.4426950408889634f;          // make_kernel_args: scale_log2 = softmax_scale * log2(e)

[[noreturn]] void fail(const std::string& field, const std::string& rule, ErrorCode code = ErrorCode::invalid_argument) {
  throw Error(code, field + ": " + rule);
}

std::string show(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

void require_positive(const char* field, int64_t value) {
  if (value <= 0) fail(field, "must be > 0, got " + std::to_string(value));
}

// head_dim and head_dim_v (0 already resolved to head_dim) against the one table.
void check_head_dims(int64_t head_dim, int64_t head_dim_v) {
  bool head_dim_known = false;
  std::string head_dims;  // "32, 64, ..." from the one table
  for (const HeadDims& h : supported_head_dims()) {
    head_dim_known |= h.head_dim == head_dim;
    if (h.head_dim == h.head_dim_v) head_dims += (head_dims.empty() ? "" : ", ") + std::to_string(h.head_dim);
  }
  if (!head_dim_known)
    fail("head_dim", "must be one of " + head_dims + ", got " + std::to_string(head_dim), ErrorCode::unsupported);
  if (!head_dims_supported(head_dim, head_dim_v))
    fail("head_dim_v", "must equal head_dim, or be 128 with head_dim 192, got " + std::to_string(head_dim_v) +
                           " with head_dim " + std::to_string(head_dim), ErrorCode::unsupported);
}

// One [batch, seq, head, dim] tensor as the rules see it.
struct TensorView {
  const char* name;
  const void* ptr;
  int64_t extent[4];  // batch, seq, head, dim
  int64_t stride[3];  // batch, seq, head (elements); dim stride is 1
};

struct ByteRange {
  uintptr_t first = 0, last = 0;  // inclusive
};

void check_pointer(const char* field, const void* ptr, size_t alignment) {
  if (!ptr) fail(field, "must not be null");
  if (reinterpret_cast<uintptr_t>(ptr) % alignment)
    fail(field, "must be " + std::to_string(alignment) + "-byte aligned (TMA and 16-byte vector loads)");
}

// Checks strides and returns the byte range the tensor spans. Rules: strides >= 0; rows start 16-byte
// aligned (strides of dimensions longer than 1 are multiples of 8 elements); no two elements share an
// address (sorted by stride, each stride covers the span of the faster dimensions); no overflow.
ByteRange check_tensor(const TensorView& t) {
  static const char* dim_names[3] = {"batch", "seq", "head"};
  const std::string base = std::string(t.name) + "_stride.";
  struct Dim {
    int64_t extent, stride;
    const char* name;
  } dims[3];
  for (int i = 0; i < 3; ++i) {
    const std::string field = base + dim_names[i];
    if (t.stride[i] < 0) fail(field, "must be >= 0, got " + std::to_string(t.stride[i]));
    if (t.extent[i] > 1 && t.stride[i] % 8)
      fail(field, "must be a multiple of 8 elements (16 bytes) so rows stay 16-byte aligned, got " +
                      std::to_string(t.stride[i]));
    if (t.extent[i] > 1 && t.stride[i] >= (int64_t{1} << 39))
      fail(field, "must be below 2^39 elements (TMA stride limit 2^40 bytes), got " + std::to_string(t.stride[i]));
    dims[i] = {t.extent[i], t.stride[i], dim_names[i]};
  }
  // Non-overlap: walk dimensions from the smallest stride up; each must step past everything before it.
  Dim order[3] = {dims[0], dims[1], dims[2]};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      if (order[j].stride < order[i].stride) std::swap(order[i], order[j]);
  int64_t span = t.extent[3];  // elements covered so far (the contiguous head dim)
  for (const Dim& d : order) {
    if (d.extent == 1) continue;
    if (d.stride < span)
      fail(base + d.name, "overlaps: stride " + std::to_string(d.stride) + " is smaller than the " +
                              std::to_string(span) + " elements spanned by the faster dimensions");
    int64_t reach = 0;
    if (__builtin_mul_overflow(d.stride, d.extent - 1, &reach) || __builtin_add_overflow(reach, span, &span))
      fail(base + d.name, "offsets overflow 64 bits");
  }
  const int64_t last_element = span - 1;
  int64_t last_byte = 0;
  uintptr_t end = 0;
  if (__builtin_mul_overflow(last_element, int64_t{2}, &last_byte) ||
      __builtin_add_overflow(reinterpret_cast<uintptr_t>(t.ptr), static_cast<uintptr_t>(last_byte) + 1, &end))
    fail(std::string(t.name), "the tensor's last byte lies beyond the 64-bit address space");
  return {reinterpret_cast<uintptr_t>(t.ptr), end - 1};
}

bool overlaps(ByteRange a, ByteRange b) { return a.first <= b.last && b.first <= a.last; }

// The strides all-zero stands for. Sizes alone may reach 2^31 each, so seq * heads * dim can overflow.
Strides contiguous(const char* field, int64_t seq, int64_t heads, int64_t dim) {
  int64_t row = 0, batch = 0;
  if (__builtin_mul_overflow(heads, dim, &row) || __builtin_mul_overflow(row, seq, &batch))
    fail(field, "all-zero means contiguous, but the contiguous batch stride seq * heads * dim overflows 64 bits, got " +
                    std::to_string(seq) + " * " + std::to_string(heads) + " * " + std::to_string(dim));
  return {batch, row, dim};
}

bool all_zero(const Strides& s) { return s.batch == 0 && s.seq == 0 && s.head == 0; }

}  // namespace

// total_q / total_k (`side` "q" or "k"): with cu_seqlens_<side>, the packed rows, in [0, 2^31) and at most
// batch * seqlen_<side> (seqlen_<side> is the longest sequence); without, 0.
void check_total(const std::string& side, bool ragged, int64_t total, int64_t dense_rows) {
  const std::string field = "total_" + side, cu = "cu_seqlens_" + side;
  if (!ragged) {
    if (total) fail(field, "is set but " + cu + " is null (" + field + " counts the rows of a ragged batch)");
    return;
  }
  if (total < 0 || total > kMaxSize) fail(field, "must be in [0, 2^31) with " + cu + ", got " + std::to_string(total));
  if (total > dense_rows)
    fail(field, "exceeds batch * seqlen_" + side + " (" + std::to_string(dense_rows) + "): some sequence would be longer than seqlen_" +
                            side + ", which must be the longest, got " + std::to_string(total));
}

Problem validate(const AttentionParams& in) {
  Problem problem;
  AttentionParams& p = problem.params;
  p = in;

  if (p.dtype != DType::bf16 && p.dtype != DType::fp16)
    fail("dtype", "must be bf16 or fp16, got enum value " + std::to_string(static_cast<int>(p.dtype)));
  require_positive("batch", p.batch);
  require_positive("seqlen_q", p.seqlen_q);
  require_positive("seqlen_k", p.seqlen_k);
  require_positive("heads_q", p.heads_q);
  require_positive("heads_kv", p.heads_kv);
  require_positive("head_dim", p.head_dim);
  if (p.head_dim_v < 0) fail("head_dim_v", "must be >= 0 (0 means head_dim), got " + std::to_string(p.head_dim_v));
  if (p.head_dim_v == 0) p.head_dim_v = p.head_dim;
  for (auto [field, value] : {std::pair<const char*, int64_t>{"seqlen_q", p.seqlen_q}, {"seqlen_k", p.seqlen_k},
                              {"batch", p.batch}, {"heads_q", p.heads_q}})
    if (value > kMaxSize) fail(field, "must be below 2^31, got " + std::to_string(value));
  // Tighter, Plan-dependent limits of the kernels' 32-bit index arithmetic: check_index_range (plan.cpp).

  check_head_dims(p.head_dim, p.head_dim_v);
  if (p.heads_q % p.heads_kv)
    fail("heads_q", "must be a multiple of heads_kv (" + std::to_string(p.heads_kv) + "), got " + std::to_string(p.heads_q));
  problem.q_heads_per_kv = static_cast<int>(p.heads_q / p.heads_kv);

  // Negative scales (and -0) are rejected: the kernels subtract the row maximum of the raw logits, which is
  // the maximum of the scaled ones only when the scale is positive. The kernels multiply logits by
  // softmax_scale * log2(e) in fp32, so that product must be finite too.
  if (!std::isfinite(p.softmax_scale) || std::signbit(p.softmax_scale))
    fail("softmax_scale", "must be finite and >= 0, and not -0 (0 means 1/sqrt(head_dim)), got " + show(p.softmax_scale));
  if (!std::isfinite(p.softmax_scale * kLog2e))
    fail("softmax_scale", "softmax_scale * log2(e) must be finite in fp32 (the kernels' exp2 scale), so at most " +
                              show(FLT_MAX / kLog2e) + ", got " + show(p.softmax_scale));
  if (p.softmax_scale == 0) p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));

  // Variants.
  for (auto [field, side] : {std::pair<const char*, int64_t>{"window_left", p.window_left}, {"window_right", p.window_right}})
    if (side < -1 || side > kMaxSize)
      fail(field, "must be -1 (unbounded) or in [0, 2^31), got " + std::to_string(side));
  if (p.causal && p.window_right > 0)
    fail("window_right", "must be -1 or 0 with causal (causal is window_right 0), got " + std::to_string(p.window_right));
  if (!std::isfinite(p.softcap) || p.softcap < 0 || !std::isfinite(kLog2e * p.softcap))
    fail("softcap", "must be 0 (off) or positive with softcap * log2(e) finite in fp32, got " + show(p.softcap));
  if (p.softcap > 0 && !std::isfinite(p.softmax_scale / p.softcap))
    fail("softcap", "softmax_scale / softcap must be finite in fp32, got softcap " + show(p.softcap));
  if (p.sinks) check_pointer("sinks", p.sinks, 4);
  // With causal the right side adds nothing (it is -1 or 0), so a causal problem is a window only with a left
  // side: validating the resolved params again (the self-check does) gives the same kernel.
  problem.window = p.window_left >= 0 || (p.window_right >= 0 && !p.causal);
  if (p.causal) p.window_right = 0;  // resolved: causal is a right side of 0, the one value the kernels read
  problem.softcap = p.softcap > 0;
  problem.sinks = p.sinks != nullptr;

  check_pointer("q", p.q, 16);
  check_pointer("k", p.k, 16);
  check_pointer("v", p.v, 16);
  check_pointer("o", p.o, 16);
  if (p.return_lse && !p.lse) fail("lse", "must not be null when return_lse is set");
  if (!p.return_lse && p.lse) fail("lse", "is set but return_lse is false; set return_lse to write it");

  // Serving shapes: the extents q/o and k/v span ([batch, seq] dense, [1, total] ragged, [pages, page_size]
  // paged); what lives on the device (offsets, page indices, used lengths) is not read here.
  const bool ragged_q = p.cu_seqlens_q != nullptr, ragged_k = p.cu_seqlens_k != nullptr, paged = p.page_table != nullptr;
  problem.varlen = ragged_q || ragged_k || p.seqused_k;
  problem.paged = paged;
  for (auto [field, ptr] : {std::pair<const char*, const void*>{"cu_seqlens_q", p.cu_seqlens_q}, {"cu_seqlens_k", p.cu_seqlens_k},
                            {"seqused_k", p.seqused_k}, {"page_table", p.page_table}})
    if (ptr) check_pointer(field, ptr, 4);
  int64_t q_batch = p.batch, q_seq = p.seqlen_q, kv_batch = p.batch, kv_seq = p.seqlen_k;
  check_total("q", ragged_q, p.total_q, p.batch * p.seqlen_q);
  if (ragged_q) q_batch = 1, q_seq = std::max<int64_t>(p.total_q, 1);
  if (paged) {
    if (p.page_size < 16 || p.page_size > 256 || (p.page_size & (p.page_size - 1)))
      fail("page_size", "must be a power of two from 16 to 256 with page_table, got " + std::to_string(p.page_size));
    require_positive("num_pages", p.num_pages);
    require_positive("max_pages_per_seq", p.max_pages_per_seq);
    if (p.num_pages > kMaxSize) fail("num_pages", "must be below 2^31, got " + std::to_string(p.num_pages));
    if (p.seqlen_k > p.max_pages_per_seq * p.page_size)
      fail("seqlen_k", "the longest sequence's keys must fit its page-table row: at most max_pages_per_seq * page_size = " +
                           std::to_string(p.max_pages_per_seq * p.page_size) + ", got " + std::to_string(p.seqlen_k));
    if (p.total_k) fail("total_k", "is set with page_table (paged keys have no packed rows; cu_seqlens_k gives lengths)");
    kv_batch = p.num_pages, kv_seq = p.page_size;
  } else {
    if (p.page_size || p.num_pages || p.max_pages_per_seq)
      fail("page_table", "is null but page_size, num_pages or max_pages_per_seq is set");
    check_total("k", ragged_k, p.total_k, p.batch * p.seqlen_k);
    if (ragged_k) kv_batch = 1, kv_seq = std::max<int64_t>(p.total_k, 1);
  }
  problem.rows = ragged_q ? p.total_q : p.batch * p.seqlen_q;
  if (p.num_splits < 0 || p.num_splits > kMaxSplits)
    fail("num_splits", "must be in [0, " + std::to_string(kMaxSplits) + "] (0: chosen per sequence, 1: none), got " +
                           std::to_string(p.num_splits));
  if (p.split_by_batch && p.num_splits != 0)
    fail("split_by_batch", "applies only to num_splits 0 (the library's choice), got num_splits " + std::to_string(p.num_splits));
  if (p.workspace && reinterpret_cast<uintptr_t>(p.workspace) % 256) fail("workspace", "must be 256-byte aligned");
  if (!p.workspace && p.workspace_bytes) fail("workspace", "is null but workspace_bytes is set");
  // Decode sequences (kDecodeMaxRows packed rows at most) run on the decode kernel. A ragged batch whose
  // longest sequence is longer may hold some too: both kernels run, each on its own sequences, so a
  // sequence's kernel (and its result) never depends on the rest of the batch.
  problem.decode = decode_shape(p.seqlen_q, problem.q_heads_per_kv);
  problem.mixed = !problem.decode && ragged_q && decode_shape(1, problem.q_heads_per_kv);
  problem.decode_seqlen_q = problem.decode || problem.mixed ? static_cast<int>(kDecodeMaxRows / problem.q_heads_per_kv) : 0;
  // A split needs the workspace; with num_splits 0 and none given, nothing is split, and with a workspace
  // only decode sequences are.
  problem.split = p.num_splits > 1 || (p.num_splits == 0 && p.workspace && problem.decode_seqlen_q > 0);

  if (all_zero(p.q_stride)) p.q_stride = contiguous("q_stride", q_seq, p.heads_q, p.head_dim);
  if (all_zero(p.k_stride)) p.k_stride = contiguous("k_stride", kv_seq, p.heads_kv, p.head_dim);
  if (all_zero(p.v_stride)) p.v_stride = contiguous("v_stride", kv_seq, p.heads_kv, p.head_dim_v);
  if (all_zero(p.o_stride)) p.o_stride = contiguous("o_stride", q_seq, p.heads_q, p.head_dim_v);

  auto view = [](const char* name, const void* ptr, int64_t b, int64_t s, int64_t h, int64_t d, const Strides& st) {
    return TensorView{name, ptr, {b, s, h, d}, {st.batch, st.seq, st.head}};
  };
  const ByteRange q = check_tensor(view("q", p.q, q_batch, q_seq, p.heads_q, p.head_dim, p.q_stride));
  const ByteRange k = check_tensor(view("k", p.k, kv_batch, kv_seq, p.heads_kv, p.head_dim, p.k_stride));
  const ByteRange v = check_tensor(view("v", p.v, kv_batch, kv_seq, p.heads_kv, p.head_dim_v, p.v_stride));
  const ByteRange o = check_tensor(view("o", p.o, q_batch, q_seq, p.heads_q, p.head_dim_v, p.o_stride));
  for (auto [name, range] : {std::pair<const char*, ByteRange>{"q", q}, {"k", k}, {"v", v}})
    if (overlaps(o, range)) fail("o", std::string("must not overlap input ") + name + " (outputs may not alias inputs)");

  if (p.return_lse) {
    check_pointer("lse", p.lse, 4);
    int64_t count = 0;
    if (__builtin_mul_overflow(p.heads_q, problem.rows, &count) || count > (int64_t{1} << 60))
      fail("lse", "heads_q * rows overflows");
    const ByteRange lse{reinterpret_cast<uintptr_t>(p.lse), reinterpret_cast<uintptr_t>(p.lse) + count * 4 - 1};
    if (lse.last < lse.first) fail("lse", "the buffer's last byte lies beyond the 64-bit address space");
    for (auto [name, range] : {std::pair<const char*, ByteRange>{"q", q}, {"k", k}, {"v", v}, {"o", o}})
      if (overlaps(lse, range)) fail("lse", std::string("must not overlap ") + name);
  }
  return problem;
}

MergeProblem validate_merge(const MergeParams& in) {
  MergeProblem problem;
  MergeParams& p = problem.params;
  p = in;
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16)
    fail("dtype", "must be bf16 or fp16, got enum value " + std::to_string(static_cast<int>(p.dtype)));
  if (p.states.size() < 2 || p.states.size() > static_cast<size_t>(fa4k::kMaxCombinePointers))
    fail("states", "must hold 2 to " + std::to_string(fa4k::kMaxCombinePointers) + " states, got " + std::to_string(p.states.size()));
  require_positive("batch", p.batch);
  require_positive("seqlen", p.seqlen);
  require_positive("heads", p.heads);
  if (!head_dims_supported(p.head_dim_v, p.head_dim_v))
    fail("head_dim_v", "must be one of 32, 64, 96, 128, 192, 256, got " + std::to_string(p.head_dim_v), ErrorCode::unsupported);
  for (auto [field, value] : {std::pair<const char*, int64_t>{"batch", p.batch}, {"seqlen", p.seqlen}, {"heads", p.heads}})
    if (value > kMaxSize) fail(field, "must be below 2^31, got " + std::to_string(value));
  const bool ragged = p.cu_seqlens != nullptr;
  if (ragged) {
    check_pointer("cu_seqlens", p.cu_seqlens, 4);
    if (p.total < 0 || p.total > p.batch * p.seqlen)
      fail("total", "must be in [0, batch * seqlen] with cu_seqlens, got " + std::to_string(p.total));
  } else if (p.total) {
    fail("total", "is set but cu_seqlens is null");
  }
  problem.rows = ragged ? p.total : p.batch * p.seqlen;
  const int64_t batch = ragged ? 1 : p.batch, seq = ragged ? std::max<int64_t>(p.total, 1) : p.seqlen;
  if (all_zero(p.state_stride)) p.state_stride = contiguous("state_stride", seq, p.heads, p.head_dim_v);
  if (all_zero(p.o_stride)) p.o_stride = contiguous("o_stride", seq, p.heads, p.head_dim_v);
  auto tensor = [&](const char* name, const void* ptr, const Strides& st) {
    return check_tensor(TensorView{name, ptr, {batch, seq, p.heads, p.head_dim_v}, {st.batch, st.seq, st.head}});
  };
  check_pointer("o", p.o, 16);
  const ByteRange o = tensor("o", p.o, p.o_stride);
  for (size_t s = 0; s < p.states.size(); ++s) {
    const std::string field = "states[" + std::to_string(s) + "]";
    check_pointer((field + ".o").c_str(), p.states[s].o, 16);
    check_pointer((field + ".lse").c_str(), p.states[s].lse, 4);
    if (overlaps(o, tensor("state", p.states[s].o, p.state_stride)))
      fail("o", "must not overlap " + field + ".o (the merge reads every state while it writes)");
  }
  if (p.lse) check_pointer("lse", p.lse, 4);
  return problem;
}

void validate_config(const KernelConfig& c) {
  if (c.dtype != DType::bf16 && c.dtype != DType::fp16)
    fail("dtype", "must be bf16 or fp16, got enum value " + std::to_string(static_cast<int>(c.dtype)));
  const int backend = static_cast<int>(c.backend);
  if (backend < static_cast<int>(Backend::automatic) || backend > static_cast<int>(kLastBackend))
    fail("backend", "must be automatic, portable, sm90, sm100 or sm100_emulated, got enum value " + std::to_string(backend));
  if (c.head_dim <= 0) fail("head_dim", "must be > 0, got " + std::to_string(c.head_dim));
  if (c.head_dim_v < 0) fail("head_dim_v", "must be >= 0 (0 means head_dim), got " + std::to_string(c.head_dim_v));
  check_head_dims(c.head_dim, c.head_dim_v ? c.head_dim_v : c.head_dim);
  if (c.q_heads_per_kv < 1 || c.q_heads_per_kv > kMaxQHeadsPerKv)
    fail("q_heads_per_kv", "must be in [1, " + std::to_string(kMaxQHeadsPerKv) + "] (heads_q / heads_kv of the runs it prepares), got " +
                               std::to_string(c.q_heads_per_kv));
  if (c.decode && !decode_shape(1, c.q_heads_per_kv))
    fail("decode", "needs q_heads_per_kv <= " + std::to_string(kDecodeMaxRows) + " (decode tiles hold at most " +
                       std::to_string(kDecodeMaxRows) + " rows per kv head), got q_heads_per_kv " + std::to_string(c.q_heads_per_kv));
  if (c.arch < 0)
    fail("arch", "must be 0 (the current device) or a compute capability x10 such as 80, 90 or 100, got " + std::to_string(c.arch));
  if (c.arch > 0 && c.arch < 80)
    fail("arch", "must be 80 or newer (every kernel needs sm_80's mma.sync and cp.async), got " + std::to_string(c.arch),
         ErrorCode::unsupported);
  if (c.arch >= 80) {
    const std::vector<int>& archs = nvrtc_supported_archs();
    if (std::find(archs.begin(), archs.end(), c.arch) == archs.end()) {
      std::string list;
      for (int a : archs)
        if (a >= 80) list += (list.empty() ? "" : ", ") + std::to_string(a);
      fail("arch", "must be a target this NVRTC (" + nvrtc_version() + ") compiles for (" + list + "), got " + std::to_string(c.arch),
           ErrorCode::unsupported);
    }
  }
}

CUcontext validate_on_device(CUstream stream) {
  const DriverApi& d = driver();
  CUcontext current = nullptr;
  check_cu(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (!current) fail("context", "no CUDA context is current on this thread (make the device's context current first)", ErrorCode::invalid_argument);
  if (stream) {
    CUcontext owner = nullptr;
    if (d.cuStreamGetCtx(stream, &owner) != CUDA_SUCCESS)
      fail("stream", "is not a valid CUDA stream");
    if (owner != current)
      fail("stream", "belongs to another context than the current one (run() launches in the current context)");
  }
  return current;
}

float kernel_scale_log2(const AttentionParams& p) {
  // With softcap the kernels turn scores into tanh(s * scale / cap): exp2 takes them times cap log2(e).
  return (p.softcap > 0 ? p.softcap : p.softmax_scale) * kLog2e;
}

fa4k::AttentionArgs make_kernel_args(const Problem& problem) {
  const AttentionParams& p = problem.params;
  fa4k::AttentionArgs a;
  std::memset(&a, 0, sizeof(a));
  auto tensor = [](const void* ptr, const Strides& s) {
    return fa4k::TensorArgs{const_cast<void*>(ptr), s.batch, s.seq, s.head};
  };
  a.q = tensor(p.q, p.q_stride);
  a.k = tensor(p.k, p.k_stride);
  a.v = tensor(p.v, p.v_stride);
  a.o = tensor(p.o, p.o_stride);
  a.lse = p.return_lse ? p.lse : nullptr;
  a.batch = static_cast<int>(p.batch);
  a.seqlen_q = static_cast<int>(p.seqlen_q);
  a.seqlen_k = static_cast<int>(p.seqlen_k);
  a.heads_q = static_cast<int>(p.heads_q);
  a.heads_kv = static_cast<int>(p.heads_kv);
  a.q_heads_per_kv = problem.q_heads_per_kv;
  a.softmax_scale = p.softmax_scale;
  a.scale_log2 = kernel_scale_log2(p);
  a.window_left = static_cast<int>(p.window_left);
  a.window_right = static_cast<int>(p.window_right);
  if (p.softcap > 0) a.softcap_scale = p.softmax_scale / p.softcap;
  a.sinks = p.sinks;
  a.cu_seqlens_q = p.cu_seqlens_q;
  a.cu_seqlens_k = p.cu_seqlens_k;  // with a page table only its lengths are used
  a.seqused_k = p.seqused_k;
  a.page_table = p.page_table;
  a.page_size_log2 = p.page_size ? __builtin_ctzll(static_cast<unsigned long long>(p.page_size)) : 0;
  a.max_pages_per_seq = static_cast<int>(p.max_pages_per_seq);
  a.total_q = static_cast<int>(p.total_q);
  return a;
}

}  // namespace fa4::detail
