// The issue loop through the C API, over the fake backend: WRITE segment
// issuing, short transfers and errors, and the fallbacks (counted and
// logged once).
#include "request_path.hpp"

namespace {

using namespace dcache::test;

// ---- WRITE segments ------------------------------------------------------

TEST_F(request_path, buffered_write_is_one_plain_pwritev2)
{
	payload p(10000, 3);
	const auto r = write(123, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 10000u);
	EXPECT_FALSE(r.stable);
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 1u);
	EXPECT_EQ(w[0].rwf, 0);
	EXPECT_FALSE(w[0].direct);
	EXPECT_EQ(w[0].offset, 123u);
	EXPECT_EQ(syncs(), 0u);
	EXPECT_EQ(fb.probes(), 0u) << "no capability probe outside direct modes";
	const auto c = fb.contents(k_fd);
	EXPECT_TRUE(std::equal(c.begin() + 123, c.end(), p.bytes().begin()));
	EXPECT_EQ(stat_of(exp, "write_buffered"), 1u);
	EXPECT_EQ(stat_of(exp, "buffered_bytes"), 10000u);
	EXPECT_EQ(stat_of(exp, "write_bytes"), 10000u);
}

TEST_F(request_path, dontcache_write_sets_rwf_dontcache)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DONTCACHE);
	payload p(5000, 0);
	EXPECT_EQ(write(0, p).bytes, 5000u);
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 1u);
	EXPECT_EQ(w[0].rwf, RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "dontcache_bytes"), 5000u);
}

TEST_F(request_path, direct_split_issues_head_middle_tail)
{
	// Without boundary tracking (on by default, see boundary_tracker_test),
	// both edges go out DONTCACHE.
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.boundary_tracking = false;
	make(s);
	payload p(20000, 0);
	const auto r = write(1000, p);
	ASSERT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 20000u);
	EXPECT_FALSE(r.stable);
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 3u);
	EXPECT_FALSE(w[0].direct);
	EXPECT_EQ(w[0].rwf, RWF_DONTCACHE);
	EXPECT_EQ(w[0].length, 3096u);
	EXPECT_TRUE(w[1].direct);
	EXPECT_EQ(w[1].rwf, RWF_DONTCACHE) << "the direct middle also carries RWF_DONTCACHE";
	EXPECT_EQ(w[1].offset, 4096u);
	EXPECT_EQ(w[1].length, 16384u);
	EXPECT_TRUE(w[1].mem_aligned);
	EXPECT_FALSE(w[2].direct);
	EXPECT_EQ(w[2].length, 520u);
	const auto c = fb.contents(k_fd);
	ASSERT_EQ(c.size(), 21000u);
	EXPECT_TRUE(std::equal(c.begin() + 1000, c.end(), p.bytes().begin()));
	EXPECT_EQ(stat_of(exp, "write_split"), 1u);
	EXPECT_EQ(stat_of(exp, "direct_bytes"), 16384u);
	EXPECT_EQ(stat_of(exp, "dontcache_bytes"), 3616u);
	EXPECT_EQ(stat_of(exp, "write_bounce_copies"), 1u) << "payload byte 3096 is not 512-aligned";
	EXPECT_EQ(fb.probes(), 1u);
}

