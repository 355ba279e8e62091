// Named sync points for tests (RocksDB's TEST_SYNC_POINT): a test installs
// a hook, and DCACHE_SYNC_POINT("boundary.claim") calls it with the point's
// name, so the test can block one thread there while another runs into a
// race.  Without a hook the cost is one acquire load of a null pointer;
// defining DCACHE_NO_SYNC_POINTS compiles the points out altogether.
//
// Points: boundary.claim (after the claim, before the edge is written),
// boundary.complete (edge written, before the tracker hears of it),
// boundary.release (page taken out of the table, before its write-back
// and drop), boundary.released (after them), admission.parked (a request
// was parked in line for a place: it is no longer its caller's),
// fence.wait (a WRITE is about to wait for the other kind to leave its
// pages; called under the fence's lock, which the wait then lets go),
// drive.submitted (a step was handed to the backend, and the submitter has
// not yet looked whether its completion came in: the hand-off in drive()).
#pragma once

namespace dcache::core {

struct sync_point_hook {
	void (*fn)(const char *name, void *arg) = nullptr;
	void *arg = nullptr;
};
// The hook must outlive every thread that may pass a sync point while it is
// installed; nullptr uninstalls.
void set_sync_point_hook(const sync_point_hook *hook) noexcept;
void sync_point(const char *name) noexcept;

} // namespace dcache::core

#ifdef DCACHE_NO_SYNC_POINTS
#define DCACHE_SYNC_POINT(name) ((void)0)
#else
#define DCACHE_SYNC_POINT(name) ::dcache::core::sync_point(name)
#endif
