// The issue loop through the C API, over the fake backend: segment
// issuing, short transfers, errors, fallbacks (counted and logged once),
// stability (exactly one sync per WRITE, never lower than asked), direct
// READ widening and EOF, fadvise mode, statistics, and concurrency.
#include "dcache_io/fake_backend.h"
#include "planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core_support.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using dcache::io::fake_backend;
using dcache::io::op_kind;
using namespace dcache::core;

namespace {

using namespace dcache::test;

// A payload buffer at a chosen distance from a 4096-aligned address.
class payload {
public:
	payload(std::size_t len, std::size_t mem_shift, unsigned seed = 1)
	{
		_raw = static_cast<std::uint8_t *>(std::aligned_alloc(4096, ((len + mem_shift) / 4096 + 1) * 4096));
		_data = _raw + mem_shift;
		for (std::size_t i = 0; i < len; ++i)
			_data[i] = static_cast<std::uint8_t>((i * 131 + seed * 7) & 0xff);
		_len = len;
	}
	payload(const payload &) = delete;
	payload &operator=(const payload &) = delete;
	~payload() { std::free(_raw); }
	[[nodiscard]] struct iovec iov() const { return {_data, _len}; }
	[[nodiscard]] std::vector<std::uint8_t> bytes() const { return {_data, _data + _len}; }
	[[nodiscard]] std::uint8_t *data() const { return _data; }

private:
	std::uint8_t *_raw = nullptr;
	std::uint8_t *_data = nullptr;
	std::size_t _len = 0;
};

constexpr int k_fd = 7;

class request_path : public core_test {
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
		free_export();
		EXPECT_EQ(fb.open_direct_fds(), 0) << "O_DIRECT descriptor leaked";
		dcache_set_log(nullptr);
	}
	void make(const dcache_settings &s) { make_over(fb, s, "export 1 /test"); }
	void modes(dcache_mode rd, dcache_mode wr)
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_read = rd;
		s.io_cache_write = wr;
		make(s);
	}
	dcache_io_result write(std::uint64_t off, const payload &p, bool stable = false)
	{
		const struct iovec v = p.iov();
		const dcache_io io{k_fd, off, &v, 1, stable, nullptr};
		return dcache_write(exp, file, &io);
	}
	dcache_io_result read(std::uint64_t off, std::uint8_t *buf, std::size_t len)
	{
		const struct iovec v {
			buf, len
		};
		const dcache_io io{k_fd, off, &v, 1, false, nullptr};
		return dcache_read(exp, file, &io);
	}
	std::vector<fake_backend::call> calls_of(op_kind op) const
	{
		std::vector<fake_backend::call> out;
		for (const auto &c : fb.calls())
			if (c.op == op)
				out.push_back(c);
		return out;
	}
	std::size_t syncs() const { return fb.count(op_kind::fsync) + fb.count(op_kind::fdatasync); }

	fake_backend fb;
};

// ---- WRITE segments ------------------------------------------------------

TEST_F(request_path, buffered_write_is_one_plain_pwritev2)
{
	payload p(10000, 3);
	const auto r = write(123, p);
	EXPECT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, 10000u);
	EXPECT_FALSE(r.stable);
	const auto w = calls_of(op_kind::write);
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
	const auto w = calls_of(op_kind::write);
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
	const auto w = calls_of(op_kind::write);
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
	const auto w = calls_of(op_kind::write);
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
	auto w = calls_of(op_kind::write);
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
	w = calls_of(op_kind::write);
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
	EXPECT_EQ(calls_of(op_kind::write).size(), 2u) << "the tail must not be issued after a short middle";
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
	EXPECT_EQ(calls_of(op_kind::write).size(), 2u);
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
	EXPECT_EQ(calls_of(op_kind::write).size(), 1u);
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
	const auto w = calls_of(op_kind::write);
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
	const auto w = calls_of(op_kind::write);
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
	EXPECT_EQ(calls_of(op_kind::write).size(), 3u);
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
	const auto w = calls_of(op_kind::write);
	// First WRITE: DONTCACHE refused, then buffered; later ones go straight
	// to buffered (the file remembers).
	ASSERT_EQ(w.size(), 4u);
	EXPECT_EQ(w[0].res.error, EOPNOTSUPP);
	for (std::size_t i = 1; i < w.size(); ++i)
		EXPECT_EQ(w[i].rwf, 0);
	EXPECT_EQ(fb.count(op_kind::sync_range), 3u);
	const auto drops = calls_of(op_kind::fadvise_dontneed);
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
	const auto w = calls_of(op_kind::write);
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
	EXPECT_EQ(calls_of(op_kind::write)[0].rwf, RWF_DONTCACHE);
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
	const auto reads = calls_of(op_kind::read);
	ASSERT_EQ(reads.size(), 2u);
	EXPECT_TRUE(reads[0].direct);
	EXPECT_FALSE(reads[1].direct);
	EXPECT_EQ(reads[1].rwf, RWF_DONTCACHE);
	EXPECT_EQ(stat_of(exp, "fallback_direct_eio"), 1u);
	EXPECT_EQ(log_lines_with("direct read failed (EIO)"), 1u);
}

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
	for (const auto &c : calls_of(op_kind::read)) {
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
	EXPECT_TRUE(std::equal(into.data(), into.data() + 8192, content.bytes().begin() + 4096));
}

