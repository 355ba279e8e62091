// Backend selection: which backend an export runs on (IO_Backend,
// IO_Queue_Depth), and the fallback to the synchronous backend when
// io_uring cannot be had.
//
// Thread-safety: open_backend may be called concurrently;
// set_uring_factory is for tests, before the exports they create.
#pragma once

#include "dcache_io/backend.h"
#include "dcache_io/uring_backend.h"

#include <memory>
#include <string>

namespace dcache::io {

// The server's io_uring engine: every io_uring export of the process uses
// one of a few rings, each with its own completion thread (the ring's only
// submitter) and its io-wq: one per CPU the server may run on, at most
// k_shared_rings_cap.  An export is given the ring the fewest exports use
// (a new ring while there are fewer than that); a ring goes with the last
// export that uses it.  The exports stay apart where it matters: each has
// its own places (IO_Queue_Depth, core/admission.h), counters, settings
// and boundary pages; a ring has k_shared_ring_entries entries, enough for
// the places of many exports.
inline constexpr unsigned k_shared_rings_cap = 8;
inline constexpr unsigned k_shared_ring_entries = uring_backend::k_max_depth;
[[nodiscard]] unsigned shared_rings_max() noexcept;
// Rings alive now (tests, diagnostics).
[[nodiscard]] std::size_t shared_rings_alive() noexcept;

struct [[nodiscard]] backend_choice {
	std::shared_ptr<io::backend> backend; // never null; shared by the exports on one ring
	// io_uring was asked for but could not be had (ENOSYS, EPERM from
	// io_uring_disabled or seccomp, EACCES, EOPNOTSUPP, resources): why,
	// for the log.  0 otherwise.
	int uring_error = 0;
	std::string why;
};

// A ring of the engine when want_uring, falling back to the synchronous
// backend; the synchronous backend otherwise.  Throws only std::bad_alloc.
backend_choice open_backend(bool want_uring);

// How open_backend creates an io_uring backend; tests inject failures
// (ENOSYS, EPERM, ...) here.  While one is set, each export gets a ring of
// its own from it, outside the engine.  nullptr restores the engine.
using uring_factory = uring_open_result (*)(unsigned depth);
void set_uring_factory(uring_factory f) noexcept;

} // namespace dcache::io
