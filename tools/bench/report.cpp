#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace dcache::bench {
namespace {

struct json_writer {
  std::ostringstream o;
  bool first = true;
  void key(const std::string& k) {
    if (!first) o << ",";
    first = false;
    o << "\"" << esc(k) << "\":";
  }
  static std::string esc(const std::string& s) {
    std::string r;
    for (char ch : s) {
      if (ch == '"' || ch == '\\') {
        r += '\\';
        r += ch;
      } else if (static_cast<unsigned char>(ch) < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", ch);
        r += b;
      } else
        r += ch;
    }
    return r;
  }
  void str(const std::string& k, const std::string& v) {
    key(k);
    o << "\"" << esc(v) << "\"";
  }
  void num(const std::string& k, double v) {
    key(k);
    if (std::isfinite(v))
      o << v;
    else
      o << "null";
  }
  void u64(const std::string& k, std::uint64_t v) {
    key(k);
    o << v;
  }
  void i64(const std::string& k, std::int64_t v) {
    key(k);
    o << v;
  }
  void boolean(const std::string& k, bool v) {
    key(k);
    o << (v ? "true" : "false");
  }
  void open(const std::string& k) {
    key(k);
    o << "{";
    first = true;
  }
  void close() {
    o << "}";
    first = false;
  }
};

void write_dir(json_writer& j, const char* name, std::uint64_t bytes, std::uint64_t ops,
               latency_recorder& lat, double secs) {
  j.open(name);
  j.u64("bytes", bytes);
  j.u64("ops", ops);
  j.num("mib_s", secs > 0 ? static_cast<double>(bytes) / secs / (1 << 20) : 0);
  j.num("iops", secs > 0 ? static_cast<double>(ops) / secs : 0);
  j.num("lat_p50_us", lat.percentile(0.50));
  j.num("lat_p99_us", lat.percentile(0.99));
  j.num("lat_p999_us", lat.percentile(0.999));
  j.num("lat_mean_us", lat.mean());
  j.num("lat_max_us", lat.max());
  j.close();
}

void write_phase_brief(json_writer& j, const char* name, const phase_result& p) {
  j.open(name);
  const auto bytes = p.read_bytes + p.write_bytes;
  j.u64("bytes", bytes);
  j.num("elapsed_s", p.elapsed_s);
  j.num("mib_s", p.elapsed_s > 0 ? static_cast<double>(bytes) / p.elapsed_s / (1 << 20) : 0);
  j.u64("verify_bytes", p.verify_bytes);
  j.u64("verify_errors", p.verify_errors);
  j.u64("errors", p.errors);
  j.u64("commits_sent", p.commits.commits_sent);
  j.close();
}

}  // namespace

