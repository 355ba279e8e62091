// dcache_settings_parse and friends: turn the EXPORT block's strings into
// validated settings.  Pure (no I/O, no globals); thread-safe.
#include "settings.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
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
constexpr std::uint32_t k_max_blocking = 1024;
constexpr std::uint32_t k_max_io_workers = 4096;
// A stream of 64 GiB before auto treats it as one is as good as never.
constexpr std::uint32_t k_max_auto_stream_min_mib = 65536;
constexpr std::uint32_t k_max_auto_stream_yield_ms = 1000;

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

// Names first, then the kernel's numbers (fadvise and auto have none).
constexpr mode_word k_read_modes[] = {
	{"buffered", DCACHE_MODE_BUFFERED}, {"dontcache", DCACHE_MODE_DONTCACHE},
	{"fadvise", DCACHE_MODE_FADVISE},   {"direct", DCACHE_MODE_DIRECT},
	{"auto", DCACHE_MODE_AUTO},	    {"0", DCACHE_MODE_BUFFERED},
	{"1", DCACHE_MODE_DONTCACHE},	    {"2", DCACHE_MODE_DIRECT},
};
constexpr mode_word k_write_modes[] = {
	{"buffered", DCACHE_MODE_BUFFERED},
	{"dontcache", DCACHE_MODE_DONTCACHE},
	{"fadvise", DCACHE_MODE_FADVISE},
	{"direct", DCACHE_MODE_DIRECT},
	{"direct_data_sync", DCACHE_MODE_DIRECT_DATA_SYNC},
	{"direct_file_sync", DCACHE_MODE_DIRECT_FILE_SYNC},
	{"auto", DCACHE_MODE_AUTO},
	{"0", DCACHE_MODE_BUFFERED},
	{"1", DCACHE_MODE_DONTCACHE},
	{"2", DCACHE_MODE_DIRECT},
	{"3", DCACHE_MODE_DIRECT_DATA_SYNC},
	{"4", DCACHE_MODE_DIRECT_FILE_SYNC},
};
// What auto makes of a stream: the two ways that leave nothing cached
// whatever the COMMITs do (fadvise keeps an UNSTABLE write stream cached
// until its COMMIT).
constexpr mode_word k_stream_modes[] = {
	{"dontcache", DCACHE_MODE_DONTCACHE},
	{"direct", DCACHE_MODE_DIRECT},
};
// ... and for WRITE streams, the one that picks either by what else the
// export serves (auto_policy.h).
constexpr mode_word k_write_stream_modes[] = {
	{"dontcache", DCACHE_MODE_DONTCACHE},
	{"direct", DCACHE_MODE_DIRECT},
	{"direct_when_quiet", DCACHE_MODE_DIRECT_WHEN_QUIET},
};
constexpr word<dcache_spare_memory> k_spare_words[] = {
	{"unless_reported", DCACHE_SPARE_UNLESS_REPORTED},
	{"cache", DCACHE_SPARE_CACHE},
	{"stream", DCACHE_SPARE_STREAM},
};
constexpr word<dcache_mem_misaligned> k_mem_words[] = {
	{"bounce", DCACHE_MEM_MISALIGNED_BOUNCE},
	{"buffered", DCACHE_MEM_MISALIGNED_BUFFERED},
};
constexpr word<dcache_io_backend> k_backend_words[] = {
	{"io_uring", DCACHE_IO_BACKEND_IO_URING},
	{"sync", DCACHE_IO_BACKEND_SYNC},
};

// The value exactly as written, case aside: no surrounding blanks, no
// sign, no unit, nothing a word of the table does not spell.
template <class E, std::size_t N>
bool parse_word(const char *text, const word<E> (&table)[N], E *out) noexcept
{
	for (const auto &w : table) {
		if (iequals(text, w.text)) {
			*out = w.value;
			return true;
		}
	}
	return false;
}

bool parse_bool(const char *text, bool *out) noexcept
{
	for (const char *t : {"true", "yes", "on", "1"})
		if (iequals(text, t))
			return *out = true, true;
	for (const char *f : {"false", "no", "off", "0"})
		if (iequals(text, f))
			return *out = false, true;
	return false;
}

