#include "placement.h"

namespace dcache::core {

placement place(const step_facts &f) noexcept
{
	if (f.request_blocking)
		return placement::here;
	// Off the caller's thread the client's credentials are only the ring's
	// to carry: everything goes there.
	if (!f.on_caller)
		return placement::ring;
	if (f.cached_write && f.cached_in_caller)
		return placement::in_caller;
	// A synchronous backend blocks where it is submitted anyway.  A split
	// WRITE's steps go through io_uring: misaligned writers of one file
	// meet on its inode lock (their cached edges take it exclusively, and
	// XFS holds it across a blocking O_DIRECT write that extends the file,
	// where io_uring lets it go at submission); measured: 32 misaligned
	// writers of one file 0.27x VFS with the middle blocking, 0.47x
	// through io_uring (docs/configuration.md, "How the io_uring backend
	// issues a request").
	if (f.blocking_max == 0 || f.completes_inline || f.split_write)
		return placement::ring;
	return placement::blocking_slot;
}

} // namespace dcache::core
