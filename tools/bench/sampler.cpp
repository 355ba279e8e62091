#include "sampler.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dcache::bench {
namespace {

// bookworm's headers have neither the syscall number nor the structs
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct cachestat_range_k {
  std::uint64_t off, len;
};
struct cachestat_k {
  std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

const std::uint64_t page_size = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));

template <typename F>
void for_each_file(const std::string& dir, F&& f) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) f(it->path().string());
  }
}

}  // namespace

std::optional<cache_numbers> file_cachestat(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  cachestat_range_k range{0, 0};  // len 0: to the end of the file
  cachestat_k cs{};
  const long rc = ::syscall(__NR_cachestat, fd, &range, &cs, 0);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    errno = err;
    return std::nullopt;
  }
  return cache_numbers{cs.nr_cache * page_size, cs.nr_dirty * page_size, cs.nr_writeback * page_size,
                       cs.nr_evicted * page_size, cs.nr_recently_evicted * page_size};
}

std::optional<cache_numbers> dir_cachestat(const std::string& dir) {
  cache_numbers sum;
  bool failed = false;
  for_each_file(dir, [&](const std::string& p) {
    const auto c = file_cachestat(p);
    if (!c) {
      // a file removed between listing and open is not a failure
      if (errno != ENOENT) failed = true;
      return;
    }
    sum.cache += c->cache;
    sum.dirty += c->dirty;
    sum.writeback += c->writeback;
    sum.evicted += c->evicted;
    sum.recently_evicted += c->recently_evicted;
  });
  if (failed) return std::nullopt;
  return sum;
}

int drop_dir_cache(const std::string& dir) {
  int first_error = 0;
  for_each_file(dir, [&](const std::string& p) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (!first_error && errno != ENOENT) first_error = errno;
      return;
    }
    // dirty pages are not dropped by DONTNEED: write them back first
    if (::fdatasync(fd) != 0 && !first_error) first_error = errno;
    const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // returns the error
    if (rc != 0 && !first_error) first_error = rc;
    ::close(fd);
  });
  return first_error;
}

std::optional<std::string> block_device_of(const std::string& path_in) {
  std::error_code ec;
  const std::string path = std::filesystem::weakly_canonical(path_in, ec).string();
  std::ifstream in("/proc/self/mountinfo");
  std::string line, best_mp, best_src;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, majmin, root, mp;
    ls >> id >> parent >> majmin >> root >> mp;
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    std::string fstype, src;
    rest >> fstype >> src;
    const bool prefix = path == mp || (path.rfind(mp, 0) == 0 && (mp == "/" || path[mp.size()] == '/'));
    if (prefix && mp.size() >= best_mp.size()) {
      best_mp = mp;
      best_src = src;
    }
  }
  if (best_src.rfind("/dev/", 0) != 0) return std::nullopt;
  return best_src.substr(5);
}

std::map<std::string, std::uint64_t> read_meminfo() {
  std::map<std::string, std::uint64_t> out;
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t v = 0;
  while (in >> key >> v) {
    std::getline(in, unit);
    if (!key.empty() && key.back() == ':') key.pop_back();
    out[key] = unit.find("kB") != std::string::npos ? v * 1024 : v;
  }
  return out;
}

std::map<std::string, std::int64_t> read_vmstat_reclaim() {
  std::map<std::string, std::int64_t> out;
  std::ifstream in("/proc/vmstat");
  std::string key;
  std::int64_t v = 0;
  while (in >> key >> v) {
    // pgscan/pgsteal_anon and _file count every reclaim, a memory group's
    // limit reclaim too, which the _kswapd and _direct ones leave out
    if (key == "pgscan_kswapd" || key == "pgsteal_kswapd" || key == "pgscan_direct" ||
        key == "pgsteal_direct" || key.rfind("allocstall_", 0) == 0 || key == "workingset_refault_file" ||
        key == "pgscan_anon" || key == "pgscan_file" || key == "pgsteal_anon" || key == "pgsteal_file")
      out[key] = v;
  }
  return out;
}

