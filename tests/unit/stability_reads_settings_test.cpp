// The issue loop through the C API, continued: stability (exactly one sync
// per WRITE, never lower than asked), direct READ widening and EOF, fadvise
// mode, files and settings, statistics, and concurrency.
#include "request_path.hpp"

namespace {

using namespace dcache::test;

// ---- stability -------------------------------------------------------------

struct stable_case {
	dcache_mode mode;
	bool asked;
	std::size_t fsyncs, fdatasyncs;
	bool reply_stable;
};

class stability : public request_path, public ::testing::WithParamInterface<stable_case> {};

TEST_P(stability, one_sync_per_write_never_lower_than_asked)
{
	const stable_case c = GetParam();
	modes(DCACHE_MODE_BUFFERED, c.mode);
	// A split WRITE (three segments) in direct modes: still one sync.
	payload p(1000 + 16384 + 1000, 0);
	const int writes = 3;
	for (int i = 0; i < writes; ++i) {
		const auto r = write(3096 + static_cast<std::uint64_t>(i) * 100000, p, c.asked);
		ASSERT_EQ(r.error, 0);
		EXPECT_EQ(r.stable, c.reply_stable);
		if (c.asked) {
			EXPECT_TRUE(r.stable) << "never lower than asked";
		}
	}
	EXPECT_EQ(fb.count(op_kind::fsync), c.fsyncs * writes);
	EXPECT_EQ(fb.count(op_kind::fdatasync), c.fdatasyncs * writes);
	EXPECT_EQ(stat_of(exp, "writes_reply_stable"), c.reply_stable ? writes : 0u);
	EXPECT_EQ(stat_of(exp, "writes_raised_stable"), (c.reply_stable && !c.asked) ? writes : 0u);
	EXPECT_EQ(stat_of(exp, "syncs_fsync"), c.fsyncs * writes);
	EXPECT_EQ(stat_of(exp, "syncs_fdatasync"), c.fdatasyncs * writes);
	// The sync comes after every segment of its WRITE (and, in the direct
	// modes, after the write-backs of its cached edges).
	const auto all = fb.calls();
	for (std::size_t i = 0; i < all.size(); ++i) {
		if (all[i].op != op_kind::fsync && all[i].op != op_kind::fdatasync)
			continue;
		ASSERT_GT(i, 0u);
		std::uint64_t covered = 0;
		for (std::size_t j = i; j-- > 0 && (all[j].op == op_kind::write || all[j].op == op_kind::writeback);)
			if (all[j].op == op_kind::write)
				covered += all[j].length;
		EXPECT_EQ(covered, p.bytes().size());
	}
}

INSTANTIATE_TEST_SUITE_P(request_path, stability,
			 ::testing::Values(stable_case{DCACHE_MODE_BUFFERED, false, 0, 0, false},
					   stable_case{DCACHE_MODE_BUFFERED, true, 1, 0, true},
					   stable_case{DCACHE_MODE_DONTCACHE, false, 0, 0, false},
					   stable_case{DCACHE_MODE_DONTCACHE, true, 1, 0, true},
					   stable_case{DCACHE_MODE_FADVISE, false, 0, 0, false},
					   stable_case{DCACHE_MODE_FADVISE, true, 1, 0, true},
					   stable_case{DCACHE_MODE_DIRECT, false, 0, 0, false},
					   stable_case{DCACHE_MODE_DIRECT, true, 1, 0, true},
					   stable_case{DCACHE_MODE_DIRECT_DATA_SYNC, false, 0, 1, true},
					   stable_case{DCACHE_MODE_DIRECT_DATA_SYNC, true, 1, 0, true},
					   stable_case{DCACHE_MODE_DIRECT_FILE_SYNC, false, 1, 0, true},
					   stable_case{DCACHE_MODE_DIRECT_FILE_SYNC, true, 1, 0, true}),
			 [](const auto &p) {
				 return std::string(dcache_mode_name(p.param.mode)) +
					(p.param.asked ? "_stable" : "_unstable");
			 });

// ---- READ ------------------------------------------------------------------

TEST_F(request_path, direct_read_widens_and_handles_eof)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_BUFFERED);
	payload content(10000, 0, 5);
	fb.set_contents(k_fd, content.bytes());
	const auto want = content.bytes();

	struct rc {
		std::uint64_t off;
		std::size_t len;
	};
	for (const rc &c : {rc{100, 8000}, rc{0, 9000}, rc{9000, 4096}, rc{5904, 4096}, rc{4096, 5904}, rc{10000, 4096},
			    rc{12288, 4096}, rc{1, 9999}}) {
		SCOPED_TRACE("off=" + std::to_string(c.off) + " len=" + std::to_string(c.len));
		std::vector<std::uint8_t> buf(c.len + 16, 0xee);
		const auto r = read(c.off, buf.data() + 3, c.len);
		ASSERT_EQ(r.error, 0);
		const std::size_t exists = c.off < want.size() ? std::min<std::size_t>(c.len, want.size() - c.off) : 0;
		EXPECT_EQ(r.bytes, exists);
		EXPECT_EQ(r.eof, c.off + c.len >= want.size());
		EXPECT_TRUE(std::equal(buf.begin() + 3, buf.begin() + 3 + static_cast<long>(exists),
				       want.begin() + static_cast<long>(std::min<std::uint64_t>(c.off, want.size()))));
		EXPECT_EQ(buf[3 + exists], 0xee) << "wrote past the bytes returned";
	}
	for (const auto &c : fb.calls_of(op_kind::read)) {
		EXPECT_TRUE(c.direct);
		EXPECT_EQ(c.offset % 4096, 0u);
		EXPECT_EQ(c.length % 4096, 0u);
	}
	EXPECT_EQ(stat_of(exp, "read_direct"), 8u);
}

