// Minimal NFSv4.1 client: see nfs41_client.hpp. This file holds its
// connection and session: the TCP connection and one ONC RPC call over it
// (RFC 5531 record marking, AUTH_SYS), the session's setup and teardown
// (EXCHANGE_ID, CREATE_SESSION, RECLAIM_COMPLETE; DESTROY_SESSION,
// DESTROY_CLIENTID) and the SEQUENCE that starts each COMPOUND (RFC 8881).
// The XDR is in nfs41_xdr.cpp and nfs41_compound.cpp, the file operations
// over compound() in nfs41_file_ops.cpp.
#include "nfs41_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "nfs41_xdr.hpp"

namespace dcache_e2e::nfs41 {
namespace {

constexpr uint32_t k_nfs_program = 100003;
constexpr uint32_t k_nfs_v4 = 4;
constexpr uint32_t k_proc_compound = 1;
constexpr uint32_t k_auth_sys = 1;
constexpr size_t k_max_reply = 64u << 20;  // refuse replies larger than this

// Session limits we ask for. Ganesha 4.3 echoes the client's fore-channel
// attributes back unchanged (nfs4_op_create_session.c), so these are what
// the session will enforce (it checks ca_maxresponsesize per reply).
constexpr uint32_t k_session_io = (4u << 20) + (64u << 10);
constexpr uint32_t k_header_room = 8192;  // COMPOUND overhead beside the payload
constexpr uint32_t k_max_ops = 32;
// Default READ/WRITE payload: the Linux client's maximum (1 MiB). Ganesha
// 4.3 advertises maxread/maxwrite 64 MiB by default, which would let one
// WRITE cover every test range and never exercise the splitting.
constexpr uint32_t k_default_io = 1u << 20;

std::string errno_text(int e) {
  return std::strerror(e);
}

std::atomic<uint32_t> g_client_serial{0};

}  // namespace

client::client(const std::string& server, uint16_t port, std::chrono::milliseconds timeout)
    : _timeout(timeout) {
  std::random_device rd;
  _next_xid = rd();
  std::ostringstream owner;
  owner << "dcache-e2e-nfs41-" << ::getpid() << "-" << g_client_serial++ << "-" << std::hex << rd();
  _owner = owner.str();

  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, server.c_str(), &sa.sin_addr) != 1)
    fail("nfs41 client: '" + server + "' is not an IPv4 address");
  _fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (_fd < 0) fail("socket: " + errno_text(errno));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  const int one = 1;
  if (::setsockopt(_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    const int e = errno;
    ::close(_fd);
    fail("setsockopt: " + errno_text(e));
  }
  if (::connect(_fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    const int e = errno;
    ::close(_fd);
    fail("connect " + server + ":" + std::to_string(port) + ": " + errno_text(e));
  }
  try {
    setup_session();
  } catch (...) {
    ::close(_fd);
    throw;
  }
}

client::~client() {
  if (_fd < 0) return;
  if (_have_session && !_broken) {
    // Failures are ignored: the server forgets the client at lease
    // expiry anyway.
    try {
      (void)shutdown();
    } catch (const std::exception&) {
    }
  }
  ::close(_fd);
}

client::shutdown_status client::shutdown() {
  if (!_have_session) fail("shutdown: no session (already shut down?)");
  shutdown_status out;
  encoded_ops ds;
  ds.count = 1;
  ds.x.u32(OP_DESTROY_SESSION);
  ds.x.opaque_fixed(_sessionid);
  auto r = decode_compound(call(compound_args(ds)));
  out.destroy_session = r.result.status;
  _have_session = false;
  encoded_ops dc;
  dc.count = 1;
  dc.x.u32(OP_DESTROY_CLIENTID);
  dc.x.u64(_clientid);
  out.destroy_clientid = decode_compound(call(compound_args(dc))).result.status;
  return out;
}

bytes client::call(const xdr_encoder& args) {
  if (_broken) fail("nfs41 client: an earlier transport or sequencing failure made it unusable");
  const uint32_t xid = _next_xid++;
  xdr_encoder msg;
  msg.u32(0);  // record mark, patched below
  msg.u32(xid);
  msg.u32(0);  // CALL
  msg.u32(2);  // RPC version
  msg.u32(k_nfs_program);
  msg.u32(k_nfs_v4);
  msg.u32(k_proc_compound);
  {  // AUTH_SYS credential: root, no supplementary groups
    xdr_encoder cred;
    cred.u32(static_cast<uint32_t>(::time(nullptr)));
    cred.string("dcache-e2e");
    cred.u32(0);  // uid
    cred.u32(0);  // gid
    cred.u32(0);  // gids<16>
    msg.u32(k_auth_sys);
    msg.opaque_var(cred.buffer());
  }
  msg.u32(0);  // verifier AUTH_NONE
  msg.u32(0);
  // One fragment: last-fragment bit + length of everything after the mark.
  bytes out = msg.buffer();
  out.insert(out.end(), args.buffer().begin(), args.buffer().end());
  const uint32_t len = static_cast<uint32_t>(out.size() - 4);
  const uint32_t mark = 0x80000000u | len;
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(mark >> (24 - 8 * i));

  auto broken = [this](const std::string& what) -> nfs41_error {
    _broken = true;
    return nfs41_error(what);
  };
  for (size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::send(_fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw broken(errno == EAGAIN ? "send: timed out after " + std::to_string(_timeout.count()) + " ms"
                                   : "send: " + errno_text(errno));
    }
    sent += static_cast<size_t>(n);
  }

  auto recv_exact = [&](uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t r = ::recv(_fd, p, n, 0);
      if (r == 0) throw broken("recv: server closed the connection (xid " + std::to_string(xid) + ")");
      if (r < 0) {
        if (errno == EINTR) continue;
        throw broken(errno == EAGAIN || errno == EWOULDBLOCK
                         ? "recv: no reply to xid " + std::to_string(xid) + " within " +
                               std::to_string(_timeout.count()) + " ms"
                         : "recv: " + errno_text(errno));
      }
      p += r;
      n -= static_cast<size_t>(r);
    }
  };
  for (;;) {
    bytes record;
    for (bool last = false; !last;) {
      uint8_t hdr[4];
      recv_exact(hdr, 4);
      const uint32_t m =
          (uint32_t{hdr[0]} << 24) | (uint32_t{hdr[1]} << 16) | (uint32_t{hdr[2]} << 8) | hdr[3];
      last = (m & 0x80000000u) != 0;
      const size_t flen = m & 0x7fffffffu;
      if (record.size() + flen > k_max_reply)
        throw broken("reply record larger than " + std::to_string(k_max_reply) + " bytes");
      const size_t at = record.size();
      record.resize(at + flen);
      recv_exact(record.data() + at, flen);
    }
    xdr_decoder d(record);
    const uint32_t rxid = d.u32();
    const uint32_t mtype = d.u32();
    if (mtype != 1 || rxid != xid) continue;  // a stray call or an old reply: not ours
    const uint32_t reply_stat = d.u32();
    if (reply_stat != 0) {
      const uint32_t why = d.u32();
      throw broken(why == 0 ? "RPC denied: RPC version mismatch"
                            : "RPC denied: auth error " + std::to_string(d.u32()));
    }
    (void)d.u32();           // verifier flavor
    d.skip_opaque_var(400);  // verifier body
    const uint32_t accept = d.u32();
    if (accept != 0) {
      static const char* names[] = {"SUCCESS",      "PROG_UNAVAIL", "PROG_MISMATCH",
                                    "PROC_UNAVAIL", "GARBAGE_ARGS", "SYSTEM_ERR"};
      throw broken(std::string("RPC not accepted: ") + (accept < 6 ? names[accept] : "?") + " (" +
                   std::to_string(accept) + ")");
    }
    const size_t body_at = record.size() - d.remaining();
    return bytes(record.begin() + static_cast<long>(body_at), record.end());
  }
}

