#include "auto_policy.h"

#include <algorithm>

namespace dcache::core {

const char *auto_reason_name(auto_reason r) noexcept
{
	switch (r) {
	case auto_reason::small: return "small";
	case auto_reason::no_stream: return "no_stream";
	case auto_reason::memory_free: return "memory_free";
	case auto_reason::reused: return "reused";
	case auto_reason::too_big: return "too_big";
	case auto_reason::stream: return "stream";
	case auto_reason::free_reported: return "free_reported";
	}
	return "?";
}

std::uint64_t auto_capacity(const io::memory_state &m) noexcept
{
	return m.known() ? m.capacity : k_auto_unknown_capacity;
}

std::uint64_t auto_reserve(const io::memory_state &m) noexcept
{
	return std::max<std::uint64_t>(auto_capacity(m) / 8, 64u << 20);
}

std::uint64_t auto_fit(const io::memory_state &m) noexcept
{
	return auto_capacity(m) / 2;
}

auto_choice auto_decide(const dcache_settings &s, bool write, std::uint64_t length, const auto_file_view &f,
			const io::memory_state &m, bool quiet) noexcept
{
	const auto cached = [](auto_reason r) noexcept { return auto_choice{DCACHE_MODE_BUFFERED, r}; };
	dcache_mode uncached = write ? s.auto_write_stream : s.auto_read_stream;
	if (uncached == DCACHE_MODE_DIRECT_WHEN_QUIET)
		uncached = quiet ? DCACHE_MODE_DIRECT : DCACHE_MODE_DONTCACHE;
	if (length < k_auto_small_io)
		return cached(auto_reason::small);
	if (f.run_bytes < (static_cast<std::uint64_t>(s.auto_stream_min_mib) << 20))
		return cached(auto_reason::no_stream);
	// A rewrite replaces what was cached whole: keeping it saves no
	// device read, only leaves pages to write back.  Only a READ coming
	// back is data used again.
	const bool rewrite = write && f.rereads;
	// Unknown memory has nothing free: streams go uncached.
	// Spare memory is no reason to cache a run larger than what fits:
	// its own pages would count as free again (used once).
	if (!rewrite && m.known() && m.free >= auto_reserve(m) && f.run_bytes + length <= auto_fit(m)) {
		if (!write)
			return f.past ? auto_choice{uncached, auto_reason::free_reported}
				      : cached(auto_reason::memory_free);
		if (s.auto_write_spare_memory == DCACHE_SPARE_CACHE)
			return cached(auto_reason::memory_free);
		if (s.auto_write_spare_memory == DCACHE_SPARE_UNLESS_REPORTED)
			return m.reported ? auto_choice{uncached, auto_reason::free_reported}
					  : cached(auto_reason::memory_free);
	}
	if (f.rereads && !write)
		return f.span <= auto_fit(m) ? cached(auto_reason::reused)
					     : auto_choice{uncached, auto_reason::too_big};
	return {uncached, auto_reason::stream};
}

} // namespace dcache::core
