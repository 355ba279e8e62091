// dcache-bench: an NFS load generator on libnfs's asynchronous API.
//
// One nfs_context (one TCP connection) per job, all driven by one poll()
// loop; each job keeps `iodepth` operations in flight. NFSv3 WRITEs go
// through the raw rpc_nfs3_write_async because libnfs's high-level
// nfs_pwrite_async hides the reply's `committed` field, and COMMIT is sent
// the Linux client's way: at close/fsync, only when some WRITE was answered
// UNSTABLE (commit_tracker.hpp). See docs/benchmarks.md.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commit_tracker.hpp"
#include "interleave.hpp"
#include "job.hpp"
#include "latency.hpp"
#include "pattern.hpp"
#include "sampler.hpp"

namespace dcache::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// libnfs 4.0 keeps struct nfs_fh private; nfs_get_fh() returns a pointer to
// this layout (libnfs-private.h: int len; char *val). The handle is checked
// for a sane NFSv3 length before use.
struct libnfs_fh_layout {
  int len;
  char* val;
};

// libnfs 4.0 cannot encode an NFSv4 WRITE much over 4000 bytes nor decode an
// NFSv4 READ reply much over 1 MiB (found by the e2e suite, nfs_client.hpp).
constexpr std::uint64_t v4_max_write = 7 * 512;
constexpr std::uint64_t v4_max_read = 512 * 1024;

// What a failed libnfs callback says: its own message, else the context's.
const char* rpc_error(void* data, nfs_context* nfs) {
  return static_cast<const char*>(data ? data : nfs_get_error(nfs));
}

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

struct conn;

struct op_slot {
  conn* c = nullptr;
  bool is_read = false;
  bool is_getattr = false;  // probe: a GETATTR, not a READ
  std::uint64_t offset = 0, len = 0;
  std::vector<std::byte> buf;
  clock_type::time_point start;
  unsigned pending = 0;
  bool failed = false;
};

// One RPC of an operation (an operation larger than the server's or
// libnfs's maximum transfer goes out as several).
struct sub_rpc {
  op_slot* op;
  std::uint64_t offset, len;
  WRITE3args args{};
};

struct conn {
  nfs_context* nfs = nullptr;
  rpc_context* rpc = nullptr;
  nfsfh* fh = nullptr;
  nfs_fh3 fh3{};
  unsigned job = 0;
  std::uint64_t file_seed = 0;
  std::string path;
  commit_tracker tracker;
  std::mt19937_64 rng;
  std::uint64_t cursor = 0, issued_bytes = 0, writes_since_fsync = 0;
  unsigned inflight = 0;
  bool stopped = false;  // no more new operations
  bool commit_inflight = false;
  clock_type::time_point commit_sent;  // of the COMMIT in flight
  bool draining = false;               // waiting for in-flight WRITEs before an fsync COMMIT
  // interleave, stride order: this job's records, the next to write
  std::vector<std::uint64_t> own;
  std::size_t own_next = 0;
  // slow_writer: no new operation before this time
  clock_type::time_point not_before{};
  std::uint64_t probes = 0;  // probe: operations issued (even: GETATTR)
  // pass_interval: when this job's next pass may start, and whether one runs
  clock_type::time_point next_pass{}, pass_start{};
  bool in_pass = false;
  std::vector<std::unique_ptr<op_slot>> free_slots;
  ~conn() {
    if (fh) nfs_close(nfs, fh);
    if (nfs) nfs_destroy_context(nfs);
  }
};

struct engine {
  job_spec spec;
  phase_result* res = nullptr;
  std::vector<std::unique_ptr<conn>> conns;
  std::string server, export_path;
  clock_type::time_point t0, deadline;
  bool progress = false;
  // interleave: the shared issue order
  std::vector<std::uint64_t> order;
  std::size_t order_next = 0;
  std::uint64_t range = 0;  // bytes of the file(s) the phase covers
  bool fatal = false;
  // last time a reply arrived: a server that stops answering (e.g. stalled
  // in a too-small memory cgroup) fails the run instead of hanging it
  clock_type::time_point last_reply;
  static constexpr auto stall_limit = std::chrono::seconds(60);
  std::string stop_file;  // --stop-file
  bool stop_seen = false;
  clock_type::time_point stop_checked{};