void client::setup_session() {
  // EXCHANGE_ID (sole op, no SEQUENCE): who we are, no state protection.
  setup_reply exch;
  {
    encoded_ops ops;
    ops.count = 1;
    ops.x.u32(OP_EXCHANGE_ID);
    std::array<uint8_t, 8> verifier{};
    const uint64_t boot = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int i = 0; i < 8; ++i) verifier[i] = static_cast<uint8_t>(boot >> (8 * i));
    ops.x.opaque_fixed(verifier);
    ops.x.string(_owner);
    ops.x.u32(0);  // eia_flags
    ops.x.u32(0);  // SP4_NONE
    ops.x.u32(0);  // no client impl id
    auto r = decode_compound(call(compound_args(ops)));
    if (!r.result.ok()) fail("EXCHANGE_ID failed: " + r.result.describe());
    exch = r.setup;
    _clientid = exch.clientid;
  }
  // CREATE_SESSION (sole op): one fore slot, no back channel.
  {
    encoded_ops ops;
    ops.count = 1;
    ops.x.u32(OP_CREATE_SESSION);
    ops.x.u64(_clientid);
    ops.x.u32(exch.sequenceid);
    ops.x.u32(0);  // flags: no persist, no back channel on this connection
    auto chan = [&](uint32_t size, uint32_t cached, uint32_t max_ops) {
      ops.x.u32(0);  // headerpadsize
      ops.x.u32(size);
      ops.x.u32(size);
      ops.x.u32(cached);
      ops.x.u32(max_ops);
      ops.x.u32(1);  // maxrequests: one slot
      ops.x.u32(0);  // no rdma_ird
    };
    chan(k_session_io, 64u << 10, k_max_ops);
    chan(4096, 4096, 2);
    ops.x.u32(0x40000000);  // cb_program (unused: no back channel)
    ops.x.u32(1);           // one callback_sec_parms4: AUTH_NONE
    ops.x.u32(0);
    auto r = decode_compound(call(compound_args(ops)));
    if (!r.result.ok()) fail("CREATE_SESSION failed: " + r.result.describe());
    _sessionid = r.setup.sessionid;
    _max_request = r.setup.max_request;
    _max_response = r.setup.max_response;
    _have_session = true;
    _slot_seq = 0;  // a new slot's first request carries sequence id 1
  }
  // RECLAIM_COMPLETE: nothing to reclaim; lets OPEN work before grace ends.
  {
    encoded_ops ops;
    ops.count = 1;
    ops.x.u32(OP_RECLAIM_COMPLETE);
    ops.x.boolean(false);
    auto r = sequenced(ops.x, ops.count);
    if (!r.ok()) fail("RECLAIM_COMPLETE failed: " + r.describe());
  }
  // I/O size: what the pseudo root's fs advertises, within the session.
  auto r = compound({op::putrootfh(), op::getattr()});
  if (!r.ok() || !r.ops[1].attrs) fail("GETATTR of the pseudo root failed: " + r.describe());
  const uint32_t session_cap = std::min(_max_request, _max_response) - k_header_room;
  const auto& a = *r.ops[1].attrs;
  _max_io = static_cast<uint32_t>(std::min<uint64_t>(
      {session_cap, k_default_io, a.maxread.value_or(k_default_io), a.maxwrite.value_or(k_default_io)}));
}

