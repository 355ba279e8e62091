// The settings as documented: docs/configuration.md's table and the man
// page ganesha-dcache-config(8) (docs/man/ganesha-dcache-config.8.md) name
// every setting of the core, no other, each with the core's default, and
// say what it allows as the core's error lines do.
#include "dcache/core.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

std::string read_source_file(const std::string &relative)
{
	const std::string path = std::string(DCACHE_SOURCE_DIR) + "/" + relative;
	std::ifstream in(path);
	EXPECT_TRUE(in.good()) << "cannot read " << path;
	std::stringstream text;
	text << in.rdbuf();
	return text.str();
}

// (name, default) in DCACHE_SETTINGS order, from the log line format
// "Name = value, Name = value, ...".  (No std::regex: GCC 12 warns inside
// it under the sanitizers.)
std::vector<std::pair<std::string, std::string>> code_defaults()
{
	const dcache_settings d = dcache_settings_default();
	char line[2048];
	dcache_settings_format(&d, line, sizeof(line));
	std::vector<std::pair<std::string, std::string>> out;
	const std::string text(line);
	for (std::size_t at = 0; at < text.size();) {
		std::size_t end = text.find(", ", at);
		if (end == std::string::npos)
			end = text.size();
		const std::string item = text.substr(at, end - at);
		const std::size_t eq = item.find(" = ");
		if (eq != std::string::npos)
			out.emplace_back(item.substr(0, eq), item.substr(eq + 3));
		at = end + 2;
	}
	return out;
}

std::string strip(std::string s, const std::string &chars = " `")
{
	const auto b = s.find_first_not_of(chars);
	const auto e = s.find_last_not_of(chars);
	return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// docs/configuration.md, "## Settings": setting -> its table cells.
std::map<std::string, std::vector<std::string>> configuration_table()
{
	std::istringstream in(read_source_file("docs/configuration.md"));
	std::map<std::string, std::vector<std::string>> rows;
	std::string line;
	bool in_section = false;
	while (std::getline(in, line)) {
		if (line.rfind("#", 0) == 0) // the table is before the first subsection
			in_section = line == "## Settings";
		if (!in_section || line.rfind("| `", 0) != 0)
			continue;
		std::vector<std::string> cells;
		std::string cell;
		std::istringstream row(line.substr(1));
		while (std::getline(row, cell, '|'))
			cells.push_back(strip(cell, " "));
		rows[strip(cells.at(0))] = cells;
	}
	return rows;
}

TEST(SettingsDoc, the_core_has_settings_to_check)
{
	EXPECT_EQ(code_defaults().size(), 18u) << "a setting was added or removed: update both documents";
}

TEST(SettingsDoc, configuration_md_lists_every_setting_with_its_default_and_values)
{
	const auto rows = configuration_table();
	const auto defaults = code_defaults();
	EXPECT_EQ(rows.size(), defaults.size())
		<< "docs/configuration.md's settings table has other rows than the core";
	for (const auto &[name, def] : defaults) {
		SCOPED_TRACE(name);
		const auto row = rows.find(name);
		ASSERT_NE(row, rows.end()) << "not in docs/configuration.md's settings table";
		ASSERT_GE(row->second.size(), 3u);
		const std::string &values = row->second[1];
		EXPECT_EQ(strip(row->second[2]), def) << "default in docs/configuration.md";
		const std::string allowed = dcache_settings_allowed(name.c_str());
		unsigned long low = 0, high = 0;
		if (std::sscanf(allowed.c_str(), "an integer from %lu to %lu", &low, &high) == 2) {
			EXPECT_EQ(values, std::to_string(low) + " … " + std::to_string(high));
			continue;
		}
		// words: every one before the kernel's numbers (booleans: true/false)
		std::string words = allowed.substr(0, allowed.find(" ("));
		if (words.rfind("true, false", 0) == 0)
			words = "true, false";
		std::istringstream list(words);
		std::string word;
		while (std::getline(list, word, ','))
			EXPECT_NE(values.find("`" + strip(word) + "`"), std::string::npos)
				<< strip(word) << " missing from the values: " << values;
	}
}

TEST(SettingsDoc, man_page_lists_every_setting_with_its_default_and_what_it_allows)
{
	const std::string page = read_source_file("docs/man/ganesha-dcache-config.8.md");
	const auto defaults = code_defaults();
	// "\n**Name** (default *D*)\n:   definition"
	std::map<std::string, std::pair<std::string, std::string>> entries;
	const std::string open = "\n**", mid = "** (default *", close = "*)\n:   ";
	for (std::size_t at = page.find(open); at != std::string::npos; at = page.find(open, at + 1)) {
		const std::size_t name_end = page.find(mid, at + open.size());
		const std::size_t line_end = page.find('\n', at + open.size());
		if (name_end == std::string::npos || name_end > line_end)
			continue;
		const std::size_t def_end = page.find(close, name_end + mid.size());
		if (def_end == std::string::npos || def_end > line_end)
			continue;
		const std::size_t text_at = def_end + close.size();
		entries[page.substr(at + open.size(), name_end - at - open.size())] = {
			page.substr(name_end + mid.size(), def_end - name_end - mid.size()),
			page.substr(text_at, page.find('\n', text_at) - text_at)};
	}
	EXPECT_EQ(entries.size(), defaults.size()) << "the man page has other settings than the core";
	for (const auto &[name, def] : defaults) {
		SCOPED_TRACE(name);
		const auto e = entries.find(name);
		ASSERT_NE(e, entries.end()) << "not in ganesha-dcache-config(8)";
		EXPECT_EQ(e->second.first, def) << "default in ganesha-dcache-config(8)";
		const std::string want = std::string("Allowed: ") + dcache_settings_allowed(name.c_str()) + ".";
		EXPECT_NE(e->second.second.find(want), std::string::npos)
			<< "want \"" << want << "\" in: " << e->second.second;
	}
}

} // namespace
