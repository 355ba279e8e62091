// The asynchronous data path over the real io_uring backend and its
// choice: the io_uring -> sync fallback, many requests in flight from
// several threads, WRITEs without a personality, overlapping direct and
// buffered WRITEs; and the settings of the asynchronous path.
#include "async_requests.hpp"

#include "dcache_io/rpc_buffers.h"

#include <liburing.h>

namespace {

using namespace dcache::test;

// ---- backend selection ------------------------------------------------------------

dcache::io::uring_open_result refuse_eperm(unsigned)
{
	dcache::io::uring_open_result r;
	r.error = EPERM;
	r.why = "kernel.io_uring_disabled = 2";
	return r;
}

TEST(backend_choice, io_uring_refused_falls_back_to_sync_logged_once_and_counted)
{
	clear_log();
	dcache_set_log(capture_log);
	dcache::io::set_uring_factory(&refuse_eperm);
	const dcache_settings s = dcache_settings_default();
	ASSERT_EQ(s.io_backend, DCACHE_IO_BACKEND_IO_URING);
	dcache_export *exp = dcache_export_new(&s, "export 5 /fallback");
	dcache::io::set_uring_factory(nullptr);
	ASSERT_NE(exp, nullptr);
	EXPECT_STREQ(dcache_export_backend_name(exp), "sync");
	EXPECT_EQ(stat_of(exp, "fallback_no_io_uring"), 1u);
	EXPECT_EQ(stat_of(exp, "backend_io_uring"), 0u);
	std::size_t lines = 0;
	for (const auto &l : log_lines())
		if (l.find("io_uring") != std::string::npos) {
			++lines;
			EXPECT_NE(l.find("export 5 /fallback"), std::string::npos) << l;
			EXPECT_NE(l.find("io_uring_disabled"), std::string::npos) << l;
		}
	EXPECT_EQ(lines, 1u);
	// The running backend stays; a changed IO_Backend is only logged.
	dcache_settings t = s;
	t.io_backend = DCACHE_IO_BACKEND_SYNC;
	dcache_export_update(exp, &t);
	EXPECT_STREQ(dcache_export_backend_name(exp), "sync");
	EXPECT_EQ(dcache_export_settings(exp).io_backend, DCACHE_IO_BACKEND_SYNC);
	bool logged = false;
	for (const auto &l : log_lines())
		logged |= l.find("next restart") != std::string::npos;
	EXPECT_TRUE(logged);
	dcache_export_put(exp);
	dcache_set_log(nullptr);
}

TEST(backend_choice, sync_by_setting_and_io_uring_by_default)
{
	dcache_settings s = dcache_settings_default();
	s.io_backend = DCACHE_IO_BACKEND_SYNC;
	dcache_export *a = dcache_export_new(&s, "sync one");
	ASSERT_NE(a, nullptr);
	EXPECT_STREQ(dcache_export_backend_name(a), "sync");
	EXPECT_EQ(stat_of(a, "fallback_no_io_uring"), 0u);
	dcache_export_put(a);

	s.io_backend = DCACHE_IO_BACKEND_IO_URING;
	dcache_export *b = dcache_export_new(&s, "uring one");
	ASSERT_NE(b, nullptr);
	if (stat_of(b, "fallback_no_io_uring") != 0) {
		dcache_export_put(b);
		GTEST_SKIP() << "io_uring unavailable here (fell back to sync)";
	}
	EXPECT_STREQ(dcache_export_backend_name(b), "io_uring");
	EXPECT_EQ(stat_of(b, "backend_io_uring"), 1u);
	dcache_stats_reset(b);
	EXPECT_EQ(stat_of(b, "backend_io_uring"), 1u) << "a gauge survives a stats reset";
	dcache_export_put(b);
}

// ---- the real io_uring backend ---------------------------------------------------

TEST(uring_requests, many_requests_in_flight_from_several_threads_verified)
{
	char path[] = "/var/tmp/dcache_async_XXXXXX";
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0) << std::strerror(errno);
	unlink(path);

	dcache_settings s = dcache_settings_default();
	s.io_queue_depth = 256;
	s.io_blocking_max = 0; // every device-bound step through io_uring
	dcache_export *exp = dcache_export_new(&s, "uring e2e");
	ASSERT_NE(exp, nullptr);
	if (std::strcmp(dcache_export_backend_name(exp), "io_uring") != 0) {
		dcache_export_put(exp);
		close(fd);
		GTEST_SKIP() << "io_uring unavailable here";
	}
	dcache_file *file = dcache_file_new(exp);

