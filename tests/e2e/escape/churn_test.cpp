// "No export escape" under forced bad states: the export
// root's cache entry made to diverge from the filesystem -- the root renamed
// or replaced from the host, MDCACHE churned past its high-water mark, handles
// gone stale -- and handles relabelled between DCACHE exports on one
// filesystem (relabel_test.cpp). After every trigger the same probes run against /dcache and
// /vfs in one server:
//   v3 LOOKUP ".." chains from the export root and from subdirectories,
//   v4.0 PUTFH(root)+LOOKUPP, PUTFH(root) LOOKUP a LOOKUP b LOOKUPP x3,
//   the same from re-encoded handles (several encodings of one XFS inode),
//   and from freshly obtained handles (MOUNT again, PUTROOTFH+LOOKUP).
// A result is "inside" when its fileid is a directory of the export's tree
// as the host sees it at that moment (or, for v4, the pseudo filesystem the
// protocol climbs into); anything else is an escape. DCACHE must never
// escape; what plain VFS does is printed and, where it escapes, asserted as
// the known-vulnerable baseline.
//
// Run by tests/e2e/test_escape.py (MDCACHE
// Entries_HWMark = 200; exports 1 /vfs VFS, 2 /dcache, 3 /dcache/inner,
// 4 /sib1, 5 /sib2 DCACHE). Every loop is bounded in count and in time.
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
using clock_type = std::chrono::steady_clock;

constexpr auto k_churn_budget = std::chrono::seconds(45);  // trigger (c)

// Error statuses that mean "refused" (the same numbers in v3 and v4 where
// they overlap: PERM 1, NOENT 2, ACCES 13, NOTDIR 20, STALE 70, BADHANDLE
// 10001; v4 adds FHEXPIRED 10014).
bool is_refusal(int status) {
  switch (status) {
    case 1:
    case 2:
    case 13:
    case 20:
    case 70:
    case 10001:
    case 10014:
      return true;
    default:
      return false;
  }
}

// What one group of probes saw.
struct probe_tally {
  int inside = 0;                       // success, fileid inside the tree
  std::map<int, int> refusals;          // status -> count
  std::vector<std::string> escapes;     // success with an outside fileid
  std::vector<std::string> unexpected;  // other errors, success without attrs

  int total() const {
    int n = inside + static_cast<int>(escapes.size() + unexpected.size());
    for (const auto& [s, c] : refusals) n += c;
    return n;
  }
  void merge(const probe_tally& o) {
    inside += o.inside;
    for (const auto& [s, c] : o.refusals) refusals[s] += c;
    escapes.insert(escapes.end(), o.escapes.begin(), o.escapes.end());
    unexpected.insert(unexpected.end(), o.unexpected.begin(), o.unexpected.end());
  }
  std::string summary() const {
    std::ostringstream s;
    s << total() << " probes: " << inside << " inside";
    for (const auto& [st, c] : refusals) s << ", status " << st << " x" << c;
    s << ", " << escapes.size() << " ESCAPED, " << unexpected.size() << " unexpected";
    for (size_t i = 0; i < escapes.size() && i < 4; ++i) s << "\n      escape: " << escapes[i];
    for (size_t i = 0; i < unexpected.size() && i < 4; ++i) s << "\n      unexpected: " << unexpected[i];
    return s.str();
  }
};

// Handles a client holds for one export: the root and a/b below it.
struct held_handles {
  std::vector<std::pair<std::string, bytes>> v3;  // name, handle
  bytes v4_root;
  std::vector<std::pair<std::string, bytes>> v4;
};

struct round_result {
  probe_tally canonical;  // handles as the server issued them
  probe_tally reencoded;  // other encodings of the same inodes
};

class churn : public server_fixture {
 protected:
  void SetUp() override {
    server_fixture::SetUp();
    const object_attrs p = v4_pseudo_root();
    _pseudo_fsid = {p.fsid_major, p.fsid_minor};
  }

