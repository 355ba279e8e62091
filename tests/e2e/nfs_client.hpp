// A small RAII wrapper over libnfs's synchronous API for the end-to-end
// tests, the escape tests and the benchmark.
//
// Errors are returned, never thrown: every call returns 0 / a byte count or
// a negative errno (libnfs's own convention), and nfs_client::last_error()
// holds libnfs's message for the most recent failure.
//
// Thread-safety: an nfs_client (one nfs_context, one TCP connection) must be
// used by one thread at a time; use one client per thread for concurrency.
// An nfs_file borrows its client's context: it must not outlive the client
// and shares its thread restriction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct nfs_context;
struct nfsfh;
struct nfs_stat_64;

namespace dcache::e2e {

// Which NFS protocol a client speaks. libnfs 4.0 speaks NFSv4.0 only (it
// has no minor-version setting), so "4" here means 4.0.
enum class nfs_version { v3 = 3, v4 = 4 };

[[nodiscard]] std::string to_string(nfs_version v);

// The largest NFSv4 WRITE libnfs 4.0 can encode is a little under 4000
// bytes (see nfs_file::pwrite_all); larger NFSv4 writes are split.
inline constexpr std::uint64_t k_libnfs_v4_max_write = 7 * 512;
// libnfs 4.0 cannot take an NFSv4 READ reply much over 1 MiB; larger
// NFSv4 reads are split (see nfs_file::pread_full).
inline constexpr std::uint64_t k_libnfs_v4_max_read = 512 * 1024;

// The attributes the tests compare, copied out of libnfs's nfs_stat_64.
struct nfs_attrs {
  std::uint64_t ino = 0;
  std::uint64_t mode = 0;  // type and permission bits, as in st_mode
  std::uint64_t nlink = 0;
  std::uint64_t uid = 0;
  std::uint64_t gid = 0;
  std::uint64_t size = 0;
  std::int64_t atime_sec = 0;
  std::int64_t atime_nsec = 0;
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;
};

class nfs_client;

// An open file. Closes itself (NFS CLOSE for v4) on destruction.
class nfs_file {
 public:
  nfs_file() = default;
  nfs_file(const nfs_file&) = delete;
  nfs_file& operator=(const nfs_file&) = delete;
  nfs_file(nfs_file&& other) noexcept;
  nfs_file& operator=(nfs_file&& other) noexcept;
  ~nfs_file();

  [[nodiscard]] bool is_open() const { return _fh != nullptr; }

  // Writes all of data at offset (looping over short writes; over NFSv4 in
  // pieces of k_libnfs_v4_max_write). Returns 0 or -errno.
  [[nodiscard]] int pwrite_all(std::uint64_t offset, std::span<const std::byte> data);
  // Reads up to buf.size() bytes at offset, looping until EOF or full
  // (over NFSv4 in pieces of k_libnfs_v4_max_read).
  // Returns the number of bytes read, or -errno.
  [[nodiscard]] long long pread_full(std::uint64_t offset, std::span<std::byte> buf);
  [[nodiscard]] int fsync();
  [[nodiscard]] int ftruncate(std::uint64_t length);
  [[nodiscard]] int fstat(nfs_attrs& out);
  // Closes now and returns the result (the destructor ignores it).
  [[nodiscard]] int close();

 private:
  friend class nfs_client;
  nfs_file(nfs_client* client, struct nfsfh* fh) : _client(client), _fh(fh) {}

  nfs_client* _client = nullptr;
  struct nfsfh* _fh = nullptr;
};

class nfs_client {
 public:
  // Connects to server and mounts export_path (the pseudo path, e.g.
  // "/dcache"). Check status() before use. reconnect: libnfs's
  // autoreconnect once mounted; 0 (the default) fails every request in
  // flight when the connection breaks, -1 reconnects to the same address
  // for ever and sends the requests in flight again on the new connection
  // (the failover tests: an address that moves to another server).
  nfs_client(const std::string& server, const std::string& export_path, nfs_version version,
             int timeout_ms = 120'000, int reconnect = 0);
  nfs_client(const nfs_client&) = delete;
  nfs_client& operator=(const nfs_client&) = delete;
  ~nfs_client();

  // 0 when mounted, -errno otherwise.
  [[nodiscard]] int status() const { return _status; }
  // libnfs's message for the last failure (or the mount failure).
  [[nodiscard]] std::string last_error() const;
  [[nodiscard]] nfs_version version() const { return _version; }
  [[nodiscard]] const std::string& export_path() const { return _export; }
  // Largest READ/WRITE the server accepts (0 before mount).
  [[nodiscard]] std::uint64_t max_read() const;
  [[nodiscard]] std::uint64_t max_write() const;

  // Paths are relative to the export root and start with '/'.
  // Over NFSv4, libnfs 4.0 creates files with mode 0600 whatever mode says
  // (chmod afterwards if the mode matters).
  [[nodiscard]] int create(const std::string& path, int flags, int mode, nfs_file& out);
  [[nodiscard]] int open(const std::string& path, int flags, nfs_file& out);
  [[nodiscard]] int stat(const std::string& path, nfs_attrs& out);
  [[nodiscard]] int truncate(const std::string& path, std::uint64_t length);
  [[nodiscard]] int rename(const std::string& from, const std::string& to);
  [[nodiscard]] int unlink(const std::string& path);
  [[nodiscard]] int mkdir(const std::string& path, int mode = 0755);
  [[nodiscard]] int rmdir(const std::string& path);
  [[nodiscard]] int chmod(const std::string& path, int mode);
  // Sets atime and mtime (microsecond resolution: NFS SETATTR via utimes).
  [[nodiscard]] int utimes(const std::string& path, std::int64_t atime_sec, std::int64_t atime_usec,
                           std::int64_t mtime_sec, std::int64_t mtime_usec);
  // Names in a directory, without "." and "..", sorted.
  [[nodiscard]] int list(const std::string& path, std::vector<std::string>& names);

  // Whole-file helpers built on the above.
  [[nodiscard]] int write_file(const std::string& path, std::span<const std::byte> data, int mode = 0644);
  [[nodiscard]] int read_file(const std::string& path, std::vector<std::byte>& out);

  // The raw context, for callers that need the async API (the benchmark).
  [[nodiscard]] struct nfs_context* raw() { return _nfs; }

 private:
  friend class nfs_file;

  struct nfs_context* _nfs = nullptr;
  nfs_version _version;
  std::string _export;
  int _status = 0;
  std::string _mount_error;
};

// Deterministic, position-dependent test data: byte i of a stream with a
// given seed depends on (seed, absolute offset), so any range of a "file"
// can be regenerated and a misplaced byte shows up at its offset.
[[nodiscard]] std::byte pattern_byte(std::uint64_t seed, std::uint64_t offset);
void fill_pattern(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset);
// FNV-1a 64, for short messages about large buffers.
[[nodiscard]] std::uint64_t checksum(std::span<const std::byte> data);
// Offset of the first differing byte, or -1 if equal (sizes included).
[[nodiscard]] long long first_difference(std::span<const std::byte> a, std::span<const std::byte> b);

// Reads a file on the server's local filesystem (the backing store under
// DCACHE_MNT). Returns 0 or -errno.
[[nodiscard]] int read_local_file(const std::string& path, std::vector<std::byte>& out);

}  // namespace dcache::e2e
