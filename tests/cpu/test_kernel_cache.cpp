// The memory cache in front of the disk cache: single-flight across threads and processes, concurrent
// builds of different keys, failures that are not cached, no-JIT misses and disk hits.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "cache/kernel_cache.hpp"
#include "fa4/error.hpp"
#include "base/log.hpp"
#include "cache_fixtures.hpp"
#include "test_util.hpp"

namespace fa4::cache {
namespace {

using fa4::test::random_bytes;
using fa4::test::test_key;

using namespace std::chrono_literals;
using fa4::test::TempDir;


// Releases all waiting threads at once, so that they really call get() together.
class StartLine {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(m_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(KernelCache, SameKeyOnSixteenThreadsBuildsOnce) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  const CacheKey key = test_key("same key");
  const Cubin cubin = random_bytes(5000, 1);
  std::atomic<int> calls{0};
  auto build = [&] {
    ++calls;
    std::this_thread::sleep_for(100ms);  // long enough for every thread to arrive while it runs
    return cubin;
  };
  StartLine start;
  std::vector<Lookup> results(16);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&, out = &r] {
    start.wait();
    *out = cache.get(key, "same key", build);
  });
  start.open();
  for (auto& t : threads) t.join();

  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(cache.builds(), 1u);
  int compiled = 0;
  for (const Lookup& r : results) {
    ASSERT_TRUE(r.cubin);
    EXPECT_EQ(r.cubin.get(), results[0].cubin.get());  // one shared object
    compiled += r.origin == Origin::compiled;
  }
  EXPECT_EQ(compiled, 1);
  EXPECT_EQ(*results[0].cubin, cubin);
  EXPECT_EQ(cache.find(key).get(), results[0].cubin.get());
}

TEST(KernelCache, DifferentKeysBuildConcurrently) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  std::mutex m;
  std::condition_variable cv;
  int started = 0;
  // Each build waits until the other one has started. If builds of different keys were serialised (a
  // global lock held while building), the first would wait for a build that cannot start: timeout.
  auto build = [&](char fill) {
    return [&, fill]() -> Cubin {
      std::unique_lock<std::mutex> lock(m);
      ++started;
      cv.notify_all();
      if (!cv.wait_for(lock, 10s, [&] { return started == 2; }))
        throw std::runtime_error("the other build did not start while this one ran");
      return Cubin(64, fill);
    };
  };
  auto run = [&](const char* name, char fill, std::string* error) {
    try {
      const Lookup r = cache.get(test_key(name), name, build(fill));
      if (r.origin != Origin::compiled || *r.cubin != Cubin(64, fill)) *error = "wrong result";
    } catch (const std::exception& e) {
      *error = e.what();
    }
  };
  std::string error_a, error_b;
  std::thread a(run, "key a", 'a', &error_a);
  std::thread b(run, "key b", 'b', &error_b);
  a.join();
  b.join();
  EXPECT_EQ(error_a, "");
  EXPECT_EQ(error_b, "");
  EXPECT_EQ(cache.builds(), 2u);
}

TEST(KernelCache, FailedBuildReachesAllWaitersAndIsNotCached) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  const CacheKey key = test_key("fails");
  std::atomic<int> calls{0};
  auto failing = [&]() -> Cubin {
    ++calls;
    std::this_thread::sleep_for(200ms);
    throw Error(ErrorCode::compile_error, "nvrtc: expected a ';'");
  };
  StartLine start;
  std::atomic<int> caught{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] {
    start.wait();
    try {
      cache.get(key, "fails", failing);
    } catch (const Error& e) {
      caught += e.code() == ErrorCode::compile_error && std::string(e.what()) == "nvrtc: expected a ';'";
    }
  });
  start.open();
  for (auto& t : threads) t.join();
  EXPECT_EQ(caught.load(), 8);  // every waiter got the leader's exception
  EXPECT_EQ(calls.load(), 1);   // and there was only one build
  EXPECT_EQ(cache.builds(), 0u);
  EXPECT_EQ(cache.find(key), nullptr);
  EXPECT_FALSE(disk.load(key).has_value());

  // The next call builds again, and succeeds.
  const Cubin cubin = random_bytes(300, 3);
  const Lookup r = cache.get(key, "fails", [&] { return cubin; });
  EXPECT_EQ(r.origin, Origin::compiled);
  EXPECT_EQ(*r.cubin, cubin);
  EXPECT_EQ(cache.builds(), 1u);
  EXPECT_EQ(*disk.load(key), cubin);
}

TEST(KernelCache, NoJitMissThrowsNotCached) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  const CacheKey key = test_key("no jit");
  const std::string description = "sm100 bf16 d128 causal";
  int calls = 0;
  auto build = [&] {
    ++calls;
    return random_bytes(100, 4);
  };
  try {
    cache.get(key, description, build, /*allow_build=*/false);
    ADD_FAILURE() << "a no-JIT miss must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_cached);
    EXPECT_NE(std::string(e.what()).find(description), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(key.hex()), std::string::npos) << e.what();
  }
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(cache.find(key), nullptr);

  // Allowed to build, it builds; afterwards no-JIT calls hit, in memory and (fresh cache) on disk.
  EXPECT_EQ(cache.get(key, description, build).origin, Origin::compiled);
  EXPECT_EQ(cache.get(key, description, build, false).origin, Origin::memory);
  KernelCache fresh(&disk);
  EXPECT_EQ(fresh.get(key, description, build, false).origin, Origin::disk);
  EXPECT_EQ(calls, 1);
}