TEST_F(request_path, direct_read_aligned_goes_straight_into_the_callers_buffer)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_BUFFERED);
	payload content(16384, 0);
	fb.set_contents(k_fd, content.bytes());
	payload into(8192, 0);
	const auto r = read(4096, into.data(), 8192);
	EXPECT_EQ(r.bytes, 8192u);
	EXPECT_FALSE(r.eof);
	EXPECT_EQ(stat_of(exp, "read_bounce_copies"), 0u);
	EXPECT_EQ(stat_of(exp, "read_unbounced_bytes"), 8192u);
	EXPECT_EQ(stat_of(exp, "read_bounced_bytes"), 0u);
	const auto rd = fb.calls_of(op_kind::read);
	ASSERT_EQ(rd.size(), 1u);
	EXPECT_EQ(rd[0].iov0, into.data()) << "read into the caller's memory";
	EXPECT_TRUE(std::equal(into.data(), into.data() + 8192, content.bytes().begin() + 4096));

	// Memory the device does not take (16 bytes past a page, glibc's
	// chunk header): one bounce copy, counted in bytes.
	payload off_by_16(8192, 16);
	ASSERT_EQ(read(4096, off_by_16.data(), 8192).bytes, 8192u);
	EXPECT_EQ(stat_of(exp, "read_bounce_copies"), 1u);
	EXPECT_EQ(stat_of(exp, "read_bounced_bytes"), 8192u);
	EXPECT_NE(fb.calls_of(op_kind::read).back().iov0, off_by_16.data());
	EXPECT_TRUE(std::equal(off_by_16.data(), off_by_16.data() + 8192, content.bytes().begin() + 4096));
}

TEST_F(request_path, small_direct_read_goes_dontcache)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_BUFFERED);
	fb.set_contents(k_fd, std::vector<std::uint8_t>(10000, 9));
	std::vector<std::uint8_t> buf(100);
	const auto r = read(50, buf.data(), buf.size());
	EXPECT_EQ(r.bytes, 100u);
	const auto rd = fb.calls_of(op_kind::read);
	ASSERT_EQ(rd.size(), 1u);
	EXPECT_FALSE(rd[0].direct);
	EXPECT_EQ(rd[0].rwf, RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "read_not_direct_too_small"), 1u);
	EXPECT_EQ(fb.opens(), 0u) << "no O_DIRECT descriptor needed";
}

TEST_F(request_path, zero_length_io_issues_nothing)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	const dcache_io io{k_fd, 4096, nullptr, 0, false, nullptr};
	const auto w = dcache_write(exp, file, &io);
	EXPECT_EQ(w.error, 0);
	EXPECT_EQ(w.bytes, 0u);
	const auto r = dcache_read(exp, file, &io);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 0u);
	EXPECT_EQ(fb.calls_of(op_kind::write).size() + fb.calls_of(op_kind::read).size(), 0u);
}

TEST_F(request_path, read_error_is_reported)
{
	fb.fail_call(0, EIO);
	std::vector<std::uint8_t> buf(10);
	const auto r = read(0, buf.data(), buf.size());
	EXPECT_EQ(r.error, EIO);
	EXPECT_EQ(stat_of(exp, "errors"), 1u);
}