// One rule for every number: decimal digits, no sign, no unit, no leading
// zero ("0" itself excepted), at most ten digits, then the range.
bool parse_uint(const char *text, std::uint32_t lo, std::uint32_t hi, std::uint32_t *out) noexcept
{
	const std::string_view v = text;
	if (v.empty() || v.size() > 10 || (v.size() > 1 && v.front() == '0'))
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

constexpr const char *k_bool_allowed = "true, false, yes, no, on, off, 1, 0";

// Every setting: its name in ganesha.conf, where its text is, what is
// allowed, and how the text becomes the value.  The one list the parser,
// the error lines and dcache_settings_allowed() use.
struct setting {
	const char *name;
	const char *dcache_settings_text::*text;
	const char *allowed;
	bool (*parse)(const char *text, dcache_settings &s) noexcept;
	// The value in *s as parse() reads it back.
	int (*show)(const dcache_settings &s, char *out, std::size_t len) noexcept;
};

// The first word of the table that stands for v (names come first).
template <class E, std::size_t N>
int show_word(const word<E> (&table)[N], E v, char *out, std::size_t len) noexcept
{
	for (const auto &w : table)
		if (w.value == v)
			return std::snprintf(out, len, "%s", w.text);
	return std::snprintf(out, len, "%d", static_cast<int>(v));
}

int show_bool(bool v, char *out, std::size_t len) noexcept
{
	return std::snprintf(out, len, "%s", v ? "true" : "false");
}

int show_uint(std::uint32_t v, char *out, std::size_t len) noexcept
{
	return std::snprintf(out, len, "%u", v);
}

constexpr setting k_settings[] = {
	{"IO_Cache_Read", &dcache_settings_text::io_cache_read,
	 "buffered, dontcache, fadvise, direct, auto (or the kernel's numbers 0, 1, 2)",
	 [](const char *t, dcache_settings &s) noexcept { return parse_word(t, k_read_modes, &s.io_cache_read); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_read_modes, s.io_cache_read, o, n);
	 }},
	{"IO_Cache_Write", &dcache_settings_text::io_cache_write,
	 "buffered, dontcache, fadvise, direct, direct_data_sync, direct_file_sync, auto (or the kernel's numbers 0, 1, 2, 3, 4)",
	 [](const char *t, dcache_settings &s) noexcept { return parse_word(t, k_write_modes, &s.io_cache_write); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_write_modes, s.io_cache_write, o, n);
	 }},
	{"Direct_Misaligned_Num_Pages", &dcache_settings_text::direct_misaligned_num_pages,
	 "an integer from 0 to 1024 (pages of 4096 bytes)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 0, k_max_num_pages, &s.direct_misaligned_num_pages);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_uint(s.direct_misaligned_num_pages, o, n);
	 }},
	{"Direct_Misaligned_Dontcache", &dcache_settings_text::direct_misaligned_dontcache, k_bool_allowed,
	 [](const char *t, dcache_settings &s) noexcept { return parse_bool(t, &s.direct_misaligned_dontcache); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_bool(s.direct_misaligned_dontcache, o, n);
	 }},
	{"Direct_Misaligned_Memory", &dcache_settings_text::direct_misaligned_memory, "bounce, buffered",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_word(t, k_mem_words, &s.direct_misaligned_memory);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_mem_words, s.direct_misaligned_memory, o, n);
	 }},
	{"Boundary_Tracking", &dcache_settings_text::boundary_tracking, k_bool_allowed,
	 [](const char *t, dcache_settings &s) noexcept { return parse_bool(t, &s.boundary_tracking); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_bool(s.boundary_tracking, o, n);
	 }},
	{"Boundary_Max_Pages", &dcache_settings_text::boundary_max_pages,
	 "an integer from 1 to 1048576 (pages of 4096 bytes held per export)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 1, k_max_boundary_pages, &s.boundary_max_pages);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_uint(s.boundary_max_pages, o, n);
	 }},
	{"Boundary_Max_Age_Ms", &dcache_settings_text::boundary_max_age_ms,
	 "an integer from 1 to 3600000 (milliseconds)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 1, k_max_boundary_age_ms, &s.boundary_max_age_ms);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_uint(s.boundary_max_age_ms, o, n);
	 }},
	{"IO_Backend", &dcache_settings_text::io_backend, "io_uring, sync",
	 [](const char *t, dcache_settings &s) noexcept { return parse_word(t, k_backend_words, &s.io_backend); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_backend_words, s.io_backend, o, n);
	 }},
	{"IO_Queue_Depth", &dcache_settings_text::io_queue_depth,
	 "an integer from 1 to 4096 (requests in io_uring at once)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 1, k_max_queue_depth, &s.io_queue_depth);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept { return show_uint(s.io_queue_depth, o, n); }},
	{"Cached_Read_Fast_Path", &dcache_settings_text::cached_read_fast_path, k_bool_allowed,
	 [](const char *t, dcache_settings &s) noexcept { return parse_bool(t, &s.cached_read_fast_path); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_bool(s.cached_read_fast_path, o, n);
	 }},
	{"IO_Blocking_Max", &dcache_settings_text::io_blocking_max,
	 "an integer from 0 to 1024 (requests waiting in worker threads; 0: always io_uring)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 0, k_max_blocking, &s.io_blocking_max);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept { return show_uint(s.io_blocking_max, o, n); }},
	{"IO_Workers_Max", &dcache_settings_text::io_workers_max,
	 "an integer from 0 to 4096 (io-wq workers of the export's ring, shared by the exports on it; 0: the kernel's default, 4 per CPU)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 0, k_max_io_workers, &s.io_workers_max);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept { return show_uint(s.io_workers_max, o, n); }},
	{"Auto_Read_Stream", &dcache_settings_text::auto_read_stream, "dontcache, direct",
	 [](const char *t, dcache_settings &s) noexcept { return parse_word(t, k_stream_modes, &s.auto_read_stream); },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_stream_modes, s.auto_read_stream, o, n);
	 }},
	{"Auto_Write_Stream", &dcache_settings_text::auto_write_stream, "dontcache, direct, direct_when_quiet",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_word(t, k_write_stream_modes, &s.auto_write_stream);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_write_stream_modes, s.auto_write_stream, o, n);
	 }},
	{"Auto_Stream_Min_MiB", &dcache_settings_text::auto_stream_min_mib,
	 "an integer from 1 to 65536 (MiB a file's sequential run moves before auto treats it as a stream)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 1, k_max_auto_stream_min_mib, &s.auto_stream_min_mib);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_uint(s.auto_stream_min_mib, o, n);
	 }},
	{"Auto_Stream_Yield_Ms", &dcache_settings_text::auto_stream_yield_ms,
	 "an integer from 0 to 1000 (ms a stream's request may wait while the export serves requests auto keeps cached; 0: never)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_uint(t, 0, k_max_auto_stream_yield_ms, &s.auto_stream_yield_ms);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_uint(s.auto_stream_yield_ms, o, n);
	 }},
	{"Auto_Write_Spare_Memory", &dcache_settings_text::auto_write_spare_memory,
	 "unless_reported, cache, stream (what auto does with a WRITE stream while memory is spare)",
	 [](const char *t, dcache_settings &s) noexcept {
		 return parse_word(t, k_spare_words, &s.auto_write_spare_memory);
	 },
	 [](const dcache_settings &s, char *o, std::size_t n) noexcept {
		 return show_word(k_spare_words, s.auto_write_spare_memory, o, n);
	 }},
};

