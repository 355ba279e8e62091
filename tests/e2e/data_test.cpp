// Data integrity through a real ganesha.nfsd, over NFSv3 and NFSv4.0
// (libnfs 4.0 has no 4.1), on the plain VFS export and the DCACHE export.
//
// Every test runs the same operations twice: on the export under test and
// on the plain VFS export of the same server (the reference). It then
// checks three things against an in-memory model of what the file must
// hold: the bytes read back over NFS from the export under test, the bytes
// read back from the reference, and the backing files read directly from
// the XFS filesystem under DCACHE_MNT.
//
// Run by tests/e2e/test_data.py against a testbed server, which provides
// DCACHE_SERVER and DCACHE_MNT.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "nfs_client.hpp"

namespace dcache::e2e {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string errno_text(int rc) {
  return std::to_string(rc) + " (" + std::strerror(rc < 0 ? -rc : rc) + ")";
}

// What one file must hold: grows like a sparse file (holes read as zeros).
struct model_file {
  std::vector<std::byte> bytes;

  void write(std::uint64_t offset, std::span<const std::byte> data) {
    if (bytes.size() < offset + data.size()) bytes.resize(offset + data.size(), std::byte{0});
    std::copy(data.begin(), data.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
  }
  void truncate(std::uint64_t length) { bytes.resize(length, std::byte{0}); }
};

std::string describe_mismatch(const std::string& what, std::span<const std::byte> got,
                              std::span<const std::byte> want) {
  long long at = first_difference(got, want);
  if (at < 0) return "";
  std::string s = what + ": differs at byte " + std::to_string(at) + " (got size " +
                  std::to_string(got.size()) + ", want " + std::to_string(want.size()) + ", checksum got " +
                  std::to_string(checksum(got)) + " want " + std::to_string(checksum(want)) + ")";
  if (static_cast<std::size_t>(at) < got.size() && static_cast<std::size_t>(at) < want.size()) {
    s += ", byte got " + std::to_string(static_cast<int>(got[static_cast<std::size_t>(at)])) + " want " +
         std::to_string(static_cast<int>(want[static_cast<std::size_t>(at)]));
  }
  return s;
}

// One export reached over NFS, plus where its files live on the server.
struct side {
  std::string export_path;
  std::unique_ptr<nfs_client> client;
  std::string local_root;  // DCACHE_MNT + export path
  std::string dir;         // this test's directory in the export

  [[nodiscard]] std::string path(const std::string& name) const { return dir + "/" + name; }
  [[nodiscard]] std::string local(const std::string& name) const { return local_root + path(name); }
};

using param = std::tuple<nfs_version, std::string>;

class data_test : public ::testing::TestWithParam<param> {
 protected:
  void SetUp() override {
    _server = env_or_empty("DCACHE_SERVER");
    _mnt = env_or_empty("DCACHE_MNT");
    ASSERT_FALSE(_server.empty() || _mnt.empty())
        << "DCACHE_SERVER and DCACHE_MNT are unset: run this binary through tests/e2e/test_data.py";
    _version = std::get<0>(GetParam());
    _target = open_side(std::get<1>(GetParam()));
    _reference = open_side("/vfs");
    ASSERT_EQ(_target.client->status(), 0) << _target.client->last_error();
    ASSERT_EQ(_reference.client->status(), 0) << _reference.client->last_error();
    // One directory per test and protocol so parameters never share files.
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string dir =
        "/" + std::string(info->test_suite_name()) + "." + info->name() + "." + std::to_string(getpid());
    std::replace(dir.begin() + 1, dir.end(), '/', '_');
    // When the target is /vfs itself the reference is a second, independent
    // run in a sibling directory.
    _target.dir = dir;
    _reference.dir = dir + ".ref";
    for (side* s : sides()) {
      int rc = s->client->mkdir(s->dir, 0755);
      ASSERT_EQ(rc, 0) << s->export_path << " mkdir " << s->dir << ": " << errno_text(rc) << " "
                       << s->client->last_error();
    }
  }

