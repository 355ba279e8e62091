// The auto policy's per-export history: which files' data the export's
// streams served lately, and how much of each (one span per file), in
// the spirit of ARC's ghost lists.  A run that begins inside a span
// re-reads that data; whether it is worth caching again is the policy's
// (auto_policy.h: what fits).
//
// Bounded twice: at most max_entries files, and at most `capacity` bytes
// of spans that fit (what the page cache could hold: data further back
// than that would have been evicted before it came back, so it does not
// count as reused — the reuse distance).  A span larger than what fits
// counts for nothing against the byte bound (a multi-GiB stream does not
// push the working set out of the history).  Eviction takes the least
// recently recorded file of those seen once before any of those re-read
// (scan resistance: a stream cannot push out data that is being used
// again).
//
// Thread-safety: every member may be called concurrently (one mutex).
#pragma once

#include "stats.h"
#include "thread_annotations.h"

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace dcache::core {

// Files remembered per export: 48 bytes each plus about 50 for the index,
// so at most about 400 KiB per export (only files that were streamed get
// one; the history grows as they come).
inline constexpr std::size_t k_auto_history_entries = 4096;

class auto_history {
public:
	explicit auto_history(export_stats &stats, std::size_t max_entries = k_auto_history_entries);
	auto_history(const auto_history &) = delete;
	auto_history &operator=(const auto_history &) = delete;
	~auto_history();

	// Whether [off, end) of file overlaps its span.
	[[nodiscard]] bool holds(std::uint64_t file, std::uint64_t off, std::uint64_t end) DCACHE_EXCLUDES(_m);
	// file's data [lo, hi) served by a run (rereads: a run that began
	// inside the span): the span grows to cover it and the file becomes
	// the most recent of its kind; then the bounds are kept with this
	// capacity, and spans above fit count for nothing (every span is
	// counted again when fit moved by more than a quarter).  Returns the
	// file's span in bytes.
	std::uint64_t record(std::uint64_t file, std::uint64_t lo, std::uint64_t hi, bool rereads,
			     std::uint64_t capacity, std::uint64_t fit) DCACHE_EXCLUDES(_m);
	// The file was truncated to size: its data from there on is gone,
	// and so is the part of its span there (the whole entry, if the span
	// began there).  Returns whether the history still holds a span of it.
	bool truncate(std::uint64_t file, std::uint64_t size) DCACHE_EXCLUDES(_m);
	// The file's span in bytes, 0 if none (tests).
	[[nodiscard]] std::uint64_t span(std::uint64_t file) DCACHE_EXCLUDES(_m);
	[[nodiscard]] std::size_t entries() DCACHE_EXCLUDES(_m);
	// Bytes counted against the byte bound.
	[[nodiscard]] std::uint64_t bytes() DCACHE_EXCLUDES(_m);

private:
	static constexpr std::uint32_t k_none = UINT32_MAX;
	struct entry {
		std::uint64_t file = 0;
		std::uint64_t lo = 0, hi = 0;
		std::uint64_t counted = 0; // against the byte bound
		std::uint32_t newer = k_none, older = k_none;
		bool reused = false; // in _reused, not _once
	};
	struct lru {
		std::uint32_t newest = k_none, oldest = k_none;
	};

	[[nodiscard]] lru &list_of(const entry &e) DCACHE_REQUIRES(_m) { return e.reused ? _reused : _once; }
	void unlink(std::uint32_t i) DCACHE_REQUIRES(_m);
	void push_newest(std::uint32_t i) DCACHE_REQUIRES(_m);
	void evict(std::uint32_t i) DCACHE_REQUIRES(_m);
	// The oldest file of those seen once, else of those re-read, that is
	// not keep; k_none if there is none.
	[[nodiscard]] std::uint32_t victim(std::uint32_t keep) const DCACHE_REQUIRES(_m);
	void count(entry &e, std::uint64_t n) DCACHE_REQUIRES(_m);

	export_stats &_stats;
	const std::size_t _max;
	mutex _m;
	std::vector<entry> _slots DCACHE_GUARDED_BY(_m);
	std::vector<std::uint32_t> _free DCACHE_GUARDED_BY(_m);
	std::unordered_map<std::uint64_t, std::uint32_t> _index DCACHE_GUARDED_BY(_m);
	lru _once DCACHE_GUARDED_BY(_m);
	lru _reused DCACHE_GUARDED_BY(_m);
	std::uint64_t _bytes DCACHE_GUARDED_BY(_m) = 0;
	std::uint64_t _fit DCACHE_GUARDED_BY(_m) = 0; // what fit when every span was last counted
};

} // namespace dcache::core
