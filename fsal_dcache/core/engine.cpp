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
#include <string>
#include <thread>
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
	log_no_nowait = 1u << 7,
	log_open_buffered_error = 1u << 8,
	log_no_personality = 1u << 9,
	log_direct_eio = 1u << 10,
	log_writeback_error = 1u << 11,
	log_direct_nospace = 1u << 12,
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
	// written back and dropped when the request is done (see async_op).
	boundary_tracker::release_list *releases = nullptr;
	// The caller's descriptor, valid during the start call only (io.fd
	// may be the engine's own twin).
	int caller_fd = -1;

	io::backend &b() const noexcept { return *e.backend; }
	void add(stat st, std::uint64_t n = 1) const noexcept { e.stats.add(st, n); }
};

io::dio_caps file_caps(const ctx &c)
{
	if (c.f.caps_probed.load(std::memory_order_acquire))
		return c.f.caps;
	std::unique_lock lock(c.f.fd_mutex);
	if (!c.f.caps_probed.load(std::memory_order_relaxed)) {
		c.f.caps = c.b().probe_dio(c.caller_fd >= 0 ? c.caller_fd : c.io.fd);
		c.f.caps_probed.store(true, std::memory_order_release);
		if (!c.f.caps.known() && first_time(c.e, log_no_alignment))
			log_msg(DCACHE_LOG_WARN,
				"dcache %s: the filesystem reports no direct-I/O alignment (statx DIOALIGN and XFS_IOC_DIOINFO gave nothing): its files are served the DONTCACHE way instead of O_DIRECT (counted as *_not_direct_no_alignment)",
				c.e.name);
	}
	return c.f.caps;
}

// A descriptor just opened, owned from here on; closed again (and empty
// returned) if that fails.
fd_ref adopt(io::backend &b, const io::open_result &r) noexcept
{
	try {
		return std::make_shared<const owned_fd>(&b, r.fd, r.writable);
	} catch (...) {
		b.close_fd(r.fd);
		return {};
	}
}

// The file's own descriptors.  A request copies the shared_ptr and keeps it
// until its completion: a close (which only drops the file's reference)
// never pulls a descriptor from under a request in flight, and never waits
// for one either.
fd_ref lease_direct(const ctx &c, bool for_write)
{
	dcache_file &f = c.f;
	{
		std::shared_lock lock(f.fd_mutex);
		if (f.direct && (!for_write || f.direct->writable))
			return f.direct;
		if (f.no_odirect.load(std::memory_order_relaxed))
			return {};
	}
	std::unique_lock u(f.fd_mutex);
	if (f.direct && (!for_write || f.direct->writable))
		return f.direct;
	if (f.no_odirect.load(std::memory_order_relaxed))
		return {};
	// None yet, or first opened from a read-only descriptor while this
	// WRITE's descriptor is writable: (re)open from it.  A replaced one is
	// closed when its last request lets go.
	const io::open_result r = c.b().open_direct(c.caller_fd);
	if (r.error == EINVAL) {
		// The filesystem refuses O_DIRECT: for good on this file.
		f.no_odirect.store(true, std::memory_order_relaxed);
		if (first_time(c.e, log_no_odirect))
			log_msg(DCACHE_LOG_WARN,
				"dcache %s: O_DIRECT refused (EINVAL at open): direct mode falls back to DONTCACHE on such files",
				c.e.name);
		return {};
	}
	if (r.error != 0) {
		if (first_time(c.e, log_open_error))
			log_msg(DCACHE_LOG_WARN, "dcache %s: cannot open an O_DIRECT descriptor (%s): this request goes the DONTCACHE way",
				c.e.name, std::strerror(r.error));
		return {};
	}
	f.direct = adopt(c.b(), r);
	return f.direct;
}

// The buffered twin for asynchronous requests (the caller's descriptor is
// only valid during the start call).  Empty on failure: the request then
// runs synchronously on the caller's descriptor.
fd_ref lease_buffered(const ctx &c, bool for_write)
{
	dcache_file &f = c.f;
	{
		std::shared_lock lock(f.fd_mutex);
		if (f.buffered && (!for_write || f.buffered->writable))
			return f.buffered;
	}
	std::unique_lock u(f.fd_mutex);
	if (f.buffered && (!for_write || f.buffered->writable))
		return f.buffered;
	const io::open_result r = c.b().open_buffered(c.caller_fd);
	if (r.error != 0) {
		if (first_time(c.e, log_open_buffered_error))
			log_msg(DCACHE_LOG_WARN, "dcache %s: cannot reopen a descriptor for asynchronous I/O (%s): such requests run synchronously",
				c.e.name, std::strerror(r.error));
		return {};
	}
	f.buffered = adopt(c.b(), r);
	return f.buffered;
}


void note_no_dontcache(const ctx &c) noexcept
{
	c.f.no_dontcache.store(true, std::memory_order_relaxed);
	if (first_time(c.e, log_no_dontcache))
		log_msg(DCACHE_LOG_WARN,
			"dcache %s: RWF_DONTCACHE not supported (EOPNOTSUPP: kernel < 6.14 or filesystem without it): using buffered I/O + POSIX_FADV_DONTNEED",
			c.e.name);
}