  // The directories (by inode) that count as inside, from the host's view.
  void set_tree(const std::vector<fs::path>& roots) {
    _inside.clear();
    for (const auto& r : roots) {
      std::error_code ec;
      if (!fs::is_directory(r, ec)) continue;
      _inside.insert(host_ino(r));
      for (auto it = fs::recursive_directory_iterator(r, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_directory(ec)) _inside.insert(host_ino(it->path()));
    }
  }

  // Names an inode for the report.
  std::string where_is(uint64_t ino) {
    if (ino == _xfs_root_ino) return "the XFS root $DCACHE_MNT";
    if (ino == _host_parent_ino) return "the host directory above $DCACHE_MNT";
    if (ino == _host_root_ino) return "the host's /";
    std::error_code ec;
    int budget = 200000;
    for (auto it = fs::recursive_directory_iterator(_mnt, ec);
         !ec && it != fs::recursive_directory_iterator() && budget-- > 0; it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) == 0 && st.st_ino == ino)
        return it->path().lexically_relative(_mnt).string();
    }
    return "an inode not found under $DCACHE_MNT";
  }

  void note(probe_tally& t, const std::string& what, int status, const std::optional<object_attrs>& a,
            bool v4) {
    if (status != 0) {
      if (is_refusal(status))
        ++t.refusals[status];
      else
        t.unexpected.push_back(what + ": status " + std::to_string(status));
      return;
    }
    if (!a) {
      t.unexpected.push_back(what + ": success without attributes");
      return;
    }
    if (v4 && std::make_pair(a->fsid_major, a->fsid_minor) == _pseudo_fsid) {
      ++t.inside;  // LOOKUPP above the export root: the pseudo fs
      return;
    }
    if (_inside.count(a->fileid) != 0) {
      ++t.inside;
      return;
    }
    t.escapes.push_back(what + " -> fileid " + std::to_string(a->fileid) + " (" + where_is(a->fileid) + ")");
  }

  // LOOKUP ".." up to `steps` times from fh, noting every answer.
  void v3_dotdot_chain(probe_tally& t, const std::string& what, const bytes& fh, int steps) {
    bytes cur = fh;
    for (int i = 0; i < steps; ++i) {
      auto r = lookup3_attrs(cur, "..");
      note(t, what + " v3 ..#" + std::to_string(i), r.status, r.attrs, false);
      if (r.status != NFS3_OK) return;
      cur = r.fh;
    }
  }

  // PUTFH fh, then (LOOKUPP, GETATTR) x steps.
  void v4_lookupp_chain(probe_tally& t, const std::string& what, const bytes& fh, int steps) {
    std::vector<v4_op> ops{v4_op::putfh(fh)};
    for (int i = 0; i < steps; ++i) {
      ops.push_back(v4_op::lookupp());
      ops.push_back(v4_op::getattr());
    }
    note_compound(t, what, _nfs.compound4(ops));
  }

  // Notes the first failing op of a COMPOUND (if any) and every GETATTR.
  void note_compound(probe_tally& t, const std::string& what, const v4_result& r) {
    if (r.ops.empty()) {
      t.unexpected.push_back(what + ": no reply (" + _nfs.last_rpc_error() + ")");
      return;
    }
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const auto& o = r.ops[i];
      if (o.status != NFS4_OK) {
        note(t, what + " op#" + std::to_string(i), o.status, std::nullopt, true);
        return;
      }
      if (o.op == OP_GETATTR) note(t, what + " op#" + std::to_string(i), 0, o.attrs, true);
    }
  }

  // Handles of e's root and of a, a/b below it, as a client gets them.
  // Failures are noted, not fatal: after a replacement some may not exist.
  held_handles acquire(const export_info& e, probe_tally& t) {
    held_handles h;
    auto m = _mount.mount3("/" + e.pseudo_name);
    if (m.status != 0) {
      t.unexpected.push_back("MNT /" + e.pseudo_name + ": status " + std::to_string(m.status));
    } else {
      h.v3.emplace_back("root", m.fh);
      auto ga = _nfs.getattr3(m.fh);
      note(t, "fresh MNT root GETATTR", ga.status, ga.attrs, false);
      auto a = lookup3_attrs(m.fh, "a");
      if (a.status == NFS3_OK) {
        h.v3.emplace_back("a", a.fh);
        auto b = lookup3_attrs(a.fh, "b");
        if (b.status == NFS3_OK) h.v3.emplace_back("a/b", b.fh);
      }
    }
    std::vector<v4_op> ops{v4_op::putrootfh()};
    for (const auto& c : fs::path(e.pseudo_name)) ops.push_back(v4_op::lookup(c.string()));
    ops.push_back(v4_op::getfh());
    const size_t root_getfh = ops.size() - 1;
    ops.push_back(v4_op::lookup("a"));
    ops.push_back(v4_op::getfh());
    ops.push_back(v4_op::lookup("b"));
    ops.push_back(v4_op::getfh());
    auto r = _nfs.compound4(ops);
    const char* names[] = {"root", "a", "a/b"};
    for (size_t i = root_getfh, n = 0; i < r.ops.size() && n < 3; i += 2, ++n) {
      if (r.ops[i].status != NFS4_OK || r.ops[i].op != OP_GETFH) break;
      h.v4.emplace_back(names[n], r.ops[i].fh);
    }
    if (!h.v4.empty()) h.v4_root = h.v4.front().second;
    return h;
  }

  // The full probe set over one export's held handles.
  round_result probe(const held_handles& h, const std::string& tag) {
    round_result out;
    for (const auto& [name, fh] : h.v3) {
      v3_dotdot_chain(out.canonical, tag + " " + name, fh, 4);
      auto parsed = ganesha_fh::parse(fh);
      if (!parsed) continue;
      for (const auto& v : reencodings(parsed->opaque)) {
        ganesha_fh g = *parsed;
        g.opaque = v.fsal_handle;
        const bytes re = g.encode(true);
        auto ga = _nfs.getattr3(re);
        note(out.reencoded, tag + " " + name + "/" + v.name + " GETATTR", ga.status, ga.attrs, false);
        if (ga.status == NFS3_OK) v3_dotdot_chain(out.reencoded, tag + " " + name + "/" + v.name, re, 3);
      }
    }
    for (const auto& [name, fh] : h.v4) {
      v4_lookupp_chain(out.canonical, tag + " v4 " + name, fh, 3);
      auto parsed = ganesha_fh::parse(fh);
      if (!parsed) continue;
      for (const auto& v : reencodings(parsed->opaque)) {
        ganesha_fh g = *parsed;
        g.opaque = v.fsal_handle;
        v4_lookupp_chain(out.reencoded, tag + " v4 " + name + "/" + v.name, g.encode(false), 2);
      }
    }
    if (!h.v4_root.empty()) {
      note_compound(out.canonical, tag + " v4 root LOOKUP a LOOKUP b LOOKUPPx3",
                    _nfs.compound4({v4_op::putfh(h.v4_root), v4_op::lookup("a"), v4_op::lookup("b"),
                                    v4_op::lookupp(), v4_op::getattr(), v4_op::lookupp(), v4_op::getattr(),
                                    v4_op::lookupp(), v4_op::getattr()}));
    }
    return out;
  }

  // Old handles and freshly obtained ones, both exports; prints all.
  struct export_state {
    const export_info* e;
    held_handles old;
    round_result total;
  };

  void round(export_state& s, const std::string& tag, const std::vector<fs::path>& tree) {
    set_tree(tree);
    probe_tally acquire_tally;
    held_handles fresh = acquire(*s.e, acquire_tally);
    round_result r_old = probe(s.old, tag + " old");
    round_result r_new = probe(fresh, tag + " fresh");
    r_old.canonical.merge(acquire_tally);
    r_old.canonical.merge(r_new.canonical);
    r_old.reencoded.merge(r_new.reencoded);
    if (!fresh.v3.empty()) {
      auto ga = _nfs.getattr3(fresh.v3[0].second);
      std::printf("[%s] %s: fresh MNT root names fileid %llu\n", s.e->pseudo_name.c_str(), tag.c_str(),
                  static_cast<unsigned long long>(ga.attrs ? ga.attrs->fileid : 0));
    }
    std::printf("[%s] %s\n    canonical: %s\n    reencoded: %s\n", s.e->pseudo_name.c_str(), tag.c_str(),
                r_old.canonical.summary().c_str(), r_old.reencoded.summary().c_str());
    s.total.canonical.merge(r_old.canonical);
    s.total.reencoded.merge(r_old.reencoded);
  }

  // DCACHE: never an outside fileid, only refusal-like errors, and the
  // probes actually ran.
  void expect_dcache_held(const export_state& s) {
    for (const probe_tally* t : {&s.total.canonical, &s.total.reencoded}) {
      EXPECT_TRUE(t->escapes.empty()) << "DCACHE export escaped:\n" << t->summary();
      EXPECT_TRUE(t->unexpected.empty()) << t->summary();
    }
    EXPECT_GT(s.total.canonical.inside, 0) << "no probe reached the export at all";
    EXPECT_GT(s.total.reencoded.total(), 0) << "no re-encoded handle was probed";
  }

  // Plain VFS: canonical handles stay inside (the core's identity check
  // holds for them); re-encoded ones are the known escape.
  void expect_vfs_baseline(const export_state& s) {
    EXPECT_TRUE(s.total.canonical.escapes.empty())
        << "plain VFS escaped with canonical handles (new baseline?):\n"
        << s.total.canonical.summary();
    // Known-vulnerable baseline: under every trigger a re-encoded root
    // handle still walks plain VFS out to the XFS root. If this stops,
    // the DCACHE assertions above may pass vacuously.
    EXPECT_FALSE(s.total.reencoded.escapes.empty())
        << "VFS baseline no longer escapes with re-encoded handles (Ganesha fixed?)";
  }

  void make_ab(const fs::path& root) { fs::create_directories(root / "a" / "b"); }

  // a/b under the export's root, and the handles the client holds.
  void hold(export_state& s) {
    make_ab(_mnt / s.e->host_rel);
    probe_tally ignore;
    s.old = acquire(*s.e, ignore);
    ASSERT_EQ(s.old.v3.size(), 3u) << s.e->pseudo_name;
  }

  // The plain VFS export, then the DCACHE one: hold(), then `body` with
  // the export's root; then each export's expectations.
  void on_both(const std::function<void(export_state&, const fs::path& root)>& body) {
    export_state st[] = {{&k_vfs, {}, {}}, {&k_dcache, {}, {}}};
    for (auto& s : st) {
      hold(s);
      if (HasFatalFailure()) return;
      body(s, _mnt / s.e->host_rel);
      if (HasFatalFailure()) return;
    }
    expect_vfs_baseline(st[0]);
    expect_dcache_held(st[1]);
  }

  std::set<uint64_t> _inside;
  std::pair<uint64_t, uint64_t> _pseudo_fsid;
};

