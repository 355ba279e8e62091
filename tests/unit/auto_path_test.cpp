// Requests of an auto export through the core over the fake backend: the
// counters of each decision, the modes the planner ran, live updates, the
// write-back before a direct WRITE, passes served out of order,
// concurrent requests of one file, and streams giving way to the requests
// auto keeps cached (Auto_Stream_Yield_Ms).
#include "auto_history.h"
#include "auto_state.h"
#include "request_path.hpp"
#include "sync_points.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <random>
#include <string>
#include <vector>

using namespace dcache::test;
using dcache::io::memory_state;

namespace {

constexpr std::uint64_t KiB = 1 << 10, MiB = 1 << 20, GiB = 1ull << 30;

memory_state g_memory;
memory_state fake_memory() noexcept
{
	return g_memory;
}
constexpr memory_state k_short{20 * MiB, 900 * MiB, memory_state::source::cgroup_v1};
constexpr memory_state k_plenty{20 * GiB, 22 * GiB, memory_state::source::machine};

class auto_path : public request_path {
protected:
	void SetUp() override
	{
		request_path::SetUp();
		g_memory = k_short;
		auto_mode();
	}
	void auto_mode(dcache_mode read_stream = DCACHE_MODE_DIRECT, dcache_mode write_stream = DCACHE_MODE_DONTCACHE)
	{
		auto_mode(settings(read_stream, write_stream));
	}
	void auto_mode(const dcache_settings &s)
	{
		make(s);
		exp->clock = &manual_clock::now;
		exp->memory = &fake_memory;
		fb.set_contents(k_fd, std::vector<std::uint8_t>(64 * MiB, 7));
	}
	static dcache_settings settings(dcache_mode read_stream = DCACHE_MODE_DIRECT,
					dcache_mode write_stream = DCACHE_MODE_DONTCACHE)
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_read = DCACHE_MODE_AUTO;
		s.io_cache_write = DCACHE_MODE_AUTO;
		s.auto_read_stream = read_stream;
		s.auto_write_stream = write_stream;
		s.auto_stream_yield_ms = 0; // the gate has tests of its own (auto_yield)
		return s;
	}
	// Memory to spare on a machine that reports its free memory to a host.
	static void reported_machine()
	{
		g_memory = k_plenty;
		g_memory.reported = true;
	}
	// Auto_Write_Spare_Memory changed live.
	void spare_memory(dcache_spare_memory how)
	{
		dcache_settings s = settings();
		s.auto_write_spare_memory = how;
		dcache_export_update(exp, &s);
	}
	// READs of [from, to) MiB, 1 MiB each.
	void read_mib(std::uint64_t from, std::uint64_t to)
	{
		for (std::uint64_t i = from; i < to; ++i) {
			const dcache_io_result r = read(i * MiB, buf.data(), MiB);
			ASSERT_EQ(r.error, 0);
			ASSERT_EQ(r.bytes, MiB);
		}
	}
	void write_mib(std::uint64_t from, std::uint64_t to)
	{
		for (std::uint64_t i = from; i < to; ++i) {
			const dcache_io_result r = write(i * MiB, data);
			ASSERT_EQ(r.error, 0);
			ASSERT_EQ(r.bytes, MiB);
		}
	}
	std::uint64_t stat(const char *name) const { return stat_of(exp, name); }

	payload buf{MiB, 0};
	payload data{MiB, 0};
};

TEST_F(auto_path, a_read_stream_goes_direct_after_the_threshold)
{
	read_mib(0, 16);
	EXPECT_EQ(stat("read_auto_no_stream"), 4u) << "0 to 3 MiB into the run before them";
	EXPECT_EQ(stat("read_auto_stream"), 12u);
	EXPECT_EQ(stat("read_buffered"), 4u) << "the planner ran the mode auto chose";
	EXPECT_EQ(stat("read_direct"), 12u);
	EXPECT_EQ(stat("auto_history_entries"), 1u);
	EXPECT_EQ(exp->auto_history.span(auto_record(*file)->id), 16 * MiB);
}

