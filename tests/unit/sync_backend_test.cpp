// The synchronous backend and the C API against real files.  /tmp is
// whatever the machine has; features it lacks are skipped with the reason.
#include "dcache/core.h"
#include "dcache_io/sync_backend.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "temp_file.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace dcache::io;

namespace {

using dcache::test::temp_file;

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed)
{
	std::vector<std::uint8_t> v(n);
	for (std::size_t i = 0; i < n; ++i)
		v[i] = static_cast<std::uint8_t>((i * 251 + seed) & 0xff);
	return v;
}

std::vector<std::uint8_t> slurp(int fd)
{
	struct stat st {};
	EXPECT_EQ(fstat(fd, &st), 0);
	std::vector<std::uint8_t> v(static_cast<std::size_t>(st.st_size));
	EXPECT_EQ(pread(fd, v.data(), v.size(), 0), static_cast<ssize_t>(v.size()));
	return v;
}

result run(sync_backend &b, op_kind op, int fd, std::uint64_t off, void *buf, std::size_t len, int rwf = 0)
{
	struct iovec v {
		buf, len
	};
	request r;
	r.op = op;
	r.fd = fd;
	r.offset = off;
	r.length = len;
	r.iov = &v;
	r.iov_count = 1;
	r.rwf = rwf;
	return b.execute(r);
}

std::uint64_t stat_of(const dcache_export *e, const char *name)
{
	for (std::size_t i = 0; i < dcache_stats_count(); ++i)
		if (std::strcmp(dcache_stats_name(i), name) == 0)
			return dcache_stats_value(e, i);
	ADD_FAILURE() << name;
	return 0;
}

TEST(sync_backend, write_read_sync_drop_roundtrip)
{
	temp_file f;
	ASSERT_GE(f.fd(), 0);
	sync_backend b;
	auto data = pattern(10000, 3);
	const result w = run(b, op_kind::write, f.fd(), 100, data.data(), data.size());
	ASSERT_EQ(w.error, 0);
	EXPECT_EQ(w.bytes, data.size());
	std::vector<std::uint8_t> back(20000);
	const result r = run(b, op_kind::read, f.fd(), 100, back.data(), back.size());
	ASSERT_EQ(r.error, 0);
	EXPECT_EQ(r.bytes, data.size()) << "short read at end of file";
	EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin()));
	for (op_kind op : {op_kind::fsync, op_kind::fdatasync, op_kind::sync_range, op_kind::fadvise_dontneed}) {
		request q;
		q.op = op;
		q.fd = f.fd();
		q.offset = 0;
		q.length = 0;
		const result s = b.execute(q);
		EXPECT_EQ(s.error, 0) << op_name(op);
	}
}

TEST(sync_backend, errors_are_errno_values)
{
	sync_backend b;
	char buf[16];
	EXPECT_EQ(run(b, op_kind::read, 99999, 0, buf, sizeof(buf)).error, EBADF);
	request q;
	q.op = op_kind::fsync;
	q.fd = 99999;
	EXPECT_EQ(b.execute(q).error, EBADF);
}

TEST(sync_backend, fadvise_error_is_returned_not_left_in_errno)
{
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	sync_backend b;
	request q;
	q.op = op_kind::fadvise_dontneed;
	q.fd = p[0];
	errno = 12345;
	const result r = b.execute(q);
	EXPECT_EQ(r.error, ESPIPE) << "posix_fadvise returns its error";
	EXPECT_EQ(errno, 12345) << "posix_fadvise does not set errno";
	close(p[0]);
	close(p[1]);
}

TEST(sync_backend, rwf_dontcache_write_and_read)
{
	temp_file f;
	sync_backend b;
	auto data = pattern(8192, 1);
	const result w = run(b, op_kind::write, f.fd(), 0, data.data(), data.size(), RWF_DONTCACHE);
	if (w.error == EOPNOTSUPP)
		GTEST_SKIP() << "RWF_DONTCACHE not supported on /tmp's filesystem (kernel < 6.14 or no FOP_DONTCACHE)";
	ASSERT_EQ(w.error, 0);
	EXPECT_EQ(w.bytes, data.size());
	std::vector<std::uint8_t> back(8192);
	const result r = run(b, op_kind::read, f.fd(), 0, back.data(), back.size(), RWF_DONTCACHE);
	ASSERT_EQ(r.error, 0);
	EXPECT_EQ(back, data);
}

TEST(sync_backend, open_direct_leaves_the_given_fd_alone)
{
	temp_file f;
	sync_backend b;
	const open_result o = b.open_direct(f.fd());
	if (o.error == EINVAL)
		GTEST_SKIP() << "/tmp's filesystem refuses O_DIRECT";
	ASSERT_EQ(o.error, 0);
	EXPECT_NE(o.fd, f.fd());
	EXPECT_TRUE(o.readable && o.writable);
	EXPECT_TRUE(fcntl(o.fd, F_GETFL) & O_DIRECT);
	EXPECT_FALSE(fcntl(f.fd(), F_GETFL) & O_DIRECT) << "never F_SETFL O_DIRECT the given fd";
	EXPECT_TRUE(fcntl(o.fd, F_GETFD) & FD_CLOEXEC);
	b.close_fd(o.fd);
	EXPECT_EQ(fcntl(o.fd, F_GETFD), -1);
}