// One range request (fadvise, sync_file_range) through the backend.
io::result exec_range(const ctx &c, io::op_kind op, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	return c.b().execute(io::request{.op = op, .fd = fd, .offset = offset, .length = length});
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
	const io::result r = exec_range(c, io::op_kind::fadvise_dontneed, fd, offset, length);
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
	const io::result r = exec_range(c, io::op_kind::sync_range, c.io.fd, offset, length);
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
// through that file's O_DIRECT (or buffered) descriptor (same inode, same
// page cache), referenced so a close cannot pull it away; a file without one is left
// to the kernel's own writeback (counted).  The caller must hold no
// fd_mutex: this takes other files' ones.
void release_boundary(dcache_export &e, boundary_tracker::release_list &list, const dcache_file *own,
		      int own_fd) noexcept
{
	for (const auto &r : list) {
		DCACHE_SYNC_POINT("boundary.release");
		dcache_file *f = r.file->owner();
		const std::uint64_t off = r.page * k_page_size;
		DTRACE_PROBE3(dcache, boundary_release, off, static_cast<int>(r.why), f == own);
		if (f == own && own_fd >= 0) {
			flush_and_drop(e, own_fd, off, k_page_size);
		} else {
			try {
				fd_ref other;
				{
					std::shared_lock lock(f->fd_mutex);
					other = f->direct ? f->direct : f->buffered;
				}
				if (other)
					flush_and_drop(e, other->fd, off, k_page_size);
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

// ---- WRITE --------------------------------------------------------------

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


// ---- the asynchronous request ---------------------------------------------
//
// One READ or WRITE from start to completion is an async_op: a chain of
// steps, each one backend request.  next() says what to issue, on_result()
// takes its completion; drive() alternates them.  A completion that arrives
// inside submit() (synchronous backend) is processed by the submitter's
// loop, one that arrives later by the completion thread, which then drives
// the rest of the chain: so each segment's completion submits the next, a
// WRITE's sync is submitted only after all its segments completed, and the
// bounce buffer lives until the direct middle completed.

struct step {
	enum class kind : std::uint8_t { buffered, dontcache, direct, tracked };
	kind k = kind::buffered;
	std::uint64_t offset = 0;
	std::uint64_t length = 0; // expected transfer, recorded before issue
	bool bounce = false;
	// Cached bytes of a direct-mode WRITE: written back as soon as they are
	// written (see writes_back_cached()).
	bool writeback = false;
};

// In a direct mode every byte a WRITE leaves in the page cache (a held
// boundary piece, a plain buffered edge, a refused middle reissued
// buffered) is written back at once, before the WRITE goes on: its
// pages stay cached, but no delayed allocation is left behind.  Left
// dirty, such a page keeps an XFS delalloc extent - with speculative
// preallocation past EOF when the piece extended the file - that the
// O_DIRECT I/O of this and later WRITEs and READs then lands on: XFS
// answers a direct READ across it with EIO ("Direct I/O collision with
// buffered writes"), and a direct WRITE into it converts it piece by piece,
// the pattern that drains the extent's indirect-block reservation and
// shuts the filesystem down (docs/architecture.md, "Delayed allocation
// and O_DIRECT").  A DONTCACHE piece needs nothing: the kernel starts its
// write-back inside the write.
bool writes_back_cached(const ctx &c) noexcept
{
	return is_direct_mode(c.s.io_cache_write);
}

void inflight_add(dcache_export &e) noexcept
{
	std::lock_guard lock(e.inflight_mutex);
	++e.inflight;
}

// The op's very last touch of the export: after it the export may go.
void inflight_done(dcache_export &e) noexcept
{
	std::lock_guard lock(e.inflight_mutex);
	if (--e.inflight == 0)
		e.inflight_cv.notify_all();
}

// Out of room for an O_DIRECT write: no space, quota, or the file-size
// limit.  The direct write fails whole, where a buffered one writes what
// fits (and VFS answers what fits, then NOSPC).
bool no_room(int err) noexcept
{
	return err == ENOSPC || err == EDQUOT || err == EFBIG;
}

// A direct READ or WRITE segment the kernel refused: counted, logged once
// per export and reason; the caller reissues it through the page cache.
void note_direct_refused(const ctx &c, int err, const char *what, std::uint64_t off, std::uint64_t len) noexcept
{
	const bool eio = err == EIO, room = no_room(err);
	c.add(eio ? stat::fallback_direct_eio : room ? stat::fallback_direct_nospace : stat::fallback_direct_einval);
	if (first_time(c.e, eio ? log_direct_eio : room ? log_direct_nospace : log_direct_einval))
		log_msg(DCACHE_LOG_WARN, "dcache %s: direct %s failed (%s) at offset %llu length %llu: reissued through the page cache%s",
			c.e.name, what, strerrorname_np(err), static_cast<unsigned long long>(off),
			static_cast<unsigned long long>(len),
			eio    ? " (a failing device reports again at the sync or COMMIT)"
			: room ? ", which writes what fits; the WRITE that cannot make progress gets the error"
			       : "");
}

class async_op final : public io::completion {
public:
	async_op(dcache_export &e, dcache_file &f, const dcache_io &in, bool write, dcache_io_done_fn done,
		 void *done_ctx)
		: _iovs(in.iov, in.iov + in.iov_count), _io{in.fd, in.offset, _iovs.data(), in.iov_count, in.stable},
		  _c{e, f, _io, unpack_settings(e.packed_settings.load(std::memory_order_acquire))}, _write(write),
		  _done(done), _done_ctx(done_ctx), _start(std::chrono::steady_clock::now())
	{
		_c.caller_fd = in.fd;
		inflight_add(e);
	}
	async_op(const async_op &) = delete;
	async_op &operator=(const async_op &) = delete;
	~async_op() = default;

	// Chooses descriptors and plans (runs in the start call, where the
	// caller's descriptor is valid).  caller_waits: the blocking API,
	// whose descriptor outlives the whole request.
	void prepare(bool caller_waits);
	// The next request to issue; false when the request is finished.
	[[nodiscard]] bool next(io::request &req);
	void on_result(io::result r);
	void fail(int err) noexcept
	{
		_res = dcache_io_result{};
		_res.error = err;
		_c.add(stat::errors);
		_stage = stage::done;
		_wb_pending = false;
	}
	// Releases everything of the engine; returns the reply.
	dcache_io_result finish() noexcept;

	void complete(io::result r) noexcept override;

	[[nodiscard]] bool blocking() const noexcept { return _blocking; }
	// One step of a blocking request: without captured credentials, as a
	// plain syscall in this (the caller's) thread.
	[[nodiscard]] io::result run_now(const io::request &req) noexcept
	{
		return _in_caller_thread ? _c.b().execute_now(req) : _c.b().execute(req);
	}
	[[nodiscard]] io::backend &backend() const noexcept { return _c.b(); }
	[[nodiscard]] dcache_export &exp() const noexcept { return _c.e; }
	[[nodiscard]] dcache_io_done_fn done_fn() const noexcept { return _done; }
	[[nodiscard]] void *done_ctx() const noexcept { return _done_ctx; }

	// Submission hand-off (see drive()).
	std::atomic<int> handoff{0};
	io::result last;

private:
	enum class stage : std::uint8_t { steps, after_steps, syncing, reading, done };

	void prepare_write();
	void enter_fence();
	[[nodiscard]] bool fence_as_buffered(const step &st);
	void prepare_read();
	void try_nowait();
	[[nodiscard]] bool next_write(io::request &req);
	[[nodiscard]] bool next_read(io::request &req);
	void on_write_result(io::result r);
	void writeback_after(const step &st, std::size_t bytes) noexcept;
	void on_writeback_result(io::result r) noexcept;
	void on_sync_result(io::result r);
	void on_read_result(io::result r);
	void rw_request(io::request &req, io::op_kind op, int fd, std::uint64_t off, int rwf) const noexcept
	{
		req.op = op;
		req.fd = fd;
		req.offset = off;
		req.iov = _cur.data();
		req.iov_count = static_cast<int>(_cur.size());
		req.rwf = rwf;
		req.personality = _creds.personality();
	}
	void capture_credentials();

	std::vector<struct iovec> _iovs; // copy of the caller's array
	dcache_io _io;                    // fd: the descriptor non-direct steps use
	ctx _c;
	const bool _write;
	const dcache_io_done_fn _done;
	void *const _done_ctx;
	const std::chrono::steady_clock::time_point _start;

	bool _blocking = false; // execute() instead of submit()
	bool _in_caller_thread = false; // blocking, and execute_now(): no credentials captured
	io::credentials _creds; // the caller's, for WRITE steps issued elsewhere
	fd_ref _own;            // the buffered twin, when _io.fd is it
	fd_ref _direct;         // the O_DIRECT lease
	stage _stage = stage::done;
	dcache_io_result _res{};
	std::vector<struct iovec> _cur;           // iovecs of the request in flight
	std::unique_ptr<aligned_buffer> _bounce;  // lives until its step completed
	std::uint64_t _total = 0;

	// WRITE
	boundary_tracker::release_list _releases;
	std::vector<step> _steps;
	std::vector<write_fence::pages> _fenced; // what this WRITE holds in _c.f.fence
	std::size_t _idx = 0;
	std::uint64_t _written = 0;
	int _err = 0;
	int _issued_rwf = 0;        // rwf of the step in flight
	bool _fallback_drop = false; // DONTCACHE asked, buffered issued
	bool _claimed = false;       // tracked step: the tracker holds its page
	// The write-back of the cached step just written (step::writeback):
	// pending, then in flight; [_wb_lo, _wb_hi) its pages.
	bool _wb_pending = false;
	bool _wb_in_flight = false;
	std::uint64_t _wb_lo = 0, _wb_hi = 0;
	io::op_kind _sync_op = io::op_kind::fsync;

	// READ
	segment _seg;
	std::uint64_t _base = 0; // bytes the RWF_NOWAIT attempt already read
};

void async_op::prepare(bool caller_waits)
{
	io::backend &b = _c.b();
	if (!b.completes_inline() && !caller_waits) {
		_own = lease_buffered(_c, _write);
		if (_own)
			_io.fd = _own->fd;
		else
			_blocking = true; // only the caller's descriptor: use it now
	}
	// Only WRITEs carry the caller's credentials: what a write does
	// depends on them (setuid/setgid clearing, quota, and CAP_FSETID,
	// which root holds).  A READ's outcome does not (access was checked at
	// open; atime does not depend on who reads), so it skips the two
	// io_uring_register calls.
	if (_write && !b.completes_inline())
		capture_credentials();
	if (_write)
		prepare_write();
	else
		prepare_read();
}

// Registers the calling thread's credentials for every step of this WRITE
// (later steps are submitted from the completion thread).  If that fails,
// the WRITE runs in this thread, as plain syscalls, which is correct.
void async_op::capture_credentials()
{
	io::credentials_result r = _c.b().capture_credentials();
	if (r.error == 0) {
		_creds = std::move(r.creds);
		return;
	}
	_c.add(stat::fallback_no_personality);
	if (first_time(_c.e, log_no_personality))
		log_msg(DCACHE_LOG_WARN,
			"dcache %s: cannot register the client's credentials with io_uring (%s): such WRITEs run synchronously in the calling thread",
			_c.e.name, std::strerror(r.error));
	_blocking = true;
	_in_caller_thread = true;
}

void async_op::prepare_write()
{
	_c.releases = &_releases;
	// Opportunistic age limit: the tracker has no thread of its own.
	_c.e.boundary.reap(boundary_tracker::clock::now(), _releases);
	_c.add(stat::writes);
	const std::span<const struct iovec> iov(_io.iov, static_cast<std::size_t>(_io.iov_count));
	_total = iov_total(_io.iov, _io.iov_count);

	plan_caps pc;
	if (is_direct_mode(_c.s.io_cache_write)) {
		pc.dio = file_caps(_c);
		pc.odirect = !_c.f.no_odirect.load(std::memory_order_relaxed);
	}
	plan p = plan_write(_c.s, pc, _io.offset, iov);
	if (p.has_direct()) {
		_direct = lease_direct(_c, true);
		if (!_direct) {
			pc.odirect = false;
			p = plan_write(_c.s, pc, _io.offset, iov);
		}
	}
	count_write(_c, p.disp);
	DTRACE_PROBE4(dcache, write_plan, _io.offset, _total, static_cast<int>(p.disp), static_cast<int>(p.nsegs));

	// Each segment (an edge with boundary tracking: each page piece) is
	// one step whose expected length is recorded here, before issue: a
	// short transfer must stop the chain and the reply must say exactly
	// what was written (nfsd once checked the remaining count instead).
	const std::uint64_t w0 = _io.offset, w1 = w0 + _total;
	const bool wb = writes_back_cached(_c);
	for (const segment &seg : p.segments()) {
		switch (seg.kind) {
		case seg_kind::buffered:
			_steps.push_back({step::kind::buffered, seg.offset, seg.length, false, wb});
			break;
		case seg_kind::direct:
			_steps.push_back({step::kind::direct, seg.offset, seg.length, seg.bounce, false});
			break;
		case seg_kind::dontcache:
			if (tracks_boundaries(_c)) {
				std::array<edge_piece, 3> pieces{};
				const std::size_t n = edge_pieces(w0, w1, seg.offset, seg.offset + seg.length, pieces);
				for (std::size_t i = 0; i < n; ++i)
					_steps.push_back({pieces[i].track ? step::kind::tracked : step::kind::dontcache,
							  pieces[i].offset, pieces[i].length, false,
							  pieces[i].track && wb});
			} else {
				_steps.push_back({step::kind::dontcache, seg.offset, seg.length, false, false});
			}
			break;
		}
	}
	enter_fence();
	_stage = stage::steps;
}

// Before anything is issued: the pages of every step, by kind, in the
// file's fence (see write_fence.h).
void async_op::enter_fence()
{
	std::vector<write_fence::pages> mine;
	for (const step &st : _steps) {
		if (st.length == 0)
			continue;
		const auto p = write_fence::pages::of(st.offset, st.length,
						      st.k == step::kind::direct ? write_fence::kind::direct
										 : write_fence::kind::buffered);
		if (!mine.empty() && mine.back().k == p.k && p.first <= mine.back().last + 1)
			mine.back().last = std::max(mine.back().last, p.last);
		else
			mine.push_back(p);
	}
	if (mine.empty())
		return;
	if (_c.f.fence.enter(mine))
		_c.add(stat::write_fence_waits);
	_fenced = std::move(mine); // from here on finish() leaves
}

// A direct step about to be reissued through the page cache: its pages
// become buffered in the fence, if no other WRITE holds them direct.
bool async_op::fence_as_buffered(const step &st)
{
	const auto p = write_fence::pages::of(st.offset, st.length, write_fence::kind::direct);
	const auto it = std::find(_fenced.begin(), _fenced.end(), p);
	if (it == _fenced.end())
		return true; // not fenced (nothing was entered): nothing to change
	if (!_c.f.fence.try_make_buffered(p))
		return false;
	it->k = write_fence::kind::buffered; // what leave() must find
	return true;
}

bool async_op::next_write(io::request &req)
{
	if (_wb_pending) {
		// Before the next step (a direct middle may follow) and before
		// the sync: the cached bytes just written go to the filesystem's
		// write-back now.
		_wb_pending = false;
		_wb_in_flight = true;
		req = io::request{.op = io::op_kind::writeback, .fd = _io.fd, .offset = _wb_lo, .length = _wb_hi - _wb_lo};
		return true;
	}
	if (_stage == stage::steps) {
		if (_idx < _steps.size()) {
			step &st = _steps[_idx];
			_cur = slice(_io.iov, _io.iov_count, st.offset - _io.offset, st.length);
			_fallback_drop = false;
			_claimed = false;
			if (st.k == step::kind::tracked) {
				_claimed = _c.e.boundary.claim(_c.f.boundary, st.offset / k_page_size,
							       boundary_tracker::clock::now(), _releases);
				if (_claimed) {
					DCACHE_SYNC_POINT("boundary.claim");
					rw_request(req, io::op_kind::write, _io.fd, st.offset, 0);
					_issued_rwf = 0;
					return true;
				}
				st.k = step::kind::dontcache; // refused: the ordinary edge
			}
			switch (st.k) {
			case step::kind::buffered:
				_issued_rwf = 0;
				rw_request(req, io::op_kind::write, _io.fd, st.offset, 0);
				return true;
			case step::kind::dontcache:
				_fallback_drop = _c.f.no_dontcache.load(std::memory_order_relaxed);
				_issued_rwf = _fallback_drop ? 0 : RWF_DONTCACHE;
				rw_request(req, io::op_kind::write, _io.fd, st.offset, _issued_rwf);
				return true;
			case step::kind::direct:
				if (st.bounce && !_bounce) {
					auto buf = std::make_unique<aligned_buffer>();
					if (!buf->allocate(_c.f.caps.mem_align, st.length)) {
						_err = ENOMEM;
						_stage = stage::after_steps;
						return next_write(req);
					}
					gather(_cur, buf->data());
					_bounce = std::move(buf);
					_c.add(stat::write_bounce_copies);
				}
				if (_bounce)
					_cur.assign(1, {_bounce->data(), static_cast<std::size_t>(st.length)});
				// DONTCACHE on the direct middle is inert when the write
				// is direct, and leaves nothing cached if the filesystem
				// falls back to buffered.  _issued_rwf keeps a retry's 0.
				if (_issued_rwf != -1)
					_issued_rwf = _c.f.no_dontcache.load(std::memory_order_relaxed) ? 0 : RWF_DONTCACHE;
				else
					_issued_rwf = 0;
				rw_request(req, io::op_kind::write, _direct->fd, st.offset, _issued_rwf);
				return true;
			case step::kind::tracked: break;
			}
		}
		_stage = stage::after_steps;
	}
	if (_stage == stage::after_steps) {
		_bounce.reset();
		if (_err != 0) {
			_c.add(stat::errors);
			if (_written == 0) {
				_res.error = _err;
				_stage = stage::done;
				return false;
			}
			// Earlier segments landed: report a short write (the client
			// resends the rest and meets the error then), like write(2).
		}
		_res.bytes = _written;
		_c.add(stat::write_bytes, _written);
		// Stability: one sync per WRITE, after all segments completed,
		// never per segment (io_uring does not order it after earlier
		// writes: it is submitted from the last segment's completion).
		// - the client asked stable: fsync (Ganesha 4.3 can only reply
		//   FILE_SYNC, so give FILE_SYNC semantics);
		// - direct_file_sync: fsync, reply FILE_SYNC, the client skips COMMIT;
		// - direct_data_sync: fdatasync, reply FILE_SYNC.  fdatasync
		//   persists the data and every piece of metadata needed to read
		//   it back (file size, extent allocation, unwritten-extent
		//   conversion); what it may leave behind are timestamps only.
		// - otherwise UNSTABLE, no sync.
		bool sync = true;
		if (_io.stable || _c.s.io_cache_write == DCACHE_MODE_DIRECT_FILE_SYNC)
			_sync_op = io::op_kind::fsync;
		else if (_c.s.io_cache_write == DCACHE_MODE_DIRECT_DATA_SYNC)
			_sync_op = io::op_kind::fdatasync;
		else
			sync = false;
		if (!sync) {
			_stage = stage::done;
			return false;
		}
		_stage = stage::syncing;
		req = io::request{};
		req.op = _sync_op;
		req.fd = _io.fd;
		req.personality = _creds.personality();
		return true;
	}
	return false;
}

void async_op::on_write_result(io::result r)
{
	step &st = _steps[_idx];
	switch (st.k) {
	case step::kind::direct:
		if (r.error == EOPNOTSUPP && _issued_rwf != 0) {
			note_no_dontcache(_c);
			_issued_rwf = -1; // retry this step without the flag
			return;
		}
		if (r.error == EINVAL || r.error == EIO || no_room(r.error)) {
			// EINVAL: alignment the probe promised but the filesystem
			// refused.  EIO: the kernel found cached state in the way
			// ("Direct I/O collision with buffered writes") - or the
			// device failed, which the page cache's write-back reports
			// again, at the sync or the client's COMMIT.  ENOSPC,
			// EDQUOT, EFBIG: the direct write fails whole; through the
			// page cache what fits is written (a short write), and the
			// WRITE after it, which cannot make progress, is answered
			// with the error - what VFS answers.  Either way this
			// segment goes the non-direct way rather than fail.
			if (!fence_as_buffered(st)) {
				// Another WRITE of these pages is in flight direct:
				// going buffered now is the collision the fence is for.
				_err = r.error;
				_stage = stage::after_steps;
				return;
			}
			note_direct_refused(_c, r.error, "write", st.offset, st.length);
			st.k = _c.s.direct_misaligned_dontcache ? step::kind::dontcache : step::kind::buffered;
			st.writeback = st.k == step::kind::buffered && writes_back_cached(_c);
			_bounce.reset();
			_issued_rwf = 0;
			return; // next() reissues this step
		}
		_bounce.reset(); // the middle completed: its copy is no longer lent out
		_issued_rwf = 0;
		if (r.ok())
			_c.add(stat::direct_bytes, r.bytes);
		break;
	case step::kind::dontcache:
		if (r.error == EOPNOTSUPP && _issued_rwf != 0) {
			note_no_dontcache(_c);
			return; // next() reissues it buffered, then writes back and drops
		}
		if (_fallback_drop) {
			// The DONTCACHE way without DONTCACHE: buffered, then write
			// back and drop what we wrote.
			_c.add(stat::fallback_no_dontcache);
			if (r.ok()) {
				_c.add(stat::buffered_bytes, r.bytes);
				if (r.bytes > 0) {
					flush_range(_c, st.offset, r.bytes);
					(void)drop_range(_c, _io.fd, st.offset, r.bytes);
				}
			}
		} else if (r.ok()) {
			_c.add(stat::dontcache_bytes, r.bytes);
		}
		break;
	case step::kind::tracked:
		DCACHE_SYNC_POINT("boundary.complete");
		_c.e.boundary.complete(_c.f.boundary, st.offset / k_page_size,
				       static_cast<std::uint32_t>(st.offset % k_page_size),
				       r.ok() ? static_cast<std::uint32_t>(r.bytes) : 0, _releases);
		if (r.ok()) {
			_c.add(stat::buffered_bytes, r.bytes);
			// Even a page this write completed (it is dropped when the
			// WRITE finishes): the neighbour that wrote the other part
			// may still be in flight, its write-back not yet started,
			// while this WRITE's direct middle goes out next.
			writeback_after(st, r.bytes);
		}
		break;
	case step::kind::buffered:
		if (r.ok()) {
			_c.add(stat::buffered_bytes, r.bytes);
			writeback_after(st, r.bytes);
		}
		break;
	}
	if (!r.ok()) {
		_err = r.error;
		_stage = stage::after_steps;
		return;
	}
	_written += r.bytes;
	if (r.bytes < st.length) {
		_c.add(stat::short_transfers);
		_stage = stage::after_steps;
		return;
	}
	++_idx;
}

void async_op::writeback_after(const step &st, std::size_t bytes) noexcept
{
	if (!st.writeback || bytes == 0)
		return;
	_wb_lo = st.offset - st.offset % k_page_size;
	const std::uint64_t end = st.offset + bytes;
	_wb_hi = end + (k_page_size - end % k_page_size) % k_page_size;
	_wb_pending = true;
}

// The data is written either way; a failed write-back only leaves the
// pages dirty (the kernel's own write-back, the sync or the COMMIT will
// meet the error again and report it).
void async_op::on_writeback_result(io::result r) noexcept
{
	_c.add(stat::edge_writebacks);
	if (r.ok())
		return;
	_c.add(stat::edge_writeback_errors);
	if (first_time(_c.e, log_writeback_error))
		log_msg(DCACHE_LOG_WARN, "dcache %s: sync_file_range(SYNC_FILE_RANGE_WRITE) of a WRITE's cached edge failed: %s",
			_c.e.name, std::strerror(r.error));
}

void async_op::on_sync_result(io::result r)
{
	_stage = stage::done;
	_c.add(_sync_op == io::op_kind::fsync ? stat::syncs_fsync : stat::syncs_fdatasync);
	if (!r.ok()) {
		// Nothing may be claimed stable; the error goes to the client.
		_c.add(stat::errors);
		_res.error = r.error;
		return;
	}
	_res.stable = true;
	_c.add(stat::writes_reply_stable);
	if (!_io.stable)
		_c.add(stat::writes_raised_stable);
	if (_c.s.io_cache_write == DCACHE_MODE_FADVISE && _io.stable && _written > 0) {
		flush_range(_c, _io.offset, _written);
		(void)drop_range(_c, _io.fd, _io.offset, _written);
	}
}

void async_op::prepare_read()
{
	_c.add(stat::reads);
	const std::span<const struct iovec> iov(_io.iov, static_cast<std::size_t>(_io.iov_count));
	_total = iov_total(_io.iov, _io.iov_count);

	plan_caps pc;
	if (is_direct_mode(_c.s.io_cache_read)) {
		pc.dio = file_caps(_c);
		pc.odirect = !_c.f.no_odirect.load(std::memory_order_relaxed);
	}
	plan p = plan_read(_c.s, pc, _io.offset, _total, iov);
	if (p.has_direct()) {
		_direct = lease_direct(_c, false);
		if (!_direct) {
			pc.odirect = false;
			p = plan_read(_c.s, pc, _io.offset, _total, iov);
		}
	}
	count_read(_c, p.disp);
	DTRACE_PROBE4(dcache, read_plan, _io.offset, _total, static_cast<int>(p.disp), static_cast<int>(p.nsegs));
	if (p.nsegs == 0) {
		_stage = stage::done;
		return;
	}
	_seg = p.segs[0];
	_stage = stage::reading;
	if (_seg.kind != seg_kind::direct && !_blocking && !_c.b().completes_inline() && _c.s.cached_read_fast_path &&
	    (_c.s.io_cache_read == DCACHE_MODE_BUFFERED || _c.s.io_cache_read == DCACHE_MODE_DONTCACHE) &&
	    !_c.f.no_nowait.load(std::memory_order_relaxed))
		try_nowait();
}

// Cached-read fast path: preadv2(RWF_NOWAIT) in the calling thread.  Data
// already in the page cache is returned without a hand-off; EAGAIN sends
// the whole READ down the asynchronous path, a short read the remainder.
void async_op::try_nowait()
{
	const bool dc = _seg.kind == seg_kind::dontcache && !_c.f.no_dontcache.load(std::memory_order_relaxed);
	io::request req;
	req.op = io::op_kind::read;
	req.fd = _c.caller_fd;
	req.offset = _io.offset;
	req.iov = _io.iov;
	req.iov_count = _io.iov_count;
	req.rwf = RWF_NOWAIT | (dc ? RWF_DONTCACHE : 0);
	const io::result r = _c.b().execute_now(req);
	DTRACE_PROBE3(dcache, read_nowait, _io.offset, r.error, r.bytes);
	if (r.ok()) {
		_c.add(dc ? stat::dontcache_bytes : stat::buffered_bytes, r.bytes);
		if (r.bytes == _total || r.bytes == 0) {
			// All of it, or 0 bytes: end of file (nothing cached would
			// have been EAGAIN).
			_c.add(stat::read_nowait_hits);
			_res.bytes = r.bytes;
			_res.eof = r.bytes < _total;
			_c.add(stat::read_bytes, r.bytes);
			_stage = stage::done;
			return;
		}
		// Part of it: the rest goes asynchronously (it may be EOF too,
		// which the remainder's 0 bytes will say).
		_c.add(stat::read_nowait_partial);
		_base = r.bytes;
		return;
	}
	_c.add(stat::read_nowait_misses);
	if ((r.error == EOPNOTSUPP && !dc) || r.error == EINVAL) {
		// The filesystem has no RWF_NOWAIT (with DONTCACHE in the flags,
		// EOPNOTSUPP is DONTCACHE's: the main path learns that).
		if (!_c.f.no_nowait.exchange(true, std::memory_order_relaxed)) {
			_c.add(stat::fallback_no_nowait);
			if (first_time(_c.e, log_no_nowait))
				log_msg(DCACHE_LOG_WARN, "dcache %s: RWF_NOWAIT refused (%s): cached-read fast path off for such files",
					_c.e.name, std::strerror(r.error));
		}
	}
}

bool async_op::next_read(io::request &req)
{
	if (_stage != stage::reading)
		return false;
	if (_seg.kind != seg_kind::direct) {
		const std::vector<struct iovec> rest = slice(_io.iov, _io.iov_count, _base, _total - _base);
		_cur = rest;
		const bool dc = _seg.kind == seg_kind::dontcache;
		_fallback_drop = dc && _c.f.no_dontcache.load(std::memory_order_relaxed);
		_issued_rwf = dc && !_fallback_drop ? RWF_DONTCACHE : 0;
		rw_request(req, io::op_kind::read, _io.fd, _io.offset + _base, _issued_rwf);
		return true;
	}
	if (!_seg.bounce) {
		_cur.assign(_io.iov, _io.iov + _io.iov_count);
		rw_request(req, io::op_kind::read, _direct->fd, _seg.offset, 0);
		return true;
	}
	auto buf = std::make_unique<aligned_buffer>();
	if (!buf->allocate(_c.f.caps.mem_align, _seg.length)) {
		fail(ENOMEM);
		return false;
	}
	_bounce = std::move(buf);
	_cur.assign(1, {_bounce->data(), static_cast<std::size_t>(_seg.length)});
	rw_request(req, io::op_kind::read, _direct->fd, _seg.offset, 0);
	return true;
}

void async_op::on_read_result(io::result r)
{
	if (_seg.kind == seg_kind::direct && (r.error == EINVAL || r.error == EIO)) {
		note_direct_refused(_c, r.error, "read", _seg.offset, _seg.length);
		_bounce.reset();
		_seg.kind = seg_kind::dontcache;
		return; // next() reissues it
	}
	if (_seg.kind != seg_kind::direct && r.error == EOPNOTSUPP && _issued_rwf != 0) {
		note_no_dontcache(_c);
		return; // next() reissues it buffered
	}
	_stage = stage::done;
	bool eof = false;
	if (_seg.kind != seg_kind::direct) {
		if (r.ok())
			_c.add(_issued_rwf != 0 ? stat::dontcache_bytes : stat::buffered_bytes, r.bytes);
		if (_fallback_drop) {
			_c.add(stat::fallback_no_dontcache);
			if (r.ok() && r.bytes > 0)
				(void)drop_range(_c, _io.fd, _io.offset + _base, r.bytes);
		}
		if (r.ok()) {
			r.bytes += _base;
			eof = r.bytes < _total;
		}
	} else if (!_bounce) {
		eof = r.ok() && r.bytes < _total;
		if (r.ok())
			_c.add(stat::direct_bytes, r.bytes);
	} else {
		if (r.ok()) {
			// Widened read: skip the pad before the requested offset;
			// a short read means end of file, so return what exists.
			const std::uint64_t pad = _io.offset - _seg.offset;
			const std::uint64_t avail = r.bytes > pad ? r.bytes - pad : 0;
			const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(avail, _total));
			scatter(_bounce->data() + pad, n, _io.iov, _io.iov_count);
			eof = r.bytes < _seg.length && pad + n >= r.bytes;
			_c.add(stat::read_bounce_copies);
			_c.add(stat::direct_bytes, n);
			r.bytes = n;
		}
		_bounce.reset();
	}
	if (!r.ok()) {
		if (_base > 0) {
			// The fast path delivered a prefix: a short read, like readv.
			r = io::result::success(_base);
			eof = false;
		} else {
			_c.add(stat::errors);
			_res.error = r.error;
			return;
		}
	}
	_res.bytes = r.bytes;
	_res.eof = eof;
	_c.add(stat::read_bytes, r.bytes);
	if (_c.s.io_cache_read == DCACHE_MODE_FADVISE && r.bytes > 0)
		(void)drop_read_range(_c, r.bytes, eof);
}

bool async_op::next(io::request &req)
{
	return _write ? next_write(req) : next_read(req);
}

void async_op::on_result(io::result r)
{
	if (!_write)
		on_read_result(r);
	else if (_wb_in_flight) {
		_wb_in_flight = false;
		on_writeback_result(r);
	} else if (_stage == stage::syncing)
		on_sync_result(r);
	else
		on_write_result(r);
}

dcache_io_result async_op::finish() noexcept
{
	_bounce.reset();
	_direct.reset();
	if (!_fenced.empty())
		_c.f.fence.leave(_fenced);
	if (_write && !_releases.empty()) {
		// After the segments (the completing writer's data is in the
		// page) and after the sync (the page is clean, the write-back is
		// free).
		release_boundary(_c.e, _releases, &_c.f, _io.fd);
	}
	_c.e.stats.record(_write ? DCACHE_OP_WRITE : DCACHE_OP_READ, elapsed_ns(_start));
	return _res;
}

// Runs the chain from where it stands.  Returns true when the request is
// finished (the caller finishes it), false when a completion will arrive on
// another thread, which then owns the op: the caller must not touch it.
//
// The hand-off: before each submit, handoff = 0.  The completion exchanges
// in 1: if it saw 0, the submitter is still inside submit() and continues
// the chain itself.  The submitter exchanges in 2 after submit(): if it saw
// 1, the completion already ran inline; if 0, it is still to come and its
// thread drives the rest.
bool drive(async_op *op) noexcept
{
	try {
		for (;;) {
			io::request req;
			if (!op->next(req))
				return true;
			if (op->blocking()) {
				op->on_result(op->run_now(req));
				continue;
			}
			op->handoff.store(0, std::memory_order_relaxed);
			op->backend().submit(req, *op);
			if (op->handoff.exchange(2, std::memory_order_acq_rel) == 0)
				return false;
			op->on_result(op->last);
		}
	} catch (const std::bad_alloc &) {
		op->fail(ENOMEM);
	} catch (...) {
		op->fail(EIO);
	}
	return true;
}

// Everything of the engine is released before done runs, so done may free
// the file (and the export may go as soon as inflight_done has run).
void finish_deferred(async_op *op) noexcept
{
	const dcache_io_result res = op->finish();
	dcache_export &e = op->exp();
	const dcache_io_done_fn done = op->done_fn();
	void *const ctx = op->done_ctx();
	e.stats.add(stat::io_deferred);
	delete op;
	inflight_done(e);
	if (done != nullptr)
		done(ctx, res);
}

void async_op::complete(io::result r) noexcept
{
	last = r;
	if (handoff.exchange(1, std::memory_order_acq_rel) == 0)
		return; // the submitter continues
	try {
		on_result(r);
	} catch (...) {
		fail(ENOMEM);
	}
	if (drive(this))
		finish_deferred(this);
}

// The common start of READ and WRITE.
bool start_io(dcache_export *exp, dcache_file *file, const dcache_io *io, bool write, dcache_io_done_fn done,
	      void *done_ctx, dcache_io_result *inline_result, bool caller_waits) noexcept
{
	dcache_io_result dummy{};
	dcache_io_result &out = inline_result != nullptr ? *inline_result : dummy;
	if (exp == nullptr || file == nullptr || !valid_io(io)) {
		out = failed(EINVAL);
		return true;
	}
	async_op *op = nullptr;
	try {
		op = new async_op(*exp, *file, *io, write, done, done_ctx);
		op->prepare(caller_waits);
	} catch (const std::bad_alloc &) {
		if (op == nullptr) {
			exp->stats.add(stat::errors);
			out = failed(ENOMEM);
			return true;
		}
		op->fail(ENOMEM);
	} catch (...) {
		if (op == nullptr) {
			exp->stats.add(stat::errors);
			out = failed(EIO);
			return true;
		}
		op->fail(EIO);
	}
	if (!drive(op))
		return false;
	out = op->finish();
	exp->stats.add(stat::io_inline);
	delete op;
	inflight_done(*exp);
	return true;
}

// The blocking API: start + wait.
struct waiter {
	std::mutex m;
	std::condition_variable cv;
	bool done = false;
	dcache_io_result res{};

	static void on_done(void *ctx, dcache_io_result r)
	{
		auto *w = static_cast<waiter *>(ctx);
		std::lock_guard lock(w->m); // notify under the lock: w lives on the waiter's stack
		w->res = r;
		w->done = true;
		w->cv.notify_one();
	}
};

dcache_io_result run_blocking(dcache_export *exp, dcache_file *file, const dcache_io *io, bool write) noexcept
{
	waiter w;
	dcache_io_result res{};
	if (start_io(exp, file, io, write, &waiter::on_done, &w, &res, true))
		return res;
	std::unique_lock lock(w.m);
	w.cv.wait(lock, [&] { return w.done; });
	return w.res;
}


} // namespace

std::uint64_t pack_settings(const dcache_settings &s) noexcept
{
	return (static_cast<std::uint64_t>(s.io_cache_read) & 0xff) |
	       ((static_cast<std::uint64_t>(s.io_cache_write) & 0xff) << 8) |
	       ((static_cast<std::uint64_t>(s.direct_misaligned_num_pages) & 0xffff) << 16) |
	       (static_cast<std::uint64_t>(s.direct_misaligned_dontcache) << 32) |
	       ((static_cast<std::uint64_t>(s.direct_misaligned_memory) & 1) << 33) |
	       (static_cast<std::uint64_t>(s.boundary_tracking) << 34) |
	       (static_cast<std::uint64_t>(s.cached_read_fast_path) << 35);
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
	s.cached_read_fast_path = ((v >> 35) & 1) != 0;
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
	e->requested_backend.store(s.io_backend, std::memory_order_relaxed);
	e->queue_depth.store(s.io_queue_depth, std::memory_order_relaxed);
	if (backend != nullptr && !backend->completes_inline()) {
		e->backend_kind = DCACHE_IO_BACKEND_IO_URING;
		e->stats.add(stat::backend_io_uring);
	}
	return e;
}

namespace {
constinit std::atomic<uring_factory> g_uring_factory{nullptr};

void delete_export(dcache_export *exp) noexcept
{
	// Completions still finishing touch the export and its backend.
	{
		std::unique_lock lock(exp->inflight_mutex);
		exp->inflight_cv.wait(lock, [exp] { return exp->inflight == 0; });
	}
	delete exp;
}
} // namespace

void set_uring_factory(uring_factory f) noexcept
{
	g_uring_factory.store(f, std::memory_order_release);
}

void export_unref(dcache_export *exp) noexcept
{
	if (exp == nullptr || exp->refs.fetch_sub(1, std::memory_order_acq_rel) != 1)
		return;
	// A backend cannot be destroyed on its own completion thread (it joins
	// that thread): if the last reference goes there (a done callback
	// freeing the last file), the deletion moves to a thread of its own.
	if (exp->backend != nullptr && exp->backend->on_completion_thread()) {
		try {
			std::thread([exp] { delete_export(exp); }).detach();
			return;
		} catch (...) {
			return; // no thread: leak rather than deadlock
		}
	}
	delete_export(exp);
}

} // namespace dcache::core

using namespace dcache::core;

extern "C" {

struct dcache_export *dcache_export_new(const struct dcache_settings *settings, const char *name)
{
	// The backend is chosen here, once: IO_Backend and IO_Queue_Depth are
	// not live settings (see dcache_export_update).
	try {
		const dcache_settings s = settings ? *settings : dcache_settings_default();
		std::unique_ptr<dcache::io::backend> backend;
		int uring_error = 0;
		std::string why;
		if (s.io_backend == DCACHE_IO_BACKEND_IO_URING) {
			const uring_factory make = g_uring_factory.load(std::memory_order_acquire);
			dcache::io::uring_open_result r =
				make != nullptr ? make(s.io_queue_depth) : dcache::io::make_uring_backend(s.io_queue_depth);
			if (r.error == 0 && r.backend) {
				backend = std::move(r.backend);
			} else {
				uring_error = r.error != 0 ? r.error : EIO;
				why = r.why;
			}
		}
		if (!backend)
			backend = std::make_unique<dcache::io::sync_backend>();
		dcache_export *e = export_new_with_backend(&s, name, backend.get());
		if (e == nullptr)
			return nullptr;
		e->owned_backend = std::move(backend);
		if (uring_error != 0) {
			// ENOSYS, EPERM (io_uring_disabled, seccomp), EACCES, EOPNOTSUPP,
			// or resources: the export still works, synchronously.
			e->stats.add(stat::fallback_no_io_uring);
			log_msg(DCACHE_LOG_WARN, "dcache %s: io_uring unavailable (%s: %s): using the synchronous backend",
				e->name, std::strerror(uring_error), why.empty() ? "no detail" : why.c_str());
		}
		return e;
	} catch (...) {
		return nullptr;
	}
}

void dcache_export_update(struct dcache_export *exp, const struct dcache_settings *settings)
{
	if (exp != nullptr && settings != nullptr) {
		// The backend was chosen at export creation and is not switched
		// under requests in flight: a changed IO_Backend / IO_Queue_Depth
		// takes effect at the next restart or re-export.
		const int old_backend = exp->requested_backend.exchange(settings->io_backend, std::memory_order_relaxed);
		const std::uint32_t old_depth = exp->queue_depth.exchange(settings->io_queue_depth, std::memory_order_relaxed);
		if (old_backend != settings->io_backend || old_depth != settings->io_queue_depth)
			log_msg(DCACHE_LOG_INFO,
				"dcache %s: IO_Backend = %s, IO_Queue_Depth = %u take effect at the next restart or re-export; running on %s",
				exp->name, settings->io_backend == DCACHE_IO_BACKEND_SYNC ? "sync" : "io_uring",
				settings->io_queue_depth, exp->backend != nullptr ? exp->backend->name() : "?");
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
	s.io_backend = static_cast<dcache_io_backend>(exp->requested_backend.load(std::memory_order_relaxed));
	s.io_queue_depth = exp->queue_depth.load(std::memory_order_relaxed);
	return s;
}

// The adapter's unexport: every held boundary page of the export is
// written back and dropped (through each file's O_DIRECT descriptor; files
// may outlive the export), then the adapter's reference goes.
bool dcache_export_handle_known(const struct dcache_export *exp, const void *key, size_t len)
{
	if (exp == nullptr || key == nullptr)
		return false;
	try {
		return exp->known.contains({static_cast<const char *>(key), len});
	} catch (...) {
		return false; // no memory: check again
	}
}

void dcache_export_handle_add(struct dcache_export *exp, const void *key, size_t len)
{
	if (exp == nullptr || key == nullptr)
		return;
	try {
		exp->known.add({static_cast<const char *>(key), len});
	} catch (...) {
		// not remembered: the handle is checked again on its next use
	}
}

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
			file->exp->boundary.take_file(file->boundary, 0, UINT64_MAX, boundary_tracker::reason::close, list);
			release_boundary(*file->exp, list, file, -1);
			// Another file's request may be releasing one of our pages
			// (age, ceiling) through our descriptor: let it finish first.
			file->exp->boundary.wait_idle(file->boundary);
		}
		// Drop the file's references: a descriptor with requests in
		// flight is closed by the last of them, without waiting here.
		fd_ref direct, buffered;
		{
			std::unique_lock lock(file->fd_mutex);
			direct = std::move(file->direct);
			buffered = std::move(file->buffered);
		}
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
			file->exp->boundary.take_file(file->boundary, 0, UINT64_MAX, boundary_tracker::reason::close, list, true);
			release_boundary(*file->exp, list, file, -1);
			file->exp->boundary.wait_idle(file->boundary);
		} catch (...) {
		}
	}
	export_unref(file->exp);
	delete file;
}

