// One conformance suite over every I/O backend: {fake, sync, io_uring}.
//
// The same typed tests run against each backend.  Real backends work on a
// temporary file in /tmp (ext4 here; tmpfs and other filesystems are probed
// and tests skip with the reason when a feature is missing); the fake works
// on its in-memory file keyed by the same descriptor.  Where io_uring cannot
// be created (kernel.io_uring_disabled, seccomp, ENOSYS) the io_uring tests
// skip with the factory reason (liburing exit-77 convention).  Here: data
// round trips, RWF_DONTCACHE, O_DIRECT, syncs and advice, errors, and many
// requests from several threads.
#include "backend_conformance.hpp"

namespace {

using namespace dcache::test;

// ---- data round trips ---------------------------------------------------

TYPED_TEST(backend_conformance, write_then_read_round_trip_with_several_iovecs)
{
	for (bool async : {false, true}) {
		SCOPED_TRACE(async ? "submit()" : "execute()");
		const std::uint64_t off = async ? 1'000'003 : 12'345;
		auto data = pattern(1000 + 4096 + 37, async ? 3 : 1);
		iovec wv[3] = {{data.data(), 1000}, {data.data() + 1000, 4096}, {data.data() + 5096, 37}};
		auto w = this->run(async, rw_req(op_kind::write, this->fd(), off, wv, 3));
		ASSERT_TRUE(w.ok()) << std::strerror(w.error);
		EXPECT_EQ(w.bytes, data.size());

		// Read back split differently from how it was written.
		std::vector<std::uint8_t> got(data.size(), 0xee);
		iovec rv[2] = {{got.data(), 777}, {got.data() + 777, got.size() - 777}};
		auto r = this->run(async, rw_req(op_kind::read, this->fd(), off, rv, 2));
		ASSERT_TRUE(r.ok()) << std::strerror(r.error);
		EXPECT_EQ(r.bytes, data.size());
		EXPECT_EQ(got, data);

		auto file = this->contents();
		ASSERT_GE(file.size(), off + data.size());
		EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + static_cast<std::ptrdiff_t>(off)));
	}
}

TYPED_TEST(backend_conformance, sixty_four_small_iovecs)
{
	auto data = pattern(64 * 512, 9);
	this->seed(4096, data);
	std::vector<std::uint8_t> got(data.size(), 0);
	std::vector<iovec> v(64);
	for (std::size_t i = 0; i < v.size(); ++i)
		v[i] = {got.data() + i * 512, 512};
	auto r = this->sub(rw_req(op_kind::read, this->fd(), 4096, v.data(), 64));
	ASSERT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, data.size());
	EXPECT_EQ(got, data);
}

TYPED_TEST(backend_conformance, read_at_or_beyond_eof_returns_zero)
{
	this->seed(0, pattern(10'000, 2));
	std::vector<std::uint8_t> buf(4096, 0x5a);
	iovec v{buf.data(), buf.size()};
	for (std::uint64_t off : {10'000ULL, 20'000ULL, 1ULL << 40}) {
		auto r = this->sub(rw_req(op_kind::read, this->fd(), off, &v, 1));
		ASSERT_TRUE(r.ok()) << "offset " << off << ": " << std::strerror(r.error);
		EXPECT_EQ(r.bytes, 0u) << "offset " << off;
	}
	EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](auto c) { return c == 0x5a; }))
		<< "a read past EOF wrote into the buffer";
}

TYPED_TEST(backend_conformance, read_across_eof_is_short_and_exact)
{
	auto data = pattern(10'000, 4);
	this->seed(0, data);
	std::vector<std::uint8_t> got(3 * 4096, 0);
	iovec v[3] = {{got.data(), 4096}, {got.data() + 4096, 4096}, {got.data() + 8192, 4096}};
	const std::uint64_t resub_before = this->uring() ? this->uring()->resubmits() : 0;
	auto r = this->sub(rw_req(op_kind::read, this->fd(), 6000, v, 3));
	ASSERT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, 4000u); // EOF falls inside the first iovec
	EXPECT_TRUE(std::equal(got.begin(), got.begin() + 4000, data.begin() + 6000));
	if (auto *u = this->uring()) {
		// The kernel returned 4000 < 12288: the backend asked for the
		// rest and stopped at the 0-byte EOF read.
		EXPECT_GT(u->resubmits(), resub_before);
	}
}

