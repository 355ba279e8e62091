#include "engine.hpp"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "pattern.hpp"

namespace dcache::bench {
namespace {

// libnfs 4.0 cannot encode an NFSv4 WRITE much over 4000 bytes nor decode an
// NFSv4 READ reply much over 1 MiB (found by the e2e suite, nfs_client.hpp).
constexpr std::uint64_t v4_max_write = 7 * 512;
constexpr std::uint64_t v4_max_read = 512 * 1024;

}  // namespace

engine* engine::self = nullptr;

conn::~conn() {
  if (fh != nullptr) {
    if (!broken)
      (void)nfs_close(nfs, fh);  // NFSv4: the CLOSE, waited for
    else
      // queued (NFSv4) and cancelled below, or freed at once (NFSv3): the
      // handle goes either way, and nothing is waited for on a connection
      // that failed or still has RPCs in flight
      (void)nfs_close_async(
          nfs, fh, [](int, nfs_context*, void*, void*) {}, nullptr);
  }
  if (nfs != nullptr) nfs_destroy_context(nfs);
}

void engine::close_all() {
  // From here on, callbacks (cancelled RPCs, or replies a CLOSE's wait
  // takes in) give back their sub_rpc and op_slot and nothing else: the
  // results they would count in may be gone (main's locals go before the
  // engine) and no operation may be issued on a context being destroyed.
  closing = true;
  res = nullptr;
  for (auto& c : conns) c->broken = c->broken || fatal || c->inflight != 0 || c->commit_inflight;
  conns.clear();
}

void engine::fail(const std::string& what) {
  if (res == nullptr) return;
  ++res->errors;
  if (res->first_error.empty()) res->first_error = what;
  if (res->errors > 100) fatal = true;
}

std::uint64_t engine::max_write(conn& c) const {
  if (spec.nfs_version == 4) return v4_max_write;
  const auto m = nfs_get_writemax(c.nfs);
  return m ? m : (1 << 20);
}

std::uint64_t engine::max_read(conn& c) const {
  const auto m = nfs_get_readmax(c.nfs);
  const std::uint64_t r = m ? m : (1 << 20);
  return spec.nfs_version == 4 ? std::min(r, v4_max_read) : r;
}

bool engine::next_op(conn& c, bool& is_read, std::uint64_t& off, std::uint64_t& len) {
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

void engine::pump(conn& c) {
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

bool engine::pass_ready(conn& c) {
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

bool engine::stop_requested() {
  if (stop_file.empty() || stop_seen) return stop_seen;
  const auto now = clock_type::now();
  if (now - stop_checked < std::chrono::milliseconds(20)) return false;
  stop_checked = now;
  struct stat st {};
  stop_seen = ::stat(stop_file.c_str(), &st) == 0;
  return stop_seen;
}

void engine::issue(conn& c, bool is_read, std::uint64_t off, std::uint64_t len) {
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
      fail(std::string("queueing a GETATTR failed: ") + libnfs_text(nfs_get_error(c.nfs)));
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
      fail(std::string("queueing an RPC failed: ") + libnfs_text(nfs_get_error(c.nfs)));
      delete sub;
      op->failed = true;
      sub_done(op);
    }
  }
}

bool engine::busy() const {
  for (const auto& c : conns)
    if (!c->stopped || c->inflight || c->commit_inflight || c->draining) return true;
  return false;
}

template <typename P>
bool engine::run_loop(P pred, const char* phase_name) {
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
        conns[i]->broken = true;
        fail(std::string("connection lost: ") + libnfs_text(nfs_get_error(conns[i]->nfs)));
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
      for (auto& c : conns) c->broken = true;
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

bool engine::run_phase(phase_result& out, const char* phase_name) {
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
      // the first pass one interval after the start, or pass_first
      c->next_pass = t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(
                              spec.pass_first >= 0 ? spec.pass_first : spec.pass_interval));
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

}  // namespace dcache::bench