namespace {
std::string read_small(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// The command name sits between the first '(' and the last ')' of a stat
// line (it may hold spaces and ')'); "" when malformed.
std::string stat_comm(const std::string& all) {
  const auto open = all.find('('), close = all.rfind(')');
  return open != std::string::npos && close != std::string::npos && close > open
             ? all.substr(open + 1, close - open - 1)
             : "";
}
}  // namespace

std::optional<proc_stat> parse_proc_stat(const std::string& all) {
  // fields resume after the last ')'
  const auto open = all.find('('), close = all.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 > all.size())
    return std::nullopt;
  proc_stat st;
  st.comm = stat_comm(all);
  std::istringstream ls(all.substr(close + 2));
  std::string f;
  for (int field = 3; ls >> f; ++field) {
    try {
      if (field == 9) st.flags = std::stoull(f);
      if (field == 14) st.utime = std::stoull(f);
      if (field == 15) {
        st.stime = std::stoull(f);
        return st;
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> read_proc_cpu_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  if (!std::getline(in, all)) return std::nullopt;
  const auto st = parse_proc_stat(all);
  if (!st) return std::nullopt;
  return std::make_pair(st->utime, st->stime);
}

std::string kthread_family(const std::string& comm) {
  const auto trim = [](std::string s) {
    while (!s.empty() && (std::isdigit(static_cast<unsigned char>(s.back())) || s.back() == '.'))
      s.pop_back();
    return s;
  };
  const auto slash = comm.find('/');
  std::string family = trim(comm.substr(0, slash));
  if (family == "kworker" && slash != std::string::npos) {
    // kworker/CPU:ID[H]-WORKQUEUE[/DEVICE]
    if (const auto dash = comm.find('-', slash); dash != std::string::npos) {
      const std::string wq = trim(comm.substr(dash + 1, comm.find('/', dash) - dash - 1));
      if (!wq.empty()) family += " " + wq;
    }
  }
  return family.empty() ? comm : family;
}

std::map<int, kthread_ticks> read_kthread_ticks() {
  constexpr std::uint64_t pf_kthread = 0x00200000;  // include/linux/sched.h
  std::map<int, kthread_ticks> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const auto st = parse_proc_stat(read_small(e.path() / "stat"));  // nullopt: ended meanwhile
    if (st && (st->flags & pf_kthread) != 0)
      out[std::stoi(name)] = {kthread_family(st->comm), st->utime + st->stime};
  }
  return out;
}

std::vector<std::uint64_t> read_block_stat(const std::string& dev) {
  std::ifstream in("/sys/block/" + dev + "/stat");
  std::vector<std::uint64_t> v;
  std::uint64_t x = 0;
  while (in >> x) v.push_back(x);
  return v;
}

char stat_state(const std::string& all) {
  const auto close = all.rfind(')');
  if (close == std::string::npos || close + 2 >= all.size()) return '?';
  return all[close + 2];
}

bool file_io_syscall(long nr) {
  switch (nr) {
    case 0:
    case 1:
    case 17:
    case 18:
    case 19:
    case 20:  // read write pread64 pwrite64 readv writev
    case 295:
    case 296:
    case 327:
    case 328:  // preadv pwritev preadv2 pwritev2
    case 74:
    case 75:
    case 277:
    case 285:
    case 221:  // fsync fdatasync sync_file_range fallocate fadvise64
    case 326:  // copy_file_range
      return true;
    default:
      return false;
  }
}

std::optional<syscall_line> parse_syscall_line(const std::string& line) {
  const char* p = line.c_str();
  char* end = nullptr;
  const long nr = std::strtol(p, &end, 10);
  if (end == p || nr < 0) return std::nullopt;  // "running", "-1 ...", empty
  syscall_line out;
  out.nr = nr;
  p = end;
  out.arg0 = std::strtoull(p, &end, 16);  // "0x..."; strtoull accepts the prefix in base 16
  if (end == p) return std::nullopt;
  return out;
}

namespace {
bool fd_is_file(int pid, std::uint64_t fd) {
  struct stat st {};
  const std::string p = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  // stat follows the magic link to the open file itself
  if (::stat(p.c_str(), &st) != 0) return false;
  return S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
}

}  // namespace

std::optional<thread_snapshot> read_thread_snapshot(int pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return std::nullopt;
  thread_snapshot s;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string t = it->path().string();
    const std::string stat = read_small(t + "/stat");
    if (stat.empty()) continue;  // the thread exited between listing and reading
    const char state = stat_state(stat);
    const std::string comm = stat_comm(stat);
    ++s.threads;
    const bool d = state == 'D';
    s.in_d += d;
    if (comm.rfind("iou-wrk", 0) == 0 || comm.rfind("iou-sqp", 0) == 0) {
      ++s.iowq;
      s.iowq_in_d += d;
      continue;
    }
    ++s.workers;
    s.workers_in_d += d;
    if (state != 'R') {
      const auto sc = parse_syscall_line(read_small(t + "/syscall"));
      if (sc && file_io_syscall(sc->nr) && fd_is_file(pid, sc->arg0)) ++s.workers_in_file_io;
    }
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) {
      s.rss_kib = std::strtoull(line.c_str() + 6, nullptr, 10);
      break;
    }
  }
  return s;
}

