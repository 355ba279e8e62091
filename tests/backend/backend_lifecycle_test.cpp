// The backends under load and at their end: 64 requests in flight at once
// (asynchronous backends), destruction with requests in flight, completions
// calling back into the backend; and the io_uring factory on its own: bad
// depths, the sysctl, the in-flight bound, a full ring, io-wq workers.
#include "backend_conformance.hpp"

namespace {

using namespace dcache::test;

template <class Kind>
class async_backend_conformance : public backend_conformance<Kind> {
};
using async_backend_kinds = ::testing::Types<uring_kind>;
TYPED_TEST_SUITE(async_backend_conformance, async_backend_kinds, kind_names);

TYPED_TEST(async_backend_conformance, sixty_four_requests_in_flight_at_once)
{
	constexpr std::size_t threads = 4, per_thread = 16, n = threads * per_thread;
	std::vector<std::array<int, 2>> pipes(n);
	for (auto &p : pipes)
		ASSERT_EQ(pipe2(p.data(), O_CLOEXEC), 0) << std::strerror(errno);
	// Exactly one message per read: a short read is resubmitted for the
	// rest (regular-file semantics), so a read must ask for what comes.
	constexpr std::size_t msg_len = 32;
	auto message = [](std::size_t i) {
		std::array<char, msg_len> m{};
		std::snprintf(m.data(), m.size(), "pipe %zu says hello", i);
		return m;
	};
	std::vector<std::array<std::uint8_t, msg_len>> got(n);
	std::vector<iovec> v(n);
	batch done(n);
	std::vector<batch::one> comps(n);
	std::vector<std::thread> ts;
	for (std::size_t t = 0; t < threads; ++t) {
		ts.emplace_back([&, t] {
			for (std::size_t k = 0; k < per_thread; ++k) {
				const std::size_t i = t * per_thread + k;
				comps[i].owner = &done;
				comps[i].index = i;
				v[i] = {got[i].data(), got[i].size()};
				// offset -1: "current position", the only one a pipe has
				this->b().submit(rw_req(op_kind::read, pipes[i][0], ~0ULL, &v[i], 1), comps[i]);
			}
			(void)done.wait_total(n);
		});
	}
	auto *u = this->uring();
	const auto deadline = std::chrono::steady_clock::now() + 10s;
	while (u->in_flight() < n && std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(1ms);
	EXPECT_EQ(u->in_flight(), n);
	EXPECT_GE(u->max_in_flight(), n);
	EXPECT_EQ(done.calls(), std::vector<int>(n, 0)) << "a read completed before its pipe had data";
	for (std::size_t i = 0; i < n; ++i) {
		const auto msg = message(i);
		ASSERT_EQ(write(pipes[i][1], msg.data(), msg_len), static_cast<ssize_t>(msg_len));
	}
	EXPECT_TRUE(done.wait_total(n, 20s));
	for (auto &th : ts)
		th.join();
	EXPECT_EQ(u->in_flight(), 0u);
	this->stop_backend(); // every completion that will ever run has run
	auto calls = done.calls();
	for (std::size_t i = 0; i < n; ++i) {
		const auto msg = message(i);
		EXPECT_EQ(calls[i], 1) << "request " << i;
		auto r = done.res(i);
		EXPECT_TRUE(r.ok()) << "request " << i << ": " << std::strerror(r.error);
		EXPECT_EQ(r.bytes, msg_len);
		EXPECT_EQ(std::memcmp(got[i].data(), msg.data(), msg_len), 0) << "request " << i;
	}
	for (auto &p : pipes) {
		close(p[0]);
		close(p[1]);
	}
}

// Destroying the backend with requests in flight: every completion runs
// exactly once, the destructor returns in bounded time, nothing crashes.
// For io_uring the pipe reads can never finish on their own: they must be
// cancelled.
TYPED_TEST(backend_conformance, destruction_with_requests_in_flight)
{
	constexpr std::size_t files = 48, pipes_n = TypeParam::async ? 16 : 0;
	constexpr std::size_t n = files + pipes_n;
	auto data = pattern(files * 4096, 15);
	this->seed(0, data);
	std::vector<std::vector<std::uint8_t>> got(n, std::vector<std::uint8_t>(4096, 0));
	std::vector<iovec> v(n);
	std::vector<std::array<int, 2>> pipes(pipes_n);
	for (auto &p : pipes)
		ASSERT_EQ(pipe2(p.data(), O_CLOEXEC), 0);
	batch done(n);
	std::vector<batch::one> comps(n);
	for (std::size_t i = 0; i < n; ++i) {
		comps[i].owner = &done;
		comps[i].index = i;
		v[i] = {got[i].data(), 4096};
		const bool is_pipe = i >= files;
		this->b().submit(rw_req(op_kind::read, is_pipe ? pipes[i - files][0] : this->fd(),
					is_pipe ? ~0ULL : i * 4096, &v[i], 1),
				 comps[i]);
	}
	auto destroy = std::async(std::launch::async, [this] { this->_b.reset(); });
	ASSERT_EQ(destroy.wait_for(15s), std::future_status::ready) << "destructor hangs";
	auto calls = done.calls();
	for (std::size_t i = 0; i < n; ++i) {
		EXPECT_EQ(calls[i], 1) << "request " << i;
		auto r = done.res(i);
		if (i < files) {
			// Completed (full data) or cancelled before it ran.
			if (r.ok()) {
				EXPECT_EQ(r.bytes, 4096u);
				EXPECT_TRUE(std::equal(got[i].begin(), got[i].end(),
						       data.begin() + static_cast<std::ptrdiff_t>(i * 4096)));
			} else {
				EXPECT_EQ(r.error, ECANCELED) << "request " << i << ": " << strerrorname_np(r.error);
			}
		} else {
			EXPECT_TRUE(r.error == ECANCELED || r.error == EINTR)
				<< "pipe read " << i << ": " << (r.error ? strerrorname_np(r.error) : "ok");
		}
	}
	for (auto &p : pipes) {
		close(p[0]);
		close(p[1]);
	}
}

// A completion callback that calls back into the backend (the issue loop
// chaining its next segment) must neither deadlock nor recurse badly.
TYPED_TEST(backend_conformance, completion_may_call_back_into_the_backend)
{
	auto data = pattern(8192, 16);
	this->seed(0, data);
	struct chained final : completion {
		backend *b = nullptr;
		int fd = -1;
		std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(4096);
		counting_completion second;
		result inner{-1, 0};
		iovec v{};
		void complete(result) noexcept override
		{
			v = {buf.data(), buf.size()};
			// execute() from the callback, then submit() from it.
			inner = b->execute(rw_req(op_kind::read, fd, 4096, &v, 1));
			b->submit(range_req(op_kind::fdatasync, fd), second);
		}
	} first;
	first.b = &this->b();
	first.fd = this->fd();
	std::vector<std::uint8_t> head(4096);
	iovec hv{head.data(), head.size()};
	this->b().submit(rw_req(op_kind::read, this->fd(), 0, &hv, 1), first);
	ASSERT_TRUE(first.second.wait()) << "chained submit() never completed";
	EXPECT_EQ(first.second.calls(), 1);
	EXPECT_TRUE(first.second.res().ok());
	EXPECT_TRUE(first.inner.ok()) << std::strerror(first.inner.error);
	EXPECT_EQ(first.inner.bytes, 4096u);
	EXPECT_TRUE(std::equal(first.buf.begin(), first.buf.end(), data.begin() + 4096));
	EXPECT_TRUE(std::equal(head.begin(), head.end(), data.begin()));
}

// ---- the io_uring factory on its own ------------------------------------

TEST(uring_factory, rejects_bad_depth_with_a_reason)
{
	for (unsigned depth : {0U, uring_backend::k_max_depth + 1}) {
		auto r = make_uring_backend(depth);
		EXPECT_EQ(r.error, EINVAL);
		EXPECT_FALSE(r.backend);
		EXPECT_NE(r.why.find("queue depth"), std::string::npos) << r.why;
		EXPECT_NE(r.why.find(std::to_string(depth)), std::string::npos) << r.why;
	}
}

TEST(uring_factory, creation_follows_the_sysctl)
{
	const int sysctl = io_uring_disabled_sysctl();
	auto r = make_uring_backend(8);
	std::printf("  kernel.io_uring_disabled = %d; make_uring_backend(8): %s\n", sysctl,
		    r.error ? r.why.c_str() : "ok");
	if (sysctl == 2) {
		EXPECT_EQ(r.error, EPERM);
		EXPECT_FALSE(r.why.empty());
		return;
	}
	if (r.error)
		GTEST_SKIP() << "io_uring unavailable: " << r.why;
	ASSERT_TRUE(r.backend);
	EXPECT_EQ(r.backend->depth(), 8u);
	EXPECT_STREQ(r.backend->name(), "io_uring");
	EXPECT_EQ(r.backend->in_flight(), 0u);
}

// Back-pressure: a ring of depth 2 never holds more than 2 requests, even
// when 4 threads submit 64 requests at it.
TEST(uring_factory, depth_bounds_requests_in_flight)
{
	auto r = make_uring_backend(2);
	if (r.error)
		GTEST_SKIP() << "io_uring unavailable: " << r.why;
	temp_file f("/tmp");
	ASSERT_GE(f.fd(), 0);
	auto data = pattern(64 * 4096, 17);
	ASSERT_EQ(pwrite(f.fd(), data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
	std::vector<std::vector<std::uint8_t>> got(64, std::vector<std::uint8_t>(4096));
	std::vector<iovec> v(64);
	batch done(64);
	std::vector<batch::one> comps(64);
	std::vector<std::thread> ts;
	for (std::size_t t = 0; t < 4; ++t)
		ts.emplace_back([&, t] {
			for (std::size_t i = t; i < 64; i += 4) {
				comps[i].owner = &done;
				comps[i].index = i;
				v[i] = {got[i].data(), 4096};
				r.backend->submit(rw_req(op_kind::read, f.fd(), i * 4096, &v[i], 1), comps[i]);
			}
			(void)done.wait_total(64);
		});
	for (auto &th : ts)
		th.join();
	EXPECT_LE(r.backend->max_in_flight(), 2u);
	for (std::size_t i = 0; i < 64; ++i)
		EXPECT_TRUE(
			std::equal(got[i].begin(), got[i].end(), data.begin() + static_cast<std::ptrdiff_t>(i * 4096)))
			<< "request " << i;
}

// A full ring (the kernel refusing its entries while the completion queue
// overflows) fails nothing: a READ or WRITE step and a side task (write-back
// and drop) alike wait in the backlog, in order, and go out once there is
// room, each completed once, with its bytes.
TEST(uring_factory, a_full_ring_delays_requests_and_side_work_alike)
{
	auto r = make_uring_backend(8);
	if (r.error)
		GTEST_SKIP() << "io_uring unavailable: " << r.why;
	auto *u = dynamic_cast<uring_backend *>(r.backend.get());
	ASSERT_NE(u, nullptr);
	temp_file f("/tmp");
	ASSERT_GE(f.fd(), 0);
	const auto data = pattern(4 * 4096, 23);
	std::vector<std::uint8_t> back(4 * 4096);
	const iovec wv{const_cast<std::uint8_t *>(data.data()), data.size()};
	const iovec rv{back.data(), back.size()};
	batch done(3);
	std::vector<batch::one> comps(3);
	for (std::size_t i = 0; i < 3; ++i)
		comps[i] = {}, comps[i].owner = &done, comps[i].index = i;
	u->ring_full_for_test(5); // the WRITE, then the ones behind it, wait
	r.backend->submit(rw_req(op_kind::write, f.fd(), 0, &wv, 1), comps[0]);
	r.backend->submit(range_req(op_kind::flush_drop, f.fd(), 0, data.size()), comps[1]);
	ASSERT_TRUE(done.wait_total(2));
	r.backend->submit(rw_req(op_kind::read, f.fd(), 0, &rv, 1), comps[2]);
	ASSERT_TRUE(done.wait_total(3));
	EXPECT_EQ(done.calls(), (std::vector<int>{1, 1, 1}));
	EXPECT_EQ(done.res(0).error, 0);
	EXPECT_EQ(done.res(0).bytes, data.size());
	EXPECT_EQ(done.res(1).error, 0) << "the side task";
	EXPECT_EQ(done.res(2).error, 0);
	EXPECT_EQ(done.res(2).bytes, data.size());
	EXPECT_EQ(back, data);
	EXPECT_GE(u->ring_full_waits(), 1u);
}

// io-wq workers of this process (threads named iou-wrk-PID).
std::size_t iowq_threads()
{
	std::size_t n = 0;
	for (const auto &task : std::filesystem::directory_iterator("/proc/self/task")) {
		std::ifstream comm(task.path() / "comm");
		std::string name;
		if (std::getline(comm, name) && name.rfind("iou-wrk-", 0) == 0)
			++n;
	}
	return n;
}

// Every request goes to the kernel from the reaper, whichever thread
// submits it, so IO_Workers_Max bounds all of the ring's io-wq workers.
// 8 threads submit 64 fsyncs of dirty files (io_uring always hands an
// fsync to io-wq).  Were they submitted from those threads, each would get
// an io-wq of its own, and at least one worker in it: 8 or more.
TEST(uring_factory, io_workers_bound_every_submitter)
{
	auto r = make_uring_backend(32);
	if (r.error)
		GTEST_SKIP() << "io_uring unavailable: " << r.why;
	const int err = r.backend->set_io_workers(2);
	if (err == EINVAL)
		GTEST_SKIP() << "IORING_REGISTER_IOWQ_MAX_WORKERS refused (EINVAL): kernel < 5.15";
	ASSERT_EQ(err, 0) << std::strerror(err);
	EXPECT_EQ(r.backend->io_workers(), 2u);
	const std::size_t before = iowq_threads();

	constexpr std::size_t k_threads = 8, k_each = 8;
	std::vector<std::unique_ptr<temp_file>> files;
	auto data = pattern(256 * 1024, 3);
	for (std::size_t i = 0; i < k_threads * k_each; ++i) {
		files.push_back(std::make_unique<temp_file>("/tmp"));
		ASSERT_GE(files.back()->fd(), 0);
	}
	batch done(k_threads * k_each);
	std::vector<batch::one> comps(k_threads * k_each);
	std::atomic<bool> sampling{true};
	std::size_t peak = 0;
	std::thread sampler([&] {
		while (sampling.load())
			peak = std::max(peak, iowq_threads());
	});
	std::vector<std::thread> ts;
	for (std::size_t t = 0; t < k_threads; ++t)
		ts.emplace_back([&, t] {
			for (std::size_t i = t * k_each; i < (t + 1) * k_each; ++i) {
				ASSERT_EQ(pwrite(files[i]->fd(), data.data(), data.size(), 0),
					  static_cast<ssize_t>(data.size()));
				comps[i].owner = &done;
				comps[i].index = i;
				request q;
				q.op = op_kind::fsync;
				q.fd = files[i]->fd();
				r.backend->submit(q, comps[i]);
			}
			(void)done.wait_total(k_threads * k_each);
		});
	for (auto &th : ts)
		th.join();
	sampling.store(false);
	sampler.join();
	peak = std::max(peak, iowq_threads());
	std::printf("  io-wq workers: %zu before, %zu at the peak (bound 2)\n", before, peak);
	EXPECT_GE(peak, before + 1) << "no fsync reached io-wq: the test could not tell";
	EXPECT_LE(peak, before + 2);
	for (std::size_t i = 0; i < k_threads * k_each; ++i)
		EXPECT_TRUE(done.res(i).ok()) << "fsync " << i << ": " << std::strerror(done.res(i).error);
}

} // namespace
