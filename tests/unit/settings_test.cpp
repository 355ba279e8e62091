// dcache_settings_parse: every accepted spelling, every rejection, and the
// message naming the setting, the bad value and what is allowed.
#include "dcache/core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using ::testing::HasSubstr;

namespace {

struct parsed {
	int rc;
	dcache_settings s;
	std::string why;
};

parsed parse(const dcache_settings_text &t)
{
	parsed p{};
	char why[256];
	std::memset(why, 'x', sizeof(why));
	p.s = dcache_settings_default();
	p.rc = dcache_settings_parse(&t, &p.s, why, sizeof(why));
	p.why = why;
	return p;
}

TEST(settings, defaults)
{
	const dcache_settings d = dcache_settings_default();
	EXPECT_EQ(d.io_cache_read, DCACHE_MODE_BUFFERED);
	EXPECT_EQ(d.io_cache_write, DCACHE_MODE_BUFFERED);
	EXPECT_EQ(d.direct_misaligned_num_pages, 2u);
	EXPECT_TRUE(d.direct_misaligned_dontcache);
	EXPECT_EQ(d.direct_misaligned_memory, DCACHE_MEM_MISALIGNED_BOUNCE);
}

TEST(settings, all_null_gives_defaults_and_empty_why)
{
	dcache_settings_text t{};
	dcache_settings out{};
	out.io_cache_read = DCACHE_MODE_DIRECT;
	char why[64] = "junk";
	ASSERT_EQ(dcache_settings_parse(&t, &out, why, sizeof(why)), 0);
	EXPECT_EQ(out.io_cache_read, DCACHE_MODE_BUFFERED);
	EXPECT_EQ(out.direct_misaligned_num_pages, 2u);
	EXPECT_STREQ(why, "");
}

TEST(settings, null_arguments)
{
	dcache_settings out{};
	char why[128];
	EXPECT_EQ(dcache_settings_parse(nullptr, &out, why, sizeof(why)), EINVAL);
	EXPECT_NE(std::string(why), "");
	dcache_settings_text t{};
	EXPECT_EQ(dcache_settings_parse(&t, nullptr, why, sizeof(why)), EINVAL);
	// why may be NULL
	EXPECT_EQ(dcache_settings_parse(&t, &out, nullptr, 0), 0);
	t.io_cache_read = "bogus";
	EXPECT_EQ(dcache_settings_parse(&t, &out, nullptr, 0), EINVAL);
}

using mode_case = std::tuple<const char *, dcache_mode>;

class read_modes : public ::testing::TestWithParam<mode_case> {};
TEST_P(read_modes, accepted)
{
	dcache_settings_text t{};
	t.io_cache_read = std::get<0>(GetParam());
	const parsed p = parse(t);
	ASSERT_EQ(p.rc, 0) << p.why;
	EXPECT_EQ(p.s.io_cache_read, std::get<1>(GetParam()));
	EXPECT_EQ(p.s.io_cache_write, DCACHE_MODE_BUFFERED);
}
INSTANTIATE_TEST_SUITE_P(
	settings, read_modes,
	::testing::Values(mode_case{"buffered", DCACHE_MODE_BUFFERED}, mode_case{"BUFFERED", DCACHE_MODE_BUFFERED},
			  mode_case{"dontcache", DCACHE_MODE_DONTCACHE}, mode_case{"DontCache", DCACHE_MODE_DONTCACHE},
			  mode_case{"fadvise", DCACHE_MODE_FADVISE}, mode_case{"Fadvise", DCACHE_MODE_FADVISE},
			  mode_case{"direct", DCACHE_MODE_DIRECT}, mode_case{"DIRECT", DCACHE_MODE_DIRECT},
			  mode_case{"auto", DCACHE_MODE_AUTO}, mode_case{"Auto", DCACHE_MODE_AUTO},
			  mode_case{"0", DCACHE_MODE_BUFFERED}, mode_case{"1", DCACHE_MODE_DONTCACHE},
			  mode_case{"2", DCACHE_MODE_DIRECT}));

class write_modes : public ::testing::TestWithParam<mode_case> {};
TEST_P(write_modes, accepted)
{
	dcache_settings_text t{};
	t.io_cache_write = std::get<0>(GetParam());
	const parsed p = parse(t);
	ASSERT_EQ(p.rc, 0) << p.why;
	EXPECT_EQ(p.s.io_cache_write, std::get<1>(GetParam()));
	EXPECT_EQ(p.s.io_cache_read, DCACHE_MODE_BUFFERED);
}
INSTANTIATE_TEST_SUITE_P(
	settings, write_modes,
	::testing::Values(mode_case{"buffered", DCACHE_MODE_BUFFERED}, mode_case{"dontcache", DCACHE_MODE_DONTCACHE},
			  mode_case{"fadvise", DCACHE_MODE_FADVISE}, mode_case{"direct", DCACHE_MODE_DIRECT},
			  mode_case{"direct_data_sync", DCACHE_MODE_DIRECT_DATA_SYNC},
			  mode_case{"Direct_Data_Sync", DCACHE_MODE_DIRECT_DATA_SYNC},
			  mode_case{"direct_file_sync", DCACHE_MODE_DIRECT_FILE_SYNC},
			  mode_case{"DIRECT_FILE_SYNC", DCACHE_MODE_DIRECT_FILE_SYNC},
			  mode_case{"auto", DCACHE_MODE_AUTO}, mode_case{"AUTO", DCACHE_MODE_AUTO},
			  mode_case{"0", DCACHE_MODE_BUFFERED}, mode_case{"1", DCACHE_MODE_DONTCACHE},
			  mode_case{"2", DCACHE_MODE_DIRECT}, mode_case{"3", DCACHE_MODE_DIRECT_DATA_SYNC},
			  mode_case{"4", DCACHE_MODE_DIRECT_FILE_SYNC}));

class bad_read_modes : public ::testing::TestWithParam<const char *> {};
TEST_P(bad_read_modes, rejected_with_message)
{
	dcache_settings_text t{};
	t.io_cache_read = GetParam();
	dcache_settings before = dcache_settings_default();
	before.io_cache_write = DCACHE_MODE_DIRECT;
	dcache_settings out = before;
	char why[256];
	ASSERT_EQ(dcache_settings_parse(&t, &out, why, sizeof(why)), EINVAL);
	const std::string w = why;
	EXPECT_THAT(w, HasSubstr("IO_Cache_Read"));
	EXPECT_THAT(w, HasSubstr(std::string("\"") + GetParam() + "\""));
	EXPECT_THAT(w, HasSubstr("buffered, dontcache, fadvise, direct"));
	EXPECT_THAT(w, HasSubstr("0, 1, 2"));
	EXPECT_EQ(w.find('\n'), std::string::npos);
	EXPECT_EQ(out.io_cache_write, DCACHE_MODE_DIRECT) << "*out must be untouched on error";
}
INSTANTIATE_TEST_SUITE_P(settings, bad_read_modes,
			 ::testing::Values("fast", "", "3", "4", "direct_data_sync", "direct_file_sync", "-1", "~1",
					   "+1", "100", "101", "buffered,", "dont cache", "02", "directx", " direct ",
					   "direct ", "1e3", "autox", "auto,"));

class bad_write_modes : public ::testing::TestWithParam<const char *> {};
TEST_P(bad_write_modes, rejected_with_message)
{
	dcache_settings_text t{};
	t.io_cache_write = GetParam();
	const parsed p = parse(t);
	ASSERT_EQ(p.rc, EINVAL);
	EXPECT_THAT(p.why, HasSubstr("IO_Cache_Write"));
	EXPECT_THAT(p.why, HasSubstr(std::string("\"") + GetParam() + "\""));
	EXPECT_THAT(p.why, HasSubstr("direct_data_sync, direct_file_sync"));
	EXPECT_THAT(p.why, HasSubstr("0, 1, 2, 3, 4"));
}
INSTANTIATE_TEST_SUITE_P(settings, bad_write_modes,
			 ::testing::Values("fast", "", "5", "100", "101", "direct_sync", "file_sync", "-0", "1.0",
					   "automatic"));

// An integer setting: every good text parses to its number, every bad one
// is refused with a message naming the setting, the text and the range.
void expect_integer_setting(const char *name, const char *dcache_settings_text::*text,
			    std::uint32_t dcache_settings::*value, std::initializer_list<const char *> good,
			    std::initializer_list<const char *> bad, const std::string &allowed)
{
	for (const char *g : good) {
		dcache_settings_text t{};
		t.*text = g;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, 0) << p.why;
		EXPECT_EQ(p.s.*value, std::stoul(g));
	}
	for (const char *b : bad) {
		dcache_settings_text t{};
		t.*text = b;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, EINVAL) << b;
		EXPECT_THAT(p.why, HasSubstr(std::string(name) + " = \"" + b + "\" is not valid; allowed: " + allowed));
	}
}