// A short transfer in the middle of a file: injected for the fake; for real
// files RLIMIT_FSIZE makes the kernel cut a write at the limit (the
// remainder then fails EFBIG, which must surface as the short count).
TYPED_TEST(backend_conformance, short_write_reports_what_was_written)
{
	auto data = pattern(8192, 5);
	iovec v[2] = {{data.data(), 4096}, {data.data() + 4096, 4096}};
	const std::uint64_t off = 20'000;
	const std::size_t expect = 3000;
	result r;
	if constexpr (TypeParam::real_files) {
		struct rlimit old {};
		ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
		struct sigaction ign {
		}, old_sa{};
		ign.sa_handler = SIG_IGN;
		ASSERT_EQ(sigaction(SIGXFSZ, &ign, &old_sa), 0);
		struct rlimit lim = old;
		lim.rlim_cur = off + expect;
		ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
		r = this->sub(rw_req(op_kind::write, this->fd(), off, v, 2));
		ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
		ASSERT_EQ(sigaction(SIGXFSZ, &old_sa, nullptr), 0);
	} else {
		this->fake()->short_call(0, expect);
		r = this->sub(rw_req(op_kind::write, this->fd(), off, v, 2));
	}
	ASSERT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, expect);
	auto file = this->contents();
	ASSERT_EQ(file.size(), off + expect);
	EXPECT_TRUE(std::equal(data.begin(), data.begin() + expect, file.begin() + off));
}

TYPED_TEST(backend_conformance, short_read_injected_or_at_eof)
{
	auto data = pattern(16384, 6);
	this->seed(0, data);
	std::vector<std::uint8_t> got(16384, 0);
	iovec v{got.data(), got.size()};
	std::size_t expect = data.size();
	if constexpr (!TypeParam::real_files) {
		expect = 5000;
		this->fake()->short_call(0, expect);
	}
	auto r = this->sub(rw_req(op_kind::read, this->fd(), 0, &v, 1));
	ASSERT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, expect);
	EXPECT_TRUE(std::equal(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(expect), data.begin()));
}

// ---- RWF_DONTCACHE ------------------------------------------------------

TYPED_TEST(backend_conformance, dontcache_round_trip_or_eopnotsupp)
{
	auto data = pattern(65536, 7);
	iovec v{data.data(), data.size()};
	auto w = this->sub(rw_req(op_kind::write, this->fd(), 0, &v, 1, RWF_DONTCACHE));
	if (w.error == EOPNOTSUPP)
		GTEST_SKIP() << "RWF_DONTCACHE: EOPNOTSUPP on /tmp (kernel < 6.14 or filesystem without FOP_DONTCACHE)";
	ASSERT_TRUE(w.ok()) << std::strerror(w.error);
	EXPECT_EQ(w.bytes, data.size());
	std::vector<std::uint8_t> got(data.size(), 0);
	iovec rv{got.data(), got.size()};
	auto r = this->sub(rw_req(op_kind::read, this->fd(), 0, &rv, 1, RWF_DONTCACHE));
	ASSERT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, data.size());
	EXPECT_EQ(got, data);
}

// tmpfs has no FOP_DONTCACHE: whatever the filesystem says, every backend
// must say the same as a plain pwritev2.
TYPED_TEST(backend_conformance, dontcache_on_tmpfs_agrees_with_pwritev2)
{
	if constexpr (!TypeParam::real_files) {
		this->fake()->reject_dontcache();
		auto data = pattern(4096, 8);
		iovec v{data.data(), data.size()};
		auto w = this->sub(rw_req(op_kind::write, this->fd(), 0, &v, 1, RWF_DONTCACHE));
		EXPECT_EQ(w.error, EOPNOTSUPP);
		EXPECT_EQ(w.bytes, 0u);
	} else {
		if (access("/dev/shm", W_OK) != 0)
			GTEST_SKIP() << "/dev/shm (tmpfs) not writable: " << std::strerror(errno);
		temp_file shm("/dev/shm");
		ASSERT_GE(shm.fd(), 0);
		auto data = pattern(4096, 8);
		iovec v{data.data(), data.size()};
		const ssize_t n = pwritev2(shm.fd(), &v, 1, 0, RWF_DONTCACHE);
		const int expect = n < 0 ? errno : 0;
		auto w = this->sub(rw_req(op_kind::write, shm.fd(), 4096, &v, 1, RWF_DONTCACHE));
		EXPECT_EQ(w.error, expect) << "pwritev2 said " << (expect ? strerrorname_np(expect) : "ok")
					   << ", backend said " << (w.error ? strerrorname_np(w.error) : "ok");
		std::printf("  tmpfs RWF_DONTCACHE write: %s\n", expect ? strerrorname_np(expect) : "accepted");
	}
}

