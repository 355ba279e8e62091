// The I/O backend seam.  A backend executes request values; the core never
// makes a syscall itself.  Implementations: sync_backend (plain syscalls),
// fake_backend (memory, fault injection, call log), and later io_uring.
//
// Thread-safety: every backend must accept concurrent calls from many
// threads (Ganesha's worker threads issue READ/WRITEs on one export and one
// file at the same time).
//
// Growing an asynchronous submit: submit() takes a completion object and
// may call it later from another thread; the default here runs execute()
// inline and completes immediately, so a synchronous backend gets it for
// free and the core can be moved to submit() without touching backends.
#pragma once

#include "dcache_io/request.h"

#include <cerrno>

namespace dcache::io {

class completion {
public:
	virtual void complete(result r) noexcept = 0;

protected:
	~completion() = default; // not owned through this interface
};

// Result of opening the O_DIRECT twin of a descriptor.
struct [[nodiscard]] open_result {
	int error = 0; // EINVAL: the filesystem refuses O_DIRECT
	int fd = -1;
	bool readable = true; // the access mode the descriptor got
	bool writable = true;
};

class backend {
public:
	virtual ~backend() = default;

	[[nodiscard]] virtual const char *name() const noexcept = 0;

	// Blocking execution of one request.
	[[nodiscard]] virtual result execute(const request &req) noexcept = 0;

	// Asynchronous form (see the header comment).  The iovecs of req must
	// stay valid until c.complete() has been called.
	virtual void submit(const request &req, completion &c) noexcept
	{
		c.complete(execute(req));
	}

	// Capabilities, probed once per file by the caller (which caches them).
	[[nodiscard]] virtual dio_caps probe_dio(int fd) noexcept = 0;

	// Opens an O_DIRECT descriptor on the same open file as fd (never
	// changes fd's own flags).  The caller owns the returned descriptor
	// and releases it with close_fd().
	[[nodiscard]] virtual open_result open_direct(int fd) noexcept = 0;
	virtual void close_fd(int fd) noexcept = 0;

	// ---- asynchronous callers (added for the engine's *_start API) ----

	// Blocking execution in the CALLING thread, never handed to another
	// thread (io_uring: a plain syscall instead of a ring round trip).
	// Used for RWF_NOWAIT attempts, whose point is to avoid a hand-off.
	[[nodiscard]] virtual result execute_now(const request &req) noexcept { return execute(req); }

	// true when submit() always completes inside the call (the default
	// submit above).  The engine then issues on the caller's descriptor
	// and skips the RWF_NOWAIT attempt (it would only add a syscall).
	[[nodiscard]] virtual bool completes_inline() const noexcept { return true; }

	// true on the thread that runs completions (a backend must not be
	// destroyed there: see uring_backend).
	[[nodiscard]] virtual bool on_completion_thread() const noexcept { return false; }

	// Opens a plain (buffered) descriptor on the same inode as fd, owned by
	// the caller (close_fd), for requests that outlive the caller's fd.
	// Default: not supported (the engine then stays synchronous).
	[[nodiscard]] virtual open_result open_buffered(int fd) noexcept
	{
		(void)fd;
		return {EOPNOTSUPP, -1, false, false};
	}
};

} // namespace dcache::io
