#include "cache/disk_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <thread>

#include "base/log.hpp"
#include "fa4/fa4.hpp"

namespace fa4::cache {

namespace {

constexpr char kMagic[8] = {'F', 'A', '4', 'C', 'U', 'B', 'I', 'N'};
constexpr size_t kKeyHexDigits = 32;
// Opening never blocks (a FIFO) and never follows a link; descriptors do not leak into children.
constexpr int kOpenFlags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string errno_text(int err) { return std::strerror(err); }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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

// Reads up to `size` bytes; returns how many (short only at end of file), or -1 with errno.
ssize_t read_up_to(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

bool same_inode(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Whether `name` in the directory still is the file `st` describes (not replaced meanwhile).
bool still_names(int dir_fd, const std::string& name, const struct stat& st) {
  struct stat now {};
  return ::fstatat(dir_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && same_inode(now, st);
}

// Removes `name` only if it is still the file we examined: another process may just have published a
// good entry in its place. A directory goes only when empty (we never delete what we did not create).
bool remove_if_same(int dir_fd, const std::string& name, const struct stat& st) {
  if (!still_names(dir_fd, name, st)) return false;
  return ::unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0;
}

// Calls fn(name) for every name in the directory (a fresh open file description, so concurrent scans
// do not share a read offset).
void for_each_name(int dir_fd, const std::function<void(const std::string&)>& fn) {
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;  // collected first: fn may remove files
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  for (const std::string& name : names) fn(name);
}

std::string entry_name(const CacheKey& key) { return key.hex() + ".cubin"; }
std::string lock_name(const std::string& key_hex) { return key_hex + ".lock"; }

// "<32 hex digits>.cubin" -> the key.
std::optional<CacheKey> key_of_entry(const std::string& name) {
  if (name.size() != kKeyHexDigits + 6 || !ends_with(name, ".cubin")) return std::nullopt;
  CacheKey key;
  for (size_t i = 0; i < kKeyHexDigits; ++i) {
    const char c = name[i];
    const int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    uint64_t& half = i < 16 ? key.high : key.low;
    half = (half << 4) | static_cast<uint64_t>(v);
  }
  return key;
}

// XXH3-64 of the whole entry with its checksum field zeroed (the buffer is restored).
uint64_t entry_checksum(std::vector<char>& file) {
  char* field = file.data() + offsetof(EntryHeader, checksum);
  char saved[sizeof(uint64_t)];
  std::memcpy(saved, field, sizeof(saved));
  std::memset(field, 0, sizeof(saved));
  const uint64_t sum = checksum(file.data(), file.size());
  std::memcpy(field, saved, sizeof(saved));
  return sum;
}

// Empty if the header (and, with `full`, the whole file) is valid for `key`, else what is wrong. `file`
// holds the header and name at least; with `full`, the whole file of `file_size` bytes.
std::string verify(const CacheKey& key, std::vector<char>& file, uint64_t file_size, bool full, std::string* name) {
  EntryHeader h;
  if (file_size < sizeof(h)) return "truncated header: " + std::to_string(file_size) + " bytes";
  std::memcpy(&h, file.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return "bad magic";
  if (h.schema != kSchemaVersion)
    return "schema " + std::to_string(h.schema) + ", expected " + std::to_string(kSchemaVersion);
  if (h.key_high != key.high || h.key_low != key.low) return "holds key " + CacheKey{h.key_high, h.key_low}.hex();
  if (h.name_size > kMaxNameBytes) return "name of " + std::to_string(h.name_size) + " bytes";
  const uint64_t after_header = file_size - sizeof(h);
  if (after_header < h.name_size) return "truncated name";
  const uint64_t payload = after_header - h.name_size;
  if (h.size != payload)
    return "header says " + std::to_string(h.size) + " cubin bytes, file holds " + std::to_string(payload);
  if (name && file.size() >= sizeof(h) + h.name_size) name->assign(file.data() + sizeof(h), h.name_size);
  if (full && entry_checksum(file) != h.checksum) return "checksum mismatch";
  return {};
}

// Whom the cache trusts as the owner of what it reads: the user, and for bundles also root. Empty: fine.
std::string owner_problem(const struct stat& st, bool bundle) {
  const uid_t me = ::geteuid();
  if (st.st_uid == me || (bundle && st.st_uid == 0)) return {};
  return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) +
         (bundle ? ") or root" : ")");
}

// Another user could replace what it holds. Empty: fine.
std::string mode_problem(const struct stat& st) {
  if (!(st.st_mode & (S_IWGRP | S_IWOTH))) return {};
  return "writable by group or others (mode " + octal_mode(st.st_mode) + ")";
}

// A directory that is safe to take cubins from: a real directory (not a link), owned by us (bundles:
// or by root), not writable by group or others, and no world-writable parent without the sticky bit
// (anyone could rename it away and put their own in its place). Returns the descriptor, or -1 with
// `fault` and `problem` set.
int open_safe_directory(const std::string& path, bool bundle, Fault* fault, std::string* problem) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    *fault = Fault::unsafe_directory;
    *problem = path + " is a symbolic link (refused: whoever owns the link decides what it points to; "
                      "name the target directory instead)";
    return -1;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *fault = errno == ELOOP ? Fault::unsafe_directory : Fault::unusable_directory;
    *problem = "cannot open " + path + ": " + errno_text(errno);
    return -1;
  }
  auto refuse = [&](const std::string& why) {
    ::close(fd);
    *fault = Fault::unsafe_directory;
    *problem = "refusing " + path + ": " + why + "; its entries could have been planted by another user";
    return -1;
  };
  if (::fstat(fd, &st) != 0) return refuse("fstat: " + errno_text(errno));
  if (std::string why = owner_problem(st, bundle); !why.empty()) return refuse(why);
  if (std::string why = mode_problem(st); !why.empty()) return refuse(why + "; chmod go-w " + path + " if you trust it");
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real)) {
    std::string parent = real;
    while (parent.size() > 1) {
      parent.resize(std::max<size_t>(1, parent.rfind('/')));
      struct stat ps {};
      if (::stat(parent.c_str(), &ps) == 0 && (ps.st_mode & S_IWOTH) && !(ps.st_mode & S_ISVTX))
        return refuse("its parent " + parent + " is world-writable without the sticky bit");
    }
  }
  if (::faccessat(fd, ".", R_OK | X_OK, AT_EACCESS) != 0) {
    ::close(fd);
    *fault = Fault::unusable_directory;
    *problem = path + " is not readable: " + errno_text(errno);
    return -1;
  }
  return fd;
}

}  // namespace

