// Helpers shared by the core's unit tests: the core's log lines captured
// through dcache_set_log, and counters read by name.  Thread-safe.
#pragma once

#include "dcache/core.h"
#include "export_state.h"
#include "file_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace dcache::test {

inline std::mutex g_log_mutex;
inline std::vector<std::string> g_log_lines;

// A dcache_log_fn: install with dcache_set_log(capture_log).
inline void capture_log(dcache_log_level, const char *msg)
{
	std::lock_guard lock(g_log_mutex);
	g_log_lines.emplace_back(msg);
}

inline void clear_log()
{
	std::lock_guard lock(g_log_mutex);
	g_log_lines.clear();
}

inline std::vector<std::string> log_lines()
{
	std::lock_guard lock(g_log_mutex);
	return g_log_lines;
}

inline std::size_t log_lines_with(const std::string &needle)
{
	std::lock_guard lock(g_log_mutex);
	return static_cast<std::size_t>(std::count_if(g_log_lines.begin(), g_log_lines.end(),
						      [&](const std::string &l) { return l.find(needle) != l.npos; }));
}

// The export's counter of that name; a failure if there is none.
inline std::uint64_t stat_of(const dcache_export *e, const char *name)
{
	for (std::size_t i = 0; i < dcache_stats_count(); ++i)
		if (std::strcmp(dcache_stats_name(i), name) == 0)
			return dcache_stats_value(e, i);
	ADD_FAILURE() << "no counter named " << name;
	return 0;
}

// A clock the test moves by hand, for an export's clock (dcache_export::
// clock): time passes only when advance() says so.
struct manual_clock {
	static inline std::atomic<std::int64_t> ns{0};
	static dcache_export::time_point now() noexcept
	{
		return dcache_export::time_point(std::chrono::nanoseconds(ns.load()));
	}
	static void advance(std::chrono::milliseconds d) noexcept
	{
		ns += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
	}
};

// Fixture base: an export over a backend the test owns, and one file of it.
class core_test : public ::testing::Test {
protected:
	// Replaces the export and its file(s) with new ones over `b`.
	// Over an asynchronous backend every step is handed off
	// (IO_Blocking_Max = 0), so each interleaving is the test's, unless
	// the test keeps its own IO_Blocking_Max (blocking_slots).
	void make_over(dcache::io::backend &b, const dcache_settings &given, const char *name)
	{
		free_export();
		dcache_settings s = given;
		if (!blocking_slots)
			s.io_blocking_max = 0;
		exp = dcache::core::export_new_with_backend(&s, name, &b);
		ASSERT_NE(exp, nullptr);
		file = dcache_file_new(exp);
		ASSERT_NE(file, nullptr);
	}
	bool blocking_slots = false;
	// Files first, then the export.
	virtual void free_export()
	{
		if (file != nullptr)
			dcache_file_free(file);
		if (exp != nullptr)
			dcache_export_put(exp);
		file = nullptr;
		exp = nullptr;
	}

	dcache_export *exp = nullptr;
	dcache_file *file = nullptr;
};

} // namespace dcache::test
