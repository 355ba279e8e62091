#include "page_cache.h"

#include "export_state.h"
#include "file_state.h"
#include "log.h"
#include "sync_point.h"

#include <sys/sdt.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace dcache::core {

namespace {

// Now: the caller waits for it either way, so as a plain syscall in its
// thread (through io_uring it would take a hand-off to the completion
// thread and an io-wq worker, which every range op goes to, and back).
io::result range_request(dcache_export &e, io::op_kind op, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	return e.backend->execute_now(io::request{.op = op, .fd = fd, .offset = offset, .length = length});
}

void count_drop(dcache_export &e, const io::result &r) noexcept
{
	if (r.ok())
		return;
	e.stats.add(stat::fadvise_errors);
	DCACHE_LOG_ONCE(e, fadvise_error, DCACHE_LOG_WARN, "dcache %s: posix_fadvise(DONTNEED) failed: %s", e.name,
			std::strerror(r.error));
}

void flush(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	const io::result r = range_request(e, io::op_kind::sync_range, fd, offset, length);
	if (!r.ok())
		DCACHE_LOG_ONCE(e, sync_range_error, DCACHE_LOG_WARN, "dcache %s: sync_file_range failed: %s", e.name,
				std::strerror(r.error));
}

int drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	e.stats.add(stat::fadvise_calls);
	const io::result r = range_request(e, io::op_kind::fadvise_dontneed, fd, offset, length);
	count_drop(e, r);
	return r.error;
}

void flush_and_drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	flush(e, fd, offset, length);
	(void)drop(e, fd, offset, length);
}

} // namespace

// One piece of side work, one backend request: a drop, or a write-back
// and wait then the drop (flush_drop).  Owns what it needs until its
// completion.
class later_work final : public io::completion {
public:
	later_work(dcache_export &e, fd_ref fd, std::uint64_t offset, std::uint64_t length, bool flush_first) noexcept
		: _e(e),
		  _fd(std::move(fd)), _req{.op = flush_first ? io::op_kind::flush_drop : io::op_kind::fadvise_dontneed,
					   .fd = _fd->fd,
					   .offset = offset,
					   .length = length}
	{
		inflight_add(e);
	}
	later_work *next = nullptr; // in its side_work

	void start() noexcept { _e.backend->submit(_req, *this); }
	void complete(io::result r) noexcept override
	{
		dcache_export &e = _e;
		if (_req.op != io::op_kind::flush_drop) {
			count_drop(e, r);
		} else if (!r.ok()) {
			e.stats.add(stat::fadvise_errors);
			DCACHE_LOG_ONCE(e, flush_drop_error, DCACHE_LOG_WARN,
					"dcache %s: write-back and drop (sync_file_range, posix_fadvise) failed: %s",
					e.name, std::strerror(r.error));
		}
		e.stats.sub(stat::drops_pending);
		delete this;	  // the descriptor with it
		inflight_done(e); // the export may go from here on
	}

private:
	dcache_export &_e;
	fd_ref _fd;
	io::request _req;
};

side_work::side_work(side_work &&o) noexcept
	: _e(o._e), _when(o._when), _own(std::move(o._own)), _head(o._head), _tail(o._tail)
{
	o._head = o._tail = nullptr;
}

side_work::~side_work()
{
	issue();
}

void side_work::issue() noexcept
{
	later_work *w = _head;
	_head = _tail = nullptr;
	while (w != nullptr) {
		later_work *const n = w->next; // w may be gone once started
		w->start();
		w = n;
	}
}

bool side_work::defers() const noexcept
{
	return _when == when::after_reply && !_e->backend->completes_inline();
}

bool side_work::queue(const fd_ref &fd, std::uint64_t offset, std::uint64_t length, bool flush_first) noexcept
{
	if (!fd || !defers())
		return false;
	auto *w = new (std::nothrow) later_work(*_e, fd, offset, length, flush_first);
	if (w == nullptr)
		return false;
	_e->stats.add(stat::fadvise_calls);
	_e->stats.add(stat::drops_deferred);
	_e->stats.add(stat::drops_pending);
	if (_tail != nullptr)
		_tail->next = w;
	else
		_head = w;
	_tail = w;
	return true;
}

int side_work::drop(int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	if (queue(_own, offset, length, false))
		return 0;
	return core::drop(*_e, fd, offset, length);
}

void side_work::flush_and_drop(int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	if (!queue(_own, offset, length, true))
		core::flush_and_drop(*_e, fd, offset, length);
}

// One page out of the tracker's hands, through own_fd for own's page and
// another file's referenced descriptor otherwise.  The tracker is told
// either way: what is queued holds its descriptor, not the file.
void side_work::release_page(const boundary_tracker::release &r, const dcache_file *own, int own_fd) noexcept
{
	dcache_export &e = *_e;
	DCACHE_SYNC_POINT("boundary.release");
	dcache_file *f = r.file->owner();
	const std::uint64_t off = r.page * k_page_size;
	DTRACE_PROBE3(dcache, boundary_release, off, static_cast<int>(r.why), f == own);
	fd_ref held;
	int fd = -1;
	if (f == own && own_fd >= 0) {
		held = _own;
		fd = own_fd;
	} else {
		try {
			held = any_descriptor(*f);
		} catch (...) {
		}
		if (held)
			fd = held->fd;
		else
			e.stats.add(stat::boundary_release_no_fd);
	}
	if (fd >= 0 && !queue(held, off, k_page_size, true))
		core::flush_and_drop(e, fd, off, k_page_size);
	DCACHE_SYNC_POINT("boundary.released");
	e.boundary.release_done(r);
}

void side_work::release_boundary(boundary_tracker::release_list &list, const dcache_file *own, int own_fd) noexcept
{
	for (const auto &r : list)
		release_page(r, own, own_fd);
	list.clear();
}

} // namespace dcache::core
