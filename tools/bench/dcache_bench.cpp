// dcache-bench: an NFS load generator on libnfs's asynchronous API.
//
// main() runs a job's phases: lay out the files it will read, run it while
// sampling the server, read back what it wrote when asked to verify, then
// print the JSON report. The parts: options.hpp (the command line),
// connect.hpp (one connection and file per job), engine.hpp (the poll loop
// that issues operations and takes their replies; engine_replies.cpp),
// report.hpp (the JSON). Its keys and options: tools/bench/README.md; how
// the benchmark uses it: docs/benchmarks.md.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "connect.hpp"
#include "engine.hpp"
#include "interleave.hpp"
#include "job.hpp"
#include "options.hpp"
#include "report.hpp"
#include "sampler.hpp"

namespace dcache::bench {
namespace {

// --go-file: says it is ready (FILE.ready), then waits for FILE, at most 10 minutes.
bool wait_for_go(const std::string& go) {
  const std::string ready = go + ".ready";
  const int fd = ::open(ready.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "dcache-bench: cannot create %s: %s\n", ready.c_str(), std::strerror(errno));
    return false;
  }
  ::close(fd);
  const auto until = clock_type::now() + std::chrono::minutes(10);
  struct stat st {};
  while (::stat(go.c_str(), &st) != 0) {
    if (clock_type::now() > until) {
      std::fprintf(stderr, "dcache-bench: %s did not appear within 10 minutes\n", go.c_str());
      return false;
    }
    ::usleep(2000);
  }
  return true;
}

}  // namespace
}  // namespace dcache::bench