// ---- O_DIRECT -----------------------------------------------------------

TYPED_TEST(backend_conformance, odirect_aligned_round_trip)
{
	typename TestFixture::direct_file d;
	std::string skip;
	this->open_direct(d, skip);
	if (this->HasFatalFailure())
		return;
	if (!skip.empty())
		GTEST_SKIP() << skip;
	const std::size_t align = d.align;
	const std::size_t len = 4 * align;
	auto wbuf = aligned_alloc_bytes(align, len);
	auto rbuf = aligned_alloc_bytes(align, len);
	ASSERT_TRUE(wbuf && rbuf);
	auto data = pattern(len, 10);
	std::memcpy(wbuf.get(), data.data(), len);
	std::memset(rbuf.get(), 0, len);
	iovec wv[2] = {{wbuf.get(), align}, {wbuf.get() + align, len - align}};
	auto w = this->sub(rw_req(op_kind::write, d.fd, 3 * align, wv, 2));
	ASSERT_TRUE(w.ok()) << std::strerror(w.error);
	EXPECT_EQ(w.bytes, len);
	iovec rv{rbuf.get(), len};
	auto r = this->sub(rw_req(op_kind::read, d.fd, 3 * align, &rv, 1));
	ASSERT_TRUE(r.ok()) << std::strerror(r.error);
	EXPECT_EQ(r.bytes, len);
	EXPECT_EQ(std::memcmp(rbuf.get(), data.data(), len), 0);
	auto file = this->contents(); // through the buffered descriptor
	ASSERT_EQ(file.size(), 4 * align + len - align);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + static_cast<std::ptrdiff_t>(3 * align)));
	this->b().close_fd(d.fd);
}

TYPED_TEST(backend_conformance, odirect_misaligned_is_einval)
{
	typename TestFixture::direct_file d;
	std::string skip;
	this->open_direct(d, skip);
	if (this->HasFatalFailure())
		return;
	if (!skip.empty())
		GTEST_SKIP() << skip;
	const dio_caps caps = d.caps;
	this->seed(0, pattern(65536, 11));
	const std::size_t align = d.align;
	auto buf = aligned_alloc_bytes(align, 2 * align);
	ASSERT_TRUE(buf);
	iovec v{buf.get(), align};
	// File offset off by one.
	auto r = this->sub(rw_req(op_kind::read, d.fd, 1, &v, 1));
	EXPECT_EQ(r.error, EINVAL) << "misaligned offset read: " << (r.error ? strerrorname_np(r.error) : "ok");
	auto w = this->sub(rw_req(op_kind::write, d.fd, caps.offset_align + 1, &v, 1));
	EXPECT_EQ(w.error, EINVAL) << "misaligned offset write: " << (w.error ? strerrorname_np(w.error) : "ok");
	// Memory off by one, where the filesystem asks for more than bytes.
	if (caps.mem_align > 1) {
		iovec mv{buf.get() + 1, align};
		auto m = this->sub(rw_req(op_kind::read, d.fd, 0, &mv, 1));
		EXPECT_EQ(m.error, EINVAL) << "misaligned buffer read: " << (m.error ? strerrorname_np(m.error) : "ok");
	}
	this->b().close_fd(d.fd);
}