// Plain buffered edges (Direct_Misaligned_Dontcache = false), each written
// back at once, before the next step (the direct middle) is issued.
TEST_F(request_path, edges_plain_buffered_when_dontcache_off_and_written_back_at_once)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.direct_misaligned_dontcache = false;
	make(s);
	payload p(20000, 0);
	ASSERT_EQ(write(1000, p).bytes, 20000u);
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 3u);
	EXPECT_EQ(w[0].rwf, 0);
	EXPECT_EQ(w[2].rwf, 0);
	EXPECT_EQ(w[1].rwf, RWF_DONTCACHE);
	const auto all = fb.calls();
	ASSERT_EQ(all.size(), 5u); // head, its write-back, middle, tail, its write-back
	EXPECT_EQ(all[0].op, op_kind::write);
	EXPECT_EQ(all[1].op, op_kind::writeback);
	EXPECT_EQ(all[1].offset, 0u);
	EXPECT_EQ(all[1].length, 4096u);
	EXPECT_TRUE(all[2].direct);
	EXPECT_EQ(all[3].op, op_kind::write);
	EXPECT_EQ(all[4].op, op_kind::writeback);
	EXPECT_EQ(all[4].offset, 20480u);
	EXPECT_EQ(all[4].length, 4096u);
	EXPECT_EQ(stat_of(exp, "edge_writebacks"), 2u);
}

// The modes that issue no O_DIRECT leave write-back to the kernel.
TEST_F(request_path, modes_without_direct_writes_never_write_back)
{
	payload p(20000, 0);
	for (const dcache_mode m : {DCACHE_MODE_BUFFERED, DCACHE_MODE_FADVISE, DCACHE_MODE_DONTCACHE}) {
		modes(DCACHE_MODE_BUFFERED, m);
		fb.clear_calls();
		ASSERT_EQ(write(1000, p).bytes, 20000u);
		EXPECT_EQ(fb.count(op_kind::writeback), 0u) << dcache_mode_name(m);
	}
}

// A failed write-back does not fail the WRITE: its data is written; the
// error is counted, logged once, and left for the sync or COMMIT to meet.
TEST_F(request_path, a_failed_write_back_is_counted_and_logged_not_fatal)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(20000, 0);
	fb.fail_call(1, EIO); // the head's write-back
	const auto r = write(1000, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 20000u);
	EXPECT_EQ(stat_of(exp, "edge_writeback_errors"), 1u);
	EXPECT_EQ(stat_of(exp, "errors"), 0u);
	EXPECT_EQ(log_lines_with("cached edge failed"), 1u);
	ASSERT_EQ(write(1000, p).bytes, 20000u);
	EXPECT_EQ(log_lines_with("cached edge failed"), 1u) << "logged once per export";
}

TEST_F(request_path, memory_misaligned_middle_bounce_vs_buffered)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(65536, 1); // offset-aligned, memory-misaligned
	ASSERT_EQ(write(0, p).bytes, 65536u);
	auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 1u);
	EXPECT_TRUE(w[0].direct);
	EXPECT_TRUE(w[0].mem_aligned) << "bounce buffer must be aligned";
	EXPECT_EQ(stat_of(exp, "write_direct"), 1u);
	EXPECT_EQ(stat_of(exp, "write_bounce_copies"), 1u);
	auto c = fb.contents(k_fd);
	EXPECT_EQ(c, p.bytes());

	dcache_settings s = dcache_settings_default();
	s.io_cache_write = DCACHE_MODE_DIRECT;
	s.direct_misaligned_memory = DCACHE_MEM_MISALIGNED_BUFFERED;
	make(s);
	fb.clear_calls();
	ASSERT_EQ(write(0, p).bytes, 65536u);
	w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 1u);
	EXPECT_FALSE(w[0].direct);
	EXPECT_EQ(stat_of(exp, "write_not_direct_mem_misaligned"), 1u);
	EXPECT_EQ(stat_of(exp, "write_bounce_copies"), 0u);
}

TEST_F(request_path, aligned_payload_is_written_without_copy)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(8192, 0);
	ASSERT_EQ(write(4096, p).bytes, 8192u);
	EXPECT_EQ(stat_of(exp, "write_bounce_copies"), 0u);
	EXPECT_EQ(stat_of(exp, "write_direct"), 1u);
}

