// The boundary-page tracker's unit-test support: the fixture over the fake
// backend and the two misaligned WRITEs that share page 3.
#pragma once

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

namespace dcache::test {

constexpr int k_fd = 7;
constexpr int k_fd2 = 8;
constexpr std::uint64_t k_page = 4096;

using namespace dcache::test;

inline std::vector<std::uint8_t> pattern(std::size_t len, unsigned seed)
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
		for (const auto &c : fb.calls_of(op_kind::write))
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

} // namespace dcache::test
