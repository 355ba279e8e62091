// The COMMIT operation: what the core does once the sub-FSAL's COMMIT (its
// fsync) succeeded, beside READ and WRITE (request_op.h).  Ganesha's COMMIT
// is synchronous and the sync is the sub-FSAL's, so this is the work after
// it: count it, keep the boundary pages it covered, release those past
// their age, and the mode's drop (planner.h, drop_after_commit), off the
// reply path where the backend allows.
#pragma once

#include <cstdint>

struct dcache_export;
struct dcache_file;

namespace dcache::core {

// [offset, offset+len) (len 0: to end of file) was committed through fd
// (the caller's, valid for this call) in sync_ns.  Returns 0 or an errno
// value (a drop that failed now; one queued is only counted).
[[nodiscard]] int after_commit(dcache_export &e, dcache_file *file, int fd, std::uint64_t offset, std::uint64_t len,
			       std::uint64_t sync_ns) noexcept;

} // namespace dcache::core
