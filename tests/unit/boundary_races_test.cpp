// The boundary-page tracker under races: named sync points force each one
// (simultaneous completion, a second claim mid-write, a writer during the
// release, a full ceiling, an eviction against a close); many writers at
// once; and its settings and gauges.  Run under TSan and ASan as well.
#include "boundary_tracker.hpp"

namespace {

using namespace dcache::test;

// ---- forced races --------------------------------------------------------------

// Both writers wrote their edge; both reach complete() together.
TEST_F(boundary, simultaneous_completion_releases_exactly_once)
{
	std::latch both_written(2);
	sync_points hook([&](const std::string &name) {
		if (name == "boundary.complete")
			both_written.arrive_and_wait();
	});
	std::thread a([&] { EXPECT_EQ(write(k_a_off, k_a_len).bytes, k_a_len); });
	std::thread b([&] { EXPECT_EQ(write(k_b_off, k_b_len).bytes, k_b_len); });
	a.join();
	b.join();
	EXPECT_EQ(releases_of(k_shared), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_held"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);
	expect_accounting();
	expect_contents();
}

// The second writer claims while the first is between claim and write.
TEST_F(boundary, second_claim_while_the_first_is_still_writing)
{
	std::mutex m;
	std::condition_variable cv;
	bool b_done = false;
	thread_local bool is_a = false;
	sync_points hook([&](const std::string &name) {
		if (name == "boundary.claim" && is_a) {
			std::unique_lock lock(m);
			cv.wait(lock, [&] { return b_done; });
		}
	});
	std::thread a([&] {
		is_a = true;
		EXPECT_EQ(write(k_a_off, k_a_len).bytes, k_a_len);
	});
	// Wait until A holds the page (claimed, not completed).
	while (stat_of(exp, "boundary_held") == 0)
		std::this_thread::yield();
	EXPECT_EQ(write(k_b_off, k_b_len).bytes, k_b_len);
	EXPECT_EQ(releases_of(k_shared), 0u) << "A's bytes are not in the page yet";
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	{
		std::lock_guard lock(m);
		b_done = true;
	}
	cv.notify_all();
	a.join();
	EXPECT_EQ(releases_of(k_shared), 1u) << "the last writer to finish releases";
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	expect_accounting();
	expect_contents();
}

// A third writer arrives while the completed page is being released.
TEST_F(boundary, writer_arriving_during_the_release_is_correct_and_held_anew)
{
	ASSERT_EQ(write(k_a_off, k_a_len).bytes, k_a_len);
	std::mutex m;
	std::condition_variable cv;
	bool at_release = false, c_done = false;
	thread_local bool is_b = false;
	sync_points hook([&](const std::string &name) {
		if (name == "boundary.release" && is_b) {
			std::unique_lock lock(m);
			at_release = true;
			cv.notify_all();
			cv.wait(lock, [&] { return c_done; });
		}
	});
	std::thread b([&] {
		is_b = true;
		EXPECT_EQ(write(k_b_off, k_b_len).bytes, k_b_len);
	});
	{
		std::unique_lock lock(m);
		cv.wait(lock, [&] { return at_release; });
	}
	// C rewrites bytes of page 3 while B's release is pending.
	ASSERT_EQ(write(3 * k_page + 500, 100, nullptr, k_fd, 9).bytes, 100u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u) << "C holds the page anew";
	{
		std::lock_guard lock(m);
		c_done = true;
	}
	cv.notify_all();
	b.join();
	EXPECT_EQ(releases_of(k_shared), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_held"), 2u);
	expect_contents();
	dcache_file_close(file);
	EXPECT_EQ(releases_of(k_shared), 2u);
	expect_accounting();
}

// The ceiling never evicts a page whose writer is in flight; a new page
// then goes out untracked instead of breaking the ceiling.
TEST_F(boundary, ceiling_full_of_pages_in_flight_refuses_to_hold)
{
	make(with([](dcache_settings &s) { s.boundary_max_pages = 1; }));
	std::mutex m;
	std::condition_variable cv;
	bool go = false;
	thread_local bool is_a = false;
	sync_points hook([&](const std::string &name) {
		if (name == "boundary.claim" && is_a) {
			std::unique_lock lock(m);
			cv.wait(lock, [&] { return go; });
		}
	});
	std::thread a([&] {
		is_a = true;
		EXPECT_EQ(write(k_a_off, k_a_len).error, 0);
	});
	while (stat_of(exp, "boundary_held") == 0)
		std::this_thread::yield();
	ASSERT_EQ(write(64 * k_page + 100, 200).bytes, 200u);
	EXPECT_EQ(stat_of(exp, "boundary_not_held"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_ceiling"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	EXPECT_EQ(buffered_writes_into(64, RWF_DONTCACHE), 1u) << "the refused edge goes out as before";
	{
		std::lock_guard lock(m);
		go = true;
	}
	cv.notify_all();
	a.join();
	expect_accounting();
	expect_contents();
}

// Close waits for releases in flight on its file: a page of file 2 evicted by a
// request of file 1 is released through file 2's O_DIRECT descriptor while
// file 2 is being closed; the descriptor stays valid until the release ends.
TEST_F(boundary, eviction_of_another_files_page_races_its_close)
{
	make(with([](dcache_settings &s) { s.boundary_max_pages = 1; }));
	ASSERT_EQ(write(0, 3 * k_page + 100, file2, k_fd2).error, 0);
	std::mutex m;
	std::condition_variable cv;
	bool releasing = false;
	thread_local bool is_evictor = false;
	sync_points hook([&](const std::string &name) {
		if (name == "boundary.release" && is_evictor) {
			std::unique_lock lock(m);
			releasing = true;
			cv.notify_all();
		}
	});
	std::thread evictor([&] {
		is_evictor = true;
		EXPECT_EQ(write(0, 3 * k_page + 100, file, k_fd).error, 0);
	});
	{
		std::unique_lock lock(m);
		cv.wait(lock, [&] { return releasing; });
	}
	dcache_file_free(file2); // waits for the eviction's release to finish
	file2 = nullptr;
	evictor.join();
	EXPECT_EQ(releases_of(3, k_fd2), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_ceiling"), 1u);
	for (const auto &c : fb.calls_of(op_kind::sync_range)) {
		EXPECT_EQ(c.res.error, 0);
	}
}

// ---- many writers --------------------------------------------------------------

// 32 writers write misaligned chunks of one file in a scrambled order, as
// interleaved clients do: every shared page is completed and released
// exactly once while held - none needs the age limit or the ceiling (each
// of those would have meant a read-back from the device).
TEST_F(boundary, thirty_two_interleaved_writers_complete_every_shared_page)
{
	constexpr int k_writers = 32, k_chunks = 512;
	constexpr std::uint64_t k_chunk = 3 * k_page + 1234;
	std::vector<int> order(k_chunks);
	std::iota(order.begin(), order.end(), 0);
	std::shuffle(order.begin(), order.end(), std::mt19937(42));
	std::atomic<int> next{0}, failures{0};
	std::vector<std::thread> ts;
	for (int t = 0; t < k_writers; ++t)
		ts.emplace_back([&] {
			for (int i; (i = next.fetch_add(1)) < k_chunks;) {
				const auto c = static_cast<std::uint64_t>(order[static_cast<std::size_t>(i)]);
				if (write(c * k_chunk, k_chunk, nullptr, k_fd, static_cast<unsigned>(c)).bytes !=
				    k_chunk)
					failures.fetch_add(1);
			}
		});
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(failures.load(), 0);
	// Chunk boundaries that fall inside a page are shared pages.
	std::uint64_t shared = 0;
	for (int c = 1; c < k_chunks; ++c)
		shared += (static_cast<std::uint64_t>(c) * k_chunk) % k_page != 0;
	EXPECT_EQ(stat_of(exp, "boundary_completed"), shared);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_age"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_ceiling"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u) << "only the EOF page waits for COMMIT";
	EXPECT_EQ(stat_of(exp, "buffered_bytes") > 0, true);
	expect_accounting();
	expect_contents();
}

// TSan: writers, COMMITs, closes, live limit changes on two files at once;
// everything balances at the end.
TEST_F(boundary, concurrent_writes_commits_closes_and_updates)
{
	make(with([](dcache_settings &s) {
		s.boundary_max_pages = 4;
		s.boundary_max_age_ms = 1;
	}));
	constexpr int k_threads = 4, k_ops = 150;
	std::atomic<bool> stop{false};
	std::atomic<int> failures{0};
	std::vector<std::thread> ts;
	for (int t = 0; t < k_threads; ++t)
		ts.emplace_back([&, t] {
			dcache_file *f = (t % 2) ? file2 : file;
			const int fd = (t % 2) ? k_fd2 : k_fd;
			for (int i = 0; i < k_ops; ++i) {
				// Each thread owns its region; pages shared within it.
				const std::uint64_t off = static_cast<std::uint64_t>(t / 2) * (1u << 24) +
							  static_cast<std::uint64_t>(i) * 5000;
				if (write(off, 5000 + (i % 3) * 4096, f, fd, static_cast<unsigned>(i)).error != 0)
					failures.fetch_add(1);
				if (i % 17 == 0 && dcache_after_commit(exp, f, fd, 0, 0, 1) != 0)
					failures.fetch_add(1);
			}
		});
	std::thread other([&] {
		dcache_settings s = dcache_export_settings(exp);
		for (std::uint32_t n = 0; !stop.load(); ++n) {
			dcache_file_close((n % 2) ? file : file2);
			s.boundary_max_pages = 1 + n % 5;
			dcache_export_update(exp, &s);
			std::this_thread::yield();
		}
	});
	for (auto &t : ts)
		t.join();
	stop = true;
	other.join();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_LE(stat_of(exp, "boundary_pages_current"), 5u);
	expect_accounting();
	// Overlapping rewrites by one thread are ordered, so the model holds.
	expect_contents(k_fd);
	expect_contents(k_fd2);
	dcache_file_close(file);
	dcache_file_close(file2);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), 0u);
	for (const auto &c : fb.calls())
		EXPECT_EQ(c.res.error, 0) << dcache::io::op_name(c.op) << " at " << c.offset;
}

// ---- settings and counters -----------------------------------------------------

TEST(boundary_settings, parse_defaults_and_errors)
{
	dcache_settings_text t{};
	dcache_settings s{};
	char why[256];
	ASSERT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), 0);
	EXPECT_TRUE(s.boundary_tracking);
	EXPECT_EQ(s.boundary_max_pages, 4096u);
	EXPECT_EQ(s.boundary_max_age_ms, 5000u);
	t.boundary_tracking = "off";
	t.boundary_max_pages = "1048576";
	t.boundary_max_age_ms = "1";
	ASSERT_EQ(dcache_settings_parse(&t, &s, why, sizeof(why)), 0) << why;
	EXPECT_FALSE(s.boundary_tracking);
	EXPECT_EQ(s.boundary_max_pages, 1u << 20);
	EXPECT_EQ(s.boundary_max_age_ms, 1u);

	struct bad {
		const char *dcache_settings_text::*field;
		const char *value;
		const char *names;
	};
	for (const bad &b : {bad{&dcache_settings_text::boundary_tracking, "maybe", "Boundary_Tracking"},
			     bad{&dcache_settings_text::boundary_max_pages, "0", "Boundary_Max_Pages"},
			     bad{&dcache_settings_text::boundary_max_pages, "1048577", "Boundary_Max_Pages"},
			     bad{&dcache_settings_text::boundary_max_pages, "-5", "Boundary_Max_Pages"},
			     bad{&dcache_settings_text::boundary_max_pages, "4k", "Boundary_Max_Pages"},
			     bad{&dcache_settings_text::boundary_max_age_ms, "0", "Boundary_Max_Age_Ms"},
			     bad{&dcache_settings_text::boundary_max_age_ms, "3600001", "Boundary_Max_Age_Ms"},
			     bad{&dcache_settings_text::boundary_max_age_ms, "", "Boundary_Max_Age_Ms"}}) {
		dcache_settings_text bt{};
		bt.*b.field = b.value;
		dcache_settings out = dcache_settings_default();
		out.boundary_max_pages = 77;
		ASSERT_EQ(dcache_settings_parse(&bt, &out, why, sizeof(why)), EINVAL) << b.names << "=" << b.value;
		EXPECT_THAT(why, HasSubstr(b.names));
		EXPECT_THAT(why, HasSubstr(std::string("\"") + b.value + "\""));
		EXPECT_EQ(out.boundary_max_pages, 77u) << "untouched on error";
	}
}

TEST(boundary_settings, gauges_survive_a_stats_reset)
{
	fake_backend fb;
	fb.set_caps({512, 4096, 4096, dcache::io::dio_caps::source::fake});
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	dcache_export *e = export_new_with_backend(&s, "x", &fb);
	dcache_file *f = dcache_file_new(e);
	std::vector<std::uint8_t> d(200, 1);
	const struct iovec v {
		d.data(), d.size()
	};
	const dcache_io io{k_fd, 100, &v, 1, false, nullptr};
	ASSERT_EQ(dcache_write(e, f, &io).bytes, 200u);
	dcache_stats_reset(e);
	EXPECT_EQ(stat_of(e, "boundary_held"), 0u);
	EXPECT_EQ(stat_of(e, "boundary_pages_current"), 1u) << "a gauge describes the present";
	EXPECT_EQ(stat_of(e, "boundary_bytes_current"), 200u);
	dcache_file_free(f);
	EXPECT_EQ(stat_of(e, "boundary_pages_current"), 0u);
	dcache_export_put(e);
}

} // namespace
