// The boundary-page tracker: the page that two misaligned direct-mode
// WRITEs share (the unaligned edge of one, completed by its neighbour, in
// either order, maybe from another client) stays in the page cache until
// both have written it, then is dropped.
//
// Why: an edge written RWF_DONTCACHE is dropped as soon as writeback
// cleans it, so the neighbour that completes the page must read it back
// from the device first (read-modify-write).  In the kernel nfsd can insert
// an unmarked folio that DONTCACHE then leaves alone; user space cannot,
// so here the edge of a held page is written plain cached and this table
// remembers which bytes of the page have been written.
//
// Each writer writes its piece of a held page back at once (the core's
// write-back step: no delayed allocation may linger next to O_DIRECT I/O),
// so a held page is clean between writers and a COMMIT has nothing to do
// for it: it stays held across COMMITs, durable, until its neighbour
// completes it.
//
// What "complete" means: the union of the byte ranges written into the
// page by the WRITEs holding it covers the whole page.  The file's last
// page is NOT complete when the bytes up to EOF are covered: the core does
// not know EOF, and a sequential appender extends the file exactly into
// that page with its next WRITE - releasing it at EOF would make every
// append read its first page back.  An EOF page is released by close,
// truncate, unexport, the age limit or the ceiling instead.
//
// Memory and staleness: at most max_pages pages are held per export (a
// new page past the ceiling first evicts the oldest idle one); a page held
// longer than max_age is released by the next call into the tracker on the
// same export (claim or reap: every WRITE and COMMIT), so a page is held at
// most max_age plus the gap until the export's next WRITE or COMMIT, and
// never past its file's close, free or truncate, or the export's unexport.
//
// Ownership and protocol: the tracker only decides.  Pages it takes out of
// the table (completed, aged, evicted, closed, truncated) are handed to the caller
// in a release_list; the caller writes them back and drops them
// (sync_file_range + POSIX_FADV_DONTNEED through the backend) outside any
// lock, then calls release_done() for each.  A boundary_file (one per
// dcache_file) must not be destroyed while a release of one of its pages is
// in flight: wait_idle() waits for that.
//
// Thread-safety: every member function may be called concurrently; one
// mutex per export guards the table of every file of the export (the
// ceiling is per export, and the critical sections are a map lookup - no
// I/O is ever done under it).  Data integrity never depends on this table:
// a writer that is refused, or arrives after the page was released, writes
// through the page cache like any other write; only what stays cached
// depends on it.
#pragma once

#include "page.h"
#include "stats.h"
#include "sync_point.h"
#include "thread_annotations.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <vector>

struct dcache_file;

namespace dcache::core {

class boundary_tracker;

// The part of one file's state the tracker keeps: its held pages.  Lives in
// dcache_file; every field is guarded by the owning export's tracker mutex.
class boundary_file {
public:
	explicit boundary_file(dcache_file *owner) noexcept : _owner(owner) {}
	boundary_file(const boundary_file &) = delete;
	boundary_file &operator=(const boundary_file &) = delete;

	[[nodiscard]] dcache_file *owner() const noexcept { return _owner; }

private:
	friend class boundary_tracker;
	using clock = std::chrono::steady_clock;

	struct lru_item {
		boundary_file *file;
		std::uint64_t page;
		clock::time_point since;
	};
	struct span {
		std::uint32_t lo, hi; // [lo, hi) within the page
	};
	struct entry {
		std::vector<span> covered; // sorted, disjoint, not adjacent
		std::uint32_t covered_bytes = 0;
		std::uint32_t writers = 0; // claimed, not yet completed
		std::list<lru_item>::iterator lru;
	};

	dcache_file *const _owner;
	std::map<std::uint64_t, entry> _pages; // guarded by the tracker's _mutex
	int _releases_in_flight = 0;	       // guarded by the tracker's _mutex
};

class boundary_tracker {
public:
	using clock = std::chrono::steady_clock;

	enum class reason : std::uint8_t {
		completed, // both writers have written it
		age,	   // older than max_age
		ceiling,   // evicted to hold a newer page under max_pages
		close,	   // close, free or unexport
		truncate,  // the file was truncated at or below the page
	};
	struct release {
		boundary_file *file;
		std::uint64_t page; // page index: bytes [page*4096, +4096)
		reason why;
	};
	using release_list = std::vector<release>;

