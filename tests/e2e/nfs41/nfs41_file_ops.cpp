// The NFSv4.1 test client's file operations: the conveniences of
// nfs41_client.hpp, each one COMPOUND over compound() (or a loop of them:
// write_all, read_all, readdir), returning the first failing status.
#include "nfs41_client.hpp"

#include <algorithm>
#include <sstream>
#include <string>

#include "nfs41_xdr.hpp"

namespace dcache_e2e::nfs41 {
namespace {

// The status of a compound that ran `want` ops: the first failure, or a
// protocol error if the server answered fewer ops without one.
uint32_t first_failure(const compound_result& r, size_t want) {
  if (r.status != NFS4_OK) return r.status;
  if (r.ops.size() != want)
    fail("COMPOUND succeeded with " + std::to_string(r.ops.size()) + " results for " + std::to_string(want) +
         " ops");
  return NFS4_OK;
}

}  // namespace

std::pair<uint32_t, bytes> client::lookup_path(const std::string& path) {
  std::vector<op> ops{op::putrootfh()};
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '/'))
    if (!part.empty()) ops.push_back(op::lookup(part));
  ops.push_back(op::getfh());
  auto r = compound(ops);
  const uint32_t st = first_failure(r, ops.size());
  return {st, st == NFS4_OK ? r.ops.back().fh : bytes{}};
}

std::pair<uint32_t, attributes> client::getattr(const bytes& fh) {
  auto r = compound({op::putfh(fh), op::getattr()});
  const uint32_t st = first_failure(r, 2);
  return {st, st == NFS4_OK ? *r.ops[1].attrs : attributes{}};
}

open_result client::open(const bytes& dir, const std::string& name, bool create, share_access access,
                         bool truncate) {
  auto r = compound({op::putfh(dir), op::open(name, create, access, truncate), op::getfh()});
  open_result out;
  out.status = first_failure(r, 3);
  if (out.status == NFS4_OK) {
    out.stateid = r.ops[1].stateid;
    out.fh = r.ops[2].fh;
  }
  return out;
}

uint32_t client::close(const bytes& fh, const stateid4& s) {
  return first_failure(compound({op::putfh(fh), op::close(s)}), 2);
}

write_result client::write(const bytes& fh, const stateid4& s, uint64_t offset, std::span<const uint8_t> data,
                           stable_how how) {
  auto r = compound({op::putfh(fh), op::write(s, offset, data, how)});
  write_result out;
  out.status = first_failure(r, 2);
  if (out.status == NFS4_OK) {
    out.count = r.ops[1].count;
    out.committed = r.ops[1].committed;
    out.verifier = r.ops[1].verifier;
  }
  return out;
}

write_result client::write_all(const bytes& fh, const stateid4& s, uint64_t offset,
                               std::span<const uint8_t> data, stable_how how) {
  write_result total;
  total.committed = stable_how::file_sync;
  uint64_t done = 0;
  while (done < data.size()) {
    const size_t n = std::min<uint64_t>(_max_io, data.size() - done);
    auto w = write(fh, s, offset + done, data.subspan(done, n), how);
    if (w.status != NFS4_OK) {
      total.status = w.status;
      break;
    }
    total.committed = std::min(total.committed, w.committed);
    total.verifier = w.verifier;
    done += w.count;
    if (w.count != n) break;  // short write: let the caller see it
  }
  total.count = static_cast<uint32_t>(done);
  return total;
}

read_result client::read(const bytes& fh, const stateid4& s, uint64_t offset, uint32_t count) {
  auto r = compound({op::putfh(fh), op::read(s, offset, count)});
  read_result out;
  out.status = first_failure(r, 2);
  if (out.status == NFS4_OK) {
    out.data = std::move(r.ops[1].data);
    out.eof = r.ops[1].eof;
  }
  return out;
}

read_result client::read_all(const bytes& fh, const stateid4& s, uint64_t offset, uint64_t count) {
  read_result total;
  while (total.data.size() < count) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(_max_io, count - total.data.size()));
    auto r = read(fh, s, offset + total.data.size(), n);
    if (r.status != NFS4_OK) {
      total.status = r.status;
      return total;
    }
    total.data.insert(total.data.end(), r.data.begin(), r.data.end());
    total.eof = r.eof;
    if (r.eof || r.data.empty()) break;
  }
  return total;
}

write_result client::commit(const bytes& fh, uint64_t offset, uint32_t count) {
  auto r = compound({op::putfh(fh), op::commit(offset, count)});
  write_result out;
  out.status = first_failure(r, 2);
  if (out.status == NFS4_OK) {
    out.verifier = r.ops[1].verifier;
    out.committed = stable_how::file_sync;
  }
  return out;
}

uint32_t client::truncate(const bytes& fh, const stateid4& s, uint64_t size) {
  return first_failure(compound({op::putfh(fh), op::setattr_size(s, size)}), 2);
}

uint32_t client::remove(const bytes& dir, const std::string& name) {
  return first_failure(compound({op::putfh(dir), op::remove(name)}), 2);
}

uint32_t client::rename(const bytes& from_dir, const std::string& from, const bytes& to_dir,
                        const std::string& to) {
  return first_failure(compound({op::putfh(from_dir), op::savefh(), op::putfh(to_dir), op::rename(from, to)}),
                       4);
}

std::pair<uint32_t, std::vector<dir_entry>> client::readdir(const bytes& dir) {
  std::vector<dir_entry> all;
  uint64_t cookie = 0;
  std::array<uint8_t, 8> verf{};
  for (int round = 0; round < 100000; ++round) {
    auto r = compound({op::putfh(dir), op::readdir(cookie, verf, 32u << 10)});
    const uint32_t st = first_failure(r, 2);
    if (st != NFS4_OK) return {st, {}};
    auto& rd = r.ops[1];
    for (auto& e : rd.entries) {
      cookie = e.cookie;
      if (e.name != "." && e.name != "..") all.push_back(std::move(e));
    }
    verf = rd.verifier;
    if (rd.eof) return {NFS4_OK, all};
    if (rd.entries.empty()) fail("READDIR: no entries and no eof at cookie " + std::to_string(cookie));
  }
  fail("READDIR: directory did not end after 100000 replies");
}

}  // namespace dcache_e2e::nfs41
