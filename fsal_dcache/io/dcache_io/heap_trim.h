// Gives malloc's free memory back to the system once a burst of
// asynchronous requests is over.
//
// A deferred request holds its payload (Ganesha's buffer, and a bounce
// buffer in direct mode) while its worker thread takes the next request,
// so a burst leaves more freed memory in glibc's per-thread arenas than
// plain VFS's blocked workers do, and glibc keeps it until malloc_trim.
// One thread per process watches a counter the requests bump; after a
// whole interval (1 s) without any, it unmaps the free bounce buffers
// (bounce_pool.h) and calls malloc_trim(0), which returns every arena's
// free pages (Ganesha's own included); it does so again 10 and 60
// intervals into the quiet, by when Ganesha's idle worker threads have
// exited and their caches gone back to the arenas.  Under steady load it
// does nothing, and nothing either once a quiet spell passed 60 intervals.
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace dcache::io {

// A request finished: its memory went back to malloc.  Starts
// the watching thread on first use (if it cannot start, nothing is
// trimmed and nothing else changes).
void note_heap_use() noexcept;

// Trims done so far (tests, the log).
[[nodiscard]] std::uint64_t heap_trims() noexcept;

// Test hook: the idle interval (default 1 s).
void set_heap_trim_interval_for_test(std::chrono::milliseconds interval) noexcept;

} // namespace dcache::io
