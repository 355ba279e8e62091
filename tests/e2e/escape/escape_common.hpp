// Shared by the escape suites (dcache_e2e_escape, dcache_e2e_escape_churn):
// Ganesha 4.3 file-handle codecs (so tests can re-encode and relabel
// handles), host-side inode helpers and a fixture holding one MOUNT3 and one
// NFS session against the harness's server.
//
// Everything is inline: each test binary is one translation unit plus
// raw_nfs.cpp. Thread-safety: a fixture is used by its test's thread only.
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <nfsc/libnfs-raw-nfs4.h>

#include "raw_nfs.hpp"

namespace dcache_e2e {

namespace fs = std::filesystem;

inline std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    std::fprintf(stderr,
                 "%s: environment variable %s is not set; run me through "
                 "tests/e2e/test_escape.py\n",
                 program_invocation_short_name, name);
    std::exit(2);
  }
  return v;
}

inline uint64_t host_ino(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    ADD_FAILURE() << "stat(" << p << "): " << std::strerror(errno);
    return 0;
  }
  return st.st_ino;
}

inline std::string hex(const bytes& b) {
  std::string s;
  char buf[4];
  for (uint8_t c : b) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    s += buf;
  }
  return s;
}

// ---- Ganesha 4.3 handle layouts (include/nfs_fh.h, FSAL_VFS handle_syscalls.c)
//
// v3 and v4 share the header: fhversion 0x43, fhflags1, exportid (network
// order), fs_len, then fs_len bytes of FSAL wire handle. v3 pads the total to
// a multiple of 4, v4 does not.
struct ganesha_fh {
  uint8_t version = 0;
  uint8_t flags = 0;
  uint16_t export_id = 0;
  bytes opaque;

  static std::optional<ganesha_fh> parse(const bytes& b) {
    if (b.size() < 5 || b[0] != 0x43 || b.size() < 5u + b[4]) return std::nullopt;
    ganesha_fh h;
    h.version = b[0];
    h.flags = b[1];
    h.export_id = static_cast<uint16_t>((b[2] << 8) | b[3]);
    h.opaque.assign(b.begin() + 5, b.begin() + 5 + b[4]);
    return h;
  }
  bytes encode(bool pad_to_4) const {
    bytes b{version, flags, static_cast<uint8_t>(export_id >> 8), static_cast<uint8_t>(export_id & 0xff),
            static_cast<uint8_t>(opaque.size())};
    b.insert(b.end(), opaque.begin(), opaque.end());
    while (pad_to_4 && b.size() % 4 != 0) b.push_back(0);
    return b;
  }
};

// VFS wire handle: byte0 = fsid_type | type-width bits (0x40 8-bit, 0x80
// 16-bit, 0xC0 32-bit) | 0x20 dummy; fsid; kernel handle_type; f_handle bytes.
struct vfs_wire {
  uint8_t fsid_type = 0;
  bytes fsid;
  int32_t kernel_type = 0;
  bytes kernel_fh;