// What the file asks of memory (statx's dio_mem_align) decides whether the
// payload is copied: 512 on virtio and loop devices, 4 on NVMe.  A payload
// that meets it is written from where it lies, one that does not through
// one bounce copy; both counted in bytes.
TEST_F(request_path, a_payload_meeting_dio_mem_align_is_not_copied)
{
	struct {
		std::uint32_t mem_align;
		std::size_t shift; // of the payload from a page
		bool copied;
	} const cases[] = {
		{512, 512, false}, // loop/virtio: 512-aligned memory is enough
		{512, 16, true},   // glibc's chunk header: misaligned
		{4, 16, false},	   // NVMe: any 4-byte aligned payload
		{4096, 512, true}, // a device that wants whole pages
	};
	for (const auto &c : cases) {
		SCOPED_TRACE(testing::Message() << "mem_align " << c.mem_align << ", shift " << c.shift);
		fb.set_caps({c.mem_align, 4096, 4096, dcache::io::dio_caps::source::fake});
		modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
		fb.clear_calls();
		payload p(1 << 20, c.shift);
		ASSERT_EQ(write(1 << 20, p).bytes, std::size_t{1} << 20);
		const auto w = fb.calls_of(op_kind::write);
		ASSERT_EQ(w.size(), 1u);
		EXPECT_TRUE(w[0].direct);
		EXPECT_TRUE(w[0].mem_aligned);
		if (c.copied)
			EXPECT_NE(w[0].iov0, p.data()) << "issued from a bounce buffer";
		else
			EXPECT_EQ(w[0].iov0, p.data()) << "issued from the caller's memory";
		EXPECT_EQ(stat_of(exp, "write_bounce_copies"), c.copied ? 1u : 0u);
		EXPECT_EQ(stat_of(exp, "write_bounced_bytes"), c.copied ? std::uint64_t{1} << 20 : 0u);
		EXPECT_EQ(stat_of(exp, "write_unbounced_bytes"), c.copied ? 0u : std::uint64_t{1} << 20);
		EXPECT_EQ(fb.contents(k_fd).size(), std::size_t{2} << 20);
	}
}

// Where a copy is needed it costs the copy and nothing else: the bounce
// buffer a direct WRITE or READ gave back is the one the next takes (no
// mapping, fault or zeroing per request), counted as reused.
TEST_F(request_path, bounce_buffers_are_reused_request_after_request)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	(void)dcache::io::bounce_trim(); // none left over: the first is mapped
	constexpr std::size_t k_len = std::size_t{1} << 20;
	constexpr int k_requests = 4;
	payload p(k_len, 16); // glibc's chunk header: misaligned
	std::vector<std::uint8_t> back(k_len + 16);
	for (int i = 0; i < k_requests; ++i) {
		ASSERT_EQ(write(static_cast<std::uint64_t>(i) * k_len, p).bytes, k_len);
		ASSERT_EQ(read(static_cast<std::uint64_t>(i) * k_len, back.data() + 16, k_len).bytes, k_len);
		EXPECT_TRUE(std::equal(back.begin() + 16, back.end(), p.bytes().begin()));
	}
	EXPECT_EQ(stat_of(exp, "write_bounce_copies"), std::uint64_t{k_requests});
	EXPECT_EQ(stat_of(exp, "read_bounce_copies"), std::uint64_t{k_requests});
	EXPECT_EQ(stat_of(exp, "bounce_buffers_mapped"), 1u) << "one buffer, mapped once";
	EXPECT_EQ(stat_of(exp, "bounce_buffers_reused"), std::uint64_t{2 * k_requests - 1});
	const auto w = fb.calls_of(op_kind::write);
	const auto r = fb.calls_of(op_kind::read);
	ASSERT_EQ(w.size(), std::size_t{k_requests});
	ASSERT_EQ(r.size(), std::size_t{k_requests});
	for (const auto &c : w)
		EXPECT_EQ(c.iov0, w[0].iov0) << "every WRITE issued from the same buffer";
	for (const auto &c : r)
		EXPECT_EQ(c.iov0, w[0].iov0) << "and every READ read into it";
	EXPECT_NE(w[0].iov0, p.data());
}

