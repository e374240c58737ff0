#include "runtime/self_check.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>

#include "runtime/driver.hpp"
#include "runtime/half.hpp"

extern char** environ;

namespace fa4::detail {
namespace {

struct DeviceMemory {
  CUdeviceptr ptr = 0;
  explicit DeviceMemory(size_t bytes) { check_cu(driver().cuMemAlloc(&ptr, bytes), "cuMemAlloc (self-check)"); }
  ~DeviceMemory() { driver().cuMemFree(ptr); }
  void* get() const { return reinterpret_cast<void*>(ptr); }
};

struct Stream {
  CUstream s = nullptr;
  Stream() { check_cu(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate (self-check)"); }
  ~Stream() { driver().cuStreamDestroy(s); }
};

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

// Rows and keys with tails, seqlen_q != seqlen_k (causal: the first rows see no key), a q/kv head ratio that
// selects exactly this key's GQA packing (5, which no kernel packs, for unpacked keys), and enough kv heads
// for more than twice as many work tiles as the device has multiprocessors: persistent CTAs walk several
// tiles, non-persistent grids run in several waves. The key's variants: a window, a softcap that bites on
// these inputs; with sinks the caller points `sinks` at heads_q device logits. Ragged: the second sequence
// is shorter on the q side and the first on the k side (each still longer than a decode), and each
// sequence's K/V rows end in 37 unused ones (seqused_k). Paged: pages of 32 keys (smaller than any tile's
// key block), in shuffled order, three spare. Unused K/V rows and page slots hold NaN (compare_with_reference).
AttentionParams self_check_problem(const KernelKey& key, int sm_count, SelfCheckArrays* arrays) {
  AttentionParams p;
  p.batch = 2;
  p.seqlen_q = key.causal ? 421 : 300;
  p.seqlen_k = key.causal ? 300 : 421;
  const int ratio = key.gqa_pack > 1 ? key.gqa_pack : 5;
  const int rows_per_tile = 256;  // the largest CTA row block of any backend: the fewest tiles
  const int tiles_per_kv_head =
      (key.gqa_pack > 1 ? ceil_div(p.seqlen_q * key.gqa_pack, rows_per_tile) : ratio * ceil_div(p.seqlen_q, rows_per_tile)) *
      static_cast<int>(p.batch);
  p.heads_kv = std::max(1, ceil_div(2 * std::max(sm_count, 1) + 1, tiles_per_kv_head));
  p.heads_q = p.heads_kv * ratio;
  p.head_dim = key.head_dim;
  p.head_dim_v = key.head_dim_v;
  p.dtype = key.dtype;
  p.causal = key.causal;
  p.return_lse = key.lse;
  if (key.softcap) p.softcap = 3.f;
  if (key.window) p.window_left = 260, p.window_right = key.causal ? -1 : 30;  // narrower than the keys, wider than two blocks
  SelfCheckArrays unused;
  SelfCheckArrays& a = arrays ? *arrays : unused;
  a = {};
  if (key.varlen) {
    const int32_t q_lens[2] = {static_cast<int32_t>(p.seqlen_q), static_cast<int32_t>(p.seqlen_q) - 123};
    const int32_t k_lens[2] = {static_cast<int32_t>(p.seqlen_k) - 100, static_cast<int32_t>(p.seqlen_k)};
    p.total_q = q_lens[0] + q_lens[1];
    a.cu_seqlens_q = {0, q_lens[0], q_lens[0] + q_lens[1]};
    a.seqused_k = {k_lens[0], k_lens[1]};
    if (!key.paged) {
      constexpr int32_t kUnused = 37;
      p.total_k = k_lens[0] + k_lens[1] + 2 * kUnused;
      a.cu_seqlens_k = {0, k_lens[0] + kUnused, k_lens[0] + k_lens[1] + 2 * kUnused};
    }
  }
  if (key.paged) {
    p.page_size = 32;
    p.max_pages_per_seq = ceil_div(p.seqlen_k, p.page_size);
    p.num_pages = p.batch * p.max_pages_per_seq + 3;
    std::vector<int32_t> pages(static_cast<size_t>(p.num_pages));
    for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i * 7919 % pages.size());  // 7919: prime
    a.page_table.assign(pages.begin(), pages.begin() + p.batch * p.max_pages_per_seq);
  }
  return p;
}

std::string compare_with_reference(const KernelKey& key, int sm_count, const SelfCheckLaunch& launch) {
  SelfCheckArrays arrays;
  AttentionParams p = self_check_problem(key, sm_count, &arrays);
  const size_t rows_q = key.varlen ? p.total_q : p.batch * p.seqlen_q;
  const size_t rows_k = key.paged ? p.num_pages * p.page_size : key.varlen ? p.total_k : p.batch * p.seqlen_k;
  const size_t nq = rows_q * p.heads_q * p.head_dim;
  const size_t nk = rows_k * p.heads_kv * p.head_dim;
  const size_t nv = rows_k * p.heads_kv * p.head_dim_v;
  const size_t no = rows_q * p.heads_q * p.head_dim_v;
  const size_t nl = rows_q * p.heads_q;
  DeviceMemory q(nq * 2), k(nk * 2), v(nv * 2), o_candidate(no * 2), o_reference(no * 2), lse_candidate(nl * 4),
      lse_reference(nl * 4);
  // The device arrays, back to back in one buffer.
  const std::vector<int32_t>* lists[4] = {&arrays.cu_seqlens_q, &arrays.cu_seqlens_k, &arrays.seqused_k, &arrays.page_table};
  const int32_t** fields[4] = {&p.cu_seqlens_q, &p.cu_seqlens_k, &p.seqused_k, &p.page_table};
  size_t ints = 1;
  for (const std::vector<int32_t>* list : lists) ints += list->size();
  DeviceMemory device_ints(ints * 4);
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    if (lists[i]->empty()) continue;
    const CUdeviceptr where = device_ints.ptr + at * 4;
    check_cu(driver().cuMemcpyHtoD(where, lists[i]->data(), lists[i]->size() * 4), "cuMemcpyHtoD (self-check)");
    *fields[i] = reinterpret_cast<const int32_t*>(where);
    at += lists[i]->size();
  }

