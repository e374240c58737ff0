#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/log.hpp"

namespace fa4::cache {

namespace {

constexpr char kMagic[8] = {'F', 'A', '4', 'C', 'U', 'B', 'I', 'N'};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string errno_text(int err) { return std::strerror(err); }

// mkdir -p; every directory it creates gets mode 0700 (cubins are private to the user).
bool make_dirs(const std::string& path, std::string* error) {
  for (size_t end = 1; end <= path.size(); ++end) {
    if (end < path.size() && path[end] != '/') continue;
    const std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      *error = "cannot create " + prefix + ": " + errno_text(errno);
      return false;
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = path + " is not a directory";
    return false;
  }
  return true;
}

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // errno says why (EFBIG, ENOSPC, EROFS, ...)
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Empty if `file` is a valid entry for `key`, else what is wrong with it.
std::string verify(const CacheKey& key, const std::vector<char>& file) {
  EntryHeader h;
  if (file.size() < sizeof(h)) return "truncated header: " + std::to_string(file.size()) + " bytes";
  std::memcpy(&h, file.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return "bad magic";
  if (h.schema != kSchemaVersion)
    return "schema " + std::to_string(h.schema) + ", expected " + std::to_string(kSchemaVersion);
  if (h.key_high != key.high || h.key_low != key.low)
    return "holds key " + CacheKey{h.key_high, h.key_low}.hex();
  const uint64_t payload = file.size() - sizeof(h);
  if (h.size != payload)
    return "header says " + std::to_string(h.size) + " cubin bytes, file holds " + std::to_string(payload);
  if (checksum(file.data() + sizeof(h), payload) != h.checksum) return "checksum mismatch";
  return {};
}

}  // namespace

std::string default_cache_dir() {
  if (std::string dir = env("FA4_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string dir = env("XDG_CACHE_HOME"); !dir.empty()) return dir + "/fa4rt";
  if (std::string dir = env("HOME"); !dir.empty()) return dir + "/.cache/fa4rt";
  return {};
}

DiskCache::DiskCache(std::string dir) : dir_(dir.empty() ? default_cache_dir() : std::move(dir)) {
  enabled_ = true;  // until disable() says why not
  std::string error;
  if (dir_.empty())
    disable("no cache directory (set FA4_CACHE_DIR, XDG_CACHE_HOME or HOME)");
  else if (!make_dirs(dir_, &error))
    disable(error);
  else if (::access(dir_.c_str(), W_OK | X_OK) != 0)
    disable(dir_ + " is not writable: " + errno_text(errno) + " (existing entries are still used)");
  readable_ = !dir_.empty() && ::access(dir_.c_str(), R_OK | X_OK) == 0;
}

void DiskCache::disable(const std::string& why) {
  if (enabled_.exchange(false))  // only the first failure warns
    detail::log().warn("disk cache disabled, kernels are cached in memory only: {}", why);
}

std::string DiskCache::entry_path(const CacheKey& key) const { return dir_ + "/" + key.hex() + ".cubin"; }

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key) const {
  if (!readable_) return std::nullopt;
  const std::string path = entry_path(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) detail::log().warn("disk cache: cannot open {}: {}", path, errno_text(errno));
    return std::nullopt;
  }
  struct stat st {};
  std::vector<char> file;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = "fstat: " + errno_text(errno);
  } else {
    file.resize(static_cast<size_t>(st.st_size));
    errno = 0;
    problem = read_all(fd, file.data(), file.size()) ? verify(key, file)
                                                     : "read: " + (errno ? errno_text(errno) : std::string("short read"));
  }
  ::close(fd);
  if (problem.empty()) return std::vector<char>(file.begin() + sizeof(EntryHeader), file.end());

  if (!enabled()) {  // read-only: leave it, rebuild in memory
    detail::log().warn("disk cache: ignoring invalid entry {} ({}) in a read-only cache", path, problem);
    return std::nullopt;
  }
  // Remove it only if the name still points at the file we read: another process may just have
  // published a good entry in its place.
  struct stat now {};
  const bool removed = ::stat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
                       ::unlink(path.c_str()) == 0;
  detail::log().warn("disk cache: invalid entry {} ({}){}; it will be rebuilt", path, problem,
                     removed ? ", removed" : " (already replaced)");
  return std::nullopt;
}

void DiskCache::store(const CacheKey& key, const std::vector<char>& cubin) {
  if (!enabled()) return;
  EntryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.schema = kSchemaVersion;
  h.key_high = key.high;
  h.key_low = key.low;
  h.size = cubin.size();
  h.checksum = checksum(cubin.data(), cubin.size());

  // Readers only ever see a complete entry: write a private temp file in the same directory (so the
  // rename is atomic), make it durable, then rename it over the final name.
  const std::string path = entry_path(key);
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return disable("cannot create a file in " + dir_ + ": " + errno_text(errno));
  bool ok = write_all(fd, &h, sizeof(h)) && write_all(fd, cubin.data(), cubin.size()) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return disable("cannot write " + path + ": " + errno_text(err));
  }
  // Make the rename itself durable. A failure here leaves a complete entry, so nothing to undo.
  if (const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

DiskCache::Lock& DiskCache::Lock::operator=(Lock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

DiskCache::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

DiskCache::Lock DiskCache::lock(const CacheKey& key) {
  if (!enabled()) return Lock();
  // Lock files are never deleted: removing one could let two processes lock different inodes.
  const std::string path = dir_ + "/" + key.hex() + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    disable("cannot create " + path + ": " + errno_text(errno));
    return Lock();
  }
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    // E.g. a filesystem without flock: the worst case is a duplicate build, so carry on unlocked.
    detail::log().warn("disk cache: cannot lock {}: {}; building without it", path, errno_text(errno));
    ::close(fd);
    return Lock();
  }
  return Lock(fd);
}

}  // namespace fa4::cache
