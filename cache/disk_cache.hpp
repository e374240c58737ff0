// The on-disk cubin cache: one writable directory, then any number of read-only bundles.
//   <dir>/<key hex>.cubin          EntryHeader, the configuration name, the cubin bytes
//   <dir>/<key hex>.lock           flock()ed while one process builds that key; removed on release
//   <dir>/<key hex>.tmp.<pid>.<n>  an entry being written (flock()ed by its writer)
// Entries are published atomically (temp file in the same dir, fsync, rename, fsync of the directory) and
// verified before use (magic, schema, key, size, XXH3 checksum).
//
// Hardening (issue 8): every file is opened relative to a directory descriptor with O_NOFOLLOW|O_NONBLOCK
// and checked on the opened descriptor (regular file, owner, mode, size bound) before a byte is read.
// A bad entry is one miss (warned, typed as a Fault, removed when the directory is ours): it never
// disables the cache, blocks, or throws. A directory that another user could write into is refused as a
// whole (warned once, memory-only), since its entries could be forged. Build-lock waits time out.
// The writable directory is bounded (least recently used entries are evicted after a store).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "cache/cache_key.hpp"
#include "fa4/fa4.hpp"

namespace fa4::cache {

struct EntryHeader {
  char magic[8];       // "FA4CUBIN"
  uint32_t schema;     // kSchemaVersion
  uint32_t name_size;  // bytes of configuration name that follow the header (at most kMaxNameBytes)
  uint64_t key_high, key_low;
  uint64_t size;       // cubin bytes that follow the name
  uint64_t checksum;   // cache::checksum of the whole file with this field zeroed
  int64_t created;     // unix seconds when the entry was written (fa4rt cache ls)
  uint64_t reserved;   // 0
};
static_assert(sizeof(EntryHeader) == 64, "disk entry header layout is part of the schema");

constexpr size_t kMaxNameBytes = 256;
constexpr uint64_t kDefaultMaxEntryBytes = uint64_t{64} << 20;  // cubins are at most a few MiB

// Every way the disk cache can go wrong, typed so that tests and tools can tell them apart. Each
// occurrence is counted and logged (a warning, or info for housekeeping).
enum class Fault {
  not_regular_file,    // a FIFO, directory, socket or device at an entry or lock name
  symlink,             // a symbolic link at an entry or lock name (never followed)
  too_large,           // an entry larger than the bound (a sparse or runaway file): never read
  foreign_owner,       // a file owned by another user (bundles: by neither the user nor root)
  unsafe_mode,         // a file writable by group or others
  corrupt,             // truncated, bad magic, other schema, other key, wrong size or checksum
  io_error,            // open, fstat or read failed for another reason
  unsafe_directory,    // a directory refused as a whole: owner, mode, symlink, or a parent without sticky bit
  unusable_directory,  // a directory that cannot be created, opened or written
  lock_timeout,        // another process held the build lock past the timeout: built without it
  lock_failed,         // the lock file could not be created or locked: built without it
  store_failed,        // an entry could not be published (disk full, read-only, name taken, too large)
  stale_file,          // a temp file or lock file left by a killed process, removed when the cache opened
};
constexpr int kFaultKinds = 13;
const char* to_string(Fault fault);

struct DiskCacheSettings {
  std::vector<std::string> bundles;                        // read-only directories after the writable one
  uint64_t max_bytes = Options().cache_max_bytes;          // LRU bound on the writable directory; 0: none
  uint64_t max_entry_bytes = kDefaultMaxEntryBytes;        // larger files are faults, never read
  std::chrono::milliseconds lock_timeout{30000};           // then build without the lock
  std::chrono::seconds stale_age{3600};                    // unlocked temp files older than this are removed
};

// $XDG_CACHE_HOME/fa4rt, else $HOME/.cache/fa4rt, else "" (FA4_CACHE_DIR is read by Options::from_env).
std::string default_cache_dir();

// "1048576", "512M", "2G", "1T" (binary multiples): nullopt when malformed or out of range.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// One directory as the cache sees it (fa4rt cache dir).
struct DirectoryInfo {
  std::string path;
  bool writable = false;  // the writable cache (first) rather than a read-only bundle
  bool usable = false;    // entries are served from it
  std::string problem;    // why not usable, or why not written to
};

// One entry (fa4rt cache ls / verify).
struct EntryInfo {
  std::string directory;
  std::string file;        // file name inside the directory
  std::string name;        // the configuration name recorded when it was compiled
  uint64_t bytes = 0;      // file size
  int64_t created = 0;     // unix seconds (from the header)
  int64_t last_used = 0;   // unix seconds (the file's mtime, touched on every disk hit)
  std::string problem;     // empty when valid (the checksum is checked only when asked)
  bool other_version = false;  // written with another entry schema: never looked up, evicted when old
};

class DiskCache {
 public:
  // Creates `dir` (and parents) with mode 0700 if missing; an empty dir means default_cache_dir().
  // If it cannot be created, opened or written, or is unsafe, new kernels stay in memory: enabled() is
  // false and one warning is logged. A directory that is readable but not writable (a cache built
  // offline and shipped on a read-only mount) still serves its entries. Never throws for I/O.
  explicit DiskCache(std::string dir, DiskCacheSettings settings = {});
  // The directories and bound of Options (cache_dir, cache_bundles, cache_max_bytes).
  explicit DiskCache(const Options& options);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  bool enabled() const { return enabled_.load(); }  // new entries are written to disk
  bool readable() const;                            // some directory serves entries
  const std::string& directory() const;             // the writable directory
  std::string entry_path(const CacheKey& key) const;
  std::vector<DirectoryInfo> directories() const;

