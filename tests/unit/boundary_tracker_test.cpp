// The boundary-page tracker, through the C API over the fake backend: the
// page two misaligned direct-mode WRITEs share is written cached by both
// (either order), each piece written back at once, then dropped exactly
// once; the ceiling and the age limit bound what is held; COMMITs keep held
// pages; close, free, truncate and unexport release; named sync points force the races; Boundary_Tracking = false
// is today's behaviour.  Run under TSan and ASan as well.
#include "boundary_tracker.h"
#include "dcache_io/fake_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core_support.hpp"
#include "sync_points.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

using dcache::io::fake_backend;
using dcache::io::op_kind;
using namespace dcache::core;
using ::testing::HasSubstr;

namespace {

constexpr int k_fd = 7;
constexpr int k_fd2 = 8;
constexpr std::uint64_t k_page = 4096;

using namespace dcache::test;

std::vector<std::uint8_t> pattern(std::size_t len, unsigned seed)
{
	std::vector<std::uint8_t> v(len);
	for (std::size_t i = 0; i < len; ++i)
		v[i] = static_cast<std::uint8_t>((i * 131 + seed * 29 + 1) & 0xff);
	return v;
}

class boundary : public core_test {
protected:
	void SetUp() override
	{
		fb.set_caps({512, 4096, 4096, dcache::io::dio_caps::source::fake});
		dcache_settings s = dcache_settings_default();
		s.io_cache_write = DCACHE_MODE_DIRECT;
		make(s);
	}
	void TearDown() override
	{
		free_export();
		EXPECT_EQ(fb.open_direct_fds(), 0) << "O_DIRECT descriptor leaked";
	}
	void free_export() override
	{
		if (file2 != nullptr)
			dcache_file_free(file2);
		file2 = nullptr;
		core_test::free_export();
	}
	void make(const dcache_settings &s)
	{
		make_over(fb, s, "export 1 /boundary");
		file2 = dcache_file_new(exp);
		ASSERT_NE(file2, nullptr);
	}
	dcache_settings with(std::function<void(dcache_settings &)> change)
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_write = DCACHE_MODE_DIRECT;
		change(s);
		return s;
	}
	// WRITE [off, off+len) with a pattern; mirrors it into the model.
	dcache_io_result write(std::uint64_t off, std::size_t len, dcache_file *f = nullptr, int fd = k_fd,
			       unsigned seed = 1)
	{
		const auto data = pattern(len, seed);
		{
			std::lock_guard lock(model_mutex);
			auto &m = model[fd];
			if (m.size() < off + len)
				m.resize(off + len);
			std::copy(data.begin(), data.end(), m.begin() + static_cast<std::ptrdiff_t>(off));
		}
		const struct iovec v {
			const_cast<std::uint8_t *>(data.data()), data.size()
		};
		const dcache_io io{fd, off, &v, 1, false, nullptr};
		return dcache_write(exp, f ? f : file, &io);
	}
	std::vector<fake_backend::call> calls_of(op_kind op) const
	{
		std::vector<fake_backend::call> out;
		for (const auto &c : fb.calls())
			if (c.op == op)
				out.push_back(c);
		return out;
	}
	// Releases of one page: sync_file_range + DONTNEED on exactly it.
	std::size_t releases_of(std::uint64_t page, int fd = k_fd) const
	{
		std::size_t syncs = 0, drops = 0;
		for (const auto &c : fb.calls()) {
			if (c.fd != fd || c.offset != page * k_page || c.length != k_page)
				continue;
			syncs += c.op == op_kind::sync_range;
			drops += c.op == op_kind::fadvise_dontneed;
		}
		EXPECT_EQ(syncs, drops) << "every write-back is followed by its drop";
		return drops;
	}
	// Cached (tracked) and DONTCACHE writes touching a page, not direct.
	std::size_t buffered_writes_into(std::uint64_t page, int rwf) const
	{
		std::size_t n = 0;
		for (const auto &c : calls_of(op_kind::write))
			if (!c.direct && c.rwf == rwf && c.offset < (page + 1) * k_page &&
			    c.offset + c.length > page * k_page)
				++n;
		return n;
	}
	// Holds page 3 and page 35 of the first file (the tail pages of two
	// WRITEs whose neighbours have not come).
	void hold_pages_3_and_35()
	{
		ASSERT_EQ(write(0, 3 * k_page + 100).error, 0);
		ASSERT_EQ(write(32 * k_page, 3 * k_page + 100).error, 0);
	}
	// Every page ever held is either still held or was released for
	// exactly one reason.
	void expect_accounting() const
	{
		EXPECT_EQ(stat_of(exp, "boundary_held"), stat_of(exp, "boundary_completed") +
								 stat_of(exp, "boundary_released_by_age") +
								 stat_of(exp, "boundary_released_by_ceiling") +
								 stat_of(exp, "boundary_released_at_close") +
								 stat_of(exp, "boundary_released_by_truncate") +
								 stat_of(exp, "boundary_pages_current"));
	}
	void expect_contents(int fd = k_fd)
	{
		std::lock_guard lock(model_mutex);
		EXPECT_TRUE(fb.contents(fd) == model[fd]) << "file contents differ from what was written";
	}