	constexpr int k_threads = 4, k_per_thread = 32, k_total = k_threads * k_per_thread;
	constexpr std::size_t k_block = 8192;
	std::vector<std::vector<std::uint8_t>> blocks(k_total);
	for (int i = 0; i < k_total; ++i)
		blocks[i] = pattern(k_block, static_cast<unsigned>(i + 100));

	struct shared_state {
		std::mutex m;
		std::condition_variable cv;
		int started = 0;
		int completed = 0;
		int errors = 0;
		std::size_t max_outstanding = 0;
		int done_calls_per_req[k_total] = {};
	} st;
	struct req_ctx {
		shared_state *st;
		int index;
	};
	std::vector<req_ctx> ctxs(k_total);
	const auto on_done = [](void *p, dcache_io_result r) {
		auto *c = static_cast<req_ctx *>(p);
		std::unique_lock lock(c->st->m);
		// The first completion holds the reaper until every request has
		// been started: all of them are in flight at once.
		c->st->cv.wait_for(lock, std::chrono::seconds(10), [&] { return c->st->started == k_total; });
		if (r.error != 0 || r.bytes != k_block)
			++c->st->errors;
		++c->st->done_calls_per_req[c->index];
		++c->st->completed;
		c->st->cv.notify_all();
	};

	auto run_phase = [&](bool write, std::vector<std::vector<std::uint8_t>> &bufs) {
		{
			std::lock_guard lock(st.m);
			st.started = st.completed = st.errors = 0;
			st.max_outstanding = 0;
			std::fill(std::begin(st.done_calls_per_req), std::end(st.done_calls_per_req), 0);
		}
		std::vector<std::thread> threads;
		for (int t = 0; t < k_threads; ++t)
			threads.emplace_back([&, t] {
				for (int k = 0; k < k_per_thread; ++k) {
					const int i = t * k_per_thread + k;
					ctxs[i] = {&st, i};
					struct iovec v {
						bufs[i].data(), k_block
					};
					// Stable WRITEs: the cached write runs in the
					// caller, the fsync goes to io_uring.
					const dcache_io io{
						fd, static_cast<std::uint64_t>(i) * k_block, &v, 1, write, nullptr};
					dcache_io_result inl{};
					const bool done_inline =
						write ? dcache_write_start(exp, file, &io, on_done, &ctxs[i], &inl)
						      : dcache_read_start(exp, file, &io, on_done, &ctxs[i], &inl);
					std::lock_guard lock(st.m);
					++st.started;
					if (done_inline) {
						++st.completed;
						++st.done_calls_per_req[i];
						if (inl.error != 0 || inl.bytes != k_block)
							++st.errors;
					}
					st.max_outstanding = std::max<std::size_t>(
						st.max_outstanding,
						static_cast<std::size_t>(st.started - st.completed));
					st.cv.notify_all();
				}
				// io_uring cancels a thread's requests when it exits:
				// stay until all have completed.
				std::unique_lock lock(st.m);
				st.cv.wait(lock, [&] { return st.completed == k_total; });
			});
		for (auto &th : threads)
			th.join();
		std::lock_guard lock(st.m);
		EXPECT_EQ(st.errors, 0);
		for (int i = 0; i < k_total; ++i)
			EXPECT_EQ(st.done_calls_per_req[i], 1)
				<< "request " << i << " completed " << st.done_calls_per_req[i] << " times";
	};

	run_phase(true, blocks);
	{
		std::lock_guard lock(st.m);
		EXPECT_GE(st.max_outstanding, 64u) << "a stable WRITE's fsync is always deferred on io_uring";
	}
	EXPECT_EQ(stat_of(exp, "steps_in_caller"), static_cast<std::uint64_t>(k_total))
		<< "each WRITE's cached piece ran in its caller";
	EXPECT_EQ(stat_of(exp, "syncs_fsync"), static_cast<std::uint64_t>(k_total));
	// Verify with plain preads.
	for (int i = 0; i < k_total; ++i) {
		std::vector<std::uint8_t> got(k_block);
		ASSERT_EQ(pread(fd, got.data(), k_block, static_cast<off_t>(i) * k_block),
			  static_cast<ssize_t>(k_block));
		ASSERT_EQ(got, blocks[i]) << "block " << i;
	}
	// Read back through the core (fast path hits or deferred reads).
	std::vector<std::vector<std::uint8_t>> back(k_total, std::vector<std::uint8_t>(k_block));
	run_phase(false, back);
	for (int i = 0; i < k_total; ++i)
		ASSERT_EQ(back[i], blocks[i]) << "block " << i;
	EXPECT_EQ(stat_of(exp, "reads"), static_cast<std::uint64_t>(k_total));
	EXPECT_EQ(stat_of(exp, "read_nowait_hits") + stat_of(exp, "read_nowait_partial") +
			  stat_of(exp, "read_nowait_misses"),
		  static_cast<std::uint64_t>(k_total));

