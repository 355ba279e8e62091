// One file object of a DCACHE export (the C API's opaque dcache_file): the
// descriptors the core opened on it, what it learned about the file, its
// held boundary pages and its write fence.
//
// Thread-safety: all of it may be used concurrently by the requests of the
// file.  fd_mutex guards only the descriptor pointers: a request copies a
// pointer and holds that reference until its completion (see fd_ref.h).
#pragma once

#include "auto_state.h"
#include "boundary_tracker.h"
#include "dcache_io/request.h"
#include "fd_ref.h"
#include "thread_annotations.h"
#include "write_fence.h"

#include <atomic>

struct dcache_export;

namespace dcache::core {

// What the core learned about one file, each fact once: its direct-I/O
// alignment (probed on first use) and what the kernel refused.
struct file_caps {
	std::atomic<bool> probed{false};
	io::dio_caps dio;		       // written once under fd_mutex, then read-only
	std::atomic<bool> no_dontcache{false}; // RWF_DONTCACHE refused (EOPNOTSUPP)
	std::atomic<bool> no_odirect{false};   // O_DIRECT refused at open (EINVAL)
	std::atomic<bool> no_nowait{false};    // RWF_NOWAIT refused

	[[nodiscard]] bool dontcache() const noexcept { return !no_dontcache.load(std::memory_order_relaxed); }
	[[nodiscard]] bool odirect() const noexcept { return !no_odirect.load(std::memory_order_relaxed); }
	[[nodiscard]] bool nowait() const noexcept { return !no_nowait.load(std::memory_order_relaxed); }
	// Whether the filesystem may serve a direct step through the page
	// cache: known once probed (the planner probes before any direct
	// step); a request that planned no direct step may run while another
	// thread probes, so it is read only through here.
	[[nodiscard]] bool direct_may_buffer() const noexcept
	{
		return probed.load(std::memory_order_acquire) && dio.may_buffer;
	}
};

} // namespace dcache::core

struct dcache_file {
	dcache_file() = default;
	dcache_file(const dcache_file &) = delete;
	dcache_file &operator=(const dcache_file &) = delete;
	~dcache_file() { delete auto_record.load(std::memory_order_relaxed); }

	dcache_export *exp = nullptr;
	dcache::core::shared_mutex fd_mutex;
	dcache::core::fd_ref direct DCACHE_GUARDED_BY(fd_mutex);   // the O_DIRECT twin
	dcache::core::fd_ref buffered DCACHE_GUARDED_BY(fd_mutex); // the plain twin (async requests)
	dcache::core::file_caps caps;
	// This file's held boundary pages (guarded by exp->boundary's mutex).
	dcache::core::boundary_file boundary{this};
	// Buffered and O_DIRECT WRITEs of this file in flight, by page.
	dcache::core::write_fence fence;
	// What IO_Cache_Read/Write = auto knows of the file (auto_state.h),
	// made by its first request through auto, owned by the file.
	std::atomic<dcache::core::auto_file *> auto_record{nullptr};
};

namespace dcache::core {

// The file's direct-I/O alignment, probed through fd on first use (logged
// once per export when the filesystem reports none).
[[nodiscard]] io::dio_caps probe_caps(dcache_export &e, dcache_file &f, int fd);

// The file's own descriptors, reopened from caller_fd (valid for the call)
// when there is none yet or it cannot write and for_write is asked.
// Empty when that fails: the caller then plans without O_DIRECT / runs
// synchronously on caller_fd.  An O_DIRECT refusal (EINVAL) is learned
// for good.
[[nodiscard]] fd_ref lease_direct(dcache_export &e, dcache_file &f, int caller_fd, bool for_write);
[[nodiscard]] fd_ref lease_buffered(dcache_export &e, dcache_file &f, int caller_fd, bool for_write);

// One of the file's descriptors (O_DIRECT first), for work on its pages
// outside a request of its own; empty when it has none open.
[[nodiscard]] fd_ref any_descriptor(dcache_file &f);

// The file answered EOPNOTSUPP to RWF_DONTCACHE: learned for good, logged
// once per export.
void learn_no_dontcache(dcache_export &e, dcache_file &f) noexcept;

} // namespace dcache::core
