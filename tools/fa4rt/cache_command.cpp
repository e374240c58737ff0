// `fa4rt cache ...` and `fa4rt bundle ...`: inspect and maintain the disk cache, and build read-only cache
// bundles offline (NVRTC only, no GPU).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cache/disk_cache.hpp"
#include "runtime/backend.hpp"
#include "tools/fa4rt/cli.hpp"

namespace fa4::cli {

namespace {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::ostringstream s;
  s << std::fixed << std::setprecision(u == 0 ? 0 : 1) << v << " " << units[u];
  return s.str();
}

std::string human_age(int64_t since) {
  const int64_t s = std::max<int64_t>(0, static_cast<int64_t>(std::time(nullptr)) - since);
  if (since <= 0) return "?";
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

// The cache as the library would open it (FA4_CACHE_DIR, FA4_CACHE_MAX_BYTES).
struct OpenedCache {
  Options options = Options::from_env();
  cache::DiskCache disk{options};
};

int dir(const OpenedCache& c) {
  for (const cache::DirectoryInfo& d : c.disk.directories()) {
    std::cout << (d.writable ? "writable  " : "bundle    ") << d.path;
    if (!d.usable) std::cout << "  (not used: " << d.problem << ")";
    else if (d.writable && !c.disk.enabled()) std::cout << "  (read only: " << d.problem << ")";
    std::cout << "\n";
  }
  std::cout << "bound of the writable directory: "
            << (c.options.cache_max_bytes ? human_bytes(c.options.cache_max_bytes) : std::string("none"))
            << " (FA4_CACHE_MAX_BYTES)\n";
  if (!c.options.disk_cache) std::cout << "FA4_DISK_CACHE=0: the library keeps kernels in memory only\n";
  return 0;
}

int ls(const OpenedCache& c) {
  std::vector<cache::EntryInfo> entries = c.disk.list(false);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.last_used > b.last_used; });
  std::cout << std::left << std::setw(40) << "CONFIGURATION" << std::right << std::setw(11) << "SIZE" << std::setw(6)
            << "AGE" << std::setw(10) << "LAST USE" << "  KEY" << std::string(30, ' ') << "DIRECTORY\n";
  std::map<std::string, std::pair<size_t, uint64_t>> totals;  // directory -> entries, bytes
  for (const cache::EntryInfo& e : entries) {
    const std::string name = e.name.empty() ? "-" : e.name;
    std::cout << std::left << std::setw(40) << name << std::right << std::setw(11) << human_bytes(e.bytes) << std::setw(6)
              << human_age(e.created) << std::setw(10) << human_age(e.last_used) << "  " << e.file.substr(0, 32) << "  "
              << e.directory;
    if (!e.problem.empty()) std::cout << (e.other_version ? "  " : "  BAD: ") << e.problem;
    std::cout << "\n";
    totals[e.directory].first++;
    totals[e.directory].second += e.bytes;
  }
  for (const cache::DirectoryInfo& d : c.disk.directories()) {
    if (!d.usable) continue;
    const auto [count, bytes] = totals[d.path];
    std::cout << (d.writable ? "writable " : "bundle ") << d.path << ": " << count << " entries, " << human_bytes(bytes);
    if (d.writable && c.options.cache_max_bytes) std::cout << " of " << human_bytes(c.options.cache_max_bytes);
    std::cout << "\n";
  }
  return 0;
}

int verify(const OpenedCache& c) {
  const std::vector<cache::EntryInfo> entries = c.disk.list(true);
  size_t bad = 0, other = 0;
  for (const cache::EntryInfo& e : entries) {
    if (e.problem.empty()) continue;
    if (e.other_version) {  // stale after an upgrade, not broken: LRU eviction takes it
      ++other;
      continue;
    }
    ++bad;
    std::cout << "BAD  " << e.directory << "/" << e.file << (e.name.empty() ? "" : " (" + e.name + ")") << ": "
              << e.problem << "\n";
  }
  std::cout << "verified " << entries.size() << " entries: " << (entries.size() - bad - other) << " good, " << bad
            << " bad, " << other << " of another library version (unused; evicted as least recently used)\n";
  if (bad) std::cout << "bad entries are removed (writable directory) or skipped (bundles) when next looked up\n";
  return bad ? 1 : 0;
}

