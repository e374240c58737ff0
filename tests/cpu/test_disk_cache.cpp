// The on-disk cubin cache: round trip, atomic publish, verification of every field, directory handling,
// and the memory-only fallback (uncreatable directory, full disk, read-only directory).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "cache/disk_cache.hpp"
#include "cache/kernel_cache.hpp"
#include "base/log.hpp"
#include "cache_fixtures.hpp"
#include "test_util.hpp"

namespace fa4::cache {
namespace {

using fa4::test::files_in;
using fa4::test::random_bytes;
using fa4::test::read_file;
using fa4::test::test_key;
using fa4::test::WarningCounter;
using fa4::test::write_file;

namespace fs = std::filesystem;
using fa4::test::TempDir;

template <class T>
void poke(std::vector<char>& file, size_t offset, T value) {
  std::memcpy(file.data() + offset, &value, sizeof(T));
}

// Restores the named environment variables when it goes out of scope.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) : names_(std::move(names)) {
    for (const auto& n : names_) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
    }
  }
  ~EnvGuard() {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i])
        setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      else
        unsetenv(names_[i].c_str());
    }
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

TEST(DiskCache, RoundTrip) {
  TempDir tmp;
  WarningCounter warnings;
  DiskCache disk(tmp.path());
  ASSERT_TRUE(disk.enabled());
  EXPECT_EQ(disk.directory(), tmp.path());

  const CacheKey key = test_key("round trip");
  EXPECT_EQ(disk.entry_path(key), tmp.path() + "/" + key.hex() + ".cubin");
  EXPECT_FALSE(disk.load(key).has_value());  // a plain miss

  const std::vector<char> cubin = random_bytes(10007, 1);
  disk.store(key, cubin);
  const auto loaded = disk.load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, cubin);

  // The file is exactly the documented header followed by the cubin (no name given).
  std::vector<char> file = read_file(disk.entry_path(key));
  ASSERT_EQ(file.size(), sizeof(EntryHeader) + cubin.size());
  EntryHeader h;
  std::memcpy(&h, file.data(), sizeof(h));
  EXPECT_EQ(std::string(h.magic, 8), "FA4CUBIN");
  EXPECT_EQ(h.schema, kSchemaVersion);
  EXPECT_EQ(h.name_size, 0u);
  EXPECT_EQ(h.reserved, 0u);
  EXPECT_EQ(h.key_high, key.high);
  EXPECT_EQ(h.key_low, key.low);
  EXPECT_EQ(h.size, cubin.size());
  EXPECT_NEAR(static_cast<double>(h.created), static_cast<double>(std::time(nullptr)), 60.0);
  // The checksum covers the whole file with the checksum field zeroed.
  std::memset(file.data() + offsetof(EntryHeader, checksum), 0, sizeof(h.checksum));
  EXPECT_EQ(h.checksum, checksum(file.data(), file.size()));
  EXPECT_TRUE(std::equal(cubin.begin(), cubin.end(), file.begin() + sizeof(EntryHeader)));

  // With a configuration name: header, name, cubin.
  const CacheKey named = test_key("named");
  const std::string name = "sm100_sm100_bf16_d128_causal";
  disk.store(named, cubin, name);
  EXPECT_EQ(*disk.load(named), cubin);
  file = read_file(disk.entry_path(named));
  ASSERT_EQ(file.size(), sizeof(EntryHeader) + name.size() + cubin.size());
  std::memcpy(&h, file.data(), sizeof(h));
  EXPECT_EQ(h.name_size, name.size());
  EXPECT_EQ(std::string(file.data() + sizeof(h), name.size()), name);
  EXPECT_EQ(h.size, cubin.size());

  // An empty payload is a valid entry too.
  const CacheKey empty_key = test_key("empty");
  disk.store(empty_key, {});
  const auto empty = disk.load(empty_key);
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(warnings.count(), 0) << warnings.text();
}

