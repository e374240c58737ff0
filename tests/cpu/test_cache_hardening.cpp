// Cache hardening (issue 8): one test per item, then a table of planted cache faults, each run in a
// forked child under a time limit: no hang, no crash, no exception escapes, the kernel is still served
// (from disk, a rebuild or memory), and the fault is typed (DiskCache::faults) or at least logged.
// Tests run as root in CI: "another user" is uid 65534 (files are chown()ed to it), and permission
// checks that bind only non-root users run in a child as that user (fa4::test::run_as).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <optional>
#include <thread>

#include "base/log.hpp"
#include "cache/disk_cache.hpp"
#include "cache/kernel_cache.hpp"
#include "fa4/fa4.hpp"
#include "cache_fixtures.hpp"
#include "test_util.hpp"

namespace fa4::cache {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test::files_in;
using test::kOtherUid;
using test::random_bytes;
using test::read_file;
using test::TempDir;
using test::test_key;
using test::WarningCounter;
using test::write_file;

const std::string kConfigName = "sm100_sm100_bf16_d128_causal";

// Sets an environment variable for the scope.
class ScopedEnvForTest {
 public:
  ScopedEnvForTest(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnvForTest() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The bytes of a valid entry for `key` holding `cubin`, as an attacker (or a corruption) would start from.
std::vector<char> valid_entry(const CacheKey& key, const std::vector<char>& cubin) {
  TempDir scratch;
  DiskCache disk(scratch.path());
  disk.store(key, cubin, kConfigName);
  return read_file(disk.entry_path(key));
}

// Writes `bytes` at `path` with `mode`, owned by `uid`.
void plant(const std::string& path, const std::vector<char>& bytes, mode_t mode = 0600, uid_t uid = 0) {
  write_file(path, bytes);
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
  ASSERT_EQ(::chown(path.c_str(), uid, uid), 0) << path;
}

void set_age(const std::string& path, std::chrono::seconds age) {
  const timespec t = {std::time(nullptr) - static_cast<time_t>(age.count()), 0};
  const timespec times[2] = {t, t};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

template <class T>
void poke(std::vector<char>& file, size_t offset, T value) {
  std::memcpy(file.data() + offset, &value, sizeof(T));
}

// A process that holds the flock on `path` (and, with `stop`, SIGSTOPs itself) until killed.
pid_t spawn_lock_holder(const std::string& path, bool stop) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    if (::write(ready[1], "x", 1) != 1) ::_exit(1);
    if (stop) ::raise(SIGSTOP);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  const bool ok = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  return ok ? pid : -1;
}

void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// Runs fn() in a forked child with a time limit. Returns fn()'s exit code, or "hang" (124, killed),
// "threw" (125) or "crashed" (126 + the signal in `signal`).
int bounded(std::chrono::seconds limit, const std::function<int()>& fn, int* signal = nullptr) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 125;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill_and_reap(pid);
      return 124;
    }
    std::this_thread::sleep_for(5ms);
  }
  if (WIFSIGNALED(status)) {
    if (signal) *signal = WTERMSIG(status);
    return 126;
  }
  return WEXITSTATUS(status);
}

// ---- One test per item of the issue -------------------------------------------------------------------

// 1. A FIFO at an entry name hung open() forever.
TEST(CacheHardening, FifoEntryIsAMissNotAHang) {
  TempDir tmp;
  const CacheKey key = test_key("fifo");
  const std::string entry = tmp.path() + "/" + key.hex() + ".cubin";
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  const int rc = bounded(10s, [&] {
    WarningCounter warnings;
    DiskCache disk(tmp.path());
    if (disk.load(key)) return 1;
    if (disk.faults(Fault::not_regular_file) != 1) return 2;
    if (warnings.text().find("FIFO") == std::string::npos) return 3;
    if (fs::exists(fs::symlink_status(entry))) return 4;  // removed: it was in our own directory
    const std::vector<char> cubin = random_bytes(100, 1);
    disk.store(key, cubin);
    return disk.load(key) == cubin ? 0 : 5;
  });
  EXPECT_EQ(rc, 0) << "124: hung; see the return codes in the test";
}

// 2. A huge (sparse) entry: bad_alloc or 30 s and 4 GiB of memory. Now it is never read.
TEST(CacheHardening, HugeEntryIsNotRead) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = test_key("huge");
  for (const uint64_t size : {uint64_t{1} << 40, uint64_t{4} << 30, kDefaultMaxEntryBytes + 1}) {
    SCOPED_TRACE(size);
    const int fd = ::open(disk.entry_path(key).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);  // sparse: no disk space used
    ::close(fd);
    WarningCounter warnings;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(disk.load(key).has_value());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
    EXPECT_NE(warnings.text().find("above the bound"), std::string::npos) << warnings.text();
    EXPECT_FALSE(fs::exists(disk.entry_path(key)));
    EXPECT_TRUE(disk.enabled());
  }
  EXPECT_EQ(disk.faults(Fault::too_large), 3u);

  // A huge file does not count towards the size bound (it would evict every good entry): eviction
  // removes it instead.
  DiskCacheSettings settings;
  settings.max_bytes = 1 << 20;
  DiskCache bounded_disk(tmp.path(), settings);
  const CacheKey good = test_key("good");
  bounded_disk.store(good, random_bytes(1000, 2));
  const int fd = ::open(disk.entry_path(key).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ::close(fd);
  bounded_disk.store(test_key("other"), random_bytes(1000, 3));
  EXPECT_TRUE(bounded_disk.load(good).has_value()) << "a planted huge file evicted a good entry";
  EXPECT_FALSE(fs::exists(disk.entry_path(key)));
}