// What auto makes of a stream: dontcache or direct, by name only; the
// stream threshold in MiB.
TEST(settings, auto_stream_modes_and_threshold)
{
	const dcache_settings d = dcache_settings_default();
	EXPECT_EQ(d.auto_read_stream, DCACHE_MODE_DIRECT);
	EXPECT_EQ(d.auto_write_stream, DCACHE_MODE_DONTCACHE);
	EXPECT_EQ(d.auto_stream_min_mib, 4u);
	for (const char *dcache_settings_text::*field :
	     {&dcache_settings_text::auto_read_stream, &dcache_settings_text::auto_write_stream}) {
		for (const auto &[text, mode] :
		     {std::pair{"dontcache", DCACHE_MODE_DONTCACHE}, std::pair{"DIRECT", DCACHE_MODE_DIRECT}}) {
			dcache_settings_text t{};
			t.*field = text;
			const parsed p = parse(t);
			ASSERT_EQ(p.rc, 0) << p.why;
			EXPECT_EQ(field == &dcache_settings_text::auto_read_stream ? p.s.auto_read_stream
										   : p.s.auto_write_stream,
				  mode);
		}
		for (const char *bad : {"buffered", "fadvise", "auto", "direct_file_sync", "1", "2", ""}) {
			dcache_settings_text t{};
			t.*field = bad;
			const parsed p = parse(t);
			ASSERT_EQ(p.rc, EINVAL) << bad;
			EXPECT_THAT(p.why,
				    HasSubstr(std::string("\"") + bad + "\" is not valid; allowed: dontcache, direct"));
		}
	}
	// a WRITE stream's third way; no READ stream's
	dcache_settings_text t{};
	t.auto_write_stream = "Direct_When_Quiet";
	parsed p = parse(t);
	ASSERT_EQ(p.rc, 0) << p.why;
	EXPECT_EQ(p.s.auto_write_stream, DCACHE_MODE_DIRECT_WHEN_QUIET);
	t = {};
	t.auto_read_stream = "direct_when_quiet";
	p = parse(t);
	ASSERT_EQ(p.rc, EINVAL);
	EXPECT_THAT(p.why, HasSubstr("\"direct_when_quiet\" is not valid; allowed: dontcache, direct"));
	expect_integer_setting("Auto_Stream_Min_MiB", &dcache_settings_text::auto_stream_min_mib,
			       &dcache_settings::auto_stream_min_mib, {"1", "64", "65536"},
			       {"0", "65537", "4M", "-4", "04", ""}, "an integer from 1 to 65536");
}