  void fail(const std::string& what) {
    ++res->errors;
    if (res->first_error.empty()) res->first_error = what;
    if (res->errors > 100) fatal = true;
  }

  std::uint64_t max_write(conn& c) const {
    if (spec.nfs_version == 4) return v4_max_write;
    const auto m = nfs_get_writemax(c.nfs);
    return m ? m : (1 << 20);
  }
  std::uint64_t max_read(conn& c) const {
    const auto m = nfs_get_readmax(c.nfs);
    const std::uint64_t r = m ? m : (1 << 20);
    return spec.nfs_version == 4 ? std::min(r, v4_max_read) : r;
  }

  // Decides the next operation of c; false when the job is done.
  bool next_op(conn& c, bool& is_read, std::uint64_t& off, std::uint64_t& len) {
    const auto now = clock_type::now();
    if (spec.time_based ? now >= deadline : false) return false;
    if (stop_requested()) return false;
    if (spec.rw == rw_mode::interleave) {
      std::uint64_t r = 0;
      if (spec.order == job_spec::record_order::stride) {
        if (c.own_next >= c.own.size()) return false;
        r = c.own[c.own_next++];
      } else {
        if (order_next >= order.size()) return false;
        r = order[order_next++];
      }
      is_read = false;
      off = r * spec.record;
      len = spec.record;
      return true;
    }
    if (!spec.time_based && c.issued_bytes >= io_budget(spec)) return false;
    switch (spec.rw) {
      case rw_mode::read:
      case rw_mode::randread:
        is_read = true;
        break;
      case rw_mode::write:
      case rw_mode::randwrite:
        is_read = false;
        break;
      default:
        is_read = (c.rng() % 100) < spec.rwmixread;
        break;
    }
    if (is_random(spec.rw)) {
      const std::uint64_t blocks = range / spec.bs;
      off = (c.rng() % blocks) * spec.bs;
      len = spec.bs;
    } else {
      if (c.cursor >= range) c.cursor = 0;
      off = c.cursor;
      len = std::min(spec.bs, range - off);
      c.cursor += len;
    }
    return true;
  }

  void pump(conn& c) {
    while (!fatal && !c.stopped && !c.draining && c.inflight < spec.iodepth) {
      if (c.not_before > clock_type::now()) break;  // paced: run_loop pumps again
      if (spec.pass_interval > 0 && !pass_ready(c)) break;
      bool is_read = false;
      std::uint64_t off = 0, len = 0;
      if (!next_op(c, is_read, off, len)) {
        c.stopped = true;
        if (spec.commit_at_end) {
          // this job is done while others may still write: its COMMIT now
          c.draining = true;
          maybe_fsync(c);
        }
        break;
      }
      if (!is_read && spec.fsync && c.writes_since_fsync >= spec.fsync) {
        // fsync semantics: wait for this job's WRITEs, then COMMIT if needed
        c.draining = true;
        c.cursor -= is_random(spec.rw) || spec.rw == rw_mode::interleave ? 0 : len;
        if (spec.rw == rw_mode::interleave) {
          if (spec.order == job_spec::record_order::stride)
            --c.own_next;
          else
            --order_next;
        }
        maybe_fsync(c);
        break;
      }
      issue(c, is_read, off, len);
    }
  }

