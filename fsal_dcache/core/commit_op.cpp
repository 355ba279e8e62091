#include "commit_op.h"

#include "export_state.h"
#include "file_state.h"
#include "page_cache.h"
#include "planner.h"

#include <cerrno>

namespace dcache::core {

int after_commit(dcache_export &e, dcache_file *file, int fd, std::uint64_t offset, std::uint64_t len,
		 std::uint64_t sync_ns) noexcept
{
	try {
		e.stats.add(stat::commits);
		e.stats.record(DCACHE_OP_COMMIT, sync_ns);
		// Held pages in the COMMIT's range were written back when they
		// were written, and the COMMIT's fsync has made them durable: they
		// stay held, clean and cached, for the neighbour that completes
		// them (one writer COMMITs while the others still write; releasing
		// here made every neighbour read its page back).  The age limit,
		// the ceiling, close, truncate and unexport release them.
		boundary_tracker::release_list aged;
		if (file != nullptr) {
			const std::uint64_t first = offset / k_page_size;
			const std::uint64_t last =
				(len == 0 || len > UINT64_MAX - offset) ? UINT64_MAX : (offset + len - 1) / k_page_size;
			e.stats.add(stat::boundary_kept_at_commit, e.boundary.pages(file->boundary, first, last));
			e.boundary.reap(e.now(), aged);
		}
		const auto drop = drop_after_commit(e.settings.current(), offset, len);
		// On an asynchronous backend the COMMIT waits for neither, through
		// the file's own descriptor (fd is the caller's, for this call).
		side_work later(e, side_work::when::after_reply);
		if (file != nullptr && (drop || !aged.empty()) && later.defers())
			later.hold(lease_buffered(e, *file, fd, false));
		later.release_boundary(aged, file, fd);
		const int err = drop ? later.drop(fd, drop->offset, drop->length) : 0;
		later.issue();
		return err;
	} catch (...) {
		return EIO;
	}
}

} // namespace dcache::core
