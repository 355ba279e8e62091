#include "write_fence.h"

#include "sync_point.h"

#include <algorithm>

namespace dcache::core {

bool write_fence::conflicts(std::span<const pages> mine) const
{
	for (const pages &h : _held)
		for (const pages &m : mine)
			if (h.k != m.k && h.overlaps(m))
				return true;
	return false;
}

bool write_fence::enter(std::span<const pages> mine)
{
	mutex_lock lock(_m);
	const bool waited = conflicts(mine);
	if (waited) {
		++_waiting;
		while (conflicts(mine)) {
			DCACHE_SYNC_POINT("fence.wait"); // under the fence's lock
			_cv.wait(lock.held());
		}
		--_waiting;
	}
	_held.insert(_held.end(), mine.begin(), mine.end());
	return waited;
}

bool write_fence::try_make_buffered(const pages &direct)
{
	bool wake = false;
	{
		mutex_lock lock(_m);
		if (direct.k != kind::direct)
			return false;
		const auto mine = std::find(_held.begin(), _held.end(), direct);
		if (mine == _held.end())
			return false;
		for (auto it = _held.begin(); it != _held.end(); ++it)
			if (it != mine && it->k == kind::direct && it->overlaps(direct))
				return false;
		mine->k = kind::buffered;
		wake = _waiting > 0; // buffered waiters on these pages may go now
	}
	if (wake)
		_cv.notify_all();
	return true;
}

void write_fence::leave(std::span<const pages> mine) noexcept
{
	bool wake = false;
	{
		mutex_lock lock(_m);
		for (const pages &m : mine) {
			const auto it = std::find(_held.begin(), _held.end(), m);
			if (it != _held.end()) {
				*it = _held.back();
				_held.pop_back();
			}
		}
		wake = _waiting > 0;
	}
	if (wake)
		_cv.notify_all();
}

std::size_t write_fence::held() const
{
	mutex_lock lock(_m);
	return _held.size();
}

std::size_t write_fence::waiting() const
{
	mutex_lock lock(_m);
	return _waiting;
}

} // namespace dcache::core
