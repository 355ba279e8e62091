// The asynchronous data path (dcache_read_start / dcache_write_start):
// inline versus deferred completion, done called exactly once, the order of
// a split WRITE's chain (head -> middle -> tail -> sync), short transfers
// mid-chain, bounce-buffer and descriptor lifetimes across the hand-off,
// the RWF_NOWAIT cached-read fast path, the io_uring -> sync fallback, and
// one run over the real io_uring backend with many requests in flight.
// The asynchronous fake (async_fake.hpp) queues every request until the
// test releases it, so every interleaving is explicit.
#include "dcache_io/fake_backend.h"
#include "dcache_io/uring_backend.h"
#include "dcache_io/backend_factory.h"

#include <gtest/gtest.h>

#include "async_fake.hpp"
#include "core_support.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using dcache::io::fake_backend;
using dcache::io::op_kind;
using namespace dcache::core;

namespace {

using namespace dcache::test;
using dcache::test::async_fake;

// A done callback that records how often, with what, and on which thread.
struct done_probe {
	std::atomic<int> calls{0};
	dcache_io_result res{};
	static void fn(void *ctx, dcache_io_result r)
	{
		auto *p = static_cast<done_probe *>(ctx);
		p->res = r;
		p->calls.fetch_add(1);
	}
};

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed)
{
	std::vector<std::uint8_t> v(n);
	for (std::size_t i = 0; i < n; ++i)
		v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + i / 4096) & 0xff);
	return v;
}

constexpr int k_fd = 7;

class async_requests : public core_test {
protected:
	void SetUp() override
	{
		clear_log();
		dcache_set_log(capture_log);
		fb.set_caps({512, 4096, 4096, dcache::io::dio_caps::source::fake});
		make(dcache_settings_default());
	}
	void TearDown() override
	{
		ab.release_all();
		free_export();
		EXPECT_EQ(fb.open_direct_fds(), 0) << "O_DIRECT descriptor leaked";
		EXPECT_EQ(ab.buffered_open(), 0) << "buffered twin leaked";
		dcache_set_log(nullptr);
	}
	void make(const dcache_settings &s) { make_over(ab, s, "export 9 /async"); }
	bool write_start(std::uint64_t off, const std::vector<std::uint8_t> &data, std::size_t mem_shift, bool stable,
			 done_probe &d, dcache_io_result &inl)
	{
		// Buffer at a chosen distance from a 4096-aligned address, kept
		// alive by the fixture until the end of the test.
		auto *raw = static_cast<std::uint8_t *>(
			std::aligned_alloc(4096, ((data.size() + mem_shift) / 4096 + 1) * 4096));
		_bufs.emplace_back(raw, &std::free);
		std::memcpy(raw + mem_shift, data.data(), data.size());
		_iov = {raw + mem_shift, data.size()};
		const dcache_io io{k_fd, off, &_iov, 1, stable, nullptr};
		return dcache_write_start(exp, file, &io, &done_probe::fn, &d, &inl);
	}
	bool read_start(std::uint64_t off, std::vector<std::uint8_t> &into, done_probe &d, dcache_io_result &inl)
	{
		_iov = {into.data(), into.size()};
		const dcache_io io{k_fd, off, &_iov, 1, false, nullptr};
		return dcache_read_start(exp, file, &io, &done_probe::fn, &d, &inl);
	}
	// Direct READs, one place, no blocking slot: every READ after the
	// first waits in line.
	void make_one_place_direct_reads()
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_read = DCACHE_MODE_DIRECT;
		s.io_queue_depth = 1;
		s.io_blocking_max = 0;
		make(s);
	}
	// A direct WRITE mode whose edges are plain DONTCACHE pieces (no
	// boundary tracking): the simplest split chain.
	void make_split_writes(dcache_mode write_mode)
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_write = write_mode;
		s.boundary_tracking = false;
		make(s);
	}
	// The fake file holds data at off and ends there.
	void expect_file_is(std::uint64_t off, const std::vector<std::uint8_t> &data)
	{
		const auto c = fb.contents(k_fd);
		ASSERT_EQ(c.size(), off + data.size());
		EXPECT_TRUE(std::equal(c.begin() + static_cast<std::ptrdiff_t>(off), c.end(), data.begin()));
	}
	std::size_t nowait_calls() const
	{
		std::size_t n = 0;
		for (const auto &c : fb.calls())
			if (c.op == op_kind::read && (c.rwf & RWF_NOWAIT))
				++n;
		return n;
	}

	fake_backend fb;
	async_fake ab{fb};
	struct iovec _iov {};
	std::vector<std::unique_ptr<std::uint8_t, decltype(&std::free)>> _bufs;
};

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