  static std::optional<vfs_wire> parse(const bytes& b) {
    if (b.empty() || (b[0] & 0x20) != 0) return std::nullopt;
    vfs_wire w;
    w.fsid_type = b[0] & 0x1f;
    static const int fsid_len[] = {0, 8, 8, 16, 8, 8};
    if (w.fsid_type > 5) return std::nullopt;
    size_t off = 1 + fsid_len[w.fsid_type];
    if (b.size() < off) return std::nullopt;
    w.fsid.assign(b.begin() + 1, b.begin() + static_cast<long>(off));
    switch (b[0] & 0xc0) {
      case 0x40:
        if (b.size() < off + 1) return std::nullopt;
        w.kernel_type = b[off];
        off += 1;
        break;
      case 0x80: {
        int16_t t;
        if (b.size() < off + 2) return std::nullopt;
        std::memcpy(&t, &b[off], 2);
        w.kernel_type = t;
        off += 2;
        break;
      }
      case 0xc0:
        if (b.size() < off + 4) return std::nullopt;
        std::memcpy(&w.kernel_type, &b[off], 4);
        off += 4;
        break;
      default:
        return std::nullopt;
    }
    w.kernel_fh.assign(b.begin() + static_cast<long>(off), b.end());
    return w;
  }
  // width: 1, 2 or 4 bytes for the kernel handle type.
  bytes encode(int width) const {
    bytes b{static_cast<uint8_t>(fsid_type | (width == 1 ? 0x40 : width == 2 ? 0x80 : 0xc0))};
    b.insert(b.end(), fsid.begin(), fsid.end());
    if (width == 1) {
      b.push_back(static_cast<uint8_t>(kernel_type));
    } else if (width == 2) {
      int16_t t = static_cast<int16_t>(kernel_type);
      b.insert(b.end(), reinterpret_cast<uint8_t*>(&t), reinterpret_cast<uint8_t*>(&t) + 2);
    } else {
      b.insert(b.end(), reinterpret_cast<const uint8_t*>(&kernel_type),
               reinterpret_cast<const uint8_t*>(&kernel_type) + 4);
    }
    b.insert(b.end(), kernel_fh.begin(), kernel_fh.end());
    return b;
  }
};

struct variant {
  std::string name;
  bytes fsal_handle;  // VFS wire handle naming the same inode
};

// Other encodings of the same XFS inode that XFS's fh_to_dentry accepts:
// a wider handle_type field in VFS's wire format; trailing bytes (XFS only
// checks fh_len >= the type's minimum); FILEID_INO32_GEN (1) <->
// FILEID_INO32_GEN | XFS_FILEID_TYPE_64FLAG (0x81); and the _PARENT types
// (2 / 0x82) with a made-up parent that fh_to_dentry ignores.
inline std::vector<variant> reencodings(const bytes& fsal_handle) {
  std::vector<variant> out;
  auto w = vfs_wire::parse(fsal_handle);
  if (!w) return out;
  out.push_back({"type_as_int16", w->encode(2)});
  out.push_back({"type_as_int32", w->encode(4)});
  vfs_wire pad = *w;
  pad.kernel_fh.insert(pad.kernel_fh.end(), 4, 0);
  out.push_back({"trailing_bytes", pad.encode(1)});
  if (w->kernel_type == 1 && w->kernel_fh.size() >= 8) {
    uint32_t ino32, gen;
    std::memcpy(&ino32, &w->kernel_fh[0], 4);
    std::memcpy(&gen, &w->kernel_fh[4], 4);
    vfs_wire v64 = *w;
    v64.kernel_type = 0x81;
    uint64_t ino64 = ino32;
    v64.kernel_fh.assign(reinterpret_cast<uint8_t*>(&ino64), reinterpret_cast<uint8_t*>(&ino64) + 8);
    v64.kernel_fh.insert(v64.kernel_fh.end(), reinterpret_cast<uint8_t*>(&gen),
                         reinterpret_cast<uint8_t*>(&gen) + 4);
    out.push_back({"xfs_ino64_type_0x81", v64.encode(1)});
    vfs_wire vp = *w;
    vp.kernel_type = 2;
    vp.kernel_fh.resize(8);
    vp.kernel_fh.insert(vp.kernel_fh.end(), 8, 0);
    out.push_back({"xfs_with_parent_type_2", vp.encode(1)});
  } else if (w->kernel_type == 0x81 && w->kernel_fh.size() >= 12) {
    uint64_t ino64;
    uint32_t gen;
    std::memcpy(&ino64, &w->kernel_fh[0], 8);
    std::memcpy(&gen, &w->kernel_fh[8], 4);
    if (ino64 <= UINT32_MAX) {
      vfs_wire v32 = *w;
      v32.kernel_type = 1;
      uint32_t ino32 = static_cast<uint32_t>(ino64);
      v32.kernel_fh.assign(reinterpret_cast<uint8_t*>(&ino32), reinterpret_cast<uint8_t*>(&ino32) + 4);
      v32.kernel_fh.insert(v32.kernel_fh.end(), reinterpret_cast<uint8_t*>(&gen),
                           reinterpret_cast<uint8_t*>(&gen) + 4);
      out.push_back({"xfs_ino32_type_1", v32.encode(1)});
    }
    vfs_wire vp = *w;
    vp.kernel_type = 0x82;
    vp.kernel_fh.resize(12);
    vp.kernel_fh.insert(vp.kernel_fh.end(), 12, 0);
    out.push_back({"xfs_with_parent_type_0x82", vp.encode(1)});
  }
  return out;
}