	// Blocking API over io_uring: start + wait.
	std::vector<std::uint8_t> one(k_block);
	struct iovec v {
		one.data(), k_block
	};
	const dcache_io io{fd, 5 * k_block, &v, 1, false, nullptr};
	const dcache_io_result r = dcache_read(exp, file, &io);
	EXPECT_EQ(r.bytes, k_block);
	EXPECT_EQ(one, blocks[5]);

	dcache_file_free(file);
	dcache_export_put(exp);
	close(fd);
}

} // namespace

namespace {

TEST(async_requests_settings, io_backend_queue_depth_and_fast_path_parse_and_reject)
{
	dcache_settings s{};
	char why[256];
	dcache_settings_text t{};
	ASSERT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), 0);
	EXPECT_EQ(s.io_backend, DCACHE_IO_BACKEND_IO_URING);
	EXPECT_EQ(s.io_queue_depth, 32u);
	EXPECT_TRUE(s.cached_read_fast_path);
	t.io_backend = "Sync";
	t.io_queue_depth = "4096";
	t.cached_read_fast_path = "off";
	ASSERT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), 0) << why;
	EXPECT_EQ(s.io_backend, DCACHE_IO_BACKEND_SYNC);
	EXPECT_EQ(s.io_queue_depth, 4096u);
	EXPECT_FALSE(s.cached_read_fast_path);
	t.io_backend = "aio";
	EXPECT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), EINVAL);
	EXPECT_NE(std::string(why).find("IO_Backend = \"aio\""), std::string::npos) << why;
	t.io_backend = nullptr;
	for (const char *bad : {"0", "4097", "-1", "64k"}) {
		t.io_queue_depth = bad;
		EXPECT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), EINVAL) << bad;
		EXPECT_NE(std::string(why).find("IO_Queue_Depth"), std::string::npos) << why;
	}
	t.io_queue_depth = nullptr;
	t.cached_read_fast_path = "maybe";
	EXPECT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), EINVAL);
	EXPECT_NE(std::string(why).find("Cached_Read_Fast_Path"), std::string::npos) << why;
}

} // namespace

namespace {

// A real io_uring backend that cannot register personalities (as when the
// kernel refuses: ENOMEM, or too many of them).
dcache::io::uring_open_result uring_without_personalities(unsigned depth)
{
	dcache::io::uring_open_result r = dcache::io::make_uring_backend(depth);
	if (r.error == 0)
		r.backend->fail_capture_for_test(EBUSY);
	return r;
}

} // namespace

TEST(uring_requests, write_without_personality_runs_on_the_caller_and_is_counted)
{
	char path[] = "/var/tmp/dcache_personality_XXXXXX";
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0) << std::strerror(errno);
	unlink(path);
	clear_log();
	dcache_set_log(capture_log);
	dcache::io::set_uring_factory(&uring_without_personalities);
	dcache_settings s = dcache_settings_default();
	s.io_blocking_max = 0; // the fsync is submitted, with credentials
	dcache_export *exp = dcache_export_new(&s, "export 6 /nopersonality");
	dcache::io::set_uring_factory(nullptr);
	ASSERT_NE(exp, nullptr);
	if (std::strcmp(dcache_export_backend_name(exp), "io_uring") != 0) {
		dcache_export_put(exp);
		close(fd);
		dcache_set_log(nullptr);
		GTEST_SKIP() << "io_uring unavailable here";
	}
	dcache_file *file = dcache_file_new(exp);
	for (unsigned i = 0; i < 3; ++i) {
		const std::vector<std::uint8_t> data = pattern(10000, 40 + i);
		struct iovec v {
			const_cast<std::uint8_t *>(data.data()), data.size()
		};
		// Stable: the fsync is the step that would be submitted.
		const dcache_io io{fd, i * 10000ull, &v, 1, true, nullptr};
		const dcache_io_result r = dcache_write(exp, file, &io);
		ASSERT_EQ(r.error, 0);
		ASSERT_EQ(r.bytes, data.size());
		std::vector<std::uint8_t> back(data.size());
		ASSERT_EQ(pread(fd, back.data(), back.size(), static_cast<off_t>(i * 10000)),
			  static_cast<ssize_t>(back.size()));
		EXPECT_EQ(back, data);
	}
	EXPECT_EQ(stat_of(exp, "fallback_no_personality"), 3u);
	std::size_t said = 0;
	for (const std::string &l : log_lines())
		said += l.find("personalit") != std::string::npos;
	EXPECT_EQ(said, 1u) << "one log line per export, whatever the count";
	dcache_file_free(file);
	dcache_export_put(exp);
	dcache_set_log(nullptr);
	close(fd);
}

