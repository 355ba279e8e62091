#include "dcache_io/fake_backend.h"

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstring>

namespace dcache::io {

bool fake_backend::mem_aligned(const request &req) const noexcept
{
	const std::uint32_t m = _caps.mem_align ? _caps.mem_align : 1;
	for (int i = 0; i < req.iov_count; ++i) {
		const auto addr = reinterpret_cast<std::uintptr_t>(req.iov[i].iov_base);
		if (addr % m != 0 || req.iov[i].iov_len % m != 0)
			return false;
	}
	return true;
}

bool fake_backend::aligned(const request &req) const noexcept
{
	if (!_caps.known())
		return false;
	const std::uint32_t o = req.op == op_kind::read ? _caps.read_align : _caps.offset_align;
	return req.offset % o == 0 && req.iov_bytes() % o == 0 && mem_aligned(req);
}

result fake_backend::execute(const request &req) noexcept
{
	std::lock_guard lock(_mutex);
	call c;
	c.index = _next_index++;
	c.op = req.op;
	c.fd = base_fd(req.fd);
	c.direct = req.fd >= k_direct_fd_base;
	c.offset = req.offset;
	c.length = (req.op == op_kind::read || req.op == op_kind::write) ? req.iov_bytes() : req.length;
	c.rwf = req.rwf;
	c.iov_count = req.iov_count;
	c.iov0 = req.iov_count > 0 && req.iov != nullptr ? req.iov[0].iov_base : nullptr;
	c.buf_index = req.buf_index;
	c.mem_aligned = mem_aligned(req);

	auto finish = [&](result r) {
		c.res = r;
		_calls.push_back(c);
		return r;
	};

	std::optional<std::size_t> short_to;
	for (auto &f : _faults) {
		if (f.times == 0 || !f.match(req, c.index))
			continue;
		if (f.times > 0)
			--f.times;
		if (f.error != 0)
			return finish(result::failure(f.error));
		short_to = f.short_to;
		break;
	}
	if (_reject_dontcache && (req.rwf & RWF_DONTCACHE))
		return finish(result::failure(EOPNOTSUPP));
	if (c.direct && (req.op == op_kind::read || req.op == op_kind::write) && !aligned(req))
		return finish(result::failure(EINVAL));

	auto &bytes = _files[c.fd];
	switch (req.op) {
	case op_kind::write: {
		std::size_t want = req.iov_bytes();
		if (short_to)
			want = std::min(want, *short_to);
		if (bytes.size() < req.offset + want)
			bytes.resize(req.offset + want);
		std::size_t done = 0;
		for (int i = 0; i < req.iov_count && done < want; ++i) {
			const std::size_t n = std::min(req.iov[i].iov_len, want - done);
			std::memcpy(bytes.data() + req.offset + done, req.iov[i].iov_base, n);
			done += n;
		}
		return finish(result::success(done));
	}
	case op_kind::read: {
		std::size_t want = req.iov_bytes();
		if (short_to)
			want = std::min(want, *short_to);
		const std::size_t avail = req.offset < bytes.size() ? bytes.size() - req.offset : 0;
		want = std::min(want, avail);
		std::size_t done = 0;
		for (int i = 0; i < req.iov_count && done < want; ++i) {
			const std::size_t n = std::min(req.iov[i].iov_len, want - done);
			std::memcpy(req.iov[i].iov_base, bytes.data() + req.offset + done, n);
			done += n;
		}
		return finish(result::success(done));
	}
	case op_kind::fsync:
	case op_kind::fdatasync:
	case op_kind::sync_range:
	case op_kind::writeback:
	case op_kind::fadvise_dontneed:
	case op_kind::flush_drop: return finish(result::success(0));
	}
	return finish(result::failure(EINVAL));
}

dio_caps fake_backend::probe_dio(int) noexcept
{
	std::lock_guard lock(_mutex);
	++_probes;
	return _caps;
}

dio_caps fake_backend::probe_dio_fs(int) noexcept
{
	std::lock_guard lock(_mutex);
	++_fs_probes;
	return _fs_caps;
}

open_result fake_backend::open_direct(int fd) noexcept
{
	std::lock_guard lock(_mutex);
	++_opens;
	if (_open_error)
		return {_open_error, -1, false, false};
	++_open_fds;
	return {0, fd + k_direct_fd_base, true, true};
}

void fake_backend::close_fd(int) noexcept
{
	std::lock_guard lock(_mutex);
	--_open_fds;
}

void fake_backend::set_caps(dio_caps caps)
{
	std::lock_guard lock(_mutex);
	_caps = caps;
}

void fake_backend::set_fs_caps(dio_caps caps)
{
	std::lock_guard lock(_mutex);
	_fs_caps = caps;
}

void fake_backend::set_open_direct_error(int err)
{
	std::lock_guard lock(_mutex);
	_open_error = err;
}

void fake_backend::inject(fault f)
{
	std::lock_guard lock(_mutex);
	_faults.push_back(std::move(f));
}

void fake_backend::fail_call(std::size_t index, int err)
{
	inject({[index](const request &, std::size_t i) { return i == index; }, err, {}, 1});
}

void fake_backend::short_call(std::size_t index, std::size_t bytes)
{
	inject({[index](const request &, std::size_t i) { return i == index; }, 0, bytes, 1});
}

void fake_backend::fail_when(predicate p, int err, int times)
{
	inject({std::move(p), err, {}, times});
}

void fake_backend::reject_dontcache(bool on)
{
	std::lock_guard lock(_mutex);
	_reject_dontcache = on;
}

void fake_backend::set_contents(int fd, std::vector<std::uint8_t> bytes)
{
	std::lock_guard lock(_mutex);
	_files[fd] = std::move(bytes);
}

std::vector<std::uint8_t> fake_backend::contents(int fd) const
{
	std::lock_guard lock(_mutex);
	auto it = _files.find(fd);
	return it == _files.end() ? std::vector<std::uint8_t>{} : it->second;
}

std::vector<fake_backend::call> fake_backend::calls() const
{
	std::lock_guard lock(_mutex);
	return _calls;
}

std::size_t fake_backend::count(op_kind op) const
{
	std::lock_guard lock(_mutex);
	return static_cast<std::size_t>(
		std::count_if(_calls.begin(), _calls.end(), [op](const call &c) { return c.op == op; }));
}

std::vector<fake_backend::call> fake_backend::calls_of(op_kind op) const
{
	std::lock_guard lock(_mutex);
	std::vector<call> out;
	std::copy_if(_calls.begin(), _calls.end(), std::back_inserter(out), [op](const call &c) { return c.op == op; });
	return out;
}

std::size_t fake_backend::probes() const
{
	std::lock_guard lock(_mutex);
	return _probes;
}

std::size_t fake_backend::fs_probes() const
{
	std::lock_guard lock(_mutex);
	return _fs_probes;
}

std::size_t fake_backend::opens() const
{
	std::lock_guard lock(_mutex);
	return _opens;
}

int fake_backend::open_direct_fds() const
{
	std::lock_guard lock(_mutex);
	return _open_fds;
}

void fake_backend::clear_calls()
{
	std::lock_guard lock(_mutex);
	_calls.clear();
}

int fake_backend::set_io_workers(unsigned n) noexcept
{
	std::lock_guard lock(_mutex);
	if (_io_workers_error != 0)
		return _io_workers_error;
	try {
		_io_workers_set.push_back(n);
	} catch (const std::bad_alloc &) {
		return ENOMEM;
	}
	return 0;
}

void fake_backend::fail_io_workers(int err)
{
	std::lock_guard lock(_mutex);
	_io_workers_error = err;
}

std::vector<unsigned> fake_backend::io_workers_set() const
{
	std::lock_guard lock(_mutex);
	return _io_workers_set;
}

} // namespace dcache::io