  side open_side(const std::string& export_path) {
    side s;
    s.export_path = export_path;
    s.client = std::make_unique<nfs_client>(_server, export_path, _version);
    s.local_root = _mnt + export_path;
    return s;
  }

  std::array<side*, 2> sides() { return {&_target, &_reference}; }

  // Reads name over NFS from both sides and from both backing files and
  // compares all four with want.
  void expect_content(const std::string& name, const model_file& want) {
    for (side* s : sides()) {
      std::vector<std::byte> got;
      int rc = s->client->read_file(s->path(name), got);
      ASSERT_EQ(rc, 0) << s->export_path << s->path(name) << ": read " << errno_text(rc) << " "
                       << s->client->last_error();
      EXPECT_EQ(describe_mismatch("NFSv" + to_string(_version) + " " + s->export_path + s->path(name), got,
                                  want.bytes),
                "");
      nfs_attrs a;
      rc = s->client->stat(s->path(name), a);
      ASSERT_EQ(rc, 0) << s->client->last_error();
      EXPECT_EQ(a.size, want.bytes.size()) << s->export_path << s->path(name);

      std::vector<std::byte> local;
      rc = read_local_file(s->local(name), local);
      ASSERT_EQ(rc, 0) << s->local(name) << ": " << errno_text(rc);
      EXPECT_EQ(describe_mismatch("backing file " + s->local(name), local, want.bytes), "");
    }
  }

  std::string _server;
  std::string _mnt;
  nfs_version _version = nfs_version::v3;
  side _target;
  side _reference;
};

// Offsets at and around the 512-byte (logical block / DIO alignment) and
// 4096-byte (page) boundaries, and sizes from one byte to 4 MiB.
const std::vector<std::uint64_t> k_offsets = {0,    1,    511,  512,         513,    4095,
                                              4096, 4097, 8191, 65536 + 511, MiB - 3};
const std::vector<std::size_t> k_sizes = {1,    7,    511,   512,       513,     4095,
                                          4096, 4097, 12288, 65536 + 1, MiB - 1, 4 * MiB};

// Each (offset, size) into a fresh file: size, leading hole and data.
TEST_P(data_test, fresh_file_writes_at_boundaries) {
  std::uint64_t seed = 1;
  for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{511}, std::uint64_t{512},
                            std::uint64_t{4095}, std::uint64_t{4097}}) {
    for (std::size_t len : {std::size_t{1}, std::size_t{511}, std::size_t{512}, std::size_t{513},
                            std::size_t{4096}, std::size_t{4097}, std::size_t{MiB + 1}}) {
      const std::string name = "f_" + std::to_string(off) + "_" + std::to_string(len);
      std::vector<std::byte> data(len);
      fill_pattern(data, ++seed, off);
      model_file want;
      want.write(off, data);
      for (side* s : sides()) {
        nfs_file f;
        int rc = s->client->create(s->path(name), O_RDWR, 0644, f);
        ASSERT_EQ(rc, 0) << s->export_path << s->path(name) << ": create " << errno_text(rc);
        rc = f.pwrite_all(off, data);
        ASSERT_EQ(rc, 0) << s->export_path << s->path(name) << " write " << len << "@" << off << ": "
                         << errno_text(rc) << " " << s->client->last_error();
        // read back the range just written through the same open file
        std::vector<std::byte> back(len);
        long long got = f.pread_full(off, back);
        ASSERT_EQ(got, static_cast<long long>(len))
            << s->export_path << s->path(name) << " " << s->client->last_error();
        ASSERT_EQ(describe_mismatch(s->export_path + s->path(name) + " readback", back, data), "");
        ASSERT_EQ(f.close(), 0);
      }
      expect_content(name, want);
      if (HasFatalFailure()) return;
    }
  }
}

