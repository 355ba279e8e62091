#include "dcache_io/sync_backend.h"

#include <fcntl.h>
#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xfs/xfs.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dcache::io {

const char *op_name(op_kind op) noexcept
{
	switch (op) {
	case op_kind::read: return "read";
	case op_kind::write: return "write";
	case op_kind::fsync: return "fsync";
	case op_kind::fdatasync: return "fdatasync";
	case op_kind::sync_range: return "sync_range";
	case op_kind::writeback: return "writeback";
	case op_kind::fadvise_dontneed: return "fadvise_dontneed";
	case op_kind::flush_drop: return "flush_drop";
	}
	return "?";
}

const char *dio_source_name(dio_caps::source s) noexcept
{
	switch (s) {
	case dio_caps::source::none: return "none";
	case dio_caps::source::statx: return "statx";
	case dio_caps::source::xfs_dioinfo: return "xfs_dioinfo";
	case dio_caps::source::btrfs: return "btrfs";
	case dio_caps::source::block_device: return "block_device";
	case dio_caps::source::fake: return "fake";
	}
	return "?";
}

bool dontcache_refused_for_tests() noexcept
{
	static const bool refused = [] {
		const char *v = std::getenv("DCACHE_TEST_NO_RWF_DONTCACHE");
		return v != nullptr && std::strcmp(v, "1") == 0;
	}();
	return refused;
}

namespace {

// Our own copy of the uapi statx layout: bookworm's <linux/stat.h> stops at
// stx_dio_offset_align.  stx_dio_read_offset_align (Linux 6.14) is NOT right
// after stx_dio_offset_align: stx_subvol and the three atomic-write fields
// come first, putting it at 0xb4.
struct kernel_statx {
	std::uint32_t stx_mask;
	std::uint32_t stx_blksize;
	std::uint64_t stx_attributes;
	std::uint32_t stx_nlink, stx_uid, stx_gid;
	std::uint16_t stx_mode, spare0;
	std::uint64_t stx_ino, stx_size, stx_blocks, stx_attributes_mask;
	std::uint64_t timestamps[8]; // atime, btime, ctime, mtime (16 bytes each)
	std::uint32_t stx_rdev_major, stx_rdev_minor, stx_dev_major, stx_dev_minor;
	std::uint64_t stx_mnt_id;
	std::uint32_t stx_dio_mem_align;
	std::uint32_t stx_dio_offset_align;
	std::uint64_t stx_subvol;
	std::uint32_t stx_atomic_write_unit_min;
	std::uint32_t stx_atomic_write_unit_max;
	std::uint32_t stx_atomic_write_segments_max;
	std::uint32_t stx_dio_read_offset_align;
	std::uint64_t spare[9];
};
static_assert(offsetof(kernel_statx, stx_dio_mem_align) == 0x98);
static_assert(offsetof(kernel_statx, stx_dio_offset_align) == 0x9c);
static_assert(offsetof(kernel_statx, stx_dio_read_offset_align) == 0xb4);
static_assert(sizeof(kernel_statx) == 0x100);

constexpr unsigned k_statx_dioalign = 0x00002000U;
constexpr unsigned k_statx_dio_read_align = 0x00020000U;

} // namespace

dio_caps probe_statx(int fd) noexcept
{
	kernel_statx stx{};
	dio_caps caps;
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, k_statx_dioalign | k_statx_dio_read_align, &stx) != 0)
		return caps;
	caps.fs = std::uint64_t{stx.stx_dev_major} << 32 | stx.stx_dev_minor;
	if (!(stx.stx_mask & k_statx_dioalign) || stx.stx_dio_offset_align == 0)
		return caps;
	caps.mem_align = stx.stx_dio_mem_align;
	caps.offset_align = stx.stx_dio_offset_align;
	// 0 (or not returned) means reads use the write offset alignment.
	caps.read_align = (stx.stx_mask & k_statx_dio_read_align) && stx.stx_dio_read_offset_align
				  ? stx.stx_dio_read_offset_align
				  : stx.stx_dio_offset_align;
	caps.from = dio_caps::source::statx;
	return caps;
}

dio_caps probe_xfs_dioinfo(int fd) noexcept
{
	struct dioattr da {};
	dio_caps caps;
	if (ioctl(fd, XFS_IOC_DIOINFO, &da) != 0 || da.d_miniosz == 0 || da.d_mem == 0)
		return caps;
	caps.mem_align = da.d_mem;
	caps.offset_align = da.d_miniosz;
	caps.read_align = da.d_miniosz;
	caps.from = dio_caps::source::xfs_dioinfo;
	return caps;
}

dio_caps probe_btrfs(int fd) noexcept
{
	btrfs_ioctl_fs_info_args fi{};
	dio_caps caps;
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) != 0 || fi.sectorsize == 0)
		return caps;
	caps.mem_align = caps.offset_align = caps.read_align = fi.sectorsize;
	caps.from = dio_caps::source::btrfs;
	caps.may_buffer = true;
	return caps;
}

