#include "planner.h"

#include "settings.h"

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

std::uint64_t round_down(std::uint64_t v, std::uint64_t a) noexcept
{
	return v - v % a;
}
std::uint64_t round_up(std::uint64_t v, std::uint64_t a) noexcept
{
	return round_down(v + a - 1, a);
}

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

plan plan_read(const dcache_settings &s, const plan_caps &caps, std::uint64_t offset, std::uint64_t length,
	       std::span<const struct iovec> iov) noexcept
{
	switch (s.io_cache_read) {
	case DCACHE_MODE_AUTO: // resolved before a request is planned (auto_state.h)
	case DCACHE_MODE_DIRECT_WHEN_QUIET:
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
	p.segs[0].bounce = start != offset || end != offset + length || iov_total(iov) < length ||
			   !payload_mem_aligned(iov, 0, length, m);
	return p;
}

plan plan_write(const dcache_settings &s, const plan_caps &caps, std::uint64_t offset,
		std::span<const struct iovec> iov) noexcept
{
	const std::uint64_t length = iov_total(iov);
	switch (s.io_cache_write) {
	case DCACHE_MODE_AUTO: // resolved before a request is planned (auto_state.h)
	case DCACHE_MODE_DIRECT_WHEN_QUIET:
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

// ---- steps ----------------------------------------------------------------

const char *step_kind_name(step_kind k) noexcept
{
	switch (k) {
	case step_kind::buffered: return "buffered";
	case step_kind::dontcache: return "dontcache";
	case step_kind::direct: return "direct";
	case step_kind::tracked: return "tracked";
	}
	return "?";
}

namespace {

struct edge_piece {
	std::uint64_t offset = 0;
	std::uint64_t length = 0;
	bool track = false; // a page the WRITE shares with a neighbour
};

// Cuts the non-direct segment [s, e) of the WRITE [w0, w1) at page
// boundaries (see write_steps).  When O < page size the direct middle
// shares the head's page; O_DIRECT invalidates that page anyway, so
// holding it cannot help and it is not tracked.  A segment with no shared
// page is one piece.
std::size_t edge_pieces(std::uint64_t w0, std::uint64_t w1, std::uint64_t s, std::uint64_t e,
			std::array<edge_piece, 3> &out) noexcept
{
	constexpr std::uint64_t page = k_page_size;
	const auto shared = [&](std::uint64_t page_lo, std::uint64_t lo, std::uint64_t hi) {
		const std::uint64_t wlo = std::max(w0, page_lo), whi = std::min(w1, page_lo + page);
		const bool partial = wlo > page_lo || whi < page_lo + page;
		return partial && lo <= wlo && hi >= whi;
	};
	std::array<edge_piece, 3> raw{};
	std::size_t n = 0;
	const std::uint64_t first = s / page, last = (e - 1) / page;
	if (first == last) {
		raw[n++] = {s, e - s, shared(first * page, s, e)};
	} else {
		const std::uint64_t a_end = (first + 1) * page, b_start = last * page;
		raw[n++] = {s, a_end - s, shared(first * page, s, a_end)};
		if (b_start > a_end)
			raw[n++] = {a_end, b_start - a_end, false};
		raw[n++] = {b_start, e - b_start, shared(b_start, b_start, e)};
	}
	std::size_t m = 0;
	for (std::size_t i = 0; i < n; ++i) {
		if (m > 0 && !raw[i].track && !out[m - 1].track)
			out[m - 1].length += raw[i].length;
		else
			out[m++] = raw[i];
	}
	return m;
}

} // namespace

step_list write_steps(const dcache_settings &s, const plan &p, std::uint64_t offset, std::uint64_t length,
		      bool write_behind) noexcept
{
	step_list out;
	const auto add = [&out](step st) noexcept {
		if (out.n < out.items.size())
			out.items[out.n++] = st;
	};
	const bool direct_mode = is_direct_mode(s.io_cache_write);
	const bool tracks = direct_mode && s.boundary_tracking && s.direct_misaligned_dontcache;
	for (const segment &seg : p.segments()) {
		switch (seg.kind) {
		case seg_kind::buffered:
			add({step_kind::buffered, seg.offset, seg.length, false, direct_mode || write_behind});
			break;
		case seg_kind::direct: add({step_kind::direct, seg.offset, seg.length, seg.bounce, false}); break;
		case seg_kind::dontcache:
			if (!tracks) {
				// A DONTCACHE piece needs no write-back: the kernel
				// starts it inside the write.
				add({step_kind::dontcache, seg.offset, seg.length, false, false});
				break;
			}
			std::array<edge_piece, 3> pieces{};
			const std::size_t n =
				edge_pieces(offset, offset + length, seg.offset, seg.offset + seg.length, pieces);
			for (std::size_t i = 0; i < n; ++i)
				add({pieces[i].track ? step_kind::tracked : step_kind::dontcache, pieces[i].offset,
				     pieces[i].length, false, pieces[i].track});
			break;
		}
	}
	return out;
}

step read_step(const plan &p) noexcept
{
	if (p.nsegs == 0)
		return {};
	const segment &seg = p.segs[0];
	const step_kind k = seg.kind == seg_kind::direct      ? step_kind::direct
			    : seg.kind == seg_kind::dontcache ? step_kind::dontcache
							      : step_kind::buffered;
	return {k, seg.offset, seg.length, seg.bounce, false};
}

step_flags flags_for(bool write, step_kind k, bool dontcache_ok, bool direct_may_buffer) noexcept
{
	switch (k) {
	case step_kind::buffered:
	case step_kind::tracked: return {};
	case step_kind::dontcache: return dontcache_ok ? step_flags{RWF_DONTCACHE, false} : step_flags{0, true};
	case step_kind::direct:
		// A direct WRITE carries DONTCACHE too: inert when the write is
		// direct, and it leaves nothing cached if the filesystem falls
		// back to buffered; without it, such a filesystem's range is
		// dropped after.  A direct READ carries nothing.
		if (write && dontcache_ok)
			return {RWF_DONTCACHE, false};
		return {0, direct_may_buffer};
	}
	return {};
}

bool read_tries_cache_first(const dcache_settings &s, const step &st) noexcept
{
	return st.kind != step_kind::direct && s.cached_read_fast_path &&
	       (s.io_cache_read == DCACHE_MODE_BUFFERED || s.io_cache_read == DCACHE_MODE_DONTCACHE);
}

bool write_step_in_caller(step_kind k) noexcept
{
	return k != step_kind::direct;
}

namespace {
// How far back a READ's drop reaches: the largest folio readahead builds.
constexpr std::uint64_t k_drop_after_read_reach = 2u << 20;
} // namespace

std::optional<byte_range> drop_after_read(const dcache_settings &s, bool no_dontcache, std::uint64_t offset,
					  std::uint64_t bytes, bool eof) noexcept
{
	if ((s.io_cache_read != DCACHE_MODE_FADVISE && !no_dontcache) || bytes == 0)
		return std::nullopt;
	const std::uint64_t start = offset - offset % k_drop_after_read_reach;
	return byte_range{start, eof ? 0 : offset + bytes - start};
}

std::optional<byte_range> drop_after_stable_write(const dcache_settings &s, bool stable, std::uint64_t offset,
						  std::uint64_t written) noexcept
{
	if (s.io_cache_write != DCACHE_MODE_FADVISE || !stable || written == 0)
		return std::nullopt;
	return byte_range{offset, written};
}

std::optional<byte_range> drop_after_commit(const dcache_settings &s, std::uint64_t offset, std::uint64_t len) noexcept
{
	if (s.io_cache_write != DCACHE_MODE_FADVISE)
		return std::nullopt;
	return byte_range{offset, len};
}

sync_kind write_sync(const dcache_settings &s, bool stable) noexcept
{
	if (stable || s.io_cache_write == DCACHE_MODE_DIRECT_FILE_SYNC)
		return sync_kind::fsync;
	if (s.io_cache_write == DCACHE_MODE_DIRECT_DATA_SYNC)
		return sync_kind::fdatasync;
	return sync_kind::none;
}

} // namespace dcache::core