TEST(KernelCache, DiskHitInAFreshCacheDoesNotBuild) {
  TempDir tmp;
  const CacheKey key = test_key("disk hit");
  const Cubin cubin = random_bytes(7000, 5);
  {
    DiskCache disk(tmp.path());
    KernelCache cache(&disk);
    EXPECT_EQ(cache.get(key, "disk hit", [&] { return cubin; }).origin, Origin::compiled);
  }
  // New objects stand for a new process.
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  auto must_not_build = []() -> Cubin { throw std::runtime_error("built although the disk has it"); };
  const Lookup first = cache.get(key, "disk hit", must_not_build);
  EXPECT_EQ(first.origin, Origin::disk);
  EXPECT_EQ(*first.cubin, cubin);
  const Lookup second = cache.get(key, "disk hit", must_not_build);
  EXPECT_EQ(second.origin, Origin::memory);
  EXPECT_EQ(second.cubin.get(), first.cubin.get());
  EXPECT_EQ(cache.builds(), 0u);
}

TEST(KernelCache, CorruptDiskEntryIsRebuiltAndReplaced) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = test_key("corrupt");
  disk.store(key, random_bytes(2000, 6));
  {
    std::fstream f(disk.entry_path(key), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(sizeof(EntryHeader) + 1000);
    const char byte = static_cast<char>(f.get());
    f.seekp(sizeof(EntryHeader) + 1000);
    f.put(static_cast<char>(byte ^ 0x20));  // one flipped bit: the checksum no longer matches
  }
  const Cubin fresh_bytes = random_bytes(2100, 7);
  KernelCache cache(&disk);
  const Lookup r = cache.get(key, "corrupt", [&] { return fresh_bytes; });
  EXPECT_EQ(r.origin, Origin::compiled);
  EXPECT_EQ(*r.cubin, fresh_bytes);
  EXPECT_EQ(*disk.load(key), fresh_bytes);
}

TEST(KernelCache, RechecksTheDiskAfterTakingTheLock) {
  // Another process (played by this thread) holds the key's lock while it builds; our get() waits for
  // the lock, then must find that process's entry instead of building again.
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  const CacheKey key = test_key("recheck");
  const Cubin theirs = random_bytes(900, 8);
  DiskCache other_process(tmp.path());
  auto held = std::make_unique<DiskCache::Lock>(other_process.lock(key));
  auto result = std::async(std::launch::async, [&] {
    return cache.get(key, "recheck", []() -> Cubin { throw std::runtime_error("built twice"); });
  });
  std::this_thread::sleep_for(200ms);  // let get() miss the disk and block on the lock
  EXPECT_EQ(result.wait_for(0s), std::future_status::timeout) << "get() did not wait for the lock";
  other_process.store(key, theirs);
  held.reset();
  const Lookup r = result.get();
  EXPECT_EQ(r.origin, Origin::disk);
  EXPECT_EQ(*r.cubin, theirs);
}

// Holds the first thread that logs a warning until open() is called.
class GateSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  void wait_until_entered() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return entered_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(m_);
    open_ = true;
    cv_.notify_all();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level != spdlog::level::warn) return;
    std::unique_lock<std::mutex> lock(m_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void flush_() override {}

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool entered_ = false, open_ = false;
};

TEST(KernelCache, WaiterThatMayBuildRetriesAfterANoJitLeaderMisses) {
  // The no-JIT leader is held inside its disk lookup, so that a second caller, allowed to build, surely
  // waits on the same flight: a FIFO in place of the entry is a bad entry (it no longer blocks open()),
  // and the warning about it is held by a log sink until the waiter has joined.
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  const CacheKey key = test_key("no-jit leader");
  ASSERT_EQ(::mkfifo(disk.entry_path(key).c_str(), 0600), 0);
  auto gate = std::make_shared<GateSink>();
  auto& logger = detail::log();
  const auto level = logger.level();
  logger.set_level(spdlog::level::info);
  logger.sinks().push_back(gate);
  auto leader = std::async(std::launch::async, [&] {
    try {
      cache.get(key, "no-jit leader", [] { return Cubin(8, 'l'); }, /*allow_build=*/false);
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(to_string(e.code()));
    }
  });
  gate->wait_until_entered();  // the leader is now inside its disk lookup
  auto waiter = std::async(std::launch::async, [&] { return cache.get(key, "waiter", [] { return Cubin(8, 'w'); }); });
  std::this_thread::sleep_for(100ms);  // the waiter is now waiting on the leader's flight
  gate->open();
  const std::string leader_result = leader.get();
  const Lookup r = waiter.get();
  logger.sinks().erase(std::remove(logger.sinks().begin(), logger.sinks().end(), gate), logger.sinks().end());
  logger.set_level(level);
  EXPECT_EQ(leader_result, to_string(ErrorCode::not_cached));
  EXPECT_EQ(r.origin, Origin::compiled);
  EXPECT_EQ(*r.cubin, Cubin(8, 'w'));
  EXPECT_EQ(cache.builds(), 1u);
  EXPECT_EQ(disk.faults(Fault::not_regular_file), 1u);
}

