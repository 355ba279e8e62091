// dcache_settings_parse and friends: turn the EXPORT block's strings into
// validated settings.  Pure (no I/O, no globals); thread-safe.
#include "dcache/core.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace {

constexpr std::uint32_t k_max_num_pages = 1024;
// Boundary tracker limits: 2^20 pages is 4 GiB of page cache per export,
// far beyond any sensible setting; an hour is the longest a half-written
// page may wait for its neighbour.
constexpr std::uint32_t k_max_boundary_pages = 1u << 20;
constexpr std::uint32_t k_max_boundary_age_ms = 3600u * 1000u;
// uring_backend::k_max_depth (not included here: settings stay pure).
constexpr std::uint32_t k_max_queue_depth = 4096;

std::string_view trim(std::string_view s) noexcept
{
	while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
		s.remove_prefix(1);
	while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
		s.remove_suffix(1);
	return s;
}

bool iequals(std::string_view a, std::string_view b) noexcept
{
	if (a.size() != b.size())
		return false;
	for (std::size_t i = 0; i < a.size(); ++i) {
		char x = a[i], y = b[i];
		if (x >= 'A' && x <= 'Z')
			x = static_cast<char>(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = static_cast<char>(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return true;
}

// A setting's allowed words and the value each stands for.
template <class E>
struct word {
	const char *text;
	E value;
};
using mode_word = word<dcache_mode>;

// Names first, then the kernel's numbers (fadvise has none).
constexpr mode_word k_read_modes[] = {
	{"buffered", DCACHE_MODE_BUFFERED}, {"dontcache", DCACHE_MODE_DONTCACHE},
	{"fadvise", DCACHE_MODE_FADVISE},   {"direct", DCACHE_MODE_DIRECT},
	{"0", DCACHE_MODE_BUFFERED},        {"1", DCACHE_MODE_DONTCACHE},
	{"2", DCACHE_MODE_DIRECT},
};
constexpr mode_word k_write_modes[] = {
	{"buffered", DCACHE_MODE_BUFFERED},
	{"dontcache", DCACHE_MODE_DONTCACHE},
	{"fadvise", DCACHE_MODE_FADVISE},
	{"direct", DCACHE_MODE_DIRECT},
	{"direct_data_sync", DCACHE_MODE_DIRECT_DATA_SYNC},
	{"direct_file_sync", DCACHE_MODE_DIRECT_FILE_SYNC},
	{"0", DCACHE_MODE_BUFFERED},
	{"1", DCACHE_MODE_DONTCACHE},
	{"2", DCACHE_MODE_DIRECT},
	{"3", DCACHE_MODE_DIRECT_DATA_SYNC},
	{"4", DCACHE_MODE_DIRECT_FILE_SYNC},
};

void explain(char *why, std::size_t why_len, const char *setting, const char *value,
	     const char *allowed) noexcept
{
	if (why == nullptr || why_len == 0)
		return;
	std::snprintf(why, why_len, "%s = \"%s\" is not valid; allowed: %s", setting, value, allowed);
}

constexpr word<dcache_mem_misaligned> k_mem_words[] = {
	{"bounce", DCACHE_MEM_MISALIGNED_BOUNCE},
	{"buffered", DCACHE_MEM_MISALIGNED_BUFFERED},
};
constexpr word<dcache_io_backend> k_backend_words[] = {
	{"io_uring", DCACHE_IO_BACKEND_IO_URING},
	{"sync", DCACHE_IO_BACKEND_SYNC},
};
constexpr const char *k_bool_allowed = "true, false, yes, no, on, off, 1, 0";

template <class E, std::size_t N>
bool parse_word(const char *text, const word<E> (&table)[N], E *out) noexcept
{
	const std::string_view v = trim(text);
	for (const auto &w : table) {
		if (iequals(v, w.text)) {
			*out = w.value;
			return true;
		}
	}
	return false;
}

bool parse_bool(const char *text, bool *out) noexcept
{
	const std::string_view v = trim(text);
	for (const char *t : {"true", "yes", "on", "1"})
		if (iequals(v, t))
			return *out = true, true;
	for (const char *f : {"false", "no", "off", "0"})
		if (iequals(v, f))
			return *out = false, true;
	return false;
}

// A decimal integer in [lo, hi]; nothing else (no sign, no suffix).
bool parse_uint(const char *text, std::uint32_t lo, std::uint32_t hi, std::uint32_t *out) noexcept
{
	const std::string_view v = trim(text);
	if (v.empty() || v.size() > 10)
		return false;
	std::uint64_t n = 0;
	for (char c : v) {
		if (c < '0' || c > '9')
			return false;
		n = n * 10 + static_cast<std::uint64_t>(c - '0');
	}
	if (n < lo || n > hi)
		return false;
	*out = static_cast<std::uint32_t>(n);
	return true;
}

// At most five digits (so also no long runs of leading zeros), 0..1024.
bool parse_pages(const char *text, std::uint32_t *out) noexcept
{
	return trim(text).size() <= 5 && parse_uint(text, 0, k_max_num_pages, out);
}

} // namespace

extern "C" {

struct dcache_settings dcache_settings_default(void)
{
	dcache_settings s{};
	s.io_cache_read = DCACHE_MODE_BUFFERED;
	s.io_cache_write = DCACHE_MODE_BUFFERED;
	s.direct_misaligned_num_pages = 2;
	s.direct_misaligned_dontcache = true;
	// Measured (docs/benchmarks.md): most WRITE payloads arrive misaligned
	// in memory; giving up on them left 15-58 MiB cached where the copy
	// left none, at ~20 % more server CPU.  Direct should be direct.
	s.direct_misaligned_memory = DCACHE_MEM_MISALIGNED_BOUNCE;
	s.boundary_tracking = true;
	s.boundary_max_pages = 4096;   // 16 MiB of page cache per export
	s.boundary_max_age_ms = 5000;
	s.io_backend = DCACHE_IO_BACKEND_IO_URING;
	s.io_queue_depth = 64;
	s.cached_read_fast_path = true;
	return s;
}

int dcache_settings_parse(const struct dcache_settings_text *text, struct dcache_settings *out,
			  char *why, size_t why_len)
{
	if (why != nullptr && why_len > 0)
		why[0] = '\0';
	if (text == nullptr || out == nullptr) {
		if (why != nullptr && why_len > 0)
			std::snprintf(why, why_len, "dcache_settings_parse: no settings given");
		return EINVAL;
	}
	// Build into a local so *out is untouched on error.
	dcache_settings s = dcache_settings_default();
	if (text->io_cache_read != nullptr &&
	    !parse_word(text->io_cache_read, k_read_modes, &s.io_cache_read)) {
		explain(why, why_len, "IO_Cache_Read", text->io_cache_read,
			"buffered, dontcache, fadvise, direct (or the kernel's numbers 0, 1, 2)");
		return EINVAL;
	}
	if (text->io_cache_write != nullptr &&
	    !parse_word(text->io_cache_write, k_write_modes, &s.io_cache_write)) {
		explain(why, why_len, "IO_Cache_Write", text->io_cache_write,
			"buffered, dontcache, fadvise, direct, direct_data_sync, direct_file_sync "
			"(or the kernel's numbers 0, 1, 2, 3, 4)");
		return EINVAL;
	}
	if (text->direct_misaligned_num_pages != nullptr &&
	    !parse_pages(text->direct_misaligned_num_pages, &s.direct_misaligned_num_pages)) {
		explain(why, why_len, "Direct_Misaligned_Num_Pages", text->direct_misaligned_num_pages,
			"an integer from 0 to 1024 (pages of 4096 bytes)");
		return EINVAL;
	}
	if (text->direct_misaligned_dontcache != nullptr &&
	    !parse_bool(text->direct_misaligned_dontcache, &s.direct_misaligned_dontcache)) {
		explain(why, why_len, "Direct_Misaligned_Dontcache", text->direct_misaligned_dontcache,
			k_bool_allowed);
		return EINVAL;
	}
	if (text->direct_misaligned_memory != nullptr &&
	    !parse_word(text->direct_misaligned_memory, k_mem_words, &s.direct_misaligned_memory)) {
		explain(why, why_len, "Direct_Misaligned_Memory", text->direct_misaligned_memory,
			"bounce, buffered");
		return EINVAL;
	}
	if (text->boundary_tracking != nullptr &&
	    !parse_bool(text->boundary_tracking, &s.boundary_tracking)) {
		explain(why, why_len, "Boundary_Tracking", text->boundary_tracking,
			k_bool_allowed);
		return EINVAL;
	}
	if (text->boundary_max_pages != nullptr &&
	    !parse_uint(text->boundary_max_pages, 1, k_max_boundary_pages, &s.boundary_max_pages)) {
		explain(why, why_len, "Boundary_Max_Pages", text->boundary_max_pages,
			"an integer from 1 to 1048576 (pages of 4096 bytes held per export)");
		return EINVAL;
	}
	if (text->boundary_max_age_ms != nullptr &&
	    !parse_uint(text->boundary_max_age_ms, 1, k_max_boundary_age_ms, &s.boundary_max_age_ms)) {
		explain(why, why_len, "Boundary_Max_Age_Ms", text->boundary_max_age_ms,
			"an integer from 1 to 3600000 (milliseconds)");
		return EINVAL;
	}
	if (text->io_backend != nullptr && !parse_word(text->io_backend, k_backend_words, &s.io_backend)) {
		explain(why, why_len, "IO_Backend", text->io_backend, "io_uring, sync");
		return EINVAL;
	}
	if (text->io_queue_depth != nullptr &&
	    !parse_uint(text->io_queue_depth, 1, k_max_queue_depth, &s.io_queue_depth)) {
		explain(why, why_len, "IO_Queue_Depth", text->io_queue_depth,
			"an integer from 1 to 4096 (io_uring entries)");
		return EINVAL;
	}
	if (text->cached_read_fast_path != nullptr &&
	    !parse_bool(text->cached_read_fast_path, &s.cached_read_fast_path)) {
		explain(why, why_len, "Cached_Read_Fast_Path", text->cached_read_fast_path,
			k_bool_allowed);
		return EINVAL;
	}
	*out = s;
	return 0;
}

const char *dcache_mode_name(enum dcache_mode mode)
{
	switch (mode) {
	case DCACHE_MODE_BUFFERED: return "buffered";
	case DCACHE_MODE_DONTCACHE: return "dontcache";
	case DCACHE_MODE_DIRECT: return "direct";
	case DCACHE_MODE_DIRECT_DATA_SYNC: return "direct_data_sync";
	case DCACHE_MODE_DIRECT_FILE_SYNC: return "direct_file_sync";
	case DCACHE_MODE_FADVISE: return "fadvise";
	}
	return "unknown";
}

} // extern "C"