// A bounce buffer is kept and reused; io_uring registers it with its ring
// and issues requests on it as READ_FIXED/WRITE_FIXED (buf_index), which the
// other backends ignore; both ways the bytes are the same.
TYPED_TEST(backend_conformance, bounce_buffers_are_reused_and_carry_their_index)
{
	typename TestFixture::direct_file d;
	std::string skip;
	this->open_direct(d, skip);
	if (this->HasFatalFailure())
		return;
	if (!skip.empty())
		GTEST_SKIP() << skip;
	(void)bounce_trim(); // every ring's free buffers too: a fresh start
	constexpr std::size_t len = std::size_t{1} << 20;
	const auto *u = this->uring();
	const fixed_buffers *fixed = u != nullptr ? u->fixed() : nullptr;
	if (u != nullptr && fixed == nullptr)
		std::printf("  no registered buffers on this kernel (%s): plain ones\n",
			    strerrorname_np(u->fixed_error()));
	const std::uint64_t registered = fixed != nullptr ? fixed->registrations() : 0;

	bounce_buffer w = this->b().bounce_get(len);
	ASSERT_NE(w.data, nullptr);
	EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.data) % 4096, 0u);
	EXPECT_FALSE(w.reused) << "the pool was trimmed: a new buffer";
	EXPECT_EQ(w.index >= 0, fixed != nullptr) << "registered exactly where the ring has a table";
	const void *first = w.data;
	const int first_index = w.index;
	this->b().bounce_put(w);
	w = this->b().bounce_get(len - 100); // the same size class
	EXPECT_TRUE(w.reused);
	EXPECT_EQ(w.data, first) << "the buffer given back is the one reused";
	EXPECT_EQ(w.index, first_index);
	bounce_buffer r = this->b().bounce_get(len);
	ASSERT_NE(r.data, nullptr);
	EXPECT_NE(r.data, w.data);

	const auto data = pattern(len, 21);
	std::memcpy(w.data, data.data(), len);
	std::memset(r.data, 0, len);
	iovec wv{w.data, len}, rv{r.data, len};
	request wq = rw_req(op_kind::write, d.fd, 0, &wv, 1);
	wq.buf_index = w.index;
	const auto wr = this->sub(wq);
	ASSERT_TRUE(wr.ok()) << std::strerror(wr.error);
	EXPECT_EQ(wr.bytes, len);
	request rq = rw_req(op_kind::read, d.fd, 0, &rv, 1);
	rq.buf_index = r.index;
	const auto rr = this->sub(rq);
	ASSERT_TRUE(rr.ok()) << std::strerror(rr.error);
	EXPECT_EQ(rr.bytes, len);
	EXPECT_EQ(std::memcmp(r.data, data.data(), len), 0);
	if (auto *f = this->fake()) {
		const auto calls = f->calls();
		ASSERT_GE(calls.size(), 2u);
		EXPECT_EQ(calls[calls.size() - 2].buf_index, w.index);
		EXPECT_EQ(calls.back().buf_index, r.index);
	}
	this->b().bounce_put(w);
	this->b().bounce_put(r);
	if (fixed != nullptr) {
		EXPECT_EQ(fixed->registrations(), registered + 2) << "two buffers, registered once each";
		EXPECT_GE(fixed->reuses(), 1u);
		EXPECT_EQ(fixed->mapped(), 2u);
		EXPECT_EQ(bounce_trim(), 2 * len) << "idle: both leave their slots";
		EXPECT_EQ(fixed->mapped(), 0u);
	}
	this->b().close_fd(d.fd);
}

// ---- syncs and advice ---------------------------------------------------

