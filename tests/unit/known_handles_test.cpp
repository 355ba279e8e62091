// The per-export table of file handles known to lie inside the export.
#include "known_handles.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "dcache/core.h"

using dcache::core::known_handles;

TEST(known_handles, remembers_what_was_added_and_nothing_else)
{
	known_handles k(8);
	k.add("handle-a");
	EXPECT_TRUE(k.contains("handle-a"));
	EXPECT_FALSE(k.contains("handle-b"));
	EXPECT_FALSE(k.contains("handle-")) << "keys are compared whole, not as prefixes";
	k.add("handle-a");
	EXPECT_EQ(k.size(), 1u) << "adding twice keeps one";
}

TEST(known_handles, forgets_the_oldest_past_its_capacity)
{
	known_handles k(3);
	for (const char *key : {"k1", "k2", "k3", "k4"})
		k.add(key);
	EXPECT_EQ(k.size(), 3u);
	EXPECT_FALSE(k.contains("k1")) << "oldest forgotten first";
	EXPECT_TRUE(k.contains("k2"));
	EXPECT_TRUE(k.contains("k4"));
}

TEST(known_handles, keys_are_bytes_not_strings)
{
	known_handles k(4);
	const std::string with_nul("a\0b", 3);
	k.add(with_nul);
	EXPECT_TRUE(k.contains(with_nul));
	EXPECT_FALSE(k.contains("a"));
}

TEST(known_handles, concurrent_adds_and_lookups_stay_bounded)
{
	known_handles k(64);
	std::vector<std::thread> threads;
	for (int t = 0; t < 4; ++t)
		threads.emplace_back([&k, t] {
			for (int i = 0; i < 2000; ++i) {
				const std::string key = std::to_string(t) + ":" + std::to_string(i);
				k.add(key);
				(void)k.contains(key);
			}
		});
	for (auto &th : threads)
		th.join();
	EXPECT_EQ(k.size(), 64u);
}

TEST(known_handles, c_api_on_an_export)
{
	dcache_settings s = dcache_settings_default();
	s.io_backend = DCACHE_IO_BACKEND_SYNC;
	dcache_export *exp = dcache_export_new(&s, "export 9 /known");
	ASSERT_NE(exp, nullptr);
	const unsigned char key[] = {0x43, 0x00, 0x02, 0x1e, 0x81, 0x00, 0xff};
	EXPECT_FALSE(dcache_export_handle_known(exp, key, sizeof(key)));
	dcache_export_handle_add(exp, key, sizeof(key));
	EXPECT_TRUE(dcache_export_handle_known(exp, key, sizeof(key)));
	EXPECT_FALSE(dcache_export_handle_known(exp, key, sizeof(key) - 1));
	EXPECT_FALSE(dcache_export_handle_known(nullptr, key, sizeof(key)));
	dcache_export_put(exp);
}
