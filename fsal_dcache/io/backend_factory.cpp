#include "dcache_io/backend_factory.h"

#include "dcache_io/sync_backend.h"

#include <atomic>
#include <cerrno>

namespace dcache::io {

namespace {
constinit std::atomic<uring_factory> g_uring_factory{nullptr};
} // namespace

void set_uring_factory(uring_factory f) noexcept
{
	g_uring_factory.store(f, std::memory_order_release);
}

backend_choice open_backend(bool want_uring, unsigned depth)
{
	backend_choice out;
	if (want_uring) {
		const uring_factory make = g_uring_factory.load(std::memory_order_acquire);
		uring_open_result r = make != nullptr ? make(depth) : make_uring_backend(depth);
		if (r.error == 0 && r.backend) {
			out.backend = std::move(r.backend);
			return out;
		}
		out.uring_error = r.error != 0 ? r.error : EIO;
		out.why = std::move(r.why);
	}
	out.backend = std::make_unique<sync_backend>();
	return out;
}

} // namespace dcache::io
