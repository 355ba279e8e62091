// The page: the kernel's PAGE_SIZE on x86_64, the unit of the page cache,
// of Direct_Misaligned_Num_Pages, of the boundary tracker and the write
// fence.
#pragma once

#include <cstdint>

namespace dcache::core {

inline constexpr std::uint32_t k_page_size = 4096;

// The start of the page holding byte v, and the end of the page holding
// byte v - 1 (v itself when it is a page boundary).
[[nodiscard]] constexpr std::uint64_t page_down(std::uint64_t v) noexcept
{
	return v - v % k_page_size;
}
[[nodiscard]] constexpr std::uint64_t page_up(std::uint64_t v) noexcept
{
	return page_down(v + k_page_size - 1);
}

} // namespace dcache::core
