// dcache_e2e_crash: the two halves of the crash test (tests/e2e/test_modes_crash.py).
//
//   dcache_e2e_crash write MANIFEST        (phase 1, against a server)
//   dcache_e2e_crash verify MANIFEST ROOT  (phase 2: ROOT is where the
//                                           recovered filesystem is mounted;
//                                           with a server (DCACHE_SERVER set)
//                                           the data is also read over NFS)
//
// Phase 1 writes, over NFSv3 with raw WRITE3/COMMIT3, data the server has
// acknowledged as durable (FILE_SYNC answers, COMMITs) and, as a control,
// data it has not (UNSTABLE, no COMMIT), and records every record in
// MANIFEST: "<export> <file> <seed> <offset> <length> <must_survive>".
// Phase 2 checks every must_survive record byte for byte and reports what
// became of the control records. Exit status: 0 ok, 1 durable data lost or
// damaged, 2 usage or setup error.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nfs_client.hpp"
#include "support.hpp"

using namespace dcache::e2e;
using namespace dcache::e2e::modes;

namespace {

struct record {
  std::string exp, file;
  std::uint64_t seed = 0, offset = 0, length = 0;
  bool must_survive = false;
};

struct write_case {
  const char* exp;  // pseudo path / directory under DCACHE_MNT
  const char* file;
  stable_how how;     // what the WRITEs ask for
  bool commit;        // COMMIT afterwards
  bool must_survive;  // acknowledged durable by the server
};

const char* name_of(stable_how h) {
  return h == stable_how::unstable ? "UNSTABLE" : h == stable_how::data_sync ? "DATA_SYNC" : "FILE_SYNC";
}

int do_write(const std::string& manifest) {
  const std::string server = env_or_empty("DCACHE_SERVER");
  if (server.empty()) {
    std::fprintf(stderr, "DCACHE_SERVER not set: run through tests/e2e/test_modes_crash.py\n");
    return 2;
  }
  const std::vector<write_case> cases = {
      // raised stability: UNSTABLE requests answered FILE_SYNC
      {"m_direct_data_sync", "raised", stable_how::unstable, false, true},
      {"m_direct_file_sync", "raised", stable_how::unstable, false, true},
      // the client's own FILE_SYNC in the other modes
      {"m_buffered", "file_sync", stable_how::file_sync, false, true},
      {"m_dontcache", "file_sync", stable_how::file_sync, false, true},
      {"m_direct", "file_sync", stable_how::file_sync, false, true},
      // UNSTABLE + COMMIT
      {"m_buffered", "committed", stable_how::unstable, true, true},
      {"m_dontcache", "committed", stable_how::unstable, true, true},
      {"m_direct", "committed", stable_how::unstable, true, true},
      // control: UNSTABLE, never committed (may be lost)
      {"m_buffered", "uncommitted", stable_how::unstable, false, false},
      {"m_direct", "uncommitted", stable_how::unstable, false, false},
  };
  std::ofstream out(manifest);
  if (!out) {
    std::fprintf(stderr, "%s: cannot write: %s\n", manifest.c_str(), std::strerror(errno));
    return 2;
  }
  constexpr int k_writes = 8;
  constexpr std::uint64_t k_len = 256 * 1024 + 100;  // misaligned: direct modes split
  std::uint64_t seed = 100;
  for (const auto& wc : cases) {
    nfs_client c(server, std::string("/") + wc.exp, nfs_version::v3);
    if (c.status() != 0) {
      std::fprintf(stderr, "mount /%s: %s\n", wc.exp, c.last_error().c_str());
      return 2;
    }
    raw_v3_file f;
    if (f.create(c, std::string("/") + wc.file) != 0) {
      std::fprintf(stderr, "create /%s/%s: %s\n", wc.exp, wc.file, c.last_error().c_str());
      return 2;
    }
    ++seed;
    for (int i = 0; i < k_writes; ++i) {
      const std::uint64_t off = 100 + static_cast<std::uint64_t>(i) * k_len;
      std::vector<std::byte> data(k_len);
      fill_pattern(data, seed, off);
      stable_how got{};
      std::string why;
      if (f.write(off, data, wc.how, got, why) != static_cast<long long>(k_len)) {
        std::fprintf(stderr, "WRITE /%s/%s at %llu: %s\n", wc.exp, wc.file,
                     static_cast<unsigned long long>(off), why.c_str());
        return 2;
      }
      // Only what the server acknowledged as durable may be required to
      // survive; an UNSTABLE answer without COMMIT is the control.
      const bool acked = got == stable_how::file_sync || wc.commit;
      if (acked != wc.must_survive) {
        std::fprintf(stderr, "/%s/%s: %s WRITE answered %s, expected %s\n", wc.exp, wc.file, name_of(wc.how),
                     name_of(got), wc.must_survive ? "durable" : "UNSTABLE");
        return 1;
      }
    }
    if (wc.commit) {
      std::string why;
      if (f.commit(0, 0, why) != 0) {
        std::fprintf(stderr, "COMMIT /%s/%s: %s\n", wc.exp, wc.file, why.c_str());
        return 2;
      }
    }
    out << wc.exp << ' ' << wc.file << ' ' << seed << ' ' << 100 << ' ' << k_len * k_writes << ' '
        << (wc.must_survive ? 1 : 0) << '\n';
  }
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: write failed\n", manifest.c_str());
    return 2;
  }
  std::printf("crash phase 1: %zu files written, manifest %s\n", cases.size(), manifest.c_str());
  return 0;
}

