// The auto policy's one decision (auto_policy.h), table by table: every
// rule, its boundaries, each kind of memory, both directions and the
// settings that shape it.
#include "auto_policy.h"

#include <gtest/gtest.h>

#include <string>

using namespace dcache::core;
using dcache::io::memory_state;

namespace {

constexpr std::uint64_t KiB = 1 << 10, MiB = 1 << 20, GiB = 1ull << 30;

// 24 GiB mostly free; a 1 GiB group nearly full; nothing known.
constexpr memory_state k_plenty{20 * GiB, 22 * GiB, memory_state::source::machine};
constexpr memory_state k_short{20 * MiB, 900 * MiB, memory_state::source::cgroup_v1};
constexpr memory_state k_unknown{};
// ... and the same plenty on a VM that reports its free memory to a host.
constexpr memory_state k_plenty_reported{20 * GiB, 22 * GiB, memory_state::source::machine, true};
constexpr memory_state k_short_reported{20 * MiB, 900 * MiB, memory_state::source::cgroup_v1, true};

dcache_settings with(dcache_mode read_stream, dcache_mode write_stream, std::uint32_t min_mib = 4)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_AUTO;
	s.io_cache_write = DCACHE_MODE_AUTO;
	s.auto_read_stream = read_stream;
	s.auto_write_stream = write_stream;
	s.auto_stream_min_mib = min_mib;
	return s;
}
const dcache_settings k_defaults = with(DCACHE_MODE_DIRECT, DCACHE_MODE_DONTCACHE);

dcache_settings spare(dcache_spare_memory how, dcache_mode write_stream = DCACHE_MODE_DONTCACHE)
{
	dcache_settings s = with(DCACHE_MODE_DIRECT, write_stream);
	s.auto_write_spare_memory = how;
	return s;
}

struct decide_case {
	const char *name;
	dcache_settings s;
	bool write;
	std::uint64_t length;
	auto_file_view file;
	memory_state memory;
	auto_choice want;
	bool quiet = true; // the export's cached requests
};

class auto_decide_table : public ::testing::TestWithParam<decide_case> {};

TEST_P(auto_decide_table, mode_and_reason_are_as_stated)
{
	const decide_case &c = GetParam();
	const auto_choice got = auto_decide(c.s, c.write, c.length, c.file, c.memory, c.quiet);
	EXPECT_EQ(got.mode, c.want.mode) << dcache_mode_name(got.mode) << " for " << dcache_mode_name(c.want.mode);
	EXPECT_EQ(got.reason, c.want.reason)
		<< auto_reason_name(got.reason) << " for " << auto_reason_name(c.want.reason);
}

constexpr auto_choice cached(auto_reason r)
{
	return {DCACHE_MODE_BUFFERED, r};
}
constexpr auto_choice direct(auto_reason r)
{
	return {DCACHE_MODE_DIRECT, r};
}
constexpr auto_choice dontcache(auto_reason r)
{
	return {DCACHE_MODE_DONTCACHE, r};
}

// A request after its run moved this many bytes, re-reading (rereads) a
// span of that size.
constexpr auto_file_view run(std::uint64_t bytes, bool rereads = false, std::uint64_t span = 0)
{
	return {bytes, rereads, span};
}

// ... the first READ run of data written past the cache (free_reported),
// re-reading a span of that size.
constexpr auto_file_view past(std::uint64_t bytes)
{
	return {bytes, true, bytes, true, true};
}

