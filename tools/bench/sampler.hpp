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
  std::string dir;           // backing directory of the export on the server
  int server_pid = 0;        // 0: no CPU sampling
  std::string block_device;  // "" = find it from dir's mount
  unsigned interval_ms = 100;
  unsigned thread_interval_ms = 50;  // thread-state sampling of server_pid (0: none, CPU time only)
};

// One look at a process's threads (/proc/PID/task/*): how many exist, how
// many are in state 'D' (uninterruptible sleep, almost always waiting for
// I/O or a page/folio lock), and how many of the server's own threads are
// parked inside a file I/O system call: the number in /proc/.../syscall is
// one of file_io_syscall() and its first argument is a descriptor of a
// regular file or block device (a thread waiting in writev on a client
// socket is not counted). /proc reports a syscall number only for a thread
// that is not running, so this counts threads *blocked* in
// pread/pwrite/fsync/..., whatever their state letter.
// "Server threads" are all threads except io_uring's kernel-side workers
// (comm "iou-wrk-*" / "iou-sqp-*", counted as iowq): Ganesha 4.3 names its
// threads (svc_N, ...) only in its log, every thread's comm is
// "ganesha.nfsd", so RPC workers cannot be told apart from the rest in /proc.
struct thread_snapshot {
  unsigned threads = 0, in_d = 0;
  unsigned workers = 0, workers_in_d = 0, workers_in_file_io = 0;
  unsigned iowq = 0, iowq_in_d = 0;
  std::uint64_t rss_kib = 0;  // the process's VmRSS
};
[[nodiscard]] std::optional<thread_snapshot> read_thread_snapshot(int pid);
// x86-64 numbers of the syscalls that move or sync file data (read, write,
// pread64, pwrite64, readv, writev, preadv(2), pwritev(2), fsync,
// fdatasync, sync_file_range, fallocate, fadvise64, copy_file_range); each
// takes the file descriptor as its first argument. io_uring_enter is not among them: a worker waiting
// there waits for a ring, which the io_uring backend does not do.
[[nodiscard]] bool file_io_syscall(long nr);
// Parses a /proc/.../syscall line ("NR ARG1 ... SP PC", "running", "-1 SP
// PC") into the syscall number and its first argument; nullopt when the
// thread is running or not in a system call.
struct syscall_line {
  long nr = -1;
  std::uint64_t arg0 = 0;
};
[[nodiscard]] std::optional<syscall_line> parse_syscall_line(const std::string& line);
// Parses the state letter from a /proc/.../stat line ('?' when malformed).
[[nodiscard]] char stat_state(const std::string& stat_line);

// What a /proc/PID/stat line says of the task: its name, its flags (field 9)
// and its CPU ticks (utime, stime); nullopt when malformed.
struct proc_stat {
  std::string comm;
  std::uint64_t flags = 0, utime = 0, stime = 0;
};
[[nodiscard]] std::optional<proc_stat> parse_proc_stat(const std::string& stat_line);

// The kernel's own threads (PF_KTHREAD): work the kernel does for the
// server off the server's threads is charged there: write-back that a
// DONTCACHE WRITE started, the I/O completions XFS and iomap hand to
// workqueues (unwritten extent conversion, i_size updates, dropping a
// DONTCACHE folio), the loop device's worker, ksoftirqd, kswapd. Ticks by
// pid, with each thread's family (kthread_family).
struct kthread_ticks {
  std::string family;
  std::uint64_t ticks = 0;
};
[[nodiscard]] std::map<int, kthread_ticks> read_kthread_ticks();
// A kernel thread's name without what tells its instances apart:
// "kworker/u8:3-xfs-conv/loop0" -> "kworker xfs-conv" (the workqueue it
// served last), "loop0" -> "loop", "ksoftirqd/1" -> "ksoftirqd".
[[nodiscard]] std::string kthread_family(const std::string& comm);

struct thread_stats {  // over the run's snapshots
  unsigned samples = 0;
  unsigned threads_peak = 0, workers_peak = 0, iowq_peak = 0;
  double d_mean = 0, workers_d_mean = 0, worker_file_io_mean = 0, iowq_d_mean = 0;
  unsigned d_peak = 0, workers_d_peak = 0, worker_file_io_peak = 0, iowq_d_peak = 0;
  std::uint64_t rss_peak_kib = 0;
  void add(const thread_snapshot& s);

 private:
  std::uint64_t _d_sum = 0, _wd_sum = 0, _wio_sum = 0, _iowq_d_sum = 0;
};

struct sample_result {
  bool cachestat_ok = false;
  cache_numbers peak;    // per field peak over samples
  cache_numbers final_;  // after the run
  std::uint64_t meminfo_cached_peak = 0, meminfo_dirty_peak = 0, meminfo_writeback_peak = 0;
  std::uint64_t meminfo_cached_start = 0;
  double server_cpu_s = -1;  // utime+stime delta, seconds
  double server_user_s = -1, server_sys_s = -1;
  // the kernel's own threads during the run (read_kthread_ticks): in all,
  // and by family; a thread that ended during the run is left out
  double kthread_cpu_s = -1;
  std::map<std::string, double> kthread_cpu_by_family;
  std::string block_device;
  std::int64_t dev_reads = -1, dev_read_bytes = -1, dev_writes = -1, dev_write_bytes = -1;
  std::map<std::string, std::int64_t> vmstat_delta;  // pgscan_kswapd, pgsteal_kswapd, allocstall_*
  unsigned samples = 0;
  thread_stats threads;  // server_pid's thread states
};

class sampler {
 public:
  explicit sampler(sampler_config cfg) : _cfg(std::move(cfg)) {}
  ~sampler() { stop(); }
  sampler(const sampler&) = delete;
  sampler& operator=(const sampler&) = delete;

  void start();
  void stop();  // idempotent; takes the final sample
  [[nodiscard]] const sample_result& result() const { return _result; }

 private:
  void sample_once();
  void sample_threads();
  void loop();

  sampler_config _cfg;
  sample_result _result;
  std::atomic<bool> _running{false};
  std::thread _thread;
  std::uint64_t _cpu_start_user = 0, _cpu_start_sys = 0;
  std::vector<std::uint64_t> _dev_start;
  std::map<std::string, std::int64_t> _vm_start;
  std::map<int, kthread_ticks> _kthreads_start;
};

// Helpers exposed for tests.
[[nodiscard]] std::map<std::string, std::uint64_t> read_meminfo();  // bytes
[[nodiscard]] std::map<std::string, std::int64_t> read_vmstat_reclaim();
[[nodiscard]] std::optional<std::pair<std::uint64_t, std::uint64_t>> read_proc_cpu_ticks(int pid);
[[nodiscard]] std::vector<std::uint64_t> read_block_stat(const std::string& dev);

}  // namespace dcache::bench
