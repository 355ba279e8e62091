// End-to-end tests of the cache modes, continued (modes_test.cpp):
//
//   3. stability: what each mode answers to UNSTABLE / FILE_SYNC WRITEs and
//      how many syncs it does (the plugin's counters over DBus);
//   4. fallbacks on tmpfs (no RWF_DONTCACHE, no DIO alignment).
#include "modes.hpp"

namespace dcache::e2e::modes {
namespace {

// ============================================================= 3. stability ==

class stability : public ::testing::TestWithParam<export_def> {};

const char* name_of(stable_how h) {
  switch (h) {
    case stable_how::unstable:
      return "UNSTABLE";
    case stable_how::data_sync:
      return "DATA_SYNC";
    case stable_how::file_sync:
      return "FILE_SYNC";
  }
  return "?";
}

TEST_P(stability, reply_and_sync_count_per_mode) {
  const export_def e = GetParam();
  REQUIRE_ENV(e);
  nfs_client c(server(), std::string("/") + e.name, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  raw_v3_file f;
  ASSERT_EQ(f.create(c, "/stability"), 0) << c.last_error();
  constexpr int k_writes = 6;
  const std::uint64_t len = 65536 + 1000;  // misaligned: direct modes split
  std::string why;
  // WRITEs sent beyond k_writes: the rest of a short reply, sent again as
  // an NFS client does (a short count is an answer NFS allows; the
  // filesystem gave one once, under another test's load, on m_fadvise)
  std::uint64_t resent = 0;

  auto run = [&](stable_how how, std::uint64_t base, stable_how& answered) {
    answered = stable_how::file_sync;
    resent = 0;
    for (int i = 0; i < k_writes; ++i) {
      const std::uint64_t o = base + static_cast<std::uint64_t>(i) * len;
      const std::vector<std::byte> data = pattern(11, o, len);
      std::uint64_t done = 0;
      while (done < len) {
        stable_how got{};
        const long long n = f.write(o + done, std::span(data).subspan(done), how, got, why);
        ASSERT_GT(n, 0) << "WRITE of " << len - done << " bytes at " << o + done << ": " << why;
        if (done == 0 && i == 0) answered = got;
        ASSERT_EQ(got, answered) << "the answer changed between WRITEs";
        if (done > 0) ++resent;
        if (static_cast<std::uint64_t>(n) < len - done)
          std::printf("MEASURE short_reply export=%s offset=%llu asked=%llu written=%lld\n", e.name,
                      static_cast<unsigned long long>(o + done), static_cast<unsigned long long>(len - done),
                      n);
        done += static_cast<std::uint64_t>(n);
      }
    }
  };

  // UNSTABLE requests.
  auto s0 = reset_stats();
  stable_how answered{};
  run(stable_how::unstable, 0, answered);
  if (HasFatalFailure()) return;
  auto s1 = stats_now();
  const auto fsyncs = delta(s0, s1, e.id, "syncs_fsync");
  const auto fdatasyncs = delta(s0, s1, e.id, "syncs_fdatasync");
  const auto raised = delta(s0, s1, e.id, "writes_raised_stable");
  std::printf(
      "MEASURE stability export=%s write=%s request=UNSTABLE answered=%s writes=%llu fsync=%llu "
      "fdatasync=%llu raised=%llu\n",
      e.name, e.write_mode, name_of(answered), static_cast<unsigned long long>(delta(s0, s1, e.id, "writes")),
      static_cast<unsigned long long>(fsyncs), static_cast<unsigned long long>(fdatasyncs),
      static_cast<unsigned long long>(raised));
  const std::uint64_t sent = k_writes + resent;
  EXPECT_EQ(delta(s0, s1, e.id, "writes"), sent);
  if (is(e.write_mode, "direct_data_sync")) {
    EXPECT_EQ(answered, stable_how::file_sync);
    EXPECT_EQ(fdatasyncs, sent) << "one fdatasync per WRITE";
    EXPECT_EQ(fsyncs, 0u);
    EXPECT_EQ(raised, sent);
  } else if (is(e.write_mode, "direct_file_sync")) {
    EXPECT_EQ(answered, stable_how::file_sync);
    EXPECT_EQ(fsyncs, sent) << "one fsync per WRITE";
    EXPECT_EQ(fdatasyncs, 0u);
    EXPECT_EQ(raised, sent);
  } else {
    EXPECT_EQ(answered, stable_how::unstable);
    EXPECT_EQ(fsyncs + fdatasyncs, 0u) << "an UNSTABLE WRITE in mode " << e.write_mode << " must not sync";
    EXPECT_EQ(raised, 0u);
  }

  // FILE_SYNC and DATA_SYNC requests: answered FILE_SYNC in every mode,
  // one fsync each (a client's own stable request is always fsync'd).
  for (const auto how : {stable_how::file_sync, stable_how::data_sync}) {
    s0 = reset_stats();
    run(how, 16 * k_mib * (how == stable_how::file_sync ? 1 : 2), answered);
    if (HasFatalFailure()) return;
    s1 = stats_now();
    std::printf("MEASURE stability export=%s write=%s request=%s answered=%s fsync=%llu fdatasync=%llu\n",
                e.name, e.write_mode, name_of(how), name_of(answered),
                static_cast<unsigned long long>(delta(s0, s1, e.id, "syncs_fsync")),
                static_cast<unsigned long long>(delta(s0, s1, e.id, "syncs_fdatasync")));
    EXPECT_EQ(answered, stable_how::file_sync) << "request " << name_of(how);
    EXPECT_EQ(delta(s0, s1, e.id, "syncs_fsync"), k_writes + resent);
    EXPECT_EQ(delta(s0, s1, e.id, "syncs_fdatasync"), 0u);
    EXPECT_EQ(delta(s0, s1, e.id, "writes_reply_stable"), k_writes + resent);
    EXPECT_EQ(delta(s0, s1, e.id, "writes_raised_stable"), 0u);
  }

  // COMMIT is counted.
  s0 = reset_stats();
  ASSERT_EQ(f.commit(0, 0, why), 0) << why;
  s1 = stats_now();
  EXPECT_EQ(delta(s0, s1, e.id, "commits"), 1u);

  // What libnfs's own nfs_pwrite asks for (informational: it decides which
  // tests must use the raw WRITE3 above).
  nfs_file lf;
  ASSERT_EQ(c.open("/stability", O_RDWR, lf), 0) << c.last_error();
  s0 = reset_stats();
  ASSERT_EQ(lf.pwrite_all(0, pattern(12, 0, 4096)), 0) << c.last_error();
  s1 = stats_now();
  std::printf("MEASURE libnfs_pwrite export=%s reply_stable=%llu raised=%llu\n", e.name,
              static_cast<unsigned long long>(delta(s0, s1, e.id, "writes_reply_stable")),
              static_cast<unsigned long long>(delta(s0, s1, e.id, "writes_raised_stable")));
}

std::vector<export_def> stability_exports() {
  std::vector<export_def> out;
  for (const auto& e : select(false))
    if (e.id <= 36) out.push_back(e);
  return out;
}

INSTANTIATE_TEST_SUITE_P(modes, stability, ::testing::ValuesIn(stability_exports()),
                         [](const auto& p) { return param_name(p.param); });

// ============================================================= 4. fallbacks ==

class fallback : public ::testing::TestWithParam<export_def> {};

// Lines of the server log mentioning export id and containing needle.
int count_log_lines(int id, const std::string& needle) {
  std::ifstream in(env_or_empty("DCACHE_LOG"));
  const std::string tag = "export " + std::to_string(id) + " (";
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    if (line.find(tag) != std::string::npos && line.find(needle) != std::string::npos) ++n;
  return n;
}

TEST_P(fallback, tmpfs_serves_correct_data_and_counts_the_fallback) {
  const export_def e = GetParam();
  REQUIRE_ENV(e);
  nfs_client c(server(), std::string("/") + e.name, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  const auto s0 = reset_stats();
  // Two files, misaligned and aligned WRITEs and READs.
  for (const char* name : {"/fallback_a", "/fallback_b"}) {
    nfs_file f;
    ASSERT_EQ(c.create(name, O_RDWR, 0644, f), 0) << c.last_error();
    const auto data = pattern(13, 100, 2 * k_mib + 100);
    ASSERT_EQ(f.pwrite_all(100, data), 0) << c.last_error();
    ASSERT_EQ(f.pwrite_all(4 * k_mib, pattern(13, 4 * k_mib, k_mib)), 0) << c.last_error();
    ASSERT_EQ(f.fsync(), 0) << c.last_error();
    std::vector<std::byte> got(data.size());
    ASSERT_EQ(f.pread_full(100, got), static_cast<long long>(got.size()));
    ASSERT_EQ(first_difference(got, data), -1);
    std::vector<std::byte> aligned(k_mib);
    ASSERT_EQ(f.pread_full(4 * k_mib, aligned), static_cast<long long>(k_mib));
    ASSERT_EQ(first_difference(aligned, pattern(13, 4 * k_mib, k_mib)), -1);
    std::vector<std::byte> local;
    ASSERT_EQ(read_local_file(backing_dir(e) + name, local), 0);
    ASSERT_EQ(local.size(), 5 * k_mib);
    ASSERT_EQ(first_difference(std::span<const std::byte>(local).subspan(100, data.size()), data), -1);
  }
  const auto s1 = stats_now();
  const auto no_dontcache = delta(s0, s1, e.id, "fallback_no_dontcache");
  const auto w_noalign = delta(s0, s1, e.id, "write_not_direct_no_alignment");
  const auto r_noalign = delta(s0, s1, e.id, "read_not_direct_no_alignment");
  const int dontcache_lines = count_log_lines(e.id, "RWF_DONTCACHE not supported");
  const int noalign_lines = count_log_lines(e.id, "no direct-I/O alignment");
  std::printf(
      "MEASURE fallback export=%s fallback_no_dontcache=%llu write_no_alignment=%llu "
      "read_no_alignment=%llu write_direct=%llu read_direct=%llu log_no_dontcache=%d log_no_alignment=%d\n",
      e.name, static_cast<unsigned long long>(no_dontcache), static_cast<unsigned long long>(w_noalign),
      static_cast<unsigned long long>(r_noalign),
      static_cast<unsigned long long>(delta(s0, s1, e.id, "write_direct") +
                                      delta(s0, s1, e.id, "write_split")),
      static_cast<unsigned long long>(delta(s0, s1, e.id, "read_direct")), dontcache_lines, noalign_lines);

  const bool uses_dontcache = is(e.write_mode, "dontcache") || write_direct_family(e);
  if (uses_dontcache) {
    EXPECT_GT(no_dontcache, 0u) << "tmpfs has no RWF_DONTCACHE: the fallback must be counted";
    EXPECT_EQ(dontcache_lines, 1) << "the RWF_DONTCACHE fallback must be logged exactly once per export";
  } else {
    EXPECT_EQ(no_dontcache, 0u) << "mode " << e.write_mode << " never asks for RWF_DONTCACHE";
    EXPECT_EQ(dontcache_lines, 0);
  }
  if (write_direct_family(e)) {
    EXPECT_GT(w_noalign, 0u) << "tmpfs reports no DIO alignment: direct WRITEs must be counted as not direct";
    EXPECT_GT(r_noalign, 0u) << "tmpfs reports no DIO alignment: direct READs must be counted as not direct";
    EXPECT_EQ(delta(s0, s1, e.id, "write_direct") + delta(s0, s1, e.id, "write_split"), 0u);
    EXPECT_EQ(delta(s0, s1, e.id, "read_direct"), 0u);
    EXPECT_EQ(delta(s0, s1, e.id, "direct_bytes"), 0u);
    EXPECT_GE(noalign_lines, 1) << "the reason (no direct-I/O alignment) must be in the log";
  } else {
    EXPECT_EQ(w_noalign + r_noalign, 0u);
    EXPECT_EQ(noalign_lines, 0);
  }
}

// docs/configuration.md: "Each fallback is counted per export and logged
// once, with the reason". Two files per export, so a per-file line shows.
class fallback_log : public ::testing::TestWithParam<export_def> {};

TEST_P(fallback_log, no_alignment_reason_logged_once_per_export) {
  const export_def e = GetParam();
  REQUIRE_ENV(e);
  nfs_client c(server(), std::string("/") + e.name, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << c.last_error();
  for (const char* name : {"/log_once_a", "/log_once_b"}) {
    nfs_file f;
    ASSERT_EQ(c.create(name, O_RDWR, 0644, f), 0) << c.last_error();
    ASSERT_EQ(f.pwrite_all(0, pattern(14, 0, 65536)), 0) << c.last_error();
  }
  EXPECT_EQ(count_log_lines(e.id, "no direct-I/O alignment"), 1)
      << "the no-alignment fallback is logged per file (at DEBUG), not once per export";
}

INSTANTIATE_TEST_SUITE_P(modes, fallback, ::testing::ValuesIn(select(true)),
                         [](const auto& p) { return param_name(p.param); });
INSTANTIATE_TEST_SUITE_P(modes, fallback_log, ::testing::ValuesIn(direct_exports(true)),
                         [](const auto& p) { return param_name(p.param); });

}  // namespace
}  // namespace dcache::e2e::modes
