// dcache_nfs41_put: copies a local file to the server over NFSv4.1 with
// the OPEN a client sends for it: OPEN4_CREATE UNCHECKED4, and with
// --truncate also size 0 (a shell's `>` over NFSv4), which empties a file
// that exists; without it the file is written over in place. Then 1 MiB
// UNSTABLE WRITEs, COMMIT and CLOSE, as a client writes back. Prints the
// size the OPEN left the file at. For tests/e2e/test_auto.py: NFSv3 and
// libnfs 4.0 truncate with a SETATTR, never with the OPEN.
//
//   dcache_nfs41_put [--truncate] SERVER LOCAL-FILE /EXPORT/PATH/NAME
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "nfs41_client.hpp"

namespace nfs41 = dcache_e2e::nfs41;

namespace {

int fail(const std::string& what, uint32_t status) {
  std::fprintf(stderr, "dcache_nfs41_put: %s: %s\n", what.c_str(), nfs41::status_name(status).c_str());
  return 1;
}

int put(const std::string& server, const std::string& local, const std::string& remote, bool truncate) {
  std::ifstream in(local, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "dcache_nfs41_put: cannot read %s\n", local.c_str());
    return 1;
  }
  const nfs41::bytes data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto slash = remote.rfind('/');
  if (slash == std::string::npos || slash + 1 == remote.size()) {
    std::fprintf(stderr, "dcache_nfs41_put: %s is no /EXPORT/PATH/NAME\n", remote.c_str());
    return 2;
  }
  const std::string dir_path = remote.substr(0, slash), name = remote.substr(slash + 1);

  nfs41::client c(server);
  auto [st, dir] = c.lookup_path(dir_path);
  if (st != nfs41::NFS4_OK) return fail("LOOKUP " + dir_path, st);
  const auto o = c.open(dir, name, true, nfs41::share_access::both, truncate);
  if (o.status != nfs41::NFS4_OK) return fail("OPEN " + remote, o.status);
  const auto [ast, attrs] = c.getattr(o.fh);
  if (ast != nfs41::NFS4_OK || !attrs.size) return fail("GETATTR " + remote, ast);
  std::printf("opened: size %llu\n", static_cast<unsigned long long>(*attrs.size));
  const auto w = c.write_all(o.fh, o.stateid, 0, data, nfs41::stable_how::unstable);
  if (w.status != nfs41::NFS4_OK) return fail("WRITE " + remote, w.status);
  if (w.count != data.size()) {
    std::fprintf(stderr, "dcache_nfs41_put: WRITE %s: %u of %zu bytes\n", remote.c_str(), w.count,
                 data.size());
    return 1;
  }
  const auto cm = c.commit(o.fh, 0, 0);
  if (cm.status != nfs41::NFS4_OK) return fail("COMMIT " + remote, cm.status);
  if (const uint32_t cst = c.close(o.fh, o.stateid); cst != nfs41::NFS4_OK)
    return fail("CLOSE " + remote, cst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  const bool truncate = argc > 1 && std::string(argv[1]) == "--truncate";
  i += truncate ? 1 : 0;
  if (argc - i != 3) {
    std::fprintf(stderr, "usage: dcache_nfs41_put [--truncate] SERVER LOCAL-FILE /EXPORT/PATH/NAME\n");
    return 2;
  }
  try {
    return put(argv[i], argv[i + 1], argv[i + 2], truncate);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dcache_nfs41_put: %s\n", e.what());
    return 1;
  }
}
