#include "dcache_io/rpc_buffers.h"

#include "dcache_io/bounce_pool.h"

#include <liburing.h>
#include <malloc.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace dcache::io {

namespace {

constexpr std::size_t k_page = 4096;
constexpr std::size_t k_granule = std::size_t{64} << 10;
constexpr std::size_t k_classes = k_rpc_max / k_granule; // class c holds (c + 1) granules

std::size_t class_of(std::size_t size) noexcept
{
	return (size + k_granule - 1) / k_granule - 1;
}
std::size_t class_bytes(std::size_t c) noexcept
{
	return (c + 1) * k_granule;
}

class rpc_pool final : public trimmable {
public:
	rpc_pool()
	{
		_out.reserve(4096);
		_slots_free.reserve(k_rpc_slots);
		for (unsigned slot = k_rpc_slots; slot > 0; --slot)
			_slots_free.push_back(slot - 1); // slot 0 first
		add_trimmable(this);
	}

	void *get(std::size_t size, rpc_place place) noexcept
	{
		if (size < k_rpc_min || size > k_rpc_max)
			return nullptr;
		const std::size_t c = class_of(size), bytes = class_bytes(c);
		// Only the buffers direct I/O uses, which come back here alone,
		// are registered with the rings; they wait for reuse apart.
		const bool io = place != rpc_place::start;
		free_lists &waiting = _free[io ? 1 : 0];
		void *base = nullptr;
		bool reused = false;
		{
			std::lock_guard lock(_m);
			if (!waiting[c].empty()) {
				base = waiting[c].back();
				waiting[c].pop_back();
				_cached -= bytes;
				reused = true;
			}
		}
		if (base == nullptr) {
			if ((base = std::aligned_alloc(k_page, bytes)) == nullptr)
				return nullptr;
			if (io)
				enroll(base, bytes);
		}
		void *p = place == rpc_place::end ? static_cast<char *>(base) + (bytes - size) : base;
		std::lock_guard lock(_m);
		try {
			// A start buffer freed elsewhere leaves its entry; its address
			// may come back here: the new entry replaces it.
			_out.insert_or_assign(p, entry{base, static_cast<std::uint32_t>(c), io});
		} catch (...) {
			retire(base);
			std::free(base);
			return nullptr;
		}
		++_gets;
		_reuses += reused ? 1 : 0;
		return p;
	}

	bool put(void *p) noexcept
	{
		void *base = nullptr;
		std::size_t bytes = 0;
		bool stale = false;
		{
			std::lock_guard lock(_m);
			const auto it = _out.find(p);
			if (it == _out.end())
				return false;
			const entry e = it->second;
			_out.erase(it);
			bytes = class_bytes(e.cls);
			// A stale entry (the chunk was freed elsewhere and glibc gave
			// the address to a smaller allocation): not ours any more.
			stale = e.base == p && malloc_usable_size(p) < bytes;
			base = e.base;
			if (!stale && _cached + bytes <= k_rpc_cache_bytes) {
				try {
					_free[e.io ? 1 : 0][e.cls].push_back(e.base);
					_cached += bytes;
					return true;
				} catch (...) {
					// no room in the list: freed below
				}
			}
		}
		retire(base);
		if (stale)
			return false;
		std::free(base);
		return true;
	}

	std::size_t size(const void *p) noexcept
	{
		std::lock_guard lock(_m);
		const auto it = _out.find(p);
		if (it == _out.end())
			return 0;
		const char *end = static_cast<const char *>(it->second.base) + class_bytes(it->second.cls);
		return static_cast<std::size_t>(end - static_cast<const char *>(p));
	}

	std::size_t trim() noexcept override
	{
		std::array<free_lists, 2> out;
		std::size_t bytes = 0;
		{
			std::lock_guard lock(_m);
			out.swap(_free);
			bytes = _cached;
			_cached = 0;
		}
		for (const free_lists &kind : out) {
			for (const auto &list : kind) {
				for (void *b : list) {
					retire(b);
					std::free(b);
				}
			}
		}
		return bytes;
	}