const char* to_string(Fault fault) {
  switch (fault) {
    case Fault::not_regular_file: return "not_regular_file";
    case Fault::symlink: return "symlink";
    case Fault::too_large: return "too_large";
    case Fault::foreign_owner: return "foreign_owner";
    case Fault::unsafe_mode: return "unsafe_mode";
    case Fault::corrupt: return "corrupt";
    case Fault::io_error: return "io_error";
    case Fault::unsafe_directory: return "unsafe_directory";
    case Fault::unusable_directory: return "unusable_directory";
    case Fault::lock_timeout: return "lock_timeout";
    case Fault::lock_failed: return "lock_failed";
    case Fault::store_failed: return "store_failed";
    case Fault::stale_file: return "stale_file";
  }
  return "?";
}

std::string default_cache_dir() {
  if (std::string dir = env("XDG_CACHE_HOME"); !dir.empty()) return dir + "/fa4rt";
  if (std::string dir = env("HOME"); !dir.empty()) return dir + "/.cache/fa4rt";
  return {};
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int shift = 0;
  switch (text.back()) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
  }
  if (shift) text.remove_suffix(1);
  if (text.empty() || text.size() > 19) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

// One directory of the cache.
struct DiskCache::Dir {
  std::string path;
  bool bundle = false;  // read-only: served, never written, never cleaned
  int fd = -1;          // -1: not usable
  std::string problem;  // why not usable (or, for the writable one, why not written)
  ~Dir() {
    if (fd >= 0) ::close(fd);
  }

