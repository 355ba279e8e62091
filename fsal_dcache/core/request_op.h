// One READ or WRITE from its start to its reply: a chain of steps, each
// one backend request.  next() says what to issue, on_result() takes its
// completion; drive() (request_op.cpp) alternates them on whichever thread
// holds the request, and retire() is the one place a request is torn down.
// A request that must wait for one of its export's places is parked in
// line (admission.h) and driven on by the thread that gives it one.
//
// What each op decides: nothing about direct or not (the planner, and for
// errors the fallback table); it follows the plan, keeps the state between
// steps (leases, bounce buffer, fence, held pages, bytes done) and counts.
//
// Thread-safety: a request is driven by one thread at a time (the
// hand-off in drive() moves it between the submitter and the
// completion thread); its export and file are shared and thread-safe.
#pragma once

#include "dcache/core.h"
#include "admission.h"
#include "dcache_io/backend.h"
#include "export_state.h"
#include "fd_ref.h"
#include "file_state.h"
#include "iovec.h"
#include "page_cache.h"
#include "placement.h"
#include "planner.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

namespace dcache::core {

// How a request's steps are issued.
enum class issue_mode : std::uint8_t {
	submit,	     // asynchronous: completions arrive on the backend's thread
	execute,     // blocking, through the backend, on the calling thread
	execute_now, // blocking, as plain syscalls in the calling thread (no
		     // credentials were captured to carry elsewhere)
};

// What next() gives the issue loop.
struct next_step {
	enum class kind : std::uint8_t {
		finished,    // nothing more to issue: the request is done
		issue,	     // issue req
		needs_place, // the next step allocates: take a place first, then ask again
	};
	kind what = kind::finished;
	io::request req{};
	bool cached_write = false; // a WRITE's cached piece (write_step_in_caller)
	bool split_write = false;  // of a split (misaligned) WRITE

	[[nodiscard]] static next_step issue(const io::request &r, bool cached_write = false,
					     bool split_write = false) noexcept
	{
		return {kind::issue, r, cached_write, split_write};
	}
	[[nodiscard]] static next_step needs_place() noexcept { return {kind::needs_place, {}}; }
};

class request_op : public io::completion, public place_waiter {
public:
	request_op(dcache_export &e, dcache_file &f, const dcache_io &in, dcache_io_done_fn done, void *done_ctx);
	request_op(const request_op &) = delete;
	request_op &operator=(const request_op &) = delete;
	virtual ~request_op();

	// In the start call, where the caller's descriptor is valid: chooses
	// the descriptors and how to issue, then plans.  caller_waits: the
	// blocking API, whose descriptor outlives the whole request.
	void prepare(bool caller_waits);
	// What to issue next: a step parked with the request comes first
	// (take_next), then the op's own next one.
	[[nodiscard]] next_step take_next();
	virtual void on_result(io::result r) = 0;
	// Ends the request with err: nothing more is issued.
	void fail(int err) noexcept;

	// Hands one step to the backend; complete() takes its answer.  The
	// first submission of a request that carries credentials captures them
	// (on the calling thread: nothing was handed off yet); if that fails
	// the request runs in the calling thread from here on (blocking()).
	void submit(io::request &req) noexcept;
	// Whether req goes through the request's bounce buffer.
	[[nodiscard]] bool through_bounce(const io::request &req) const noexcept;
	// Sets req.buf_index for a direct step straight from or into one of
	// the server's RPC buffers that the ring has registered (rpc_buffers.h;
	// a bounce step has its index from rw_request): a READ's before
	// placement, which sends such a READ to the ring; any other step's at
	// submit().  Does nothing where buf_index is set already.
	void index_rpc_buffer(io::request &req) const noexcept;
	// What placement (placement.h) needs to know of step s, on the
	// request's first thread or not.
	[[nodiscard]] step_facts facts(const next_step &s, bool caller) const noexcept;
	// Issues one step as the request's issue_mode says, blocking.
	[[nodiscard]] io::result run_now(const io::request &req) noexcept;
	// Issues one step as a plain syscall in the calling thread.
	[[nodiscard]] io::result run_here(const io::request &req) noexcept;
	// One of the export's IO_Blocking_Max slots, if one is free (placement
	// blocking_slot).  run_in_slot issues the step and gives the slot
	// back.
	[[nodiscard]] bool take_blocking_slot() noexcept;
	[[nodiscard]] io::result run_in_slot(const io::request &req) noexcept;
	[[nodiscard]] bool blocking() const noexcept { return _mode != issue_mode::submit; }
	// One of the export's places (the memory bound), before the request
	// allocates a bounce buffer or is handed to the backend; once per
	// request, given back at retire().  caller: on the request's first
	// thread, where it may wait in line (its credentials are captured
	// first, into step); step: the one it would issue, kept for take_next
	// if it is parked.  Returns false when the request was parked: it is
	// the line's now, and the caller must not touch it.
	[[nodiscard]] bool admit(bool caller, io::request *step) noexcept;
	// Whether the request may allocate or submit without admit().
	[[nodiscard]] bool holds_place() const noexcept;

	// io::completion: the backend's answer to a submitted step.
	void complete(io::result r) noexcept override;

