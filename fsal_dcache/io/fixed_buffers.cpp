#include "dcache_io/fixed_buffers.h"

#include "dcache_io/rpc_buffers.h"

#include <liburing.h>
#include <sys/mman.h>

#include <cerrno>

namespace dcache::io {

std::unique_ptr<fixed_buffers> fixed_buffers::make(io_uring *ring, unsigned slots, int &err) noexcept
{
	err = 0;
	std::unique_ptr<fixed_buffers> f(new (std::nothrow) fixed_buffers(ring));
	if (!f) {
		err = ENOMEM;
		return nullptr;
	}
	try {
		f->_slots.reserve(slots);
		for (std::size_t c = 0; c < k_bounce_classes; ++c)
			f->_free[c].reserve(slots);
		for (unsigned s = slots; s > 0; --s)
			f->_slots.push_back(static_cast<int>(s - 1)); // slot 0 first
	} catch (...) {
		err = ENOMEM;
		return nullptr;
	}
	// Past the bounce buffers' slots, the RPC buffers' (rpc_buffers.h).
	if (const int rc = io_uring_register_buffers_sparse(ring, slots + k_rpc_slots); rc < 0) {
		err = -rc;
		return nullptr;
	}
	add_trimmable(f.get());
	return f;
}

fixed_buffers::~fixed_buffers()
{
	remove_trimmable(this); // no trim runs from here on
	for (std::size_t c = 0; c < k_bounce_classes; ++c)
		for (const entry &e : _free[c])
			munmap(e.data, bounce_class_size(c)); // the ring's end unregisters
}

bounce_buffer fixed_buffers::get(std::size_t len) noexcept
{
	bounce_buffer b{nullptr, len, -1, false};
	const std::size_t c = bounce_class_of(len == 0 ? 1 : len);
	if (c == k_bounce_classes)
		return b;
	int slot = -1;
	{
		std::lock_guard lock(_m);
		if (!_free[c].empty()) {
			const entry e = _free[c].back();
			_free[c].pop_back();
			_reuses.fetch_add(1, std::memory_order_relaxed);
			return {e.data, len, e.slot, true};
		}
		if (_refused.load(std::memory_order_relaxed) != 0 || _slots.empty())
			return b;
		slot = _slots.back();
		_slots.pop_back();
	}
	// Mapping and registering (which faults the pages in and pins them)
	// happen once per buffer, outside the lock.
	const std::size_t size = bounce_class_size(c);
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc = -ENOMEM;
	if (p != MAP_FAILED) {
		const iovec v{p, size};
		rc = io_uring_register_buffers_update_tag(_ring, static_cast<unsigned>(slot), &v, nullptr, 1);
		if (rc < 0)
			munmap(p, size);
	}
	if (rc < 0) {
		std::lock_guard lock(_m);
		_slots.push_back(slot);
		if (rc != -ENOMEM || p != MAP_FAILED)
			_refused.store(-rc, std::memory_order_relaxed); // the kernel's no: not again
		return b;
	}
	_registrations.fetch_add(1, std::memory_order_relaxed);
	_mapped.fetch_add(1, std::memory_order_relaxed);
	return {p, len, slot, false};
}

bool fixed_buffers::put(const bounce_buffer &b) noexcept
{
	if (b.index < 0 || b.data == nullptr)
		return false;
	const std::size_t c = bounce_class_of(b.len == 0 ? 1 : b.len);
	const entry e{b.data, b.index};
	std::lock_guard lock(_m);
	_free[c].push_back(e); // reserved for every slot: never allocates
	return true;
}

void fixed_buffers::release(const entry &e, std::size_t size) noexcept
{
	const iovec none{nullptr, 0};
	(void)io_uring_register_buffers_update_tag(_ring, static_cast<unsigned>(e.slot), &none, nullptr, 1);
	munmap(e.data, size);
	_mapped.fetch_sub(1, std::memory_order_relaxed);
}

std::size_t fixed_buffers::trim() noexcept
{
	std::array<std::vector<entry>, k_bounce_classes> out;
	{
		std::lock_guard lock(_m);
		for (std::size_t c = 0; c < k_bounce_classes; ++c) {
			try {
				out[c].reserve(_free[c].size());
			} catch (...) {
				continue; // kept until the next trim
			}
			out[c].assign(_free[c].begin(), _free[c].end());
			_free[c].clear(); // keeps its capacity
		}
	}
	std::size_t bytes = 0;
	for (std::size_t c = 0; c < k_bounce_classes; ++c) {
		for (const entry &e : out[c]) {
			release(e, bounce_class_size(c));
			bytes += bounce_class_size(c);
		}
	}
	std::lock_guard lock(_m);
	for (std::size_t c = 0; c < k_bounce_classes; ++c)
		for (const entry &e : out[c])
			_slots.push_back(e.slot); // reserved for every slot
	return bytes;
}

} // namespace dcache::io