  // The checks every file passes on its opened descriptor before a byte is read. Empty: fine.
  std::string check(const struct stat& st, uint64_t max_bytes, Fault* fault) const {
    if (!S_ISREG(st.st_mode)) {
      *fault = S_ISLNK(st.st_mode) ? Fault::symlink : Fault::not_regular_file;
      return "is " + file_kind(st.st_mode) + (S_ISLNK(st.st_mode) ? " (never followed)" : "");
    }
    if (std::string why = owner_problem(st, bundle); !why.empty()) {
      *fault = Fault::foreign_owner;
      return why;
    }
    if (std::string why = mode_problem(st); !why.empty()) {
      *fault = Fault::unsafe_mode;
      return why;
    }
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      *fault = Fault::too_large;
      return std::to_string(st.st_size) + " bytes, above the bound of " + std::to_string(max_bytes);
    }
    return {};
  }

  // Opens `name` for reading after the checks above. -1 with an empty problem: a plain miss (no file).
  int open_checked(const std::string& name, uint64_t max_bytes, struct stat* st, Fault* fault,
                   std::string* problem) const {
    const int fd = ::openat(this->fd, name.c_str(), O_RDONLY | kOpenFlags);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT) return -1;
      // Say what is there (a link, a socket, someone else's file) rather than just the errno.
      if (::fstatat(this->fd, name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0) {
        *problem = check(*st, max_bytes, fault);
        if (!problem->empty()) return -1;
      } else {
        *st = {};
      }
      *fault = Fault::io_error;
      *problem = "cannot open: " + errno_text(err);
      return -1;
    }
    if (::fstat(fd, st) != 0) {
      *fault = Fault::io_error;
      *problem = "fstat: " + errno_text(errno);
    } else {
      *problem = check(*st, max_bytes, fault);
    }
    if (problem->empty()) return fd;
    ::close(fd);
    return -1;
  }

  // Removes a lock file nobody holds (left by a killed builder, or of an evicted entry).
  bool remove_unheld_lock(const std::string& name) const {
    const int lock_fd = ::openat(fd, name.c_str(), O_RDONLY | kOpenFlags);
    if (lock_fd < 0) return false;
    struct stat st {};
    bool removed = false;
    // Only our own: anything else at a lock name is for lock() to report.
    if (::fstat(lock_fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        ::flock(lock_fd, LOCK_EX | LOCK_NB) == 0)
      removed = remove_if_same(fd, name, st);  // a builder that opened it meanwhile sees it gone and reopens
    ::close(lock_fd);
    return removed;
  }
};

DiskCache::DiskCache(std::string dir, DiskCacheSettings settings) : settings_(std::move(settings)) {
  open_directories(dir.empty() ? default_cache_dir() : dir);
}

DiskCache::DiskCache(const Options& options) {
  settings_.bundles = options.cache_bundles;
  settings_.max_bytes = options.cache_max_bytes;
  open_directories(options.cache_dir.empty() ? default_cache_dir() : options.cache_dir);
}

DiskCache::~DiskCache() = default;

