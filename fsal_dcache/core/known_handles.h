// The file handles known to lie inside one export: those the export itself
// handed out (lookup, readdir, create) and those checked on their first
// use.  The adapter consults it for every handle a client presents, so a
// handle of a directory outside the export -- forged, or relabelled from a
// sibling export whose cache entry Ganesha would otherwise share -- is
// checked once and refused, while handles the export issued cost one hash
// lookup.
//
// Bounded: at most `capacity` keys; past it the oldest is forgotten, which
// only costs that handle one more check.  Thread-safe (one mutex; no I/O
// under it).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

#include "thread_annotations.h"

namespace dcache::core {

class known_handles {
public:
	explicit known_handles(std::size_t capacity) : _capacity(capacity) {}

	[[nodiscard]] bool contains(std::string_view key) const
	{
		mutex_lock lock(_mutex);
		return _keys.find(std::string(key)) != _keys.end();
	}

	void add(std::string_view key)
	{
		mutex_lock lock(_mutex);
		auto [it, inserted] = _keys.emplace(key);
		if (!inserted)
			return;
		_order.push_back(&*it);
		while (_keys.size() > _capacity) {
			_keys.erase(*_order.front());
			_order.pop_front();
		}
	}

	[[nodiscard]] std::size_t size() const
	{
		mutex_lock lock(_mutex);
		return _keys.size();
	}

private:
	const std::size_t _capacity;
	mutable mutex _mutex;
	std::unordered_set<std::string> _keys DCACHE_GUARDED_BY(_mutex);
	std::deque<const std::string *> _order DCACHE_GUARDED_BY(_mutex); // oldest first
};

} // namespace dcache::core
