// The backend conformance suite's support: the backends under test
// ({fake, sync, io_uring}), completions that count and wait, request
// builders, cachestat, aligned buffers, and the typed fixture.
#pragma once

#include "dcache_io/fake_backend.h"
#include "dcache_io/sync_backend.h"
#include "dcache_io/uring_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "temp_file.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace dcache::io;
using namespace std::chrono_literals;

namespace dcache::test {

// ---- the backends under test --------------------------------------------

struct fake_kind {
	static constexpr bool real_files = false;
	static constexpr bool async = false;
	static std::unique_ptr<backend> make(std::string &) { return std::make_unique<fake_backend>(); }
};

struct sync_kind {
	static constexpr bool real_files = true;
	static constexpr bool async = false;
	static std::unique_ptr<backend> make(std::string &) { return std::make_unique<sync_backend>(); }
};

struct uring_kind {
	static constexpr bool real_files = true;
	static constexpr bool async = true;
	static constexpr unsigned depth = 128;
	static std::unique_ptr<backend> make(std::string &skip)
	{
		auto r = make_uring_backend(depth);
		if (r.error) {
			skip = "io_uring unavailable: " + r.why;
			return nullptr;
		}
		return std::move(r.backend);
	}
};

// ---- helpers ------------------------------------------------------------

using dcache::test::temp_file;

inline std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed)
{
	std::vector<std::uint8_t> v(n);
	for (std::size_t i = 0; i < n; ++i)
		v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
	return v;
}

// Counts calls: a completion must be called exactly once.
class counting_completion final : public completion {
public:
	void complete(result r) noexcept override
	{
		std::lock_guard lock(_m);
		_r = r;
		++_calls;
		_cv.notify_all();
	}
	// Waits for the first call (bounded), then a little more to catch a
	// second one.
	[[nodiscard]] bool wait(std::chrono::milliseconds limit = 20s)
	{
		std::unique_lock lock(_m);
		return _cv.wait_for(lock, limit, [this] { return _calls > 0; });
	}
	[[nodiscard]] int calls() const
	{
		std::lock_guard lock(_m);
		return _calls;
	}
	[[nodiscard]] result res() const
	{
		std::lock_guard lock(_m);
		return _r;
	}

private:
	mutable std::mutex _m;
	std::condition_variable _cv;
	int _calls = 0;
	result _r{-1, 0};
};

// Many completions counted in one place (per-request call counts).
class batch {
public:
	explicit batch(std::size_t n) : _calls(n), _res(n) {}

	class one final : public completion {
	public:
		batch *owner = nullptr;
		std::size_t index = 0;
		void complete(result r) noexcept override { owner->done(index, r); }
	};

	void done(std::size_t i, result r)
	{
		std::lock_guard lock(_m);
		++_calls[i];
		_res[i] = r;
		++_total;
		_cv.notify_all();
	}
	[[nodiscard]] bool wait_total(std::size_t n, std::chrono::milliseconds limit = 30s)
	{
		std::unique_lock lock(_m);
		return _cv.wait_for(lock, limit, [&] { return _total >= n; });
	}
	[[nodiscard]] std::vector<int> calls() const
	{
		std::lock_guard lock(_m);
		return _calls;
	}
	[[nodiscard]] result res(std::size_t i) const
	{
		std::lock_guard lock(_m);
		return _res[i];
	}

private:
	mutable std::mutex _m;
	std::condition_variable _cv;
	std::vector<int> _calls;
	std::vector<result> _res;
	std::size_t _total = 0;
};

inline request rw_req(op_kind op, int fd, std::uint64_t off, const iovec *iov, int n, int rwf = 0)
{
	request r;
	r.op = op;
	r.fd = fd;
	r.offset = off;
	r.iov = iov;
	r.iov_count = n;
	r.rwf = rwf;
	return r;
}

inline request range_req(op_kind op, int fd, std::uint64_t off = 0, std::uint64_t len = 0)
{
	request r;
	r.op = op;
	r.fd = fd;
	r.offset = off;
	r.length = len;
	return r;
}

