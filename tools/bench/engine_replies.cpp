// The engine's replies: each RPC's callback (a READ checked against the
// pattern, a WRITE's stability handed to the COMMIT tracker), an
// operation's end once its last RPC is answered (counted, the job paced,
// its next operation issued), and the COMMIT at an fsync point.
#include "engine.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "pattern.hpp"

namespace dcache::bench {
namespace {

// What a failed libnfs callback says. libnfs 4.0 passes its message as the
// callback's data, except that a chunked READ's -EFAULT may carry the
// undecoded reply (after setting the context's message for an NFS error):
// then the context's message. Never NULL (libnfs_text).
std::string rpc_error(int err, void* data, nfs_context* nfs) {
  const char* own = nfs_get_error(nfs);
  if (err == -EFAULT && own != nullptr && *own != '\0') return own;
  return libnfs_text(data != nullptr ? static_cast<const char*>(data) : own);
}

}  // namespace

void engine::abandon(op_slot* op) {
  if (--op->pending == 0) delete op;
}

void engine::sub_done(op_slot* op) {
  if (closing) {
    abandon(op);
    return;
  }
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
    c.not_before = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                           std::chrono::duration<double, std::milli>(spec.probe_interval_ms));
  if (spec.thinktime_us > 0)
    c.not_before = std::max(
        c.not_before, clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                              std::chrono::duration<double, std::micro>(spec.thinktime_us)));
  --c.inflight;
  c.free_slots.emplace_back(op);
  if (c.draining)
    maybe_fsync(c);
  else
    pump(c);
}

void engine::on_getattr(int err, nfs_context* nfs, void* data, void* priv) {
  auto* sub = static_cast<sub_rpc*>(priv);
  engine& e = *self;
  op_slot* op = sub->op;
  if (e.closing) {  // cancelled, or answered, as its conn goes: count nothing
    delete sub;
    e.sub_done(op);
    return;
  }
  if (err < 0) {
    e.fail(std::string("GETATTR failed: ") + rpc_error(err, data, nfs));
    op->failed = true;
  }
  delete sub;
  e.sub_done(op);
}

void engine::on_read(int err, nfs_context* nfs, void* data, void* priv) {
  auto* sub = static_cast<sub_rpc*>(priv);
  engine& e = *self;
  op_slot* op = sub->op;
  if (e.closing) {  // cancelled, or answered, as its conn goes: count nothing
    delete sub;
    e.sub_done(op);
    return;
  }
  if (err < 0) {
    e.fail(std::string("READ failed: ") + rpc_error(err, data, nfs));
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

void engine::on_write3(rpc_context* rpc, int status, void* data, void* priv) {
  auto* sub = static_cast<sub_rpc*>(priv);
  engine& e = *self;
  op_slot* op = sub->op;
  if (e.closing) {  // cancelled, or answered, as its conn goes: count nothing
    delete sub;
    e.sub_done(op);
    return;
  }
  if (status != RPC_STATUS_SUCCESS) {
    e.fail(std::string("WRITE RPC failed: ") + libnfs_text(status == RPC_STATUS_ERROR && data
                                                               ? static_cast<const char*>(data)
                                                               : rpc_get_error(rpc)));
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

void engine::on_write4(int err, nfs_context* nfs, void* data, void* priv) {
  auto* sub = static_cast<sub_rpc*>(priv);
  engine& e = *self;
  op_slot* op = sub->op;
  if (e.closing) {  // cancelled, or answered, as its conn goes: count nothing
    delete sub;
    e.sub_done(op);
    return;
  }
  if (err < 0) {
    e.fail(std::string("WRITE failed: ") + rpc_error(err, data, nfs));
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

void engine::maybe_fsync(conn& c) {
  if (c.inflight != 0 || c.commit_inflight) return;
  c.writes_since_fsync = 0;
  if (!c.tracker.flush_point()) {
    c.draining = false;
    pump(c);
    return;
  }
  send_commit(c);
}

void engine::send_commit(conn& c) {
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
    fail(std::string("queueing COMMIT failed: ") + libnfs_text(nfs_get_error(c.nfs)));
    c.commit_inflight = false;
    c.draining = false;
  }
}

void engine::commit_done(conn& c) {
  last_reply = clock_type::now();
  res->commit_lat.add(std::chrono::duration<double, std::micro>(last_reply - c.commit_sent).count());
  c.commit_inflight = false;
  if (c.draining) {
    c.draining = false;
    pump(c);
  }
}

void engine::on_commit3(rpc_context* rpc, int status, void* data, void* priv) {
  auto& c = *static_cast<conn*>(priv);
  engine& e = *self;
  if (e.closing) return;  // the conn is going: nothing to count
  if (status != RPC_STATUS_SUCCESS) {
    e.fail(std::string("COMMIT RPC failed: ") + libnfs_text(status == RPC_STATUS_ERROR && data
                                                                ? static_cast<const char*>(data)
                                                                : rpc_get_error(rpc)));
  } else {
    auto* r = static_cast<COMMIT3res*>(data);
    if (r->status != NFS3_OK) e.fail("COMMIT answered nfsstat3 " + std::to_string(r->status));
    commit_tracker::verifier v;
    std::memcpy(v.data(), r->COMMIT3res_u.resok.verf, v.size());
    c.tracker.on_commit_reply(r->status == NFS3_OK ? &v : nullptr);
  }
  e.commit_done(c);
}

void engine::on_commit4(int err, nfs_context* nfs, void* data, void* priv) {
  auto& c = *static_cast<conn*>(priv);
  engine& e = *self;
  if (e.closing) return;  // the conn is going: nothing to count
  if (err < 0)
    e.fail(std::string("COMMIT failed: ") + rpc_error(err, data, nfs));
  else
    c.tracker.on_commit_reply();
  e.commit_done(c);
}

}  // namespace dcache::bench
