// A backend is one kernel family behind one small interface: which devices it runs on, the key of a
// configuration (compile target, code-changing choices), whether it supports a key, its Plan, its launch
// shape and its TMA maps. Each lives in runtime/backends/<name>/; selection among them happens only in
// runtime/select.cpp.
#pragma once

#include <cuda.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "fa4/fa4.hpp"
#include "runtime/problem.hpp"

namespace fa4::detail {

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual Backend id() const = 0;
  // Empty when this backend's kernels run on a device of compute capability `device_arch` (x10), else why not.
  virtual std::string cannot_run_on(int device_arch) const = 0;
  // The key of a configuration (dtype, head dims, flags already copied in `base`) for a device: the compile
  // target and the backend's code-changing choices (GQA packing, ...).
  virtual KernelKey key(KernelKey base, const KernelConfig& config, int device_arch) const = 0;
  // Whether the backend has a kernel for the key (why not, in *why when given).
  virtual bool supports(const KernelKey& key, std::string* why) const = 0;
  virtual Plan plan(const KernelKey& key) const = 0;  // for a supported key
  // Grid, block and memory for kernel arguments that fill_schedule has completed.
  virtual LaunchShape launch_shape(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count) const = 0;
  // TMA descriptors the kernel takes after its argument block; returns how many (at most kMaxTmaDescriptors).
  virtual int tma_descriptors(const Plan& plan, const Problem& problem, CUtensorMap* out) const;
};
constexpr int kMaxTmaDescriptors = 4;

// The launch of the tile kernels (sm90, sm100): one CTA per work tile, or, for a persistent Plan, one per SM
// (at most one per tile) walking the tiles with a static stride.
LaunchShape tile_grid(const Plan& plan, const fa4k::AttentionArgs& scheduled, int sm_count);

// What the prefill tile kernels (sm90, sm100) leave to the portable ones: head dims outside `served`, GQA
// packs that do not divide their `tile_rows`-row tiles, the combine, decode and split-KV (both take dense,
// ragged and paged prefill). Empty when `backend` (its name, for the reason) can run the key; else why not.
std::string dense_prefill_gap(const KernelKey& key, const char* backend, int tile_rows,
                              std::initializer_list<std::pair<int, int>> served);

// The backends (one object each, in their folders).
const KernelBackend& portable_backend();
const KernelBackend& sm90_backend();
const KernelBackend& sm100_backend();
const KernelBackend& sm100_emulated_backend();
const KernelBackend& backend_of(Backend id);  // throws Error(internal) for Backend::automatic

// ---- selection (select.cpp) ----------------------------------------------------------------------
// The key of a configuration on a device of compute capability `device_arch`. With config.backend
// automatic: the first backend of the device's preference order (sm100 on sm_100/103, sm90 on sm_90, then portable) that
// supports the configuration; otherwise exactly config.backend. run(), prewarm() and describe() all select
// here, so a warm-up and a real call cannot disagree. Throws Error(unsupported) when nothing serves it.
KernelKey key_for_config(const KernelConfig& config, int device_arch);
// Why better backends of the preference order were passed over for this configuration (one line for the
// log); empty when the first choice serves it or the backend was chosen explicitly.
std::string passed_over(const KernelConfig& config, int device_arch);
// The next backend's key after `failed` for the same configuration (used when `failed` cannot load or fails
// its self-check); the portable kernel in practice. Throws Error(unsupported) when there is none.
KernelKey fallback_key(const KernelKey& failed, const KernelConfig& config, int device_arch);
// The configuration of one of a validated problem's kernels: the decode kernel (decode and mixed problems)
// or the prefill kernel (the others); without `decode_kernel`, the main one (the decode kernel of a decode
// problem, else the prefill kernel).
KernelConfig config_of(const Problem& problem, Backend backend, int device_arch, bool decode_kernel);
KernelConfig config_of(const Problem& problem, Backend backend, int device_arch);

bool supports(const KernelKey& key, std::string* why);
void check_supported(const KernelKey& key);  // throws Error(unsupported) naming the key and the reason
Plan make_plan(const KernelKey& key);        // check_supported, then the backend's Plan

// Whether this NVRTC compiles family targets (sm_100f: one cubin for sm_100 and sm_103); CUDA >= 12.9.
bool nvrtc_has_family_targets();
// Tests only: pretend the NVRTC has (true) or lacks (false) family targets; -1 restores the real answer.
void override_family_targets_for_testing(int has);

}  // namespace fa4::detail
