// Clang thread-safety annotations, checked by the clang build
// (-Wthread-safety, CMakePresets.json "clang-tsa"); no-ops for GCC.
// tracker_mutex and its scoped lock are std::mutex wearing them.
#pragma once

#include <mutex>

#if defined(__clang__)
#define DCACHE_TSA(x) __attribute__((x))
#else
#define DCACHE_TSA(x)
#endif
#define DCACHE_CAPABILITY(name) DCACHE_TSA(capability(name))
#define DCACHE_GUARDED_BY(m) DCACHE_TSA(guarded_by(m))
#define DCACHE_REQUIRES(m) DCACHE_TSA(requires_capability(m))
#define DCACHE_EXCLUDES(m) DCACHE_TSA(locks_excluded(m))
#define DCACHE_ACQUIRE() DCACHE_TSA(acquire_capability())
#define DCACHE_RELEASE() DCACHE_TSA(release_capability())
#define DCACHE_SCOPED_CAPABILITY DCACHE_TSA(scoped_lockable)

namespace dcache::core {

class DCACHE_CAPABILITY("mutex") tracker_mutex {
public:
	void lock() DCACHE_ACQUIRE() { _m.lock(); }
	void unlock() DCACHE_RELEASE() { _m.unlock(); }

private:
	std::mutex _m;
};

class DCACHE_SCOPED_CAPABILITY tracker_lock {
public:
	explicit tracker_lock(tracker_mutex &m) DCACHE_TSA(acquire_capability(m)) : _m(m) { _m.lock(); }
	~tracker_lock() DCACHE_RELEASE() { _m.unlock(); }
	tracker_lock(const tracker_lock &) = delete;
	tracker_lock &operator=(const tracker_lock &) = delete;
	tracker_mutex &mutex() noexcept { return _m; }

private:
	tracker_mutex &_m;
};

} // namespace dcache::core
