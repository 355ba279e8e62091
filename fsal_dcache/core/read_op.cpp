// The READ operation: its one step (the planner's segment), maybe after an
// RWF_NOWAIT attempt at the page cache in the calling thread, then the
// mode's drop.
//
//   (plan) --(served from the page cache, or nothing to read)--> done
//   (plan) --> reading --(the kernel refused: fallback table)--> reading
//   reading --> done
#include "fallback.h"
#include "log.h"
#include "page_cache.h"
#include "request_op.h"
#include "settings.h"

#include <sys/sdt.h>

#include <algorithm>
#include <cstring>

namespace dcache::core {

namespace {

class read_op final : public request_op {
public:
	using request_op::request_op;

	void on_result(io::result r) override;

protected:
	[[nodiscard]] next_step next() override;
	void plan() override;
	void stop() noexcept override { _state = state::done; }
	[[nodiscard]] dcache_op op() const noexcept override { return DCACHE_OP_READ; }

private:
	enum class state : std::uint8_t { reading, done };

	void try_page_cache();
	void finish_direct(io::result &r, bool &eof) noexcept;
	void drop_after_reply(std::uint64_t bytes, bool eof) noexcept;

	state _state = state::done;
	step _step;
	int _issued_rwf = 0;
	bool _drop_after = false; // DONTCACHE asked, plain issued
	std::uint64_t _base = 0;  // bytes the RWF_NOWAIT attempt already read
};

void read_op::plan()
{
	add(stat::reads);
	const core::plan p = plan_leased();
	DTRACE_PROBE4(dcache, read_plan, _io.offset, _total, static_cast<int>(p.disp), static_cast<int>(p.nsegs));
	if (p.nsegs == 0) {
		_state = state::done;
		return;
	}
	_step = read_step(p);
	_state = state::reading;
	// Only where the READ would otherwise be handed off.
	if (_mode == issue_mode::submit && !backend().completes_inline() && read_tries_cache_first(_s, _step) &&
	    _f.caps.nowait())
		try_page_cache();
}

// preadv2(RWF_NOWAIT) in the calling thread: data already in the page
// cache is returned without a hand-off; EAGAIN sends the whole READ down
// the asynchronous path, a short read the remainder.
void read_op::try_page_cache()
{
	const step_flags fl = flags_for(false, _step.kind, _f.caps.dontcache(), false);
	const bool dc = fl.rwf != 0;
	_drop_after = fl.drop_after;
	io::request req;
	req.op = io::op_kind::read;
	req.fd = _caller_fd;
	req.offset = _io.offset;
	req.iov = _io.iov;
	req.iov_count = _io.iov_count;
	req.rwf = RWF_NOWAIT | fl.rwf;
	const io::result r = backend().execute_now(req);
	DTRACE_PROBE3(dcache, read_nowait, _io.offset, r.error, r.bytes);
	if (r.ok()) {
		add(dc ? stat::read_dontcache_bytes : stat::read_buffered_bytes, r.bytes);
		if (r.bytes == _total || r.bytes == 0) {
			// All of it, or 0 bytes: end of file (nothing cached would
			// have been EAGAIN).
			add(stat::read_nowait_hits);
			_res.bytes = r.bytes;
			_res.eof = r.bytes < _total;
			add(stat::read_bytes, r.bytes);
			_state = state::done;
			if (_drop_after)
				drop_after_reply(_res.bytes, _res.eof);
			return;
		}
		// Part of it: the rest goes asynchronously (it may be EOF too,
		// which the remainder's 0 bytes will say).
		add(stat::read_nowait_partial);
		_base = r.bytes;
		return;
	}
	add(stat::read_nowait_misses);
	if (fallback_for(attempt::read_nowait, _step.kind, req.rwf, r.error) == fallback::no_nowait &&
	    !_f.caps.no_nowait.exchange(true, std::memory_order_relaxed)) {
		add(stat::fallback_no_nowait);
		DCACHE_LOG_ONCE(_e, no_nowait, DCACHE_LOG_WARN,
				"dcache %s: RWF_NOWAIT refused (%s): cached-read fast path off for such files", _e.name,
				std::strerror(r.error));
	}
}

next_step read_op::next()
{
	if (_state != state::reading)
		return {};
	const step_flags fl = flags_for(false, _step.kind, _f.caps.dontcache(), _f.caps.direct_may_buffer());
	_drop_after = fl.drop_after;
	if (_step.kind != step_kind::direct) {
		// The requested range (a refused direct step was widened), past
		// what the page cache already gave.
		_cur = slice(_io.iov, _io.iov_count, _base, _total - _base);
		_issued_rwf = fl.rwf;
		return next_step::issue(rw_request(io::op_kind::read, _io.fd, _io.offset + _base, _issued_rwf));
	}
	if (!_step.bounce) {
		_cur.assign(_io.iov, _io.iov + _io.iov_count);
	} else {
		switch (bounce(_step.length, false)) {
		case bounce_result::ready: break;
		case bounce_result::needs_place: return next_step::needs_place();
		case bounce_result::no_memory: fail(ENOMEM); return {};
		}
	}
	return next_step::issue(rw_request(io::op_kind::read, _direct->fd, _step.offset, fl.rwf));
}

// A direct READ's bytes into the reply (r.bytes becomes what the caller
// gets).
void read_op::finish_direct(io::result &r, bool &eof) noexcept
{
	if (!_bounce) {
		eof = r.ok() && r.bytes < _total;
		if (r.ok()) {
			add(stat::read_direct_bytes, r.bytes);
			add(stat::read_unbounced_bytes, r.bytes);
		}
		return;
	}
	if (r.ok()) {
		// Widened read: skip the pad before the requested offset; a short
		// read means end of file, so return what exists.
		const std::uint64_t pad = _io.offset - _step.offset;
		const std::uint64_t avail = r.bytes > pad ? r.bytes - pad : 0;
		const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(avail, _total));
		scatter(_bounce->data() + pad, n, _io.iov, _io.iov_count);
		eof = r.bytes < _step.length && pad + n >= r.bytes;
		add(stat::read_bounce_copies);
		add(stat::read_direct_bytes, n);
		add(stat::read_bounced_bytes, n);
		r.bytes = n;
	}
	_bounce.reset();
}

void read_op::on_result(io::result r)
{
	switch (fallback_for(attempt::read, _step.kind, _issued_rwf, r.error)) {
	case fallback::through_page_cache:
		note_direct_refused(_e, attempt::read, r.error, _step.offset, _step.length);
		_bounce.reset();
		_step = through_page_cache(_s, attempt::read, _step);
		return;								    // next() reissues it
	case fallback::retry_without_dontcache: learn_no_dontcache(_e, _f); return; // next() reissues it buffered
	case fallback::none:
	case fallback::no_nowait: break;
	}
	_state = state::done;
	bool eof = false;
	if (_step.kind == step_kind::direct) {
		finish_direct(r, eof);
	} else {
		if (r.ok())
			add(_issued_rwf != 0 ? stat::read_dontcache_bytes : stat::read_buffered_bytes, r.bytes);
		if (r.ok()) {
			r.bytes += _base;
			eof = r.bytes < _total;
		}
	}
	if (!r.ok()) {
		if (_base == 0) {
			add(stat::errors);
			_res.error = r.error;
			return;
		}
		// The page cache delivered a prefix: a short read, like readv.
		r = io::result::success(_base);
		eof = false;
	}
	_res.bytes = r.bytes;
	_res.eof = eof;
	add(stat::read_bytes, r.bytes);
	drop_after_reply(r.bytes, eof);
}

// The pages a fadvise-mode READ read, a DONTCACHE one's where the kernel
// has no RWF_DONTCACHE (what the kernel would have dropped itself: every
// folio the READ brought in, so also the readahead around it), or a direct
// one's on a filesystem that may have read it through the page cache,
// dropped after the reply: also when the page cache served all of it.
void read_op::drop_after_reply(std::uint64_t bytes, bool eof) noexcept
{
	if (_drop_after && _step.kind != step_kind::direct)
		add(stat::fallback_no_dontcache);
	if (const auto d = drop_after_read(_s, _drop_after, _io.offset, bytes, eof))
		(void)_later.drop(_io.fd, d->offset, d->length);
}

} // namespace

request_op *new_read_op(dcache_export &e, dcache_file &f, const dcache_io &in, dcache_io_done_fn done, void *done_ctx)
{
	return new read_op(e, f, in, done, done_ctx);
}

} // namespace dcache::core
