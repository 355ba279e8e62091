// The asynchronous data path, continued: IO_Blocking_Max (device-bound
// steps in the caller while slots last), short transfers and errors
// mid-chain, descriptor lifetimes across the hand-off, and the RWF_NOWAIT
// cached-read fast path.
#include "async_requests.hpp"

namespace {

using namespace dcache::test;

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

} // namespace
