// The planner: where every "direct or not?" is decided.  Pure arithmetic
// turning one READ or WRITE into at most three segments, each tagged
// direct / dontcache / buffered, plus a disposition saying why; then the
// segments into steps (one backend request each: a WRITE's edges cut into
// page pieces, the ones shared with a neighbour tracked), the RWF_ flags
// each step goes out with, whether a READ tries the page cache first, and
// which sync a WRITE needs, and what the fadvise mode drops after a READ,
// a stable WRITE or a COMMIT.  What happens when the kernel refuses a step
// is fallback.h's table.  No syscalls, no globals: capabilities come in as
// arguments, so tests can use any alignment.  Thread-safe.
#pragma once

#include "dcache/core.h"
#include "page.h"
#include "dcache_io/request.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace dcache::core {

enum class seg_kind : std::uint8_t { direct, dontcache, buffered };

enum class disposition : std::uint8_t {
	buffered,  // mode buffered
	dontcache, // mode dontcache
	fadvise,   // mode fadvise
	direct,	   // one aligned direct segment
	split,	   // head/tail non-direct around a direct middle
	// direct mode, but not direct, because:
	no_alignment,	// the file reports no DIO alignment
	too_small,	// smaller than max(O, M) (WRITE) or R (READ), or empty
	no_middle,	// no aligned middle, or one below the page threshold
	mem_misaligned, // middle not M-aligned in memory, setting "buffered"
	fallback,	// no O_DIRECT on this file
};

const char *disposition_name(disposition d) noexcept;
const char *seg_kind_name(seg_kind k) noexcept;

struct segment {
	seg_kind kind = seg_kind::buffered;
	std::uint64_t offset = 0; // file offset (READ direct: widened)
	std::uint64_t length = 0;
	// direct only: go through an aligned bounce buffer (WRITE: the payload
	// is not M-aligned; READ: the range was widened or the caller's buffer
	// is not aligned).
	bool bounce = false;
};

struct plan {
	std::array<segment, 3> segs{};
	std::uint8_t nsegs = 0;
	disposition disp = disposition::buffered;

	[[nodiscard]] std::span<const segment> segments() const noexcept { return {segs.data(), nsegs}; }
	[[nodiscard]] bool has_direct() const noexcept
	{
		for (const auto &s : segments())
			if (s.kind == seg_kind::direct)
				return true;
		return false;
	}
};

struct plan_caps {
	io::dio_caps dio;
	bool odirect = true; // false: the file refused O_DIRECT (fallback)
};

// Are the bytes [start, start+len) of the payload described by iov all in
// pieces whose address and length are multiples of align?
[[nodiscard]] bool payload_mem_aligned(std::span<const struct iovec> iov, std::uint64_t start, std::uint64_t len,
				       std::uint32_t align) noexcept;

[[nodiscard]] plan plan_read(const dcache_settings &s, const plan_caps &caps, std::uint64_t offset,
			     std::uint64_t length, std::span<const struct iovec> iov) noexcept;

[[nodiscard]] plan plan_write(const dcache_settings &s, const plan_caps &caps, std::uint64_t offset,
			      std::span<const struct iovec> iov) noexcept;

// ---- steps ----------------------------------------------------------------

enum class step_kind : std::uint8_t {
	buffered,
	dontcache,
	direct,
	// A cached edge piece in a page the WRITE shares with a neighbour: held
	// in the page cache by the boundary tracker until both have written it.
	tracked,
};

const char *step_kind_name(step_kind k) noexcept;

struct step {
	step_kind kind = step_kind::buffered;
	std::uint64_t offset = 0;
	std::uint64_t length = 0; // the transfer expected, known before issue
	bool bounce = false;	  // direct: through an aligned copy
	// Cached bytes of a direct-mode WRITE: written back as soon as they
	// are written (see write_steps).
	bool writeback = false;

	friend bool operator==(const step &, const step &) = default;
};

// A WRITE's steps: each edge at most three pieces, plus the middle.
struct step_list {
	std::array<step, 7> items{};
	std::uint8_t n = 0;

	[[nodiscard]] std::span<step> all() noexcept { return {items.data(), n}; }
	[[nodiscard]] std::span<const step> all() const noexcept { return {items.data(), n}; }
};