// How long a stream may give way to the export's cached requests: off by
// default, at most a second.
TEST(settings, auto_stream_yield)
{
	EXPECT_EQ(dcache_settings_default().auto_stream_yield_ms, 500u);
	expect_integer_setting("Auto_Stream_Yield_Ms", &dcache_settings_text::auto_stream_yield_ms,
			       &dcache_settings::auto_stream_yield_ms, {"0", "20", "1000"},
			       {"1001", "20ms", "-1", "020", ""}, "an integer from 0 to 1000");
}

// What auto does with a WRITE stream while memory is spare: cached unless
// the machine reports free memory to a host, by default.
TEST(settings, auto_write_spare_memory)
{
	EXPECT_EQ(dcache_settings_default().auto_write_spare_memory, DCACHE_SPARE_UNLESS_REPORTED);
	for (const auto &[text, how] :
	     {std::pair{"unless_reported", DCACHE_SPARE_UNLESS_REPORTED}, std::pair{"Cache", DCACHE_SPARE_CACHE},
	      std::pair{"STREAM", DCACHE_SPARE_STREAM}}) {
		dcache_settings_text t{};
		t.auto_write_spare_memory = text;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, 0) << p.why;
		EXPECT_EQ(p.s.auto_write_spare_memory, how) << text;
	}
	for (const char *bad : {"yes", "true", "0", "dontcache", "unless reported", ""}) {
		dcache_settings_text t{};
		t.auto_write_spare_memory = bad;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, EINVAL) << bad;
		EXPECT_THAT(p.why, HasSubstr(std::string("Auto_Write_Spare_Memory")));
		EXPECT_THAT(p.why, HasSubstr(std::string("\"") + bad +
					     "\" is not valid; allowed: unless_reported, cache, stream"));
	}
}

