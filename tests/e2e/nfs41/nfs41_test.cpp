// NFSv4.1 end-to-end tests: data and "no export escape" over sessions.
//
// Run by tests/e2e/test_nfs41.py (env DCACHE_SERVER, DCACHE_MNT):
// exports /vfs (Export_Id 1, plain VFS, $DCACHE_MNT/vfs) and /dcache
// (Export_Id 2, DCACHE over VFS, $DCACHE_MNT/dcache). Every test runs
// against both where it makes sense; the backing files are read on the host
// side to check what actually reached XFS.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nfs41_client.hpp"

namespace dcache_e2e::nfs41 {
namespace {

namespace fs = std::filesystem;

std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    std::fprintf(stderr,
                 "dcache_e2e_nfs41: environment variable %s is not set; run me through "
                 "tests/e2e/test_nfs41.py\n",
                 name);
    std::exit(2);
  }
  return v;
}

uint64_t host_ino(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    ADD_FAILURE() << "stat(" << p << "): " << std::strerror(errno);
    return 0;
  }
  return st.st_ino;
}

bytes host_read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open backing file " << p;
    return {};
  }
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Byte at absolute file offset `off` for a given seed: any range of a file
// can be regenerated without keeping the whole file.
uint8_t pattern_byte(uint32_t seed, uint64_t off) {
  uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t{seed} << 32 | seed);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint8_t>(x);
}

bytes pattern(uint32_t seed, uint64_t off, size_t len) {
  bytes b(len);
  for (size_t i = 0; i < len; ++i) b[i] = pattern_byte(seed, off + i);
  return b;
}

// First differing offset, for a readable failure instead of a 4 MiB dump.
std::string first_difference(const bytes& got, const bytes& want) {
  if (got == want) return "identical";
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      return "first difference at offset " + std::to_string(i) + " (got " + std::to_string(got[i]) +
             ", want " + std::to_string(want[i]) + "), sizes " + std::to_string(got.size()) + " vs " +
             std::to_string(want.size());
  return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
}

struct export_info {
  std::string pseudo;    // "/vfs"
  std::string host_rel;  // "vfs", relative to DCACHE_MNT
};
// gtest prints parameters in failure lines; show the export, not bytes.
void PrintTo(const export_info& e, std::ostream* os) {
  *os << e.pseudo;
}

const export_info k_vfs{"/vfs", "vfs"};
const export_info k_dcache{"/dcache", "dcache"};

// Fails the calling test with op name and status when an NFS call fails.
#define ASSERT_NFS_OK(expr)                                         \
  do {                                                              \
    const uint32_t st_ = (expr);                                    \
    ASSERT_EQ(st_, NFS4_OK) << #expr << " -> " << status_name(st_); \
  } while (0)

class nfs41_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    _server = env_or_die("DCACHE_SERVER");
    _mnt = env_or_die("DCACHE_MNT");
    ASSERT_NO_THROW(_client = std::make_unique<client>(_server));
  }

  // Export root handle; also sizes READ/WRITE to the export's limits.
  bytes export_root(client& c, const export_info& e) {
    auto [st, fh] = c.lookup_path(e.pseudo);
    EXPECT_EQ(st, NFS4_OK) << "PUTROOTFH; LOOKUP " << e.pseudo << " -> " << status_name(st);
    if (st != NFS4_OK) return {};
    auto [ast, a] = c.getattr(fh);
    EXPECT_EQ(ast, NFS4_OK);
    EXPECT_TRUE(a.maxread && a.maxwrite) << "export root has no maxread/maxwrite";
    _export_maxread = a.maxread.value_or(0);
    _export_maxwrite = a.maxwrite.value_or(0);
    // Never above what this export allows.
    c.set_max_io(static_cast<uint32_t>(
        std::min<uint64_t>({c.max_io(), a.maxread.value_or(4096), a.maxwrite.value_or(4096)})));
    return fh;
  }

  fs::path host_dir(const export_info& e) const { return _mnt / e.host_rel; }

  std::string _server;
  fs::path _mnt;
  std::unique_ptr<client> _client;
  uint64_t _export_maxread = 0, _export_maxwrite = 0;
};