TEST(DiskCache, StoreLeavesOnlyCompleteEntries) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    const CacheKey key = test_key("entry " + std::to_string(i));
    disk.store(key, random_bytes(4096 + i, 10 + i));
    expected.push_back(key.hex() + ".cubin");
  }
  // Replacing an entry keeps one file with the new content.
  const CacheKey key0 = test_key("entry 0");
  const std::vector<char> replacement = random_bytes(777, 99);
  disk.store(key0, replacement);
  EXPECT_EQ(*disk.load(key0), replacement);

  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files_in(tmp.path()), expected);  // no temp files left behind
  struct stat st {};
  ASSERT_EQ(::stat(disk.entry_path(key0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // private to the user, like the directory
}

TEST(DiskCache, ReadersNeverSeeAPartialEntry) {
  // One thread keeps replacing an entry while another reads it: every read is a miss (before the first
  // publish) or exactly one of the two complete versions, never a partial file (which would be
  // reported, deleted and warned about).
  TempDir tmp;
  WarningCounter warnings;
  DiskCache disk(tmp.path());
  const CacheKey key = test_key("atomic");
  const std::vector<char> a = random_bytes(512 * 1024, 1), b = random_bytes(384 * 1024, 2);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 20; ++i) disk.store(key, i % 2 ? b : a);
    done = true;
  });
  int reads = 0, hits = 0, bad = 0;
  while (!done || reads == 0) {
    const auto got = disk.load(key);
    ++reads;
    if (got) {
      ++hits;
      if (*got != a && *got != b) ++bad;
    }
  }
  writer.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(warnings.count(), 0) << warnings.text();
  EXPECT_GT(reads, 1);
  EXPECT_EQ(*disk.load(key), b);
  EXPECT_EQ(files_in(tmp.path()), std::vector<std::string>{key.hex() + ".cubin"});
}

TEST(DiskCache, EveryKindOfCorruptionIsRemovedAndReplaced) {
  struct Corruption {
    const char* name;
    const char* warning;  // expected in the warning text
    std::function<void(std::vector<char>&)> apply;
  };
  const size_t n = 5000;
  const std::vector<Corruption> corruptions = {
      {"bad magic", "bad magic", [](auto& f) { f[0] ^= 1; }},
      {"wrong schema", "schema", [](auto& f) { poke<uint32_t>(f, offsetof(EntryHeader, schema), kSchemaVersion + 1); }},
      {"empty file", "truncated header", [](auto& f) { f.clear(); }},
      {"truncated header", "truncated header", [](auto& f) { f.resize(sizeof(EntryHeader) - 1); }},
      {"truncated payload", "file holds", [n](auto& f) { f.resize(sizeof(EntryHeader) + n / 2); }},
      {"trailing bytes", "file holds", [](auto& f) { f.insert(f.end(), 16, 'x'); }},
      {"size field", "file holds", [n](auto& f) { poke<uint64_t>(f, offsetof(EntryHeader, size), n - 1); }},
      {"flipped payload byte", "checksum", [n](auto& f) { f[sizeof(EntryHeader) + n / 3] ^= 0x40; }},
      {"flipped checksum", "checksum", [](auto& f) { f[offsetof(EntryHeader, checksum)] ^= 1; }},
      {"key field", "holds key", [](auto& f) { f[offsetof(EntryHeader, key_low)] ^= 1; }},
  };
  TempDir tmp;
  DiskCache disk(tmp.path());
  for (size_t i = 0; i < corruptions.size(); ++i) {
    const Corruption& c = corruptions[i];
    SCOPED_TRACE(c.name);
    const CacheKey key = test_key(c.name);
    const std::vector<char> cubin = random_bytes(n, static_cast<uint32_t>(i));
    disk.store(key, cubin);
    std::vector<char> file = read_file(disk.entry_path(key));
    c.apply(file);
    write_file(disk.entry_path(key), file);

    WarningCounter warnings;
    EXPECT_FALSE(disk.load(key).has_value());
    EXPECT_EQ(warnings.count(), 1) << warnings.text();
    EXPECT_NE(warnings.text().find(c.warning), std::string::npos) << warnings.text();
    EXPECT_NE(warnings.text().find(disk.entry_path(key)), std::string::npos) << warnings.text();
    EXPECT_FALSE(fs::exists(disk.entry_path(key)));
    EXPECT_FALSE(disk.load(key).has_value());  // now a plain miss: no second warning
    EXPECT_EQ(warnings.count(), 1);
    EXPECT_TRUE(disk.enabled());

    disk.store(key, cubin);  // the rebuild replaces it
    const auto loaded = disk.load(key);
    ASSERT_TRUE(loaded.has_value());
    EXPECT_EQ(*loaded, cubin);
    EXPECT_EQ(warnings.count(), 1);
  }
}

TEST(DiskCache, EntryUnderAnotherKeysNameIsRejected) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey a = test_key("a"), b = test_key("b");
  const std::vector<char> cubin = random_bytes(3000, 5);
  disk.store(a, cubin);
  fs::copy_file(disk.entry_path(a), disk.entry_path(b));

  WarningCounter warnings;
  EXPECT_FALSE(disk.load(b).has_value());
  EXPECT_EQ(warnings.count(), 1);
  EXPECT_NE(warnings.text().find("holds key " + a.hex()), std::string::npos) << warnings.text();
  EXPECT_FALSE(fs::exists(disk.entry_path(b)));
  EXPECT_EQ(*disk.load(a), cubin);  // the rightful entry is untouched
  const std::vector<char> other = random_bytes(100, 6);
  disk.store(b, other);
  EXPECT_EQ(*disk.load(b), other);
}

