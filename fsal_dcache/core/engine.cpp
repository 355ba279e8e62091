// The issue loop and the extern "C" implementation of dcache/core.h.
//
// Every entry point is noexcept and catches everything: no exception may
// cross into Ganesha.  No global has a non-trivial constructor or
// destructor (the module is loaded with RTLD_DEEPBIND and a static
// libstdc++, where static-object ordering is nobody's friend).
#include "engine.h"

#include "boundary_tracker.h"
#include "dcache_io/sync_backend.h"
#include "planner.h"

#include <sys/sdt.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <vector>

namespace dcache::core {
namespace {

constinit std::atomic<dcache_log_fn> g_log{nullptr};

// Bits of dcache_export::logged: each fallback reason is logged once per
// export, then only counted.
enum log_once_bit : std::uint32_t {
	log_no_dontcache = 1u << 0,
	log_no_odirect = 1u << 1,
	log_open_error = 1u << 2,
	log_direct_einval = 1u << 3,
	log_fadvise_error = 1u << 4,
	log_sync_range_error = 1u << 5,
	log_no_alignment = 1u << 6,
};

__attribute__((format(printf, 2, 3))) void log_msg(dcache_log_level level, const char *fmt, ...) noexcept
{
	const dcache_log_fn fn = g_log.load(std::memory_order_acquire);
	if (fn == nullptr)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fn(level, line);
}

bool first_time(dcache_export &e, log_once_bit bit) noexcept
{
	return (e.logged.fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
}

bool is_direct_mode(dcache_mode m) noexcept
{
	return m == DCACHE_MODE_DIRECT || m == DCACHE_MODE_DIRECT_DATA_SYNC ||
	       m == DCACHE_MODE_DIRECT_FILE_SYNC;
}

// posix_memalign'd scratch memory, freed on scope exit.
class aligned_buffer {
public:
	aligned_buffer() = default;
	aligned_buffer(const aligned_buffer &) = delete;
	aligned_buffer &operator=(const aligned_buffer &) = delete;
	~aligned_buffer() { std::free(_p); }

	[[nodiscard]] bool allocate(std::size_t align, std::size_t len) noexcept
	{
		align = std::max<std::size_t>(align, 4096);
		return posix_memalign(&_p, align, std::max<std::size_t>(len, 1)) == 0;
	}
	[[nodiscard]] std::uint8_t *data() const noexcept { return static_cast<std::uint8_t *>(_p); }

private:
	void *_p = nullptr;
};

std::size_t iov_total(const struct iovec *iov, int n) noexcept
{
	std::size_t t = 0;
	for (int i = 0; i < n; ++i)
		t += iov[i].iov_len;
	return t;
}

// The iovecs covering payload bytes [start, start+len).
std::vector<struct iovec> slice(const struct iovec *iov, int n, std::uint64_t start, std::uint64_t len)
{
	std::vector<struct iovec> out;
	std::uint64_t pos = 0;
	const std::uint64_t end = start + len;
	for (int i = 0; i < n && pos < end; ++i) {
		const std::uint64_t v_end = pos + iov[i].iov_len;
		const std::uint64_t lo = std::max(pos, start), hi = std::min(v_end, end);
		if (lo < hi)
			out.push_back({static_cast<char *>(iov[i].iov_base) + (lo - pos),
				       static_cast<std::size_t>(hi - lo)});
		pos = v_end;
	}
	return out;
}

void gather(const std::vector<struct iovec> &from, std::uint8_t *to) noexcept
{
	for (const auto &v : from) {
		std::memcpy(to, v.iov_base, v.iov_len);
		to += v.iov_len;
	}
}

void scatter(const std::uint8_t *from, std::size_t n, const struct iovec *iov, int count) noexcept
{
	for (int i = 0; i < count && n > 0; ++i) {
		const std::size_t k = std::min(n, iov[i].iov_len);
		std::memcpy(iov[i].iov_base, from, k);
		from += k;
		n -= k;
	}
}

// Per-request context: the export, the file and the I/O being serviced.
struct ctx {
	dcache_export &e;
	dcache_file &f;
	const dcache_io &io;
	dcache_settings s;
	// WRITE: boundary pages the tracker let go of during this request,
	// written back and dropped when the request is done (see do_write).
	boundary_tracker::release_list *releases = nullptr;

	io::backend &b() const noexcept { return *e.backend; }
	void add(stat st, std::uint64_t n = 1) const noexcept { e.stats.add(st, n); }
};

io::dio_caps file_caps(const ctx &c)
{
	if (c.f.caps_probed.load(std::memory_order_acquire))
		return c.f.caps;
	std::unique_lock lock(c.f.fd_mutex);
	if (!c.f.caps_probed.load(std::memory_order_relaxed)) {
		c.f.caps = c.b().probe_dio(c.io.fd);
		c.f.caps_probed.store(true, std::memory_order_release);
		if (!c.f.caps.known() && first_time(c.e, log_no_alignment))
			log_msg(DCACHE_LOG_WARN,
				"dcache %s: the filesystem reports no direct-I/O alignment (statx DIOALIGN and XFS_IOC_DIOINFO gave nothing): its files are served the DONTCACHE way instead of O_DIRECT (counted as *_not_direct_no_alignment)",
				c.e.name);
	}
	return c.f.caps;
}

// Shared hold on the file's O_DIRECT descriptor for one request.
struct direct_lease {
	std::shared_lock<std::shared_mutex> lock;
	int fd = -1;
};

direct_lease lease_direct(const ctx &c, bool for_write)
{
	direct_lease l;
	dcache_file &f = c.f;
	// Two rounds at most: the second sees what the first opened.
	for (int round = 0; round < 2; ++round) {
		l.lock = std::shared_lock(f.fd_mutex);
		if (f.direct_fd >= 0 && (!for_write || f.direct_fd_writable)) {
			l.fd = f.direct_fd;
			return l;
		}
		if (f.no_odirect.load(std::memory_order_relaxed)) {
			l.lock.unlock();
			return l;
		}
		l.lock.unlock();

		std::unique_lock u(f.fd_mutex);
		if (f.direct_fd >= 0 && for_write && !f.direct_fd_writable) {
			// First opened from a read-only descriptor; this WRITE's
			// descriptor is writable, so reopen from it.
			c.b().close_fd(f.direct_fd);
			f.direct_fd = -1;
		}
		if (f.direct_fd >= 0 || f.no_odirect.load(std::memory_order_relaxed))
			continue;
		const io::open_result r = c.b().open_direct(c.io.fd);
		if (r.error == EINVAL) {
			// The filesystem refuses O_DIRECT: for good on this file.
			f.no_odirect.store(true, std::memory_order_relaxed);
			if (first_time(c.e, log_no_odirect))
				log_msg(DCACHE_LOG_WARN,
					"dcache %s: O_DIRECT refused (EINVAL at open): direct mode falls back to DONTCACHE on such files",
					c.e.name);
			return l;
		}
		if (r.error != 0) {
			if (first_time(c.e, log_open_error))
				log_msg(DCACHE_LOG_WARN, "dcache %s: cannot open an O_DIRECT descriptor (%s): this request goes the DONTCACHE way",
					c.e.name, std::strerror(r.error));
			return l;
		}
		f.direct_fd = r.fd;
		f.direct_fd_writable = r.writable;
	}
	return l;
}

void note_no_dontcache(const ctx &c) noexcept
{
	c.f.no_dontcache.store(true, std::memory_order_relaxed);
	if (first_time(c.e, log_no_dontcache))
		log_msg(DCACHE_LOG_WARN,
			"dcache %s: RWF_DONTCACHE not supported (EOPNOTSUPP: kernel < 6.14 or filesystem without it): using buffered I/O + POSIX_FADV_DONTNEED",
			c.e.name);
}

io::result exec(const ctx &c, io::op_kind op, int fd, std::uint64_t offset, const struct iovec *iov,
		int n, int rwf, std::uint64_t length = 0) noexcept
{
	io::request r;
	r.op = op;
	r.fd = fd;
	r.offset = offset;
	r.length = length;
	r.iov = iov;
	r.iov_count = n;
	r.rwf = rwf;
	return c.b().execute(r);
}

// POSIX_FADV_DONTNEED; failures are counted and logged, never fatal to the
// READ/WRITE they follow (the data is already where it belongs).
// POSIX_FADV_DONTNEED drops only the folios that lie wholly inside the
// range, and readahead fills large folios (up to 2 MiB here) that straddle
// a READ's exact bounds: measured, exact ranges left 31 % of a file read
// sequentially in 1 MiB READs resident.  So after a READ the drop reaches
// back to the previous 2 MiB boundary (pages a sequential reader has
// already been served; a straddling folio at the end is dropped by the
// next READ's range), and at end of file to the end.
constexpr std::uint64_t k_fadvise_read_reach = 2u << 20;

int drop_range(const ctx &c, int fd, std::uint64_t offset, std::uint64_t length) noexcept;

int drop_read_range(const ctx &c, std::uint64_t bytes, bool eof) noexcept
{
	const std::uint64_t start = c.io.offset - c.io.offset % k_fadvise_read_reach;
	const std::uint64_t length = eof ? 0 : c.io.offset + bytes - start; // 0: to end of file
	return drop_range(c, c.io.fd, start, length);
}

int drop_range(const ctx &c, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	c.add(stat::fadvise_calls);
	const io::result r = exec(c, io::op_kind::fadvise_dontneed, fd, offset, nullptr, 0, 0, length);
	if (!r.ok()) {
		c.add(stat::fadvise_errors);
		if (first_time(c.e, log_fadvise_error))
			log_msg(DCACHE_LOG_WARN, "dcache %s: posix_fadvise(DONTNEED) failed: %s", c.e.name,
				std::strerror(r.error));
	}
	return r.error;
}

// Write back and wait, so the following DONTNEED can drop the pages (it
// skips dirty ones).
void flush_range(const ctx &c, std::uint64_t offset, std::uint64_t length) noexcept
{
	const io::result r = exec(c, io::op_kind::sync_range, c.io.fd, offset, nullptr, 0, 0, length);
	if (!r.ok() && first_time(c.e, log_sync_range_error))
		log_msg(DCACHE_LOG_WARN, "dcache %s: sync_file_range failed: %s", c.e.name, std::strerror(r.error));
}

// ---- boundary pages ---------------------------------------------------------

// sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER) then POSIX_FADV_DONTNEED on
// one held page: DONTNEED skips dirty pages, so it must be clean first.
// Failures are counted and logged once, never fatal: the data is written,
// only its caching is at stake.
void flush_and_drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	io::request q;
	q.op = io::op_kind::sync_range;
	q.fd = fd;
	q.offset = offset;
	q.length = length;
	io::result r = e.backend->execute(q);
	if (!r.ok() && first_time(e, log_sync_range_error))
		log_msg(DCACHE_LOG_WARN, "dcache %s: sync_file_range failed: %s", e.name, std::strerror(r.error));
	q.op = io::op_kind::fadvise_dontneed;
	e.stats.add(stat::fadvise_calls);
	r = e.backend->execute(q);
	if (!r.ok()) {
		e.stats.add(stat::fadvise_errors);
		if (first_time(e, log_fadvise_error))
			log_msg(DCACHE_LOG_WARN, "dcache %s: posix_fadvise(DONTNEED) failed: %s", e.name,
				std::strerror(r.error));
	}
}

// Writes back and drops the pages the tracker handed over, then tells it.
// own/own_fd: the file of the calling request and its descriptor, valid
// for the call (nullptr/-1 when there is none).  Any other file's pages go
// through that file's O_DIRECT descriptor (same inode, same page cache),
// held shared so a close cannot pull it away; a file without one is left
// to the kernel's own writeback (counted).  The caller must hold no
// fd_mutex: this takes other files' ones.
void release_boundary(dcache_export &e, boundary_tracker::release_list &list, const dcache_file *own,
		      int own_fd) noexcept
{
	for (const auto &r : list) {
		DCACHE_SYNC_POINT("boundary.release");
		dcache_file *f = r.file->owner();
		const std::uint64_t off = r.page * k_boundary_page;
		DTRACE_PROBE3(dcache, boundary_release, off, static_cast<int>(r.why), f == own);
		if (f == own && own_fd >= 0) {
			flush_and_drop(e, own_fd, off, k_boundary_page);
		} else {
			try {
				std::shared_lock lock(f->fd_mutex);
				if (f->direct_fd >= 0)
					flush_and_drop(e, f->direct_fd, off, k_boundary_page);
				else
					e.stats.add(stat::boundary_release_no_fd);
			} catch (...) {
				e.stats.add(stat::boundary_release_no_fd);
			}
		}
		DCACHE_SYNC_POINT("boundary.released");
		e.boundary.release_done(r);
	}
	list.clear();
}

// Runs the releases collected during a WRITE when the WRITE is done: after
// its segments (the completing writer's data is in the page) and after its
// sync (the page is clean then, so the write-back is free), with the
// O_DIRECT lease already dropped.
struct pending_releases {
	dcache_export &e;
	const dcache_file *own;
	int fd;
	boundary_tracker::release_list list;

