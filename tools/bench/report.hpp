// dcache-bench's report: a run as one JSON object on one line (what
// tools/bench_report.py reads): the job, the measured phase by kind
// (bytes, rates, latency percentiles), WRITE stability and COMMITs,
// passes, verification and errors, the layout and read-back phases when
// they ran, and the server's samples.
//
// Thread-safety: none needed; main calls it once, after the run.
#pragma once

#include <string>

#include "job.hpp"
#include "options.hpp"
#include "phase_result.hpp"
#include "sampler.hpp"

namespace dcache::bench {

// The report of a run; s is the job as given (the phases change a copy).
// The percentiles reorder main_res's latency samples.
[[nodiscard]] std::string report_json(const cli_options& o, const job_spec& s, phase_result& main_res,
                                      const phase_result& layout, bool did_layout,
                                      const phase_result& readback, bool did_readback, const sampler& smp,
                                      const sampler_config& scfg);

}  // namespace dcache::bench