TEST_F(auto_path, read_again_it_stays_cached_while_it_fits)
{
	read_mib(0, 16);
	manual_clock::advance(std::chrono::seconds(8));
	read_mib(0, 16);
	EXPECT_EQ(stat("read_auto_no_stream"), 8u);
	EXPECT_EQ(stat("read_auto_reused"), 12u);
	EXPECT_EQ(stat("read_direct"), 12u) << "only the first pass";
	// With a page cache of 24 MiB it no longer fits (12 MiB at most).
	g_memory = memory_state{0, 24 * MiB, memory_state::source::cgroup_v1};
	read_mib(0, 16);
	EXPECT_EQ(stat("read_auto_too_big"), 12u);
}

TEST_F(auto_path, with_memory_to_spare_a_read_stream_stays_cached)
{
	g_memory = k_plenty;
	read_mib(0, 16);
	EXPECT_EQ(stat("read_auto_memory_free"), 12u);
	EXPECT_EQ(stat("read_direct"), 0u);
}

// With memory to spare a WRITE stream stays cached, written behind: each
// WRITE's pages go to write-back as it is answered, so that it leaves clean
// pages; the same stream written again is a rewrite and goes the stream's
// way.
TEST_F(auto_path, with_memory_to_spare_a_write_stream_stays_cached_written_behind)
{
	g_memory = k_plenty;
	write_mib(0, 8);
	EXPECT_EQ(stat("write_auto_no_stream"), 4u);
	EXPECT_EQ(stat("write_auto_memory_free"), 4u);
	EXPECT_EQ(stat("write_buffered"), 8u);
	EXPECT_EQ(stat("auto_write_behind"), 4u);
	std::vector<std::pair<std::uint64_t, std::uint64_t>> wb;
	for (const fake_backend::call &c : fb.calls())
		if (c.op == op_kind::writeback)
			wb.emplace_back(c.offset, c.length);
	const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected = {
		{4 * MiB, MiB}, {5 * MiB, MiB}, {6 * MiB, MiB}, {7 * MiB, MiB}};
	EXPECT_EQ(wb, expected) << "each cached stream WRITE's own pages, as it is written";

	write_mib(0, 8);
	EXPECT_EQ(stat("write_auto_stream"), 4u) << "written again: a rewrite";
	EXPECT_EQ(stat("write_dontcache"), 4u);
	EXPECT_EQ(stat("auto_write_behind"), 4u);
}

// On a machine that reports its free memory to a host the same stream goes
// the stream's way, counted as free_reported, with nothing written behind;
// Auto_Write_Spare_Memory = cache caches it as above.
TEST_F(auto_path, with_free_memory_reported_a_write_stream_goes_the_streams_way)
{
	reported_machine();
	write_mib(0, 8);
	EXPECT_EQ(stat("write_auto_no_stream"), 4u);
	EXPECT_EQ(stat("write_auto_free_reported"), 4u);
	EXPECT_EQ(stat("write_auto_memory_free"), 0u);
	EXPECT_EQ(stat("write_dontcache"), 4u);
	EXPECT_EQ(stat("auto_write_behind"), 0u);

	spare_memory(DCACHE_SPARE_CACHE);
	write_mib(8, 16);
	EXPECT_EQ(stat("write_auto_memory_free"), 8u) << "the run goes on, cached as Auto_Write_Spare_Memory says";
	EXPECT_EQ(stat("auto_write_behind"), 8u);
}