  // K/V rows no sequence uses (after a sequence's used keys, spare pages and page slots) hold NaN, as an
  // engine's unused cache slots may: no kernel may let them into O.
  std::vector<bool> used_row(rows_k, !key.varlen && !key.paged);
  for (int i = 0; i < p.batch; ++i) {
    const int keys = arrays.seqused_k.empty() ? static_cast<int>(p.seqlen_k) : arrays.seqused_k[i];
    for (int j = 0; j < keys && (key.varlen || key.paged); ++j)
      used_row[key.paged ? static_cast<size_t>(arrays.page_table[i * p.max_pages_per_seq + j / p.page_size]) * p.page_size + j % p.page_size
                         : static_cast<size_t>(arrays.cu_seqlens_k[i]) + j] = true;
  }
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  const uint16_t nan = key.dtype == DType::bf16 ? 0x7fc0 : 0x7e00;
  for (auto [buffer, count] : {std::pair<const DeviceMemory*, size_t>{&q, nq}, {&k, nk}, {&v, nv}}) {
    std::vector<uint16_t> host(count);
    const size_t per_row = buffer == &q ? 0 : count / rows_k;
    for (size_t i = 0; i < count; ++i) host[i] = per_row && !used_row[i / per_row] ? nan : to_half(key.dtype, dist(rng));
    check_cu(driver().cuMemcpyHtoD(buffer->ptr, host.data(), count * 2), "cuMemcpyHtoD (self-check)");
  }
  DeviceMemory sinks(key.sinks ? static_cast<size_t>(p.heads_q) * 4 : 4);
  if (key.sinks) {  // around 0: some rows dominated by their sink, most not
    std::normal_distribution<float> around(0.f, 3.f);
    std::vector<float> host(static_cast<size_t>(p.heads_q));
    for (float& x : host) x = around(rng);
    check_cu(driver().cuMemcpyHtoD(sinks.ptr, host.data(), host.size() * 4), "cuMemcpyHtoD (self-check)");
    p.sinks = static_cast<const float*>(sinks.get());
  }
  Stream stream;
  for (const DeviceMemory* out : {&o_candidate, &o_reference, &lse_candidate, &lse_reference})
    check_cu(driver().cuMemsetD8Async(out->ptr, 0xff, out == &o_candidate || out == &o_reference ? no * 2 : nl * 4, stream.s),
             "cuMemsetD8Async (self-check)");  // NaN everywhere: unwritten outputs cannot pass

  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  for (bool candidate : {true, false}) {
    p.o = (candidate ? o_candidate : o_reference).get();
    p.lse = p.return_lse ? static_cast<float*>((candidate ? lse_candidate : lse_reference).get()) : nullptr;
    launch(candidate, validate(p), stream.s);
  }
  check_cu(driver().cuStreamSynchronize(stream.s), "cuStreamSynchronize (self-check)");