TYPED_TEST(backend_conformance, fsync_fdatasync_and_sync_range_clean_the_pages)
{
	auto data = pattern(256 * 1024, 12);
	for (op_kind sync_op : {op_kind::fsync, op_kind::fdatasync, op_kind::sync_range}) {
		SCOPED_TRACE(op_name(sync_op));
		iovec v{data.data(), data.size()};
		// The write's completion is delivered before the sync is submitted:
		// that is the ordering rule of the asynchronous backends.
		auto w = this->sub(rw_req(op_kind::write, this->fd(), 0, &v, 1));
		ASSERT_TRUE(w.ok()) << std::strerror(w.error);
		cachestat_out before{};
		const int cs_err = TypeParam::real_files ? cachestat(this->fd(), 0, data.size(), before) : ENOSYS;
		auto s = this->sub(range_req(sync_op, this->fd(), 0, data.size()));
		ASSERT_TRUE(s.ok()) << std::strerror(s.error);
		EXPECT_EQ(s.bytes, 0u);
		if (cs_err == 0) {
			cachestat_out after{};
			ASSERT_EQ(cachestat(this->fd(), 0, data.size(), after), 0);
			EXPECT_EQ(after.nr_dirty, 0u) << "dirty pages before the sync: " << before.nr_dirty;
			EXPECT_EQ(after.nr_writeback, 0u);
		}
	}
	if constexpr (!TypeParam::real_files) {
		EXPECT_EQ(this->fake()->count(op_kind::fsync), 1u);
		EXPECT_EQ(this->fake()->count(op_kind::fdatasync), 1u);
		EXPECT_EQ(this->fake()->count(op_kind::sync_range), 1u);
	}
}

// Delayed-allocation extents in [0, len) as FIEMAP reports them without
// syncing first; -1 when the filesystem gives no extent map.
int delalloc_extents(int fd, std::uint64_t len)
{
	constexpr unsigned k_max = 64;
	std::vector<std::uint8_t> buf(sizeof(fiemap) + k_max * sizeof(fiemap_extent));
	auto *fm = reinterpret_cast<fiemap *>(buf.data());
	fm->fm_start = 0;
	fm->fm_length = len;
	fm->fm_flags = 0; // not FIEMAP_FLAG_SYNC: what is there now
	fm->fm_extent_count = k_max;
	if (ioctl(fd, FS_IOC_FIEMAP, fm) != 0)
		return -1;
	int n = 0;
	for (unsigned i = 0; i < fm->fm_mapped_extents; ++i)
		n += (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_DELALLOC) != 0;
	return n;
}

// writeback starts write-back of the range and returns without waiting
// for it: the pages are no longer dirty, and the filesystem has allocated
// their blocks (nothing is left as delayed allocation) - which is what the
// core issues it for.
TYPED_TEST(backend_conformance, writeback_starts_write_back_and_leaves_no_delayed_allocation)
{
	auto data = pattern(64 * 1024, 15);
	iovec v{data.data(), data.size()};
	auto w = this->sub(rw_req(op_kind::write, this->fd(), 0, &v, 1));
	ASSERT_TRUE(w.ok()) << std::strerror(w.error);
	const int before = TypeParam::real_files ? delalloc_extents(this->fd(), data.size()) : -1;
	auto s = this->sub(range_req(op_kind::writeback, this->fd(), 0, data.size()));
	ASSERT_TRUE(s.ok()) << std::strerror(s.error);
	EXPECT_EQ(s.bytes, 0u);
	if constexpr (TypeParam::real_files) {
		cachestat_out after{};
		if (cachestat(this->fd(), 0, data.size(), after) == 0)
			EXPECT_EQ(after.nr_dirty, 0u);
		else
			std::printf("  cachestat(2) unavailable: dirty pages not checked\n");
		if (before > 0)
			EXPECT_EQ(delalloc_extents(this->fd(), data.size()), 0)
				<< "delalloc extents before: " << before;
		else
			std::printf("  this filesystem reports no delayed allocation (FIEMAP: %d): not checked\n",
				    before);
	} else {
		EXPECT_EQ(this->fake()->count(op_kind::writeback), 1u);
	}
}

TYPED_TEST(backend_conformance, fadvise_dontneed_drops_clean_pages)
{
	auto data = pattern(512 * 1024, 13);
	iovec v{data.data(), data.size()};
	auto w = this->sub(rw_req(op_kind::write, this->fd(), 0, &v, 1));
	ASSERT_TRUE(w.ok()) << std::strerror(w.error);
	auto s = this->sub(range_req(op_kind::fsync, this->fd()));
	ASSERT_TRUE(s.ok()) << std::strerror(s.error);
	cachestat_out before{};
	const bool measure = TypeParam::real_files && cachestat(this->fd(), 0, data.size(), before) == 0;
	// length 0: to end of file
	auto a = this->sub(range_req(op_kind::fadvise_dontneed, this->fd(), 0, 0));
	ASSERT_TRUE(a.ok()) << std::strerror(a.error);
	if (measure) {
		cachestat_out after{};
		ASSERT_EQ(cachestat(this->fd(), 0, data.size(), after), 0);
		EXPECT_GT(before.nr_cache, 0u) << "a buffered write left nothing cached?";
		EXPECT_EQ(after.nr_cache, 0u);
	} else if constexpr (TypeParam::real_files) {
		std::printf("  cachestat(2) unavailable: page residency not checked\n");
	}
	if constexpr (!TypeParam::real_files) {
		EXPECT_EQ(this->fake()->count(op_kind::fadvise_dontneed), 1u);
	}
}