// ================================================================ data ==

class data41 : public nfs41_fixture, public ::testing::WithParamInterface<export_info> {};

struct range {
  uint64_t offset;
  size_t len;
  stable_how how;
};

// Aligned and misaligned ranges from 1 byte to 4 MiB (larger than one
// WRITE, so write_all splits them), with every stability level.
const std::vector<range> k_ranges = {
    {0, 1, stable_how::file_sync},
    {1, 4095, stable_how::unstable},
    {4095, 2, stable_how::data_sync},
    {4096, 4096, stable_how::file_sync},
    {12345, 65543, stable_how::unstable},
    {(1u << 20) - 3, (1u << 20) + 6, stable_how::data_sync},
    {(3u << 20) + 17, 4u << 20, stable_how::unstable},
    {512, 512, stable_how::file_sync},
    {(7u << 20) + 100, 1, stable_how::file_sync},
};

// Applies k_ranges to `name` under `dir` (seeded by range index), commits,
// closes; returns the expected file content.
bytes write_ranges(client& c, const bytes& dir, const std::string& name) {
  bytes model;
  auto o = c.open(dir, name, true, share_access::both);
  EXPECT_EQ(o.status, NFS4_OK) << "OPEN(create) " << name << " -> " << status_name(o.status);
  if (o.status != NFS4_OK) return model;
  for (size_t i = 0; i < k_ranges.size(); ++i) {
    const auto& r = k_ranges[i];
    const bytes data = pattern(static_cast<uint32_t>(i), r.offset, r.len);
    auto w = c.write_all(o.fh, o.stateid, r.offset, data, r.how);
    EXPECT_EQ(w.status, NFS4_OK) << "WRITE range " << i << " -> " << status_name(w.status);
    EXPECT_EQ(w.count, r.len) << "short WRITE for range " << i;
    // The server may commit more durably than asked, never less.
    EXPECT_GE(static_cast<uint32_t>(w.committed), static_cast<uint32_t>(r.how)) << "range " << i;
    if (model.size() < r.offset + r.len) model.resize(r.offset + r.len, 0);
    std::copy(data.begin(), data.end(), model.begin() + static_cast<long>(r.offset));
  }
  auto cm = c.commit(o.fh, 0, 0);
  EXPECT_EQ(cm.status, NFS4_OK) << "COMMIT -> " << status_name(cm.status);
  EXPECT_EQ(c.close(o.fh, o.stateid), NFS4_OK);
  return model;
}

TEST_P(data41, WriteMisalignedRangesReadBackAndOnDisk) {
  const auto& e = GetParam();
  const bytes root = export_root(*_client, e);
  ASSERT_FALSE(root.empty());
  ASSERT_GE(_client->max_io(), 4096u);
  std::printf(
      "%s: export maxread %llu maxwrite %llu; client READ/WRITE size %u; session max "
      "request %u response %u\n",
      e.pseudo.c_str(), static_cast<unsigned long long>(_export_maxread),
      static_cast<unsigned long long>(_export_maxwrite), _client->max_io(), _client->max_request_size(),
      _client->max_response_size());
  // The 4 MiB range must take several WRITEs, or the splitting is untested.
  ASSERT_LT(_client->max_io(), 4u << 20);

  const bytes model = write_ranges(*_client, root, "ranges");
  ASSERT_FALSE(HasFailure());

  auto o = _client->open(root, "ranges", false, share_access::read);
  ASSERT_NFS_OK(o.status);
  auto [ast, a] = _client->getattr(o.fh);
  ASSERT_NFS_OK(ast);
  EXPECT_EQ(a.size, model.size());
  EXPECT_EQ(a.type, file_type::reg);
  EXPECT_EQ(a.fileid, host_ino(host_dir(e) / "ranges"));

  // Whole file, then each range on its own (misaligned reads).
  auto whole = _client->read_all(o.fh, o.stateid, 0, model.size() + 4096);
  ASSERT_NFS_OK(whole.status);
  EXPECT_TRUE(whole.eof);
  EXPECT_TRUE(whole.data == model) << first_difference(whole.data, model);
  for (size_t i = 0; i < k_ranges.size(); ++i) {
    const auto& r = k_ranges[i];
    auto got = _client->read_all(o.fh, o.stateid, r.offset, r.len);
    ASSERT_NFS_OK(got.status);
    const bytes want(model.begin() + static_cast<long>(r.offset),
                     model.begin() + static_cast<long>(r.offset + r.len));
    EXPECT_TRUE(got.data == want) << "range " << i << ": " << first_difference(got.data, want);
  }
  // Reading past the end: nothing, and eof.
  auto past = _client->read(o.fh, o.stateid, model.size() + 10, 100);
  ASSERT_NFS_OK(past.status);
  EXPECT_TRUE(past.data.empty());
  EXPECT_TRUE(past.eof);
  ASSERT_NFS_OK(_client->close(o.fh, o.stateid));

  const bytes on_disk = host_read(host_dir(e) / "ranges");
  EXPECT_TRUE(on_disk == model) << "backing file: " << first_difference(on_disk, model);
}