void DiskCache::open_directories(const std::string& dir) {
  auto strip = [](std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();  // "dir/" would follow a link named dir
    return p;
  };
  auto writable = std::make_unique<Dir>();
  writable->path = strip(dir);
  Dir& w = *writable;
  dirs_.push_back(std::move(writable));
  for (const std::string& b : settings_.bundles) {
    if (b.empty()) continue;
    auto bundle = std::make_unique<Dir>();
    bundle->path = strip(b);
    bundle->bundle = true;
    Fault fault{};
    bundle->fd = open_safe_directory(bundle->path, true, &fault, &bundle->problem);
    if (bundle->fd < 0) report(fault, "disk cache: not using the bundle " + bundle->path + ": " + bundle->problem);
    dirs_.push_back(std::move(bundle));
  }

  enabled_ = true;  // until disable() says why not
  std::string error;
  Fault fault{};
  if (w.path.empty()) {
    disable(Fault::unusable_directory, "no cache directory (set FA4_CACHE_DIR, XDG_CACHE_HOME or HOME)");
  } else if (!make_dirs(w.path, &error)) {
    disable(Fault::unusable_directory, error);
  } else if ((w.fd = open_safe_directory(w.path, false, &fault, &error)) < 0) {
    disable(fault, error);
  } else if (::faccessat(w.fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    disable(Fault::unusable_directory, w.path + " is not writable: " + errno_text(errno) +
                                           " (existing entries are still used)");
  } else {
    sweep_stale_files();
  }
}

bool DiskCache::readable() const {
  return std::any_of(dirs_.begin(), dirs_.end(), [](const auto& d) { return d->fd >= 0; });
}

const std::string& DiskCache::directory() const { return dirs_[0]->path; }

std::string DiskCache::entry_path(const CacheKey& key) const { return directory() + "/" + entry_name(key); }

std::vector<DirectoryInfo> DiskCache::directories() const {
  std::lock_guard<std::mutex> guard(mutex_);  // disable() may be setting the writable one's problem
  std::vector<DirectoryInfo> out;
  for (const auto& d : dirs_) {
    DirectoryInfo info;
    info.path = d->path;
    info.writable = !d->bundle;
    info.usable = d->fd >= 0;
    info.problem = d->problem;
    if (!d->bundle && info.usable && !enabled() && info.problem.empty()) info.problem = "not written to";
    out.push_back(std::move(info));
  }
  return out;
}

uint64_t DiskCache::total_faults() const {
  uint64_t total = 0;
  for (const auto& f : faults_) total += f.load();
  return total;
}

void DiskCache::report(Fault fault, const std::string& message) const {
  faults_[static_cast<int>(fault)]++;
  if (fault == Fault::stale_file)
    detail::log().info("{}", message);  // housekeeping: nothing is lost
  else
    detail::log().warn("{}", message);
}

void DiskCache::disable(Fault fault, const std::string& why) {
  if (enabled_.exchange(false)) {  // only the first failure warns
    std::lock_guard<std::mutex> guard(mutex_);
    dirs_[0]->problem = why;
    report(fault, "disk cache disabled, kernels are cached in memory only: " + why);
  } else {
    faults_[static_cast<int>(fault)]++;
  }
}

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key) const {
  for (const auto& d : dirs_) {
    if (d->fd < 0) continue;
    try {
      if (auto cubin = load_from(*d, key)) return cubin;
    } catch (const std::exception& e) {  // bad_alloc at worst (sizes are bounded): a miss, never an escape
      report(Fault::io_error, "disk cache: cannot read " + d->path + "/" + entry_name(key) + ": " + e.what());
    }
  }
  return std::nullopt;
}

std::optional<std::vector<char>> DiskCache::load_from(const Dir& d, const CacheKey& key) const {
  const std::string name = entry_name(key);
  struct stat st {};
  Fault fault = Fault::corrupt;
  std::string problem;
  std::vector<char> file;
  const int fd = d.open_checked(name, settings_.max_entry_bytes, &st, &fault, &problem);
  if (fd < 0 && problem.empty()) return std::nullopt;  // a plain miss
  if (fd >= 0) {
    file.resize(static_cast<size_t>(st.st_size));  // bounded by open_checked
    const ssize_t n = read_up_to(fd, file.data(), file.size());
    if (n < 0) {
      fault = Fault::io_error;
      problem = "read: " + errno_text(errno);
    } else {
      file.resize(static_cast<size_t>(n));  // shorter if the file shrank since fstat
      fault = Fault::corrupt;
      problem = verify(key, file, file.size(), true, nullptr);
    }
    if (problem.empty() && !d.bundle) {
      // Last use, for the LRU bound (mtime rather than atime, which relatime/noatime make useless).
      const timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
      ::futimens(fd, times);
    }
    ::close(fd);
  }
  if (problem.empty()) {
    EntryHeader h;
    std::memcpy(&h, file.data(), sizeof(h));
    const size_t skip = sizeof(h) + h.name_size;
    return std::vector<char>(file.begin() + static_cast<std::ptrdiff_t>(skip), file.end());
  }

  const std::string path = d.path + "/" + name;
  std::string message;
  if (d.bundle || !enabled()) {  // read-only: leave it, rebuild in memory
    message = "disk cache: ignoring invalid entry " + path + " (" + problem + ") in a read-only " +
              (d.bundle ? "bundle" : "cache");
  } else if (st.st_ino == 0 || !still_names(d.fd, name, st)) {
    message = "disk cache: invalid entry " + path + " (" + problem + ") (already replaced)";
  } else if (remove_if_same(d.fd, name, st)) {
    report(fault, "disk cache: invalid entry " + path + " (" + problem + "), removed; it will be rebuilt");
    return std::nullopt;
  } else {
    message = "disk cache: invalid entry " + path + " (" + problem + ") (could not remove it: " + errno_text(errno) +
              "); this kernel is rebuilt in memory";
  }
  // Left in place: the next lookup of this key meets it again. Once is enough.
  std::lock_guard<std::mutex> guard(mutex_);
  if (left_in_place_.insert(path + '\n' + problem).second) report(fault, message);
  return std::nullopt;
}