// 3. A directory at an entry or lock name disabled the whole disk cache.
TEST(CacheHardening, DirectoryAtEntryOrLockNameIsOneBadEntry) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache kernels(&disk);
  const CacheKey key = test_key("directory in the way");
  // Non-empty, so that they cannot be removed (we never delete what we did not create).
  for (const std::string& name : {key.hex() + ".cubin", key.hex() + ".lock"}) {
    ASSERT_EQ(::mkdir((tmp.path() + "/" + name).c_str(), 0700), 0);
    write_file(tmp.path() + "/" + name + "/keep", {'x'});
  }
  WarningCounter warnings;
  const Cubin cubin = random_bytes(500, 1);
  const Lookup r = kernels.get(key, kConfigName, [&] { return cubin; });
  EXPECT_EQ(r.origin, Origin::compiled);
  EXPECT_EQ(*r.cubin, cubin);
  EXPECT_TRUE(disk.enabled()) << "one bad entry must not disable the cache";
  EXPECT_GE(disk.faults(Fault::not_regular_file), 2u);  // entry (load twice) and lock
  EXPECT_EQ(disk.faults(Fault::store_failed), 1u);
  EXPECT_NE(warnings.text().find("a directory"), std::string::npos) << warnings.text();
  // Every other key is stored and served as usual.
  const CacheKey other = test_key("other");
  disk.store(other, cubin);
  EXPECT_EQ(disk.load(other), cubin);

  // Empty directories at those names are simply removed, and the entry is stored.
  const CacheKey key2 = test_key("empty directory in the way");
  for (const std::string& name : {key2.hex() + ".cubin", key2.hex() + ".lock"})
    ASSERT_EQ(::mkdir((tmp.path() + "/" + name).c_str(), 0700), 0);
  KernelCache fresh(&disk);
  EXPECT_EQ(fresh.get(key2, kConfigName, [&] { return cubin; }).origin, Origin::compiled);
  EXPECT_EQ(disk.load(key2), cubin);
}

// 4a. Forged cubins: a directory another user can write into (or that is reached through a link, or
// lies under a world-writable parent without sticky bit) is refused as a whole, and its planted entry
// (valid header for the key) is never served.
TEST(CacheHardening, UnsafeDirectoriesAreRefused) {
  struct Case {
    const char* name;
    std::function<std::string(const std::string& root)> make;  // returns the cache path to use
    const char* warning;
  };
  const CacheKey key = test_key("victim");
  const std::vector<char> forged = valid_entry(key, random_bytes(800, 66));
  auto plant_in = [&](const std::string& dir, mode_t mode, uid_t owner) {
    fs::create_directories(dir);
    plant(dir + "/" + key.hex() + ".cubin", forged, 0600, owner);
    EXPECT_EQ(::chmod(dir.c_str(), mode), 0);
    EXPECT_EQ(::chown(dir.c_str(), owner, owner), 0);
  };
  const std::vector<Case> cases = {
      {"world-writable", [&](const std::string& r) { plant_in(r + "/c", 0777, 0); return r + "/c"; }, "writable by group or others"},
      {"group-writable", [&](const std::string& r) { plant_in(r + "/c", 0770, 0); return r + "/c"; }, "writable by group or others"},
      {"owned by another user", [&](const std::string& r) { plant_in(r + "/c", 0700, kOtherUid); return r + "/c"; }, "owned by uid 65534"},
      {"reached through a symlink", [&](const std::string& r) {
         plant_in(r + "/attacker", 0700, 0);
         fs::create_directory_symlink(r + "/attacker", r + "/c");
         return r + "/c";
       }, "symbolic link"},
      {"symlink with a trailing slash", [&](const std::string& r) {
         plant_in(r + "/attacker", 0700, 0);
         fs::create_directory_symlink(r + "/attacker", r + "/c");
         return r + "/c/";
       }, "symbolic link"},
      {"under a world-writable parent without sticky bit", [&](const std::string& r) {
         fs::create_directories(r + "/pub");
         EXPECT_EQ(::chmod((r + "/pub").c_str(), 0777), 0);
         plant_in(r + "/pub/c", 0700, 0);
         return r + "/pub/c";
       }, "without the sticky bit"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir tmp;
    const std::string dir = c.make(tmp.path());
    WarningCounter warnings;
    DiskCache disk(dir);
    EXPECT_FALSE(disk.enabled());
    EXPECT_FALSE(disk.readable());
    EXPECT_EQ(disk.faults(Fault::unsafe_directory), 1u);
    EXPECT_EQ(warnings.count(), 1) << warnings.text();  // warned once
    EXPECT_NE(warnings.text().find(c.warning), std::string::npos) << warnings.text();
    EXPECT_FALSE(disk.load(key).has_value()) << "a planted cubin was served";
    KernelCache kernels(&disk);
    const Cubin genuine = random_bytes(800, 1);
    EXPECT_EQ(*kernels.get(key, kConfigName, [&] { return genuine; }).cubin, genuine);
    EXPECT_EQ(warnings.count(), 1) << warnings.text();  // memory-only, silently
  }
  // A world-writable parent with the sticky bit (/tmp) is fine: the TempDirs above live there.
  TempDir tmp;
  EXPECT_TRUE(DiskCache(tmp.path() + "/fine").enabled());
}

// 4b. Files are checked on their opened descriptor: owner and mode.
TEST(CacheHardening, ForeignOrWritableFilesAreRefused) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = test_key("victim");
  const std::vector<char> forged = valid_entry(key, random_bytes(800, 66));
  struct Case {
    const char* name;
    mode_t mode;
    uid_t owner;
    Fault fault;
  };
  for (const Case& c : {Case{"another user's", 0600, kOtherUid, Fault::foreign_owner},
                        Case{"group-writable", 0620, 0, Fault::unsafe_mode},
                        Case{"world-writable", 0606, 0, Fault::unsafe_mode}}) {
    SCOPED_TRACE(c.name);
    plant(disk.entry_path(key), forged, c.mode, c.owner);
    const uint64_t before = disk.faults(c.fault);
    EXPECT_FALSE(disk.load(key).has_value()) << "a planted cubin was served";
    EXPECT_EQ(disk.faults(c.fault), before + 1);
    EXPECT_FALSE(fs::exists(disk.entry_path(key))) << "removed from our own directory";
  }
}

