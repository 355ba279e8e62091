// The I/O backend seam.  A backend executes request values; the core never
// makes a syscall itself.  Implementations: sync_backend (plain syscalls),
// uring_backend (io_uring, completions on a thread of its own) and
// fake_backend (memory, fault injection, call log, for tests);
// backend_factory.h chooses one for an export.
//
// Thread-safety: every backend must accept concurrent calls from many
// threads (Ganesha's worker threads issue READ/WRITEs on one export and one
// file at the same time).
//
// Asynchronous submission: submit() takes a completion object and may call
// it later from another thread; the default here runs execute() inline and
// completes immediately, so a synchronous backend gets it for free.
#pragma once

#include "dcache_io/bounce_pool.h"
#include "dcache_io/request.h"

#include <cerrno>
#include <cstddef>

namespace dcache::io {

class completion {
public:
	virtual void complete(result r) noexcept = 0;

protected:
	~completion() = default; // not owned through this interface
};

class backend;

// The credentials (fsuid, fsgid, groups, capabilities) of the thread that
// captured them, for requests that may be issued from another thread.
//
// Why: an asynchronous backend issues later steps of a request chain from
// its completion thread (root, with CAP_FSETID), so without this a WRITE
// would skip the kernel's setuid/setgid clearing and quota would be charged
// to the server instead of the NFS client Ganesha impersonates (per-thread
// setfsuid/setfsgid/setgroups).  Put personality() in request::personality
// of every request the captured credentials must cover.
//
// Ownership: move-only; the destructor gives the id back to the backend
// (io_uring: IORING_UNREGISTER_PERSONALITY).  Requests already submitted
// hold their own reference on the credentials in the kernel, so releasing
// right after the last completion is safe.  The backend must outlive the
// token.  An empty token (personality() == 0) means "no override".
// Thread-safety: one token is used by one owner at a time; tokens of the
// same backend may be created and released concurrently from any threads.
class credentials {
public:
	credentials() noexcept = default;
	credentials(backend *owner, int id) noexcept : _owner(owner), _id(id) {}
	credentials(credentials &&o) noexcept : _owner(o._owner), _id(o._id)
	{
		o._owner = nullptr;
		o._id = 0;
	}
	credentials &operator=(credentials &&o) noexcept
	{
		if (this != &o) {
			reset();
			_owner = o._owner;
			_id = o._id;
			o._owner = nullptr;
			o._id = 0;
		}
		return *this;
	}
	credentials(const credentials &) = delete;
	credentials &operator=(const credentials &) = delete;
	~credentials() { reset(); }

	[[nodiscard]] int personality() const noexcept { return _id; }
	[[nodiscard]] bool empty() const noexcept { return _id == 0; }
	inline void reset() noexcept; // after class backend

private:
	backend *_owner = nullptr;
	int _id = 0;
};

// error: 0, or why the credentials could not be captured (io_uring:
// EINVAL on kernels < 5.6, ENOMEM, EBUSY when all 65535 ids are in use).
// On error the token is empty and the caller must not hand the request to
// another thread (run it on the calling thread instead).
struct [[nodiscard]] credentials_result {
	int error = 0;
	credentials creds;
};

// Result of opening the O_DIRECT twin of a descriptor.
struct [[nodiscard]] open_result {
	int error = 0; // EINVAL: the filesystem refuses O_DIRECT
	int fd = -1;
	bool readable = true; // the access mode the descriptor got
	bool writable = true;
};

// Memory a direct step goes through when the payload cannot be used as
// it is (backend::bounce_get): page-aligned, kept for reuse.
struct bounce_buffer {
	void *data = nullptr; // nullptr: out of memory
	std::size_t len = 0;  // as asked
	// The buffer's index among those registered with the backend's ring
	// (request::buf_index), or -1: a plain buffer.
	int index = -1;
	bool reused = false; // was mapped before (no page fault, no zeroing)
};

class backend {
public:
	virtual ~backend() = default;

	[[nodiscard]] virtual const char *name() const noexcept = 0;

	// Blocking execution of one request.
	[[nodiscard]] virtual result execute(const request &req) noexcept = 0;

	// Asynchronous form (see the header comment).  The iovecs of req must
	// stay valid until c.complete() has been called.
	virtual void submit(const request &req, completion &c) noexcept { c.complete(execute(req)); }

	// Capabilities, probed once per file by the caller (which caches them):
	// what the file reports of itself (statx, a filesystem's own ioctl),
	// with caps.fs set whenever the file's filesystem is known.
	[[nodiscard]] virtual dio_caps probe_dio(int fd) noexcept = 0;
	// Where the file reports nothing: what its filesystem as a whole
	// allows, learned another way (probed once per filesystem by the
	// caller).  Default: nothing.
	[[nodiscard]] virtual dio_caps probe_dio_fs(int fd) noexcept
	{
		(void)fd;
		return {};
	}