// Read back beside a working set (a cached READ of the export in the last
// k_auto_working_set_ms), data so written was never cached: the first READ
// run goes the stream's way too (free_reported), the next is a re-read,
// cached for the memory to spare; a file written cached is read back
// cached.
TEST_F(auto_path, with_free_memory_reported_the_first_read_back_goes_the_streams_way)
{
	reported_machine();
	read_mib(40, 41); // the working set (a READ after the write would read it back)
	write_mib(0, 8);
	manual_clock::advance(std::chrono::milliseconds(k_auto_working_set_ms - 1));
	read_mib(0, 8);
	EXPECT_EQ(stat("read_auto_no_stream"), 5u);
	EXPECT_EQ(stat("read_auto_free_reported"), 4u);
	EXPECT_EQ(stat("read_direct"), 4u);
	manual_clock::advance(std::chrono::seconds(3));
	read_mib(0, 8);
	EXPECT_EQ(stat("read_auto_memory_free"), 4u) << "read again: the data is used again";
	EXPECT_EQ(stat("read_auto_free_reported"), 4u);
	EXPECT_EQ(stat("read_direct"), 4u);

	spare_memory(DCACHE_SPARE_CACHE);
	dcache_file_truncated(file, 0);
	write_mib(0, 8);
	EXPECT_EQ(stat("write_auto_memory_free"), 4u);
	manual_clock::advance(std::chrono::seconds(3));
	read_mib(0, 8);
	EXPECT_EQ(stat("read_auto_free_reported"), 4u) << "written cached, read back cached";
	EXPECT_EQ(stat("read_auto_memory_free"), 8u);
}

// ... and on an export that served no working set as long, it is cached
// as any stream with memory to spare (a file written, then read to warm
// the cache); its own first READs (no_stream) are no working set.
TEST_F(auto_path, with_free_memory_reported_a_read_back_alone_is_cached)
{
	reported_machine();
	read_mib(40, 41);
	EXPECT_TRUE(exp->memory_reported.load());
	write_mib(0, 8);
	manual_clock::advance(std::chrono::milliseconds(k_auto_working_set_ms));
	read_mib(0, 8);
	EXPECT_EQ(stat("read_auto_free_reported"), 0u);
	EXPECT_EQ(stat("read_auto_memory_free"), 4u);
	EXPECT_EQ(stat("read_direct"), 0u);
	const std::int64_t ws = exp->working_set_read_ns.load();
	manual_clock::advance(std::chrono::seconds(1));
	read_mib(8, 9); // the read-back's run goes on
	EXPECT_EQ(exp->working_set_read_ns.load(), ws) << "a read-back's READs are no working set";
	read_mib(32, 33);
	EXPECT_GT(exp->working_set_read_ns.load(), ws) << "a cached READ of the export is";
}

// A file emptied (O_TRUNC, SETATTR size 0) and written again holds new
// data: a new stream, cached for spare memory, not a rewrite.
TEST_F(auto_path, a_stream_written_after_a_truncate_is_no_rewrite)
{
	g_memory = k_plenty;
	write_mib(0, 8);
	dcache_file_truncated(file, 0);
	EXPECT_EQ(stat("auto_history_entries"), 0u);
	write_mib(0, 8);
	EXPECT_EQ(stat("write_auto_memory_free"), 8u) << "4 each time";
	EXPECT_EQ(stat("write_auto_stream"), 0u);
	// Cut behind where it was written: what is left is still the file's.
	dcache_file_truncated(file, 6 * MiB);
	EXPECT_EQ(exp->auto_history.span(auto_record(*file)->id), 6 * MiB);
	write_mib(0, 6);
	EXPECT_EQ(stat("write_auto_stream"), 2u) << "rewriting what is left";
}

TEST_F(auto_path, small_requests_stay_cached_and_keep_no_state)
{
	for (std::uint64_t i = 0; i < 64; ++i)
		ASSERT_EQ(read(i * 4 * KiB, buf.data(), 4 * KiB).error, 0);
	EXPECT_EQ(stat("read_auto_small"), 64u);
	EXPECT_EQ(stat("read_buffered"), 64u);
	EXPECT_EQ(auto_record(*file), nullptr) << "small READs make no record";
}

