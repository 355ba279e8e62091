// The WRITE operation: the planner's steps issued one after another, each
// cached piece of a direct-mode WRITE written back before the next step,
// then the one sync the planner asks for.
//
//   steps --(cached bytes written)--> write_back --> steps ...
//   steps --(all done, an error or a short transfer)--> finishing
//   finishing --(a sync is needed)--> syncing --> done
//   finishing --(none)--> done
#include "fallback.h"
#include "log.h"
#include "page_cache.h"
#include "request_op.h"
#include "settings.h"
#include "sync_point.h"

#include <sys/sdt.h>

#include <algorithm>
#include <cstring>

namespace dcache::core {

namespace {

class write_op final : public request_op {
public:
	using request_op::request_op;

	void on_result(io::result r) override;

protected:
	[[nodiscard]] next_step next() override;
	void plan() override;
	void stop() noexcept override { _state = state::done; }
	void release() noexcept override;
	[[nodiscard]] dcache_op op() const noexcept override { return DCACHE_OP_WRITE; }
	// What a write does depends on who writes (setuid/setgid clearing,
	// quota, CAP_FSETID); what a read does does not.
	[[nodiscard]] bool carries_credentials() const noexcept override { return true; }

private:
	enum class state : std::uint8_t {
		steps,	      // issuing _steps[_idx]
		write_back,   // the cached bytes just written go to write-back next
		writing_back, // that write-back in flight; then _resume
		finishing,    // every step done, or one ended the chain
		syncing,      // the planner's sync in flight
		done,
	};

	void enter_fence();
	[[nodiscard]] bool fence_as_buffered(const step &st);
	[[nodiscard]] next_step issue_step();
	[[nodiscard]] next_step finish_steps();
	void on_step_result(io::result r);
	void on_writeback_result(io::result r) noexcept;
	void on_sync_result(io::result r);