	// Opens an O_DIRECT descriptor on the same open file as fd (never
	// changes fd's own flags).  The caller owns the returned descriptor
	// and releases it with close_fd().
	[[nodiscard]] virtual open_result open_direct(int fd) noexcept = 0;
	virtual void close_fd(int fd) noexcept = 0;

	// ---- asynchronous callers (added for the core's *_start API) ----

	// Blocking execution in the CALLING thread, never handed to another
	// thread (io_uring: a plain syscall instead of a ring round trip).
	// Used for RWF_NOWAIT attempts, whose point is to avoid a hand-off.
	[[nodiscard]] virtual result execute_now(const request &req) noexcept { return execute(req); }

	// true when submit() always completes inside the call (the default
	// submit above).  The core then issues on the caller's descriptor
	// and skips the RWF_NOWAIT attempt (it would only add a syscall).
	[[nodiscard]] virtual bool completes_inline() const noexcept { return true; }

	// Whether a WRITE's cached pieces are better run in the submitting
	// thread (execute_now) than submitted: true where the asynchronous
	// path would only move the same blocking to a worker of its own
	// (io_uring punts buffered writes the filesystem refuses to do with
	// RWF_NOWAIT to io-wq).  See write_step_in_caller in the core.
	[[nodiscard]] virtual bool cached_writes_in_caller() const noexcept { return false; }

	// true on the thread that runs completions (a backend must not be
	// destroyed there: see uring_backend).
	[[nodiscard]] virtual bool on_completion_thread() const noexcept { return false; }

	// Opens a plain (buffered) descriptor on the same inode as fd, owned by
	// the caller (close_fd), for requests that outlive the caller's fd.
	// Default: not supported (the core then stays synchronous).
	[[nodiscard]] virtual open_result open_buffered(int fd) noexcept
	{
		(void)fd;
		return {EOPNOTSUPP, -1, false, false};
	}

	// The most threads the backend may start of its own for requests it
	// cannot issue without blocking (io_uring's io-wq workers); 0: the
	// backend's default.  Returns 0 or an errno value.  Default: the
	// backend starts none (sync, fake), nothing to bound.
	[[nodiscard]] virtual int set_io_workers(unsigned n) noexcept
	{
		(void)n;
		return 0;
	}

	// ---- bounce buffers ----

	// A page-aligned buffer of len bytes for a direct step's copy, kept
	// for reuse after bounce_put.  io_uring: registered with the ring
	// where it can be (index >= 0; put it in request::buf_index), so the
	// kernel pins its pages once, not per request.  Default: the process's
	// pool (bounce_pool.h), index -1.
	[[nodiscard]] virtual bounce_buffer bounce_get(std::size_t len) noexcept
	{
		bounce_buffer b{nullptr, len, -1, false};
		b.data = io::bounce_get(len, &b.reused);
		return b;
	}
	// Gives back what bounce_get returned, once no request uses it.
	virtual void bounce_put(const bounce_buffer &b) noexcept { io::bounce_put(b.data, b.len); }
	// The index (request::buf_index) of a buffer of the caller's that the
	// backend has registered and that holds [p, p + len): the server's RPC
	// buffers where they are registered with the ring (rpc_buffers.h); -1:
	// none (the default).
	[[nodiscard]] virtual int registered_index(const void *p, std::size_t len) const noexcept
	{
		(void)p;
		(void)len;
		return -1;
	}

	// ---- credentials (see class credentials) ----

	// Captures the CALLING thread's current credentials.  Default: an
	// empty token and no error, for backends that run every request on
	// the caller's thread (sync, fake): nothing to carry.
	[[nodiscard]] virtual credentials_result capture_credentials() noexcept { return {}; }
	// The same, for a thread whose credentials are exactly `who` (the
	// caller set them so): a backend may hand out a token it registered
	// earlier for the same identity.
	[[nodiscard]] virtual credentials_result capture_credentials(const identity &who) noexcept
	{
		(void)who;
		return capture_credentials();
	}

protected:
	friend class credentials;
	// Gives back an id capture_credentials() returned (called by the
	// token's destructor, from any thread).
	virtual void release_credentials(int id) noexcept { (void)id; }
};

inline void credentials::reset() noexcept
{
	if (_owner != nullptr && _id != 0)
		_owner->release_credentials(_id);
	_owner = nullptr;
	_id = 0;
}

} // namespace dcache::io