// Every segment of p (a plan of the WRITE [offset, offset+length)) as
// steps.  With boundary tracking (a direct mode with DONTCACHE edges) a
// DONTCACHE edge is cut at page boundaries: a piece is tracked when its
// page is only partly covered by the WRITE (a neighbour must complete it)
// and it carries all of the WRITE's bytes in that page; untracked
// neighbours are merged.  In a direct mode every cached step (a tracked
// piece, a buffered edge) is written back at once: left dirty it keeps a
// delayed allocation that later O_DIRECT I/O lands on
// (docs/architecture.md, "Delayed allocation and O_DIRECT").  write_behind
// (auto's stream cached for spare memory): the buffered steps are written
// back at once too, so that the stream leaves clean pages.
[[nodiscard]] step_list write_steps(const dcache_settings &s, const plan &p, std::uint64_t offset, std::uint64_t length,
				    bool write_behind = false) noexcept;

// A READ's step: its one segment (p.nsegs is 0 or 1).
[[nodiscard]] step read_step(const plan &p) noexcept;

// How a step goes out on a file that does (dontcache_ok) or does not
// support RWF_DONTCACHE, on a filesystem that may serve an O_DIRECT
// request through the page cache without saying so (direct_may_buffer:
// btrfs, for a range it cannot write or read direct).
struct step_flags {
	int rwf = 0;
	// What RWF_DONTCACHE would have dropped, the kernel cannot: the range
	// is written back and dropped after the step instead (a DONTCACHE step
	// issued plain; a direct step where the filesystem may have buffered
	// part of it and no RWF_DONTCACHE rides along).
	bool drop_after = false;
};
[[nodiscard]] step_flags flags_for(bool write, step_kind k, bool dontcache_ok, bool direct_may_buffer) noexcept;

// A buffered or DONTCACHE READ first tries the page cache with
// RWF_NOWAIT in the calling thread (Cached_Read_Fast_Path), where an
// asynchronous backend would otherwise hand it off.
[[nodiscard]] bool read_tries_cache_first(const dcache_settings &s, const step &st) noexcept;

// A cached piece of a WRITE (buffered, DONTCACHE, a tracked edge) and its
// write-back run in the calling thread as plain syscalls while the request
// is still on it, even with an asynchronous backend: the kernel writes
// cached data without waiting for the device (unless dirty throttling, which
// would block an io-wq worker the same way), and XFS refuses RWF_NOWAIT
// buffered writes (EAGAIN), so io_uring would hand each one to an io-wq
// worker, at the cost of a thread hand-off and a completion (measured in
// docs/results/2026-12-01-request-path.md: 29.4 syscalls per 4 KiB WRITE
// through io_uring, 18.2 as VFS makes them).  Direct steps and syncs, which
// wait for the device, go asynchronous.
[[nodiscard]] bool write_step_in_caller(step_kind k) noexcept;

// The sync a WRITE needs, once, after all its steps: fsync when the client
// asked stable (Ganesha 4.3 can only reply FILE_SYNC) or the mode is
// direct_file_sync; fdatasync for direct_data_sync (it persists the data
// and what is needed to read it back: size, allocation, unwritten-extent
// conversion; only timestamps may lag); none otherwise (UNSTABLE).
enum class sync_kind : std::uint8_t { none, fsync, fdatasync };
[[nodiscard]] sync_kind write_sync(const dcache_settings &s, bool stable) noexcept;

// A range of a file to drop (POSIX_FADV_DONTNEED) after a reply.
struct byte_range {
	std::uint64_t offset = 0;
	std::uint64_t length = 0; // 0: to end of file
	friend bool operator==(const byte_range &, const byte_range &) = default;
};

// What a READ of `bytes` at `offset` drops after its reply: in fadvise
// mode, or where its DONTCACHE could not be had (no_dontcache: the kernel
// would have dropped it itself).  DONTNEED drops only folios wholly
// inside its range, and readahead fills large folios (up to 2 MiB) that
// straddle a READ's bounds (measured: exact ranges left 31 % of a file
// read sequentially in 1 MiB READs resident).  So it reaches back to the
// previous 2 MiB boundary (pages a sequential reader was already served;
// a folio straddling the end is dropped by the next READ's range), and at
// end of file to the end.  Nothing when nothing was read.
[[nodiscard]] std::optional<byte_range> drop_after_read(const dcache_settings &s, bool no_dontcache,
							std::uint64_t offset, std::uint64_t bytes, bool eof) noexcept;
// What a WRITE answered stable drops after its reply (fadvise mode: its
// sync left the written range clean).
[[nodiscard]] std::optional<byte_range> drop_after_stable_write(const dcache_settings &s, bool stable,
								std::uint64_t offset, std::uint64_t written) noexcept;
// What a COMMIT drops (fadvise mode: its fsync left the range clean; len 0
// is the COMMIT's and posix_fadvise's own "to end of file").
[[nodiscard]] std::optional<byte_range> drop_after_commit(const dcache_settings &s, std::uint64_t offset,
							  std::uint64_t len) noexcept;

} // namespace dcache::core
