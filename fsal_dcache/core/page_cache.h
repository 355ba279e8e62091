// Work on the page cache beside a request's own I/O: writing a range back,
// dropping it (POSIX_FADV_DONTNEED), and releasing held boundary pages.
// Each failure is counted and logged once per export, never fatal: the
// data is already where it belongs, only its caching is at stake.
//
// Thread-safety: all may run concurrently; release_boundary takes other
// files' fd_mutex, so its caller must hold none.
#pragma once

#include "boundary_tracker.h"
#include "fd_ref.h"

#include <cstdint>

struct dcache_export;
struct dcache_file;

namespace dcache::core {

// sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER): written back and waited
// for, so a following drop can take the pages (DONTNEED skips dirty ones).
void flush(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept;

// POSIX_FADV_DONTNEED on [offset, offset+length) (length 0: to end of
// file).  Returns 0 or the errno.
int drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept;

// Side work no reply waits for: drops, and write-backs before them, as
// requests of their own.  Built while a request runs, issued by its
// retire() after the reply (knfsd's fadvise RFC delays its DONTNEED until
// the reply is sent for the same reason); a COMMIT issues its own on
// return.  Each piece owns its descriptor and holds the export until its
// last completion, so nothing waits for it: not the request, not a close
// (a boundary page's release is done when its piece is built), only the
// export's deletion.  Failures are counted and logged as drop's and
// flush's; a piece the ring has no room for (submitted from the
// completion thread) runs there and then.
class later_work;
class side_work {
public:
	side_work() noexcept = default;
	side_work(side_work &&o) noexcept;
	side_work(const side_work &) = delete;
	side_work &operator=(const side_work &) = delete;
	side_work &operator=(side_work &&) = delete;
	~side_work(); // issues what was not (a path that returns early)

	void add(later_work *w) noexcept;
	// Submits the pieces, oldest first; the list is empty afterwards.
	void issue() noexcept;

private:
	later_work *_head = nullptr;
	later_work *_tail = nullptr;
};

// The same drop, off the caller's path where it can be: on an asynchronous
// backend, given `own` (a descriptor of the file the drop may keep), it is
// queued in `later` and 0 is returned, so a READ's reply or a COMMIT does
// not wait for it.  Otherwise (a synchronous backend, no own, no memory)
// it is drop() on fd, now.  Dropping late is harmless: DONTNEED leaves
// dirty pages alone, and a page read again in between is only dropped once
// more.
int drop_later(dcache_export &e, const fd_ref &own, int fd, std::uint64_t offset, std::uint64_t length,
	       side_work &later) noexcept;

// flush, then drop, queued in `later` as drop_later (own: a descriptor of
// the file; without one, or on a synchronous backend, now through fd).
// The caller has already started the range's write-back if the order of
// its later steps depends on it (see write_op: no delayed allocation next
// to O_DIRECT).
void flush_and_drop_later(dcache_export &e, const fd_ref &own, int fd, std::uint64_t offset, std::uint64_t length,
			  side_work &later) noexcept;

// flush, then drop.
void flush_and_drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept;

// Writes back and drops the pages the tracker handed over, then tells it,
// before returning (close, truncate, unexport: what follows relies on it).
// own/own_fd: the file of the calling request and its descriptor, valid
// for the call (nullptr/-1 when there is none).  Any other file's pages go
// through that file's O_DIRECT (or buffered) descriptor (same inode, same
// page cache), referenced so a close cannot pull it away; a file without
// one is left to the kernel's own write-back (counted).
void release_boundary(dcache_export &e, boundary_tracker::release_list &list, const dcache_file *own,
		      int own_fd) noexcept;

// The request path's release (a WRITE's completed, aged or evicted pages, a
// COMMIT's aged ones): each page's write-back and drop queued in `later`
// through a referenced descriptor (own_ref for own's pages), the tracker
// told at once.  Where that cannot be (a synchronous backend, no
// descriptor to hold, no memory) the page is released as release_boundary
// does, now.
void release_boundary_later(dcache_export &e, boundary_tracker::release_list &list, const dcache_file *own, int own_fd,
			    const fd_ref &own_ref, side_work &later) noexcept;

} // namespace dcache::core
