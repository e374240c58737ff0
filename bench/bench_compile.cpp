// Compile-time benchmark: cold NVRTC build of every supported configuration of a backend/arch, then the
// disk-cache hit (a fresh Attention over the warm cache directory: read + checksum verify) and the
// memory hit. Needs no GPU: without a current context prewarm only compiles.
//
//   bench_compile [--target BACKEND:ARCH]... [--filter SUBSTR] [--budget-s S] [--reps N] [--json PATH]
//                 [--serving]
//
// --serving: each configuration's serving forms too (ragged, paged, both; decode and split-KV), those its
// backend compiles.
//
// Default targets: portable for the current device's arch (sm_90 without a GPU), and sm90:90 and sm100:100
// where those backends have configurations (compiling needs no device of their kind). Target for a disk
// hit: <= 5 ms.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "fa4/fa4.hpp"
#include "runtime/driver.hpp"

namespace {

using fa4::bench::median;
using fa4::bench::seconds_since;
using Clock = std::chrono::steady_clock;

constexpr double kDiskHitTargetMs = 5.0;

struct Target {
  fa4::Backend backend;
  int arch;
};

struct Row {
  std::string target, config, error;
  double cold_ms = -1, disk_ms = -1, memory_ms = -1;
  long long cubin_bytes = -1, source_bytes = 0;
};

int current_arch_or(int fallback) {
  if (!fa4::detail::driver_available()) return fallback;
  CUdevice dev = 0;
  FA4_CU(cuDeviceGet(&dev, 0));
  return fa4::detail::device_arch(dev);
}

Target parse_target(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw std::runtime_error("--target " + text + ": expected BACKEND:ARCH, e.g. portable:90");
  return {fa4::backend_from_string(text.substr(0, colon)), std::stoi(text.substr(colon + 1))};
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Times prewarm of one config; returns milliseconds, or -1 with *error set.
double timed_prewarm(fa4::Attention& attn, const fa4::KernelConfig& config, bool expect_compile, std::string* error) {
  const auto start = Clock::now();
  const fa4::PrewarmReport report = attn.prewarm({config});
  const double ms = seconds_since(start) * 1e3;
  if (!report.failures.empty()) {
    *error = std::string(fa4::to_string(report.failures[0].code)) + ": " + first_line(report.failures[0].message);
    return -1;
  }
  if (expect_compile ? report.compiled != 1 : report.from_cache != 1) {
    *error = expect_compile ? "expected a compile, the kernel came from a cache (a key shared with another config?)"
                            : "expected a cache hit, prewarm compiled again";
    return -1;
  }
  return ms;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) { out += ' '; continue; }
    out += c;
  }
  return out;
}

