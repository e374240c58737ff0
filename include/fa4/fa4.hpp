// libfa4rt: FlashAttention-4-class attention forward, JIT-compiled with NVRTC and launched through the
// CUDA Driver API. See README.md for a usage example and the environment variables.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fa4/error.hpp"
#include "fa4/export.h"
#include "fa4/plan.hpp"
#include "fa4/version.h"

namespace fa4 {

// Element strides of a [batch, seq, head, dim] tensor; the last dimension is contiguous.
struct Strides {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t head = 0;
};

// Q [b, s_q, h_q, d], K [b, s_k, h_kv, d], V [b, s_k, h_kv, dv], O like Q with dv; all device pointers.
// Causal masking is bottom-right aligned: query row r sees key c when c <= r + seqlen_k - seqlen_q.
struct AttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  bool return_lse = false;  // write the log-sum-exp (natural log), fp32 [b, h_q, s_q] contiguous
  float* lse = nullptr;

  int64_t batch = 0;
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;  // 0 means head_dim

  Strides q_stride, k_stride, v_stride, o_stride;  // all-zero means contiguous [b, s, h, d]

  DType dtype = DType::bf16;
  bool causal = false;
  // 0 means 1/sqrt(head_dim). Otherwise positive and finite with softmax_scale * log2(e) finite in fp32 (at
  // most ~2.36e38); negative scales and -0 are rejected (the kernels subtract the raw logits' row maximum).
  float softmax_scale = 0.f;

  // ---- Variants (docs/correctness.md); each changes the kernel only when used. ----
  // Sliding window, bottom-right aligned like causal: query token t sees key c when
  // t + seqlen_k - seqlen_q - window_left <= c <= t + seqlen_k - seqlen_q + window_right; -1 leaves that side
  // unbounded. causal is (-1, 0): with causal, window_right is -1 or 0.
  int64_t window_left = -1;
  int64_t window_right = -1;
  // Logit softcapping: with softcap > 0 a score s = softmax_scale * q.k becomes softcap * tanh(s / softcap)
  // before the softmax (the LSE is of the capped scores); tanh is tanh.approx.f32, so a capped score may
  // move by up to softcap * 2^-11 (docs/correctness.md). 0: off.
  float softcap = 0.f;
  // Attention sinks: fp32 [heads_q] on the device, a logit per query head that joins every row's softmax
  // denominator without a value row: O = sum_c e^(s_c) v_c / (sum_c e^(s_c) + e^sink), and the LSE includes
  // it. With split-KV it is added once, when the parts are merged.
  const float* sinks = nullptr;

  // ---- Serving shapes (docs/correctness.md). run() never reads device memory: the lengths below live on
  // the device, and seqlen_q / seqlen_k are then the longest sequence's (the caller's max_seqlen_q/k). ----
  // Ragged queries: q and o hold the sequences back to back, [total_q, heads, dim] (the strides' `batch` is
  // unused); sequence i owns rows cu_seqlens_q[i] .. cu_seqlens_q[i + 1] - 1; the LSE is [heads_q, total_q].
  const int32_t* cu_seqlens_q = nullptr;  // device, batch + 1 entries, from 0, non-decreasing
  int64_t total_q = 0;                    // rows of q/o: cu_seqlens_q[batch]
  // Ragged keys: k and v likewise, [total_k, heads_kv, dim], sequence i owning rows cu_seqlens_k[i] ...
  const int32_t* cu_seqlens_k = nullptr;  // device, batch + 1 entries (with a page table: only the lengths)
  int64_t total_k = 0;                    // rows of k/v (not paged)
  const int32_t* seqused_k = nullptr;     // device, batch entries: sequence i sees keys [0, seqused_k[i])
  // Paged KV: k and v are [num_pages, page_size, heads_kv, dim] (the strides' `batch` steps over pages,
  // `seq` over slots); key j of sequence i is slot j % page_size of page page_table[i][j / page_size]. Key
  // counts come from seqused_k, else cu_seqlens_k, else seqlen_k.
  const int32_t* page_table = nullptr;    // device, [batch, max_pages_per_seq]
  int64_t page_size = 0;                  // a power of two from 16 to 256
  int64_t num_pages = 0;
  int64_t max_pages_per_seq = 0;
  // Split-KV: a sequence's keys are cut into parts computed in parallel, then merged. 1: never. n > 1: n
  // parts. 0: the library decides; a decode sequence (seqlen_q * heads_q / heads_kv <= kDecodeMaxRows) is cut
  // into parts of 256 keys while that makes at most 16, else of 512 (equal shares), at most one CTA per SM
  // over its kv heads; others are not cut
  // (the workspace is then needed only when some sequence is decode-sized). Either way
  // a sequence's parts depend only on its own lengths (and the device): its result is the same whatever else
  // is in the batch, and the same from run to run.
  int num_splits = 0;
  // With num_splits 0: let the batch size choose the parts too. With C = batch x kv head groups CTAs at one
  // part per sequence, parts enough to give every SM one CTA, each at least C^2 / (2 x SMs) KV blocks, at
  // most max(16, one per 512 keys); a batch of as many CTAs as SMs is not cut (and no combine runs). Faster
  // decode at small and at large batches, but a sequence's bits then depend on the batch size (still the
  // same from run to run for the same batch). false: batch-invariant, as above.
  bool split_by_batch = false;
  void* workspace = nullptr;              // device memory for the partial results: Attention::workspace_size
  size_t workspace_bytes = 0;
};

