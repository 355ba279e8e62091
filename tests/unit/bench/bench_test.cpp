// Unit tests for dcache-bench's parts that need no server.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "commit_tracker.hpp"
#include "interleave.hpp"
#include "job.hpp"
#include "latency.hpp"
#include "pattern.hpp"
#include "sampler.hpp"

namespace db = dcache::bench;

// ------------------------------------------------------------- job files --
TEST(JobParse, Sizes)
{
	EXPECT_EQ(db::parse_size("4k"), 4096u);
	EXPECT_EQ(db::parse_size("1M"), 1u << 20);
	EXPECT_EQ(db::parse_size("2G"), 2ull << 30);
	EXPECT_EQ(db::parse_size("47008"), 47008u);
	EXPECT_EQ(db::parse_size("1MiB"), 1u << 20);
	EXPECT_EQ(db::parse_size("64kb"), 64u << 10);
	EXPECT_FALSE(db::parse_size(""));
	EXPECT_FALSE(db::parse_size("k"));
	EXPECT_FALSE(db::parse_size("1.5M"));
	EXPECT_FALSE(db::parse_size("12x"));
	EXPECT_FALSE(db::parse_size("99999999999999999999G"));
}

TEST(JobParse, FioStyleJobFile)
{
	db::job_spec s;
	const char *text = "; the reference workload\n"
			   "[global]\n"
			   "ioengine=nfs\n"
			   "url=nfs://127.0.0.1/dcache\n"
			   "bs=1M\n"
			   "rw=rw\n"
			   "rwmixread=60\n"
			   "numjobs=16\n"
			   "iodepth=16\n"
			   "size=64M\n"
			   "time_based\n"
			   "runtime=30\n"
			   "group_reporting=1\n"
			   "[mix]\n"
			   "verify=pattern\n";
	auto e = db::parse_job_text(s, text, "seed.fio");
	ASSERT_FALSE(e) << e->message;
	EXPECT_EQ(s.name, "mix");
	EXPECT_EQ(s.url, "nfs://127.0.0.1/dcache");
	EXPECT_EQ(s.rw, db::rw_mode::rw);
	EXPECT_EQ(s.rwmixread, 60u);
	EXPECT_EQ(s.bs, 1u << 20);
	EXPECT_EQ(s.numjobs, 16u);
	EXPECT_EQ(s.iodepth, 16u);
	EXPECT_EQ(s.size, 64u << 20);
	EXPECT_TRUE(s.time_based);
	EXPECT_DOUBLE_EQ(s.runtime, 30.0);
	EXPECT_TRUE(s.verify);
	EXPECT_FALSE(db::validate(s));
}

TEST(JobParse, ErrorsNameFileLineAndKey)
{
	db::job_spec s;
	auto e = db::parse_job_text(s, "[global]\nbs=1M\nbogus=3\n", "x.ini");
	ASSERT_TRUE(e);
	EXPECT_NE(e->message.find("x.ini:3"), std::string::npos) << e->message;
	EXPECT_NE(e->message.find("bogus"), std::string::npos) << e->message;

	e = db::parse_job_text(s, "[global]\nrw=sideways\n", "y.ini");
	ASSERT_TRUE(e);
	EXPECT_NE(e->message.find("y.ini:2"), std::string::npos);
	EXPECT_NE(e->message.find("sideways"), std::string::npos);
	EXPECT_NE(e->message.find("randrw"), std::string::npos) << "lists what is allowed: " << e->message;

	e = db::parse_job_text(s, "bs=4k\n", "z.ini");
	ASSERT_TRUE(e);
	EXPECT_NE(e->message.find("before any [section]"), std::string::npos);

	e = db::parse_job_text(s, "[a]\n[b]\n", "two.ini");
	ASSERT_TRUE(e);
	EXPECT_NE(e->message.find("second job section"), std::string::npos);

	e = db::parse_job_text(s, "[global\n", "h.ini");
	ASSERT_TRUE(e);
	EXPECT_NE(e->message.find("malformed"), std::string::npos);
}

TEST(JobParse, OverridesWinOverTheFile)
{
	db::job_spec s;
	ASSERT_FALSE(db::parse_job_text(s, "[global]\nurl=nfs://h/e\nbs=1M\nnumjobs=16\nrw=randrw\n", "f"));
	ASSERT_FALSE(db::apply_setting(s, "bs", "4k"));
	ASSERT_FALSE(db::apply_setting(s, "NumJobs", " 2 "));
	ASSERT_FALSE(db::apply_setting(s, "rwmixwrite", "30"));
	ASSERT_FALSE(db::apply_setting(s, "nfs_version", "4"));
	EXPECT_EQ(s.bs, 4096u);
	EXPECT_EQ(s.numjobs, 2u);
	EXPECT_EQ(s.rwmixread, 70u);
	EXPECT_EQ(s.nfs_version, 4);
	EXPECT_EQ(s.rw, db::rw_mode::randrw);
}

