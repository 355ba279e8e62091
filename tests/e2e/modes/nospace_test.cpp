// dcache_e2e_nospace: on a nearly full filesystem every cache mode answers a
// client's WRITEs as plain VFS does - what fits, then NFS3ERR_NOSPC - and
// keeps what it acknowledged.
//
// For /vfs and each DCACHE export of the modes tests (m_*, modes.hpp: every
// mode, auto included) in turn, on the server's filesystem: the free space
// is set to the same amount (a filler file fallocated outside the exports),
// then 1 MiB WRITEs are sent back to back, each where the last one's
// acknowledged bytes end, until one is refused; the raw (status, count)
// replies are compared with VFS's, in two scenarios:
//   - misaligned FILE_SYNC WRITEs (every one split in a direct mode), with
//     room for ~5.3: the replies must be VFS's, reply for reply;
//   - aligned UNSTABLE WRITEs with room for 24: the same full WRITEs, then
//     the last one short with what fits, or refused, then NOSPC.  VFS's
//     cached WRITEs leave XFS's speculative preallocation behind them,
//     which its last WRITE fills; a direct mode leaves none, so what fits
//     of its last WRITE is found piece by piece (fallback.h,
//     smaller_piece), and the two may end a few hundred KiB apart
//     (docs/configuration.md, "Out of space").
// Every byte acknowledged is then read back from the backing file.
//
// Run by tests/e2e/test_nospace.py.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "modes.hpp"
#include "nfs_client.hpp"
#include "support.hpp"

namespace dcache::e2e::modes {
namespace {

constexpr int k_nospc = 28;  // NFS3ERR_NOSPC

struct scenario {
  const char* name;
  std::uint64_t start;  // the first WRITE's offset
  std::uint64_t free;   // bytes free before the first WRITE
  stable_how how;
  int max_writes;
  bool exact;  // the replies must be VFS's, reply for reply
};

const scenario k_scenarios[] = {
    {"misaligned_file_sync", 3096, 5 * k_mib + 300 * 1024, stable_how::file_sync, 12, true},
    {"aligned_unstable", 0, 24 * k_mib, stable_how::unstable, 40, false},
};

struct reply {
  int status;  // 0 or the nfsstat3 (28 NOSPC, 69 DQUOT, 27 FBIG)
  long long count;
  bool operator==(const reply&) const = default;
};

std::string show(const std::vector<reply>& v) {
  std::string s;
  for (const auto& r : v)
    s += (r.status ? "NFSERR(" + std::to_string(r.status) + ")" : "OK " + std::to_string(r.count)) + "; ";
  return s;
}

std::uint64_t free_bytes(const std::string& dir) {
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

// Blocks freed by an unlink return to the free count after XFS's background
// inode inactivation: wait until two readings a moment apart agree.
std::uint64_t settled_free(const std::string& dir) {
  std::uint64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    ::sync();
    const std::uint64_t now = free_bytes(dir);
    if (now == last) return now;
    last = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return last;
}

class nospace : public ::testing::TestWithParam<scenario> {
 protected:
  std::string mnt = env_or_empty("DCACHE_MNT");
  std::string filler = mnt + "/nospace.filler";

  void TearDown() override { ::unlink(filler.c_str()); }

  // Leaves exactly the scenario's bytes free (as statvfs counts them).
  void fill() {
    const std::uint64_t room = GetParam().free;
    ::unlink(filler.c_str());
    const std::uint64_t avail = settled_free(mnt);
    ASSERT_GT(avail, room + 64 * k_mib) << "the test filesystem is too small";
    const int fd = ::open(filler.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::uint64_t want = avail - room;
    // fallocate takes the blocks; the extent tree of a large file takes a
    // few more: trim until exactly room is left
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(::posix_fallocate(fd, 0, static_cast<off_t>(want)), 0);
      ::fsync(fd);
      const std::uint64_t now = settled_free(mnt);
      if (now == room) break;
      want = now > room ? want + (now - room) : want - (room - now);
      ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(want)), 0);
    }
    ::close(fd);
    ASSERT_EQ(settled_free(mnt), room);
  }

