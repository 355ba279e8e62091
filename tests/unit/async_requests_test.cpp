// The asynchronous data path (dcache_read_start / dcache_write_start), on
// the asynchronous fake: inline versus deferred completion, done called
// exactly once, the order of a split WRITE's chain (head -> middle -> tail
// -> sync), cached pieces in the caller, side work after the reply, and
// the export's places (IO_Queue_Depth): the line, parking.
#include "async_requests.hpp"
#include "sync_points.hpp"

namespace {

using namespace dcache::test;

// ---- inline versus deferred ------------------------------------------------

TEST(async_requests_inline, synchronous_backend_completes_inline_without_done)
{
	fake_backend fb;
	const dcache_settings s = dcache_settings_default();
	dcache_export *exp = export_new_with_backend(&s, "inline", &fb);
	dcache_file *file = dcache_file_new(exp);
	std::vector<std::uint8_t> data = pattern(5000, 1);
	struct iovec v {
		data.data(), data.size()
	};
	const dcache_io io{k_fd, 10, &v, 1, true, nullptr};
	done_probe d;
	dcache_io_result r{};
	ASSERT_TRUE(dcache_write_start(exp, file, &io, &done_probe::fn, &d, &r));
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 5000u);
	EXPECT_TRUE(r.stable);
	EXPECT_EQ(d.calls.load(), 0) << "done must not be called for an inline completion";
	EXPECT_EQ(fb.calls().back().fd, k_fd) << "an inline backend uses the caller's descriptor";
	EXPECT_EQ(stat_of(exp, "io_inline"), 1u);
	EXPECT_EQ(stat_of(exp, "read_nowait_hits") + stat_of(exp, "read_nowait_misses"), 0u);
	EXPECT_STREQ(dcache_export_backend_name(exp), "fake");
	EXPECT_EQ(stat_of(exp, "backend_io_uring"), 0u);
	dcache_file_free(file);
	dcache_export_put(exp);
}

TEST_F(async_requests, deferred_write_calls_done_exactly_once_with_the_result)
{
	const auto data = pattern(10000, 2);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(123, data, 3, false, d, inl));
	EXPECT_EQ(d.calls.load(), 0);
	EXPECT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().fd, k_fd + async_fake::k_buffered_base)
		<< "a request outliving the call runs on the core's own descriptor";
	EXPECT_EQ(ab.buffered_open(), 1);
	ab.release_all();
	EXPECT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.error, 0);
	EXPECT_EQ(d.res.bytes, 10000u);
	expect_file_is(123, data);
	EXPECT_EQ(stat_of(exp, "io_deferred"), 1u);
	const dcache_latency lat = dcache_stats_latency(exp, DCACHE_OP_WRITE);
	EXPECT_EQ(lat.count, 1u) << "latency is recorded once, at completion";
	// A second request reuses the twin.
	done_probe d2;
	ASSERT_FALSE(write_start(0, data, 0, false, d2, inl));
	ab.release_all();
	EXPECT_EQ(d2.calls.load(), 1);
	EXPECT_EQ(d.calls.load(), 1);
	EXPECT_EQ(ab.buffered_open(), 1);
}

// ---- the hand-off between submitter and completion -------------------------

