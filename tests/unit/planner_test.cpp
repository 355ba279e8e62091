// The planner, exhaustively: alignments 512/4096 (and M != O), offsets and
// lengths around every boundary, the page threshold, memory alignment,
// zero length.  Each plan is checked against the rules stated directly
// (tiling, alignment, maximal middle, threshold, edge kind), and the
// disposition against an oracle that finds the aligned middle by scanning
// rather than by rounding arithmetic.
#include "planner.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

using namespace dcache::core;

namespace {

// Fake payload addresses: the planner never dereferences them.
struct iovec at(std::uintptr_t addr, std::size_t len)
{
	return {reinterpret_cast<void *>(addr), len};
}
constexpr std::uintptr_t k_base = 0x10000000; // 64 KiB-aligned and more

plan_caps caps(std::uint32_t o, std::uint32_t m, std::uint32_t r = 0)
{
	plan_caps c;
	c.dio.offset_align = o;
	c.dio.mem_align = m;
	c.dio.read_align = r ? r : o;
	c.dio.from = dcache::io::dio_caps::source::fake;
	return c;
}

dcache_settings direct_settings(std::uint32_t pages = 2, bool dontcache = true,
				dcache_mem_misaligned mem = DCACHE_MEM_MISALIGNED_BOUNCE)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.direct_misaligned_num_pages = pages;
	s.direct_misaligned_dontcache = dontcache;
	s.direct_misaligned_memory = mem;
	return s;
}

std::string describe(const plan &p)
{
	std::string out = std::string(disposition_name(p.disp)) + " [";
	for (const auto &s : p.segments())
		out += std::string(seg_kind_name(s.kind)) + "@" + std::to_string(s.offset) + "+" +
		       std::to_string(s.length) + (s.bounce ? "(bounce) " : " ");
	return out + "]";
}

// Oracle: first multiple of o at or after off, by walking.
std::uint64_t first_aligned_at_or_after(std::uint64_t off, std::uint64_t o)
{
	std::uint64_t x = off;
	while (x % o != 0)
		++x;
	return x;
}
std::uint64_t last_aligned_at_or_before(std::uint64_t end, std::uint64_t o)
{
	std::uint64_t x = end;
	while (x % o != 0)
		--x;
	return x;
}

std::vector<std::uint64_t> around(std::initializer_list<std::uint64_t> points)
{
	std::set<std::uint64_t> v;
	for (auto p : points)
		for (std::int64_t d : {-1, 0, 1})
			if (static_cast<std::int64_t>(p) + d >= 0)
				v.insert(static_cast<std::uint64_t>(static_cast<std::int64_t>(p) + d));
	return {v.begin(), v.end()};
}

// ---- WRITE: exhaustive ----------------------------------------------------

struct align_case {
	std::uint32_t o, m;
};

class write_plan_table : public ::testing::TestWithParam<align_case> {};

