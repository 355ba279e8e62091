#include "admission.h"

#include "sync_point.h"

namespace dcache::core {

// A worker waiting in line with its request, on the worker's stack.
struct worker_wait {
	std::condition_variable_any cv;
	bool done = false;
	admission::outcome how = admission::outcome::waited;
};

void admission::queue(place_waiter &w) noexcept
{
	w._next = nullptr;
	if (_tail != nullptr)
		_tail->_next = &w;
	else
		_head = &w;
	_tail = &w;
}

// Ends the wait of w's worker: it has the place (waited), or its request
// is parked from now on and the worker goes.
void admission::wake(place_waiter &w, outcome how) noexcept
{
	worker_wait &ww = *w._worker;
	w._worker = nullptr;
	ww.how = how;
	ww.done = true;
	ww.cv.notify_one(); // under the lock: the worker's stack holds it
}

admission::outcome admission::enter(place_waiter *park) noexcept
{
	outcome how = outcome::parked;
	{
		mutex_lock lock(_m);
		// A newcomer never passes a request in line; the completion
		// thread never waits.
		if ((_head == nullptr && _taken < _places) || park == nullptr) {
			++_taken;
			return outcome::taken;
		}
		park->_worker = nullptr;
		park->_worker_waited = false;
		if (_first_worker == nullptr && _parked < k_parked_per_place * _places) {
			queue(*park);
			++_parked;
		} else {
			worker_wait ww;
			park->_worker = &ww;
			park->_worker_waited = true;
			queue(*park);
			if (_first_worker == nullptr)
				_first_worker = park;
			while (!ww.done)
				ww.cv.wait(lock.held());
			how = ww.how;
			if (how == outcome::waited)
				return how;
		}
	}
	// From here on the request is the line's: only its name may be used.
	DCACHE_SYNC_POINT("admission.parked");
	return how;
}

place_waiter *admission::leave() noexcept
{
	mutex_lock lock(_m);
	place_waiter *const w = _head;
	// A place taken over the bound (the completion thread's) is not
	// passed on: the bound comes back first.
	if (w == nullptr || _taken > _places) {
		--_taken;
		return nullptr;
	}
	// The place passes to the first in line: _taken stays.
	_head = w->_next;
	if (_head == nullptr)
		_tail = nullptr;
	if (w->_worker != nullptr) { // nobody parked: its worker takes it
		_first_worker = w->_next;
		wake(*w, outcome::waited);
		return nullptr;
	}
	--_parked;
	// Room among the parked: the oldest waiting worker parks its request
	// and goes back to Ganesha.
	if (_first_worker != nullptr) {
		place_waiter &b = *_first_worker;
		_first_worker = b._next;
		wake(b, outcome::parked_after_waiting);
		++_parked;
	}
	return w;
}

std::uint32_t admission::taken() const noexcept
{
	mutex_lock lock(_m);
	return _taken;
}

std::uint32_t admission::parked() const noexcept
{
	mutex_lock lock(_m);
	return _parked;
}

std::uint32_t admission::waiting() const noexcept
{
	mutex_lock lock(_m);
	std::uint32_t n = 0;
	for (const place_waiter *w = _head; w != nullptr; w = w->_next)
		++n;
	return n;
}

} // namespace dcache::core
