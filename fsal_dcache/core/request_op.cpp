#include "request_op.h"

#include "dcache_io/heap_trim.h"
#include "log.h"
#include "settings.h"
#include "sync_point.h"

#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>

namespace dcache::core {

request_op::request_op(dcache_export &e, dcache_file &f, const dcache_io &in, dcache_io_done_fn done, void *done_ctx)
	: _iovs(in.iov, in.iov + in.iov_count), _io{in.fd, in.offset, _iovs.data(), in.iov_count, in.stable, in.creds},
	  _e(e), _f(f), _s(e.settings.current()), _caller_fd(in.fd), _later(e, side_work::when::after_reply),
	  _done(done), _done_ctx(done_ctx), _start(e.now())
{
	_total = iov_total(_io.iov, _io.iov_count);
	inflight_add(e);
}

request_op::~request_op() = default;

void request_op::prepare(bool caller_waits)
{
	io::backend &b = backend();
	if (!b.completes_inline() && !caller_waits) {
		if (fd_ref own = lease_buffered(_e, _f, _caller_fd, op() == DCACHE_OP_WRITE)) {
			_io.fd = own->fd;
			_later.hold(std::move(own)); // the lease, for the request's life
		} else
			_mode = issue_mode::execute; // only the caller's descriptor: use it now
	}
	resolve_auto();
	plan();
}

void request_op::resolve_auto() noexcept
{
	const bool write = op() == DCACHE_OP_WRITE;
	dcache_mode &mode = write ? _s.io_cache_write : _s.io_cache_read;
	if (mode != DCACHE_MODE_AUTO)
		return;
	const auto_resolution r = auto_resolve(_e, _f, _s, write, _io.offset, _total);
	mode = r.choice.mode;
	_write_back_first = r.write_back_first;
	_write_behind = r.write_behind;
	// The export's cached requests are followed for streams that give way
	// to them and for write streams whose way depends on them.
	if (_s.auto_stream_yield_ms == 0 && _s.auto_write_stream != DCACHE_MODE_DIRECT_WHEN_QUIET)
		return;
	// The start of one of the file's runs (no_stream) is counted as the
	// file's own as well, and the file's streams do not give way to it;
	// small or used-again requests of the file, like any other file's, they do.
	auto_file *const rec = auto_record(_f); // none for a small READ
	const bool run_start = r.choice.reason == auto_reason::no_stream;
	yield_own *const own = rec != nullptr ? &rec->yield : nullptr;
	if (!auto_is_stream(r.choice.reason)) {
		_gate_own = run_start ? own : nullptr;
		_e.yield.enter(_gate_own);
		_in_yield_gate = true;
		DCACHE_SYNC_POINT("yield.entered");
		return;
	}
	if (_s.auto_stream_yield_ms == 0)
		return;
	// A stream's request gives way, here in the calling thread, before it
	// has a place or a buffer.
	using clock = yield_gate::clock;
	const std::chrono::milliseconds longest{_s.auto_stream_yield_ms};
	const clock::duration waited = _e.yield.wait(k_yield_quiet, clock::now() + longest, longest, own);
	if (waited > clock::duration::zero()) {
		add(stat::auto_yields);
		add(stat::auto_yield_us,
		    static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(waited).count()));
	}
}

// Registers the calling thread's credentials for every step (later steps
// are submitted from the completion thread).  If that fails, the request
// runs in this thread, as plain syscalls, which is correct.
void request_op::capture_credentials()
{
	io::credentials_result r;
	if (_io.creds != nullptr) {
		const dcache_creds &c = *_io.creds;
		r = backend().capture_credentials(io::identity{c.uid, c.gid, c.groups, c.ngroups});
		_io.creds = nullptr; // the caller's, valid during the start call only
	} else {
		r = backend().capture_credentials();
	}
	if (r.error == 0) {
		_creds = std::move(r.creds);
		return;
	}
	add(stat::fallback_no_personality);
	DCACHE_LOG_ONCE(
		_e, no_personality, DCACHE_LOG_WARN,
		"dcache %s: cannot register the client's credentials with io_uring (%s): such WRITEs run synchronously in the calling thread",
		_e.name, std::strerror(r.error));
	_mode = issue_mode::execute_now;
}

void request_op::take_credentials(io::request &req)
{
	if (!carries_credentials() || _creds_tried)
		return;
	_creds_tried = true;
	capture_credentials();
	req.personality = _creds.personality();
}