void dcache_file_truncated(struct dcache_file *file, uint64_t size)
{
	if (file == nullptr || file->exp == nullptr)
		return;
	try {
		// The page holding the new EOF and every page past it: the
		// truncate zeroed or removed what the tracker counted as written
		// there.  Pages whose writer is still in flight stay; that
		// writer's completion decides.
		boundary_tracker::release_list list;
		file->exp->boundary.take_file(file->boundary, size / k_page_size, UINT64_MAX,
					      boundary_tracker::reason::truncate, list);
		release_boundary(*file->exp, list, file, -1);
	} catch (...) {
		// No memory for the list: the pages age out.
	}
}

struct dcache_io_result dcache_read(struct dcache_export *exp, struct dcache_file *file,
				    const struct dcache_io *io)
{
	return run_blocking(exp, file, io, false);
}

struct dcache_io_result dcache_write(struct dcache_export *exp, struct dcache_file *file,
				     const struct dcache_io *io)
{
	return run_blocking(exp, file, io, true);
}

bool dcache_read_start(struct dcache_export *exp, struct dcache_file *file, const struct dcache_io *io,
		       dcache_io_done_fn done, void *ctx, struct dcache_io_result *inline_result)
{
	return start_io(exp, file, io, false, done, ctx, inline_result, false);
}

