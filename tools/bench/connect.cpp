#include "connect.hpp"

#include <fcntl.h>

#include <memory>

#include "pattern.hpp"

namespace dcache::bench {
namespace {

// libnfs 4.0 keeps struct nfs_fh private; nfs_get_fh() returns a pointer to
// this layout (libnfs-private.h: int len; char *val). The handle is checked
// for a sane NFSv3 length before use.
struct libnfs_fh_layout {
  int len;
  char* val;
};

}  // namespace

bool split_url(const std::string& url, std::string& server, std::string& exp) {
  const std::string rest = url.substr(6);
  const auto slash = rest.find('/');
  if (slash == std::string::npos || slash == 0) return false;
  server = rest.substr(0, slash);
  exp = rest.substr(slash);
  const auto q = exp.find('?');
  if (q != std::string::npos) exp.resize(q);
  return !exp.empty();
}

bool connect_all(engine& e, std::string& err) {
  const job_spec s = e.spec;  // a copy: phases below modify e.spec
  const std::string base = s.filename.empty() ? s.name : s.filename;
  for (unsigned j = 0; j < s.numjobs; ++j) {
    auto c = std::make_unique<conn>();
    c->job = j;
    c->nfs = nfs_init_context();
    if (!c->nfs) {
      err = "nfs_init_context failed";
      return false;
    }
    if (nfs_set_version(c->nfs, s.nfs_version) != 0) {
      err = std::string("nfs_set_version: ") + libnfs_text(nfs_get_error(c->nfs));
      return false;
    }
    if (nfs_mount(c->nfs, e.server.c_str(), e.export_path.c_str()) != 0) {
      err = "mount " + e.server + ":" + e.export_path + ": " + libnfs_text(nfs_get_error(c->nfs));
      return false;
    }
    c->rpc = nfs_get_rpc_context(c->nfs);
    const unsigned file_index = s.rw == rw_mode::interleave ? 0 : j;
    c->path = "/" + base + "." + std::to_string(file_index);
    c->file_seed = file_seed(s.seed, file_index);
    int rc = nfs_open(c->nfs, c->path.c_str(), O_RDWR, &c->fh);
    if (rc != 0) rc = nfs_create(c->nfs, c->path.c_str(), O_RDWR | O_CREAT, 0644, &c->fh);
    if (rc != 0) {
      err = "open/create " + c->path + ": " + libnfs_text(nfs_get_error(c->nfs));
      return false;
    }
    if (s.truncate && nfs_ftruncate(c->nfs, c->fh, 0) != 0) {
      err = "truncate " + c->path + ": " + libnfs_text(nfs_get_error(c->nfs));
      return false;
    }
    auto* fh = reinterpret_cast<libnfs_fh_layout*>(nfs_get_fh(c->fh));
    if (s.nfs_version == 3) {
      if (!fh || fh->len <= 0 || fh->len > 64 || !fh->val) {
        err = "unexpected libnfs file handle layout";
        return false;
      }
      c->fh3.data.data_len = static_cast<u_int>(fh->len);
      c->fh3.data.data_val = fh->val;
    }
    e.conns.push_back(std::move(c));
  }
  return true;
}

std::uint64_t file_size(engine& e, conn& c) {
  nfs_stat_64 st{};
  if (nfs_fstat64(c.nfs, c.fh, &st) != 0) return 0;
  (void)e;
  return st.nfs_size;
}

}  // namespace dcache::bench
