#include "cache/kernel_cache.hpp"

#include <chrono>
#include <future>

#include "fa4/error.hpp"
#include "base/log.hpp"

namespace fa4::cache {

// One key's entry in the memory cache. The first caller (the leader) fills `result`; everyone else waits
// on the shared future, which also carries the leader's exception to all of them.
struct KernelCache::Slot {
  std::promise<std::shared_ptr<const Cubin>> promise;
  std::shared_future<std::shared_ptr<const Cubin>> result = promise.get_future().share();
};

const char* to_string(Origin origin) {
  switch (origin) {
    case Origin::memory: return "memory";
    case Origin::disk: return "disk";
    case Origin::compiled: return "compiled";
  }
  return "?";
}

KernelCache::KernelCache(DiskCache* disk) : disk_(disk) {}

Lookup KernelCache::get(const CacheKey& key, const std::string& description,
                        const std::function<Cubin()>& build, bool allow_build) {
  std::shared_ptr<Slot> slot;
  bool leader = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    std::shared_ptr<Slot>& entry = slots_[key];
    if (!entry) {
      entry = std::make_shared<Slot>();
      leader = true;
    }
    slot = entry;
  }

  if (!leader) {
    try {
      return {slot->result.get(), Origin::memory};
    } catch (const Error& e) {
      // The leader was not allowed to build; a caller that is allowed tries again (and leads).
      if (e.code() != ErrorCode::not_cached || !allow_build) throw;
    }
    return get(key, description, build, allow_build);
  }

  try {
    Lookup found = fetch_or_build(key, description, build, allow_build);
    slot->promise.set_value(found.cubin);
    return found;
  } catch (...) {
    // Not cached: drop the slot first so the next call retries, then wake the waiters with the error.
    {
      std::lock_guard<std::mutex> guard(mutex_);
      slots_.erase(key);
    }
    slot->promise.set_exception(std::current_exception());
    throw;
  }
}

Lookup KernelCache::fetch_or_build(const CacheKey& key, const std::string& description,
                                   const std::function<Cubin()>& build, bool allow_build) {
  auto from_disk = [&]() -> std::shared_ptr<const Cubin> {
    if (!disk_) return nullptr;
    std::optional<Cubin> cubin = disk_->load(key);
    return cubin ? std::make_shared<const Cubin>(std::move(*cubin)) : nullptr;
  };
  if (auto cubin = from_disk()) return {cubin, Origin::disk};
  if (!allow_build)
    throw Error(ErrorCode::not_cached, "kernel " + description + " (cache key " + key.hex() +
                                           ") is in neither cache and JIT compilation is disabled");

  // Another process may be building this key: wait for its lock (bounded), then look again before building.
  DiskCache::Lock lock = disk_ ? disk_->lock(key) : DiskCache::Lock();
  if (auto cubin = from_disk()) return {cubin, Origin::disk};

  const auto start = std::chrono::steady_clock::now();
  Cubin cubin = build();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  detail::log().info("compiled {} ({}) in {:.0f} ms", key.hex(), description, ms);
  if (disk_) disk_->store(key, cubin, description);  // also when the lock timed out: the publish is atomic
  {
    std::lock_guard<std::mutex> guard(mutex_);
    ++builds_;
  }
  return {std::make_shared<const Cubin>(std::move(cubin)), Origin::compiled};
}

std::shared_ptr<const Cubin> KernelCache::find(const CacheKey& key) const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = slots_.find(key);
  if (it == slots_.end()) return nullptr;
  // A slot whose future is ready holds a cubin: failed slots are erased before their future is set.
  const auto& result = it->second->result;
  if (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
  return result.get();
}

size_t KernelCache::builds() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return builds_;
}

}  // namespace fa4::cache
