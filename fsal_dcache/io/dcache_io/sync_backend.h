// Synchronous backend: one blocking syscall per request.  Stateless, so
// thread-safe; owns no descriptors (those returned by open_direct belong to
// the caller).
#pragma once

#include "dcache_io/backend.h"

namespace dcache::io {

class sync_backend final : public backend {
public:
	[[nodiscard]] const char *name() const noexcept override { return "sync"; }
	[[nodiscard]] result execute(const request &req) noexcept override;
	[[nodiscard]] dio_caps probe_dio(int fd) noexcept override;
	// probe_btrfs, else probe_block_device.
	[[nodiscard]] dio_caps probe_dio_fs(int fd) noexcept override;
	[[nodiscard]] open_result open_direct(int fd) noexcept override;
	void close_fd(int fd) noexcept override;
	// open("/proc/self/fd/<fd>", O_RDWR|O_CLOEXEC), EACCES: fd's access mode.
	[[nodiscard]] open_result open_buffered(int fd) noexcept override;
};

// The probes on their own, for tests and tools.
// statx(STATX_DIOALIGN|STATX_DIO_READ_ALIGN); caps.from == none if the
// filesystem reports nothing.
[[nodiscard]] dio_caps probe_statx(int fd) noexcept;
// XFS_IOC_DIOINFO; caps.from == none on any other filesystem.
[[nodiscard]] dio_caps probe_xfs_dioinfo(int fd) noexcept;
// BTRFS_IOC_FS_INFO's sector size, for memory and offsets alike (btrfs
// reports no STATX_DIOALIGN, and serves a direct request misaligned to its
// sector size through the page cache without saying so); caps.from ==
// none on any other filesystem.
[[nodiscard]] dio_caps probe_btrfs(int fd) noexcept;
// The logical block size of the block device under fd's filesystem
// (/sys/dev/block/MAJ:MIN, a partition's disk), for memory and offsets
// alike, kept only if an O_DIRECT read of one block at offset 0 is not
// refused; caps.from == none for a filesystem on no block device (tmpfs,
// FUSE, NFS, overlay: st_dev major 0) or when the read is refused.
[[nodiscard]] dio_caps probe_block_device(int fd) noexcept;

} // namespace dcache::io