TEST(settings, num_pages_range)
{
	for (unsigned n : {0u, 1u, 2u, 16u, 1023u, 1024u}) {
		dcache_settings_text t{};
		const std::string v = std::to_string(n);
		t.direct_misaligned_num_pages = v.c_str();
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, 0) << v << ": " << p.why;
		EXPECT_EQ(p.s.direct_misaligned_num_pages, n);
	}
	for (const char *bad : {"1025", "-1", "~1", "", "two", "2x", "0x10", "99999999999", "1e3", "+2", "000002",
				"0000000001", "02", " 2", "2 ", "2k"}) {
		dcache_settings_text t{};
		t.direct_misaligned_num_pages = bad;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, EINVAL) << bad;
		EXPECT_THAT(p.why, HasSubstr("Direct_Misaligned_Num_Pages"));
		EXPECT_THAT(p.why, HasSubstr(std::string("\"") + bad + "\""));
		EXPECT_THAT(p.why, HasSubstr("0 to 1024"));
	}
}

TEST(settings, dontcache_bool)
{
	for (const char *yes : {"true", "TRUE", "yes", "Yes", "on", "ON", "1"}) {
		dcache_settings_text t{};
		t.direct_misaligned_dontcache = yes;
		dcache_settings out = dcache_settings_default();
		out.direct_misaligned_dontcache = false;
		ASSERT_EQ(dcache_settings_parse(&t, &out, nullptr, 0), 0) << yes;
		EXPECT_TRUE(out.direct_misaligned_dontcache) << yes;
	}
	for (const char *no : {"false", "False", "no", "NO", "off", "Off", "0"}) {
		dcache_settings_text t{};
		t.direct_misaligned_dontcache = no;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, 0) << no;
		EXPECT_FALSE(p.s.direct_misaligned_dontcache) << no;
	}
	for (const char *bad : {"2", "y", "n", "", "truee", "enabled"}) {
		dcache_settings_text t{};
		t.direct_misaligned_dontcache = bad;
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, EINVAL) << bad;
		EXPECT_THAT(p.why, HasSubstr("Direct_Misaligned_Dontcache"));
		EXPECT_THAT(p.why, HasSubstr("true, false, yes, no, on, off, 1, 0"));
	}
}

TEST(settings, misaligned_memory)
{
	dcache_settings_text t{};
	t.direct_misaligned_memory = "Buffered";
	parsed p = parse(t);
	ASSERT_EQ(p.rc, 0);
	EXPECT_EQ(p.s.direct_misaligned_memory, DCACHE_MEM_MISALIGNED_BUFFERED);
	t.direct_misaligned_memory = "BOUNCE";
	p = parse(t);
	ASSERT_EQ(p.rc, 0);
	EXPECT_EQ(p.s.direct_misaligned_memory, DCACHE_MEM_MISALIGNED_BOUNCE);
	for (const char *bad : {"copy", "", "0", "direct"}) {
		t.direct_misaligned_memory = bad;
		p = parse(t);
		ASSERT_EQ(p.rc, EINVAL) << bad;
		EXPECT_THAT(p.why, HasSubstr("Direct_Misaligned_Memory"));
		EXPECT_THAT(p.why, HasSubstr("bounce, buffered"));
	}
}

