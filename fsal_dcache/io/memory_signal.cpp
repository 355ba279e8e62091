#include "dcache_io/memory_signal.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace dcache::io {

const char *memory_source_name(memory_state::source s) noexcept
{
	switch (s) {
	case memory_state::source::none: return "none";
	case memory_state::source::machine: return "machine";
	case memory_state::source::cgroup_v1: return "cgroup_v1";
	case memory_state::source::cgroup_v2: return "cgroup_v2";
	}
	return "?";
}

namespace {

// The whole of a small kernel file (they are generated on read: one read
// loop, no stat).  false if it cannot be opened or read.
bool read_file(const std::string &path, std::string &out) noexcept
{
	out.clear();
	const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = true;
	try {
		char buf[4096];
		for (;;) {
			const ssize_t n = ::read(fd, buf, sizeof(buf));
			if (n < 0) {
				ok = false;
				break;
			}
			if (n == 0)
				break;
			out.append(buf, static_cast<std::size_t>(n));
			if (out.size() > (1u << 20))
				break; // no file read here is that long
		}
	} catch (...) {
		ok = false;
	}
	::close(fd);
	return ok;
}

// Leading decimal digits of text (blanks before them skipped).
std::optional<std::uint64_t> number(std::string_view text) noexcept
{
	std::size_t i = 0;
	while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
		++i;
	if (i == text.size() || text[i] < '0' || text[i] > '9')
		return std::nullopt;
	std::uint64_t n = 0;
	for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
		const auto d = static_cast<std::uint64_t>(text[i] - '0');
		if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
			return std::numeric_limits<std::uint64_t>::max();
		n = n * 10 + d;
	}
	return n;
}

// The value of the line "key value" (memory.stat) or "Key:  value kB"
// (/proc/meminfo, times 1024).
std::optional<std::uint64_t> field(std::string_view text, std::string_view key) noexcept
{
	for (std::size_t at = 0; at < text.size();) {
		std::size_t end = text.find('\n', at);
		if (end == std::string_view::npos)
			end = text.size();
		const std::string_view line = text.substr(at, end - at);
		at = end + 1;
		if (line.size() <= key.size() || line.substr(0, key.size()) != key)
			continue;
		const char sep = line[key.size()];
		if (sep != ' ' && sep != ':')
			continue;
		const std::string_view rest = line.substr(key.size() + 1);
		const auto n = number(rest);
		if (n && rest.find("kB") != std::string_view::npos)
			return *n * 1024;
		return n;
	}
	return std::nullopt;
}

std::vector<std::string_view> split(std::string_view s, char sep)
{
	std::vector<std::string_view> out;
	for (std::size_t at = 0;;) {
		const std::size_t end = s.find(sep, at);
		out.push_back(s.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
		if (end == std::string_view::npos)
			return out;
		at = end + 1;
	}
}

using mount = memory_sampler::mount;

// Where the hierarchy holding the memory controller is mounted.
std::optional<mount> find_mount(const std::string &mountinfo, bool v2)
{
	std::string text;
	if (!read_file(mountinfo, text))
		return std::nullopt;
	std::optional<mount> found;
	for (const std::string_view line : split(text, '\n')) {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER
		const std::size_t dash = line.find(" - ");
		if (dash == std::string_view::npos)
			continue;
		const auto head = split(line.substr(0, dash), ' ');
		const auto tail = split(line.substr(dash + 3), ' ');
		if (head.size() < 5 || tail.size() < 3)
			continue;
		bool memory = false;
		if (v2) {
			memory = tail[0] == "cgroup2";
		} else if (tail[0] == "cgroup") {
			for (const std::string_view opt : split(tail[2], ','))
				memory = memory || opt == "memory";
		}
		if (!memory)
			continue;
		mount m{std::string(head[4]), std::string(head[3])};
		if (m.root == "/")
			return m; // the whole hierarchy: the best there is
		if (!found)
			found = std::move(m);
	}
	return found;
}

} // namespace

// The server's memory group: the directory of its group in the mounted
// hierarchy, and the hierarchy's root directory (where the walk up stops).
struct memory_sampler::group {
	std::string dir;
	std::string root;
	bool v2 = false;
};