INSTANTIATE_TEST_SUITE_P(
	policy, auto_decide_table,
	::testing::Values(
		// small I/O stays cached, whatever the file does
		decide_case{"small_read_in_a_stream", k_defaults, false, 4 * KiB, run(GiB), k_short,
			    cached(auto_reason::small)},
		decide_case{"small_write_in_a_stream", k_defaults, true, 64 * KiB - 1, run(GiB), k_short,
			    cached(auto_reason::small)},
		decide_case{"64KiB_is_not_small", k_defaults, false, 64 * KiB, run(GiB), k_short,
			    direct(auto_reason::stream)},
		// a run shorter than Auto_Stream_Min_MiB is no stream
		decide_case{"random_read", k_defaults, false, MiB, run(MiB), k_short, cached(auto_reason::no_stream)},
		decide_case{"run_just_short", k_defaults, false, MiB, run(4 * MiB - 1), k_short,
			    cached(auto_reason::no_stream)},
		decide_case{"run_at_the_threshold", k_defaults, false, MiB, run(4 * MiB), k_short,
			    direct(auto_reason::stream)},
		decide_case{"threshold_from_the_settings", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DONTCACHE, 64), false,
			    MiB, run(63 * MiB), k_short, cached(auto_reason::no_stream)},
		decide_case{"one_MiB_threshold", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DONTCACHE, 1), false, MiB,
			    run(MiB), k_short, direct(auto_reason::stream)},
		decide_case{"write_stream", k_defaults, true, MiB, run(GiB), k_short, dontcache(auto_reason::stream)},
		decide_case{"stream_modes_from_the_settings_read", with(DCACHE_MODE_DONTCACHE, DCACHE_MODE_DIRECT),
			    false, MiB, run(GiB), k_short, dontcache(auto_reason::stream)},
		decide_case{"stream_modes_from_the_settings_write", with(DCACHE_MODE_DONTCACHE, DCACHE_MODE_DIRECT),
			    true, MiB, run(GiB), k_short, direct(auto_reason::stream)},
		// direct_when_quiet: direct unless the export's cached requests are busy
		decide_case{"write_stream_when_quiet", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_WHEN_QUIET), true,
			    MiB, run(GiB), k_short, direct(auto_reason::stream)},
		decide_case{"write_stream_when_busy", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_WHEN_QUIET), true,
			    MiB, run(GiB), k_short, dontcache(auto_reason::stream), false},
		decide_case{"too_big_write_rewrite_when_busy", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_WHEN_QUIET),
			    true, MiB, run(GiB, true, 100 * MiB), k_plenty, dontcache(auto_reason::stream), false},
		decide_case{"busy_leaves_memory_free_cached", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_WHEN_QUIET),
			    true, MiB, run(GiB), k_plenty, cached(auto_reason::memory_free), false},
		decide_case{"busy_leaves_read_streams_direct", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_WHEN_QUIET),
			    false, MiB, run(GiB), k_short, direct(auto_reason::stream), false},
		decide_case{"quiet_changes_no_plain_direct", with(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT), true, MiB,
			    run(GiB), k_short, direct(auto_reason::stream), false},
		// memory to spare: streams stay cached (WRITEs written behind), rewrites do not
		decide_case{"read_stream_memory_free", k_defaults, false, MiB, run(GiB), k_plenty,
			    cached(auto_reason::memory_free)},
		decide_case{"write_stream_memory_free_cached", k_defaults, true, MiB, run(GiB), k_plenty,
			    cached(auto_reason::memory_free)},
		decide_case{"rewrite_memory_free_still_a_stream", k_defaults, true, MiB, run(GiB, true, 100 * MiB),
			    k_plenty, dontcache(auto_reason::stream)},
		// Auto_Write_Spare_Memory: a WRITE stream with memory to spare
		decide_case{"write_spare_memory_reported", k_defaults, true, MiB, run(GiB), k_plenty_reported,
			    dontcache(auto_reason::free_reported)},
		decide_case{"write_spare_memory_reported_when_quiet",
			    spare(DCACHE_SPARE_UNLESS_REPORTED, DCACHE_MODE_DIRECT_WHEN_QUIET), true, MiB, run(GiB),
			    k_plenty_reported, direct(auto_reason::free_reported)},
		decide_case{"write_spare_memory_reported_cache", spare(DCACHE_SPARE_CACHE), true, MiB, run(GiB),
			    k_plenty_reported, cached(auto_reason::memory_free)},
		decide_case{"write_spare_memory_stream", spare(DCACHE_SPARE_STREAM), true, MiB, run(GiB), k_plenty,
			    dontcache(auto_reason::stream)},
		decide_case{"write_spare_memory_stream_reported", spare(DCACHE_SPARE_STREAM), true, MiB, run(GiB),
			    k_plenty_reported, dontcache(auto_reason::stream)},
		decide_case{"read_spare_memory_reported", spare(DCACHE_SPARE_STREAM), false, MiB, run(GiB),
			    k_plenty_reported, cached(auto_reason::memory_free)},
		decide_case{"reported_with_nothing_spare_is_a_stream", k_defaults, true, MiB, run(GiB),
			    k_short_reported, dontcache(auto_reason::stream)},
		decide_case{"reported_small_write", k_defaults, true, 4 * KiB, run(GiB), k_plenty_reported,
			    cached(auto_reason::small)},
		decide_case{"reported_write_run_start", k_defaults, true, MiB, run(MiB), k_plenty_reported,
			    cached(auto_reason::no_stream)},
		decide_case{"reported_rewrite", k_defaults, true, MiB, run(GiB, true, 100 * MiB), k_plenty_reported,
			    dontcache(auto_reason::stream)},
		// ... and the first READ run of data so written (begun beside a working set:
		// auto_state's), while memory is spare
		decide_case{"read_back_past_the_cache", k_defaults, false, MiB, past(GiB), k_plenty_reported,
			    direct(auto_reason::free_reported)},
		decide_case{"read_back_past_the_cache_start", k_defaults, false, MiB, past(MiB), k_plenty_reported,
			    cached(auto_reason::no_stream)},
		decide_case{"read_back_past_the_cache_small", k_defaults, false, 4 * KiB, past(GiB), k_plenty_reported,
			    cached(auto_reason::small)},
		decide_case{"read_back_past_the_cache_nothing_spare", k_defaults, false, MiB, past(8 * MiB),
			    k_short_reported, cached(auto_reason::reused)},
		decide_case{"read_back_past_the_cache_dontcache", with(DCACHE_MODE_DONTCACHE, DCACHE_MODE_DONTCACHE),
			    false, MiB, past(GiB), k_plenty_reported, dontcache(auto_reason::free_reported)},
		decide_case{"reported_leaves_a_plain_read_stream_cached", k_defaults, false, MiB, run(GiB),
			    k_plenty_reported, cached(auto_reason::memory_free), false},
		// ... while the run fits (half the capacity): its own pages count as free
		decide_case{"read_stream_at_the_fit", k_defaults, false, MiB, run(11 * GiB - MiB), k_plenty,
			    cached(auto_reason::memory_free)},
		decide_case{"read_stream_over_the_fit", k_defaults, false, MiB, run(11 * GiB - MiB + 1), k_plenty,
			    direct(auto_reason::stream)},
		decide_case{"write_stream_over_the_fit", k_defaults, true, MiB, run(11 * GiB), k_plenty,
			    dontcache(auto_reason::stream)},
		decide_case{"write_stream_free_below_the_reserve", k_defaults, true, MiB, run(GiB),
			    memory_state{128 * MiB - 1, GiB, memory_state::source::cgroup_v1},
			    dontcache(auto_reason::stream)},
		decide_case{"write_stream_unknown_memory", k_defaults, true, MiB, run(GiB), k_unknown,
			    dontcache(auto_reason::stream)},
		// the reserve: an eighth of 1 GiB is 128 MiB
		decide_case{"free_at_the_reserve", k_defaults, false, MiB, run(256 * MiB),
			    memory_state{128 * MiB, GiB, memory_state::source::cgroup_v1},
			    cached(auto_reason::memory_free)},
		decide_case{"free_below_the_reserve", k_defaults, false, MiB, run(256 * MiB),
			    memory_state{128 * MiB - 1, GiB, memory_state::source::cgroup_v1},
			    direct(auto_reason::stream)},
		// ... and at least 64 MiB
		decide_case{"reserve_floor", k_defaults, false, MiB, run(GiB),
			    memory_state{63 * MiB, 256 * MiB, memory_state::source::cgroup_v2},
			    direct(auto_reason::stream)},
		decide_case{"unknown_memory_has_nothing_free", k_defaults, false, MiB, run(GiB), k_unknown,
			    direct(auto_reason::stream)},
		// data used again stays cached while it fits (half the capacity)
		decide_case{"working_set_reread", k_defaults, false, MiB, run(8 * MiB, true, 384 * MiB), k_short,
			    cached(auto_reason::reused)},
		decide_case{"reread_at_the_fit", k_defaults, false, MiB, run(8 * MiB, true, 450 * MiB), k_short,
			    cached(auto_reason::reused)},
		decide_case{"reread_over_the_fit", k_defaults, false, MiB, run(8 * MiB, true, 450 * MiB + 1), k_short,
			    direct(auto_reason::too_big)},
		decide_case{"multi_GiB_stream_reread", k_defaults, false, MiB, run(GiB, true, 6 * GiB), k_short,
			    direct(auto_reason::too_big)},
		// a rewrite replaces the cached copy whole: a stream, fitting or not
		decide_case{"rewrite_that_fits_is_a_stream", k_defaults, true, MiB, run(8 * MiB, true, 100 * MiB),
			    k_short, dontcache(auto_reason::stream)},
		decide_case{"rewrite_too_big_is_a_stream", k_defaults, true, MiB, run(GiB, true, 2 * GiB), k_short,
			    dontcache(auto_reason::stream)},
		decide_case{"reread_unknown_memory_fits_half_a_GiB", k_defaults, false, MiB,
			    run(8 * MiB, true, 512 * MiB), k_unknown, cached(auto_reason::reused)},
		decide_case{"reread_with_memory_free_counts_as_free", k_defaults, false, MiB,
			    run(8 * MiB, true, 6 * GiB), k_plenty, cached(auto_reason::memory_free)},
		// a re-read that is not (yet) a stream is just that
		decide_case{"reread_start", k_defaults, false, MiB, run(MiB, true, 6 * GiB), k_short,
			    cached(auto_reason::no_stream)}),
	[](const ::testing::TestParamInfo<decide_case> &i) { return std::string(i.param.name); });

TEST(auto_policy, memory_figures)
{
	EXPECT_EQ(auto_capacity(k_short), 900 * MiB);
	EXPECT_EQ(auto_capacity(k_unknown), k_auto_unknown_capacity);
	EXPECT_EQ(auto_reserve(k_plenty), 22 * GiB / 8);
	EXPECT_EQ(auto_reserve(memory_state{0, 128 * MiB, memory_state::source::machine}), 64 * MiB);
	EXPECT_EQ(auto_fit(k_short), 450 * MiB);
	EXPECT_EQ(auto_fit(k_unknown), 512 * MiB);
}

TEST(auto_policy, reason_names)
{
	const char *names[] = {"small", "no_stream", "memory_free", "reused", "too_big", "stream", "free_reported"};
	for (std::size_t i = 0; i < k_auto_reasons; ++i)
		EXPECT_STREQ(auto_reason_name(static_cast<auto_reason>(i)), names[i]);
}

} // namespace
