// Installs a test's std::function as the core's sync-point hook
// (core/sync_point.h) for its lifetime.  Set the function before starting
// threads; it is read without a lock.
#pragma once

#include "sync_point.h"

#include <functional>
#include <string>
#include <utility>

namespace dcache::test {

class sync_points {
public:
	explicit sync_points(std::function<void(const std::string &)> fn) : _fn(std::move(fn))
	{
		dcache::core::set_sync_point_hook(&_hook);
	}
	~sync_points() { dcache::core::set_sync_point_hook(nullptr); }
	sync_points(const sync_points &) = delete;
	sync_points &operator=(const sync_points &) = delete;

private:
	static void call(const char *name, void *arg) { static_cast<sync_points *>(arg)->_fn(name); }
	std::function<void(const std::string &)> _fn;
	dcache::core::sync_point_hook _hook{&sync_points::call, this};
};

} // namespace dcache::test