  std::vector<uint16_t> a(no), b(no);
  check_cu(driver().cuMemcpyDtoH(a.data(), o_candidate.ptr, no * 2), "cuMemcpyDtoH (self-check)");
  check_cu(driver().cuMemcpyDtoH(b.data(), o_reference.ptr, no * 2), "cuMemcpyDtoH (self-check)");
  const double tolerance = key.dtype == DType::bf16 ? 3e-2 : 1e-2;
  size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (size_t i = 0; i < no; ++i) {
    const double x = from_half(key.dtype, a[i]), y = from_half(key.dtype, b[i]);
    const double diff = std::fabs(x - y);
    if (!(diff <= tolerance * (1 + std::fabs(y)))) {
      if (!bad++) first_bad = i;
      if (!(diff <= worst)) worst = diff;
    }
  }
  std::ostringstream why;
  if (bad)
    why << bad << " of " << no << " outputs differ (first at flat index " << first_bad << ", worst |diff| " << worst << ")";
  if (p.return_lse) {
    std::vector<float> la(nl), lb(nl);
    check_cu(driver().cuMemcpyDtoH(la.data(), lse_candidate.ptr, nl * 4), "cuMemcpyDtoH (self-check)");
    check_cu(driver().cuMemcpyDtoH(lb.data(), lse_reference.ptr, nl * 4), "cuMemcpyDtoH (self-check)");
    size_t bad_lse = 0;
    for (size_t i = 0; i < nl; ++i)
      if (!(la[i] == lb[i] || std::fabs(la[i] - lb[i]) <= 1e-2 * (1 + std::fabs(lb[i])))) ++bad_lse;
    if (bad_lse) why << (bad ? "; " : "") << bad_lse << " of " << nl << " LSE values differ";
  }
  return why.str();
}

// ---- the protocol: request <-> command line -------------------------------------------------------------
namespace {

DebugFault fault_from_string(const std::string& name) {
  for (int f = 0; f <= static_cast<int>(kLastDebugFault); ++f)
    if (name == to_string(static_cast<DebugFault>(f))) return static_cast<DebugFault>(f);
  throw Error(ErrorCode::invalid_argument, "--fault '" + name + "': not a debug fault");
}

std::vector<std::string> child_args(const SelfCheckRequest& r) {
  const KernelConfig& c = r.config;
  const Options& o = r.options;
  std::vector<std::string> a = {"--device", r.device, "--expect", r.expected_key, "--backend", to_string(c.backend),
                                "--dtype", to_string(c.dtype), "--d", std::to_string(c.head_dim), "--dv",
                                std::to_string(c.head_dim_v ? c.head_dim_v : c.head_dim), "--qh-per-kv",
                                std::to_string(c.q_heads_per_kv), "--fault", to_string(o.debug_fault), "--emulation",
                                to_string(o.emulation), "--seed", std::to_string(o.emulation_seed)};
  if (c.causal) a.push_back("--causal");
  if (c.lse) a.push_back("--lse");
  if (c.window) a.push_back("--window");
  if (c.softcap) a.push_back("--softcap");
  if (c.sinks) a.push_back("--sinks");
  if (c.varlen) a.push_back("--varlen");
  if (c.paged) a.push_back("--paged");
  if (!o.disk_cache) a.push_back("--no-disk-cache");
  if (!o.allow_jit) a.push_back("--no-jit");
  if (!o.cache_dir.empty()) a.insert(a.end(), {"--cache-dir", o.cache_dir});
  for (const std::string& b : o.cache_bundles) a.insert(a.end(), {"--cache-bundle", b});
  a.insert(a.end(), {"--cache-max-bytes", std::to_string(o.cache_max_bytes)});
  return a;
}

// A child that printed nothing useful: its last non-empty output line.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return {};
  const size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

}  // namespace

SelfCheckVerdict self_check_in_child(const SelfCheckRequest& request) {
  std::vector<std::string> args = child_args(request);
  args.insert(args.begin(), request.helper);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {false, std::string("cannot create a pipe: ") + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: a timeout kills all it started
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, request.helper.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    return {false, "cannot start " + request.helper + ": " + std::strerror(spawned)};
  }

  // Read everything it says until it exits or the time limit passes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(request.options.self_check_timeout_ms);
  std::string output;
  bool open = true, timed_out = false;
  int status = 0;
  for (;;) {
    if (open) {
      pollfd pfd{out[0], POLLIN, 0};
      if (::poll(&pfd, 1, 50) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(out[0], buffer, sizeof(buffer));
        if (n > 0) output.append(buffer, static_cast<size_t>(n));
        else if (n == 0 || errno != EINTR) open = false;
      }
    } else {
      ::usleep(20000);
    }
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
  }
  ::close(out[0]);

  const std::string said = last_line(output);
  if (timed_out)
    return {false, "did not finish within " + std::to_string(request.options.self_check_timeout_ms) +
                       " ms (a hang?); killed" + (said.empty() ? "" : "; last said: " + said)};
  if (WIFSIGNALED(status)) return {false, "the check process died of signal " + std::to_string(WTERMSIG(status)) + ": " + said};
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0 && said.rfind("PASS", 0) == 0) return {true, said};
  if (code == 3) return {false, "the kernel faulted (trap or illegal access): " + said};
  return {false, said.empty() ? "the check process exited with status " + std::to_string(code) : said};
}

// ---- the child ----------------------------------------------------------------------------------------------
int run_self_check_child(const std::vector<std::string>& args) {
  try {
    std::string device, expected;
    KernelConfig config;
    Options options;
    options.self_check = false;  // this is the check
    options.log_level = LogLevel::warn;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& flag = args[i];
      auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw Error(ErrorCode::invalid_argument, flag + " needs a value");
        return args[++i];
      };
      auto number = [&]() { return std::stoll(value()); };
      if (flag == "--device") device = value();
      else if (flag == "--expect") expected = value();
      else if (flag == "--backend") config.backend = backend_from_string(value());
      else if (flag == "--dtype") config.dtype = value() == "fp16" ? DType::fp16 : DType::bf16;
      else if (flag == "--d") config.head_dim = static_cast<int>(number());
      else if (flag == "--dv") config.head_dim_v = static_cast<int>(number());
      else if (flag == "--qh-per-kv") config.q_heads_per_kv = static_cast<int>(number());
      else if (flag == "--causal") config.causal = true;
      else if (flag == "--lse") config.lse = true;
      else if (flag == "--window") config.window = true;
      else if (flag == "--softcap") config.softcap = true;
      else if (flag == "--sinks") config.sinks = true;
      else if (flag == "--varlen") config.varlen = true;
      else if (flag == "--paged") config.paged = true;
      else if (flag == "--fault") options.debug_fault = fault_from_string(value());
      else if (flag == "--emulation") options.emulation = value() == "adversarial" ? Emulation::adversarial : Emulation::strict;
      else if (flag == "--seed") options.emulation_seed = static_cast<unsigned>(number());
      else if (flag == "--no-disk-cache") options.disk_cache = false;
      else if (flag == "--no-jit") options.allow_jit = false;
      else if (flag == "--cache-dir") options.cache_dir = value();
      else if (flag == "--cache-bundle") options.cache_bundles.push_back(value());
      else if (flag == "--cache-max-bytes") options.cache_max_bytes = static_cast<uint64_t>(number());
      else throw Error(ErrorCode::invalid_argument, "unknown argument " + flag);
    }
    if (device.empty() || expected.empty() || config.backend == Backend::automatic)
      throw Error(ErrorCode::invalid_argument, "needs --device, --expect and an explicit --backend");
    options.backend = config.backend;  // run() selects through the Options: the candidate must be this backend