TEST_P(write_plan_table, rules_hold_everywhere)
{
	const auto [o, m] = GetParam();
	const std::uint64_t page = k_page_size;
	const std::uint64_t cut = std::max<std::uint64_t>(o, page);
	std::size_t checked = 0, splits = 0, directs = 0;
	for (std::uint32_t pages : {0u, 2u, 3u}) {
		for (bool dc : {true, false}) {
			const dcache_settings s = direct_settings(pages, dc);
			const seg_kind edge = dc ? seg_kind::dontcache : seg_kind::buffered;
			const std::uint64_t thr = pages * page;
			for (std::uint64_t off : around({0, o, 2ull * o, page, 3 * page, 1000000})) {
				for (std::uint64_t len : around({0, o, m, 2ull * o, page, 2 * page, 3 * page, thr + o,
								 thr + 2ull * o, 8 * page})) {
					for (std::uintptr_t shift : {std::uintptr_t{0}, std::uintptr_t{1},
								     std::uintptr_t{512}, std::uintptr_t{4096}}) {
						const struct iovec v = at(k_base + shift, len);
						const plan p = plan_write(s, caps(o, m), off, {&v, 1});
						SCOPED_TRACE("o=" + std::to_string(o) + " m=" + std::to_string(m) +
							     " pages=" + std::to_string(pages) + " dc=" +
							     std::to_string(dc) + " off=" + std::to_string(off) +
							     " len=" + std::to_string(len) +
							     " shift=" + std::to_string(shift) + " -> " + describe(p));
						++checked;
						// Tiling.
						ASSERT_LE(p.nsegs, 3);
						ASSERT_EQ(p.nsegs == 0, len == 0);
						std::uint64_t pos = off;
						int ndirect = 0;
						for (const auto &seg : p.segments()) {
							ASSERT_EQ(seg.offset, pos);
							ASSERT_GT(seg.length, 0u);
							pos += seg.length;
							if (seg.kind == seg_kind::direct) {
								++ndirect;
								// cut at page (or coarser) boundaries
								EXPECT_EQ(seg.offset % cut, 0u);
								EXPECT_EQ(seg.length % cut, 0u);
								// payload of the middle starts at seg.offset - off
								const bool mem_ok =
									(k_base + shift + (seg.offset - off)) % m ==
										0 &&
									seg.length % m == 0;
								EXPECT_EQ(seg.bounce, !mem_ok);
							} else {
								EXPECT_EQ(seg.kind, edge);
								EXPECT_FALSE(seg.bounce);
							}
						}
						ASSERT_EQ(pos, off + len);
						ASSERT_LE(ndirect, 1);

						// Oracle for the disposition.  The middle is cut at
						// page boundaries (or O, if coarser): an O_DIRECT
						// write drops every cached page it touches.
						const std::uint64_t ms = first_aligned_at_or_after(off, cut);
						const std::uint64_t me = last_aligned_at_or_before(off + len, cut);
						disposition want;
						if (len < std::max<std::uint64_t>(o, m))
							want = disposition::too_small;
						else if (me <= ms)
							want = disposition::no_middle;
						else if ((ms != off || me != off + len) && me - ms < thr)
							want = disposition::no_middle;
						else if (ms != off || me != off + len)
							want = disposition::split;
						else
							want = disposition::direct;
						ASSERT_EQ(p.disp, want);
						if (want == disposition::split || want == disposition::direct) {
							ASSERT_EQ(ndirect, 1);
							// The middle is maximal: head and tail shorter than the cut.
							const auto &mid = p.segs[ms != off ? 1 : 0];
							EXPECT_EQ(mid.offset, ms);
							EXPECT_EQ(mid.offset + mid.length, me);
							splits += want == disposition::split;
							directs += want == disposition::direct;
						} else {
							ASSERT_EQ(ndirect, 0);
							EXPECT_LE(p.nsegs, 1);
						}
					}
				}
			}
		}
	}
	// The table must actually reach every interesting outcome.
	EXPECT_GT(splits, 0u);
	EXPECT_GT(directs, 0u);
	EXPECT_GT(checked, 1000u);
}

INSTANTIATE_TEST_SUITE_P(planner, write_plan_table,
			 ::testing::Values(align_case{512, 512}, align_case{4096, 4096}, align_case{4096, 512},
					   align_case{512, 4096}),
			 [](const auto &p) {
				 return "o" + std::to_string(p.param.o) + "_m" + std::to_string(p.param.m);
			 });

// ---- WRITE: named cases ---------------------------------------------------

TEST(planner_write, split_example)
{
	// [1000, 21000) with O=4096: head 3096, middle [4096, 20480), tail 520.
	const struct iovec v = at(k_base, 20000);
	const plan p = plan_write(direct_settings(2), caps(4096, 512), 1000, {&v, 1});
	ASSERT_EQ(p.disp, disposition::split) << describe(p);
	ASSERT_EQ(p.nsegs, 3);
	EXPECT_EQ(p.segs[0].length, 4096u - 1000u);
	EXPECT_EQ(p.segs[1].offset, 4096u);
	EXPECT_EQ(p.segs[1].length, 16384u);
	EXPECT_EQ(p.segs[2].offset, 20480u);
	EXPECT_EQ(p.segs[2].length, 520u);
	EXPECT_EQ(p.segs[1].kind, seg_kind::direct);
	EXPECT_EQ(p.segs[0].kind, seg_kind::dontcache);
	// Payload byte 3096 sits at k_base+3096: not 512-aligned -> bounce.
	EXPECT_TRUE(p.segs[1].bounce);
}

TEST(planner_write, middle_threshold_exact)
{
	// Head of 1 byte, middle of exactly N pages: split; N pages - O: no_middle.
	for (std::uint32_t pages : {2u, 4u}) {
		const std::uint64_t mid = pages * k_page_size;
		const struct iovec v1 = at(k_base, 4095 + mid);
		EXPECT_EQ(plan_write(direct_settings(pages), caps(4096, 4096), 1, {&v1, 1}).disp, disposition::split);
		const struct iovec v2 = at(k_base, 4095 + mid - 4096);
		EXPECT_EQ(plan_write(direct_settings(pages), caps(4096, 4096), 1, {&v2, 1}).disp,
			  disposition::no_middle);
	}
	// Fully aligned WRITE smaller than the threshold is still direct: the
	// threshold only applies when a head or tail exists.
	const struct iovec v = at(k_base, 4096);
	EXPECT_EQ(plan_write(direct_settings(16), caps(4096, 4096), 8192, {&v, 1}).disp, disposition::direct);
}

