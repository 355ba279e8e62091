#include "yield_gate.h"

#include <algorithm>
#include <thread>

namespace dcache::core {

void yield_gate::enter(yield_own *own) noexcept
{
	if (own != nullptr)
		own->in.fetch_add(1, std::memory_order_relaxed);
	_in.fetch_add(1, std::memory_order_release);
}

void yield_gate::leave(yield_own *own) noexcept
{
	const std::int64_t now = clock::now().time_since_epoch().count();
	if (own != nullptr) {
		// another file's run start was the last: it stays visible to
		// this file's streams
		if (_last_start_own.exchange(own, std::memory_order_relaxed) != own)
			_other_start_leave.store(_last_start_leave.load(std::memory_order_relaxed),
						 std::memory_order_relaxed);
		_last_start_leave.store(now, std::memory_order_relaxed);
	} else {
		_last_leave.store(now, std::memory_order_relaxed);
	}
	_in.fetch_sub(1, std::memory_order_release);
	if (own != nullptr)
		own->in.fetch_sub(1, std::memory_order_release);
}

// The two counts cannot be read at once: the file's is read before and
// after the gate's, and the larger taken, so that a request of the file
// entering or leaving in between is not counted as another's (at worst
// one of the others is missed, and looked at again a quiet time later).
yield_gate::others yield_gate::others_of(const yield_own *own) const noexcept
{
	if (own == nullptr)
		return {_in.load(std::memory_order_acquire),
			std::max(_last_leave.load(std::memory_order_relaxed),
				 _last_start_leave.load(std::memory_order_relaxed))};
	const std::int32_t before = own->in.load(std::memory_order_acquire);
	const std::int64_t in = _in.load(std::memory_order_acquire);
	const std::int32_t after = own->in.load(std::memory_order_acquire);
	const bool own_last = _last_start_own.load(std::memory_order_relaxed) == own;
	const std::int64_t starts = (own_last ? _other_start_leave : _last_start_leave).load(std::memory_order_relaxed);
	return {in - std::max(before, after), std::max(_last_leave.load(std::memory_order_relaxed), starts)};
}

bool yield_gate::busy(clock::time_point now, clock::duration quiet, const yield_own *own) const noexcept
{
	const others o = others_of(own);
	return o.in > 0 || now - clock::time_point{clock::duration(o.last_leave)} < quiet;
}

yield_gate::clock::duration yield_gate::wait(clock::duration quiet, clock::time_point deadline, clock::duration reopen,
					     const yield_own *own) noexcept
{
	const clock::time_point start = clock::now();
	if (_open.load(std::memory_order_relaxed)) {
		if (busy(start, std::max(quiet, reopen), own))
			return clock::duration::zero();	       // they have not paused for long
		_open.store(false, std::memory_order_relaxed); // a long pause: give way again
	}
	if (!busy(start, quiet, own) || start >= deadline)
		return clock::duration::zero();
	if (_waiting.fetch_add(1, std::memory_order_relaxed) >= k_yield_max_waiting) {
		_waiting.fetch_sub(1, std::memory_order_relaxed);
		return clock::duration::zero(); // enough workers wait already
	}
	// Each waiter looks again on its own clock, never woken by a leave: a
	// cached READ leaves the gate empty after nearly every request, and
	// waking every waiter each time cost the working set more CPU than
	// the stream it held back.
	clock::time_point now = start;
	for (; now < deadline && busy(now, quiet, own); now = clock::now()) {
		const others o = others_of(own);
		// requests in flight: again after the quiet time
		const clock::time_point until = o.in > 0 ? now + quiet
							 : clock::time_point{clock::duration(o.last_leave)} + quiet;
		std::this_thread::sleep_until(std::min(until, deadline));
	}
	_waiting.fetch_sub(1, std::memory_order_relaxed);
	if (now >= deadline && busy(now, quiet, own))
		_open.store(true, std::memory_order_relaxed); // they keep coming: giving way gains them nothing
	return now - start;
}

} // namespace dcache::core