TEST_F(auto_path, a_named_mode_never_asks_auto)
{
	dcache_settings s = settings();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_BUFFERED;
	make(s);
	read_mib(0, 8);
	write_mib(0, 8);
	for (const char *r : {"small", "no_stream", "memory_free", "reused", "too_big", "stream", "free_reported"}) {
		EXPECT_EQ(stat(("read_auto_" + std::string(r)).c_str()), 0u) << r;
		EXPECT_EQ(stat(("write_auto_" + std::string(r)).c_str()), 0u) << r;
	}
	EXPECT_EQ(stat("read_direct"), 8u);
	EXPECT_EQ(auto_record(*file), nullptr);
}

TEST_F(auto_path, the_record_survives_live_updates_and_mode_changes)
{
	read_mib(0, 6);
	EXPECT_EQ(stat("read_auto_stream"), 2u);
	dcache_settings s = settings();
	s.io_cache_read = DCACHE_MODE_DONTCACHE;
	dcache_export_update(exp, &s);
	read_mib(6, 8);
	EXPECT_EQ(stat("read_dontcache"), 2u);
	// Back to auto (a snapshot made before, reused): the record is as it
	// was, the run goes on where auto last saw it (8 MiB is within the
	// window), a stream from its first request.
	s = settings();
	dcache_export_update(exp, &s);
	read_mib(8, 10);
	EXPECT_EQ(stat("read_auto_stream"), 4u);
	// Another stream mode, live.
	s.auto_read_stream = DCACHE_MODE_DONTCACHE;
	dcache_export_update(exp, &s);
	read_mib(10, 11);
	EXPECT_EQ(stat("read_dontcache"), 3u);
}