// ---- IO_Blocking_Max: device-bound steps in the caller while slots last ----

TEST_F(async_requests, direct_steps_block_the_caller_within_io_blocking_max_then_go_async)
{
	blocking_slots = true;
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.io_blocking_max = 2;
	make(s);
	const auto data = pattern(8192, 6);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_TRUE(write_start(0, data, 0, true, d, inl)) << "a free slot: the middle and the fsync ran here";
	EXPECT_EQ(inl.error, 0);
	EXPECT_EQ(inl.bytes, 8192u);
	EXPECT_TRUE(inl.stable);
	EXPECT_EQ(ab.pending(), 0u);
	EXPECT_EQ(stat_of(exp, "steps_blocking_in_caller"), 2u);
	EXPECT_EQ(exp->blocking.load(), 0u) << "slots given back";
	// Every slot taken (by other workers' steps): handed off.
	exp->blocking.store(2);
	std::vector<std::uint8_t> back(8192);
	ASSERT_FALSE(read_start(0, back, d, inl));
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_TRUE(ab.is_direct(0));
	exp->blocking.store(0);
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 8192u);
	EXPECT_EQ(back, data);
	EXPECT_EQ(stat_of(exp, "steps_blocking_in_caller"), 2u);
	// 0: always io_uring.
	s.io_blocking_max = 0;
	dcache_export_update(exp, &s);
	done_probe d2;
	ASSERT_FALSE(write_start(0, data, 0, false, d2, inl));
	ab.release_all();
	EXPECT_EQ(d2.calls.load(), 1);
	EXPECT_EQ(stat_of(exp, "steps_blocking_in_caller"), 2u);
}

TEST_F(async_requests, a_split_writes_middle_is_handed_off_even_with_slots_free)
{
	blocking_slots = true;
	ab.set_cached_writes_in_caller(true);
	make_split_writes(DCACHE_MODE_DIRECT);
	const auto data = pattern(20000, 8);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(1000, data, 0, false, d, inl));
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_TRUE(ab.is_direct(0)) << "the middle, through the backend";
	EXPECT_EQ(stat_of(exp, "steps_blocking_in_caller"), 0u);
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 20000u);
	expect_file_is(1000, data);
}

TEST_F(async_requests, short_middle_ends_the_chain_with_the_bytes_done)
{
	make_split_writes(DCACHE_MODE_DIRECT);
	fb.short_call(1, 4096); // the middle transfers 4096 of 16384
	const auto data = pattern(20000, 4);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(1000, data, 0, true, d, inl));
	ab.release_one(); // head
	ab.release_one(); // short middle
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().op, op_kind::fsync) << "no tail after a short middle; stable still synced";
	ab.release_one();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.error, 0);
	EXPECT_EQ(d.res.bytes, 3096u + 4096u);
	EXPECT_TRUE(d.res.stable);
	EXPECT_EQ(stat_of(exp, "short_transfers"), 1u);
	EXPECT_EQ(fb.count(op_kind::write), 2u);
}

TEST_F(async_requests, error_on_first_segment_fails_without_sync)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT_FILE_SYNC;
	make(s);
	fb.fail_call(0, EIO);
	const auto data = pattern(20000, 5);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(1000, data, 0, false, d, inl));
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.error, EIO);
	EXPECT_FALSE(d.res.stable);
	EXPECT_EQ(fb.count(op_kind::fsync), 0u);
}

// ---- descriptor lifetime ------------------------------------------------------

TEST_F(async_requests, close_during_flight_closes_descriptors_after_completion)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT;
	make(s);
	fb.set_contents(k_fd, pattern(65536, 6));
	// A direct write in flight (O_DIRECT twin) and a buffered... direct
	// write's head goes on the buffered twin.
	const auto data = pattern(20000, 6);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(write_start(1000, data, 0, false, d, inl));
	EXPECT_EQ(fb.open_direct_fds(), 1);
	EXPECT_EQ(ab.buffered_open(), 1);
	dcache_file_close(file); // must not block, must not close under the request
	EXPECT_EQ(fb.open_direct_fds(), 1) << "O_DIRECT descriptor closed under an in-flight request";
	EXPECT_EQ(ab.buffered_open(), 1) << "buffered twin closed under an in-flight request";
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 20000u);
	EXPECT_EQ(fb.open_direct_fds(), 0) << "closed by the last completion";
	EXPECT_EQ(ab.buffered_open(), 0);
	// Reopened on next use.
	done_probe d2;
	ASSERT_FALSE(write_start(0, data, 0, false, d2, inl));
	EXPECT_EQ(ab.buffered_open(), 1);
	ab.release_all();
	EXPECT_EQ(d2.calls.load(), 1);
}

