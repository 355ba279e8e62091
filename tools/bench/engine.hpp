// dcache-bench's engine: one nfs_context (one TCP connection) per job, all
// driven by one poll() loop; each job keeps `iodepth` operations in flight.
// NFSv3 WRITEs go through the raw rpc_nfs3_write_async because libnfs's
// high-level nfs_pwrite_async hides the reply's `committed` field, and
// COMMIT is sent the Linux client's way: at close/fsync, only when some
// WRITE was answered UNSTABLE (commit_tracker.hpp). engine.cpp issues the
// operations and runs the loop, engine_replies.cpp takes the replies.
//
// Thread-safety: none. One engine per process (engine::self), driven by
// one thread; libnfs calls the callbacks on that thread, inside
// nfs_service. A conn owns its nfs_context and open file. An op_slot in
// flight belongs to its RPCs (its last reply gives it back to the conn's
// free_slots, or frees it once the engine is closing); a sub_rpc belongs
// to its callback, which deletes it. Every RPC still queued when a conn
// goes is cancelled, its callback called with the engine closing.
#pragma once

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "commit_tracker.hpp"
#include "job.hpp"
#include "phase_result.hpp"

namespace dcache::bench {

using clock_type = std::chrono::steady_clock;

// libnfs's error text, never NULL: rpc_get_error() and nfs_get_error() are
// NULL on a context that has had no error (a WRITE cancelled when its
// context is destroyed gets neither data nor an error string), and a
// callback's data may be NULL on error.
inline const char* libnfs_text(const char* text) {
  return text != nullptr && *text != '\0' ? text : "no error text from libnfs";
}

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
  bool broken = false;   // failed, or left with RPCs in flight: no CLOSE waited for
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
  conn() = default;
  conn(const conn&) = delete;
  conn& operator=(const conn&) = delete;
  // The engine closes its connections (engine::close_all) before one goes:
  // a CLOSE waited for only on a healthy connection with nothing in
  // flight, then every RPC still queued is cancelled (its callback called,
  // with the engine closing).
  ~conn();
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
  // Closing its connections: callbacks give back what their RPC held and
  // touch nothing else (res may be gone, no new operation is issued).
  bool closing = false;
  // last time a reply arrived: a server that stops answering (e.g. stalled
  // in a too-small memory cgroup) fails the run instead of hanging it
  clock_type::time_point last_reply;
  static constexpr auto stall_limit = std::chrono::seconds(60);
  std::string stop_file;  // --stop-file
  bool stop_seen = false;
  clock_type::time_point stop_checked{};

  engine() = default;
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  ~engine() { close_all(); }

  // Closes every connection; callbacks of RPCs still in flight then run
  // (cancelled) with closing set. Safe to call more than once.
  void close_all();

  // an error of this phase: counted, the first one kept; more than 100 stop the run (fatal)
  void fail(const std::string& what);

  // the largest WRITE and READ of one RPC on c
  std::uint64_t max_write(conn& c) const;
  std::uint64_t max_read(conn& c) const;

  // Decides the next operation of c; false when the job is done.
  bool next_op(conn& c, bool& is_read, std::uint64_t& off, std::uint64_t& len);

  void pump(conn& c);

  // pass_interval: may c issue now? A pass is io_budget bytes; when they
  // are issued and answered the pass is over, and the job waits for the
  // next pass's start (pass_interval after the previous start, at once if
  // that is past).
  bool pass_ready(conn& c);

  // --stop-file: looked for at most every 20 ms
  bool stop_requested();

  void issue(conn& c, bool is_read, std::uint64_t off, std::uint64_t len);

  static engine* self;  // the one engine of this process (callbacks carry only sub_rpc)

  void sub_done(op_slot* op);
  // closing: the RPC's share of op given back, op freed with its last one
  static void abandon(op_slot* op);

  // libnfs's callbacks; priv is the sub_rpc
  static void on_getattr(int err, nfs_context* nfs, void* data, void* priv);
  static void on_read(int err, nfs_context* nfs, void* data, void* priv);
  static void on_write3(rpc_context* rpc, int status, void* data, void* priv);
  static void on_write4(int err, nfs_context* nfs, void* data, void* priv);

  // fsync point: once no WRITE of c is in flight, COMMIT if any was UNSTABLE
  void maybe_fsync(conn& c);

  void send_commit(conn& c);

  void commit_done(conn& c);

  // libnfs's callbacks; priv is the conn
  static void on_commit3(rpc_context* rpc, int status, void* data, void* priv);
  static void on_commit4(int err, nfs_context* nfs, void* data, void* priv);

  bool busy() const;

  // Drives every connection until pred() is false. Returns false on a
  // transport failure. Defined in engine.cpp, where its one caller is.
  template <typename P>
  bool run_loop(P pred, const char* phase_name);

  // Runs one phase: all jobs until done, then COMMIT at close as needed.
  bool run_phase(phase_result& out, const char* phase_name);
};

}  // namespace dcache::bench