// The table is the list of core.h, in its order, field for field.
#define DCACHE_SETTING_NAME(name, field) std::string_view(name),
#define DCACHE_SETTING_TEXT(name, field) &dcache_settings_text::field,
constexpr std::string_view k_listed_names[] = {DCACHE_SETTINGS(DCACHE_SETTING_NAME)};
constexpr const char *dcache_settings_text::*k_listed_texts[] = {DCACHE_SETTINGS(DCACHE_SETTING_TEXT)};
#undef DCACHE_SETTING_NAME
#undef DCACHE_SETTING_TEXT

consteval bool table_is_the_list()
{
	if (std::size(k_settings) != std::size(k_listed_names))
		return false;
	for (std::size_t i = 0; i < std::size(k_settings); ++i)
		if (k_settings[i].name != k_listed_names[i] || k_settings[i].text != k_listed_texts[i])
			return false;
	return true;
}
static_assert(table_is_the_list(), "k_settings must list the settings of DCACHE_SETTINGS (core.h), in order");

} // namespace

namespace dcache::core {

bool same_settings(const dcache_settings &a, const dcache_settings &b) noexcept
{
#define DCACHE_SAME_FIELD(name, field) a.field == b.field &&
	return DCACHE_SETTINGS(DCACHE_SAME_FIELD) true;
#undef DCACHE_SAME_FIELD
}

} // namespace dcache::core

