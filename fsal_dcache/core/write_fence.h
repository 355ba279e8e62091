// Keeps one file's buffered and O_DIRECT WRITEs off each other's pages
// while either is in flight.
//
// An O_DIRECT write drops the cached pages it covers when it completes.
// If a buffered write dirtied one of them in the meantime the kernel cannot
// drop it: it logs "Page cache invalidation failure on direct I/O", the page
// keeps bytes the direct write replaced on disk, and the file records EIO,
// which the next fsync (the client's COMMIT) reports although nothing was
// lost.  A direct write can also meet the buffered write's delayed
// allocation and fail with EIO itself ("Direct I/O collision with buffered
// writes").  With synchronous I/O XFS's inode lock keeps the two apart; an
// io_uring completion arrives after the lock is let go.
//
// Each WRITE enters with the pages of its steps, by kind, before issuing
// anything, and leaves when it has finished.  Entering waits while a WRITE
// in flight holds an overlapping page of the other kind; same kinds share.
// The planner gives a direct segment only whole pages inside its own
// request, so two WRITEs meet here only when their bytes overlap: the wait
// is rare, and as short as the other WRITE.  A waiter holds nothing, so
// there is no cycle; a WRITE in flight needs no waiter to finish.
#pragma once

#include "page.h"
#include "thread_annotations.h"

#include <condition_variable>
#include <cstdint>
#include <span>
#include <vector>

namespace dcache::core {

class write_fence {
public:
	enum class kind : std::uint8_t { buffered, direct };
	// Pages first..last (inclusive) written the way kind says.
	struct pages {
		std::uint64_t first = 0, last = 0;
		kind k = kind::buffered;
		friend bool operator==(const pages &, const pages &) = default;
		// Pages of bytes [offset, offset + length), length > 0.
		[[nodiscard]] static constexpr pages of(std::uint64_t offset, std::uint64_t length, kind k) noexcept
		{
			return {offset / k_page_size, (offset + length - 1) / k_page_size, k};
		}
		[[nodiscard]] constexpr bool overlaps(const pages &o) const noexcept
		{
			return first <= o.last && o.first <= last;
		}
	};

	// Waits until no WRITE in flight holds an overlapping page of the
	// other kind, then records these.  True when it had to wait.
	bool enter(std::span<const pages> mine) DCACHE_EXCLUDES(_m);
	// Turns one recorded direct entry into a buffered one (a direct
	// segment the kernel refused, to be reissued through the page cache),
	// unless another WRITE in flight holds one of its pages direct: then
	// false, and nothing changes.  Never waits (it runs on the completion
	// thread, which the other WRITE needs to finish).
	[[nodiscard]] bool try_make_buffered(const pages &direct) DCACHE_EXCLUDES(_m);
	// Forgets what enter() recorded (the same list) and wakes waiters.
	void leave(std::span<const pages> mine) noexcept DCACHE_EXCLUDES(_m);
	// Entries recorded, and WRITEs waiting to enter (tests).
	[[nodiscard]] std::size_t held() const DCACHE_EXCLUDES(_m);
	[[nodiscard]] std::size_t waiting() const DCACHE_EXCLUDES(_m);

private:
	[[nodiscard]] bool conflicts(std::span<const pages> mine) const DCACHE_REQUIRES(_m);

	mutable mutex _m;
	std::condition_variable_any _cv;
	std::vector<pages> _held DCACHE_GUARDED_BY(_m);
	std::size_t _waiting DCACHE_GUARDED_BY(_m) = 0;
};

} // namespace dcache::core