TEST(DiskCache, CreatesNestedDirectoriesWithMode0700) {
  TempDir tmp;
  const mode_t old_umask = ::umask(022);
  const std::string dir = tmp.path() + "/a/b/c";
  DiskCache disk(dir);
  ::umask(old_umask);
  ASSERT_TRUE(disk.enabled());
  for (const std::string& d : {tmp.path() + "/a", tmp.path() + "/a/b", dir}) {
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << d;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  // An existing directory is used as it is (and a trailing slash is fine).
  DiskCache again(dir + "/");
  EXPECT_TRUE(again.enabled());
  const CacheKey key = test_key("nested");
  again.store(key, random_bytes(10, 1));
  EXPECT_TRUE(disk.load(key).has_value());
}

TEST(DiskCache, DefaultDirectoryPrecedence) {
  // FA4_CACHE_DIR is read by Options::from_env (test_options.cpp), not here.
  EnvGuard guard({"FA4_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
  setenv("FA4_CACHE_DIR", "/x/fa4", 1);
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(default_cache_dir(), "/x/xdg/fa4rt");
  setenv("XDG_CACHE_HOME", "", 1);  // empty counts as unset
  EXPECT_EQ(default_cache_dir(), "/x/home/.cache/fa4rt");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_dir(), "/x/home/.cache/fa4rt");
  unsetenv("HOME");
  EXPECT_EQ(default_cache_dir(), "");

  // No directory at all: memory-only with one warning.
  WarningCounter warnings;
  DiskCache none("");
  EXPECT_FALSE(none.enabled());
  EXPECT_FALSE(none.readable());
  EXPECT_EQ(warnings.count(), 1);

  // An empty constructor argument means default_cache_dir().
  TempDir tmp;
  setenv("XDG_CACHE_HOME", (tmp.path() + "/xdg").c_str(), 1);
  DiskCache from_env("");
  EXPECT_TRUE(from_env.enabled());
  EXPECT_EQ(from_env.directory(), tmp.path() + "/xdg/fa4rt");
  EXPECT_TRUE(fs::is_directory(tmp.path() + "/xdg/fa4rt"));
}

TEST(DiskCache, LockIsExclusiveAndReleasedOnDestruction) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = test_key("lock");
  const std::string lock_path = tmp.path() + "/" + key.hex() + ".lock";
  auto try_lock = [&] {  // a separate open file description behaves like another process
    const int fd = ::open(lock_path.c_str(), O_RDWR);
    EXPECT_GE(fd, 0);
    const bool got = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    return got;
  };
  {
    DiskCache::Lock held = disk.lock(key);
    EXPECT_TRUE(held.held());
    EXPECT_FALSE(try_lock());
    DiskCache::Lock moved = std::move(held);  // ownership moves, the lock stays held
    EXPECT_FALSE(held.held());
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(try_lock());
  }
  // Released, and its file removed with it (lock files do not accumulate); the key locks again.
  EXPECT_FALSE(fs::exists(lock_path));
  DiskCache::Lock again = disk.lock(key);
  EXPECT_TRUE(again.held());
  EXPECT_FALSE(try_lock());
}

// (a) a directory that cannot be created, even by root.
TEST(DiskCache, UncreatableDirectoryRunsMemoryOnly) {
  TempDir tmp;
  write_file(tmp.path() + "/file", {'x'});
  for (const std::string& dir : {tmp.path() + "/file/cache", std::string("/proc/fa4rt-no-such-dir/cache")}) {
    SCOPED_TRACE(dir);
    WarningCounter warnings;
    DiskCache disk(dir);
    EXPECT_FALSE(disk.enabled());
    EXPECT_EQ(warnings.count(), 1) << warnings.text();

    const CacheKey key = test_key("memory only");
    EXPECT_NO_THROW(disk.store(key, random_bytes(100, 1)));
    EXPECT_FALSE(disk.load(key).has_value());
    { DiskCache::Lock lock = disk.lock(key); }

    KernelCache kernels(&disk);
    const Cubin cubin = random_bytes(200, 2);
    EXPECT_EQ(kernels.get(key, "memory-only", [&] { return cubin; }).origin, Origin::compiled);
    const Lookup again = kernels.get(key, "memory-only", [&]() -> Cubin { throw std::runtime_error("rebuilt"); });
    EXPECT_EQ(again.origin, Origin::memory);
    EXPECT_EQ(*again.cubin, cubin);
    EXPECT_EQ(kernels.builds(), 1u);
    EXPECT_EQ(warnings.count(), 1) << "one warning in all, not one per entry:\n" << warnings.text();
  }
  EXPECT_EQ(files_in(tmp.path()), std::vector<std::string>{"file"});
}

// (b) disk full, simulated with RLIMIT_FSIZE in a child process (writes past it fail with EFBIG).
TEST(DiskCache, FullDiskFallsBackWithOneWarning) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";
  const CacheKey small = test_key("fits"), big = test_key("too big"), big2 = test_key("too big, later");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes say which check failed.
    const rlimit limit{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(2);
    std::signal(SIGXFSZ, SIG_IGN);
    WarningCounter warnings;
    DiskCache disk(dir);
    if (!disk.enabled()) ::_exit(3);
    disk.store(small, random_bytes(1000, 1));  // under the limit: stored
    if (!disk.enabled() || !disk.load(small)) ::_exit(4);
    // Several threads fail at once (forking first, then threading, is fine): still one warning.
    std::atomic<int> threw{0};
    std::atomic<bool> go{false};
    const std::vector<char> big_cubin = random_bytes(64 * 1024, 2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] {
      const CacheKey key = test_key("too big " + std::to_string(i));
      while (!go) std::this_thread::yield();
      try {
        disk.store(key, big_cubin);
      } catch (...) {
        ++threw;
      }
    });
    go = true;
    for (auto& t : threads) t.join();
    try {
      disk.store(big2, random_bytes(64 * 1024, 3));  // after the fallback: a silent no-op
    } catch (...) {
      ++threw;
    }
    if (threw) ::_exit(5);
    if (disk.enabled()) ::_exit(6);
    if (warnings.count() != 1) ::_exit(7);
    if (warnings.text().find(std::strerror(EFBIG)) == std::string::npos) ::_exit(8);
    KernelCache kernels(&disk);  // still works, in memory
    const Cubin cubin = random_bytes(50 * 1024, 4);
    if (kernels.get(big, "full disk", [&] { return cubin; }).origin != Origin::compiled) ::_exit(9);
    const Lookup again = kernels.get(big, "full disk", [&] { return Cubin{}; });
    if (again.origin != Origin::memory || *again.cubin != cubin) ::_exit(10);
    if (warnings.count() != 1) ::_exit(11);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the exit codes in the child's code";
  // Only the entry that fit: no partial entry, no temp file.
  EXPECT_EQ(files_in(dir), std::vector<std::string>{small.hex() + ".cubin"});
}

