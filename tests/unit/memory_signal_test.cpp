// The memory signal (io/memory_signal.cpp) read off trees of files laid
// out as the kernel lays them out: cgroup v1 and v2 groups with and
// without a limit, a limit on a parent, a bound subtree, and the machine
// alone; then the live sample memory_now() gives this process.
#include "dcache_io/memory_signal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace dcache::io;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

class memory_tree : public ::testing::Test {
protected:
	void SetUp() override
	{
		char templ[] = "/tmp/dcache-memory-XXXXXX";
		ASSERT_NE(::mkdtemp(templ), nullptr);
		root = templ;
		paths.proc_self_cgroup = root + "/cgroup";
		paths.mountinfo = root + "/mountinfo";
		paths.meminfo = root + "/meminfo";
		paths.virtio_devices = root + "/virtio";
		// 24 GiB, 18 GiB free, 22 GiB available.
		put("meminfo", "MemTotal:       25165824 kB\nMemFree:        18874368 kB\n"
			       "MemAvailable:   23068672 kB\nBuffers:           68072 kB\n");
	}
	void TearDown() override { fs::remove_all(root); }

	void put(const std::string &rel, const std::string &text)
	{
		const fs::path p = fs::path(root) / rel;
		fs::create_directories(p.parent_path());
		std::ofstream(p) << text;
	}
	// A v1 memory hierarchy mounted at ROOT/mem (mount root `bound`).
	void v1(const std::string &group, const std::string &bound = "/")
	{
		put("cgroup", "9:name=systemd:/\n4:memory:" + group + "\n1:cpu:/\n0::/\n");
		put("mountinfo", "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
				 "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
				 "35 31 0:32 " +
					 bound + " " + root + "/mem rw,relatime - cgroup cgroup rw,memory\n");
	}
	void v1_level(const std::string &dir, std::uint64_t limit, std::uint64_t usage, std::uint64_t cache)
	{
		put("mem" + dir + "/memory.limit_in_bytes", std::to_string(limit) + "\n");
		put("mem" + dir + "/memory.usage_in_bytes", std::to_string(usage) + "\n");
		put("mem" + dir + "/memory.stat", "cache 4096\nrss 8192\nhierarchical_memory_limit " +
							  std::to_string(limit) + "\ntotal_cache " +
							  std::to_string(cache) + "\ntotal_rss 1\n");
	}
	void v2(const std::string &group)
	{
		put("cgroup", "0::" + group + "\n");
		put("mountinfo", "30 23 0:27 / " + root + "/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
	}
	void v2_level(const std::string &dir, const std::string &max, std::uint64_t current, std::uint64_t file)
	{
		put("unified" + dir + "/memory.max", max + "\n");
		put("unified" + dir + "/memory.current", std::to_string(current) + "\n");
		put("unified" + dir + "/memory.stat", "anon 1000\nfile " + std::to_string(file) + "\nkernel 12\n");
	}

	std::string root;
	memory_paths paths;
};

constexpr std::uint64_t k_unlimited_v1 = 9223372036854771712ULL;

TEST_F(memory_tree, the_machine_when_there_is_no_group_file)
{
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::machine);
	EXPECT_EQ(m.free, 18ULL << 30);
	EXPECT_EQ(m.capacity, 22ULL << 30);
}

TEST_F(memory_tree, the_machine_counts_clean_pages_used_once_as_free)
{
	// 2 GiB free, 6 GiB used once of which 1 GiB dirty and 512 MiB under
	// write-back, 12 GiB available.
	put("meminfo", "MemTotal:       25165824 kB\nMemFree:         2097152 kB\n"
		       "MemAvailable:   12582912 kB\nInactive(file):  6291456 kB\n"
		       "Dirty:           1048576 kB\nWriteback:        524288 kB\nWritebackTmp:   4194304 kB\n");
	memory_state m = sample_memory(paths);
	EXPECT_EQ(m.free, (2ULL << 30) + (6ULL << 30) - (1ULL << 30) - 512 * MiB);
	EXPECT_EQ(m.capacity, 12ULL << 30);
	// never more than MemAvailable, nor less than MemFree
	put("meminfo", "MemTotal:       25165824 kB\nMemFree:         2097152 kB\n"
		       "MemAvailable:    4194304 kB\nInactive(file):  6291456 kB\nDirty: 0 kB\n");
	EXPECT_EQ(sample_memory(paths).free, 4ULL << 30);
	put("meminfo", "MemTotal:       25165824 kB\nMemFree:         2097152 kB\n"
		       "MemAvailable:    4194304 kB\nInactive(file):  1048576 kB\nDirty: 3145728 kB\n");
	EXPECT_EQ(sample_memory(paths).free, 2ULL << 30);
}

