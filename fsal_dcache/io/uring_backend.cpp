#include "dcache_io/uring_backend.h"

#include "dcache_io/rpc_buffers.h"

#include <fcntl.h>
#include <pthread.h>
#include <liburing.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <system_error>
#include <vector>

namespace dcache::io {

namespace {

// user_data of our own SQEs (wake-up NOP, cancel).  Ops are heap objects
// with at least 8-byte alignment, so an odd value never names one.
constexpr std::uint64_t k_internal = 1;
// user_data of the eventfd read that wakes the reaper for handed-off ops
// (compared before the link-head bit below, which 4 does not have).
constexpr std::uint64_t k_wake = 4;
// Tags the user_data of a flush_drop's first SQE (the write-back, linked to
// the drop that completes the op): bit 1 of an op's address is 0 too.
constexpr std::uint64_t k_link_head = 2;

// sqe->len is 32 bits for FADVISE and SYNC_FILE_RANGE in the uapi this
// liburing knows; longer ranges go in page-aligned chunks.
constexpr std::uint64_t k_range_chunk = 1ULL << 30;

// An offset of -1 asks io_uring for the file position (streams, pipes):
// it must not be advanced when a remainder is resubmitted.
constexpr std::uint64_t k_current_pos = ~0ULL;

} // namespace

struct uring_backend::op {
	request req; // current state: offset/iov advance on resubmission
	completion *done = nullptr;
	op *next = nullptr;	      // the hand-off list
	std::vector<iovec> iov;	      // our copy of the caller's iovec array
	std::size_t first = 0;	      // first iovec not yet fully transferred
	std::size_t total = 0;	      // rw: bytes asked
	std::size_t moved = 0;	      // rw: bytes transferred so far
	std::uint64_t range_left = 0; // range ops in chunks: bytes after this chunk
	bool chunked = false;
	int head_error = 0; // flush_drop: the write-back's errno
	result res;
};

uring_backend::~uring_backend()
{
	if (_reaper.joinable()) {
		{
			std::lock_guard lock(_mutex);
			_stopping = true;
		}
		_space.notify_all();
		wake(); // the reaper cancels what it can and waits for the rest
		_reaper.join();
	}
	if (_fixed)
		rpc_buffers_detach(_ring.get());
	_fixed.reset(); // its buffers unmapped; the ring's end unregisters them
	// Cancels the wake-up read still armed.
	if (_ring)
		io_uring_queue_exit(_ring.get());
	if (_wake_fd >= 0)
		::close(_wake_fd);
}

std::size_t uring_backend::in_flight() const noexcept
{
	std::lock_guard lock(_mutex);
	return _in_flight;
}

std::size_t uring_backend::max_in_flight() const noexcept
{
	std::lock_guard lock(_mutex);
	return _max_in_flight;
}

namespace {

// Publishes the SQEs filled so far.  Once an SQE is in the ring it cannot be
// withdrawn, so a transient failure of io_uring_enter is retried; if it
// persists the SQE stays queued and the next enter (any later submit, or the
// destructor's wake-up) carries it to the kernel.
void flush(io_uring *ring) noexcept
{
	for (int attempt = 0; attempt < 64; ++attempt) {
		const int n = io_uring_submit(ring);
		if (n >= 0 || (n != -EINTR && n != -EAGAIN && n != -EBUSY))
			return;
		std::this_thread::yield();
	}
}

io_uring_sqe *get_sqe(io_uring *ring) noexcept
{
	io_uring_sqe *sqe = io_uring_get_sqe(ring);
	if (!sqe) {
		flush(ring);
		sqe = io_uring_get_sqe(ring);
	}
	return sqe;
}

} // namespace

void uring_backend::queue_cancel() noexcept
{
	// Cancel whatever can be cancelled (requests parked on poll, queued in
	// io-wq, the wake-up read, which the loop arms again); requests already
	// running complete normally.  The NOP makes sure the reaper wakes even
	// when nothing is in flight.  Kernels without IORING_ASYNC_CANCEL_ANY
	// (< 5.19) fail the cancel with EINVAL and we simply wait for the
	// requests to finish.
	if (io_uring_sqe *sqe = get_sqe(_ring.get())) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, k_internal);
		++_internal;
	}
	if (io_uring_sqe *sqe = get_sqe(_ring.get())) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, k_internal);
		++_internal;
	}
}

