#include "dcache_io/rpc_buffers.h"

#include "dcache_io/bounce_pool.h"

#include <malloc.h>

#include <array>
#include <cstdlib>
#include <mutex>
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
		add_trimmable(this);
	}

	void *get(std::size_t size, rpc_place place) noexcept
	{
		if (size < k_rpc_min || size > k_rpc_max)
			return nullptr;
		const std::size_t c = class_of(size), bytes = class_bytes(c);
		void *base = nullptr;
		bool reused = false;
		{
			std::lock_guard lock(_m);
			if (!_free[c].empty()) {
				base = _free[c].back();
				_free[c].pop_back();
				_cached -= bytes;
				reused = true;
			}
		}
		if (base == nullptr && (base = std::aligned_alloc(k_page, bytes)) == nullptr)
			return nullptr;
		void *p = place == rpc_place::start ? base : static_cast<char *>(base) + (bytes - size);
		std::lock_guard lock(_m);
		try {
			// A start buffer freed elsewhere leaves its entry; its address
			// may come back here: the new entry replaces it.
			_out.insert_or_assign(p, entry{base, static_cast<std::uint32_t>(c)});
		} catch (...) {
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
			if (e.base == p && malloc_usable_size(p) < bytes)
				return false;
			if (_cached + bytes <= k_rpc_cache_bytes) {
				try {
					_free[e.cls].push_back(e.base);
					_cached += bytes;
					return true;
				} catch (...) {
					// no room in the list: freed below
				}
			}
			base = e.base;
		}
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
		std::array<std::vector<void *>, k_classes> out;
		std::size_t bytes = 0;
		{
			std::lock_guard lock(_m);
			for (std::size_t c = 0; c < k_classes; ++c)
				out[c].swap(_free[c]);
			bytes = _cached;
			_cached = 0;
		}
		for (const auto &list : out)
			for (void *b : list)
				std::free(b);
		return bytes;
	}

	rpc_buffer_stats counts() noexcept
	{
		std::lock_guard lock(_m);
		std::size_t cached = 0;
		for (const auto &list : _free)
			cached += list.size();
		return {_gets, _reuses, _out.size(), cached};
	}

private:
	struct entry {
		void *base;
		std::uint32_t cls;
	};
	std::mutex _m;
	std::unordered_map<const void *, entry> _out;	  // handed out, by the pointer given
	std::array<std::vector<void *>, k_classes> _free; // waiting for reuse, by class
	std::size_t _cached = 0;			  // bytes in _free
	std::uint64_t _gets = 0, _reuses = 0;
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

} // namespace dcache::io
