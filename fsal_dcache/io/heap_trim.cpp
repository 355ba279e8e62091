#include "dcache_io/heap_trim.h"

#include "dcache_io/bounce_pool.h"
#include <mutex>

#include <malloc.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <thread>

namespace dcache::io {

namespace {

class heap_trimmer {
public:
	heap_trimmer() : _thread([this] { run(); })
	{
		// Its own name, not its creator's (a ring's completion thread).
		(void)pthread_setname_np(_thread.native_handle(), "dcache-trim");
	}
	heap_trimmer(const heap_trimmer &) = delete;
	heap_trimmer &operator=(const heap_trimmer &) = delete;
	~heap_trimmer()
	{
		{
			std::lock_guard lock(_m);
			_stop = true;
		}
		_cv.notify_all();
		_thread.join();
	}

	// Set by requests, cleared by each look: written at most once an
	// interval, so the hot path only reads a line every thread shares.
	std::atomic<bool> used{false};
	std::atomic<std::uint64_t> trims{0};
	std::atomic<std::int64_t> interval_ms{1000};

private:
	void run() noexcept
	{
		unsigned quiet = 0; // whole intervals without a request since the last one
		bool dirty = false;
		std::unique_lock lock(_m);
		for (;;) {
			const auto until = std::chrono::steady_clock::now() +
					   std::chrono::milliseconds(interval_ms.load(std::memory_order_relaxed));
			while (!_stop && std::chrono::steady_clock::now() < until)
				_cv.wait_until(lock, until);
			if (_stop)
				return;
			if (used.exchange(false, std::memory_order_relaxed)) { // still busy: not now
				quiet = 0;
				dirty = true;
				continue;
			}
			if (!dirty)
				continue;
			++quiet;
			if (quiet == 1 || quiet == 10 || quiet == 60) {
				(void)bounce_trim();
				malloc_trim(0);
				trims.fetch_add(1, std::memory_order_relaxed);
			}
			if (quiet >= 60)
				dirty = false; // until the next request
		}
	}

	std::mutex _m;
	std::condition_variable _cv;
	bool _stop = false;
	std::thread _thread; // last: started once the rest is built
};

heap_trimmer *trimmer() noexcept
{
	// Built on first use, joined when the module is unloaded.
	static heap_trimmer *t = []() noexcept -> heap_trimmer * {
		try {
			static heap_trimmer one;
			return &one;
		} catch (...) {
			return nullptr; // no thread: nothing is trimmed
		}
	}();
	return t;
}

} // namespace

void note_heap_use() noexcept
{
	if (heap_trimmer *t = trimmer())
		if (!t->used.load(std::memory_order_relaxed))
			t->used.store(true, std::memory_order_relaxed);
}

std::uint64_t heap_trims() noexcept
{
	heap_trimmer *t = trimmer();
	return t != nullptr ? t->trims.load(std::memory_order_relaxed) : 0;
}

void set_heap_trim_interval_for_test(std::chrono::milliseconds interval) noexcept
{
	if (heap_trimmer *t = trimmer())
		t->interval_ms.store(interval.count(), std::memory_order_relaxed);
}

} // namespace dcache::io