    const DriverApi& d = driver();
    CUdevice dev = 0;
    check_cu(d.cuDeviceGetByPCIBusId(&dev, device.c_str()), "cuDeviceGetByPCIBusId");
    CUcontext ctx = nullptr;
    check_cu(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check_cu(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    int sm_count = 0;
    check_cu(d.cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");

    Attention candidate(options);
    Options reference_options = options;
    reference_options.backend = Backend::portable;
    reference_options.debug_fault = DebugFault::none;
    Attention reference(reference_options);
    config.arch = 0;
    const KernelKey key = candidate.describe(config).key;
    if (key.name() != expected)
      throw Error(ErrorCode::internal, "selected " + key.name() + " where the parent expects " + expected);

    const std::string disagreement = compare_with_reference(key, sm_count, [&](bool is_candidate, const Problem& problem, CUstream s) {
      Attention& a = is_candidate ? candidate : reference;
      const KernelKey ran = a.plan(problem.params).key;
      if (is_candidate ? ran.name() != expected : ran.backend != Backend::portable)
        throw Error(ErrorCode::internal, "the check would run " + ran.name() + " as the " +
                                             (is_candidate ? "candidate " + expected : std::string("portable reference")));
      a.run(problem.params, s);
    });
    const AttentionParams p = self_check_problem(key, sm_count);
    std::ostringstream shape;
    shape << "b=" << p.batch << " sq=" << p.seqlen_q << " sk=" << p.seqlen_k << " hq=" << p.heads_q << " hkv=" << p.heads_kv;
    if (!disagreement.empty()) {
      std::cout << "FAIL " << key.name() << " (" << shape.str() << "): " << disagreement << std::endl;
      return 1;
    }
    std::cout << "PASS " << key.name() << " agrees with the portable kernel on every output (" << shape.str() << ")" << std::endl;
    return 0;
  } catch (const Error& e) {
    std::cout << "FAIL " << to_string(e.code()) << ": " << e.what() << std::endl;
    return e.code() == ErrorCode::cuda_error ? 3 : e.code() == ErrorCode::invalid_argument ? 2 : 4;
  } catch (const std::exception& e) {
    std::cout << "FAIL internal: " << e.what() << std::endl;
    return 4;
  }
}

std::string find_self_check_helper(const Options& options) {
  if (!options.self_check_helper.empty()) return options.self_check_helper;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&find_self_check_helper), &info) || !info.dli_fname) return {};
  std::error_code ec;
  const std::filesystem::path here = std::filesystem::canonical(info.dli_fname, ec).parent_path();
  if (ec) return {};
  for (const std::filesystem::path& candidate : {here / "fa4rt-selfcheck", here / ".." / "libexec" / "fa4rt" / "fa4rt-selfcheck"})
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  return {};
}

}  // namespace fa4::detail