int prune(OpenedCache& c, uint64_t max_bytes, bool all) {
  if (!c.disk.enabled()) {
    std::cerr << "fa4rt: the writable cache directory " << c.disk.directory() << " is not usable: "
              << c.disk.directories()[0].problem << "\n";
    return 1;
  }
  const cache::DiskCache::Removed removed = c.disk.prune(all ? 0 : max_bytes);
  uint64_t left = 0;
  size_t count = 0;
  for (const cache::EntryInfo& e : c.disk.list(false))
    if (e.directory == c.disk.directory()) left += e.bytes, ++count;
  std::cout << "removed " << removed.files << " entries (" << human_bytes(removed.bytes) << ") from "
            << c.disk.directory() << "; " << count << " entries (" << human_bytes(left) << ") remain\n";
  return 0;
}

// "bf16_d128_causal", "fp16_d192_dv128_lse_gqa4" -> a configuration (backend and arch set by the caller).
KernelConfig parse_config(const std::string& name) {
  KernelConfig c;
  std::istringstream tokens(name);
  std::string t;
  auto number = [&](size_t prefix) {
    const std::string digits = t.substr(prefix);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 6)
      throw UsageError("--config " + name + ": bad token '" + t + "'");
    return std::stoi(digits);
  };
  while (std::getline(tokens, t, '_')) {
    if (t == "bf16") c.dtype = DType::bf16;
    else if (t == "fp16") c.dtype = DType::fp16;
    else if (t == "causal") c.causal = true;
    else if (t == "full") c.causal = false;
    else if (t == "lse") c.lse = true;
    else if (t.rfind("dv", 0) == 0) c.head_dim_v = number(2);
    else if (t.rfind("gqa", 0) == 0) c.q_heads_per_kv = number(3);
    else if (t.rfind("d", 0) == 0) c.head_dim = number(1);
    else throw UsageError("--config " + name + ": unknown token '" + t + "' (bf16|fp16, dN, dvN, causal, lse, gqaN)");
  }
  return c;
}