compound_result client::sequenced(const xdr_encoder& ops, uint32_t n_ops) {
  // NFS4ERR_DELAY on SEQUENCE means "slot busy, retry the same sequence
  // id"; anything else on SEQUENCE leaves us not knowing the slot state.
  for (int attempt = 0;; ++attempt) {
    const uint32_t seq = _slot_seq + 1;
    encoded_ops all;
    all.count = n_ops + 1;
    all.x.u32(OP_SEQUENCE);
    all.x.opaque_fixed(_sessionid);
    all.x.u32(seq);
    all.x.u32(0);          // slot
    all.x.u32(0);          // highest slot in use
    all.x.boolean(false);  // do not cache the reply
    all.x.opaque_fixed(ops.buffer());
    auto r = decode_compound(call(compound_args(all)));
    if (r.result.ops.empty() || r.result.ops[0].num != OP_SEQUENCE) {
      _broken = true;
      fail("COMPOUND reply does not start with SEQUENCE (status " + status_name(r.result.status) + ")");
    }
    const uint32_t seq_status = r.result.ops[0].status;
    if (seq_status == NFS4ERR_DELAY && attempt < 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (seq_status != NFS4_OK) {
      _broken = true;
      fail("SEQUENCE (slot 0, seqid " + std::to_string(seq) + ") failed: " + status_name(seq_status));
    }
    _slot_seq = seq;
    r.result.ops.erase(r.result.ops.begin());
    return std::move(r.result);
  }
}

compound_result client::compound(std::vector<op> ops) {
  if (!_have_session) fail("compound: the session was destroyed (shutdown)");
  xdr_encoder x;
  for (const auto& o : ops) encode_op(x, o, _clientid, _owner);
  return sequenced(x, static_cast<uint32_t>(ops.size()));
}

void client::set_max_io(uint32_t n) {
  if (n == 0) fail("set_max_io(0)");
  _max_io = std::min(n, std::min(_max_request, _max_response) - k_header_room);
}

}  // namespace dcache_e2e::nfs41