// 4c. Read-only bundles: owned by the user or root, not writable by others; served, never written.
TEST(CacheHardening, BundlesAreServedNeverWritten) {
  TempDir tmp;
  const std::string bundle = tmp.path() + "/bundle", writable = tmp.path() + "/rw";
  const CacheKey in_bundle = test_key("in the bundle"), bad = test_key("corrupt in the bundle");
  const std::vector<char> cubin = random_bytes(900, 1);
  {
    DiskCache builder(bundle);
    builder.store(in_bundle, cubin, kConfigName);
    builder.store(bad, cubin, kConfigName);
  }
  std::vector<char> corrupt = read_file(bundle + "/" + bad.hex() + ".cubin");
  corrupt.back() ^= 1;
  write_file(bundle + "/" + bad.hex() + ".cubin", corrupt);
  // Installed as shipped: root-owned, 0755/0644.
  ASSERT_EQ(::chmod(bundle.c_str(), 0755), 0);
  for (const std::string& f : files_in(bundle)) ASSERT_EQ(::chmod((bundle + "/" + f).c_str(), 0644), 0);
  const std::vector<std::string> shipped = files_in(bundle);

  DiskCacheSettings settings;
  settings.bundles = {bundle, tmp.path() + "/missing"};
  WarningCounter warnings;
  DiskCache disk(writable, settings);
  EXPECT_TRUE(disk.enabled());
  EXPECT_EQ(disk.faults(Fault::unusable_directory), 1u) << "the missing bundle is warned about";
  const std::vector<DirectoryInfo> dirs = disk.directories();
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_TRUE(dirs[0].writable && dirs[0].usable);
  EXPECT_TRUE(!dirs[1].writable && dirs[1].usable);
  EXPECT_TRUE(!dirs[2].writable && !dirs[2].usable && !dirs[2].problem.empty());

  KernelCache kernels(&disk);
  const Lookup hit = kernels.get(in_bundle, kConfigName, []() -> Cubin { throw std::runtime_error("built"); });
  EXPECT_EQ(hit.origin, Origin::disk);
  EXPECT_EQ(*hit.cubin, cubin);
  // A bad bundle entry is a miss, left in place; the rebuild goes to the writable directory.
  const Cubin rebuilt = random_bytes(900, 2);
  EXPECT_EQ(*kernels.get(bad, kConfigName, [&] { return rebuilt; }).cubin, rebuilt);
  EXPECT_EQ(disk.faults(Fault::corrupt), 1u) << "an entry that stays bad is reported once";
  EXPECT_EQ(warnings.text().find("ignoring"), warnings.text().rfind("ignoring")) << warnings.text();
  EXPECT_EQ(files_in(bundle), shipped);
  EXPECT_EQ(files_in(writable), std::vector<std::string>{bad.hex() + ".cubin"});
  disk.prune(0);
  EXPECT_EQ(files_in(bundle), shipped) << "prune never touches a bundle";

  // A bundle other users could write into, or owned by another user, is refused.
  for (const auto& [mode, owner] : {std::pair<mode_t, uid_t>{0757, 0}, {0755, kOtherUid}}) {
    ASSERT_EQ(::chmod(bundle.c_str(), mode), 0);
    ASSERT_EQ(::chown(bundle.c_str(), owner, owner), 0);
    DiskCache refused(writable, settings);
    EXPECT_EQ(refused.faults(Fault::unsafe_directory), 1u);
    EXPECT_FALSE(refused.directories()[1].usable);
  }
}

// 5. A lock file that is a symlink was followed with O_CREAT and created its target.
TEST(CacheHardening, SymlinkLockIsNotFollowed) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";
  DiskCache disk(dir);
  const CacheKey key = test_key("symlink lock");
  const std::string target = tmp.path() + "/created-by-the-victim", existing = tmp.path() + "/victim-file";
  write_file(existing, {'k', 'e', 'e', 'p'});
  for (const std::string& to : {target, existing}) {
    SCOPED_TRACE(to);
    fs::create_symlink(to, dir + "/" + key.hex() + ".lock");
    {
      DiskCache::Lock lock = disk.lock(key);
      EXPECT_TRUE(lock.held()) << "the link is removed and a real lock file taken";
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir + "/" + key.hex() + ".lock")));
    }
    EXPECT_FALSE(fs::exists(target));
    EXPECT_EQ(read_file(existing), (std::vector<char>{'k', 'e', 'e', 'p'}));
  }
  EXPECT_EQ(disk.faults(Fault::symlink), 2u);
}

// 6. A writer killed between write and rename left a temp file forever.
TEST(CacheHardening, StaleTempFilesAreRemovedOnOpen) {
  TempDir tmp;
  const CacheKey key = test_key("temp");
  const std::string d = tmp.path() + "/";
  write_file(d + key.hex() + ".tmp.123.0", {'o', 'l', 'd'});       // killed writer, 2 h ago
  write_file(d + key.hex() + ".cubin.tmp.Ab12Cd", {'o', 'l', 'd'});  // the previous naming
  write_file(d + key.hex() + ".tmp.123.1", {'n', 'e', 'w'});       // a writer right now
  write_file(d + key.hex() + ".tmp.123.2", {'b', 'u', 's', 'y'});  // old, but its writer still holds it
  write_file(d + test_key("orphan").hex() + ".lock", {});         // builder killed: nobody holds it
  set_age(d + key.hex() + ".tmp.123.0", 2h);
  set_age(d + key.hex() + ".cubin.tmp.Ab12Cd", 2h);
  set_age(d + key.hex() + ".tmp.123.2", 2h);
  const int busy = ::open((d + key.hex() + ".tmp.123.2").c_str(), O_RDONLY);
  ASSERT_EQ(::flock(busy, LOCK_EX), 0);
  const pid_t holder = spawn_lock_holder(d + test_key("held").hex() + ".lock", false);
  ASSERT_GT(holder, 0);

  WarningCounter warnings;
  DiskCache disk(tmp.path());
  EXPECT_EQ(disk.faults(Fault::stale_file), 3u) << warnings.infos();
  std::vector<std::string> kept = {key.hex() + ".tmp.123.1", key.hex() + ".tmp.123.2", test_key("held").hex() + ".lock"};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(files_in(tmp.path()), kept);
  EXPECT_NE(warnings.infos().find("removed stale temp file"), std::string::npos) << warnings.infos();
  EXPECT_EQ(warnings.count(), 0) << "housekeeping is not a warning:\n" << warnings.text();
  ::close(busy);
  kill_and_reap(holder);
}