// Direct and buffered WRITEs of the same pages, in flight together over
// io_uring.  An O_DIRECT write drops the cached pages it covers when it
// completes; if a buffered write dirtied one of them meanwhile, the kernel
// cannot drop it, logs "Page cache invalidation failure on direct I/O" and
// records EIO on the file, so the next fsync (a COMMIT) fails although
// nothing was lost.  The core must keep the two kinds off each other's
// pages: every fsync succeeds, and the cache agrees with the disk.
TEST(uring_requests, overlapping_direct_and_buffered_writes_keep_fsync_clean)
{
	// DCACHE_TEST_DIR: run it on another filesystem (XFS, say).
	const char *dir = std::getenv("DCACHE_TEST_DIR");
	std::string tmpl = std::string(dir != nullptr ? dir : "/var/tmp") + "/dcache_fence_XXXXXX";
	char *path = tmpl.data();
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0) << std::strerror(errno);
	const int dfd = open(path, O_RDONLY | O_DIRECT);
	unlink(path);
	if (dfd < 0) {
		close(fd);
		GTEST_SKIP() << "no O_DIRECT on /var/tmp: " << std::strerror(errno);
	}
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.direct_misaligned_memory = DCACHE_MEM_MISALIGNED_BUFFERED;
	s.io_queue_depth = 128;
	s.io_blocking_max = 0; // direct pieces in flight on io_uring
	dcache_export *exp = dcache_export_new(&s, "export 8 /fence");
	ASSERT_NE(exp, nullptr);
	if (std::strcmp(dcache_export_backend_name(exp), "io_uring") != 0) {
		dcache_export_put(exp);
		close(fd);
		close(dfd);
		GTEST_SKIP() << "io_uring unavailable here";
	}
	dcache_file *file = dcache_file_new(exp);

	// 8 pages, 4 threads, each WRITE one whole page: page-aligned memory
	// goes direct, memory one byte off goes buffered (the setting above).
	constexpr std::size_t k_page = 4096, k_pages = 8;
	constexpr int k_threads = 8, k_rounds = 400;
	ASSERT_EQ(ftruncate(fd, k_pages * k_page), 0);
	std::atomic<int> failures{0}, fsync_errors{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < k_threads; ++t)
		threads.emplace_back([&, t] {
			auto *raw = static_cast<std::uint8_t *>(std::aligned_alloc(k_page, 2 * k_page));
			for (int i = 0; i < k_rounds; ++i) {
				const std::size_t shift = (i + t) % 2;
				std::memset(raw + shift, 1 + t * 7 + i % 5, k_page);
				struct iovec v {
					raw + shift, k_page
				};
				const dcache_io io{fd, ((i * 5 + t * 3) % k_pages) * k_page, &v, 1, false, nullptr};
				const dcache_io_result r = dcache_write(exp, file, &io);
				if (r.error != 0 || r.bytes != k_page)
					failures.fetch_add(1);
				if (i % 50 == 49 && fsync(fd) != 0)
					fsync_errors.fetch_add(1);
			}
			std::free(raw);
		});
	for (auto &th : threads)
		th.join();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_EQ(fsync_errors.load(), 0) << "a direct write collided with a buffered one";
	EXPECT_EQ(fsync(fd), 0) << std::strerror(errno);
	EXPECT_GT(stat_of(exp, "write_direct"), 0u);
	EXPECT_GT(stat_of(exp, "write_not_direct_mem_misaligned"), 0u);
	// What the page cache serves is what the disk holds.
	for (std::size_t p = 0; p < k_pages; ++p) {
		std::vector<std::uint8_t> cached(k_page);
		auto *disk = static_cast<std::uint8_t *>(std::aligned_alloc(k_page, k_page));
		ASSERT_EQ(pread(fd, cached.data(), k_page, static_cast<off_t>(p * k_page)),
			  static_cast<ssize_t>(k_page));
		ASSERT_EQ(pread(dfd, disk, k_page, static_cast<off_t>(p * k_page)), static_cast<ssize_t>(k_page));
		EXPECT_EQ(std::memcmp(cached.data(), disk, k_page), 0) << "page " << p << ": the cache is stale";
		std::free(disk);
	}
	dcache_file_free(file);
	dcache_export_put(exp);
	close(fd);
	close(dfd);
}