void uring_backend::arm_wake() noexcept
{
	// A read of the eventfd: it completes (and resets the counter) once a
	// thread hands off an op to an empty list.  eventfd reads never block
	// an io-wq worker: the kernel waits on its poll queue.
	if (io_uring_sqe *sqe = get_sqe(_ring.get())) {
		io_uring_prep_read(sqe, _wake_fd, &_wake_count, sizeof(_wake_count), 0);
		io_uring_sqe_set_data64(sqe, k_wake);
		_wake_armed = true;
	}
}

void uring_backend::wake() const noexcept
{
	// Never blocks: every read resets the counter, far below its limit.
	while (eventfd_write(_wake_fd, 1) < 0 && errno == EINTR) {
	}
}

void uring_backend::hand_off(op *o) noexcept
{
	op *head = _handoff.load(std::memory_order_relaxed);
	do
		o->next = head;
	while (!_handoff.compare_exchange_weak(head, o, std::memory_order_release, std::memory_order_relaxed));
	// Only the op that finds the list empty wakes the reaper: an op pushed
	// on a non-empty list is taken with the ops before it.  The reaper's
	// read resets the eventfd before it takes the list, so a push after
	// the take finds the list empty and wakes it again.
	if (head == nullptr)
		wake();
}

void uring_backend::finish(op *o) noexcept
{
	o->next = nullptr;
	if (_finished_last != nullptr)
		_finished_last->next = o;
	else
		_finished = o;
	_finished_last = o;
	++_finished_count;
}

void uring_backend::take_handoffs() noexcept
{
	op *lifo = _handoff.exchange(nullptr, std::memory_order_acquire);
	op *fifo = nullptr;
	while (lifo != nullptr) {
		op *n = lifo->next;
		lifo->next = fifo;
		fifo = lifo;
		lifo = n;
	}
	while (fifo != nullptr) {
		op *o = fifo;
		fifo = o->next;
		o->next = nullptr;
		if (const int err = queue_or_wait(*o); err != 0) {
			o->res = result::failure(err);
			finish(o);
		}
	}
}

int uring_backend::queue_or_wait(op &o) noexcept
{
	const int err = _backlog != nullptr ? EBUSY : queue(o);
	if (err != EBUSY)
		return err;
	_ring_full_waits.fetch_add(1, std::memory_order_relaxed);
	o.next = nullptr;
	if (_backlog_last != nullptr)
		_backlog_last->next = &o;
	else
		_backlog = &o;
	_backlog_last = &o;
	return 0;
}

void uring_backend::queue_backlog() noexcept
{
	while (_backlog != nullptr) {
		op &o = *_backlog;
		const int err = queue(o);
		if (err == EBUSY)
			return; // still no room: after the next pass
		_backlog = o.next;
		if (_backlog == nullptr)
			_backlog_last = nullptr;
		o.next = nullptr;
		if (err != 0) {
			o.res = result::failure(err);
			finish(&o);
		}
	}
}

