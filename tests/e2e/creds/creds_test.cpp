// End to end: NFS client uid/gid 1000 WRITEs through the real server.
//
// On each export (/vfs, the baseline, and /dcache_direct, a DCACHE export
// with IO_Cache_Write = direct on io_uring) the test, as root on the host,
// prepares a directory and a file owned by 1000:1000, the file with mode
// 04755; then the client, authenticating as 1000:1000 (AUTH_SYS), writes a
// misaligned range (split by DCACHE into head, O_DIRECT middle and tail)
// and creates a file.  Expected on both exports: the kernel cleared the
// setuid bit (it does so only for a writer without CAP_FSETID, which
// root has), the data is there, and the created file is 1000:1000.
//
// Run by tests/e2e/test_creds.py (DCACHE_SERVER, DCACHE_MNT).
#include "nfs_client.hpp"

#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace dcache::e2e;

namespace {

constexpr int k_uid = 1000;
constexpr int k_gid = 1000;

struct target {
  const char* pseudo;  // export path
  const char* dir;     // its directory under DCACHE_MNT
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

class creds : public ::testing::TestWithParam<target> {
 protected:
  void SetUp() override {
    _server = env("DCACHE_SERVER");
    _mnt = env("DCACHE_MNT");
    if (_server.empty() || _mnt.empty())
      GTEST_SKIP() << "run by tests/e2e/test_creds.py (DCACHE_SERVER/DCACHE_MNT unset)";
    if (geteuid() != 0) GTEST_SKIP() << "needs root to chown files to " << k_uid;
    _rel = "/creds_" + std::to_string(getpid());
    _local = _mnt + "/" + GetParam().dir + _rel;
    ASSERT_EQ(mkdir(_local.c_str(), 0755), 0) << _local << ": " << std::strerror(errno);
    ASSERT_EQ(chown(_local.c_str(), k_uid, k_gid), 0) << std::strerror(errno);
  }

  std::string _server, _mnt, _rel, _local;
};

TEST_P(creds, client_write_clears_setuid_and_creates_as_client) {
  const target t = GetParam();
  // The file to write, prepared on the host: 64 KiB, 1000:1000, 04755.
  const std::string name = "/suid";
  const std::string local = _local + name;
  std::vector<std::byte> initial(64 * 1024);
  fill_pattern(initial, 1, 0);
  {
    const int fd = ::open(local.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << local << ": " << std::strerror(errno);
    ASSERT_EQ(::write(fd, initial.data(), initial.size()), static_cast<ssize_t>(initial.size()));
    ASSERT_EQ(fchown(fd, k_uid, k_gid), 0);
    ASSERT_EQ(fchmod(fd, 04755), 0);  // after chown, which clears it
    ::close(fd);
  }
  struct stat st {};
  ASSERT_EQ(::stat(local.c_str(), &st), 0);
  ASSERT_EQ(st.st_mode & 07777, 04755u);

  nfs_client c(_server, t.pseudo, nfs_version::v3);
  ASSERT_EQ(c.status(), 0) << t.pseudo << ": " << c.last_error();
  // From here on every RPC carries AUTH_SYS 1000:1000.
  nfs_set_uid(c.raw(), k_uid);
  nfs_set_gid(c.raw(), k_gid);

  // Misaligned on both ends, spanning many pages: a head, an aligned
  // middle and a tail on the direct export.
  const std::uint64_t off = 1000, len = 3 * 4096 * 4 + 1234;
  std::vector<std::byte> data(len);
  fill_pattern(data, 2, off);
  {
    nfs_file f;
    ASSERT_EQ(c.open(_rel + name, O_RDWR, f), 0) << c.last_error();
    ASSERT_EQ(f.pwrite_all(off, data), 0) << c.last_error();
    ASSERT_EQ(f.fsync(), 0) << c.last_error();
    ASSERT_EQ(f.close(), 0) << c.last_error();
  }
  ASSERT_EQ(::stat(local.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << t.pseudo << ": the setuid bit survived a write by uid " << k_uid
                                       << " (the write ran with CAP_FSETID, i.e. as root)";
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(k_uid));
  std::vector<std::byte> back;
  ASSERT_EQ(read_local_file(local, back), 0);
  std::vector<std::byte> want = initial;
  std::memcpy(want.data() + off, data.data(), len);
  EXPECT_EQ(first_difference(back, want), -1) << t.pseudo;

  // A file the client creates is the client's.
  const std::string created = "/created";
  std::vector<std::byte> small(5000);
  fill_pattern(small, 3, 0);
  ASSERT_EQ(c.write_file(_rel + created, small, 0644), 0) << c.last_error();
  ASSERT_EQ(::stat((_local + created).c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(k_uid)) << t.pseudo;
  EXPECT_EQ(st.st_gid, static_cast<gid_t>(k_gid)) << t.pseudo;
  EXPECT_EQ(st.st_size, 5000);

  // The client is really 1000 (so the checks above mean something): it
  // may not write a root-owned 0644 file.
  const std::string rootfile = _local + "/root_only";
  {
    const int fd = ::open(rootfile.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  nfs_file g;
  EXPECT_EQ(c.open(_rel + "/root_only", O_RDWR, g), -EACCES) << c.last_error();
}

INSTANTIATE_TEST_SUITE_P(exports, creds,
                         ::testing::Values(target{"/vfs", "vfs"}, target{"/dcache_direct", "dcache_direct"}),
                         [](const ::testing::TestParamInfo<target>& i) { return std::string(i.param.dir); });

}  // namespace
