// The cache-mode end-to-end tests' support: their exports (as
// tests/e2e/test_modes.py builds them, dcache_testbed.exports.MODES), the
// server and its counters, data patterns, and the skips when a run lacks
// what a test needs.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nfs_client.hpp"
#include "support.hpp"

namespace dcache::e2e::modes {

constexpr std::uint64_t k_page = 4096;
constexpr std::uint64_t k_mib = 1024 * 1024;

// The ids and names of dcache_testbed.exports.mode_exports(31, "m_") and
// mode_exports(41, "t_", count=6) (tests/e2e/test_modes.py): keep them equal.
struct export_def {
  int id;
  const char* name;  // pseudo path without '/', also the backing directory
  const char* read_mode;
  const char* write_mode;
  bool tmpfs;
  bool cached_edges;  // Direct_Misaligned_Dontcache = false
};

inline const std::vector<export_def> k_exports = {
    {31, "m_buffered", "buffered", "buffered", false, false},
    {32, "m_dontcache", "dontcache", "dontcache", false, false},
    {33, "m_fadvise", "fadvise", "fadvise", false, false},
    {34, "m_direct", "direct", "direct", false, false},
    {35, "m_direct_data_sync", "direct", "direct_data_sync", false, false},
    {36, "m_direct_file_sync", "direct", "direct_file_sync", false, false},
    {37, "m_direct_cached_edges", "direct", "direct", false, true},
    {38, "m_direct_mem_buffered", "direct", "direct", false, false},
    {41, "t_buffered", "buffered", "buffered", true, false},
    {42, "t_dontcache", "dontcache", "dontcache", true, false},
    {43, "t_fadvise", "fadvise", "fadvise", true, false},
    {44, "t_direct", "direct", "direct", true, false},
    {45, "t_direct_data_sync", "direct", "direct_data_sync", true, false},
    {46, "t_direct_file_sync", "direct", "direct_file_sync", true, false},
};

inline std::vector<export_def> select(bool tmpfs) {
  std::vector<export_def> out;
  for (const auto& e : k_exports)
    if (e.tmpfs == tmpfs) out.push_back(e);
  return out;
}

inline bool is(const char* a, const char* b) {
  return std::strcmp(a, b) == 0;
}
inline bool write_direct_family(const export_def& e) {
  return std::strncmp(e.write_mode, "direct", 6) == 0;
}

inline std::string server() {
  return env_or_empty("DCACHE_SERVER");
}

// Where the export's files live on the server's side.
inline std::string backing_dir(const export_def& e) {
  const std::string root = env_or_empty(e.tmpfs ? "DCACHE_TMPFS" : "DCACHE_MNT");
  return root + "/" + e.name;
}

inline std::vector<std::byte> pattern(std::uint64_t seed, std::uint64_t offset, std::uint64_t len) {
  std::vector<std::byte> v(len);
  fill_pattern(v, seed, offset);
  return v;
}

inline std::string describe(const cachestat_result& c) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "cache=%llu dirty=%llu writeback=%llu evicted=%llu pages",
                static_cast<unsigned long long>(c.nr_cache), static_cast<unsigned long long>(c.nr_dirty),
                static_cast<unsigned long long>(c.nr_writeback),
                static_cast<unsigned long long>(c.nr_evicted));
  return buf;
}

// Skips the calling test when the environment lacks what it needs.
#define REQUIRE_ENV(e)                                                                         \
  do {                                                                                         \
    if (server().empty()) {                                                                    \
      GTEST_SKIP() << "DCACHE_SERVER not set: run by tests/e2e/test_*.py";                     \
    }                                                                                          \
    if ((e).tmpfs && env_or_empty("DCACHE_TMPFS").empty()) {                                   \
      GTEST_SKIP() << (env_or_empty("DCACHE_TMPFS_WHY").empty()                                \
                           ? "DCACHE_TMPFS not set (tests/e2e/test_modes.py mounts the tmpfs)" \
                           : env_or_empty("DCACHE_TMPFS_WHY"));                                \
    }                                                                                          \
  } while (0)

inline std::string param_name(const export_def& e) {
  return e.name;
}

// Reads counters; fails the test (not just the check) when DBus is not there.
inline fsal_stats stats_now() {
  fsal_stats s;
  std::string why;
  const int rc = s.load(why);
  EXPECT_EQ(rc, 0) << why;
  return s;
}

// Zeroes the counters and returns the matching (empty) reading; see
// fsal_stats::reset for why tests do not subtract two full readings.
inline fsal_stats reset_stats() {
  std::string why;
  const int rc = fsal_stats::reset(why);
  EXPECT_EQ(rc, 0) << why;
  return fsal_stats{};
}

inline std::uint64_t delta(const fsal_stats& before, const fsal_stats& after, int id, const char* counter) {
  return after.get(id, counter) - before.get(id, counter);
}

// ============================================================= 1. integrity ==

inline std::vector<export_def> direct_exports(bool tmpfs) {
  std::vector<export_def> out;
  for (const auto& e : select(tmpfs))
    if (write_direct_family(e)) out.push_back(e);
  return out;
}

}  // namespace dcache::e2e::modes