int uring_backend::queue(op &o) noexcept
{
	const request &r = o.req;
	if (refused_for_tests(r))
		return EOPNOTSUPP; // finished with it, as the kernel's CQE would be
	if (unsigned n = _full_for_test.load(std::memory_order_relaxed); n != 0) {
		_full_for_test.store(n - 1, std::memory_order_relaxed);
		return EBUSY;
	}
	if (r.op == op_kind::flush_drop) {
		// Both SQEs or neither: a head queued alone would name an op
		// its caller deletes.
		if (io_uring_sq_space_left(_ring.get()) < 2)
			flush(_ring.get());
		if (io_uring_sq_space_left(_ring.get()) < 2)
			return EBUSY;
		io_uring_sqe *head = io_uring_get_sqe(_ring.get());
		io_uring_prep_sync_file_range(head, r.fd, static_cast<unsigned>(r.length), r.offset,
					      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
						      SYNC_FILE_RANGE_WAIT_AFTER);
		// Hard: the drop goes ahead even if the write-back failed, as
		// the synchronous backend's does.
		head->flags |= IOSQE_IO_HARDLINK;
		io_uring_sqe_set_data64(head, reinterpret_cast<std::uint64_t>(&o) | k_link_head);
		++_internal;
	}
	io_uring_sqe *sqe = get_sqe(_ring.get());
	if (!sqe)
		return EBUSY;
	const bool fixed = r.buf_index >= 0 && o.iov.size() - o.first == 1;
	switch (r.op) {
	case op_kind::read:
		if (fixed) {
			const iovec &v = o.iov[o.first];
			io_uring_prep_read_fixed(sqe, r.fd, v.iov_base, static_cast<unsigned>(v.iov_len), r.offset,
						 r.buf_index);
			sqe->rw_flags = r.rwf; // liburing 2.3 has no flags argument here
			break;
		}
		io_uring_prep_readv2(sqe, r.fd, o.iov.data() + o.first, static_cast<unsigned>(o.iov.size() - o.first),
				     r.offset, r.rwf);
		break;
	case op_kind::write:
		if (fixed) {
			const iovec &v = o.iov[o.first];
			io_uring_prep_write_fixed(sqe, r.fd, v.iov_base, static_cast<unsigned>(v.iov_len), r.offset,
						  r.buf_index);
			sqe->rw_flags = r.rwf;
			break;
		}
		io_uring_prep_writev2(sqe, r.fd, o.iov.data() + o.first, static_cast<unsigned>(o.iov.size() - o.first),
				      r.offset, r.rwf);
		break;
	case op_kind::fsync: io_uring_prep_fsync(sqe, r.fd, 0); break;
	case op_kind::fdatasync: io_uring_prep_fsync(sqe, r.fd, IORING_FSYNC_DATASYNC); break;
	case op_kind::sync_range:
		io_uring_prep_sync_file_range(sqe, r.fd, static_cast<unsigned>(r.length), r.offset,
					      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
						      SYNC_FILE_RANGE_WAIT_AFTER);
		break;
	case op_kind::writeback:
		io_uring_prep_sync_file_range(sqe, r.fd, static_cast<unsigned>(r.length), r.offset,
					      SYNC_FILE_RANGE_WRITE);
		break;
	case op_kind::fadvise_dontneed:
	case op_kind::flush_drop:
		io_uring_prep_fadvise(sqe, r.fd, r.offset, static_cast<off_t>(r.length), POSIX_FADV_DONTNEED);
		break;
	}
	// After prep: liburing's prep helpers zero the personality field.
	sqe->personality = static_cast<__u16>(r.personality);
	io_uring_sqe_set_data(sqe, &o);
	return 0;
}

void uring_backend::submit(const request &req, completion &c) noexcept
{
	const bool rw = req.op == op_kind::read || req.op == op_kind::write;
	if ((rw && (req.iov_count < 0 || req.iov_count > IOV_MAX || (req.iov_count > 0 && !req.iov))) ||
	    req.personality < 0 || req.personality > 0xffff) {
		c.complete(result::failure(EINVAL));
		return;
	}
	op *o = new (std::nothrow) op;
	if (!o) {
		c.complete(result::failure(ENOMEM));
		return;
	}
	o->req = req;
	o->done = &c;
	if (rw) {
		try {
			o->iov.assign(req.iov, req.iov + req.iov_count);
		} catch (const std::bad_alloc &) {
			delete o;
			c.complete(result::failure(ENOMEM));
			return;
		}
		o->total = req.iov_bytes();
		o->req.iov = nullptr; // only o->iov is used from here on
	} else if ((req.op == op_kind::sync_range || req.op == op_kind::writeback ||
		    req.op == op_kind::fadvise_dontneed || req.op == op_kind::flush_drop) &&
		   req.length > 0xffffffffULL) {
		o->chunked = true;
		o->range_left = req.length - k_range_chunk;
		o->req.length = k_range_chunk;
	}

	const bool reaper = on_completion_thread();
	{
		std::unique_lock lock(_mutex);
		// The reaper thread must never wait for space: only it can make
		// some.
		if (!reaper)
			_space.wait(lock, [this] { return _stopping || _in_flight < _depth; });
		if (_stopping) {
			lock.unlock();
			delete o;
			c.complete(result::failure(ECANCELED));
			return;
		}
		++_in_flight;
		if (_in_flight > _max_in_flight)
			_max_in_flight = _in_flight;
	}
	if (!reaper) {
		hand_off(o);
		return;
	}
	// On the reaper (a completion chaining its next step): a failure is
	// finished like any other op, in the loop's next round.
	if (const int err = queue_or_wait(*o); err != 0) {
		o->res = result::failure(err);
		finish(o);
	}
}

