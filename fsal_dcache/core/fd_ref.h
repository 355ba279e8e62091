// A descriptor the core opened (a reopen of the sub-FSAL's, plain or
// O_DIRECT), closed through the backend when the last reference goes.
//
// Ownership: shared by the file that opened it and by every request using
// it; a close of the file only drops the file's reference, so a descriptor
// is never pulled from under a request in flight.  The backend outlives
// it: the owner (file or request) keeps the export alive, and the export
// waits for its requests before it goes.
#pragma once

#include "dcache_io/backend.h"

#include <memory>

namespace dcache::core {

struct owned_fd {
	io::backend *backend = nullptr;
	int fd = -1;
	bool writable = false;
	owned_fd(io::backend *b, int d, bool w) noexcept : backend(b), fd(d), writable(w) {}
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
