#include "log.h"

#include <cstdarg>
#include <cstdio>

namespace dcache::core {

namespace {
constinit std::atomic<dcache_log_fn> g_log{nullptr};
} // namespace

void set_log(dcache_log_fn fn) noexcept
{
	g_log.store(fn, std::memory_order_release);
}

void log_msg(dcache_log_level level, const char *fmt, ...) noexcept
{
	const dcache_log_fn fn = g_log.load(std::memory_order_acquire);
	if (fn == nullptr)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fn(level, line);
}

bool first_time(std::atomic<std::uint32_t> &logged, once what) noexcept
{
	const std::uint32_t bit = 1u << static_cast<unsigned>(what);
	return (logged.fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
}

} // namespace dcache::core