TEST(settings, all_together)
{
	dcache_settings_text t{"direct", "direct_file_sync", "8", "off", "buffered"};
	const parsed p = parse(t);
	ASSERT_EQ(p.rc, 0) << p.why;
	EXPECT_EQ(p.s.io_cache_read, DCACHE_MODE_DIRECT);
	EXPECT_EQ(p.s.io_cache_write, DCACHE_MODE_DIRECT_FILE_SYNC);
	EXPECT_EQ(p.s.direct_misaligned_num_pages, 8u);
	EXPECT_FALSE(p.s.direct_misaligned_dontcache);
	EXPECT_EQ(p.s.direct_misaligned_memory, DCACHE_MEM_MISALIGNED_BUFFERED);
}

TEST(settings, message_truncates_safely)
{
	dcache_settings_text t{};
	t.io_cache_read = "fast";
	dcache_settings out{};
	char why[16];
	std::memset(why, 'x', sizeof(why));
	ASSERT_EQ(dcache_settings_parse(&t, &out, why, sizeof(why)), EINVAL);
	EXPECT_EQ(std::string(why), "IO_Cache_Read =");
}

// One rule for every number: decimal, no sign, no unit, no leading zero,
// at most ten digits, then the range; the message shows the value as
// written, escaped on one line.
TEST(settings, one_rule_for_numbers_and_values_shown_escaped)
{
	struct num {
		const char *dcache_settings_text::*field;
		const char *name;
	};
	for (const num &n : {num{&dcache_settings_text::direct_misaligned_num_pages, "Direct_Misaligned_Num_Pages"},
			     num{&dcache_settings_text::boundary_max_pages, "Boundary_Max_Pages"},
			     num{&dcache_settings_text::boundary_max_age_ms, "Boundary_Max_Age_Ms"},
			     num{&dcache_settings_text::io_queue_depth, "IO_Queue_Depth"}}) {
		for (const char *bad : {"-1", "-4096", "~1", "01", "000002", "0000000001", "0x10", "1e3", "2k", "10M",
					"5s", "64k", "", " 8", "8 ", "1.0", "12345678901"}) {
			dcache_settings_text t{};
			t.*n.field = bad;
			const parsed p = parse(t);
			EXPECT_EQ(p.rc, EINVAL) << n.name << " = " << bad;
			EXPECT_THAT(p.why, HasSubstr(n.name));
		}
		dcache_settings_text t{};
		t.*n.field = "8";
		EXPECT_EQ(parse(t).rc, 0) << n.name;
	}
	dcache_settings_text t{};
	t.io_cache_read = "fast\n\"x\"\\\x01";
	const parsed p = parse(t);
	ASSERT_EQ(p.rc, EINVAL);
	EXPECT_THAT(p.why, HasSubstr("IO_Cache_Read = \"fast\\n\\\"x\\\"\\\\\\x01\" is not valid"));
	EXPECT_EQ(p.why.find('\n'), std::string::npos) << "one line";
}

TEST(settings, quote_escapes_and_cuts)
{
	char out[64];
	EXPECT_EQ(dcache_settings_quote("direct", out, sizeof(out)), 8u);
	EXPECT_STREQ(out, "\"direct\"");
	(void)dcache_settings_quote("a\tb\nc", out, sizeof(out));
	EXPECT_STREQ(out, "\"a\\tb\\nc\"");
	(void)dcache_settings_quote(nullptr, out, sizeof(out));
	EXPECT_STREQ(out, "\"\"");
	const std::string longer(200, 'x');
	char small[16];
	(void)dcache_settings_quote(longer.c_str(), small, sizeof(small));
	EXPECT_EQ(std::string(small), "\"xxxxxxxxx...\"") << "cut to fit, still one quoted token";
	EXPECT_EQ(dcache_settings_quote("x", nullptr, 0), 0u);
}

TEST(settings, allowed_text_by_name)
{
	EXPECT_THAT(dcache_settings_allowed("IO_Cache_Read"), HasSubstr("buffered, dontcache, fadvise, direct"));
	EXPECT_THAT(dcache_settings_allowed("io_queue_depth"), HasSubstr("1 to 4096"));
	EXPECT_EQ(dcache_settings_allowed("IO_Cache_Wrte"), nullptr);
	EXPECT_EQ(dcache_settings_allowed(nullptr), nullptr);
}

