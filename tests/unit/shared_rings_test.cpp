// The io_uring engine shared by the exports of a server (backend_factory.h):
// many exports run on at most one ring and one completion thread per CPU,
// each export's requests still its own (data, counters, places); the rings
// go with the last export.
#include "dcache/core.h"
#include "dcache_io/backend_factory.h"

#include <gtest/gtest.h>

#include "core_support.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed)
{
	std::vector<std::uint8_t> v(n);
	for (std::size_t i = 0; i < n; ++i)
		v[i] = static_cast<std::uint8_t>((i * 37 + seed * 11 + 5) & 0xff);
	return v;
}

// The rings' completion threads of this process (named dcache-ring).
std::size_t ring_threads()
{
	std::size_t n = 0;
	for (const auto &t : std::filesystem::directory_iterator("/proc/self/task")) {
		std::ifstream comm(t.path() / "comm");
		std::string name;
		n += std::getline(comm, name) && name == "dcache-ring";
	}
	return n;
}

TEST(shared_rings, many_exports_share_a_few_rings_and_their_threads)
{
	using dcache::io::shared_rings_alive;
	using dcache::io::shared_rings_max;
	ASSERT_EQ(shared_rings_alive(), 0u);
	ASSERT_EQ(ring_threads(), 0u);
	constexpr int k_exports = 64;
	std::vector<dcache_export *> exps;
	dcache_settings s = dcache_settings_default();
	s.io_blocking_max = 0; // every device-bound step through the ring
	for (int i = 0; i < k_exports; ++i) {
		exps.push_back(dcache_export_new(&s, ("export " + std::to_string(i)).c_str()));
		ASSERT_NE(exps.back(), nullptr);
	}
	if (std::strcmp(dcache_export_backend_name(exps[0]), "io_uring") != 0) {
		for (dcache_export *e : exps)
			dcache_export_put(e);
		GTEST_SKIP() << "io_uring unavailable here";
	}
	EXPECT_GE(shared_rings_alive(), 1u);
	EXPECT_LE(shared_rings_alive(), shared_rings_max());
	EXPECT_EQ(ring_threads(), shared_rings_alive())
		<< k_exports << " exports: one completion thread per ring, not per export";

	// Each export's stable WRITE (its fsync through the ring) and READ.
	char path[] = "/var/tmp/dcache_rings_XXXXXX";
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0) << std::strerror(errno);
	unlink(path);
	for (int i = 0; i < k_exports; ++i) {
		dcache_file *file = dcache_file_new(exps[static_cast<std::size_t>(i)]);
		const std::vector<std::uint8_t> data = pattern(8192, static_cast<unsigned>(i));
		struct iovec w {
			const_cast<std::uint8_t *>(data.data()), data.size()
		};
		const std::uint64_t off = static_cast<std::uint64_t>(i) * 8192;
		const dcache_io wio{fd, off, &w, 1, true, nullptr};
		const dcache_io_result wr = dcache_write(exps[static_cast<std::size_t>(i)], file, &wio);
		ASSERT_EQ(wr.error, 0) << i;
		ASSERT_EQ(wr.bytes, data.size()) << i;
		std::vector<std::uint8_t> back(data.size());
		struct iovec r {
			back.data(), back.size()
		};
		const dcache_io rio{fd, off, &r, 1, false, nullptr};
		const dcache_io_result rr = dcache_read(exps[static_cast<std::size_t>(i)], file, &rio);
		ASSERT_EQ(rr.error, 0) << i;
		EXPECT_EQ(back, data) << i;
		EXPECT_EQ(dcache::test::stat_of(exps[static_cast<std::size_t>(i)], "writes"), 1u) << "its own counters";
		dcache_file_free(file);
	}
	close(fd);
	for (dcache_export *e : exps)
		dcache_export_put(e);
	EXPECT_EQ(shared_rings_alive(), 0u) << "the rings go with the last export";
	EXPECT_EQ(ring_threads(), 0u);
}

} // namespace