	pending_releases(dcache_export &exp, const dcache_file *file, int file_fd) noexcept
		: e(exp), own(file), fd(file_fd)
	{
	}
	pending_releases(const pending_releases &) = delete;
	pending_releases &operator=(const pending_releases &) = delete;
	~pending_releases() { release_boundary(e, list, own, fd); }
};

bool tracks_boundaries(const ctx &c) noexcept
{
	return c.releases != nullptr && is_direct_mode(c.s.io_cache_write) && c.s.boundary_tracking &&
	       c.s.direct_misaligned_dontcache;
}

struct edge_piece {
	std::uint64_t offset = 0;
	std::uint64_t length = 0;
	bool track = false; // a page the WRITE shares with a neighbour
};

// Cuts the non-direct segment [s, e) of the WRITE [w0, w1) at page
// boundaries.  A piece is tracked when its page is only partly covered by
// the WRITE (a neighbour must complete it) and the piece carries all of the
// WRITE's bytes in that page.  (When O < page size the direct middle shares
// the head's page; O_DIRECT invalidates that page anyway, so holding it
// cannot help and it is not tracked.)  Untracked neighbours are merged, so
// a segment with no shared page is one piece: exactly today's write.
std::size_t edge_pieces(std::uint64_t w0, std::uint64_t w1, std::uint64_t s, std::uint64_t e,
			std::array<edge_piece, 3> &out) noexcept
{
	constexpr std::uint64_t page = k_boundary_page;
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

io::result write_dontcache(const ctx &c, const std::vector<struct iovec> &v, std::uint64_t offset) noexcept;
io::result write_buffered(const ctx &c, const std::vector<struct iovec> &v, std::uint64_t offset) noexcept;

// A DONTCACHE segment of a direct-mode WRITE with boundary tracking on:
// the bytes of a shared page go out cached while the tracker holds the
// page (claimed immediately before, completed immediately after, like the
// kernel's nfsd_write_dio_boundary_claim/_complete); the rest DONTCACHE.
io::result write_edges(const ctx &c, const segment &seg)
{
	std::array<edge_piece, 3> pieces{};
	const std::uint64_t w0 = c.io.offset, w1 = w0 + iov_total(c.io.iov, c.io.iov_count);
	const std::size_t n = edge_pieces(w0, w1, seg.offset, seg.offset + seg.length, pieces);
	std::uint64_t done = 0;
	for (std::size_t i = 0; i < n; ++i) {
		const edge_piece &p = pieces[i];
		const std::vector<struct iovec> part = slice(c.io.iov, c.io.iov_count, p.offset - c.io.offset, p.length);
		const std::uint64_t page = p.offset / k_boundary_page;
		io::result r;
		if (p.track && c.e.boundary.claim(c.f.boundary, page, boundary_tracker::clock::now(), *c.releases)) {
			DCACHE_SYNC_POINT("boundary.claim");
			r = write_buffered(c, part, p.offset);
			DCACHE_SYNC_POINT("boundary.complete");
			c.e.boundary.complete(c.f.boundary, page, static_cast<std::uint32_t>(p.offset % k_boundary_page),
					      r.ok() ? static_cast<std::uint32_t>(r.bytes) : 0, *c.releases);
		} else {
			r = write_dontcache(c, part, p.offset);
		}
		if (!r.ok())
			return done == 0 ? r : io::result::success(done);
		done += r.bytes;
		if (r.bytes < p.length)
			break; // short: the issue loop stops and reports it
	}
	return io::result::success(done);
}

// ---- WRITE --------------------------------------------------------------

io::result write_buffered(const ctx &c, const std::vector<struct iovec> &v, std::uint64_t offset) noexcept
{
	const io::result r = exec(c, io::op_kind::write, c.io.fd, offset, v.data(), static_cast<int>(v.size()), 0);
	if (r.ok())
		c.add(stat::buffered_bytes, r.bytes);
	return r;
}

io::result write_dontcache(const ctx &c, const std::vector<struct iovec> &v, std::uint64_t offset) noexcept
{
	if (!c.f.no_dontcache.load(std::memory_order_relaxed)) {
		const io::result r = exec(c, io::op_kind::write, c.io.fd, offset, v.data(),
					  static_cast<int>(v.size()), RWF_DONTCACHE);
		if (r.error != EOPNOTSUPP) {
			if (r.ok())
				c.add(stat::dontcache_bytes, r.bytes);
			return r;
		}
		note_no_dontcache(c);
	}
	// The DONTCACHE way without DONTCACHE: buffered, then write back and
	// drop what we wrote.
	c.add(stat::fallback_no_dontcache);
	const io::result r = write_buffered(c, v, offset);
	if (r.ok() && r.bytes > 0) {
		flush_range(c, offset, r.bytes);
		(void)drop_range(c, c.io.fd, offset, r.bytes);
	}
	return r;
}

io::result write_segment(const ctx &c, const segment &seg, int direct_fd)
{
	const std::vector<struct iovec> part = slice(c.io.iov, c.io.iov_count, seg.offset - c.io.offset, seg.length);
	switch (seg.kind) {
	case seg_kind::buffered: return write_buffered(c, part, seg.offset);
	case seg_kind::dontcache:
		return tracks_boundaries(c) ? write_edges(c, seg) : write_dontcache(c, part, seg.offset);
	case seg_kind::direct: break;
	}

	aligned_buffer bounce;
	struct iovec one {};
	const struct iovec *v = part.data();
	int n = static_cast<int>(part.size());
	if (seg.bounce) {
		if (!bounce.allocate(c.f.caps.mem_align, seg.length))
			return io::result::failure(ENOMEM);
		gather(part, bounce.data());
		one = {bounce.data(), static_cast<std::size_t>(seg.length)};
		v = &one;
		n = 1;
		c.add(stat::write_bounce_copies);
	}
	// DONTCACHE on the direct middle is inert when the write is direct, and
	// leaves nothing cached if the filesystem falls back to buffered.
	int rwf = c.f.no_dontcache.load(std::memory_order_relaxed) ? 0 : RWF_DONTCACHE;
	io::result r = exec(c, io::op_kind::write, direct_fd, seg.offset, v, n, rwf);
	if (r.error == EOPNOTSUPP && rwf != 0) {
		note_no_dontcache(c);
		rwf = 0;
		r = exec(c, io::op_kind::write, direct_fd, seg.offset, v, n, rwf);
	}
	if (r.error == EINVAL) {
		// Alignment the probe promised but the filesystem refused: do this
		// segment the non-direct way rather than fail the client.
		c.add(stat::fallback_direct_einval);
		if (first_time(c.e, log_direct_einval))
			log_msg(DCACHE_LOG_WARN, "dcache %s: direct write refused (EINVAL) at offset %llu length %llu: reissued buffered",
				c.e.name, static_cast<unsigned long long>(seg.offset),
				static_cast<unsigned long long>(seg.length));
		return c.s.direct_misaligned_dontcache ? write_dontcache(c, part, seg.offset)
						       : write_buffered(c, part, seg.offset);
	}
	if (r.ok())
		c.add(stat::direct_bytes, r.bytes);
	return r;
}

void count_write(const ctx &c, disposition d) noexcept
{
	switch (d) {
	case disposition::buffered: c.add(stat::write_buffered); break;
	case disposition::dontcache: c.add(stat::write_dontcache); break;
	case disposition::fadvise: c.add(stat::write_fadvise); break;
	case disposition::direct: c.add(stat::write_direct); break;
	case disposition::split: c.add(stat::write_split); break;
	case disposition::no_alignment: c.add(stat::write_not_direct_no_alignment); break;
	case disposition::too_small: c.add(stat::write_not_direct_too_small); break;
	case disposition::no_middle: c.add(stat::write_not_direct_no_middle); break;
	case disposition::mem_misaligned: c.add(stat::write_not_direct_mem_misaligned); break;
	case disposition::fallback:
		c.add(stat::write_not_direct_fallback);
		c.add(stat::fallback_no_odirect);
		break;
	}
}

dcache_io_result do_write(const ctx &request)
{
	// Declared first so it runs last: after the sync, with the lease gone.
	pending_releases pending(request.e, &request.f, request.io.fd);
	ctx c = request;
	c.releases = &pending.list;
	// Opportunistic age limit: the tracker has no thread of its own.
	c.e.boundary.reap(boundary_tracker::clock::now(), pending.list);

	dcache_io_result res{};
	c.add(stat::writes);
	const std::span<const struct iovec> iov(c.io.iov, static_cast<std::size_t>(c.io.iov_count));
	const std::size_t total = iov_total(c.io.iov, c.io.iov_count);

	plan_caps pc;
	if (is_direct_mode(c.s.io_cache_write)) {
		pc.dio = file_caps(c);
		pc.odirect = !c.f.no_odirect.load(std::memory_order_relaxed);
	}
	plan p = plan_write(c.s, pc, c.io.offset, iov);
	direct_lease lease;
	if (p.has_direct()) {
		lease = lease_direct(c, true);
		if (lease.fd < 0) {
			pc.odirect = false;
			p = plan_write(c.s, pc, c.io.offset, iov);
		}
	}
	count_write(c, p.disp);
	DTRACE_PROBE4(dcache, write_plan, c.io.offset, total, static_cast<int>(p.disp), static_cast<int>(p.nsegs));

	// Record what each segment should transfer before issuing it: a short
	// transfer must stop the loop and the reply must say exactly what was
	// written (nfsd once checked the remaining count instead).
	std::array<std::uint64_t, 3> expected{};
	std::uint64_t written = 0;
	int err = 0;
	for (std::size_t i = 0; i < p.nsegs; ++i) {
		expected[i] = p.segs[i].length;
		const io::result r = write_segment(c, p.segs[i], lease.fd);
		if (!r.ok()) {
			err = r.error;
			break;
		}
		written += r.bytes;
		if (r.bytes < expected[i]) {
			c.add(stat::short_transfers);
			break;
		}
	}
	lease = direct_lease{}; // the syncs below use the sub-FSAL's descriptor

	if (err != 0) {
		c.add(stat::errors);
		if (written == 0) {
			res.error = err;
			return res;
		}
		// Earlier segments landed: report a short write (the client
		// resends the rest and meets the error then), like write(2).
	}
	res.bytes = written;
	c.add(stat::write_bytes, written);

	// Stability: one sync per WRITE, after all segments, never per segment.
	// - the client asked stable: fsync (Ganesha 4.3 can only reply
	//   FILE_SYNC, so give FILE_SYNC semantics);
	// - direct_file_sync: fsync, reply FILE_SYNC, the client skips COMMIT;
	// - direct_data_sync: fdatasync, reply FILE_SYNC.  fdatasync persists
	//   the data and every piece of metadata needed to read it back (file
	//   size, extent allocation, unwritten-extent conversion); what it may
	//   leave behind are timestamps only.  After a crash the data written is
	//   there and readable, which is what the client's COMMIT would have
	//   bought; only mtime/ctime may be older than the write.
	// - otherwise UNSTABLE, no sync.
	io::op_kind sync_op = io::op_kind::fsync;
	bool sync = true;
	if (c.io.stable || c.s.io_cache_write == DCACHE_MODE_DIRECT_FILE_SYNC)
		sync_op = io::op_kind::fsync;
	else if (c.s.io_cache_write == DCACHE_MODE_DIRECT_DATA_SYNC)
		sync_op = io::op_kind::fdatasync;
	else
		sync = false;

	if (sync) {
		const io::result r = exec(c, sync_op, c.io.fd, 0, nullptr, 0, 0);
		c.add(sync_op == io::op_kind::fsync ? stat::syncs_fsync : stat::syncs_fdatasync);
		if (!r.ok()) {
			// Nothing may be claimed stable; the error goes to the client.
			c.add(stat::errors);
			res.error = r.error;
			return res;
		}
		res.stable = true;
		c.add(stat::writes_reply_stable);
		if (!c.io.stable)
			c.add(stat::writes_raised_stable);
		if (c.s.io_cache_write == DCACHE_MODE_FADVISE && c.io.stable && written > 0) {
			flush_range(c, c.io.offset, written);
			(void)drop_range(c, c.io.fd, c.io.offset, written);
		}
	}
	return res;
}

// ---- READ ---------------------------------------------------------------

io::result read_plain(const ctx &c, const struct iovec *iov, int n, std::uint64_t offset, bool dontcache) noexcept
{
	if (dontcache && !c.f.no_dontcache.load(std::memory_order_relaxed)) {
		const io::result r = exec(c, io::op_kind::read, c.io.fd, offset, iov, n, RWF_DONTCACHE);
		if (r.error != EOPNOTSUPP) {
			if (r.ok())
				c.add(stat::dontcache_bytes, r.bytes);
			return r;
		}
		note_no_dontcache(c);
	}
	const io::result r = exec(c, io::op_kind::read, c.io.fd, offset, iov, n, 0);
	if (r.ok())
		c.add(stat::buffered_bytes, r.bytes);
	if (dontcache) {
		c.add(stat::fallback_no_dontcache);
		if (r.ok() && r.bytes > 0)
			(void)drop_range(c, c.io.fd, offset, r.bytes);
	}
	return r;
}

void count_read(const ctx &c, disposition d) noexcept
{
	switch (d) {
	case disposition::buffered: c.add(stat::read_buffered); break;
	case disposition::dontcache: c.add(stat::read_dontcache); break;
	case disposition::fadvise: c.add(stat::read_fadvise); break;
	case disposition::direct:
	case disposition::split: c.add(stat::read_direct); break;
	case disposition::no_alignment: c.add(stat::read_not_direct_no_alignment); break;
	case disposition::too_small:
	case disposition::no_middle:
	case disposition::mem_misaligned: c.add(stat::read_not_direct_too_small); break;
	case disposition::fallback:
		c.add(stat::read_not_direct_fallback);
		c.add(stat::fallback_no_odirect);
		break;
	}
}

dcache_io_result do_read(const ctx &c)
{
	dcache_io_result res{};
	c.add(stat::reads);
	const std::span<const struct iovec> iov(c.io.iov, static_cast<std::size_t>(c.io.iov_count));
	const std::size_t total = iov_total(c.io.iov, c.io.iov_count);

	plan_caps pc;
	if (is_direct_mode(c.s.io_cache_read)) {
		pc.dio = file_caps(c);
		pc.odirect = !c.f.no_odirect.load(std::memory_order_relaxed);
	}
	plan p = plan_read(c.s, pc, c.io.offset, total, iov);
	direct_lease lease;
	if (p.has_direct()) {
		lease = lease_direct(c, false);
		if (lease.fd < 0) {
			pc.odirect = false;
			p = plan_read(c.s, pc, c.io.offset, total, iov);
		}
	}
	count_read(c, p.disp);
	DTRACE_PROBE4(dcache, read_plan, c.io.offset, total, static_cast<int>(p.disp), static_cast<int>(p.nsegs));
	if (p.nsegs == 0)
		return res;

	const segment &seg = p.segs[0];
	io::result r;
	bool eof = false;
	if (seg.kind != seg_kind::direct) {
		r = read_plain(c, c.io.iov, c.io.iov_count, c.io.offset, seg.kind == seg_kind::dontcache);
		eof = r.ok() && r.bytes < total;
	} else if (!seg.bounce) {
		r = exec(c, io::op_kind::read, lease.fd, seg.offset, c.io.iov, c.io.iov_count, 0);
		eof = r.ok() && r.bytes < total;
		if (r.ok())
			c.add(stat::direct_bytes, r.bytes);
	} else {
		aligned_buffer buf;
		if (!buf.allocate(c.f.caps.mem_align, seg.length)) {
			r = io::result::failure(ENOMEM);
		} else {
			struct iovec one {buf.data(), static_cast<std::size_t>(seg.length)};
			r = exec(c, io::op_kind::read, lease.fd, seg.offset, &one, 1, 0);
			if (r.ok()) {
				// Widened read: skip the pad before the requested offset;
				// a short read means end of file, so return what exists.
				const std::uint64_t pad = c.io.offset - seg.offset;
				const std::uint64_t avail = r.bytes > pad ? r.bytes - pad : 0;
				const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(avail, total));
				scatter(buf.data() + pad, n, c.io.iov, c.io.iov_count);
				eof = r.bytes < seg.length && pad + n >= r.bytes;
				c.add(stat::read_bounce_copies);
				c.add(stat::direct_bytes, n);
				r.bytes = n;
			}
		}
	}
	if (seg.kind == seg_kind::direct && r.error == EINVAL) {
		c.add(stat::fallback_direct_einval);
		if (first_time(c.e, log_direct_einval))
			log_msg(DCACHE_LOG_WARN, "dcache %s: direct read refused (EINVAL): reissued DONTCACHE", c.e.name);
		r = read_plain(c, c.io.iov, c.io.iov_count, c.io.offset, true);
		eof = r.ok() && r.bytes < total;
	}
	if (!r.ok()) {
		c.add(stat::errors);
		res.error = r.error;
		return res;
	}
	res.bytes = r.bytes;
	res.eof = eof;
	c.add(stat::read_bytes, r.bytes);
	if (c.s.io_cache_read == DCACHE_MODE_FADVISE && r.bytes > 0)
		(void)drop_read_range(c, r.bytes, eof);
	return res;
}

std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point start) noexcept
{
	return static_cast<std::uint64_t>(
		std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
			.count());
}

bool valid_io(const dcache_io *io) noexcept
{
	if (io == nullptr || io->iov_count < 0 || (io->iov == nullptr && io->iov_count > 0) || io->fd < 0)
		return false;
	const std::size_t total = iov_total(io->iov, io->iov_count);
	constexpr auto max_off = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
	return io->offset <= max_off && total <= max_off - io->offset;
}

dcache_io_result failed(int err) noexcept
{
	dcache_io_result r{};
	r.error = err;
	return r;
}

} // namespace