fs::path moved(const fs::path& p) {
  return fs::path(p.string() + ".moved");
}

// ---- (b) the export root changed from the host while the server runs
TEST_F(churn, RootRenamedAwayAndBack) {
  on_both([&](export_state& s, const fs::path& root) {
    round(s, "before", {root});
    fs::rename(root, moved(root));
    round(s, "renamed away", {moved(root)});
    fs::rename(moved(root), root);
    round(s, "renamed back", {root});
  });
}

TEST_F(churn, RootReplacedByANewDirectory) {
  on_both([&](export_state& s, const fs::path& root) {
    fs::rename(root, moved(root));
    fs::create_directory(root);
    make_ab(root);  // same names in the impostor, so LOOKUP a/b can hit it
    std::printf("[%s] replaced: old root ino %llu, new root ino %llu\n", s.e->pseudo_name.c_str(),
                static_cast<unsigned long long>(host_ino(moved(root))),
                static_cast<unsigned long long>(host_ino(root)));
    // After a replacement either directory may count as the export.
    round(s, "replaced", {moved(root), root});
    fs::remove_all(root);
    fs::rename(moved(root), root);
    round(s, "restored", {root});
  });
}

TEST_F(churn, RootChmodTouchAndManyHostEntries) {
  const auto deadline = clock_type::now() + std::chrono::seconds(30);
  on_both([&](export_state& s, const fs::path& root) {
    fs::permissions(root, fs::perms(0700));
    round(s, "chmod 0700", {root});
    fs::permissions(root, fs::perms(0755));
    ASSERT_EQ(::utimensat(AT_FDCWD, root.c_str(), nullptr, 0), 0) << std::strerror(errno);
    round(s, "touched", {root});
    constexpr int k_entries = 1500;
    for (int i = 0; i < k_entries && clock_type::now() < deadline; ++i) {
      const fs::path p = root / ("host_" + std::to_string(i));
      if (i % 3 == 0)
        fs::create_directory(p);
      else
        std::fclose(std::fopen(p.c_str(), "w"));
      if (i % 500 == 499) round(s, "after " + std::to_string(i + 1) + " host creates", {root});
    }
    for (int i = 0; i < k_entries; ++i) fs::remove(root / ("host_" + std::to_string(i)));
    round(s, "after host deletes", {root});
  });
}