TEST_F(memory_tree, a_group_counts_only_what_it_does_not_use)
{
	put("meminfo", "MemTotal:       25165824 kB\nMemFree:         2097152 kB\n"
		       "MemAvailable:   12582912 kB\nInactive(file):  6291456 kB\n");
	v2("/bench");
	v2_level("", "max", 9000 * MiB, 4000 * MiB);
	// 1 GiB limit, 900 MiB charged, 800 MiB of it page cache.
	v2_level("/bench", std::to_string(1024 * MiB), 900 * MiB, 800 * MiB);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::cgroup_v2);
	EXPECT_EQ(m.free, 124 * MiB);
}

// /sys/bus/virtio/devices as the kernel lays it out: a virtio device's
// id, its negotiated feature bits (bit 0 first) and its driver's link.
TEST_F(memory_tree, free_page_reporting_is_a_balloon_that_negotiated_it)
{
	const auto device = [&](const std::string &name, const std::string &id, const std::string &bits, bool driver) {
		put("virtio/" + name + "/device", id + "\n");
		put("virtio/" + name + "/features", bits + std::string(64 - bits.size(), '0') + "\n");
		if (driver)
			fs::create_directory_symlink(root, root + "/virtio/" + name + "/driver");
	};
	EXPECT_FALSE(free_pages_reported(paths.virtio_devices)) << "no virtio devices at all";
	EXPECT_FALSE(sample_memory(paths).reported);
	device("virtio1", "0x0002", "00100111", true); // a disk: bit 5 is not reporting there
	device("virtio0", "0x0005", "01100001", true); // a balloon with statistics only
	EXPECT_FALSE(free_pages_reported(paths.virtio_devices));
	device("virtio3", "0x0005", "01100101", false); // reporting offered, no driver bound
	EXPECT_FALSE(free_pages_reported(paths.virtio_devices));
	fs::create_directory_symlink(root, root + "/virtio/virtio3/driver");
	EXPECT_TRUE(free_pages_reported(paths.virtio_devices));
	const memory_state m = sample_memory(paths);
	EXPECT_TRUE(m.reported);
	EXPECT_EQ(m.free, 18ULL << 30) << "the figures as without it";
	paths.meminfo = root + "/none";
	EXPECT_TRUE(sample_memory(paths).reported) << "known even where the memory is not";
}

TEST_F(memory_tree, nothing_known_without_meminfo)
{
	paths.meminfo = root + "/none";
	EXPECT_FALSE(sample_memory(paths).known());
}

TEST_F(memory_tree, v1_group_with_a_limit)
{
	v1("/bench");
	v1_level("", k_unlimited_v1, 5000 * MiB, 3000 * MiB);
	// 1 GiB limit, 900 MiB used of which 500 MiB page cache.
	v1_level("/bench", 1024 * MiB, 900 * MiB, 500 * MiB);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::cgroup_v1);
	EXPECT_EQ(m.free, 124 * MiB);
	EXPECT_EQ(m.capacity, 624 * MiB) << "the limit less what is not page cache";
}

TEST_F(memory_tree, v1_group_without_a_limit_is_the_machine)
{
	v1("/bench");
	v1_level("", k_unlimited_v1, 5000 * MiB, 3000 * MiB);
	v1_level("/bench", k_unlimited_v1, 900 * MiB, 500 * MiB);
	EXPECT_EQ(sample_memory(paths).from, memory_state::source::machine);
}

TEST_F(memory_tree, v1_limit_on_a_parent_counts_with_the_parents_usage)
{
	v1("/tenants/a/server");
	v1_level("", k_unlimited_v1, 5000 * MiB, 3000 * MiB);
	v1_level("/tenants", k_unlimited_v1, 3000 * MiB, 2000 * MiB);
	v1_level("/tenants/a", 2048 * MiB, 2000 * MiB, 1500 * MiB);
	v1_level("/tenants/a/server", 4096 * MiB, 600 * MiB, 400 * MiB);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::cgroup_v1);
	EXPECT_EQ(m.free, 48 * MiB) << "the parent's limit is the tighter one";
	EXPECT_EQ(m.capacity, 1548 * MiB);
}

TEST_F(memory_tree, v1_bound_subtree)
{
	// The hierarchy's /outer mounted at ROOT/mem: the group /outer/g is
	// ROOT/mem/g.
	v1("/outer/g", "/outer");
	v1_level("", k_unlimited_v1, 5000 * MiB, 3000 * MiB);
	v1_level("/g", 512 * MiB, 256 * MiB, 128 * MiB);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::cgroup_v1);
	EXPECT_EQ(m.free, 256 * MiB);
	EXPECT_EQ(m.capacity, 384 * MiB);
}

TEST_F(memory_tree, v2_group_with_memory_max)
{
	v2("/system.slice/ganesha.service");
	v2_level("/system.slice", "max", 3000 * MiB, 2000 * MiB);
	v2_level("/system.slice/ganesha.service", std::to_string(1024 * MiB), 1000 * MiB, 700 * MiB);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::cgroup_v2);
	EXPECT_EQ(m.free, 24 * MiB);
	EXPECT_EQ(m.capacity, 724 * MiB);
}