// After each submit the submitter passes drive.submitted, then looks whether
// the completion came in.  One that came in before the look (here: the hook
// releases the step on the submitter's own thread) leaves the chain to the
// submitter; one that comes after drives the rest on its own thread.  Either
// way every step is issued once and the reply given once.
TEST_F(async_requests, the_step_completed_before_the_submitter_looks_is_continued_by_the_submitter)
{
	const auto data = pattern(8192, 5);
	int passed = 0;
	int release_in_hook = 2; // the write and its sync
	sync_points points([&](const std::string &name) {
		if (name != "drive.submitted")
			return;
		++passed;
		if (release_in_hook > 0) {
			--release_in_hook;
			ab.release_one(); // its completion, before the submitter's look
		}
	});
	done_probe d;
	dcache_io_result inl{};
	ASSERT_TRUE(write_start(0, data, 0, true, d, inl)) << "every completion came in before the look";
	EXPECT_EQ(passed, 2) << "the WRITE, then its sync, both submitted by the caller";
	EXPECT_EQ(ab.pending(), 0u);
	EXPECT_EQ(inl.error, 0);
	EXPECT_EQ(inl.bytes, data.size());
	EXPECT_TRUE(inl.stable);
	EXPECT_EQ(d.calls.load(), 0) << "an inline reply does not call done";
	expect_file_is(0, data);

	// The WRITE's completion before the look, its sync's after: the sync's
	// completion finishes the request on the releasing thread.
	passed = 0;
	release_in_hook = 1;
	ASSERT_FALSE(write_start(0, data, 0, true, d, inl));
	EXPECT_EQ(passed, 2);
	ASSERT_EQ(ab.pending(), 1u) << "the sync, left to its completion";
	EXPECT_EQ(d.calls.load(), 0);
	ab.release_one();
	EXPECT_EQ(passed, 2) << "the completion issued nothing more";
	EXPECT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.error, 0);
	EXPECT_EQ(d.res.bytes, data.size());
	EXPECT_TRUE(d.res.stable);
	EXPECT_EQ(fb.count(op_kind::fdatasync) + fb.count(op_kind::fsync), 2u) << "one sync per WRITE";
}

// ---- the chain of a split WRITE ---------------------------------------------

TEST_F(async_requests, split_write_chain_is_head_middle_tail_then_one_sync)
{
	make_split_writes(DCACHE_MODE_DIRECT_FILE_SYNC);
	const auto data = pattern(20000, 3);
	done_probe d;
	dcache_io_result inl{};
	// Memory shift 5: the middle is not 512-aligned in memory -> bounce.
	ASSERT_FALSE(write_start(1000, data, 5, false, d, inl));
	struct expect_step {
		op_kind op;
		bool direct;
		std::uint64_t offset;
	};
	const expect_step order[] = {{op_kind::write, false, 1000},
				     {op_kind::write, true, 4096},
				     {op_kind::write, false, 20480},
				     {op_kind::fsync, false, 0}};
	for (const auto &want : order) {
		ASSERT_EQ(ab.pending(), 1u) << "one step in flight at a time";
		const auto q = ab.front();
		EXPECT_EQ(q.op, want.op);
		EXPECT_EQ(q.fd >= fake_backend::k_direct_fd_base, want.direct);
		if (q.op == op_kind::write) {
			EXPECT_EQ(q.offset, want.offset);
		}
		EXPECT_EQ(d.calls.load(), 0);
		// Let the core's stack unwind before releasing: ASan catches a
		// bounce buffer freed before the middle completed.
		std::this_thread::yield();
		ab.release_one();
	}
	EXPECT_EQ(ab.pending(), 0u);
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 20000u);
	EXPECT_TRUE(d.res.stable);
	EXPECT_EQ(stat_of(exp, "write_bounce_copies"), 1u);
	EXPECT_EQ(stat_of(exp, "syncs_fsync"), 1u);
	expect_file_is(1000, data); // the bounce copy, written intact
}

// ---- cached pieces in the caller (as on io_uring) -------------------------

TEST_F(async_requests, cached_write_runs_in_the_caller_where_the_backend_says_so)
{
	ab.set_cached_writes_in_caller(true);
	const auto data = pattern(10000, 4);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_TRUE(write_start(123, data, 3, false, d, inl)) << "nothing to hand off";
	EXPECT_EQ(inl.error, 0);
	EXPECT_EQ(inl.bytes, 10000u);
	EXPECT_EQ(ab.pending(), 0u);
	EXPECT_EQ(d.calls.load(), 0);
	EXPECT_EQ(ab.now_calls(), 1);
	EXPECT_EQ(stat_of(exp, "steps_in_caller"), 1u);
	EXPECT_EQ(stat_of(exp, "io_inline"), 1u);
	expect_file_is(123, data);
	// Stable: the cached write here, the fsync handed off.
	done_probe d2;
	ASSERT_FALSE(write_start(0, data, 0, true, d2, inl));
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().op, op_kind::fsync);
	ab.release_all();
	ASSERT_EQ(d2.calls.load(), 1);
	EXPECT_TRUE(d2.res.stable);
	EXPECT_EQ(stat_of(exp, "steps_in_caller"), 2u);
}