// ---- fadvise mode ----------------------------------------------------------

TEST_F(request_path, fadvise_mode_drops_after_read_and_stable_write_and_commit)
{
	modes(DCACHE_MODE_FADVISE, DCACHE_MODE_FADVISE);
	payload p(8000, 0);
	ASSERT_EQ(write(100, p).bytes, 8000u);
	EXPECT_EQ(fb.count(op_kind::fadvise_dontneed), 0u) << "an UNSTABLE write leaves its dirty pages";
	ASSERT_TRUE(write(100, p, true).stable);
	auto d = fb.calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 1u);
	EXPECT_EQ(d[0].offset, 100u);
	EXPECT_EQ(d[0].length, 8000u);
	EXPECT_EQ(fb.count(op_kind::sync_range), 1u);

	std::vector<std::uint8_t> buf(5000);
	const auto r = read(6000, buf.data(), buf.size());
	EXPECT_EQ(r.bytes, 2100u);
	EXPECT_TRUE(r.eof);
	d = fb.calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 2u);
	EXPECT_EQ(d[1].offset, 0u) << "back to the 2 MiB boundary: large folios straddle READs";
	EXPECT_EQ(d[1].length, 0u) << "the READ reached end of file: drop to the end";

	// Not at end of file: up to what was read, from the 2 MiB boundary.
	const std::uint64_t mib2 = 2u << 20;
	payload big(4096, 1);
	ASSERT_EQ(write(3 * mib2, big).bytes, 4096u);
	ASSERT_EQ(read(3 * mib2 - 1000, buf.data(), 3000).bytes, 3000u);
	d = fb.calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 3u);
	EXPECT_EQ(d[2].offset, 2 * mib2);
	EXPECT_EQ(d[2].length, mib2 - 1000 + 3000);

	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1000), 0);
	d = fb.calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 4u);
	EXPECT_EQ(d[3].length, 0u) << "len 0 = to end of file";
	EXPECT_EQ(stat_of(exp, "commits"), 1u);
	EXPECT_EQ(stat_of(exp, "fadvise_calls"), 4u);
}

TEST_F(request_path, fadvise_errors_do_not_fail_reads_but_commit_reports_them)
{
	modes(DCACHE_MODE_FADVISE, DCACHE_MODE_FADVISE);
	fb.set_contents(k_fd, std::vector<std::uint8_t>(4096, 1));
	fb.fail_when([](const dcache::io::request &q, std::size_t) { return q.op == op_kind::fadvise_dontneed; },
		     EINVAL);
	std::vector<std::uint8_t> buf(4096);
	const auto r = read(0, buf.data(), buf.size());
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 4096u);
	EXPECT_EQ(stat_of(exp, "fadvise_errors"), 1u);
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 4096, 1000), EINVAL);
	EXPECT_EQ(stat_of(exp, "fadvise_errors"), 2u);
	EXPECT_EQ(log_lines_with("posix_fadvise"), 1u);
}

TEST_F(request_path, after_commit_does_nothing_outside_fadvise_mode)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1000), 0);
	EXPECT_TRUE(fb.calls().empty());
	EXPECT_EQ(stat_of(exp, "commits"), 1u);
}

// ---- files, settings, stats, argument checks -------------------------------

TEST_F(request_path, capabilities_probed_once_descriptor_reopened_after_close)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	payload p(8192, 0);
	for (int i = 0; i < 5; ++i)
		ASSERT_EQ(write(static_cast<std::uint64_t>(i) * 8192, p).bytes, 8192u);
	EXPECT_EQ(fb.probes(), 1u);
	EXPECT_EQ(fb.opens(), 1u);
	EXPECT_EQ(fb.open_direct_fds(), 1);
	dcache_file_close(file);
	EXPECT_EQ(fb.open_direct_fds(), 0);
	ASSERT_EQ(write(0, p).bytes, 8192u);
	EXPECT_EQ(fb.opens(), 2u);
	EXPECT_EQ(fb.probes(), 1u);
}

