// Minimal NFSv4.1 client: see nfs41_client.hpp. Wire formats follow RFC 5531
// (ONC RPC), RFC 4506 (XDR) and RFC 8881 (NFSv4.1); section numbers below
// refer to RFC 8881.
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

namespace dcache_e2e::nfs41 {
namespace {

constexpr uint32_t k_nfs_program = 100003;
constexpr uint32_t k_nfs_v4 = 4;
constexpr uint32_t k_proc_compound = 1;
constexpr uint32_t k_auth_sys = 1;
constexpr size_t k_max_fh = 128;           // NFS4_FHSIZE
constexpr size_t k_max_name = 4096;        // generous bound for names/owners
constexpr size_t k_max_reply = 64u << 20;  // refuse replies larger than this
constexpr size_t k_max_data = 16u << 20;   // READ payload bound

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

[[noreturn]] void fail(const std::string& what) {
  throw nfs41_error(what);
}

void encode_bitmap(xdr_encoder& x, std::span<const uint32_t> attrs) {
  uint32_t words[4] = {};
  uint32_t n = 0;
  for (uint32_t a : attrs) {
    words[a / 32] |= 1u << (a % 32);
    n = std::max(n, a / 32 + 1);
  }
  x.u32(n);
  for (uint32_t i = 0; i < n; ++i) x.u32(words[i]);
}

std::vector<uint32_t> decode_bitmap(xdr_decoder& d) {
  const uint32_t n = d.u32();
  if (n > 8) fail("bitmap4 with " + std::to_string(n) + " words");
  std::vector<uint32_t> w(n);
  for (auto& v : w) v = d.u32();
  return w;
}

void encode_stateid(xdr_encoder& x, const stateid4& s) {
  x.u32(s.seqid);
  x.opaque_fixed(s.other);
}

stateid4 decode_stateid(xdr_decoder& d) {
  stateid4 s;
  s.seqid = d.u32();
  const bytes o = d.opaque_fixed(12);
  std::copy(o.begin(), o.end(), s.other.begin());
  return s;
}

std::array<uint8_t, 8> decode_verifier(xdr_decoder& d) {
  std::array<uint8_t, 8> v{};
  const bytes b = d.opaque_fixed(8);
  std::copy(b.begin(), b.end(), v.begin());
  return v;
}

// fattr4: bitmap + opaque attribute values in ascending bit order (5.2).
attributes decode_fattr(xdr_decoder& d) {
  const auto mask = decode_bitmap(d);
  const bytes list = d.opaque_var(1u << 20);
  xdr_decoder v(list);
  attributes a;
  for (uint32_t w = 0; w < mask.size(); ++w) {
    for (uint32_t b = 0; b < 32; ++b) {
      if ((mask[w] & (1u << b)) == 0) continue;
      switch (const uint32_t attr = w * 32 + b) {
        case 1:
          a.type = static_cast<file_type>(v.u32());
          break;
        case 3:
          a.change = v.u64();
          break;
        case 4:
          a.size = v.u64();
          break;
        case 8: {
          const uint64_t major = v.u64();
          a.fsid = std::make_pair(major, v.u64());
          break;
        }
        case 20:
          a.fileid = v.u64();
          break;
        case 30:
          a.maxread = v.u64();
          break;
        case 31:
          a.maxwrite = v.u64();
          break;
        case 33:
          a.mode = v.u32();
          break;
        default:
          fail("fattr4: server returned attribute " + std::to_string(attr) +
               ", which this client cannot decode (it did not ask for it)");
      }
    }
  }
  if (v.remaining() != 0)
    fail("fattr4: " + std::to_string(v.remaining()) + " bytes left after the attributes");
  return a;
}

void skip_change_info(xdr_decoder& d) {
  (void)d.boolean();
  (void)d.u64();
  (void)d.u64();
}

void skip_nfsace(xdr_decoder& d) {
  (void)d.u32();
  (void)d.u32();
  (void)d.u32();
  (void)d.string(k_max_name);
}

// What CREATE_SESSION and EXCHANGE_ID return; only the client needs these.
struct setup_reply {
  uint64_t clientid = 0;
  uint32_t sequenceid = 0;
  std::array<uint8_t, 16> sessionid{};
  uint32_t max_request = 0, max_response = 0;
  uint32_t seq_status_flags = 0;
};

void decode_channel_attrs(xdr_decoder& d, uint32_t* max_request, uint32_t* max_response) {
  (void)d.u32();  // headerpadsize
  const uint32_t req = d.u32();
  const uint32_t resp = d.u32();
  (void)d.u32();  // maxresponsesize_cached
  (void)d.u32();  // maxoperations
  (void)d.u32();  // maxrequests
  const uint32_t n_ird = d.u32();
  if (n_ird > 1) fail("channel_attrs4 with " + std::to_string(n_ird) + " rdma_ird entries");
  if (n_ird == 1) (void)d.u32();
  if (max_request) *max_request = req;
  if (max_response) *max_response = resp;
}

// Decodes one op's result body (status already read and NFS4_OK, except
// for SETATTR, whose attrsset is present whatever the status).
void decode_op_body(xdr_decoder& d, op_result& r, setup_reply& setup) {
  switch (r.num) {
    case OP_PUTROOTFH:
    case OP_PUTFH:
    case OP_LOOKUP:
    case OP_LOOKUPP:
    case OP_SAVEFH:
    case OP_RECLAIM_COMPLETE:
    case OP_DESTROY_SESSION:
    case OP_DESTROY_CLIENTID:
      break;
    case OP_GETFH:
      r.fh = d.opaque_var(k_max_fh);
      break;
    case OP_GETATTR:
      r.attrs = decode_fattr(d);
      break;
    case OP_OPEN: {
      r.stateid = decode_stateid(d);
      skip_change_info(d);
      r.open_rflags = d.u32();
      (void)decode_bitmap(d);  // attrset
      r.delegation_type = d.u32();
      switch (r.delegation_type) {
        case 0:
          break;  // OPEN_DELEGATE_NONE
        case 1:   // READ: stateid, recall, permissions
          (void)decode_stateid(d);
          (void)d.boolean();
          skip_nfsace(d);
          break;
        case 2: {  // WRITE: stateid, recall, space limit, permissions
          (void)decode_stateid(d);
          (void)d.boolean();
          const uint32_t limitby = d.u32();
          if (limitby == 1)
            (void)d.u64();
          else if (limitby == 2) {
            (void)d.u32();
            (void)d.u32();
          } else
            fail("OPEN: unknown space limit kind " + std::to_string(limitby));
          skip_nfsace(d);
          break;
        }
        case 3: {  // OPEN_DELEGATE_NONE_EXT: why, and a bool for two reasons
          const uint32_t why = d.u32();
          if (why == 7 || why == 8) (void)d.boolean();
          break;
        }
        default:
          fail("OPEN: unknown delegation type " + std::to_string(r.delegation_type));
      }
      break;
    }
    case OP_CLOSE:
      r.stateid = decode_stateid(d);
      break;
    case OP_WRITE:
      r.count = d.u32();
      r.committed = static_cast<stable_how>(d.u32());
      r.verifier = decode_verifier(d);
      break;
    case OP_READ:
      r.eof = d.boolean();
      r.data = d.opaque_var(k_max_data);
      break;
    case OP_COMMIT:
      r.verifier = decode_verifier(d);
      break;
    case OP_REMOVE:
      skip_change_info(d);
      break;
    case OP_RENAME:
      skip_change_info(d);
      skip_change_info(d);
      break;
    case OP_SETATTR:
      (void)decode_bitmap(d);
      break;
    case OP_READDIR: {
      r.verifier = decode_verifier(d);
      while (d.boolean()) {  // entry4 list: "value follows"
        dir_entry e;
        e.cookie = d.u64();
        e.name = d.string(k_max_name);
        e.fileid = decode_fattr(d).fileid;
        r.entries.push_back(std::move(e));
      }
      r.eof = d.boolean();
      break;
    }
    case OP_SEQUENCE: {
      (void)d.opaque_fixed(16);  // sessionid
      (void)d.u32();             // sequenceid
      (void)d.u32();             // slotid
      (void)d.u32();             // highest_slotid
      (void)d.u32();             // target_highest_slotid
      setup.seq_status_flags = d.u32();
      break;
    }
    case OP_EXCHANGE_ID: {
      setup.clientid = d.u64();
      setup.sequenceid = d.u32();
      (void)d.u32();  // eir_flags
      if (const uint32_t how = d.u32(); how != 0)
        fail("EXCHANGE_ID: server chose state protection " + std::to_string(how) +
             " though the client asked for SP4_NONE");
      (void)d.u64();                    // so_minor_id
      d.skip_opaque_var(1024);          // so_major_id
      d.skip_opaque_var(1024);          // server scope
      const uint32_t n_impl = d.u32();  // nfs_impl_id4<1>
      if (n_impl > 1) fail("EXCHANGE_ID: " + std::to_string(n_impl) + " impl ids");
      if (n_impl == 1) {
        (void)d.string(k_max_name);
        (void)d.string(k_max_name);
        (void)d.u64();
        (void)d.u32();
      }
      break;
    }
    case OP_CREATE_SESSION: {
      const bytes sid = d.opaque_fixed(16);
      std::copy(sid.begin(), sid.end(), setup.sessionid.begin());
      setup.sequenceid = d.u32();
      (void)d.u32();  // csr_flags
      decode_channel_attrs(d, &setup.max_request, &setup.max_response);
      decode_channel_attrs(d, nullptr, nullptr);
      break;
    }
    default:
      fail("reply holds " + op_name(r.num) + ", which this client cannot decode");
  }
}

// Encodes one of the public ops (see op's builders).
void encode_op(xdr_encoder& x, const op& o, uint64_t clientid, const std::string& owner) {
  x.u32(o.num);
  switch (o.num) {
    case OP_PUTROOTFH:
    case OP_LOOKUPP:
    case OP_GETFH:
    case OP_SAVEFH:
      break;
    case OP_PUTFH:
      x.opaque_var(o.fh);
      break;
    case OP_LOOKUP:
    case OP_REMOVE:
      x.string(o.name);
      break;
    case OP_GETATTR:
      encode_bitmap(x, k_default_attrs);
      break;
    case OP_OPEN: {
      x.u32(0);  // seqid: ignored in 4.1 (8.13 of RFC 8881: per-owner seqids are gone)
      x.u32(static_cast<uint32_t>(o.access));
      x.u32(0);  // share_deny NONE
      x.u64(clientid);
      x.string(owner);
      if (o.create) {
        x.u32(1);  // OPEN4_CREATE
        x.u32(0);  // UNCHECKED4
        const uint32_t mode_attr[] = {33};
        encode_bitmap(x, mode_attr);
        xdr_encoder mode;
        mode.u32(0644);
        x.opaque_var(mode.buffer());
      } else {
        x.u32(0);  // OPEN4_NOCREATE
      }
      x.u32(0);  // CLAIM_NULL
      x.string(o.name);
      break;
    }
    case OP_CLOSE:
      x.u32(0);  // seqid, ignored in 4.1
      encode_stateid(x, o.stateid);
      break;
    case OP_WRITE:
      encode_stateid(x, o.stateid);
      x.u64(o.offset);
      x.u32(static_cast<uint32_t>(o.stable));
      x.opaque_var(o.data);
      break;
    case OP_READ:
      encode_stateid(x, o.stateid);
      x.u64(o.offset);
      x.u32(o.count);
      break;
    case OP_COMMIT:
      x.u64(o.offset);
      x.u32(o.count);
      break;
    case OP_RENAME:
      x.string(o.name);
      x.string(o.name2);
      break;
    case OP_SETATTR: {
      encode_stateid(x, o.stateid);
      const uint32_t size_attr[] = {4};
      encode_bitmap(x, size_attr);
      xdr_encoder v;
      v.u64(o.new_size);
      x.opaque_var(v.buffer());
      break;
    }
    case OP_READDIR: {
      x.u64(o.offset);
      x.opaque_fixed(o.cookieverf);
      x.u32(o.count);  // dircount (a hint)
      x.u32(o.count);  // maxcount
      const uint32_t fileid_attr[] = {20};
      encode_bitmap(x, fileid_attr);
      break;
    }
    default:
      fail("op " + op_name(o.num) + " cannot be sent through compound()");
  }
}

}  // namespace

// ---------------------------------------------------------------- XDR --

void xdr_encoder::u32(uint32_t v) {
  const uint8_t b[4] = {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
                        static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  _buf.insert(_buf.end(), b, b + 4);
}

void xdr_encoder::u64(uint64_t v) {
  u32(static_cast<uint32_t>(v >> 32));
  u32(static_cast<uint32_t>(v));
}

void xdr_encoder::opaque_fixed(std::span<const uint8_t> b) {
  _buf.insert(_buf.end(), b.begin(), b.end());
  _buf.resize(_buf.size() + (4 - b.size() % 4) % 4, 0);
}

void xdr_encoder::opaque_var(std::span<const uint8_t> b) {
  u32(static_cast<uint32_t>(b.size()));
  opaque_fixed(b);
}

void xdr_encoder::string(std::string_view s) {
  opaque_var({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

void xdr_encoder::patch_u32(size_t at, uint32_t v) {
  if (at + 4 > _buf.size()) fail("xdr_encoder::patch_u32 past the end");
  for (int i = 0; i < 4; ++i) _buf[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

std::span<const uint8_t> xdr_decoder::need(size_t n) {
  if (n > remaining())
    fail("XDR underflow: need " + std::to_string(n) + " bytes at offset " + std::to_string(_pos) + ", have " +
         std::to_string(remaining()));
  auto s = _buf.subspan(_pos, n);
  _pos += n;
  return s;
}

uint32_t xdr_decoder::u32() {
  auto b = need(4);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

uint64_t xdr_decoder::u64() {
  const uint64_t hi = u32();
  return (hi << 32) | u32();
}

bool xdr_decoder::boolean() {
  const uint32_t v = u32();
  if (v > 1) fail("XDR bool with value " + std::to_string(v));
  return v == 1;
}

bytes xdr_decoder::opaque_fixed(size_t n) {
  auto b = need(n);
  bytes out(b.begin(), b.end());
  (void)need((4 - n % 4) % 4);
  return out;
}

bytes xdr_decoder::opaque_var(size_t max) {
  const uint32_t n = u32();
  if (n > max) fail("XDR opaque of " + std::to_string(n) + " bytes exceeds its bound " + std::to_string(max));
  return opaque_fixed(n);
}

std::string xdr_decoder::string(size_t max) {
  const bytes b = opaque_var(max);
  return {b.begin(), b.end()};
}

// ------------------------------------------------------------- naming --

std::string op_name(uint32_t num) {
  switch (num) {
    case OP_CLOSE:
      return "CLOSE";
    case OP_COMMIT:
      return "COMMIT";
    case OP_GETATTR:
      return "GETATTR";
    case OP_GETFH:
      return "GETFH";
    case OP_LOOKUP:
      return "LOOKUP";
    case OP_LOOKUPP:
      return "LOOKUPP";
    case OP_OPEN:
      return "OPEN";
    case OP_PUTFH:
      return "PUTFH";
    case OP_PUTROOTFH:
      return "PUTROOTFH";
    case OP_READ:
      return "READ";
    case OP_READDIR:
      return "READDIR";
    case OP_REMOVE:
      return "REMOVE";
    case OP_RENAME:
      return "RENAME";
    case OP_SAVEFH:
      return "SAVEFH";
    case OP_SETATTR:
      return "SETATTR";
    case OP_WRITE:
      return "WRITE";
    case OP_EXCHANGE_ID:
      return "EXCHANGE_ID";
    case OP_CREATE_SESSION:
      return "CREATE_SESSION";
    case OP_DESTROY_SESSION:
      return "DESTROY_SESSION";
    case OP_SEQUENCE:
      return "SEQUENCE";
    case OP_DESTROY_CLIENTID:
      return "DESTROY_CLIENTID";
    case OP_RECLAIM_COMPLETE:
      return "RECLAIM_COMPLETE";
    default:
      return "op#" + std::to_string(num);
  }
}

std::string status_name(uint32_t s) {
  switch (s) {
    case NFS4_OK:
      return "NFS4_OK";
    case NFS4ERR_NOENT:
      return "NFS4ERR_NOENT";
    case NFS4ERR_IO:
      return "NFS4ERR_IO";
    case NFS4ERR_ACCESS:
      return "NFS4ERR_ACCESS";
    case NFS4ERR_EXIST:
      return "NFS4ERR_EXIST";
    case NFS4ERR_NOTDIR:
      return "NFS4ERR_NOTDIR";
    case NFS4ERR_ISDIR:
      return "NFS4ERR_ISDIR";
    case NFS4ERR_INVAL:
      return "NFS4ERR_INVAL";
    case NFS4ERR_NOTEMPTY:
      return "NFS4ERR_NOTEMPTY";
    case NFS4ERR_STALE:
      return "NFS4ERR_STALE";
    case NFS4ERR_BADHANDLE:
      return "NFS4ERR_BADHANDLE";
    case NFS4ERR_BAD_STATEID:
      return "NFS4ERR_BAD_STATEID";
    case NFS4ERR_GRACE:
      return "NFS4ERR_GRACE";
    case NFS4ERR_DELAY:
      return "NFS4ERR_DELAY";
    case NFS4ERR_NOFILEHANDLE:
      return "NFS4ERR_NOFILEHANDLE";
    case NFS4ERR_BADSESSION:
      return "NFS4ERR_BADSESSION";
    case NFS4ERR_SEQ_MISORDERED:
      return "NFS4ERR_SEQ_MISORDERED";
    default:
      return "nfsstat4 " + std::to_string(s);
  }
}

std::string compound_result::describe() const {
  for (const auto& r : ops)
    if (r.status != NFS4_OK) return op_name(r.num) + ": " + status_name(r.status);
  if (status != NFS4_OK) return "COMPOUND: " + status_name(status);
  return "NFS4_OK";
}

// ------------------------------------------------------------- client --

namespace {

// A compound's encoded ops plus how many there are.
struct encoded_ops {
  xdr_encoder x;
  uint32_t count = 0;
};

std::atomic<uint32_t> g_client_serial{0};

}  // namespace

namespace {

// COMPOUND4args around already-encoded ops.
xdr_encoder compound_args(const encoded_ops& ops) {
  xdr_encoder x;
  x.string("");  // tag
  x.u32(1);      // minorversion
  x.u32(ops.count);
  const auto& b = ops.x.buffer();
  x.opaque_fixed(b);  // already 4-aligned: appends verbatim
  return x;
}

struct decoded_compound {
  compound_result result;
  setup_reply setup;
};

decoded_compound decode_compound(const bytes& body) {
  decoded_compound out;
  xdr_decoder d(body);
  out.result.status = d.u32();
  d.skip_opaque_var(k_max_name);  // tag
  const uint32_t n = d.u32();
  if (n > 1024) fail("COMPOUND reply with " + std::to_string(n) + " results");
  for (uint32_t i = 0; i < n; ++i) {
    op_result r;
    r.num = d.u32();
    r.status = d.u32();
    if (r.status == NFS4_OK || r.num == OP_SETATTR) decode_op_body(d, r, out.setup);
    out.result.ops.push_back(std::move(r));
    if (out.result.ops.back().status != NFS4_OK) break;
  }
  return out;
}

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

// ------------------------------------------------------- conveniences --

namespace {

// The status of a compound that ran `want` ops: the first failure, or a
// protocol error if the server answered fewer ops without one.
uint32_t first_failure(const compound_result& r, size_t want) {
  if (r.status != NFS4_OK) return r.status;
  if (r.ops.size() != want)
    fail("COMPOUND succeeded with " + std::to_string(r.ops.size()) + " results for " + std::to_string(want) +
         " ops");
  return NFS4_OK;
}

}  // namespace

std::pair<uint32_t, bytes> client::lookup_path(const std::string& path) {
  std::vector<op> ops{op::putrootfh()};
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '/'))
    if (!part.empty()) ops.push_back(op::lookup(part));
  ops.push_back(op::getfh());
  auto r = compound(ops);
  const uint32_t st = first_failure(r, ops.size());
  return {st, st == NFS4_OK ? r.ops.back().fh : bytes{}};
}

std::pair<uint32_t, attributes> client::getattr(const bytes& fh) {
  auto r = compound({op::putfh(fh), op::getattr()});
  const uint32_t st = first_failure(r, 2);
  return {st, st == NFS4_OK ? *r.ops[1].attrs : attributes{}};
}

open_result client::open(const bytes& dir, const std::string& name, bool create, share_access access) {
  auto r = compound({op::putfh(dir), op::open(name, create, access), op::getfh()});
  open_result out;
  out.status = first_failure(r, 3);
  if (out.status == NFS4_OK) {
    out.stateid = r.ops[1].stateid;
    out.fh = r.ops[2].fh;
  }
  return out;
}

uint32_t client::close(const bytes& fh, const stateid4& s) {
  return first_failure(compound({op::putfh(fh), op::close(s)}), 2);
}

write_result client::write(const bytes& fh, const stateid4& s, uint64_t offset, std::span<const uint8_t> data,
                           stable_how how) {
  auto r = compound({op::putfh(fh), op::write(s, offset, data, how)});
  write_result out;
  out.status = first_failure(r, 2);
  if (out.status == NFS4_OK) {
    out.count = r.ops[1].count;
    out.committed = r.ops[1].committed;
    out.verifier = r.ops[1].verifier;
  }
  return out;
}

write_result client::write_all(const bytes& fh, const stateid4& s, uint64_t offset,
                               std::span<const uint8_t> data, stable_how how) {
  write_result total;
  total.committed = stable_how::file_sync;
  uint64_t done = 0;
  while (done < data.size()) {
    const size_t n = std::min<uint64_t>(_max_io, data.size() - done);
    auto w = write(fh, s, offset + done, data.subspan(done, n), how);
    if (w.status != NFS4_OK) {
      total.status = w.status;
      break;
    }
    total.committed = std::min(total.committed, w.committed);
    total.verifier = w.verifier;
    done += w.count;
    if (w.count != n) break;  // short write: let the caller see it
  }
  total.count = static_cast<uint32_t>(done);
  return total;
}

read_result client::read(const bytes& fh, const stateid4& s, uint64_t offset, uint32_t count) {
  auto r = compound({op::putfh(fh), op::read(s, offset, count)});
  read_result out;
  out.status = first_failure(r, 2);
  if (out.status == NFS4_OK) {
    out.data = std::move(r.ops[1].data);
    out.eof = r.ops[1].eof;
  }
  return out;
}

read_result client::read_all(const bytes& fh, const stateid4& s, uint64_t offset, uint64_t count) {
  read_result total;
  while (total.data.size() < count) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(_max_io, count - total.data.size()));
    auto r = read(fh, s, offset + total.data.size(), n);
    if (r.status != NFS4_OK) {
      total.status = r.status;
      return total;
    }
    total.data.insert(total.data.end(), r.data.begin(), r.data.end());
    total.eof = r.eof;
    if (r.eof || r.data.empty()) break;
  }
  return total;
}

write_result client::commit(const bytes& fh, uint64_t offset, uint32_t count) {
  auto r = compound({op::putfh(fh), op::commit(offset, count)});
  write_result out;
  out.status = first_failure(r, 2);
  if (out.status == NFS4_OK) {
    out.verifier = r.ops[1].verifier;
    out.committed = stable_how::file_sync;
  }
  return out;
}

uint32_t client::truncate(const bytes& fh, const stateid4& s, uint64_t size) {
  return first_failure(compound({op::putfh(fh), op::setattr_size(s, size)}), 2);
}

uint32_t client::remove(const bytes& dir, const std::string& name) {
  return first_failure(compound({op::putfh(dir), op::remove(name)}), 2);
}

uint32_t client::rename(const bytes& from_dir, const std::string& from, const bytes& to_dir,
                        const std::string& to) {
  return first_failure(compound({op::putfh(from_dir), op::savefh(), op::putfh(to_dir), op::rename(from, to)}),
                       4);
}

std::pair<uint32_t, std::vector<dir_entry>> client::readdir(const bytes& dir) {
  std::vector<dir_entry> all;
  uint64_t cookie = 0;
  std::array<uint8_t, 8> verf{};
  for (int round = 0; round < 100000; ++round) {
    auto r = compound({op::putfh(dir), op::readdir(cookie, verf, 32u << 10)});
    const uint32_t st = first_failure(r, 2);
    if (st != NFS4_OK) return {st, {}};
    auto& rd = r.ops[1];
    for (auto& e : rd.entries) {
      cookie = e.cookie;
      if (e.name != "." && e.name != "..") all.push_back(std::move(e));
    }
    verf = rd.verifier;
    if (rd.eof) return {NFS4_OK, all};
    if (rd.entries.empty()) fail("READDIR: no entries and no eof at cookie " + std::to_string(cookie));
  }
  fail("READDIR: directory did not end after 100000 replies");
}

void client::set_max_io(uint32_t n) {
  if (n == 0) fail("set_max_io(0)");
  _max_io = std::min(n, std::min(_max_request, _max_response) - k_header_room);
}

}  // namespace dcache_e2e::nfs41