// The backend run() would use for a configuration (portable when nothing serves it: prewarm reports that).
Backend selected_backend(const KernelConfig& c, int arch) {
  try {
    return detail::key_for_config(c, arch).backend;
  } catch (const Error&) {
    return Backend::portable;
  }
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::istringstream s(list);
  for (std::string item; std::getline(s, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

const char kCacheUsage[] =
    "usage: fa4rt cache dir|ls|verify|clear\n"
    "       fa4rt cache prune --max-bytes N\n"
    "\n"
    "  dir                   the directories (FA4_CACHE_DIR), which one is writable, the size bound\n"
    "  ls                    every entry: configuration, size, age, last use; totals\n"
    "  verify                re-check every entry's checksum; exit 1 naming the bad ones\n"
    "  prune --max-bytes N   evict least recently used entries down to N bytes (K, M, G, T suffixes)\n"
    "  clear                 remove every entry of the writable directory\n";

const char kBundleUsage[] =
    "usage: fa4rt bundle --out DIR [--arch 100,90] [--backend B] [--qh-per-kv N] [--config NAME,...] [--serving]\n"
    "\n"
    "Compiles archs x configurations (default: what prewarm compiles for each arch; --serving: with their\n"
    "ragged, paged, decode and split-KV forms) into DIR, to be shipped read-only and listed after the\n"
    "writable cache: FA4_CACHE_DIR=<writable>:DIR. No GPU needed.\n"
    "  NAME: dtype and dims like the entry names, e.g. bf16_d128_causal, fp16_d192_dv128_lse,\n"
    "        bf16_d128_causal_gqa4 (gqaN: N q heads per kv head)\n";

int cache(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("cache needs a command: dir, ls, verify, prune or clear");
  const std::string command = args[0];
  uint64_t max_bytes = 0;
  bool have_max = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string flag = args[i];
    if (flag == "--max-bytes" && command == "prune" && i + 1 < args.size()) {
      const std::optional<uint64_t> v = cache::parse_byte_size(args[++i]);
      if (!v) throw UsageError("--max-bytes " + args[i] + ": not a byte count");
      max_bytes = *v;
      have_max = true;
    } else {
      throw UsageError("cache " + command + ": unexpected argument " + flag);
    }
  }
  OpenedCache c;
  if (command == "dir") return dir(c);
  if (command == "ls") return ls(c);
  if (command == "verify") return verify(c);
  if (command == "clear") return prune(c, 0, true);
  if (command == "prune") {
    if (!have_max) throw UsageError("cache prune needs --max-bytes N (0 removes every entry)");
    return prune(c, max_bytes, false);
  }
  throw UsageError("unknown cache command '" + command + "'");
}

int bundle(const std::vector<std::string>& args) {
  std::string out;
  std::vector<int> archs;
  std::vector<std::string> names;
  Backend backend = Backend::automatic;
  int q_heads_per_kv = 1;
  bool serving = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string flag = args[i];
    if (flag == "--serving") {
      serving = true;
      continue;
    }
    if (i + 1 >= args.size()) throw UsageError("bundle: " + flag + (flag.rfind("--", 0) == 0 ? " needs a value" : ": unexpected"));
    const std::string value = args[++i];
    if (flag == "--out") out = value;
    else if (flag == "--backend") backend = backend_from_string(value);
    else if (flag == "--config") for (const std::string& n : split(value)) names.push_back(n);
    else if (flag == "--arch" || flag == "--qh-per-kv") {
      for (const std::string& v : split(value)) {
        if (v.find_first_not_of("0123456789") != std::string::npos || v.size() > 4)
          throw UsageError(flag + " " + value + ": not a number");
        if (flag == "--arch") archs.push_back(std::stoi(v));
        else q_heads_per_kv = std::stoi(v);
        if (flag == "--qh-per-kv" && (q_heads_per_kv < 1 || q_heads_per_kv > kMaxQHeadsPerKv))
          throw UsageError("--qh-per-kv needs an integer in [1, " + std::to_string(kMaxQHeadsPerKv) + "], got " + v);
      }
    } else throw UsageError("bundle: unknown option " + flag);
  }
  if (out.empty()) throw UsageError("bundle needs --out DIR");
  if (archs.empty()) archs.push_back(100);

  std::vector<KernelConfig> configs;
  for (int arch : archs) {
    if (names.empty()) {
      for (const KernelConfig& c : prewarm_set(backend, arch, q_heads_per_kv, serving)) configs.push_back(c);
      continue;
    }
    std::vector<KernelConfig> named;
    for (const std::string& n : names) {
      KernelConfig c = parse_config(n);
      c.arch = arch;
      c.backend = backend;
      if (c.q_heads_per_kv == 1) c.q_heads_per_kv = q_heads_per_kv;
      named.push_back(c);
    }
    for (KernelConfig c : serving ? with_serving_forms(named, arch) : named) {
      configs.push_back(c);
      // A fast kernel (sm90, sm100) is compared with the portable one on first use (and falls back to it):
      // ship that kernel too, or a no-JIT engine could not run the check.
      if (selected_backend(c, arch) != Backend::portable) {
        c.backend = Backend::portable;
        configs.push_back(c);
      }
    }
  }

  // Only DIR: not the user's cache, not other bundles; unbounded, since a bundle must hold everything.
  Options options = Options::from_env();
  options.cache_dir = out;
  options.cache_bundles.clear();
  options.cache_max_bytes = 0;
  options.disk_cache = true;
  options.allow_jit = true;
  Attention attention(options);
  std::cout << "fa4rt " << version() << ": bundling " << configs.size() << " configurations into " << out << "\n";
  const auto start = std::chrono::steady_clock::now();
  const PrewarmReport report = attention.prewarm(configs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // What this run's configurations map to, and what else the directory holds.
  std::set<std::string> mine;
  for (const KernelConfig& c : configs) {
    try {
      mine.insert(attention.describe(c).cache_key_hex + ".cubin");
    } catch (const Error&) {  // unsupported: listed among the failures below
    }
  }
  cache::DiskCacheSettings unbounded;
  unbounded.max_bytes = 0;
  cache::DiskCache disk(out, unbounded);
  uint64_t total = 0;
  size_t written = 0, other = 0;
  std::vector<cache::EntryInfo> entries = disk.list(false);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const cache::EntryInfo& e : entries) {
    if (!mine.count(e.file)) {
      ++other;
      continue;
    }
    ++written;
    total += e.bytes;
    std::cout << "  " << std::left << std::setw(44) << e.name << std::right << std::setw(11) << human_bytes(e.bytes)
              << "  " << e.file << (e.problem.empty() ? "" : "  BAD: " + e.problem) << "\n";
    // Shipped to other users (the engine's): readable by all, writable by none but the owner.
    ::chmod((out + "/" + e.file).c_str(), 0644);
  }
  ::chmod(out.c_str(), 0755);
  std::cout << written << " entries, " << human_bytes(total) << " in " << out << " (compiled " << report.compiled
            << ", already there " << report.from_cache << ", failed " << report.failures.size() << ") in " << std::fixed
            << std::setprecision(1) << seconds << " s\n";
  if (other) std::cout << "note: " << out << " also holds " << other << " entries of other configurations or versions\n";
  for (const PrewarmFailure& f : report.failures) std::cout << "FAILED " << f.config.name() << ": " << f.message << "\n";
  std::cout << "ship it read-only, owned by root (or the engine's user) and not writable by others, and list it after\n"
            << "the writable cache: FA4_CACHE_DIR=$HOME/.cache/fa4rt:" << out << "\n";
  return report.failures.empty() ? 0 : 1;
}

}  // namespace fa4::cli
