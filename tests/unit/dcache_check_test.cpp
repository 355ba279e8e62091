// dcache-check, run as a program on generated configurations: it agrees
// with the plugin's settings parser (the core's dcache_settings_parse, which
// the module runs on every DCACHE block) over every setting of
// DCACHE_SETTINGS and every value derived from the table, says the
// plugin's messages for the structural mistakes, and keeps its exit
// statuses, %include and standard-input rules.  The e2e settings test
// compares it with what a running ganesha.nfsd logs (tests/e2e/test_settings.py).
#include "dcache/core.h"
#include "dcache_check_run.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using ::testing::HasSubstr;

namespace {

using namespace dcache_check_test;

// ---- the settings table -------------------------------------------------

struct setting {
	const char *name;
	const char *dcache_settings_text::*field;
};

const std::vector<setting> &all_settings()
{
	static const std::vector<setting> v = {
#define DCACHE_LIST_SETTING(name, member) {name, &dcache_settings_text::member},
		DCACHE_SETTINGS(DCACHE_LIST_SETTING)
#undef DCACHE_LIST_SETTING
	};
	return v;
}

std::string trim(const std::string &s)
{
	const auto b = s.find_first_not_of(' ');
	const auto e = s.find_last_not_of(' ');
	return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string &s, char sep)
{
	std::vector<std::string> v;
	std::istringstream in(s);
	for (std::string w; std::getline(in, w, sep);)
		v.push_back(trim(w));
	return v;
}

// The values the table says a setting allows, read off its allowed text
// (the one the plugin's messages quote): "an integer from LO to HI (...)",
// or words, with the kernel's numbers in "(or the kernel's numbers 0, 1)".
std::vector<std::string> allowed_values(const char *name)
{
	const std::string allowed = dcache_settings_allowed(name);
	unsigned long lo = 0, hi = 0;
	if (std::sscanf(allowed.c_str(), "an integer from %lu to %lu", &lo, &hi) == 2)
		return {std::to_string(lo), std::to_string(hi), std::to_string(lo + (hi - lo) / 2)};
	std::vector<std::string> v = split(allowed.substr(0, allowed.find(" (")), ',');
	const std::string numbers = "(or the kernel's numbers ";
	const auto at = allowed.find(numbers);
	if (at != std::string::npos)
		for (const std::string &n : split(allowed.substr(at + numbers.size(), allowed.find(')', at)), ','))
			v.push_back(n.substr(0, n.find(')')));
	return v;
}

// Candidates for a setting: what it allows in other spellings, its
// neighbours, every other setting's values, and what no setting allows.
// Whether each is served is the core's answer, not this list's.
std::vector<std::string> candidates()
{
	std::set<std::string> pool = {"",	 "fast",	"-1",  "~1",  "+1",	    "0x10",  "01",
				      "000002",	 "0000000001",	"1e3", "64k", "2k",	    "10M",   "5s",
				      "1.0",	 "12345678901", " 8",  "8 ",  " direct ",   "maybe", "truee",
				      "enabled", "y",		"n",   "two", "dont cache", "a\tb",  "-0"};
	for (const setting &s : all_settings()) {
		const std::string allowed = dcache_settings_allowed(s.name);
		unsigned long lo = 0, hi = 0;
		if (std::sscanf(allowed.c_str(), "an integer from %lu to %lu", &lo, &hi) == 2) {
			if (lo > 0)
				pool.insert(std::to_string(lo - 1));
			pool.insert(std::to_string(hi + 1));
			pool.insert("-" + std::to_string(hi));
			pool.insert("0" + std::to_string(lo + 1));
		}
		for (const std::string &v : allowed_values(s.name)) {
			pool.insert(v);
			std::string upper = v;
			for (char &c : upper)
				c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
			pool.insert(upper);
			pool.insert(v + "x");
			pool.insert(v + ",");
		}
	}
	return {pool.begin(), pool.end()};
}

struct verdict {
	bool served;
	std::string text; // why (refused) or the settings (served)
};

// The core's answer: what the plugin logs for the value.
verdict core_verdict(const setting &s, const std::string &value)
{
	dcache_settings_text text{};
	text.*s.field = value.c_str();
	dcache_settings out = dcache_settings_default();
	char why[512];
	if (dcache_settings_parse(&text, &out, why, sizeof(why)) != 0)
		return {false, why};
	char shown[1024];
	(void)dcache_settings_format(&out, shown, sizeof(shown));
	return {true, shown};
}

bool plain_token(const std::string &v)
{
	if (v.empty())
		return false;
	const bool number = v.find_first_not_of("0123456789", v[0] == '-' ? 1 : 0) == std::string::npos &&
			    v.size() > (v[0] == '-' ? 1u : 0u);
	const bool word = (std::isalpha(static_cast<unsigned char>(v[0])) || v[0] == '_') &&
			  v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
				  std::string::npos;
	return number || word;
}

// One run of dcache-check per setting: Ganesha's parser keeps its tokens
// in a list it searches for each new one, so thousands of exports in one
// file (each with its own Export_Id and Path) would cost seconds.
TEST(dcache_check, agrees_with_the_plugins_parser_over_every_setting_and_value)
{
	scratch d;
	const std::string file = d.dir + "/ganesha.conf";
	const std::vector<std::string> pool = candidates();
	std::size_t checked = 0;
	for (const setting &s : all_settings()) {
		SCOPED_TRACE(s.name);
		// every value the table allows is served
		for (const std::string &v : allowed_values(s.name))
			EXPECT_TRUE(core_verdict(s, v).served) << s.name << " = " << v;
		struct expected {
			std::string written;
			bool served;
			std::string line;
		};
		std::map<int, expected> cases;
		config_builder conf;
		int id = 1, refused = 0, served = 0;
		for (const std::string &v : pool) {
			const verdict want = core_verdict(s, v);
			++(want.served ? served : refused);
			std::vector<std::string> forms;
			if (v.find_first_of("\"\\") == std::string::npos)
				forms.push_back("\"" + v + "\"");
			if (v.find_first_of("'\\") == std::string::npos)
				forms.push_back("'" + v + "'");
			if (plain_token(v))
				forms.push_back(v);
			for (const std::string &form : forms) {
				// setting names are case-insensitive: every other case in lower case
				std::string name = s.name;
				if (id % 2 == 0)
					for (char &c : name)
						c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
				const int at = conf.add_export(id, "    " + name + " = " + form +
									   ";\n    FSAL { Name = VFS; }\n");
				const std::string where = file + ":" + std::to_string(at) + ": DCACHE: export " +
							  std::to_string(id) + " (/c/" + std::to_string(id) + "): ";
				cases[id] = {form, want.served,
					     want.served ? where + "would be served: " + want.text
							 : where + want.text + "; export refused"};
				++id;
			}
		}
		EXPECT_GT(refused, 5) << "too few refused values to check";
		EXPECT_GT(served, 1) << "too few served values to check";
		write_file(file, conf.text);

		const result r = run({"-v", file});
		EXPECT_EQ(r.status, 1) << r.err;
		std::map<int, std::string> got;
		for (const auto &text : {r.out, r.err})
			for (const std::string &l : lines(text)) {
				const auto at = l.find(": DCACHE: export ");
				if (at != std::string::npos)
					got[std::atoi(l.c_str() + at + std::strlen(": DCACHE: export "))] = l;
			}
		std::size_t mismatches = 0, refusals = 0;
		for (const auto &[n, want] : cases) {
			const auto it = got.find(n);
			const std::string have = it == got.end() ? "(no line)" : it->second;
			refusals += !want.served;
			if (have != want.line && ++mismatches <= 10)
				ADD_FAILURE()
					<< s.name << " = " << want.written << (want.served ? " (served)" : " (refused)")
					<< "\n  want: " << want.line << "\n  got:  " << have;
		}
		EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " cases";
		EXPECT_EQ(got.size(), cases.size());
		// each refusal on stderr, each served export on stdout
		std::size_t err_lines = 0;
		for (const std::string &l : lines(r.err))
			err_lines += l.find(": DCACHE: export ") != std::string::npos;
		EXPECT_EQ(err_lines, refusals);
		EXPECT_THAT(r.out, HasSubstr("dcache-check: " + std::to_string(cases.size()) + " DCACHE exports, " +
					     std::to_string(refusals) + " refused"));
		checked += cases.size();
	}
	EXPECT_GT(checked, 1000u);
	std::cout << "checked " << checked << " settings as written, over " << all_settings().size() << " settings\n";
}

// The structural mistakes: each refusal exactly as the plugin words it
// (docs/configuration.md, "Errors"), Ganesha's own line before it where
// the plugin points to one.
TEST(dcache_check, says_the_plugins_line_for_every_structural_mistake)
{
	scratch d;
	const std::string f = d.dir + "/ganesha.conf";
	const auto allowed = [](const char *name) { return std::string(dcache_settings_allowed(name)); };
	const auto at = [&](int line) { return f + ":" + std::to_string(line); };
	std::string names = "Name, ";
#define DCACHE_NAME_LIST(name, member) names += std::string(name) + ", ";
	DCACHE_SETTINGS(DCACHE_NAME_LIST)
#undef DCACHE_NAME_LIST
	names += "FSAL { Name = VFS; }";

	config_builder c;
	std::vector<std::string> want;
	int l;
	l = c.add_export(1, "    IO_Cache_Read = fast;\n    IO_Cache_Read = direct;\n    FSAL { Name = VFS; }\n");
	want.push_back(refusal(f, l, 1,
			       "IO_Cache_Read is set more than once (\"fast\" at " + at(l + 2) +
				       ", then \"direct\" at " + at(l + 3) + "); set it once"));
	l = c.add_export(2, "    IO_Cache_Write { }\n    FSAL { Name = VFS; }\n");
	want.push_back(refusal(f, l, 2,
			       "IO_Cache_Write { ... } (" + at(l + 2) +
				       ") is a block; a setting takes one value: IO_Cache_Write = VALUE; (allowed: " +
				       allowed("IO_Cache_Write") + ")"));
	l = c.add_export(3, "    IO_Cache_Read = direct, buffered;\n    FSAL { Name = VFS; }\n");
	want.push_back(refusal(f, l, 3,
			       "IO_Cache_Read (" + at(l + 2) + ") is given 2 values; it takes one (allowed: " +
				       allowed("IO_Cache_Read") + ")"));
	l = c.add_export(4, "    FSAL { Name = VFS; }\n", "IO_Cache_Read = direct;");
	want.push_back(refusal(f, l, 4,
			       "IO_Cache_Read (" + at(l - 1) +
				       ") is in the EXPORT block; DCACHE settings belong in the export's FSAL { Name "
				       "= DCACHE; ... } block"));
	l = c.add_export(5, "    FSAL { Name = VFS; IO_Cache_Write = direct; }\n");
	want.push_back(refusal(f, l, 5,
			       "IO_Cache_Write (" + at(l + 2) +
				       ") is in the nested FSAL block (the sub-FSAL's own); DCACHE settings belong in "
				       "the export's FSAL { Name = DCACHE; ... } block"));
	l = c.add_export(6, "    IO_Cache_Wrte = direct;\n    FSAL { Name = VFS; }\n");
	want.push_back("Config File (" + at(l + 2) + "): Unknown parameter (IO_Cache_Wrte)");
	want.push_back(refusal(f, l, 6,
			       "unknown setting in the FSAL block (see the configuration error above naming it); "
			       "allowed settings: " +
				       names));
	l = c.add_export(7, "    IO_Queue_Depth = 64k;\n    FSAL { Name = VFS; }\n");
	// Ganesha's parser reports the dropped value while it reads the file,
	// before any block is checked
	want.insert(want.begin(), "Config File (" + at(l + 2) + "): Syntax error in statement");
	want.push_back(refusal(f, l, 7,
			       "IO_Queue_Depth = \"64k\" (" + at(l + 2) +
				       ") has no value Ganesha's parser could read (see its syntax error above: a "
				       "unit such as 64k, an exponent such as 1e3, a missing ';' or nothing before ';' "
				       "is not a value); allowed: " +
				       allowed("IO_Queue_Depth")));
	l = c.add_export(8, "    IO_Cache_Read = direct;\n");
	want.push_back(refusal(f, l, 8, "missing the nested FSAL { Name = VFS; } block naming the FSAL to stack on"));
	l = c.add_export(9, "    FSAL { Name = MEM; }\n");
	want.push_back(refusal(f, l, 9, "DCACHE stacks only on FSAL VFS (got \"MEM\" at " + at(l + 2) + ")"));
	l = c.add_export(10, "    FSAL { }\n");
	want.push_back(refusal(f, l, 10,
			       "the nested FSAL block (" + at(l + 2) +
				       ") names no FSAL to stack on; DCACHE stacks on VFS: FSAL { Name = VFS; }"));
	// Export_Id and Path as Ganesha reads them: a hex id, the trailing '/'
	// chomped; the FSAL name in any case
	c.put("EXPORT {\n  Export_Id = 0x20; Path = \"/srv/x//\";\n");
	l = c.line;
	c.put("  FSAL { Name = dcache; IO_Cache_Read = 7; FSAL { Name = vfs; } }\n}\n");
	want.push_back(f + ":" + std::to_string(l) +
		       ": DCACHE: export 32 (/srv/x): IO_Cache_Read = \"7\" is not valid; allowed: " +
		       allowed("IO_Cache_Read") + "; export refused");
	// not DCACHE's: no line
	c.put("EXPORT {\n  Export_Id = 40; Path = /srv/v; IO_Cache_Read = fast;\n  FSAL { Name = VFS; }\n}\n");
	write_file(f, c.text);

	const result r = run({f});
	EXPECT_EQ(r.status, 1);
	EXPECT_EQ(lines(r.err), want) << r.err;
	EXPECT_EQ(r.out, "");

	// EXPORT_DEFAULTS applies to every export: it refuses the DCACHE ones
	config_builder e;
	e.put("EXPORT_DEFAULTS {\n  Access_Type = RW;\n  IO_Cache_Read = direct;\n}\n");
	l = e.add_export(1, "    FSAL { Name = VFS; }\n");
	write_file(f, e.text);
	const result rd = run({f});
	EXPECT_EQ(rd.status, 1);
	EXPECT_EQ(lines(rd.err), std::vector<std::string>{refusal(
					 f, l, 1,
					 "IO_Cache_Read (" + at(3) +
						 ") is in the EXPORT_DEFAULTS block; DCACHE settings belong in the "
						 "export's FSAL { Name = DCACHE; ... } block")});
}

const std::string good_export =
	"EXPORT { Export_Id = 1; Path = /srv/a; FSAL { Name = DCACHE; IO_Cache_Write = direct; FSAL { Name = VFS; } } }\n";

TEST(dcache_check, exit_status_0_when_every_dcache_export_would_be_served)
{
	scratch d;
	write_file(d.dir + "/ok.conf", "NFS_CORE_PARAM { Protocols = 3, 4; }\n" + good_export);
	const result r = run({d.dir + "/ok.conf"});
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(r.err, "");
	EXPECT_EQ(r.out, "");
	const result v = run({"--verbose", d.dir + "/ok.conf"});
	EXPECT_EQ(v.status, 0);
	EXPECT_THAT(v.out, HasSubstr(d.dir + "/ok.conf:2: DCACHE: export 1 (/srv/a): would be served: "
					     "IO_Cache_Read = buffered, IO_Cache_Write = direct, "));
	// no DCACHE export at all: 0, and it says so
	write_file(d.dir + "/vfs.conf", "EXPORT { Export_Id = 1; Path = /srv/a; FSAL { Name = VFS; } }\n");
	const result n = run({d.dir + "/vfs.conf"});
	EXPECT_EQ(n.status, 0);
	EXPECT_THAT(n.err, HasSubstr("no EXPORT has an FSAL { Name = DCACHE; } block"));
}

TEST(dcache_check, exit_status_2_for_usage_and_what_cannot_be_read_or_parsed)
{
	scratch d;
	write_file(d.dir + "/ok.conf", good_export);
	result r = run({d.dir + "/ok.conf", d.dir + "/ok.conf"});
	EXPECT_EQ(r.status, 2);
	EXPECT_THAT(r.err, HasSubstr("one configuration at a time"));
	r = run({"--no-such-option"});
	EXPECT_EQ(r.status, 2);
	EXPECT_THAT(r.err, HasSubstr("usage: dcache-check"));
	r = run({"--help"});
	EXPECT_EQ(r.status, 0);
	EXPECT_THAT(r.out, HasSubstr("usage: dcache-check"));

	r = run({d.dir + "/missing.conf"});
	EXPECT_EQ(r.status, 2);
	EXPECT_EQ(r.err, "dcache-check: cannot read " + d.dir + "/missing.conf: No such file or directory\n");
	r = run({d.dir});
	EXPECT_EQ(r.status, 2);
	EXPECT_THAT(r.err, HasSubstr("Is a directory"));

	// an %include that cannot be opened: ganesha.nfsd would not start
	write_file(d.dir + "/inc.conf", "%include \"absent.conf\"\n" + good_export);
	r = run({d.dir + "/inc.conf"});
	EXPECT_EQ(r.status, 2);
	EXPECT_THAT(r.err, HasSubstr("Config File (" + d.dir + "/inc.conf:1): new file (" + d.dir +
				     "/absent.conf) open error (No such file or directory), ignored"));
	EXPECT_THAT(r.err, HasSubstr("ganesha.nfsd would not start with it"));

	// the parser gives up (a block never closed): nothing would be read
	write_file(d.dir + "/open.conf", good_export + "EXPORT {\n  Export_Id = 2;\n");
	r = run({d.dir + "/open.conf"});
	EXPECT_EQ(r.status, 2);
	EXPECT_THAT(r.err, HasSubstr("Configuration syntax errors found"));
	EXPECT_THAT(r.err, HasSubstr("Ganesha's parser gave up on it"));
}

TEST(dcache_check, follows_include_relative_to_the_including_file)
{
	scratch d;
	ASSERT_EQ(mkdir((d.dir + "/conf").c_str(), 0700), 0);
	ASSERT_EQ(mkdir((d.dir + "/conf/exports").c_str(), 0700), 0);
	write_file(d.dir + "/conf/ganesha.conf", "NFS_CORE_PARAM { Protocols = 4; }\n%include \"exports/a.conf\"\n");
	write_file(d.dir + "/conf/exports/a.conf",
		   "# first\nEXPORT {\n  Export_Id = 5; Path = /srv/a;\n  FSAL { Name = DCACHE; IO_Backend = fast; "
		   "FSAL { Name = VFS; } }\n}\n%include \"" +
			   d.dir + "/conf/exports/b.conf\"\n");
	write_file(d.dir + "/conf/exports/b.conf", good_export);
	// given relatively, from elsewhere: the includes still resolve against
	// the file's directory, as for ganesha.nfsd -f /abs/ganesha.conf
	const result r = run({"conf/ganesha.conf"}, "", d.dir);
	EXPECT_EQ(r.status, 1) << r.err;
	EXPECT_EQ(r.err, d.dir + "/conf/exports/a.conf:4: DCACHE: export 5 (/srv/a): IO_Backend = \"fast\" is not "
				 "valid; allowed: io_uring, sync; export refused\n");
}

TEST(dcache_check, reads_standard_input)
{
	scratch d;
	ASSERT_EQ(mkdir((d.dir + "/here").c_str(), 0700), 0);
	write_file(d.dir + "/here/more.conf",
		   "EXPORT { Export_Id = 6; Path = /srv/b; FSAL { Name = DCACHE; IO_Cache_Read = 3; FSAL { Name = "
		   "VFS; } } }\n");
	const std::string text = good_export + "%include \"more.conf\"\n" +
				 "EXPORT {\n  Export_Id = 7; Path = /srv/c;\n  FSAL {\n    Name = DCACHE;\n"
				 "    IO_Queue_Depth = 64k;\n    FSAL { Name = VFS; }\n  }\n}\n";
	for (const char *arg : {"-", "--stdin"}) {
		SCOPED_TRACE(arg);
		// a relative %include of standard input: against the current directory
		const result r = run({arg}, text, d.dir + "/here");
		EXPECT_EQ(r.status, 1);
		EXPECT_EQ(
			lines(r.err),
			(std::vector<std::string>{
				"Config File ((stdin):7): Syntax error in statement",
				"./more.conf:1: DCACHE: export 6 (/srv/b): IO_Cache_Read = \"3\" is not valid; "
				"allowed: " +
					std::string(dcache_settings_allowed("IO_Cache_Read")) + "; export refused",
				// the value the parser dropped, read back from standard input's copy
				"(stdin):5: DCACHE: export 7 (/srv/c): IO_Queue_Depth = \"64k\" ((stdin):7) has no "
				"value Ganesha's parser could read (see its syntax error above: a unit such as 64k, an "
				"exponent such as 1e3, a missing ';' or nothing before ';' is not a value); allowed: " +
					std::string(dcache_settings_allowed("IO_Queue_Depth")) + "; export refused",
			}))
			<< r.err;
	}
	const result ok = run({"-"}, good_export);
	EXPECT_EQ(ok.status, 0) << ok.err;
	EXPECT_EQ(ok.err, "");
}

// A %url: without Ganesha's RADOS URL backend (nfs-ganesha-ceph) it cannot
// be followed and is reported as not checked, not as an error; with the
// backend, dcache-check fetches it as ganesha.nfsd would, and an object it
// cannot open (no Ceph cluster here) fails the parse as it stops
// ganesha.nfsd from starting.
TEST(dcache_check, a_rados_url_is_followed_where_the_backend_is_or_reported_not_checked)
{
	const result r = run({"-"}, "%url \"rados://nfs-ganesha/ns/conf-export-1\"\n" + good_export);
	if (r.err.find("not checked") != std::string::npos) {
		EXPECT_EQ(r.status, 0);
		EXPECT_EQ(
			r.err,
			"dcache-check: %url rados://nfs-ganesha/ns/conf-export-1: not checked (no RADOS URL backend "
			"here, libganesha_rados_urls.so of nfs-ganesha-ceph); check the object's text with: rados ... "
			"get OBJECT - | dcache-check -\n");
		return;
	}
	EXPECT_EQ(r.status, 2) << r.err;
	EXPECT_NE(r.err.find("rados://nfs-ganesha/ns/conf-export-1"), std::string::npos) << r.err;
	EXPECT_NE(r.err.find("ganesha.nfsd would not start with it"), std::string::npos) << r.err;
}

} // namespace
