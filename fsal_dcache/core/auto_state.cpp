#include "auto_state.h"

#include "export_state.h"
#include "file_state.h"
#include "log.h"
#include "settings.h"

#include <sys/sdt.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <new>

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
	if (any)
		return false;
	// Nothing whole (smaller than the run's unit, as a 64 KiB pass after
	// 1 MiB ones): the run's only if the unit it starts in is a hole.
	const std::uint64_t u = off >> r.unit_shift;
	return top - 1 - u >= k_auto_behind_units || ((r.served >> (top - 1 - u)) & 1) == 0;
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
			return {r.start, before, static_cast<int>(i), false, r.rereads, resumed, r.readback, r.past};
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

void stream_table::set_readback(int slot, bool past) noexcept
{
	if (slot >= 0 && static_cast<std::size_t>(slot) < _runs.size()) {
		_runs[static_cast<std::size_t>(slot)].readback = true;
		_runs[static_cast<std::size_t>(slot)].past = past;
	}
}

namespace {

std::atomic<std::uint64_t> g_next_file_id{1};

auto_file *record_of(dcache_file &f) noexcept
{
	auto_file *r = f.auto_record.load(std::memory_order_acquire);
	if (r != nullptr)
		return r;
	auto *made = new (std::nothrow) auto_file(g_next_file_id.fetch_add(1, std::memory_order_relaxed));
	if (made == nullptr)
		return nullptr;
	if (f.auto_record.compare_exchange_strong(r, made, std::memory_order_acq_rel))
		return made;
	delete made; // another request made it first
	return r;
}

// The counter of each decision, READ and WRITE, by reason.
constexpr stat k_read_stats[k_auto_reasons] = {stat::read_auto_small,	     stat::read_auto_no_stream,
					       stat::read_auto_memory_free,  stat::read_auto_reused,
					       stat::read_auto_too_big,	     stat::read_auto_stream,
					       stat::read_auto_free_reported};
constexpr stat k_write_stats[k_auto_reasons] = {stat::write_auto_small,	       stat::write_auto_no_stream,
						stat::write_auto_memory_free,  stat::write_auto_reused,
						stat::write_auto_too_big,      stat::write_auto_stream,
						stat::write_auto_free_reported};

// No time taken yet; no working-set READ yet (dcache_export).
constexpr std::int64_t k_never = std::numeric_limits<std::int64_t>::min();

std::int64_t now_ns(const dcache_export &e) noexcept
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(e.now().time_since_epoch()).count();
}

// What the record and the history say of the request at now (now_ns),
// both updated.
auto_file_view observe(dcache_export &e, auto_file &r, const dcache_settings &s, bool write, std::uint64_t offset,
		       std::uint64_t length, const io::memory_state &m, std::int64_t now) noexcept
{
	const std::uint64_t established = static_cast<std::uint64_t>(s.auto_stream_min_mib) << 20;
	mutex_lock lock(r.m);
	run_view run = r.streams.observe(offset, length, now, established);
	// The first READ run since the file was written past the cache reads
	// back what was never cached (auto_file::written_past): past, if the
	// export served a working set lately (read-backs' own cached READs
	// are not one: a client warming several such files at once).
	if (!write && (run.is_new || run.resumed) && r.written_past.load(std::memory_order_relaxed) &&
	    r.written_past.exchange(false, std::memory_order_relaxed)) {
		run.readback = true;
		const std::int64_t ws = e.working_set_read_ns.load(std::memory_order_relaxed);
		run.past = ws != k_never && now - ws < k_auto_working_set_ms * 1000000;
		r.streams.set_readback(run.slot, run.past);
	}
	try {
		// A new run of a file the history has, or one taken up again
		// after a pause (a pass that meets where an earlier one stopped):
		// does it read what the export served of the file before?
		if ((run.is_new || run.resumed) && r.in_history) {
			run.rereads = e.auto_history.holds(r.id, offset, offset + length);
			r.streams.set_rereads(run.slot, run.rereads);
		}
		auto_file_view view{run.bytes, run.rereads, 0, run.past, run.readback};
		if (run.bytes < established)
			return view; // no stream (yet): nothing to record
		view.span = e.auto_history.record(r.id, run.start, offset + length, run.rereads, auto_capacity(m),
						  auto_fit(m));
		r.in_history = true;
		return view;
	} catch (...) {
		// No memory for the history: decided on the run alone.
		return {run.bytes, false, 0, run.past, run.readback};
	}
}

} // namespace

