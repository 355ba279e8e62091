// The core's view of validated settings (the parser is dcache/core.h's
// dcache_settings_parse, in settings.cpp).  Pure; thread-safe.
#pragma once

#include "dcache/core.h"

namespace dcache::core {

// direct, direct_data_sync or direct_file_sync.
[[nodiscard]] constexpr bool is_direct_mode(dcache_mode m) noexcept
{
	return m == DCACHE_MODE_DIRECT || m == DCACHE_MODE_DIRECT_DATA_SYNC || m == DCACHE_MODE_DIRECT_FILE_SYNC;
}

// Every field of DCACHE_SETTINGS equal.
[[nodiscard]] bool same_settings(const dcache_settings &a, const dcache_settings &b) noexcept;

} // namespace dcache::core
