#include "auto_history.h"

#include <algorithm>

namespace dcache::core {

auto_history::auto_history(export_stats &stats, std::size_t max_entries)
	: _stats(stats), _max(std::max<std::size_t>(max_entries, 1))
{
}

auto_history::~auto_history()
{
	mutex_lock lock(_m);
	_stats.sub(stat::auto_history_entries, _index.size());
	_stats.sub(stat::auto_history_bytes, _bytes);
}

void auto_history::unlink(std::uint32_t i)
{
	entry &e = _slots[i];
	lru &l = list_of(e);
	if (e.newer != k_none)
		_slots[e.newer].older = e.older;
	else
		l.newest = e.older;
	if (e.older != k_none)
		_slots[e.older].newer = e.newer;
	else
		l.oldest = e.newer;
	e.newer = e.older = k_none;
}

void auto_history::push_newest(std::uint32_t i)
{
	entry &e = _slots[i];
	lru &l = list_of(e);
	e.newer = k_none;
	e.older = l.newest;
	if (l.newest != k_none)
		_slots[l.newest].newer = i;
	l.newest = i;
	if (l.oldest == k_none)
		l.oldest = i;
}

void auto_history::count(entry &e, std::uint64_t n)
{
	if (n > e.counted)
		_stats.add(stat::auto_history_bytes, n - e.counted);
	else
		_stats.sub(stat::auto_history_bytes, e.counted - n);
	_bytes = _bytes - e.counted + n;
	e.counted = n;
}

void auto_history::evict(std::uint32_t i)
{
	entry &e = _slots[i];
	unlink(i);
	count(e, 0);
	_index.erase(e.file);
	_free.push_back(i);
	_stats.sub(stat::auto_history_entries);
}

std::uint32_t auto_history::victim(std::uint32_t keep) const
{
	for (const lru *l : {&_once, &_reused}) {
		std::uint32_t i = l->oldest;
		if (i == keep)
			i = _slots[i].newer;
		if (i != k_none)
			return i;
	}
	return k_none;
}

bool auto_history::holds(std::uint64_t file, std::uint64_t off, std::uint64_t end)
{
	mutex_lock lock(_m);
	const auto it = _index.find(file);
	if (it == _index.end())
		return false;
	const entry &e = _slots[it->second];
	return off < e.hi && end > e.lo;
}

std::uint64_t auto_history::record(std::uint64_t file, std::uint64_t lo, std::uint64_t hi, bool rereads,
				   std::uint64_t capacity, std::uint64_t fit)
{
	mutex_lock lock(_m);
	std::uint32_t i = k_none;
	if (const auto it = _index.find(file); it != _index.end()) {
		i = it->second;
		entry &e = _slots[i];
		unlink(i);
		e.lo = std::min(e.lo, lo);
		e.hi = std::max(e.hi, hi);
		e.reused = e.reused || rereads;
	} else {
		if (_index.size() >= _max)
			evict(victim(k_none));
		if (_free.empty()) {
			_slots.emplace_back();
			_free.push_back(static_cast<std::uint32_t>(_slots.size() - 1));
		}
		i = _free.back();
		// The index first: if it throws, nothing else has changed.
		_index.emplace(file, i);
		_free.pop_back();
		_slots[i] = entry{file, lo, hi, 0, k_none, k_none, rereads};
		_stats.add(stat::auto_history_entries);
	}
	push_newest(i);
	// What fits moved (the page cache grew or shrank, a memory group came
	// or went): what every span counts is counted again, or spans counted
	// under a larger page cache would push out what fits now.
	if (fit < _fit - _fit / 4 || fit > _fit + _fit / 4) {
		_fit = fit;
		for (const auto &[file_id, at] : _index) {
			entry &other = _slots[at];
			count(other, other.hi - other.lo <= fit ? other.hi - other.lo : 0);
		}
	}
	entry &e = _slots[i];
	const std::uint64_t span = e.hi - e.lo;
	count(e, span <= fit ? span : 0);
	while (_bytes > capacity) {
		const std::uint32_t v = victim(i);
		if (v == k_none)
			break;
		evict(v);
	}
	return span;
}

bool auto_history::truncate(std::uint64_t file, std::uint64_t size)
{
	mutex_lock lock(_m);
	const auto it = _index.find(file);
	if (it == _index.end())
		return false;
	entry &e = _slots[it->second];
	if (size <= e.lo) {
		_free.reserve(_slots.size()); // evict() then cannot throw halfway
		evict(it->second);
		return false;
	}
	if (size < e.hi) {
		e.hi = size;
		count(e, e.hi - e.lo <= _fit ? e.hi - e.lo : 0);
	}
	return true;
}

std::uint64_t auto_history::span(std::uint64_t file)
{
	mutex_lock lock(_m);
	const auto it = _index.find(file);
	return it == _index.end() ? 0 : _slots[it->second].hi - _slots[it->second].lo;
}

std::size_t auto_history::entries()
{
	mutex_lock lock(_m);
	return _index.size();
}

std::uint64_t auto_history::bytes()
{
	mutex_lock lock(_m);
	return _bytes;
}

} // namespace dcache::core
