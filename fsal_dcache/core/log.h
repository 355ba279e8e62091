// The core's log.  Lines go to the adapter's function (Ganesha's log); a
// fallback's reason is logged once per export, then only counted.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include "dcache/core.h"

#include <atomic>
#include <cstdint>

namespace dcache::core {

void set_log(dcache_log_fn fn) noexcept;
__attribute__((format(printf, 2, 3))) void log_msg(dcache_log_level level, const char *fmt, ...) noexcept;

// The events each export logs once.
enum class once : std::uint8_t {
	no_dontcache,
	no_odirect,
	open_error,
	direct_einval,
	fadvise_error,
	sync_range_error,
	flush_drop_error,
	no_nowait,
	open_buffered_error,
	no_personality,
	direct_eio,
	writeback_error,
	direct_nospace,
	free_reported,
};

// True the first time `what` happens where `logged` keeps count (an
// export's bits).
[[nodiscard]] bool first_time(std::atomic<std::uint32_t> &logged, once what) noexcept;

} // namespace dcache::core

// log_msg, the first time `what` happens on exp (a dcache_export).
#define DCACHE_LOG_ONCE(exp, what, level, ...)                                            \
	do {                                                                              \
		if (::dcache::core::first_time((exp).logged, ::dcache::core::once::what)) \
			::dcache::core::log_msg((level), __VA_ARGS__);                    \
	} while (0)