// Many overlapping writes into one file, aligned and misaligned, each
// checked right after it is written, the whole file checked at the end.
TEST_P(data_test, overlapping_writes_round_trip) {
  const std::string name = "overlap";
  model_file want;
  std::vector<nfs_file> files(2);
  for (std::size_t i = 0; i < 2; ++i) {
    int rc = sides()[i]->client->create(sides()[i]->path(name), O_RDWR, 0644, files[i]);
    ASSERT_EQ(rc, 0) << sides()[i]->export_path << ": create " << errno_text(rc);
  }
  std::uint64_t seed = 100;
  for (std::size_t len : k_sizes) {
    for (std::uint64_t off : k_offsets) {
      std::vector<std::byte> data(len);
      fill_pattern(data, ++seed, off);
      want.write(off, data);
      for (std::size_t i = 0; i < 2; ++i) {
        int rc = files[i].pwrite_all(off, data);
        ASSERT_EQ(rc, 0) << sides()[i]->export_path << " write " << len << "@" << off << ": "
                         << errno_text(rc);
      }
      // Read a window wider than the write, so damage just outside the
      // written range (the boundary pages of a split direct write) shows.
      const std::uint64_t lo = off > 4096 ? off - 4096 : 0;
      const std::uint64_t hi = std::min<std::uint64_t>(want.bytes.size(), off + len + 4096);
      std::span<const std::byte> expect(want.bytes.data() + lo, hi - lo);
      for (std::size_t i = 0; i < 2; ++i) {
        std::vector<std::byte> back(hi - lo);
        long long got = files[i].pread_full(lo, back);
        ASSERT_EQ(got, static_cast<long long>(back.size())) << sides()[i]->export_path;
        ASSERT_EQ(describe_mismatch(sides()[i]->export_path + " window after write " + std::to_string(len) +
                                        "@" + std::to_string(off),
                                    back, expect),
                  "");
      }
    }
  }
  // Misaligned reads of the finished file.
  for (std::uint64_t off : k_offsets) {
    for (std::size_t len : {std::size_t{1}, std::size_t{513}, std::size_t{4097}, std::size_t{3 * MiB + 5}}) {
      if (off >= want.bytes.size()) continue;
      const std::size_t n = std::min<std::size_t>(len, want.bytes.size() - off);
      std::span<const std::byte> expect(want.bytes.data() + off, n);
      for (std::size_t i = 0; i < 2; ++i) {
        std::vector<std::byte> back(len);
        long long got = files[i].pread_full(off, back);
        ASSERT_EQ(got, static_cast<long long>(n)) << sides()[i]->export_path << " read " << len << "@" << off;
        back.resize(n);
        ASSERT_EQ(describe_mismatch(
                      sides()[i]->export_path + " read " + std::to_string(len) + "@" + std::to_string(off),
                      back, expect),
                  "");
      }
    }
  }
  for (auto& f : files) {
    ASSERT_EQ(f.fsync(), 0);
    ASSERT_EQ(f.close(), 0);
  }
  expect_content(name, want);
}

// Stable (fsync'd, i.e. COMMIT) writes interleaved with unstable ones.
TEST_P(data_test, writes_with_commit) {
  const std::string name = "commit";
  model_file want;
  std::uint64_t seed = 7000;
  for (side* s : sides()) {
    nfs_file f;
    ASSERT_EQ(s->client->create(s->path(name), O_RDWR, 0600, f), 0) << s->client->last_error();
  }
  std::vector<std::pair<std::uint64_t, std::size_t>> ops = {
      {0, 4096}, {4096, 1}, {100, 3 * MiB}, {5000, 7}, {2 * MiB - 1, 2}, {0, 512}, {513, 4 * MiB}};
  for (auto [off, len] : ops) {
    std::vector<std::byte> data(len);
    fill_pattern(data, ++seed, off);
    want.write(off, data);
    for (side* s : sides()) {
      nfs_file f;
      ASSERT_EQ(s->client->open(s->path(name), O_RDWR, f), 0) << s->client->last_error();
      ASSERT_EQ(f.pwrite_all(off, data), 0) << s->export_path << " " << s->client->last_error();
      ASSERT_EQ(f.fsync(), 0) << s->export_path << " " << s->client->last_error();
      ASSERT_EQ(f.close(), 0);
    }
  }
  expect_content(name, want);
}

