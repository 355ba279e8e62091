// The C API's opaque objects and the C++ entry points the unit tests use to
// run them over a chosen backend.
//
// Ownership: a dcache_export owns its backend when created through the C
// API (a sync_backend); export_new_with_backend() borrows one, which must
// outlive the export.  A dcache_file holds a reference on its export
// (the export is freed with its last reference: Ganesha shares objects
// among the exports of one filesystem, so one can outlive the export that
// created it) and owns its O_DIRECT descriptor.
//
// Thread-safety: all data-path calls may run concurrently on one export and
// one file.  Settings are one packed atomic word, so a request sees either
// the old or the new settings, never a mix.  The file's own descriptors
// (O_DIRECT, and the buffered one asynchronous requests use) are
// shared_ptr-owned: fd_mutex guards only the pointer; a request copies it
// and holds that reference until its completion, so dcache_file_close
// drops the file's reference without blocking and the descriptor is closed
// by whoever lets go of it last (maybe the completion thread), never under
// a request in flight.
//
// Asynchronous requests: the export counts them (inflight); the export is
// deleted (last reference) only once none is left, because a completion
// touches the export and its backend until just before calling done.
#pragma once

#include "boundary_tracker.h"
#include "dcache/core.h"
#include "dcache_io/backend.h"
#include "dcache_io/uring_backend.h"
#include "known_handles.h"
#include "stats.h"
#include "write_fence.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

namespace dcache::core {

// A descriptor the engine opened (reopen of the sub-FSAL's via
// /proc/self/fd), closed through the backend when the last reference goes.
// The backend outlives it: the owner (file or request) keeps the export
// alive, and the export waits for its requests before it goes.
struct owned_fd {
	dcache::io::backend *backend = nullptr;
	int fd = -1;
	bool writable = false;
	owned_fd(dcache::io::backend *b, int d, bool w) noexcept : backend(b), fd(d), writable(w) {}
	owned_fd(const owned_fd &) = delete;
	owned_fd &operator=(const owned_fd &) = delete;
	~owned_fd()
	{
		if (fd >= 0 && backend != nullptr)
			backend->close_fd(fd);
	}
};
using fd_ref = std::shared_ptr<const owned_fd>;

} // namespace dcache::core

namespace dcache::core {
// Keys remembered per export (a VFS key is ~30 bytes: ~4 MiB at most).
inline constexpr std::size_t k_known_handles = 65536;
} // namespace dcache::core

struct dcache_export {
	// One reference for the adapter's export and one per dcache_file: in
	// Ganesha, objects are shared by the exports of one filesystem and can
	// outlive the export that created them.
	std::atomic<int> refs{1};
	std::atomic<std::uint64_t> packed_settings{0};
	char name[128] = {};
	dcache::io::backend *backend = nullptr;
	std::unique_ptr<dcache::io::backend> owned_backend;
	dcache::core::export_stats stats;
	// Half-written boundary pages of every file of the export (the ceiling
	// is per export); Boundary_Max_Pages / _Max_Age_Ms live in it.
	dcache::core::boundary_tracker boundary{stats};
	std::atomic<std::uint32_t> logged{0}; // log-once bits, see engine.cpp
	// What the export runs on, fixed at creation (IO_Backend is not live).
	dcache_io_backend backend_kind = DCACHE_IO_BACKEND_SYNC;
	std::atomic<int> requested_backend{DCACHE_IO_BACKEND_SYNC};
	std::atomic<std::uint32_t> queue_depth{64};
	// Asynchronous requests not yet finished (see the header comment).
	std::mutex inflight_mutex;
	std::condition_variable inflight_cv;
	std::size_t inflight = 0; // guarded by inflight_mutex
	// File handles known to lie inside the export (see known_handles.h).
	dcache::core::known_handles known{dcache::core::k_known_handles};
};

struct dcache_file {
	dcache_export *exp = nullptr;
	std::shared_mutex fd_mutex;
	dcache::core::fd_ref direct;     // O_DIRECT twin; guarded by fd_mutex
	dcache::core::fd_ref buffered;   // plain twin (async requests); guarded by fd_mutex
	std::atomic<bool> no_nowait{false}; // RWF_NOWAIT refused on this file
	std::atomic<bool> caps_probed{false};
	dcache::io::dio_caps caps;       // written once under fd_mutex, then read-only
	std::atomic<bool> no_dontcache{false};
	std::atomic<bool> no_odirect{false};
	// This file's held boundary pages (guarded by exp->boundary's mutex).
	// Released through the request's descriptor when a request of this
	// file releases them, otherwise through direct_fd (shared fd_mutex).
	dcache::core::boundary_file boundary{this};
	// Buffered and O_DIRECT WRITEs of this file in flight, by page.
	dcache::core::write_fence fence;
};

namespace dcache::core {

[[nodiscard]] std::uint64_t pack_settings(const dcache_settings &s) noexcept;
[[nodiscard]] dcache_settings unpack_settings(std::uint64_t v) noexcept;

// Like dcache_export_new, over a borrowed backend (tests: the fake).
[[nodiscard]] dcache_export *export_new_with_backend(const dcache_settings *settings,
						     const char *name, io::backend *backend) noexcept;

// Drops one reference (a file's, or the adapter's after its unexport work).
void export_unref(dcache_export *exp) noexcept;

// How dcache_export_new creates an io_uring backend; tests inject failures
// (ENOSYS, EPERM, ...) here.  nullptr restores make_uring_backend.
using uring_factory = io::uring_open_result (*)(unsigned depth);
void set_uring_factory(uring_factory f) noexcept;

} // namespace dcache::core
