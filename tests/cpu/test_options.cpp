// Options from the environment, backend names, and key stability between prewarm and run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fa4/fa4.hpp"
#include "cache/disk_cache.hpp"
#include "runtime/backend.hpp"
#include "test_util.hpp"

namespace fa4 {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(Options, ReadsEveryVariable) {
  ScopedEnv a("FA4_CACHE_DIR", "/tmp/fa4-x"), b("FA4_DISK_CACHE", "0"), c("FA4_LOG_LEVEL", "debug"),
      d("FA4_BACKEND", "sm100_emulated"), e("FA4_NO_JIT", "1"), f("FA4_COMPILE_THREADS", "3"),
      g("FA4_SELF_CHECK", "off"), h("FA4_DUMP_DIR", "/tmp/dump");
  const Options o = Options::from_env();
  EXPECT_EQ(o.cache_dir, "/tmp/fa4-x");
  EXPECT_TRUE(o.cache_bundles.empty());
  EXPECT_EQ(o.cache_max_bytes, uint64_t{2} << 30) << "the default bound";
  EXPECT_FALSE(o.disk_cache);
  EXPECT_EQ(o.log_level, LogLevel::debug);
  EXPECT_EQ(o.backend, Backend::sm100_emulated);
  EXPECT_FALSE(o.allow_jit);
  EXPECT_EQ(o.max_compile_threads, 3);
  EXPECT_FALSE(o.self_check);
  EXPECT_EQ(o.dump_dir, "/tmp/dump");
}

TEST(Options, CacheDirectoriesAndBound) {
  {  // like PATH: the writable directory, then read-only bundles in search order; empty parts skipped
    ScopedEnv a("FA4_CACHE_DIR", "/rw:/opt/bundle1::/opt/bundle2"), b("FA4_CACHE_MAX_BYTES", "512M");
    const Options o = Options::from_env();
    EXPECT_EQ(o.cache_dir, "/rw");
    EXPECT_EQ(o.cache_bundles, (std::vector<std::string>{"/opt/bundle1", "/opt/bundle2"}));
    EXPECT_EQ(o.cache_max_bytes, uint64_t{512} << 20);
  }
  {  // an empty first part keeps the default writable directory
    ScopedEnv a("FA4_CACHE_DIR", ":/opt/bundle"), b("FA4_CACHE_MAX_BYTES", "0");
    const Options o = Options::from_env();
    EXPECT_EQ(o.cache_dir, "");
    EXPECT_EQ(o.cache_bundles, std::vector<std::string>{"/opt/bundle"});
    EXPECT_EQ(o.cache_max_bytes, 0u) << "0: unbounded";
  }
  for (const char* v : {"1048576", "3G", "2t", "7k"}) {
    ScopedEnv a("FA4_CACHE_MAX_BYTES", v);
    EXPECT_EQ(Options::from_env().cache_max_bytes, cache::parse_byte_size(v).value()) << v;
  }
  EXPECT_EQ(cache::parse_byte_size("3G"), uint64_t{3} << 30);
  EXPECT_EQ(cache::parse_byte_size("2t"), uint64_t{2} << 40);
  for (const char* bad : {"-1", "1.5G", "lots", "G", "1GB", "99999999999999999999", "20000000T"}) {
    ScopedEnv a("FA4_CACHE_MAX_BYTES", bad);
    try {
      Options::from_env();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("FA4_CACHE_MAX_BYTES"), std::string::npos) << e.what();
    }
  }
}

TEST(Options, RejectsBadValuesNamingTheVariable) {
  {
    ScopedEnv a("FA4_BACKEND", "cuda");
    try {
      Options::from_env();
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("backend 'cuda'"), std::string::npos) << e.what();
    }
  }
  {
    ScopedEnv a("FA4_COMPILE_THREADS", "many");
    EXPECT_THROW(Options::from_env(), Error);
  }
  {
    ScopedEnv a("FA4_NO_JIT", "maybe");
    try {
      Options::from_env();
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("FA4_NO_JIT"), std::string::npos) << e.what();
    }
  }
}