TEST_F(request_path, small_direct_read_goes_dontcache)
{
	modes(DCACHE_MODE_DIRECT, DCACHE_MODE_BUFFERED);
	fb.set_contents(k_fd, std::vector<std::uint8_t>(10000, 9));
	std::vector<std::uint8_t> buf(100);
	const auto r = read(50, buf.data(), buf.size());
	EXPECT_EQ(r.bytes, 100u);
	const auto rd = calls_of(op_kind::read);
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
	EXPECT_EQ(calls_of(op_kind::write).size() + calls_of(op_kind::read).size(), 0u);
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
	auto d = calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 1u);
	EXPECT_EQ(d[0].offset, 100u);
	EXPECT_EQ(d[0].length, 8000u);
	EXPECT_EQ(fb.count(op_kind::sync_range), 1u);

	std::vector<std::uint8_t> buf(5000);
	const auto r = read(6000, buf.data(), buf.size());
	EXPECT_EQ(r.bytes, 2100u);
	EXPECT_TRUE(r.eof);
	d = calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 2u);
	EXPECT_EQ(d[1].offset, 0u) << "back to the 2 MiB boundary: large folios straddle READs";
	EXPECT_EQ(d[1].length, 0u) << "the READ reached end of file: drop to the end";

	// Not at end of file: up to what was read, from the 2 MiB boundary.
	const std::uint64_t mib2 = 2u << 20;
	payload big(4096, 1);
	ASSERT_EQ(write(3 * mib2, big).bytes, 4096u);
	ASSERT_EQ(read(3 * mib2 - 1000, buf.data(), 3000).bytes, 3000u);
	d = calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(d.size(), 3u);
	EXPECT_EQ(d[2].offset, 2 * mib2);
	EXPECT_EQ(d[2].length, mib2 - 1000 + 3000);

	EXPECT_EQ(dcache_after_commit(exp, file, k_fd, 0, 0, 1000), 0);
	d = calls_of(op_kind::fadvise_dontneed);
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
	auto drops = calls_of(op_kind::fadvise_dontneed);
	ASSERT_EQ(drops.size(), 1u);
	EXPECT_EQ(drops[0].offset, 8192u);
	EXPECT_EQ(drops[0].length, 16384u);
	EXPECT_EQ(fb.count(op_kind::sync_range), 1u) << "written back before the drop";
	std::vector<std::uint8_t> buf(16384);
	ASSERT_EQ(read(8192, buf.data(), buf.size()).bytes, 16384u);
	EXPECT_EQ(calls_of(op_kind::fadvise_dontneed).size(), 2u) << "a direct READ's range too";
	EXPECT_EQ(stat_of(exp, "fallback_no_dontcache"), 0u) << "not the DONTCACHE fallback";

	// Where RWF_DONTCACHE rides along (a kernel that has it), nothing more.
	make(dcache_settings_default());
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_DIRECT);
	fb.reject_dontcache(false);
	fb.clear_calls();
	ASSERT_EQ(write(8192, p).bytes, 16384u);
	EXPECT_EQ(calls_of(op_kind::fadvise_dontneed).size(), 0u);
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
