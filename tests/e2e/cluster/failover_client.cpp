// dcache_e2e_failover: an NFSv3 client that writes a stream of records
// through one server address while that address moves to another head, and
// reads back afterwards every byte a server acknowledged.
//
//   dcache_e2e_failover write server=IP export=/shared file=/dir/NAME out=DIR name=NAME
//                             [stable=file_sync|unstable] [record=BYTES] [interval_ms=MS]
//                             [commit_every=N] [seed=N] [stall_s=S] [rpc_timeout_s=S]
//     Creates the file, then writes record k (record bytes at offset
//     k * record, the data a function of seed and offset) until DIR/stop
//     exists, one request in flight at a time, each a raw WRITE3:
//       file_sync: stable FILE_SYNC; a reply that says FILE_SYNC
//                  acknowledges the record;
//       unstable:  stable UNSTABLE, and a COMMIT3 every commit_every
//                  records (and at the end): a record is acknowledged when
//                  a COMMIT reply carries the write verifier its WRITE reply
//                  carried. One with another verifier (the server changed:
//                  the address moved to another head) is written again and
//                  committed again, as an NFS client must.
//     libnfs reconnects to the address for ever and sends the request in
//     flight again (nfs_client's reconnect = -1); a request that times out
//     (rpc_timeout_s) or meets NFS3ERR_JUKEBOX is sent again. These are the
//     transient retries; any other error ends the run (exit 1), as does
//     stall_s seconds without an acknowledgement.
//     Files (times in ms since the epoch):
//       DIR/NAME.acked   "OFFSET LENGTH" per acknowledged extent, in order
//       DIR/NAME.status  key=value ... after every record (rewritten whole)
//       DIR/NAME.events  one line per connection change, retry, verifier
//                        change and error
//     and the same summary as .status on standard output at the end.
//
//   dcache_e2e_failover verify server=IP export=/shared file=/dir/NAME acked=DIR/NAME.acked
//                              [seed=N]
//     Reads back every acknowledged extent through a fresh mount and
//     compares it with the data written. Prints
//       acknowledged BYTES bytes (N extents), read back BYTES bytes identical
//     exit 0; or the first difference, exit 1.
//
// Exit 2: usage.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nfs_client.hpp"

extern "C" {
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>
}

namespace {

using dcache::e2e::fill_pattern;
using dcache::e2e::nfs_client;
using dcache::e2e::nfs_version;

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// key=value arguments
struct args {
  std::map<std::string, std::string> kv;
  std::string get(const std::string& k, const std::string& def = "") const {
    const auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  std::uint64_t num(const std::string& k, std::uint64_t def) const {
    const auto it = kv.find(k);
    return it == kv.end() ? def : std::strtoull(it->second.c_str(), nullptr, 0);
  }
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "dcache_e2e_failover: %s\n"
               "usage: dcache_e2e_failover write server=IP export=PATH file=PATH out=DIR name=NAME "
               "[stable=file_sync|unstable] [record=BYTES] [interval_ms=MS] [commit_every=N] [seed=N] "
               "[stall_s=S] [rpc_timeout_s=S]\n"
               "       dcache_e2e_failover verify server=IP export=PATH file=PATH acked=FILE [seed=N]\n",
               why);
  std::exit(2);
}

// libnfs 4.0 keeps struct nfs_fh (what nfs_get_fh returns) private; its
// layout there is { int len; char *val; } (as tests/e2e/modes/support.cpp).
struct libnfs_fh_layout {
  int len;
  char* val;
};

// One RPC's outcome. Heap-held and owned by the caller until its callback
// ran: libnfs may still call back after a reconnect, never after a timeout
// or an error reply (both call back), so a request is waited for to the end.
struct rpc_result {
  bool done = false;
  int rpc_status = RPC_STATUS_ERROR;
  int nfs_status = -1;
  std::uint32_t count = 0;
  int committed = -1;
  std::uint64_t verifier = 0;
  std::string error;
};

std::uint64_t verf_of(const char* v) {
  std::uint64_t x;
  std::memcpy(&x, v, sizeof x);
  return x;
}

void write_cb(struct rpc_context* /*rpc*/, int status, void* data, void* private_data) {
  auto* r = static_cast<rpc_result*>(private_data);
  r->done = true;
  r->rpc_status = status;
  if (status == RPC_STATUS_SUCCESS) {
    const auto* res = static_cast<const WRITE3res*>(data);
    r->nfs_status = res->status;
    if (res->status == NFS3_OK) {
      r->count = res->WRITE3res_u.resok.count;
      r->committed = res->WRITE3res_u.resok.committed;
      r->verifier = verf_of(res->WRITE3res_u.resok.verf);
    }
  } else if (data != nullptr) {
    r->error = static_cast<const char*>(data);
  }
}

void commit_cb(struct rpc_context* /*rpc*/, int status, void* data, void* private_data) {
  auto* r = static_cast<rpc_result*>(private_data);
  r->done = true;
  r->rpc_status = status;
  if (status == RPC_STATUS_SUCCESS) {
    const auto* res = static_cast<const COMMIT3res*>(data);
    r->nfs_status = res->status;
    if (res->status == NFS3_OK) r->verifier = verf_of(res->COMMIT3res_u.resok.verf);
  } else if (data != nullptr) {
    r->error = static_cast<const char*>(data);
  }
}

class writer {
 public:
  writer(const args& a)
      : _server(a.get("server")),
        _export(a.get("export")),
        _file(a.get("file")),
        _out(a.get("out")),
        _name(a.get("name")),
        _unstable(a.get("stable", "file_sync") == "unstable"),
        _record(a.num("record", 65536)),
        _interval_ms(a.num("interval_ms", 10)),
        _commit_every(std::max<std::uint64_t>(1, a.num("commit_every", 8))),
        _seed(a.num("seed", 1)),
        _stall_ms(a.num("stall_s", 60) * 1000),
        _rpc_timeout_ms(static_cast<int>(a.num("rpc_timeout_s", 20) * 1000)) {
    if (_server.empty() || _export.empty() || _file.empty() || _out.empty() || _name.empty())
      usage("write needs server=, export=, file=, out= and name=");
    const std::string st = a.get("stable", "file_sync");
    if (st != "file_sync" && st != "unstable") usage("stable= is file_sync or unstable");
    if (_record == 0 || _record > (1u << 20)) usage("record= is 1 to 1048576 bytes");
  }