TEST_F(async_requests, split_write_head_in_the_caller_middle_and_tail_handed_off)
{
	ab.set_cached_writes_in_caller(true);
	make_split_writes(DCACHE_MODE_DIRECT);
	const auto data = pattern(20000, 5);
	done_probe d;
	dcache_io_result inl{};
	const int before = ab.now_calls();
	ASSERT_FALSE(write_start(1000, data, 0, false, d, inl));
	EXPECT_EQ(ab.now_calls() - before, 1) << "the head (DONTCACHE) ran here";
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_TRUE(ab.is_direct(0)) << "the middle is handed off";
	ab.release_one();
	// From the completion thread nothing runs "in the caller": the tail and
	// its write-back are submitted.
	while (ab.pending() > 0) {
		EXPECT_FALSE(ab.is_direct(0));
		ab.release_one();
	}
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.error, 0);
	EXPECT_EQ(d.res.bytes, 20000u);
	expect_file_is(1000, data);
}

// ---- page-cache side work after the reply --------------------------------

TEST_F(async_requests, fadvise_drops_go_out_after_the_reply_and_after_the_commit)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_FADVISE;
	s.io_cache_write = DCACHE_MODE_FADVISE;
	make(s);
	fb.set_contents(k_fd, pattern(8192, 7));
	std::vector<std::uint8_t> back(8192);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(read_start(0, back, d, inl));
	ASSERT_EQ(ab.pending(), 1u);
	ab.release_one(); // the READ
	ASSERT_EQ(d.calls.load(), 1) << "replied before the drop completed";
	EXPECT_EQ(d.res.bytes, 8192u);
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().op, op_kind::fadvise_dontneed);
	EXPECT_EQ(ab.front().fd, k_fd + async_fake::k_buffered_base) << "on the file's own descriptor";
	ab.release_one();
	EXPECT_EQ(stat_of(exp, "drops_deferred"), 1u);
	EXPECT_EQ(stat_of(exp, "fadvise_calls"), 1u);
	EXPECT_EQ(stat_of(exp, "fadvise_errors"), 0u);
	// COMMIT: answered without waiting for its drop.
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1000), 0);
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().op, op_kind::fadvise_dontneed);
	EXPECT_EQ(ab.front().length, 0u) << "to end of file";
	ab.release_one();
	EXPECT_EQ(stat_of(exp, "drops_deferred"), 2u);
	EXPECT_EQ(stat_of(exp, "fadvise_calls"), 2u);
}

// Releases the queued requests, oldest first, until d has its reply;
// returns what was released.
std::vector<op_kind> until_replied(async_fake &ab, const done_probe &d)
{
	std::vector<op_kind> ops;
	while (d.calls.load() == 0 && ab.pending() > 0) {
		ops.push_back(ab.front().op);
		ab.release_one();
	}
	return ops;
}

