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