// flush_drop on pages a buffered write left dirty: written back, waited
// for, then dropped - one request (on io_uring two linked SQEs).
TYPED_TEST(backend_conformance, flush_drop_writes_back_then_drops_dirty_pages)
{
	auto data = pattern(256 * 1024, 16);
	iovec v{data.data(), data.size()};
	auto w = this->sub(rw_req(op_kind::write, this->fd(), 0, &v, 1));
	ASSERT_TRUE(w.ok()) << std::strerror(w.error);
	cachestat_out before{};
	const bool measure = TypeParam::real_files && cachestat(this->fd(), 0, data.size(), before) == 0;
	auto a = this->sub(range_req(op_kind::flush_drop, this->fd(), 0, data.size()));
	ASSERT_TRUE(a.ok()) << std::strerror(a.error);
	EXPECT_EQ(a.bytes, 0u);
	if (measure) {
		cachestat_out after{};
		ASSERT_EQ(cachestat(this->fd(), 0, data.size(), after), 0);
		EXPECT_GT(before.nr_dirty, 0u) << "a buffered write left nothing dirty?";
		EXPECT_EQ(after.nr_dirty, 0u);
		EXPECT_EQ(after.nr_cache, 0u) << "dropped only once written back";
	} else if constexpr (TypeParam::real_files) {
		std::printf("  cachestat(2) unavailable: page residency not checked\n");
	}
	if constexpr (!TypeParam::real_files) {
		EXPECT_EQ(this->fake()->count(op_kind::flush_drop), 1u);
	}
}

// Ranges above 4 GiB do not fit the SQE's 32-bit length: the io_uring
// backend issues them in chunks; every backend must accept them.
TYPED_TEST(backend_conformance, range_ops_longer_than_4gib)
{
	this->seed(0, pattern(8192, 14));
	const std::uint64_t len = (5ULL << 30) + 4096;
	auto a = this->sub(range_req(op_kind::fadvise_dontneed, this->fd(), 0, len));
	EXPECT_TRUE(a.ok()) << std::strerror(a.error);
	auto s = this->sub(range_req(op_kind::sync_range, this->fd(), 0, len));
	EXPECT_TRUE(s.ok()) << std::strerror(s.error);
	auto b = this->sub(range_req(op_kind::writeback, this->fd(), 0, len));
	EXPECT_TRUE(b.ok()) << std::strerror(b.error);
	auto c = this->sub(range_req(op_kind::flush_drop, this->fd(), 0, len));
	EXPECT_TRUE(c.ok()) << std::strerror(c.error);
}

// ---- errors -------------------------------------------------------------