// 7. A stopped lock holder made every other process wait forever, silently.
TEST(CacheHardening, StoppedLockHolderTimesOut) {
  TempDir tmp;
  const CacheKey key = test_key("stopped holder");
  const pid_t holder = spawn_lock_holder(tmp.path() + "/" + key.hex() + ".lock", /*stop=*/true);
  ASSERT_GT(holder, 0);
  DiskCacheSettings settings;
  settings.lock_timeout = 400ms;
  WarningCounter warnings;
  DiskCache disk(tmp.path(), settings);
  KernelCache kernels(&disk);
  const Cubin cubin = random_bytes(700, 1);
  const auto start = std::chrono::steady_clock::now();
  const Lookup r = kernels.get(key, kConfigName, [&] { return cubin; });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.origin, Origin::compiled);
  EXPECT_EQ(*r.cubin, cubin);
  EXPECT_GE(waited, 400ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(disk.faults(Fault::lock_timeout), 1u);
  EXPECT_NE(warnings.infos().find("waiting for"), std::string::npos) << "a line when the wait gets long";
  EXPECT_NE(warnings.text().find("gave up waiting"), std::string::npos) << warnings.text();
  // Stored anyway (atomically): the next process hits without waiting.
  EXPECT_EQ(disk.load(key), cubin);
  kill_and_reap(holder);
  EXPECT_TRUE(disk.lock(key).held());
}

// The lock file is removed on release: a process that waited on the removed file must not hold a lock
// next to one taken on the new file.
TEST(CacheHardening, LockRemovalOnReleaseKeepsMutualExclusion) {
  TempDir tmp;
  DiskCacheSettings settings;
  settings.lock_timeout = 5s;
  DiskCache a(tmp.path(), settings), b(tmp.path(), settings);
  const CacheKey key = test_key("exclusive");
  for (int round = 0; round < 20; ++round) {
    auto first = std::make_unique<DiskCache::Lock>(a.lock(key));
    ASSERT_TRUE(first->held());
    std::atomic<int> holders{0}, max_holders{0};
    auto hold = [&](DiskCache& disk) {
      DiskCache::Lock lock = disk.lock(key);
      if (!lock.held()) return;
      max_holders = std::max(max_holders.load(), ++holders);
      std::this_thread::sleep_for(2ms);
      --holders;
    };
    std::thread t1(hold, std::ref(a)), t2(hold, std::ref(b)), t3(hold, std::ref(b));
    std::this_thread::sleep_for(5ms);  // they now wait on the first lock's file
    first.reset();                     // releases and removes it
    t1.join();
    t2.join();
    t3.join();
    EXPECT_EQ(max_holders.load(), 1) << "round " << round;
  }
  EXPECT_TRUE(files_in(tmp.path()).empty()) << "no lock file left behind";
}

// 8. A size bound with least-recently-used eviction.
TEST(CacheHardening, SizeBoundEvictsLeastRecentlyUsed) {
  TempDir tmp;
  DiskCacheSettings settings;
  const size_t entry_bytes = sizeof(EntryHeader) + kConfigName.size() + 10000;
  settings.max_bytes = 3 * entry_bytes;
  DiskCache disk(tmp.path(), settings);
  const CacheKey a = test_key("a"), b = test_key("b"), c = test_key("c"), d = test_key("d");
  for (const CacheKey& k : {a, b, c}) disk.store(k, random_bytes(10000, 1), kConfigName);
  // Stamp distinct last uses (timestamps are coarse): a oldest, then b, then c.
  set_age(disk.entry_path(a), 30s);
  set_age(disk.entry_path(b), 20s);
  set_age(disk.entry_path(c), 10s);
  ASSERT_TRUE(disk.load(a).has_value());  // a hit makes a the most recently used
  write_file(tmp.path() + "/" + b.hex() + ".lock", {});  // b's lock file (nobody holds it) goes with b

  WarningCounter warnings;
  disk.store(d, random_bytes(10000, 2), kConfigName);
  EXPECT_FALSE(fs::exists(disk.entry_path(b))) << "b was the least recently used";
  EXPECT_FALSE(fs::exists(tmp.path() + "/" + b.hex() + ".lock"));
  for (const CacheKey& k : {a, c, d}) EXPECT_TRUE(disk.load(k).has_value());
  EXPECT_NE(warnings.infos().find("evicted 1 least recently used"), std::string::npos) << warnings.infos();

  // The entry just stored survives even when it alone is over the bound.
  DiskCacheSettings tiny = settings;
  tiny.max_bytes = 1;
  DiskCache small(tmp.path(), tiny);
  const CacheKey e = test_key("e");
  small.store(e, random_bytes(10000, 3), kConfigName);
  EXPECT_EQ(files_in(tmp.path()), std::vector<std::string>{e.hex() + ".cubin"});

  // 0: unbounded.
  DiskCacheSettings unbounded = settings;
  unbounded.max_bytes = 0;
  DiskCache big(tmp.path(), unbounded);
  for (int i = 0; i < 10; ++i) big.store(test_key("many " + std::to_string(i)), random_bytes(10000, 4));
  EXPECT_EQ(files_in(tmp.path()).size(), 11u);
  // prune: least recently used down to a size; 0 removes every entry.
  const DiskCache::Removed pruned = big.prune(5 * entry_bytes);
  EXPECT_EQ(pruned.files, 6u);
  EXPECT_EQ(files_in(tmp.path()).size(), 5u);
  EXPECT_EQ(big.prune(0).files, 5u);
  EXPECT_TRUE(files_in(tmp.path()).empty());
}