TEST_F(async_requests, a_completed_boundary_page_is_written_back_and_dropped_after_the_reply)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	make(s);
	// Page 4 ([16384, 20480)) is shared: A writes its first 3616 bytes
	// (its tail), B the rest (its head).
	const auto a = pattern(20000, 1), b = pattern(20960, 2);
	done_probe da, db;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(0, a, 0, false, da, inl));
	(void)until_replied(ab, da);
	ASSERT_EQ(da.calls.load(), 1);
	EXPECT_EQ(ab.pending(), 0u) << "the page stays held: nothing to release";
	ASSERT_FALSE(write_start(20000, b, 0, false, db, inl));
	const auto before = until_replied(ab, db);
	ASSERT_EQ(db.calls.load(), 1);
	EXPECT_EQ(db.res.bytes, b.size());
	EXPECT_EQ(std::count(before.begin(), before.end(), op_kind::flush_drop), 0) << "the reply waited for no flush";
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	EXPECT_EQ(exp->boundary.pages(), 0u) << "the tracker let go at once";
	// After the reply: the page written back and waited for, then dropped,
	// one request, through the file's own descriptor.
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().op, op_kind::flush_drop);
	EXPECT_EQ(ab.front().offset, 16384u);
	EXPECT_EQ(ab.front().length, 4096u);
	EXPECT_EQ(ab.front().fd, k_fd + async_fake::k_buffered_base);
	ab.release_one();
	EXPECT_EQ(ab.pending(), 0u);
	EXPECT_EQ(stat_of(exp, "drops_deferred"), 1u);
	EXPECT_EQ(stat_of(exp, "fadvise_errors"), 0u);
	expect_file_is(0, [&] {
		auto all = a;
		all.insert(all.end(), b.begin(), b.end());
		return all;
	}());
}

TEST_F(async_requests, a_dontcache_fallback_writes_back_before_the_reply_and_drops_after)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DONTCACHE;
	make(s);
	fb.reject_dontcache();
	const auto data = pattern(8192, 4);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(0, data, 0, false, d, inl));
	const auto before = until_replied(ab, d);
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.error, 0);
	EXPECT_EQ(d.res.bytes, 8192u);
	EXPECT_EQ(stat_of(exp, "fallback_no_dontcache"), 1u);
	EXPECT_EQ(stat_of(exp, "edge_writebacks"), 0u) << "the fallback's write-back is not an edge's";
	ASSERT_FALSE(before.empty());
	EXPECT_EQ(before.back(), op_kind::writeback) << "its write-back started before the reply";
	EXPECT_EQ(std::count(before.begin(), before.end(), op_kind::flush_drop), 0) << "but was not waited for";
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().op, op_kind::flush_drop);
	EXPECT_EQ(ab.front().offset, 0u);
	EXPECT_EQ(ab.front().length, 8192u);
	EXPECT_EQ(stat_of(exp, "drops_pending"), 1u) << "queued, not yet done";
	ab.release_one();
	EXPECT_EQ(ab.pending(), 0u);
	EXPECT_EQ(stat_of(exp, "drops_deferred"), 1u);
	EXPECT_EQ(stat_of(exp, "drops_pending"), 0u);
	expect_file_is(0, data);
}

// A deferred write-back and drop the device fails (full, EIO): counted and
// logged once, and its piece still gives back what it holds, the buffered
// twin's descriptor and its hold on the export (TearDown: nothing leaked,
// the export goes).
TEST_F(async_requests, a_failing_deferred_write_back_gives_back_its_descriptor_and_export)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DONTCACHE;
	make(s);
	fb.reject_dontcache();
	fb.fail_when([](const dcache::io::request &r, std::size_t) { return r.op == op_kind::flush_drop; }, ENOSPC);
	for (unsigned i = 0; i < 2; ++i) {
		const auto data = pattern(8192, 5 + i);
		done_probe d;
		dcache_io_result inl{};
		ASSERT_FALSE(write_start(i * 8192, data, 0, false, d, inl));
		(void)until_replied(ab, d);
		ASSERT_EQ(d.calls.load(), 1);
		EXPECT_EQ(d.res.error, 0) << "the WRITE itself landed";
		ASSERT_EQ(ab.pending(), 1u);
		ASSERT_EQ(ab.front().op, op_kind::flush_drop);
		EXPECT_GT(ab.buffered_open(), 0) << "the queued piece holds the buffered twin";
		ab.release_one();
	}
	EXPECT_EQ(stat_of(exp, "drops_pending"), 0u);
	EXPECT_EQ(stat_of(exp, "fadvise_errors"), 2u);
	EXPECT_EQ(
		log_lines_with("write-back and drop (sync_file_range, posix_fadvise) failed: No space left on device"),
		1u)
		<< "logged once";
	dcache_file_close(file);
	EXPECT_EQ(ab.buffered_open(), 0) << "the failed pieces gave their descriptor back";
}

