// The planner: pure arithmetic turning one READ or WRITE into at most three
// segments, each tagged direct / dontcache / buffered, plus a disposition
// saying why.  No syscalls, no globals: capabilities come in as arguments,
// so tests can use any alignment.  Thread-safe.
#pragma once

#include "dcache/core.h"
#include "page.h"
#include "dcache_io/request.h"

#include <array>
#include <cstdint>
#include <span>

namespace dcache::core {

// The unit of Direct_Misaligned_Num_Pages (the kernel's PAGE_SIZE on x86_64).

enum class seg_kind : std::uint8_t { direct, dontcache, buffered };

enum class disposition : std::uint8_t {
	buffered,  // mode buffered
	dontcache, // mode dontcache
	fadvise,   // mode fadvise
	direct,    // one aligned direct segment
	split,     // head/tail non-direct around a direct middle
	// direct mode, but not direct, because:
	no_alignment,   // the file reports no DIO alignment
	too_small,      // smaller than max(O, M) (WRITE) or R (READ), or empty
	no_middle,      // no aligned middle, or one below the page threshold
	mem_misaligned, // middle not M-aligned in memory, setting "buffered"
	fallback,       // no O_DIRECT on this file
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

	[[nodiscard]] std::span<const segment> segments() const noexcept
	{
		return {segs.data(), nsegs};
	}
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
[[nodiscard]] bool payload_mem_aligned(std::span<const struct iovec> iov, std::uint64_t start,
				       std::uint64_t len, std::uint32_t align) noexcept;

[[nodiscard]] plan plan_read(const dcache_settings &s, const plan_caps &caps,
			     std::uint64_t offset, std::uint64_t length,
			     std::span<const struct iovec> iov) noexcept;

[[nodiscard]] plan plan_write(const dcache_settings &s, const plan_caps &caps,
			      std::uint64_t offset, std::span<const struct iovec> iov) noexcept;

} // namespace dcache::core
