// Memory cache in front of the disk cache, with single-flight builds.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/cache_key.hpp"
#include "cache/disk_cache.hpp"

namespace fa4::cache {

using Cubin = std::vector<char>;

// memory: found in memory, or this call waited for another caller's build of the key.
enum class Origin { memory, disk, compiled };
const char* to_string(Origin origin);

struct Lookup {
  std::shared_ptr<const Cubin> cubin;
  Origin origin = Origin::memory;
};

class KernelCache {
 public:
  explicit KernelCache(DiskCache* disk);  // disk may be null or disabled (memory-only)

  // Returns the cubin for `key`: memory, else disk, else (if allow_build) build() under the per-key
  // cross-process lock, re-checking the disk after taking it, then store to disk and memory. If the lock
  // is not had within its timeout (a stopped holder), it builds anyway and still stores (atomically).
  // `description` (the configuration name) is recorded in the disk entry.
  // Single-flight: concurrent callers of one key wait for a single build; different keys build
  // concurrently; no lock shared between keys is held while building. A failed build is not cached:
  // its exception reaches every waiter and the next call tries again.
  // Without allow_build a miss throws fa4::Error(not_cached) naming `description`.
  // One info log line per build: key, description, milliseconds.
  Lookup get(const CacheKey& key, const std::string& description,
             const std::function<Cubin()>& build, bool allow_build = true);

  // Memory cache only; null on a miss. Never blocks on a build in flight.
  std::shared_ptr<const Cubin> find(const CacheKey& key) const;

  size_t builds() const;  // number of build() calls that succeeded (for tests)

 private:
  struct Slot;
  // The leader's path: disk, else (under the per-key file lock) disk again, else build and store.
  Lookup fetch_or_build(const CacheKey& key, const std::string& description,
                        const std::function<Cubin()>& build, bool allow_build);
  DiskCache* disk_;
  mutable std::mutex mutex_;  // guards slots_ and builds_; never held while building or doing I/O
  std::unordered_map<CacheKey, std::shared_ptr<Slot>, CacheKeyHash> slots_;
  size_t builds_ = 0;
};

}  // namespace fa4::cache