	fake_backend fb;
	dcache_file *file2 = nullptr;
	std::mutex model_mutex;
	std::map<int, std::vector<std::uint8_t>> model;
};

// A: [0, 13288): direct [0, 12288) + tail [12288, 13288) in page 3.
// B: [13288, 28672): head [13288, 16384) in page 3 + direct [16384, 28672).
constexpr std::uint64_t k_a_off = 0, k_a_len = 3 * k_page + 1000;
constexpr std::uint64_t k_b_off = k_a_len, k_b_len = 7 * k_page - k_a_len;
constexpr std::uint64_t k_shared = 3;

} // namespace

// ---- both arrival orders ----------------------------------------------------

class boundary_order : public boundary, public ::testing::WithParamInterface<bool> {};

TEST_P(boundary_order, shared_page_written_cached_by_both_then_released_once)
{
	const bool a_first = GetParam();
	const std::uint64_t first_off = a_first ? k_a_off : k_b_off, first_len = a_first ? k_a_len : k_b_len;
	const std::uint64_t second_off = a_first ? k_b_off : k_a_off, second_len = a_first ? k_b_len : k_a_len;

	ASSERT_EQ(write(first_off, first_len).bytes, first_len);
	EXPECT_EQ(stat_of(exp, "boundary_held"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), a_first ? 1000u : k_page - 1000);
	EXPECT_EQ(releases_of(k_shared), 0u) << "half-written: not released yet";
	EXPECT_EQ(buffered_writes_into(k_shared, 0), 1u) << "the first writer's edge goes out cached";
	const std::size_t before_second = fb.calls().size();

	ASSERT_EQ(write(second_off, second_len).bytes, second_len);
	EXPECT_EQ(buffered_writes_into(k_shared, 0), 2u) << "the second writer's edge goes out cached too";
	EXPECT_EQ(buffered_writes_into(k_shared, RWF_DONTCACHE), 0u);
	EXPECT_EQ(releases_of(k_shared), 1u) << "released exactly once, after both";
	EXPECT_EQ(stat_of(exp, "boundary_held"), 1u) << "the second writer joins, it does not hold anew";
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), 0u);

	// Write-back and drop come after the second writer's edge reached the page.
	const auto all = fb.calls();
	std::size_t edge = 0, sync = 0;
	for (std::size_t i = before_second; i < all.size(); ++i) {
		if (all[i].op == op_kind::write && !all[i].direct)
			edge = i;
		if (all[i].op == op_kind::sync_range)
			sync = i;
	}
	EXPECT_GT(sync, edge);
	EXPECT_EQ(all.back().op, op_kind::fadvise_dontneed);

	// Later: COMMIT and close find nothing left to release.
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1), 0);
	EXPECT_EQ(releases_of(k_shared), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_released_at_close"), 0u);
	expect_accounting();
	expect_contents();
}