bool dcache_write_start(struct dcache_export *exp, struct dcache_file *file, const struct dcache_io *io,
			dcache_io_done_fn done, void *ctx, struct dcache_io_result *inline_result)
{
	return start_io(exp, file, io, true, done, ctx, inline_result, false);
}

const char *dcache_export_backend_name(const struct dcache_export *exp)
{
	return exp != nullptr && exp->backend != nullptr ? exp->backend->name() : "none";
}

int dcache_after_commit(struct dcache_export *exp, struct dcache_file *file, int fd, uint64_t offset,
			uint64_t len, uint64_t sync_ns)
{
	if (exp == nullptr || fd < 0)
		return EINVAL;
	try {
		exp->stats.add(stat::commits);
		exp->stats.record(DCACHE_OP_COMMIT, sync_ns);
		// Held pages in the COMMIT's range were written back when they
		// were written, and the COMMIT's fsync has made them durable: they
		// stay held, clean and cached, for the neighbour that completes
		// them (one writer COMMITs while the others still write; releasing
		// here made every neighbour read its page back).  The age limit,
		// the ceiling, close, truncate and unexport release them.
		if (file != nullptr) {
			const std::uint64_t first = offset / k_page_size;
			const std::uint64_t last = (len == 0 || len > UINT64_MAX - offset)
							   ? UINT64_MAX
							   : (offset + len - 1) / k_page_size;
			exp->stats.add(stat::boundary_kept_at_commit, exp->boundary.pages(file->boundary, first, last));
			boundary_tracker::release_list list;
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