	// ---- registration with the rings ----

	void registering(bool on) noexcept { _registering.store(on, std::memory_order_relaxed); }
	bool registering() const noexcept { return _registering.load(std::memory_order_relaxed); }

	void attach(io_uring *ring, unsigned base) noexcept
	{
		std::lock_guard lock(_rm);
		try {
			_rings.push_back(ring_entry{ring, base, std::vector<bool>(k_rpc_slots, false)});
		} catch (...) {
			return; // not attached: its steps are pinned per request
		}
		for (const auto &[addr, r] : _ranges)
			enter(_rings.back(), r.slot, reinterpret_cast<void *>(addr), r.bytes);
	}

	void detach(io_uring *ring) noexcept
	{
		std::lock_guard lock(_rm);
		std::erase_if(_rings, [ring](const ring_entry &r) { return r.ring == ring; });
	}

	int index(io_uring *ring, const void *p, std::size_t len) noexcept
	{
		if (_slotted.load(std::memory_order_relaxed) == 0)
			return -1;
		const auto a = reinterpret_cast<std::uintptr_t>(p);
		// Every direct step through a ring asks: they share the lock.
		std::shared_lock lock(_rm);
		auto it = _ranges.upper_bound(a);
		if (it == _ranges.begin())
			return -1;
		--it;
		if (a + len > it->first + it->second.bytes)
			return -1;
		for (const ring_entry &r : _rings)
			if (r.ring == ring)
				return r.registered[it->second.slot] ? static_cast<int>(r.base + it->second.slot) : -1;
		return -1;
	}

	rpc_buffer_stats counts() noexcept
	{
		std::lock_guard lock(_m);
		std::size_t cached = 0;
		for (const free_lists &kind : _free)
			for (const auto &list : kind)
				cached += list.size();
		return {_gets, _reuses, _out.size(), cached, _slotted.load(), _registrations.load()};
	}

private:
	struct entry {
		void *base;
		std::uint32_t cls;
		bool io; // a direct-I/O buffer: registered where that is on
	};
	using free_lists = std::array<std::vector<void *>, k_classes>; // by class
	struct range {
		std::size_t bytes;
		unsigned slot;
	};
	struct ring_entry {
		io_uring *ring;
		unsigned base;
		std::vector<bool> registered; // by slot
	};

	// Gives a buffer just made a slot and registers it with every ring.
	// Syscalls under _rm: only when a buffer is made or freed, or a ring
	// attaches, never per request.
	void enroll(void *base, std::size_t bytes) noexcept
	{
		if (!registering())
			return;
		const auto a = reinterpret_cast<std::uintptr_t>(base);
		std::lock_guard lock(_rm);
		// What overlaps it was freed elsewhere, against the premise (a
		// plain free() of a buffer of ours): its pages leave the rings
		// now, so that no address maps to two slots.
		for (auto it = _ranges.lower_bound(a > k_rpc_max ? a - k_rpc_max : 0);
		     it != _ranges.end() && it->first < a + bytes;) {
			if (it->first + it->second.bytes > a)
				it = drop(it);
			else
				++it;
		}
		if (_slots_free.empty())
			return; // every slot taken: pinned per request
		const unsigned slot = _slots_free.back();
		_slots_free.pop_back();
		try {
			_ranges.emplace(a, range{bytes, slot});
		} catch (...) {
			_slots_free.push_back(slot); // reserved for every slot: never allocates
			return;
		}
		_slotted.fetch_add(1, std::memory_order_relaxed);
		for (ring_entry &r : _rings)
			enter(r, slot, base, bytes);
	}

	// Before a buffer goes back to glibc: out of every ring, its slot free.
	void retire(void *base) noexcept
	{
		if (_slotted.load(std::memory_order_relaxed) == 0)
			return;
		std::lock_guard lock(_rm);
		if (const auto it = _ranges.find(reinterpret_cast<std::uintptr_t>(base)); it != _ranges.end())
			(void)drop(it);
	}

