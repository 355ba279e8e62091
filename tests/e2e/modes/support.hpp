// Helpers for the cache-mode end-to-end tests (dcache_e2e_modes and the
// crash driver's dcache_e2e_crash): the plugin's DBus counters, cachestat(2)
// and raw NFSv3 WRITE/COMMIT with a chosen stability.
//
// Errors are returned, never thrown: 0 / a value, or a negative errno, and a
// message in an out-parameter where there is more to say.
//
// Thread-safety: the free functions are thread-safe. A raw_v3_file borrows
// its nfs_client's context and shares its one-thread-at-a-time rule.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "nfs_client.hpp"

struct nfsfh;

namespace dcache::e2e::modes {

// ---- the plugin's counters over DBus ----------------------------------------

// "export_<id>.<counter>" -> value, as tools/dcache-stats --json prints them
// (the one reader of GetFSALStats). The plugin leaves zero counters out, so
// a missing name means 0.
class fsal_stats {
 public:
  // Runs dcache-stats on the system bus named by DBUS_SYSTEM_BUS_ADDRESS.
  // Returns 0, or -errno with the reason in why.
  [[nodiscard]] int load(std::string& why);
  // Zeroes every export's counters (Ganesha's ResetStats). The tests reset
  // before each measurement rather than subtract two readings, so each
  // check reads only what its own requests did.
  [[nodiscard]] static int reset(std::string& why);
  [[nodiscard]] std::uint64_t get(int export_id, const std::string& counter) const;
  [[nodiscard]] const std::map<std::string, std::uint64_t>& all() const { return _values; }

  // Parses dcache-stats --json output (exposed for the parser's own
  // check); returns the number of counters found.
  std::size_t parse(const std::string& text);

 private:
  std::map<std::string, std::uint64_t> _values;
};

// ---- cachestat(2) -------------------------------------------------------------

// bookworm's libc has neither the wrapper nor the structs (kernel >= 6.5).
struct cachestat_range {
  std::uint64_t off;
  std::uint64_t len;
};
struct cachestat_result {
  std::uint64_t nr_cache;
  std::uint64_t nr_dirty;
  std::uint64_t nr_writeback;
  std::uint64_t nr_evicted;
  std::uint64_t nr_recently_evicted;
};

// cachestat over [off, off+len) of the file at path (len 0: to the end).
// Returns 0 or -errno (-ENOSYS on a kernel without it).
[[nodiscard]] int cachestat_path(const std::string& path, std::uint64_t off, std::uint64_t len,
                                 cachestat_result& out);

// Polls until nothing in the file is dirty or under writeback, for at most
// timeout_ms. Returns 0, -ETIMEDOUT or the cachestat error; out holds the
// last sample.
[[nodiscard]] int wait_clean(const std::string& path, int timeout_ms, cachestat_result& out);

// fsync + POSIX_FADV_DONTNEED on the whole local file. Returns 0 or -errno.
[[nodiscard]] int drop_local_cache(const std::string& path);

// ---- raw NFSv3 WRITE / COMMIT --------------------------------------------------

// NFSv3 stable_how, as on the wire.
enum class stable_how { unstable = 0, data_sync = 1, file_sync = 2 };

// An NFSv3 file opened through libnfs (for its handle), written with raw
// WRITE3 calls whose stability the test chooses: libnfs's nfs_pwrite picks
// the stability itself.
class raw_v3_file {
 public:
  raw_v3_file() = default;
  raw_v3_file(const raw_v3_file&) = delete;
  raw_v3_file& operator=(const raw_v3_file&) = delete;
  ~raw_v3_file();

  // Creates (or truncates) path on an NFSv3 client. Returns 0 or -errno.
  [[nodiscard]] int create(nfs_client& client, const std::string& path);
  // One WRITE3 of all of data (must fit the server's wsize). committed gets
  // what the server answered. Returns bytes written or -errno / -EIO with
  // the NFS status in why.
  [[nodiscard]] long long write(std::uint64_t offset, std::span<const std::byte> data, stable_how how,
                                stable_how& committed, std::string& why);
  // One COMMIT3 of [offset, offset+count) (count 0: to the end). 0 or -errno.
  [[nodiscard]] int commit(std::uint64_t offset, std::uint32_t count, std::string& why);

 private:
  nfs_client* _client = nullptr;
  struct nfsfh* _fh = nullptr;
};

// ---- small things ------------------------------------------------------------

// getenv or "" when unset.
[[nodiscard]] std::string env_or_empty(const char* name);

}  // namespace dcache::e2e::modes
