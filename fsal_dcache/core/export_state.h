// One DCACHE export (the C API's opaque dcache_export): its settings, its
// backend, its counters, its boundary tracker and the requests in flight.
//
// Ownership: created by dcache_export_new (owning the backend the factory
// chose) or export_new_with_backend (borrowing one, for tests).  One
// reference is the adapter's, one each dcache_file's: Ganesha shares file
// objects among the exports of a filesystem, so a file can outlive the
// export that made it.  The export goes with its last reference, once no
// request is in flight (a completion touches the export and its backend
// until just before it calls done).
//
// Thread-safety: everything may be used concurrently.  The settings are
// immutable snapshots: a request takes the current one at its start and
// keeps it, so it sees the old settings or the new ones, never a mix.
#pragma once

#include "admission.h"
#include "auto_history.h"
#include "boundary_tracker.h"
#include "dcache/core.h"
#include "dcache_io/backend.h"
#include "dcache_io/memory_signal.h"
#include "known_handles.h"
#include "stats.h"
#include "thread_annotations.h"
#include "yield_gate.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace dcache::core {

// Keys remembered per export (a VFS key is ~30 bytes: ~4 MiB at most).
inline constexpr std::size_t k_known_handles = 65536;

// The settings snapshots of one export.  A snapshot is never changed and
// never freed before the export: a request reads it through a plain
// pointer, with no reference count to touch on the data path.  Publishing
// settings equal to a snapshot already made reuses it, so reloads that
// change nothing (or toggle between a few configurations) add nothing.
class settings_history {
public:
	explicit settings_history(const dcache_settings &first);
	[[nodiscard]] const dcache_settings &current() const noexcept
	{
		return *_current.load(std::memory_order_acquire);
	}
	void publish(const dcache_settings &s);

private:
	mutex _m;
	std::vector<std::unique_ptr<const dcache_settings>> _all DCACHE_GUARDED_BY(_m);
	std::atomic<const dcache_settings *> _current;
};

} // namespace dcache::core

struct dcache_export {
	dcache_export(const dcache_settings &s, const char *name, dcache::io::backend *b);

	std::atomic<int> refs{1};
	char name[128] = {};
	dcache::io::backend *backend = nullptr;
	std::shared_ptr<dcache::io::backend> owned_backend; // a ring of the engine is shared
	dcache::core::export_stats stats;
	// Half-written boundary pages of every file of the export (the ceiling
	// is per export); Boundary_Max_Pages / _Max_Age_Ms live in it.
	dcache::core::boundary_tracker boundary{stats};
	// The export's time, wherever the core reads it (the boundary pages'
	// age): steady_clock's, or a test's own, set before any request.
	using time_point = dcache::core::boundary_tracker::clock::time_point;
	time_point (*clock)() noexcept = &dcache::core::boundary_tracker::clock::now;
	[[nodiscard]] time_point now() const noexcept { return clock(); }
	// The memory the page cache has to give, as the auto policy reads it:
	// the I/O layer's sample, or a test's own.
	dcache::io::memory_state (*memory)() noexcept = &dcache::io::memory_now;
	// Data the export's streams served lately (IO_Cache_* = auto).
	dcache::core::auto_history auto_history{stats};
	// Where auto's streams give way to the requests it keeps cached
	// (Auto_Stream_Yield_Ms).
	dcache::core::yield_gate yield;
	// A memory sample auto read said the machine reports its free memory
	// to a host; from then on, the last READ auto kept cached as small,
	// no_stream or reused, other than a read-back's (the export's clock,
	// ns): whether the export serves a working set as a read-back of data
	// written past the cache begins (auto_policy.h, free_reported).
	std::atomic<bool> memory_reported{false};
	std::atomic<std::int64_t> working_set_read_ns{std::numeric_limits<std::int64_t>::min()};
	std::atomic<std::uint32_t> logged{0}; // log-once bits (log.h)
	// Requests not yet finished.  Counted without a lock; the last one
	// out takes inflight_mutex, so the export is never deleted between
	// that decrement and its notify (inflight_done).
	dcache::core::mutex inflight_mutex;
	std::condition_variable_any inflight_cv;
	std::atomic<std::size_t> inflight{0};
	// The places of requests of an asynchronous backend: IO_Queue_Depth
	// (the one the backend started with) may hold a bounce buffer or be
	// in the ring at once; the rest wait in line, parked, before they
	// allocate anything (admission.h, request_op::admit).
	dcache::core::admission places;
	// Steps running as blocking syscalls in callers' threads now, within
	// IO_Blocking_Max (request_op::take_blocking_slot).
	std::atomic<std::uint32_t> blocking{0};
	// The direct-I/O alignment of each filesystem whose files report none
	// themselves, learned once (file_state.cpp, probe_caps).
	dcache::core::mutex fs_dio_mutex;
	std::vector<dcache::io::dio_caps> fs_dio DCACHE_GUARDED_BY(fs_dio_mutex);
	// File handles known to lie inside the export (see known_handles.h).
	dcache::core::known_handles known{dcache::core::k_known_handles};
	// The settings in force: every field as last given (IO_Backend and
	// IO_Queue_Depth as asked; the backend running is `backend`).
	dcache::core::settings_history settings;
};

namespace dcache::core {

// Like dcache_export_new, over a borrowed backend (tests: the fake).
[[nodiscard]] dcache_export *export_new_with_backend(const dcache_settings *settings, const char *name,
						     io::backend *backend) noexcept;

// Drops one reference (a file's, or the adapter's after its unexport work).
void export_unref(dcache_export *exp) noexcept;

// Live reconfiguration (dcache_export_update).
void export_update(dcache_export &e, const dcache_settings &s);

// Requests in flight (see the header comment): counted around each.
void inflight_add(dcache_export &e) noexcept;
// The request's very last touch of the export: after it the export may go.
void inflight_done(dcache_export &e) noexcept;

} // namespace dcache::core
