// End-to-end tests of the cache modes: one real
// ganesha.nfsd with one DCACHE export per mode (m_*, modes.hpp) and the
// same modes on a tmpfs (t_*), driven by libnfs.
//
//   1. data integrity in every mode, NFSv3 and NFSv4, aligned and misaligned
//      offsets and lengths, concurrent writers on disjoint ranges;
//   2. page-cache residency after WRITE+COMMIT and after READ (cachestat).
//
// Stability and fallbacks: modes_stability_test.cpp.  Run by
// tests/e2e/test_modes.py (which mounts the tmpfs and builds the server's
// exports).  Measured numbers are printed as lines starting with "MEASURE".
#include "modes.hpp"

namespace dcache::e2e::modes {
namespace {

struct integrity_param {
  export_def e;
  nfs_version v;
};

class integrity : public ::testing::TestWithParam<integrity_param> {};

TEST_P(integrity, misaligned_and_aligned_writes_read_back_identical) {
  const auto& [e, v] = GetParam();
  REQUIRE_ENV(e);
  nfs_client c(server(), std::string("/") + e.name, v);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  const std::string name = "/integrity_v" + to_string(v);
  nfs_file f;
  ASSERT_EQ(c.create(name, O_RDWR, 0644, f), 0) << c.last_error();

  // (offset, length) pairs: aligned, misaligned, straddling pages and
  // sectors, overlapping earlier records; 1 byte .. 4 MiB.
  struct rec {
    std::uint64_t off, len;
  };
  const std::vector<rec> recs = {
      {0, 1},
      {1, 511},
      {511, 2},
      {512, 512},
      {1000, 4096},
      {4095, 4097},
      {8192, 65536},
      {70000, 131072 + 333},
      {300000, k_mib + 1},
      {3 * k_mib - 7, 4 * k_mib},
      {5 * k_mib, 4 * k_mib},
      {2 * k_mib + 4096, 8192},
      {7 * k_mib + 3, 4093},
  };
  std::vector<std::byte> model;
  std::uint64_t seed = 1000 + static_cast<std::uint64_t>(e.id) * 10 + static_cast<std::uint64_t>(v);
  for (const auto& r : recs) {
    const auto data = pattern(++seed, r.off, r.len);
    ASSERT_EQ(f.pwrite_all(r.off, data), 0) << "WRITE " << r.off << "+" << r.len << ": " << c.last_error();
    if (model.size() < r.off + r.len) model.resize(r.off + r.len);
    std::copy(data.begin(), data.end(), model.begin() + static_cast<long>(r.off));
  }
  ASSERT_EQ(f.fsync(), 0) << c.last_error();

  // Whole file through NFS.
  std::vector<std::byte> got(model.size() + 4096);
  const long long n = f.pread_full(0, got);
  ASSERT_EQ(n, static_cast<long long>(model.size())) << c.last_error();
  got.resize(static_cast<std::size_t>(n));
  ASSERT_EQ(first_difference(got, model), -1) << "NFS read differs at the offset shown";

  // Misaligned READ windows (direct reads widen and bounce these).
  const std::vector<rec> windows = {
      {1, 1}, {511, 3}, {4095, 2}, {4097, 65541}, {333333, k_mib + 7}, {model.size() - 5, 5}};
  for (const auto& w : windows) {
    std::vector<std::byte> part(w.len);
    const long long k = f.pread_full(w.off, part);
    ASSERT_EQ(k, static_cast<long long>(w.len)) << "READ " << w.off << "+" << w.len;
    ASSERT_EQ(first_difference(part, std::span<const std::byte>(model).subspan(w.off, w.len)), -1)
        << "READ " << w.off << "+" << w.len << " differs";
  }
  // A READ past EOF returns what exists.
  std::vector<std::byte> past(8192);
  ASSERT_EQ(f.pread_full(model.size() - 100, past), 100);

  // The backing file, byte for byte.
  std::vector<std::byte> local;
  ASSERT_EQ(read_local_file(backing_dir(e) + name, local), 0);
  ASSERT_EQ(first_difference(local, model), -1) << "backing file differs at the offset shown";
}

TEST_P(integrity, concurrent_writers_on_disjoint_ranges) {
  const auto& [e, v] = GetParam();
  REQUIRE_ENV(e);
  // Four clients, each its own connection and thread; region boundaries
  // are not sector- or page-aligned, so neighbours share boundary pages,
  // and odd writers go backwards so the shared pages are completed in
  // both orders.
  constexpr int k_writers = 4;
  const std::uint64_t region = v == nfs_version::v3 ? k_mib + 777 : 192 * 1024 + 777;
  const std::uint64_t chunk = v == nfs_version::v3 ? 65536 + 123 : 16384 + 123;
  const std::string name = "/concurrent_v" + to_string(v);
  {
    nfs_client c(server(), std::string("/") + e.name, v);
    ASSERT_EQ(c.status(), 0) << c.last_error();
    nfs_file f;
    ASSERT_EQ(c.create(name, O_RDWR, 0644, f), 0) << c.last_error();
  }
  const std::uint64_t seed = 5000 + static_cast<std::uint64_t>(e.id);
  std::vector<std::string> errors(k_writers);
  std::vector<std::thread> threads;
  for (int t = 0; t < k_writers; ++t) {
    threads.emplace_back([&, t] {
      nfs_client c(server(), std::string("/") + e.name, v);
      if (c.status() != 0) {
        errors[t] = "mount: " + c.last_error();
        return;
      }
      nfs_file f;
      if (c.open(name, O_RDWR, f) != 0) {
        errors[t] = "open: " + c.last_error();
        return;
      }
      const std::uint64_t start = static_cast<std::uint64_t>(t) * region;
      std::vector<std::uint64_t> offs;
      for (std::uint64_t o = start; o < start + region; o += chunk) offs.push_back(o);
      if (t % 2 == 1) std::reverse(offs.begin(), offs.end());
      for (const auto o : offs) {
        const std::uint64_t len = std::min(chunk, start + region - o);
        if (f.pwrite_all(o, pattern(seed, o, len)) != 0) {
          errors[t] = "WRITE at " + std::to_string(o) + ": " + c.last_error();
          return;
        }
      }
      if (f.fsync() != 0) errors[t] = "COMMIT: " + c.last_error();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < k_writers; ++t) ASSERT_EQ(errors[t], "") << "writer " << t;

  const auto model = pattern(seed, 0, region * k_writers);
  nfs_client c(server(), std::string("/") + e.name, v);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  std::vector<std::byte> got;
  ASSERT_EQ(c.read_file(name, got), 0) << c.last_error();
  ASSERT_EQ(first_difference(got, model), -1) << "NFS read differs at the offset shown";
  std::vector<std::byte> local;
  ASSERT_EQ(read_local_file(backing_dir(e) + name, local), 0);
  ASSERT_EQ(first_difference(local, model), -1) << "backing file differs at the offset shown";
}

std::vector<integrity_param> integrity_params() {
  std::vector<integrity_param> out;
  for (const auto& e : k_exports)
    for (const auto v : {nfs_version::v3, nfs_version::v4}) out.push_back({e, v});
  return out;
}

INSTANTIATE_TEST_SUITE_P(modes, integrity, ::testing::ValuesIn(integrity_params()), [](const auto& p) {
  return std::string(p.param.e.name) + "_v" + (p.param.v == nfs_version::v3 ? "3" : "4");
});

// ============================================================= 2. residency ==

// Bytes the file has in the page cache after writeback finished.
struct residency {
  std::uint64_t cached_bytes = 0;
  cachestat_result cs{};
};

// The file's page cache once its write-back is done and the drops that
// follow a reply have run (they go after the reply, off the request's
// path): until the export has none pending (its drops_pending gauge, for at
// most 30 s), then until three readings 100 ms apart agree, for at most 5 s.
residency measure(const std::string& path, int export_id) {
  for (int i = 0; i < 300; ++i) {
    fsal_stats s;
    std::string why;
    if (s.load(why) != 0 || s.get(export_id, "drops_pending") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  residency r;
  const int rc = wait_clean(path, 30'000, r.cs);
  EXPECT_EQ(rc, 0) << path << ": writeback did not finish: " << describe(r.cs) << " (" << std::strerror(-rc)
                   << ")";
  int same = 0;
  for (int i = 0; i < 50 && same < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cachestat_result now{};
    if (cachestat_path(path, 0, 0, now) != 0) break;
    same = now.nr_cache == r.cs.nr_cache ? same + 1 : 0;
    r.cs = now;
  }
  r.cached_bytes = r.cs.nr_cache * k_page;
  return r;
}

bool cachestat_available(std::string& why) {
  cachestat_result cs{};
  const int rc = cachestat_path("/proc/self/exe", 0, 0, cs);
  if (rc == -ENOSYS) {
    why = "cachestat(2) is not available (kernel < 6.5)";
    return false;
  }
  return true;
}

#define REQUIRE_CACHESTAT()           \
  do {                                \
    std::string why_;                 \
    if (!cachestat_available(why_)) { \
      GTEST_SKIP() << why_;           \
    }                                 \
  } while (0)

// "[first,last] ..." page runs of the file that are cached, for messages.
std::string cached_runs(const std::string& path, std::uint64_t size) {
  std::string out;
  long long run_start = -1;
  int runs = 0;
  const std::uint64_t pages = (size + k_page - 1) / k_page;
  for (std::uint64_t p = 0; p <= pages; ++p) {
    cachestat_result cs{};
    const bool cached = p < pages && cachestat_path(path, p * k_page, k_page, cs) == 0 && cs.nr_cache > 0;
    if (cached && run_start < 0) run_start = static_cast<long long>(p);
    if (!cached && run_start >= 0) {
      if (++runs <= 12) out += "[" + std::to_string(run_start) + "," + std::to_string(p - 1) + "] ";
      run_start = -1;
    }
  }
  if (runs > 12) out += "... (" + std::to_string(runs) + " runs)";
  return out.empty() ? "none" : "pages " + out + "of " + std::to_string(pages);
}

// The share (percent) of an auto export's READs or WRITEs (op "read",
// "write") between two readings that auto decided to serve cached.
double auto_cached_pct(const fsal_stats& before, const fsal_stats& after, int id, const std::string& op) {
  std::uint64_t cached = 0, all = 0;
  for (const char* r :
       {"small", "no_stream", "memory_free", "reused", "too_big", "stream", "free_reported"}) {
    const std::uint64_t n = delta(before, after, id, (op + "_auto_" + r).c_str());
    all += n;
    if (std::strcmp(r, "too_big") != 0 && std::strcmp(r, "stream") != 0 &&
        std::strcmp(r, "free_reported") != 0)
      cached += n;
  }
  std::printf("MEASURE auto %s decisions=%llu cached=%llu\n", op.c_str(),
              static_cast<unsigned long long>(all), static_cast<unsigned long long>(cached));
  EXPECT_GT(all, 0u) << "no " << op << "_auto_* decision counted";
  return all ? 100.0 * static_cast<double>(cached) / static_cast<double>(all) : 0.0;
}

class residency_test : public ::testing::TestWithParam<export_def> {
 protected:
  // buffered keeps everything; auto what it decided to serve cached
  // (auto_pct: auto_cached_pct, of requests of one size) and at most 2 %
  // of the bytes more; every other mode at most 2 % of the bytes.
  void check(const export_def& e, const char* what, std::uint64_t cached, std::uint64_t moved,
             double auto_pct = 0.0) {
    const double pct = 100.0 * static_cast<double>(cached) / static_cast<double>(moved);
    std::printf("MEASURE residency %s export=%s read=%s write=%s cached=%llu moved=%llu pct=%.2f\n", what,
                e.name, e.read_mode, e.write_mode, static_cast<unsigned long long>(cached),
                static_cast<unsigned long long>(moved), pct);
    const bool is_read = std::strncmp(what, "read", 4) == 0;
    const char* mode = is_read ? e.read_mode : e.write_mode;
    if (is(mode, "buffered")) {
      EXPECT_GE(pct, 90.0) << what << ": buffered should leave the data resident";
    } else if (is(mode, "auto")) {
      EXPECT_LE(pct, auto_pct + 2.0) << what << ": auto left more than it decided to cache (" << auto_pct
                                     << " %)";
      if (auto_pct >= 99.0) {
        EXPECT_GE(pct, 90.0) << what << ": auto cached it all and should leave it resident";
      }
    } else
      EXPECT_LE(pct, 2.0) << what << ": mode " << mode << " left too much in the page cache";
  }
};

// Per residency case: large enough that the bounds (2 % cached, 90 %
// resident) are hundreds of pages, boundary pages and auto's first
// Auto_Stream_Min_MiB a small share; 64 MiB took twice as long, its worst
// residual was 2 pages (0.01 %).
constexpr std::uint64_t k_residency_bytes = 32 * k_mib;

TEST_P(residency_test, write_then_commit_aligned_1mib) {
  const export_def e = GetParam();
  REQUIRE_ENV(e);
  REQUIRE_CACHESTAT();
  nfs_client c(server(), std::string("/") + e.name, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  nfs_file f;
  ASSERT_EQ(c.create("/resident_write", O_RDWR, 0644, f), 0) << c.last_error();
  const auto before = reset_stats();
  for (std::uint64_t o = 0; o < k_residency_bytes; o += k_mib)
    ASSERT_EQ(f.pwrite_all(o, pattern(7, o, k_mib)), 0) << c.last_error();
  ASSERT_EQ(f.fsync(), 0) << c.last_error();
  const auto after = stats_now();
  const auto r = measure(backing_dir(e) + "/resident_write", e.id);
  const bool is_auto = is(e.write_mode, "auto");
  if (is_auto) {
    // 1 MiB WRITEs of one file from its start: a stream once its run has
    // moved Auto_Stream_Min_MiB (4), cached and written behind while the
    // server's memory has room to spare (memory_free) and the host does
    // not take free memory back (else free_reported), else uncached
    EXPECT_EQ(delta(before, after, e.id, "write_auto_no_stream"), 4u);
    const std::uint64_t spare = delta(before, after, e.id, "write_auto_memory_free");
    EXPECT_EQ(delta(before, after, e.id, "write_auto_stream") +
                  delta(before, after, e.id, "write_auto_free_reported") + spare,
              k_residency_bytes / k_mib - 4);
    EXPECT_EQ(delta(before, after, e.id, "auto_write_behind"), spare);
  }
  check(e, "write_aligned", r.cached_bytes, k_residency_bytes,
        is_auto ? auto_cached_pct(before, after, e.id, "write") : 0.0);
  std::printf(
      "MEASURE counters export=%s writes=%llu write_direct=%llu write_split=%llu bounce=%llu "
      "mem_misaligned=%llu dontcache_bytes=%llu direct_bytes=%llu buffered_bytes=%llu "
      "reply_stable=%llu commits=%llu\n",
      e.name, static_cast<unsigned long long>(delta(before, after, e.id, "writes")),
      static_cast<unsigned long long>(delta(before, after, e.id, "write_direct")),
      static_cast<unsigned long long>(delta(before, after, e.id, "write_split")),
      static_cast<unsigned long long>(delta(before, after, e.id, "write_bounce_copies")),
      static_cast<unsigned long long>(delta(before, after, e.id, "write_not_direct_mem_misaligned")),
      static_cast<unsigned long long>(delta(before, after, e.id, "dontcache_bytes")),
      static_cast<unsigned long long>(delta(before, after, e.id, "direct_bytes")),
      static_cast<unsigned long long>(delta(before, after, e.id, "buffered_bytes")),
      static_cast<unsigned long long>(delta(before, after, e.id, "writes_reply_stable")),
      static_cast<unsigned long long>(delta(before, after, e.id, "commits")));
  EXPECT_EQ(delta(before, after, e.id, "write_bytes"), k_residency_bytes);
  if (write_direct_family(e) && e.id != 38) {
    // Aligned 1 MiB WRITEs: every byte should have gone direct (through
    // the bounce buffer: payloads decoded off TCP are not M-aligned).
    EXPECT_EQ(delta(before, after, e.id, "direct_bytes"), k_residency_bytes);
  }
  if (e.id == 38) {
    // Direct_Misaligned_Memory = buffered: no direct WRITE unless the
    // payload happened to be aligned; the rest went DONTCACHE.
    EXPECT_EQ(delta(before, after, e.id, "write_bounce_copies"), 0u);
  }
}

// The edge ranges of WRITEs of len bytes at offsets k*stride + first.
struct edge_layout {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> records;  // offset, length
  std::vector<bool> edge_page;                                   // per page of the file
};

edge_layout misaligned_layout(std::uint64_t total, std::uint64_t align) {
  edge_layout l;
  const std::uint64_t len = k_mib + 100;
  for (std::uint64_t o = 100; o + len <= total; o += len) l.records.push_back({o, len});
  l.edge_page.assign(total / k_page + 2, false);
  for (const auto& [o, n] : l.records) {
    const std::uint64_t mid_start = (o + align - 1) / align * align;
    const std::uint64_t mid_end = (o + n) / align * align;
    for (std::uint64_t b = o; b < mid_start; b += 1) l.edge_page[b / k_page] = true;
    for (std::uint64_t b = mid_end; b < o + n; b += 1) l.edge_page[b / k_page] = true;
  }
  return l;
}

// Misaligned records matter for the direct write modes only.
class residency_direct : public residency_test {};

TEST_P(residency_direct, write_then_commit_misaligned_records) {
  const export_def e = GetParam();
  REQUIRE_ENV(e);
  REQUIRE_CACHESTAT();
  nfs_client c(server(), std::string("/") + e.name, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  nfs_file f;
  ASSERT_EQ(c.create("/resident_misaligned", O_RDWR, 0644, f), 0) << c.last_error();
  // 512: the offset alignment statx reports on the loop XFS (checked below
  // through the split counter: a different alignment changes the edges).
  const edge_layout l = misaligned_layout(k_residency_bytes, 512);
  const auto before = reset_stats();
  std::uint64_t moved = 0;
  for (const auto& [o, n] : l.records) {
    ASSERT_EQ(f.pwrite_all(o, pattern(8, o, n)), 0) << c.last_error();
    moved += n;
  }
  ASSERT_EQ(f.fsync(), 0) << c.last_error();
  const auto after = stats_now();
  const std::string path = backing_dir(e) + "/resident_misaligned";
  const auto r = measure(path, e.id);
  if (e.id != 38) {
    EXPECT_EQ(delta(before, after, e.id, "write_split"), l.records.size());
  }

  // Which pages are resident, page by page.
  std::uint64_t edge_cached = 0, neighbour_cached = 0, other_cached = 0, edges = 0;
  std::string others;
  for (std::size_t p = 0; p < l.edge_page.size(); ++p) {
    cachestat_result cs{};
    ASSERT_EQ(cachestat_path(path, p * k_page, k_page, cs), 0);
    if (l.edge_page[p]) {
      ++edges;
      edge_cached += cs.nr_cache;
    } else if (cs.nr_cache != 0) {
      // XFS caches in large folios: the folio holding an edge page may
      // bring its neighbour along, so a page next to an edge page counts
      // apart from one far from any edge.
      const bool next_to_edge =
          (p > 0 && l.edge_page[p - 1]) || (p + 1 < l.edge_page.size() && l.edge_page[p + 1]);
      (next_to_edge ? neighbour_cached : other_cached) += cs.nr_cache;
      others += std::to_string(p) + " ";
    }
  }
  std::printf(
      "MEASURE residency write_misaligned export=%s records=%zu edge_pages=%llu edge_cached=%llu "
      "neighbour_cached=%llu other_cached=%llu total_cached_bytes=%llu moved=%llu\n",
      e.name, l.records.size(), static_cast<unsigned long long>(edges),
      static_cast<unsigned long long>(edge_cached), static_cast<unsigned long long>(neighbour_cached),
      static_cast<unsigned long long>(other_cached), static_cast<unsigned long long>(r.cached_bytes),
      static_cast<unsigned long long>(moved));
  if (e.cached_edges) {
    // Direct_Misaligned_Dontcache = false: the edges are plain cached
    // writes, so some of them stay; nothing away from the edges does.
    // (Most do not stay: the next WRITE's direct middle starts in the same
    // page and O_DIRECT invalidates the page cache over its range.)
    EXPECT_GT(edge_cached, 0u) << "cached edges expected to leave edge pages resident";
    EXPECT_EQ(other_cached, 0u) << "pages far from any edge are resident: " << others << "; cached: "
                                << cached_runs(path, l.records.back().first + l.records.back().second);
  } else {
    check(e, "write_misaligned", r.cached_bytes, moved);
  }
}

TEST_P(residency_test, read_uncached_file) {
  const export_def e = GetParam();
  REQUIRE_ENV(e);
  REQUIRE_CACHESTAT();
  // Written locally, then dropped from the cache, so every READ must go to
  // the device and the mode decides what stays.
  const std::string path = backing_dir(e) + "/resident_read";
  {
    const auto data = pattern(9, 0, k_residency_bytes);
    std::FILE* out = std::fopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr) << path << ": " << std::strerror(errno);
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), out), data.size());
    ASSERT_EQ(std::fclose(out), 0);
  }
  ASSERT_EQ(drop_local_cache(path), 0);
  cachestat_result pre{};
  ASSERT_EQ(cachestat_path(path, 0, 0, pre), 0);
  ASSERT_LE(pre.nr_cache * k_page, k_residency_bytes / 100) << "could not drop the file's cache first";

  nfs_client c(server(), std::string("/") + e.name, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  nfs_file f;
  ASSERT_EQ(c.open("/resident_read", O_RDONLY, f), 0) << c.last_error();
  // Aligned 1 MiB records, then (after dropping again) misaligned records
  // for the direct read mode, which widens and bounces those.
  std::vector<std::byte> buf(k_mib);
  const auto read_before = reset_stats();
  for (std::uint64_t o = 0; o < k_residency_bytes; o += k_mib) {
    ASSERT_EQ(f.pread_full(o, buf), static_cast<long long>(k_mib));
    ASSERT_EQ(first_difference(buf, pattern(9, o, k_mib)), -1) << "READ at " << o;
  }
  const auto read_after = stats_now();
  auto r = measure(path, e.id);
  // auto: a stream after its first 4 MiB, cached while the server's memory
  // (its group's, or the machine's) has room to spare (memory_free)
  check(e, "read_aligned", r.cached_bytes, k_residency_bytes,
        is(e.read_mode, "auto") ? auto_cached_pct(read_before, read_after, e.id, "read") : 0.0);
  if (!is(e.read_mode, "buffered") && r.cached_bytes > k_residency_bytes / 50)
    std::printf("  cached after read: %s\n", cached_runs(path, k_residency_bytes).c_str());

  if (!is(e.read_mode, "direct")) return;
  ASSERT_EQ(drop_local_cache(path), 0);
  const auto before = reset_stats();
  std::uint64_t moved = 0;
  std::vector<std::byte> rec(k_mib + 100);
  for (std::uint64_t o = 100; o + rec.size() <= k_residency_bytes; o += rec.size()) {
    ASSERT_EQ(f.pread_full(o, rec), static_cast<long long>(rec.size()));
    ASSERT_EQ(first_difference(rec, pattern(9, o, rec.size())), -1) << "READ at " << o;
    moved += rec.size();
  }
  const auto after = stats_now();
  EXPECT_GT(delta(before, after, e.id, "read_direct"), 0u);
  EXPECT_GT(delta(before, after, e.id, "read_bounce_copies"), 0u);
  r = measure(path, e.id);
  check(e, "read_misaligned", r.cached_bytes, moved);
}

INSTANTIATE_TEST_SUITE_P(modes, residency_test, ::testing::ValuesIn(select(false)),
                         [](const auto& p) { return param_name(p.param); });
INSTANTIATE_TEST_SUITE_P(modes, residency_direct, ::testing::ValuesIn(direct_exports(false)),
                         [](const auto& p) { return param_name(p.param); });

}  // namespace
}  // namespace dcache::e2e::modes