void auto_truncated(dcache_export &e, dcache_file &f, std::uint64_t size) noexcept
{
	auto_file *r = auto_record(f);
	if (r == nullptr)
		return;
	mutex_lock lock(r->m);
	if (!r->in_history)
		return;
	try {
		r->in_history = e.auto_history.truncate(r->id, size);
	} catch (...) {
		return; // no memory to forget it: the span ages out
	}
	if (!r->in_history)
		for (int slot = 0; slot < static_cast<int>(k_auto_streams); ++slot)
			r->streams.set_rereads(slot, false);
}

auto_file *auto_record(dcache_file &f) noexcept
{
	return f.auto_record.load(std::memory_order_acquire);
}

auto_resolution auto_resolve(dcache_export &e, dcache_file &f, const dcache_settings &s, bool write,
			     std::uint64_t offset, std::uint64_t length) noexcept
{
	auto_resolution out;
	bool readback = false;
	std::int64_t now = k_never; // the export's clock, read once, if at all
	// Small I/O never takes the record's lock nor reads the memory
	// signal, and a small READ needs no record at all: a random 4 KiB
	// workload pays a branch (and a WRITE one flag).
	const bool small = length < k_auto_small_io;
	auto_file *r = small && !write ? nullptr : record_of(f);
	if (small || r == nullptr) {
		out.choice = auto_decide(s, write, length, {}, {}, true);
	} else {
		const io::memory_state m = e.memory();
		if (m.reported && !e.memory_reported.load(std::memory_order_relaxed))
			e.memory_reported.store(true, std::memory_order_relaxed);
		const bool quiet = !write || s.auto_write_stream != DCACHE_MODE_DIRECT_WHEN_QUIET ||
				   !e.yield.busy(yield_gate::clock::now(), k_yield_quiet, &r->yield);
		now = now_ns(e);
		const auto_file_view view = observe(e, *r, s, write, offset, length, m, now);
		out.choice = auto_decide(s, write, length, view, m, quiet);
		readback = view.readback;
		if (write && out.choice.reason == auto_reason::free_reported &&
		    !r->written_past.load(std::memory_order_relaxed))
			r->written_past.store(true, std::memory_order_relaxed);
	}
	out.write_behind = write && out.choice.reason == auto_reason::memory_free;
	if (write && r != nullptr) {
		if (!is_direct_mode(out.choice.mode)) {
			// cached, or dontcache (Auto_Write_Stream = direct_when_quiet
			// between direct ones): pages a direct WRITE must not meet
			if (!r->cached_writes.load(std::memory_order_relaxed))
				r->cached_writes.store(true, std::memory_order_relaxed);
		} else {
			out.write_back_first = r->cached_writes.exchange(false, std::memory_order_acq_rel);
		}
	}
	if (out.choice.reason == auto_reason::free_reported)
		DCACHE_LOG_ONCE(e, free_reported, DCACHE_LOG_INFO,
				"dcache %s: this machine reports its free memory to a host (free page reporting): auto "
				"writes streams the stream's way even with memory to spare (Auto_Write_Spare_Memory = "
				"unless_reported; cache caches them), counted as write_auto_free_reported",
				e.name);
	// A working set's READ, where a read-back asks for it (stored at most
	// once a millisecond: many cores reading a working set share it).
	if (!write && !readback && !auto_is_stream(out.choice.reason) &&
	    e.memory_reported.load(std::memory_order_relaxed)) {
		if (now == k_never)
			now = now_ns(e); // a small READ: observed nothing
		const std::int64_t last = e.working_set_read_ns.load(std::memory_order_relaxed);
		if (last == k_never || now - last > 1000000)
			e.working_set_read_ns.store(now, std::memory_order_relaxed);
	}
	const auto reason = static_cast<std::size_t>(out.choice.reason);
	e.stats.add(write ? k_write_stats[reason] : k_read_stats[reason]);
	DTRACE_PROBE5(dcache, auto_decision, static_cast<int>(write), offset, length, static_cast<int>(out.choice.mode),
		      static_cast<int>(out.choice.reason));
	return out;
}

} // namespace dcache::core