namespace {

// An unlinked temporary file in $DCACHE_TEST_DIR (else /var/tmp) that
// O_DIRECT can open: its descriptor; -1 if none could be made, -2 if the
// filesystem refuses O_DIRECT (why says which).
int direct_temp_file(const char *name, std::string &why)
{
	const char *dir = std::getenv("DCACHE_TEST_DIR");
	std::string tmpl = std::string(dir != nullptr ? dir : "/var/tmp") + "/" + name + "_XXXXXX";
	const int fd = mkstemp(tmpl.data());
	if (fd < 0) {
		why = "mkstemp " + tmpl + ": " + std::strerror(errno);
		return -1;
	}
	const int dfd = open(tmpl.c_str(), O_RDONLY | O_DIRECT);
	const int err = errno;
	unlink(tmpl.c_str());
	if (dfd < 0) {
		close(fd);
		why = "no O_DIRECT on " + tmpl + ": " + std::strerror(err);
		return -2;
	}
	close(dfd);
	return fd;
}

// Why this kernel or process cannot register a buffer with a ring's
// sparse table (kernel before 5.19, RLIMIT_MEMLOCK); "" when it can.
std::string kernel_refuses_registered_buffers()
{
	io_uring ring{};
	if (io_uring_queue_init(4, &ring, 0) != 0)
		return "no io_uring here";
	std::string why;
	void *buf = std::aligned_alloc(4096, 1 << 20);
	const iovec v{buf, std::size_t{1} << 20};
	if (const int rc = io_uring_register_buffers_sparse(&ring, 1); rc < 0)
		why = std::string("no sparse buffer table: ") + std::strerror(-rc);
	else if (const int up = io_uring_register_buffers_update_tag(&ring, 0, &v, nullptr, 1); up < 0)
		why = std::string("registering a 1 MiB buffer: ") + std::strerror(-up);
	io_uring_queue_exit(&ring);
	std::free(buf);
	return why;
}

// An export direct both ways whose every direct step goes through the ring.
dcache_export *direct_ring_export(const char *name)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.io_blocking_max = 0;
	return dcache_export_new(&s, name);
}

// A direct WRITE of len bytes of fill from payload (a receive buffer's),
// then a READ of them back into rbuf, through dcache_write and dcache_read.
void write_then_read_back(dcache_export *exp, dcache_file *file, int fd, std::uint8_t *payload, std::uint8_t *rbuf,
			  std::size_t len, std::uint8_t fill)
{
	std::memset(payload, fill, len);
	struct iovec wv {
		payload, len
	};
	const dcache_io w{fd, 0, &wv, 1, false, nullptr};
	const dcache_io_result wr = dcache_write(exp, file, &w);
	ASSERT_EQ(wr.error, 0);
	ASSERT_EQ(wr.bytes, len);
	struct iovec rv {
		rbuf, len
	};
	const dcache_io r{fd, 0, &rv, 1, false, nullptr};
	const dcache_io_result rr = dcache_read(exp, file, &r);
	ASSERT_EQ(rr.error, 0);
	ASSERT_EQ(rr.bytes, len);
	EXPECT_EQ(rbuf[0], fill);
	EXPECT_EQ(rbuf[len - 1], fill);
}

} // namespace

