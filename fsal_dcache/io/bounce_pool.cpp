#include "dcache_io/bounce_pool.h"

#include <mutex>

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <bit>
#include <vector>

namespace dcache::io {

std::size_t bounce_class_of(std::size_t len) noexcept
{
	const std::size_t size = std::bit_ceil(len < k_bounce_min_class ? k_bounce_min_class : len);
	const auto c = static_cast<std::size_t>(std::countr_zero(size) - std::countr_zero(k_bounce_min_class));
	return c < k_bounce_classes ? c : k_bounce_classes;
}

namespace {

constexpr std::size_t k_classes = k_bounce_classes;

std::size_t class_of(std::size_t len) noexcept
{
	return bounce_class_of(len);
}

std::size_t class_size(std::size_t c) noexcept
{
	return bounce_class_size(c);
}

void *map(std::size_t size) noexcept
{
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? nullptr : p;
}

class pool {
public:
	void *get(std::size_t len, bool &reused) noexcept
	{
		reused = false;
		const std::size_t c = class_of(len);
		if (c == k_classes)
			return counted(map(len));
		{
			std::lock_guard lock(_m);
			if (!_free[c].empty()) {
				void *p = _free[c].back();
				_free[c].pop_back();
				reused = true;
				return p;
			}
		}
		return counted(map(class_size(c)));
	}

	void put(void *p, std::size_t len) noexcept
	{
		const std::size_t c = class_of(len);
		if (c < k_classes) {
			try {
				std::lock_guard lock(_m);
				_free[c].push_back(p);
				return;
			} catch (...) {
				// no room in the list: unmap it now
			}
		}
		munmap(p, c < k_classes ? class_size(c) : len);
		_mapped.fetch_sub(1, std::memory_order_relaxed);
	}

	std::size_t trim() noexcept
	{
		std::array<std::vector<void *>, k_classes> out;
		{
			std::lock_guard lock(_m);
			for (std::size_t c = 0; c < k_classes; ++c)
				out[c].swap(_free[c]);
		}
		std::size_t bytes = 0;
		for (std::size_t c = 0; c < k_classes; ++c) {
			for (void *p : out[c]) {
				munmap(p, class_size(c));
				bytes += class_size(c);
			}
			_mapped.fetch_sub(out[c].size(), std::memory_order_relaxed);
		}
		return bytes;
	}

	std::size_t mapped() const noexcept { return _mapped.load(std::memory_order_relaxed); }

private:
	void *counted(void *p) noexcept
	{
		if (p != nullptr)
			_mapped.fetch_add(1, std::memory_order_relaxed);
		return p;
	}

	std::mutex _m;
	std::array<std::vector<void *>, k_classes> _free;
	std::atomic<std::size_t> _mapped{0};
};

// Never destroyed: a buffer may come back from a completion running while
// the process exits.
pool &the_pool() noexcept
{
	static pool *p = new pool;
	return *p;
}

// The other keepers of idle memory; the mutex is held across a trim, so
// remove_trimmable waits for one in progress.
struct trimmables {
	std::mutex m;
	std::vector<trimmable *> list;
};
trimmables &the_trimmables() noexcept
{
	static trimmables *t = new trimmables; // never destroyed, as the pool
	return *t;
}

} // namespace

void *bounce_get(std::size_t len, bool *reused) noexcept
{
	bool r = false;
	void *p = the_pool().get(len == 0 ? 1 : len, r);
	if (reused != nullptr)
		*reused = r;
	return p;
}
void bounce_put(void *p, std::size_t len) noexcept
{
	if (p != nullptr)
		the_pool().put(p, len == 0 ? 1 : len);
}
std::size_t bounce_trim() noexcept
{
	std::size_t bytes = the_pool().trim();
	trimmables &t = the_trimmables();
	std::lock_guard lock(t.m);
	for (trimmable *k : t.list)
		bytes += k->trim();
	return bytes;
}

void add_trimmable(trimmable *k) noexcept
{
	trimmables &t = the_trimmables();
	std::lock_guard lock(t.m);
	try {
		t.list.push_back(k);
	} catch (...) {
		// no memory for the entry: its memory is given back at its end
	}
}

void remove_trimmable(trimmable *k) noexcept
{
	trimmables &t = the_trimmables();
	std::lock_guard lock(t.m);
	std::erase(t.list, k);
}
std::size_t bounce_mapped() noexcept
{
	return the_pool().mapped();
}

} // namespace dcache::io