  // The verified cubin from the writable directory, else from the first bundle that has it; nullopt on
  // a miss. A bad entry is warned about, counted, removed when the directory is ours, and a miss.
  // A hit in the writable directory marks the entry as used (its mtime) for the LRU bound.
  std::optional<std::vector<char>> load(const CacheKey& key) const;

  // Atomic publish into the writable directory, then LRU eviction down to the bound (never the entry
  // just stored). `name` (the configuration) is recorded for `fa4rt cache ls`. An I/O failure of the
  // directory (read-only, disk full) switches the cache to memory-only with one warning; a failure of
  // one entry (a directory at its name) is one warning. Never throws for I/O.
  void store(const CacheKey& key, const std::vector<char>& cubin, std::string_view name = {});

  // A per-key inter-process lock (flock on <key>.lock in the writable directory). Waits at most the
  // lock timeout for another holder, logging when the wait gets long; then gives up (held() is false)
  // and the caller builds anyway: the worst case is a duplicate build, published atomically. The lock
  // file is removed on release, so lock files do not accumulate. Disabled cache: holds nothing.
  class Lock {
   public:
    Lock() = default;
    Lock(Lock&& o) noexcept;
    Lock& operator=(Lock&& o) noexcept;
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    bool held() const { return fd_ >= 0; }

   private:
    friend class DiskCache;
    Lock(int fd, int dir_fd, std::string name) : fd_(fd), dir_fd_(dir_fd), name_(std::move(name)) {}
    void release();
    int fd_ = -1;
    int dir_fd_ = -1;  // a duplicate of the directory descriptor, so the lock may outlive the cache
    std::string name_;
  };
  Lock lock(const CacheKey& key);

  // Maintenance (fa4rt cache ...). list: the entries of every directory, checksums verified when asked.
  std::vector<EntryInfo> list(bool verify) const;
  struct Removed {
    size_t files = 0;
    uint64_t bytes = 0;
  };
  // Least recently used entries of the writable directory go until at most `max_bytes` remain (0:
  // all); unheld lock files of removed entries go with them. Bundles are never touched.
  Removed prune(uint64_t max_bytes);

  uint64_t faults(Fault kind) const { return faults_[static_cast<int>(kind)].load(); }
  uint64_t total_faults() const;

 private:
  struct Dir;
  void open_directories(const std::string& dir);
  void disable(Fault fault, const std::string& why);
  // Counts the fault and logs `message` (warn; info for housekeeping).
  void report(Fault fault, const std::string& message) const;
  std::optional<std::vector<char>> load_from(const Dir& dir, const CacheKey& key) const;
  void sweep_stale_files();
  Removed evict(uint64_t max_bytes, const std::string& keep);

  DiskCacheSettings settings_;
  std::vector<std::unique_ptr<Dir>> dirs_;  // [0]: the writable directory, then the bundles
  std::atomic<bool> enabled_{false};        // atomic: store() may fail (and disable) on several threads
  mutable std::atomic<uint64_t> faults_[kFaultKinds] = {};
  mutable std::mutex mutex_;  // guards left_in_place_ and dirs_[0]->problem (which disable() sets)
  // Bad entries that could not be removed (bundles, read-only): reported once, not on every lookup.
  mutable std::unordered_set<std::string> left_in_place_;
};

}  // namespace fa4::cache