bounce_buffer uring_backend::bounce_get(std::size_t len) noexcept
{
	if (_fixed) {
		bounce_buffer b = _fixed->get(len);
		if (b.data != nullptr)
			return b;
	}
	return backend::bounce_get(len);
}

int uring_backend::registered_index(const void *p, std::size_t len) const noexcept
{
	return _fixed ? rpc_buffer_index(_ring.get(), p, len) : -1;
}

void uring_backend::bounce_put(const bounce_buffer &b) noexcept
{
	if (!_fixed || !_fixed->put(b))
		backend::bounce_put(b);
}

int uring_backend::set_io_workers(unsigned n) noexcept
{
	unsigned limit = n;
	if (limit == 0) {
		const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		// The kernel's own choice: the SQ's entries (depth, rounded up
		// to a power of two), or 4 per CPU if fewer.
		limit = std::min(std::bit_ceil(_depth), 4U * static_cast<unsigned>(cpus > 0 ? cpus : 1));
	}
	// Both kinds: regular files are bounded work, anything else unbounded.
	// Registered here, the bound holds for every task using the ring,
	// the reaper included, whether it has started io-wq workers yet or not.
	unsigned values[2] = {limit, limit};
	const int rc = io_uring_register_iowq_max_workers(_ring.get(), values);
	if (rc < 0)
		return -rc;
	_io_workers.store(limit, std::memory_order_relaxed);
	return 0;
}

uring_backend::op *uring_backend::on_cqe(op &o, int res) noexcept
{
	switch (o.req.op) {
	case op_kind::read:
	case op_kind::write: {
		if (res < 0) {
			// An error after progress is a short transfer, like preadv.
			o.res = o.moved > 0 ? result::success(o.moved) : result::failure(-res);
			return &o;
		}
		auto n = static_cast<std::size_t>(res);
		o.moved += n;
		// 0 bytes: EOF for a read; a write that moves nothing would loop.
		// While stopping, report the progress instead of going on (the
		// remainder could outlive the cancel that was already sent).
		if (n == 0 || o.moved >= o.total || _stop_seen) {
			o.res = result::success(o.moved);
			return &o;
		}
		while (n > 0 && o.first < o.iov.size()) {
			iovec &v = o.iov[o.first];
			if (n >= v.iov_len) {
				n -= v.iov_len;
				++o.first;
			} else {
				v.iov_base = static_cast<char *>(v.iov_base) + n;
				v.iov_len -= n;
				n = 0;
			}
		}
		if (o.req.offset != k_current_pos)
			o.req.offset += static_cast<std::uint64_t>(res);
		_resubmits.fetch_add(1, std::memory_order_relaxed);
		if (queue_or_wait(o) != 0) {
			o.res = result::success(o.moved);
			return &o;
		}
		return nullptr;
	}
	case op_kind::fsync:
	case op_kind::fdatasync: o.res = res < 0 ? result::failure(-res) : result::success(0); return &o;
	case op_kind::sync_range:
	case op_kind::writeback:
	case op_kind::fadvise_dontneed:
	case op_kind::flush_drop:
		if (o.head_error != 0)
			res = -o.head_error; // the first error
		if (res < 0) {
			o.res = result::failure(-res);
			return &o;
		}
		if (!o.chunked || o.range_left == 0) {
			o.res = result::success(0);
			return &o;
		}
		if (_stop_seen) {
			o.res = result::failure(ECANCELED);
			return &o;
		}
		o.req.offset += o.req.length;
		o.req.length = o.range_left > k_range_chunk ? k_range_chunk : o.range_left;
		o.range_left -= o.req.length;
		if (const int err = queue_or_wait(o); err != 0) {
			o.res = result::failure(err);
			return &o;
		}
		return nullptr;
	}
	o.res = result::failure(EINVAL);
	return &o;
}