TEST_P(data41, UnstableWriteThenCommitKeepsVerifier) {
  const auto& e = GetParam();
  const bytes root = export_root(*_client, e);
  ASSERT_FALSE(root.empty());
  auto o = _client->open(root, "unstable", true, share_access::both);
  ASSERT_NFS_OK(o.status);
  const size_t len = (2u << 20) + 333;
  const bytes data = pattern(77, 5, len);
  auto w = _client->write_all(o.fh, o.stateid, 5, data, stable_how::unstable);
  ASSERT_NFS_OK(w.status);
  ASSERT_EQ(w.count, len);
  auto c = _client->commit(o.fh, 0, 0);
  ASSERT_NFS_OK(c.status);
  // Same boot instance: the COMMIT verifier must match the WRITEs', or a
  // client would resend everything (RFC 8881 18.3.4).
  EXPECT_EQ(c.verifier, w.verifier);
  // A FILE_SYNC4 write must come back FILE_SYNC4.
  const bytes tail = pattern(78, 5 + len, 1000);
  auto fsw = _client->write(o.fh, o.stateid, 5 + len, tail, stable_how::file_sync);
  ASSERT_NFS_OK(fsw.status);
  EXPECT_EQ(fsw.committed, stable_how::file_sync);
  EXPECT_EQ(fsw.verifier, w.verifier);
  ASSERT_NFS_OK(_client->close(o.fh, o.stateid));

  bytes want(5, 0);
  want.insert(want.end(), data.begin(), data.end());
  want.insert(want.end(), tail.begin(), tail.end());
  const bytes on_disk = host_read(host_dir(e) / "unstable");
  EXPECT_TRUE(on_disk == want) << first_difference(on_disk, want);
}

// One WRITE and one READ as large as the session allows (Ganesha 4.3
// advertises 64 MiB maxwrite; the session negotiated ~4 MiB), misaligned.
TEST_P(data41, LargestSingleWriteAndRead) {
  const auto& e = GetParam();
  const bytes root = export_root(*_client, e);
  ASSERT_FALSE(root.empty());
  const uint32_t len = 4u << 20;
  _client->set_max_io(len);
  if (_client->max_io() < len || _export_maxwrite < len || _export_maxread < len)
    GTEST_SKIP() << "server or session does not allow a 4 MiB WRITE (maxwrite " << _export_maxwrite
                 << ", session I/O " << _client->max_io() << ")";
  auto o = _client->open(root, "big", true, share_access::both);
  ASSERT_NFS_OK(o.status);
  const bytes data = pattern(31, 4097, len);
  auto w = _client->write(o.fh, o.stateid, 4097, data, stable_how::data_sync);
  ASSERT_NFS_OK(w.status);
  EXPECT_EQ(w.count, len);
  EXPECT_GE(static_cast<uint32_t>(w.committed), static_cast<uint32_t>(stable_how::data_sync));
  auto r = _client->read(o.fh, o.stateid, 4097, len);
  ASSERT_NFS_OK(r.status);
  EXPECT_TRUE(r.data == data) << first_difference(r.data, data);
  EXPECT_TRUE(r.eof);
  ASSERT_NFS_OK(_client->close(o.fh, o.stateid));
  bytes want(4097, 0);
  want.insert(want.end(), data.begin(), data.end());
  const bytes on_disk = host_read(host_dir(e) / "big");
  EXPECT_TRUE(on_disk == want) << first_difference(on_disk, want);
}

