// How much memory the page cache has to give: the signal the core's auto
// policy weighs a stream against.
//
// The server's memory group where it has a limit (cgroup v1's
// memory.limit_in_bytes / usage_in_bytes / memory.stat, or v2's
// memory.max / memory.current / memory.stat, the tightest group on the
// way up to the hierarchy's root), else the machine's (/proc/meminfo).
// The group is looked up in /proc/self/cgroup at every sample, so a
// server moved into a group after it started is seen in it.
//
// memory_now() is what the data path calls: a few atomic loads.  The
// first caller that finds the sample older than k_memory_sample_interval
// reads it again (one thread at a time; the others meanwhile get the
// previous sample), so the files are read at most once per interval,
// and not at all while no request asks.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace dcache::io {

struct memory_state {
	enum class source : std::uint8_t { none, machine, cgroup_v1, cgroup_v2 };
	// Bytes the page cache can take without evicting anything used more
	// than once: the group's limit less its usage, page cache included;
	// or the machine's MemFree and its clean Inactive(file) (the pages
	// its reclaim takes first: Inactive(file) less Dirty and Writeback),
	// at most its MemAvailable; the smaller of the two in a group.
	std::uint64_t free = 0;
	// Bytes the page cache could hold if it had all it may take: the
	// group's limit less what is not page cache in it, or the machine's
	// MemAvailable (the smaller of the two in a group).
	std::uint64_t capacity = 0;
	source from = source::none; // none: nothing could be read
	// The machine reports its free memory to a host (free page reporting:
	// a virtio balloon device with VIRTIO_BALLOON_F_REPORTING): the host
	// takes back memory left free, so a page the page cache takes from
	// free memory costs a fault in the host at its first touch.
	bool reported = false;
	[[nodiscard]] bool known() const noexcept { return from != source::none; }
	friend bool operator==(const memory_state &, const memory_state &) = default;
};

[[nodiscard]] const char *memory_source_name(memory_state::source s) noexcept;

// How old a sample memory_now() answers with may be.  A stream of 1 GiB/s
// moves 50 MiB in that time; the auto policy's reserve is larger
// (core/auto_policy.h).
inline constexpr std::chrono::milliseconds k_memory_sample_interval{50};

// The last sample, refreshed by the caller that finds it stale.
[[nodiscard]] memory_state memory_now() noexcept;

// Where a sample is read from; tests point these at files of their own.
struct memory_paths {
	std::string proc_self_cgroup = "/proc/self/cgroup";
	std::string mountinfo = "/proc/self/mountinfo";
	std::string meminfo = "/proc/meminfo";
	std::string virtio_devices = "/sys/bus/virtio/devices";
};

// Whether a virtio balloon device under virtio_devices (a driver bound to
// it) negotiated free page reporting.  Hyper-V's balloon reports free
// pages too and is not recognised.
[[nodiscard]] bool free_pages_reported(const std::string &virtio_devices);

// Samples read from paths, remembering between them where the memory
// controller's hierarchy is mounted: mountinfo, the costliest file by far,
// is read at the first sample, again when the server is in another group
// or the group's directory is gone, and every k_mount_retry samples while
// it has none (a hierarchy mounted after the server started, as a
// benchmark's).  One thread at a time.
class memory_sampler {
public:
	static constexpr unsigned k_mount_retry = 100;
	struct mount {
		std::string point; // where it is mounted
		std::string root;  // the hierarchy's path seen there ("/" unless bound)
	};
	struct group; // the server's group in a mounted hierarchy

	explicit memory_sampler(memory_paths paths = {}) : _paths(std::move(paths)) {}
	[[nodiscard]] memory_state sample();
	[[nodiscard]] unsigned mountinfo_reads() const noexcept { return _mountinfo_reads; }

private:
	[[nodiscard]] std::optional<group> find_group();

	memory_paths _paths;
	std::optional<mount> _v1, _v2;
	bool _read = false;
	unsigned _without = 0;	// samples since mountinfo was read, with no mount in it
	std::string _last_path; // the group /proc/self/cgroup named last
	unsigned _mountinfo_reads = 0;
	std::optional<bool> _reported; // read at the first sample: devices stay
};

// One sample, read now.
[[nodiscard]] inline memory_state sample_memory(const memory_paths &paths)
{
	return memory_sampler(paths).sample();
}

// Samples taken so far by memory_now() (tests, the cost measurement).
[[nodiscard]] std::uint64_t memory_samples() noexcept;

} // namespace dcache::io
