#include "dcache_io/backend_factory.h"

#include "dcache_io/sync_backend.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <vector>

namespace dcache::io {

namespace {

constinit std::atomic<uring_factory> g_uring_factory{nullptr};

// The server's rings (see backend_factory.h).  Weak: a ring goes with the
// last export that uses it.
struct ring_pool {
	std::mutex m;
	std::vector<std::weak_ptr<backend>> rings; // guarded by m
};

ring_pool &pool()
{
	static ring_pool p; // never destroyed before the exports: they hold rings, not the pool
	return p;
}

// Forgets the rings gone with their last export; returns how many are
// left.  Under p.m.
std::size_t prune(ring_pool &p) noexcept
{
	std::erase_if(p.rings, [](const std::weak_ptr<backend> &w) { return w.expired(); });
	return p.rings.size();
}

} // namespace

unsigned shared_rings_max() noexcept
{
	cpu_set_t set;
	CPU_ZERO(&set);
	const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	return static_cast<unsigned>(std::clamp(cpus, 1, static_cast<int>(k_shared_rings_cap)));
}

void set_uring_factory(uring_factory f) noexcept
{
	g_uring_factory.store(f, std::memory_order_release);
}

namespace {

// A ring of the pool: the one fewest exports use, or a new one while there
// are fewer than shared_rings_max().  Throws only std::bad_alloc.
uring_open_result shared_ring(std::shared_ptr<backend> &out)
{
	ring_pool &p = pool();
	std::lock_guard lock(p.m);
	const std::size_t alive = prune(p);
	std::shared_ptr<backend> least;
	for (const auto &w : p.rings)
		if (std::shared_ptr<backend> b = w.lock(); b && (!least || b.use_count() < least.use_count()))
			least = std::move(b);
	if (least && alive >= shared_rings_max()) {
		out = std::move(least);
		return {};
	}
	uring_open_result r = make_uring_backend(k_shared_ring_entries);
	if (r.error != 0 || !r.backend) {
		if (least) { // the rings there are will do
			out = std::move(least);
			return {};
		}
		return r;
	}
	out = std::shared_ptr<backend>(std::move(r.backend));
	p.rings.push_back(out);
	return {};
}

} // namespace

std::size_t shared_rings_alive() noexcept
{
	ring_pool &p = pool();
	std::lock_guard lock(p.m);
	return prune(p);
}

backend_choice open_backend(bool want_uring)
{
	backend_choice out;
	if (want_uring) {
		uring_open_result r;
		if (const uring_factory make = g_uring_factory.load(std::memory_order_acquire); make != nullptr) {
			r = make(k_shared_ring_entries); // a test's ring, the export's own
			if (r.error == 0 && r.backend)
				out.backend = std::shared_ptr<backend>(std::move(r.backend));
		} else {
			r = shared_ring(out.backend);
		}
		if (out.backend)
			return out;
		out.uring_error = r.error != 0 ? r.error : EIO;
		out.why = std::move(r.why);
	}
	out.backend = std::make_shared<sync_backend>();
	return out;
}

} // namespace dcache::io