TEST(JobParse, RejectsBadValues)
{
	db::job_spec s;
	EXPECT_TRUE(db::apply_setting(s, "numjobs", "0"));
	EXPECT_TRUE(db::apply_setting(s, "iodepth", "-1"));
	EXPECT_TRUE(db::apply_setting(s, "rwmixread", "101"));
	EXPECT_TRUE(db::apply_setting(s, "bs", "0"));
	EXPECT_TRUE(db::apply_setting(s, "nfs_version", "4.1"));
	EXPECT_TRUE(db::apply_setting(s, "url", "http://x/y"));
	EXPECT_TRUE(db::apply_setting(s, "runtime", "-3"));
	EXPECT_TRUE(db::apply_setting(s, "verify", "maybe"));
	EXPECT_TRUE(db::apply_setting(s, "filename", "a/b"));
}

TEST(JobParse, ValidateCrossFieldRules)
{
	db::job_spec s;
	EXPECT_TRUE(db::validate(s)) << "no url";
	s.url = "nfs://h/e";
	EXPECT_FALSE(db::validate(s));
	s.time_based = true;
	EXPECT_TRUE(db::validate(s)) << "time_based without runtime";
	s.runtime = 5;
	EXPECT_FALSE(db::validate(s));
	s.bs = s.size * 2;
	EXPECT_TRUE(db::validate(s)) << "bs > size";
	s.bs = 4096;
	s.rw = db::rw_mode::interleave;
	s.record = 1000;
	EXPECT_TRUE(db::validate(s)) << "record smaller than a page";
	s.record = 47008;
	EXPECT_FALSE(db::validate(s));
	EXPECT_EQ(db::io_budget(s), s.size);
	s.io_size = 4096;
	EXPECT_EQ(db::io_budget(s), 4096u);
}

TEST(JobParse, PacingPassesAndTruncate)
{
	db::job_spec s;
	ASSERT_FALSE(db::apply_setting(s, "thinktime", "2000"));
	EXPECT_DOUBLE_EQ(s.thinktime_us, 2000.0);
	ASSERT_FALSE(db::apply_setting(s, "pass_interval", "8"));
	EXPECT_DOUBLE_EQ(s.pass_interval, 8.0);
	ASSERT_FALSE(db::apply_setting(s, "pass_interval", "0.5"));
	EXPECT_DOUBLE_EQ(s.pass_interval, 0.5);
	EXPECT_LT(s.pass_first, 0) << "by default the first pass is one interval after the start";
	ASSERT_FALSE(db::apply_setting(s, "pass_first", "0"));
	EXPECT_DOUBLE_EQ(s.pass_first, 0.0);
	EXPECT_TRUE(db::apply_setting(s, "pass_first", "-1"));
	ASSERT_FALSE(db::apply_setting(s, "truncate", "1"));
	EXPECT_TRUE(s.truncate);
	EXPECT_TRUE(db::apply_setting(s, "thinktime", "-1"));
	EXPECT_TRUE(db::apply_setting(s, "pass_interval", "-2"));
	EXPECT_TRUE(db::apply_setting(s, "pass_interval", "forever"));
	EXPECT_TRUE(db::apply_setting(s, "truncate", "perhaps"));
}

TEST(JobParse, StallTimeout)
{
	db::job_spec s;
	EXPECT_DOUBLE_EQ(s.stall_timeout, 60.0) << "by default a run fails after 60 s without a reply";
	ASSERT_FALSE(db::apply_setting(s, "stall_timeout", "5"));
	EXPECT_DOUBLE_EQ(s.stall_timeout, 5.0);
	EXPECT_TRUE(db::apply_setting(s, "stall_timeout", "0")) << "0 would fail every run at once";
	EXPECT_TRUE(db::apply_setting(s, "stall_timeout", "never"));
	EXPECT_DOUBLE_EQ(s.stall_timeout, 5.0);
}