TEST(planner_write, no_alignment_and_fallback)
{
	const struct iovec v = at(k_base, 1 << 20);
	for (auto c : {caps(0, 0), caps(4096, 0), caps(0, 512)}) {
		const plan p = plan_write(direct_settings(), c, 0, {&v, 1});
		EXPECT_EQ(p.disp, disposition::no_alignment);
		ASSERT_EQ(p.nsegs, 1);
		EXPECT_EQ(p.segs[0].kind, seg_kind::dontcache);
	}
	plan_caps c = caps(4096, 4096);
	c.odirect = false;
	const plan p = plan_write(direct_settings(2, false), c, 0, {&v, 1});
	EXPECT_EQ(p.disp, disposition::fallback);
	EXPECT_EQ(p.segs[0].kind, seg_kind::buffered);
}

TEST(planner_write, mem_misaligned_buffered_setting)
{
	const struct iovec v = at(k_base + 1, 64 * 1024);
	const plan p =
		plan_write(direct_settings(2, true, DCACHE_MEM_MISALIGNED_BUFFERED), caps(4096, 512), 0, {&v, 1});
	EXPECT_EQ(p.disp, disposition::mem_misaligned);
	ASSERT_EQ(p.nsegs, 1);
	EXPECT_EQ(p.segs[0].length, 64u * 1024u);
	const plan b = plan_write(direct_settings(2, true, DCACHE_MEM_MISALIGNED_BOUNCE), caps(4096, 512), 0, {&v, 1});
	EXPECT_EQ(b.disp, disposition::direct);
	EXPECT_TRUE(b.segs[0].bounce);
}

TEST(planner_write, multi_iovec_memory_alignment)
{
	// Two aligned pieces: aligned; a piece of odd length inside the middle: not.
	const struct iovec good[2] = {at(k_base, 8192), at(k_base + 65536, 8192)};
	EXPECT_FALSE(plan_write(direct_settings(), caps(4096, 512), 0, good).segs[0].bounce);
	const struct iovec bad[2] = {at(k_base, 8000), at(k_base + 65536, 8384)};
	const plan p = plan_write(direct_settings(), caps(4096, 512), 0, bad);
	EXPECT_EQ(p.disp, disposition::direct);
	EXPECT_TRUE(p.segs[0].bounce);
	// Head in the first iovec, middle starting exactly at the second.
	const struct iovec edge[2] = {at(k_base + 7, 96), at(k_base + 65536, 3 * 4096)};
	const plan q = plan_write(direct_settings(1), caps(4096, 512), 4000, edge);
	ASSERT_EQ(q.disp, disposition::split) << describe(q);
	EXPECT_FALSE(q.segs[1].bounce);
}

TEST(planner, payload_mem_aligned_ranges)
{
	const struct iovec v[3] = {at(k_base + 100, 412), at(k_base + 4096, 1024), at(k_base + 9000, 100)};
	EXPECT_TRUE(payload_mem_aligned(v, 412, 1024, 512));  // exactly the second piece
	EXPECT_FALSE(payload_mem_aligned(v, 0, 512, 512));    // first piece misaligned
	EXPECT_FALSE(payload_mem_aligned(v, 412, 1124, 512)); // reaches into the third
	EXPECT_TRUE(payload_mem_aligned(v, 412, 512, 512));   // first half of the second
	EXPECT_TRUE(payload_mem_aligned(v, 0, 1536, 1));
	EXPECT_TRUE(payload_mem_aligned(v, 5, 0, 512)); // empty range
}

TEST(planner_write, non_direct_modes_are_one_segment)
{
	const struct iovec v = at(k_base + 3, 12345);
	struct mc {
		dcache_mode mode;
		seg_kind kind;
		disposition disp;
	};
	for (const mc &c : {mc{DCACHE_MODE_BUFFERED, seg_kind::buffered, disposition::buffered},
			    mc{DCACHE_MODE_DONTCACHE, seg_kind::dontcache, disposition::dontcache},
			    mc{DCACHE_MODE_FADVISE, seg_kind::buffered, disposition::fadvise}}) {
		dcache_settings s = direct_settings();
		s.io_cache_write = c.mode;
		const plan p = plan_write(s, caps(512, 512), 777, {&v, 1});
		EXPECT_EQ(p.disp, c.disp);
		ASSERT_EQ(p.nsegs, 1);
		EXPECT_EQ(p.segs[0].kind, c.kind);
		EXPECT_EQ(p.segs[0].offset, 777u);
		EXPECT_EQ(p.segs[0].length, 12345u);
	}
	for (dcache_mode m : {DCACHE_MODE_DIRECT_DATA_SYNC, DCACHE_MODE_DIRECT_FILE_SYNC}) {
		dcache_settings s = direct_settings();
		s.io_cache_write = m;
		const struct iovec a = at(k_base, 8192);
		EXPECT_EQ(plan_write(s, caps(512, 512), 0, {&a, 1}).disp, disposition::direct);
	}
}

