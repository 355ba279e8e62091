// The settings as documented: docs/configuration.md's table and the man
// page ganesha-dcache-config(8) (docs/man/ganesha-dcache-config.8.md) name
// every setting of the core, no other, each with the core's default, and
// say what it allows as the core's error lines do.
#include "dcache/core.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
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

// (name, default) in DCACHE_SETTINGS order, from the log line format.
std::vector<std::pair<std::string, std::string>> code_defaults()
{
	const dcache_settings d = dcache_settings_default();
	char line[2048];
	dcache_settings_format(&d, line, sizeof(line));
	std::vector<std::pair<std::string, std::string>> out;
	const std::regex item("([A-Za-z_]+) = ([^,]+)");
	const std::string text(line);
	for (auto it = std::sregex_iterator(text.begin(), text.end(), item); it != std::sregex_iterator(); ++it)
		out.emplace_back((*it)[1].str(), (*it)[2].str());
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
	EXPECT_EQ(code_defaults().size(), 12u) << "a setting was added or removed: update both documents";
}

TEST(SettingsDoc, configuration_md_lists_every_setting_with_its_default_and_values)
{
	const auto rows = configuration_table();
	const auto defaults = code_defaults();
	EXPECT_EQ(rows.size(), defaults.size()) << "docs/configuration.md's settings table has other rows than the core";
	for (const auto &[name, def] : defaults) {
		SCOPED_TRACE(name);
		const auto row = rows.find(name);
		ASSERT_NE(row, rows.end()) << "not in docs/configuration.md's settings table";
		ASSERT_GE(row->second.size(), 3u);
		const std::string &values = row->second[1];
		EXPECT_EQ(strip(row->second[2]), def) << "default in docs/configuration.md";
		const std::string allowed = dcache_settings_allowed(name.c_str());
		std::smatch range;
		if (std::regex_search(allowed, range, std::regex("^an integer from (\\d+) to (\\d+)"))) {
			EXPECT_EQ(values, range[1].str() + " … " + range[2].str());
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
	const std::regex entry("\\n\\*\\*([A-Za-z_]+)\\*\\* \\(default \\*([^*]+)\\*\\)\\n:   ([^\\n]*)");
	std::map<std::string, std::pair<std::string, std::string>> entries;
	for (auto it = std::sregex_iterator(page.begin(), page.end(), entry); it != std::sregex_iterator(); ++it)
		entries[(*it)[1].str()] = {(*it)[2].str(), (*it)[3].str()};
	EXPECT_EQ(entries.size(), defaults.size()) << "the man page has other settings than the core";
	for (const auto &[name, def] : defaults) {
		SCOPED_TRACE(name);
		const auto e = entries.find(name);
		ASSERT_NE(e, entries.end()) << "not in ganesha-dcache-config(8)";
		EXPECT_EQ(e->second.first, def) << "default in ganesha-dcache-config(8)";
		const std::string want = std::string("Allowed: ") + dcache_settings_allowed(name.c_str()) + ".";
		EXPECT_NE(e->second.second.find(want), std::string::npos) << "want \"" << want << "\" in: " << e->second.second;
	}
}

} // namespace
