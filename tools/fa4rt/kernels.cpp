// The fa4rt commands that compile or describe kernels: prewarm, plan, dump, resources.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/codegen.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/backend.hpp"
#include "runtime/launch.hpp"
#include "tools/fa4rt/cli.hpp"
#include "tools/fa4rt/report.hpp"

namespace fa4::cli {
namespace {

// The README's usage example: bf16, head_dim 128, causal, 32 q heads over 8 kv heads.
KernelConfig readme_example(Backend backend, int arch) {
  KernelConfig c;
  c.head_dim = 128;
  c.causal = true;
  c.q_heads_per_kv = 4;
  c.backend = backend;
  c.arch = arch;
  return c;
}


void print_cache_line(const Options& options, const char* when) {
  if (!options.disk_cache) {
    std::cout << "disk cache: off (FA4_DISK_CACHE=0): kernels stay in this process's memory\n";
    return;
  }
  const std::string dir = cache_directory(options);
  std::cout << "disk cache " << when << ": " << dir << " (" << describe_size(directory_size(dir)) << ")\n";
}

}  // namespace

std::vector<KernelConfig> with_serving_forms(std::vector<KernelConfig> configs, int arch) {
  const size_t plain = configs.size();
  for (size_t i = 0; i < plain; ++i)
    for (int form = 0; form < 5; ++form) {  // ragged, paged, both; decode and split-KV (a split one readies its combine)
      KernelConfig c = configs[i];
      c.varlen = form == 0 || form == 2, c.paged = form == 1 || form == 2;
      c.decode = form == 3, c.split = form == 3 || form == 4;
      try {
        if (detail::supports(detail::key_for_config(c, arch), nullptr)) configs.push_back(c);
      } catch (const Error&) {  // no backend serves this form of the configuration
      }
    }
  return configs;
}

std::vector<KernelConfig> prewarm_set(Backend backend, int arch, int q_heads_per_kv, bool serving) {
  std::vector<KernelConfig> candidates = supported_configs(backend, arch);
  for (KernelConfig& c : candidates) c.q_heads_per_kv = q_heads_per_kv;  // GQA packing is part of sm90/sm100 keys
  if (backend == Backend::automatic)
    for (const KernelConfig& c : supported_configs(Backend::portable, arch)) candidates.push_back(c);
  candidates.push_back(readme_example(backend, arch));
  if (serving) candidates = with_serving_forms(candidates, arch);

  std::vector<KernelConfig> configs;
  std::set<std::string> keys;
  for (const KernelConfig& c : candidates)
    if (keys.insert(detail::key_for_config(c, arch).name()).second) configs.push_back(c);
  return configs;
}

#define FA4_TARGET_OPTIONS                                                                             \
  "  --arch N              compute capability x10 (default: device 0's, else 100)\n"                   \
  "  --backend B           auto (default), portable, sm90, sm100, sm100_emulated\n"

const char kPrewarmUsage[] =
    "usage: fa4rt prewarm [--arch N] [--backend B] [--qh-per-kv N] [--serving]\n"
    "\n"
    "Compiles into the disk cache every kernel the library runs on one architecture, so that later runs load\n"
    "instead of compiling. NVRTC only: no GPU needed. What it compiles:\n"
    "  - every supported configuration of the backend (dtype, head dims, causal, LSE);\n"
    "  - with the auto backend, also the portable kernels (the sm90 and sm100 kernels' first-use\n"
    "    self-check reference, and what FA4_BACKEND=portable runs);\n"
    "  - the README's example: bf16, head_dim 128, causal, 4 q heads per kv head.\n"
    "It prints the cache directory and its size before and after, [i/N] as each kernel finishes, and the\n"
    "Plan of the README's example on each backend it compiled for.\n"
    "\n" FA4_TARGET_OPTIONS
    "  --qh-per-kv N         q heads per kv head of every configuration (default 1; sm90 and sm100 kernels pack them)\n"
    "  --serving             also each configuration's serving forms: ragged, paged, both, decode and split-KV\n"
    "                        (the kernels an engine's ragged prefill and decode calls select)\n"
    "Environment: FA4_CACHE_DIR, FA4_DISK_CACHE, FA4_COMPILE_THREADS (README.md).\n";

int prewarm(const std::vector<std::string>& args) {
  KernelConfig target;  // arch 0: target_arch() picks
  int q_heads_per_kv = 1;
  bool serving = false;
  Flags flags(args);
  while (flags.next()) {
    if (read_target_flag(flags, target)) continue;
    if (flags.flag() == "--qh-per-kv") q_heads_per_kv = flags.q_heads_per_kv();
    else if (flags.flag() == "--serving") serving = true;
    else flags.unknown();
  }
  const int arch = target_arch(target);
  const std::vector<KernelConfig> configs = prewarm_set(target.backend, arch, q_heads_per_kv, serving);
  std::map<Backend, int> per_backend;
  for (const KernelConfig& c : configs) per_backend[detail::key_for_config(c, arch).backend]++;

  Options options = Options::from_env();
  if (!std::getenv("FA4_LOG_LEVEL")) options.log_level = LogLevel::warn;  // the [i/N] lines replace the info log
  Attention attention(options);
  std::cout << "fa4rt " << version() << ": prewarming " << configs.size() << " kernels for sm_" << arch << " (";
  for (auto it = per_backend.begin(); it != per_backend.end(); ++it)
    std::cout << (it == per_backend.begin() ? "" : ", ") << it->second << " " << to_string(it->first);
  std::cout << "), NVRTC " << detail::nvrtc_version() << "\n";
  print_cache_line(options, "before");

  const int width = static_cast<int>(std::to_string(configs.size()).size());
  const auto start = std::chrono::steady_clock::now();
  const PrewarmReport report = attention.prewarm(configs, [&](const PrewarmProgress& p) {
    std::cout << "[" << std::setw(width) << p.done << "/" << p.total << "] "
              << (p.failure ? "FAILED  " : p.compiled ? "compiled" : "cached  ") << " "
              << detail::key_for_config(*p.config, arch).name() << "\n"
              << std::flush;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "compiled " << report.compiled << ", from cache " << report.from_cache << ", failed "
            << report.failures.size() << " in " << std::fixed << std::setprecision(1) << seconds << " s\n";
  for (const PrewarmFailure& f : report.failures) std::cout << "FAILED " << f.config.name() << ": " << f.message << "\n";
  print_cache_line(options, "after");

  // The README's example, planned by each backend that was compiled for, so the job shows what it built.
  for (const auto& [backend, count] : per_backend) {
    const Plan p = detail::make_plan(detail::key_for_config(readme_example(backend, arch), arch));
    std::cout << "\n== Plan of the README's example (bf16, d128, causal, 4 q heads per kv head) on the " << to_string(backend)
              << " backend ==\n"
              << detail::plan_report(p, {1000, 1500});
  }
  return report.failures.empty() ? 0 : 1;
}

const char kResourcesUsage[] =
    "usage: fa4rt resources [--arch N] [--backend B]\n"
    "\n"
    "Compiles every supported configuration with ptxas --verbose (nothing is cached) and prints a Markdown\n"
    "table: compile ms, registers, spills, stack, shared memory, TMEM columns, KV stages. Exit status 1 when\n"
    "a kernel spills or ptxas printed no report.\n"
    "\n" FA4_TARGET_OPTIONS;

int resources(const std::vector<std::string>& args) {
  KernelConfig target;  // arch 0: target_arch() picks
  Flags flags(args);
  while (flags.next())
    if (!read_target_flag(flags, target)) flags.unknown();
  const int arch = target_arch(target);
  std::cout << "| configuration | target | compile ms | registers | spill st/ld B | stack B | smem B | TMEM cols | KV stages |\n"
            << "|---|---|---|---|---|---|---|---|---|\n";
  int failures = 0;
  for (const KernelConfig& c : supported_configs(target.backend, arch)) {
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

#define FA4_CONFIG_OPTIONS                                                                             \
  FA4_TARGET_OPTIONS                                                                                   \
  "  --dtype bf16|fp16     element type (default bf16)\n"                                              \
  "  --d N, --dv N         head dims of Q/K and of V (default 128; --dv defaults to --d)\n"            \
  "  --causal, --lse       causal mask (bottom-right aligned); write the log-sum-exp\n"                 \
  "  --qh-per-kv N         q heads per kv head (GQA; default 1)\n"                                   \
  "  --varlen              ragged batches (cu_seqlens_q/k) or seqused_k\n"                               \
  "  --paged               a paged KV cache (page_table)\n"                                           \
  "  --window, --softcap, --sinks   the variants' kernel flags\n"                                   \
  "  --decode              the decode kernel (seqlen_q * q heads per kv head <= 32)\n"                  \
  "  --split               split-KV: the kernel writes partial states (decode: or folds them itself)\n"

const char kPlanUsage[] =
    "usage: fa4rt plan [config options] [--seqlen-q N --seqlen-k N] [--window-left N] [--window-right N]\n"
    "                  [--decode [--batch N [--heads-kv N] [--sms N]]] [--dot | --model [--counts FILE]]\n"
    "\n"
    "Prints the Plan of one configuration: math contract, MMA contracts, TMEM map, warp roles, barrier\n"
    "graph, mask block classes (for the given sequence lengths) and risks; for the sm100 kernel, the B200\n"
    "speed model's bound and predicted TFLOP/s next to FA4's (docs/speed-model.md). No GPU, no compile.\n"
    "\n" FA4_CONFIG_OPTIONS
    "  --seqlen-q N --seqlen-k N   sequence lengths for the mask block classes (equal: the model's causal share)\n"
    "  --window-left N, --window-right N   a sliding window (portable kernels; -1 unbounded): its Plan and\n"
    "                        block classes (blocks outside it skipped, inside it full, on its edges masked)\n"
    "  --batch N             with --decode: how num_splits 0 cuts a batch of N sequences of --seqlen-q queries\n"
    "                        and --seqlen-k keys, batch-invariant and with split_by_batch: parts, CTAs,\n"
    "                        workspace_size, combine (--heads-kv N kv heads, default 8; --sms N SMs, default 132)\n"
    "  --dot                 print the barrier graph in Graphviz DOT instead\n"
    "  --model               print only the speed model\n"
    "  --counts FILE         the model's per-role SASS counts from FILE (tools/sass_report.py --model-lines)\n"
    "                        instead of bench/results/sm100-model-counts.txt as built in\n";

namespace {

// How num_splits 0 cuts a decode batch on a device of `sms` SMs, batch-invariant and with split_by_batch.
std::string split_section(KernelConfig config, int arch, const detail::MaskShape& shape, int batch, int heads_kv, int sms) {
  config.split = true;
  const Plan plan = detail::make_plan(detail::key_for_config(config, arch));
  const int qh = config.q_heads_per_kv;
  detail::Problem problem;
  AttentionParams& p = problem.params;
  p.batch = batch, p.seqlen_q = std::max(1, shape.seqlen_q), p.seqlen_k = shape.seqlen_k;
  p.heads_q = heads_kv * qh, p.heads_kv = heads_kv, p.head_dim = config.head_dim;
  p.head_dim_v = config.head_dim_v ? config.head_dim_v : config.head_dim;
  problem.q_heads_per_kv = qh, problem.decode = true, problem.split = true, problem.sm_count = sms;
  problem.decode_seqlen_q = kDecodeMaxRows / qh;
  problem.rows = p.batch * p.seqlen_q;
  std::ostringstream os;
  os << "\n== Split-KV with num_splits 0: " << batch << " sequence(s) of " << p.seqlen_q << " queries and " << p.seqlen_k
     << " keys, " << p.heads_q << "/" << heads_kv << " heads, " << sms << " SMs ==\n";
  for (bool by_batch : {false, true}) {
    p.split_by_batch = by_batch;
    const int parts = detail::max_splits(plan, problem);
    fa4k::AttentionArgs args{};
    detail::fill_schedule(plan, problem, args);
    const long long blocks = (p.seqlen_k + plan.tile_n - 1) / plan.tile_n;
    const int per_cta = std::max(1, args.split.parts_per_cta);
    os << (by_batch ? "  split_by_batch:  " : "  batch-invariant: ") << parts << " part(s) of about "
       << (parts > 0 ? (blocks + parts - 1) / parts * plan.tile_n : 0) << " keys, " << args.total_tiles << " CTAs"
       << (per_cta > 1 ? " of " + std::to_string(std::min(per_cta, parts)) + " parts each" : "") << "; "
       << (parts > per_cta ? "a combine merges them" : parts > 1 ? "each CTA merges its sequence's parts" : "no combine")
       << "; workspace_size "
       << detail::split_layout(plan, problem, /*any_smaller_batch=*/true).bytes() << " B\n";
  }
  return os.str();
}

}  // namespace

int plan(const std::vector<std::string>& args) {
  KernelConfig config;
  detail::MaskShape shape;
  int batch = 0, heads_kv = 8, sms = 132;
  bool dot = false, model = false;
  std::string counts;
  Flags flags(args);
  while (flags.next()) {
    if (read_config_flag(flags, config)) continue;
    if (flags.flag() == "--seqlen-q") shape.seqlen_q = flags.number();
    else if (flags.flag() == "--seqlen-k") shape.seqlen_k = flags.number();
    else if (flags.flag() == "--window-left") shape.window_left = flags.number(-1);
    else if (flags.flag() == "--window-right") shape.window_right = flags.number(-1);
    else if (flags.flag() == "--batch") batch = flags.number(1);
    else if (flags.flag() == "--heads-kv") heads_kv = flags.number(1);
    else if (flags.flag() == "--sms") sms = flags.number(1);
    else if (flags.flag() == "--dot") dot = true;
    else if (flags.flag() == "--model") model = true;
    else if (flags.flag() == "--counts") {
      const std::string path = flags.value();
      std::ifstream in(path);
      std::ostringstream text;
      if (!(in && text << in.rdbuf())) throw Error(ErrorCode::invalid_argument, "--counts " + path + ": cannot read");
      counts = text.str();
    } else flags.unknown();
  }
  config.window = shape.window_left >= 0 || shape.window_right >= 0;
  if (batch > 0 && !config.decode) throw UsageError("--batch needs --decode (split-KV with num_splits 0 cuts decode sequences)");
  if (batch > 0 && shape.seqlen_k <= 0) throw UsageError("--batch needs --seqlen-k (the keys of each sequence)");
  const int arch = target_arch(config);
  const Plan p = detail::make_plan(detail::key_for_config(config, arch));
  if (dot) std::cout << detail::barrier_dot(p);
  else if (model) std::cout << detail::speed_section(p, shape.seqlen_q == shape.seqlen_k ? shape.seqlen_q : 0, counts);
  else std::cout << detail::plan_report(p, shape, counts);
  if (batch > 0) std::cout << split_section(config, arch, shape, batch, heads_kv, sms);
  return 0;
}

const char kDumpUsage[] =
    "usage: fa4rt dump --out DIR [config options] [--lineinfo] [--verbose]\n"
    "\n"
    "Compiles one configuration and writes DIR/<kernel>.cu (the generated source), .log (NVRTC's log) and\n"
    ".cubin. No GPU needed; the caches are not used.\n"
    "\n"
    "  --out DIR             where to write (created if missing)\n" FA4_CONFIG_OPTIONS
    "  --lineinfo            compile with -lineinfo: the cubin maps SASS to lines of DIR/<kernel>.cu\n"
    "                        (nvdisasm -gi); what tools/sass_report.py reads. Not what run() compiles\n"
    "                        or caches, but -lineinfo does not change the generated code\n"
    "  --verbose             ptxas --verbose: registers, spills and stack in the .log\n";

int dump(const std::vector<std::string>& args) {
  KernelConfig config;
  std::string out;
  bool lineinfo = false, verbose = false;
  Flags flags(args);
  while (flags.next()) {
    if (read_config_flag(flags, config)) continue;
    if (flags.flag() == "--out") out = flags.value();
    else if (flags.flag() == "--lineinfo") lineinfo = true;
    else if (flags.flag() == "--verbose") verbose = true;
    else flags.unknown();
  }
  if (out.empty()) throw UsageError("needs --out DIR");
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw Error(ErrorCode::invalid_argument, "--out " + out + ": cannot create the directory: " + ec.message());
  const KernelKey key = detail::key_for_config(config, target_arch(config));
  const Plan p = detail::make_plan(key);
  const std::string source = detail::assemble_source(p);
  std::vector<std::string> options = detail::compile_options(key);
  if (lineinfo) options.push_back("-lineinfo");
  if (verbose) options.push_back("--ptxas-options=--verbose");
  const detail::CompiledKernel k = detail::nvrtc_compile(source, options, key.name(), out);
  std::ofstream cubin(out + "/" + key.name() + ".cubin", std::ios::binary);
  if (!cubin.write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size())))
    throw Error(ErrorCode::invalid_argument, "--out " + out + ": cannot write the cubin");
  std::cout << out << "/" << key.name() << ".{cu,log,cubin}: " << source.size() << " bytes of source, " << k.cubin.size()
            << " bytes of cubin, " << std::fixed << std::setprecision(0) << k.milliseconds << " ms\n";
  return 0;
}

}  // namespace fa4::cli