// Bounce buffers over the real ring: a direct WRITE of a payload the device
// cannot take where it lies, and a READ into such memory, each copied once
// through a buffer the ring registered, issued as WRITE_FIXED/READ_FIXED
// (no page pinning per request), and the same buffer reused request after
// request (no page faults, no zeroing).
TEST(uring_requests, bounce_buffers_are_registered_and_reused)
{
	std::string why;
	const int fd = direct_temp_file("dcache_fixed", why);
	if (fd == -2)
		GTEST_SKIP() << why;
	ASSERT_GE(fd, 0) << why;
	dcache_export *exp = direct_ring_export("export 9 /fixed");
	ASSERT_NE(exp, nullptr);
	if (std::strcmp(dcache_export_backend_name(exp), "io_uring") != 0) {
		dcache_export_put(exp);
		close(fd);
		GTEST_SKIP() << "io_uring unavailable here";
	}
	dcache_file *file = dcache_file_new(exp);
	constexpr std::size_t k_len = std::size_t{256} << 10;
	constexpr int k_rounds = 8;
	auto *raw = static_cast<std::uint8_t *>(std::aligned_alloc(4096, k_len + 4096));
	std::uint8_t *misaligned = raw + 1; // no device takes that
	for (int i = 0; i < k_rounds; ++i) {
		std::memset(misaligned, 'a' + i, k_len);
		struct iovec v {
			misaligned, k_len
		};
		const dcache_io w{fd, i * k_len, &v, 1, false, nullptr};
		const dcache_io_result wr = dcache_write(exp, file, &w);
		ASSERT_EQ(wr.error, 0);
		ASSERT_EQ(wr.bytes, k_len);
	}
	for (int i = 0; i < k_rounds; ++i) {
		std::memset(misaligned, 0, k_len);
		struct iovec v {
			misaligned, k_len
		};
		const dcache_io r{fd, i * k_len, &v, 1, false, nullptr};
		const dcache_io_result rr = dcache_read(exp, file, &r);
		ASSERT_EQ(rr.error, 0);
		ASSERT_EQ(rr.bytes, k_len);
		EXPECT_EQ(misaligned[0], 'a' + i);
		EXPECT_EQ(misaligned[k_len - 1], 'a' + i);
	}
	std::free(raw);
	const std::uint64_t steps = 2 * k_rounds;
	EXPECT_EQ(stat_of(exp, "write_bounced_bytes"), k_rounds * k_len);
	EXPECT_EQ(stat_of(exp, "read_bounced_bytes"), k_rounds * k_len);
	EXPECT_EQ(stat_of(exp, "bounce_buffers_reused") + stat_of(exp, "bounce_buffers_mapped"), steps);
	// One request at a time: the first may map a buffer (or find one an
	// earlier export of the ring left), every other reuses it.
	EXPECT_LE(stat_of(exp, "bounce_buffers_mapped"), 1u);
	EXPECT_GE(stat_of(exp, "bounce_buffers_reused"), steps - 1);
	const std::uint64_t fixed = stat_of(exp, "bounce_steps_fixed");
	dcache_file_free(file);
	dcache_export_put(exp);
	close(fd);
	if (fixed == 0)
		GTEST_SKIP() << "the ring registers no buffers here (kernel before 5.19, or RLIMIT_MEMLOCK)";
	EXPECT_EQ(fixed, steps) << "every bounced step issued on its registered buffer";
}

