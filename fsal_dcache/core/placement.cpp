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
	// A direct READ into a buffer the ring has registered (Ganesha 6.x's
	// READ buffers, rpc_buffers.h) pins no pages there, and that saves
	// more than the hand-off costs: on 6.5, 0.73-0.76 s of server CPU per
	// GiB of a READ stream through the ring, 0.88-0.98 as syscalls in
	// the slots, where every page is pinned per request
	// (docs/results/2026-12-06-rpc-fixed-6.5.md).
	if (f.blocking_max == 0 || f.completes_inline || f.split_write || f.registered_read)
		return placement::ring;
	return placement::blocking_slot;
}

} // namespace dcache::core