TEST(JobParse, PassesNeedATimeBasedJobAndTruncateAWriteOnlyOne)
{
	db::job_spec s;
	s.url = "nfs://h/e";
	s.rw = db::rw_mode::read;
	s.pass_interval = 8;
	auto e = db::validate(s);
	ASSERT_TRUE(e) << "passes without time_based";
	EXPECT_NE(e->message.find("pass_interval"), std::string::npos) << e->message;
	s.time_based = true;
	s.runtime = 30;
	EXPECT_FALSE(db::validate(s));
	s.rw = db::rw_mode::probe;
	EXPECT_TRUE(db::validate(s)) << "passes of a probe";
	s.rw = db::rw_mode::write;
	s.pass_interval = 0;
	s.truncate = true;
	EXPECT_FALSE(db::validate(s));
	for (auto m : {db::rw_mode::read, db::rw_mode::rw, db::rw_mode::randwrite, db::rw_mode::randrw}) {
		s.rw = m;
		EXPECT_TRUE(db::validate(s)) << "truncate with rw=" << db::to_string(m);
	}
}

TEST(Latency, PercentilesUpToTheThousandth)
{
	db::latency_recorder r;
	for (int i = 1; i <= 1000; ++i)
		r.add(i);
	EXPECT_DOUBLE_EQ(r.percentile(0.50), 501.0);
	EXPECT_DOUBLE_EQ(r.percentile(0.99), 991.0);
	EXPECT_DOUBLE_EQ(r.percentile(0.999), 1000.0);
	EXPECT_DOUBLE_EQ(r.max(), 1000.0);
	db::latency_recorder few;
	few.add(7);
	EXPECT_DOUBLE_EQ(few.percentile(0.999), 7.0) << "one sample is every percentile";
}

// --------------------------------------------------------------- patterns --
TEST(Pattern, RoundTripsAtAnyOffsetAndLength)
{
	for (std::uint64_t off : {0ull, 1ull, 7ull, 8ull, 4095ull, 47008ull * 3 + 5}) {
		for (std::size_t len : {1u, 7u, 8u, 9u, 4096u, 47008u}) {
			std::vector<std::byte> buf(len);
			db::fill_pattern(buf, off, 42);
			EXPECT_FALSE(db::verify_pattern(buf, off, 42)) << off << "+" << len;
		}
	}
}

TEST(Pattern, PiecesWrittenSeparatelyEqualTheWhole)
{
	// what makes misaligned interleaved records verifiable: content depends
	// only on the absolute offset
	std::vector<std::byte> whole(100000), a(47008), b(100000 - 47008);
	db::fill_pattern(whole, 12345, 9);
	db::fill_pattern(a, 12345, 9);
	db::fill_pattern(b, 12345 + 47008, 9);
	EXPECT_TRUE(std::equal(a.begin(), a.end(), whole.begin()));
	EXPECT_TRUE(std::equal(b.begin(), b.end(), whole.begin() + 47008));
}

TEST(Pattern, DetectsWrongOffsetSeedAndFlippedByte)
{
	std::vector<std::byte> buf(8192);
	db::fill_pattern(buf, 4096, 1);
	auto m = db::verify_pattern(buf, 0, 1); // read back from the wrong place
	ASSERT_TRUE(m);
	EXPECT_EQ(m->offset, 0u);
	EXPECT_TRUE(db::verify_pattern(buf, 4096, 2)) << "other seed";
	buf[5000] ^= std::byte{0x10};
	m = db::verify_pattern(buf, 4096, 1);
	ASSERT_TRUE(m);
	EXPECT_EQ(m->offset, 4096u + 5000u);
	EXPECT_EQ(m->actual ^ m->expected, 0x10);
	std::vector<std::byte> zeros(4096);
	EXPECT_TRUE(db::verify_pattern(zeros, 0, 1)) << "a hole is not the pattern";
	EXPECT_NE(db::file_seed(1, 0), db::file_seed(1, 1));
}

// ------------------------------------------------------------- interleave --
TEST(Interleave, OrderIsAPermutation)
{
	for (std::uint64_t count : {1ull, 2ull, 7ull, 100ull, 713ull}) {
		for (std::uint64_t window : {2ull, 3ull, 8ull, 32ull}) {
			const auto order = db::interleave_order(count, window);
			ASSERT_EQ(order.size(), count);
			std::set<std::uint64_t> seen(order.begin(), order.end());
			EXPECT_EQ(seen.size(), count);
			EXPECT_EQ(*seen.rbegin(), count - 1);
		}
	}
}

