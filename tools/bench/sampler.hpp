// Server-side sampling during a run. The tool runs inside the harness's
// namespaces, where the host's /proc and /sys are visible, so it can read
// the server's page cache use (cachestat(2) over the export's backing
// files), /proc/meminfo, the server process's CPU time, the loop device's
// I/O counters and /proc/vmstat's reclaim counters directly.
//
// Thread-safety: a sampler owns one background thread between start() and
// stop(); start/stop/result must be called from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dcache::bench {

struct cache_numbers {
  std::uint64_t cache = 0, dirty = 0, writeback = 0, evicted = 0, recently_evicted = 0;  // bytes
};

// cachestat(2) over a whole file; nullopt (errno set) when unsupported or failing.
[[nodiscard]] std::optional<cache_numbers> file_cachestat(const std::string& path);

// Sum of cachestat over the regular files under dir (recursively).
[[nodiscard]] std::optional<cache_numbers> dir_cachestat(const std::string& dir);

// Writes back and drops the page cache of every regular file under dir
// (fdatasync + POSIX_FADV_DONTNEED): the per-test "drop caches" that leaves
// the rest of the machine's cache alone. Returns 0 or an errno.
[[nodiscard]] int drop_dir_cache(const std::string& dir);

// The block device (e.g. "loop3") holding path, from /proc/self/mountinfo.
[[nodiscard]] std::optional<std::string> block_device_of(const std::string& path);

struct sampler_config {
  std::string dir;            // backing directory of the export on the server
  int server_pid = 0;         // 0: no CPU sampling
  std::string block_device;   // "" = find it from dir's mount
  unsigned interval_ms = 100;
};

struct sample_result {
  bool cachestat_ok = false;
  cache_numbers peak;                 // per field peak over samples
  cache_numbers final_;               // after the run
  std::uint64_t meminfo_cached_peak = 0, meminfo_dirty_peak = 0, meminfo_writeback_peak = 0;
  std::uint64_t meminfo_cached_start = 0;
  double server_cpu_s = -1;           // utime+stime delta, seconds
  double server_user_s = -1, server_sys_s = -1;
  std::string block_device;
  std::int64_t dev_reads = -1, dev_read_bytes = -1, dev_writes = -1, dev_write_bytes = -1;
  std::map<std::string, std::int64_t> vmstat_delta;   // pgscan_kswapd, pgsteal_kswapd, allocstall_*
  unsigned samples = 0;
};

class sampler {
 public:
  explicit sampler(sampler_config cfg) : _cfg(std::move(cfg)) {}
  ~sampler() { stop(); }
  sampler(const sampler&) = delete;
  sampler& operator=(const sampler&) = delete;

  void start();
  void stop();   // idempotent; takes the final sample
  [[nodiscard]] const sample_result& result() const { return _result; }

 private:
  void sample_once();
  void loop();

  sampler_config _cfg;
  sample_result _result;
  std::atomic<bool> _running{false};
  std::thread _thread;
  std::uint64_t _cpu_start_user = 0, _cpu_start_sys = 0;
  std::vector<std::uint64_t> _dev_start;
  std::map<std::string, std::int64_t> _vm_start;
};

// Helpers exposed for tests.
[[nodiscard]] std::map<std::string, std::uint64_t> read_meminfo();   // bytes
[[nodiscard]] std::map<std::string, std::int64_t> read_vmstat_reclaim();
[[nodiscard]] std::optional<std::pair<std::uint64_t, std::uint64_t>> read_proc_cpu_ticks(int pid);
[[nodiscard]] std::vector<std::uint64_t> read_block_stat(const std::string& dev);

}  // namespace dcache::bench