TEST_F(auto_path, a_direct_write_after_cached_ones_writes_the_file_back_first)
{
	auto_mode(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	write_mib(0, 6); // 4 cached, then 2 direct
	EXPECT_EQ(stat("write_auto_no_stream"), 4u);
	EXPECT_EQ(stat("write_auto_stream"), 2u);
	EXPECT_EQ(stat("auto_write_backs"), 1u) << "once, before the first direct WRITE";
	EXPECT_EQ(stat("edge_writebacks"), 0u);
	// The whole file (length 0), before the first direct step.
	const auto calls = fb.calls();
	const auto wb = std::find_if(calls.begin(), calls.end(),
				     [](const fake_backend::call &c) { return c.op == op_kind::writeback; });
	ASSERT_NE(wb, calls.end());
	EXPECT_EQ(wb->offset, 0u);
	EXPECT_EQ(wb->length, 0u);
	const auto first_direct = std::find_if(calls.begin(), calls.end(), [](const fake_backend::call &c) {
		return c.direct && c.op == op_kind::write;
	});
	ASSERT_NE(first_direct, calls.end());
	EXPECT_LT(wb->index, first_direct->index);
	// A small WRITE goes cached again; the next direct one writes back
	// again.
	const payload small(4 * KiB, 0);
	ASSERT_EQ(write(6 * MiB, small).error, 0);
	write_mib(7, 8);
	EXPECT_EQ(stat("auto_write_backs"), 2u);
}

TEST_F(auto_path, dontcache_write_streams_need_no_write_back)
{
	write_mib(0, 8);
	EXPECT_EQ(stat("auto_write_backs"), 0u);
	EXPECT_EQ(fb.count(op_kind::writeback), 0u);
}

TEST_F(auto_path, a_reread_that_fits_is_cached_beside_a_stream_that_does_not)
{
	// Two files of one export: a 16 MiB working set read every 8 s, a
	// stream through another file far larger than the page cache.
	g_memory = memory_state{0, 40 * MiB, memory_state::source::cgroup_v1}; // fit: 20 MiB
	dcache_file *other = dcache_file_new(exp);
	ASSERT_NE(other, nullptr);
	const auto read_other = [&](std::uint64_t from, std::uint64_t to) {
		for (std::uint64_t i = from; i < to; ++i) {
			const struct iovec v {
				buf.data(), MiB
			};
			const dcache_io io{k_fd, i * MiB, &v, 1, false, nullptr};
			ASSERT_EQ(dcache_read(exp, other, &io).error, 0);
		}
	};
	std::uint64_t streamed = 0;
	for (int pass = 0; pass < 3; ++pass) {
		read_mib(0, 16);
		read_other(streamed, streamed + 48);
		streamed += 48;
		manual_clock::advance(std::chrono::seconds(8));
	}
	EXPECT_EQ(stat("read_auto_reused"), 2 * 12u) << "the working set, passes 2 and 3";
	EXPECT_EQ(stat("read_auto_stream"), 12u + 44u + 2 * 48u) << "its first pass, and the stream";
	dcache_file_free(other);
}

// The benchmark's mixed export, scaled down, with requests in flight
// served out of order as Ganesha's workers serve them: six files of a
// working set laid out and read, then a stream laid out and read twice,
// the working set read between (each pass after the others paused).
TEST_F(auto_path, reordered_passes_over_a_working_set_beside_a_stream)
{
	std::vector<dcache_file *> ws;
	for (int i = 0; i < 6; ++i)
		ws.push_back(dcache_file_new(exp));
	dcache_file *st = dcache_file_new(exp);
	std::mt19937 rng(3);
	const auto pass = [&](dcache_file *f, std::uint64_t from, std::uint64_t to, bool wr, std::size_t depth) {
		std::vector<std::uint64_t> at;
		for (std::uint64_t i = from; i < to; ++i)
			at.push_back(i);
		for (std::size_t i = 0; i < at.size(); i += depth)
			std::shuffle(at.begin() + static_cast<std::ptrdiff_t>(i),
				     at.begin() + static_cast<std::ptrdiff_t>(std::min(at.size(), i + depth)), rng);
		for (const std::uint64_t i : at) {
			const struct iovec v {
				buf.data(), MiB
			};
			const dcache_io io{k_fd, i * MiB, &v, 1, false, nullptr};
			ASSERT_EQ((wr ? dcache_write(exp, f, &io) : dcache_read(exp, f, &io)).error, 0);
			manual_clock::advance(std::chrono::milliseconds(1));
		}
	};
	const auto reasons = [&] {
		std::string out;
		for (const char *r : {"no_stream", "memory_free", "reused", "too_big", "stream"})
			out += std::string(r) + "=" + std::to_string(stat(("read_auto_" + std::string(r)).c_str())) +
			       " ";
		dcache_stats_reset(exp);
		return out;
	};
	// Laid out with memory to spare, each file read 1 MiB after.
	g_memory = k_plenty;
	for (dcache_file *f : ws) {
		pass(f, 0, 16, true, 8);
		pass(f, 0, 1, false, 1);
	}
	pass(st, 0, 512, true, 8);
	pass(st, 0, 1, false, 1);
	(void)reasons();
	// Then in a group of 200 MiB (what fits: 100 MiB): the working set
	// first, with the group still free.
	g_memory = memory_state{180 * MiB, 200 * MiB, memory_state::source::cgroup_v1};
	manual_clock::advance(std::chrono::seconds(3));
	for (dcache_file *f : ws)
		pass(f, 0, 16, false, 4);
	EXPECT_EQ(stat("read_auto_stream") + stat("read_auto_too_big"), 0u) << reasons();
	dcache_stats_reset(exp);
	// The stream fills what is free, then goes direct: it does not fit.
	pass(st, 0, 100, false, 16);
	g_memory = memory_state{10 * MiB, 200 * MiB, memory_state::source::cgroup_v1};
	pass(st, 100, 512, false, 16);
	EXPECT_EQ(stat("read_auto_memory_free") + stat("read_auto_no_stream"), 100u) << reasons();
	EXPECT_EQ(stat("read_auto_too_big"), 412u) << reasons();
	dcache_stats_reset(exp);
	// The working set again: all of it reused, none streamed.
	manual_clock::advance(std::chrono::seconds(3));
	for (dcache_file *f : ws)
		pass(f, 0, 16, false, 4);
	EXPECT_EQ(stat("read_auto_stream") + stat("read_auto_too_big"), 0u) << reasons();
	EXPECT_EQ(stat("read_auto_reused"), 6 * 12u) << reasons();
	for (dcache_file *f : ws)
		dcache_file_free(f);
	dcache_file_free(st);
}

TEST_F(auto_path, concurrent_requests_of_one_file)
{
	// TSan's case: the record and the history from several threads.
	std::vector<std::thread> threads;
	for (int t = 0; t < 4; ++t)
		threads.emplace_back([this, t] {
			payload mine(MiB, 0);
			for (std::uint64_t i = 0; i < 16; ++i) {
				const struct iovec v = mine.iov();
				const dcache_io io{k_fd,  (static_cast<std::uint64_t>(t) * 16 + i) * MiB % (64 * MiB),
						   &v,	  1,
						   false, nullptr};
				EXPECT_EQ(dcache_read(exp, file, &io).error, 0);
			}
		});
	for (auto &th : threads)
		th.join();
	std::uint64_t decided = 0;
	for (const char *r : {"small", "no_stream", "memory_free", "reused", "too_big", "stream", "free_reported"})
		decided += stat(("read_auto_" + std::string(r)).c_str());
	EXPECT_EQ(decided, 64u);
}

// Auto_Stream_Yield_Ms.  The first request to enter the gate after
// hold() is kept there, in flight, until release().
class auto_yield : public auto_path {
protected:
	void yield_ms(std::uint32_t ms)
	{
		dcache_settings s = settings();
		s.auto_stream_yield_ms = ms;
		auto_mode(s);
		read_mib(0, 4); // the run's first 4 MiB: no_stream, through the gate
	}
	// A READ of [offset, offset + p's length), held in the gate on its own
	// thread.
	std::future<dcache_io_result> hold_read(std::uint64_t offset, const payload &p)
	{
		hook = std::make_unique<dcache::test::sync_points>([this](const std::string &name) {
			if (name == "yield.entered" && !held.exchange(true)) {
				entered.set_value();
				released.wait();
			}
		});
		auto r = std::async(std::launch::async,
				    [this, offset, &p] { return read(offset, p.data(), p.iov().iov_len); });
		if (entered_f.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
			ADD_FAILURE() << "the READ at " << offset << " never entered the gate";
		return r;
	}
	std::future<dcache_io_result> hold_small_read() { return hold_read(60 * MiB, small); }
	void release() { release_p.set_value(); }

	std::unique_ptr<dcache::test::sync_points> hook;
	std::atomic<bool> held{false};
	std::promise<void> entered;
	std::future<void> entered_f = entered.get_future();
	std::promise<void> release_p;
	std::shared_future<void> released = release_p.get_future().share();
	payload small{4 * KiB, 0};
};

TEST_F(auto_yield, a_stream_waits_while_a_cached_request_is_in_flight)
{
	yield_ms(1000);
	auto small_read = hold_small_read();
	auto stream = std::async(std::launch::async, [this] { return read(4 * MiB, buf.data(), MiB); });
	EXPECT_EQ(stream.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
		<< "the stream's READ went on beside a small READ in flight";
	EXPECT_EQ(exp->yield.in_flight(), 1u);
	release();
	EXPECT_EQ(small_read.get().bytes, 4 * KiB);
	EXPECT_EQ(stream.get().bytes, MiB);
	EXPECT_EQ(stat("read_auto_stream"), 1u);
	EXPECT_EQ(stat("auto_yields"), 1u);
	EXPECT_GE(stat("auto_yield_us"), 100'000u);
	EXPECT_LT(stat("auto_yield_us"), 1'000'000u) << "it went when the small READ left, not at its deadline";
	EXPECT_EQ(exp->yield.in_flight(), 0u);

	std::this_thread::sleep_for(3 * dcache::core::k_yield_quiet);
	read_mib(5, 8);
	EXPECT_EQ(stat("auto_yields"), 1u) << "nothing in flight: the stream does not wait";
	EXPECT_EQ(stat("read_direct"), 4u);
}

// The start of another run of the same file (no_stream), in flight: the
// stream does not give way to it, as it would to another file's (or to a
// small READ of its own file, above): a file's stream would otherwise wait
// for its own run's start, sent with it.
TEST_F(auto_yield, a_stream_does_not_wait_for_the_start_of_its_file_s_runs)
{
	yield_ms(1000);
	const payload start{MiB, 0};
	auto held_start = hold_read(32 * MiB, start);
	EXPECT_EQ(exp->yield.in_flight(), 1u);
	const auto before = std::chrono::steady_clock::now();
	EXPECT_EQ(read(4 * MiB, buf.data(), MiB).bytes, MiB);
	EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(500));
	EXPECT_EQ(stat("auto_yields"), 0u) << "the stream waited for the start of its own file's run";
	EXPECT_EQ(stat("read_auto_stream"), 1u);
	EXPECT_EQ(stat("read_auto_no_stream"), 5u) << "the first run's 4 MiB and the held one";
	release();
	EXPECT_EQ(held_start.get().bytes, MiB);
	EXPECT_EQ(exp->yield.in_flight(), 0u);
}

TEST_F(auto_yield, a_stream_waits_no_longer_than_the_setting)
{
	yield_ms(30);
	auto small_read = hold_small_read();
	EXPECT_EQ(read(4 * MiB, buf.data(), MiB).bytes, MiB) << "while the small READ is still in flight";
	EXPECT_EQ(stat("auto_yields"), 1u);
	EXPECT_GE(stat("auto_yield_us"), 30'000u);
	EXPECT_TRUE(exp->yield.open()) << "it kept going past the deadline: streams stop giving way";
	release();
	EXPECT_EQ(small_read.get().bytes, 4 * KiB);
}

TEST_F(auto_yield, off_nothing_enters_the_gate_and_no_stream_waits)
{
	yield_ms(0);
	std::atomic<int> entered_gate{0};
	const dcache::test::sync_points count([&](const std::string &name) {
		if (name == "yield.entered")
			++entered_gate;
	});
	EXPECT_EQ(read(60 * MiB, small.data(), 4 * KiB).bytes, 4 * KiB);
	read_mib(4, 8);
	EXPECT_EQ(entered_gate.load(), 0);
	EXPECT_EQ(stat("auto_yields"), 0u);
	EXPECT_EQ(stat("read_auto_stream"), 4u);
}

// Auto_Write_Stream = direct_when_quiet, with no stream giving way: a
// WRITE stream goes dontcache while a cached request is in flight, and
// direct once the export has been quiet, writing the file back first.
TEST_F(auto_yield, direct_when_quiet_writes_dontcache_beside_cached_requests)
{
	auto_mode(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_WHEN_QUIET);
	write_mib(0, 4); // the run's first 4 MiB: no_stream, cached, through the gate
	std::this_thread::sleep_for(3 * dcache::core::k_yield_quiet);
	write_mib(4, 6);
	EXPECT_EQ(stat("write_direct"), 2u) << "quiet: direct";
	EXPECT_EQ(stat("auto_write_backs"), 1u) << "before the first direct WRITE after cached ones";
	auto small_read = hold_small_read();
	write_mib(6, 8);
	EXPECT_EQ(stat("write_dontcache"), 2u) << "a cached READ in flight: dontcache";
	EXPECT_EQ(stat("auto_yields"), 0u) << "Auto_Stream_Yield_Ms is 0: nothing waits";
	release();
	EXPECT_EQ(small_read.get().bytes, 4 * KiB);
	std::this_thread::sleep_for(3 * dcache::core::k_yield_quiet);
	write_mib(8, 10);
	EXPECT_EQ(stat("write_direct"), 4u);
	EXPECT_EQ(stat("auto_write_backs"), 2u) << "and again after the dontcache ones";
	EXPECT_EQ(stat("write_auto_stream"), 6u);
}

} // namespace
