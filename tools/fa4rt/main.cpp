// fa4rt: the command-line face of the library.
//   fa4rt prewarm [--arch N] [--backend B] [--qh-per-kv N]
//                                            compile every supported configuration into the disk cache
//                                            (offline: NVRTC needs no GPU; default arch: the GPU's, else 100)
//   fa4rt plan [config] [--seqlen-q N --seqlen-k N] [--dot]
//                                            print the Plan report of one configuration (or its barrier DOT)
//   fa4rt dump --out DIR [config]            write one configuration's generated source and cubin
//   fa4rt resources [--arch N] [--backend B] compile every supported configuration with ptxas --verbose
//                                            and print a Markdown table: compile ms, registers, spills,
//                                            shared memory, TMEM columns, stages
// config: --arch N --backend auto|portable|sm100|sm100_emulated --dtype bf16|fp16 --d N --dv N --causal
//         --lse --qh-per-kv N
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>

#include "fa4/fa4.hpp"
#include "runtime/codegen.hpp"
#include "runtime/driver.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/backend.hpp"
#include "tools/fa4rt/cache_command.hpp"
#include "tools/fa4rt/report.hpp"

namespace {

using namespace fa4;

struct Args {
  std::string command;
  KernelConfig config;
  int seqlen_q = 0, seqlen_k = 0;
  bool dot = false;
  std::string out;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "fa4rt: " << problem << "\n"
            << "usage: fa4rt prewarm [--arch N] [--backend B] [--qh-per-kv N]\n"
            << "       fa4rt plan [--arch N] [--backend B] [--dtype bf16|fp16] [--d N] [--dv N] [--causal] [--lse]\n"
            << "                  [--qh-per-kv N] [--seqlen-q N --seqlen-k N] [--dot]\n"
            << "       fa4rt dump --out DIR [config options as for plan]\n"
            << "       fa4rt resources [--arch N] [--backend B]\n";
  std::exit(2);
}

int current_device_arch() {
  if (!detail::driver_available()) return 0;
  CUdevice dev;
  FA4_CU(cuDeviceGet(&dev, 0));
  return detail::device_arch(dev);
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage("missing command");
  Args a;
  a.command = argv[1];
  a.config.arch = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    auto number = [&]() {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n < 0 || n > INT_MAX) usage(flag + " needs a non-negative integer, got '" + v + "'");
      return static_cast<int>(n);
    };
    if (flag == "--arch") a.config.arch = number();
    else if (flag == "--backend") a.config.backend = backend_from_string(value());
    else if (flag == "--dtype") {
      const std::string d = value();
      if (d != "bf16" && d != "fp16") usage("--dtype must be bf16 or fp16");
      a.config.dtype = d == "bf16" ? DType::bf16 : DType::fp16;
    } else if (flag == "--d") a.config.head_dim = number();
    else if (flag == "--dv") a.config.head_dim_v = number();
    else if (flag == "--causal") a.config.causal = true;
    else if (flag == "--lse") a.config.lse = true;
    else if (flag == "--qh-per-kv") {
      a.config.q_heads_per_kv = number();
      if (a.config.q_heads_per_kv < 1 || a.config.q_heads_per_kv > kMaxQHeadsPerKv)
        usage("--qh-per-kv needs an integer in [1, " + std::to_string(kMaxQHeadsPerKv) + "]");
    } else if (flag == "--seqlen-q") a.seqlen_q = number();
    else if (flag == "--seqlen-k") a.seqlen_k = number();
    else if (flag == "--dot") a.dot = true;
    else if (flag == "--out") a.out = value();
    else usage("unknown option " + flag);
  }
  if (!a.config.arch) a.config.arch = current_device_arch();
  if (!a.config.arch) a.config.arch = 100;  // no GPU: plan and compile for B200
  return a;
}