std::uint64_t pack_settings(const dcache_settings &s) noexcept
{
	return (static_cast<std::uint64_t>(s.io_cache_read) & 0xff) |
	       ((static_cast<std::uint64_t>(s.io_cache_write) & 0xff) << 8) |
	       ((static_cast<std::uint64_t>(s.direct_misaligned_num_pages) & 0xffff) << 16) |
	       (static_cast<std::uint64_t>(s.direct_misaligned_dontcache) << 32) |
	       ((static_cast<std::uint64_t>(s.direct_misaligned_memory) & 1) << 33) |
	       (static_cast<std::uint64_t>(s.boundary_tracking) << 34);
}

dcache_settings unpack_settings(std::uint64_t v) noexcept
{
	dcache_settings s{};
	s.io_cache_read = static_cast<dcache_mode>(v & 0xff);
	s.io_cache_write = static_cast<dcache_mode>((v >> 8) & 0xff);
	s.direct_misaligned_num_pages = static_cast<std::uint32_t>((v >> 16) & 0xffff);
	s.direct_misaligned_dontcache = ((v >> 32) & 1) != 0;
	s.direct_misaligned_memory = static_cast<dcache_mem_misaligned>((v >> 33) & 1);
	s.boundary_tracking = ((v >> 34) & 1) != 0;
	// The tracker's limits do not fit the word; they live in the tracker
	// (a request seeing old limits with new flags is harmless).
	return s;
}