std::optional<memory_sampler::group> memory_sampler::find_group()
{
	std::string text;
	if (!read_file(_paths.proc_self_cgroup, text))
		return std::nullopt;
	// hierarchy-ID:controllers:path; v1's memory line first, v2's "0::"
	// only where no v1 hierarchy has the memory controller.
	std::optional<std::string> v1_path, v2_path;
	for (const std::string_view line : split(text, '\n')) {
		const auto parts = split(line, ':');
		if (parts.size() < 3)
			continue;
		const std::string_view path = line.substr(parts[0].size() + parts[1].size() + 2);
		if (parts[0] == "0" && parts[1].empty())
			v2_path = std::string(path);
		for (const std::string_view c : split(parts[1], ','))
			if (c == "memory")
				v1_path = std::string(path);
	}
	const bool v2 = !v1_path;
	const std::optional<std::string> &path = v2 ? v2_path : v1_path;
	if (!path)
		return std::nullopt;
	// Moved to another group (a benchmark's, made after the start, on a
	// hierarchy it may have mounted just now): look at the mounts again.
	if (*path != _last_path) {
		_last_path = *path;
		_read = false;
	}
	if (_read && !_v1 && !_v2 && ++_without >= k_mount_retry)
		_read = false;
	if (!_read) {
		_v1 = find_mount(_paths.mountinfo, false);
		_v2 = find_mount(_paths.mountinfo, true);
		_read = true;
		_without = 0;
		++_mountinfo_reads;
	}
	const std::optional<mount> &m = v2 ? _v2 : _v1;
	if (!m)
		return std::nullopt;
	// The group's path below the mount's root.
	std::string below = *path;
	if (m->root != "/") {
		if (below.compare(0, m->root.size(), m->root) != 0)
			return std::nullopt; // outside what is mounted
		below = below.substr(m->root.size());
	}
	while (!below.empty() && below.back() == '/')
		below.pop_back();
	return group{m->point + below, m->point, v2};
}

namespace {

struct level {
	std::uint64_t limit = 0;
	std::uint64_t usage = 0;
	std::string dir;
};

// The group's tightest level with a limit below memtotal: the one with
// the least left under its limit.
std::optional<level> tightest(const memory_sampler::group &g, std::uint64_t memtotal)
{
	std::optional<level> best;
	std::string dir = g.dir, text;
	for (;;) {
		level l;
		l.dir = dir;
		const bool have_limit = read_file(dir + (g.v2 ? "/memory.max" : "/memory.limit_in_bytes"), text);
		const auto limit = have_limit ? number(text) : std::nullopt; // v2's "max": none
		if (limit && *limit < memtotal &&
		    read_file(dir + (g.v2 ? "/memory.current" : "/memory.usage_in_bytes"), text)) {
			if (const auto usage = number(text)) {
				l.limit = *limit;
				l.usage = *usage;
				const std::uint64_t left = l.limit > l.usage ? l.limit - l.usage : 0;
				if (!best || left < (best->limit > best->usage ? best->limit - best->usage : 0))
					best = std::move(l);
			}
		}
		if (dir.size() <= g.root.size())
			return best;
		const std::size_t slash = dir.rfind('/');
		if (slash == std::string::npos || slash < g.root.size())
			return best;
		dir.resize(std::max(slash, g.root.size()));
	}
}

} // namespace

bool free_pages_reported(const std::string &virtio_devices)
{
	// virtio ids: device 5 is the balloon; feature bit 5 is
	// VIRTIO_BALLOON_F_REPORTING ("features" lists the bits negotiated,
	// bit 0 first).
	constexpr std::string_view k_balloon = "0x0005";
	constexpr std::size_t k_reporting_bit = 5;
	DIR *dir = ::opendir(virtio_devices.c_str());
	if (dir == nullptr)
		return false;
	bool reported = false;
	std::string text;
	while (const dirent *d = ::readdir(dir)) {
		if (d->d_name[0] == '.')
			continue;
		const std::string device = virtio_devices + "/" + d->d_name;
		if (!read_file(device + "/device", text) || text.compare(0, k_balloon.size(), k_balloon) != 0)
			continue;
		if (::access((device + "/driver").c_str(), F_OK) != 0)
			continue; // no driver: nothing negotiated
		if (read_file(device + "/features", text) && text.size() > k_reporting_bit &&
		    text[k_reporting_bit] == '1') {
			reported = true;
			break;
		}
	}
	::closedir(dir);
	return reported;
}