// ---- (c) MDCACHE past its high-water mark, long mixed traffic
TEST_F(churn, EvictionAndLongMixedTrafficBounded) {
  export_state st[] = {{&k_vfs, {}, {}}, {&k_dcache, {}, {}}};
  const auto start = clock_type::now();
  const auto deadline = start + k_churn_budget;
  // Per export: 8 NFS-made dirs x 12 NFS-made subdirs, and 8 x 150 host
  // files: ~1300 entries each, far past Entries_HWMark = 200.
  constexpr int k_dirs = 8, k_subdirs = 12, k_host_files = 150;
  std::vector<std::vector<std::pair<std::string, bytes>>> deep(2);  // held early
  for (size_t x = 0; x < 2; ++x) {
    auto& s = st[x];
    const fs::path root = _mnt / s.e->host_rel;
    hold(s);
    if (HasFatalFailure()) return;
    const bytes& root_fh = s.old.v3[0].second;
    for (int d = 0; d < k_dirs; ++d) {
      const std::string dn = "churn" + std::to_string(d);
      auto md = _nfs.mkdir3(root_fh, dn);
      ASSERT_TRUE(md.status == NFS3_OK || md.status == NFS3ERR_EXIST) << md.status;
      auto dl = lookup3_attrs(root_fh, dn);
      ASSERT_EQ(dl.status, NFS3_OK);
      for (int sd = 0; sd < k_subdirs; ++sd) {
        const std::string sn = "sub" + std::to_string(sd);
        auto ms = _nfs.mkdir3(dl.fh, sn);
        ASSERT_TRUE(ms.status == NFS3_OK || ms.status == NFS3ERR_EXIST) << ms.status;
        if (ms.status == NFS3_OK && !ms.fh.empty() && sd % 4 == 0) deep[x].emplace_back(dn + "/" + sn, ms.fh);
      }
      for (int f = 0; f < k_host_files; ++f)
        std::fclose(std::fopen((root / dn / ("hostfile" + std::to_string(f))).c_str(), "w"));
    }
  }
  set_tree({_mnt});  // only for the count below
  std::printf("created ~%d entries per export in %.1fs\n", k_dirs * (k_subdirs + k_host_files + 1),
              std::chrono::duration<double>(clock_type::now() - start).count());

  // Interleave: READDIR everything of one dir, LOOKUP its entries, then a
  // probe round including the early (by now evicted) deep handles, whose
  // re-presentation goes through create_handle.
  int iteration = 0;
  // 10 passes over the 8 directories: each pass touches ~2,600 entries,
  // 13 times the high-water mark (250 iterations, 31 passes, took 42 s)
  constexpr int k_max_iterations = 80;
  while (iteration < k_max_iterations && clock_type::now() < deadline) {
    for (size_t x = 0; x < 2; ++x) {
      auto& s = st[x];
      const fs::path root = _mnt / s.e->host_rel;
      const bytes& root_fh = s.old.v3[0].second;
      const std::string dn = "churn" + std::to_string(iteration % k_dirs);
      auto dl = lookup3_attrs(root_fh, dn);
      ASSERT_EQ(dl.status, NFS3_OK) << s.e->pseudo_name << "/" << dn;
      auto listing = _nfs.readdir3_all(dl.fh);
      EXPECT_EQ(listing.status, NFS3_OK);
      EXPECT_TRUE(listing.complete);
      EXPECT_GE(listing.entries.size(), static_cast<size_t>(k_subdirs + k_host_files));
      for (size_t i = 0; i < listing.entries.size(); i += 7)
        (void)_nfs.lookup3(dl.fh, listing.entries[i].name);
      (void)_nfs.readdir3_all(root_fh);
      held_handles h = s.old;
      for (const auto& d : deep[x]) h.v3.push_back(d);
      set_tree({root});
      round_result r = probe(h, "iteration " + std::to_string(iteration));
      s.total.canonical.merge(r.canonical);
      s.total.reencoded.merge(r.reencoded);
      if (iteration % 50 == 0)
        std::printf("[%s] iteration %d\n    canonical: %s\n    reencoded: %s\n", s.e->pseudo_name.c_str(),
                    iteration, r.canonical.summary().c_str(), r.reencoded.summary().c_str());
    }
    ++iteration;
  }
  std::printf("%d iterations in %.1fs\n", iteration,
              std::chrono::duration<double>(clock_type::now() - start).count());
  for (auto& s : st)
    std::printf("[%s] TOTAL\n    canonical: %s\n    reencoded: %s\n", s.e->pseudo_name.c_str(),
                s.total.canonical.summary().c_str(), s.total.reencoded.summary().c_str());
  EXPECT_GE(iteration, 3) << "too few iterations to churn anything";
  expect_vfs_baseline(st[0]);
  expect_dcache_held(st[1]);
}