INSTANTIATE_TEST_SUITE_P(boundary, boundary_order, ::testing::Values(true, false),
			 [](const auto &i) { return i.param ? std::string("a_then_b") : std::string("b_then_a"); });

// ---- what "complete" means --------------------------------------------------

TEST_F(boundary, single_segment_fallbacks_hold_partial_pages_until_the_union_covers_them)
{
	// Three small WRITEs (too small to go direct) complete page 0 only
	// together: [100, 300), [300, 4096), then [0, 100).
	ASSERT_EQ(write(100, 200).bytes, 200u);
	ASSERT_EQ(write(300, k_page - 300).bytes, k_page - 300);
	EXPECT_EQ(stat_of(exp, "write_not_direct_too_small"), 2u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), k_page - 100);
	EXPECT_EQ(releases_of(0), 0u);
	ASSERT_EQ(write(0, 100).bytes, 100u);
	EXPECT_EQ(releases_of(0), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_held"), 1u);
	EXPECT_EQ(buffered_writes_into(0, RWF_DONTCACHE), 0u);
	EXPECT_EQ(buffered_writes_into(0, 0), 3u);
	expect_accounting();
	expect_contents();
}

TEST_F(boundary, a_write_spanning_two_partial_pages_holds_both_and_full_pages_stay_dontcache)
{
	// [1000, 13000) with no worthwhile middle (Direct_Misaligned_Num_Pages
	// = 4): page 0 and page 3 are shared, pages 1-2 are the WRITE's own.
	make(with([](dcache_settings &s) { s.direct_misaligned_num_pages = 4; }));
	ASSERT_EQ(write(1000, 12000).bytes, 12000u);
	const auto w = calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 3u);
	EXPECT_EQ(w[0].offset, 1000u);
	EXPECT_EQ(w[0].rwf, 0);
	EXPECT_EQ(w[1].offset, k_page);
	EXPECT_EQ(w[1].length, 2 * k_page);
	EXPECT_EQ(w[1].rwf, RWF_DONTCACHE);
	EXPECT_EQ(w[2].offset, 3 * k_page);
	EXPECT_EQ(w[2].rwf, 0);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 2u);
	expect_contents();
}

