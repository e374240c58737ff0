// Inputs and helpers for the cache tests: random cubin bytes, distinct well-formed cache keys, a counter
// of the library's warnings, small file helpers, and a way to run code as another (non-root) user.
#pragma once

#include <grp.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "cache/cache_key.hpp"

namespace fa4::test {

inline std::vector<char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> bytes(n);
  for (char& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

// A key as the runtime would make it, for a source text `name`.
inline cache::CacheKey test_key(const std::string& name) {
  cache::KeyInputs in;
  in.source = name;
  in.nvrtc_version = "13.0";
  in.target = "sm_100a";
  in.library_version = "test";
  return cache::make_cache_key(in);
}

// Counts the warnings of the library logger while it lives (and keeps their text; info lines too).
class WarningCounter {
 public:
  WarningCounter() : sink_(std::make_shared<Sink>()), level_(detail::log().level()) {
    detail::log().sinks().push_back(sink_);
    detail::log().set_level(spdlog::level::info);
  }
  ~WarningCounter() {
    auto& sinks = detail::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    detail::log().set_level(level_);
  }
  int count() const { return sink_->count(); }
  std::string text() const { return sink_->text(); }   // the warnings
  std::string infos() const { return sink_->infos(); }  // the info lines

 private:
  class Sink : public spdlog::sinks::base_sink<std::mutex> {
   public:
    int count() {
      std::lock_guard<std::mutex> guard(mutex_);
      return count_;
    }
    std::string text() {
      std::lock_guard<std::mutex> guard(mutex_);
      return text_;
    }
    std::string infos() {
      std::lock_guard<std::mutex> guard(mutex_);
      return infos_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      if (msg.level == spdlog::level::info) infos_.append(msg.payload.data(), msg.payload.size()).append("\n");
      if (msg.level != spdlog::level::warn) return;
      ++count_;
      text_.append(msg.payload.data(), msg.payload.size()).append("\n");
    }
    void flush_() override {}

   private:
    int count_ = 0;
    std::string text_, infos_;
  };
  std::shared_ptr<Sink> sink_;
  spdlog::level::level_enum level_;
};

inline std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A uid that is neither root nor us: "another user" for ownership tests (nobody).
constexpr uid_t kOtherUid = 65534;

// Runs fn() in a forked child as `uid` (with its gid), so that permission bits apply even when the
// tests run as root. Returns fn()'s result; 100+ on setup failures, 200 if the child died by a signal.
inline int run_as(uid_t uid, const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return 101;
  if (pid == 0) {
    if (::geteuid() != uid && (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0)) ::_exit(102);
    int rc = 103;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 104;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

}  // namespace fa4::test
