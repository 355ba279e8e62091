// Work on the page cache beside a request's own I/O: writing a range back,
// dropping it (POSIX_FADV_DONTNEED), and releasing held boundary pages.
// Each failure is counted and logged once per export, never fatal: the
// data is already where it belongs, only its caching is at stake.
//
// Thread-safety: a side_work belongs to one request (or call) at a time;
// different ones run concurrently.
#pragma once

#include "boundary_tracker.h"
#include "fd_ref.h"

#include <cstdint>
#include <utility>

struct dcache_export;
struct dcache_file;

namespace dcache::core {

// Side work: a write-back and a drop (POSIX_FADV_DONTNEED) beside a
// request's own I/O, and the release of the tracker's held pages.  Where
// each piece runs is decided here, once (queue):
// - after_reply: a request's (READ, WRITE, COMMIT).  A piece is queued, and
//   issued by issue() after the reply (knfsd's fadvise RFC delays its
//   DONTNEED until the reply is sent for the same reason), on an
//   asynchronous backend with a descriptor the piece may hold: the
//   request's own (hold()) for its file, a referenced one for another
//   file's held page.  Otherwise (a synchronous backend, no descriptor to
//   hold, no memory) it runs when it is added.
// - now: close, truncate, unexport.  Every piece runs when it is added:
//   what follows relies on it.
// A queued piece owns its descriptor and holds the export until its
// completion, so nothing waits for it: not the request, not a close (a
// boundary page's release is done when its piece is built), only the
// export's deletion.  Dropping late is harmless: DONTNEED leaves dirty
// pages alone, and a page read again in between is only dropped once more.
// A piece the ring has no room for waits in the backend's backlog.
class later_work;
class side_work {
public:
	enum class when { now, after_reply };
	side_work(dcache_export &e, when w) noexcept : _e(&e), _when(w) {}
	side_work(side_work &&o) noexcept;
	side_work(const side_work &) = delete;
	side_work &operator=(const side_work &) = delete;
	side_work &operator=(side_work &&) = delete;
	~side_work(); // issues what was not (a path that returns early)

	// The descriptor of the request's file its queued pieces hold (the
	// buffered twin); without one, that file's pieces run when added.
	void hold(fd_ref own) noexcept { _own = std::move(own); }
	// Whether it holds one: the request's file's pieces may be queued.
	[[nodiscard]] bool holds() const noexcept { return static_cast<bool>(_own); }
	// Whether a piece with a descriptor to hold is queued at all: after
	// the reply, on an asynchronous backend (a caller may skip leasing a
	// descriptor that would not be held).
	[[nodiscard]] bool defers() const noexcept;

	// POSIX_FADV_DONTNEED on [offset, offset+length) (length 0: to end of
	// file) of the request's file, through fd when it runs now.  Returns 0
	// or the errno of a drop that ran now.
	int drop(int fd, std::uint64_t offset, std::uint64_t length) noexcept;

	// sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER), then the drop: written
	// back and waited for, so the drop can take the pages (DONTNEED skips
	// dirty ones).  The caller has already started the range's write-back
	// if the order of its later steps depends on it (see write_op: no
	// delayed allocation next to O_DIRECT).
	void flush_and_drop(int fd, std::uint64_t offset, std::uint64_t length) noexcept;

	// Writes back and drops the pages the tracker handed over, and tells
	// the tracker at once; list is empty afterwards.  own/own_fd: the file
	// of the calling request and its descriptor, valid for the call
	// (nullptr/-1 when there is none).  Any other file's pages go through
	// that file's O_DIRECT (or buffered) descriptor (same inode, same page
	// cache), referenced so a close cannot pull it away; a file without
	// one is left to the kernel's own write-back (counted).  Takes other
	// files' fd_mutex: the caller holds none.
	void release_boundary(boundary_tracker::release_list &list, const dcache_file *own, int own_fd) noexcept;

	// Submits the queued pieces, oldest first; none is queued afterwards.
	void issue() noexcept;

private:
	// Queues the piece; false (the caller runs it now) where it cannot be.
	bool queue(const fd_ref &fd, std::uint64_t offset, std::uint64_t length, bool flush_first) noexcept;
	void release_page(const boundary_tracker::release &r, const dcache_file *own, int own_fd) noexcept;

	dcache_export *_e;
	when _when;
	fd_ref _own;
	later_work *_head = nullptr;
	later_work *_tail = nullptr;
};

} // namespace dcache::core