void request_op::submit(io::request &req) noexcept
{
	take_credentials(req);
	if (_mode == issue_mode::execute_now) {
		complete(run_now(req));
		return;
	}
	index_rpc_buffer(req); // a READ's was looked up before placement
	if (req.buf_index >= 0)
		add(through_bounce(req) ? stat::bounce_steps_fixed : stat::rpc_steps_fixed);
	backend().submit(req, *this);
}

bool request_op::through_bounce(const io::request &req) const noexcept
{
	return _bounce && req.iov_count == 1 && req.iov[0].iov_base == _bounce->data();
}

void request_op::index_rpc_buffer(io::request &req) const noexcept
{
	// Straight from or into Ganesha's buffer: where it is one the ring
	// has registered, its pages are not pinned for the request.
	if (!blocking() && req.buf_index < 0 && _direct && req.fd == _direct->fd && req.iov_count == 1 &&
	    (req.op == io::op_kind::read || req.op == io::op_kind::write))
		req.buf_index = backend().registered_index(req.iov[0].iov_base, req.iov[0].iov_len);
}

core::plan request_op::plan_leased()
{
	const bool write = op() == DCACHE_OP_WRITE;
	const std::span<const struct iovec> iov(_io.iov, static_cast<std::size_t>(_io.iov_count));
	plan_caps pc;
	if (is_direct_mode(write ? _s.io_cache_write : _s.io_cache_read)) {
		pc.dio = dio_caps();
		pc.odirect = _f.caps.odirect();
	}
	const auto planned = [&] {
		return write ? plan_write(_s, pc, _io.offset, iov) : plan_read(_s, pc, _io.offset, _total, iov);
	};
	core::plan p = planned();
	if (p.has_direct()) {
		_direct = lease_direct(_e, _f, _caller_fd, write);
		if (!_direct) {
			pc.odirect = false; // no O_DIRECT descriptor: as if refused
			p = planned();
		}
	}
	count_plan(_e, write, p.disp);
	return p;
}

request_op::bounce_result request_op::bounce(std::uint64_t length, bool copy_in)
{
	if (!_bounce) {
		if (!holds_place())
			return bounce_result::needs_place;
		auto buf = std::make_unique<aligned_buffer>(backend());
		if (!buf->allocate(_f.caps.dio.mem_align, length))
			return bounce_result::no_memory;
		add(buf->reused() ? stat::bounce_buffers_reused : stat::bounce_buffers_mapped);
		if (copy_in) {
			gather(_cur, buf->data());
			add(stat::write_bounce_copies);
		}
		_bounce = std::move(buf);
	}
	_cur.assign(1, {_bounce->data(), static_cast<std::size_t>(length)});
	return bounce_result::ready;
}

void request_op::fail(int err) noexcept
{
	_res = dcache_io_result{};
	_res.error = err;
	add(stat::errors);
	stop();
}

io::result request_op::run_now(const io::request &req) noexcept
{
	return _mode == issue_mode::execute_now ? backend().execute_now(req) : backend().execute(req);
}

io::result request_op::run_here(const io::request &req) noexcept
{
	add(stat::steps_in_caller);
	return backend().execute_now(req);
}

step_facts request_op::facts(const next_step &s, bool caller) const noexcept
{
	const io::backend &b = backend();
	return {.request_blocking = blocking(),
		.on_caller = caller,
		.cached_write = s.cached_write,
		.split_write = s.split_write,
		.registered_read = s.req.op == io::op_kind::read && s.req.buf_index >= 0 && !through_bounce(s.req),
		.completes_inline = b.completes_inline(),
		.cached_in_caller = b.cached_writes_in_caller(),
		.blocking_max = _s.io_blocking_max};
}