int prewarm(const Args& a) {
  const int arch = a.config.arch;
  const std::vector<KernelConfig> configs = tool::default_configs(a.config.backend, arch, a.config.q_heads_per_kv);
  Options options = Options::from_env();
  Attention attention(options);
  std::cout << "fa4rt " << version() << ": prewarming " << configs.size() << " configurations for sm_" << arch
            << " (NVRTC " << detail::nvrtc_version() << ")\n";
  const auto start = std::chrono::steady_clock::now();
  const PrewarmReport report = attention.prewarm(configs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::map<std::string, int> per_backend;
  for (const KernelConfig& c : configs) per_backend[to_string(detail::key_for_config(c, arch).backend)]++;
  for (const auto& [backend, count] : per_backend) std::cout << "  " << std::setw(15) << backend << ": " << count << " kernels\n";
  std::cout << "compiled " << report.compiled << ", from cache " << report.from_cache << ", failed "
            << report.failures.size() << " in " << std::fixed << std::setprecision(1) << seconds << " s\n";
  for (const PrewarmFailure& f : report.failures) std::cout << "FAILED " << f.config.name() << ": " << f.message << "\n";
  // One representative Plan per backend, so the job shows what it built.
  std::map<std::string, bool> shown;
  for (const KernelConfig& c : configs) {
    const KernelKey key = detail::key_for_config(c, arch);
    if (shown[to_string(key.backend)] || c.head_dim != 128 || !c.causal || c.lse) continue;
    shown[to_string(key.backend)] = true;
    std::cout << "\n" << detail::plan_report(detail::make_plan(key), 1000, 1500);
  }
  return report.failures.empty() ? 0 : 1;
}

int resources(const Args& a) {
  const int arch = a.config.arch;
  std::cout << "| configuration | target | compile ms | registers | spill st/ld B | stack B | smem B | TMEM cols | KV stages |\n"
            << "|---|---|---|---|---|---|---|---|---|\n";
  int failures = 0;
  for (const KernelConfig& c : supported_configs(a.config.backend, arch)) {
    const KernelKey key = detail::key_for_config(c, arch);
    const Plan p = detail::make_plan(key);
    std::vector<std::string> options = detail::compile_options(key);
    options.push_back("--ptxas-options=--verbose");
    const detail::CompiledKernel k = detail::nvrtc_compile(detail::assemble_source(p), options, key.name(), "");
    const detail::ResourceUsage r = detail::parse_ptxas_report(k.log);
    failures += !r.found || r.spill_store_bytes || r.spill_load_bytes;
    std::cout << "| " << key.name() << " | " << key.target() << " | " << std::fixed << std::setprecision(0) << k.milliseconds
              << " | " << r.registers << " | " << r.spill_store_bytes << "/" << r.spill_load_bytes << " | " << r.stack_bytes
              << " | " << p.smem_bytes << " | " << p.tmem_columns << " | " << p.kv_stages << " |\n";
  }
  return failures ? 1 : 0;
}

int plan(const Args& a) {
  const Plan p = detail::make_plan(detail::key_for_config(a.config, a.config.arch));
  std::cout << (a.dot ? detail::barrier_dot(p) : detail::plan_report(p, a.seqlen_q, a.seqlen_k));
  return 0;
}

int dump(const Args& a) {
  if (a.out.empty()) usage("dump needs --out DIR");
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) throw Error(ErrorCode::invalid_argument, "--out " + a.out + ": cannot create the directory: " + ec.message());
  const KernelKey key = detail::key_for_config(a.config, a.config.arch);
  const Plan p = detail::make_plan(key);
  const std::string source = detail::assemble_source(p);
  const detail::CompiledKernel k = detail::nvrtc_compile(source, detail::compile_options(key), key.name(), a.out);
  std::ofstream cubin(a.out + "/" + key.name() + ".cubin", std::ios::binary);
  if (!cubin.write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size())))
    throw Error(ErrorCode::invalid_argument, "--out " + a.out + ": cannot write the cubin");
  std::cout << a.out << "/" << key.name() << ".{cu,log,cubin}: " << source.size() << " bytes of source, " << k.cubin.size()
            << " bytes of cubin, " << std::fixed << std::setprecision(0) << k.milliseconds << " ms\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && std::strcmp(argv[1], "cache") == 0) return fa4::tool::cache_command(argc - 2, argv + 2);
    if (argc >= 2 && std::strcmp(argv[1], "bundle") == 0) return fa4::tool::bundle_command(argc - 2, argv + 2);
    const Args a = parse(argc, argv);
    if (a.command == "prewarm") return prewarm(a);
    if (a.command == "plan") return plan(a);
    if (a.command == "dump") return dump(a);
    if (a.command == "resources") return resources(a);
    usage("unknown command '" + a.command + "'");
  } catch (const fa4::Error& e) {
    std::cerr << "fa4rt: error (" << fa4::to_string(e.code()) << "): " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "fa4rt: error: " << e.what() << "\n";
    return 1;
  }
}
