// The on-disk cubin cache. One file per key:
//   <dir>/<key hex>.cubin : EntryHeader followed by the cubin bytes
//   <dir>/<key hex>.lock  : flock()ed while one process builds that key
// Entries are published atomically (temp file in the same dir, fsync, rename, fsync of the directory) and
// verified before use (magic, schema, key, size, XXH3 checksum); anything else is removed with a warning
// and reported as a miss, so it gets rebuilt and replaced.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"

namespace fa4::cache {

struct EntryHeader {
  char magic[8];            // "FA4CUBIN"
  uint32_t schema;          // kSchemaVersion
  uint32_t reserved;        // 0
  uint64_t key_high, key_low;
  uint64_t size;            // cubin bytes that follow
  uint64_t checksum;        // cache::checksum(cubin)
};
static_assert(sizeof(EntryHeader) == 48, "disk entry header layout is part of the schema");

// FA4_CACHE_DIR, else $XDG_CACHE_HOME/fa4rt, else $HOME/.cache/fa4rt.
std::string default_cache_dir();

class DiskCache {
 public:
  // Creates `dir` (and parents) with mode 0700 if missing. An empty dir means default_cache_dir().
  // If the directory cannot be created or written, new kernels stay in memory: enabled() is false and
  // one warning is logged. A directory that is readable but not writable (a cache built offline and
  // shipped on a read-only mount) still serves its entries: readable() stays true.
  explicit DiskCache(std::string dir);

  bool enabled() const { return enabled_.load(); }
  bool readable() const { return readable_; }
  const std::string& directory() const { return dir_; }
  std::string entry_path(const CacheKey& key) const;

  // The verified cubin, or nullopt on a miss. A corrupt, truncated or mismatched entry is deleted with
  // a warning and reported as a miss.
  std::optional<std::vector<char>> load(const CacheKey& key) const;

  // Atomic publish. An I/O failure (read-only directory, disk full) switches the cache to memory-only
  // with one warning; it never throws for I/O.
  void store(const CacheKey& key, const std::vector<char>& cubin);

  // A per-key inter-process lock (flock on <key>.lock, released on destruction or process death).
  // Default-constructed / when the cache is disabled: holds nothing.
  class Lock {
   public:
    Lock() = default;
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Lock& operator=(Lock&& o) noexcept;
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    int fd_ = -1;
  };
  Lock lock(const CacheKey& key);

 private:
  void disable(const std::string& why);
  std::string dir_;
  std::atomic<bool> enabled_{false};  // writable; atomic: store() may fail (and disable) on several threads at once
  bool readable_ = false;
};

}  // namespace fa4::cache