  int run();

 private:
  // sends one request (made by start(r)) and waits for its callback
  template <typename Start>
  void call(rpc_result& r, Start start);
  // one WRITE3 of [off, off+len) until it is answered; false on a fatal error
  bool write_one(std::uint64_t off, std::uint64_t len, bool& file_sync, std::uint64_t& verf);
  // COMMIT3 until answered; false on a fatal error
  bool commit(std::uint64_t& verf);
  // commits every pending extent, rewriting those whose verifier changed
  bool settle();
  void acked(std::uint64_t off, std::uint64_t len);
  void event(const std::string& what);
  void note_connection();
  void status(bool final = false);
  bool stalled() const { return now_ms() - _last_progress_ms > _stall_ms; }
  bool fatal(const std::string& what);

  std::string _server, _export, _file, _out, _name;
  bool _unstable;
  std::uint64_t _record, _interval_ms, _commit_every, _seed, _stall_ms;
  int _rpc_timeout_ms;

  struct rpc_context* _rpc = nullptr;
  WRITE3args _wargs{};
  libnfs_fh_layout _fh{};
  std::string _conn;  // "local port -> peer" of the current connection

  struct extent {
    std::uint64_t off, len, verf;
  };
  std::vector<extent> _pending;  // written UNSTABLE, not yet committed
  std::FILE* _acked = nullptr;
  std::FILE* _events = nullptr;
  std::uint64_t _acked_bytes = 0, _acked_extents = 0, _records = 0, _retries = 0, _reconnects = 0,
                _rewritten = 0, _verifier_changes = 0, _commits = 0, _errors = 0;
  std::uint64_t _last_ack_ms = 0, _last_progress_ms = 0, _first_verf = 0, _last_verf = 0;
  std::uint64_t _max_gap_ms = 0, _gap_from_ms = 0;
};

void writer::event(const std::string& what) {
  std::fprintf(_events, "%llu %s\n", static_cast<unsigned long long>(now_ms()), what.c_str());
  std::fflush(_events);
}

bool writer::fatal(const std::string& what) {
  ++_errors;
  event("error " + what);
  std::fprintf(stderr, "dcache_e2e_failover: %s: %s\n", _name.c_str(), what.c_str());
  return false;
}

// The connection libnfs uses now, as "local-port>peer:port": a reconnect
// makes a new socket (dup2'ed onto the same descriptor) from another port.
void writer::note_connection() {
  const int fd = rpc_get_fd(_rpc);
  sockaddr_in local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
    return;
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
  const std::string conn =
      std::to_string(ntohs(local.sin_port)) + ">" + ip + ":" + std::to_string(ntohs(peer.sin_port));
  if (conn == _conn) return;
  if (!_conn.empty()) {
    ++_reconnects;
    event("reconnected " + _conn + " -> " + conn);
  }
  _conn = conn;
}

template <typename Start>
void writer::call(rpc_result& r, Start start) {
  if (start(r) != 0) {
    // not queued: nothing will call back
    r.done = true;
    r.rpc_status = RPC_STATUS_ERROR;
    r.error = std::string("could not queue the request: ") + rpc_get_error(_rpc);
    return;
  }
  const std::uint64_t give_up = now_ms() + _stall_ms + 60'000;
  while (!r.done) {
    struct pollfd pfd {};
    pfd.fd = rpc_get_fd(_rpc);
    pfd.events = static_cast<short>(rpc_which_events(_rpc));
    if (::poll(&pfd, 1, 100) < 0 && errno != EINTR) {
      std::perror("poll");
      std::exit(1);
    }
    // with autoreconnect, a broken connection is requeued here, not failed
    if (rpc_service(_rpc, pfd.revents) < 0) event(std::string("rpc_service: ") + rpc_get_error(_rpc));
    if (now_ms() > give_up) {
      // libnfs's own timeout did not fire: the request cannot be abandoned
      // safely (its callback holds r), so the run ends here
      std::fprintf(stderr, "dcache_e2e_failover: %s: no answer and no timeout from libnfs\n", _name.c_str());
      std::exit(1);
    }
  }
  note_connection();
}

bool writer::write_one(std::uint64_t off, std::uint64_t len, bool& file_sync, std::uint64_t& verf) {
  std::vector<std::byte> data(len);
  fill_pattern(data, _seed, off);
  _wargs.offset = off;
  _wargs.count = static_cast<count3>(len);
  _wargs.stable = _unstable ? UNSTABLE : FILE_SYNC;
  _wargs.data.data_len = static_cast<u_int>(len);
  _wargs.data.data_val = reinterpret_cast<char*>(data.data());
  for (;;) {
    rpc_result r;
    call(r, [&](rpc_result& rr) { return rpc_nfs3_write_async(_rpc, write_cb, &_wargs, &rr); });
    if (r.rpc_status == RPC_STATUS_SUCCESS && r.nfs_status == NFS3_OK) {
      if (r.count != len)
        return fatal("short WRITE3 at " + std::to_string(off) + ": " + std::to_string(r.count));
      file_sync = r.committed == FILE_SYNC;
      verf = r.verifier;
      if (_first_verf == 0) _first_verf = verf;
      return true;
    }
    if (r.rpc_status == RPC_STATUS_SUCCESS && r.nfs_status != NFS3ERR_JUKEBOX)
      return fatal("WRITE3 at " + std::to_string(off) + ": nfsstat3 " + std::to_string(r.nfs_status));
    ++_retries;
    event("retry WRITE3 at " + std::to_string(off) + ": " +
          (r.rpc_status == RPC_STATUS_SUCCESS
               ? std::string("NFS3ERR_JUKEBOX")
               : "rpc status " + std::to_string(r.rpc_status) + " " + r.error));
    if (stalled()) return fatal("no acknowledgement for " + std::to_string(_stall_ms / 1000) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool writer::commit(std::uint64_t& verf) {
  COMMIT3args cargs{};
  cargs.file.data.data_len = static_cast<u_int>(_fh.len);
  cargs.file.data.data_val = _fh.val;
  for (;;) {
    rpc_result r;
    call(r, [&](rpc_result& rr) { return rpc_nfs3_commit_async(_rpc, commit_cb, &cargs, &rr); });
    ++_commits;
    if (r.rpc_status == RPC_STATUS_SUCCESS && r.nfs_status == NFS3_OK) {
      verf = r.verifier;
      return true;
    }
    if (r.rpc_status == RPC_STATUS_SUCCESS && r.nfs_status != NFS3ERR_JUKEBOX)
      return fatal("COMMIT3: nfsstat3 " + std::to_string(r.nfs_status));
    ++_retries;
    event("retry COMMIT3: " + (r.rpc_status == RPC_STATUS_SUCCESS
                                   ? std::string("NFS3ERR_JUKEBOX")
                                   : "rpc status " + std::to_string(r.rpc_status) + " " + r.error));
    if (stalled()) return fatal("no acknowledgement for " + std::to_string(_stall_ms / 1000) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool writer::settle() {
  while (!_pending.empty()) {
    std::uint64_t verf = 0;
    if (!commit(verf)) return false;
    if (_last_verf != 0 && verf != _last_verf) {
      ++_verifier_changes;
      char buf[96];
      std::snprintf(buf, sizeof buf, "verifier %016llx -> %016llx",
                    static_cast<unsigned long long>(_last_verf), static_cast<unsigned long long>(verf));
      event(buf);
    }
    _last_verf = verf;
    std::vector<extent> again;
    for (const extent& e : _pending) {
      if (e.verf == verf) {
        acked(e.off, e.len);
        continue;
      }
      // written to a server that is not the one that committed: its data
      // may be lost with that server, so it is written again
      ++_rewritten;
      event("rewrite " + std::to_string(e.off) + " " + std::to_string(e.len) +
            " (written under another verifier)");
      bool file_sync = false;
      std::uint64_t v = 0;
      if (!write_one(e.off, e.len, file_sync, v)) return false;
      if (file_sync)
        acked(e.off, e.len);
      else
        again.push_back({e.off, e.len, v});
    }
    _pending.swap(again);
  }
  return true;
}

void writer::acked(std::uint64_t off, std::uint64_t len) {
  std::fprintf(_acked, "%llu %llu\n", static_cast<unsigned long long>(off),
               static_cast<unsigned long long>(len));
  std::fflush(_acked);
  const std::uint64_t t = now_ms();
  if (_last_ack_ms != 0 && t - _last_ack_ms > _max_gap_ms) {
    _max_gap_ms = t - _last_ack_ms;
    _gap_from_ms = _last_ack_ms;
  }
  _last_ack_ms = _last_progress_ms = t;
  _acked_bytes += len;
  ++_acked_extents;
}

void writer::status(bool final) {
  std::ostringstream s;
  s << "acked_bytes=" << _acked_bytes << " acked_extents=" << _acked_extents << " records=" << _records
    << " pending=" << _pending.size() << " commits=" << _commits << " retries=" << _retries
    << " reconnects=" << _reconnects << " verifier_changes=" << _verifier_changes
    << " rewritten=" << _rewritten << " errors=" << _errors << " last_ack_ms=" << _last_ack_ms
    << " max_gap_ms=" << _max_gap_ms << " gap_from_ms=" << _gap_from_ms
    << " connection=" << (_conn.empty() ? "-" : _conn) << " done=" << (final ? 1 : 0) << "\n";
  const std::string path = _out + "/" + _name + ".status";
  {
    std::ofstream f(path + ".new", std::ios::trunc);
    f << s.str();
  }
  std::rename((path + ".new").c_str(), path.c_str());
  if (final) std::fputs(s.str().c_str(), stdout);
}

int writer::run() {
  const std::string base = _out + "/" + _name;
  _acked = std::fopen((base + ".acked").c_str(), "w");
  _events = std::fopen((base + ".events").c_str(), "w");
  if (_acked == nullptr || _events == nullptr) {
    std::perror(base.c_str());
    return 1;
  }
  // libnfs's timeout is what bounds a request (see call()); reconnect for ever
  nfs_client client(_server, _export, nfs_version::v3, _rpc_timeout_ms, -1);
  if (client.status() != 0) {
    fatal(client.last_error());
    status(true);
    return 1;
  }
  _rpc = nfs_get_rpc_context(client.raw());
  struct nfsfh* fh = nullptr;
  if (nfs_creat(client.raw(), _file.c_str(), 0644, &fh) != 0) {
    fatal("create " + _file + ": " + client.last_error());
    status(true);
    return 1;
  }
  std::memcpy(&_fh, nfs_get_fh(fh), sizeof _fh);
  _wargs.file.data.data_len = static_cast<u_int>(_fh.len);
  _wargs.file.data.data_val = _fh.val;
  note_connection();
  event("connected " + _conn + (_unstable ? " UNSTABLE+COMMIT" : " FILE_SYNC"));
  _last_progress_ms = now_ms();
  const std::string stop = _out + "/stop";
  bool ok = true;
  for (std::uint64_t k = 0; ok && ::access(stop.c_str(), F_OK) != 0; ++k) {
    const std::uint64_t off = k * _record;
    bool file_sync = false;
    std::uint64_t verf = 0;
    ok = write_one(off, _record, file_sync, verf);
    if (!ok) break;
    ++_records;
    if (file_sync)
      acked(off, _record);
    else
      _pending.push_back({off, _record, verf});
    if (!_unstable && !file_sync) event("FILE_SYNC WRITE3 at " + std::to_string(off) + " answered UNSTABLE");
    if (_pending.size() >= _commit_every) ok = settle();
    status();
    if (_interval_ms != 0) std::this_thread::sleep_for(std::chrono::milliseconds(_interval_ms));
  }
  if (ok) ok = settle();
  (void)nfs_close(client.raw(), fh);
  status(true);
  std::fclose(_acked);
  std::fclose(_events);
  return ok && _errors == 0 ? 0 : 1;
}

int verify(const args& a) {
  const std::string server = a.get("server"), exp = a.get("export"), file = a.get("file"),
                    acked = a.get("acked");
  if (server.empty() || exp.empty() || file.empty() || acked.empty())
    usage("verify needs server=, export=, file= and acked=");
  const std::uint64_t seed = a.num("seed", 1);
  std::ifstream in(acked);
  if (!in) {
    std::fprintf(stderr, "dcache_e2e_failover: cannot read %s\n", acked.c_str());
    return 1;
  }
  // merged extents: offset -> end
  std::map<std::uint64_t, std::uint64_t> ext;
  std::uint64_t n = 0, off = 0, len = 0;
  while (in >> off >> len) {
    ++n;
    auto it = ext.upper_bound(off);
    if (it != ext.begin() && std::prev(it)->second >= off) {
      --it;
      it->second = std::max(it->second, off + len);
    } else {
      it = ext.emplace(off, off + len).first;
    }
    for (auto nx = std::next(it); nx != ext.end() && nx->first <= it->second; nx = ext.erase(nx))
      it->second = std::max(it->second, nx->second);
  }
  std::uint64_t acked_bytes = 0;
  for (const auto& [b, e] : ext) acked_bytes += e - b;
  nfs_client client(server, exp, nfs_version::v3);
  if (client.status() != 0) {
    std::fprintf(stderr, "dcache_e2e_failover: %s\n", client.last_error().c_str());
    return 1;
  }
  dcache::e2e::nfs_file f;
  if (const int rc = client.open(file, O_RDONLY, f); rc != 0) {
    std::fprintf(stderr, "dcache_e2e_failover: open %s: %s\n", file.c_str(), client.last_error().c_str());
    return 1;
  }
  std::uint64_t same = 0;
  constexpr std::uint64_t chunk = 1 << 20;
  std::vector<std::byte> got(chunk), want(chunk);
  for (const auto& [b, e] : ext) {
    for (std::uint64_t o = b; o < e; o += chunk) {
      const std::uint64_t l = std::min(chunk, e - o);
      const long long r = f.pread_full(o, std::span(got.data(), l));
      if (r < 0) {
        std::fprintf(stderr, "dcache_e2e_failover: READ at %llu: %s\n", static_cast<unsigned long long>(o),
                     client.last_error().c_str());
        return 1;
      }
      fill_pattern(std::span(want.data(), l), seed, o);
      const long long d = dcache::e2e::first_difference(std::span(got.data(), static_cast<std::size_t>(r)),
                                                        std::span(want.data(), l));
      if (d >= 0) {
        std::printf(
            "acknowledged %llu bytes (%llu extents), read back %llu bytes identical; "
            "first difference at offset %llu (read %lld of %llu bytes there)\n",
            static_cast<unsigned long long>(acked_bytes), static_cast<unsigned long long>(n),
            static_cast<unsigned long long>(same + static_cast<std::uint64_t>(d)),
            static_cast<unsigned long long>(o + static_cast<std::uint64_t>(d)), r,
            static_cast<unsigned long long>(l));
        return 1;
      }
      same += l;
    }
  }
  std::printf("acknowledged %llu bytes (%llu extents), read back %llu bytes identical\n",
              static_cast<unsigned long long>(acked_bytes), static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(same));
  return same == acked_bytes ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage("no mode");
  args a;
  for (int i = 2; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (eq == nullptr) usage(argv[i]);
    a.kv[std::string(argv[i], static_cast<std::size_t>(eq - argv[i]))] = eq + 1;
  }
  const std::string mode = argv[1];
  if (mode == "write") return writer(a).run();
  if (mode == "verify") return verify(a);
  usage("mode is write or verify");
}
