#include "sync_point.h"

#include <atomic>

namespace dcache::core {

namespace {
constinit std::atomic<const sync_point_hook *> g_sync_hook{nullptr};
} // namespace

void set_sync_point_hook(const sync_point_hook *hook) noexcept
{
	g_sync_hook.store(hook, std::memory_order_release);
}

void sync_point(const char *name) noexcept
{
	const sync_point_hook *h = g_sync_hook.load(std::memory_order_acquire);
	if (h != nullptr && h->fn != nullptr)
		h->fn(name, h->arg);
}

} // namespace dcache::core
