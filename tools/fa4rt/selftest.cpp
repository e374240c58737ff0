// `fa4rt selftest`: for the owner of a new GPU, every configuration the device runs, on every backend that
// runs there, checked element by element against the reference (float64 on the CPU for the small problem,
// the independent float32 GPU kernel for the large one) and against the portable backend on the same
// inputs; a verdict table with timings on screen and in a file.
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "runtime/backend.hpp"
#include "tools/fa4rt/cli.hpp"
#include "verify/attention_check.hpp"
#include "verify/device.hpp"

namespace fa4::cli {

const char kSelftestUsage[] =
    "usage: fa4rt selftest [--device N] [--out FILE] [--quick] [--emulation strict|adversarial|both]\n"
    "\n"
    "Runs every configuration device N (default 0) serves, on every backend that runs there (on sm_90 also\n"
    "the sm100 kernel in its tcgen05 emulation), against the float64 / float32 references and the portable\n"
    "kernel, and writes a verdict table with timings (default file: fa4rt-selftest-<device>.md).\n"
    "  --quick        only the small problem (skips the one with more work tiles than the device has SMs)\n"
    "  --emulation    which emulation modes the emulated sm100 backend runs in (default both)\n";

namespace {

struct Run {
  std::string backend;  // "portable", "sm100", "sm100_emulated (adversarial)"
  Backend id;
  Emulation mode;
};

// The two problems of each configuration: a small one with tails and rows that see no key (CPU float64
// reference; q/kv ratio 2, which the sm100 kernel packs) and one with more work tiles than twice the SMs
// (GPU float32 reference; ratio 3, which it maps without packing).
std::vector<verify::Case> problems(const KernelConfig& c, bool quick) {
  std::vector<verify::Case> out;
  verify::Case small;
  small.dtype = c.dtype, small.d = c.head_dim, small.dv = c.head_dim_v ? c.head_dim_v : c.head_dim;
  small.causal = c.causal, small.lse = c.lse, small.batch = 1, small.heads_q = 4, small.heads_kv = 2;
  small.shapes = {{257, 190}};
  small.name = "small";
  out.push_back(small);
  if (!quick) {
    verify::Case large = small;
    large.name = "tiles";
    large.batch = 2, large.heads_q = 48, large.heads_kv = 16;
    large.shapes = {{600, 700}};
    out.push_back(large);
  }
  return out;
}

std::string config_name(const KernelConfig& c) {
  std::ostringstream s;
  s << to_string(c.dtype) << " d" << c.head_dim;
  if (c.head_dim_v && c.head_dim_v != c.head_dim) s << "/" << c.head_dim_v;
  s << (c.causal ? " causal" : "") << (c.lse ? " lse" : "");
  return s.str();
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::setprecision(digits) << (std::isfinite(v) ? v : NAN);
  return s.str();
}

}  // namespace

int selftest(const std::vector<std::string>& args) {
  int ordinal = 0;
  std::string out_path, emulation = "both";
  bool quick = false;
  Flags flags(args);
  while (flags.next()) {
    if (flags.flag() == "--device") ordinal = flags.number();
    else if (flags.flag() == "--out") out_path = flags.value();
    else if (flags.flag() == "--quick") quick = true;
    else if (flags.flag() == "--emulation") {
      emulation = flags.value();
      if (emulation != "strict" && emulation != "adversarial" && emulation != "both")
        throw UsageError("--emulation must be strict, adversarial or both");
    } else flags.unknown();
  }
  if (!detail::driver_available()) {
    std::cerr << "fa4rt selftest: no CUDA device (" << detail::driver_unavailable_reason() << ")\n";
    return 1;
  }
  verify::PrimaryContext context(ordinal);
  const int arch = detail::device_arch(context.device());
  char name[256] = {};
  detail::driver().cuDeviceGetName(name, sizeof(name), context.device());
  if (out_path.empty()) out_path = "fa4rt-selftest-" + std::to_string(ordinal) + ".md";

  std::vector<Run> runs;
  for (Backend b : {Backend::portable, Backend::sm90, Backend::sm100, Backend::sm100_emulated}) {
    if (!detail::backend_of(b).cannot_run_on(arch).empty()) continue;
    if (b != Backend::sm100_emulated) {
      runs.push_back({to_string(b), b, Emulation::strict});
      continue;
    }
    if (emulation != "adversarial") runs.push_back({"sm100_emulated (strict)", b, Emulation::strict});
    if (emulation != "strict") runs.push_back({"sm100_emulated (adversarial)", b, Emulation::adversarial});
  }

  // Compile everything first, in parallel (the rows then load from the cache).
  for (const Run& run : runs) {
    Options o = Options::from_env();
    o.backend = run.id;
    o.self_check = false;
    std::vector<KernelConfig> configs;
    for (KernelConfig c : supported_configs(run.id, arch))
      for (int ratio : {2, 3}) {
        c.q_heads_per_kv = ratio;
        configs.push_back(c);
      }
    const PrewarmReport report = Attention(o).prewarm(configs);
    std::cout << run.backend << ": " << report.compiled << " kernels compiled, " << report.from_cache << " from the cache, "
              << report.failures.size() << " failed\n";
  }

  std::ostringstream table;
  table << "# fa4rt selftest: " << name << " (sm_" << arch << "), fa4rt " << version() << "\n\n"
        << "Every configuration on every backend that runs here. err: max |O - reference| (small: float64 CPU "
        << "reference; tiles: float32 GPU reference, more work tiles than twice the SMs); vs portable: max |O - "
        << "portable O| on the same inputs; ms: median of 5 timed runs of the tiles problem (the small one with "
        << "--quick).\n\n"
        << "| configuration | backend | err small | err tiles | vs portable | ms | verdict |\n"
        << "|---|---|---|---|---|---|---|\n";
  std::cout << table.str() << std::flush;
  int passed = 0, failed = 0;
  std::string context_lost;  // a kernel fault leaves every context of this process unusable
  const auto start = std::chrono::steady_clock::now();
  for (const KernelConfig& c : supported_configs(Backend::portable, arch)) {
    std::vector<std::vector<float>> portable_out;  // per problem, from the first run (portable)
    for (const Run& run : runs) {
      KernelConfig k = c;
      k.backend = run.id;
      if (!detail::supports(detail::key_for_config(k, arch), nullptr)) continue;
      Options o = Options::from_env();
      o.backend = run.id;
      o.emulation = run.mode;
      o.self_check = false;  // this is the check
      std::ostringstream row;
      row << "| " << config_name(c) << " | " << run.backend << " | ";
      if (!context_lost.empty()) {
        row << "- | - | - | - | NOT RUN |";
        ++failed;
        table << row.str() << "\n";
        continue;
      }
      bool ok = true;
      double ms = 0, vs_portable = 0;
      std::string errors[2] = {"-", "-"}, problem_failures;
      try {
        Attention attention(o);
        const std::vector<verify::Case> cases = problems(c, quick);
        for (size_t i = 0; i < cases.size(); ++i) {
          const bool timed = i + 1 == cases.size();
          const verify::CheckResult r =
              verify::check_attention(attention, run.id, cases[i], cases[i].shapes[0], 20261130 + i, timed ? 5 : 0);
          ok &= r.passed;
          errors[i] = fixed(r.max_error, 3);
          if (!r.passed) problem_failures += " " + cases[i].name + ":" + r.failures.substr(0, 200);
          if (timed) ms = r.kernel_ms;
          if (run.id == Backend::portable) {
            portable_out.push_back(r.o);
          } else if (i < portable_out.size()) {
            for (size_t e = 0; e < r.o.size(); ++e) vs_portable = std::max(vs_portable, double(std::fabs(r.o[e] - portable_out[i][e])));
          }
        }
      } catch (const Error& e) {
        ok = false;
        problem_failures = std::string(" ") + e.what();
        if (e.code() == ErrorCode::cuda_error) context_lost = config_name(c) + " on " + run.backend + ": " + e.what();
      } catch (const std::exception& e) {
        ok = false;
        problem_failures = std::string(" ") + e.what();
      }
      row << errors[0] << " | " << errors[1] << " | " << (run.id == Backend::portable ? "-" : fixed(vs_portable, 3)) << " | "
          << fixed(ms, 3) << " | " << (ok ? "PASS" : "FAIL") << " |";
      (ok ? passed : failed)++;
      std::cout << row.str() << "\n" << std::flush;
      if (!ok) std::cout << "  failure:" << problem_failures << "\n";
      table << row.str() << "\n";
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream summary;
  std::time_t now = std::time(nullptr);
  summary << "\n" << passed + failed << " configuration x backend rows: " << passed << " PASS, " << failed << " FAIL in "
          << std::fixed << std::setprecision(0) << seconds << " s (" << std::put_time(std::gmtime(&now), "%Y-%m-%d %H:%M UTC")
          << ")\n";
  if (!context_lost.empty())
    summary << "The CUDA context was lost (" << context_lost << "); the rows after it did not run.\n";
  table << summary.str();
  std::cout << summary.str();
  std::ofstream file(out_path);
  file << table.str();
  if (!file) {
    std::cerr << "fa4rt selftest: cannot write " << out_path << "\n";
    return 1;
  }
  std::cout << "wrote " << out_path << "\n";
  return failed ? 1 : 0;
}

}  // namespace fa4::cli