// Partial attention states over disjoint key sets of the same queries, to merge: each state's O (16-bit,
// [batch, seq, heads, dv], or ragged [total, heads, dv]) and its natural-log LSE (fp32, [batch, heads, seq],
// or [heads, total] when ragged), as run() writes them with return_lse.
struct MergeState {
  const void* o = nullptr;
  const float* lse = nullptr;
};
struct MergeParams {
  std::vector<MergeState> states;  // 2 to 8, in the same layout
  Strides state_stride;            // element strides of each state's O (all-zero: contiguous)
  void* o = nullptr;               // the merged O, same shape
  Strides o_stride;                // all-zero: contiguous
  float* lse = nullptr;            // the merged LSE (optional), same layout as the states'
  int64_t batch = 0, seqlen = 0, heads = 0, head_dim_v = 0;
  const int32_t* cu_seqlens = nullptr;  // ragged rows (then seqlen is the longest and total the rows)
  int64_t total = 0;
  DType dtype = DType::bf16;
};

enum class LogLevel { trace, debug, info, warn, error, off };

constexpr int kMaxCompileThreads = 1024;

// Library settings. Options::from_env() reads the FA4_* environment variables (README.md); the Attention
// constructor checks them (enums in range, max_compile_threads in [0, kMaxCompileThreads], dump_dir
// creatable and writable) and throws Error(invalid_argument) naming the option.
struct FA4_API Options {
  std::string cache_dir;          // writable cache; empty: $XDG_CACHE_HOME/fa4rt, else ~/.cache/fa4rt
  std::vector<std::string> cache_bundles;     // read-only cache directories searched after cache_dir
  uint64_t cache_max_bytes = uint64_t{2} << 30;  // LRU bound of cache_dir's entries; 0: unbounded
  bool disk_cache = true;
  LogLevel log_level = LogLevel::info;
  Backend backend = Backend::automatic;
  bool allow_jit = true;          // false: a kernel missing from both caches is an error (no compile)
  int max_compile_threads = 0;    // prewarm workers, 0..kMaxCompileThreads; 0: hardware concurrency, at most 8
  bool self_check = true;         // check a fast kernel against the portable one on its first use on a
                                  // device, in a child process (FA4_SELF_CHECK)
  int self_check_timeout_ms = 120000;  // the child's time limit; longer counts as a hang (FA4_SELF_CHECK_TIMEOUT_MS)
  std::string self_check_helper;  // the fa4rt-selfcheck executable; empty: FA4_SELF_CHECK_HELPER, else found
                                  // beside the library (or ../libexec/fa4rt/)
  std::string dump_dir;           // when set, generated sources and NVRTC logs are written here (created if missing)
  DebugFault debug_fault = DebugFault::none;  // tests only: compile a deliberate defect into sm100 kernels
  Emulation emulation = Emulation::strict;    // sm100_emulated: how faithfully the emulator runs (FA4_EMULATION)
  unsigned emulation_seed = 0;                // adversarial: 0 reverses unordered MMAs, else a seeded random order

  static Options from_env();
};

// The largest q_heads_per_kv a KernelConfig may name. Ratios above 128 are never packed, so any of them
// (and any run() with such a ratio) selects the same kernel as q_heads_per_kv = 1.
constexpr int kMaxQHeadsPerKv = 256;

// Decode: at most this many query rows per kv head (seqlen_q times the q heads sharing it; the longest
// sequence's when ragged) run on kernels built for few rows against a long KV cache.
constexpr int kDecodeMaxRows = 32;
FA4_API bool decode_shape(int64_t seqlen_q, int64_t q_heads_per_kv);