// fa4rt cache ls / verify read entries through DiskCache::list.
TEST(CacheHardening, ListShowsNamesAndVerifyFindsBadEntries) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey good = test_key("good"), bad = test_key("bad");
  disk.store(good, random_bytes(5000, 1), kConfigName);
  disk.store(bad, random_bytes(5000, 2), "portable_sm90_fp16_d64");
  std::vector<char> file = read_file(disk.entry_path(bad));
  file[file.size() / 2] ^= 1;  // payload: only the checksum notices
  write_file(disk.entry_path(bad), file);
  ASSERT_EQ(::mkfifo((tmp.path() + "/" + test_key("fifo").hex() + ".cubin").c_str(), 0600), 0);

  auto find = [](const std::vector<EntryInfo>& list, const CacheKey& k) {
    for (const EntryInfo& e : list)
      if (e.file == k.hex() + ".cubin") return e;
    return EntryInfo{};
  };
  const std::vector<EntryInfo> quick = disk.list(false);
  ASSERT_EQ(quick.size(), 3u);
  const EntryInfo g = find(quick, good);
  EXPECT_EQ(g.name, kConfigName);
  EXPECT_EQ(g.bytes, sizeof(EntryHeader) + kConfigName.size() + 5000);
  EXPECT_NEAR(static_cast<double>(g.created), static_cast<double>(std::time(nullptr)), 60.0);
  EXPECT_GT(g.last_used, 0);
  EXPECT_TRUE(g.problem.empty()) << g.problem;
  EXPECT_TRUE(find(quick, bad).problem.empty()) << "without verify the checksum is not read";
  EXPECT_NE(find(quick, test_key("fifo")).problem.find("not_regular_file"), std::string::npos);

  // An entry of another library version is told apart from a broken one.
  std::vector<char> old_schema = read_file(disk.entry_path(good));
  poke<uint32_t>(old_schema, offsetof(EntryHeader, schema), kSchemaVersion - 1);
  const CacheKey old_key = test_key("old");
  write_file(tmp.path() + "/" + old_key.hex() + ".cubin", old_schema);
  ::chmod((tmp.path() + "/" + old_key.hex() + ".cubin").c_str(), 0600);
  EXPECT_TRUE(find(disk.list(false), old_key).other_version);
  EXPECT_TRUE(find(disk.list(false), bad).problem.empty()) << "without verify the checksum is not read";

  const std::vector<EntryInfo> verified = disk.list(true);
  EXPECT_FALSE(find(verified, bad).other_version);
  EXPECT_TRUE(find(verified, good).problem.empty());
  EXPECT_NE(find(verified, bad).problem.find("checksum mismatch"), std::string::npos) << find(verified, bad).problem;
  EXPECT_EQ(find(verified, bad).name, "portable_sm90_fp16_d64");
}

// The path an engine takes: FA4_CACHE_DIR=<writable>:<bundle> with FA4_NO_JIT=1 runs from the bundle
// (built offline by Attention::prewarm, as `fa4rt bundle` does) and writes nothing.
TEST(CacheHardening, NoJitEngineRunsFromABundle) {
  TempDir tmp;
  const std::string bundle = tmp.path() + "/bundle", writable = tmp.path() + "/rw";
  KernelConfig config;
  config.arch = 90;
  config.backend = Backend::portable;
  config.head_dim = 64;
  {
    Options build;
    build.cache_dir = bundle;
    build.cache_max_bytes = 0;
    const PrewarmReport r = Attention(build).prewarm({config});
    ASSERT_TRUE(r.failures.empty()) << r.failures[0].message;
    ASSERT_EQ(r.compiled, 1);
  }
  ASSERT_EQ(::chmod(bundle.c_str(), 0755), 0);  // as shipped
  ScopedEnvForTest dirs("FA4_CACHE_DIR", (writable + ":" + bundle).c_str()), no_jit("FA4_NO_JIT", "1");
  Attention engine(Options::from_env());
  const PrewarmReport r = engine.prewarm({config});
  EXPECT_TRUE(r.failures.empty()) << (r.failures.empty() ? "" : r.failures[0].message);
  EXPECT_EQ(r.from_cache, 1);
  EXPECT_TRUE(files_in(writable).empty()) << "a bundle hit is served, never copied";
  const std::vector<EntryInfo> listed = DiskCache(engine.options()).list(true);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].directory, bundle);
  EXPECT_EQ(listed[0].name, "portable_sm90_bf16_d64");
  EXPECT_TRUE(listed[0].problem.empty()) << listed[0].problem;
}

// ---- The table of cache faults --------------------------------------------------------------------------

// What a fault case sets up; the runner then opens the cache in a forked child (twice: two processes)
// and gets the kernel.
struct FaultEnv {
  std::string root;  // a private temp directory
  std::string dir;   // the writable cache (root/cache, created 0700 before the plant)
  std::string entry, lock;  // dir/<key>.cubin, dir/<key>.lock
  CacheKey key;
  Cubin genuine;               // what build() returns; a served cubin must be this
  std::vector<char> forged;    // a valid entry for `key` holding other bytes (what an attacker plants)
  DiskCacheSettings settings;
  rlim_t file_size_limit = 0;  // RLIMIT_FSIZE in the child (0: none)
  std::vector<pid_t> helpers;  // killed after the case
  std::vector<std::string> mounts;  // unmounted after the case
  std::string skip;            // why the case cannot run here
  std::function<std::string()> after;  // extra checks after the child: empty string = fine

  std::string bundle() {
    const std::string b = root + "/bundle";
    if (settings.bundles.empty()) {
      fs::create_directories(b);
      ::chmod(b.c_str(), 0755);
      settings.bundles.push_back(b);
    }
    return b;
  }
};

