// What the auto policy knows of each file, and auto_resolve: the one
// place where a request of an auto export is turned into a mode, and the
// only code that updates the file's record and the export's history
// (auto_history.h).
//
// A file's record is its stream table (zfetch's model): up to
// k_auto_streams sequential runs at once (several clients, or a client
// reading two places), each with the lowest offset it served, where it
// goes on, how many bytes it has moved and which of the last
// k_auto_behind_units units before where it goes on it has served.  A
// request continues a run when it starts at most k_auto_ahead_units units
// (or k_auto_ahead_requests of its own size) past where the run goes on
// (requests in flight overtaking each other), or behind it within the
// window on units not served yet (the late ones); a request that only
// covers units the run already served re-reads them and starts a run of
// its own.  A unit is half the run's largest request (32 KiB to 512 KiB).
// A run idle for k_auto_stream_idle_ms may be replaced; while all are
// busy, a new run replaces the least recently used one that has not yet
// become a stream, and if there is none it is not kept.  Whether a run
// re-reads what the export served before is asked when it begins and
// again when it is taken up after a pause.
//
// Thread-safety: a record is used under its own mutex, the history under
// its own (taken inside the record's, never the other way round).
#pragma once

#include "auto_policy.h"
#include "thread_annotations.h"
#include "yield_gate.h"

#include <array>
#include <atomic>
#include <cstdint>

struct dcache_export;
struct dcache_file;

namespace dcache::core {

inline constexpr std::size_t k_auto_streams = 8;	    // runs per file (zfetch: 8)
inline constexpr std::int64_t k_auto_stream_idle_ms = 2000; // a run idle this long may go (zfetch: 1-2 s)
inline constexpr unsigned k_auto_behind_units = 64;	    // the served bitmap
inline constexpr unsigned k_auto_ahead_units = 32;	    // how far a request may overtake,
inline constexpr unsigned k_auto_ahead_requests = 16;	    // ... or this many of its size

// One sequential run of a file.
struct stream_run {
	std::uint64_t start = 0;     // the lowest offset it served
	std::uint64_t next = 0;	     // the end of its furthest request: where it goes on
	std::uint64_t bytes = 0;     // bytes of its requests
	std::int64_t last_ns = 0;    // its last request, on the export's clock
	std::uint64_t served = 0;    // bit i: unit (top - 1 - i) had a request, top = units up to next
	std::uint8_t unit_shift = 0; // log2 of its unit
	bool used = false;
	bool rereads = false;  // began inside data of the file the export's history holds
	bool readback = false; // a READ run, the first since the file was written past the cache
	bool past = false;     // ... begun while the export served a working set
};

// The run a request belongs to.
struct run_view {
	std::uint64_t start = 0;
	std::uint64_t bytes = 0; // what the run had moved before the request
	int slot = -1;		 // -1: a new run that could not be kept
	bool is_new = false;	 // the request began it
	bool rereads = false;	 // (stream_table::set_rereads)
	bool resumed = false;	 // it continues a run idle for k_auto_stream_idle_ms
	bool readback = false;	 // (stream_table::set_readback)
	bool past = false;
};

// A file's runs.  Not thread-safe: used under its auto_file's mutex.
class stream_table {
public:
	// The run [off, off+len) continues, or a new one, updated with the
	// request at now_ns; established: the bytes that make a run a stream
	// (such runs are not replaced while they are busy).
	run_view observe(std::uint64_t off, std::uint64_t len, std::int64_t now_ns, std::uint64_t established) noexcept;
	void set_rereads(int slot, bool rereads) noexcept;
	void set_readback(int slot, bool past) noexcept;
	[[nodiscard]] const std::array<stream_run, k_auto_streams> &runs() const noexcept { return _runs; }

private:
	std::array<stream_run, k_auto_streams> _runs{};
};

// One file's record, made on its first request through auto (a file never
// read or written through auto costs one pointer).
struct auto_file {
	explicit auto_file(std::uint64_t file_id) noexcept : id(file_id) {}
	const std::uint64_t id; // the file in the export's history (unique in the process)
	mutex m;
	stream_table streams DCACHE_GUARDED_BY(m);
	bool in_history DCACHE_GUARDED_BY(m) = false; // the history may hold a span of it
	// A WRITE went cached since the file's last write-back: its dirty pages
	// may hold delayed allocation a direct WRITE must not land on.
	std::atomic<bool> cached_writes{false};
	// A WRITE stream went past the page cache with memory to spare
	// (free_reported) since the last READ run began: read back, that data
	// was never cached, and the first READ run to come takes it over
	// (stream_run::past).
	std::atomic<bool> written_past{false};
	// Its requests in the export's yield gate: not ones its own stream
	// gives way to (yield_gate.h).
	yield_own yield;
};

// What auto_resolve gives a request.
struct auto_resolution {
	auto_choice choice;
	// A direct-mode WRITE of a file that auto wrote cached before: the
	// file's dirty pages are written back first (docs/architecture.md,
	// "Delayed allocation and O_DIRECT").
	bool write_back_first = false;
	// A WRITE stream cached for spare memory (memory_free): its pages go
	// to write-back as soon as they are written, as a direct-mode WRITE's
	// cached edges do, so that it leaves clean pages behind.
	bool write_behind = false;
};

// A working set is read "every few seconds": a read-back of data written
// past the cache that begins within this time of the export's last
// cached READ goes past the cache (auto_policy.h, free_reported).  The
// benchmark's is read every 8 s.
inline constexpr std::int64_t k_auto_working_set_ms = 10000;

// The mode of one READ or WRITE of an export whose IO_Cache_Read (write
// false) or IO_Cache_Write is auto, with s the request's settings: the
// file's record and the export's history updated, the decision counted
// and marked (USDT dcache:auto_decision).  Thread-safe; never throws (no
// memory for the record: the request is decided as if it began a run).
[[nodiscard]] auto_resolution auto_resolve(dcache_export &e, dcache_file &f, const dcache_settings &s, bool write,
					   std::uint64_t offset, std::uint64_t length) noexcept;

// After the file was truncated to size: the export's history forgets its
// data from there on, so that a file emptied and written again is a new
// stream, not a rewrite of what it held.  Thread-safe; never throws.
void auto_truncated(dcache_export &e, dcache_file &f, std::uint64_t size) noexcept;

// The file's record, if it has one (tests).
[[nodiscard]] auto_file *auto_record(dcache_file &f) noexcept;

} // namespace dcache::core