// ---- RWF_NOWAIT fast path --------------------------------------------------------

TEST_F(async_requests, nowait_hit_is_served_inline)
{
	const auto content = pattern(65536, 7);
	fb.set_contents(k_fd, content);
	std::vector<std::uint8_t> into(8192);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_TRUE(read_start(4096, into, d, inl));
	EXPECT_EQ(inl.error, 0);
	EXPECT_EQ(inl.bytes, 8192u);
	EXPECT_FALSE(inl.eof);
	EXPECT_EQ(d.calls.load(), 0);
	EXPECT_EQ(ab.pending(), 0u) << "no hand-off for cached data";
	EXPECT_TRUE(std::equal(into.begin(), into.end(), content.begin() + 4096));
	EXPECT_EQ(stat_of(exp, "read_nowait_hits"), 1u);
	EXPECT_EQ(nowait_calls(), 1u);
	EXPECT_EQ(fb.calls().back().fd, k_fd) << "the inline attempt uses the caller's descriptor";
}

TEST_F(async_requests, nowait_dontcache_mode_carries_both_flags)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DONTCACHE;
	make(s);
	fb.set_contents(k_fd, pattern(8192, 8));
	std::vector<std::uint8_t> into(4096);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_TRUE(read_start(0, into, d, inl));
	ASSERT_FALSE(fb.calls().empty());
	EXPECT_EQ(fb.calls().back().rwf, RWF_NOWAIT | RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "dontcache_bytes"), 4096u);
}

// Without RWF_DONTCACHE a DONTCACHE READ the page cache served whole (the
// readahead of the READ before it, say) is dropped after its reply too,
// with the READ's reach (drop_after_read): left alone, a stream read
// through the fast path stayed all cached (btrfs, kernels before 6.14).
TEST_F(async_requests, nowait_hit_without_dontcache_is_dropped_after_the_reply)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DONTCACHE;
	make(s);
	fb.reject_dontcache();
	const auto content = pattern(8u << 20, 5);
	fb.set_contents(k_fd, content);
	std::vector<std::uint8_t> into(1u << 20);
	done_probe d1;
	dcache_io_result inl{};
	// The first READ learns that the file has no RWF_DONTCACHE.
	ASSERT_FALSE(read_start(0, into, d1, inl));
	ab.release_all();
	ASSERT_EQ(d1.calls.load(), 1);
	ASSERT_EQ(d1.res.bytes, into.size());
	const std::uint64_t fallbacks = stat_of(exp, "fallback_no_dontcache");
	EXPECT_GE(fallbacks, 1u);
	// The next one is a page-cache hit, answered inline; its drop follows.
	done_probe d2;
	ASSERT_TRUE(read_start(3u << 20, into, d2, inl));
	EXPECT_EQ(inl.bytes, into.size());
	EXPECT_TRUE(std::equal(into.begin(), into.end(), content.begin() + (3u << 20)));
	EXPECT_EQ(stat_of(exp, "read_nowait_hits"), 1u);
	ASSERT_EQ(ab.pending(), 1u) << "the drop, queued after the reply";
	EXPECT_EQ(ab.front().op, op_kind::fadvise_dontneed);
	EXPECT_EQ(ab.front().offset, 2u << 20) << "back to the 2 MiB boundary before the READ";
	EXPECT_EQ(ab.front().length, 2u << 20);
	ab.release_all();
	EXPECT_EQ(stat_of(exp, "fallback_no_dontcache"), fallbacks + 1);
}

TEST_F(async_requests, nowait_partial_sends_only_the_remainder)
{
	const auto content = pattern(65536, 9);
	fb.set_contents(k_fd, content);
	fb.inject({[](const dcache::io::request &q, std::size_t) { return (q.rwf & RWF_NOWAIT) != 0; }, 0, 3000, 1});
	std::vector<std::uint8_t> into(10000);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(read_start(1000, into, d, inl));
	ASSERT_EQ(ab.pending(), 1u);
	const auto q = ab.front();
	EXPECT_EQ(q.offset, 4000u) << "remainder starts at offset + done";
	EXPECT_EQ(q.iov_bytes(), 7000u);
	EXPECT_EQ(q.rwf & RWF_NOWAIT, 0);
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 10000u) << "both parts combined";
	EXPECT_FALSE(d.res.eof);
	EXPECT_TRUE(std::equal(into.begin(), into.end(), content.begin() + 1000));
	EXPECT_EQ(stat_of(exp, "read_nowait_partial"), 1u);
	EXPECT_EQ(stat_of(exp, "read_bytes"), 10000u);
}