// Allocates a few hundred MDCACHE entries in root/evict (host-made files,
// READDIR + LOOKUP through NFS) so older entries are reused past the
// high-water mark.
void evict_by_traffic(rpc_session& nfs, const fs::path& root, const bytes& root_fh) {
  fs::create_directories(root / "evict");
  for (int i = 0; i < 400; ++i)
    std::fclose(std::fopen((root / "evict" / ("f" + std::to_string(i))).c_str(), "w"));
  auto d = nfs.lookup3(root_fh, "evict");
  if (d.status != NFS3_OK) return;
  auto l = nfs.readdir3_all(d.fh);
  for (const auto& e : l.entries) (void)nfs.lookup3(d.fh, e.name);
}

// ---- (d) handles of directories removed, or removed and recreated, from
// the host while the client holds them.
TEST_F(churn, StaleHandlesOfRemovedAndRecreatedDirectories) {
  for (const export_info* e : {&k_vfs, &k_dcache}) {
    SCOPED_TRACE(e->pseudo_name);
    const fs::path root = _mnt / e->host_rel;
    fs::create_directories(root / "gone" / "deeper");
    fs::create_directories(root / "again");
    bytes root_fh = mount_root(*e);
    auto gone = lookup3_attrs(root_fh, "gone");
    ASSERT_EQ(gone.status, NFS3_OK);
    auto deeper = lookup3_attrs(gone.fh, "deeper");
    ASSERT_EQ(deeper.status, NFS3_OK);
    auto again = lookup3_attrs(root_fh, "again");
    ASSERT_EQ(again.status, NFS3_OK);
    auto [root4, root4_attrs] = v4_export_root(e->pseudo_name);
    auto w = _nfs.compound4({v4_op::putfh(root4), v4_op::lookup("gone"), v4_op::getfh(),
                             v4_op::lookup("deeper"), v4_op::getfh()});
    ASSERT_EQ(w.status, NFS4_OK);
    const bytes gone4 = w.ops[2].fh, deeper4 = w.ops[4].fh;
    auto w2 = _nfs.compound4({v4_op::putfh(root4), v4_op::lookup("again"), v4_op::getfh()});
    ASSERT_EQ(w2.status, NFS4_OK);
    const bytes again4 = w2.ops[2].fh;

    // Removed inodes were inside the export: answering with them is no
    // escape (the cached entries outlive the unlink).
    const uint64_t removed[] = {host_ino(root / "gone"), host_ino(root / "gone" / "deeper"),
                                host_ino(root / "again")};
    fs::remove_all(root / "gone");
    fs::remove(root / "again");
    fs::create_directory(root / "again");  // same name, new inode

    for (const bool evicted : {false, true}) {
      if (evicted) evict_by_traffic(_nfs, root, root_fh);
      set_tree({root});
      _inside.insert(std::begin(removed), std::end(removed));
      const std::string tag = evicted ? "after eviction traffic" : "held in cache";
      probe_tally t;
      std::map<std::string, int> status_of;
      for (const auto& [name, fh] : {std::pair<std::string, bytes>{"gone", gone.fh},
                                     {"gone/deeper", deeper.fh},
                                     {"again(old)", again.fh}}) {
        auto ga = _nfs.getattr3(fh);
        note(t, name + " GETATTR", ga.status, ga.attrs, false);
        auto up = lookup3_attrs(fh, "..");
        note(t, name + " v3 ..", up.status, up.attrs, false);
        status_of[name + " GETATTR"] = ga.status;
        status_of[name + " v3 .."] = up.status;
        std::printf("[%s] %s: %s GETATTR %d (fileid %llu), LOOKUP .. %d (fileid %llu)\n",
                    e->pseudo_name.c_str(), tag.c_str(), name.c_str(), ga.status,
                    static_cast<unsigned long long>(ga.attrs ? ga.attrs->fileid : 0), up.status,
                    static_cast<unsigned long long>(up.attrs ? up.attrs->fileid : 0));
        if (up.status == NFS3_OK) v3_dotdot_chain(t, name + " chain", up.fh, 3);
      }
      for (const auto& [name, fh] :
           {std::pair<std::string, bytes>{"gone", gone4}, {"gone/deeper", deeper4}, {"again(old)", again4}}) {
        auto r = _nfs.compound4(
            {v4_op::putfh(fh), v4_op::lookupp(), v4_op::getattr(), v4_op::lookupp(), v4_op::getattr()});
        note_compound(t, name + " v4 LOOKUPP", r);
        std::printf("[%s] %s: v4 PUTFH %s LOOKUPP: compound status %d, ops", e->pseudo_name.c_str(),
                    tag.c_str(), name.c_str(), r.status);
        for (const auto& o : r.ops)
          std::printf(" %d:%d%s", o.op, o.status,
                      o.attrs ? (" fileid " + std::to_string(o.attrs->fileid)).c_str() : "");
        std::printf("\n");
        status_of[name + " v4"] = r.status;
      }
      std::printf("[%s] %s: %s\n", e->pseudo_name.c_str(), tag.c_str(), t.summary().c_str());
      if (e->is_dcache) {
        EXPECT_TRUE(t.escapes.empty()) << t.summary();
        EXPECT_TRUE(t.unexpected.empty()) << t.summary();
        // Removed directories: while MDCACHE holds their entries
        // they still answer (GETATTR, ".." to their old parent, all
        // inside); once evicted, VFS's open_by_handle says STALE;
        // and a directory still cached whose parent entry was
        // evicted asks the filesystem for "..", which in a removed
        // directory is ENOENT.  Eviction is up to MDCACHE's LRU, so
        // each is accepted; note() above already failed anything
        // outside.  (NFS3ERR_NOENT and NFS4ERR_NOENT are both 2.)
        for (const char* k : {"gone v3 ..", "gone/deeper v3 ..", "gone v4", "gone/deeper v4"})
          EXPECT_TRUE(status_of[k] == 0 || status_of[k] == NFS3ERR_STALE || status_of[k] == NFS3ERR_NOENT)
              << k << " " << status_of[k];
      } else {
        EXPECT_TRUE(t.escapes.empty()) << "plain VFS escaped from a stale handle:\n" << t.summary();
      }
    }
    fs::remove_all(root / "again");
    fs::remove_all(root / "evict");
  }
}

}  // namespace
}  // namespace dcache_e2e