TEST_P(data41, TruncateRenameReaddirRemove) {
  const auto& e = GetParam();
  const bytes root = export_root(*_client, e);
  ASSERT_FALSE(root.empty());
  const fs::path dir = host_dir(e);

  // OPEN without create of a missing file fails cleanly.
  EXPECT_EQ(_client->open(root, "no-such-file", false, share_access::read).status, NFS4ERR_NOENT);

  auto o = _client->open(root, "t1", true, share_access::both);
  ASSERT_NFS_OK(o.status);
  const bytes data = pattern(5, 0, 100000);
  auto w = _client->write_all(o.fh, o.stateid, 0, data, stable_how::file_sync);
  ASSERT_NFS_OK(w.status);

  // Shrink to a misaligned size.
  ASSERT_NFS_OK(_client->truncate(o.fh, o.stateid, 5001));
  EXPECT_EQ(_client->getattr(o.fh).second.size, 5001u);
  EXPECT_EQ(fs::file_size(dir / "t1"), 5001u);
  auto r = _client->read_all(o.fh, o.stateid, 0, 10000);
  ASSERT_NFS_OK(r.status);
  EXPECT_TRUE(r.eof);
  const bytes prefix(data.begin(), data.begin() + 5001);
  EXPECT_TRUE(r.data == prefix) << first_difference(r.data, prefix);
  // Grow: the new part reads as zeros.
  ASSERT_NFS_OK(_client->truncate(o.fh, o.stateid, 20000));
  r = _client->read_all(o.fh, o.stateid, 0, 30000);
  ASSERT_NFS_OK(r.status);
  bytes grown = prefix;
  grown.resize(20000, 0);
  EXPECT_TRUE(r.data == grown) << first_difference(r.data, grown);
  EXPECT_TRUE(host_read(dir / "t1") == grown);
  ASSERT_NFS_OK(_client->close(o.fh, o.stateid));

  // Rename within the export root.
  ASSERT_NFS_OK(_client->rename(root, "t1", root, "t2"));
  EXPECT_FALSE(fs::exists(dir / "t1"));
  EXPECT_TRUE(fs::exists(dir / "t2"));
  EXPECT_EQ(_client->lookup_path(e.pseudo + "/t1").first, NFS4ERR_NOENT);
  EXPECT_EQ(_client->lookup_path(e.pseudo + "/t2").first, NFS4_OK);

  // A few more names, then READDIR must list exactly what the host sees.
  for (const char* n : {"d-alpha", "d-beta", "d-gamma"}) {
    auto f = _client->open(root, n, true, share_access::write);
    ASSERT_NFS_OK(f.status);
    ASSERT_NFS_OK(_client->close(f.fh, f.stateid));
  }
  auto list_nfs = [&] {
    auto [st, entries] = _client->readdir(root);
    EXPECT_EQ(st, NFS4_OK);
    std::set<std::string> names;
    for (const auto& en : entries) {
      names.insert(en.name);
      if (en.fileid) {
        EXPECT_EQ(*en.fileid, host_ino(dir / en.name)) << en.name;
      }
    }
    return names;
  };
  auto list_host = [&] {
    std::set<std::string> names;
    for (const auto& en : fs::directory_iterator(dir)) names.insert(en.path().filename());
    return names;
  };
  auto names = list_nfs();
  EXPECT_EQ(names, list_host());
  EXPECT_TRUE(names.count("t2"));
  EXPECT_FALSE(names.count("t1"));
  EXPECT_TRUE(names.count("d-beta"));

  // Remove: gone from NFS and from the disk.
  ASSERT_NFS_OK(_client->remove(root, "t2"));
  EXPECT_EQ(_client->remove(root, "t2"), NFS4ERR_NOENT);
  EXPECT_FALSE(fs::exists(dir / "t2"));
  names = list_nfs();
  EXPECT_FALSE(names.count("t2"));
  EXPECT_EQ(names, list_host());
}