void thread_stats::add(const thread_snapshot& s) {
  ++samples;
  threads_peak = std::max(threads_peak, s.threads);
  workers_peak = std::max(workers_peak, s.workers);
  iowq_peak = std::max(iowq_peak, s.iowq);
  d_peak = std::max(d_peak, s.in_d);
  workers_d_peak = std::max(workers_d_peak, s.workers_in_d);
  worker_file_io_peak = std::max(worker_file_io_peak, s.workers_in_file_io);
  iowq_d_peak = std::max(iowq_d_peak, s.iowq_in_d);
  rss_peak_kib = std::max(rss_peak_kib, s.rss_kib);
  _d_sum += s.in_d;
  _wd_sum += s.workers_in_d;
  _wio_sum += s.workers_in_file_io;
  _iowq_d_sum += s.iowq_in_d;
  const double n = samples;
  d_mean = static_cast<double>(_d_sum) / n;
  workers_d_mean = static_cast<double>(_wd_sum) / n;
  worker_file_io_mean = static_cast<double>(_wio_sum) / n;
  iowq_d_mean = static_cast<double>(_iowq_d_sum) / n;
}

void sampler::start() {
  if (_cfg.block_device.empty()) {
    if (auto d = block_device_of(_cfg.dir)) _cfg.block_device = *d;
  }
  _result.block_device = _cfg.block_device;
  if (!_cfg.block_device.empty()) _dev_start = read_block_stat(_cfg.block_device);
  if (_cfg.server_pid > 0) {
    if (auto t = read_proc_cpu_ticks(_cfg.server_pid)) {
      _cpu_start_user = t->first;
      _cpu_start_sys = t->second;
    }
  }
  _vm_start = read_vmstat_reclaim();
  _kthreads_start = read_kthread_ticks();
  _result.meminfo_cached_start = read_meminfo()["Cached"];
  _running = true;
  _thread = std::thread([this] { loop(); });
}