TEST(settings, mode_names)
{
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_BUFFERED), "buffered");
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_DONTCACHE), "dontcache");
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_DIRECT), "direct");
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_DIRECT_DATA_SYNC), "direct_data_sync");
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_DIRECT_FILE_SYNC), "direct_file_sync");
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_FADVISE), "fadvise");
	EXPECT_STREQ(dcache_mode_name(DCACHE_MODE_AUTO), "auto");
	// Every name parses back to its mode (round trip for IO_Cache_Write).
	for (dcache_mode m :
	     {DCACHE_MODE_BUFFERED, DCACHE_MODE_DONTCACHE, DCACHE_MODE_DIRECT, DCACHE_MODE_DIRECT_DATA_SYNC,
	      DCACHE_MODE_DIRECT_FILE_SYNC, DCACHE_MODE_FADVISE, DCACHE_MODE_AUTO}) {
		dcache_settings_text t{};
		t.io_cache_write = dcache_mode_name(m);
		const parsed p = parse(t);
		ASSERT_EQ(p.rc, 0);
		EXPECT_EQ(p.s.io_cache_write, m);
	}
}

// Every setting of DCACHE_SETTINGS (the list the adapter's table and the
// parser's are built from), each set alone to a value other than its
// default: parsed, given to a live export, read back with every field as
// given, and shown by dcache_settings_format as it was written.  A setting
// added to the list without a value here fails.
const std::map<std::string, const char *> k_non_default = {
	{"IO_Cache_Read", "direct"},
	{"IO_Cache_Write", "direct_file_sync"},
	{"Direct_Misaligned_Num_Pages", "7"},
	{"Direct_Misaligned_Dontcache", "false"},
	{"Direct_Misaligned_Memory", "buffered"},
	{"Boundary_Tracking", "false"},
	{"Boundary_Max_Pages", "17"},
	{"Boundary_Max_Age_Ms", "1234"},
	{"IO_Backend", "sync"},
	{"IO_Queue_Depth", "128"},
	{"Cached_Read_Fast_Path", "false"},
	{"IO_Blocking_Max", "7"},
	{"IO_Workers_Max", "5"},
	{"Auto_Read_Stream", "dontcache"},
	{"Auto_Write_Stream", "direct"},
	{"Auto_Stream_Min_MiB", "64"},
	{"Auto_Stream_Yield_Ms", "50"},
	{"Auto_Write_Spare_Memory", "stream"},
};

std::string formatted(const dcache_settings &s)
{
	char line[1024];
	const std::size_t n = dcache_settings_format(&s, line, sizeof(line));
	EXPECT_LT(n, sizeof(line));
	return line;
}

void expect_every_field_equal(const dcache_settings &got, const dcache_settings &want)
{
#define DCACHE_EXPECT_FIELD(name, field) EXPECT_EQ(got.field, want.field) << name;
	DCACHE_SETTINGS(DCACHE_EXPECT_FIELD)
#undef DCACHE_EXPECT_FIELD
}

void round_trip(const char *name, const char *dcache_settings_text::*text)
{
	SCOPED_TRACE(name);
	const auto it = k_non_default.find(name);
	ASSERT_NE(it, k_non_default.end()) << "no non-default value for " << name << " in this test";
	dcache_settings_text t{};
	t.*text = it->second;
	const parsed p = parse(t);
	ASSERT_EQ(p.rc, 0) << p.why;
	const dcache_settings def = dcache_settings_default();
	EXPECT_NE(formatted(p.s), formatted(def)) << it->second << " is the default";
	EXPECT_THAT(formatted(p.s), HasSubstr(std::string(name) + " = " + it->second));

	dcache_export *e = dcache_export_new(&def, "round trip");
	ASSERT_NE(e, nullptr);
	dcache_export_update(e, &p.s);
	expect_every_field_equal(dcache_export_settings(e), p.s);
	dcache_export_update(e, &def); // and back
	expect_every_field_equal(dcache_export_settings(e), def);
	dcache_export_put(e);
}

