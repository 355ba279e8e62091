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
// the old or the new settings, never a mix.  The O_DIRECT descriptor is
// guarded by a shared_mutex: I/O holds it shared for the duration of the
// syscall, open/close take it exclusively, so a close never pulls a
// descriptor from under a request in flight.
#pragma once

#include "boundary_tracker.h"
#include "dcache/core.h"
#include "dcache_io/backend.h"
#include "stats.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>

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
};

struct dcache_file {
	dcache_export *exp = nullptr;
	std::shared_mutex fd_mutex;
	int direct_fd = -1;              // guarded by fd_mutex
	bool direct_fd_writable = false; // guarded by fd_mutex
	std::atomic<bool> caps_probed{false};
	dcache::io::dio_caps caps;       // written once under fd_mutex, then read-only
	std::atomic<bool> no_dontcache{false};
	std::atomic<bool> no_odirect{false};
	// This file's held boundary pages (guarded by exp->boundary's mutex).
	// Released through the request's descriptor when a request of this
	// file releases them, otherwise through direct_fd (shared fd_mutex).
	dcache::core::boundary_file boundary{this};
};

namespace dcache::core {

[[nodiscard]] std::uint64_t pack_settings(const dcache_settings &s) noexcept;
[[nodiscard]] dcache_settings unpack_settings(std::uint64_t v) noexcept;

// Like dcache_export_new, over a borrowed backend (tests: the fake).
[[nodiscard]] dcache_export *export_new_with_backend(const dcache_settings *settings,
						     const char *name, io::backend *backend) noexcept;

// Drops one reference (a file's, or the adapter's after its unexport work).
void export_unref(dcache_export *exp) noexcept;

} // namespace dcache::core
