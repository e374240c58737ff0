// fa4::Attention: the straight road of docs/architecture.md.
//   params --validate--> Problem --select--> KernelKey --plan--> Plan --codegen--> source --hash--> cache
//   --> cubin --load per context--> CUfunction;  Problem + Plan --> args, TMA maps, launch shape --> launch.
// run() on a hit: validate, one shared-lock map lookup, argument assembly, cuLaunchKernelEx.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include <set>

#include "base/log.hpp"
#include "cache/kernel_cache.hpp"
#include "fa4/fa4.hpp"
#include "runtime/backend.hpp"
#include "runtime/codegen.hpp"
#include "runtime/driver.hpp"
#include "runtime/launch.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/scratch.hpp"
#include "runtime/self_check.hpp"

namespace fa4 {

namespace detail {
namespace {

struct KeyHash {
  size_t operator()(const KernelKey& k) const {
    size_t h = static_cast<size_t>(k.backend);
    for (long long v : {static_cast<long long>(k.op), static_cast<long long>(k.arch), static_cast<long long>(k.variant),
                        static_cast<long long>(k.dtype), static_cast<long long>(k.head_dim),
                        static_cast<long long>(k.head_dim_v), static_cast<long long>(k.causal), static_cast<long long>(k.lse),
                        static_cast<long long>(k.gqa_pack), static_cast<long long>(k.varlen), static_cast<long long>(k.paged),
                        static_cast<long long>(k.split), static_cast<long long>(k.fault)})
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
  cache::CacheKey cache_key;  // of the cubin: what a self-check verdict is remembered by
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
  std::string pci_bus_id;  // where a self-check child finds the device
  std::string identity;    // device UUID and driver version: what a self-check verdict is valid for
  // The device scratch of Plans that ask for one (scratch_bytes_per_cta): one buffer per stream, and per
  // capture sequence for launches recorded into a CUDA graph (runtime/scratch.hpp).
  ScratchPool scratch;
};

// Throws Error(unsupported) when kernels of `backend` cannot run on a device of `arch`.
void check_runnable(Backend backend, int arch) {
  const std::string why = backend_of(backend).cannot_run_on(arch);
  if (!why.empty()) throw Error(ErrorCode::unsupported, "backend " + std::string(to_string(backend)) + ": " + why);
}

[[noreturn]] void bad_option(const std::string& field, const std::string& rule) {
  throw Error(ErrorCode::invalid_argument, field + ": " + rule);
}

template <class Enum>
void check_enum(const char* field, Enum value, Enum last) {
  const int v = static_cast<int>(value);
  if (v < 0 || v > static_cast<int>(last))
    bad_option(field, "must be a value of its enum (0.." + std::to_string(static_cast<int>(last)) + "), got " + std::to_string(v));
}

// The dump directory must exist and take new files: dumps are written during compiles, where a failure
// would go unnoticed. A probe file, not access(W_OK): root passes access() on read-only directories.
void check_dump_dir(const std::string& dir) {
  const std::string field = "dump_dir (FA4_DUMP_DIR)";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) bad_option(field, "cannot create '" + dir + "': " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) bad_option(field, "'" + dir + "' is not a directory");
  const std::string probe = dir + "/.fa4rt-write-probe-" + std::to_string(getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) bad_option(field, "cannot write in '" + dir + "': " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

// Options rules, checked before the constructor creates anything (the disk cache directory included).
Options checked(Options o) {
  check_enum("log_level", o.log_level, LogLevel::off);
  check_enum("backend", o.backend, kLastBackend);
  check_enum("debug_fault", o.debug_fault, kLastDebugFault);
  check_enum("emulation", o.emulation, Emulation::adversarial);
  if (o.self_check_timeout_ms <= 0)
    bad_option("self_check_timeout_ms (FA4_SELF_CHECK_TIMEOUT_MS)", "must be > 0, got " + std::to_string(o.self_check_timeout_ms));
  if (o.max_compile_threads < 0 || o.max_compile_threads > kMaxCompileThreads)
    bad_option("max_compile_threads (FA4_COMPILE_THREADS)", "must be in [0, " + std::to_string(kMaxCompileThreads) +
                                                                "] (0: cores, at most 8), got " + std::to_string(o.max_compile_threads));
  if (!o.dump_dir.empty()) check_dump_dir(o.dump_dir);
  return o;
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

  // Lifetime: contexts, their loaded modules and the kernels' scratch buffers are kept until this
  // Attention is destroyed (a destroyed context's entries are then released with errors ignored). An engine
  // that destroys contexts or streams for good should destroy its Attention with them.
  mutable std::shared_mutex mutex;  // guards the maps below (never held while compiling)
  std::unordered_map<KernelKey, std::shared_ptr<const Built>, KeyHash> built;
  std::unordered_map<ContextKernel, std::unique_ptr<Loaded>, ContextKernelHash> loaded;
  std::unordered_map<unsigned long long, std::unique_ptr<ContextState>> contexts;
  std::mutex load_mutex;  // serialises module loads and self-checks (cheap next to compiling)
  std::set<std::string> logged;  // one-time log lines already written (guarded by load_mutex)
  std::unordered_map<std::string, SelfCheckVerdict> verdicts;  // by device identity and cubin (load_mutex)

  explicit Impl(Options o)
      : options(checked(std::move(o))),
        disk(options.disk_cache ? std::optional<cache::DiskCache>(std::in_place, options) : std::nullopt),
        cache(disk ? &*disk : nullptr) {
    set_log_level(options.log_level);
  }

  // The cache key of a generated source: XXH3-128 of everything that determines the cubin.
  cache::CacheKey cache_key(const KernelKey& key, const std::string& source, const std::vector<std::string>& compile) {
    return cache::make_cache_key({source, &compile, nvrtc_version(), key.target(), version()});
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
    b->cache_key = cache_key(key, source, compile);
    const cache::Lookup found = cache.get(
        b->cache_key, key.name(),
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
    CUdevice dev = 0;
    check_cu(driver().cuCtxGetDevice(&dev), "cuCtxGetDevice");
    state->device = read_device_info(dev);
    char bus[32] = {};
    check_cu(driver().cuDeviceGetPCIBusId(bus, sizeof(bus), dev), "cuDeviceGetPCIBusId");
    state->pci_bus_id = bus;
    CUuuid uuid{};
    check_cu(driver().cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid");
    int driver_version = 0;
    check_cu(driver().cuDriverGetVersion(&driver_version), "cuDriverGetVersion");
    static const char* hex = "0123456789abcdef";
    for (unsigned char byte : uuid.bytes) state->identity += {hex[byte >> 4], hex[byte & 15]};
    state->identity += "-driver" + std::to_string(driver_version);
    std::unique_lock lock(mutex);
    return *contexts.emplace(id, std::move(state)).first->second;
  }

  const Loaded* find_loaded(unsigned long long context_id, const KernelKey& key) const {
    std::shared_lock lock(mutex);
    auto it = loaded.find({context_id, key});
    return it == loaded.end() ? nullptr : it->second.get();
  }

  void log_once(const std::string& line, bool error = false) {  // caller holds load_mutex
    if (!logged.insert(line).second) return;
    if (error) log().error("{}", line);
    else log().info("{}", line);
  }

  // The slow path of run() and the loading step of prewarm: build, load into the context and, for a fast
  // kernel, check it on first use. A kernel that cannot load or fails its check is replaced, loudly, by the
  // next backend's kernel for the same configuration (the portable one).
  const Loaded& load(ContextState& ctx, const KernelKey& key, const KernelConfig& config) {
    if (const Loaded* k = find_loaded(ctx.id, key)) return *k;
    // Compile outside load_mutex, so different keys compile concurrently.
    std::shared_ptr<const Built> b = build(key);
    std::lock_guard guard(load_mutex);
    if (const Loaded* k = find_loaded(ctx.id, key)) return *k;
    if (const std::string why = passed_over(config, ctx.device.arch); !why.empty())
      log_once(config.name() + " on sm_" + std::to_string(ctx.device.arch) + " runs on " + to_string(key.backend) +
               " (" + why + ")");
    std::unique_ptr<Loaded> k;
    std::string failure;
    try {
      k = load_module(ctx, key, b);
    } catch (const Error& e) {
      if (key.backend == Backend::portable) throw;
      failure = std::string("cannot load: ") + e.what();
    }
    if (k && key.backend != Backend::portable && options.self_check) failure = first_use_check(ctx, key, config, *b);
    if (!failure.empty()) {
      const KernelKey fallback = fallback_key(key, config, ctx.device.arch);
      log_once(key.name() + " " + failure + "; this configuration runs on " + fallback.name() + " in this context", true);
      if (!k) k = std::make_unique<Loaded>();
      k->fallback = &load_locked(ctx, fallback);
    }
    return insert(ctx, key, std::move(k));
  }

  // A portable kernel (no check), loaded under load_mutex.
  const Loaded& load_locked(ContextState& ctx, const KernelKey& key) {
    if (const Loaded* k = find_loaded(ctx.id, key)) return *k;
    return insert(ctx, key, load_module(ctx, key, build(key)));
  }

  // The verdict on a fast kernel's first use on this device: remembered (in memory, and on disk by device
  // and cubin) or found by a check in a child process, so that a kernel that traps or hangs cannot take
  // this process's contexts down. Empty when it passed, else why not. Caller holds load_mutex.
  std::string first_use_check(ContextState& ctx, const KernelKey& key, const KernelConfig& config, const Built& b) {
    const std::string id = ctx.identity + "/" + b.cache_key.hex();
    const cache::CacheKey disk_key = cache::make_cache_key({"self-check verdict v1", nullptr, ctx.identity, key.target(),
                                                            b.cache_key.hex()});
    auto remembered = verdicts.find(id);
    if (remembered == verdicts.end() && disk) {
      if (std::optional<std::vector<char>> saved = disk->load(disk_key); saved && !saved->empty()) {
        const std::string text(saved->begin(), saved->end());
        remembered = verdicts.emplace(id, SelfCheckVerdict{text.rfind("pass\n", 0) == 0, text.substr(text.find('\n') + 1)}).first;
      }
    }
    if (remembered == verdicts.end()) {
      SelfCheckRequest request;
      request.config = config;
      request.config.backend = key.backend;
      request.expected_key = key.name();
      request.device = ctx.pci_bus_id;
      request.options = options;
      request.helper = find_self_check_helper(options);
      if (request.helper.empty())
        return "cannot be checked: no fa4rt-selfcheck helper beside the library (set FA4_SELF_CHECK_HELPER, or "
               "FA4_SELF_CHECK=0 to trust unchecked kernels)";
      log().info("self-check of {} on {} in a child process", key.name(), ctx.pci_bus_id);
      SelfCheckVerdict verdict = self_check_in_child(request);
      if (disk) {
        const std::string text = (verdict.passed ? "pass\n" : "fail\n") + verdict.detail;
        disk->store(disk_key, std::vector<char>(text.begin(), text.end()), "self-check verdict " + key.name());
      }
      remembered = verdicts.emplace(id, std::move(verdict)).first;
    }
    return remembered->second.passed ? "" : "failed its self-check against the portable kernel (" + remembered->second.detail + ")";
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

  // The kernel of `key` ready to launch in this context (loaded on first use, its fallback when it failed
  // its check). Outside a capture only: loading during one would invalidate it.
  const Loaded& ready(ContextState& ctx, const KernelKey& key, const KernelConfig& config, const Problem* problem,
                      CUstream stream) {
    const Loaded* k = find_loaded(ctx.id, key);
    if (!k) {
      check_supported(key);
      check_runnable(key.backend, ctx.device.arch);
      if (problem) check_index_range(make_plan(key), *problem);  // before compiling; launches check again
      if (capturing(stream))
        throw Error(ErrorCode::graph_capture, key.name() + " is not loaded in this context and the stream is being captured: "
                                                           "compiling or loading a module would invalidate the capture; "
                                                           "prewarm this configuration (or run it once) before capturing");
      k = &load(ctx, key, config);
    }
    return k->fallback ? *k->fallback : *k;
  }

  // `layout`: the workspace of the call's split launch, which every split kernel of a mixed batch shares (the
  // combine reads it by that plan).
  void launch(const Loaded& k, const Problem& problem, ContextState& ctx, CUstream stream, void* workspace = nullptr,
              const SplitLayout& layout = {}) {
    const Plan& plan = k.built->plan;
    PreparedLaunch l = prepare_launch(plan, problem, ctx.device.sm_count);
    if (plan.key.split) layout.bind(l.args, workspace);
    if (plan.scratch_bytes_per_cta) {
      const ScratchPool::Buffer s = ctx.scratch.get(stream, l.scratch_bytes(plan));
      l.args.scratch = reinterpret_cast<void*>(s.ptr);
      l.args.scratch_bytes = s.bytes;
      l.args.emulation_mode = static_cast<unsigned>(options.emulation);
      l.args.emulation_seed = options.emulation_seed;
    }
    enqueue(l, plan, problem, k.function, stream);
  }

  // The key of a configuration on a device arch. run(), plan(), launch_shape(), prewarm() and describe() all
  // select through here, so a warm-up and a real call cannot disagree: the configuration's backend, else the
  // Options' backend; the Options' debug fault for sm100 keys.
  KernelKey key_for(KernelConfig& config, int arch) const {
    if (config.backend == Backend::automatic) config.backend = options.backend;
    KernelKey key = key_for_config(config, arch);
    if (key.backend == Backend::sm100 || key.backend == Backend::sm100_emulated) key.fault = options.debug_fault;
    return key;
  }
  KernelKey select(const Problem& problem, int arch) const {
    KernelConfig c = config_of(problem, Backend::automatic, arch);
    return key_for(c, arch);
  }
  // Every kernel a problem runs, with its configuration: the decode kernel for the decode-sized sequences,
  // the prefill kernel for the others (a mixed batch: both, each skipping the other's sequences). A chosen
  // backend without a decode kernel (Options::backend sm90) runs a mixed batch on its prefill kernel alone,
  // which then serves every sequence: the problem is no longer mixed.
  std::vector<std::pair<KernelKey, KernelConfig>> select_all(Problem& problem, int arch) const {
    std::vector<std::pair<KernelKey, KernelConfig>> out;
    for (bool decode_kernel : {true, false}) {
      if (decode_kernel ? problem.decode_seqlen_q == 0 : problem.decode) continue;
      KernelConfig c = config_of(problem, Backend::automatic, arch, decode_kernel);
      const KernelKey key = key_for(c, arch);
      if (decode_kernel && problem.mixed && !key.decode) {
        problem.mixed = false;
        problem.decode_seqlen_q = 0;
        continue;
      }
      out.emplace_back(key, c);
    }
    return out;
  }

  int resolve_arch(int requested) {
    if (requested) return requested;
    if (!driver_available())
      throw Error(ErrorCode::invalid_argument, "arch: 0 means the current device, but the CUDA driver is not available (" +
                                                   driver_unavailable_reason() + "); name the arch instead");
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
  Problem problem = validate(params);
  ContextState& ctx = impl_->context_state(validate_on_device(stream));
  problem.sm_count = ctx.device.sm_count;
  // Every kernel is ready, and the workspace big enough, before anything is launched.
  std::vector<const Loaded*> kernels;
  const Plan* split_plan = nullptr;  // the split-KV launch whose parts the combine merges
  for (const auto& [key, config] : impl_->select_all(problem, ctx.device.arch)) {
    kernels.push_back(&impl_->ready(ctx, key, config, &problem, stream));
    if (!split_plan && kernels.back()->built->plan.key.split) split_plan = &kernels.back()->built->plan;
  }
  if (!split_plan) {
    for (const Loaded* k : kernels) impl_->launch(*k, problem, ctx, stream);
    return;
  }
  // Split-KV: the parts into the workspace, then their merge into O (and the LSE).
  const SplitLayout layout = split_layout(*split_plan, problem);
  const size_t needed = layout.bytes();
  if (params.workspace_bytes < needed)
    throw Error(ErrorCode::invalid_argument, "workspace_bytes: split-KV needs " + std::to_string(needed) +
                                                 " bytes here (Attention::workspace_size), got " +
                                                 std::to_string(params.workspace_bytes));
  const KernelKey merge_key = combine_key(split_plan->key, ctx.device.arch, /*f32_states=*/true);
  const Loaded& merge = impl_->ready(ctx, merge_key, combine_config(merge_key), nullptr, stream);
  for (const Loaded* k : kernels) impl_->launch(*k, problem, ctx, stream, params.workspace, layout);
  // No sequence cut (short keys, or split_by_batch at a large batch), or each one's parts all in one CTA,
  // which folded them (SplitRule::parts_per_cta): the split kernel wrote O itself.
  const fa4k::SplitRule rule = split_rule(*split_plan, problem);
  if (max_splits(*split_plan, problem, rule) <= rule.parts_per_cta) return;
  enqueue_combine(merge.built->plan, split_combine_args(*split_plan, problem, params.workspace), merge.function,
                  ctx.device.sm_count, stream, /*overlap_previous=*/ctx.device.arch >= 90);
}

size_t Attention::workspace_size(const AttentionParams& params) const {
  AttentionParams with = params;
  if (!with.workspace) {  // as if one were given: the size it must have
    with.workspace = reinterpret_cast<void*>(uintptr_t{256});
    with.workspace_bytes = 0;
  }
  Problem problem = validate(with);
  if (!problem.split) return 0;
  ContextState& ctx = impl_->context_state(validate_on_device(nullptr));
  problem.sm_count = ctx.device.sm_count;
  for (const auto& selected : impl_->select_all(problem, ctx.device.arch))
    if (selected.first.split) return split_layout(make_plan(selected.first), problem, /*any_smaller_batch=*/true).bytes();
  return 0;
}

void Attention::merge(const MergeParams& params, CUstream stream) {
  const MergeProblem problem = validate_merge(params);
  ContextState& ctx = impl_->context_state(validate_on_device(stream));
  KernelKey key;
  key.op = KernelOp::combine;
  key.dtype = params.dtype;
  key.head_dim = key.head_dim_v = static_cast<int>(params.head_dim_v);
  key.lse = params.lse != nullptr;
  key = combine_key(key, ctx.device.arch, /*f32_states=*/false);
  const Loaded& merge = impl_->ready(ctx, key, combine_config(key), nullptr, stream);
  enqueue_combine(merge.built->plan, merge_args(problem), merge.function, ctx.device.sm_count, stream);
}

PrewarmReport Attention::prewarm(const std::vector<KernelConfig>& configs) { return prewarm(configs, nullptr); }

PrewarmReport Attention::prewarm(const std::vector<KernelConfig>& configs,
                                 const std::function<void(const PrewarmProgress&)>& on_progress) {
  PrewarmReport report;
  if (configs.empty()) return report;
  // Load into the current context too (when one is current and the arch matches), so a later graph capture
  // needs no module load.
  CUcontext ctx = nullptr;
  if (driver_available()) check_cu(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  ContextState* state = ctx ? &impl_->context_state(ctx) : nullptr;

  std::mutex report_mutex;  // guards report, done and on_progress calls
  size_t done = 0;
  auto finished = [&](const KernelConfig& config, bool compiled, const PrewarmFailure* failure) {  // report_mutex held
    ++done;
    if (on_progress) on_progress({done, configs.size(), &config, compiled, failure});
  };
  std::atomic<size_t> next{0};
  auto worker = [&] {
    if (ctx) driver().cuCtxSetCurrent(ctx);
    for (size_t i = next++; i < configs.size(); i = next++) {
      KernelConfig config = configs[i];
      try {
        validate_config(config);
        const int arch = impl_->resolve_arch(config.arch);
        const KernelKey key = impl_->key_for(config, arch);
        cache::Origin origin = cache::Origin::memory;
        impl_->build(key, &origin);
        // A split-KV kernel's parts are merged by the fp32 combine kernel: ready it too.
        const KernelKey merge = combine_key(key, arch, /*f32_states=*/true);
        if (key.split) impl_->build(merge, nullptr);
        if (state && arch == state->device.arch) {
          check_runnable(key.backend, arch);
          impl_->load(*state, key, config);
          if (key.split) impl_->load(*state, merge, combine_config(merge));
        }
        std::lock_guard guard(report_mutex);
        (origin == cache::Origin::compiled ? report.compiled : report.from_cache)++;
        finished(configs[i], origin == cache::Origin::compiled, nullptr);
      } catch (const Error& e) {
        std::lock_guard guard(report_mutex);
        report.failures.push_back({configs[i], e.code(), e.what()});
        finished(configs[i], false, &report.failures.back());
      } catch (const std::exception& e) {
        std::lock_guard guard(report_mutex);
        report.failures.push_back({configs[i], ErrorCode::internal, e.what()});
        finished(configs[i], false, &report.failures.back());
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
  Problem problem = validate(params);
  ContextState& ctx = impl_->context_state(validate_on_device(nullptr));
  problem.sm_count = ctx.device.sm_count;
  return make_plan(impl_->select(problem, ctx.device.arch));
}

LaunchShape Attention::launch_shape(const AttentionParams& params) const {
  Problem problem = validate(params);
  ContextState& ctx = impl_->context_state(validate_on_device(nullptr));
  problem.sm_count = ctx.device.sm_count;
  const Plan plan = make_plan(impl_->select(problem, ctx.device.arch));
  return prepare_launch(plan, problem, ctx.device.sm_count).shape;
}

KernelInfo Attention::describe(const KernelConfig& config) const {
  validate_config(config);
  const int arch = impl_->resolve_arch(config.arch);
  KernelConfig c = config;
  KernelInfo info;
  info.key = impl_->key_for(c, arch);
  info.source = assemble_source(make_plan(info.key));
  info.compile_options = compile_options(info.key);
  info.cache_key_hex = impl_->cache_key(info.key, info.source, info.compile_options).hex();
  return info;
}

}  // namespace fa4