	state _state = state::done;
	state _resume = state::steps;		  // after the write-back
	boundary_tracker::release_list _releases; // let go of during this WRITE
	step_list _steps;
	std::vector<write_fence::pages> _fenced; // what this WRITE holds in _f.fence
	std::size_t _idx = 0;
	std::uint64_t _written = 0;
	int _err = 0;
	int _issued_rwf = 0;		      // of the step in flight
	bool _drop_after = false;	      // DONTCACHE asked, plain issued
	bool _split = false;		      // a direct middle with cached edges
	std::uint64_t _wb_lo = 0, _wb_hi = 0; // pages of the write-back
	// A DONTCACHE fallback's bytes, dropped after that write-back.
	std::uint64_t _drop_lo = 0, _drop_len = 0;
	sync_kind _sync = sync_kind::none;
};

void write_op::plan()
{
	// Opportunistic age limit: the tracker has no thread of its own.
	_e.boundary.reap(_e.now(), _releases);
	add(stat::writes);
	const core::plan p = plan_leased();
	_split = p.disp == disposition::split;
	DTRACE_PROBE4(dcache, write_plan, _io.offset, _total, static_cast<int>(p.disp), static_cast<int>(p.nsegs));
	_steps = write_steps(_s, p, _io.offset, _total, _write_behind);
	if (_write_behind)
		add(stat::auto_write_behind);
	enter_fence();
	_state = state::steps;
	if (_write_back_first) {
		// auto wrote this file cached before and sends this WRITE
		// direct: the whole file's dirty pages go to write-back first,
		// so that no delayed allocation is left where O_DIRECT lands.
		add(stat::auto_write_backs);
		_wb_lo = _wb_hi = 0; // 0 bytes: to the end of the file
		_resume = state::steps;
		_state = state::write_back;
	}
}

// Before anything is issued: the pages of every step, by kind, in the
// file's fence (see write_fence.h).
void write_op::enter_fence()
{
	std::vector<write_fence::pages> mine;
	for (const step &st : _steps.all()) {
		if (st.length == 0)
			continue;
		const auto p = write_fence::pages::of(st.offset, st.length,
						      st.kind == step_kind::direct ? write_fence::kind::direct
										   : write_fence::kind::buffered);
		if (!mine.empty() && mine.back().k == p.k && p.first <= mine.back().last + 1)
			mine.back().last = std::max(mine.back().last, p.last);
		else
			mine.push_back(p);
	}
	if (mine.empty())
		return;
	if (_f.fence.enter(mine))
		add(stat::write_fence_waits);
	_fenced = std::move(mine); // from here on release() leaves
}

// A direct step about to be reissued through the page cache: its pages
// become buffered in the fence, if no other WRITE holds them direct.
bool write_op::fence_as_buffered(const step &st)
{
	const auto p = write_fence::pages::of(st.offset, st.length, write_fence::kind::direct);
	const auto it = std::find(_fenced.begin(), _fenced.end(), p);
	if (it == _fenced.end())
		return true; // not fenced (nothing was entered): nothing to change
	if (!_f.fence.try_make_buffered(p))
		return false;
	it->k = write_fence::kind::buffered; // what leave() must find
	return true;
}

next_step write_op::next()
{
	switch (_state) {
	case state::write_back:
		// Before the next step (a direct middle may follow) and before
		// the sync: the cached bytes just written go to the filesystem's
		// write-back now.
		_state = state::writing_back;
		return next_step::issue(io::request{.op = io::op_kind::writeback,
						    .fd = _io.fd,
						    .offset = _wb_lo,
						    .length = _wb_hi - _wb_lo},
					true, _split);
	case state::steps:
		if (_idx < _steps.n) {
			const next_step s = issue_step();
			if (s.what != next_step::kind::finished)
				return s;
			// It could not be issued: issue_step moved on to finishing.
		} else {
			_state = state::finishing;
		}
		return finish_steps();
	case state::finishing: return finish_steps();
	case state::writing_back:
	case state::syncing:
	case state::done: break;
	}
	return {};
}

// The current step as a request; needs_place before a bounce buffer is
// allocated without one; finished if it cannot be issued (_state is then
// finishing).
next_step write_op::issue_step()
{
	step &st = _steps.items[_idx];
	_cur = slice(_io.iov, _io.iov_count, st.offset - _io.offset, st.length);
	if (st.kind == step_kind::tracked) {
		if (_e.boundary.claim(_f.boundary, st.offset / k_page_size, _e.now(), _releases)) {
			DCACHE_SYNC_POINT("boundary.claim");
		} else {
			st.kind = step_kind::dontcache; // refused: the ordinary edge
		}
	}
	const step_flags fl = flags_for(true, st.kind, _f.caps.dontcache(), _f.caps.direct_may_buffer());
	_issued_rwf = fl.rwf;
	_drop_after = fl.drop_after;
	int fd = _io.fd;
	if (st.kind == step_kind::direct) {
		if (st.bounce) {
			switch (bounce(st.length, true)) {
			case bounce_result::ready: break;
			case bounce_result::needs_place: return next_step::needs_place();
			case bounce_result::no_memory:
				_err = ENOMEM;
				_state = state::finishing;
				return {};
			}
		}
		fd = _direct->fd;
	}
	return next_step::issue(rw_request(io::op_kind::write, fd, st.offset, _issued_rwf),
				write_step_in_caller(st.kind), _split);
}

next_step write_op::finish_steps()
{
	_bounce.reset();
	if (_err != 0) {
		add(stat::errors);
		if (_written == 0) {
			_res.error = _err;
			_state = state::done;
			return {};
		}
		// Earlier steps landed: report a short write (the client resends
		// the rest and meets the error then), like write(2).
	}
	_res.bytes = _written;
	add(stat::write_bytes, _written);
	// One sync per WRITE, after all its steps completed, never per step
	// (io_uring does not order it after earlier writes: it is submitted
	// from the last step's completion).
	_sync = write_sync(_s, _io.stable);
	if (_sync == sync_kind::none) {
		_state = state::done;
		return {};
	}
	_state = state::syncing;
	io::request req;
	req.op = _sync == sync_kind::fsync ? io::op_kind::fsync : io::op_kind::fdatasync;
	req.fd = _io.fd;
	req.personality = _creds.personality();
	return next_step::issue(req, false, _split);
}

void write_op::on_result(io::result r)
{
	switch (_state) {
	case state::writing_back:
		on_writeback_result(r);
		_state = _resume;
		return;
	case state::syncing: on_sync_result(r); return;
	case state::steps: on_step_result(r); return;
	case state::write_back:
	case state::finishing:
	case state::done: return;
	}
}

void write_op::on_step_result(io::result r)
{
	step &st = _steps.items[_idx];
	switch (fallback_for(attempt::write, st.kind, _issued_rwf, r.error)) {
	case fallback::retry_without_dontcache:
		learn_no_dontcache(_e, _f);
		return; // next() reissues the step without the flag
	case fallback::through_page_cache:
		if (!fence_as_buffered(st)) {
			// Another WRITE of these pages is in flight direct: going
			// buffered now is the collision the fence is for.
			_err = r.error;
			_state = state::finishing;
			return;
		}
		note_direct_refused(_e, attempt::write, r.error, st.offset, st.length);
		st = through_page_cache(_s, attempt::write, st);
		_bounce.reset();
		return; // next() reissues it
	case fallback::none:
	case fallback::no_nowait: break;
	}
	bool write_back = false;
	switch (st.kind) {
	case step_kind::direct:
		_bounce.reset(); // the middle completed: its copy is no longer lent out
		if (r.ok()) {
			add(stat::write_direct_bytes, r.bytes);
			add(st.bounce ? stat::write_bounced_bytes : stat::write_unbounced_bytes, r.bytes);
			// A filesystem that may have written part of it through
			// the page cache (btrfs), with no RWF_DONTCACHE to drop
			// it: written back and dropped after the reply.
			if (_drop_after && r.bytes > 0)
				_later.flush_and_drop(_io.fd, page_down(st.offset),
						      page_up(st.offset + r.bytes) - page_down(st.offset));
		}
		break;
	case step_kind::dontcache:
		if (_drop_after) {
			// The DONTCACHE way without DONTCACHE: buffered, then write
			// back and drop what was written.  On an asynchronous
			// backend the write-back starts as the chain's next step
			// (before a direct middle, as for any cached piece) and the
			// wait and the drop go after the reply.
			// The drop takes the whole pages written, partly written
			// edges too: the kernel drops every folio a DONTCACHE
			// write touched once its write-back is done.
			add(stat::fallback_no_dontcache);
			if (r.ok()) {
				add(stat::write_buffered_bytes, r.bytes);
				const std::uint64_t lo = page_down(st.offset);
				const std::uint64_t len = page_up(st.offset + r.bytes) - lo;
				if (r.bytes > 0 && _later.holds()) {
					write_back = true;
					_drop_lo = lo;
					_drop_len = len;
				} else if (r.bytes > 0) {
					_later.flush_and_drop(_io.fd, lo, len); // now: no descriptor to hold
				}
			}
		} else if (r.ok()) {
			add(stat::write_dontcache_bytes, r.bytes);
		}
		break;
	case step_kind::tracked:
		DCACHE_SYNC_POINT("boundary.complete");
		_e.boundary.complete(_f.boundary, st.offset / k_page_size,
				     static_cast<std::uint32_t>(st.offset % k_page_size),
				     r.ok() ? static_cast<std::uint32_t>(r.bytes) : 0, _releases);
		// Written back even when this write completed the page (it is
		// dropped when the WRITE finishes): the neighbour that wrote the
		// other part may still be in flight, its write-back not yet
		// started, while this WRITE's direct middle goes out next.
		[[fallthrough]];
	case step_kind::buffered:
		if (r.ok()) {
			add(stat::write_buffered_bytes, r.bytes);
			write_back = st.writeback && r.bytes > 0;
		}
		break;
	}
	state then = state::steps;
	if (!r.ok()) {
		_err = r.error;
		then = state::finishing;
	} else {
		_written += r.bytes;
		if (r.bytes < st.length) {
			add(stat::short_transfers);
			then = state::finishing;
		} else {
			++_idx;
		}
	}
	if (!write_back) {
		_state = then;
		return;
	}
	_wb_lo = page_down(st.offset);
	_wb_hi = page_up(st.offset + r.bytes);
	_resume = then;
	_state = state::write_back;
}

// The data is written either way; a failed write-back only leaves the
// pages dirty (the kernel's own write-back, the sync or the COMMIT will
// meet the error again and report it).
void write_op::on_writeback_result(io::result r) noexcept
{
	// A DONTCACHE fallback's piece (counted as fallback_no_dontcache), a
	// direct WRITE's cached edge, auto's write-behind (auto_write_behind),
	// or the whole file before auto's first direct WRITE (counted as
	// auto_write_backs; its range is empty).
	const bool fallback = _drop_len > 0, whole_file = _wb_hi == 0;
	if (fallback) {
		_later.flush_and_drop(_io.fd, _drop_lo, _drop_len);
		_drop_len = 0;
	} else if (!whole_file && !_write_behind) {
		add(stat::edge_writebacks); // auto's write-behind counted apart
	}
	if (r.ok())
		return;
	add(stat::edge_writeback_errors);
	DCACHE_LOG_ONCE(_e, writeback_error, DCACHE_LOG_WARN,
			"dcache %s: sync_file_range(SYNC_FILE_RANGE_WRITE) of a WRITE's %s failed: %s", _e.name,
			fallback	? "buffered piece (no RWF_DONTCACHE)"
			: whole_file	? "file (cached WRITEs before a direct one)"
			: _write_behind ? "data (auto's write-behind)"
					: "cached edge",
			std::strerror(r.error));
}

void write_op::on_sync_result(io::result r)
{
	_state = state::done;
	add(_sync == sync_kind::fsync ? stat::syncs_fsync : stat::syncs_fdatasync);
	if (!r.ok()) {
		// Nothing may be claimed stable; the error goes to the client.
		add(stat::errors);
		_res.error = r.error;
		return;
	}
	_res.stable = true;
	add(stat::writes_reply_stable);
	if (!_io.stable)
		add(stat::writes_raised_stable);
	if (const auto d = drop_after_stable_write(_s, _io.stable, _io.offset, _written)) {
		// The drop goes off the reply path where it can (without the
		// file's own descriptor, as before: written back and dropped now).
		if (_later.holds())
			(void)_later.drop(_io.fd, d->offset, d->length);
		else
			_later.flush_and_drop(_io.fd, d->offset, d->length);
	}
}

void write_op::release() noexcept
{
	if (!_fenced.empty())
		_f.fence.leave(_fenced);
	// After the steps (the completing writer's data is in the page) and
	// after the sync (the page is clean, the write-back is free).
	if (!_releases.empty())
		_later.release_boundary(_releases, &_f, _io.fd);
}

} // namespace

request_op *new_write_op(dcache_export &e, dcache_file &f, const dcache_io &in, dcache_io_done_fn done, void *done_ctx)
{
	return new write_op(e, f, in, done, done_ctx);
}

} // namespace dcache::core