void write_json(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "{\"disk_hit_target_ms\": " << kDiskHitTargetMs << ", \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << "  {\"target\": \"" << r.target << "\", \"config\": \"" << r.config << "\", \"cold_ms\": " << r.cold_ms
      << ", \"disk_hit_ms\": " << r.disk_ms << ", \"memory_hit_ms\": " << r.memory_ms
      << ", \"cubin_bytes\": " << r.cubin_bytes << ", \"source_bytes\": " << r.source_bytes << ", \"error\": \""
      << json_escape(r.error) << "\"}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  f << "]}\n";
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<Target> targets;
  std::string filter, json_path;
  double budget_s = 0;  // 0: no limit
  int reps = 5;
  bool serving = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + ": missing value");
      return argv[++i];
    };
    if (arg == "--target") targets.push_back(parse_target(value()));
    else if (arg == "--filter") filter = value();
    else if (arg == "--budget-s") budget_s = std::stod(value());
    else if (arg == "--reps") reps = std::max(1, std::stoi(value()));
    else if (arg == "--json") json_path = value();
    else if (arg == "--serving") serving = true;
    else {
      std::printf("usage: %s [--target BACKEND:ARCH]... [--filter SUBSTR] [--budget-s S] [--reps N] [--json PATH] [--serving]\n",
                  argv[0]);
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  if (targets.empty()) {
    targets.push_back({fa4::Backend::portable, current_arch_or(90)});
    for (const Target& fast : {Target{fa4::Backend::sm90, 90}, Target{fa4::Backend::sm100, 100}})
      if (!fa4::supported_configs(fast.backend, fast.arch).empty()) targets.push_back(fast);
  }

  fa4::bench::TempDir dir;
  fa4::Options options = fa4::Options::from_env();
  options.cache_dir = dir.path();
  options.disk_cache = true;
  options.allow_jit = true;
  options.max_compile_threads = 1;
  options.log_level = fa4::LogLevel::warn;
  options.dump_dir.clear();
  std::printf("fa4rt %s, cold cache dir %s, disk-hit target %.1f ms\n", fa4::version(), dir.path().c_str(),
              kDiskHitTargetMs);

  std::vector<Row> rows;
  int skipped = 0;
  const auto start = Clock::now();
  for (const Target& t : targets) {
    const std::string target = std::string(fa4::to_string(t.backend)) + ":sm" + std::to_string(t.arch);
    std::vector<fa4::KernelConfig> configs;
    std::set<std::string> kernels;  // cache keys: a form that runs another's kernel (portable ragged) is not timed twice
    int shared = 0;
    fa4::Attention describer(options);
    for (const fa4::KernelConfig& plain : fa4::supported_configs(t.backend, t.arch))
      for (int form = 0; form < (serving ? 6 : 1); ++form) {  // dense; ragged, paged, both; decode; split-KV
        fa4::KernelConfig c = plain;
        c.varlen = form == 1 || form == 3, c.paged = form == 2 || form == 3;
        c.decode = form == 4, c.split = form == 4 || form == 5;
        if (!filter.empty() && c.name().find(filter) == std::string::npos) continue;
        try {
          const fa4::KernelInfo info = describer.describe(c);  // throws for a form this backend does not compile
          if (kernels.insert(info.cache_key_hex).second)
            configs.push_back(c);
          else
            ++shared;
        } catch (const fa4::Error&) {
        }
      }
    std::printf("\n%s: %zu configurations%s", target.c_str(), configs.size(),
                configs.empty() ? " (none supported or none match the filter)" : "");
    if (shared) std::printf(" (%d more share one of their kernels)", shared);
    std::printf("\n");
    if (configs.empty()) continue;
    std::printf("%-50s %10s %10s %10s %9s %8s\n", "config", "cold ms", "disk ms", "mem ms", "cubin KB", "src KB");

    fa4::Attention cold(options);  // one instance: every config has its own key, so each one compiles
    for (const fa4::KernelConfig& c : configs) {
      if (budget_s > 0 && seconds_since(start) > budget_s) {
        ++skipped;
        continue;
      }
      Row r;
      r.target = target;
      r.config = c.name();
      const fa4::KernelInfo info = cold.describe(c);
      r.source_bytes = static_cast<long long>(info.source.size());
      r.cold_ms = timed_prewarm(cold, c, true, &r.error);
      if (r.error.empty()) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(dir.path() + "/" + info.cache_key_hex + ".cubin", ec);
        if (!ec) r.cubin_bytes = static_cast<long long>(size);
        std::vector<double> disk, memory;
        for (int i = 0; i < reps && r.error.empty(); ++i) {
          fa4::Attention fresh(options);  // empty memory cache, warm disk
          disk.push_back(timed_prewarm(fresh, c, false, &r.error));
          memory.push_back(timed_prewarm(fresh, c, false, &r.error));
        }
        if (r.error.empty()) {
          r.disk_ms = median(disk);
          r.memory_ms = median(memory);
        }
      }
      if (r.error.empty())
        std::printf("%-50s %10.1f %10.3f %10.4f %9.1f %8.1f\n", r.config.c_str(), r.cold_ms, r.disk_ms, r.memory_ms,
                    r.cubin_bytes / 1024.0, r.source_bytes / 1024.0);
      else
        std::printf("%-50s FAILED: %s\n", r.config.c_str(), r.error.c_str());
      std::fflush(stdout);
      rows.push_back(r);
    }
  }

  std::vector<double> cold_ms, disk_ms;
  int failed = 0;
  for (const Row& r : rows) {
    if (!r.error.empty()) { ++failed; continue; }
    cold_ms.push_back(r.cold_ms);
    disk_ms.push_back(r.disk_ms);
  }
  const double disk_max = disk_ms.empty() ? 0 : *std::max_element(disk_ms.begin(), disk_ms.end());
  std::printf("\nsummary: %zu compiled, %d failed, %d skipped (budget %.0f s)\n", cold_ms.size(), failed, skipped, budget_s);
  if (!cold_ms.empty()) {
    double total = 0;
    for (double v : cold_ms) total += v;
    std::printf("cold compile ms: median %.0f, max %.0f, total %.1f s (one thread)\n", median(cold_ms),
                *std::max_element(cold_ms.begin(), cold_ms.end()), total / 1e3);
    std::printf("disk hit ms: median %.3f, max %.3f -> %s (target <= %.1f ms)\n", median(disk_ms), disk_max,
                disk_max <= kDiskHitTargetMs ? "PASS" : "FAIL", kDiskHitTargetMs);
  }
  if (!json_path.empty()) write_json(json_path, rows);
  // One grep-able line for tools/gpu_session.sh's summary.
  std::printf("RESULT bench_compile compiled=%zu failed=%d skipped=%d cold_median_ms=%.0f disk_hit_max_ms=%.3f %s\n",
              cold_ms.size(), failed, skipped, median(cold_ms), disk_max,
              cold_ms.empty() ? "NO-DATA" : (failed == 0 && disk_max <= kDiskHitTargetMs ? "PASS" : "FAIL"));
  return cold_ms.empty() || failed || disk_max > kDiskHitTargetMs ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_compile: %s\n", e.what());
  return 1;
}
