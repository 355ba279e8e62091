// The asynchronous data path's unit-test support: a done callback that
// records its calls, a byte pattern, and the fixture over the asynchronous
// fake (async_fake.hpp), which queues every request until the test
// releases it, so every interleaving is explicit.
#pragma once

#include "dcache_io/fake_backend.h"
#include "dcache_io/uring_backend.h"
#include "dcache_io/backend_factory.h"

#include <gtest/gtest.h>

#include "async_fake.hpp"
#include "core_support.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using dcache::io::fake_backend;
using dcache::io::op_kind;
using namespace dcache::core;

namespace dcache::test {

// A done callback that records how often, with what, and on which thread.
struct done_probe {
	std::atomic<int> calls{0};
	dcache_io_result res{};
	static void fn(void *ctx, dcache_io_result r)
	{
		auto *p = static_cast<done_probe *>(ctx);
		p->res = r;
		p->calls.fetch_add(1);
	}
};

inline std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed)
{
	std::vector<std::uint8_t> v(n);
	for (std::size_t i = 0; i < n; ++i)
		v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + i / 4096) & 0xff);
	return v;
}

constexpr int k_fd = 7;

class async_requests : public core_test {
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
		ab.release_all();
		free_export();
		EXPECT_EQ(fb.open_direct_fds(), 0) << "O_DIRECT descriptor leaked";
		EXPECT_EQ(ab.buffered_open(), 0) << "buffered twin leaked";
		dcache_set_log(nullptr);
	}
	void make(const dcache_settings &s) { make_over(ab, s, "export 9 /async"); }
	bool write_start(std::uint64_t off, const std::vector<std::uint8_t> &data, std::size_t mem_shift, bool stable,
			 done_probe &d, dcache_io_result &inl)
	{
		// Buffer at a chosen distance from a 4096-aligned address, kept
		// alive by the fixture until the end of the test.
		auto *raw = static_cast<std::uint8_t *>(
			std::aligned_alloc(4096, ((data.size() + mem_shift) / 4096 + 1) * 4096));
		_bufs.emplace_back(raw, &std::free);
		std::memcpy(raw + mem_shift, data.data(), data.size());
		_iov = {raw + mem_shift, data.size()};
		const dcache_io io{k_fd, off, &_iov, 1, stable, nullptr};
		return dcache_write_start(exp, file, &io, &done_probe::fn, &d, &inl);
	}
	bool read_start(std::uint64_t off, std::vector<std::uint8_t> &into, done_probe &d, dcache_io_result &inl)
	{
		_iov = {into.data(), into.size()};
		const dcache_io io{k_fd, off, &_iov, 1, false, nullptr};
		return dcache_read_start(exp, file, &io, &done_probe::fn, &d, &inl);
	}
	// Direct READs, one place, no blocking slot: every READ after the
	// first waits in line.
	void make_one_place_direct_reads()
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_read = DCACHE_MODE_DIRECT;
		s.io_queue_depth = 1;
		s.io_blocking_max = 0;
		make(s);
	}
	// A direct WRITE mode whose edges are plain DONTCACHE pieces (no
	// boundary tracking): the simplest split chain.
	void make_split_writes(dcache_mode write_mode)
	{
		dcache_settings s = dcache_settings_default();
		s.io_cache_write = write_mode;
		s.boundary_tracking = false;
		make(s);
	}
	// The fake file holds data at off and ends there.
	void expect_file_is(std::uint64_t off, const std::vector<std::uint8_t> &data)
	{
		const auto c = fb.contents(k_fd);
		ASSERT_EQ(c.size(), off + data.size());
		EXPECT_TRUE(std::equal(c.begin() + static_cast<std::ptrdiff_t>(off), c.end(), data.begin()));
	}
	std::size_t nowait_calls() const
	{
		std::size_t n = 0;
		for (const auto &c : fb.calls())
			if (c.op == op_kind::read && (c.rwf & RWF_NOWAIT))
				++n;
		return n;
	}

	fake_backend fb;
	async_fake ab{fb};
	struct iovec _iov {};
	std::vector<std::unique_ptr<std::uint8_t, decltype(&std::free)>> _bufs;
};

} // namespace dcache::test