  // pass_interval: may c issue now? A pass is io_budget bytes; when they
  // are issued and answered the pass is over, and the job waits for the
  // next pass's start (pass_interval after the previous start, at once if
  // that is past).
  bool pass_ready(conn& c) {
    const auto now = clock_type::now();
    if (c.issued_bytes < io_budget(spec)) {
      if (!c.in_pass) {
        c.in_pass = true;
        c.pass_start = now;
      }
      return true;
    }
    if (c.inflight) return false;  // the pass's last replies are not in yet
    if (c.in_pass) {
      const double secs = std::chrono::duration<double>(now - c.pass_start).count();
      res->pass_lat.add(secs * 1e6);
      res->pass_busy_s += secs;
      res->pass_bytes += c.issued_bytes;
      ++res->passes;
      c.in_pass = false;
    }
    c.issued_bytes = 0;
    c.cursor = 0;
    c.next_pass +=
        std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(spec.pass_interval));
    if (c.next_pass < now) c.next_pass = now;
    c.not_before = c.next_pass;
    return c.not_before <= now && pass_ready(c);
  }

  // --stop-file: looked for at most every 20 ms
  bool stop_requested() {
    if (stop_file.empty() || stop_seen) return stop_seen;
    const auto now = clock_type::now();
    if (now - stop_checked < std::chrono::milliseconds(20)) return false;
    stop_checked = now;
    struct stat st {};
    stop_seen = ::stat(stop_file.c_str(), &st) == 0;
    return stop_seen;
  }

  void issue(conn& c, bool is_read, std::uint64_t off, std::uint64_t len) {
    std::unique_ptr<op_slot> slot;
    if (!c.free_slots.empty()) {
      slot = std::move(c.free_slots.back());
      c.free_slots.pop_back();
    } else
      slot = std::make_unique<op_slot>();
    op_slot* op = slot.release();
    op->c = &c;
    op->is_read = is_read;
    op->offset = off;
    op->len = len;
    op->failed = false;
    op->pending = 0;
    op->is_getattr = spec.rw == rw_mode::probe && c.probes++ % 2 == 0;
    if (op->is_getattr) {
      ++c.inflight;
      op->start = clock_type::now();
      op->pending = 1;
      auto* sub = new sub_rpc{op, 0, 0, {}};
      if (nfs_fstat64_async(c.nfs, c.fh, &engine::on_getattr, sub) != 0) {
        fail(std::string("queueing a GETATTR failed: ") + nfs_get_error(c.nfs));
        delete sub;
        op->failed = true;
        sub_done(op);
      }
      return;
    }
    if (!is_read) {
      op->buf.resize(len);
      fill_pattern(op->buf, off, c.file_seed);
      ++c.writes_since_fsync;
    }
    c.issued_bytes += len;
    ++c.inflight;
    op->start = clock_type::now();
    const std::uint64_t chunk = is_read ? max_read(c) : max_write(c);
    // count first so an inline completion cannot finish the op early
    op->pending = static_cast<unsigned>((len + chunk - 1) / chunk);
    for (std::uint64_t done = 0; done < len; done += chunk) {
      auto* sub = new sub_rpc{op, off + done, std::min(chunk, len - done), {}};
      int rc = 0;
      if (is_read) {
        rc = nfs_pread_async(c.nfs, c.fh, sub->offset, sub->len, &engine::on_read, sub);
      } else if (spec.nfs_version == 3) {
        sub->args.file = c.fh3;
        sub->args.offset = sub->offset;
        sub->args.count = static_cast<count3>(sub->len);
        sub->args.stable = UNSTABLE;  // what the Linux client sends for buffered writeback
        sub->args.data.data_len = static_cast<u_int>(sub->len);
        sub->args.data.data_val = reinterpret_cast<char*>(op->buf.data() + done);
        rc = rpc_nfs3_write_async(c.rpc, &engine::on_write3, &sub->args, sub);
      } else {
        rc = nfs_pwrite_async(c.nfs, c.fh, sub->offset, sub->len, op->buf.data() + done, &engine::on_write4,
                              sub);
      }
      if (rc != 0) {
        fail(std::string("queueing an RPC failed: ") + nfs_get_error(c.nfs));
        delete sub;
        op->failed = true;
        sub_done(op);
      }
    }
  }

  static engine* self;  // the one engine of this process (callbacks carry only sub_rpc)

  void sub_done(op_slot* op) {
    last_reply = clock_type::now();
    if (--op->pending != 0) return;
    conn& c = *op->c;
    const double us = std::chrono::duration<double, std::micro>(clock_type::now() - op->start).count();
    if (!op->failed) {
      if (op->is_getattr) {
        ++res->getattr_ops;
        res->getattr_lat.add(us);
      } else if (op->is_read) {
        res->read_bytes += op->len;
        ++res->read_ops;
        res->read_lat.add(us);
      } else {
        res->write_bytes += op->len;
        ++res->write_ops;
        res->write_lat.add(us);
      }
    }
    if (c.job == 0 && spec.slow_writer > 1 && !op->is_read) {
      // the slow writer: after each WRITE, idle (factor - 1) times as long
      // as it took, so it runs `factor` times slower than its neighbours
      c.not_before =
          clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double, std::micro>(us * (spec.slow_writer - 1)));
    }
    if (spec.rw == rw_mode::probe)
      c.not_before =
          clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double, std::milli>(spec.probe_interval_ms));
    if (spec.thinktime_us > 0)
      c.not_before =
          std::max(c.not_before,
                   clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                           std::chrono::duration<double, std::micro>(spec.thinktime_us)));
    --c.inflight;
    c.free_slots.emplace_back(op);
    if (c.draining)
      maybe_fsync(c);
    else
      pump(c);
  }

  static void on_getattr(int err, nfs_context* nfs, void* data, void* priv) {
    auto* sub = static_cast<sub_rpc*>(priv);
    engine& e = *self;
    op_slot* op = sub->op;
    if (err < 0) {
      e.fail(std::string("GETATTR failed: ") + rpc_error(data, nfs));
      op->failed = true;
    }
    delete sub;
    e.sub_done(op);
  }

  static void on_read(int err, nfs_context* nfs, void* data, void* priv) {
    auto* sub = static_cast<sub_rpc*>(priv);
    engine& e = *self;
    op_slot* op = sub->op;
    if (err < 0) {
      e.fail(std::string("READ failed: ") + rpc_error(data, nfs));
      op->failed = true;
    } else {
      const auto got = static_cast<std::uint64_t>(err);
      if (got != sub->len) {
        e.fail("short READ at " + std::to_string(sub->offset) + ": " + std::to_string(got) + " of " +
               std::to_string(sub->len));
        op->failed = true;
      }
      if (e.spec.verify && got > 0) {
        e.res->verify_bytes += got;
        const auto m =
            verify_pattern({static_cast<const std::byte*>(data), got}, sub->offset, op->c->file_seed);
        if (m) {
          ++e.res->verify_errors;
          if (e.res->first_verify_error.empty()) {
            char text[200];
            std::snprintf(text, sizeof text, "%s: offset %" PRIu64 ": expected 0x%02x, read 0x%02x",
                          op->c->path.c_str(), m->offset, m->expected, m->actual);
            e.res->first_verify_error = text;
          }
        }
      }
    }
    delete sub;
    e.sub_done(op);
  }

  static void on_write3(rpc_context* rpc, int status, void* data, void* priv) {
    auto* sub = static_cast<sub_rpc*>(priv);
    engine& e = *self;
    op_slot* op = sub->op;
    if (status != RPC_STATUS_SUCCESS) {
      e.fail(std::string("WRITE RPC failed: ") +
             (status == RPC_STATUS_ERROR && data ? static_cast<const char*>(data) : rpc_get_error(rpc)));
      op->failed = true;
    } else {
      auto* r = static_cast<WRITE3res*>(data);
      if (r->status != NFS3_OK) {
        e.fail("WRITE answered nfsstat3 " + std::to_string(r->status));
        op->failed = true;
      } else {
        const auto& ok = r->WRITE3res_u.resok;
        commit_tracker::verifier v;
        std::memcpy(v.data(), ok.verf, v.size());
        op->c->tracker.on_write_reply(static_cast<stability>(ok.committed), &v);
        if (ok.count != sub->len) {
          e.fail("short WRITE at " + std::to_string(sub->offset) + ": " + std::to_string(ok.count) + " of " +
                 std::to_string(sub->len));
          op->failed = true;
        }
      }
    }
    delete sub;
    e.sub_done(op);
  }

  static void on_write4(int err, nfs_context* nfs, void* data, void* priv) {
    auto* sub = static_cast<sub_rpc*>(priv);
    engine& e = *self;
    op_slot* op = sub->op;
    if (err < 0) {
      e.fail(std::string("WRITE failed: ") + rpc_error(data, nfs));
      op->failed = true;
    } else {
      op->c->tracker.on_write_reply(stability::unknown);
      if (static_cast<std::uint64_t>(err) != sub->len) {
        e.fail("short WRITE");
        op->failed = true;
      }
    }
    delete sub;
    e.sub_done(op);
  }

  // fsync point: once no WRITE of c is in flight, COMMIT if any was UNSTABLE
  void maybe_fsync(conn& c) {
    if (c.inflight != 0 || c.commit_inflight) return;
    c.writes_since_fsync = 0;
    if (!c.tracker.flush_point()) {
      c.draining = false;
      pump(c);
      return;
    }
    send_commit(c);
  }

  void send_commit(conn& c) {
    c.commit_inflight = true;
    c.commit_sent = clock_type::now();
    int rc = 0;
    if (spec.nfs_version == 3) {
      auto* args = new COMMIT3args{c.fh3, 0, 0};
      rc = rpc_nfs3_commit_async(c.rpc, &engine::on_commit3, args, &c);
      delete args;  // encoded at queue time
    } else {
      rc = nfs_fsync_async(c.nfs, c.fh, &engine::on_commit4, &c);
    }
    if (rc != 0) {
      fail(std::string("queueing COMMIT failed: ") + nfs_get_error(c.nfs));
      c.commit_inflight = false;
      c.draining = false;
    }
  }

  void commit_done(conn& c) {
    last_reply = clock_type::now();
    res->commit_lat.add(std::chrono::duration<double, std::micro>(last_reply - c.commit_sent).count());
    c.commit_inflight = false;
    if (c.draining) {
      c.draining = false;
      pump(c);
    }
  }

  static void on_commit3(rpc_context* rpc, int status, void* data, void* priv) {
    auto& c = *static_cast<conn*>(priv);
    engine& e = *self;
    if (status != RPC_STATUS_SUCCESS) {
      e.fail(std::string("COMMIT RPC failed: ") + rpc_get_error(rpc));
    } else {
      auto* r = static_cast<COMMIT3res*>(data);
      if (r->status != NFS3_OK) e.fail("COMMIT answered nfsstat3 " + std::to_string(r->status));
      commit_tracker::verifier v;
      std::memcpy(v.data(), r->COMMIT3res_u.resok.verf, v.size());
      c.tracker.on_commit_reply(r->status == NFS3_OK ? &v : nullptr);
    }
    e.commit_done(c);
  }

  static void on_commit4(int err, nfs_context* nfs, void* data, void* priv) {
    auto& c = *static_cast<conn*>(priv);
    engine& e = *self;
    if (err < 0)
      e.fail(std::string("COMMIT failed: ") + rpc_error(data, nfs));
    else
      c.tracker.on_commit_reply();
    e.commit_done(c);
  }

  bool busy() const {
    for (const auto& c : conns)
      if (!c->stopped || c->inflight || c->commit_inflight || c->draining) return true;
    return false;
  }

  // Drives every connection until pred() is false. Returns false on a
  // transport failure.
  template <typename P>
  bool run_loop(P pred, const char* phase_name) {
    std::vector<pollfd> fds(conns.size());
    auto last_progress = clock_type::now();
    std::uint64_t last_bytes = 0;
    while (pred() && !fatal) {
      for (std::size_t i = 0; i < conns.size(); ++i) {
        fds[i].fd = nfs_get_fd(conns[i]->nfs);
        fds[i].events = static_cast<short>(nfs_which_events(conns[i]->nfs));
        fds[i].revents = 0;
      }
      // a paced job wakes the loop when its pause is over
      int timeout_ms = 100;
      const auto now0 = clock_type::now();
      for (const auto& c : conns)
        if (!c->stopped && c->not_before > now0)
          timeout_ms = std::min<int>(
              timeout_ms,
              static_cast<int>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(c->not_before - now0).count()) +
                  1);
      const int n = ::poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) {
        fail(std::string("poll: ") + std::strerror(errno));
        return false;
      }
      for (std::size_t i = 0; i < conns.size(); ++i) {
        // revents 0 still lets libnfs run its timeouts
        if (nfs_service(conns[i]->nfs, fds[i].revents) < 0) {
          fail(std::string("connection lost: ") + nfs_get_error(conns[i]->nfs));
          fatal = true;
          return false;
        }
      }
      // the stall clock runs only while something is in flight (a paced
      // job or one between passes waits for nobody)
      bool waiting = false;
      for (const auto& c : conns) waiting = waiting || c->inflight || c->commit_inflight;
      if (!waiting) last_reply = clock_type::now();
      if (clock_type::now() - last_reply > stall_limit) {
        fail("no reply from the server for 60 s");
        fatal = true;
        return false;
      }
      if ((spec.time_based && clock_type::now() >= deadline) || stop_requested()) {
        if (stop_requested()) res->stopped_by_file = true;
        for (auto& c : conns) c->stopped = true;
      }
      for (auto& c : conns)
        if (!c->stopped && !c->draining && c->inflight < spec.iodepth &&
            c->not_before != clock_type::time_point{} && c->not_before <= clock_type::now())
          pump(*c);
      const auto now = clock_type::now();
      if (progress && now - last_progress >= std::chrono::seconds(1)) {
        const std::uint64_t bytes = res->read_bytes + res->write_bytes;
        const double dt = std::chrono::duration<double>(now - last_progress).count();
        std::fprintf(stderr,
                     "\r%s %s: %6.1fs  %8.1f MiB/s  read %" PRIu64 " MiB  written %" PRIu64
                     " MiB  errors %" PRIu64 "   ",
                     spec.name.c_str(), phase_name, std::chrono::duration<double>(now - t0).count(),
                     static_cast<double>(bytes - last_bytes) / dt / (1 << 20), res->read_bytes >> 20,
                     res->write_bytes >> 20, res->errors + res->verify_errors);
        last_progress = now;
        last_bytes = bytes;
      }
    }
    if (progress) std::fprintf(stderr, "\n");
    return !fatal;
  }

  // Runs one phase: all jobs until done, then COMMIT at close as needed.
  bool run_phase(phase_result& out, const char* phase_name) {
    res = &out;
    for (auto& c : conns) {
      c->stopped = false;
      c->cursor = 0;
      c->issued_bytes = 0;
      c->writes_since_fsync = 0;
      c->own_next = 0;
      c->not_before = {};
      c->in_pass = false;
      c->tracker = commit_tracker{};
      c->rng.seed(spec.seed * 1000003 + c->job);
    }
    order_next = 0;
    t0 = clock_type::now();
    last_reply = t0;
    deadline =
        t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(spec.runtime));
    if (spec.pass_interval > 0)
      for (auto& c : conns) {
        // the first pass one interval after the start
        c->next_pass = t0 + std::chrono::duration_cast<clock_type::duration>(
                                std::chrono::duration<double>(spec.pass_interval));
        c->not_before = c->next_pass;
      }
    for (auto& c : conns) pump(*c);
    bool ok = run_loop(
        [&] {
          for (const auto& c : conns)
            if (!c->stopped || c->inflight || c->commit_inflight || c->draining) return true;
          return false;
        },
        phase_name);
    // close: COMMIT where a WRITE was answered UNSTABLE (the Linux client's rule)
    if (ok) {
      for (auto& c : conns)
        if (c->tracker.flush_point()) send_commit(*c);
      ok = run_loop(
          [&] {
            for (const auto& c : conns)
              if (c->commit_inflight) return true;
            return false;
          },
          phase_name);
    }
    out.elapsed_s = std::chrono::duration<double>(clock_type::now() - t0).count();
    for (auto& c : conns) out.commits += c->tracker.counts();
    return ok;
  }
};