struct FaultCase {
  const char* name;
  Fault expected;
  std::function<void(FaultEnv&)> plant;
};

void sparse(const std::string& path, uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  ::close(fd);
}

void corrupt_entry(FaultEnv& e, const std::function<void(std::vector<char>&)>& edit) {
  std::vector<char> file = valid_entry(e.key, random_bytes(3000, 7));
  edit(file);
  plant(e.entry, file);
}

void socket_at(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << path;
  ::close(fd);
}

std::string unchanged(const std::string& path, const std::vector<char>& bytes) {
  return read_file(path) == bytes ? "" : path + " was modified";
}

std::string absent(const std::string& path) {
  return fs::exists(fs::symlink_status(path)) ? path + " still exists" : "";
}

std::vector<FaultCase> fault_cases() {
  using F = Fault;
  return {
      // Entries in the writable directory.
      {"FIFO at the entry name", F::not_regular_file, [](FaultEnv& e) { ASSERT_EQ(::mkfifo(e.entry.c_str(), 0600), 0); }},
      {"empty directory at the entry name", F::not_regular_file, [](FaultEnv& e) { fs::create_directory(e.entry); }},
      {"non-empty directory at the entry name", F::not_regular_file, [](FaultEnv& e) {
         fs::create_directory(e.entry);
         write_file(e.entry + "/x", {'x'});
       }},
      {"socket at the entry name", F::not_regular_file, [](FaultEnv& e) { socket_at(e.entry); }},
      {"character device at the entry name", F::not_regular_file, [](FaultEnv& e) {
         if (::mknod(e.entry.c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0) e.skip = "mknod: " + std::string(std::strerror(errno));
       }},
      {"symlink entry to a valid entry", F::symlink, [](FaultEnv& e) {
         plant(e.root + "/elsewhere", e.forged);
         fs::create_symlink(e.root + "/elsewhere", e.entry);
       }},
      {"dangling symlink entry", F::symlink, [](FaultEnv& e) { fs::create_symlink(e.root + "/nothing", e.entry); }},
      {"symlink entry to /dev/zero", F::symlink, [](FaultEnv& e) { fs::create_symlink("/dev/zero", e.entry); }},
      {"sparse 1 TiB entry", F::too_large, [](FaultEnv& e) { sparse(e.entry, uint64_t{1} << 40); }},
      {"entry just above the size bound", F::too_large, [](FaultEnv& e) { sparse(e.entry, kDefaultMaxEntryBytes + 1); }},
      {"zero-length entry", F::corrupt, [](FaultEnv& e) { plant(e.entry, {}); }},
      {"truncated header", F::corrupt, [](FaultEnv& e) { corrupt_entry(e, [](auto& f) { f.resize(sizeof(EntryHeader) - 1); }); }},
      {"bad magic", F::corrupt, [](FaultEnv& e) { corrupt_entry(e, [](auto& f) { f[0] = 'X'; }); }},
      {"old schema", F::corrupt, [](FaultEnv& e) {
         corrupt_entry(e, [](auto& f) { poke<uint32_t>(f, offsetof(EntryHeader, schema), 1); });
       }},
      {"re-keyed header (another key's entry)", F::corrupt, [](FaultEnv& e) {
         plant(e.entry, valid_entry(test_key("another key"), random_bytes(3000, 8)));
       }},
      {"size field of 1 TiB", F::corrupt, [](FaultEnv& e) {
         corrupt_entry(e, [](auto& f) { poke<uint64_t>(f, offsetof(EntryHeader, size), uint64_t{1} << 40); });
       }},
      {"truncated payload", F::corrupt, [](FaultEnv& e) { corrupt_entry(e, [](auto& f) { f.resize(f.size() - 100); }); }},
      {"trailing bytes", F::corrupt, [](FaultEnv& e) { corrupt_entry(e, [](auto& f) { f.insert(f.end(), 8, 'x'); }); }},
      {"flipped payload byte", F::corrupt, [](FaultEnv& e) { corrupt_entry(e, [](auto& f) { f[f.size() - 1] ^= 1; }); }},
      {"flipped checksum", F::corrupt, [](FaultEnv& e) {
         corrupt_entry(e, [](auto& f) { f[offsetof(EntryHeader, checksum)] ^= 1; });
       }},
      {"name size beyond the bound", F::corrupt, [](FaultEnv& e) {
         corrupt_entry(e, [](auto& f) { poke<uint32_t>(f, offsetof(EntryHeader, name_size), 1u << 30); });
       }},
      {"flipped name byte", F::corrupt, [](FaultEnv& e) { corrupt_entry(e, [](auto& f) { f[sizeof(EntryHeader)] ^= 1; }); }},
      {"non-zero reserved field", F::corrupt, [](FaultEnv& e) {
         corrupt_entry(e, [](auto& f) { poke<uint64_t>(f, offsetof(EntryHeader, reserved), 1); });
       }},
      {"forged entry owned by another user", F::foreign_owner, [](FaultEnv& e) { plant(e.entry, e.forged, 0600, kOtherUid); }},
      {"forged entry, group-writable", F::unsafe_mode, [](FaultEnv& e) { plant(e.entry, e.forged, 0660); }},
      {"forged entry, world-writable", F::unsafe_mode, [](FaultEnv& e) { plant(e.entry, e.forged, 0666); }},
      // Lock files.
      {"empty directory at the lock name", F::not_regular_file, [](FaultEnv& e) { fs::create_directory(e.lock); }},
      {"non-empty directory at the lock name", F::not_regular_file, [](FaultEnv& e) {
         fs::create_directory(e.lock);
         write_file(e.lock + "/x", {'x'});
       }},
      {"symlink lock to a path it would create", F::symlink, [](FaultEnv& e) {
         fs::create_symlink(e.root + "/victim-creates-this", e.lock);
         e.after = [root = e.root] { return absent(root + "/victim-creates-this"); };
       }},
      {"symlink lock to an existing file", F::symlink, [](FaultEnv& e) {
         plant(e.root + "/precious", {'k', 'e', 'e', 'p'});
         fs::create_symlink(e.root + "/precious", e.lock);
         e.after = [root = e.root] { return unchanged(root + "/precious", {'k', 'e', 'e', 'p'}); };
       }},
      {"FIFO at the lock name", F::not_regular_file, [](FaultEnv& e) { ASSERT_EQ(::mkfifo(e.lock.c_str(), 0600), 0); }},
      {"socket at the lock name", F::not_regular_file, [](FaultEnv& e) { socket_at(e.lock); }},
      {"lock file owned by another user", F::foreign_owner, [](FaultEnv& e) { plant(e.lock, {}, 0600, kOtherUid); }},
      {"lock held by a live process", F::lock_timeout, [](FaultEnv& e) { e.helpers.push_back(spawn_lock_holder(e.lock, false)); }},
      {"lock held by a stopped process", F::lock_timeout, [](FaultEnv& e) { e.helpers.push_back(spawn_lock_holder(e.lock, true)); }},
      // Left-overs of killed processes.
      {"stale temp file", F::stale_file, [](FaultEnv& e) {
         const std::string tmp = e.dir + "/" + e.key.hex() + ".tmp.999.0";
         plant(tmp, random_bytes(100, 1));
         set_age(tmp, std::chrono::hours(2));
         e.after = [tmp] { return absent(tmp); };
       }},
      {"orphaned lock file", F::stale_file, [](FaultEnv& e) { plant(e.lock, {}); }},
      // The writable directory.
      {"world-writable cache directory", F::unsafe_directory, [](FaultEnv& e) {
         plant(e.entry, e.forged);
         ::chmod(e.dir.c_str(), 0777);
       }},
      {"group-writable cache directory", F::unsafe_directory, [](FaultEnv& e) {
         plant(e.entry, e.forged);
         ::chmod(e.dir.c_str(), 0770);
       }},
      {"cache directory owned by another user", F::unsafe_directory, [](FaultEnv& e) {
         plant(e.entry, e.forged, 0600, kOtherUid);
         ASSERT_EQ(::chown(e.dir.c_str(), kOtherUid, kOtherUid), 0);
       }},
      {"cache directory reached through a symlink", F::unsafe_directory, [](FaultEnv& e) {
         plant(e.entry, e.forged);
         fs::create_directory_symlink(e.dir, e.root + "/link");
         e.dir = e.root + "/link";
       }},
      {"world-writable parent without sticky bit", F::unsafe_directory, [](FaultEnv& e) {
         fs::create_directories(e.root + "/pub/cache");
         ::chmod((e.root + "/pub").c_str(), 0777);
         ::chmod((e.root + "/pub/cache").c_str(), 0700);
         plant(e.root + "/pub/cache/" + e.key.hex() + ".cubin", e.forged);
         e.dir = e.root + "/pub/cache";
       }},
      {"cache path is a regular file", F::unusable_directory, [](FaultEnv& e) {
         plant(e.root + "/file", {'x'});
         e.dir = e.root + "/file";
       }},
      {"cache path under a regular file", F::unusable_directory, [](FaultEnv& e) {
         plant(e.root + "/file", {'x'});
         e.dir = e.root + "/file/cache";
       }},
      {"read-only cache directory (read-only bind mount)", F::unusable_directory, [](FaultEnv& e) {
         if (::mount(e.dir.c_str(), e.dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
           e.skip = "bind mount: " + std::string(std::strerror(errno));
           return;
         }
         e.mounts.push_back(e.dir);
         if (::mount(nullptr, e.dir.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
           e.skip = "read-only remount: " + std::string(std::strerror(errno));
       }},
      {"full disk (a 16 KiB tmpfs)", F::store_failed, [](FaultEnv& e) {
         if (::mount("tmpfs", e.dir.c_str(), "tmpfs", 0, "size=16k,mode=0700") != 0) {
           e.skip = "tmpfs mount: " + std::string(std::strerror(errno));
           return;
         }
         e.mounts.push_back(e.dir);
         e.genuine = random_bytes(256 * 1024, 9);
       }},
      {"file size limit (EFBIG)", F::store_failed, [](FaultEnv& e) {
         e.file_size_limit = 4096;
         e.genuine = random_bytes(64 * 1024, 9);
       }},
      {"build larger than the entry bound", F::store_failed, [](FaultEnv& e) { e.settings.max_entry_bytes = 1024; }},
      // Read-only bundles after the writable directory.
      {"bundle: world-writable", F::unsafe_directory, [](FaultEnv& e) {
         const std::string b = e.bundle();
         plant(b + "/" + e.key.hex() + ".cubin", e.forged, 0644);
         ::chmod(b.c_str(), 0777);
       }},
      {"bundle: owned by another user", F::unsafe_directory, [](FaultEnv& e) {
         const std::string b = e.bundle();
         plant(b + "/" + e.key.hex() + ".cubin", e.forged, 0644, kOtherUid);
         ASSERT_EQ(::chown(b.c_str(), kOtherUid, kOtherUid), 0);
       }},
      {"bundle: reached through a symlink", F::unsafe_directory, [](FaultEnv& e) {
         const std::string b = e.bundle();
         plant(b + "/" + e.key.hex() + ".cubin", e.forged, 0644);
         fs::create_directory_symlink(b, e.root + "/bundle-link");
         e.settings.bundles = {e.root + "/bundle-link"};
       }},
      {"bundle: missing", F::unusable_directory, [](FaultEnv& e) { e.settings.bundles = {e.root + "/no-such-bundle"}; }},
      {"bundle: entry owned by another user", F::foreign_owner, [](FaultEnv& e) {
         plant(e.bundle() + "/" + e.key.hex() + ".cubin", e.forged, 0644, kOtherUid);
       }},
      {"bundle: group-writable entry", F::unsafe_mode, [](FaultEnv& e) {
         plant(e.bundle() + "/" + e.key.hex() + ".cubin", e.forged, 0664);
       }},
      {"bundle: corrupt entry (left in place)", F::corrupt, [](FaultEnv& e) {
         std::vector<char> file = valid_entry(e.key, e.genuine);
         file.back() ^= 1;
         const std::string path = e.bundle() + "/" + e.key.hex() + ".cubin";
         plant(path, file, 0644);
         e.after = [path, file] { return unchanged(path, file); };
       }},
      {"bundle: FIFO entry", F::not_regular_file, [](FaultEnv& e) {
         ASSERT_EQ(::mkfifo((e.bundle() + "/" + e.key.hex() + ".cubin").c_str(), 0644), 0);
       }},
      {"bundle: sparse 1 TiB entry", F::too_large, [](FaultEnv& e) {
         sparse(e.bundle() + "/" + e.key.hex() + ".cubin", uint64_t{1} << 40);
       }},
  };
}

// The child's report on one case.
struct Outcome {
  bool served = false;  // both processes got the genuine cubin
  bool typed = false;   // the expected Fault was counted
  bool logged = false;  // some warning or fault was reported
  uint64_t faults[kFaultKinds] = {};
};

TEST(CacheHardening, FaultKinds) {
  const std::vector<FaultCase> cases = fault_cases();
  int tried = 0, detected = 0, fatal = 0, typed = 0;
  std::vector<std::string> skipped, failures;
  for (size_t i = 0; i < cases.size(); ++i) {
    const FaultCase& c = cases[i];
    SCOPED_TRACE(c.name);
    TempDir tmp;
    FaultEnv env;
    env.root = tmp.path();
    env.dir = tmp.path() + "/cache";
    ASSERT_EQ(::mkdir(env.dir.c_str(), 0700), 0);
    env.key = test_key(std::string("fault case: ") + c.name);
    env.entry = env.dir + "/" + env.key.hex() + ".cubin";
    env.lock = env.dir + "/" + env.key.hex() + ".lock";
    env.genuine = random_bytes(3000, static_cast<uint32_t>(i));
    env.forged = valid_entry(env.key, random_bytes(3000, 1000 + static_cast<uint32_t>(i)));
    env.settings.lock_timeout = 300ms;
    c.plant(env);
    if (env.skip.empty()) {
      ++tried;
      int pipe_fds[2];
      ASSERT_EQ(::pipe(pipe_fds), 0);
      int signal = 0;
      const int rc = bounded(30s, [&] {
        ::close(pipe_fds[0]);
        if (env.file_size_limit) {
          const rlimit limit{env.file_size_limit, env.file_size_limit};
          ::setrlimit(RLIMIT_FSIZE, &limit);
          std::signal(SIGXFSZ, SIG_IGN);
        }
        detail::log().sinks()[0]->set_level(spdlog::level::off);  // the counter below keeps the text
        WarningCounter warnings;
        Outcome out;
        out.served = true;
        for (int process = 0; process < 2; ++process) {  // a second process finds what the first left
          DiskCache disk(env.dir, env.settings);
          KernelCache kernels(&disk);
          const Lookup r = kernels.get(env.key, kConfigName, [&] { return env.genuine; });
          out.served = out.served && r.cubin && *r.cubin == env.genuine;
          out.typed = out.typed || disk.faults(c.expected) > 0;
          for (int k = 0; k < kFaultKinds; ++k) out.faults[k] += disk.faults(static_cast<Fault>(k));
          out.logged = out.logged || disk.total_faults() > 0;
        }
        out.logged = out.logged || warnings.count() > 0;
        return ::write(pipe_fds[1], &out, sizeof(out)) == sizeof(out) ? 0 : 1;
      }, &signal);
      ::close(pipe_fds[1]);
      Outcome out;
      const bool reported = ::read(pipe_fds[0], &out, sizeof(out)) == sizeof(out);
      ::close(pipe_fds[0]);
      std::string verdict;
      if (rc == 124) verdict = "FATAL: hung (killed after 30 s)";
      else if (rc == 125) verdict = "FATAL: an exception escaped";
      else if (rc == 126) verdict = "FATAL: crashed with signal " + std::to_string(signal);
      else if (rc != 0 || !reported) verdict = "FATAL: child exit " + std::to_string(rc);
      if (!verdict.empty()) {
        ++fatal;
      } else {
        detected += out.typed || out.logged;
        typed += out.typed;
        if (!out.served) verdict = "FAIL: the genuine kernel was not served";
        else if (!out.typed) verdict = std::string("FAIL: not typed as ") + to_string(c.expected);
        else if (env.after) verdict = env.after();
        if (verdict.empty()) verdict = std::string("ok (") + to_string(c.expected) + ")";
      }
      std::string seen;
      for (int k = 0; k < kFaultKinds; ++k)
        if (out.faults[k]) seen += std::string(seen.empty() ? "" : ",") + to_string(static_cast<Fault>(k));
      std::cout << "  " << std::left << std::setw(52) << c.name << verdict << (seen.empty() ? "" : "  [" + seen + "]") << "\n";
      if (verdict.rfind("ok", 0) != 0) failures.push_back(std::string(c.name) + ": " + verdict);
    } else {
      skipped.push_back(std::string(c.name) + " (" + env.skip + ")");
    }
    for (pid_t pid : env.helpers) kill_and_reap(pid);
    for (auto it = env.mounts.rbegin(); it != env.mounts.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
  }
  std::cout << "cache fault kinds: " << tried << " tried, " << detected << " detected or typed (" << typed
            << " typed as expected), " << fatal << " fatal\n";
  for (const std::string& s : skipped) std::cout << "  skipped: " << s << "\n";
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(fatal, 0);
  EXPECT_EQ(detected, tried);
  EXPECT_GE(tried, 36);
}

}  // namespace
}  // namespace fa4::cache