void DiskCache::store(const CacheKey& key, const std::vector<char>& cubin, std::string_view name) {
  if (!enabled()) return;
  Dir& d = *dirs_[0];
  const std::string final_name = entry_name(key), path = d.path + "/" + final_name;
  name = name.substr(0, kMaxNameBytes);
  const uint64_t file_size = sizeof(EntryHeader) + name.size() + cubin.size();
  if (file_size > settings_.max_entry_bytes) {
    report(Fault::store_failed, "disk cache: not storing " + path + ": " + std::to_string(file_size) +
                                    " bytes, above the entry bound of " + std::to_string(settings_.max_entry_bytes) +
                                    "; the kernel stays in memory");
    return;
  }
  std::vector<char> file(file_size);
  EntryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.schema = kSchemaVersion;
  h.name_size = static_cast<uint32_t>(name.size());
  h.key_high = key.high;
  h.key_low = key.low;
  h.size = cubin.size();
  h.created = static_cast<int64_t>(std::time(nullptr));
  std::memcpy(file.data(), &h, sizeof(h));
  std::memcpy(file.data() + sizeof(h), name.data(), name.size());
  std::memcpy(file.data() + sizeof(h) + name.size(), cubin.data(), cubin.size());
  h.checksum = entry_checksum(file);
  std::memcpy(file.data() + offsetof(EntryHeader, checksum), &h.checksum, sizeof(h.checksum));

  // Readers only ever see a complete entry: write a private temp file in the same directory (so the
  // rename is atomic), make it durable, then rename it over the final name. The writer flocks its temp
  // file, so that the stale-file sweep of another process never removes it mid-write.
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = key.hex() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::openat(d.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | kOpenFlags, 0600);
    if (fd < 0 && errno != EEXIST) break;  // EEXIST: something planted at that name, try another
  }
  if (fd < 0) return disable(Fault::store_failed, "cannot create a file in " + d.path + ": " + errno_text(errno));
  ::flock(fd, LOCK_EX | LOCK_NB);
  bool ok = write_all(fd, file.data(), file.size()) && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlinkat(d.fd, tmp.c_str(), 0);
    return disable(Fault::store_failed, "cannot write " + path + ": " + errno_text(err));
  }
  int renamed = ::renameat(d.fd, tmp.c_str(), d.fd, final_name.c_str());
  if (renamed != 0 && (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST)) {
    // A directory at the entry name: one bad entry, not a broken cache. An empty one we may remove.
    if (::unlinkat(d.fd, final_name.c_str(), AT_REMOVEDIR) == 0)
      renamed = ::renameat(d.fd, tmp.c_str(), d.fd, final_name.c_str());
    if (renamed != 0) {
      err = errno;
      ::unlinkat(d.fd, tmp.c_str(), 0);
      report(Fault::store_failed, "disk cache: cannot publish " + path + ": a directory is in the way (" +
                                      errno_text(err) + "); this kernel stays in memory");
      return;
    }
  }
  if (renamed != 0) {
    err = errno;
    ::unlinkat(d.fd, tmp.c_str(), 0);
    return disable(Fault::store_failed, "cannot write " + path + ": " + errno_text(err));
  }
  ::fsync(d.fd);  // make the rename durable; a failure leaves a complete entry, so nothing to undo
  if (settings_.max_bytes) {
    const Removed removed = evict(settings_.max_bytes, final_name);
    if (removed.files)
      detail::log().info("disk cache: evicted {} least recently used entries ({} bytes) from {} to stay within {} "
                         "bytes (FA4_CACHE_MAX_BYTES)", removed.files, removed.bytes, d.path, settings_.max_bytes);
  }
}

DiskCache::Lock::Lock(Lock&& o) noexcept : fd_(o.fd_), dir_fd_(o.dir_fd_), name_(std::move(o.name_)) {
  o.fd_ = o.dir_fd_ = -1;
}

DiskCache::Lock& DiskCache::Lock::operator=(Lock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    dir_fd_ = o.dir_fd_;
    name_ = std::move(o.name_);
    o.fd_ = o.dir_fd_ = -1;
  }
  return *this;
}

DiskCache::Lock::~Lock() { release(); }

