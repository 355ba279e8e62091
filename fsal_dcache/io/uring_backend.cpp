#include "dcache_io/uring_backend.h"

#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
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
	std::vector<iovec> iov;	      // our copy of the caller's iovec array
	std::size_t first = 0;	      // first iovec not yet fully transferred
	std::size_t total = 0;	      // rw: bytes asked
	std::size_t moved = 0;	      // rw: bytes transferred so far
	std::uint64_t range_left = 0; // range ops in chunks: bytes after this chunk
	bool chunked = false;
	int head_error = 0; // flush_drop: the write-back's errno
	result res;
};

int io_uring_disabled_sysctl() noexcept
{
	FILE *f = std::fopen("/proc/sys/kernel/io_uring_disabled", "re");
	if (!f)
		return -1;
	int v = -1;
	if (std::fscanf(f, "%d", &v) != 1)
		v = -1;
	std::fclose(f);
	return v;
}

uring_open_result make_uring_backend(unsigned depth) noexcept
{
	uring_open_result out;
	char why[256];
	if (depth == 0 || depth > uring_backend::k_max_depth) {
		std::snprintf(why, sizeof(why), "io_uring queue depth %u is not valid; allowed: 1..%u", depth,
			      uring_backend::k_max_depth);
		out.error = EINVAL;
		out.why = why;
		return out;
	}
	const int disabled = io_uring_disabled_sysctl();
	if (disabled == 2) {
		out.error = EPERM;
		out.why = "io_uring is disabled on this host (kernel.io_uring_disabled = 2)";
		return out;
	}
	try {
		std::unique_ptr<uring_backend> b(new uring_backend());
		b->_ring = std::make_unique<io_uring>();
		io_uring_params params{};
		const int rc = io_uring_queue_init_params(depth, b->_ring.get(), &params);
		if (rc < 0) {
			b->_ring.reset(); // never initialised: nothing to tear down
			out.error = -rc;
			switch (-rc) {
			case ENOSYS:
				std::snprintf(why, sizeof(why), "io_uring_setup: ENOSYS: the kernel has no io_uring");
				break;
			case EPERM:
			case EACCES:
				std::snprintf(
					why, sizeof(why),
					"io_uring_setup: %s: refused (kernel.io_uring_disabled = %d, or seccomp/LSM)",
					strerrorname_np(-rc), disabled);
				break;
			case ENOMEM:
				std::snprintf(
					why, sizeof(why),
					"io_uring_setup: ENOMEM for %u entries (RLIMIT_MEMLOCK on kernels < 5.12?)",
					depth);
				break;
			default: std::snprintf(why, sizeof(why), "io_uring_setup: %s", std::strerror(-rc));
			}
			out.why = why;
			return out;
		}
		if (!(params.features & IORING_FEAT_NODROP)) {
			out.error = EOPNOTSUPP;
			out.why = "io_uring lacks IORING_FEAT_NODROP (kernel < 5.5)";
			return out;
		}
		io_uring_probe *probe = io_uring_get_probe_ring(b->_ring.get());
		if (!probe) {
			out.error = EOPNOTSUPP;
			out.why = "io_uring has no opcode probe (kernel < 5.6)";
			return out;
		}
		static constexpr struct {
			int opcode;
			const char *name;
		} needed[] = {
			{IORING_OP_NOP, "NOP"},
			{IORING_OP_READV, "READV"},
			{IORING_OP_WRITEV, "WRITEV"},
			{IORING_OP_FSYNC, "FSYNC"},
			{IORING_OP_SYNC_FILE_RANGE, "SYNC_FILE_RANGE"},
			{IORING_OP_FADVISE, "FADVISE"},
			{IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
		};
		for (const auto &n : needed) {
			if (!io_uring_opcode_supported(probe, n.opcode)) {
				io_uring_free_probe(probe);
				out.error = EOPNOTSUPP;
				std::snprintf(why, sizeof(why), "io_uring lacks IORING_OP_%s", n.name);
				out.why = why;
				return out;
			}
		}
		io_uring_free_probe(probe);
		b->_depth = depth;
		b->_reaper = std::thread(&uring_backend::reaper_loop, b.get());
		b->_reaper_id = b->_reaper.get_id();
		out.backend = std::move(b);
		return out;
	} catch (const std::bad_alloc &) {
		out.error = ENOMEM;
		out.why = "out of memory creating the io_uring backend";
	} catch (const std::system_error &e) {
		out.error = e.code().value() ? e.code().value() : EAGAIN;
		out.why = std::string("cannot start the io_uring reaper thread: ") + e.what();
	}
	out.backend.reset();
	return out;
}

uring_backend::~uring_backend()
{
	if (_reaper.joinable()) {
		{
			std::lock_guard lock(_mutex);
			_stopping = true;
			wake_and_cancel_locked();
		}
		_space.notify_all();
		_reaper.join();
	}
	if (_ring)
		io_uring_queue_exit(_ring.get());
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

void uring_backend::wake_and_cancel_locked() noexcept
{
	// Cancel whatever can be cancelled (requests parked on poll, queued in
	// io-wq); requests already running complete normally.  The NOP makes
	// sure the reaper wakes even when nothing is in flight.  Kernels
	// without IORING_ASYNC_CANCEL_ANY (< 5.19) fail the cancel with EINVAL
	// and we simply wait for the requests to finish.
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
	flush(_ring.get());
}

int uring_backend::queue_locked(op &o) noexcept
{
	const request &r = o.req;
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
	switch (r.op) {
	case op_kind::read:
		io_uring_prep_readv2(sqe, r.fd, o.iov.data() + o.first, static_cast<unsigned>(o.iov.size() - o.first),
				     r.offset, r.rwf);
		break;
	case op_kind::write:
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
	flush(_ring.get());
	return 0;
}

// A personality id (1..USHRT_MAX) or -errno.
int uring_backend::register_personality() noexcept
{
	if (const int err = _fail_capture.load(std::memory_order_relaxed); err != 0)
		return -err;
	// No lock: io_uring_register takes the ring's own lock in the kernel
	// and does not touch the SQ/CQ memory we share with the reaper.
	const int id = io_uring_register_personality(_ring.get());
	if (id < 0)
		return id;
	if (id == 0 || id > 0xffff) {
		// Cannot happen (ids are 1..USHRT_MAX); 0 would read as "none".
		(void)io_uring_unregister_personality(_ring.get(), id);
		return -ERANGE;
	}
	_personalities.fetch_add(1, std::memory_order_relaxed);
	return id;
}

credentials_result uring_backend::capture_credentials() noexcept
{
	credentials_result out;
	const int id = register_personality();
	if (id < 0)
		out.error = -id;
	else
		out.creds = credentials(this, id);
	return out;
}

namespace {

bool same_identity(const std::vector<std::uint32_t> &key, const identity &who) noexcept
{
	return key.size() == who.ngroups + 2 && key[0] == who.uid && key[1] == who.gid &&
	       std::equal(key.begin() + 2, key.end(), who.groups);
}

} // namespace

credentials_result uring_backend::capture_credentials(const identity &who) noexcept
{
	credentials_result out;
	std::lock_guard lock(_id_mutex);
	for (cached_identity &c : _identities) {
		if (same_identity(c.key, who)) {
			++c.refs;
			c.used = ++_id_clock;
			out.creds = credentials(this, c.id);
			return out;
		}
	}
	const int id = register_personality();
	if (id < 0) {
		out.error = -id;
		return out;
	}
	out.creds = credentials(this, id);
	cached_identity *slot = nullptr;
	if (_identities.size() < k_identity_cache) {
		try {
			slot = &_identities.emplace_back();
		} catch (const std::bad_alloc &) {
			return out; // served uncached: unregistered when released
		}
	} else {
		for (cached_identity &c : _identities)
			if (c.refs == 0 && (slot == nullptr || c.used < slot->used))
				slot = &c;
		if (slot == nullptr)
			return out; // every cached identity in use: uncached
		if (slot->id != 0) {
			(void)io_uring_unregister_personality(_ring.get(), slot->id);
			_personalities.fetch_sub(1, std::memory_order_relaxed);
			slot->id = 0;
		}
	}
	try {
		slot->key.assign({who.uid, who.gid});
		slot->key.insert(slot->key.end(), who.groups, who.groups + who.ngroups);
	} catch (const std::bad_alloc &) {
		slot->key.clear(); // matches no identity; the slot is reused
		return out;
	}
	slot->id = id;
	slot->refs = 1;
	slot->used = ++_id_clock;
	return out;
}

void uring_backend::release_credentials(int id) noexcept
{
	{
		std::lock_guard lock(_id_mutex);
		for (cached_identity &c : _identities) {
			if (c.id == id && !c.key.empty()) {
				--c.refs; // stays registered for the next request
				return;
			}
		}
	}
	// Only ENXIO/EINVAL (an id we never had) can fail: nothing to undo.
	(void)io_uring_unregister_personality(_ring.get(), id);
	_personalities.fetch_sub(1, std::memory_order_relaxed);
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

	std::unique_lock lock(_mutex);
	// The reaper thread must never wait for space: only it can make some.
	if (std::this_thread::get_id() != _reaper_id)
		_space.wait(lock, [this] { return _stopping || _in_flight < _depth; });
	int err = _stopping ? ECANCELED : queue_locked(*o);
	if (err == 0) {
		++_in_flight;
		if (_in_flight > _max_in_flight)
			_max_in_flight = _in_flight;
		return;
	}
	lock.unlock();
	delete o;
	c.complete(result::failure(err));
}

uring_backend::op *uring_backend::on_cqe_locked(op &o, int res) noexcept
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
		if (n == 0 || o.moved >= o.total || _stopping) {
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
		if (queue_locked(o) != 0) {
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
		if (_stopping) {
			o.res = result::failure(ECANCELED);
			return &o;
		}
		o.req.offset += o.req.length;
		o.req.length = o.range_left > k_range_chunk ? k_range_chunk : o.range_left;
		o.range_left -= o.req.length;
		if (const int err = queue_locked(o); err != 0) {
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
		io_uring_cqe *cqe = nullptr;
		const int rc = io_uring_wait_cqe(ring, &cqe);
		if (rc < 0) {
			// EINTR/EAGAIN/ETIME are transient; anything else means a
			// broken ring, where retrying slowly beats spinning.
			if (rc != -EINTR && rc != -EAGAIN && rc != -ETIME)
				std::this_thread::sleep_for(std::chrono::milliseconds(1));
			continue;
		}
		const std::uint64_t data = io_uring_cqe_get_data64(cqe);
		const int res = cqe->res;
		io_uring_cqe_seen(ring, cqe);

		op *finished = nullptr;
		bool quit = false;
		{
			// Taking the lock here is also what makes the submitter's
			// writes to the op visible to this thread (the CQE itself
			// is written by the kernel, which TSan cannot see).
			std::lock_guard lock(_mutex);
			if (data == k_internal) {
				--_internal;
			} else if (data & k_link_head) {
				// A flush_drop's write-back: its drop completes the op.
				--_internal;
				op &o = *reinterpret_cast<op *>(data & ~k_link_head);
				if (res < 0 && o.head_error == 0)
					o.head_error = -res;
			} else {
				finished = on_cqe_locked(*reinterpret_cast<op *>(data), res);
				if (finished)
					--_in_flight;
			}
			quit = _stopping && _in_flight == 0 && _internal == 0;
		}
		if (finished) {
			_space.notify_one();
			finished->done->complete(finished->res);
			delete finished;
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