TEST_F(boundary, the_last_page_up_to_eof_is_held_across_commit_because_an_append_completes_it)
{
	// [0, 5000) ends the file inside page 1: an appender continues there.
	ASSERT_EQ(write(0, 5000).bytes, 5000u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	ASSERT_EQ(write(5000, 3 * k_page).bytes, 3 * k_page); // the append
	EXPECT_EQ(releases_of(1), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	// Its own tail (page 4) is held across the COMMIT (written back when it
	// was written, durable after it), for the next append.
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1), 0);
	EXPECT_EQ(releases_of(4), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_kept_at_commit"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	dcache_file_close(file);
	EXPECT_EQ(releases_of(4), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_released_at_close"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);
	expect_accounting();
	expect_contents();
}

// Every cached piece is written back (sync_file_range(WRITE) on its pages)
// right after it is written and before the WRITE issues anything else: no
// delayed allocation may be left next to the O_DIRECT middle.
TEST_F(boundary, each_held_piece_is_written_back_before_the_write_goes_on)
{
	ASSERT_EQ(write(1000, 5 * k_page).bytes, 5 * k_page); // head page 0, middle 1-4, tail page 5
	const auto all = fb.calls();
	std::vector<std::size_t> cached, writebacks;
	for (std::size_t i = 0; i < all.size(); ++i) {
		if (all[i].op == op_kind::write && !all[i].direct && all[i].rwf == 0)
			cached.push_back(i);
		if (all[i].op == op_kind::writeback)
			writebacks.push_back(i);
	}
	ASSERT_EQ(cached.size(), 2u);
	ASSERT_EQ(writebacks.size(), 2u);
	for (std::size_t k = 0; k < 2; ++k) {
		EXPECT_EQ(writebacks[k], cached[k] + 1) << "right after the piece, before the next step";
		const auto &wb = all[writebacks[k]];
		EXPECT_EQ(wb.offset, all[cached[k]].offset / k_page * k_page);
		EXPECT_EQ(wb.length, k_page);
	}
	EXPECT_EQ(all[cached[0] + 2].op, op_kind::write);
	EXPECT_TRUE(all[cached[0] + 2].direct) << "the middle comes after the head's write-back";
	EXPECT_EQ(stat_of(exp, "edge_writebacks"), 2u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 2u);
	expect_contents();
}

// A truncate lets go of the held pages from the one holding the new EOF on
// (through the file's own descriptor); pages before it stay held.
TEST_F(boundary, truncate_releases_the_held_pages_it_crosses)
{
	hold_pages_3_and_35();
	ASSERT_EQ(stat_of(exp, "boundary_pages_current"), 2u);
	const auto drops_of = [&](std::uint64_t page) {
		const auto d = calls_of(op_kind::fadvise_dontneed);
		return std::count_if(d.begin(), d.end(), [&](const auto &c) {
			return c.direct && c.offset == page * k_page && c.length == k_page;
		});
	};
	dcache_file_truncated(file, 20 * k_page);
	EXPECT_EQ(drops_of(35), 1) << "through the file's O_DIRECT descriptor";
	EXPECT_EQ(drops_of(3), 0);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_truncate"), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	dcache_file_truncated(file, 3 * k_page + 50); // inside page 3
	EXPECT_EQ(drops_of(3), 1);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_truncate"), 2u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);
	dcache_file_truncated(file, 0); // nothing left: harmless
	EXPECT_EQ(stat_of(exp, "boundary_released_by_truncate"), 2u);
	expect_accounting();
}

// ---- bounded memory ----------------------------------------------------------

TEST_F(boundary, ceiling_holds_under_a_writer_whose_neighbours_never_come)
{
	constexpr std::uint32_t k_ceiling = 8;
	constexpr int k_writes = 50;
	make(with([](dcache_settings &s) { s.boundary_max_pages = k_ceiling; }));
	std::atomic<std::uint64_t> max_seen{0};
	sync_points hook([&](const std::string &name) {
		if (name == "boundary.claim" || name == "boundary.complete") {
			const std::uint64_t v = stat_of(exp, "boundary_pages_current");
			std::uint64_t cur = max_seen.load();
			while (v > cur && !max_seen.compare_exchange_weak(cur, v)) {
			}
		}
	});
	// Every WRITE leaves a tail page nobody completes.
	for (int i = 0; i < k_writes; ++i) {
		ASSERT_EQ(write(static_cast<std::uint64_t>(i) * 16 * k_page, 3 * k_page + 100).error, 0);
		EXPECT_LE(stat_of(exp, "boundary_pages_current"), k_ceiling);
	}
	EXPECT_LE(max_seen.load(), k_ceiling);
	EXPECT_EQ(max_seen.load(), k_ceiling) << "the ceiling was reached";
	EXPECT_EQ(stat_of(exp, "boundary_held"), static_cast<std::uint64_t>(k_writes));
	EXPECT_EQ(stat_of(exp, "boundary_released_by_ceiling"), static_cast<std::uint64_t>(k_writes - k_ceiling));
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), k_ceiling);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), k_ceiling * 100u);
	// Oldest first: WRITE 0's tail page went first, the last 8 are held.
	EXPECT_EQ(releases_of(3), 1u);
	EXPECT_EQ(releases_of(static_cast<std::uint64_t>(k_writes - k_ceiling - 1) * 16 + 3), 1u);
	EXPECT_EQ(releases_of(static_cast<std::uint64_t>(k_writes - k_ceiling) * 16 + 3), 0u);
	expect_accounting();
}