	std::map<std::uintptr_t, range>::iterator drop(std::map<std::uintptr_t, range>::iterator it) noexcept
	{
		const unsigned slot = it->second.slot;
		const iovec none{nullptr, 0};
		for (ring_entry &r : _rings) {
			if (!r.registered[slot])
				continue;
			(void)io_uring_register_buffers_update_tag(r.ring, r.base + slot, &none, nullptr, 1);
			r.registered[slot] = false;
		}
		_slots_free.push_back(slot);
		_slotted.fetch_sub(1, std::memory_order_relaxed);
		return _ranges.erase(it);
	}

	void enter(ring_entry &r, unsigned slot, void *base, std::size_t bytes) noexcept
	{
		const iovec v{base, bytes};
		if (io_uring_register_buffers_update_tag(r.ring, r.base + slot, &v, nullptr, 1) < 0)
			return; // refused (memory lock limit, ...): pinned per request
		r.registered[slot] = true;
		_registrations.fetch_add(1, std::memory_order_relaxed);
	}

	std::mutex _m;
	std::unordered_map<const void *, entry> _out; // handed out, by the pointer given
	std::array<free_lists, 2> _free;	      // waiting for reuse: [0] plain, [1] direct I/O's
	std::size_t _cached = 0;		      // bytes in _free
	std::uint64_t _gets = 0, _reuses = 0;

	std::atomic<bool> _registering{false};
	std::shared_mutex _rm;			 // guards what follows
	std::map<std::uintptr_t, range> _ranges; // buffers holding a slot, by address
	std::vector<unsigned> _slots_free;	 // free slots; reserved for every slot
	std::vector<ring_entry> _rings;
	std::atomic<std::size_t> _slotted{0}; // _ranges.size(), read without _rm
	std::atomic<std::uint64_t> _registrations{0};
};

// Never destroyed: Ganesha may free a buffer while the process exits.
// nullptr when it could not be made (nothing is then served here).
rpc_pool *pool() noexcept
{
	static rpc_pool *const p = []() noexcept -> rpc_pool * {
		try {
			return new rpc_pool;
		} catch (...) {
			return nullptr;
		}
	}();
	return p;
}

} // namespace

void *rpc_buffer_get(std::size_t size, rpc_place place) noexcept
{
	rpc_pool *p = pool();
	return p != nullptr ? p->get(size, place) : nullptr;
}

bool rpc_buffer_put(void *b) noexcept
{
	rpc_pool *p = pool();
	return b != nullptr && p != nullptr && p->put(b);
}

std::size_t rpc_buffer_size(const void *b) noexcept
{
	rpc_pool *p = pool();
	return b != nullptr && p != nullptr ? p->size(b) : 0;
}

std::size_t rpc_buffer_trim() noexcept
{
	rpc_pool *p = pool();
	return p != nullptr ? p->trim() : 0;
}

rpc_buffer_stats rpc_buffer_counts() noexcept
{
	rpc_pool *p = pool();
	return p != nullptr ? p->counts() : rpc_buffer_stats{};
}

void rpc_buffers_register(bool on) noexcept
{
	if (rpc_pool *p = pool(); p != nullptr)
		p->registering(on);
}

void rpc_buffers_attach(io_uring *ring, unsigned base) noexcept
{
	if (rpc_pool *p = pool(); p != nullptr)
		p->attach(ring, base);
}

void rpc_buffers_detach(io_uring *ring) noexcept
{
	if (rpc_pool *p = pool(); p != nullptr)
		p->detach(ring);
}

int rpc_buffer_index(io_uring *ring, const void *b, std::size_t len) noexcept
{
	rpc_pool *p = pool();
	return b != nullptr && p != nullptr ? p->index(ring, b, len) : -1;
}

} // namespace dcache::io
