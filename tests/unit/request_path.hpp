// The issue loop's unit-test support: a payload buffer at a chosen
// distance from an aligned address, and the fixture over the fake backend.
#pragma once

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

namespace dcache::test {

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
	std::size_t syncs() const { return fb.count(op_kind::fsync) + fb.count(op_kind::fdatasync); }

	fake_backend fb;
};

} // namespace dcache::test