TEST_P(data_test, truncate_grow_and_shrink) {
  const std::string name = "trunc";
  model_file want;
  std::vector<std::byte> data(100 * KiB + 3);
  fill_pattern(data, 42, 0);
  want.write(0, data);
  for (side* s : sides()) ASSERT_EQ(s->client->write_file(s->path(name), data), 0) << s->client->last_error();
  expect_content(name, want);

  // by path (SETATTR size), shrinking to a misaligned size, then growing
  for (std::uint64_t len : {std::uint64_t{5000}, std::uint64_t{4096}, std::uint64_t{511},
                            std::uint64_t{MiB + 3}, std::uint64_t{0}, std::uint64_t{8193}}) {
    want.truncate(len);
    for (side* s : sides()) {
      int rc = s->client->truncate(s->path(name), len);
      ASSERT_EQ(rc, 0) << s->export_path << " truncate " << len << ": " << errno_text(rc);
    }
    expect_content(name, want);
    if (HasFatalFailure()) return;
  }

  // by handle, with writes beyond the new end and into the grown hole
  std::vector<std::byte> tail(3000);
  fill_pattern(tail, 43, 20000);
  for (side* s : sides()) {
    nfs_file f;
    ASSERT_EQ(s->client->open(s->path(name), O_RDWR, f), 0);
    ASSERT_EQ(f.ftruncate(12345), 0) << s->client->last_error();
    ASSERT_EQ(f.pwrite_all(20000, tail), 0) << s->client->last_error();
    ASSERT_EQ(f.ftruncate(21000), 0) << s->client->last_error();
    nfs_attrs a;
    ASSERT_EQ(f.fstat(a), 0);
    EXPECT_EQ(a.size, 21000u) << s->export_path;
    ASSERT_EQ(f.close(), 0);
  }
  want.truncate(12345);
  want.write(20000, tail);
  want.truncate(21000);
  expect_content(name, want);
}

TEST_P(data_test, rename_readdir_remove) {
  std::vector<std::byte> a(777), b(4096 + 5);
  fill_pattern(a, 1, 0);
  fill_pattern(b, 2, 0);
  for (side* s : sides()) {
    auto& c = *s->client;
    ASSERT_EQ(c.write_file(s->path("a"), a), 0) << c.last_error();
    ASSERT_EQ(c.write_file(s->path("b"), b), 0) << c.last_error();
    ASSERT_EQ(c.mkdir(s->path("sub")), 0) << c.last_error();
    ASSERT_EQ(c.rename(s->path("a"), s->path("sub/a2")), 0) << c.last_error();
    // rename over an existing file replaces it
    ASSERT_EQ(c.write_file(s->path("c"), a), 0);
    ASSERT_EQ(c.rename(s->path("b"), s->path("c")), 0) << c.last_error();
    std::vector<std::string> top, sub;
    ASSERT_EQ(c.list(s->dir, top), 0) << c.last_error();
    ASSERT_EQ(c.list(s->path("sub"), sub), 0) << c.last_error();
    EXPECT_EQ(top, (std::vector<std::string>{"c", "sub"})) << s->export_path;
    EXPECT_EQ(sub, (std::vector<std::string>{"a2"})) << s->export_path;
    nfs_attrs st;
    EXPECT_EQ(c.stat(s->path("a"), st), -ENOENT) << s->export_path;
    EXPECT_EQ(c.stat(s->path("b"), st), -ENOENT) << s->export_path;
    // the local directory agrees
    EXPECT_EQ(access((s->local("sub/a2")).c_str(), F_OK), 0);
    EXPECT_NE(access((s->local("b")).c_str(), F_OK), 0);
  }
  model_file wa, wb;
  wa.write(0, a);
  wb.write(0, b);
  expect_content("sub/a2", wa);
  expect_content("c", wb);
  for (side* s : sides()) {
    auto& c = *s->client;
    EXPECT_EQ(c.rmdir(s->path("sub")), -ENOTEMPTY) << s->export_path;
    ASSERT_EQ(c.unlink(s->path("sub/a2")), 0);
    ASSERT_EQ(c.rmdir(s->path("sub")), 0);
    ASSERT_EQ(c.unlink(s->path("c")), 0);
    std::vector<std::string> top;
    ASSERT_EQ(c.list(s->dir, top), 0);
    EXPECT_TRUE(top.empty()) << s->export_path << " still lists " << top.size() << " entries";
    EXPECT_EQ(c.unlink(s->path("c")), -ENOENT);
    struct stat lst {};
    EXPECT_NE(::stat((s->local("c")).c_str(), &lst), 0);
  }
}

