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

constexpr std::uint64_t k_drop_after_read_reach = 2u << 20;

io::result range_request(dcache_export &e, io::op_kind op, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	return e.backend->execute(io::request{.op = op, .fd = fd, .offset = offset, .length = length});
}

} // namespace

void flush(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	const io::result r = range_request(e, io::op_kind::sync_range, fd, offset, length);
	if (!r.ok())
		DCACHE_LOG_ONCE(e, sync_range_error, DCACHE_LOG_WARN, "dcache %s: sync_file_range failed: %s", e.name,
				std::strerror(r.error));
}

namespace {

void count_drop(dcache_export &e, const io::result &r) noexcept
{
	if (r.ok())
		return;
	e.stats.add(stat::fadvise_errors);
	DCACHE_LOG_ONCE(e, fadvise_error, DCACHE_LOG_WARN, "dcache %s: posix_fadvise(DONTNEED) failed: %s", e.name,
			std::strerror(r.error));
}

// One drop_later in flight: owns what it needs until its completion.
class later_drop final : public io::completion {
public:
	later_drop(dcache_export &e, fd_ref fd, std::uint64_t offset, std::uint64_t length) noexcept
		: _e(e), _fd(std::move(fd)), _offset(offset), _length(length)
	{
		inflight_add(e);
	}
	void complete(io::result r) noexcept override
	{
		dcache_export &e = _e;
		if (r.error == EBUSY) // the ring was full (submitted from its own thread): now, then
			r = range_request(e, io::op_kind::fadvise_dontneed, _fd->fd, _offset, _length);
		count_drop(e, r);
		delete this;	  // the descriptor with it
		inflight_done(e); // the export may go from here on
	}

private:
	dcache_export &_e;
	fd_ref _fd;
	std::uint64_t _offset, _length;
};

} // namespace

int drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	e.stats.add(stat::fadvise_calls);
	const io::result r = range_request(e, io::op_kind::fadvise_dontneed, fd, offset, length);
	count_drop(e, r);
	return r.error;
}

int drop_later(dcache_export &e, const fd_ref &own, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	auto *op = own && !e.backend->completes_inline() ? new (std::nothrow) later_drop(e, own, offset, length)
							 : nullptr;
	if (op == nullptr)
		return drop(e, fd, offset, length);
	e.stats.add(stat::fadvise_calls);
	e.stats.add(stat::drops_deferred);
	e.backend->submit(
		io::request{.op = io::op_kind::fadvise_dontneed, .fd = own->fd, .offset = offset, .length = length},
		*op);
	return 0;
}

void flush_and_drop(dcache_export &e, int fd, std::uint64_t offset, std::uint64_t length) noexcept
{
	flush(e, fd, offset, length);
	(void)drop(e, fd, offset, length);
}

byte_range drop_after_read_range(std::uint64_t offset, std::uint64_t bytes, bool eof) noexcept
{
	const std::uint64_t start = offset - offset % k_drop_after_read_reach;
	return {start, eof ? 0 : offset + bytes - start};
}

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
				if (const fd_ref other = any_descriptor(*f))
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

} // namespace dcache::core