bool request_op::take_blocking_slot() noexcept
{
	const std::uint32_t max = _s.io_blocking_max;
	std::uint32_t n = _e.blocking.load(std::memory_order_relaxed);
	do {
		if (n >= max)
			return false;
	} while (!_e.blocking.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
	return true;
}

io::result request_op::run_in_slot(const io::request &req) noexcept
{
	add(stat::steps_blocking_in_caller);
	const io::result r = backend().execute_now(req);
	_e.blocking.fetch_sub(1, std::memory_order_relaxed);
	return r;
}

bool request_op::holds_place() const noexcept
{
	return _admitted || blocking() || backend().completes_inline();
}

bool request_op::admit(bool caller, io::request *step) noexcept
{
	if (holds_place())
		return true;
	if (caller) {
		// Whoever resumes a parked request runs as someone else.
		io::request none{};
		take_credentials(step != nullptr ? *step : none);
		if (blocking())
			return true; // no credentials to carry: it runs here, placeless
		if (step != nullptr)
			_held = *step;
		_has_held = step != nullptr;
	}
	_admitted = true;
	switch (_e.places.enter(caller ? this : nullptr)) {
	case admission::outcome::taken: _has_held = false; return true;
	case admission::outcome::waited:
		_has_held = false;
		add(stat::admission_waits);
		add(stat::admission_waits_in_worker);
		return true;
	case admission::outcome::parked:
	case admission::outcome::parked_after_waiting: break; // counted when resumed
	}
	return false;
}

next_step request_op::take_next()
{
	if (_has_held) {
		_has_held = false;
		return next_step::issue(_held);
	}
	return next();
}

io::request request_op::rw_request(io::op_kind op, int fd, std::uint64_t off, int rwf) const noexcept
{
	io::request req;
	req.op = op;
	req.fd = fd;
	req.offset = off;
	req.iov = _cur.data();
	req.iov_count = static_cast<int>(_cur.size());
	req.rwf = rwf;
	req.personality = _creds.personality();
	// Through the bounce buffer: its registered index, if it has one.
	if (through_bounce(req))
		req.buf_index = _bounce->index();
	return req;
}

namespace {
bool drive(request_op *op, bool caller) noexcept;
} // namespace

dcache_io_result request_op::retire(request_op *op, bool deferred) noexcept
{
	place_waiter *next = nullptr;
	const dcache_io_result res = tear_down(op, deferred, next);
	// The request given this one's place, and so on while each finishes
	// at once: a loop, not a recursion.
	while (next != nullptr) {
		auto *const parked = static_cast<request_op *>(next);
		next = nullptr;
		parked->add(stat::admission_waits);
		if (parked->worker_waited())
			parked->add(stat::admission_waits_in_worker);
		if (drive(parked, false))
			(void)tear_down(parked, true, next);
	}
	return res;
}

dcache_io_result request_op::tear_down(request_op *op, bool deferred, place_waiter *&resume) noexcept
{
	op->_bounce.reset();
	op->_direct.reset();
	op->release();
	dcache_export &e = op->_e;
	if (op->_in_yield_gate)
		e.yield.leave(op->_gate_own);
	if (op->_admitted)
		resume = e.places.leave();
	e.stats.record(op->op(),
		       static_cast<std::uint64_t>(
			       std::chrono::duration_cast<std::chrono::nanoseconds>(e.now() - op->_start).count()));
	const dcache_io_result res = op->_res;
	const dcache_io_done_fn done = op->_done;
	void *const ctx = op->_done_ctx;
	e.stats.add(deferred ? stat::io_deferred : stat::io_inline);
	side_work later(std::move(op->_later)); // each piece holds the export
	delete op;
	io::note_heap_use();
	inflight_done(e); // the export may go from here on
	if (deferred && done != nullptr)
		done(ctx, res);
	later.issue();
	return res;
}

namespace {

// The counter of each disposition, for a READ and for a WRITE (a READ is
// never split: its direct range is widened instead).
struct plan_counters {
	disposition d;
	stat read;
	stat write;
};
constexpr plan_counters k_plan_counters[] = {
	{disposition::buffered, stat::read_buffered, stat::write_buffered},
	{disposition::dontcache, stat::read_dontcache, stat::write_dontcache},
	{disposition::fadvise, stat::read_fadvise, stat::write_fadvise},
	{disposition::direct, stat::read_direct, stat::write_direct},
	{disposition::split, stat::read_direct, stat::write_split},
	{disposition::no_alignment, stat::read_not_direct_no_alignment, stat::write_not_direct_no_alignment},
	{disposition::too_small, stat::read_not_direct_too_small, stat::write_not_direct_too_small},
	{disposition::no_middle, stat::read_not_direct_too_small, stat::write_not_direct_no_middle},
	{disposition::mem_misaligned, stat::read_not_direct_too_small, stat::write_not_direct_mem_misaligned},
	{disposition::fallback, stat::read_not_direct_fallback, stat::write_not_direct_fallback},
};

} // namespace

void count_plan(dcache_export &e, bool write, disposition d) noexcept
{
	for (const plan_counters &c : k_plan_counters)
		if (c.d == d)
			e.stats.add(write ? c.write : c.read);
	if (d == disposition::fallback)
		e.stats.add(stat::fallback_no_odirect);
}

namespace {

// Runs the chain from where it stands.  Returns true when the request is
// finished (the caller retires it), false when a completion will arrive on
// another thread, or the request was parked for a place (the thread that
// gives it one drives it on), which then owns the op: the caller must not
// touch it.
// caller: on the thread that started the request (its credentials are the
// client's), where steps that should not be handed off run as syscalls.
//
// The hand-off: before each submit, handoff = 0.  The completion exchanges
// in 1: if it saw 0, the submitter is still inside submit() and continues
// the chain itself.  The submitter exchanges in 2 after submit(): if it saw
// 1, the completion already ran inline; if 0, it is still to come and its
// thread drives the rest.
bool drive(request_op *op, bool caller) noexcept
{
	try {
		for (;;) {
			next_step s = op->take_next();
			if (s.what == next_step::kind::finished)
				return true;
			if (s.what == next_step::kind::needs_place) {
				if (!op->admit(caller, nullptr))
					return false; // parked
				continue;
			}
			io::request &req = s.req;
			// A READ's registered buffer decides where it runs; any
			// other step's is looked up only if it goes to the ring.
			if (req.op == io::op_kind::read)
				op->index_rpc_buffer(req);
			switch (place(op->facts(s, caller))) {
			case placement::here: op->on_result(op->run_now(req)); continue;
			case placement::in_caller: op->on_result(op->run_here(req)); continue;
			case placement::blocking_slot:
				if (op->take_blocking_slot()) {
					op->on_result(op->run_in_slot(req));
					continue;
				}
				break; // every slot taken: the ring
			case placement::ring: break;
			}
			if (!op->admit(caller, &req))
				return false; // parked, with req
			op->handoff.store(0, std::memory_order_relaxed);
			op->submit(req);
			DCACHE_SYNC_POINT("drive.submitted");
			if (op->handoff.exchange(2, std::memory_order_acq_rel) == 0)
				return false;
			op->on_result(op->last);
		}
	} catch (const std::bad_alloc &) {
		op->fail(ENOMEM);
	} catch (...) {
		op->fail(EIO);
	}
	return true;
}

bool valid_io(const dcache_io *io) noexcept
{
	if (io == nullptr || io->iov_count < 0 || (io->iov == nullptr && io->iov_count > 0) || io->fd < 0)
		return false;
	const std::size_t total = iov_total(io->iov, io->iov_count);
	constexpr auto max_off = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
	return io->offset <= max_off && total <= max_off - io->offset;
}

dcache_io_result failed(int err) noexcept
{
	dcache_io_result r{};
	r.error = err;
	return r;
}

} // namespace

void request_op::complete(io::result r) noexcept
{
	last = r;
	if (handoff.exchange(1, std::memory_order_acq_rel) == 0)
		return; // the submitter continues
	try {
		on_result(r);
	} catch (...) {
		fail(ENOMEM);
	}
	if (drive(this, false))
		(void)retire(this, true);
}

bool start_request(dcache_export *exp, dcache_file *file, const dcache_io *io, bool write, dcache_io_done_fn done,
		   void *done_ctx, dcache_io_result *inline_result, bool caller_waits) noexcept
{
	dcache_io_result dummy{};
	dcache_io_result &out = inline_result != nullptr ? *inline_result : dummy;
	if (exp == nullptr || file == nullptr || !valid_io(io)) {
		out = failed(EINVAL);
		return true;
	}
	request_op *op = nullptr;
	try {
		op = write ? new_write_op(*exp, *file, *io, done, done_ctx)
			   : new_read_op(*exp, *file, *io, done, done_ctx);
		op->prepare(caller_waits);
	} catch (const std::bad_alloc &) {
		if (op == nullptr) {
			exp->stats.add(stat::errors);
			out = failed(ENOMEM);
			return true;
		}
		op->fail(ENOMEM);
	} catch (...) {
		if (op == nullptr) {
			exp->stats.add(stat::errors);
			out = failed(EIO);
			return true;
		}
		op->fail(EIO);
	}
	if (!drive(op, true))
		return false;
	out = request_op::retire(op, false);
	return true;
}

namespace {

// The blocking API's wait for a deferred reply.
struct waiter {
	std::mutex m;
	std::condition_variable cv;
	bool done = false;
	dcache_io_result res{};

	static void on_done(void *ctx, dcache_io_result r)
	{
		auto *w = static_cast<waiter *>(ctx);
		std::lock_guard lock(w->m); // notify under the lock: w lives on the waiter's stack
		w->res = r;
		w->done = true;
		w->cv.notify_one();
	}
};

} // namespace

dcache_io_result run_blocking(dcache_export *exp, dcache_file *file, const dcache_io *io, bool write) noexcept
{
	waiter w;
	dcache_io_result res{};
	if (start_request(exp, file, io, write, &waiter::on_done, &w, &res, true))
		return res;
	std::unique_lock lock(w.m);
	w.cv.wait(lock, [&] { return w.done; });
	return w.res;
}

} // namespace dcache::core