TEST_F(boundary, ceiling_evicts_another_files_page_through_its_direct_descriptor)
{
	make(with([](dcache_settings &s) { s.boundary_max_pages = 1; }));
	ASSERT_EQ(write(0, 3 * k_page + 100, file2, k_fd2).error, 0);
	ASSERT_EQ(write(0, 3 * k_page + 100, file, k_fd).error, 0);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_ceiling"), 1u);
	EXPECT_EQ(releases_of(3, k_fd2), 1u);
	for (const auto &c : calls_of(op_kind::sync_range)) {
		EXPECT_TRUE(c.direct) << "file 2's own descriptor is not valid during file 1's request";
	}
	EXPECT_EQ(stat_of(exp, "boundary_release_no_fd"), 0u);
}

TEST_F(boundary, age_limit_releases_on_a_later_call)
{
	make(with([](dcache_settings &s) { s.boundary_max_age_ms = 20; }));
	exp->clock = &manual_clock::now; // time passes when the test says
	ASSERT_EQ(write(0, 3 * k_page + 100).error, 0);
	manual_clock::advance(std::chrono::milliseconds(19));
	ASSERT_EQ(write(64 * k_page, k_page).error, 0); // aligned: nothing held
	EXPECT_EQ(stat_of(exp, "boundary_released_by_age"), 0u) << "not old yet";
	manual_clock::advance(std::chrono::milliseconds(21));
	EXPECT_EQ(releases_of(3), 0u) << "no timer thread: nothing happens until a call";
	ASSERT_EQ(write(64 * k_page, k_page).error, 0);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_age"), 1u);
	EXPECT_EQ(releases_of(3), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);

	// COMMIT on another file reaps aged pages of this one as well.
	ASSERT_EQ(write(0, 3 * k_page + 100).error, 0);
	manual_clock::advance(std::chrono::milliseconds(40));
	EXPECT_EQ(dcache_after_commit(exp, file2, k_fd2, 0, 0, 1), 0);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_age"), 2u);
	EXPECT_EQ(releases_of(3), 2u);
	expect_accounting();
}

TEST_F(boundary, limits_change_live)
{
	for (int i = 0; i < 6; ++i)
		ASSERT_EQ(write(static_cast<std::uint64_t>(i) * 16 * k_page, 3 * k_page + 100).error, 0);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 6u);
	dcache_settings s = dcache_export_settings(exp);
	EXPECT_EQ(s.boundary_max_pages, 4096u);
	EXPECT_EQ(s.boundary_max_age_ms, 5000u);
	EXPECT_TRUE(s.boundary_tracking);
	s.boundary_max_pages = 2;
	dcache_export_update(exp, &s);
	EXPECT_EQ(dcache_export_settings(exp).boundary_max_pages, 2u);
	ASSERT_EQ(write(100 * k_page, 3 * k_page + 100).error, 0);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 2u);
	EXPECT_EQ(stat_of(exp, "boundary_released_by_ceiling"), 5u);
	expect_accounting();
}

// ---- COMMIT, close, free, unexport ------------------------------------------

TEST_F(boundary, commit_keeps_the_held_pages_of_its_range_and_counts_them)
{
	hold_pages_3_and_35();
	ASSERT_EQ(write(0, 3 * k_page + 100, file2, k_fd2).error, 0); // file 2, page 3
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 3u);
	// Each was written back when it was written: the COMMIT's fsync made
	// it durable, nothing is left for the COMMIT to do but count.
	for (const auto &held : std::vector<std::pair<int, std::uint64_t>>{{k_fd, 3}, {k_fd, 35}, {k_fd2, 3}}) {
		const int fd = held.first;
		const std::uint64_t page = held.second;
		const auto wb = calls_of(op_kind::writeback);
		EXPECT_EQ(std::count_if(wb.begin(), wb.end(),
					[&](const auto &c) {
						return c.fd == fd && c.offset == page * k_page && c.length == k_page;
					}),
			  1)
			<< "fd " << fd << " page " << page;
	}
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 16 * k_page, 1), 0);
	EXPECT_EQ(stat_of(exp, "boundary_kept_at_commit"), 1u) << "page 3 only: 35 is outside the range";
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1), 0);
	EXPECT_EQ(stat_of(exp, "boundary_kept_at_commit"), 3u) << "pages 3 and 35 of this file";
	EXPECT_EQ(releases_of(3), 0u);
	EXPECT_EQ(releases_of(35), 0u);
	EXPECT_EQ(releases_of(3, k_fd2), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 3u);
	// The neighbour still completes the page after the COMMIT: released then.
	ASSERT_EQ(write(3 * k_page + 100, k_page - 100).error, 0);
	EXPECT_EQ(releases_of(3), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_completed"), 1u);
	expect_accounting();
}