TEST(planner_write, zero_length)
{
	for (dcache_mode m : {DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT}) {
		dcache_settings s = direct_settings();
		s.io_cache_write = m;
		const plan p = plan_write(s, caps(4096, 512), 12, {});
		EXPECT_EQ(p.nsegs, 0);
		EXPECT_FALSE(p.has_direct());
	}
}

// ---- READ ---------------------------------------------------------------

class read_plan_table : public ::testing::TestWithParam<align_case> {};

TEST_P(read_plan_table, widening_rules)
{
	const auto [r, m] = GetParam();
	const dcache_settings s = direct_settings();
	for (std::uint64_t off : around({0, r, 2ull * r, 4096, 12288, 1000000})) {
		for (std::uint64_t len : around({0, r, 2ull * r, 4096, 65536})) {
			for (std::uintptr_t shift : {std::uintptr_t{0}, std::uintptr_t{1}, std::uintptr_t{512}}) {
				const struct iovec v = at(k_base + shift, len);
				// Offset alignment 4096, read alignment r (R <= O).
				const plan p =
					plan_read(s, caps(std::max<std::uint32_t>(r, 4096), m, r), off, len, {&v, 1});
				SCOPED_TRACE("r=" + std::to_string(r) + " off=" + std::to_string(off) +
					     " len=" + std::to_string(len) + " -> " + describe(p));
				if (len == 0) {
					EXPECT_EQ(p.nsegs, 0);
					continue;
				}
				ASSERT_EQ(p.nsegs, 1);
				const segment &seg = p.segs[0];
				if (len < r) {
					EXPECT_EQ(p.disp, disposition::too_small);
					EXPECT_EQ(seg.kind, seg_kind::dontcache);
					EXPECT_EQ(seg.offset, off);
					EXPECT_EQ(seg.length, len);
					continue;
				}
				EXPECT_EQ(p.disp, disposition::direct);
				EXPECT_EQ(seg.kind, seg_kind::direct);
				EXPECT_EQ(seg.offset % r, 0u);
				EXPECT_EQ(seg.length % r, 0u);
				EXPECT_LE(seg.offset, off);
				EXPECT_GE(seg.offset + seg.length, off + len);
				// Minimal widening: less than one unit on each side.
				EXPECT_LT(off - seg.offset, r);
				EXPECT_LT(seg.offset + seg.length - (off + len), r);
				const bool exact = seg.offset == off && seg.length == len &&
						   (k_base + shift) % m == 0 && len % m == 0;
				EXPECT_EQ(seg.bounce, !exact);
			}
		}
	}
}

INSTANTIATE_TEST_SUITE_P(planner, read_plan_table,
			 ::testing::Values(align_case{512, 512}, align_case{4096, 4096}, align_case{512, 4096}),
			 [](const auto &p) {
				 return "r" + std::to_string(p.param.o) + "_m" + std::to_string(p.param.m);
			 });

TEST(planner_read, read_align_defaults_to_offset_align)
{
	plan_caps c = caps(4096, 512);
	c.dio.read_align = 0;
	const struct iovec v = at(k_base, 1000);
	// 1000 < O=4096 -> too small, proving R fell back to O.
	EXPECT_EQ(plan_read(direct_settings(), c, 0, 1000, {&v, 1}).disp, disposition::too_small);
	c.dio.read_align = 512;
	EXPECT_EQ(plan_read(direct_settings(), c, 0, 1000, {&v, 1}).disp, disposition::direct);
}

TEST(planner_read, other_modes_and_fallbacks)
{
	const struct iovec v = at(k_base, 8192);
	dcache_settings s = direct_settings();
	s.io_cache_read = DCACHE_MODE_BUFFERED;
	EXPECT_EQ(plan_read(s, caps(512, 512), 0, 8192, {&v, 1}).segs[0].kind, seg_kind::buffered);
	s.io_cache_read = DCACHE_MODE_DONTCACHE;
	EXPECT_EQ(plan_read(s, caps(512, 512), 0, 8192, {&v, 1}).segs[0].kind, seg_kind::dontcache);
	s.io_cache_read = DCACHE_MODE_FADVISE;
	EXPECT_EQ(plan_read(s, caps(512, 512), 0, 8192, {&v, 1}).disp, disposition::fadvise);
	s.io_cache_read = DCACHE_MODE_DIRECT;
	EXPECT_EQ(plan_read(s, caps(0, 0), 0, 8192, {&v, 1}).disp, disposition::no_alignment);
	plan_caps c = caps(512, 512);
	c.odirect = false;
	const plan p = plan_read(s, c, 0, 8192, {&v, 1});
	EXPECT_EQ(p.disp, disposition::fallback);
	EXPECT_EQ(p.segs[0].kind, seg_kind::dontcache);
}

} // namespace