TEST(sync_backend, probe_reports_power_of_two_alignment_or_nothing)
{
	temp_file f;
	const dio_caps c = sync_backend().probe_dio(f.fd());
	if (!c.known())
		GTEST_SKIP() << "/tmp's filesystem reports no direct-I/O alignment (statx and XFS_IOC_DIOINFO)";
	for (std::uint32_t a : {c.mem_align, c.offset_align, c.read_align}) {
		EXPECT_GT(a, 0u);
		EXPECT_EQ(a & (a - 1), 0u) << a;
	}
	EXPECT_LE(c.read_align, c.offset_align);
	// XFS_IOC_DIOINFO on a non-XFS file gives nothing (ENOTTY), not garbage.
	struct statfs sf {};
	ASSERT_EQ(fstatfs(f.fd(), &sf), 0);
	if (sf.f_type != 0x58465342 /* XFS_SUPER_MAGIC */) {
		EXPECT_FALSE(probe_xfs_dioinfo(f.fd()).known());
	}
}

// The whole C API path (sync backend) on a real file in direct mode: a
// misaligned split WRITE and widened READs, compared with what is on disk.
TEST(c_api_real_file, direct_split_write_and_widened_read)
{
	temp_file f;
	const dio_caps c = sync_backend().probe_dio(f.fd());
	if (!c.known())
		GTEST_SKIP() << "/tmp's filesystem reports no direct-I/O alignment";
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DIRECT;
	s.io_cache_write = DCACHE_MODE_DIRECT_DATA_SYNC;
	dcache_export *e = dcache_export_new(&s, "real");
	dcache_file *df = dcache_file_new(e);
	ASSERT_TRUE(e && df);

	auto data = pattern(3 * 65536 + 777, 9);
	const struct iovec v {
		data.data() + 0, data.size()
	};
	const dcache_io io{f.fd(), 1234, &v, 1, false, nullptr};
	const dcache_io_result w = dcache_write(e, df, &io);
	ASSERT_EQ(w.error, 0);
	EXPECT_EQ(w.bytes, data.size());
	EXPECT_TRUE(w.stable);
	if (stat_of(e, "fallback_no_odirect") != 0) {
		dcache_file_free(df);
		dcache_export_put(e);
		GTEST_SKIP() << "O_DIRECT refused at open";
	}
	EXPECT_EQ(stat_of(e, "write_split"), 1u);
	EXPECT_EQ(stat_of(e, "syncs_fdatasync"), 1u);
	EXPECT_GT(stat_of(e, "direct_bytes"), 0u);
	const auto disk = slurp(f.fd());
	ASSERT_EQ(disk.size(), 1234 + data.size());
	EXPECT_TRUE(std::equal(data.begin(), data.end(), disk.begin() + 1234));

	// Widened reads, including past end of file.
	for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{1234}, std::uint64_t{100000},
				  std::uint64_t{disk.size() - 10}, std::uint64_t{disk.size() + 4096}}) {
		std::vector<std::uint8_t> buf(70000, 0xee);
		const struct iovec rv {
			buf.data(), buf.size()
		};
		const dcache_io rio{f.fd(), off, &rv, 1, false, nullptr};
		const dcache_io_result r = dcache_read(e, df, &rio);
		ASSERT_EQ(r.error, 0) << off;
		const std::size_t exists = off < disk.size() ? std::min<std::size_t>(buf.size(), disk.size() - off) : 0;
		EXPECT_EQ(r.bytes, exists) << off;
		EXPECT_EQ(r.eof, off + buf.size() >= disk.size()) << off;
		EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + static_cast<long>(exists),
				       disk.begin() + static_cast<long>(std::min<std::uint64_t>(off, disk.size()))));
	}
	EXPECT_EQ(stat_of(e, "read_direct"), 5u);
	EXPECT_EQ(stat_of(e, "fallback_direct_einval"), 0u) << "the probe's alignment was wrong";
	dcache_file_free(df);
	dcache_export_put(e);
}

// tmpfs has no RWF_DONTCACHE (as of 6.18): the real EOPNOTSUPP fallback.
TEST(c_api_real_file, dontcache_fallback_on_tmpfs)
{
	struct statfs sf {};
	if (statfs("/dev/shm", &sf) != 0 || sf.f_type != 0x01021994 /* TMPFS_MAGIC */)
		GTEST_SKIP() << "no tmpfs at /dev/shm";
	temp_file f("/dev/shm");
	ASSERT_GE(f.fd(), 0);
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DONTCACHE;
	s.io_cache_write = DCACHE_MODE_DONTCACHE;
	dcache_export *e = dcache_export_new(&s, "tmpfs");
	dcache_file *df = dcache_file_new(e);
	auto data = pattern(5000, 2);
	const struct iovec v {
		data.data(), data.size()
	};
	const dcache_io io{f.fd(), 0, &v, 1, false, nullptr};
	const dcache_io_result w = dcache_write(e, df, &io);
	ASSERT_EQ(w.error, 0);
	EXPECT_EQ(w.bytes, data.size());
	const bool fell_back = stat_of(e, "fallback_no_dontcache") == 1;
	std::vector<std::uint8_t> back(5000);
	const struct iovec rv {
		back.data(), back.size()
	};
	const dcache_io rio{f.fd(), 0, &rv, 1, false, nullptr};
	EXPECT_EQ(dcache_read(e, df, &rio).bytes, 5000u);
	EXPECT_EQ(back, data);
	const std::uint64_t fallbacks = stat_of(e, "fallback_no_dontcache");
	dcache_file_free(df);
	dcache_export_put(e);
	if (!fell_back)
		GTEST_SKIP() << "tmpfs accepted RWF_DONTCACHE on this kernel";
	EXPECT_EQ(fallbacks, 2u);
}

} // namespace