struct export_info {
  uint16_t id;
  std::string pseudo_name;  // single pseudo component under "/" (or nested)
  std::string host_rel;     // path relative to DCACHE_MNT
  bool is_dcache;
};

inline const export_info k_vfs{1, "vfs", "vfs", false};
inline const export_info k_dcache{2, "dcache", "dcache", true};

// ---- fixture: one MOUNT/NFSv3 and one NFSv4 session per test
class server_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    _server = env_or_die("DCACHE_SERVER");
    _mnt = env_or_die("DCACHE_MNT");
    ASSERT_EQ(_mount.connect_program(_server, MOUNT_PROGRAM, MOUNT_V3), "");
    ASSERT_EQ(_nfs.connect_port(_server, 2049), "");
    _xfs_root_ino = host_ino(_mnt);
    _host_parent_ino = host_ino(_mnt.parent_path());
    _host_root_ino = host_ino("/");
  }

  // MNT by pseudo path (mount_path_pseudo) or else by the real path.
  bytes mount_root(const export_info& e) {
    auto r = _mount.mount3("/" + e.pseudo_name);
    if (r.status != 0) r = _mount.mount3((_mnt / e.host_rel).string());
    EXPECT_EQ(r.status, 0) << "MNT of export " << e.id << " failed: status " << r.status << " "
                           << _mount.last_rpc_error();
    return r.fh;
  }

  uint64_t fileid3(const bytes& fh) {
    auto r = _nfs.getattr3(fh);
    EXPECT_EQ(r.status, NFS3_OK) << "GETATTR of " << hex(fh);
    return r.attrs ? r.attrs->fileid : 0;
  }

  // Fileid (and fsid) of a LOOKUP's target, from post-op attrs or GETATTR.
  v3_result lookup3_attrs(const bytes& dir, const std::string& name) {
    auto r = _nfs.lookup3(dir, name);
    if (r.status == NFS3_OK && !r.attrs) r.attrs = _nfs.getattr3(r.fh).attrs;
    return r;
  }

  // PUTROOTFH; LOOKUP components...; GETFH; GETATTR
  std::pair<bytes, object_attrs> v4_export_root(const std::string& pseudo) {
    std::vector<v4_op> ops{v4_op::putrootfh()};
    for (const auto& c : fs::path(pseudo)) ops.push_back(v4_op::lookup(c.string()));
    ops.push_back(v4_op::getfh());
    ops.push_back(v4_op::getattr());
    auto r = _nfs.compound4(ops);
    EXPECT_EQ(r.status, NFS4_OK) << "walking to /" << pseudo << ": " << _nfs.last_rpc_error();
    if (r.status != NFS4_OK || r.ops.size() != ops.size() || !r.ops.back().attrs) return {};
    return {r.ops[r.ops.size() - 2].fh, *r.ops.back().attrs};
  }

  object_attrs v4_pseudo_root() {
    auto r = _nfs.compound4({v4_op::putrootfh(), v4_op::getattr()});
    EXPECT_EQ(r.status, NFS4_OK);
    return r.ops.size() == 2 && r.ops[1].attrs ? *r.ops[1].attrs : object_attrs{};
  }

  std::string _server;
  fs::path _mnt;
  rpc_session _mount;
  rpc_session _nfs;
  uint64_t _xfs_root_ino = 0, _host_parent_ino = 0, _host_root_ino = 0;
};

}  // namespace dcache_e2e