TEST(settings, every_setting_round_trips_through_a_live_export)
{
	std::size_t listed = 0;
#define DCACHE_ROUND_TRIP(name, field) round_trip(name, &dcache_settings_text::field), ++listed;
	DCACHE_SETTINGS(DCACHE_ROUND_TRIP)
#undef DCACHE_ROUND_TRIP
	EXPECT_EQ(listed, k_non_default.size()) << "a value here for a setting that is not in DCACHE_SETTINGS";
	EXPECT_EQ(listed, 18u);
}

TEST(settings, format_lists_every_setting_in_order)
{
	const std::string line = formatted(dcache_settings_default());
	std::size_t at = 0;
#define DCACHE_IN_ORDER(name, field)                                          \
	{                                                                     \
		const std::size_t pos = line.find(std::string(name) + " = "); \
		EXPECT_NE(pos, std::string::npos) << name;                    \
		EXPECT_GE(pos, at) << name;                                   \
		at = pos;                                                     \
	}
	DCACHE_SETTINGS(DCACHE_IN_ORDER)
#undef DCACHE_IN_ORDER
	EXPECT_EQ(line.rfind("IO_Cache_Read = buffered, IO_Cache_Write = buffered, ", 0), 0u) << line;
	// Cut like snprintf: the length it needed, a terminated prefix.
	char small[16];
	EXPECT_EQ(dcache_settings_format(nullptr, small, sizeof(small)), 0u);
	const dcache_settings def = dcache_settings_default();
	EXPECT_EQ(dcache_settings_format(&def, small, sizeof(small)), line.size());
	EXPECT_EQ(std::string(small), line.substr(0, sizeof(small) - 1));
}

// Every bad setting has its own line, in the order of DCACHE_SETTINGS, each
// the line dcache_settings_parse gives for that setting alone; the good
// ones are not mentioned, and *out is untouched.
TEST(settings, parse_all_reports_every_bad_setting)
{
	std::vector<std::string> lines;
	const auto keep = [](void *ctx, const char *why) {
		static_cast<std::vector<std::string> *>(ctx)->push_back(why);
	};
	dcache_settings_text t{};
	t.io_queue_depth = "+64";
	t.io_cache_read = "fast";
	t.direct_misaligned_num_pages = "-1";
	t.io_cache_write = "direct"; // good
	dcache_settings out = dcache_settings_default();
	out.io_cache_write = DCACHE_MODE_DONTCACHE;
	ASSERT_EQ(dcache_settings_parse_all(&t, &out, keep, &lines), 3u);
	EXPECT_EQ(out.io_cache_write, DCACHE_MODE_DONTCACHE) << "untouched on error";
	const auto alone = [](const char *dcache_settings_text::*field, const char *value) {
		dcache_settings_text one{};
		one.*field = value;
		return parse(one).why;
	};
	EXPECT_EQ(lines, (std::vector<std::string>{
				 alone(&dcache_settings_text::io_cache_read, "fast"),
				 alone(&dcache_settings_text::direct_misaligned_num_pages, "-1"),
				 alone(&dcache_settings_text::io_queue_depth, "+64"),
			 }));
	EXPECT_EQ(lines[1], "Direct_Misaligned_Num_Pages = \"-1\" is not valid; allowed: an integer from 0 to 1024 "
			    "(pages of 4096 bytes)");
	// dcache_settings_parse still gives the first
	EXPECT_EQ(parse(t).why, lines[0]);
	EXPECT_EQ(parse(t).rc, EINVAL);

	// all good: no line, *out set
	lines.clear();
	t = dcache_settings_text{};
	t.io_cache_write = "direct";
	ASSERT_EQ(dcache_settings_parse_all(&t, &out, keep, &lines), 0u);
	EXPECT_TRUE(lines.empty());
	EXPECT_EQ(out.io_cache_write, DCACHE_MODE_DIRECT);
	// no callback: counted all the same; no text or no out: one line
	t.io_backend = "fast";
	t.io_workers_max = "4097";
	EXPECT_EQ(dcache_settings_parse_all(&t, &out, nullptr, nullptr), 2u);
	EXPECT_EQ(dcache_settings_parse_all(nullptr, &out, keep, &lines), 1u);
	EXPECT_EQ(dcache_settings_parse_all(&t, nullptr, keep, &lines), 1u);
	EXPECT_EQ(lines.size(), 2u);
}

} // namespace