void DiskCache::Lock::release() {
  if (fd_ >= 0) {
    // Remove the lock file while still holding it, so lock files do not pile up. A process that opened
    // it and waits gets the lock on an unlinked file, sees that the name no longer leads to it, and
    // opens the name afresh (DiskCache::lock), so two holders never coexist.
    struct stat st {};
    if (::fstat(fd_, &st) == 0) remove_if_same(dir_fd_, name_, st);
    ::close(fd_);  // releases the flock
  }
  if (dir_fd_ >= 0) ::close(dir_fd_);
  fd_ = dir_fd_ = -1;
}

DiskCache::Lock DiskCache::lock(const CacheKey& key) {
  if (!enabled()) return Lock();
  const Dir& d = *dirs_[0];
  const std::string name = lock_name(key.hex()), path = d.path + "/" + name;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + settings_.lock_timeout;
  // Tell the user why nothing happens once the wait gets long (a normal wait is one compile, < 1 s).
  const auto notice = start + std::min<std::chrono::milliseconds>(std::chrono::seconds(1), settings_.lock_timeout / 2);
  bool noticed = false, cleaned = false;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    const int fd = ::openat(d.fd, name.c_str(), O_RDWR | O_CREAT | kOpenFlags, 0600);
    struct stat st {};
    Fault fault{};
    std::string problem;
    if (fd < 0) {
      const int err = errno;
      if (::fstatat(d.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) problem = d.check(st, UINT64_MAX, &fault);
      if (problem.empty()) {
        report(Fault::lock_failed, "disk cache: cannot create " + path + ": " + errno_text(err) + "; building without it");
        return Lock();
      }
    } else if (::fstat(fd, &st) == 0) {
      problem = d.check(st, UINT64_MAX, &fault);
      if (!problem.empty()) ::close(fd);
    }
    if (!problem.empty()) {
      // Something else at the lock name (a link, a directory, a FIFO, another user's file): remove it
      // once and try again; if it stays, build without the lock.
      const bool removed = !cleaned && remove_if_same(d.fd, name, st);
      report(fault, "disk cache: bad lock file " + path + " (" + problem + ")" +
                        (removed ? ", removed" : "; building without the lock"));
      if (!removed) return Lock();
      cleaned = true;
      continue;
    }
    while (true) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        if (still_names(d.fd, name, st)) {
          if (noticed) detail::log().info("disk cache: got {} after {:.1f} s", path,
                                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          const int dir_fd = ::fcntl(d.fd, F_DUPFD_CLOEXEC, 0);
          return Lock(fd, dir_fd, name);
        }
        break;  // the holder removed the file as it released it: open the name afresh
      }
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) {  // e.g. a filesystem without flock: the worst case is a duplicate build
        report(Fault::lock_failed, "disk cache: cannot lock " + path + ": " + errno_text(errno) + "; building without it");
        ::close(fd);
        return Lock();
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        ::close(fd);
        report(Fault::lock_timeout,
               "disk cache: gave up waiting for " + path + " after " +
                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count()) +
                   " ms (its holder may be stopped or hung); building this kernel without the lock");
        return Lock();
      }
      if (!noticed && now >= notice) {
        noticed = true;
        detail::log().info("disk cache: waiting for {}: another process is building this kernel (giving up after {} ms)",
                           path, settings_.lock_timeout.count());
      }
      std::this_thread::sleep_for(std::min(pause, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    ::close(fd);
  }
}

void DiskCache::sweep_stale_files() {
  const Dir& d = *dirs_[0];
  const time_t cutoff = std::time(nullptr) - static_cast<time_t>(settings_.stale_age.count());
  for_each_name(d.fd, [&](const std::string& name) {
    bool removed = false;
    std::string what;
    if (name.find(".tmp.") != std::string::npos) {
      // A writer killed between write and rename. Old and not flocked by a live writer: remove it.
      struct stat st {};
      if (::fstatat(d.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_mtime >= cutoff) return;
      const int fd = S_ISREG(st.st_mode) ? ::openat(d.fd, name.c_str(), O_RDONLY | kOpenFlags) : -1;
      if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) removed = remove_if_same(d.fd, name, st);
      if (fd >= 0) ::close(fd);
      what = "temp file";
    } else if (ends_with(name, ".lock")) {
      removed = d.remove_unheld_lock(name);  // its builder was killed; live builders hold theirs
      what = "lock file";
    }
    if (removed) report(Fault::stale_file, "disk cache: removed stale " + what + " " + d.path + "/" + name);
  });
}

