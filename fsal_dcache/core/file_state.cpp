#include "file_state.h"

#include "export_state.h"
#include "log.h"

#include <cerrno>
#include <cstring>

namespace dcache::core {

namespace {

stat source_stat(io::dio_caps::source s) noexcept
{
	switch (s) {
	case io::dio_caps::source::statx: return stat::dio_align_statx;
	case io::dio_caps::source::xfs_dioinfo: return stat::dio_align_xfs_dioinfo;
	case io::dio_caps::source::btrfs: return stat::dio_align_btrfs;
	case io::dio_caps::source::block_device: return stat::dio_align_block_device;
	case io::dio_caps::source::none:
	case io::dio_caps::source::fake: break;
	}
	return stat::dio_align_none;
}

// What fd's filesystem allows, where its files report nothing: learned
// once per filesystem and export (a probe may read the device), logged
// when learned.
io::dio_caps filesystem_dio(dcache_export &e, int fd, std::uint64_t fs)
{
	mutex_lock lock(e.fs_dio_mutex);
	for (const io::dio_caps &c : e.fs_dio)
		if (c.fs == fs)
			return c;
	io::dio_caps c = e.backend->probe_dio_fs(fd);
	c.fs = fs;
	e.fs_dio.push_back(c);
	const unsigned maj = static_cast<unsigned>(fs >> 32), min = static_cast<unsigned>(fs & 0xffffffffU);
	switch (c.from) {
	case io::dio_caps::source::btrfs:
		log_msg(DCACHE_LOG_INFO,
			"dcache %s: filesystem %u:%u reports no direct-I/O alignment (statx DIOALIGN): O_DIRECT aligned to its btrfs sector size, %u bytes (BTRFS_IOC_FS_INFO; counted as dio_align_btrfs)",
			e.name, maj, min, c.offset_align);
		break;
	case io::dio_caps::source::block_device:
		log_msg(DCACHE_LOG_INFO,
			"dcache %s: filesystem %u:%u reports no direct-I/O alignment (statx DIOALIGN, XFS_IOC_DIOINFO): O_DIRECT aligned to its device's logical block size, %u bytes (an O_DIRECT read of one block accepted; counted as dio_align_block_device)",
			e.name, maj, min, c.offset_align);
		break;
	default:
		log_msg(DCACHE_LOG_WARN,
			"dcache %s: filesystem %u:%u reports no direct-I/O alignment (statx DIOALIGN, XFS_IOC_DIOINFO, btrfs, block device: nothing): its files are served the DONTCACHE way instead of O_DIRECT (counted as *_not_direct_no_alignment)",
			e.name, maj, min);
		break;
	}
	return c;
}

} // namespace

io::dio_caps probe_caps(dcache_export &e, dcache_file &f, int fd)
{
	file_caps &c = f.caps;
	if (c.probed.load(std::memory_order_acquire))
		return c.dio;
	unique_lock lock(f.fd_mutex);
	if (!c.probed.load(std::memory_order_relaxed)) {
		c.dio = e.backend->probe_dio(fd);
		if (!c.dio.known())
			c.dio = filesystem_dio(e, fd, c.dio.fs);
		e.stats.add(source_stat(c.dio.from));
		c.probed.store(true, std::memory_order_release);
	}
	return c.dio;
}

namespace {

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

bool usable(const fd_ref &d, bool for_write) noexcept
{
	return d && (!for_write || d->writable);
}

} // namespace

fd_ref lease_direct(dcache_export &e, dcache_file &f, int caller_fd, bool for_write)
{
	{
		shared_lock lock(f.fd_mutex);
		if (usable(f.direct, for_write))
			return f.direct;
		if (!f.caps.odirect())
			return {};
	}
	unique_lock u(f.fd_mutex);
	if (usable(f.direct, for_write))
		return f.direct;
	if (!f.caps.odirect())
		return {};
	// None yet, or first opened from a read-only descriptor while this
	// WRITE's descriptor is writable: (re)open from it.  A replaced one is
	// closed when its last request lets go.
	const io::open_result r = e.backend->open_direct(caller_fd);
	if (r.error == EINVAL) {
		// The filesystem refuses O_DIRECT: for good on this file.
		f.caps.no_odirect.store(true, std::memory_order_relaxed);
		DCACHE_LOG_ONCE(
			e, no_odirect, DCACHE_LOG_WARN,
			"dcache %s: O_DIRECT refused (EINVAL at open): direct mode falls back to DONTCACHE on such files",
			e.name);
		return {};
	}
	if (r.error != 0) {
		DCACHE_LOG_ONCE(
			e, open_error, DCACHE_LOG_WARN,
			"dcache %s: cannot open an O_DIRECT descriptor (%s): this request goes the DONTCACHE way",
			e.name, std::strerror(r.error));
		return {};
	}
	f.direct = adopt(*e.backend, r);
	return f.direct;
}

fd_ref lease_buffered(dcache_export &e, dcache_file &f, int caller_fd, bool for_write)
{
	{
		shared_lock lock(f.fd_mutex);
		if (usable(f.buffered, for_write))
			return f.buffered;
	}
	unique_lock u(f.fd_mutex);
	if (usable(f.buffered, for_write))
		return f.buffered;
	const io::open_result r = e.backend->open_buffered(caller_fd);
	if (r.error != 0) {
		DCACHE_LOG_ONCE(
			e, open_buffered_error, DCACHE_LOG_WARN,
			"dcache %s: cannot reopen a descriptor for asynchronous I/O (%s): such requests run synchronously",
			e.name, std::strerror(r.error));
		return {};
	}
	f.buffered = adopt(*e.backend, r);
	return f.buffered;
}

fd_ref any_descriptor(dcache_file &f)
{
	shared_lock lock(f.fd_mutex);
	return f.direct ? f.direct : f.buffered;
}

void learn_no_dontcache(dcache_export &e, dcache_file &f) noexcept
{
	f.caps.no_dontcache.store(true, std::memory_order_relaxed);
	DCACHE_LOG_ONCE(
		e, no_dontcache, DCACHE_LOG_WARN,
		"dcache %s: RWF_DONTCACHE not supported (EOPNOTSUPP: kernel < 6.14 or filesystem without it): using buffered I/O + POSIX_FADV_DONTNEED",
		e.name);
}

} // namespace dcache::core