// Permission bits do not bind root, so the read-only tests run as another user (fa4::test::run_as).
TEST(DiskCache, ReadOnlyDirectoryRunsMemoryOnly) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/ro";
  ASSERT_EQ(::mkdir(dir.c_str(), 0500), 0);
  ASSERT_EQ(::chown(tmp.path().c_str(), test::kOtherUid, test::kOtherUid), 0);
  ASSERT_EQ(::chown(dir.c_str(), test::kOtherUid, test::kOtherUid), 0);
  const int rc = test::run_as(test::kOtherUid, [&] {
    {
      WarningCounter warnings;
      DiskCache disk(dir);
      if (disk.enabled()) return 1;
      if (warnings.count() != 1) return 2;
      if (warnings.text().find("not writable") == std::string::npos) return 3;
    }
    // Writable when opened, read-only later: the first store falls back, once.
    if (::chmod(dir.c_str(), 0700) != 0) return 4;
    WarningCounter warnings;
    DiskCache disk(dir);
    if (!disk.enabled()) return 5;
    if (::chmod(dir.c_str(), 0500) != 0) return 6;
    disk.store(test_key("x"), random_bytes(10, 1));  // (throwing would exit with 103)
    disk.store(test_key("y"), random_bytes(10, 2));
    if (disk.enabled()) return 7;
    if (warnings.count() != 1) return 8;
    if (disk.faults(Fault::store_failed) != 1) return 9;  // the second store is a silent no-op
    return files_in(dir).empty() ? 0 : 10;
  });
  EXPECT_EQ(rc, 0) << "see the return codes in the test";
}

// A cache built offline and shipped read-only: its entries load, new kernels stay in memory.
TEST(DiskCache, ReadOnlyDirectoryStillServesItsEntries) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/shipped";
  const std::vector<char> cubin = random_bytes(4096, 3);
  ASSERT_EQ(::chown(tmp.path().c_str(), test::kOtherUid, test::kOtherUid), 0);
  const int rc = test::run_as(test::kOtherUid, [&] {
    {
      DiskCache builder(dir);
      builder.store(test_key("shipped"), cubin, "shipped_config");
    }
    if (::chmod(dir.c_str(), 0500) != 0) return 1;
    DiskCache disk(dir);
    if (disk.enabled() || !disk.readable()) return 2;
    const auto loaded = disk.load(test_key("shipped"));
    if (!loaded || *loaded != cubin) return 3;
    disk.store(test_key("new"), random_bytes(10, 4));
    if (disk.load(test_key("new"))) return 4;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "see the return codes in the test";
}

}  // namespace
}  // namespace fa4::cache