// A file that reports no alignment of its own (btrfs: no STATX_DIOALIGN)
// takes its filesystem's, probed once per filesystem, counted by source
// and logged once with it; a filesystem that has none either is served the
// DONTCACHE way.
TEST_F(request_path, alignment_learned_once_per_filesystem_where_files_report_none)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	dcache::io::dio_caps none{};
	none.fs = 41;
	fb.set_caps(none);
	fb.set_fs_caps({4096, 4096, 4096, dcache::io::dio_caps::source::btrfs});
	payload p(8192, 0);
	ASSERT_EQ(write(0, p).bytes, 8192u);
	dcache_file *second = dcache_file_new(exp);
	ASSERT_NE(second, nullptr);
	const struct iovec v = p.iov();
	const dcache_io io{k_fd + 1, 0, &v, 1, false, nullptr};
	EXPECT_EQ(dcache_write(exp, second, &io).bytes, 8192u);
	EXPECT_EQ(fb.probes(), 2u) << "each file is asked itself";
	EXPECT_EQ(fb.fs_probes(), 1u) << "the filesystem once";
	EXPECT_EQ(stat_of(exp, "dio_align_btrfs"), 2u);
	EXPECT_EQ(stat_of(exp, "write_direct"), 2u);
	EXPECT_EQ(log_lines_with("btrfs sector size, 4096 bytes"), 1u);
	dcache_file_close(second);
	dcache_file_free(second);

	// Another filesystem with nothing to learn: not direct, said once.
	none.fs = 42;
	fb.set_caps(none);
	fb.set_fs_caps({});
	dcache_file_close(file);
	dcache_file_free(file);
	file = dcache_file_new(exp);
	ASSERT_NE(file, nullptr);
	ASSERT_EQ(write(0, p).bytes, 8192u);
	EXPECT_EQ(fb.fs_probes(), 2u);
	EXPECT_EQ(stat_of(exp, "dio_align_none"), 1u);
	EXPECT_EQ(stat_of(exp, "write_not_direct_no_alignment"), 1u);
	EXPECT_EQ(log_lines_with("reports no direct-I/O alignment (statx DIOALIGN, XFS_IOC_DIOINFO, btrfs"), 1u);
}

// btrfs serves a direct request it cannot do direct through the page cache
// without saying so, and has no RWF_DONTCACHE to drop what that leaves:
// each direct step's range is written back and dropped after it.
TEST_F(request_path, a_direct_step_on_a_filesystem_that_may_buffer_it_is_dropped_after)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	dcache::io::dio_caps btrfs{4096, 4096, 4096, dcache::io::dio_caps::source::btrfs};
	btrfs.may_buffer = true;
	fb.set_caps(btrfs);
	fb.reject_dontcache();
	payload p(16384, 0);
	ASSERT_EQ(write(8192, p).bytes, 16384u);
	EXPECT_EQ(stat_of(exp, "direct_bytes"), 16384u);
	auto drops = fb.calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(drops.size(), 1u);
	EXPECT_EQ(drops[0].offset, 8192u);
	EXPECT_EQ(drops[0].length, 16384u);
	EXPECT_EQ(fb.count(op_kind::sync_range), 1u) << "written back before the drop";
	std::vector<std::uint8_t> buf(16384);
	ASSERT_EQ(read(8192, buf.data(), buf.size()).bytes, 16384u);
	EXPECT_EQ(fb.calls_of(op_kind::fadvise_dontneed).size(), 2u) << "a direct READ's range too";
	EXPECT_EQ(stat_of(exp, "fallback_no_dontcache"), 0u) << "not the DONTCACHE fallback";

	// Where RWF_DONTCACHE rides along (a kernel that has it), nothing more.
	make(dcache_settings_default());
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	fb.reject_dontcache(false);
	fb.clear_calls();
	ASSERT_EQ(write(8192, p).bytes, 16384u);
	EXPECT_EQ(fb.calls_of(op_kind::fadvise_dontneed).size(), 0u);
}

TEST_F(request_path, live_update_applies_to_the_next_request)
{
	payload p(100, 0);
	ASSERT_EQ(write(0, p).bytes, 100u);
	dcache_settings s = dcache_export_settings(exp);
	EXPECT_EQ(s.io_cache_write, DCACHE_MODE_BUFFERED);
	s.io_cache_write = DCACHE_MODE_DIRECT_FILE_SYNC;
	s.direct_misaligned_num_pages = 1024;
	s.direct_misaligned_dontcache = false;
	s.direct_misaligned_memory = DCACHE_MEM_MISALIGNED_BUFFERED;
	dcache_export_update(exp, &s);
	const dcache_settings back = dcache_export_settings(exp);
	EXPECT_EQ(back.io_cache_write, DCACHE_MODE_DIRECT_FILE_SYNC);
	EXPECT_EQ(back.direct_misaligned_num_pages, 1024u);
	EXPECT_FALSE(back.direct_misaligned_dontcache);
	EXPECT_EQ(back.direct_misaligned_memory, DCACHE_MEM_MISALIGNED_BUFFERED);
	EXPECT_TRUE(write(0, p).stable);
}