	// The one tear-down, in this order: the core's hold on everything is
	// released (bounce buffer, O_DIRECT lease, fence, held boundary pages),
	// the latency recorded, the op deleted (its descriptor lease with it),
	// the export let go; then, for a deferred request, done is called with
	// the reply; then the side work is issued; then the request its place
	// went to, if one was parked, is driven on here.  Returns the reply.
	static dcache_io_result retire(request_op *op, bool deferred) noexcept;

	// Submission hand-off (drive(), request_op.cpp).
	std::atomic<int> handoff{0};
	io::result last;

protected:
	[[nodiscard]] virtual next_step next() = 0;
	virtual void plan() = 0;
	// Into the op's final state (fail()).
	virtual void stop() noexcept = 0;
	// The op's own tear-down (WRITE: fence, held pages), before the
	// latency is recorded.
	virtual void release() noexcept {}
	[[nodiscard]] virtual dcache_op op() const noexcept = 0;
	[[nodiscard]] virtual bool carries_credentials() const noexcept { return false; }

	[[nodiscard]] io::request rw_request(io::op_kind op, int fd, std::uint64_t off, int rwf) const noexcept;
	// The planner's plan of this READ or WRITE, with its O_DIRECT
	// descriptor leased (_direct) when the plan goes direct; re-planned as
	// if O_DIRECT were refused when no such descriptor can be had.
	// Counted by its disposition.
	[[nodiscard]] core::plan plan_leased();
	// A direct step's bounce buffer of length bytes: _bounce, allocated
	// once per step and only with a place (the memory comes with one, not
	// before it), and _cur the one iovec over it.  copy_in: the step's data
	// (_cur) is copied into it first (a WRITE).
	enum class bounce_result : std::uint8_t { ready, needs_place, no_memory };
	[[nodiscard]] bounce_result bounce(std::uint64_t length, bool copy_in);
	void add(stat st, std::uint64_t n = 1) const noexcept { _e.stats.add(st, n); }
	[[nodiscard]] io::backend &backend() const noexcept { return *_e.backend; }
	// The file's alignment, probed through the caller's descriptor.
	[[nodiscard]] io::dio_caps dio_caps() { return probe_caps(_e, _f, _caller_fd); }

	std::vector<struct iovec> _iovs; // copy of the caller's array
	dcache_io _io;			 // fd: the descriptor non-direct steps use (_later holds its lease)
	dcache_export &_e;
	dcache_file &_f;
	// The export's settings at the start, with an auto mode resolved
	// (auto_state.h) into the one this request runs with.
	dcache_settings _s;
	const int _caller_fd; // valid during the start call only
	issue_mode _mode = issue_mode::submit;
	io::credentials _creds; // the caller's, for WRITE steps issued elsewhere
	fd_ref _direct;		// the O_DIRECT lease
	dcache_io_result _res{};
	std::vector<struct iovec> _cur;		 // iovecs of the request in flight
	std::unique_ptr<aligned_buffer> _bounce; // lives until its step completed
	side_work _later;			 // issued after the reply
	std::uint64_t _total = 0;
	// A WRITE that auto sends direct writes the file's cached WRITEs back
	// first (auto_resolution::write_back_first).
	bool _write_back_first = false;
	// auto cached this WRITE for spare memory: its cached steps are
	// written back as they complete (auto_resolution::write_behind).
	bool _write_behind = false;
	// auto kept this request cached as used again or small, with
	// Auto_Stream_Yield_Ms set: the export's streams wait for it
	// (yield_gate.h); it leaves the gate at tear-down, with its file's
	// count (_gate_own, nullptr: none).
	bool _in_yield_gate = false;
	yield_own *_gate_own = nullptr;

private:
	// An auto mode of the request's kind into the mode it runs with.
	void resolve_auto() noexcept;
	void capture_credentials();
	// Captures the caller's credentials at the request's first hand-off
	// (submission, or parking): req carries them from then on.
	void take_credentials(io::request &req);
	static dcache_io_result tear_down(request_op *op, bool deferred, place_waiter *&resume) noexcept;

	bool _creds_tried = false;
	bool _admitted = false;
	bool _has_held = false;
	io::request _held; // the step to issue once a parked request has its place

	const dcache_io_done_fn _done;
	void *const _done_ctx;
	const dcache_export::time_point _start; // the export's clock
};

// Counts a READ's or WRITE's plan by its disposition.
void count_plan(dcache_export &e, bool write, disposition d) noexcept;

// A new op of the right kind (read_op.cpp, write_op.cpp).
[[nodiscard]] request_op *new_read_op(dcache_export &e, dcache_file &f, const dcache_io &in, dcache_io_done_fn done,
				      void *done_ctx);
[[nodiscard]] request_op *new_write_op(dcache_export &e, dcache_file &f, const dcache_io &in, dcache_io_done_fn done,
				       void *done_ctx);

// The C API's READ and WRITE: dcache_*_start (caller_waits false) and the
// blocking dcache_read/dcache_write (start, then wait).
[[nodiscard]] bool start_request(dcache_export *exp, dcache_file *file, const dcache_io *io, bool write,
				 dcache_io_done_fn done, void *done_ctx, dcache_io_result *inline_result,
				 bool caller_waits) noexcept;
[[nodiscard]] dcache_io_result run_blocking(dcache_export *exp, dcache_file *file, const dcache_io *io,
					    bool write) noexcept;

} // namespace dcache::core