// ---- short transfers and errors -------------------------------------------

TEST_F(request_path, short_middle_reports_exactly_what_was_written_and_stops)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(1000 + 40960 + 700, 0);
	const std::uint64_t head = 4096 - 3096 % 4096; // offset 3096 -> head 1000
	const std::uint64_t middle = 40960;
	const std::size_t sixty = static_cast<std::size_t>(middle * 6 / 10);
	fb.short_call(2, sixty); // call 0 head, call 1 its write-back, call 2 middle
	const auto r = write(3096, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, head + sixty);
	EXPECT_EQ(fb.calls_of(op_kind::write).size(), 2u) << "the tail must not be issued after a short middle";
	EXPECT_EQ(stat_of(exp, "short_transfers"), 1u);
	EXPECT_EQ(stat_of(exp, "write_bytes"), head + sixty);
	EXPECT_EQ(fb.contents(k_fd).size(), 3096 + head + sixty);
}

// Head + partial middle can exceed the middle's own length: a loop that
// compared the running total (not this segment's transfer) with the
// segment's expected length would carry on and issue the tail.
TEST_F(request_path, short_middle_detected_per_segment_not_by_running_total)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(4000 + 8192 + 300, 0);
	const std::size_t sixty = 8192 * 6 / 10;
	fb.short_call(2, sixty); // call 0 head, call 1 its write-back, call 2 middle
	const auto r = write(96, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 4000u + sixty);
	EXPECT_EQ(fb.calls_of(op_kind::write).size(), 2u);
	EXPECT_EQ(stat_of(exp, "short_transfers"), 1u);
}

TEST_F(request_path, short_transfer_still_syncs_when_stable_was_asked)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(20000, 0);
	fb.short_call(0, 10);
	const auto r = write(1000, p, true);
	EXPECT_EQ(r.bytes, 10u);
	EXPECT_TRUE(r.stable);
	EXPECT_EQ(fb.count(op_kind::fsync), 1u);
}

TEST_F(request_path, eio_on_first_segment_fails_the_write)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(20000, 0);
	fb.fail_call(0, EIO);
	const auto r = write(1000, p, true);
	EXPECT_EQ(r.error, EIO);
	EXPECT_EQ(r.bytes, 0u);
	EXPECT_FALSE(r.stable);
	EXPECT_EQ(fb.calls_of(op_kind::write).size(), 1u);
	EXPECT_EQ(syncs(), 0u);
	EXPECT_EQ(stat_of(exp, "errors"), 1u);
}

TEST_F(request_path, eio_on_direct_middle_reissues_it_through_the_page_cache)
{
	// The kernel fails a direct write with EIO when it meets cached state
	// ("Direct I/O collision with buffered writes"): the segment goes the
	// DONTCACHE way instead, and the WRITE completes.
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(20000, 0);
	fb.fail_call(2, EIO); // call 0 head, call 1 its write-back, call 2 middle
	const auto r = write(1000, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 20000u);
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 4u); // head, middle (EIO), middle again, tail
	EXPECT_EQ(w[2].offset, w[1].offset);
	EXPECT_TRUE(w[1].direct);
	EXPECT_FALSE(w[2].direct) << "the reissue goes through the page cache";
	EXPECT_TRUE(w[2].rwf & RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "fallback_direct_eio"), 1u);
	EXPECT_EQ(stat_of(exp, "errors"), 0u);
	EXPECT_EQ(log_lines_with("direct write failed (EIO)"), 1u);
}

// Out of room (ENOSPC, EDQUOT, EFBIG), an O_DIRECT write fails whole where a
// buffered one writes what fits: the middle is reissued through the page
// cache, whose short write is the reply; the WRITE that then cannot make
// progress gets the error, as from VFS.
class no_room : public request_path, public ::testing::WithParamInterface<int> {};

