#include "auto_state.h"

#include <algorithm>
#include <bit>

namespace dcache::core {

namespace {

constexpr std::int64_t k_idle_ns = k_auto_stream_idle_ms * 1000 * 1000;

std::uint64_t units_up_to(std::uint64_t bytes, unsigned shift) noexcept
{
	return (bytes >> shift) + ((bytes & ((std::uint64_t{1} << shift) - 1)) != 0 ? 1 : 0);
}

// Marks the units [off, end) touches, the bitmap's top being top.
void mark(stream_run &r, std::uint64_t top, std::uint64_t off, std::uint64_t end) noexcept
{
	const std::uint64_t first = off >> r.unit_shift, last = units_up_to(end, r.unit_shift);
	for (std::uint64_t u = std::max(first, top > k_auto_behind_units ? top - k_auto_behind_units : 0); u < last;
	     ++u)
		r.served |= std::uint64_t{1} << (top - 1 - u);
}

// The unit of a run whose requests are len bytes: half of len, a power
// of two (any request at least as large covers one whole), 32-512 KiB.
std::uint8_t unit_shift_for(std::uint64_t len) noexcept
{
	const unsigned log2 = static_cast<unsigned>(std::bit_width(std::max<std::uint64_t>(len, 2))) - 1;
	return static_cast<std::uint8_t>(std::clamp(log2 - 1, 15u, 19u));
}

// Whether [off, end) continues r (see auto_state.h).
bool continues(const stream_run &r, std::uint64_t off, std::uint64_t end) noexcept
{
	const std::uint64_t unit = std::uint64_t{1} << r.unit_shift;
	if (off >= r.next) // as far ahead as 16 requests of its own size
		return off - r.next <= std::max(k_auto_ahead_units * unit, k_auto_ahead_requests * (end - off));
	if (r.next - off > k_auto_behind_units * unit)
		return false;
	if (end > r.next)
		return true; // it brings bytes past the run's end
	// Behind: a re-read if every unit it covers whole was served.  Units
	// it only touches may have been touched by its neighbours.
	const std::uint64_t top = units_up_to(r.next, r.unit_shift);
	const std::uint64_t first = units_up_to(off, r.unit_shift), last = end >> r.unit_shift;
	bool any = false;
	for (std::uint64_t u = first; u < last; ++u) {
		any = true;
		if (top - 1 - u < k_auto_behind_units && ((r.served >> (top - 1 - u)) & 1) == 0)
			return true; // a hole: a late request of the run
	}
	return !any; // nothing whole: cannot tell, so the run's
}

void advance(stream_run &r, std::uint64_t off, std::uint64_t end, std::int64_t now_ns) noexcept
{
	// Requests larger than the run's first (a client's readahead growing
	// to rsize): larger units, the served units forgotten (a late request
	// is then always taken for one).
	if (const std::uint8_t shift = unit_shift_for(end - off); shift > r.unit_shift) {
		r.unit_shift = shift;
		r.served = 0;
	}
	const std::uint64_t top = units_up_to(r.next, r.unit_shift);
	const std::uint64_t new_next = std::max(r.next, end);
	const std::uint64_t new_top = units_up_to(new_next, r.unit_shift);
	if (new_top > top)
		r.served = new_top - top >= 64 ? 0 : r.served << (new_top - top);
	mark(r, new_top, off, end);
	r.next = new_next;
	r.bytes += end - off;
	r.last_ns = now_ns;
}

} // namespace

run_view stream_table::observe(std::uint64_t off, std::uint64_t len, std::int64_t now_ns,
			       std::uint64_t established) noexcept
{
	const std::uint64_t end = off + len;
	for (std::size_t i = 0; i < _runs.size(); ++i) {
		stream_run &r = _runs[i];
		if (r.used && continues(r, off, end)) {
			const std::uint64_t before = r.bytes;
			const bool resumed = now_ns - r.last_ns >= k_idle_ns;
			advance(r, off, end, now_ns);
			r.start = std::min(r.start, off); // a late request before the first
			return {r.start, before, static_cast<int>(i), false, r.rereads, resumed};
		}
	}
	// A new run: in a free slot, else in the one idle longest, else in
	// the least recently used that is not a stream yet.
	int slot = -1;
	for (std::size_t i = 0; i < _runs.size() && slot < 0; ++i)
		if (!_runs[i].used)
			slot = static_cast<int>(i);
	const auto older = [&](std::size_t i) { return slot < 0 || _runs[i].last_ns < _runs[slot].last_ns; };
	if (slot < 0)
		for (std::size_t i = 0; i < _runs.size(); ++i)
			if (now_ns - _runs[i].last_ns >= k_idle_ns && older(i))
				slot = static_cast<int>(i);
	if (slot < 0)
		for (std::size_t i = 0; i < _runs.size(); ++i)
			if (_runs[i].bytes < established && older(i))
				slot = static_cast<int>(i);
	if (slot < 0)
		return {off, 0, -1, true, false};
	stream_run &r = _runs[static_cast<std::size_t>(slot)];
	r = stream_run{};
	r.unit_shift = unit_shift_for(len);
	r.used = true;
	r.start = off;
	r.next = off;
	advance(r, off, end, now_ns);
	return {r.start, 0, slot, true, false};
}

void stream_table::set_rereads(int slot, bool rereads) noexcept
{
	if (slot >= 0 && static_cast<std::size_t>(slot) < _runs.size())
		_runs[static_cast<std::size_t>(slot)].rereads = rereads;
}

} // namespace dcache::core