std::string report_json(const cli_options& o, const job_spec& s, phase_result& main_res,
                        const phase_result& layout, bool did_layout, const phase_result& readback,
                        bool did_readback, const sampler& smp, const sampler_config& scfg) {
  json_writer j;
  j.o << "{";
  j.str("tool", "dcache-bench");
  j.str("label", o.label);
  j.open("job");
  j.str("name", s.name);
  j.str("url", s.url);
  j.i64("nfs_version", s.nfs_version);
  j.str("rw", std::string(to_string(s.rw)));
  j.u64("rwmixread", s.rwmixread);
  j.u64("bs", s.bs);
  j.u64("record", s.record);
  j.u64("numjobs", s.numjobs);
  j.u64("iodepth", s.iodepth);
  j.u64("size", s.size);
  j.u64("io_size", io_budget(s));
  j.boolean("time_based", s.time_based);
  j.num("runtime", s.runtime);
  j.boolean("verify", s.verify);
  j.u64("seed", s.seed);
  j.u64("fsync", s.fsync);
  j.str("interleave_order", s.order == job_spec::record_order::stride ? "stride" : "shared");
  j.boolean("commit_at_end", s.commit_at_end);
  j.num("slow_writer", s.slow_writer);
  j.num("thinktime_us", s.thinktime_us);
  j.num("pass_interval", s.pass_interval);
  j.num("pass_first", s.pass_first >= 0 ? s.pass_first : s.pass_interval);
  j.boolean("truncate", s.truncate);
  j.close();
  const double secs = main_res.elapsed_s;
  j.num("elapsed_s", secs);
  j.boolean("stopped_by_file", main_res.stopped_by_file);
  write_dir(j, "read", main_res.read_bytes, main_res.read_ops, main_res.read_lat, secs);
  write_dir(j, "write", main_res.write_bytes, main_res.write_ops, main_res.write_lat, secs);
  write_dir(j, "getattr", 0, main_res.getattr_ops, main_res.getattr_lat, secs);
  const std::uint64_t total = main_res.read_bytes + main_res.write_bytes;
  j.open("total");
  j.u64("bytes", total);
  j.num("mib_s", secs > 0 ? static_cast<double>(total) / secs / (1 << 20) : 0);
  j.num("iops", secs > 0 ? static_cast<double>(main_res.read_ops + main_res.write_ops) / secs : 0);
  j.close();
  const auto& cc = main_res.commits;
  j.open("writes_by_stability");
  j.u64("unstable", cc.writes_unstable);
  j.u64("data_sync", cc.writes_data_sync);
  j.u64("file_sync", cc.writes_file_sync);
  j.u64("unknown", cc.writes_unknown);
  j.close();
  j.u64("commits_sent", cc.commits_sent);
  j.u64("commits_saved", cc.commits_saved);
  j.u64("verifier_changes", cc.verifier_changes);
  // COMMIT round trips, sent to answered (the page-cache work a mode does
  // at COMMIT shows here)
  j.open("commit_lat");
  j.u64("count", main_res.commit_lat.count());
  j.num("p50_us", main_res.commit_lat.percentile(0.50));
  j.num("p99_us", main_res.commit_lat.percentile(0.99));
  j.num("max_us", main_res.commit_lat.max());
  j.close();
  if (s.pass_interval > 0) {
    // complete passes: each is one job's io_budget; mib_s is the rate of
    // a pass of every job at once (numjobs x bytes / time, summed over passes)
    j.open("passes");
    j.u64("count", main_res.passes);
    j.u64("bytes", main_res.pass_bytes);
    j.num("busy_s", main_res.pass_busy_s);
    j.num("mib_s", main_res.pass_busy_s > 0 ? static_cast<double>(main_res.pass_bytes) * s.numjobs /
                                                  main_res.pass_busy_s / (1 << 20)
                                            : 0);
    j.num("p50_us", main_res.pass_lat.percentile(0.50));
    j.num("p99_us", main_res.pass_lat.percentile(0.99));
    j.num("max_us", main_res.pass_lat.max());
    j.close();
  }
  j.open("verify");
  j.boolean("enabled", s.verify);
  j.u64("bytes_checked", main_res.verify_bytes + readback.verify_bytes);
  j.u64("errors", main_res.verify_errors + readback.verify_errors);
  j.str("first_error",
        !main_res.first_verify_error.empty() ? main_res.first_verify_error : readback.first_verify_error);
  j.close();
  j.u64("errors", main_res.errors + readback.errors);
  j.str("first_error", main_res.first_error.empty() ? readback.first_error : main_res.first_error);
  if (did_layout) write_phase_brief(j, "layout", layout);
  if (did_readback) write_phase_brief(j, "readback", readback);
  const auto& r = smp.result();
  j.open("server");
  j.boolean("cachestat_ok", r.cachestat_ok);
  j.str("sample_dir", o.sample_dir);
  j.u64("samples", r.samples);
  j.u64("cache_peak", r.peak.cache);
  j.u64("dirty_peak", r.peak.dirty);
  j.u64("writeback_peak", r.peak.writeback);
  j.u64("cache_final", r.final_.cache);
  j.u64("dirty_final", r.final_.dirty);
  j.u64("evicted_final", r.final_.evicted);
  j.u64("meminfo_cached_start", r.meminfo_cached_start);
  j.u64("meminfo_cached_peak", r.meminfo_cached_peak);
  j.u64("meminfo_dirty_peak", r.meminfo_dirty_peak);
  j.u64("meminfo_writeback_peak", r.meminfo_writeback_peak);
  j.num("cpu_s", r.server_cpu_s);
  j.num("cpu_user_s", r.server_user_s);
  j.num("cpu_sys_s", r.server_sys_s);
  j.num("kthread_cpu_s", r.kthread_cpu_s);
  j.open("kthread_cpu_by_family");
  for (const auto& [k, v] : r.kthread_cpu_by_family) j.num(k, v);
  j.close();
  j.str("device", r.block_device);
  j.i64("dev_reads", r.dev_reads);
  j.i64("dev_read_bytes", r.dev_read_bytes);
  j.i64("dev_writes", r.dev_writes);
  j.i64("dev_write_bytes", r.dev_write_bytes);
  j.open("vmstat");
  for (const auto& [k, v] : r.vmstat_delta) j.i64(k, v);
  j.close();
  {
    // see thread_snapshot in sampler.hpp for what each number means
    const auto& t = r.threads;
    j.open("threads");
    j.u64("samples", t.samples);
    j.u64("interval_ms", scfg.thread_interval_ms);
    j.u64("threads_peak", t.threads_peak);
    j.u64("workers_peak", t.workers_peak);
    j.u64("iowq_peak", t.iowq_peak);
    j.num("d_mean", t.d_mean);
    j.u64("d_peak", t.d_peak);
    j.num("workers_d_mean", t.workers_d_mean);
    j.u64("workers_d_peak", t.workers_d_peak);
    j.num("worker_file_io_mean", t.worker_file_io_mean);
    j.u64("worker_file_io_peak", t.worker_file_io_peak);
    j.num("iowq_d_mean", t.iowq_d_mean);
    j.u64("iowq_d_peak", t.iowq_d_peak);
    j.u64("rss_peak_kib", t.rss_peak_kib);
    j.close();
  }
  j.close();
  j.o << "}\n";
  return j.o.str();
}

}  // namespace dcache::bench
