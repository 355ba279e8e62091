// io_uring backend (liburing): one ring per backend, submissions from any
// thread, completions reaped and delivered on the backend's own thread.
//
// Ownership (read this before calling submit()):
//  - submit() copies the request and its iovec ARRAY; the caller's array may
//    be reused as soon as submit() returns.
//  - The BUFFERS the iovecs point at belong to the caller but are lent to
//    the kernel from submit() until completion::complete() has returned:
//    do not free, reuse or (for writes) modify them before that.  On
//    destruction of the backend every request still in flight is completed
//    (or cancelled: ECANCELED, or a short count) before the destructor
//    returns, so buffers are never referenced after that point.
//  - The completion object must stay alive until its complete() is called.
//    complete() runs exactly once per submit(), on the reaper thread, never
//    inline inside submit() (except for requests rejected before reaching
//    the kernel, e.g. after shutdown began: those complete inline with
//    ECANCELED/EINVAL).  complete() must not block for long: it delays every
//    other completion of this ring.
//  - The backend must not be destroyed from a completion callback (the
//    destructor joins the reaper thread that runs the callbacks).
//  - The fd must stay open until completion (the kernel holds its own
//    reference on the file while the request runs, but the number could be
//    reused for another file by the time a short transfer is resubmitted).
//
// Semantics, matching sync_backend:
//  - errors are positive errno values (io_uring reports -errno in cqe->res);
//  - short reads/writes are resubmitted for the remainder; a read stops at
//    EOF (0 bytes).  That is regular-file semantics: on a pipe or socket a
//    read waits until the whole buffer is filled; an error after some progress reports the progress (as
//    preadv/pwritev do), so the caller sees a short transfer, not the error;
//  - request::rwf (RWF_DONTCACHE, RWF_NOWAIT, ...) goes to sqe->rw_flags;
//  - a read/write with request::buf_index >= 0 (one iovec in a buffer
//    bounce_get registered) goes as READ_FIXED/WRITE_FIXED, remainders too;
//  - fsync/fdatasync use IORING_OP_FSYNC (IORING_FSYNC_DATASYNC); range ops
//    use IORING_OP_SYNC_FILE_RANGE and IORING_OP_FADVISE(DONTNEED); ranges
//    longer than 4 GiB (the sqe's 32-bit len) are issued in chunks.
//
// Ordering: io_uring runs requests concurrently and does NOT order an fsync
// after writes submitted earlier.  This backend never links a sync to the
// writes it covers (a link cannot cover a write's resubmitted remainder);
// the one link it makes is a flush_drop's write-back to its drop
// (IOSQE_IO_HARDLINK).
// The rule is: submit the sync only after the completions of the writes it
// must cover have been delivered.  execute() (submit + wait) obeys it
// naturally; an asynchronous caller chains the sync from the last write's
// completion.
//
// Thread-safety: all members may be called concurrently from any number of
// threads.  The reaper thread is the ring's only submitter: submit() from
// any other thread pushes the request on a lock-free list and, if the list
// was empty, wakes the reaper through an eventfd it keeps a read armed on;
// the reaper fills the SQEs of everything pushed since and hands them to
// the kernel in one io_uring_enter, the same one that waits for the next
// completion.  Why one submitter: io_uring's io-wq workers (the threads
// it starts for requests it cannot issue without blocking: fsync,
// sync_file_range, fadvise, buffered writes XFS refuses with NOWAIT,
// allocating O_DIRECT writes) belong to the task that submitted the
// request.  With every Ganesha worker submitting, each of ~200 workers kept
// an io-wq of its own; with one submitter there is one io-wq per ring, and
// set_io_workers() (IORING_REGISTER_IOWQ_MAX_WORKERS) bounds it.  The
// hand-off costs an eventfd write only when the reaper has nothing pending
// (the list was empty); under load, requests share the reaper's
// submission.  Only the reaper touches the SQ and the CQ; _mutex guards
// the in-flight count the back-pressure waits on.
//
// Back-pressure: at most depth() requests are in flight (handed off or in
// the ring); submit() blocks while that many are (except on the reaper
// thread itself, where blocking would deadlock: a completion callback may
// submit the next segment; the kernel's CQ overflow list
// (IORING_FEAT_NODROP) absorbs that excess).
//
// Credentials: a request runs with the credentials of the thread whose
// io_uring_enter issues it (and a request punted to io-wq takes the
// submitter's credentials at punt time): here always the reaper thread
// (Ganesha's root), whichever thread called submit().
// capture_credentials() registers the calling thread's credentials as a
// personality (IORING_REGISTER_PERSONALITY, one io_uring_register call);
// request::personality != 0 goes to sqe->personality of every SQE of that
// request, resubmitted remainders included; the token's destructor
// unregisters it (a second call).  capture_credentials(identity) keeps the
// registration for the next request of the same uid, gid and groups, so a
// server registers once per client identity, not twice per WRITE.
// execute() on the reaper thread and execute_now() run the request as a plain syscall in the calling thread
// and ignore the personality (use them only for credential-insensitive
// work there: fsync, sync_file_range, fadvise).
//
// Kernel note: io_uring finishes a request with task work that runs in the
// context of the submitting thread: the reaper, which runs it whenever it
// enters the kernel (IORING_SETUP_COOP_TASKRUN where the kernel has it,
// 5.19+: no interrupt for it).  A thread that exits would cancel the
// requests it submitted; the reaper exits last.
#pragma once