// ---- the memory bound: IO_Queue_Depth places -----------------------------

TEST_F(async_requests, requests_beyond_the_exports_places_are_parked_not_waited_for)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.io_queue_depth = 2;
	s.io_blocking_max = 0;
	make(s);
	const auto data = pattern(8192, 3);
	done_probe d1, d2, d3;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(0, data, 1, false, d1, inl)) << "misaligned memory: a bounce buffer, handed off";
	ASSERT_FALSE(write_start(8192, data, 1, false, d2, inl));
	EXPECT_EQ(exp->places.taken(), 2u);
	ASSERT_EQ(ab.pending(), 2u);
	// A third request (a READ into unaligned memory: a bounce buffer too)
	// finds both places taken: it is parked, and its worker goes back to
	// Ganesha at once, its reply to come.
	std::vector<std::uint8_t> back(8192 + 1);
	struct iovec v {
		back.data() + 1, 8192
	};
	const dcache_io io{k_fd, 0, &v, 1, false, nullptr};
	dcache_io_result r{};
	ASSERT_FALSE(dcache_read_start(exp, file, &io, &done_probe::fn, &d3, &r)) << "parked: answered later";
	EXPECT_EQ(exp->places.parked(), 1u);
	EXPECT_EQ(ab.pending(), 2u) << "nothing more reached the backend";
	EXPECT_EQ(stat_of(exp, "admission_waits"), 0u) << "counted when it gets its place";
	ab.release_one(); // the first WRITE finishes: its place goes to the READ
	EXPECT_EQ(d1.calls.load(), 1);
	EXPECT_EQ(exp->places.parked(), 0u);
	EXPECT_EQ(exp->places.taken(), 2u) << "passed on, not given back";
	ASSERT_EQ(ab.pending(), 2u) << "the READ was driven on by the thread that freed the place";
	EXPECT_EQ(stat_of(exp, "admission_waits"), 1u);
	EXPECT_EQ(stat_of(exp, "admission_waits_in_worker"), 0u);
	EXPECT_EQ(d3.calls.load(), 0);
	ab.release_all();
	EXPECT_EQ(d2.calls.load(), 1);
	ASSERT_EQ(d3.calls.load(), 1);
	EXPECT_EQ(d3.res.bytes, 8192u);
	EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + 1));
	EXPECT_EQ(exp->places.taken(), 0u) << "every place given back";
}

TEST_F(async_requests, places_go_to_the_oldest_in_line_never_to_a_newcomer)
{
	make_one_place_direct_reads();
	// Aligned 4 KiB direct READs at offsets 0, 4096, ...: each goes to the
	// ring as it is (no bounce buffer), so each needs a place to submit.
	const auto data = pattern(8 * 4096, 5);
	fb.set_contents(k_fd, data);
	constexpr int n = 5;
	done_probe d[n];
	std::vector<std::unique_ptr<std::uint8_t, decltype(&std::free)>> bufs;
	auto start = [&](int i) {
		auto *buf = static_cast<std::uint8_t *>(std::aligned_alloc(4096, 4096));
		bufs.emplace_back(buf, &std::free);
		struct iovec v {
			buf, 4096
		};
		const dcache_io io{k_fd, static_cast<std::uint64_t>(i) * 4096, &v, 1, false, nullptr};
		dcache_io_result r{};
		return dcache_read_start(exp, file, &io, &done_probe::fn, &d[i], &r);
	};
	ASSERT_FALSE(start(0)) << "submitted";
	ASSERT_FALSE(start(1)) << "parked";
	ASSERT_FALSE(start(2)) << "parked";
	EXPECT_EQ(exp->places.parked(), 2u);
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().offset, 0u);
	ab.release_one(); // its place goes to the READ at 4096
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().offset, 4096u);
	// A newcomer finds a place in use and requests in line: it queues
	// behind them.
	ASSERT_FALSE(start(3));
	EXPECT_EQ(exp->places.parked(), 2u);
	for (const std::uint64_t want : {8192u, 12288u}) {
		ab.release_one();
		ASSERT_EQ(ab.pending(), 1u);
		EXPECT_EQ(ab.front().offset, want) << "first come, first served";
	}
	ab.release_one();
	EXPECT_EQ(ab.pending(), 0u);
	for (int i = 0; i < 4; ++i) {
		ASSERT_EQ(d[i].calls.load(), 1) << i;
		EXPECT_EQ(d[i].res.bytes, 4096u) << i;
		EXPECT_TRUE(std::equal(bufs[static_cast<std::size_t>(i)].get(),
				       bufs[static_cast<std::size_t>(i)].get() + 4096, data.begin() + i * 4096))
			<< i;
	}
	EXPECT_EQ(stat_of(exp, "admission_waits"), 3u);
	EXPECT_EQ(exp->places.taken(), 0u);
}