extern "C" {

struct dcache_settings dcache_settings_default(void) noexcept
{
	dcache_settings s{};
	s.io_cache_read = DCACHE_MODE_BUFFERED;
	s.io_cache_write = DCACHE_MODE_BUFFERED;
	s.direct_misaligned_num_pages = 2;
	s.direct_misaligned_dontcache = true;
	// Measured (docs/results/2026-11-30-baseline.md, "Choosing
	// Direct_Misaligned_Memory"): most WRITE payloads arrive misaligned in
	// memory; giving up on them left 15-20 MiB cached where the copy left
	// none, at ~20 % more server CPU.  Direct should be direct.
	s.direct_misaligned_memory = DCACHE_MEM_MISALIGNED_BOUNCE;
	s.boundary_tracking = true;
	s.boundary_max_pages = 4096; // 16 MiB of page cache per export
	s.boundary_max_age_ms = 5000;
	s.io_backend = DCACHE_IO_BACKEND_IO_URING;
	s.io_queue_depth = 32;
	s.cached_read_fast_path = true;
	s.io_blocking_max = 32;
	s.io_workers_max = 0;
	// docs/configuration.md, "auto": read streams are best direct and
	// write streams beside latency-sensitive readers best dontcache (the
	// pressure matrix); 4 MiB of sequential run is bcache's cutoff.
	s.auto_read_stream = DCACHE_MODE_DIRECT;
	s.auto_write_stream = DCACHE_MODE_DONTCACHE;
	s.auto_stream_min_mib = 4;
	// docs/results/2026-12-07-auto-yield-default.md: beside a stream on
	// one export, in a 1 GiB group, a working set read in bursts kept its
	// rate alone with 500 ms (0.97-1.15x VFS's in three runs of four;
	// without: 0.59-0.79x in all), the stream written at 0.87-1.15x the
	// best single mode's and read back at 0.69-1.09x; random readers that
	// never pause open the gate at their first wait.
	s.auto_stream_yield_ms = 500;
	// docs/results/2026-12-07-auto-free-reported.md: on a VM that reports
	// free memory to its host, a WRITE stream cached for spare memory cost
	// 6.8-7.1 s/GiB of server CPU (dontcache's: 0.6-0.7) and the readers
	// beside such writers 2.2-3.3x dontcache's p99.
	s.auto_write_spare_memory = DCACHE_SPARE_UNLESS_REPORTED;
	return s;
}

size_t dcache_settings_parse_all(const struct dcache_settings_text *text, struct dcache_settings *out,
				 dcache_settings_bad_fn bad, void *ctx) noexcept
{
	const auto report = [&](const char *why) noexcept {
		if (bad != nullptr)
			bad(ctx, why);
	};
	if (text == nullptr || out == nullptr) {
		report("dcache_settings_parse: no settings given");
		return 1;
	}
	// Build into a local so *out is untouched on error.
	dcache_settings s = dcache_settings_default();
	std::size_t invalid = 0;
	for (const setting &st : k_settings) {
		const char *value = text->*st.text;
		if (value == nullptr || st.parse(value, s))
			continue;
		++invalid;
		char shown[160], why[512];
		(void)dcache_settings_quote(value, shown, sizeof(shown));
		std::snprintf(why, sizeof(why), "%s = %s is not valid; allowed: %s", st.name, shown, st.allowed);
		report(why);
	}
	if (invalid == 0)
		*out = s;
	return invalid;
}

int dcache_settings_parse(const struct dcache_settings_text *text, struct dcache_settings *out, char *why,
			  size_t why_len) noexcept
{
	struct first_line {
		char *why;
		std::size_t len;
		bool taken;
	} first{why, why_len, false};
	if (why != nullptr && why_len > 0)
		why[0] = '\0';
	const std::size_t invalid = dcache_settings_parse_all(
		text, out,
		[](void *ctx, const char *line) noexcept {
			auto *f = static_cast<first_line *>(ctx);
			if (!f->taken && f->why != nullptr && f->len > 0)
				std::snprintf(f->why, f->len, "%s", line);
			f->taken = true;
		},
		&first);
	return invalid == 0 ? 0 : EINVAL;
}

const char *dcache_settings_allowed(const char *name) noexcept
{
	for (const setting &st : k_settings)
		if (name != nullptr && iequals(name, st.name))
			return st.allowed;
	return nullptr;
}

size_t dcache_settings_format(const struct dcache_settings *s, char *out, size_t out_len) noexcept
{
	if (out != nullptr && out_len > 0)
		out[0] = '\0';
	if (s == nullptr)
		return 0;
	std::size_t n = 0;
	for (const setting &st : k_settings) {
		char value[32];
		(void)st.show(*s, value, sizeof(value));
		const int k = std::snprintf(out != nullptr && n < out_len ? out + n : nullptr,
					    out != nullptr && n < out_len ? out_len - n : 0, "%s%s = %s",
					    n == 0 ? "" : ", ", st.name, value);
		if (k > 0)
			n += static_cast<std::size_t>(k);
	}
	return n;
}

size_t dcache_settings_quote(const char *value, char *out, size_t out_len) noexcept
{
	if (out == nullptr || out_len == 0)
		return 0;
	// "...", with \" \\ \n \t and \xNN for other control bytes, cut
	// (ending in ...") when it does not fit: one line, whatever was written.
	std::size_t n = 0;
	const auto put = [&](const char *piece) noexcept {
		const std::size_t k = std::strlen(piece);
		if (n + k + 5 >= out_len)
			return false;
		std::memcpy(out + n, piece, k);
		n += k;
		return true;
	};
	(void)put("\"");
	bool whole = true;
	for (const char *p = value ? value : ""; *p != '\0' && whole; ++p) {
		const auto c = static_cast<unsigned char>(*p);
		char piece[8];
		if (c == '"' || c == '\\')
			std::snprintf(piece, sizeof(piece), "\\%c", c);
		else if (c == '\n')
			std::snprintf(piece, sizeof(piece), "\\n");
		else if (c == '\t')
			std::snprintf(piece, sizeof(piece), "\\t");
		else if (c < 0x20 || c == 0x7f)
			std::snprintf(piece, sizeof(piece), "\\x%02x", c);
		else
			piece[0] = static_cast<char>(c), piece[1] = '\0';
		whole = put(piece);
	}
	if (!whole) {
		std::memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n++] = '"';
	out[n] = '\0';
	return n;
}

const char *dcache_mode_name(enum dcache_mode mode) noexcept
{
	switch (mode) {
	case DCACHE_MODE_BUFFERED: return "buffered";
	case DCACHE_MODE_DONTCACHE: return "dontcache";
	case DCACHE_MODE_DIRECT: return "direct";
	case DCACHE_MODE_DIRECT_DATA_SYNC: return "direct_data_sync";
	case DCACHE_MODE_DIRECT_FILE_SYNC: return "direct_file_sync";
	case DCACHE_MODE_FADVISE: return "fadvise";
	case DCACHE_MODE_AUTO: return "auto";
	case DCACHE_MODE_DIRECT_WHEN_QUIET: return "direct_when_quiet";
	}
	return "unknown";
}

} // extern "C"