void uring_backend::reaper_loop() noexcept
{
	io_uring *ring = _ring.get();
	for (;;) {
		if (!_wake_armed && !_wake_broken)
			arm_wake();
		queue_backlog();
		take_handoffs();
		if (_stop_seen && !_cancel_sent) {
			queue_cancel();
			_cancel_sent = true;
		}
		// One enter submits everything queued since the last one (handed
		// off, resubmitted, chained by completions) and waits.  Without a
		// wake-up read in the ring (no SQE for it: the kernel has not
		// taken the SQ's entries) nothing would wake us for a hand-off,
		// and with ops in the backlog we must come back for them: wait
		// 1 ms at most, then try again.
		int rc = 0;
		if (_finished != nullptr) {
			rc = io_uring_submit(ring);
		} else if (_wake_armed && _backlog == nullptr) {
			rc = io_uring_submit_and_wait(ring, 1);
		} else {
			__kernel_timespec ts{0, 1000000};
			io_uring_cqe *first = nullptr;
			rc = io_uring_submit_and_wait_timeout(ring, &first, 1, &ts, nullptr);
		}
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME)
			// A broken ring: retrying slowly beats spinning.
			std::this_thread::sleep_for(std::chrono::milliseconds(1));

		io_uring_cqe *cqe = nullptr;
		while (io_uring_peek_cqe(ring, &cqe) == 0) {
			const std::uint64_t data = io_uring_cqe_get_data64(cqe);
			const int res = cqe->res;
			io_uring_cqe_seen(ring, cqe);
			if (data == k_internal) {
				--_internal;
			} else if (data == k_wake) {
				_wake_armed = false; // armed again before the take
				// A kernel that fails the read itself (not a cancel)
				// would fail it again at once: poll every 1 ms instead
				// of spinning.
				if (res < 0 && res != -ECANCELED && res != -EINTR && res != -EAGAIN)
					_wake_broken = true;
			} else if (data & k_link_head) {
				// A flush_drop's write-back: its drop completes the op.
				--_internal;
				op &o = *reinterpret_cast<op *>(data & ~k_link_head);
				if (res < 0 && o.head_error == 0)
					o.head_error = -res;
			} else if (op *done = on_cqe(*reinterpret_cast<op *>(data), res)) {
				finish(done);
			}
		}

		bool quit = false;
		{
			std::lock_guard lock(_mutex);
			_in_flight -= _finished_count;
			_stop_seen = _stopping;
			quit = _stopping && _in_flight == 0 && _internal == 0;
		}
		if (_finished != nullptr) {
			_space.notify_all();
			op *o = _finished;
			_finished = nullptr;
			_finished_last = nullptr;
			_finished_count = 0;
			// A completion may submit: queued for the next enter.
			while (o != nullptr) {
				op *n = o->next;
				o->done->complete(o->res);
				delete o;
				o = n;
			}
		}
		if (quit)
			return;
	}
}

result uring_backend::execute(const request &req) noexcept
{
	// From a completion callback, waiting for our own thread would
	// deadlock: run the request synchronously instead.
	if (std::this_thread::get_id() == _reaper_id)
		return _sync.execute(req);

	struct waiter final : completion {
		std::mutex m;
		std::condition_variable cv;
		bool done = false;
		result r;
		void complete(result x) noexcept override
		{
			std::lock_guard lock(m);
			r = x;
			done = true;
			cv.notify_one(); // under the lock: the waiter may free us at once
		}
	} w;
	submit(req, w);
	std::unique_lock lock(w.m);
	w.cv.wait(lock, [&w] { return w.done; });
	return w.r;
}

} // namespace dcache::io