	explicit boundary_tracker(export_stats &stats) noexcept : _stats(stats) {}
	boundary_tracker(const boundary_tracker &) = delete;
	boundary_tracker &operator=(const boundary_tracker &) = delete;

	// Live: a lower ceiling takes effect at the next claim.
	void set_limits(std::uint32_t max_pages, std::uint32_t max_age_ms) noexcept;
	[[nodiscard]] std::uint32_t max_pages() const noexcept { return _max_pages.load(std::memory_order_relaxed); }
	[[nodiscard]] std::uint32_t max_age_ms() const noexcept { return _max_age_ms.load(std::memory_order_relaxed); }

	// Immediately before a WRITE issues its bytes of page `page` of f.
	// true: the page is held - write those bytes cached (no RWF_DONTCACHE),
	// then call complete() exactly once.  false: not held (ceiling full of
	// pages whose writers are in flight, or no memory) - write them the
	// untracked way and do not call complete().  Aged pages, and the page
	// evicted for the ceiling, are appended to out.
	[[nodiscard]] bool claim(boundary_file &f, std::uint64_t page, clock::time_point now, release_list &out)
		DCACHE_EXCLUDES(_mutex);

	// After the cached write of a claimed page: `written` bytes landed at
	// in-page offset lo (0 when the write failed).  Appends the page to
	// out if it is now complete and this was its last writer in flight.
	void complete(boundary_file &f, std::uint64_t page, std::uint32_t lo, std::uint32_t written, release_list &out)
		DCACHE_EXCLUDES(_mutex);

	// Appends the pages held longer than max_age whose writers are done.
	// Cheap (no lock) while none can be due.
	void reap(clock::time_point now, release_list &out) DCACHE_EXCLUDES(_mutex);

	// Close / truncate: f's pages in [first, last] with no writer in
	// flight.  all_pages also takes pages with writers in flight (free:
	// none can be).
	void take_file(boundary_file &f, std::uint64_t first, std::uint64_t last, reason why, release_list &out,
		       bool all_pages = false) DCACHE_EXCLUDES(_mutex);
	// Unexport: every idle page of the export.
	void take_all(release_list &out) DCACHE_EXCLUDES(_mutex);

	// The caller has written back and dropped r's page (or given up).
	void release_done(const release &r) noexcept DCACHE_EXCLUDES(_mutex);
	// Blocks until no release of f's pages is in flight.
	void wait_idle(boundary_file &f) DCACHE_EXCLUDES(_mutex);

	[[nodiscard]] std::size_t pages() const DCACHE_EXCLUDES(_mutex);
	[[nodiscard]] std::size_t pages(const boundary_file &f) const DCACHE_EXCLUDES(_mutex);
	// f's held pages in [first, last].
	[[nodiscard]] std::size_t pages(const boundary_file &f, std::uint64_t first, std::uint64_t last) const
		DCACHE_EXCLUDES(_mutex);

private:
	using entry_it = std::map<std::uint64_t, boundary_file::entry>::iterator;

	void take(boundary_file &f, entry_it it, reason why, release_list &out) DCACHE_REQUIRES(_mutex);
	void reap_locked(clock::time_point now, release_list &out) DCACHE_REQUIRES(_mutex);
	void update_deadline() DCACHE_REQUIRES(_mutex);
	[[nodiscard]] clock::duration max_age() const noexcept;

	export_stats &_stats;
	std::atomic<std::uint32_t> _max_pages{4096};
	std::atomic<std::uint32_t> _max_age_ms{5000};

	mutable mutex _mutex;
	std::condition_variable_any _idle;				   // a file's releases reached 0
	std::list<boundary_file::lru_item> _lru DCACHE_GUARDED_BY(_mutex); // oldest first
	std::size_t _count DCACHE_GUARDED_BY(_mutex) = 0;
	// When the oldest page falls due (steady_clock ticks), max when none is
	// held: lets reap() skip the lock on the common path.
	std::atomic<clock::rep> _next_due{clock::duration::max().count()};
};

} // namespace dcache::core