TEST_P(data_test, getattr_setattr) {
  std::vector<std::byte> data(4097);
  fill_pattern(data, 9, 0);
  for (side* s : sides()) {
    auto& c = *s->client;
    ASSERT_EQ(c.write_file(s->path("attrs"), data, 0640), 0) << c.last_error();
    nfs_attrs a;
    ASSERT_EQ(c.stat(s->path("attrs"), a), 0);
    EXPECT_TRUE(S_ISREG(a.mode));
    {
      struct stat lst {};
      ASSERT_EQ(::stat(s->local("attrs").c_str(), &lst), 0);
      EXPECT_EQ(a.mode, lst.st_mode) << s->export_path << ": GETATTR disagrees with the backing file";
      EXPECT_EQ(a.ino, lst.st_ino) << s->export_path;
    }
    // libnfs 4.0 sends no mode with an NFSv4 create (files come out 0600)
    if (_version == nfs_version::v3) {
      EXPECT_EQ(a.mode & 07777, 0640u) << s->export_path;
    }
    EXPECT_EQ(a.size, data.size());
    EXPECT_EQ(a.uid, 0u) << "Squash = No_Root_Squash keeps root";

    for (int mode : {0600, 0751, 04755, 0}) {
      ASSERT_EQ(c.chmod(s->path("attrs"), mode), 0) << c.last_error();
      ASSERT_EQ(c.stat(s->path("attrs"), a), 0);
      EXPECT_EQ(a.mode & 07777, static_cast<unsigned>(mode)) << s->export_path;
      struct stat lst {};
      ASSERT_EQ(::stat((s->local("attrs")).c_str(), &lst), 0);
      EXPECT_EQ(lst.st_mode & 07777, static_cast<unsigned>(mode)) << "backing file of " << s->export_path;
    }
    ASSERT_EQ(c.chmod(s->path("attrs"), 0644), 0);

    const std::int64_t at = 1'000'000'000, mt = 1'234'567'890;
    ASSERT_EQ(c.utimes(s->path("attrs"), at, 250'000, mt, 500'000), 0) << c.last_error();
    ASSERT_EQ(c.stat(s->path("attrs"), a), 0);
    EXPECT_EQ(a.atime_sec, at) << s->export_path;
    EXPECT_EQ(a.mtime_sec, mt) << s->export_path;
    EXPECT_EQ(a.mtime_nsec, 500'000'000) << s->export_path;
    struct stat lst {};
    ASSERT_EQ(::stat((s->local("attrs")).c_str(), &lst), 0);
    EXPECT_EQ(lst.st_mtim.tv_sec, mt);
    EXPECT_EQ(lst.st_atim.tv_sec, at);

    // a write moves mtime forward from the value set above
    nfs_file f;
    ASSERT_EQ(c.open(s->path("attrs"), O_WRONLY, f), 0);
    ASSERT_EQ(f.pwrite_all(1, std::span<const std::byte>(data.data(), 1)), 0);
    ASSERT_EQ(f.close(), 0);
    ASSERT_EQ(c.stat(s->path("attrs"), a), 0);
    EXPECT_GT(a.mtime_sec, mt) << s->export_path << ": WRITE did not update mtime";
    EXPECT_EQ(a.size, data.size());
  }
}