TEST_F(async_requests, beyond_the_parking_bound_a_worker_waits_until_its_request_may_park)
{
	make_one_place_direct_reads();
	const auto data = pattern(4096, 6);
	fb.set_contents(k_fd, data);
	constexpr std::uint32_t n_parked = k_parked_per_place * 1;
	std::vector<done_probe> d(n_parked + 2);
	std::vector<std::vector<std::uint8_t>> bufs(n_parked + 2);
	auto start = [&](std::size_t i) {
		bufs[i].assign(4096 + 1, 0); // unaligned: a bounce buffer
		struct iovec v {
			bufs[i].data() + 1, 4096
		};
		const dcache_io io{k_fd, 0, &v, 1, false, nullptr};
		dcache_io_result r{};
		return dcache_read_start(exp, file, &io, &done_probe::fn, &d[i], &r);
	};
	for (std::size_t i = 0; i <= n_parked; ++i)
		ASSERT_FALSE(start(i)) << i; // the first has the place, the rest are parked
	EXPECT_EQ(exp->places.parked(), n_parked);
	std::atomic<bool> returned{false};
	std::atomic<bool> answered_later{false};
	std::thread worker([&] {
		answered_later = !start(n_parked + 1);
		returned = true;
	});
	// No room among the parked: that worker waits in line, behind them.
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (exp->places.waiting() < n_parked + 1 && std::chrono::steady_clock::now() < deadline)
		std::this_thread::yield();
	ASSERT_EQ(exp->places.waiting(), n_parked + 1);
	EXPECT_FALSE(returned.load());
	// The first READ finishes: its place goes to the oldest parked one,
	// and the room that leaves among the parked to the waiting worker,
	// which parks its request and goes.
	ab.release_one();
	worker.join();
	EXPECT_TRUE(answered_later.load()) << "parked: its reply comes later";
	EXPECT_EQ(exp->places.parked(), n_parked);
	EXPECT_EQ(ab.pending(), 1u);
	ab.release_all();
	for (std::size_t i = 0; i < d.size(); ++i) {
		ASSERT_EQ(d[i].calls.load(), 1) << i;
		EXPECT_TRUE(std::equal(data.begin(), data.end(), bufs[i].begin() + 1)) << i;
	}
	EXPECT_EQ(stat_of(exp, "admission_waits"), n_parked + 1);
	EXPECT_EQ(stat_of(exp, "admission_waits_in_worker"), 1u);
	EXPECT_EQ(exp->places.taken(), 0u);
	EXPECT_EQ(exp->places.waiting(), 0u);
}

TEST_F(async_requests, inline_requests_take_no_place)
{
	ab.set_cached_writes_in_caller(true);
	dcache_settings s = dcache_settings_default();
	s.io_queue_depth = 1;
	s.io_blocking_max = 0;
	make(s);
	const auto data = pattern(4096, 4);
	done_probe d;
	dcache_io_result inl{};
	for (int i = 0; i < 3; ++i)
		ASSERT_TRUE(write_start(4096 * static_cast<std::uint64_t>(i), data, 0, false, d, inl))
			<< "a buffered WRITE in the caller";
	EXPECT_EQ(exp->places.taken(), 0u);
	EXPECT_EQ(stat_of(exp, "admission_waits"), 0u);
}

} // namespace