engine* engine::self = nullptr;

[[noreturn]] void usage_exit(const char* msg) {
  if (msg) std::fprintf(stderr, "dcache-bench: %s\n", msg);
  std::fprintf(stderr,
               "usage: dcache-bench [JOBFILE] [--KEY=VALUE | KEY=VALUE]... [options]\n"
               "  job keys: url nfs_version rw rwmixread bs record numjobs iodepth size io_size\n"
               "            time_based runtime verify seed fsync layout filename name\n"
               "            interleave_order (shared|stride) commit_at_end slow_writer\n"
               "            thinktime (us) pass_interval (s) truncate\n"
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

bool split_url(const std::string& url, std::string& server, std::string& exp) {
  const std::string rest = url.substr(6);
  const auto slash = rest.find('/');
  if (slash == std::string::npos || slash == 0) return false;
  server = rest.substr(0, slash);
  exp = rest.substr(slash);
  const auto q = exp.find('?');
  if (q != std::string::npos) exp.resize(q);
  return !exp.empty();
}

// Connects numjobs contexts and opens each job's file (interleave: one file
// shared by all). Creates files that do not exist.
bool connect_all(engine& e, std::string& err) {
  const job_spec s = e.spec;  // a copy: phases below modify e.spec
  const std::string base = s.filename.empty() ? s.name : s.filename;
  for (unsigned j = 0; j < s.numjobs; ++j) {
    auto c = std::make_unique<conn>();
    c->job = j;
    c->nfs = nfs_init_context();
    if (!c->nfs) {
      err = "nfs_init_context failed";
      return false;
    }
    if (nfs_set_version(c->nfs, s.nfs_version) != 0) {
      err = std::string("nfs_set_version: ") + nfs_get_error(c->nfs);
      return false;
    }
    if (nfs_mount(c->nfs, e.server.c_str(), e.export_path.c_str()) != 0) {
      err = "mount " + e.server + ":" + e.export_path + ": " + nfs_get_error(c->nfs);
      return false;
    }
    c->rpc = nfs_get_rpc_context(c->nfs);
    const unsigned file_index = s.rw == rw_mode::interleave ? 0 : j;
    c->path = "/" + base + "." + std::to_string(file_index);
    c->file_seed = file_seed(s.seed, file_index);
    int rc = nfs_open(c->nfs, c->path.c_str(), O_RDWR, &c->fh);
    if (rc != 0) rc = nfs_create(c->nfs, c->path.c_str(), O_RDWR | O_CREAT, 0644, &c->fh);
    if (rc != 0) {
      err = "open/create " + c->path + ": " + nfs_get_error(c->nfs);
      return false;
    }
    if (s.truncate && nfs_ftruncate(c->nfs, c->fh, 0) != 0) {
      err = "truncate " + c->path + ": " + nfs_get_error(c->nfs);
      return false;
    }
    auto* fh = reinterpret_cast<libnfs_fh_layout*>(nfs_get_fh(c->fh));
    if (s.nfs_version == 3) {
      if (!fh || fh->len <= 0 || fh->len > 64 || !fh->val) {
        err = "unexpected libnfs file handle layout";
        return false;
      }
      c->fh3.data.data_len = static_cast<u_int>(fh->len);
      c->fh3.data.data_val = fh->val;
    }
    e.conns.push_back(std::move(c));
  }
  return true;
}

std::uint64_t file_size(engine& e, conn& c) {
  nfs_stat_64 st{};
  if (nfs_fstat64(c.nfs, c.fh, &st) != 0) return 0;
  (void)e;
  return st.nfs_size;
}

// --------------------------------------------------------------- JSON out --
struct json_writer {
  std::ostringstream o;
  bool first = true;
  void key(const std::string& k) {
    if (!first) o << ",";
    first = false;
    o << "\"" << k << "\":";
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
                " layout=%d thinktime=%g pass_interval=%g truncate=%d\n",
                s.name.c_str(), s.url.c_str(), s.nfs_version, std::string(to_string(s.rw)).c_str(),
                s.rwmixread, s.bs, s.record, s.numjobs, s.iodepth, s.size, io_budget(s), s.time_based,
                s.runtime, s.verify, s.seed, s.fsync, s.layout, s.thinktime_us, s.pass_interval, s.truncate);
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

  // ------------------------------------------------------------ report --
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

  const std::string text = j.o.str();
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