DiskCache::Removed DiskCache::evict(uint64_t max_bytes, const std::string& keep) {
  struct Item {
    std::string name;
    uint64_t bytes;
    timespec used;
  };
  const Dir& d = *dirs_[0];
  std::vector<Item> items;
  uint64_t total = 0;
  for_each_name(d.fd, [&](const std::string& name) {
    struct stat st {};
    if (!key_of_entry(name) || ::fstatat(d.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return;  // not ours to count; load() deals with it
    if (static_cast<uint64_t>(st.st_size) > settings_.max_entry_bytes) {
      // Never served (a sparse or runaway file): counting it would evict every good entry instead.
      if (remove_if_same(d.fd, name, st))
        report(Fault::too_large, "disk cache: removed " + d.path + "/" + name + " (" + std::to_string(st.st_size) +
                                     " bytes, above the entry bound)");
      return;
    }
    items.push_back({name, static_cast<uint64_t>(st.st_size), st.st_mtim});
    total += static_cast<uint64_t>(st.st_size);
  });
  Removed removed;
  if (total <= max_bytes) return removed;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.used.tv_sec != b.used.tv_sec) return a.used.tv_sec < b.used.tv_sec;
    if (a.used.tv_nsec != b.used.tv_nsec) return a.used.tv_nsec < b.used.tv_nsec;
    return a.name < b.name;
  });
  for (const Item& item : items) {
    if (total <= max_bytes) break;
    if (item.name == keep) continue;
    if (::unlinkat(d.fd, item.name.c_str(), 0) != 0) continue;  // another process evicted it first
    total -= item.bytes;
    removed.files++;
    removed.bytes += item.bytes;
    d.remove_unheld_lock(lock_name(item.name.substr(0, kKeyHexDigits)));
  }
  return removed;
}

DiskCache::Removed DiskCache::prune(uint64_t max_bytes) {
  if (!enabled()) return {};
  sweep_stale_files();
  return evict(max_bytes, "");
}

std::vector<EntryInfo> DiskCache::list(bool verify_checksums) const {
  std::vector<EntryInfo> out;
  for (const auto& d : dirs_) {
    if (d->fd < 0) continue;
    for_each_name(d->fd, [&](const std::string& name) {
      const std::optional<CacheKey> key = key_of_entry(name);
      if (!key) return;
      EntryInfo info;
      info.directory = d->path;
      info.file = name;
      struct stat st {};
      Fault fault{};
      const int fd = d->open_checked(name, settings_.max_entry_bytes, &st, &fault, &info.problem);
      info.bytes = static_cast<uint64_t>(st.st_size);
      info.last_used = st.st_mtim.tv_sec;
      if (fd < 0) {
        if (info.problem.empty()) return;  // removed meanwhile
        info.problem = std::string(to_string(fault)) + ": " + info.problem;
        out.push_back(std::move(info));
        return;
      }
      // The header and name only, unless asked to verify the checksum of the whole file.
      const size_t want = verify_checksums ? info.bytes : std::min<uint64_t>(info.bytes, sizeof(EntryHeader) + kMaxNameBytes);
      std::vector<char> file(want);
      const ssize_t n = read_up_to(fd, file.data(), file.size());
      ::close(fd);
      if (n < 0) {
        info.problem = "io_error: read: " + errno_text(errno);
      } else {
        file.resize(static_cast<size_t>(n));
        const uint64_t size = verify_checksums ? file.size() : info.bytes;
        info.problem = verify(*key, file, size, verify_checksums, &info.name);
        EntryHeader h{};
        if (file.size() >= sizeof(h)) std::memcpy(&h, file.data(), sizeof(h));
        const bool our_layout = file.size() >= sizeof(h) && std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0;
        if (our_layout && h.schema == kSchemaVersion) info.created = h.created;
        // An entry of an older (or newer) library: not broken, just never looked up by this version.
        info.other_version = our_layout && h.schema != kSchemaVersion;
        if (!info.problem.empty()) info.problem = (info.other_version ? "other version: " : "corrupt: ") + info.problem;
      }
      out.push_back(std::move(info));
    });
  }
  return out;
}

}  // namespace fa4::cache