TEST(Interleave, EveryBoundaryPageSharedByExactlyTwoRecordsInBothOrders)
{
	const std::uint64_t record = 47008, count = 713;
	const auto order = db::interleave_order(count, 8);
	const auto st = db::analyse_boundaries(order, record, 4096);
	EXPECT_EQ(st.pages_touched_by_more_than_two, 0u);
	// a boundary k|k+1 shares a page unless it falls on a page boundary
	std::uint64_t expected_shared = 0;
	for (std::uint64_t k = 1; k < count; ++k)
		if ((k * record) % 4096 != 0)
			++expected_shared;
	EXPECT_EQ(st.shared_pages, expected_shared);
	EXPECT_EQ(st.lower_first + st.upper_first, st.shared_pages);
	// both arrival orders, close to half each
	EXPECT_GT(st.lower_first, st.shared_pages / 3);
	EXPECT_GT(st.upper_first, st.shared_pages / 3);
}

TEST(Interleave, DriftIsBoundedByTheWindow)
{
	const std::uint64_t window = 8;
	const auto order = db::interleave_order(1000, window);
	for (std::uint64_t i = 0; i < order.size(); ++i) {
		const auto diff = order[i] > i ? order[i] - i : i - order[i];
		EXPECT_LT(diff, window) << "position " << i;
	}
}

TEST(Interleave, AnalysisCountsAPageTouchedByThree)
{
	// records of 2048 bytes: a 4 KiB page holds two, and an unaligned third
	// spills in; the analysis must see it
	const auto st = db::analyse_boundaries(db::interleave_order(6, 2), 3000, 4096);
	EXPECT_GT(st.pages_touched_by_more_than_two, 0u);
}

// ------------------------------------------------------ COMMIT accounting --
TEST(CommitTracker, UnstableWriteNeedsCommitAtClose)
{
	db::commit_tracker t;
	t.on_write_reply(db::stability::unstable);
	t.on_write_reply(db::stability::file_sync);
	EXPECT_TRUE(t.needs_commit());
	EXPECT_TRUE(t.flush_point());
	t.on_commit_reply();
	EXPECT_FALSE(t.needs_commit());
	EXPECT_FALSE(t.flush_point()) << "nothing written since the COMMIT";
	EXPECT_EQ(t.counts().commits_sent, 1u);
	EXPECT_EQ(t.counts().commits_saved, 0u) << "no WRITE since the last flush, nothing saved";
	EXPECT_EQ(t.counts().writes_unstable, 1u);
	EXPECT_EQ(t.counts().writes_file_sync, 1u);
}

TEST(CommitTracker, AllStableWritesSaveTheCommit)
{
	db::commit_tracker t;
	t.on_write_reply(db::stability::file_sync);
	t.on_write_reply(db::stability::data_sync);
	EXPECT_FALSE(t.flush_point());
	EXPECT_EQ(t.counts().commits_saved, 1u);
	EXPECT_FALSE(t.flush_point()) << "a second close with no WRITE saves nothing more";
	EXPECT_EQ(t.counts().commits_saved, 1u);
	t.on_write_reply(db::stability::file_sync);
	EXPECT_FALSE(t.flush_point());
	EXPECT_EQ(t.counts().commits_saved, 2u);
	EXPECT_EQ(t.counts().commits_sent, 0u);
}

TEST(CommitTracker, UnknownStabilityIsTreatedAsUnstable)
{
	db::commit_tracker t;
	t.on_write_reply(db::stability::unknown);
	EXPECT_TRUE(t.flush_point());
	EXPECT_EQ(t.counts().writes_unknown, 1u);
}

TEST(CommitTracker, CountsVerifierChanges)
{
	db::commit_tracker t;
	db::commit_tracker::verifier a{1, 2, 3, 4, 5, 6, 7, 8}, b{9, 9, 9, 9, 9, 9, 9, 9};
	t.on_write_reply(db::stability::unstable, &a);
	t.on_write_reply(db::stability::unstable, &a);
	EXPECT_EQ(t.counts().verifier_changes, 0u);
	t.on_commit_reply(&b); // the server rebooted between WRITE and COMMIT
	EXPECT_EQ(t.counts().verifier_changes, 1u);
}

TEST(CommitTracker, CountsAdd)
{
	db::commit_counts a, b;
	a.writes_unstable = 2;
	a.commits_sent = 1;
	b.writes_unstable = 3;
	b.commits_saved = 4;
	b.writes_file_sync = 5;
	a += b;
	EXPECT_EQ(a.writes_unstable, 5u);
	EXPECT_EQ(a.commits_sent, 1u);
	EXPECT_EQ(a.commits_saved, 4u);
	EXPECT_EQ(a.writes_file_sync, 5u);
}

