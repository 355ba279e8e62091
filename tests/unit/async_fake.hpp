// The asynchronous fake backend of the core's unit tests: wraps
// fake_backend (which does the bytes and the fault injection); submit()
// only queues, and the test releases the queued requests one at a time, in
// any order, on its own thread, so every interleaving is explicit.  The
// buffered twin a deferred request uses is fd + k_buffered_base, translated
// back before the fake sees it.
#pragma once

#include "dcache_io/backend.h"
#include "dcache_io/fake_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace dcache::test {

using dcache::io::fake_backend;

class async_fake final : public dcache::io::backend {
public:
	static constexpr int k_buffered_base = 50000;

	explicit async_fake(fake_backend &inner) : _inner(inner) {}

	[[nodiscard]] const char *name() const noexcept override { return "async_fake"; }
	[[nodiscard]] dcache::io::result execute(const dcache::io::request &req) noexcept override
	{
		return _inner.execute(translate(req));
	}
	[[nodiscard]] dcache::io::result execute_now(const dcache::io::request &req) noexcept override
	{
		_now_calls.fetch_add(1);
		return _inner.execute(translate(req));
	}
	void submit(const dcache::io::request &req, dcache::io::completion &c) noexcept override
	{
		std::lock_guard lock(_mutex);
		queued q;
		q.iov.assign(req.iov, req.iov + req.iov_count);
		q.req = req;
		q.c = &c;
		_queue.push_back(std::move(q));
	}
	[[nodiscard]] bool completes_inline() const noexcept override { return false; }
	[[nodiscard]] bool cached_writes_in_caller() const noexcept override { return _cached_in_caller; }
	// As the io_uring backend: a WRITE's cached pieces in the caller.
	void set_cached_writes_in_caller(bool on) noexcept { _cached_in_caller = on; }
	[[nodiscard]] dcache::io::dio_caps probe_dio(int fd) noexcept override { return _inner.probe_dio(base(fd)); }
	[[nodiscard]] dcache::io::open_result open_direct(int fd) noexcept override
	{
		return _inner.open_direct(base(fd));
	}
	[[nodiscard]] dcache::io::open_result open_buffered(int fd) noexcept override
	{
		_buffered_open.fetch_add(1);
		return {0, base(fd) + k_buffered_base, true, true};
	}
	void close_fd(int fd) noexcept override
	{
		if (fd >= k_buffered_base && fd < fake_backend::k_direct_fd_base)
			_buffered_open.fetch_sub(1);
		else
			_inner.close_fd(fd);
	}

	// ---- the test's side ----
	[[nodiscard]] std::size_t pending() const
	{
		std::lock_guard lock(_mutex);
		return _queue.size();
	}
	// The oldest queued request (as issued: fd not translated).
	[[nodiscard]] dcache::io::request front() const
	{
		std::lock_guard lock(_mutex);
		return _queue.front().req;
	}
	// Whether the queued request at `at` (oldest first) is on an O_DIRECT
	// descriptor.
	[[nodiscard]] bool is_direct(std::size_t at = 0) const
	{
		std::lock_guard lock(_mutex);
		return at < _queue.size() && _queue[at].req.fd >= fake_backend::k_direct_fd_base;
	}
	// Executes and completes the queued request at `at` (default: the
	// oldest), on this thread.
	void release_one(std::size_t at = 0)
	{
		queued q;
		{
			std::lock_guard lock(_mutex);
			ASSERT_LT(at, _queue.size());
			q = std::move(_queue[at]);
			_queue.erase(_queue.begin() + static_cast<std::ptrdiff_t>(at));
		}
		q.req.iov = q.iov.data();
		const dcache::io::result r = _inner.execute(translate(q.req));
		q.c->complete(r);
	}
	void release_all()
	{
		while (pending() > 0)
			release_one();
	}
	[[nodiscard]] int buffered_open() const { return _buffered_open.load(); }
	[[nodiscard]] int now_calls() const { return _now_calls.load(); }

private:
	struct queued {
		dcache::io::request req;
		std::vector<struct iovec> iov;
		dcache::io::completion *c = nullptr;
	};
	static int base(int fd) noexcept
	{
		return fd >= k_buffered_base && fd < fake_backend::k_direct_fd_base ? fd - k_buffered_base : fd;
	}
	static dcache::io::request translate(dcache::io::request r) noexcept
	{
		r.fd = base(r.fd);
		return r;
	}

	fake_backend &_inner;
	mutable std::mutex _mutex;
	std::deque<queued> _queue;
	std::atomic<int> _buffered_open{0};
	std::atomic<int> _now_calls{0};
	bool _cached_in_caller = false;
};

} // namespace dcache::test
