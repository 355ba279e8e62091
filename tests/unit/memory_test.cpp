// The memory a burst leaves behind: bounce buffers reused by size and
// unmapped when the server goes idle, and the malloc_trim after a burst.
#include "dcache_io/bounce_pool.h"
#include "dcache_io/heap_trim.h"
#include "dcache_io/sync_backend.h"
#include "iovec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

using namespace dcache::core;
using namespace dcache::io;

TEST(bounce_pool, buffers_are_page_aligned_reused_by_size_and_trimmed)
{
	(void)bounce_trim();
	const std::size_t base = bounce_mapped();
	void *a = bounce_get(1 << 20);
	ASSERT_NE(a, nullptr);
	EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % k_page_size, 0u);
	std::memset(a, 0xab, 1 << 20); // every byte is usable
	bounce_put(a, 1 << 20);
	void *b = bounce_get((1 << 20) - 100);
	EXPECT_EQ(b, a) << "the freed buffer of the same class, not a new mapping";
	void *c = bounce_get(4096);
	EXPECT_NE(c, a);
	EXPECT_EQ(bounce_mapped(), base + 2);
	bounce_put(b, (1 << 20) - 100);
	bounce_put(c, 4096);
	EXPECT_EQ(bounce_trim(), (std::size_t{1} << 20) + (std::size_t{64} << 10));
	EXPECT_EQ(bounce_mapped(), base) << "every free buffer unmapped";
	// Beyond the largest class: a mapping of its own, gone at release.
	void *big = bounce_get(std::size_t{40} << 20);
	ASSERT_NE(big, nullptr);
	bounce_put(big, std::size_t{40} << 20);
	EXPECT_EQ(bounce_mapped(), base);
	EXPECT_EQ(bounce_trim(), 0u);
}

TEST(bounce_pool, aligned_buffer_gives_its_memory_back)
{
	(void)bounce_trim();
	const std::size_t base = bounce_mapped();
	{
		sync_backend b;
		aligned_buffer buf(b);
		ASSERT_TRUE(buf.allocate(512, 100000));
		EXPECT_EQ(bounce_mapped(), base + 1);
		EXPECT_FALSE(buf.allocate(512, 10)) << "one allocation per buffer";
		aligned_buffer beyond_a_page(b);
		EXPECT_FALSE(beyond_a_page.allocate(2 * k_page_size, 10));
	}
	EXPECT_EQ(bounce_trim(), std::size_t{128} << 10) << "back in the pool, then unmapped";
}

TEST(heap_trim, a_burst_that_ends_is_trimmed_three_times_then_left_alone)
{
	set_heap_trim_interval_for_test(std::chrono::milliseconds(20));
	void *p = bounce_get(1 << 16);
	bounce_put(p, 1 << 16);
	const std::uint64_t before = heap_trims();
	note_heap_use();
	const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (heap_trims() < before + 3 && std::chrono::steady_clock::now() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	EXPECT_EQ(heap_trims(), before + 3) << "1, 10 and 60 intervals into the quiet";
	EXPECT_EQ(bounce_trim(), 0u) << "the trims unmapped the free bounce buffers";
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	EXPECT_EQ(heap_trims(), before + 3) << "a quiet server is left alone";
	set_heap_trim_interval_for_test(std::chrono::milliseconds(1000));
}