// ---------------------------------------------------------------- sampler --
TEST(Sampler, ReadsOwnCpuTicksAndMeminfo)
{
	const auto t = db::read_proc_cpu_ticks(::getpid());
	ASSERT_TRUE(t);
	const auto mi = db::read_meminfo();
	ASSERT_TRUE(mi.count("Cached"));
	EXPECT_GT(mi.at("MemTotal"), 1u << 20) << "kB converted to bytes";
}

TEST(Sampler, CachestatSeesWhatWasWrittenAndDropped)
{
	const auto dir = std::filesystem::temp_directory_path() / ("dcache_bench_test." + std::to_string(::getpid()));
	std::filesystem::create_directories(dir);
	const auto path = (dir / "f").string();
	{
		const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
		ASSERT_GE(fd, 0);
		std::vector<char> buf(1 << 20, 'x');
		ASSERT_EQ(::write(fd, buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
		::close(fd);
	}
	auto c = db::file_cachestat(path);
	if (!c && errno == ENOSYS) {
		std::filesystem::remove_all(dir);
		GTEST_SKIP() << "cachestat(2) needs kernel >= 6.5";
	}
	ASSERT_TRUE(c);
	EXPECT_GE(c->cache, 1u << 20);
	EXPECT_EQ(db::drop_dir_cache(dir.string()), 0);
	c = db::dir_cachestat(dir.string());
	ASSERT_TRUE(c);
	// tmpfs cannot drop its pages (they are the file); elsewhere they go
	if (db::block_device_of(dir.string())) {
		EXPECT_LT(c->cache, 1u << 20);
	}
	std::filesystem::remove_all(dir);
}

// A kernel thread's stat line: flags (field 9) carry PF_KTHREAD, the name
// may hold spaces and ')', and the family drops what tells instances apart.
TEST(Sampler, ParsesProcStatAndNamesKernelThreadFamilies)
{
	const auto st = db::parse_proc_stat("57 (kworker/u8:3-xfs-conv/loop0) I 2 0 0 0 -1 69238880 0 0 0 0 "
					    "12 345 0 0 20 0 1 0 100 0 0");
	ASSERT_TRUE(st);
	EXPECT_EQ(st->comm, "kworker/u8:3-xfs-conv/loop0");
	EXPECT_EQ(st->flags, 69238880u);
	EXPECT_NE(st->flags & 0x00200000u, 0u);
	EXPECT_EQ(st->utime, 12u);
	EXPECT_EQ(st->stime, 345u);
	const auto odd = db::parse_proc_stat("9 (a) b) S 1 1 1 0 -1 4194304 0 0 0 0 7 8 0 0");
	ASSERT_TRUE(odd);
	EXPECT_EQ(odd->comm, "a) b");
	EXPECT_EQ(odd->utime + odd->stime, 15u);
	EXPECT_FALSE(db::parse_proc_stat("9 (short) S 1 1"));
	EXPECT_FALSE(db::parse_proc_stat("9 (bad) S 1 1 1 0 -1 x 0 0 0 0 7 8"));

	EXPECT_EQ(db::kthread_family("kworker/u8:3-xfs-conv/loop0"), "kworker xfs-conv");
	EXPECT_EQ(db::kthread_family("kworker/1:2H-kblockd"), "kworker kblockd");
	EXPECT_EQ(db::kthread_family("kworker/u9:0-loop12"), "kworker loop");
	EXPECT_EQ(db::kthread_family("kworker/0:1"), "kworker");
	EXPECT_EQ(db::kthread_family("loop3"), "loop");
	EXPECT_EQ(db::kthread_family("ksoftirqd/1"), "ksoftirqd");
	EXPECT_EQ(db::kthread_family("kswapd0"), "kswapd");
	EXPECT_EQ(db::kthread_family("kdamond.0"), "kdamond");
	EXPECT_EQ(db::kthread_family("xfsaild/loop0"), "xfsaild");
	EXPECT_EQ(db::kthread_family("42"), "42");
}

// The machine always has kernel threads (kthreadd's children), and this
// process is not one of them.
TEST(Sampler, FindsKernelThreadsAndNotItself)
{
	const auto k = db::read_kthread_ticks();
	EXPECT_FALSE(k.empty());
	EXPECT_EQ(k.count(::getpid()), 0u);
}

// ------------------------------------------------------- thread sampling --
TEST(ThreadSampler, ParsesStateAndSyscallLines)
{
	EXPECT_EQ(db::stat_state("123 (svc_4) D 1 2 3"), 'D');
	EXPECT_EQ(db::stat_state("123 (odd) name) ) S 1 2 3"), 'S') << "comm may hold ') '";
	EXPECT_EQ(db::stat_state("garbage"), '?');
	const auto sc = db::parse_syscall_line("17 0x1c 0x7f00 0x100000 0x2000 0x0 0x0 0x7ffd 0x7f12");
	ASSERT_TRUE(sc);
	EXPECT_EQ(sc->nr, 17);
	EXPECT_EQ(sc->arg0, 0x1cu);
	EXPECT_FALSE(db::parse_syscall_line("running"));
	EXPECT_FALSE(db::parse_syscall_line("-1 0x7ffd 0x7f12"));
	EXPECT_FALSE(db::parse_syscall_line(""));
	EXPECT_TRUE(db::file_io_syscall(17));	// pread64
	EXPECT_TRUE(db::file_io_syscall(75));	// fdatasync
	EXPECT_FALSE(db::file_io_syscall(202)); // futex
	EXPECT_FALSE(db::file_io_syscall(426)); // io_uring_enter
}

// A thread parked in read() on a pipe is a server thread in a read syscall
// but not in *file* I/O (the descriptor is a pipe); a thread named like an
// io_uring worker is counted apart.
TEST(ThreadSampler, CountsWorkersAndIgnoresPipeReads)
{
	int p[2];
	ASSERT_EQ(::pipe(p), 0);
	std::atomic<bool> named{false};
	std::atomic<pid_t> tid{0};
	std::thread t([&] {
		pthread_setname_np(pthread_self(), "svc_test");
		tid = ::gettid();
		named = true;
		char c;
		(void)!::read(p[0], &c, 1);
	});
	std::atomic<bool> named2{false};
	std::thread t2([&] {
		pthread_setname_np(pthread_self(), "iou-wrk-test");
		named2 = true;
		char c;
		(void)!::read(p[0], &c, 1);
	});
	while (!named || !named2)
		std::this_thread::yield();
	// wait until it is really blocked in read() (syscall 0 on the pipe)
	const std::string sc_path = "/proc/self/task/" + std::to_string(tid.load()) + "/syscall";
	bool blocked = false;
	for (int i = 0; i < 400 && !blocked; ++i) {
		std::ifstream in(sc_path);
		std::string line;
		std::getline(in, line);
		const auto sc = db::parse_syscall_line(line);
		blocked = sc && sc->nr == 0 && sc->arg0 == static_cast<std::uint64_t>(p[0]);
		if (!blocked)
			std::this_thread::sleep_for(std::chrono::milliseconds(5));
	}
	ASSERT_TRUE(blocked) << sc_path << " never showed read(" << p[0] << ")";
	const auto s = db::read_thread_snapshot(::getpid());
	ASSERT_TRUE(s);
	EXPECT_GE(s->threads, 2u);
	EXPECT_EQ(s->iowq, 1u) << "the thread named iou-wrk-test";
	EXPECT_EQ(s->workers, s->threads - 1);
	EXPECT_EQ(s->workers_in_file_io, 0u) << "a pipe is not a file";
	// The process's resident set, as /proc/self/status says it (a test
	// binary holds more than a MiB, far less than a TiB).
	EXPECT_GT(s->rss_kib, 1024u);
	EXPECT_LT(s->rss_kib, 1ull << 30);
	ASSERT_EQ(::write(p[1], "xy", 2), 2);
	t.join();
	t2.join();
	::close(p[0]);
	::close(p[1]);
	EXPECT_FALSE(db::read_thread_snapshot(-5)) << "no such process";
}

TEST(ThreadSampler, StatsAverageAndPeak)
{
	db::thread_stats st;
	db::thread_snapshot a, b;
	a.in_d = 1;
	a.workers_in_file_io = 3;
	a.threads = 10;
	b.in_d = 4;
	b.workers_in_file_io = 0;
	b.threads = 12;
	st.add(a);
	st.add(b);
	EXPECT_EQ(st.samples, 2u);
	EXPECT_DOUBLE_EQ(st.d_mean, 2.5);
	EXPECT_EQ(st.d_peak, 4u);
	EXPECT_DOUBLE_EQ(st.worker_file_io_mean, 1.5);
	EXPECT_EQ(st.worker_file_io_peak, 3u);
	EXPECT_EQ(st.threads_peak, 12u);
}