TEST(Options, CompileThreadsAreStrictDecimalIntegers) {
  for (const char* good : {"0", "1", "007", "1024"}) {
    ScopedEnv a("FA4_COMPILE_THREADS", good);
    EXPECT_EQ(Options::from_env().max_compile_threads, std::atoi(good)) << good;
  }
  for (const char* bad : {" 4", "4 ", "+4", "-1", "1025", "99999999999999999999", "0x10", "4.0", "4k"}) {
    ScopedEnv a("FA4_COMPILE_THREADS", bad);
    try {
      Options::from_env();
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_EQ(std::string(e.what()).rfind("FA4_COMPILE_THREADS: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("got '") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

Options memory_only() {
  Options o;
  o.disk_cache = false;
  return o;
}

TEST(Options, DumpDirIsCreatedAndMustBeWritable) {
  test::TempDir tmp;
  Options o = memory_only();
  o.dump_dir = tmp.path() + "/a/b";
  EXPECT_NO_THROW(Attention{o});
  EXPECT_TRUE(std::filesystem::is_directory(o.dump_dir));
  EXPECT_TRUE(std::filesystem::is_empty(o.dump_dir)) << "the write probe must not stay behind";

  const std::string file = tmp.path() + "/file";
  std::ofstream(file) << "x";
  for (const std::string& bad : {file + "/dump", file, std::string("/proc/fa4rt-dump"), std::string("/proc/self")}) {
    o.dump_dir = bad;
    try {
      Attention attention(o);
      ADD_FAILURE() << "accepted dump_dir " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_EQ(std::string(e.what()).rfind("dump_dir (FA4_DUMP_DIR): ", 0), 0u) << e.what();
    }
  }
}

// Root ignores directory permissions, so this one can only be shown by an unprivileged user.
TEST(Options, DumpDirReadOnlyDirectory) {
  if (geteuid() == 0) GTEST_SKIP() << "SKIPPED: root can write in read-only directories";
  test::TempDir tmp;
  const std::string dir = tmp.path() + "/ro";
  std::filesystem::create_directory(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  Options o = memory_only();
  o.dump_dir = dir;
  EXPECT_THROW(Attention{o}, Error);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
}

TEST(Options, ConstructorRejectsOutOfRangeOptions) {
  Options o = memory_only();
  o.max_compile_threads = -1;
  EXPECT_THROW(Attention{o}, Error);
  o = memory_only();
  o.backend = static_cast<Backend>(17);
  EXPECT_THROW(Attention{o}, Error);
  o = memory_only();
  o.max_compile_threads = kMaxCompileThreads;
  EXPECT_NO_THROW(Attention{o});
}

TEST(Selection, PrewarmAndRunMapToTheSameKey) {
  AttentionParams p;
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x10000000);
  p.o = reinterpret_cast<void*>(0x90000000);
  p.batch = 3;
  p.seqlen_q = 77;
  p.seqlen_k = 1000;
  p.heads_q = 32;
  p.heads_kv = 8;
  p.head_dim = 128;
  p.causal = true;
  p.k_stride = p.v_stride = {1000 * 8 * 128, 8 * 128, 128};
  p.q_stride = {77 * 32 * 128, 32 * 128, 128};
  for (int arch : {80, 90, 100}) {
    const detail::Problem problem = detail::validate(p);
    KernelConfig c;
    c.dtype = DType::bf16;
    c.head_dim = 128;
    c.causal = true;
    c.q_heads_per_kv = 4;
    EXPECT_EQ(detail::key_for_config(detail::config_of(problem, Backend::automatic, arch), arch),
              detail::key_for_config(c, arch)) << arch;
  }
}

TEST(Selection, KeyNamesAndTargetsDistinguishBackends) {
  KernelConfig c;
  c.backend = Backend::sm100;
  const KernelKey real = detail::key_for_config(c, 100);
  c.backend = Backend::sm100_emulated;
  const KernelKey emulated = detail::key_for_config(c, 90);
  EXPECT_EQ(real.target(), detail::nvrtc_has_family_targets() ? "sm_100f" : "sm_100a");
  EXPECT_EQ(emulated.target(), "sm_90a");
  EXPECT_FALSE(real == emulated);
  EXPECT_NE(real.name(), emulated.name());
}

}  // namespace
}  // namespace fa4

namespace fa4 {
namespace {

// prewarm/describe and run() must select the same key: a configuration that says "automatic" takes the
// Options' backend (here portable, even for an sm_100 target).
TEST(Selection, DescribeFollowsTheOptionsBackend) {
  Options o;
  o.disk_cache = false;
  o.backend = Backend::portable;
  Attention attention(o);
  KernelConfig c;
  c.arch = 100;
  EXPECT_EQ(attention.describe(c).key.backend, Backend::portable);
  c.backend = Backend::sm100;  // an explicit choice wins
  EXPECT_EQ(attention.describe(c).key.backend, Backend::sm100);
  Options automatic = o;
  automatic.backend = Backend::automatic;
  c.backend = Backend::automatic;
  EXPECT_EQ(Attention(automatic).describe(c).key.backend, Backend::sm100);
}

TEST(Options, DiskCacheOffTouchesNoDirectory) {
  test::TempDir tmp;
  const std::string never = tmp.path() + "/never";
  ScopedEnv dir("FA4_CACHE_DIR", never.c_str());
  Options o;
  o.disk_cache = false;
  Attention attention(o);
  KernelConfig c;
  c.arch = 90;
  c.backend = Backend::portable;
  EXPECT_TRUE(attention.prewarm({c}).failures.empty());
  EXPECT_FALSE(std::filesystem::exists(never)) << "FA4_DISK_CACHE=0 must not create the cache directory";
}

}  // namespace
}  // namespace fa4
