// What one phase of a run (the layout, the measured run, the read-back)
// counted: bytes, operations and latencies by kind, passes, WRITE
// stability and COMMITs, verification and transport errors. The engine
// fills it as replies arrive; the report prints it.
//
// Thread-safety: a plain value, filled by the thread that drives the engine.
#pragma once

#include <cstdint>
#include <string>

#include "commit_tracker.hpp"
#include "latency.hpp"

namespace dcache::bench {

struct phase_result {
  double elapsed_s = 0;
  std::uint64_t read_bytes = 0, write_bytes = 0, read_ops = 0, write_ops = 0;
  latency_recorder read_lat, write_lat, commit_lat, getattr_lat;
  std::uint64_t getattr_ops = 0;
  // pass_interval: every complete pass of every job (a pass cut short by
  // the end of the run is not counted)
  latency_recorder pass_lat;
  std::uint64_t passes = 0, pass_bytes = 0;
  double pass_busy_s = 0;
  bool stopped_by_file = false;  // --stop-file ended the phase
  commit_counts commits;
  std::uint64_t verify_bytes = 0, verify_errors = 0;
  std::string first_verify_error;
  std::uint64_t errors = 0;
  std::string first_error;
};

}  // namespace dcache::bench
