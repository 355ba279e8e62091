// dcache-bench's command line: an optional job file, KEY=VALUE overrides
// and the tool's own options (usage_exit's text lists them all), parsed
// into one validated job and the run's settings. A bad command line ends
// the process: status 2, the reason on stderr.
//
// Thread-safety: none needed; main calls it once.
#pragma once

#include <string>

#include "job.hpp"

namespace dcache::bench {

struct cli_options {
  job_spec spec;
  std::string json_path;
  bool progress = false;
  std::string sample_dir;
  int server_pid = 0;
  std::string drop_cache_dir;
  std::string label;
  bool dry_run = false;
  unsigned thread_interval_ms = 50;  // 0: no thread sampling (CPU time only)
  std::string stop_file;             // end the measured phase once this file exists
  std::string go_file;               // create GO.ready when connected, start when GO exists
};

// Prints msg (when not null) and the usage text on stderr, exits with status 2.
[[noreturn]] void usage_exit(const char* msg);

// The job file, then the overrides in order, then validate; exits on an error.
[[nodiscard]] cli_options parse_cli(int argc, char** argv);

}  // namespace dcache::bench
