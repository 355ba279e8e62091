#include "options.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace dcache::bench {

[[noreturn]] void usage_exit(const char* msg) {
  if (msg) std::fprintf(stderr, "dcache-bench: %s\n", msg);
  std::fprintf(stderr,
               "usage: dcache-bench [JOBFILE] [--KEY=VALUE | KEY=VALUE]... [options]\n"
               "  job keys: url nfs_version rw rwmixread bs record numjobs iodepth size io_size\n"
               "            time_based runtime verify seed fsync layout filename name\n"
               "            interleave_order (shared|stride) commit_at_end slow_writer\n"
               "            thinktime (us) pass_interval (s) pass_first (s) truncate\n"
               "  options:  --json FILE      write the JSON result there (default stdout)\n"
               "            --progress       live progress line on stderr (default: if a tty)\n"
               "            --sample-dir DIR server-side backing directory to sample (cachestat)\n"
               "            --server-pid PID server process for CPU time (default $DCACHE_PID)\n"
               "            --drop-cache DIR write back and drop the page cache of DIR's files\n"
               "                             (posix_fadvise DONTNEED) before the measured phase\n"
               "            --label TEXT     copied into the JSON\n"
               "            --dry-run        print the parsed job and exit\n"
               "            --thread-interval-ms N  sample the server's threads every N ms (default 50;\n"
               "                             0: its CPU time only)\n"
               "            --stop-file FILE end the measured phase (as if runtime were over) once FILE\n"
               "                             exists (looked for every 20 ms)\n"
               "            --go-file FILE   once connected and laid out, create FILE.ready and start the\n"
               "                             measured phase when FILE exists (several clients at once)\n");
  std::exit(2);
}

cli_options parse_cli(int argc, char** argv) {
  cli_options o;
  o.progress = ::isatty(2);
  if (const char* p = std::getenv("DCACHE_PID")) o.server_pid = std::atoi(p);
  std::vector<std::pair<std::string, std::string>> overrides;
  std::string job_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      const auto eq = a.find('=');
      if (eq != std::string::npos) return a.substr(eq + 1);
      if (i + 1 >= argc) usage_exit((std::string(name) + " needs a value").c_str());
      return argv[++i];
    };
    auto is = [&](const char* name) { return a == name || a.rfind(std::string(name) + "=", 0) == 0; };
    if (a == "-h" || a == "--help")
      usage_exit(nullptr);
    else if (is("--json"))
      o.json_path = value("--json");
    else if (a == "--progress")
      o.progress = true;
    else if (a == "--no-progress")
      o.progress = false;
    else if (is("--sample-dir"))
      o.sample_dir = value("--sample-dir");
    else if (is("--server-pid"))
      o.server_pid = std::atoi(value("--server-pid").c_str());
    else if (is("--drop-cache"))
      o.drop_cache_dir = value("--drop-cache");
    else if (is("--label"))
      o.label = value("--label");
    else if (a == "--dry-run")
      o.dry_run = true;
    else if (is("--thread-interval-ms"))
      o.thread_interval_ms = static_cast<unsigned>(std::atoi(value("--thread-interval-ms").c_str()));
    else if (is("--stop-file"))
      o.stop_file = value("--stop-file");
    else if (is("--go-file"))
      o.go_file = value("--go-file");
    else if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      const auto eq = a.find('=');
      overrides.emplace_back(a.substr(2, eq - 2), a.substr(eq + 1));
    } else if (a.rfind("--", 0) != 0 && a.find('=') != std::string::npos) {
      const auto eq = a.find('=');
      overrides.emplace_back(a.substr(0, eq), a.substr(eq + 1));
    } else if (a.rfind("-", 0) != 0 && job_file.empty())
      job_file = a;
    else
      usage_exit(("unknown argument '" + a + "'").c_str());
  }
  if (!job_file.empty()) {
    std::ifstream in(job_file);
    if (!in) {
      std::fprintf(stderr, "dcache-bench: cannot read job file %s: %s\n", job_file.c_str(),
                   std::strerror(errno));
      std::exit(2);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (auto e = parse_job_text(o.spec, ss.str(), job_file)) {
      std::fprintf(stderr, "dcache-bench: %s\n", e->message.c_str());
      std::exit(2);
    }
  }
  for (const auto& [k, v] : overrides)
    if (auto e = apply_setting(o.spec, k, v)) {
      std::fprintf(stderr, "dcache-bench: command line: %s\n", e->message.c_str());
      std::exit(2);
    }
  if (auto e = validate(o.spec)) {
    std::fprintf(stderr, "dcache-bench: %s\n", e->message.c_str());
    std::exit(2);
  }
  return o;
}

}  // namespace dcache::bench