namespace {

// A positive number from a sysfs file, 0 if there is none.
std::uint32_t read_sysfs_number(const char *path) noexcept
{
	const int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[32] = {};
	const ssize_t n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	if (n <= 0)
		return 0;
	const unsigned long v = std::strtoul(buf, nullptr, 10);
	return v > 0 && v <= (1U << 20) ? static_cast<std::uint32_t>(v) : 0;
}

// Whether an O_DIRECT read of `block` bytes at offset 0, from memory
// aligned to `block`, is accepted on fd's file (end of file is).
bool direct_read_accepted(int fd, std::uint32_t block) noexcept
{
	char path[64];
	std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	const int dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		return false;
	void *buf = nullptr;
	bool ok = false;
	if (posix_memalign(&buf, block, block) == 0) {
		ok = pread(dfd, buf, block, 0) >= 0;
		std::free(buf);
	}
	(void)close(dfd);
	return ok;
}

} // namespace

dio_caps probe_block_device(int fd) noexcept
{
	dio_caps caps;
	struct stat st {};
	if (fstat(fd, &st) != 0 || major(st.st_dev) == 0)
		return caps; // no block device: tmpfs, FUSE, NFS, overlay, btrfs
	char path[96];
	// A partition's directory has no queue/: its disk's (the parent) does.
	std::snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/logical_block_size", major(st.st_dev),
		      minor(st.st_dev));
	std::uint32_t block = read_sysfs_number(path);
	if (block == 0) {
		std::snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/logical_block_size", major(st.st_dev),
			      minor(st.st_dev));
		block = read_sysfs_number(path);
	}
	if (block == 0 || (block & (block - 1)) != 0 || !direct_read_accepted(fd, block))
		return caps;
	caps.mem_align = caps.offset_align = caps.read_align = block;
	caps.from = dio_caps::source::block_device;
	caps.fs = std::uint64_t{major(st.st_dev)} << 32 | minor(st.st_dev);
	return caps;
}

dio_caps sync_backend::probe_dio(int fd) noexcept
{
	dio_caps caps = probe_statx(fd);
	if (caps.known())
		return caps;
	const std::uint64_t fs = caps.fs;
	caps = probe_xfs_dioinfo(fd);
	caps.fs = fs;
	return caps;
}

dio_caps sync_backend::probe_dio_fs(int fd) noexcept
{
	const dio_caps caps = probe_btrfs(fd);
	return caps.known() ? caps : probe_block_device(fd);
}

namespace {
open_result reopen(int fd, int extra) noexcept;
}

open_result sync_backend::open_direct(int fd) noexcept
{
	return reopen(fd, O_DIRECT);
}

open_result sync_backend::open_buffered(int fd) noexcept
{
	return reopen(fd, 0);
}

namespace {
open_result reopen(int fd, int extra) noexcept
{
	char path[64];
	std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int accmode = O_RDWR;
	int dfd = open(path, O_RDWR | extra | O_CLOEXEC);
	if (dfd < 0 && errno == EACCES) {
		// The object may be read-only to us (or opened O_RDONLY by the
		// sub-FSAL on a read-only file): reopen with the same access mode.
		const int fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return {errno, -1};
		accmode = fl & O_ACCMODE;
		dfd = open(path, accmode | extra | O_CLOEXEC);
	}
	if (dfd < 0)
		return {errno, -1, false, false};
	return {0, dfd, accmode != O_WRONLY, accmode != O_RDONLY};
}
} // namespace

void sync_backend::close_fd(int fd) noexcept
{
	// close() must not be retried on EINTR on Linux: the fd is gone.
	(void)close(fd);
}

result sync_backend::execute(const request &req) noexcept
{
	if (refused_for_tests(req))
		return result::failure(EOPNOTSUPP);
	switch (req.op) {
	case op_kind::read: {
		const ssize_t n = preadv2(req.fd, req.iov, req.iov_count, static_cast<off_t>(req.offset), req.rwf);
		return n < 0 ? result::failure(errno) : result::success(static_cast<std::size_t>(n));
	}
	case op_kind::write: {
		const ssize_t n = pwritev2(req.fd, req.iov, req.iov_count, static_cast<off_t>(req.offset), req.rwf);
		return n < 0 ? result::failure(errno) : result::success(static_cast<std::size_t>(n));
	}
	case op_kind::fsync: return fsync(req.fd) != 0 ? result::failure(errno) : result::success(0);
	case op_kind::fdatasync: return fdatasync(req.fd) != 0 ? result::failure(errno) : result::success(0);
	case op_kind::sync_range:
		return sync_file_range(req.fd, static_cast<off_t>(req.offset), static_cast<off_t>(req.length),
				       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					       SYNC_FILE_RANGE_WAIT_AFTER) != 0
			       ? result::failure(errno)
			       : result::success(0);
	case op_kind::writeback:
		return sync_file_range(req.fd, static_cast<off_t>(req.offset), static_cast<off_t>(req.length),
				       SYNC_FILE_RANGE_WRITE) != 0
			       ? result::failure(errno)
			       : result::success(0);
	case op_kind::fadvise_dontneed: {
		// posix_fadvise returns the error number; errno is untouched.
		const int err = posix_fadvise(req.fd, static_cast<off_t>(req.offset), static_cast<off_t>(req.length),
					      POSIX_FADV_DONTNEED);
		return err != 0 ? result::failure(err) : result::success(0);
	}
	case op_kind::flush_drop: {
		request one = req;
		one.op = op_kind::sync_range;
		const result flushed = execute(one);
		one.op = op_kind::fadvise_dontneed;
		const result dropped = execute(one);
		return flushed.ok() ? dropped : flushed;
	}
	}
	return result::failure(EINVAL);
}

} // namespace dcache::io