TYPED_TEST(backend_conformance, errors_are_positive_errno_values)
{
	std::vector<std::uint8_t> buf(4096, 1);
	iovec v{buf.data(), buf.size()};
	int bad = -1;
	int expect = EBADF;
	if constexpr (TypeParam::real_files) {
		bad = dup(this->fd());
		ASSERT_GE(bad, 0);
		ASSERT_EQ(close(bad), 0); // nobody else opens files meanwhile
	} else {
		// The fake has no descriptor table: it reports the error it is
		// told to, which is what lets the core's tests inject one.
		bad = 4242;
		expect = EIO;
		this->fake()->fail_when([bad](const request &r, std::size_t) { return r.fd == bad; }, EIO);
	}
	const request reqs[] = {
		rw_req(op_kind::read, bad, 0, &v, 1),
		rw_req(op_kind::write, bad, 0, &v, 1),
		range_req(op_kind::fsync, bad),
		range_req(op_kind::fdatasync, bad),
		range_req(op_kind::sync_range, bad, 0, 4096),
		range_req(op_kind::writeback, bad, 0, 4096),
		range_req(op_kind::fadvise_dontneed, bad, 0, 4096),
		range_req(op_kind::flush_drop, bad, 0, 4096),
	};
	for (const request &r : reqs) {
		auto e = this->b().execute(r);
		EXPECT_EQ(e.error, expect)
			<< op_name(r.op) << " via execute(): " << (e.error ? strerrorname_np(e.error) : "ok");
		EXPECT_EQ(e.bytes, 0u);
		auto s = this->sub(r);
		EXPECT_EQ(s.error, expect)
			<< op_name(r.op) << " via submit(): " << (s.error ? strerrorname_np(s.error) : "ok");
	}
}

// ---- concurrency --------------------------------------------------------

// 4 threads x 32 requests, each writing its own block, then reading all
// blocks back; every completion must run exactly once and data must match.
TYPED_TEST(backend_conformance, many_requests_from_several_threads)
{
	constexpr std::size_t threads = 4, per_thread = 32, block = 8192;
	constexpr std::size_t n = threads * per_thread;
	std::vector<std::vector<std::uint8_t>> data(n);
	for (std::size_t i = 0; i < n; ++i)
		data[i] = pattern(block, static_cast<unsigned>(i));
	std::vector<std::vector<std::uint8_t>> got(n, std::vector<std::uint8_t>(block, 0));
	std::vector<iovec> wv(n), rv(n);

	// Each pass's completions, kept until the backend is gone.
	std::array<std::optional<batch>, 2> passes;
	std::array<std::vector<batch::one>, 2> pass_comps;
	for (bool reading : {false, true}) {
		SCOPED_TRACE(reading ? "reads" : "writes");
		batch &done = passes[reading].emplace(n);
		std::vector<batch::one> &comps = pass_comps[reading];
		comps.resize(n);
		std::vector<std::thread> ts;
		for (std::size_t t = 0; t < threads; ++t) {
			ts.emplace_back([&, t] {
				for (std::size_t k = 0; k < per_thread; ++k) {
					// Interleave the threads' blocks in the file.
					const std::size_t i = k * threads + t;
					comps[i].owner = &done;
					comps[i].index = i;
					if (reading) {
						rv[i] = {got[i].data(), block};
						this->b().submit(rw_req(op_kind::read, this->fd(), i * block, &rv[i],
									1),
								 comps[i]);
					} else {
						wv[i] = {data[i].data(), block};
						this->b().submit(rw_req(op_kind::write, this->fd(), i * block, &wv[i],
									1),
								 comps[i]);
					}
				}
				// Stay alive until every completion is in: io_uring
				// cancels the requests of a thread that exits.
				(void)done.wait_total(n);
			});
		}
		for (auto &th : ts)
			th.join();
		ASSERT_TRUE(done.wait_total(n, 1ms));
	}
	for (std::size_t i = 0; i < n; ++i)
		ASSERT_EQ(got[i], data[i]) << "block " << i;
	if (auto *u = this->uring())
		std::printf("  io_uring: at most %zu requests were in flight at once\n", u->max_in_flight());
	this->stop_backend();
	for (bool reading : {false, true}) {
		SCOPED_TRACE(reading ? "reads" : "writes");
		const batch &done = *passes[reading];
		auto calls = done.calls();
		for (std::size_t i = 0; i < n; ++i) {
			ASSERT_EQ(calls[i], 1) << "request " << i;
			auto r = done.res(i);
			ASSERT_TRUE(r.ok()) << "request " << i << ": " << std::strerror(r.error);
			ASSERT_EQ(r.bytes, block) << "request " << i;
		}
	}
}

// The real test of "in flight": reads on empty pipes cannot complete until
// data arrives, so 64 of them from 4 threads must all be in the ring at
// once; then data is written and every read must get its own pipe's bytes.
// Only the asynchronous backends: the fake and sync backends complete
// inside submit(), so nothing of theirs is ever in flight.

} // namespace
