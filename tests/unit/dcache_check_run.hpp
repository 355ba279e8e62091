// dcache-check run as a program, for its tests: a scratch directory, one
// run with given arguments, standard input and directory, and generated
// configurations with the plugin's refusal line for each export.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char **environ;

namespace dcache_check_test {

// ---- running the program ------------------------------------------------

struct result {
	int status = -1; // exit status, or -1 when it did not exit
	std::string out, err;
};

inline std::string slurp(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream s;
	s << in.rdbuf();
	return s.str();
}

inline void write_file(const std::string &path, const std::string &text)
{
	std::ofstream(path) << text;
}

class scratch {
public:
	scratch()
	{
		char tmpl[] = "/tmp/dcache-check-test.XXXXXX";
		const char *d = mkdtemp(tmpl);
		EXPECT_NE(d, nullptr);
		dir = d != nullptr ? d : "/tmp";
	}
	~scratch()
	{
		const std::string cmd = "rm -rf '" + dir + "'";
		EXPECT_EQ(std::system(cmd.c_str()), 0);
	}
	scratch(const scratch &) = delete;
	scratch &operator=(const scratch &) = delete;
	std::string dir;
};

// dcache-check ARGS, with STDIN as its standard input, run in CWD.
inline result run(const std::vector<std::string> &args, const std::string &stdin_text = "", const std::string &cwd = "")
{
	scratch io;
	const std::string in = io.dir + "/in", out = io.dir + "/out", err = io.dir + "/err";
	write_file(in, stdin_text);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (!cwd.empty())
		posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
	std::vector<char *> argv{const_cast<char *>(DCACHE_CHECK_PATH)};
	for (const std::string &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	pid_t pid;
	result r;
	const int rc = posix_spawn(&pid, DCACHE_CHECK_PATH, &fa, nullptr, argv.data(), environ);
	posix_spawn_file_actions_destroy(&fa);
	EXPECT_EQ(rc, 0) << "cannot run " << DCACHE_CHECK_PATH;
	if (rc != 0)
		return r;
	int ws = 0;
	EXPECT_EQ(waitpid(pid, &ws, 0), pid);
	if (WIFEXITED(ws))
		r.status = WEXITSTATUS(ws);
	r.out = slurp(out);
	r.err = slurp(err);
	return r;
}

inline std::vector<std::string> lines(const std::string &text)
{
	std::vector<std::string> v;
	std::istringstream in(text);
	for (std::string l; std::getline(in, l);)
		v.push_back(l);
	return v;
}

// One generated EXPORT per case; where its DCACHE block starts.
struct config_builder {
	std::string text;
	int line = 1;

	int add_export(int id, const std::string &fsal_body, const std::string &export_extra = "")
	{
		put("EXPORT {\n");
		put("  Export_Id = " + std::to_string(id) + "; Path = /c/" + std::to_string(id) + ";\n");
		if (!export_extra.empty())
			put("  " + export_extra + "\n");
		const int at = line;
		put("  FSAL {\n    Name = DCACHE;\n" + fsal_body + "  }\n}\n");
		return at;
	}
	void put(const std::string &s)
	{
		text += s;
		for (char c : s)
			line += c == '\n';
	}
};

// The plugin's line for a refused export, as dcache-check prints it.
inline std::string refusal(const std::string &file, int line, int id, const std::string &why)
{
	return file + ":" + std::to_string(line) + ": DCACHE: export " + std::to_string(id) + " (/c/" +
	       std::to_string(id) + "): " + why + "; export refused";
}

} // namespace dcache_check_test