// Ganesha 6.x's own buffers registered with the ring (rpc_buffers.h): a
// direct WRITE from a receive buffer's payload and a direct READ into a
// READ buffer of the pool, whether made before the ring (registered when it
// attaches) or after, are issued as WRITE_FIXED/READ_FIXED, uncopied; a
// buffer of anyone else's is not.
TEST(uring_requests, ganesha_buffers_registered_with_the_ring_are_issued_fixed)
{
	std::string why;
	const int fd = direct_temp_file("dcache_rpcfixed", why);
	if (fd == -2)
		GTEST_SKIP() << why;
	ASSERT_GE(fd, 0) << why;
	namespace io = dcache::io;
	(void)io::rpc_buffer_trim();
	io::rpc_buffers_register(true);
	constexpr std::size_t mib = std::size_t{1} << 20, frag = mib + 172;
	auto *recv = static_cast<std::uint8_t *>(io::rpc_buffer_get(frag, io::rpc_place::end)); // before the ring
	ASSERT_NE(recv, nullptr);
	dcache_export *exp = direct_ring_export("export 10 /rpcfixed");
	ASSERT_NE(exp, nullptr);
	const auto done = [&] {
		io::rpc_buffers_register(false);
		dcache_export_put(exp);
		close(fd);
	};
	if (std::strcmp(dcache_export_backend_name(exp), "io_uring") != 0) {
		io::rpc_buffer_put(recv);
		done();
		GTEST_SKIP() << "io_uring unavailable here";
	}
	auto *rbuf = static_cast<std::uint8_t *>(io::rpc_buffer_get(mib, io::rpc_place::read)); // after
	ASSERT_NE(rbuf, nullptr);
	dcache_file *file = dcache_file_new(exp);
	write_then_read_back(exp, file, fd, recv + frag - mib, rbuf, mib, 'w');
	const std::uint64_t fixed = stat_of(exp, "rpc_steps_fixed");
	// Anyone else's page-aligned buffer: direct and uncopied, but pinned.
	auto *other = static_cast<std::uint8_t *>(std::aligned_alloc(4096, mib));
	struct iovec ov {
		other, mib
	};
	const dcache_io o{fd, 0, &ov, 1, false, nullptr};
	EXPECT_EQ(dcache_read(exp, file, &o).bytes, mib);
	EXPECT_EQ(other[mib / 2], 'w');
	std::free(other);
	EXPECT_EQ(stat_of(exp, "rpc_steps_fixed"), fixed) << "not one of the pool's";
	EXPECT_EQ(stat_of(exp, "write_unbounced_bytes"), mib);
	EXPECT_EQ(stat_of(exp, "read_unbounced_bytes"), 2 * mib);
	EXPECT_EQ(stat_of(exp, "bounce_steps_fixed"), 0u);
	dcache_file_free(file);
	io::rpc_buffer_put(recv);
	io::rpc_buffer_put(rbuf);
	(void)io::rpc_buffer_trim();
	done();
	if (const std::string refused = kernel_refuses_registered_buffers(); !refused.empty())
		GTEST_SKIP() << refused;
	EXPECT_EQ(fixed, 2u) << "the WRITE from the receive buffer, the READ into the pool's";
}

// With the default IO_Blocking_Max, a direct READ into one of the pool's
// registered READ buffers still goes through the ring, issued fixed (it
// pins no pages there); a direct WRITE from a receive buffer runs in a
// blocking slot as a plain syscall.
TEST(uring_requests, a_read_into_a_registered_buffer_goes_through_the_ring)
{
	std::string why;
	const int fd = direct_temp_file("dcache_rpcring", why);
	if (fd == -2)
		GTEST_SKIP() << why;
	ASSERT_GE(fd, 0) << why;
	namespace io = dcache::io;
	(void)io::rpc_buffer_trim();
	io::rpc_buffers_register(true);
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT;
	ASSERT_GT(s.io_blocking_max, 0u);
	dcache_export *exp = dcache_export_new(&s, "export 11 /rpcring");
	ASSERT_NE(exp, nullptr);
	const auto done = [&] {
		(void)io::rpc_buffer_trim();
		io::rpc_buffers_register(false);
		dcache_export_put(exp);
		close(fd);
	};
	if (std::strcmp(dcache_export_backend_name(exp), "io_uring") != 0) {
		done();
		GTEST_SKIP() << "io_uring unavailable here";
	}
	constexpr std::size_t mib = std::size_t{1} << 20, frag = mib + 172;
	auto *recv = static_cast<std::uint8_t *>(io::rpc_buffer_get(frag, io::rpc_place::end));
	auto *rbuf = static_cast<std::uint8_t *>(io::rpc_buffer_get(mib, io::rpc_place::read));
	ASSERT_NE(recv, nullptr);
	ASSERT_NE(rbuf, nullptr);
	dcache_file *file = dcache_file_new(exp);
	write_then_read_back(exp, file, fd, recv + frag - mib, rbuf, mib, 'r');
	const std::uint64_t fixed = stat_of(exp, "rpc_steps_fixed");
	const std::uint64_t in_slots = stat_of(exp, "steps_blocking_in_caller");
	dcache_file_free(file);
	io::rpc_buffer_put(recv);
	io::rpc_buffer_put(rbuf);
	done();
	if (const std::string refused = kernel_refuses_registered_buffers(); !refused.empty())
		GTEST_SKIP() << refused;
	EXPECT_EQ(in_slots, 1u) << "the WRITE, in a blocking slot";
	EXPECT_EQ(fixed, 1u) << "the READ, through the ring";
}
