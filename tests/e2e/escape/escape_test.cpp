// "No export escape": ".." (NFSv3 LOOKUP) and LOOKUPP (NFSv4) must stop at
// an export's root, for the DCACHE export and the plain VFS export alike.
//
// Runs inside the e2e harness's network namespace (env DCACHE_SERVER,
// DCACHE_MNT). Export ids/paths: 1 /vfs (VFS), 2 /dcache (DCACHE over VFS),
// and from tests/e2e/test_escape.py 3 /dcache/inner, 4 /sib1, 5 /sib2 (DCACHE).
//
// The core stops ".." only when the object *is* the export's root cache
// entry (fsal_lookupp: obj == root_obj). MDCACHE keys entries by the
// sub-FSAL's wire-handle bytes, and VFS accepts several encodings of one
// kernel handle, so a re-encoded handle of the export root directory gets its
// own cache entry, the identity check misses and VFS resolves ".." on the
// real filesystem. The ReencodedRoot tests use exactly that.
#include "escape_common.hpp"

namespace dcache_e2e {
namespace {

namespace fs = std::filesystem;

// Run against both the plain VFS export and the DCACHE export.
class escape : public server_fixture, public ::testing::WithParamInterface<export_info> {};

// ---- 1. NFSv3 ".." at the export root and from a subdirectory
TEST_P(escape, V3DotDotAtRootStaysAtRoot) {
  const auto& e = GetParam();
  const uint64_t root_ino = host_ino(_mnt / e.host_rel);
  bytes root = mount_root(e);
  ASSERT_FALSE(root.empty());
  ASSERT_EQ(fileid3(root), root_ino) << "MNT handle does not name the export directory";
  bytes cur = root;
  for (int i = 0; i < 5; ++i) {
    auto r = lookup3_attrs(cur, "..");
    ASSERT_EQ(r.status, NFS3_OK) << "LOOKUP .. #" << i;
    ASSERT_TRUE(r.attrs);
    EXPECT_EQ(r.attrs->fileid, root_ino)
        << "LOOKUP .. #" << i << " left the export (xfs root ino " << _xfs_root_ino << ", host parent "
        << _host_parent_ino << ", host / " << _host_root_ino << ")";
    cur = r.fh;
  }
}

TEST_P(escape, V3DotDotFromSubdirWalksUpAndStops) {
  const auto& e = GetParam();
  fs::create_directories(_mnt / e.host_rel / "a" / "b");
  const uint64_t root_ino = host_ino(_mnt / e.host_rel);
  const uint64_t a_ino = host_ino(_mnt / e.host_rel / "a");
  bytes root = mount_root(e);
  auto a = lookup3_attrs(root, "a");
  ASSERT_EQ(a.status, NFS3_OK);
  auto b = lookup3_attrs(a.fh, "b");
  ASSERT_EQ(b.status, NFS3_OK);
  const uint64_t expect[] = {a_ino, root_ino, root_ino, root_ino};
  bytes cur = b.fh;
  for (uint64_t want : expect) {
    auto r = lookup3_attrs(cur, "..");
    ASSERT_EQ(r.status, NFS3_OK);
    ASSERT_TRUE(r.attrs);
    ASSERT_EQ(r.attrs->fileid, want);
    cur = r.fh;
  }
}

// ---- 2. NFSv4.0 LOOKUPP at the export root goes to the pseudo fs
TEST_P(escape, V4LookuppAtRootReturnsPseudoParent) {
  const auto& e = GetParam();
  const uint64_t root_ino = host_ino(_mnt / e.host_rel);
  auto [root_fh, root_attrs] = v4_export_root(e.pseudo_name);
  ASSERT_FALSE(root_fh.empty());
  ASSERT_EQ(root_attrs.fileid, root_ino);
  const object_attrs pseudo = v4_pseudo_root();

  auto r = _nfs.compound4({v4_op::putfh(root_fh), v4_op::lookupp(), v4_op::getfh(), v4_op::getattr()});
  ASSERT_EQ(r.status, NFS4_OK);
  ASSERT_TRUE(r.ops[3].attrs);
  const object_attrs& up = *r.ops[3].attrs;
  EXPECT_EQ(up.fileid, pseudo.fileid) << "LOOKUPP did not reach the pseudo root";
  EXPECT_EQ(up.fsid_major, pseudo.fsid_major);
  EXPECT_EQ(up.fsid_minor, pseudo.fsid_minor);
  EXPECT_NE(std::make_pair(up.fsid_major, up.fsid_minor),
            std::make_pair(root_attrs.fsid_major, root_attrs.fsid_minor))
      << "LOOKUPP stayed on the export's (XFS) filesystem";
  EXPECT_NE(up.fileid, _xfs_root_ino);
}

TEST_P(escape, V4LookupLookupThenThreeLookuppNeverLeave) {
  const auto& e = GetParam();
  fs::create_directories(_mnt / e.host_rel / "a" / "b");
  const uint64_t root_ino = host_ino(_mnt / e.host_rel);
  const uint64_t a_ino = host_ino(_mnt / e.host_rel / "a");
  auto [root_fh, root_attrs] = v4_export_root(e.pseudo_name);
  ASSERT_FALSE(root_fh.empty());
  const object_attrs pseudo = v4_pseudo_root();
  auto r = _nfs.compound4({v4_op::putfh(root_fh), v4_op::lookup("a"), v4_op::lookup("b"), v4_op::lookupp(),
                           v4_op::getattr(), v4_op::lookupp(), v4_op::getattr(), v4_op::lookupp(),
                           v4_op::getattr(), v4_op::getfh()});
  ASSERT_EQ(r.status, NFS4_OK);
  ASSERT_EQ(r.ops.size(), 10u);
  EXPECT_EQ(r.ops[4].attrs->fileid, a_ino);
  EXPECT_EQ(r.ops[6].attrs->fileid, root_ino);
  EXPECT_EQ(r.ops[8].attrs->fileid, pseudo.fileid);
  EXPECT_EQ(r.ops[8].attrs->fsid_major, pseudo.fsid_major);
  for (int i : {4, 6, 8}) EXPECT_NE(r.ops[i].attrs->fileid, _xfs_root_ino) << "op " << i;
}

// ---- 4(a)/5. Re-encoded handles of the export root: the core's identity
// check misses. Returns, per variant the server accepted, where ".." led.
struct reencoded_probe {
  std::string name;
  bytes fh;
  uint64_t dotdot_fileid = 0;
  int dotdot_status = -1;
};

class reencoded : public server_fixture {
 protected:
  std::vector<reencoded_probe> probe_v3(const export_info& e) {
    const uint64_t root_ino = host_ino(_mnt / e.host_rel);
    bytes root = mount_root(e);
    auto parsed = ganesha_fh::parse(root);
    EXPECT_TRUE(parsed) << "not a Ganesha v3 handle: " << hex(root);
    std::vector<reencoded_probe> out;
    if (!parsed) return out;
    std::printf("export %u root v3 fh %s\n", e.id, hex(root).c_str());
    for (const auto& v : reencodings(parsed->opaque)) {
      ganesha_fh h = *parsed;
      h.opaque = v.fsal_handle;
      reencoded_probe p{v.name, h.encode(true)};
      auto ga = _nfs.getattr3(p.fh);
      if (ga.status != NFS3_OK || !ga.attrs || ga.attrs->fileid != root_ino) {
        std::printf("  %-26s %s refused (GETATTR status %d)\n", v.name.c_str(), hex(p.fh).c_str(), ga.status);
        continue;
      }
      auto up = lookup3_attrs(p.fh, "..");
      p.dotdot_status = up.status;
      if (up.attrs) p.dotdot_fileid = up.attrs->fileid;
      std::printf("  %-26s %s accepted; LOOKUP .. -> status %d fileid %llu (root %llu, xfs root %llu)\n",
                  v.name.c_str(), hex(p.fh).c_str(), up.status,
                  static_cast<unsigned long long>(p.dotdot_fileid), static_cast<unsigned long long>(root_ino),
                  static_cast<unsigned long long>(_xfs_root_ino));
      out.push_back(p);
    }
    return out;
  }
};

// Known-vulnerable baseline: Ganesha 4.3's plain VFS export lets ".." from a
// re-encoded root handle out of the export. This also proves the trigger is
// real, so the DCACHE test below does not pass vacuously.
TEST_F(reencoded, VfsBaselineKnownVulnerableReencodedRootEscapes) {
  auto probes = probe_v3(k_vfs);
  int escaped = 0;
  for (const auto& p : probes)
    if (p.dotdot_status == NFS3_OK && p.dotdot_fileid == _xfs_root_ino) ++escaped;
  EXPECT_GT(escaped, 0) << "no re-encoded root handle escaped on plain VFS: the trigger no longer "
                           "works (Ganesha fixed?) and the DCACHE guard test proves nothing";
}

TEST_F(reencoded, DcacheReencodedRootDotDotStaysAtRoot) {
  const uint64_t root_ino = host_ino(_mnt / k_dcache.host_rel);
  auto probes = probe_v3(k_dcache);
  ASSERT_FALSE(probes.empty()) << "the server refused every re-encoding; nothing was exercised";
  for (const auto& p : probes) {
    EXPECT_EQ(p.dotdot_status, NFS3_OK) << p.name;
    EXPECT_EQ(p.dotdot_fileid, root_ino) << p.name << ": LOOKUP .. escaped the DCACHE export";
    // Keep walking from wherever we are: must never reach the XFS root.
    bytes cur = p.fh;
    for (int i = 0; i < 4; ++i) {
      auto r = lookup3_attrs(cur, "..");
      std::printf("    %s walk %d: LOOKUP .. status %d fileid %llu\n", p.name.c_str(), i, r.status,
                  static_cast<unsigned long long>(r.attrs ? r.attrs->fileid : 0));
      if (r.status != NFS3_OK) break;
      for (uint64_t outside : {_xfs_root_ino, _host_parent_ino, _host_root_ino})
        EXPECT_NE(r.attrs->fileid, outside) << p.name << " step " << i << " reached an outside inode";
      cur = r.fh;
    }
  }
}

TEST_F(reencoded, DcacheReencodedRootV4LookuppStaysInside) {
  const uint64_t root_ino = host_ino(_mnt / k_dcache.host_rel);
  auto [root_fh, root_attrs] = v4_export_root(k_dcache.pseudo_name);
  auto parsed = ganesha_fh::parse(root_fh);
  ASSERT_TRUE(parsed) << hex(root_fh);
  const object_attrs pseudo = v4_pseudo_root();
  int exercised = 0;
  for (const auto& v : reencodings(parsed->opaque)) {
    ganesha_fh h = *parsed;
    h.opaque = v.fsal_handle;
    auto r =
        _nfs.compound4({v4_op::putfh(h.encode(false)), v4_op::getattr(), v4_op::lookupp(), v4_op::getattr()});
    if (r.ops.size() < 2 || r.ops[1].status != NFS4_OK || r.ops[1].attrs->fileid != root_ino)
      continue;  // refused re-encoding: nothing to check
    ++exercised;
    ASSERT_EQ(r.ops.size(), 4u) << v.name << " LOOKUPP status " << r.ops[2].status;
    const uint64_t got = r.ops[3].attrs->fileid;
    std::printf("  v4 %-26s LOOKUPP -> fileid %llu\n", v.name.c_str(), static_cast<unsigned long long>(got));
    EXPECT_TRUE(got == root_ino || got == pseudo.fileid)
        << v.name << ": LOOKUPP led to fileid " << got << " (xfs root " << _xfs_root_ino << ")";
  }
  EXPECT_GT(exercised, 0) << "the server refused every re-encoding";
}

// ---- 3. Handles naming inodes outside the export
TEST_F(server_fixture, ForeignHandleRelabelledForDcacheGivesNoWayOut) {
  // /vfs's root handle with its export id changed to the DCACHE export's:
  // the VFS part names $MNT/vfs, which is outside $MNT/dcache.
  bytes vfs_root = mount_root(k_vfs);
  auto h = ganesha_fh::parse(vfs_root);
  ASSERT_TRUE(h);
  h->export_id = k_dcache.id;
  bytes forged = h->encode(true);
  auto ga = _nfs.getattr3(forged);
  auto rd = _nfs.readdir3(forged);
  auto up = lookup3_attrs(forged, "..");
  std::printf("forged %s: GETATTR %d READDIR %d LOOKUP.. %d -> %llu\n", hex(forged).c_str(), ga.status,
              rd.status, up.status, static_cast<unsigned long long>(up.attrs ? up.attrs->fileid : 0));
  if (ga.status == NFS3_OK) {
    // Accepted (VFS does no subtree check): at least ".." must not climb.
    EXPECT_FALSE(up.status == NFS3_OK && up.attrs && up.attrs->fileid == _xfs_root_ino)
        << "a /vfs handle relabelled as export " << k_dcache.id << " walks to the XFS root with LOOKUP ..";
  } else {
    EXPECT_TRUE(ga.status == NFS3ERR_STALE || ga.status == NFS3ERR_BADHANDLE || ga.status == NFS3ERR_ACCES)
        << ga.status;
  }
}

// ---- nested and sibling DCACHE exports on one filesystem
TEST_F(server_fixture, NestedAndSiblingExportsStayApart) {
  const struct {
    export_info e;
  } cases[] = {
      {{3, "dcache/inner", "dcache/inner", true}}, {{4, "sib1", "sib1", true}}, {{5, "sib2", "sib2", true}}};
  const object_attrs pseudo = v4_pseudo_root();
  const uint64_t dcache_ino = host_ino(_mnt / "dcache");
  for (const auto& c : cases) {
    SCOPED_TRACE("export " + std::to_string(c.e.id));
    const uint64_t root_ino = host_ino(_mnt / c.e.host_rel);
    bytes root = mount_root(c.e);
    ASSERT_FALSE(root.empty());
    bytes cur = root;
    for (int i = 0; i < 3; ++i) {
      auto r = lookup3_attrs(cur, "..");
      ASSERT_EQ(r.status, NFS3_OK);
      EXPECT_EQ(r.attrs->fileid, root_ino) << "v3 .. #" << i;
      cur = r.fh;
    }
    auto [fh4, a4] = v4_export_root(c.e.pseudo_name);
    ASSERT_FALSE(fh4.empty());
    auto r = _nfs.compound4({v4_op::putfh(fh4), v4_op::lookupp(), v4_op::getattr()});
    ASSERT_EQ(r.status, NFS4_OK);
    // The nested export's pseudo parent is the /dcache export's root.
    const uint64_t want = c.e.id == 3 ? dcache_ino : pseudo.fileid;
    EXPECT_EQ(r.ops[2].attrs->fileid, want);
  }
}

INSTANTIATE_TEST_SUITE_P(exports, escape, ::testing::Values(k_vfs, k_dcache),
                         [](const ::testing::TestParamInfo<export_info>& p) { return p.param.pseudo_name; });

}  // namespace
}  // namespace dcache_e2e
