// I/O request and result values: the only vocabulary the core uses to ask
// the I/O layer for work.  Requests are plain values; a backend executes
// them.  Nothing here owns memory: the iovecs a request points at belong to
// the caller and must stay valid until the request's result is delivered
// (for the synchronous backend, until execute() returns).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

// Bookworm's uapi headers predate Linux 6.14's RWF_DONTCACHE.
#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
// Linux 4.14; present in bookworm's headers, defined here for completeness.
#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

namespace dcache::io {

enum class op_kind : std::uint8_t {
	read,		  // preadv2(fd, iov, offset, rwf)
	write,		  // pwritev2(fd, iov, offset, rwf)
	fsync,		  // fsync(fd)
	fdatasync,	  // fdatasync(fd)
	sync_range,	  // sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER)
	writeback,	  // sync_file_range(WRITE): start write-back, do not wait
	fadvise_dontneed, // posix_fadvise(POSIX_FADV_DONTNEED); length 0 = to EOF
	flush_drop,	  // sync_range, then fadvise_dontneed of the same range
			  // even if it failed (io_uring: linked, one submission
			  // and one io-wq hand-off); the first error is returned
};

const char *op_name(op_kind op) noexcept;

struct request {
	op_kind op = op_kind::read;
	int fd = -1;
	std::uint64_t offset = 0;
	std::uint64_t length = 0; // sync_range / writeback / fadvise only; rw use the iovecs
	const struct iovec *iov = nullptr;
	int iov_count = 0;
	int rwf = 0; // RWF_* flags for read/write
	// Whose credentials the request runs with: 0 = none (the backend's
	// default: whatever thread ends up issuing it), otherwise an id from
	// backend::capture_credentials() (io_uring: a registered personality,
	// sqe->personality).  Backends that run requests on the calling
	// thread ignore it.  See backend.h, class credentials.
	int personality = 0;
	// read/write whose one iovec lies in a buffer the backend registered
	// (backend::bounce_get gave it with this index): io_uring issues it as
	// READ_FIXED/WRITE_FIXED, with no page pinning per request.  -1: an
	// ordinary buffer.  A plain syscall ignores it.
	int buf_index = -1;

	[[nodiscard]] std::size_t iov_bytes() const noexcept
	{
		std::size_t n = 0;
		for (int i = 0; i < iov_count; ++i)
			n += iov[i].iov_len;
		return n;
	}
};

// Who a request runs as, in the terms the caller set the thread's
// credentials with (uid, gid, supplementary groups): lets a backend reuse
// what it registered for the same identity.
struct identity {
	std::uint32_t uid = 0;
	std::uint32_t gid = 0;
	const std::uint32_t *groups = nullptr;
	std::size_t ngroups = 0;
};

// errno is the currency: error is 0 or a positive errno value, whatever
// convention the underlying call used (-1+errno, returned error, -errno).
struct [[nodiscard]] result {
	int error = 0;
	std::size_t bytes = 0;

	[[nodiscard]] bool ok() const noexcept { return error == 0; }
	static result failure(int err) noexcept { return {err, 0}; }
	static result success(std::size_t n) noexcept { return {0, n}; }
};

// Direct-I/O alignment of one file.  0 means "unknown": no direct I/O.
struct dio_caps {
	std::uint32_t mem_align = 0;	// M: buffer address (and segment) alignment
	std::uint32_t offset_align = 0; // O: file offset / length alignment
	std::uint32_t read_align = 0;	// R: read offset alignment (<= O)
	// Where it came from: per file, statx (Linux 6.1) or XFS's ioctl; per
	// filesystem where neither answers, btrfs's sector size or the logical
	// block size of the block device the filesystem is on.
	enum class source : std::uint8_t { none, statx, xfs_dioinfo, btrfs, block_device, fake } from = source::none;
	// The filesystem the file is on (st_dev: major << 32 | minor), 0 when
	// the probe could not tell.
	std::uint64_t fs = 0;
	// The filesystem may serve an aligned O_DIRECT request through the
	// page cache without saying so (btrfs: a range it cannot write direct,
	// pages in the way), where XFS and ext4 return an error.
	bool may_buffer = false;

	[[nodiscard]] bool known() const noexcept { return mem_align != 0 && offset_align != 0; }
};

const char *dio_source_name(dio_caps::source s) noexcept;

// Tests only: with DCACHE_TEST_NO_RWF_DONTCACHE=1 in the server's
// environment, every backend answers a READ or WRITE carrying
// RWF_DONTCACHE with EOPNOTSUPP, as kernels before 6.14 (Debian 12's 6.1,
// Debian 13's 6.12) and btrfs do, so the fallback runs on any filesystem.
// Read once per process.
[[nodiscard]] bool dontcache_refused_for_tests() noexcept;
[[nodiscard]] inline bool refused_for_tests(const request &r) noexcept
{
	return (r.op == op_kind::read || r.op == op_kind::write) && (r.rwf & RWF_DONTCACHE) != 0 &&
	       dontcache_refused_for_tests();
}

} // namespace dcache::io