// OPEN UNCHECKED4 with size 0 (a shell's `>`) empties a file that exists,
// by itself (MDCACHE opens it by handle) and as an open upgrade of the
// owner's own open (reopen2); what is written after lands whole.
TEST_P(data41, OpenWithSizeZeroEmptiesTheFile) {
  const auto& e = GetParam();
  const bytes root = export_root(*_client, e);
  ASSERT_FALSE(root.empty());
  const fs::path on_host = host_dir(e) / "o1";
  auto o = _client->open(root, "o1", true, share_access::both);
  ASSERT_NFS_OK(o.status);
  ASSERT_NFS_OK(_client->write_all(o.fh, o.stateid, 0, pattern(7, 0, 100000), stable_how::file_sync).status);
  ASSERT_NFS_OK(_client->close(o.fh, o.stateid));

  o = _client->open(root, "o1", true, share_access::both, true);
  ASSERT_NFS_OK(o.status);
  EXPECT_EQ(_client->getattr(o.fh).second.size, 0u);
  EXPECT_EQ(fs::file_size(on_host), 0u);
  const bytes data = pattern(8, 0, 5000);
  ASSERT_NFS_OK(_client->write_all(o.fh, o.stateid, 0, data, stable_how::file_sync).status);
  EXPECT_TRUE(host_read(on_host) == data) << first_difference(host_read(on_host), data);

  // The same owner opens it again, truncating, while its open holds.
  auto again = _client->open(root, "o1", true, share_access::both, true);
  ASSERT_NFS_OK(again.status);
  EXPECT_EQ(_client->getattr(again.fh).second.size, 0u);
  EXPECT_EQ(fs::file_size(on_host), 0u);
  const bytes after = pattern(9, 0, 3000);
  ASSERT_NFS_OK(_client->write_all(again.fh, again.stateid, 0, after, stable_how::file_sync).status);
  auto r = _client->read_all(again.fh, again.stateid, 0, 10000);
  ASSERT_NFS_OK(r.status);
  EXPECT_TRUE(r.data == after) << first_difference(r.data, after);
  EXPECT_TRUE(host_read(on_host) == after) << first_difference(host_read(on_host), after);
  ASSERT_NFS_OK(_client->close(again.fh, again.stateid));
}

