#include "export_state.h"

#include "log.h"
#include "settings.h"

#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

namespace dcache::core {

settings_history::settings_history(const dcache_settings &first)
{
	_all.push_back(std::make_unique<const dcache_settings>(first));
	_current.store(_all.back().get(), std::memory_order_release);
}

void settings_history::publish(const dcache_settings &s)
{
	mutex_lock lock(_m);
	for (const auto &known : _all) {
		if (same_settings(*known, s)) {
			_current.store(known.get(), std::memory_order_release);
			return;
		}
	}
	_all.push_back(std::make_unique<const dcache_settings>(s));
	_current.store(_all.back().get(), std::memory_order_release);
}

namespace {

// IO_Workers_Max, applied to the running backend (at creation and live).
void apply_io_workers(dcache_export &e, std::uint32_t n) noexcept
{
	if (e.backend == nullptr)
		return;
	if (const int err = e.backend->set_io_workers(n); err != 0)
		log_msg(DCACHE_LOG_WARN,
			"dcache %s: IO_Workers_Max = %u not applied (%s%s): io-wq workers stay as the kernel has them",
			e.name, n, strerrorname_np(err),
			err == EINVAL ? ": IORING_REGISTER_IOWQ_MAX_WORKERS needs kernel 5.15" : "");
}

} // namespace

} // namespace dcache::core

dcache_export::dcache_export(const dcache_settings &s, const char *n, dcache::io::backend *b)
	: backend(b), places(s.io_queue_depth), settings(s)
{
	std::snprintf(name, sizeof(name), "%s", n != nullptr ? n : "(unnamed)");
	boundary.set_limits(s.boundary_max_pages, s.boundary_max_age_ms);
	if (b != nullptr && !b->completes_inline())
		stats.add(dcache::core::stat::backend_io_uring);
	dcache::core::apply_io_workers(*this, s.io_workers_max);
}

namespace dcache::core {

dcache_export *export_new_with_backend(const dcache_settings *settings, const char *name, io::backend *backend) noexcept
{
	try {
		return new dcache_export(settings != nullptr ? *settings : dcache_settings_default(), name, backend);
	} catch (...) {
		return nullptr;
	}
}

namespace {

void delete_export(dcache_export *exp) noexcept
{
	// Completions still finishing touch the export and its backend.
	{
		mutex_lock lock(exp->inflight_mutex);
		while (exp->inflight.load(std::memory_order_acquire) != 0)
			exp->inflight_cv.wait(lock.held());
	}
	delete exp;
}

} // namespace

void export_unref(dcache_export *exp) noexcept
{
	if (exp == nullptr || exp->refs.fetch_sub(1, std::memory_order_acq_rel) != 1)
		return;
	// A backend cannot be destroyed on its own completion thread (it joins
	// that thread): if the last reference goes there (a done callback
	// freeing the last file), the deletion moves to a thread of its own.
	if (exp->backend != nullptr && exp->backend->on_completion_thread()) {
		try {
			std::thread([exp] {
				(void)pthread_setname_np(pthread_self(), "dcache-unexport");
				delete_export(exp);
			}).detach();
			return;
		} catch (...) {
			return; // no thread: leak rather than deadlock
		}
	}
	delete_export(exp);
}

void export_update(dcache_export &e, const dcache_settings &s)
{
	// The backend was chosen at export creation and is not switched under
	// requests in flight: a changed IO_Backend / IO_Queue_Depth takes
	// effect at the next restart or re-export.
	const dcache_settings &old = e.settings.current();
	if (old.io_backend != s.io_backend || old.io_queue_depth != s.io_queue_depth)
		log_msg(DCACHE_LOG_INFO,
			"dcache %s: IO_Backend = %s, IO_Queue_Depth = %u take effect at the next restart or re-export; running on %s",
			e.name, s.io_backend == DCACHE_IO_BACKEND_SYNC ? "sync" : "io_uring", s.io_queue_depth,
			e.backend != nullptr ? e.backend->name() : "?");
	e.boundary.set_limits(s.boundary_max_pages, s.boundary_max_age_ms);
	if (old.io_workers_max != s.io_workers_max)
		apply_io_workers(e, s.io_workers_max);
	e.settings.publish(s);
}

void inflight_add(dcache_export &e) noexcept
{
	e.inflight.fetch_add(1, std::memory_order_relaxed);
}

void inflight_done(dcache_export &e) noexcept
{
	std::size_t n = e.inflight.load(std::memory_order_relaxed);
	while (n > 1)
		if (e.inflight.compare_exchange_weak(n, n - 1, std::memory_order_release, std::memory_order_relaxed))
			return;
	// The last one: to zero under the lock delete_export waits with.
	mutex_lock lock(e.inflight_mutex);
	if (e.inflight.fetch_sub(1, std::memory_order_acq_rel) == 1)
		e.inflight_cv.notify_all();
}

} // namespace dcache::core