TEST_P(no_room, direct_middle_reissued_through_the_page_cache_writes_what_fits)
{
	const int err = GetParam();
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(20000, 0);
	fb.fail_call(2, err);	// call 0 head, call 1 its write-back, call 2 middle
	fb.short_call(3, 5000); // the reissue: only 5000 bytes fit
	const auto r = write(1000, p, true);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 3096u + 5000u) << "head + what fitted";
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 3u) << "head, middle, its reissue; no tail after a short write";
	EXPECT_TRUE(w[1].direct);
	EXPECT_FALSE(w[2].direct);
	EXPECT_EQ(w[2].offset, w[1].offset);
	EXPECT_EQ(stat_of(exp, "fallback_direct_nospace"), 1u);
	EXPECT_EQ(log_lines_with(std::string("direct write failed (") + strerrorname_np(err) + ")"), 1u);

	// The client's next WRITE, of the rest: nothing fits any more.
	fb.clear_calls();
	fb.fail_when([](const dcache::io::request &q, std::size_t) { return q.op == op_kind::write; }, err);
	payload rest(20000 - r.bytes, 0);
	const auto again = write(1000 + r.bytes, rest, true);
	EXPECT_EQ(again.error, err) << "no progress: the error, not a 0-byte success";
	EXPECT_EQ(again.bytes, 0u);
	EXPECT_FALSE(again.stable);
}
INSTANTIATE_TEST_SUITE_P(request_path, no_room, ::testing::Values(ENOSPC, EDQUOT, EFBIG));

TEST_F(request_path, eio_again_on_the_reissued_middle_reports_the_head_as_a_short_write)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	payload p(20000, 0);
	fb.fail_call(2, EIO); // the middle (after the head and its write-back)
	fb.fail_call(3, EIO); // its reissue
	const auto r = write(1000, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 3096u);
	EXPECT_EQ(fb.calls_of(op_kind::write).size(), 3u);
	EXPECT_EQ(stat_of(exp, "errors"), 1u);
}

TEST_F(request_path, eagain_is_passed_through)
{
	payload p(100, 0);
	fb.fail_call(0, EAGAIN);
	EXPECT_EQ(write(0, p).error, EAGAIN);
}

TEST_F(request_path, sync_failure_is_an_error_and_not_stable)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT_FILE_SYNC);
	payload p(8192, 0);
	fb.fail_when([](const dcache::io::request &q, std::size_t) { return q.op == op_kind::fsync; }, EIO);
	const auto r = write(0, p);
	EXPECT_EQ(r.error, EIO);
	EXPECT_FALSE(r.stable);
	EXPECT_EQ(stat_of(exp, "writes_reply_stable"), 0u);
}

// ---- fallbacks -------------------------------------------------------------

TEST_F(request_path, eopnotsupp_falls_back_to_buffered_plus_dontneed_counted_logged_once)
{
	modes(DCACHE_MODE_DONTCACHE, DCACHE_MODE_DONTCACHE);
	fb.reject_dontcache();
	payload p(5000, 0);
	for (int i = 0; i < 3; ++i) {
		const auto r = write(static_cast<std::uint64_t>(i) * 5000, p);
		ASSERT_EQ(r.error, 0);
		EXPECT_EQ(r.bytes, 5000u);
	}
	const auto w = fb.calls_of(op_kind::write);
	// First WRITE: DONTCACHE refused, then buffered; later ones go straight
	// to buffered (the file remembers).
	ASSERT_EQ(w.size(), 4u);
	EXPECT_EQ(w[0].res.error, EOPNOTSUPP);
	for (std::size_t i = 1; i < w.size(); ++i)
		EXPECT_EQ(w[i].rwf, 0);
	EXPECT_EQ(fb.count(op_kind::sync_range), 3u);
	const auto drops = fb.calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(drops.size(), 3u);
	// The whole pages each WRITE touched, partly written ones too: the
	// kernel drops every folio a DONTCACHE write touched.
	EXPECT_EQ(drops[1].offset, 4096u);
	EXPECT_EQ(drops[1].length, 8192u);
	EXPECT_EQ(stat_of(exp, "fallback_no_dontcache"), 3u);
	EXPECT_EQ(log_lines_with("RWF_DONTCACHE not supported"), 1u);
	EXPECT_EQ(fb.contents(k_fd).size(), 15000u);

	// READ: same fallback, DONTNEED after.
	std::vector<std::uint8_t> buf(4000);
	const auto r = read(100, buf.data(), buf.size());
	EXPECT_EQ(r.bytes, 4000u);
	EXPECT_EQ(fb.count(op_kind::fadvise_dontneed), 4u);
	EXPECT_EQ(log_lines_with("RWF_DONTCACHE not supported"), 1u);
}

