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

struct [[nodiscard]] backend_choice {
	std::unique_ptr<io::backend> backend; // never null
	// io_uring was asked for but could not be had (ENOSYS, EPERM from
	// io_uring_disabled or seccomp, EACCES, EOPNOTSUPP, resources): why,
	// for the log.  0 otherwise.
	int uring_error = 0;
	std::string why;
};

// io_uring of `depth` entries when want_uring, falling back to the
// synchronous backend; the synchronous backend otherwise.  Throws only
// std::bad_alloc.
backend_choice open_backend(bool want_uring, unsigned depth);

// How open_backend creates an io_uring backend; tests inject failures
// (ENOSYS, EPERM, ...) here.  nullptr restores make_uring_backend.
using uring_factory = uring_open_result (*)(unsigned depth);
void set_uring_factory(uring_factory f) noexcept;

} // namespace dcache::io