TEST(KernelCache, FindNeverBlocksOnABuildInFlight) {
  KernelCache cache(nullptr);
  const CacheKey key = test_key("find");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> building{false};
  auto result = std::async(std::launch::async, [&] {
    return cache.get(key, "find", [&] {
      building = true;
      released.wait();
      return Cubin(10, 'f');
    });
  });
  while (!building) std::this_thread::sleep_for(1ms);
  auto found = std::async(std::launch::async, [&] { return cache.find(key); });
  const bool returned_at_once = found.wait_for(5s) == std::future_status::ready;
  release.set_value();  // (if find() blocked on the build, this lets it return)
  EXPECT_TRUE(returned_at_once) << "find() waited for a build in flight";
  EXPECT_EQ(found.get(), nullptr);
  const Lookup r = result.get();
  EXPECT_EQ(cache.find(key).get(), r.cubin.get());
  EXPECT_EQ(cache.find(test_key("other")), nullptr);
}

TEST(KernelCache, LogsOneInfoLinePerCompile) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  KernelCache cache(&disk);
  const CacheKey key = test_key("logged");
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%l|%v");
  auto& logger = detail::log();
  const auto level = logger.level();
  logger.set_level(spdlog::level::info);
  logger.sinks().push_back(sink);
  cache.get(key, "bf16 d128 causal", [] { return Cubin(10, 'x'); });
  cache.get(key, "bf16 d128 causal", [] { return Cubin(10, 'x'); });  // memory hit: silent
  KernelCache fresh(&disk);
  fresh.get(key, "bf16 d128 causal", [] { return Cubin(10, 'x'); });  // disk hit: silent
  logger.sinks().pop_back();
  logger.set_level(level);

  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.rfind("info|", 0), 0u) << text;
  EXPECT_NE(text.find(key.hex()), std::string::npos) << text;
  EXPECT_NE(text.find("bf16 d128 causal"), std::string::npos) << text;
  EXPECT_NE(text.find(" ms"), std::string::npos) << text;
}

// Runs in a forked child: one get() on the shared cache directory; writes origin and bytes to `out`.
int child_get(const std::string& dir, const CacheKey& key, const std::string& counter, const std::string& out) {
  DiskCache disk(dir);
  KernelCache cache(&disk);
  const Lookup r = cache.get(key, "cross-process", [&] {
    std::ofstream(counter, std::ios::app) << ::getpid() << "\n";
    std::this_thread::sleep_for(100ms);
    return random_bytes(4096, static_cast<uint32_t>(::getpid()));  // differs per builder
  });
  std::ofstream f(out, std::ios::binary);
  f << to_string(r.origin) << "\n";
  f.write(r.cubin->data(), static_cast<std::streamsize>(r.cubin->size()));
  return f.good() ? 0 : 1;
}

TEST(KernelCache, ConcurrentProcessesBuildOnce) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache", counter = tmp.path() + "/builds.txt";
  const CacheKey key = test_key("cross-process");
  constexpr int kChildren = 8;
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the child creates no threads of its own
      ::close(start[1]);
      char c;
      while (::read(start[0], &c, 1) < 0 && errno == EINTR) {}  // EOF: everyone goes
      int rc = 1;
      try {
        rc = child_get(dir, key, counter, tmp.path() + "/out." + std::to_string(i));
      } catch (...) {
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }

  std::ifstream builds(counter);
  const std::string log((std::istreambuf_iterator<char>(builds)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << "builder pids:\n" << log;

  int compiled = 0;
  std::string first_bytes;
  for (int i = 0; i < kChildren; ++i) {
    std::ifstream f(tmp.path() + "/out." + std::to_string(i), std::ios::binary);
    std::string origin;
    std::getline(f, origin);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    compiled += origin == "compiled";
    EXPECT_TRUE(origin == "compiled" || origin == "disk") << origin;
    ASSERT_EQ(bytes.size(), 4096u);
    if (i == 0) first_bytes = bytes;
    EXPECT_EQ(bytes, first_bytes) << "child " << i;
  }
  EXPECT_EQ(compiled, 1);
}

TEST(KernelCache, OriginNames) {
  EXPECT_STREQ(to_string(Origin::memory), "memory");
  EXPECT_STREQ(to_string(Origin::disk), "disk");
  EXPECT_STREQ(to_string(Origin::compiled), "compiled");
}

}  // namespace
}  // namespace fa4::cache
