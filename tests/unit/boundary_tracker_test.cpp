// The boundary-page tracker, through the C API over the fake backend: the
// page two misaligned direct-mode WRITEs share is written cached by both
// (either order), each piece written back at once, then dropped exactly
// once; the ceiling and the age limit bound what is held; COMMITs keep held
// pages; close, free, truncate and unexport release; Boundary_Tracking =
// false is today's behaviour.  Run under TSan and ASan as well.
#include "boundary_tracker.hpp"

namespace {

using namespace dcache::test;

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
	const auto w = fb.calls_of(op_kind::write);
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
		const auto d = fb.calls_of(op_kind::fadvise_dontneed);
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
	for (const auto &c : fb.calls_of(op_kind::sync_range)) {
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
		const auto wb = fb.calls_of(op_kind::writeback);
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

// A device that fails (full, EIO, XFS shut down) fails every write-back and
// drop of held pages: at a truncate, at unexport (the export's own release,
// with pages still held) and at close.  Each failure is logged once and
// counted; every page still leaves the tracker and every descriptor is
// closed, and the export goes once its files do.
TEST_F(boundary, failing_write_backs_give_back_every_held_page_and_descriptor)
{
	clear_log();
	dcache_set_log(capture_log);
	// [1000, 1000 + 5 pages) in each file: pages 1-4 direct, the partial
	// pages 0 and 5 of each held
	ASSERT_EQ(write(1000, 5 * k_page).bytes, 5 * k_page);
	ASSERT_EQ(write(1000, 5 * k_page, file2, k_fd2).bytes, 5 * k_page);
	ASSERT_EQ(stat_of(exp, "boundary_pages_current"), 4u);
	ASSERT_GT(fb.open_direct_fds(), 0);
	fb.fail_when([](const dcache::io::request &r, std::size_t) { return r.op == op_kind::sync_range; }, ENOSPC);
	fb.fail_when([](const dcache::io::request &r, std::size_t) { return r.op == op_kind::fadvise_dontneed; }, EIO);
	// a truncate into page 5 of the first file: its write-back fails
	dcache_file_truncated(file, 5 * k_page + 50);
	EXPECT_EQ(stat_of(exp, "boundary_pages_current"), 3u);
	// unexport with three pages held: each write-back fails
	dcache_export *const e = exp;
	exp = nullptr; // put here, not again by the fixture
	dcache_export_put(e);
	EXPECT_EQ(stat_of(e, "boundary_pages_current"), 0u) << "every page left the tracker";
	EXPECT_EQ(stat_of(e, "boundary_bytes_current"), 0u);
	EXPECT_EQ(stat_of(e, "fadvise_errors"), 4u) << "each failed drop counted";
	EXPECT_EQ(log_lines_with("sync_file_range failed: No space left on device"), 1u) << "logged once";
	EXPECT_EQ(log_lines_with("posix_fadvise(DONTNEED) failed: Input/output error"), 1u);
	// the files close (their descriptors with them), then the export goes
	free_export();
	EXPECT_EQ(fb.open_direct_fds(), 0) << "O_DIRECT descriptor leaked";
	dcache_set_log(nullptr);
}

} // namespace