#include "dcache_io/backend.h"
#include "dcache_io/fixed_buffers.h"
#include "dcache_io/sync_backend.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct io_uring; // liburing's ring; kept out of this header

namespace dcache::io {

class uring_backend final : public backend {
public:
	// Upper bound on the queue depth: more buys nothing for one Ganesha
	// export and costs locked memory.
	static constexpr unsigned k_max_depth = 4096;

	~uring_backend() override;
	uring_backend(const uring_backend &) = delete;
	uring_backend &operator=(const uring_backend &) = delete;

	[[nodiscard]] const char *name() const noexcept override { return "io_uring"; }
	// submit() + wait.  Called on the reaper thread (from a completion
	// callback), it runs the request synchronously instead of deadlocking.
	[[nodiscard]] result execute(const request &req) noexcept override;
	void submit(const request &req, completion &c) noexcept override;

	// Probes and the O_DIRECT reopen are plain syscalls: delegated.
	[[nodiscard]] dio_caps probe_dio(int fd) noexcept override { return _sync.probe_dio(fd); }
	[[nodiscard]] dio_caps probe_dio_fs(int fd) noexcept override { return _sync.probe_dio_fs(fd); }
	[[nodiscard]] open_result open_direct(int fd) noexcept override { return _sync.open_direct(fd); }
	void close_fd(int fd) noexcept override { _sync.close_fd(fd); }
	[[nodiscard]] open_result open_buffered(int fd) noexcept override { return _sync.open_buffered(fd); }
	// A plain syscall in the calling thread (RWF_NOWAIT attempts).
	[[nodiscard]] result execute_now(const request &req) noexcept override { return _sync.execute(req); }
	[[nodiscard]] bool completes_inline() const noexcept override { return false; }
	[[nodiscard]] bool cached_writes_in_caller() const noexcept override { return true; }
	[[nodiscard]] bool on_completion_thread() const noexcept override
	{
		return std::this_thread::get_id() == _reaper_id;
	}
	[[nodiscard]] credentials_result capture_credentials() noexcept override;
	// Registered with this ring where it can be (fixed_buffers.h), else
	// the process's pool.
	[[nodiscard]] bounce_buffer bounce_get(std::size_t len) noexcept override;
	void bounce_put(const bounce_buffer &b) noexcept override;
	// The server's RPC buffers registered with this ring (rpc_buffers.h).
	[[nodiscard]] int registered_index(const void *p, std::size_t len) const noexcept override;
	// The ring's registered buffers; nullptr where the kernel refused the
	// table (errno in fixed_error()).
	[[nodiscard]] const fixed_buffers *fixed() const noexcept { return _fixed.get(); }
	[[nodiscard]] int fixed_error() const noexcept { return _fixed_error; }
	// At most n io-wq workers for this ring (each kind: bounded work such
	// as regular files, unbounded such as sockets); 0: the kernel's own
	// default, min(depth, 4 x online CPUs).  Applies at once, to workers
	// already running too.  0 or an errno value (EINVAL: kernel < 5.15).
	[[nodiscard]] int set_io_workers(unsigned n) noexcept override;
	// The bound set_io_workers() last applied (what 0 stands for included).
	[[nodiscard]] unsigned io_workers() const noexcept { return _io_workers.load(std::memory_order_relaxed); }
	// Cached per identity: one registration serves every later request of
	// the same uid, gid and groups (up to k_identity_cache identities,
	// the least recently used one not in use given back first).
	[[nodiscard]] credentials_result capture_credentials(const identity &who) noexcept override;
	static constexpr std::size_t k_identity_cache = 64;

	// ---- inspection (tests, stats) ----
	[[nodiscard]] unsigned depth() const noexcept { return _depth; }
	[[nodiscard]] std::size_t in_flight() const noexcept;
	[[nodiscard]] std::size_t max_in_flight() const noexcept;
	// Times a short transfer was resubmitted for its remainder.
	[[nodiscard]] std::uint64_t resubmits() const noexcept { return _resubmits.load(std::memory_order_relaxed); }
	// Personalities registered and not yet released (leak checks).
	[[nodiscard]] std::uint64_t personalities_live() const noexcept
	{
		return _personalities.load(std::memory_order_relaxed);
	}
	// Test hook: make capture_credentials() fail with err (0 = normal).
	void fail_capture_for_test(int err) noexcept { _fail_capture.store(err, std::memory_order_relaxed); }
	// Test hook: the next n ops find the ring full, as when the kernel
	// refuses to take its entries (EBUSY: the completion queue overflows).
	void ring_full_for_test(unsigned n) noexcept { _full_for_test.store(n, std::memory_order_relaxed); }
	// Times an op found the ring full and waited in the backlog.
	[[nodiscard]] std::uint64_t ring_full_waits() const noexcept
	{
		return _ring_full_waits.load(std::memory_order_relaxed);
	}

protected:
	void release_credentials(int id) noexcept override;

private:
	struct cached_identity {
		std::vector<std::uint32_t> key; // uid, gid, groups...
		int id = 0;
		unsigned refs = 0;
		std::uint64_t used = 0;
	};
	[[nodiscard]] int register_personality() noexcept;
	std::mutex _id_mutex;
	std::vector<cached_identity> _identities; // guarded by _id_mutex
	std::uint64_t _id_clock = 0;		  // guarded by _id_mutex

private:
	struct op;
	friend struct uring_open_result make_uring_backend(unsigned depth) noexcept;

