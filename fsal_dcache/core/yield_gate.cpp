#include "yield_gate.h"

#include <algorithm>
#include <thread>

namespace dcache::core {

void yield_gate::enter() noexcept
{
	_in.fetch_add(1, std::memory_order_relaxed);
}

void yield_gate::leave() noexcept
{
	_last_leave.store(clock::now().time_since_epoch().count(), std::memory_order_relaxed);
	_in.fetch_sub(1, std::memory_order_release);
}

bool yield_gate::busy(clock::time_point now, clock::duration quiet) const noexcept
{
	if (_in.load(std::memory_order_acquire) != 0)
		return true;
	const clock::time_point last{clock::duration(_last_leave.load(std::memory_order_relaxed))};
	return now - last < quiet;
}

yield_gate::clock::duration yield_gate::wait(clock::duration quiet, clock::time_point deadline,
					     clock::duration reopen) noexcept
{
	const clock::time_point start = clock::now();
	if (_open.load(std::memory_order_relaxed)) {
		if (busy(start, std::max(quiet, reopen)))
			return clock::duration::zero();	       // they have not paused for long
		_open.store(false, std::memory_order_relaxed); // a long pause: give way again
	}
	if (!busy(start, quiet) || start >= deadline)
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
	for (; now < deadline && busy(now, quiet); now = clock::now()) {
		clock::time_point until = now + quiet; // requests in flight: again after the quiet time
		if (_in.load(std::memory_order_acquire) == 0)
			until = clock::time_point{clock::duration(_last_leave.load(std::memory_order_relaxed))} + quiet;
		std::this_thread::sleep_until(std::min(until, deadline));
	}
	_waiting.fetch_sub(1, std::memory_order_relaxed);
	if (now >= deadline && busy(now, quiet))
		_open.store(true, std::memory_order_relaxed); // they keep coming: giving way gains them nothing
	return now - start;
}

} // namespace dcache::core
