#include "planner.h"

#include <algorithm>

namespace dcache::core {

const char *disposition_name(disposition d) noexcept
{
	switch (d) {
	case disposition::buffered: return "buffered";
	case disposition::dontcache: return "dontcache";
	case disposition::fadvise: return "fadvise";
	case disposition::direct: return "direct";
	case disposition::split: return "split";
	case disposition::no_alignment: return "no_alignment";
	case disposition::too_small: return "too_small";
	case disposition::no_middle: return "no_middle";
	case disposition::mem_misaligned: return "mem_misaligned";
	case disposition::fallback: return "fallback";
	}
	return "?";
}

const char *seg_kind_name(seg_kind k) noexcept
{
	switch (k) {
	case seg_kind::direct: return "direct";
	case seg_kind::dontcache: return "dontcache";
	case seg_kind::buffered: return "buffered";
	}
	return "?";
}

namespace {

std::uint64_t round_down(std::uint64_t v, std::uint64_t a) noexcept { return v - v % a; }
std::uint64_t round_up(std::uint64_t v, std::uint64_t a) noexcept { return round_down(v + a - 1, a); }

std::uint64_t iov_total(std::span<const struct iovec> iov) noexcept
{
	std::uint64_t n = 0;
	for (const auto &v : iov)
		n += v.iov_len;
	return n;
}

plan single(seg_kind kind, disposition disp, std::uint64_t offset, std::uint64_t length) noexcept
{
	plan p;
	p.disp = disp;
	if (length == 0)
		return p; // nothing to issue
	p.segs[0] = {kind, offset, length, false};
	p.nsegs = 1;
	return p;
}

} // namespace

bool payload_mem_aligned(std::span<const struct iovec> iov, std::uint64_t start, std::uint64_t len,
			 std::uint32_t align) noexcept
{
	if (align <= 1)
		return true;
	std::uint64_t pos = 0; // payload offset of the current iovec
	const std::uint64_t end = start + len;
	for (const auto &v : iov) {
		const std::uint64_t v_end = pos + v.iov_len;
		const std::uint64_t lo = std::max(pos, start), hi = std::min(v_end, end);
		if (lo < hi) {
			const auto addr = reinterpret_cast<std::uintptr_t>(v.iov_base) + (lo - pos);
			if (addr % align != 0 || (hi - lo) % align != 0)
				return false;
		}
		pos = v_end;
		if (pos >= end)
			break;
	}
	return true;
}

plan plan_read(const dcache_settings &s, const plan_caps &caps, std::uint64_t offset,
	       std::uint64_t length, std::span<const struct iovec> iov) noexcept
{
	switch (s.io_cache_read) {
	case DCACHE_MODE_BUFFERED: return single(seg_kind::buffered, disposition::buffered, offset, length);
	case DCACHE_MODE_DONTCACHE: return single(seg_kind::dontcache, disposition::dontcache, offset, length);
	case DCACHE_MODE_FADVISE: return single(seg_kind::buffered, disposition::fadvise, offset, length);
	default: break; // the direct family
	}
	if (!caps.odirect)
		return single(seg_kind::dontcache, disposition::fallback, offset, length);
	const std::uint32_t r = caps.dio.read_align ? caps.dio.read_align : caps.dio.offset_align;
	const std::uint32_t m = caps.dio.mem_align;
	if (r == 0 || m == 0)
		return single(seg_kind::dontcache, disposition::no_alignment, offset, length);
	// Widening a READ smaller than R would read one or two whole alignment
	// units to return a few bytes: go DONTCACHE instead.
	if (length < r)
		return single(seg_kind::dontcache, disposition::too_small, offset, length);
	const std::uint64_t start = round_down(offset, r);
	const std::uint64_t end = round_up(offset + length, r);
	plan p;
	p.disp = disposition::direct;
	p.nsegs = 1;
	p.segs[0] = {seg_kind::direct, start, end - start, false};
	// The caller's buffer can take the data directly only if the range
	// needed no widening and its pieces are M-aligned.
	p.segs[0].bounce = start != offset || end != offset + length ||
			   iov_total(iov) < length || !payload_mem_aligned(iov, 0, length, m);
	return p;
}

plan plan_write(const dcache_settings &s, const plan_caps &caps, std::uint64_t offset,
		std::span<const struct iovec> iov) noexcept
{
	const std::uint64_t length = iov_total(iov);
	switch (s.io_cache_write) {
	case DCACHE_MODE_BUFFERED: return single(seg_kind::buffered, disposition::buffered, offset, length);
	case DCACHE_MODE_DONTCACHE: return single(seg_kind::dontcache, disposition::dontcache, offset, length);
	case DCACHE_MODE_FADVISE: return single(seg_kind::buffered, disposition::fadvise, offset, length);
	default: break; // direct, direct_data_sync, direct_file_sync
	}
	// Whatever is not issued direct: DONTCACHE edges by default, plain
	// buffered for A/B comparison.
	const seg_kind edge = s.direct_misaligned_dontcache ? seg_kind::dontcache : seg_kind::buffered;
	if (!caps.odirect)
		return single(edge, disposition::fallback, offset, length);
	const std::uint32_t o = caps.dio.offset_align, m = caps.dio.mem_align;
	if (o == 0 || m == 0)
		return single(edge, disposition::no_alignment, offset, length);
	if (length < std::max<std::uint64_t>(o, m))
		return single(edge, disposition::too_small, offset, length);

	// The direct middle is cut at page boundaries even where the
	// filesystem allows a finer alignment (XFS here: 512): an O_DIRECT
	// write invalidates every cached page it touches, so a middle that
	// began inside the head's page would throw that page out, and the
	// neighbouring WRITE's edge would have to read it back from the
	// device.  Edges then own their pages outright (see boundary_tracker).
	const std::uint64_t cut = std::max<std::uint64_t>(o, k_page_size);
	const std::uint64_t mid_start = round_up(offset, cut);
	const std::uint64_t mid_end = round_down(offset + length, cut);
	if (mid_end <= mid_start)
		return single(edge, disposition::no_middle, offset, length);
	const std::uint64_t head = mid_start - offset;
	const std::uint64_t middle = mid_end - mid_start;
	const std::uint64_t tail = offset + length - mid_end;
	// A three-way split for a tiny middle costs more syscalls than the
	// direct middle saves.
	if ((head != 0 || tail != 0) &&
	    middle < static_cast<std::uint64_t>(s.direct_misaligned_num_pages) * k_page_size)
		return single(edge, disposition::no_middle, offset, length);

	bool bounce = false;
	if (!payload_mem_aligned(iov, head, middle, m)) {
		// The kernel gives up here ("splitting would only turn one
		// buffered write into three"); user space may copy instead.
		if (s.direct_misaligned_memory == DCACHE_MEM_MISALIGNED_BUFFERED)
			return single(edge, disposition::mem_misaligned, offset, length);
		bounce = true;
	}

	plan p;
	p.disp = (head != 0 || tail != 0) ? disposition::split : disposition::direct;
	if (head != 0)
		p.segs[p.nsegs++] = {edge, offset, head, false};
	p.segs[p.nsegs++] = {seg_kind::direct, mid_start, middle, bounce};
	if (tail != 0)
		p.segs[p.nsegs++] = {edge, mid_end, tail, false};
	return p;
}

} // namespace dcache::core