dcache_export *export_new_with_backend(const dcache_settings *settings, const char *name,
				       io::backend *backend) noexcept
{
	auto *e = new (std::nothrow) dcache_export;
	if (e == nullptr)
		return nullptr;
	const dcache_settings s = settings ? *settings : dcache_settings_default();
	e->packed_settings.store(pack_settings(s));
	e->boundary.set_limits(s.boundary_max_pages, s.boundary_max_age_ms);
	std::snprintf(e->name, sizeof(e->name), "%s", name ? name : "(unnamed)");
	e->backend = backend;
	return e;
}

void export_unref(dcache_export *exp) noexcept
{
	if (exp != nullptr && exp->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
		delete exp;
}

} // namespace dcache::core

using namespace dcache::core;

extern "C" {

struct dcache_export *dcache_export_new(const struct dcache_settings *settings, const char *name)
{
	try {
		auto backend = std::make_unique<dcache::io::sync_backend>();
		dcache_export *e = export_new_with_backend(settings, name, backend.get());
		if (e != nullptr)
			e->owned_backend = std::move(backend);
		return e;
	} catch (...) {
		return nullptr;
	}
}

void dcache_export_update(struct dcache_export *exp, const struct dcache_settings *settings)
{
	if (exp != nullptr && settings != nullptr) {
		exp->boundary.set_limits(settings->boundary_max_pages, settings->boundary_max_age_ms);
		exp->packed_settings.store(pack_settings(*settings), std::memory_order_release);
	}
}

struct dcache_settings dcache_export_settings(const struct dcache_export *exp)
{
	if (exp == nullptr)
		return dcache_settings_default();
	dcache_settings s = unpack_settings(exp->packed_settings.load(std::memory_order_acquire));
	s.boundary_max_pages = exp->boundary.max_pages();
	s.boundary_max_age_ms = exp->boundary.max_age_ms();
	return s;
}

// The adapter's unexport: every held boundary page of the export is
// written back and dropped (through each file's O_DIRECT descriptor; files
// may outlive the export), then the adapter's reference goes.
void dcache_export_free(struct dcache_export *exp)
{
	if (exp == nullptr)
		return;
	try {
		boundary_tracker::release_list list;
		exp->boundary.take_all(list);
		release_boundary(*exp, list, nullptr, -1);
	} catch (...) {
		// No memory for the list: the pages stay ordinary cached pages.
	}
	export_unref(exp);
}

struct dcache_file *dcache_file_new(struct dcache_export *exp)
{
	auto *f = new (std::nothrow) dcache_file;
	if (f != nullptr && exp != nullptr) {
		exp->refs.fetch_add(1, std::memory_order_relaxed);
		f->exp = exp;
	}
	return f;
}

void dcache_file_close(struct dcache_file *file)
{
	if (file == nullptr)
		return;
	try {
		// Held boundary pages first, through the O_DIRECT descriptor
		// that is about to close.  Pages with a writer in flight stay
		// (their writer completes them).
		if (file->exp != nullptr) {
			boundary_tracker::release_list list;
			file->exp->boundary.take_file(file->boundary, 0, UINT64_MAX, list);
			release_boundary(*file->exp, list, file, -1);
			// Another file's request may be releasing one of our pages
			// (age, ceiling) through direct_fd: let it finish first.
			file->exp->boundary.wait_idle(file->boundary);
		}
		std::unique_lock lock(file->fd_mutex); // waits for I/O in flight
		if (file->direct_fd >= 0 && file->exp != nullptr)
			file->exp->backend->close_fd(file->direct_fd);
		file->direct_fd = -1;
		file->direct_fd_writable = false;
	} catch (...) {
		// std::system_error from the lock: nothing sensible to do.
	}
}

void dcache_file_free(struct dcache_file *file)
{
	if (file == nullptr)
		return;
	dcache_file_close(file);
	if (file->exp != nullptr) {
		try {
			// No request runs on a file being freed, but another file's
			// request may be releasing one of its pages (age, ceiling).
			boundary_tracker::release_list list;
			file->exp->boundary.take_file(file->boundary, 0, UINT64_MAX, list, true);
			release_boundary(*file->exp, list, file, -1);
			file->exp->boundary.wait_idle(file->boundary);
		} catch (...) {
		}
	}
	export_unref(file->exp);
	delete file;
}

struct dcache_io_result dcache_read(struct dcache_export *exp, struct dcache_file *file,
				    const struct dcache_io *io)
{
	if (exp == nullptr || file == nullptr || !valid_io(io))
		return failed(EINVAL);
	try {
		const ctx c{*exp, *file, *io, unpack_settings(exp->packed_settings.load(std::memory_order_acquire))};
		const auto start = std::chrono::steady_clock::now();
		const dcache_io_result r = do_read(c);
		exp->stats.record(DCACHE_OP_READ, elapsed_ns(start));
		return r;
	} catch (const std::bad_alloc &) {
		exp->stats.add(stat::errors);
		return failed(ENOMEM);
	} catch (...) {
		exp->stats.add(stat::errors);
		return failed(EIO);
	}
}

struct dcache_io_result dcache_write(struct dcache_export *exp, struct dcache_file *file,
				     const struct dcache_io *io)
{
	if (exp == nullptr || file == nullptr || !valid_io(io))
		return failed(EINVAL);
	try {
		const ctx c{*exp, *file, *io, unpack_settings(exp->packed_settings.load(std::memory_order_acquire))};
		const auto start = std::chrono::steady_clock::now();
		const dcache_io_result r = do_write(c);
		exp->stats.record(DCACHE_OP_WRITE, elapsed_ns(start));
		return r;
	} catch (const std::bad_alloc &) {
		exp->stats.add(stat::errors);
		return failed(ENOMEM);
	} catch (...) {
		exp->stats.add(stat::errors);
		return failed(EIO);
	}
}

int dcache_after_commit(struct dcache_export *exp, struct dcache_file *file, int fd, uint64_t offset,
			uint64_t len, uint64_t sync_ns)
{
	if (exp == nullptr || fd < 0)
		return EINVAL;
	try {
		exp->stats.add(stat::commits);
		exp->stats.record(DCACHE_OP_COMMIT, sync_ns);
		// The COMMIT made the held pages in its range clean: drop them (a
		// neighbour still to come will read its page back; COMMIT is where
		// the client says it is done with these bytes for now).
		if (file != nullptr) {
			boundary_tracker::release_list list;
			const std::uint64_t first = offset / k_boundary_page;
			const std::uint64_t last = (len == 0 || len > UINT64_MAX - offset)
							   ? UINT64_MAX
							   : (offset + len - 1) / k_boundary_page;
			exp->boundary.take_file(file->boundary, first, last, list);
			exp->boundary.reap(boundary_tracker::clock::now(), list);
			release_boundary(*exp, list, file, fd);
		}
		const dcache_settings s = unpack_settings(exp->packed_settings.load(std::memory_order_acquire));
		if (s.io_cache_write != DCACHE_MODE_FADVISE)
			return 0;
		// The COMMIT's fsync left the range clean, so DONTNEED drops it;
		// len 0 is posix_fadvise's own "to end of file".
		dcache_file scratch;
		const dcache_io io{fd, offset, nullptr, 0, false};
		const ctx c{*exp, file ? *file : scratch, io, s};
		return drop_range(c, fd, offset, len);
	} catch (...) {
		return EIO;
	}
}

size_t dcache_stats_count(void)
{
	return k_stat_count;
}

const char *dcache_stats_name(size_t index)
{
	return index < k_stat_count ? k_stat_names[index] : nullptr;
}

struct dcache_latency dcache_stats_latency(const struct dcache_export *exp, enum dcache_op op)
{
	return exp != nullptr ? exp->stats.latency(op) : dcache_latency{};
}

const char *dcache_op_name(enum dcache_op op)
{
	switch (op) {
	case DCACHE_OP_READ:
		return "read";
	case DCACHE_OP_WRITE:
		return "write";
	case DCACHE_OP_COMMIT:
		return "commit";
	case DCACHE_OP_COUNT:
		break;
	}
	return "?";
}

uint64_t dcache_stats_value(const struct dcache_export *exp, size_t index)
{
	return exp != nullptr ? exp->stats.get(index) : 0;
}

void dcache_stats_reset(struct dcache_export *exp)
{
	if (exp != nullptr)
		exp->stats.reset();
}

void dcache_set_log(dcache_log_fn fn)
{
	g_log.store(fn, std::memory_order_release);
}

} // extern "C"
