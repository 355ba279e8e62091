// In-memory backend for tests: one byte vector per descriptor, fault
// injection per request index or by predicate, and a log of every call.
//
// Direct descriptors: open_direct(fd) hands out fd + k_direct_fd_base,
// which addresses the same bytes as fd.  Requests on a direct descriptor
// are checked against the configured alignment the way the kernel does
// (file offset and length multiples of O, every iovec's address and length
// multiples of M) and fail with EINVAL otherwise, so a planner or issue-loop
// mistake shows up as a failing test rather than passing silently.
//
// Thread-safe: one mutex around everything (it is a test double).
#pragma once

#include "dcache_io/backend.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace dcache::io {

class fake_backend final : public backend {
public:
	static constexpr int k_direct_fd_base = 100000;

	// A request as it was seen (the iovecs themselves are gone by the time
	// a test looks, so their total and the written bytes are copied).
	struct call {
		std::size_t index = 0; // 0-based over all execute() calls
		op_kind op = op_kind::read;
		int fd = -1;
		bool direct = false; // issued on an O_DIRECT descriptor
		std::uint64_t offset = 0;
		std::uint64_t length = 0; // rw: bytes asked; others: the range
		int rwf = 0;
		int iov_count = 0;
		bool mem_aligned = true;    // every iovec address/length multiple of M
		const void *iov0 = nullptr; // where the first iovec pointed (the memory issued from)
		int buf_index = -1;	    // request::buf_index
		result res;
	};

	using predicate = std::function<bool(const request &req, std::size_t index)>;
	struct fault {
		predicate match;
		int error = 0;			     // errno to return, or 0
		std::optional<std::size_t> short_to; // transfer only this many bytes
		int times = 1;			     // -1: every match
	};

	[[nodiscard]] const char *name() const noexcept override { return "fake"; }
	[[nodiscard]] result execute(const request &req) noexcept override;
	[[nodiscard]] dio_caps probe_dio(int fd) noexcept override;
	// The filesystem's alignment set_fs_caps gave (default: none).
	[[nodiscard]] dio_caps probe_dio_fs(int fd) noexcept override;
	[[nodiscard]] open_result open_direct(int fd) noexcept override;
	void close_fd(int fd) noexcept override;
	// Records n (io_workers_set) and succeeds, or fails with the error
	// fail_io_workers() gave.
	[[nodiscard]] int set_io_workers(unsigned n) noexcept override;

	// ---- configuration ----
	void fail_io_workers(int err);
	void set_caps(dio_caps caps);
	void set_fs_caps(dio_caps caps);
	void set_open_direct_error(int err); // e.g. EINVAL (tmpfs-like)
	void inject(fault f);
	void fail_call(std::size_t index, int err);
	void short_call(std::size_t index, std::size_t bytes);
	void fail_when(predicate p, int err, int times = -1);
	// Every request carrying RWF_DONTCACHE fails EOPNOTSUPP.
	void reject_dontcache(bool on = true);
	void set_contents(int fd, std::vector<std::uint8_t> bytes);

	// ---- inspection ----
	[[nodiscard]] std::vector<std::uint8_t> contents(int fd) const;
	[[nodiscard]] std::vector<call> calls() const;
	[[nodiscard]] std::size_t count(op_kind op) const;
	[[nodiscard]] std::vector<call> calls_of(op_kind op) const; // in order
	[[nodiscard]] std::size_t probes() const;
	[[nodiscard]] std::size_t fs_probes() const;
	[[nodiscard]] std::size_t opens() const;
	[[nodiscard]] int open_direct_fds() const; // opened and not yet closed
	// The n of every set_io_workers() call, in order.
	[[nodiscard]] std::vector<unsigned> io_workers_set() const;
	void clear_calls();

private:
	[[nodiscard]] int base_fd(int fd) const noexcept { return fd >= k_direct_fd_base ? fd - k_direct_fd_base : fd; }
	[[nodiscard]] bool aligned(const request &req) const noexcept;
	[[nodiscard]] bool mem_aligned(const request &req) const noexcept;

	mutable std::mutex _mutex;
	std::map<int, std::vector<std::uint8_t>> _files;
	std::vector<fault> _faults;
	std::vector<call> _calls;
	dio_caps _caps{4096, 4096, 4096, dio_caps::source::fake};
	dio_caps _fs_caps{};
	int _open_error = 0;
	bool _reject_dontcache = false;
	std::size_t _next_index = 0;
	std::size_t _probes = 0;
	std::size_t _fs_probes = 0;
	std::size_t _opens = 0;
	int _open_fds = 0;
	std::vector<unsigned> _io_workers_set;
	int _io_workers_error = 0;
};

} // namespace dcache::io