// IO_Workers_Max reaches the backend when the export is created and again
// on a live update that changes it (not on one that leaves it); a backend
// that refuses it is named in the log and the export goes on.
TEST_F(request_path, io_workers_max_is_applied_at_creation_and_live)
{
	dcache_settings s = dcache_settings_default();
	s.io_workers_max = 3;
	make(s); // after the fixture's export of the defaults
	EXPECT_EQ(fb.io_workers_set(), (std::vector<unsigned>{0, 3}));
	s.io_cache_write = DCACHE_MODE_DIRECT;
	dcache_export_update(exp, &s);
	EXPECT_EQ(fb.io_workers_set(), (std::vector<unsigned>{0, 3}));
	s.io_workers_max = 0;
	dcache_export_update(exp, &s);
	EXPECT_EQ(fb.io_workers_set(), (std::vector<unsigned>{0, 3, 0}));
	fb.fail_io_workers(EINVAL);
	s.io_workers_max = 9;
	dcache_export_update(exp, &s);
	EXPECT_EQ(log_lines_with("IO_Workers_Max = 9 not applied (EINVAL"), 1u);
	EXPECT_EQ(dcache_export_settings(exp).io_workers_max, 9u);
	payload p(100, 0);
	EXPECT_EQ(write(0, p).bytes, 100u);
}

TEST(stats, names_are_unique_snake_case_and_include_the_documented_counters)
{
	std::set<std::string> names;
	for (std::size_t i = 0; i < dcache_stats_count(); ++i) {
		const std::string n = dcache_stats_name(i);
		EXPECT_TRUE(names.insert(n).second) << n;
		for (char ch : n)
			EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_') << n;
	}
	EXPECT_EQ(dcache_stats_name(dcache_stats_count()), nullptr);
	for (const char *must : {"reads",
				 "writes",
				 "read_bytes",
				 "write_bytes",
				 "read_buffered",
				 "read_dontcache",
				 "read_direct",
				 "read_not_direct_too_small",
				 "read_not_direct_no_alignment",
				 "write_buffered",
				 "write_dontcache",
				 "write_direct",
				 "write_split",
				 "write_not_direct_no_alignment",
				 "write_not_direct_too_small",
				 "write_not_direct_no_middle",
				 "write_not_direct_mem_misaligned",
				 "write_bounce_copies",
				 "direct_bytes",
				 "dontcache_bytes",
				 "buffered_bytes",
				 "syncs_fsync",
				 "syncs_fdatasync",
				 "writes_reply_stable",
				 "writes_raised_stable",
				 "commits",
				 "fadvise_calls",
				 "fallback_no_dontcache",
				 "fallback_no_odirect",
				 "short_transfers",
				 "errors"})
		EXPECT_TRUE(names.count(must)) << must;
}

TEST_F(request_path, stats_reset_and_out_of_range)
{
	payload p(10, 0);
	ASSERT_EQ(write(0, p).bytes, 10u);
	EXPECT_EQ(stat_of(exp, "writes"), 1u);
	dcache_stats_reset(exp);
	EXPECT_EQ(stat_of(exp, "writes"), 0u);
	EXPECT_EQ(dcache_stats_value(exp, dcache_stats_count() + 5), 0u);
	EXPECT_EQ(dcache_stats_value(nullptr, 0), 0u);
}

TEST_F(request_path, bad_arguments_are_einval)
{
	payload p(10, 0);
	const struct iovec v = p.iov();
	dcache_io io{k_fd, 0, &v, 1, false, nullptr};
	EXPECT_EQ(dcache_write(nullptr, file, &io).error, EINVAL);
	EXPECT_EQ(dcache_write(exp, nullptr, &io).error, EINVAL);
	EXPECT_EQ(dcache_write(exp, file, nullptr).error, EINVAL);
	io.iov_count = -1;
	EXPECT_EQ(dcache_read(exp, file, &io).error, EINVAL);
	io.iov_count = 1;
	io.fd = -1;
	EXPECT_EQ(dcache_read(exp, file, &io).error, EINVAL);
	io.fd = k_fd;
	io.offset = ~0ull - 4;
	EXPECT_EQ(dcache_write(exp, file, &io).error, EINVAL);
	EXPECT_TRUE(fb.calls().empty());
	EXPECT_EQ(dcache_after_commit(nullptr, file, k_fd, 0, 0, 1000), EINVAL);
}