TEST_F(memory_tree, v2_max_everywhere_is_the_machine)
{
	v2("/system.slice/ganesha.service");
	v2_level("/system.slice", "max", 3000 * MiB, 2000 * MiB);
	v2_level("/system.slice/ganesha.service", "max", 1000 * MiB, 700 * MiB);
	EXPECT_EQ(sample_memory(paths).from, memory_state::source::machine);
}

TEST_F(memory_tree, a_limit_above_the_machine_is_no_limit)
{
	v1("/bench");
	v1_level("/bench", 64ULL << 30, 900 * MiB, 500 * MiB);
	EXPECT_EQ(sample_memory(paths).from, memory_state::source::machine);
}

TEST_F(memory_tree, the_machine_bounds_a_group)
{
	// A 20 GiB group on a machine with 18 GiB free.
	v1("/big");
	v1_level("/big", 20ULL << 30, 1ULL << 30, 0);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.from, memory_state::source::cgroup_v1);
	EXPECT_EQ(m.free, 18ULL << 30);
	EXPECT_EQ(m.capacity, 19ULL << 30);
}

TEST_F(memory_tree, over_the_limit_has_nothing_free)
{
	v1("/bench");
	v1_level("/bench", 1024 * MiB, 1030 * MiB, 900 * MiB);
	const memory_state m = sample_memory(paths);
	EXPECT_EQ(m.free, 0u);
	EXPECT_EQ(m.capacity, 894 * MiB);
}

TEST_F(memory_tree, mountinfo_is_read_once_and_again_when_the_group_goes_or_a_while_after_none)
{
	// No memory hierarchy mounted yet (a netns's /sys without cgroups).
	put("cgroup", "4:memory:/bench\n0::/\n");
	put("mountinfo", "31 23 0:28 / /sys rw - sysfs sysfs rw\n");
	memory_sampler s(paths);
	EXPECT_EQ(s.sample().from, memory_state::source::machine);
	EXPECT_EQ(s.mountinfo_reads(), 1u);
	// Mounted afterwards, the server still in its group: seen within
	// k_mount_retry samples, not before.
	put("mountinfo", "35 31 0:32 / " + root + "/mem rw,relatime - cgroup cgroup rw,memory\n");
	v1_level("", k_unlimited_v1, 5000 * MiB, 3000 * MiB);
	v1_level("/bench", 1024 * MiB, 900 * MiB, 500 * MiB);
	unsigned n = 1;
	while (s.sample().from != memory_state::source::cgroup_v1 && n < 1000)
		++n;
	EXPECT_EQ(n, memory_sampler::k_mount_retry);
	EXPECT_EQ(s.mountinfo_reads(), 2u);
	for (int i = 0; i < 500; ++i)
		ASSERT_EQ(s.sample().from, memory_state::source::cgroup_v1);
	EXPECT_EQ(s.mountinfo_reads(), 2u) << "not while the group is there";
	// The hierarchy mounted elsewhere: the group's directory is gone.
	fs::rename(fs::path(root) / "mem", fs::path(root) / "mem2");
	put("mountinfo", "35 31 0:32 / " + root + "/mem2 rw,relatime - cgroup cgroup rw,memory\n");
	const memory_state m = s.sample();
	EXPECT_EQ(m.from, memory_state::source::cgroup_v1);
	EXPECT_EQ(m.free, 124 * MiB);
	EXPECT_EQ(s.mountinfo_reads(), 3u);
}

TEST_F(memory_tree, a_move_to_another_group_reads_the_mounts_again)
{
	put("cgroup", "4:memory:/\n0::/\n");
	put("mountinfo", "31 23 0:28 / /sys rw - sysfs sysfs rw\n");
	memory_sampler s(paths);
	EXPECT_EQ(s.sample().from, memory_state::source::machine);
	// A benchmark mounts the hierarchy and moves the server into a group.
	v1("/bench");
	v1_level("", k_unlimited_v1, 5000 * MiB, 3000 * MiB);
	v1_level("/bench", 1024 * MiB, 900 * MiB, 500 * MiB);
	EXPECT_EQ(s.sample().from, memory_state::source::cgroup_v1) << "at the next sample";
	EXPECT_EQ(s.mountinfo_reads(), 2u);
}

TEST(memory_now, this_process_has_a_known_sample_read_at_most_once_an_interval)
{
	const memory_state first = memory_now();
	EXPECT_TRUE(first.known()) << "every machine here has /proc/meminfo";
	EXPECT_GT(first.capacity, 0u);
	// Calls within the interval answer from the sample: at most one more
	// read for a burst of calls (the interval may end during the burst).
	const std::uint64_t before = memory_samples();
	const auto start = std::chrono::steady_clock::now();
	for (int i = 0; i < 1000; ++i)
		(void)memory_now();
	if (std::chrono::steady_clock::now() - start < k_memory_sample_interval) {
		EXPECT_LE(memory_samples() - before, 1u);
	}
}

} // namespace