// cachestat(2), Linux 6.5; glibc in bookworm has no wrapper.
struct cachestat_range {
	std::uint64_t off, len;
};
struct cachestat_out {
	std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
constexpr long k_sys_cachestat = 451;

inline int cachestat(int fd, std::uint64_t off, std::uint64_t len, cachestat_out &out)
{
	cachestat_range range{off, len};
	return syscall(k_sys_cachestat, fd, &range, &out, 0) == 0 ? 0 : errno;
}

struct free_deleter {
	void operator()(void *p) const { std::free(p); }
};
using aligned_buf = std::unique_ptr<std::uint8_t, free_deleter>;
inline aligned_buf aligned_alloc_bytes(std::size_t align, std::size_t n)
{
	return aligned_buf(static_cast<std::uint8_t *>(std::aligned_alloc(align, n)));
}

// ---- the fixture --------------------------------------------------------

template <class K>
class backend_conformance : public ::testing::Test {
protected:
	void SetUp() override
	{
		std::string skip;
		_b = K::make(skip);
		if (!_b)
			GTEST_SKIP() << skip;
		ASSERT_GE(_file.fd(), 0) << "mkostemp in /tmp: " << std::strerror(errno);
	}
	void TearDown() override { _b.reset(); }
	// Destroys the backend: its threads are joined, so every completion
	// that will ever run has run, and what the test checks next is final
	// (a wrong second call would be in it).
	void stop_backend() { _b.reset(); }

	backend &b() { return *_b; }
	int fd() const { return _file.fd(); }
	fake_backend *fake() { return dynamic_cast<fake_backend *>(_b.get()); }
	uring_backend *uring() { return dynamic_cast<uring_backend *>(_b.get()); }

	// Through submit(): also checks that the completion ran exactly once.
	result sub(const request &r)
	{
		counting_completion c;
		b().submit(r, c);
		EXPECT_TRUE(c.wait()) << "completion not called within 20 s";
		if constexpr (K::async)
			std::this_thread::sleep_for(1ms); // room for a wrong second call
		EXPECT_EQ(c.calls(), 1);
		return c.res();
	}
	result run(bool async, const request &r) { return async ? sub(r) : b().execute(r); }

	// An O_DIRECT descriptor of the test file, its alignment, and the
	// unit both tests use (at least a page); or in *skip why there is none
	// here.
	struct direct_file {
		int fd = -1;
		dio_caps caps{};
		std::size_t align = 0;
	};
	void open_direct(direct_file &d, std::string &skip)
	{
		const auto o = b().open_direct(fd());
		if (o.error == EINVAL) {
			skip = "/tmp's filesystem refuses O_DIRECT";
			return;
		}
		ASSERT_EQ(o.error, 0) << std::strerror(o.error);
		d.caps = b().probe_dio(o.fd);
		if (!d.caps.known()) {
			b().close_fd(o.fd);
			skip = "/tmp's filesystem reports no direct-I/O alignment";
			return;
		}
		d.fd = o.fd;
		d.align = std::max<std::size_t>({d.caps.mem_align, d.caps.offset_align, 4096});
	}

	// Seeds the file without going through the backend under test.
	void seed(std::uint64_t off, const std::vector<std::uint8_t> &data)
	{
		if constexpr (K::real_files) {
			ASSERT_EQ(pwrite(fd(), data.data(), data.size(), static_cast<off_t>(off)),
				  static_cast<ssize_t>(data.size()));
		} else {
			auto bytes = fake()->contents(fd());
			if (bytes.size() < off + data.size())
				bytes.resize(off + data.size());
			std::copy(data.begin(), data.end(), bytes.begin() + static_cast<std::ptrdiff_t>(off));
			fake()->set_contents(fd(), bytes);
		}
	}
	// The file's bytes, read without the backend under test.
	std::vector<std::uint8_t> contents()
	{
		if constexpr (K::real_files) {
			struct stat st {};
			EXPECT_EQ(fstat(fd(), &st), 0);
			std::vector<std::uint8_t> v(static_cast<std::size_t>(st.st_size));
			EXPECT_EQ(pread(fd(), v.data(), v.size(), 0), static_cast<ssize_t>(v.size()));
			return v;
		} else {
			return fake()->contents(fd());
		}
	}

	temp_file _file{"/tmp"};
	std::unique_ptr<backend> _b; // destroyed before _file is closed
};

using backend_kinds = ::testing::Types<fake_kind, sync_kind, uring_kind>;

struct kind_names {
	template <class T>
	static std::string GetName(int)
	{
		if (std::is_same_v<T, fake_kind>)
			return "fake";
		if (std::is_same_v<T, sync_kind>)
			return "sync";
		return "io_uring";
	}
};

TYPED_TEST_SUITE(backend_conformance, backend_kinds, kind_names);

} // namespace dcache::test
