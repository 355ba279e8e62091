// The page: the kernel's PAGE_SIZE on x86_64, the unit of the page cache,
// of Direct_Misaligned_Num_Pages, of the boundary tracker and the write
// fence.
#pragma once

#include <cstdint>

namespace dcache::core {

inline constexpr std::uint32_t k_page_size = 4096;

} // namespace dcache::core
