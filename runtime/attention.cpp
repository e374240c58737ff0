// fa4::Attention: the straight road of design.md.
//   params --validate--> Problem --select--> KernelKey --plan--> Plan --codegen--> source --hash--> cache
//   --> cubin --load per context--> CUfunction;  Problem + Plan --> args, TMA maps, launch shape --> launch.
// run() on a hit: validate, one shared-lock map lookup, argument assembly, cuLaunchKernelEx.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "cache/kernel_cache.hpp"
#include "fa4/fa4.hpp"
#include "runtime/codegen.hpp"
#include "runtime/driver.hpp"
#include "base/log.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/planner.hpp"
#include "runtime/self_check.hpp"

namespace fa4 {

namespace detail {
namespace {

struct KeyHash {
  size_t operator()(const KernelKey& k) const {
    size_t h = static_cast<size_t>(k.backend);
    for (long long v : {static_cast<long long>(k.arch), static_cast<long long>(k.dtype), static_cast<long long>(k.head_dim),
                        static_cast<long long>(k.head_dim_v), static_cast<long long>(k.causal), static_cast<long long>(k.lse),
                        static_cast<long long>(k.gqa_pack), static_cast<long long>(k.fault)})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

struct ContextKernel {
  unsigned long long context_id;
  KernelKey key;
  bool operator==(const ContextKernel& o) const { return context_id == o.context_id && key == o.key; }
};

struct ContextKernelHash {
  size_t operator()(const ContextKernel& k) const { return KeyHash{}(k.key) ^ (k.context_id * 0x9E3779B97F4A7C15ull); }
};

// A compiled kernel: context-independent.
struct Built {
  Plan plan;
  std::shared_ptr<const cache::Cubin> cubin;
};

// A kernel loaded into one context, ready to launch. Owns its module.
struct Loaded {
  std::shared_ptr<const Built> built;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  const Loaded* fallback = nullptr;  // set when the self-check failed: launch this one instead
  Loaded() = default;
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;
  ~Loaded() {
    if (module) driver().cuModuleUnload(module);  // errors ignored: the context may already be gone
  }
};

// What run() needs to know about a context, read once.
struct ContextState {
  unsigned long long id = 0;
  DeviceInfo device;
  // sm100 emulation: the TMEM backing store, one per stream (each CTA slot holds live emulator state, so
  // launches that may run concurrently must not share it; launches on one stream are ordered). A buffer
  // that grows is retired, not freed: a CUDA graph captured earlier may still point at it.
  struct Scratch {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  std::mutex scratch_mutex;
  std::unordered_map<CUstream, Scratch> scratch;
  std::vector<CUdeviceptr> retired;
};

DeviceInfo read_device_info() {
  const DriverApi& d = driver();
  CUdevice dev = 0;
  check_cu(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    check_cu(d.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
    return v;
  };
  DeviceInfo info;
  info.arch = device_arch(dev);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  return info;
}

// Whether kernels of `backend` can run on a device of `arch`.
void check_runnable(Backend backend, int arch) {
  if (backend == Backend::sm100 && arch != 100 && arch != 103)
    throw Error(ErrorCode::unsupported, "backend sm100: needs an sm_100/sm_103 device, this one is sm_" + std::to_string(arch) +
                                            " (use sm100_emulated on sm_90, or portable)");
  if (backend == Backend::sm100_emulated && arch != 90)
    throw Error(ErrorCode::unsupported, "backend sm100_emulated: runs only on sm_90 devices, this one is sm_" + std::to_string(arch));
  if (backend == Backend::portable && arch < 80)
    throw Error(ErrorCode::unsupported, "backend portable: needs sm_80 or newer, this device is sm_" + std::to_string(arch));
}

bool capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check_cu(driver().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace
}  // namespace detail

using namespace detail;

struct Attention::Impl {
  Options options;
  std::optional<cache::DiskCache> disk;  // absent when the disk cache is off
  cache::KernelCache cache;

  mutable std::shared_mutex mutex;  // guards the three maps below (never held while compiling)
  std::unordered_map<KernelKey, std::shared_ptr<const Built>, KeyHash> built;
  std::unordered_map<ContextKernel, std::unique_ptr<Loaded>, ContextKernelHash> loaded;
  std::unordered_map<unsigned long long, std::unique_ptr<ContextState>> contexts;
  std::mutex load_mutex;  // serialises module loads and self-checks (cheap next to compiling)

  explicit Impl(Options o)
      : options(std::move(o)),
        disk(options.disk_cache ? std::optional<cache::DiskCache>(std::in_place, options) : std::nullopt),
        cache(disk ? &*disk : nullptr) {
    set_log_level(options.log_level);
    if (!options.dump_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(options.dump_dir, ec);
    }
  }

  ~Impl() {
    if (!driver_available()) return;
    for (auto& [id, c] : contexts) {  // errors ignored: the context may be gone
      for (auto& [stream, s] : c->scratch) driver().cuMemFree(s.ptr);
      for (CUdeviceptr p : c->retired) driver().cuMemFree(p);
    }
  }

  const std::string& nvrtc_version_cached() {
    static const std::string v = nvrtc_version();
    return v;
  }

  // The cache key of a generated source: XXH3-128 of everything that determines the cubin.
  cache::CacheKey cache_key(const KernelKey& key, const std::string& source, const std::vector<std::string>& compile) {
    const std::string target = key.target();
    return cache::make_cache_key({source, &compile, nvrtc_version_cached(), target, version()});
  }

  // Key -> Plan -> source -> cubin (memory, disk or NVRTC). Counts the origin when asked.
  std::shared_ptr<const Built> build(const KernelKey& key, cache::Origin* origin = nullptr) {
    {
      std::shared_lock lock(mutex);
      if (auto it = built.find(key); it != built.end()) {
        if (origin) *origin = cache::Origin::memory;
        return it->second;
      }
    }
    auto b = std::make_shared<Built>();
    b->plan = make_plan(key);
    const std::string source = assemble_source(b->plan);
    const std::vector<std::string> compile = compile_options(key);
    const cache::Lookup found = cache.get(
        cache_key(key, source, compile), key.name(),
        [&] { return nvrtc_compile(source, compile, key.name(), options.dump_dir).cubin; }, options.allow_jit);
    b->cubin = found.cubin;
    if (origin) *origin = found.origin;
    std::unique_lock lock(mutex);
    return built.emplace(key, std::move(b)).first->second;
  }

  ContextState& context_state(CUcontext ctx) {
    unsigned long long id = 0;
    check_cu(driver().cuCtxGetId(ctx, &id), "cuCtxGetId");
    {
      std::shared_lock lock(mutex);
      if (auto it = contexts.find(id); it != contexts.end()) return *it->second;
    }
    auto state = std::make_unique<ContextState>();
    state->id = id;
    state->device = read_device_info();
    std::unique_lock lock(mutex);
    return *contexts.emplace(id, std::move(state)).first->second;
  }

  const Loaded* find_loaded(unsigned long long context_id, const KernelKey& key) const {
    std::shared_lock lock(mutex);
    auto it = loaded.find({context_id, key});
    return it == loaded.end() ? nullptr : it->second.get();
  }

  // The slow path of run() and the loading step of prewarm: build, load into `ctx`, self-check.
  const Loaded& load(ContextState& ctx, const KernelKey& key) {
    if (const Loaded* k = find_loaded(ctx.id, key)) return *k;
    // Compile outside load_mutex, so different keys compile concurrently.
    const bool check = key.backend != Backend::portable && options.self_check;
    KernelKey reference_key = key;
    reference_key.backend = Backend::portable;
    reference_key.arch = ctx.device.arch;
    reference_key.gqa_pack = 1;
    reference_key.fault = DebugFault::none;
    std::shared_ptr<const Built> b = build(key);
    std::shared_ptr<const Built> reference_built = check ? build(reference_key) : nullptr;

    std::lock_guard guard(load_mutex);
    if (const Loaded* k = find_loaded(ctx.id, key)) return *k;
    std::unique_ptr<Loaded> k = load_module(ctx, key, b);
    if (check) {
      const Loaded* reference = find_loaded(ctx.id, reference_key);
      if (!reference) reference = &insert(ctx, reference_key, load_module(ctx, reference_key, reference_built));
      CUstream check_stream = nullptr;
      const std::string disagreement = self_check(key, [&](bool candidate, const Problem& problem, CUstream stream) {
        check_stream = stream;
        launch(candidate ? *k : *reference, problem, ctx, stream);
      });
      drop_scratch(ctx, check_stream);  // the self-check's stream is gone
      if (!disagreement.empty()) {
        log().error("self-check of {} against the portable kernel FAILED ({}); this configuration falls back to the "
                    "portable kernel in this context", key.name(), disagreement);
        k->fallback = reference;
      }
    }
    return insert(ctx, key, std::move(k));
  }

  std::unique_ptr<Loaded> load_module(const ContextState& ctx, const KernelKey& key, std::shared_ptr<const Built> b) {
    auto k = std::make_unique<Loaded>();
    k->built = std::move(b);
    const Plan& plan = k->built->plan;
    if (plan.smem_bytes > ctx.device.smem_optin)
      throw Error(ErrorCode::unsupported, key.name() + ": needs " + std::to_string(plan.smem_bytes) +
                                              " bytes of shared memory, the device allows " + std::to_string(ctx.device.smem_optin));
    check_cu(driver().cuModuleLoadData(&k->module, k->built->cubin->data()), ("cuModuleLoadData for " + key.name()).c_str());
    check_cu(driver().cuModuleGetFunction(&k->function, k->module, plan.kernel_name.c_str()), "cuModuleGetFunction");
    check_cu(driver().cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, plan.smem_bytes),
             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    return k;
  }

  const Loaded& insert(const ContextState& ctx, const KernelKey& key, std::unique_ptr<Loaded> k) {
    std::unique_lock lock(mutex);
    return *loaded.emplace(ContextKernel{ctx.id, key}, std::move(k)).first->second;
  }

  // The stream's TMEM scratch, grown (zero-filled) to `bytes`. Emulation only: the first launch on a stream
  // (and a larger grid) allocates.
  const ContextState::Scratch& scratch_for(ContextState& ctx, size_t bytes, CUstream stream) {
    std::lock_guard guard(ctx.scratch_mutex);
    ContextState::Scratch& s = ctx.scratch[stream];
    if (s.bytes >= bytes) return s;
    if (capturing(stream))
      throw Error(ErrorCode::graph_capture, "sm100_emulated: the TMEM scratch must grow to " + std::to_string(bytes) +
                                                " bytes, which needs an allocation, during stream capture; run once before capturing");
    const DriverApi& d = driver();
    if (s.ptr) ctx.retired.push_back(s.ptr);
    s = {};
    check_cu(d.cuMemAlloc(&s.ptr, bytes), "cuMemAlloc (sm100 emulation TMEM scratch)");
    check_cu(d.cuMemsetD8Async(s.ptr, 0, bytes, stream), "cuMemsetD8Async");  // ordered before the launch
    s.bytes = bytes;
    return s;
  }

  // Frees the scratch of a stream that no launch will use again (nothing was captured on it).
  void drop_scratch(ContextState& ctx, CUstream stream) {
    std::lock_guard guard(ctx.scratch_mutex);
    if (auto it = ctx.scratch.find(stream); it != ctx.scratch.end()) {
      driver().cuMemFree(it->second.ptr);
      ctx.scratch.erase(it);
    }
  }

  void launch(const Loaded& k, const Problem& problem, ContextState& ctx, CUstream stream) {
    const Plan& plan = k.built->plan;
    fa4k::AttentionArgs args = make_kernel_args(problem);
    fill_schedule(plan, problem, args);
    const LaunchShape shape = detail::launch_shape(plan, args, ctx.device.sm_count);
    if (plan.scratch_bytes_per_cta) {
      const size_t ctas = size_t{shape.grid[0]} * shape.grid[1] * shape.grid[2];
      const ContextState::Scratch& s = scratch_for(ctx, ctas * plan.scratch_bytes_per_cta, stream);
      args.tmem_scratch = reinterpret_cast<void*>(s.ptr);
      args.tmem_scratch_bytes = s.bytes;
    }
    CUtensorMap maps[kMaxTmaDescriptors];
    const int map_count = tma_descriptors(plan, problem, maps);
    void* params[1 + kMaxTmaDescriptors] = {&args};
    for (int i = 0; i < map_count; ++i) params[1 + i] = &maps[i];

    const LaunchConfig config(shape, stream);
    check_cu(driver().cuLaunchKernelEx(config.get(), k.function, params, nullptr), "cuLaunchKernelEx");
  }

  // The key of a configuration on an arch. run(), plan(), launch_shape(), prewarm() and describe() all select
  // through here, so a warm-up and a real call cannot disagree: the configuration's backend, else the
  // Options' backend; the Options' debug fault for sm100 keys.
  KernelKey key_for(KernelConfig config, int arch) const {
    if (config.backend == Backend::automatic) config.backend = options.backend;
    KernelKey key = key_for_config(config, arch);
    if (key.backend != Backend::portable) key.fault = options.debug_fault;
    return key;
  }
  KernelKey select(const Problem& problem, int arch) const { return key_for(config_of(problem, Backend::automatic, arch), arch); }

  int resolve_arch(int requested) {
    if (requested) return requested;
    CUcontext ctx = nullptr;
    check_cu(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    if (!ctx) throw Error(ErrorCode::invalid_argument, "arch: 0 means the current device, but no CUDA context is current");
    return context_state(ctx).device.arch;
  }
};

Attention::Attention(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Attention::~Attention() = default;

const Options& Attention::options() const { return impl_->options; }

void Attention::run(const AttentionParams& params, CUstream stream) {
  const Problem problem = validate(params);
  ContextState& ctx = impl_->context_state(validate_on_device(stream));
  const KernelKey key = impl_->select(problem, ctx.device.arch);
  const Loaded* k = impl_->find_loaded(ctx.id, key);
  if (!k) {
    check_supported(key);
    check_runnable(key.backend, ctx.device.arch);
    if (capturing(stream))
      throw Error(ErrorCode::graph_capture, key.name() + " is not loaded in this context and the stream is being captured: "
                                                         "compiling or loading a module would invalidate the capture; "
                                                         "prewarm this configuration (or run it once) before capturing");
    k = &impl_->load(ctx, key);
  }
  if (k->fallback) k = k->fallback;
  impl_->launch(*k, problem, ctx, stream);
}

PrewarmReport Attention::prewarm(const std::vector<KernelConfig>& configs) {
  PrewarmReport report;
  if (configs.empty()) return report;
  // Load into the current context too (when one is current and the arch matches), so a later graph capture
  // needs no module load.
  CUcontext ctx = nullptr;
  if (driver_available()) check_cu(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  ContextState* state = ctx ? &impl_->context_state(ctx) : nullptr;

  std::mutex report_mutex;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    if (ctx) driver().cuCtxSetCurrent(ctx);
    for (size_t i = next++; i < configs.size(); i = next++) {
      const KernelConfig& config = configs[i];
      try {
        const int arch = impl_->resolve_arch(config.arch);
        const KernelKey key = impl_->key_for(config, arch);
        cache::Origin origin = cache::Origin::memory;
        impl_->build(key, &origin);
        if (state && arch == state->device.arch) {
          check_runnable(key.backend, arch);
          impl_->load(*state, key);
        }
        std::lock_guard guard(report_mutex);
        (origin == cache::Origin::compiled ? report.compiled : report.from_cache)++;
      } catch (const Error& e) {
        std::lock_guard guard(report_mutex);
        report.failures.push_back({config, e.code(), e.what()});
      } catch (const std::exception& e) {
        std::lock_guard guard(report_mutex);
        report.failures.push_back({config, ErrorCode::internal, e.what()});
      }
    }
  };
  int threads = impl_->options.max_compile_threads;
  if (threads <= 0) threads = std::min(8, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  threads = std::min<int>(threads, static_cast<int>(configs.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const PrewarmFailure& f : report.failures) log().error("prewarm {}: {}", f.config.name(), f.message);
  return report;
}

Plan Attention::plan(const AttentionParams& params) const {
  const Problem problem = validate(params);
  ContextState& ctx = impl_->context_state(validate_on_device(nullptr));
  return make_plan(impl_->select(problem, ctx.device.arch));
}

LaunchShape Attention::launch_shape(const AttentionParams& params) const {
  const Problem problem = validate(params);
  ContextState& ctx = impl_->context_state(validate_on_device(nullptr));
  const Plan plan = make_plan(impl_->select(problem, ctx.device.arch));
  fa4k::AttentionArgs args = make_kernel_args(problem);
  fill_schedule(plan, problem, args);
  return detail::launch_shape(plan, args, ctx.device.sm_count);
}

KernelInfo Attention::describe(const KernelConfig& config) const {
  const int arch = impl_->resolve_arch(config.arch);
  KernelInfo info;
  info.key = impl_->key_for(config, arch);
  info.source = assemble_source(make_plan(info.key));
  info.compile_options = compile_options(info.key);
  info.cache_key_hex = impl_->cache_key(info.key, info.source, info.compile_options).hex();
  return info;
}

}  // namespace fa4
