// dcache-bench job descriptions: a small fio-like INI file plus
// command-line overrides, parsed into one validated job_spec.
//
// Thread-safety: plain values and pure functions; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcache::bench {

// The access pattern of a job (fio's rw= names, plus "interleave": N
// writers writing misaligned records of one file in an order that makes
// every boundary page shared by two WRITEs arriving in either order;
// "probe": a latency probe, alternating GETATTR and a random bs READ of
// its file, one at a time, probe_interval_ms apart).
enum class rw_mode { read, write, rw, randread, randwrite, randrw, interleave, probe };

[[nodiscard]] std::string_view to_string(rw_mode m);
[[nodiscard]] bool is_random(rw_mode m);
[[nodiscard]] bool reads_at_all(rw_mode m, unsigned rwmixread);
[[nodiscard]] bool writes_at_all(rw_mode m, unsigned rwmixread);

struct job_spec {
  std::string name = "job";
  std::string url;      // nfs://server/export[/dir]
  int nfs_version = 3;  // 3 or 4 (libnfs 4.0 speaks 4.0 only)
  rw_mode rw = rw_mode::read;
  unsigned rwmixread = 50;        // percent of operations that read (rw, randrw)
  std::uint64_t bs = 1 << 20;     // bytes per operation
  std::uint64_t record = 47008;   // interleave: bytes per record
  unsigned numjobs = 1;           // one connection (nfs_context) each
  unsigned iodepth = 1;           // operations in flight per job
  std::uint64_t size = 64 << 20;  // per-job file size (interleave: the one file)
  std::uint64_t io_size = 0;      // bytes of I/O per job; 0 = size
  bool time_based = false;
  double runtime = 0;           // seconds; with time_based, required
  bool verify = false;          // check every READ, read back after writes
  std::uint64_t seed = 0x5eed;  // pattern seed (content depends on seed and offset)
  std::uint64_t fsync = 0;      // COMMIT (if needed) every N WRITEs; 0 = at close only
  // interleave: how the records reach the writers.  shared: one issue
  // order every writer pulls from (they finish together); stride: writer
  // j writes records j, j+numjobs, ... in order (neighbours in the file
  // are different writers, which finish at their own pace).
  enum class record_order { shared, stride } order = record_order::shared;
  bool commit_at_end = false;     // each job COMMITs (if needed) as soon as its own WRITEs are done
  double slow_writer = 1;         // job 0 runs this many times slower (paced after each WRITE)
  bool layout = true;             // create and fill files that are read but do not exist
  double probe_interval_ms = 10;  // probe: pause after each answer
  // fio's thinktime: each job pauses this many microseconds after every
  // completed operation before it issues the next (paced readers, whose
  // latency is the server's and not their own queue's)
  double thinktime_us = 0;
  // Passes (with time_based): each job reads (or writes) io_budget bytes,
  // one pass every pass_interval seconds, the first one pass_interval
  // after the start: a working set touched every N seconds. 0 = off.
  double pass_interval = 0;
  // seconds from the start to the first pass (< 0: one pass_interval)
  double pass_first = -1;
  bool truncate = false;  // write-only jobs: truncate each file to 0 when opening it
  std::string filename;   // base name; default = name
};

// A parse failure: what was wrong and where.
struct parse_error {
  std::string message;
};

// Parses "4k", "1M", "47008", "2G" (binary multiples, like fio).
[[nodiscard]] std::optional<std::uint64_t> parse_size(std::string_view text);

// Applies one "key=value" to spec. Returns an error naming the key/value.
[[nodiscard]] std::optional<parse_error> apply_setting(job_spec& spec, std::string_view key,
                                                       std::string_view value);

// Parses an INI job file's text: [global] then at most one job section
// (its name becomes spec.name); lines "key=value", '#' or ';' comments.
// `origin` names the file in messages.
[[nodiscard]] std::optional<parse_error> parse_job_text(job_spec& spec, std::string_view text,
                                                        std::string_view origin);

// Checks cross-field rules (url set, time_based needs runtime, ...).
[[nodiscard]] std::optional<parse_error> validate(const job_spec& spec);

// Per-job I/O budget: io_size, or size when io_size is 0.
[[nodiscard]] inline std::uint64_t io_budget(const job_spec& s) {
  return s.io_size ? s.io_size : s.size;
}

}  // namespace dcache::bench