	uring_backend() = default;
	// Reaper only, from here to reaper_loop.  Fills the SQE(s) for the
	// op's current state; the loop submits them.  Returns 0 or an errno
	// value (the op was not queued).
	[[nodiscard]] int queue(op &o) noexcept;
	// Handles one CQE; returns the op if it is finished, nullptr if it was
	// resubmitted.
	[[nodiscard]] op *on_cqe(op &o, int res) noexcept;
	// queue(), or, when the ring has no room (EBUSY) or ops already wait
	// for it, the backlog: the op goes out, in order, once a pass has
	// reaped.  A step or a side task is never failed for a full ring.
	[[nodiscard]] int queue_or_wait(op &o) noexcept;
	// Queues the backlog's ops, oldest first, while the ring has room.
	void queue_backlog() noexcept;
	// Queues every op other threads handed off, in the order they came.
	void take_handoffs() noexcept;
	// Appends a finished op to _finished (completed after the pass).
	void finish(op *o) noexcept;
	void arm_wake() noexcept;
	void queue_cancel() noexcept;
	void reaper_loop() noexcept;
	// Any thread: hands the op to the reaper.
	void hand_off(op *o) noexcept;
	void wake() const noexcept;

	sync_backend _sync;
	std::unique_ptr<io_uring> _ring;
	std::unique_ptr<fixed_buffers> _fixed; // goes before the ring
	int _fixed_error = 0;
	unsigned _depth = 0;
	int _wake_fd = -1;		     // eventfd: "the hand-off list was empty"
	std::atomic<op *> _handoff{nullptr}; // pushed by any thread, taken by the reaper

	mutable std::mutex _mutex;	// guards the three below
	std::condition_variable _space; // signalled when _in_flight drops
	std::size_t _in_flight = 0;	// caller requests submitted, not completed
	std::size_t _max_in_flight = 0;
	bool _stopping = false;

	// The reaper's own (no lock).
	std::size_t _internal = 0; // our own cancel/NOP/link-head SQEs not yet reaped
	bool _stop_seen = false;   // _stopping, as of the last loop
	bool _cancel_sent = false;
	bool _wake_armed = false;
	bool _wake_broken = false;     // the eventfd read failed: wait 1 ms at a time
	std::uint64_t _wake_count = 0; // the armed eventfd read's buffer
	op *_finished = nullptr;       // ops done in this pass of the loop, in order
	op *_finished_last = nullptr;
	op *_backlog = nullptr; // ops the ring had no room for, in order
	op *_backlog_last = nullptr;
	std::size_t _finished_count = 0;
	std::atomic<unsigned> _io_workers{0};

	std::atomic<std::uint64_t> _resubmits{0};
	std::atomic<std::uint64_t> _personalities{0};
	std::atomic<int> _fail_capture{0};
	std::atomic<unsigned> _full_for_test{0};
	std::atomic<std::uint64_t> _ring_full_waits{0};
	std::thread::id _reaper_id;
	std::thread _reaper;
};

struct [[nodiscard]] uring_open_result {
	int error = 0;				// 0, or why the caller must fall back
	std::string why;			// one line for the log when error != 0
	std::unique_ptr<uring_backend> backend; // set iff error == 0
};

// Creates a ring of `depth` entries (rounded up to a power of two by the
// kernel) and starts its reaper thread.  Fails with
//   EINVAL   depth is 0 or above k_max_depth;
//   EPERM    kernel.io_uring_disabled forbids it, or seccomp/LSM refused;
//   ENOSYS   the kernel has no io_uring;
//   EOPNOTSUPP an opcode the backend needs is missing (old kernel);
//   ENOMEM/EAGAIN/EMFILE  resources (RLIMIT_MEMLOCK on old kernels, threads);
// with `why` naming the cause, so the caller logs one line and falls back
// to sync_backend.  Thread-safe.
uring_open_result make_uring_backend(unsigned depth) noexcept;

// /proc/sys/kernel/io_uring_disabled: 0 allowed, 1 only for CAP_SYS_ADMIN or
// the io_uring_group, 2 disabled; -1 if the file is absent (kernel < 6.6).
[[nodiscard]] int io_uring_disabled_sysctl() noexcept;

} // namespace dcache::io