// "intact", "lost" (missing/short/zeroes) or "damaged" (other bytes).
std::string judge(const std::vector<std::byte>& got, const record& r, int rc) {
  if (rc != 0 || got.size() < r.offset + r.length) return "lost";
  std::vector<std::byte> want(r.length);
  fill_pattern(want, r.seed, r.offset);
  const auto part = std::span<const std::byte>(got).subspan(r.offset, r.length);
  if (first_difference(part, want) == -1) return "intact";
  for (const auto b : part)
    if (b != std::byte{0}) return "damaged";
  return "lost";
}

int do_verify(const std::string& manifest, const std::string& root) {
  std::ifstream in(manifest);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read: %s\n", manifest.c_str(), std::strerror(errno));
    return 2;
  }
  std::vector<record> recs;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    record r;
    int must = 0;
    if (!(ls >> r.exp >> r.file >> r.seed >> r.offset >> r.length >> must)) {
      std::fprintf(stderr, "%s: bad line '%s'\n", manifest.c_str(), line.c_str());
      return 2;
    }
    r.must_survive = must != 0;
    recs.push_back(r);
  }
  const std::string server = env_or_empty("DCACHE_SERVER");
  int failures = 0, control_lost = 0, controls = 0;
  for (const auto& r : recs) {
    std::vector<std::byte> local;
    const int lrc = read_local_file(root + "/" + r.exp + "/" + r.file, local);
    std::string verdict = "local " + judge(local, r, lrc);
    bool ok = judge(local, r, lrc) == "intact";
    if (!server.empty()) {
      nfs_client c(server, "/" + r.exp, nfs_version::v3);
      std::vector<std::byte> remote;
      const int nrc = c.status() == 0 ? c.read_file("/" + r.file, remote) : c.status();
      verdict += ", nfs " + judge(remote, r, nrc);
      ok = ok && judge(remote, r, nrc) == "intact";
    }
    std::printf("crash phase 2: /%s/%s (%s): %s\n", r.exp.c_str(), r.file.c_str(),
                r.must_survive ? "acknowledged durable" : "control, never committed", verdict.c_str());
    if (r.must_survive && !ok) ++failures;
    if (!r.must_survive) {
      ++controls;
      if (!ok) ++control_lost;
    }
  }
  std::printf(
      "crash phase 2: %d acknowledged file(s) damaged or lost; %d of %d uncommitted control file(s) lost%s\n",
      failures, control_lost, controls,
      control_lost == 0 ? " (the shutdown did not lose unacknowledged data: the check cannot tell the "
                          "difference on this setup)"
                        : " (so the shutdown does lose unacknowledged data)");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "write") == 0) return do_write(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "verify") == 0) return do_verify(argv[2], argv[3]);
  std::fprintf(stderr, "usage: %s write MANIFEST | verify MANIFEST ROOT\n", argv[0]);
  return 2;
}
