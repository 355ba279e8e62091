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

// The same drop, off the caller's path where it can be: on an asynchronous
// backend, given `own` (a descriptor of the file the drop may keep), it is
// submitted and not waited for (it holds own and the export until it
// completes; its failure is counted and logged as drop's) and 0 is
// returned, so a READ's reply or a COMMIT does not wait for it.  Otherwise
// (a synchronous backend, or no own) it is drop() on fd, now.  Dropping
// late is harmless: DONTNEED leaves dirty pages alone, and a page read
// again in between is only dropped once more.
int drop_later(dcache_export &e, const fd_ref &own, int fd, std::uint64_t offset, std::uint64_t length) noexcept;

// flush, then drop.
void flush_and_drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept;

// The range to drop after a fadvise-mode READ of `bytes` at `offset`: DONTNEED
// drops only folios wholly inside its range, and readahead fills large
// folios (up to 2 MiB) that straddle a READ's bounds (measured: exact
// ranges left 31 % of a file read sequentially in 1 MiB READs resident).
// So it reaches back to the previous 2 MiB boundary (pages a sequential
// reader was already served; a folio straddling the end is dropped by the
// next READ's range), and at end of file to the end.
struct byte_range {
	std::uint64_t offset = 0;
	std::uint64_t length = 0; // 0: to end of file
};
[[nodiscard]] byte_range drop_after_read_range(std::uint64_t offset, std::uint64_t bytes, bool eof) noexcept;

// Writes back and drops the pages the tracker handed over, then tells it.
// own/own_fd: the file of the calling request and its descriptor, valid
// for the call (nullptr/-1 when there is none).  Any other file's pages go
// through that file's O_DIRECT (or buffered) descriptor (same inode, same
// page cache), referenced so a close cannot pull it away; a file without
// one is left to the kernel's own write-back (counted).
void release_boundary(dcache_export &e, boundary_tracker::release_list &list, const dcache_file *own,
		      int own_fd) noexcept;

} // namespace dcache::core