TEST_F(boundary, close_free_and_unexport_release_everything)
{
	ASSERT_EQ(write(0, 3 * k_page + 100).error, 0);
	dcache_file_close(file);
	EXPECT_EQ(releases_of(3), 1u);
	EXPECT_EQ(stat_of(exp, "boundary_released_at_close"), 1u);

	ASSERT_EQ(write(0, 3 * k_page + 100).error, 0);
	dcache_file_free(file);
	file = nullptr;
	EXPECT_EQ(releases_of(3), 2u);

	// Unexport while a file of the export lives on (Ganesha shares objects
	// among exports): its pages go, the file stays usable.
	ASSERT_EQ(write(0, 3 * k_page + 100, file2, k_fd2).error, 0);
	ASSERT_EQ(stat_of(exp, "boundary_pages_current"), 1u);
	dcache_export *gone = exp;
	const std::uint64_t at_commit = stat_of(gone, "boundary_released_at_close");
	exp->refs.fetch_add(1); // keep it readable for the checks below
	dcache_export_put(gone);
	EXPECT_EQ(releases_of(3, k_fd2), 1u);
	EXPECT_EQ(stat_of(gone, "boundary_released_at_close"), at_commit + 1);
	EXPECT_EQ(stat_of(gone, "boundary_pages_current"), 0u);
	export_unref(gone); // the extra reference; file2 still holds one
	exp = nullptr;
	dcache_file_free(file2);
	file2 = nullptr;
}

// ---- Boundary_Tracking = false is today's behaviour ---------------------------

TEST_F(boundary, tracking_off_keeps_dontcache_edges)
{
	make(with([](dcache_settings &s) { s.boundary_tracking = false; }));
	ASSERT_EQ(write(k_a_off, k_a_len).bytes, k_a_len);
	ASSERT_EQ(write(k_b_off, k_b_len).bytes, k_b_len);
	ASSERT_EQ(write(100, 200).bytes, 200u);
	EXPECT_EQ(buffered_writes_into(k_shared, RWF_DONTCACHE), 2u);
	EXPECT_EQ(buffered_writes_into(k_shared, 0), 0u);
	EXPECT_EQ(buffered_writes_into(0, RWF_DONTCACHE), 1u);
	EXPECT_EQ(fb.count(op_kind::sync_range), 0u);
	EXPECT_EQ(fb.count(op_kind::fadvise_dontneed), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_held"), 0u);
	EXPECT_EQ(stat_of(exp, "dontcache_bytes"), 1000u + (k_page - 1000) + 200u);
	expect_contents();
}

TEST_F(boundary, no_tracking_outside_direct_modes_or_with_cached_edges)
{
	make(with([](dcache_settings &s) { s.io_cache_write = DCACHE_MODE_DONTCACHE; }));
	ASSERT_EQ(write(100, 200).bytes, 200u);
	make(with([](dcache_settings &s) { s.direct_misaligned_dontcache = false; }));
	ASSERT_EQ(write(100, 200).bytes, 200u);
	EXPECT_EQ(stat_of(exp, "boundary_held"), 0u);
	EXPECT_EQ(fb.count(op_kind::sync_range), 0u);
}

TEST_F(boundary, failed_edge_write_holds_nothing)
{
	fb.fail_call(0, EIO);
	EXPECT_EQ(write(100, 200).error, EIO);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), 0u);
	// A short edge covers only what landed.
	fb.short_call(1, 50);
	EXPECT_EQ(write(100, 200).bytes, 50u);
	EXPECT_EQ(stat_of(exp, "boundary_bytes_current"), 50u);
}

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
	for (const auto &c : calls_of(op_kind::sync_range)) {
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
