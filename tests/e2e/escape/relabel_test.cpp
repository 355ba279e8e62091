// "No export escape" for handles relabelled between DCACHE exports on one
// filesystem (churn_test.cpp has the other forced bad states): a handle of
// one export's directory, given another export's id, must be STALE or stay
// inside the export it now names, cached or not, nested or not.
#include "escape_common.hpp"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace dcache_e2e {
namespace {

namespace fs = std::filesystem;

// A handle of the directory at `path` as the server would encode it for
// export_id: the kernel's handle from name_to_handle_at on the host, in the
// VFS wire format of `like` (a server-issued handle on the same filesystem).
std::optional<bytes> host_handle(const fs::path& path, const bytes& like, uint16_t export_id, bool v3) {
  auto g = ganesha_fh::parse(like);
  if (!g) return std::nullopt;
  auto w = vfs_wire::parse(g->opaque);
  if (!w) return std::nullopt;
  alignas(file_handle) unsigned char buf[sizeof(file_handle) + MAX_HANDLE_SZ];
  auto* fh = reinterpret_cast<file_handle*>(buf);
  fh->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (::name_to_handle_at(AT_FDCWD, path.c_str(), fh, &mount_id, 0) != 0) {
    ADD_FAILURE() << "name_to_handle_at(" << path << "): " << std::strerror(errno);
    return std::nullopt;
  }
  w->kernel_type = fh->handle_type;
  w->kernel_fh.assign(fh->f_handle, fh->f_handle + fh->handle_bytes);
  g->opaque = w->encode(1);
  g->export_id = export_id;
  return g->encode(v3);
}

bytes relabel(const bytes& fh, uint16_t export_id, bool v3) {
  auto g = ganesha_fh::parse(fh);
  if (!g) return {};
  g->export_id = export_id;
  return g->encode(v3);
}

// What a (relabelled) handle gives: GETATTR, READDIR, LOOKUP of a child,
// LOOKUP "..", and v4 PUTFH+GETATTR / LOOKUPP / LOOKUP child.
struct relabel_observation {
  int getattr = -1;
  uint64_t fileid = 0;
  int readdir = -1;
  std::vector<std::string> names;
  int lookup_child = -1;
  int dotdot = -1;
  uint64_t dotdot_fileid = 0;
  int v4_getattr = -1;
  uint64_t v4_fileid = 0;
  int v4_lookupp = -1;
  uint64_t v4_lookupp_fileid = 0;
  int v4_lookup_child = -1;
};

class relabelled : public server_fixture {
 protected:
  relabel_observation observe(const std::string& label, const bytes& v3fh, const bytes& v4fh,
                              const std::string& child) {
    relabel_observation o;
    auto ga = _nfs.getattr3(v3fh);
    o.getattr = ga.status;
    if (ga.attrs) o.fileid = ga.attrs->fileid;
    auto rd = _nfs.readdir3_all(v3fh, 1000);
    o.readdir = rd.status;
    for (const auto& e : rd.entries)
      if (e.name != "." && e.name != "..") o.names.push_back(e.name);
    o.lookup_child = _nfs.lookup3(v3fh, child).status;
    auto up = lookup3_attrs(v3fh, "..");
    o.dotdot = up.status;
    if (up.attrs) o.dotdot_fileid = up.attrs->fileid;
    if (!v4fh.empty()) {
      auto a = _nfs.compound4({v4_op::putfh(v4fh), v4_op::getattr()});
      o.v4_getattr = a.ops.size() == 2 ? a.ops[1].status : a.status;
      if (a.ops.size() == 2 && a.ops[1].attrs) o.v4_fileid = a.ops[1].attrs->fileid;
      auto p = _nfs.compound4({v4_op::putfh(v4fh), v4_op::lookupp(), v4_op::getattr()});
      o.v4_lookupp = p.ops.size() >= 2 ? p.ops[1].status : p.status;
      if (p.ops.size() == 3 && p.ops[2].attrs) o.v4_lookupp_fileid = p.ops[2].attrs->fileid;
      auto c = _nfs.compound4({v4_op::putfh(v4fh), v4_op::lookup(child)});
      o.v4_lookup_child = c.ops.size() == 2 ? c.ops[1].status : c.status;
    }
    std::string names;
    for (const auto& n : o.names) names += " " + n;
    std::printf(
        "%s:\n  v3 GETATTR %d fileid %llu; READDIR %d [%s ]; LOOKUP %s %d; LOOKUP .. %d fileid %llu\n"
        "  v4 PUTFH+GETATTR %d fileid %llu; LOOKUPP %d fileid %llu; LOOKUP %s %d\n",
        label.c_str(), o.getattr, static_cast<unsigned long long>(o.fileid), o.readdir, names.c_str(),
        child.c_str(), o.lookup_child, o.dotdot, static_cast<unsigned long long>(o.dotdot_fileid),
        o.v4_getattr, static_cast<unsigned long long>(o.v4_fileid), o.v4_lookupp,
        static_cast<unsigned long long>(o.v4_lookupp_fileid), child.c_str(), o.v4_lookup_child);
    return o;
  }
};

const export_info k_inner{3, "dcache/inner", "dcache/inner", true};
const export_info k_sib1{4, "sib1", "sib1", true};
const export_info k_sib2{5, "sib2", "sib2", true};

// MDCACHE shares entries among the exports of one FSAL on one filesystem
// and finds a handle by its FSAL bytes before asking the FSAL, so the
// sibling root -- always cached, it is export 4's root entry -- relabelled
// as export 5 would be served from the shared entry.  DCACHE's
// wire_to_host refuses it: export 5 never handed that handle out, and the
// check on first use finds the directory outside export 5's tree.  Its
// own export 4 still serves it.
TEST_F(relabelled, CachedSiblingRootRelabelledIsStale) {
  fs::create_directories(_mnt / "sib1" / "secret_of_sib1");
  std::fclose(std::fopen((_mnt / "sib1" / "secret_of_sib1" / "payload_of_sib1").c_str(), "w"));
  const uint64_t sib1_ino = host_ino(_mnt / "sib1");
  bytes sib1_v3 = mount_root(k_sib1);
  auto [sib1_v4, a4] = v4_export_root(k_sib1.pseudo_name);
  ASSERT_FALSE(sib1_v3.empty());
  ASSERT_FALSE(sib1_v4.empty());
  // Cached and served under its own export.
  auto own = observe("sib1 root under its own export 4", sib1_v3, sib1_v4, "secret_of_sib1");
  ASSERT_EQ(own.getattr, NFS3_OK);
  ASSERT_EQ(own.fileid, sib1_ino);
  ASSERT_EQ(own.lookup_child, NFS3_OK);

  auto o = observe("sib1 root relabelled as export 5 (/sib2)", relabel(sib1_v3, 5, true),
                   relabel(sib1_v4, 5, false), "secret_of_sib1");
  EXPECT_EQ(o.getattr, NFS3ERR_STALE);
  EXPECT_EQ(o.readdir, NFS3ERR_STALE);
  EXPECT_EQ(o.lookup_child, NFS3ERR_STALE);
  EXPECT_EQ(o.dotdot, NFS3ERR_STALE);
  EXPECT_EQ(o.v4_getattr, NFS4ERR_STALE);
  EXPECT_EQ(o.v4_lookup_child, NFS4ERR_STALE);
  EXPECT_FALSE(o.v4_lookupp == NFS4_OK && o.v4_lookupp_fileid == _xfs_root_ino);
  // A child handle obtained under export 4, relabelled as export 5, is
  // refused too: nothing of sib1 is reachable through export 5.
  auto child = lookup3_attrs(sib1_v3, "secret_of_sib1");
  ASSERT_EQ(child.status, NFS3_OK);
  auto listing = _nfs.readdir3_all(relabel(child.fh, 5, true));
  EXPECT_EQ(listing.status, NFS3ERR_STALE);
}

// Not cached: a sibling directory nobody has looked up, its handle made on
// the host and labelled export 5, goes through DCACHE's create_handle and is
// refused as stale; labelled with its own export 4 it is served.
TEST_F(relabelled, UncachedSiblingDirectoryRelabelledIsStale) {
  fs::create_directories(_mnt / "sib1" / "never_looked_up" / "below");
  bytes sib1_v3 = mount_root(k_sib1);
  auto [sib1_v4, a4] = v4_export_root(k_sib1.pseudo_name);
  // Self-check of the forging: the host-made handle of sib1 itself must
  // equal the server's (modulo nothing).
  auto self = host_handle(_mnt / "sib1", sib1_v3, 4, true);
  ASSERT_TRUE(self);
  EXPECT_EQ(hex(*self), hex(sib1_v3)) << "host-made handle differs from the server's encoding";
  auto as5 = host_handle(_mnt / "sib1" / "never_looked_up", sib1_v3, 5, true);
  auto as5_v4 = host_handle(_mnt / "sib1" / "never_looked_up", sib1_v4, 5, false);
  ASSERT_TRUE(as5 && as5_v4);
  auto o5 = observe("uncached sib1/never_looked_up labelled export 5", *as5, *as5_v4, "below");
  EXPECT_EQ(o5.getattr, NFS3ERR_STALE);
  EXPECT_EQ(o5.readdir, NFS3ERR_STALE);
  EXPECT_EQ(o5.v4_getattr, NFS4ERR_STALE);
  EXPECT_EQ(o5.v4_lookup_child, NFS4ERR_STALE);
  // The XFS root made on the host, labelled as the DCACHE export 2.
  auto xfs_root = host_handle(_mnt, sib1_v3, 2, true);
  ASSERT_TRUE(xfs_root);
  auto ox = observe("host-made XFS root handle labelled export 2 (/dcache)", *xfs_root,
                    *host_handle(_mnt, sib1_v4, 2, false), "vfs");
  EXPECT_EQ(ox.getattr, NFS3ERR_STALE);
  EXPECT_EQ(ox.v4_getattr, NFS4ERR_STALE);
}

// Nested: /dcache's root (export 2, always cached) relabelled as the nested
// export 3 (/dcache/inner) lies outside export 3 and is refused; the nested
// root relabelled as its enclosing export is legitimately inside.
TEST_F(relabelled, NestedExportsRelabelled) {
  fs::create_directories(_mnt / "dcache" / "outer_only");
  const uint64_t dcache_ino = host_ino(_mnt / "dcache");
  const uint64_t inner_ino = host_ino(_mnt / "dcache" / "inner");
  bytes outer_v3 = mount_root(k_dcache);
  auto [outer_v4, oa] = v4_export_root(k_dcache.pseudo_name);
  auto up = observe("/dcache root relabelled as export 3 (/dcache/inner)", relabel(outer_v3, 3, true),
                    relabel(outer_v4, 3, false), "outer_only");
  EXPECT_EQ(up.getattr, NFS3ERR_STALE);
  EXPECT_EQ(up.readdir, NFS3ERR_STALE);
  EXPECT_EQ(up.lookup_child, NFS3ERR_STALE);
  EXPECT_EQ(up.v4_getattr, NFS4ERR_STALE);
  EXPECT_EQ(up.v4_lookup_child, NFS4ERR_STALE);
  EXPECT_FALSE(up.v4_lookupp == NFS4_OK && up.v4_lookupp_fileid == _xfs_root_ino);

  bytes inner_v3 = mount_root(k_inner);
  auto [inner_v4, ia] = v4_export_root(k_inner.pseudo_name);
  auto down = observe("/dcache/inner root relabelled as export 2 (/dcache)", relabel(inner_v3, 2, true),
                      relabel(inner_v4, 2, false), "nothing");
  EXPECT_EQ(down.getattr, NFS3_OK);
  EXPECT_EQ(down.fileid, inner_ino);
  EXPECT_EQ(down.dotdot, NFS3_OK);
  EXPECT_EQ(down.dotdot_fileid, dcache_ino) << "inside export 2, \"..\" is its real parent";
}

}  // namespace
}  // namespace dcache_e2e
