#include "nfs_client.hpp"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cerrno>
#include <utility>

extern "C" {
#include <nfsc/libnfs.h>
}

namespace dcache::e2e {

std::string to_string(nfs_version v) {
  return v == nfs_version::v3 ? "3" : "4.0";
}

namespace {

nfs_attrs to_attrs(const struct nfs_stat_64& st) {
  nfs_attrs a;
  a.ino = st.nfs_ino;
  a.mode = st.nfs_mode;
  a.nlink = st.nfs_nlink;
  a.uid = st.nfs_uid;
  a.gid = st.nfs_gid;
  a.size = st.nfs_size;
  a.atime_sec = static_cast<std::int64_t>(st.nfs_atime);
  a.atime_nsec = static_cast<std::int64_t>(st.nfs_atime_nsec);
  a.mtime_sec = static_cast<std::int64_t>(st.nfs_mtime);
  a.mtime_nsec = static_cast<std::int64_t>(st.nfs_mtime_nsec);
  return a;
}

}  // namespace

// ------------------------------------------------------------------ nfs_file

nfs_file::nfs_file(nfs_file&& other) noexcept
    : _client(std::exchange(other._client, nullptr)), _fh(std::exchange(other._fh, nullptr)) {}

nfs_file& nfs_file::operator=(nfs_file&& other) noexcept {
  if (this != &other) {
    (void)close();
    _client = std::exchange(other._client, nullptr);
    _fh = std::exchange(other._fh, nullptr);
  }
  return *this;
}

nfs_file::~nfs_file() {
  (void)close();
}

int nfs_file::close() {
  if (_fh == nullptr) return 0;
  int rc = nfs_close(_client->_nfs, std::exchange(_fh, nullptr));
  return rc;
}

int nfs_file::pwrite_all(std::uint64_t offset, std::span<const std::byte> data) {
  if (_fh == nullptr) return -EBADF;
  // libnfs 4.0 encodes an NFSv4 WRITE's data into a fixed-size buffer:
  // a 3500-byte WRITE goes out, a 4000-byte one fails locally with "ZDR
  // error: Failed to encode COMPOUND4args". So NFSv4 writes go in pieces of
  // k_libnfs_v4_max_write (a multiple of 512, so aligned writes stay
  // sector-aligned piece by piece). NFSv3 has no such limit (libnfs splits
  // by the server's wsize itself); nfs_pwrite's int result bounds a call.
  const std::uint64_t max_chunk =
      _client->_version == nfs_version::v4 ? k_libnfs_v4_max_write : std::uint64_t{1} << 30;
  std::size_t done = 0;
  while (done < data.size()) {
    const std::uint64_t chunk = std::min<std::uint64_t>(data.size() - done, max_chunk);
    int rc = nfs_pwrite(_client->_nfs, _fh, offset + done, chunk, data.data() + done);
    if (rc < 0) return rc;
    if (rc == 0) return -EIO;  // a zero-length write would loop forever
    done += static_cast<std::size_t>(rc);
  }
  return 0;
}

long long nfs_file::pread_full(std::uint64_t offset, std::span<std::byte> buf) {
  if (_fh == nullptr) return -EBADF;
  // libnfs 4.0 fails an NFSv4 READ whose reply exceeds about 1 MiB
  // ("nfs_service failed": 1 MiB + 1 byte reads, 1 MiB + 4 KiB does not),
  // so NFSv4 reads go in pieces of k_libnfs_v4_max_read.
  const std::uint64_t max_chunk =
      _client->_version == nfs_version::v4 ? k_libnfs_v4_max_read : std::uint64_t{1} << 30;
  std::size_t done = 0;
  while (done < buf.size()) {
    const std::uint64_t chunk = std::min<std::uint64_t>(buf.size() - done, max_chunk);
    int rc = nfs_pread(_client->_nfs, _fh, offset + done, chunk, buf.data() + done);
    if (rc < 0) return rc;
    if (rc == 0) break;  // EOF
    done += static_cast<std::size_t>(rc);
  }
  return static_cast<long long>(done);
}

int nfs_file::fsync() {
  if (_fh == nullptr) return -EBADF;
  return nfs_fsync(_client->_nfs, _fh);
}

int nfs_file::ftruncate(std::uint64_t length) {
  if (_fh == nullptr) return -EBADF;
  return nfs_ftruncate(_client->_nfs, _fh, length);
}

int nfs_file::fstat(nfs_attrs& out) {
  if (_fh == nullptr) return -EBADF;
  struct nfs_stat_64 st {};
  int rc = nfs_fstat64(_client->_nfs, _fh, &st);
  if (rc == 0) out = to_attrs(st);
  return rc;
}

// ---------------------------------------------------------------- nfs_client

nfs_client::nfs_client(const std::string& server, const std::string& export_path, nfs_version version,
                       int timeout_ms, int reconnect)
    : _version(version), _export(export_path) {
  _nfs = nfs_init_context();
  if (_nfs == nullptr) {
    _status = -ENOMEM;
    _mount_error = "nfs_init_context failed";
    return;
  }
  // A server that stops answering must fail the test, not hang it.
  nfs_set_timeout(_nfs, timeout_ms);
  // Fail fast instead of reconnecting forever if the server goes away,
  // unless asked (libnfs applies it to the connection nfs_mount makes).
  nfs_set_autoreconnect(_nfs, reconnect);
  int rc = nfs_set_version(_nfs, static_cast<int>(version));
  if (version == nfs_version::v4) {
    // libnfs derives the NFSv4 client id from the host alone, so two
    // contexts in one process present the same id and the server takes the
    // second SETCLIENTID for a reboot of the first, expiring its state
    // (NFS4ERR_EXPIRED / NFS4ERR_BAD_SEQID). Give each context its own.
    static std::atomic<unsigned> next_id{0};
    const unsigned id = next_id.fetch_add(1);
    const std::string name = "dcache-e2e-" + std::to_string(getpid()) + "-" + std::to_string(id);
    nfs4_set_client_name(_nfs, name.c_str());
    char verifier[9];
    std::snprintf(verifier, sizeof verifier, "%08x", (static_cast<unsigned>(getpid()) << 12) ^ id);
    nfs4_set_verifier(_nfs, verifier);
  }
  if (rc == 0) rc = nfs_mount(_nfs, server.c_str(), export_path.c_str());
  if (rc != 0) {
    _status = rc < 0 ? rc : -EIO;
    _mount_error = "mount " + server + ":" + export_path + " (NFSv" + to_string(version) +
                   "): " + (nfs_get_error(_nfs) != nullptr ? nfs_get_error(_nfs) : "unknown error");
  }
}

nfs_client::~nfs_client() {
  if (_nfs != nullptr) {
    if (_status == 0) (void)nfs_umount(_nfs);
    nfs_destroy_context(_nfs);
  }
}

std::string nfs_client::last_error() const {
  if (_status != 0) return _mount_error;
  const char* e = _nfs != nullptr ? nfs_get_error(_nfs) : nullptr;
  return e != nullptr ? e : "";
}

std::uint64_t nfs_client::max_read() const {
  return _status == 0 ? nfs_get_readmax(_nfs) : 0;
}
std::uint64_t nfs_client::max_write() const {
  return _status == 0 ? nfs_get_writemax(_nfs) : 0;
}

int nfs_client::create(const std::string& path, int flags, int mode, nfs_file& out) {
  if (_status != 0) return _status;
  struct nfsfh* fh = nullptr;
  int rc = nfs_create(_nfs, path.c_str(), flags | O_CREAT, mode, &fh);
  if (rc == 0) out = nfs_file(this, fh);
  return rc;
}

int nfs_client::open(const std::string& path, int flags, nfs_file& out) {
  if (_status != 0) return _status;
  struct nfsfh* fh = nullptr;
  int rc = nfs_open(_nfs, path.c_str(), flags, &fh);
  if (rc == 0) out = nfs_file(this, fh);
  return rc;
}

int nfs_client::stat(const std::string& path, nfs_attrs& out) {
  if (_status != 0) return _status;
  struct nfs_stat_64 st {};
  int rc = nfs_stat64(_nfs, path.c_str(), &st);
  if (rc == 0) out = to_attrs(st);
  return rc;
}

int nfs_client::truncate(const std::string& path, std::uint64_t length) {
  if (_status != 0) return _status;
  return nfs_truncate(_nfs, path.c_str(), length);
}

int nfs_client::rename(const std::string& from, const std::string& to) {
  if (_status != 0) return _status;
  return nfs_rename(_nfs, from.c_str(), to.c_str());
}

int nfs_client::unlink(const std::string& path) {
  if (_status != 0) return _status;
  return nfs_unlink(_nfs, path.c_str());
}

int nfs_client::mkdir(const std::string& path, int mode) {
  if (_status != 0) return _status;
  return nfs_mkdir2(_nfs, path.c_str(), mode);
}

int nfs_client::rmdir(const std::string& path) {
  if (_status != 0) return _status;
  return nfs_rmdir(_nfs, path.c_str());
}

int nfs_client::chmod(const std::string& path, int mode) {
  if (_status != 0) return _status;
  return nfs_chmod(_nfs, path.c_str(), mode);
}

int nfs_client::utimes(const std::string& path, std::int64_t atime_sec, std::int64_t atime_usec,
                       std::int64_t mtime_sec, std::int64_t mtime_usec) {
  if (_status != 0) return _status;
  struct timeval tv[2] = {{atime_sec, atime_usec}, {mtime_sec, mtime_usec}};
  return nfs_utimes(_nfs, path.c_str(), tv);
}

int nfs_client::list(const std::string& path, std::vector<std::string>& names) {
  if (_status != 0) return _status;
  struct nfsdir* dir = nullptr;
  int rc = nfs_opendir(_nfs, path.c_str(), &dir);
  if (rc != 0) return rc;
  names.clear();
  for (struct nfsdirent* e = nfs_readdir(_nfs, dir); e != nullptr; e = nfs_readdir(_nfs, dir)) {
    std::string_view n = e->name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  nfs_closedir(_nfs, dir);
  std::sort(names.begin(), names.end());
  return 0;
}

int nfs_client::write_file(const std::string& path, std::span<const std::byte> data, int mode) {
  nfs_file f;
  int rc = create(path, O_WRONLY | O_TRUNC, mode, f);
  if (rc != 0) return rc;
  rc = f.pwrite_all(0, data);
  if (rc != 0) return rc;
  return f.close();
}

int nfs_client::read_file(const std::string& path, std::vector<std::byte>& out) {
  nfs_attrs a;
  int rc = stat(path, a);
  if (rc != 0) return rc;
  nfs_file f;
  rc = open(path, O_RDONLY, f);
  if (rc != 0) return rc;
  out.assign(a.size, std::byte{0});
  long long got = f.pread_full(0, out);
  if (got < 0) return static_cast<int>(got);
  out.resize(static_cast<std::size_t>(got));
  return f.close();
}

// ------------------------------------------------------------------ patterns

std::byte pattern_byte(std::uint64_t seed, std::uint64_t offset) {
  // splitmix64 of (seed, 8-byte word), one byte of the word per offset:
  // cheap, and no two nearby offsets or seeds repeat each other.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + (offset >> 3) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<std::byte>(z >> ((offset & 7) * 8));
}

void fill_pattern(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = pattern_byte(seed, offset + i);
}

std::uint64_t checksum(std::span<const std::byte> data) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : data) {
    h ^= static_cast<std::uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

long long first_difference(std::span<const std::byte> a, std::span<const std::byte> b) {
  const std::size_t n = std::min(a.size(), b.size());
  auto mm = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin());
  if (mm.first != a.begin() + static_cast<std::ptrdiff_t>(n)) return mm.first - a.begin();
  return a.size() == b.size() ? -1 : static_cast<long long>(n);
}

int read_local_file(const std::string& path, std::vector<std::byte>& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  out.clear();
  std::byte buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return -e;
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return 0;
}

}  // namespace dcache::e2e
