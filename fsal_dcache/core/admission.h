// An export's places (IO_Queue_Depth): how many of its requests on an
// asynchronous backend may hold a bounce buffer or be in the ring at once,
// the memory bound (docs/configuration.md, "Memory under load").
//
// A request that finds every place taken waits in line, first come first
// served: a place given back goes to the oldest waiter, never to a
// newcomer.  Waiting holds no thread: the request is parked, its worker
// goes back to Ganesha (the reply follows later, as for a request in the
// ring), and the thread that gives a place back resumes it.  Ganesha's
// own buffers of a parked request stay alive while it waits, so parking
// has a bound too: beyond k_parked_per_place x IO_Queue_Depth parked
// requests, a worker waits in its own thread, still in line, until its
// request may be parked in turn (the parked are always the oldest of the
// line, so a place goes straight to a request ready to run, never to a
// thread that must first be woken).
//
// Thread-safety: everything may be called concurrently; one mutex.
#pragma once

#include "thread_annotations.h"

#include <condition_variable>
#include <cstdint>

namespace dcache::core {

// Parked requests allowed per place before workers wait themselves.
inline constexpr std::uint32_t k_parked_per_place = 2;

struct worker_wait;

// One request in line (a request_op is one).
class place_waiter {
public:
	place_waiter() = default;
	place_waiter(const place_waiter &) = delete;
	place_waiter &operator=(const place_waiter &) = delete;
	// Whether its worker waited in line with it before it was parked (read
	// by whoever resumes it).
	[[nodiscard]] bool worker_waited() const noexcept { return _worker_waited; }

private:
	friend class admission;
	place_waiter *_next = nullptr;
	worker_wait *_worker = nullptr; // set while its worker waits with it
	bool _worker_waited = false;
};

class admission {
public:
	enum class outcome : std::uint8_t {
		taken,		      // a place, at once
		waited,		      // a place, after the calling thread waited in line
		parked,		      // in line: the op belongs to the line until leave() returns it
		parked_after_waiting, // parked, after the calling thread waited for room
	};

	// places: IO_Queue_Depth.
	explicit admission(std::uint32_t places) noexcept : _places(places) {}

	// A place for one request.  park: the request, to park if none is
	// free; nullptr takes a place over the bound instead (the completion
	// thread, which must never wait: it is what gives places back).
	[[nodiscard]] outcome enter(place_waiter *park) noexcept DCACHE_EXCLUDES(_m);
	// Gives one place back.  If a parked request was first in line, the
	// place is now its own and it is returned: the caller resumes it.
	[[nodiscard]] place_waiter *leave() noexcept DCACHE_EXCLUDES(_m);

	[[nodiscard]] std::uint32_t places() const noexcept { return _places; }
	[[nodiscard]] std::uint32_t taken() const noexcept DCACHE_EXCLUDES(_m);
	[[nodiscard]] std::uint32_t parked() const noexcept DCACHE_EXCLUDES(_m);
	// In line: parked, and workers waiting in their own thread (the line's
	// length: for tests and diagnostics).
	[[nodiscard]] std::uint32_t waiting() const noexcept DCACHE_EXCLUDES(_m);

private:
	void queue(place_waiter &w) noexcept DCACHE_REQUIRES(_m);
	void wake(place_waiter &w, outcome how) noexcept DCACHE_REQUIRES(_m);

	const std::uint32_t _places;
	mutable mutex _m;
	std::uint32_t _taken DCACHE_GUARDED_BY(_m) = 0;
	std::uint32_t _parked DCACHE_GUARDED_BY(_m) = 0;
	place_waiter *_head DCACHE_GUARDED_BY(_m) = nullptr;
	place_waiter *_tail DCACHE_GUARDED_BY(_m) = nullptr;
	// The first whose worker waits with it: every one before it is parked.
	place_waiter *_first_worker DCACHE_GUARDED_BY(_m) = nullptr;
};

} // namespace dcache::core