// Several clients, each its own nfs_context and TCP connection on its own
// thread, write disjoint, misaligned ranges of one file at the same time.
TEST_P(data_test, concurrent_clients_disjoint_ranges) {
  constexpr int k_clients = 4;
  constexpr std::size_t k_range = MiB + 777;  // ranges meet inside pages
  const std::string name = "shared";
  model_file want;
  for (int i = 0; i < k_clients; ++i) {
    std::vector<std::byte> data(k_range);
    fill_pattern(data, 500 + static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i) * k_range);
    want.write(static_cast<std::uint64_t>(i) * k_range, data);
  }
  for (side* s : sides()) {
    {
      nfs_file f;
      ASSERT_EQ(s->client->create(s->path(name), O_RDWR, 0644, f), 0) << s->client->last_error();
    }
    std::vector<int> results(k_clients, -EINPROGRESS);
    std::vector<std::string> errors(k_clients);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_clients; ++i) {
      threads.emplace_back([&, i] {
        nfs_client c(_server, s->export_path, _version);
        if (c.status() != 0) {
          results[static_cast<std::size_t>(i)] = c.status();
          errors[static_cast<std::size_t>(i)] = c.last_error();
          return;
        }
        nfs_file f;
        int rc = c.open(s->path(name), O_WRONLY, f);
        const std::uint64_t base = static_cast<std::uint64_t>(i) * k_range;
        // uneven pieces, so requests of different clients interleave and
        // straddle each other's page boundaries
        std::uint64_t done = 0;
        std::size_t piece = 1000 + static_cast<std::size_t>(i) * 4093;
        while (rc == 0 && done < k_range) {
          const std::size_t n = std::min<std::size_t>(piece, k_range - done);
          std::vector<std::byte> data(n);
          fill_pattern(data, 500 + static_cast<std::uint64_t>(i), base + done);
          rc = f.pwrite_all(base + done, data);
          done += n;
          piece = piece * 3 % 300'007 + 513;
        }
        if (rc == 0) rc = f.fsync();
        if (rc == 0) rc = f.close();
        results[static_cast<std::size_t>(i)] = rc;
        if (rc != 0) errors[static_cast<std::size_t>(i)] = c.last_error();
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < k_clients; ++i) {
      EXPECT_EQ(results[static_cast<std::size_t>(i)], 0)
          << s->export_path << " client " << i << ": " << errors[static_cast<std::size_t>(i)];
    }
  }
  expect_content(name, want);
}

// The exports under test: /vfs and /dcache, or the comma-separated pseudo
// paths in DCACHE_E2E_DATA_EXPORTS (e2e_data_modes adds one export per
// cache mode with tests/e2e/test_data.py).
std::vector<std::string> exports_under_test() {
  std::vector<std::string> out;
  std::string list = env_or_empty("DCACHE_E2E_DATA_EXPORTS");
  if (list.empty()) list = "/vfs,/dcache";
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<param>& info) {
  std::string e = std::get<1>(info.param).substr(1);
  std::replace_if(
      e.begin(), e.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return std::string(std::get<0>(info.param) == nfs_version::v3 ? "v3" : "v4_0") + "_" + e;
}

INSTANTIATE_TEST_SUITE_P(e2e, data_test,
                         ::testing::Combine(::testing::Values(nfs_version::v3, nfs_version::v4),
                                            ::testing::ValuesIn(exports_under_test())),
                         param_name);

}  // namespace
}  // namespace dcache::e2e