// Several sessions (separate clients, connections and client ids) write
// disjoint, misaligned ranges of one file at the same time.
TEST_P(data41, ConcurrentSessionsWriteDisjointRanges) {
  const auto& e = GetParam();
  constexpr int k_clients = 4;
  constexpr uint64_t k_span = (3u << 20) + 1234;  // per client; boundaries misaligned
  const bytes root = export_root(*_client, e);
  ASSERT_FALSE(root.empty());
  // Create it once so every client opens an existing file.
  auto o = _client->open(root, "shared", true, share_access::both);
  ASSERT_NFS_OK(o.status);
  ASSERT_NFS_OK(_client->close(o.fh, o.stateid));

  std::vector<std::string> errors(k_clients);
  std::vector<uint64_t> clientids(k_clients);
  std::vector<std::thread> threads;
  for (int t = 0; t < k_clients; ++t) {
    threads.emplace_back([&, t] {
      try {
        client c(_server);
        clientids[t] = c.clientid();
        auto [st, dir] = c.lookup_path(e.pseudo);
        if (st != NFS4_OK) throw nfs41_error("LOOKUP " + e.pseudo + ": " + status_name(st));
        auto f = c.open(dir, "shared", false, share_access::write);
        if (f.status != NFS4_OK) throw nfs41_error("OPEN: " + status_name(f.status));
        const uint64_t base = t * k_span;
        // Pieces of varying size so WRITEs from different sessions interleave.
        const stable_how how = t % 2 == 0 ? stable_how::unstable : stable_how::file_sync;
        for (uint64_t off = 0; off < k_span;) {
          const size_t n = std::min<uint64_t>(k_span - off, 100000 + 4099 * t);
          auto w = c.write(f.fh, f.stateid, base + off, pattern(9, base + off, n), how);
          if (w.status != NFS4_OK) throw nfs41_error("WRITE: " + status_name(w.status));
          if (w.count != n) throw nfs41_error("short WRITE " + std::to_string(w.count));
          off += n;
        }
        if (how == stable_how::unstable) {
          auto cm = c.commit(f.fh, base, static_cast<uint32_t>(k_span));
          if (cm.status != NFS4_OK) throw nfs41_error("COMMIT: " + status_name(cm.status));
        }
        if (uint32_t s = c.close(f.fh, f.stateid); s != NFS4_OK)
          throw nfs41_error("CLOSE: " + status_name(s));
      } catch (const std::exception& ex) {
        errors[t] = ex.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < k_clients; ++t) EXPECT_EQ(errors[t], "") << "client " << t;
  EXPECT_EQ(std::set<uint64_t>(clientids.begin(), clientids.end()).size(), size_t{k_clients})
      << "the sessions did not get distinct client ids";

  const bytes want = pattern(9, 0, k_clients * k_span);
  auto f = _client->open(root, "shared", false, share_access::read);
  ASSERT_NFS_OK(f.status);
  auto r = _client->read_all(f.fh, f.stateid, 0, want.size() + 1);
  ASSERT_NFS_OK(r.status);
  EXPECT_TRUE(r.data == want) << first_difference(r.data, want);
  ASSERT_NFS_OK(_client->close(f.fh, f.stateid));
  const bytes on_disk = host_read(host_dir(e) / "shared");
  EXPECT_TRUE(on_disk == want) << "backing file: " << first_difference(on_disk, want);
}

// Session teardown: DESTROY_SESSION and DESTROY_CLIENTID both succeed, and
// parallel clients get their own client ids and sessions.
TEST_F(nfs41_fixture, SessionsAreDistinctAndTearDownCleanly) {
  client other(_server);
  EXPECT_NE(other.clientid(), _client->clientid());
  EXPECT_NE(other.sessionid(), _client->sessionid());
  // Both sessions work side by side.
  EXPECT_EQ(other.lookup_path("/dcache").first, NFS4_OK);
  EXPECT_EQ(_client->lookup_path("/vfs").first, NFS4_OK);
  auto s = other.shutdown();
  EXPECT_EQ(s.destroy_session, NFS4_OK) << status_name(s.destroy_session);
  EXPECT_EQ(s.destroy_clientid, NFS4_OK) << status_name(s.destroy_clientid);
  EXPECT_THROW((void)other.compound({op::putrootfh()}), nfs41_error);
  // The other client's teardown left ours alone.
  EXPECT_EQ(_client->lookup_path("/dcache").first, NFS4_OK);
}

INSTANTIATE_TEST_SUITE_P(exports, data41, ::testing::Values(k_vfs, k_dcache),
                         [](const auto& p) { return p.param.host_rel; });

// The same writes through both exports leave byte-identical backing files.
TEST_F(nfs41_fixture, SameWritesGiveIdenticalBackingFiles) {
  const bytes vroot = export_root(*_client, k_vfs);
  const bytes droot = export_root(*_client, k_dcache);
  ASSERT_FALSE(vroot.empty());
  ASSERT_FALSE(droot.empty());
  const bytes vmodel = write_ranges(*_client, vroot, "twin");
  const bytes dmodel = write_ranges(*_client, droot, "twin");
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(vmodel, dmodel);
  const bytes vdisk = host_read(host_dir(k_vfs) / "twin");
  const bytes ddisk = host_read(host_dir(k_dcache) / "twin");
  EXPECT_TRUE(vdisk == ddisk) << "vfs vs dcache backing files: " << first_difference(vdisk, ddisk);
  EXPECT_TRUE(ddisk == dmodel) << first_difference(ddisk, dmodel);
}

// ============================================================== escape ==
//
// The NFSv4.0 versions are in tests/e2e/escape/escape_test.cpp; these are
// the same checks inside an NFSv4.1 session.

class escape41 : public nfs41_fixture, public ::testing::WithParamInterface<export_info> {
 protected:
  void SetUp() override {
    nfs41_fixture::SetUp();
    if (HasFatalFailure()) return;
    _xfs_root_ino = host_ino(_mnt);
    _host_root_ino = host_ino("/");
    auto r = _client->compound({op::putrootfh(), op::getfh(), op::getattr()});
    ASSERT_TRUE(r.ok()) << r.describe();
    _pseudo_fh = r.ops[1].fh;
    _pseudo = *r.ops[2].attrs;
    ASSERT_TRUE(_pseudo.fileid && _pseudo.fsid);
  }

  struct root_info {
    bytes fh;
    attributes attrs;
  };
  // PUTROOTFH; LOOKUP <export>; GETFH; GETATTR
  root_info walk_to_root(const export_info& e) {
    auto r = _client->compound({op::putrootfh(), op::lookup(e.pseudo.substr(1)), op::getfh(), op::getattr()});
    EXPECT_TRUE(r.ok()) << e.pseudo << ": " << r.describe();
    if (!r.ok()) return {};
    return {r.ops[2].fh, *r.ops[3].attrs};
  }

  // Outside the export: the XFS root (the parent of every export
  // directory) or anything carrying the host root's inode number on the
  // XFS filesystem. The pseudo root is the one allowed place above.
  bool outside(const attributes& a, const attributes& export_root_attrs) const {
    if (a.fsid == _pseudo.fsid && a.fileid == _pseudo.fileid) return false;
    if (a.fsid != export_root_attrs.fsid) return true;  // neither pseudo fs nor the export's fs
    return a.fileid == _xfs_root_ino || a.fileid == _host_root_ino;
  }

  uint64_t _xfs_root_ino = 0, _host_root_ino = 0;
  bytes _pseudo_fh;
  attributes _pseudo;
};

TEST_P(escape41, LookuppAtExportRootReturnsPseudoRoot) {
  const auto& e = GetParam();
  const auto root = walk_to_root(e);
  ASSERT_FALSE(root.fh.empty());
  ASSERT_EQ(root.attrs.fileid, host_ino(host_dir(e))) << "LOOKUP did not reach the export directory";
  ASSERT_NE(root.attrs.fsid, _pseudo.fsid) << "export root reported the pseudo fs's fsid";

  auto r = _client->compound({op::putfh(root.fh), op::lookupp(), op::getfh(), op::getattr()});
  ASSERT_TRUE(r.ok()) << r.describe();
  const attributes& up = *r.ops[3].attrs;
  EXPECT_EQ(up.fileid, _pseudo.fileid) << "LOOKUPP did not reach the pseudo root";
  EXPECT_EQ(up.fsid, _pseudo.fsid);
  EXPECT_EQ(up.type, file_type::dir);
  EXPECT_EQ(r.ops[2].fh, _pseudo_fh) << "LOOKUPP's handle is not the pseudo root's";
  EXPECT_NE(up.fsid, root.attrs.fsid) << "LOOKUPP stayed on the export's (XFS) filesystem";
  EXPECT_FALSE(up.fsid == root.attrs.fsid && up.fileid == _xfs_root_ino)
      << "LOOKUPP reached the backing filesystem's root (" << _mnt << ")";
  // And the handle it gives is usable: LOOKUP <export> from it comes back.
  auto back = _client->compound({op::putfh(r.ops[2].fh), op::lookup(e.pseudo.substr(1)), op::getattr()});
  ASSERT_TRUE(back.ok()) << back.describe();
  EXPECT_EQ(back.ops[2].attrs->fileid, root.attrs.fileid);
}

TEST_P(escape41, LookupLookupThenThreeLookuppNeverLeave) {
  const auto& e = GetParam();
  fs::create_directories(host_dir(e) / "a" / "b");
  const uint64_t a_ino = host_ino(host_dir(e) / "a");
  const auto root = walk_to_root(e);
  ASSERT_FALSE(root.fh.empty());
  auto r =
      _client->compound({op::putfh(root.fh), op::lookup("a"), op::lookup("b"), op::lookupp(), op::getattr(),
                         op::lookupp(), op::getattr(), op::lookupp(), op::getattr(), op::getfh()});
  ASSERT_TRUE(r.ok()) << r.describe();
  ASSERT_EQ(r.ops.size(), 10u);
  EXPECT_EQ(r.ops[4].attrs->fileid, a_ino);
  EXPECT_EQ(r.ops[6].attrs->fileid, root.attrs.fileid);
  EXPECT_EQ(r.ops[8].attrs->fileid, _pseudo.fileid);
  EXPECT_EQ(r.ops[8].attrs->fsid, _pseudo.fsid);
  for (int i : {4, 6, 8})
    EXPECT_FALSE(outside(*r.ops[i].attrs, root.attrs))
        << "after op " << i << ": fileid " << r.ops[i].attrs->fileid.value_or(0) << " is outside the export"
        << " (xfs root ino " << _xfs_root_ino << ", host / ino " << _host_root_ino << ")";
  // One more LOOKUPP from the pseudo root has nowhere to go.
  auto top = _client->compound({op::putfh(r.ops[9].fh), op::lookupp(), op::getattr()});
  EXPECT_EQ(top.status, NFS4ERR_NOENT) << top.describe();
}

INSTANTIATE_TEST_SUITE_P(exports, escape41, ::testing::Values(k_vfs, k_dcache),
                         [](const auto& p) { return p.param.host_rel; });

// /vfs and /dcache must answer the same walk the same way.
class escape41_both : public escape41 {};

TEST_F(escape41_both, VfsAndDcacheAnswerTheSame) {
  struct walk {
    std::vector<uint32_t> statuses;
    std::vector<uint64_t> rel;  // 0 = export root, 1 = "a", 2 = pseudo root, 3 = other
  };
  auto run = [&](const export_info& e) {
    fs::create_directories(host_dir(e) / "a" / "b");
    const auto root = walk_to_root(e);
    const uint64_t a_ino = host_ino(host_dir(e) / "a");
    walk w;
    auto r = _client->compound({op::putfh(root.fh), op::lookupp(), op::getattr()});
    auto r2 =
        _client->compound({op::putfh(root.fh), op::lookup("a"), op::lookup("b"), op::lookupp(), op::getattr(),
                           op::lookupp(), op::getattr(), op::lookupp(), op::getattr(), op::lookupp()});
    for (const auto* c : {&r, &r2}) {
      for (const auto& o : c->ops) {
        w.statuses.push_back(o.status);
        if (!o.attrs) continue;
        const auto& a = *o.attrs;
        w.rel.push_back(a.fileid == root.attrs.fileid && a.fsid == root.attrs.fsid ? 0
                        : a.fileid == a_ino && a.fsid == root.attrs.fsid           ? 1
                        : a.fileid == _pseudo.fileid && a.fsid == _pseudo.fsid     ? 2
                                                                                   : 3);
      }
    }
    return w;
  };
  const walk v = run(k_vfs);
  const walk d = run(k_dcache);
  EXPECT_EQ(v.statuses, d.statuses);
  EXPECT_EQ(v.rel, d.rel);
  // Expected shape: root->pseudo; b->a->root->pseudo; pseudo->NOENT.
  EXPECT_EQ(d.rel, (std::vector<uint64_t>{2, 1, 0, 2}));
  ASSERT_FALSE(d.statuses.empty());
  EXPECT_EQ(d.statuses.back(), NFS4ERR_NOENT);
}

}  // namespace
}  // namespace dcache_e2e::nfs41
