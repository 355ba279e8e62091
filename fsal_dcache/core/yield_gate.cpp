#include "yield_gate.h"

#include <algorithm>

namespace dcache::core {

void yield_gate::enter() noexcept
{
	_in.fetch_add(1, std::memory_order_seq_cst);
}

void yield_gate::leave() noexcept
{
	_last_leave.store(clock::now().time_since_epoch().count(), std::memory_order_relaxed);
	// seq_cst against wait()'s _waiting increment and its read of _in: one
	// of the two sees the other, so the last one out never misses a stream
	// that is about to sleep.
	if (_in.fetch_sub(1, std::memory_order_seq_cst) == 1 && _waiting.load(std::memory_order_seq_cst) != 0) {
		mutex_lock lock(_m);
		_cv.notify_all();
	}
}

bool yield_gate::busy(clock::time_point now, clock::duration quiet) const noexcept
{
	if (_in.load(std::memory_order_seq_cst) != 0)
		return true;
	const clock::time_point last{clock::duration(_last_leave.load(std::memory_order_relaxed))};
	return now - last < quiet;
}

yield_gate::clock::duration yield_gate::wait(clock::duration quiet, clock::time_point deadline) noexcept
{
	const clock::time_point start = clock::now();
	if (!busy(start, quiet)) {
		if (_open.load(std::memory_order_relaxed))
			_open.store(false, std::memory_order_relaxed); // a quiet moment: give way again
		return clock::duration::zero();
	}
	if (start >= deadline || _open.load(std::memory_order_relaxed))
		return clock::duration::zero();
	if (_waiting.fetch_add(1, std::memory_order_seq_cst) >= k_yield_max_waiting) {
		_waiting.fetch_sub(1, std::memory_order_seq_cst);
		return clock::duration::zero(); // enough workers wait already
	}
	{
		mutex_lock lock(_m);
		for (clock::time_point now = start; now < deadline && busy(now, quiet); now = clock::now()) {
			if (_in.load(std::memory_order_seq_cst) != 0) {
				_cv.wait_until(lock.held(), deadline); // leave() of the last one wakes it
				continue;
			}
			// Quiet, not yet for long enough: until it has been, unless
			// another request comes (it is seen when this wakes).
			const clock::time_point last{clock::duration(_last_leave.load(std::memory_order_relaxed))};
			_cv.wait_until(lock.held(), std::min(last + quiet, deadline));
		}
	}
	_waiting.fetch_sub(1, std::memory_order_seq_cst);
	const clock::time_point end = clock::now();
	if (end >= deadline && busy(end, quiet))
		_open.store(true, std::memory_order_relaxed); // they keep coming: giving way gains them nothing
	return end - start;
}

} // namespace dcache::core
