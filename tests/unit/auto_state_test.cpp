// What auto keeps: the per-file stream table (runs, reordering, re-reads,
// slots, idleness) and the per-export history (spans, the byte and entry
// bounds, scan resistance), each on its own.  The requests that update
// them are auto_path_test.cpp's.
#include "auto_history.h"
#include "auto_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

using namespace dcache::core;

namespace {

constexpr std::uint64_t KiB = 1 << 10, MiB = 1 << 20, GiB = 1ull << 30;
constexpr std::uint64_t k_min = 4 * MiB; // the default Auto_Stream_Min_MiB
constexpr std::int64_t ms = 1000 * 1000;

// ---- the stream table ----------------------------------------------------

TEST(stream_table, a_sequential_reader_is_one_run)
{
	stream_table t;
	run_view v;
	for (std::uint64_t i = 0; i < 16; ++i) {
		v = t.observe(i * MiB, MiB, static_cast<std::int64_t>(i) * ms, k_min);
		EXPECT_EQ(v.is_new, i == 0);
		EXPECT_EQ(v.slot, 0);
	}
	EXPECT_EQ(v.start, 0u);
	EXPECT_EQ(v.bytes, 15 * MiB) << "before the last request";
	EXPECT_EQ(t.runs()[0].bytes, 16 * MiB);
}

TEST(stream_table, requests_overtaking_each_other_stay_in_the_run)
{
	// 1 MiB READs of 16 in flight, served in an order of their own.
	stream_table t;
	const int order[] = {0, 2, 1, 5, 3, 4, 15, 6, 8, 7, 9, 14, 10, 13, 11, 12, 16, 18, 17};
	run_view v;
	for (const int i : order) {
		v = t.observe(static_cast<std::uint64_t>(i) * MiB, MiB, 0, k_min);
		EXPECT_EQ(v.slot, 0) << "request " << i;
	}
	EXPECT_EQ(t.runs()[0].bytes, 19 * MiB);
}

TEST(stream_table, misaligned_records_in_and_out_of_order_stay_in_the_run)
{
	// 1,000,000-byte WRITEs: neighbours share a unit at each boundary.
	stream_table t;
	const int order[] = {0, 1, 3, 2, 4, 6, 5, 7};
	run_view v;
	for (const int i : order) {
		v = t.observe(static_cast<std::uint64_t>(i) * 1000000, 1000000, 0, k_min);
		EXPECT_EQ(v.slot, 0) << "record " << i;
	}
	EXPECT_EQ(t.runs()[0].bytes, 8000000u);
}

TEST(stream_table, a_run_that_starts_small_takes_larger_requests_in_any_order)
{
	stream_table t;
	(void)t.observe(0, 64 * KiB, 0, k_min);
	// The client's readahead grown to 1 MiB, 16 in flight, served last
	// first.
	for (int i = 15; i >= 0; --i)
		EXPECT_EQ(t.observe(64 * KiB + static_cast<std::uint64_t>(i) * MiB, MiB, 0, k_min).slot, 0) << i;
	EXPECT_EQ(t.runs()[0].bytes, 64 * KiB + 16 * MiB);
	EXPECT_EQ(t.runs()[0].unit_shift, 19) << "units of half its largest request";
}

TEST(stream_table, too_far_ahead_is_another_run)
{
	stream_table t;
	(void)t.observe(0, MiB, 0, k_min);
	// Units of 512 KiB: 32 of them ahead of where the run goes on is the
	// most a request may overtake.
	EXPECT_EQ(t.observe(MiB + 16 * MiB, MiB, 0, k_min).slot, 0);
	const run_view far = t.observe(18 * MiB + 16 * MiB + 1, MiB, 0, k_min);
	EXPECT_TRUE(far.is_new);
	EXPECT_EQ(far.slot, 1);
}

TEST(stream_table, reading_again_from_the_start_is_a_new_run)
{
	stream_table t;
	for (std::uint64_t i = 0; i < 8; ++i)
		(void)t.observe(i * MiB, MiB, 0, k_min);
	const run_view again = t.observe(0, MiB, ms, k_min);
	EXPECT_TRUE(again.is_new) << "every unit it covers was served: a re-read";
	EXPECT_EQ(again.slot, 1);
	EXPECT_EQ(again.bytes, 0u);
	// ... and it goes on as a run of its own.
	const run_view next = t.observe(MiB, MiB, ms, k_min);
	EXPECT_EQ(next.slot, 1);
	EXPECT_EQ(next.bytes, MiB);
}

TEST(stream_table, reading_again_in_requests_smaller_than_the_runs_units_is_a_new_run)
{
	// A 4 MiB file read in 1 MiB READs (units of 512 KiB), then again from
	// its start in 64 KiB READs: each covers no unit whole.
	stream_table t;
	for (std::uint64_t i = 0; i < 4; ++i)
		(void)t.observe(i * MiB, MiB, 0, k_min);
	const run_view again = t.observe(0, 64 * KiB, 10 * ms, k_min);
	EXPECT_TRUE(again.is_new) << "inside a served unit: a re-read";
	for (std::uint64_t o = 64 * KiB; o < 4 * MiB; o += 64 * KiB)
		EXPECT_EQ(t.observe(o, 64 * KiB, 10 * ms, k_min).slot, again.slot) << o;
	EXPECT_EQ(t.runs()[0].bytes, 4 * MiB) << "the first pass's run moved no more";
	// A small late request in a unit not served yet is still the run's.
	stream_table u;
	(void)u.observe(0, MiB, 0, k_min);
	(void)u.observe(2 * MiB, MiB, 0, k_min);
	EXPECT_FALSE(u.observe(MiB, 64 * KiB, 0, k_min).is_new);
}

TEST(stream_table, a_late_request_fills_its_hole)
{
	stream_table t;
	(void)t.observe(0, MiB, 0, k_min);
	(void)t.observe(2 * MiB, MiB, 0, k_min); // 1 MiB still in flight
	(void)t.observe(3 * MiB, MiB, 0, k_min);
	const run_view late = t.observe(MiB, MiB, 0, k_min);
	EXPECT_FALSE(late.is_new);
	EXPECT_EQ(late.bytes, 3 * MiB);
	// Served now: the same range again is a re-read.
	EXPECT_TRUE(t.observe(MiB, MiB, 0, k_min).is_new);
}

TEST(stream_table, a_run_begins_at_its_lowest_offset_and_says_when_it_is_taken_up_again)
{
	stream_table t;
	(void)t.observe(2 * MiB, MiB, 0, k_min); // overtook the first two
	EXPECT_EQ(t.observe(0, MiB, ms, k_min).slot, 0);
	EXPECT_EQ(t.runs()[0].start, 0u);
	EXPECT_FALSE(t.observe(3 * MiB, MiB, 2 * ms, k_min).resumed);
	const run_view again = t.observe(4 * MiB, MiB, 2 * ms + k_auto_stream_idle_ms * ms, k_min);
	EXPECT_TRUE(again.resumed) << "after a pause of the idle time";
	EXPECT_FALSE(again.is_new);
	EXPECT_EQ(again.slot, 0);
}

TEST(stream_table, two_readers_of_one_file_are_two_runs)
{
	stream_table t;
	for (std::uint64_t i = 0; i < 8; ++i) {
		EXPECT_EQ(t.observe(i * MiB, MiB, 0, k_min).slot, 0);
		EXPECT_EQ(t.observe(GiB + i * MiB, MiB, 0, k_min).slot, 1);
	}
	EXPECT_EQ(t.runs()[0].bytes, 8 * MiB);
	EXPECT_EQ(t.runs()[1].bytes, 8 * MiB);
}

TEST(stream_table, random_requests_never_make_a_stream)
{
	stream_table t;
	std::mt19937_64 rng(42);
	std::uint64_t most = 0;
	for (int i = 0; i < 10000; ++i) {
		const std::uint64_t off = (rng() % (GiB / (64 * KiB))) * 64 * KiB;
		(void)t.observe(off, 64 * KiB, i, k_min);
		for (const stream_run &r : t.runs())
			most = std::max(most, r.bytes);
	}
	EXPECT_LT(most, k_min) << "64 KiB requests at random over 1 GiB";
}

TEST(stream_table, busy_streams_keep_their_slots_idle_ones_go)
{
	stream_table t;
	for (std::uint64_t s = 0; s < k_auto_streams; ++s)
		for (std::uint64_t i = 0; i < 4; ++i)
			(void)t.observe(s * GiB + i * MiB, MiB, 0, k_min);
	// Every slot holds a stream of 4 MiB, all busy: a ninth is not kept.
	const run_view ninth = t.observe(100 * GiB, MiB, ms, k_min);
	EXPECT_TRUE(ninth.is_new);
	EXPECT_EQ(ninth.slot, -1);
	// The streams go on where they were.
	EXPECT_EQ(t.observe(3 * GiB + 4 * MiB, MiB, ms, k_min).slot, 3);
	// Idle long enough, the others may be replaced: the oldest first.
	const run_view later = t.observe(100 * GiB, MiB, k_auto_stream_idle_ms * ms + ms, k_min);
	EXPECT_EQ(later.slot, 0);
}

TEST(stream_table, a_busy_run_below_the_threshold_is_replaced_first)
{
	stream_table t;
	for (std::uint64_t s = 0; s < k_auto_streams; ++s)
		for (std::uint64_t i = 0; i < (s == 5 ? 1 : 4); ++i)
			(void)t.observe(s * GiB + i * MiB, MiB, 0, k_min);
	EXPECT_EQ(t.observe(100 * GiB, MiB, ms, k_min).slot, 5);
}

// ---- the history ---------------------------------------------------------

TEST(auto_history, spans_grow_and_say_what_they_hold)
{
	export_stats st;
	auto_history h(st);
	EXPECT_FALSE(h.holds(1, 0, MiB));
	EXPECT_EQ(h.record(1, 0, 8 * MiB, false, GiB, GiB / 2), 8 * MiB);
	EXPECT_EQ(h.record(1, 4 * MiB, 16 * MiB, false, GiB, GiB / 2), 16 * MiB);
	EXPECT_TRUE(h.holds(1, 15 * MiB, 17 * MiB));
	EXPECT_FALSE(h.holds(1, 16 * MiB, 17 * MiB));
	EXPECT_FALSE(h.holds(2, 0, MiB));
	EXPECT_EQ(st.get(dcache::core::stat::auto_history_entries), 1u);
	EXPECT_EQ(st.get(dcache::core::stat::auto_history_bytes), 16 * MiB);
}

TEST(auto_history, a_truncate_forgets_the_data_it_took)
{
	export_stats st;
	auto_history h(st);
	(void)h.record(1, 4 * MiB, 16 * MiB, false, GiB, GiB / 2);
	EXPECT_TRUE(h.truncate(1, 8 * MiB));
	EXPECT_EQ(h.span(1), 4 * MiB);
	EXPECT_FALSE(h.holds(1, 8 * MiB, 9 * MiB));
	EXPECT_EQ(h.bytes(), 4 * MiB);
	EXPECT_TRUE(h.truncate(1, 32 * MiB)) << "growing it takes nothing";
	EXPECT_EQ(h.span(1), 4 * MiB);
	EXPECT_FALSE(h.truncate(1, 4 * MiB)) << "cut where its span begins: forgotten";
	EXPECT_EQ(h.entries(), 0u);
	EXPECT_EQ(h.bytes(), 0u);
	EXPECT_EQ(st.get(dcache::core::stat::auto_history_entries), 0u);
	EXPECT_EQ(st.get(dcache::core::stat::auto_history_bytes), 0u);
	EXPECT_FALSE(h.truncate(2, 0)) << "a file it never held";
}

TEST(auto_history, data_further_back_than_the_capacity_is_forgotten)
{
	// 64 MiB files streamed one after the other through 512 MiB: the
	// history holds the last 8.
	export_stats st;
	auto_history h(st);
	for (std::uint64_t f = 1; f <= 20; ++f)
		(void)h.record(f, 0, 64 * MiB, false, 512 * MiB, 256 * MiB);
	EXPECT_EQ(h.entries(), 8u);
	EXPECT_EQ(h.bytes(), 512 * MiB);
	EXPECT_FALSE(h.holds(12, 0, MiB));
	EXPECT_TRUE(h.holds(13, 0, MiB));
}

TEST(auto_history, a_stream_too_big_to_fit_pushes_nothing_out)
{
	export_stats st;
	auto_history h(st);
	for (std::uint64_t f = 1; f <= 4; ++f)
		(void)h.record(f, 0, 96 * MiB, false, GiB, GiB / 2); // a 384 MiB working set
	for (std::uint64_t at = 0; at < 6 * GiB; at += 64 * MiB)
		(void)h.record(99, 0, at + 64 * MiB, false, GiB, GiB / 2); // a 6 GiB stream
	EXPECT_EQ(h.span(99), 6 * GiB);
	for (std::uint64_t f = 1; f <= 4; ++f)
		EXPECT_TRUE(h.holds(f, 0, MiB)) << "file " << f;
	EXPECT_EQ(h.bytes(), 384 * MiB) << "the stream counts for nothing";
}

TEST(auto_history, data_read_again_outlasts_a_scan)
{
	export_stats st;
	auto_history h(st);
	for (std::uint64_t f = 1; f <= 3; ++f) {
		(void)h.record(f, 0, 64 * MiB, false, 512 * MiB, 256 * MiB);
		(void)h.record(f, 0, 64 * MiB, true, 512 * MiB, 256 * MiB); // read again
	}
	// A scan of 100 files of 64 MiB seen once each.
	for (std::uint64_t f = 100; f < 200; ++f)
		(void)h.record(f, 0, 64 * MiB, false, 512 * MiB, 256 * MiB);
	for (std::uint64_t f = 1; f <= 3; ++f)
		EXPECT_TRUE(h.holds(f, 0, MiB)) << "file " << f;
	EXPECT_EQ(h.bytes(), 512 * MiB);
}

TEST(auto_history, spans_are_counted_again_when_the_page_cache_shrinks)
{
	// Written with 20 GiB to spare: a 3 GiB stream fits, and counts.
	export_stats st;
	auto_history h(st);
	for (std::uint64_t f = 1; f <= 6; ++f)
		(void)h.record(f, 0, 64 * MiB, false, 20 * GiB, 10 * GiB);
	(void)h.record(99, 0, 3 * GiB, false, 20 * GiB, 10 * GiB);
	EXPECT_EQ(h.bytes(), 3 * GiB + 384 * MiB);
	// Then the server is in a 1 GiB group: the stream no longer fits,
	// counts for nothing, and pushes nothing out.
	(void)h.record(1, 0, 64 * MiB, true, GiB, GiB / 2);
	EXPECT_EQ(h.bytes(), 384 * MiB);
	EXPECT_EQ(h.entries(), 7u);
	EXPECT_EQ(st.get(dcache::core::stat::auto_history_bytes), 384 * MiB);
	for (std::uint64_t f : {1, 2, 3, 4, 5, 6, 99})
		EXPECT_TRUE(h.holds(f, 0, MiB)) << "file " << f;
}

TEST(auto_history, at_most_max_entries)
{
	export_stats st;
	auto_history h(st, 16);
	for (std::uint64_t f = 1; f <= 100; ++f)
		(void)h.record(f, 0, 4 * MiB, false, 100 * GiB, 50 * GiB);
	EXPECT_EQ(h.entries(), 16u);
	EXPECT_EQ(st.get(dcache::core::stat::auto_history_entries), 16u);
	EXPECT_TRUE(h.holds(100, 0, MiB));
	EXPECT_FALSE(h.holds(84, 0, MiB));
}

} // namespace
