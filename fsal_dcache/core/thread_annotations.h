// Clang thread-safety annotations, checked by the clang build
// (-Wthread-safety, CMakePresets.json "clang-tsa", run by ci/test.sh); no-ops
// for GCC.  mutex and shared_mutex are the standard ones wearing them, with
// scoped locks the analysis understands; a condition variable waits on them
// as std::condition_variable_any (while (!ready) cv.wait(lock.held())).
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define DCACHE_TSA(x) __attribute__((x))
#else
#define DCACHE_TSA(x)
#endif
#define DCACHE_CAPABILITY(name) DCACHE_TSA(capability(name))
#define DCACHE_GUARDED_BY(m) DCACHE_TSA(guarded_by(m))
#define DCACHE_PT_GUARDED_BY(m) DCACHE_TSA(pt_guarded_by(m))
#define DCACHE_REQUIRES(m) DCACHE_TSA(requires_capability(m))
#define DCACHE_EXCLUDES(m) DCACHE_TSA(locks_excluded(m))
#define DCACHE_ACQUIRE(...) DCACHE_TSA(acquire_capability(__VA_ARGS__))
#define DCACHE_ACQUIRE_SHARED(...) DCACHE_TSA(acquire_shared_capability(__VA_ARGS__))
#define DCACHE_RELEASE(...) DCACHE_TSA(release_capability(__VA_ARGS__))
#define DCACHE_RELEASE_SHARED(...) DCACHE_TSA(release_shared_capability(__VA_ARGS__))
#define DCACHE_RELEASE_GENERIC(...) DCACHE_TSA(release_generic_capability(__VA_ARGS__))
#define DCACHE_SCOPED_CAPABILITY DCACHE_TSA(scoped_lockable)

namespace dcache::core {

class DCACHE_CAPABILITY("mutex") mutex {
public:
	void lock() DCACHE_ACQUIRE() { _m.lock(); }
	void unlock() DCACHE_RELEASE() { _m.unlock(); }

private:
	std::mutex _m;
};

class DCACHE_SCOPED_CAPABILITY mutex_lock {
public:
	explicit mutex_lock(mutex &m) DCACHE_ACQUIRE(m) : _m(m) { _m.lock(); }
	~mutex_lock() DCACHE_RELEASE() { _m.unlock(); }
	mutex_lock(const mutex_lock &) = delete;
	mutex_lock &operator=(const mutex_lock &) = delete;
	// What a condition_variable_any waits on.
	mutex &held() noexcept { return _m; }

private:
	mutex &_m;
};

class DCACHE_CAPABILITY("shared_mutex") shared_mutex {
public:
	void lock() DCACHE_ACQUIRE() { _m.lock(); }
	void unlock() DCACHE_RELEASE() { _m.unlock(); }
	void lock_shared() DCACHE_ACQUIRE_SHARED() { _m.lock_shared(); }
	void unlock_shared() DCACHE_RELEASE_SHARED() { _m.unlock_shared(); }

private:
	std::shared_mutex _m;
};

// Exclusive and shared scoped locks on a shared_mutex.
class DCACHE_SCOPED_CAPABILITY unique_lock {
public:
	explicit unique_lock(shared_mutex &m) DCACHE_ACQUIRE(m) : _m(m) { _m.lock(); }
	~unique_lock() DCACHE_RELEASE() { _m.unlock(); }
	unique_lock(const unique_lock &) = delete;
	unique_lock &operator=(const unique_lock &) = delete;

private:
	shared_mutex &_m;
};

class DCACHE_SCOPED_CAPABILITY shared_lock {
public:
	explicit shared_lock(shared_mutex &m) DCACHE_ACQUIRE_SHARED(m) : _m(m) { _m.lock_shared(); }
	~shared_lock() DCACHE_RELEASE_GENERIC() { _m.unlock_shared(); }
	shared_lock(const shared_lock &) = delete;
	shared_lock &operator=(const shared_lock &) = delete;

private:
	shared_mutex &_m;
};

} // namespace dcache::core