  // The WRITE sequence on export/file; also checks what was acknowledged
  // is there.
  std::vector<reply> run(const std::string& export_name) {
    const scenario& sc = GetParam();
    const std::uint64_t start = sc.start;
    std::vector<reply> out;
    nfs_client c(env_or_empty("DCACHE_SERVER"), "/" + export_name, nfs_version::v3);
    EXPECT_EQ(c.status(), 0) << c.last_error();
    raw_v3_file f;
    EXPECT_EQ(f.create(c, "/nospace"), 0);
    std::vector<std::byte> data(k_mib);
    std::uint64_t off = start, acked = 0;
    for (int i = 0; i < sc.max_writes; ++i) {
      fill_pattern(data, 7, off);
      stable_how committed{};
      std::string why;
      const long long n = f.write(off, data, sc.how, committed, why);
      if (n < 0) {
        // "nfsstat3 N" in why
        const auto at = why.find("nfsstat3 ");
        out.push_back({at == std::string::npos ? -1 : std::atoi(why.c_str() + at + 9), 0});
        break;
      }
      out.push_back({0, n});
      if (sc.how == stable_how::file_sync) {
        EXPECT_EQ(committed, stable_how::file_sync) << export_name << ": WRITE " << i;
      }
      off += static_cast<std::uint64_t>(n);
      acked += static_cast<std::uint64_t>(n);
      // a client resends what was not written; a stalled sequence fails
      if (n == 0) break;
    }
    std::vector<std::byte> back;
    EXPECT_EQ(read_local_file(mnt + "/" + export_name + "/nospace", back), 0);
    EXPECT_GE(back.size(), start + acked) << export_name;
    std::vector<std::byte> want(acked);
    fill_pattern(want, 7, start);
    if (back.size() >= start + acked) {
      EXPECT_EQ(first_difference({back.data() + start, acked}, want), -1)
          << export_name << ": acknowledged bytes lost";
    }
    // through NFS, so the server's cache forgets it too
    EXPECT_EQ(c.unlink("/nospace"), 0) << c.last_error();
    return out;
  }
};

// The replies of one mode against VFS's where they need not be equal: the
// same full WRITEs, then at most two short ones (VFS: into its
// preallocation, then what a flush freed; a direct mode: what fits), then
// NOSPC; no empty OK (a client would resend it forever).
void expect_same_shape(const char* e, const std::vector<reply>& got, const std::vector<reply>& vfs) {
  const auto full = [](const std::vector<reply>& v) {
    std::size_t n = 0;
    while (n < v.size() && v[n].status == 0 && v[n].count == static_cast<long long>(k_mib)) ++n;
    return n;
  };
  const std::size_t fg = full(got), fv = full(vfs);
  EXPECT_GE(fg + 1, fv) << e << ": fewer full WRITEs than VFS";
  EXPECT_LE(fg, fv + 1) << e << ": more full WRITEs than VFS";
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().status, k_nospc) << e << " ends with NFS3ERR_NOSPC";
  EXPECT_LE(got.size() - fg, 3u) << e << ": at most two short WRITEs before NOSPC";
  for (std::size_t i = fg; i + 1 < got.size(); ++i) {
    EXPECT_EQ(got[i].status, 0) << e << " WRITE " << i;
    EXPECT_GT(got[i].count, 0) << e << " WRITE " << i << ": an empty OK";
  }
}

// Where XFS places what fits depends on the free space an earlier run left
// behind, so each mode is compared with a VFS run just before it, on the
// same free space.
TEST_P(nospace, every_mode_answers_like_vfs) {
  ASSERT_FALSE(mnt.empty());
  const scenario& sc = GetParam();
  // every mode's export of the modes tests (modes.hpp), auto included
  for (const export_def& d : select(false)) {
    const char* e = d.name;
    fill();
    const std::vector<reply> vfs = run("vfs");
    ASSERT_GE(vfs.size(), 2u) << show(vfs);
    ASSERT_EQ(vfs.back().status, k_nospc) << "VFS ends with NFS3ERR_NOSPC: " << show(vfs);
    fill();
    const std::vector<reply> got = run(e);
    std::printf("MEASURE nospace %s %s: %s (VFS just before: %s)\n", sc.name, e, show(got).c_str(),
                show(vfs).c_str());
    if (!sc.exact) {
      expect_same_shape(e, got, vfs);
      continue;
    }
    if (std::strcmp(e, "m_direct_mem_buffered") != 0) {
      EXPECT_EQ(got, vfs) << e << " answered " << show(got) << "\n VFS answered " << show(vfs);
      continue;
    }
    // Direct_Misaligned_Memory = buffered writes each WRITE as three
    // buffered pieces; XFS sizes the speculative preallocation behind the
    // small tail piece smaller than behind VFS's 1 MiB write, so the last,
    // partial WRITE fits less (64 KiB here).  The replies are the same
    // otherwise: every full WRITE, one partial, then NOSPC.
    ASSERT_EQ(got.size(), vfs.size()) << show(got);
    for (std::size_t i = 0; i + 2 < got.size(); ++i) EXPECT_EQ(got[i], vfs[i]) << e << " WRITE " << i;
    const reply& part = got[got.size() - 2];
    EXPECT_EQ(part.status, 0);
    EXPECT_GT(part.count, 0);
    EXPECT_LE(part.count, vfs[vfs.size() - 2].count);
    EXPECT_EQ(got.back(), vfs.back());
  }
}

INSTANTIATE_TEST_SUITE_P(scenarios, nospace, ::testing::ValuesIn(k_scenarios),
                         [](const ::testing::TestParamInfo<scenario>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace dcache::e2e::modes