TEST_F(async_requests, nowait_partial_at_eof_reports_eof)
{
	const auto content = pattern(5000, 10);
	fb.set_contents(k_fd, content);
	fb.inject({[](const dcache::io::request &q, std::size_t) { return (q.rwf & RWF_NOWAIT) != 0; }, 0, 1000, 1});
	std::vector<std::uint8_t> into(8192);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(read_start(0, into, d, inl));
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 5000u);
	EXPECT_TRUE(d.res.eof);
	EXPECT_TRUE(std::equal(into.begin(), into.begin() + 5000, content.begin()));
}

TEST_F(async_requests, nowait_miss_sends_the_whole_read_async)
{
	const auto content = pattern(65536, 11);
	fb.set_contents(k_fd, content);
	fb.fail_when([](const dcache::io::request &q, std::size_t) { return (q.rwf & RWF_NOWAIT) != 0; }, EAGAIN, 1);
	std::vector<std::uint8_t> into(8192);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(read_start(0, into, d, inl));
	ASSERT_EQ(ab.pending(), 1u);
	EXPECT_EQ(ab.front().offset, 0u);
	EXPECT_EQ(ab.front().iov_bytes(), 8192u);
	ab.release_all();
	ASSERT_EQ(d.calls.load(), 1);
	EXPECT_EQ(d.res.bytes, 8192u);
	EXPECT_TRUE(std::equal(into.begin(), into.end(), content.begin()));
	EXPECT_EQ(stat_of(exp, "read_nowait_misses"), 1u);
	EXPECT_EQ(stat_of(exp, "read_nowait_hits"), 0u);
}

TEST_F(async_requests, nowait_at_eof_is_eof_not_a_miss)
{
	fb.set_contents(k_fd, pattern(4096, 12));
	std::vector<std::uint8_t> into(4096);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_TRUE(read_start(8192, into, d, inl));
	EXPECT_EQ(inl.error, 0);
	EXPECT_EQ(inl.bytes, 0u);
	EXPECT_TRUE(inl.eof);
	EXPECT_EQ(ab.pending(), 0u);
	EXPECT_EQ(stat_of(exp, "read_nowait_misses"), 0u);
}

TEST_F(async_requests, nowait_unsupported_disables_the_fast_path_for_the_file)
{
	fb.set_contents(k_fd, pattern(65536, 13));
	fb.fail_when([](const dcache::io::request &q, std::size_t) { return (q.rwf & RWF_NOWAIT) != 0; }, EOPNOTSUPP);
	for (int i = 0; i < 3; ++i) {
		std::vector<std::uint8_t> into(4096);
		done_probe d;
		dcache_io_result inl{};
		ASSERT_FALSE(read_start(0, into, d, inl));
		ab.release_all();
		ASSERT_EQ(d.calls.load(), 1);
		EXPECT_EQ(d.res.error, 0) << "EOPNOTSUPP of the fast path never reaches the client";
		EXPECT_EQ(d.res.bytes, 4096u);
	}
	EXPECT_EQ(nowait_calls(), 1u) << "tried once, then off for this file";
	EXPECT_EQ(stat_of(exp, "fallback_no_nowait"), 1u);
	std::size_t lines = 0;
	for (const auto &l : log_lines())
		lines += l.find("RWF_NOWAIT") != std::string::npos;
	EXPECT_EQ(lines, 1u);
}

TEST_F(async_requests, fast_path_setting_off_goes_straight_async)
{
	dcache_settings s = dcache_settings_default();
	s.cached_read_fast_path = false;
	make(s);
	fb.set_contents(k_fd, pattern(8192, 14));
	std::vector<std::uint8_t> into(4096);
	done_probe d;
	dcache_io_result inl{};
	ASSERT_FALSE(read_start(0, into, d, inl));
	ab.release_all();
	EXPECT_EQ(d.calls.load(), 1);
	EXPECT_EQ(nowait_calls(), 0u);
	EXPECT_EQ(ab.now_calls(), 0);
}

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
