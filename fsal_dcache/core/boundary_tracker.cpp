#include "boundary_tracker.h"

#include <algorithm>
#include <new>

namespace dcache::core {

void boundary_tracker::set_limits(std::uint32_t max_pages, std::uint32_t max_age_ms) noexcept
{
	_max_pages.store(std::max<std::uint32_t>(max_pages, 1), std::memory_order_relaxed);
	_max_age_ms.store(std::max<std::uint32_t>(max_age_ms, 1), std::memory_order_relaxed);
	// The due time of the oldest page moves with the age limit.
	mutex_lock lock(_mutex);
	update_deadline();
}

boundary_tracker::clock::duration boundary_tracker::max_age() const noexcept
{
	return std::chrono::milliseconds(_max_age_ms.load(std::memory_order_relaxed));
}

void boundary_tracker::update_deadline()
{
	const clock::rep due = _lru.empty() ? clock::duration::max().count()
					    : (_lru.front().since + max_age()).time_since_epoch().count();
	_next_due.store(due, std::memory_order_relaxed);
}

void boundary_tracker::take(boundary_file &f, entry_it it, reason why, release_list &out)
{
	// Reserve first: after this nothing below may fail, so a page is never
	// out of the table without being in out.
	out.reserve(out.size() + 1);
	const boundary_file::entry &e = it->second;
	_stats.sub(stat::boundary_pages_current);
	_stats.sub(stat::boundary_bytes_current, e.covered_bytes);
	switch (why) {
	case reason::completed: _stats.add(stat::boundary_completed); break;
	case reason::age: _stats.add(stat::boundary_released_by_age); break;
	case reason::ceiling: _stats.add(stat::boundary_released_by_ceiling); break;
	case reason::close: _stats.add(stat::boundary_released_at_close); break;
	case reason::truncate: _stats.add(stat::boundary_released_by_truncate); break;
	}
	out.push_back({&f, it->first, why});
	++f._releases_in_flight;
	_lru.erase(e.lru);
	f._pages.erase(it);
	--_count;
	update_deadline();
}

void boundary_tracker::reap_locked(clock::time_point now, release_list &out)
{
	const clock::duration age = max_age();
	for (auto l = _lru.begin(); l != _lru.end() && l->since + age <= now;) {
		boundary_file &f = *l->file;
		const auto it = f._pages.find(l->page);
		++l; // take() erases the item l pointed at
		// A page whose writer is between claim and complete stays: the
		// writer's data is not in it yet (releasing now would leave that
		// data cached and untracked).
		if (it != f._pages.end() && it->second.writers == 0)
			take(f, it, reason::age, out);
	}
}

void boundary_tracker::reap(clock::time_point now, release_list &out)
{
	if (now.time_since_epoch().count() < _next_due.load(std::memory_order_relaxed))
		return;
	mutex_lock lock(_mutex);
	reap_locked(now, out);
}

bool boundary_tracker::claim(boundary_file &f, std::uint64_t page, clock::time_point now, release_list &out)
{
	mutex_lock lock(_mutex);
	try {
		reap_locked(now, out);
		const auto found = f._pages.find(page);
		if (found != f._pages.end()) {
			// The second writer (or a later one): the page is cached
			// already; write into it cached as well.
			++found->second.writers;
			return true;
		}
		const std::size_t ceiling = _max_pages.load(std::memory_order_relaxed);
		while (_count >= ceiling) {
			auto victim = std::find_if(_lru.begin(), _lru.end(), [](const boundary_file::lru_item &i) {
				return i.file->_pages.at(i.page).writers == 0;
			});
			if (victim == _lru.end()) {
				// Every held page has a writer in flight: holding one
				// more would break the ceiling, so this edge goes out
				// untracked.
				_stats.add(stat::boundary_not_held);
				return false;
			}
			boundary_file &vf = *victim->file;
			take(vf, vf._pages.find(victim->page), reason::ceiling, out);
		}
		_lru.push_back({&f, page, now});
		try {
			boundary_file::entry &e = f._pages[page];
			e.writers = 1;
			e.lru = std::prev(_lru.end());
		} catch (...) {
			_lru.pop_back();
			throw;
		}
		++_count;
		_stats.add(stat::boundary_held);
		_stats.add(stat::boundary_pages_current);
		update_deadline();
		return true;
	} catch (const std::bad_alloc &) {
		_stats.add(stat::boundary_not_held);
		return false;
	}
}

void boundary_tracker::complete(boundary_file &f, std::uint64_t page, std::uint32_t lo, std::uint32_t written,
				release_list &out)
{
	mutex_lock lock(_mutex);
	const auto it = f._pages.find(page);
	if (it == f._pages.end())
		return; // cannot happen: pages with writers in flight are never taken
	boundary_file::entry &e = it->second;
	if (e.writers > 0)
		--e.writers;
	lo = std::min(lo, k_page_size);
	const std::uint32_t hi = std::min(k_page_size, lo + std::min(written, k_page_size));
	if (hi > lo) {
		// Merge [lo, hi) into the sorted, disjoint spans.
		std::vector<boundary_file::span> merged;
		merged.reserve(e.covered.size() + 1);
		boundary_file::span add{lo, hi};
		bool placed = false;
		for (const auto &s : e.covered) {
			if (s.hi < add.lo) {
				merged.push_back(s);
			} else if (add.hi < s.lo) {
				if (!placed)
					merged.push_back(add), placed = true;
				merged.push_back(s);
			} else {
				add = {std::min(add.lo, s.lo), std::max(add.hi, s.hi)};
			}
		}
		if (!placed)
			merged.push_back(add);
		std::uint32_t bytes = 0;
		for (const auto &s : merged)
			bytes += s.hi - s.lo;
		_stats.add(stat::boundary_bytes_current, bytes - e.covered_bytes);
		e.covered_bytes = bytes;
		e.covered = std::move(merged);
	}
	if (e.writers != 0)
		return; // the last writer in flight decides
	if (e.covered_bytes == k_page_size) {
		take(f, it, reason::completed, out);
	} else if (e.covered_bytes == 0) {
		// Every write into it failed: nothing of ours is cached there.
		_stats.sub(stat::boundary_pages_current);
		_lru.erase(e.lru);
		f._pages.erase(it);
		--_count;
		update_deadline();
	}
}

void boundary_tracker::take_file(boundary_file &f, std::uint64_t first, std::uint64_t last, reason why,
				 release_list &out, bool all_pages)
{
	mutex_lock lock(_mutex);
	for (auto it = f._pages.lower_bound(first); it != f._pages.end() && it->first <= last;) {
		const auto next = std::next(it);
		if (all_pages || it->second.writers == 0)
			take(f, it, why, out);
		it = next;
	}
}

void boundary_tracker::take_all(release_list &out)
{
	mutex_lock lock(_mutex);
	for (auto l = _lru.begin(); l != _lru.end();) {
		boundary_file &f = *l->file;
		const auto it = f._pages.find(l->page);
		++l;
		if (it->second.writers == 0)
			take(f, it, reason::close, out);
	}
}

void boundary_tracker::release_done(const release &r) noexcept
{
	bool idle = false;
	{
		mutex_lock lock(_mutex);
		idle = --r.file->_releases_in_flight == 0;
	}
	if (idle)
		_idle.notify_all();
}

void boundary_tracker::wait_idle(boundary_file &f)
{
	mutex_lock lock(_mutex);
	while (f._releases_in_flight != 0)
		_idle.wait(lock.held());
}

std::size_t boundary_tracker::pages() const
{
	mutex_lock lock(_mutex);
	return _count;
}

std::size_t boundary_tracker::pages(const boundary_file &f) const
{
	mutex_lock lock(_mutex);
	return f._pages.size();
}

std::size_t boundary_tracker::pages(const boundary_file &f, std::uint64_t first, std::uint64_t last) const
{
	mutex_lock lock(_mutex);
	std::size_t n = 0;
	for (auto it = f._pages.lower_bound(first); it != f._pages.end() && it->first <= last; ++it)
		++n;
	return n;
}

} // namespace dcache::core