TEST_F(request_path, eopnotsupp_on_direct_middle_retries_without_the_flag)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	fb.reject_dontcache();
	payload p(8192, 0);
	const auto r = write(0, p);
	EXPECT_EQ(r.bytes, 8192u);
	const auto w = fb.calls_of(op_kind::write);
	ASSERT_EQ(w.size(), 2u);
	EXPECT_TRUE(w[1].direct);
	EXPECT_EQ(w[1].rwf, 0);
	EXPECT_EQ(stat_of(exp, "direct_bytes"), 8192u);
}

TEST_F(request_path, no_odirect_falls_back_to_dontcache_counted_logged_once)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT);
	fb.set_open_direct_error(EINVAL);
	payload p(65536, 0);
	for (int i = 0; i < 3; ++i)
		ASSERT_EQ(write(0, p).bytes, 65536u);
	std::vector<std::uint8_t> buf(8192);
	EXPECT_EQ(read(0, buf.data(), buf.size()).bytes, 8192u);
	EXPECT_EQ(fb.opens(), 1u) << "EINVAL at open is remembered for the file";
	for (const auto &c : fb.calls())
		EXPECT_FALSE(c.direct);
	EXPECT_EQ(fb.calls_of(op_kind::write)[0].rwf, RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "fallback_no_odirect"), 4u);
	EXPECT_EQ(stat_of(exp, "write_not_direct_fallback"), 3u);
	EXPECT_EQ(stat_of(exp, "read_not_direct_fallback"), 1u);
	EXPECT_EQ(log_lines_with("O_DIRECT refused"), 1u);
}

TEST_F(request_path, einval_on_a_direct_write_reissues_non_direct)
{
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	fb.fail_when([](const dcache::io::request &q,
			std::size_t) { return q.op == op_kind::write && q.fd >= fake_backend::k_direct_fd_base; },
		     EINVAL, 1);
	payload p(8192, 0);
	const auto r = write(0, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 8192u);
	EXPECT_EQ(stat_of(exp, "fallback_direct_einval"), 1u);
	EXPECT_EQ(fb.contents(k_fd), p.bytes());
}

TEST_F(request_path, eio_on_a_direct_read_reissues_it_dontcache)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_BUFFERED);
	payload p(8192, 0);
	ASSERT_EQ(write(0, p).error, 0);
	fb.fail_when([](const dcache::io::request &q,
			std::size_t) { return q.op == op_kind::read && q.fd >= fake_backend::k_direct_fd_base; },
		     EIO, 1);
	std::vector<std::uint8_t> buf(8192);
	const auto r = read(0, buf.data(), buf.size());
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 8192u);
	EXPECT_EQ(buf, p.bytes());
	const auto reads = fb.calls_of(op_kind::read);
	ASSERT_EQ(reads.size(), 2u);
	EXPECT_TRUE(reads[0].direct);
	EXPECT_FALSE(reads[1].direct);
	EXPECT_EQ(reads[1].rwf, RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "fallback_direct_eio"), 1u);
	EXPECT_EQ(log_lines_with("direct read failed (EIO)"), 1u);
}

} // namespace
