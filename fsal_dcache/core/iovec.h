// The payload's iovecs and bounce buffers: slicing a request's iovecs by
// byte range, copying between iovecs and one buffer, and the aligned
// scratch memory direct I/O needs when the payload is not aligned.
//
// Thread-safety: pure functions; an aligned_buffer belongs to one request.
#pragma once

#include "dcache_io/backend.h"
#include "page.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dcache::core {

// Scratch memory for direct I/O, page-aligned, from the backend
// (backend::bounce_get: registered with its ring where it can be), given
// back on scope exit.  The backend must outlive it.
class aligned_buffer {
public:
	explicit aligned_buffer(io::backend &b) noexcept : _backend(&b) {}
	aligned_buffer(const aligned_buffer &) = delete;
	aligned_buffer &operator=(const aligned_buffer &) = delete;
	~aligned_buffer()
	{
		if (_b.data != nullptr)
			_backend->bounce_put(_b);
	}

	// align: the device's memory alignment; a page covers every one
	// Linux has (beyond a page the request is refused).
	[[nodiscard]] bool allocate(std::size_t align, std::size_t len) noexcept
	{
		if (align > k_page_size || _b.data != nullptr)
			return false;
		_b = _backend->bounce_get(std::max<std::size_t>(len, 1));
		return _b.data != nullptr;
	}
	[[nodiscard]] std::uint8_t *data() const noexcept { return static_cast<std::uint8_t *>(_b.data); }
	// The buffer's registered index (request::buf_index), or -1.
	[[nodiscard]] int index() const noexcept { return _b.index; }
	// It was mapped before: reused, no page fault.
	[[nodiscard]] bool reused() const noexcept { return _b.reused; }

private:
	io::backend *_backend;
	io::bounce_buffer _b;
};

[[nodiscard]] inline std::size_t iov_total(const struct iovec *iov, int n) noexcept
{
	std::size_t t = 0;
	for (int i = 0; i < n; ++i)
		t += iov[i].iov_len;
	return t;
}

// The iovecs covering payload bytes [start, start+len).
[[nodiscard]] inline std::vector<struct iovec> slice(const struct iovec *iov, int n, std::uint64_t start,
						     std::uint64_t len)
{
	std::vector<struct iovec> out;
	std::uint64_t pos = 0;
	const std::uint64_t end = start + len;
	for (int i = 0; i < n && pos < end; ++i) {
		const std::uint64_t v_end = pos + iov[i].iov_len;
		const std::uint64_t lo = std::max(pos, start), hi = std::min(v_end, end);
		if (lo < hi)
			out.push_back(
				{static_cast<char *>(iov[i].iov_base) + (lo - pos), static_cast<std::size_t>(hi - lo)});
		pos = v_end;
	}
	return out;
}

inline void gather(const std::vector<struct iovec> &from, std::uint8_t *to) noexcept
{
	for (const auto &v : from) {
		std::memcpy(to, v.iov_base, v.iov_len);
		to += v.iov_len;
	}
}

inline void scatter(const std::uint8_t *from, std::size_t n, const struct iovec *iov, int count) noexcept
{
	for (int i = 0; i < count && n > 0; ++i) {
		const std::size_t k = std::min(n, iov[i].iov_len);
		std::memcpy(iov[i].iov_base, from, k);
		from += k;
		n -= k;
	}
}

} // namespace dcache::core