TEST_F(request_path, log_is_optional)
{
	dcache_set_log(nullptr);
	modes(DCACHE_MODE_DONTCACHE, DCACHE_MODE_DONTCACHE);
	fb.reject_dontcache();
	payload p(10, 0);
	EXPECT_EQ(write(0, p).bytes, 10u);
	EXPECT_EQ(log_lines_with("RWF_DONTCACHE"), 0u);
}

// Many threads on one export and one file while the file's O_DIRECT
// descriptor is closed under them and the settings change: run under TSan.
TEST_F(request_path, concurrent_io_close_and_update)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	constexpr int k_threads = 4, k_ops = 200;
	std::atomic<bool> stop{false};
	std::atomic<int> failures{0};
	std::vector<std::thread> workers;
	for (int t = 0; t < k_threads; ++t) {
		workers.emplace_back([&, t] {
			payload p(4096 * 3 + 100, static_cast<std::size_t>(t));
			std::vector<std::uint8_t> buf(9000);
			for (int i = 0; i < k_ops; ++i) {
				const std::uint64_t off = static_cast<std::uint64_t>(t) * 1000000 +
							  static_cast<std::uint64_t>(i % 7) * 333;
				const struct iovec v = p.iov();
				const dcache_io io{k_fd, off, &v, 1, i % 3 == 0, nullptr};
				const auto w = dcache_write(exp, file, &io);
				if (w.error != 0 || w.bytes != 4096 * 3 + 100)
					failures.fetch_add(1);
				const struct iovec rv {
					buf.data(), buf.size()
				};
				const dcache_io rio{k_fd, off, &rv, 1, false, nullptr};
				if (dcache_read(exp, file, &rio).error != 0)
					failures.fetch_add(1);
			}
		});
	}
	std::thread closer([&] {
		dcache_settings s = dcache_export_settings(exp);
		int n = 0;
		while (!stop.load()) {
			dcache_file_close(file);
			s.direct_misaligned_num_pages = static_cast<std::uint32_t>(n++ % 3);
			dcache_export_update(exp, &s);
			std::this_thread::yield();
		}
	});
	for (auto &w : workers)
		w.join();
	stop = true;
	closer.join();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_EQ(stat_of(exp, "writes"), static_cast<std::uint64_t>(k_threads * k_ops));
	EXPECT_EQ(stat_of(exp, "fallback_direct_einval"), 0u) << "a direct request ran on a misaligned range";
	for (const auto &c : fb.calls())
		EXPECT_EQ(c.res.error, 0) << dcache::io::op_name(c.op) << " at " << c.offset;
}

} // namespace

TEST_F(request_path, latency_is_recorded_per_operation)
{
	std::vector<char> buf(4096, 'x');
	const iovec iov{buf.data(), buf.size()};
	const dcache_io io{k_fd, 0, &iov, 1, false, nullptr};
	ASSERT_EQ(dcache_write(exp, file, &io).error, 0);
	ASSERT_EQ(dcache_read(exp, file, &io).error, 0);
	ASSERT_EQ(dcache_read(exp, file, &io).error, 0);
	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 5000), 0);

	EXPECT_EQ(dcache_stats_latency(exp, DCACHE_OP_WRITE).count, 1u);
	EXPECT_EQ(dcache_stats_latency(exp, DCACHE_OP_READ).count, 2u);
	const dcache_latency commit = dcache_stats_latency(exp, DCACHE_OP_COMMIT);
	EXPECT_EQ(commit.count, 1u);
	EXPECT_EQ(commit.total_ns, 5000u);
	EXPECT_EQ(commit.min_ns, 5000u);
	EXPECT_EQ(commit.max_ns, 5000u);
	const dcache_latency read = dcache_stats_latency(exp, DCACHE_OP_READ);
	EXPECT_LE(read.min_ns, read.max_ns);
	EXPECT_GE(read.total_ns, read.max_ns);

	dcache_stats_reset(exp);
	EXPECT_EQ(dcache_stats_latency(exp, DCACHE_OP_READ).count, 0u);
	EXPECT_EQ(dcache_stats_latency(exp, DCACHE_OP_READ).min_ns, 0u);
	EXPECT_STREQ(dcache_op_name(DCACHE_OP_COMMIT), "commit");
}