int main(int argc, char** argv) {
  using namespace dcache::bench;
  cli_options o = parse_cli(argc, argv);
  engine e;
  e.spec = o.spec;
  e.progress = o.progress;
  engine::self = &e;
  if (!split_url(o.spec.url, e.server, e.export_path))
    usage_exit(("url '" + o.spec.url + "': expected nfs://SERVER/EXPORT").c_str());
  const job_spec s = e.spec;  // a copy: phases below modify e.spec
  if (s.rw == rw_mode::interleave) {
    const auto count = record_count(s.size, s.record);
    e.order = interleave_order(count, 2ULL * s.numjobs);
  }
  if (o.dry_run) {
    std::printf("name=%s url=%s nfs_version=%d rw=%s rwmixread=%u bs=%" PRIu64 " record=%" PRIu64
                " numjobs=%u iodepth=%u size=%" PRIu64 " io_size=%" PRIu64
                " time_based=%d runtime=%g verify=%d seed=%" PRIu64 " fsync=%" PRIu64
                " layout=%d thinktime=%g pass_interval=%g pass_first=%g truncate=%d\n",
                s.name.c_str(), s.url.c_str(), s.nfs_version, std::string(to_string(s.rw)).c_str(),
                s.rwmixread, s.bs, s.record, s.numjobs, s.iodepth, s.size, io_budget(s), s.time_based,
                s.runtime, s.verify, s.seed, s.fsync, s.layout, s.thinktime_us, s.pass_interval,
                s.pass_first >= 0 ? s.pass_first : s.pass_interval, s.truncate);
    if (s.rw == rw_mode::interleave) {
      const auto b = analyse_boundaries(e.order, s.record, 4096);
      std::printf("interleave: %zu records, %" PRIu64 " shared pages (%" PRIu64 " lower-first, %" PRIu64
                  " upper-first, %" PRIu64 " touched by >2)\n",
                  e.order.size(), b.shared_pages, b.lower_first, b.upper_first,
                  b.pages_touched_by_more_than_two);
    }
    return 0;
  }

  std::string err;
  if (!connect_all(e, err)) {
    std::fprintf(stderr, "dcache-bench: %s\n", err.c_str());
    return 1;
  }
  if (s.rw == rw_mode::interleave && s.order == job_spec::record_order::stride)
    for (auto& c : e.conns)
      for (std::uint64_t r = c->job; r < record_count(s.size, s.record); r += s.numjobs) c->own.push_back(r);

  const std::uint64_t covered =
      s.rw == rw_mode::interleave ? record_count(s.size, s.record) * s.record : s.size;
  // Layout: files that will be read must exist and hold the pattern
  phase_result layout;
  bool did_layout = false;
  // (random writes too, like fio: a sparse file would measure block allocation
  // and leave holes that a read-back cannot verify)
  if (s.layout && s.rw != rw_mode::interleave && (reads_at_all(s.rw, s.rwmixread) || is_random(s.rw))) {
    bool short_file = false;
    for (auto& c : e.conns)
      if (file_size(e, *c) < s.size) short_file = true;
    if (short_file) {
      engine::self = &e;
      const job_spec saved = e.spec;
      e.spec.rw = rw_mode::write;
      e.spec.time_based = false;
      e.spec.io_size = s.size;
      e.spec.bs = std::max<std::uint64_t>(s.bs, 1 << 20);
      e.spec.bs = std::min(e.spec.bs, s.size);
      e.spec.iodepth = std::min(s.iodepth, 8u);
      e.spec.fsync = 0;
      e.spec.verify = false;
      e.range = s.size;
      const bool ok = e.run_phase(layout, "layout");
      e.spec = saved;
      did_layout = true;
      if (!ok || layout.errors) {
        std::fprintf(stderr, "dcache-bench: layout failed: %s\n", layout.first_error.c_str());
        return 1;
      }
    }
  }
  e.fatal = false;

  if (!o.drop_cache_dir.empty()) {
    if (int rc = drop_dir_cache(o.drop_cache_dir); rc != 0)
      std::fprintf(stderr, "dcache-bench: dropping the cache of %s: %s (continuing)\n",
                   o.drop_cache_dir.c_str(), std::strerror(rc));
  }

  if (!o.go_file.empty() && !wait_for_go(o.go_file)) return 1;

  sampler_config scfg;
  scfg.dir = o.sample_dir;
  scfg.server_pid = o.server_pid;
  scfg.thread_interval_ms = o.thread_interval_ms;
  sampler smp(scfg);
  phase_result main_res;
  e.range = covered;
  e.stop_file = o.stop_file;  // the measured phase only
  smp.start();
  const bool ok = e.run_phase(main_res, "run");
  smp.stop();
  e.stop_file.clear();

  // Read-back verification after write-only jobs.
  phase_result readback;
  bool did_readback = false;
  if (ok && s.verify && !reads_at_all(s.rw, s.rwmixread)) {
    const job_spec saved = e.spec;
    e.spec.rw = rw_mode::read;
    e.spec.time_based = false;
    e.spec.bs = std::min<std::uint64_t>(1 << 20, covered);
    e.spec.iodepth = std::min(s.iodepth, 8u);
    e.spec.fsync = 0;
    if (s.rw == rw_mode::interleave) {
      // one file: read it once through the first connection only
      e.spec.io_size = covered;
      for (std::size_t i = 1; i < e.conns.size(); ++i) e.conns[i]->stopped = true;
      phase_result tmp;
      e.res = &tmp;
      // run_phase resets stopped on all connections; read through a one-job engine instead
      std::vector<std::unique_ptr<conn>> rest;
      while (e.conns.size() > 1) {
        rest.push_back(std::move(e.conns.back()));
        e.conns.pop_back();
      }
      did_readback = e.run_phase(readback, "verify");
      for (auto& c : rest) e.conns.push_back(std::move(c));
    } else {
      // time-based writes may have touched any block: read the whole file(s)
      e.spec.io_size = covered;
      did_readback = e.run_phase(readback, "verify");
    }
    e.spec = saved;
    did_readback = true;
  }

  const std::string text = report_json(o, s, main_res, layout, did_layout, readback, did_readback, smp, scfg);
  if (o.json_path.empty() || o.json_path == "-")
    std::fputs(text.c_str(), stdout);
  else {
    std::ofstream out(o.json_path);
    out << text;
    if (!out) {
      std::fprintf(stderr, "dcache-bench: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  if (!ok || main_res.errors || readback.errors) {
    std::fprintf(stderr, "dcache-bench: %" PRIu64 " errors; first: %s\n", main_res.errors + readback.errors,
                 (main_res.first_error.empty() ? readback.first_error : main_res.first_error).c_str());
    return 1;
  }
  if (main_res.verify_errors || readback.verify_errors) {
    std::fprintf(
        stderr, "dcache-bench: verification failed: %s\n",
        (main_res.first_verify_error.empty() ? readback.first_verify_error : main_res.first_verify_error)
            .c_str());
    return 1;
  }
  return 0;
}
