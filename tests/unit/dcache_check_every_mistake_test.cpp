// dcache-check (and so the plugin, whose checks it runs) reports every
// mistake of an export, one line each in the plugin's words, not only the
// first: bad values, structural mistakes and misplaced settings together.
// The export is still refused as a whole, and counted once.
#include "dcache/core.h"
#include "dcache_check_run.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

using ::testing::HasSubstr;

namespace {

using namespace dcache_check_test;

std::string allowed(const char *name)
{
	return dcache_settings_allowed(name);
}

// The core's line for one setting's value, as the plugin logs it.
std::string bad_value(const char *dcache_settings_text::*field, const char *value)
{
	dcache_settings_text t{};
	t.*field = value;
	dcache_settings out{};
	char why[512];
	EXPECT_NE(dcache_settings_parse(&t, &out, why, sizeof(why)), 0) << value;
	return why;
}

// The lines of r.err that are about export id.
std::vector<std::string> about(const result &r, int id)
{
	std::vector<std::string> v;
	for (const std::string &l : lines(r.err))
		if (l.find(": DCACHE: export " + std::to_string(id) + " (") != std::string::npos)
			v.push_back(l);
	return v;
}

TEST(dcache_check, three_bad_values_of_one_export_are_three_lines)
{
	scratch d;
	const std::string f = d.dir + "/ganesha.conf";
	config_builder c;
	const int l = c.add_export(1, "    IO_Queue_Depth = 0;\n    IO_Cache_Read = fast;\n"
				      "    Direct_Misaligned_Num_Pages = -1;\n    IO_Cache_Write = direct;\n"
				      "    FSAL { Name = VFS; }\n");
	c.add_export(2, "    IO_Cache_Write = direct;\n    FSAL { Name = VFS; }\n");
	write_file(f, c.text);
	const result r = run({"-v", f});
	EXPECT_EQ(r.status, 1) << r.err;
	// in the order of DCACHE_SETTINGS, each as the core words it alone
	EXPECT_EQ(lines(r.err),
		  (std::vector<std::string>{
			  refusal(f, l, 1, bad_value(&dcache_settings_text::io_cache_read, "fast")),
			  refusal(f, l, 1, bad_value(&dcache_settings_text::direct_misaligned_num_pages, "-1")),
			  refusal(f, l, 1, bad_value(&dcache_settings_text::io_queue_depth, "0")),
		  }));
	EXPECT_THAT(r.err, HasSubstr("Direct_Misaligned_Num_Pages = \"-1\" is not valid; allowed: an integer from 0 "
				     "to 1024 (pages of 4096 bytes)"));
	// the export is refused once: two exports, one refused, the other served
	EXPECT_THAT(r.out, HasSubstr("dcache-check: 2 DCACHE exports, 1 refused"));
	EXPECT_THAT(r.out, HasSubstr("DCACHE: export 2 (/c/2): would be served: "));
}

TEST(dcache_check, every_kind_of_mistake_in_one_export_has_its_line)
{
	scratch d;
	const std::string f = d.dir + "/ganesha.conf";
	const auto at = [&](int line) { return f + ":" + std::to_string(line); };
	config_builder c;
	c.put("EXPORT_DEFAULTS {\n  Boundary_Tracking = no;\n}\n");
	const int l = c.add_export(3,
				   "    IO_Cache_Read = fast;\n"   // l+2
				   "    IO_Cache_Read = direct;\n" // l+3: twice
				   "    IO_Cache_Write { }\n"	   // l+4: a block
				   "    IO_Cache_Wrte = direct;\n" // l+5: unknown
				   "    IO_Queue_Depth = 64k;\n"   // l+6: no value
				   "    Boundary_Max_Pages = 0;\n" // l+7: out of range
				   "    IO_Backend = fast;\n"	   // l+8: not a word of it
				   "    FSAL { Name = VFS; Direct_Misaligned_Memory = bounce; }\n", // l+9
				   "IO_Blocking_Max = 8;"); // l-1: in the EXPORT block
	write_file(f, c.text);
	const result r = run({f});
	EXPECT_EQ(r.status, 1);
	std::string names = "Name, ";
#define DCACHE_NAME_LIST(name, member) names += std::string(name) + ", ";
	DCACHE_SETTINGS(DCACHE_NAME_LIST)
#undef DCACHE_NAME_LIST
	names += "FSAL { Name = VFS; }";
	EXPECT_EQ(
		about(r, 3),
		(std::vector<std::string>{
			refusal(f, l, 3,
				"IO_Cache_Read is set more than once (\"fast\" at " + at(l + 2) +
					", then \"direct\" at " + at(l + 3) + "); set it once"),
			refusal(f, l, 3,
				"IO_Cache_Write { ... } (" + at(l + 4) +
					") is a block; a setting takes one value: IO_Cache_Write = VALUE; (allowed: " +
					allowed("IO_Cache_Write") + ")"),
			refusal(f, l, 3,
				"IO_Queue_Depth = \"64k\" (" + at(l + 6) +
					") has no value Ganesha's parser could read (see its syntax error above: a unit "
					"such as 64k, an exponent such as 1e3, a missing ';' or nothing before ';' is not "
					"a value); allowed: " +
					allowed("IO_Queue_Depth")),
			refusal(f, l, 3,
				"Direct_Misaligned_Memory (" + at(l + 9) +
					") is in the nested FSAL block (the sub-FSAL's own); DCACHE settings belong in the "
					"export's FSAL { Name = DCACHE; ... } block"),
			refusal(f, l, 3,
				"IO_Blocking_Max (" + at(l - 1) +
					") is in the EXPORT block; DCACHE settings belong in the export's FSAL { Name = "
					"DCACHE; ... } block"),
			refusal(f, l, 3,
				"Boundary_Tracking (" + at(2) +
					") is in the EXPORT_DEFAULTS block; DCACHE settings belong in the export's FSAL { "
					"Name = DCACHE; ... } block"),
			refusal(f, l, 3,
				"unknown setting in the FSAL block (see the configuration error above naming it); "
				"allowed settings: " +
					names),
			refusal(f, l, 3, bad_value(&dcache_settings_text::boundary_max_pages, "0")),
			refusal(f, l, 3, bad_value(&dcache_settings_text::io_backend, "fast")),
		}))
		<< r.err;
	// Ganesha's own lines come first, as the refusals refer to them
	const std::vector<std::string> all = lines(r.err);
	ASSERT_GE(all.size(), 2u);
	EXPECT_EQ(all[0], "Config File (" + at(l + 6) + "): Syntax error in statement");
	EXPECT_EQ(all[1], "Config File (" + at(l + 5) + "): Unknown parameter (IO_Cache_Wrte)");
}

// Without Ganesha's loader (a setting given several values, or a nested
// FSAL other than VFS) the rest is still reported.
TEST(dcache_check, the_rest_is_reported_beside_several_values_or_another_fsal)
{
	scratch d;
	const std::string f = d.dir + "/ganesha.conf";
	const auto at = [&](int line) { return f + ":" + std::to_string(line); };
	config_builder c;
	const int l4 =
		c.add_export(4, "    IO_Workers_Max = 1, 2;\n    IO_Backend = fast;\n    FSAL { Name = VFS; }\n");
	const int l5 = c.add_export(
		5, "    IO_Cache_Wrte = direct;\n    Boundary_Max_Age_Ms = 0;\n    FSAL { Name = MEM; }\n");
	const int l6 = c.add_export(6, "    IO_Cache_Read = fast;\n");
	write_file(f, c.text);
	const result r = run({f});
	EXPECT_EQ(r.status, 1);
	EXPECT_EQ(about(r, 4),
		  (std::vector<std::string>{
			  refusal(f, l4, 4,
				  "IO_Workers_Max (" + at(l4 + 2) + ") is given 2 values; it takes one (allowed: " +
					  allowed("IO_Workers_Max") + ")"),
			  refusal(f, l4, 4, bad_value(&dcache_settings_text::io_backend, "fast")),
		  }));
	const std::vector<std::string> five = about(r, 5);
	ASSERT_EQ(five.size(), 3u) << r.err;
	EXPECT_EQ(five[0], refusal(f, l5, 5, "DCACHE stacks only on FSAL VFS (got \"MEM\" at " + at(l5 + 4) + ")"));
	EXPECT_THAT(five[1], HasSubstr("unknown setting in the FSAL block"));
	EXPECT_EQ(five[2], refusal(f, l5, 5, bad_value(&dcache_settings_text::boundary_max_age_ms, "0")));
	EXPECT_EQ(
		about(r, 6),
		(std::vector<std::string>{
			refusal(f, l6, 6, "missing the nested FSAL { Name = VFS; } block naming the FSAL to stack on"),
			refusal(f, l6, 6, bad_value(&dcache_settings_text::io_cache_read, "fast")),
		}));
	// Ganesha's "can have only one option" is not among them: its loader
	// did not run on export 4
	EXPECT_THAT(r.err, ::testing::Not(HasSubstr("can have only one option")));
}

// A character Ganesha's lexer has no rule for stops ganesha.nfsd at start,
// whatever export it is in (the plugin is not loaded yet): dcache-check
// exits 2 and names each DCACHE setting holding one, with its export.
// Quoted, the same value reaches the plugin, which refuses that export.
TEST(dcache_check, a_character_the_lexer_has_no_rule_for_is_named_as_stopping_the_server)
{
	scratch d;
	const std::string f = d.dir + "/ganesha.conf";
	const auto at = [&](int line) { return f + ":" + std::to_string(line); };
	config_builder c;
	const int l1 = c.add_export(1, "    IO_Queue_Depth = +64;\n    IO_Cache_Read = (direct);\n"
				       "    FSAL { Name = VFS; }\n");
	const int l2 = c.add_export(2, "    Boundary_Max_Pages = 64\xc2\xa0;\n    FSAL { Name = VFS; }\n");
	c.add_export(3, "    IO_Cache_Write = direct;\n    FSAL { Name = VFS; }\n");
	write_file(f, c.text);
	const result r = run({f});
	EXPECT_EQ(r.status, 2) << r.err;
	const std::string stops = ", which Ganesha's parser takes only inside quotes: ganesha.nfsd does not start with "
				  "this file, and a reload (SIGHUP) rereads none of it; allowed: ";
	EXPECT_EQ(about(r, 1), (std::vector<std::string>{
				       at(l1) + ": DCACHE: export 1 (/c/1): IO_Queue_Depth = \"+64\" (" + at(l1 + 2) +
					       ") holds \"+\"" + stops + allowed("IO_Queue_Depth"),
				       at(l1) + ": DCACHE: export 1 (/c/1): IO_Cache_Read = \"(direct)\" (" +
					       at(l1 + 3) + ") holds \"(\", \")\"" + stops + allowed("IO_Cache_Read"),
			       }));
	// a non-breaking space, byte by byte
	EXPECT_EQ(about(r, 2), (std::vector<std::string>{at(l2) +
							 ": DCACHE: export 2 (/c/2): Boundary_Max_Pages = "
							 "\"64\\xc2\\xa0\" (" +
							 at(l2 + 2) + ") holds \"\\xc2\", \"\\xa0\"" + stops +
							 allowed("Boundary_Max_Pages")}));
	EXPECT_THAT(r.err, HasSubstr("Config File (" + at(l1 + 2) + "): Unexpected character (+)"));
	EXPECT_THAT(r.err,
		    HasSubstr("dcache-check: " + f +
			      ": Ganesha's parser fails on it (token scan): ganesha.nfsd would not start with it"));
	EXPECT_TRUE(about(r, 3).empty()) << "a good export is not mentioned";

	// quoted: the plugin's own refusal of that export only
	config_builder q;
	const int lq = q.add_export(1, "    IO_Queue_Depth = \"+64\";\n    FSAL { Name = VFS; }\n");
	write_file(f, q.text);
	const result rq = run({f});
	EXPECT_EQ(rq.status, 1) << rq.err;
	EXPECT_EQ(lines(rq.err), (std::vector<std::string>{
					 refusal(f, lq, 1, bad_value(&dcache_settings_text::io_queue_depth, "+64"))}));
}

} // namespace