void sampler::loop() {
  // two clocks: residency (cachestat over every file, costlier) every
  // interval_ms, thread states every thread_interval_ms
  using clock = std::chrono::steady_clock;
  const auto every = std::chrono::milliseconds(std::max(1u, _cfg.interval_ms));
  const auto every_t = std::chrono::milliseconds(std::max(1u, _cfg.thread_interval_ms));
  auto next = clock::now(), next_t = next;
  while (_running.load(std::memory_order_relaxed)) {
    const auto now = clock::now();
    if (now >= next) {
      sample_once();
      next += every;
      if (next < now) next = now + every;
    }
    if (_cfg.server_pid > 0 && _cfg.thread_interval_ms > 0 && now >= next_t) {
      sample_threads();
      next_t += every_t;
      if (next_t < now) next_t = now + every_t;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void sampler::sample_threads() {
  if (auto s = read_thread_snapshot(_cfg.server_pid)) _result.threads.add(*s);
}

void sampler::sample_once() {
  ++_result.samples;
  if (!_cfg.dir.empty()) {
    if (auto c = dir_cachestat(_cfg.dir)) {
      _result.cachestat_ok = true;
      auto& p = _result.peak;
      p.cache = std::max(p.cache, c->cache);
      p.dirty = std::max(p.dirty, c->dirty);
      p.writeback = std::max(p.writeback, c->writeback);
      p.evicted = std::max(p.evicted, c->evicted);
      p.recently_evicted = std::max(p.recently_evicted, c->recently_evicted);
      _result.final_ = *c;
    }
  }
  auto mi = read_meminfo();
  _result.meminfo_cached_peak = std::max(_result.meminfo_cached_peak, mi["Cached"]);
  _result.meminfo_dirty_peak = std::max(_result.meminfo_dirty_peak, mi["Dirty"]);
  _result.meminfo_writeback_peak = std::max(_result.meminfo_writeback_peak, mi["Writeback"]);
}

void sampler::stop() {
  if (!_running.exchange(false)) return;
  if (_thread.joinable()) _thread.join();
  sample_once();  // the final residency
  // a run shorter than the first tick still gets one look at the threads
  if (_cfg.server_pid > 0 && _cfg.thread_interval_ms > 0 && _result.threads.samples == 0) sample_threads();
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (_cfg.server_pid > 0) {
    // the same process as at the start (a server restarted meanwhile, or
    // its pid reused, counts from zero: nothing is said then)
    if (auto t = read_proc_cpu_ticks(_cfg.server_pid);
        t && t->first >= _cpu_start_user && t->second >= _cpu_start_sys) {
      _result.server_user_s = static_cast<double>(t->first - _cpu_start_user) / tick;
      _result.server_sys_s = static_cast<double>(t->second - _cpu_start_sys) / tick;
      _result.server_cpu_s = _result.server_user_s + _result.server_sys_s;
    }
  }
  if (!_kthreads_start.empty()) {
    // a pid that is a kernel thread at both ends is the same thread unless
    // pids wrapped around within the run; one born during it counts whole
    double all = 0;
    for (const auto& [pid, now] : read_kthread_ticks()) {
      const auto was = _kthreads_start.find(pid);
      const std::uint64_t before =
          was != _kthreads_start.end() && was->second.ticks <= now.ticks ? was->second.ticks : 0;
      const double s = static_cast<double>(now.ticks - before) / tick;
      all += s;
      if (s > 0) _result.kthread_cpu_by_family[now.family] += s;
    }
    _result.kthread_cpu_s = all;
  }
  if (!_cfg.block_device.empty()) {
    const auto end = read_block_stat(_cfg.block_device);
    // fields: reads, reads merged, sectors read, ms, writes, merged, sectors written, ...
    if (end.size() >= 7 && _dev_start.size() >= 7) {
      _result.dev_reads = static_cast<std::int64_t>(end[0] - _dev_start[0]);
      _result.dev_read_bytes = static_cast<std::int64_t>((end[2] - _dev_start[2]) * 512);
      _result.dev_writes = static_cast<std::int64_t>(end[4] - _dev_start[4]);
      _result.dev_write_bytes = static_cast<std::int64_t>((end[6] - _dev_start[6]) * 512);
    }
  }
  for (const auto& [k, v] : read_vmstat_reclaim()) _result.vmstat_delta[k] = v - _vm_start[k];
}

}  // namespace dcache::bench
