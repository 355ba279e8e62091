// Auto_Stream_Yield_Ms: an auto export's streams give way to the requests
// it keeps cached.
//
// A READ or WRITE that auto sends past the cache, or caches only for spare
// memory (a stream: reasons stream, too_big, memory_free), waits before it
// runs while the export serves requests auto keeps cached because they are
// used again or small (small, no_stream, reused: a working set, random
// I/O), and for k_yield_quiet after the last of them, at most the setting's
// time.  A stream's client with every request of its window waiting sends
// no more, so during a burst of the working set's requests the stream and
// its client take no CPU; between bursts it runs as before.  Waiting holds
// the calling worker thread (asleep): at most k_yield_max_waiting of the
// export's requests wait at once, the others go on as if it were off, so
// Ganesha keeps workers for the requests the streams wait for.
//
// Giving way helps a burst: work that ends sooner for it.  Requests that
// keep coming (random readers that never stop) would only hold the stream
// back for as long as they go on, so a wait that reaches its deadline
// opens the gate: no stream waits from then on until the export has gone
// the setting's time without such a request (at least k_yield_quiet).
// Readers that never stop still pause now and then on a busy machine, for
// longer than k_yield_quiet: closing the gate at such a pause had the
// pair's writers wait again and again, 35 % slower
// (docs/results/2026-12-07-auto-yield.md); the pause between two bursts
// of a working set is seconds.
//
// A stream does not give way to the start of its own file's runs: the
// start of every run is cached (no_stream) and enters the gate, and the
// run's next requests, sent with it, would otherwise wait a quiet time
// for it, once per file a stream begins (20 ms per file of a tree of
// 5-50 MiB files copied one after the other).  Those requests are counted
// in their file's yield_own as well, and a stream's request of that file
// leaves them out.
//
// Thread-safety: everything may be called concurrently, without a lock;
// a waiting stream sleeps and looks again every quiet time at most.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dcache::core {

// How long the export must have had no cached request in flight before a
// waiting stream goes on.  A cached READ spends tens of microseconds in the
// server, so even in a burst none is in flight most of the time, and on a
// busy machine the gaps between two of a client's requests reach a few
// milliseconds: with 2 ms, streams went on in the middle of the working
// set's bursts (docs/results/2026-12-07-auto-yield.md).
inline constexpr std::chrono::milliseconds k_yield_quiet{20};

// Worker threads an export's streams may hold waiting at once: a client's
// window of 1 MiB requests (Linux: up to 16 with its default slot table;
// IO_Blocking_Max's default, the workers an export may keep on the device).
inline constexpr std::uint32_t k_yield_max_waiting = 32;

// One file's requests in its export's gate (auto_file::yield).
struct yield_own {
	std::atomic<std::int32_t> in{0};
};

class yield_gate {
public:
	using clock = std::chrono::steady_clock;

	// A request the streams give way to begins, and ends; own: its file's
	// count, the same in both (nullptr: none).
	void enter(yield_own *own = nullptr) noexcept;
	void leave(yield_own *own = nullptr) noexcept;
	// A stream's request: waits while enter()ed requests are in flight or
	// the last of them left less than quiet ago, until deadline at most,
	// unless the gate is open (above): an open gate closes when the export
	// has had none for reopen (at least quiet).  Those of own, the stream's
	// file, do not count.  Returns how long it waited (zero: it did not).
	[[nodiscard]] clock::duration wait(clock::duration quiet, clock::time_point deadline, clock::duration reopen,
					   const yield_own *own = nullptr) noexcept;

	// Whether enter()ed requests other than own's are in flight or the
	// last of them left less than quiet before now.
	[[nodiscard]] bool busy(clock::time_point now, clock::duration quiet,
				const yield_own *own = nullptr) const noexcept;

	[[nodiscard]] std::uint32_t in_flight() const noexcept { return _in.load(std::memory_order_relaxed); }
	[[nodiscard]] bool open() const noexcept { return _open.load(std::memory_order_relaxed); }
	[[nodiscard]] std::uint32_t waiting() const noexcept { return _waiting.load(std::memory_order_relaxed); }

private:
	std::atomic<std::uint32_t> _in{0};
	// When the last request left (the clock's ticks), apart for the run
	// starts (enter()ed with their file's yield_own), with the file of the
	// last of those and the leave of the last run start of another file:
	// a stream's own run start leaving last hides no other's leave.
	std::atomic<std::int64_t> _last_leave{0};
	std::atomic<std::int64_t> _last_start_leave{0};
	std::atomic<const yield_own *> _last_start_own{nullptr}; // compared, never followed
	std::atomic<std::int64_t> _other_start_leave{0};	 // the last run start of another file than it
	// Requests other than own's run starts: in flight, and when the last
	// of them left.
	struct others {
		std::int64_t in;
		std::int64_t last_leave;
	};
	[[nodiscard]] others others_of(const yield_own *own) const noexcept;
	std::atomic<std::uint32_t> _waiting{0};
	std::atomic<bool> _open{false}; // a wait met its deadline: none until a long pause
};

} // namespace dcache::core