memory_state memory_sampler::sample()
{
	memory_state m;
	std::string text;
	if (!_reported)
		_reported = free_pages_reported(_paths.virtio_devices);
	m.reported = *_reported;
	if (!read_file(_paths.meminfo, text))
		return m;
	const auto total = field(text, "MemTotal");
	const auto free = field(text, "MemFree");
	const auto available = field(text, "MemAvailable");
	if (!total || !free || !available)
		return m;
	// The machine's reclaim (kswapd, in the background) takes pages
	// used once first: clean ones of those count as free.
	const std::uint64_t used_once = field(text, "Inactive(file)").value_or(0);
	const std::uint64_t unclean = field(text, "Dirty").value_or(0) + field(text, "Writeback").value_or(0);
	m.free = std::min(*free + (used_once > unclean ? used_once - unclean : 0), *available);
	m.capacity = *available;
	m.from = memory_state::source::machine;
	std::optional<group> g = find_group();
	if (g && ::access(g->dir.c_str(), F_OK) != 0) {
		_read = false; // unmounted or moved: look again
		g = find_group();
	}
	if (!g)
		return m;
	const std::optional<level> l = tightest(*g, *total);
	if (!l)
		return m;
	// Page cache charged to the group: what it could give back.
	if (!read_file(l->dir + "/memory.stat", text))
		return m;
	const auto cache = field(text, g->v2 ? "file" : "total_cache");
	if (!cache)
		return m;
	const std::uint64_t left = l->limit > l->usage ? l->limit - l->usage : 0;
	const std::uint64_t not_cache = l->usage > *cache ? l->usage - *cache : 0;
	const std::uint64_t could_hold = l->limit > not_cache ? l->limit - not_cache : 0;
	// A group reclaims in the threads that charge it, at every page over
	// its limit: only what it does not use is free there.
	m.free = std::min(m.free, left);
	m.capacity = std::min(m.capacity, could_hold);
	m.from = g->v2 ? memory_state::source::cgroup_v2 : memory_state::source::cgroup_v1;
	return m;
}

namespace {

// The sample memory_now() answers with.  A sequence count around each
// store (odd while one is being written) lets readers take every
// value of one sample without a lock: the values are stored with release
// after the count turns odd (an acquire-release increment, so they cannot
// be seen before it) and loaded with acquire before the count is read
// again, so a reader that saw a new value sees the count changed.  (No
// fences: ThreadSanitizer does not model them.)
struct shared_sample {
	std::atomic<std::uint64_t> seq{0};
	std::atomic<std::uint64_t> free{0};
	std::atomic<std::uint64_t> capacity{0};
	std::atomic<std::uint8_t> from{0};
	std::atomic<bool> reported{false};
	std::atomic<std::int64_t> taken_ns{std::numeric_limits<std::int64_t>::min()};
	std::atomic<bool> sampling{false};
	std::atomic<std::uint64_t> samples{0};
};

shared_sample g_sample;

std::int64_t steady_ns() noexcept
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
		.count();
}

void refresh(std::int64_t now) noexcept
{
	memory_state m;
	try {
		// Only the thread holding g_sample.sampling gets here.
		static memory_sampler sampler;
		m = sampler.sample();
	} catch (...) {
		// no memory to read the files: the sample says "unknown"
	}
	g_sample.seq.fetch_add(1, std::memory_order_acq_rel); // odd: being written
	g_sample.free.store(m.free, std::memory_order_release);
	g_sample.capacity.store(m.capacity, std::memory_order_release);
	g_sample.from.store(static_cast<std::uint8_t>(m.from), std::memory_order_release);
	g_sample.reported.store(m.reported, std::memory_order_release);
	g_sample.seq.fetch_add(1, std::memory_order_release); // even: whole
	g_sample.taken_ns.store(now, std::memory_order_release);
	g_sample.samples.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

memory_state memory_now() noexcept
{
	const std::int64_t now = steady_ns();
	const std::int64_t interval = std::chrono::nanoseconds(k_memory_sample_interval).count();
	const std::int64_t taken = g_sample.taken_ns.load(std::memory_order_acquire);
	if ((taken == std::numeric_limits<std::int64_t>::min() || now - taken >= interval) &&
	    !g_sample.sampling.exchange(true, std::memory_order_acquire)) {
		refresh(now);
		g_sample.sampling.store(false, std::memory_order_release);
	}
	memory_state m;
	for (;;) {
		const std::uint64_t before = g_sample.seq.load(std::memory_order_acquire);
		m.free = g_sample.free.load(std::memory_order_acquire);
		m.capacity = g_sample.capacity.load(std::memory_order_acquire);
		m.from = static_cast<memory_state::source>(g_sample.from.load(std::memory_order_acquire));
		m.reported = g_sample.reported.load(std::memory_order_acquire);
		if (before % 2 == 0 && g_sample.seq.load(std::memory_order_relaxed) == before)
			return m;
	}
}

std::uint64_t memory_samples() noexcept
{
	return g_sample.samples.load(std::memory_order_relaxed);
}

} // namespace dcache::io