// A kernel configuration to compile ahead of time. It maps to exactly the KernelKey a run() with the
// same dtype, head dims, causal flag, LSE flag and q/kv head ratio selects on `arch`. prewarm (per
// configuration) and describe reject a configuration that breaks a rule: dtype and backend in their enums,
// supported head dims, q_heads_per_kv in [1, kMaxQHeadsPerKv], arch 0 or a target NVRTC compiles for (>= 80).
struct FA4_API KernelConfig {
  DType dtype = DType::bf16;
  int head_dim = 128;
  int head_dim_v = 0;          // 0 means head_dim
  bool causal = false;
  bool lse = false;
  int q_heads_per_kv = 1;      // heads_q / heads_kv, 1..kMaxQHeadsPerKv
  bool varlen = false;         // ragged batches or seqused_k (cu_seqlens_q/k, seqused_k set)
  bool paged = false;          // a paged KV cache (page_table set)
  bool split = false;          // split-KV (num_splits != 1)
  bool decode = false;         // decode shapes: seqlen_q * q_heads_per_kv <= kDecodeMaxRows (see decode_shape)
  bool window = false;         // a sliding window (window_left or window_right >= 0)
  bool softcap = false;        // softcap > 0
  bool sinks = false;          // attention sinks given
  Backend backend = Backend::automatic;
  int arch = 0;                // compute capability x10; 0: the current device
  std::string name() const;
};

struct PrewarmFailure {
  KernelConfig config;
  ErrorCode code;
  std::string message;
};

struct PrewarmReport {
  int compiled = 0;     // built by NVRTC in this call
  int from_cache = 0;   // found in memory or on disk
  std::vector<PrewarmFailure> failures;
};

// One configuration of a prewarm() has finished (for progress reports).
struct PrewarmProgress {
  size_t done = 0;                          // configurations finished so far, this one included
  size_t total = 0;
  const KernelConfig* config = nullptr;     // the one that finished
  bool compiled = false;                    // built by NVRTC in this call (false: from a cache, or failed)
  const PrewarmFailure* failure = nullptr;  // set when it failed
};

// Information about one resolved kernel, for tools and tests.
struct KernelInfo {
  KernelKey key;
  std::string source;         // the full generated source that was hashed and compiled
  std::string cache_key_hex;  // XXH3-128 of source, options, NVRTC version, target and schema
  std::vector<std::string> compile_options;
};

class FA4_API Attention {
 public:
  explicit Attention(Options options = Options::from_env());
  ~Attention();
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  // Enqueues attention on `stream` (of the current context). Asynchronous; on a cache hit it does not
  // synchronise, allocate or compile. Throws fa4::Error before any launch when the input is invalid.
  void run(const AttentionParams& params, CUstream stream);

  // Compiles the configurations with a bounded number of parallel workers (NVRTC only, so it works offline
  // for any arch) and, when a context is current and a configuration's arch is its device's, loads the
  // kernels into it (and runs the sm100 first-use self-check), so a later graph capture needs no module
  // load. Configurations map to the keys run() would select (the Options' backend when a configuration
  // says automatic). Failures are reported per configuration, not thrown.
  PrewarmReport prewarm(const std::vector<KernelConfig>& configs);
  // The same, calling `on_progress` as each configuration finishes: from the worker threads, one call at a
  // time, in completion order. It must not throw.
  PrewarmReport prewarm(const std::vector<KernelConfig>& configs,
                        const std::function<void(const PrewarmProgress&)>& on_progress);

  // The device memory run() needs in params.workspace for these parameters (0 when it needs none). No
  // allocation, no launch, no device read, but a current context (the split depends on its SM count); size it
  // once for the largest decode call (batch and lengths; prefill calls need none), then reuse it.
  size_t workspace_size(const AttentionParams& params) const;

  // Merges partial attention states into one (cascade or shared-prefix attention, context parallelism):
  // O = sum_s exp(LSE_s - LSE) O_s with LSE = log sum_s exp(LSE_s). Asynchronous on `stream`.
  void merge(const MergeParams& params, CUstream stream);

  // The Plan (and its launch shape) run() would use for these parameters on the current device.
  Plan plan(const AttentionParams& params) const;
  LaunchShape launch_shape(const AttentionParams& params) const;

  // The key, generated source and cache key of a configuration, without compiling it.
  KernelInfo describe(const KernelConfig& config) const;

  const Options& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every configuration a backend supports on `arch` with one q head per kv head (for prewarming and tests;
// GQA-packed sm100 keys differ only in q_heads_per_kv).
FA4_API std::vector<KernelConfig> supported_configs(Backend backend, int arch);

// The version of the loaded library (FA4_VERSION_STRING is the headers').
FA4_API const char* version();

}  // namespace fa4
