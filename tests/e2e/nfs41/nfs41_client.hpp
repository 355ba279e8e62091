// A minimal NFSv4.1 client for the end-to-end tests.
//
// libnfs 4.0 (Debian 12) speaks NFSv4.0 only: it has no EXCHANGE_ID,
// CREATE_SESSION or SEQUENCE, so the tests need their own client to reach
// Ganesha's NFSv4.1 code paths. This one is deliberately small:
//   - ONC RPC over one TCP connection (RFC 5531 record marking), AUTH_SYS
//     as uid 0 / gid 0, one call outstanding at a time, xid-matched replies,
//     a bounded receive timeout;
//   - a hand-written XDR encoder/decoder (RFC 4506);
//   - one session with one fore-channel slot and no back channel
//     (EXCHANGE_ID with SP4_NONE, CREATE_SESSION, RECLAIM_COMPLETE);
//   - COMPOUNDs (minorversion 1) that always start with SEQUENCE, built from
//     the op values below; per-op NFS status is returned, not thrown.
//
// Errors: NFS status codes are data (compound_result::status, op_result::
// status). Transport failures, XDR underflow/garbage and protocol
// violations throw nfs41_error naming what went wrong; after one of those
// the client is unusable (the slot's sequence id is no longer known).
//
// Thread-safety: a client is used by one thread at a time. Several clients
// (each its own connection, client id and session) may run in parallel.
// Ownership: the client owns its socket and session; results own their bytes.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dcache_e2e::nfs41 {

using bytes = std::vector<uint8_t>;

// Thrown for failures that are not an NFS status: connect/send/receive
// errors, timeouts, malformed replies, RPC-level rejections.
class nfs41_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------- XDR --

// Appends XDR items (big-endian, 4-byte aligned) to a growing buffer.
class xdr_encoder {
 public:
  void u32(uint32_t v);
  void u64(uint64_t v);
  void boolean(bool v) { u32(v ? 1 : 0); }
  void opaque_fixed(std::span<const uint8_t> b);  // no length, padded
  void opaque_var(std::span<const uint8_t> b);    // length + bytes + pad
  void string(std::string_view s);
  // Overwrites a u32 written earlier at byte offset `at` (record marks).
  void patch_u32(size_t at, uint32_t v);
  [[nodiscard]] size_t size() const { return _buf.size(); }
  [[nodiscard]] const bytes& buffer() const { return _buf; }

 private:
  bytes _buf;
};

// Reads XDR items from a borrowed buffer; throws nfs41_error on underflow
// or on an over-long variable-length item (`max` bounds each one).
class xdr_decoder {
 public:
  explicit xdr_decoder(std::span<const uint8_t> b) : _buf(b) {}
  [[nodiscard]] uint32_t u32();
  [[nodiscard]] uint64_t u64();
  [[nodiscard]] bool boolean();
  [[nodiscard]] bytes opaque_fixed(size_t n);
  [[nodiscard]] bytes opaque_var(size_t max);
  [[nodiscard]] std::string string(size_t max);
  void skip_opaque_var(size_t max) { (void)opaque_var(max); }
  [[nodiscard]] size_t remaining() const { return _buf.size() - _pos; }

 private:
  std::span<const uint8_t> need(size_t n);
  std::span<const uint8_t> _buf;
  size_t _pos = 0;
};

// ------------------------------------------------------ protocol values --

// nfs_opnum4 (RFC 8881 section 16.2 / 18)
enum op_num : uint32_t {
  OP_CLOSE = 4,
  OP_COMMIT = 5,
  OP_GETATTR = 9,
  OP_GETFH = 10,
  OP_LOOKUP = 15,
  OP_LOOKUPP = 16,
  OP_OPEN = 18,
  OP_PUTFH = 22,
  OP_PUTROOTFH = 24,
  OP_READ = 25,
  OP_READDIR = 26,
  OP_REMOVE = 28,
  OP_RENAME = 29,
  OP_SAVEFH = 32,
  OP_SETATTR = 34,
  OP_WRITE = 38,
  OP_EXCHANGE_ID = 42,
  OP_CREATE_SESSION = 43,
  OP_DESTROY_SESSION = 44,
  OP_SEQUENCE = 53,
  OP_DESTROY_CLIENTID = 57,
  OP_RECLAIM_COMPLETE = 58,
};

// The nfsstat4 values the tests name; anything else is shown as a number.
enum nfs_status : uint32_t {
  NFS4_OK = 0,
  NFS4ERR_NOENT = 2,
  NFS4ERR_IO = 5,
  NFS4ERR_ACCESS = 13,
  NFS4ERR_EXIST = 17,
  NFS4ERR_NOTDIR = 20,
  NFS4ERR_ISDIR = 21,
  NFS4ERR_INVAL = 22,
  NFS4ERR_NOTEMPTY = 66,
  NFS4ERR_STALE = 70,
  NFS4ERR_BADHANDLE = 10001,
  NFS4ERR_BAD_STATEID = 10025,
  NFS4ERR_GRACE = 10013,
  NFS4ERR_DELAY = 10008,
  NFS4ERR_NOFILEHANDLE = 10020,
  NFS4ERR_BADSESSION = 10052,
  NFS4ERR_SEQ_MISORDERED = 10063,
};

[[nodiscard]] std::string op_name(uint32_t op);
[[nodiscard]] std::string status_name(uint32_t status);

enum class stable_how : uint32_t { unstable = 0, data_sync = 1, file_sync = 2 };

// share_access bits (READ 1, WRITE 2, BOTH 3)
enum class share_access : uint32_t { read = 1, write = 2, both = 3 };

// nfs_ftype4
enum class file_type : uint32_t { reg = 1, dir = 2, blk = 3, chr = 4, lnk = 5, sock = 6, fifo = 7 };

struct stateid4 {
  uint32_t seqid = 0;
  std::array<uint8_t, 12> other{};
};

// What GETATTR decoded. Only the attributes requested (k_default_attrs) and
// understood by the decoder are filled in; an attribute the server returns
// that the decoder does not know makes the reply fail to decode (its size
// would be unknown), so the request only ever asks for these.
struct attributes {
  std::optional<file_type> type;                      // FATTR4_TYPE (1)
  std::optional<uint64_t> change;                     // FATTR4_CHANGE (3)
  std::optional<uint64_t> size;                       // FATTR4_SIZE (4)
  std::optional<std::pair<uint64_t, uint64_t>> fsid;  // FATTR4_FSID (8): major, minor
  std::optional<uint64_t> fileid;                     // FATTR4_FILEID (20)
  std::optional<uint64_t> maxread;                    // FATTR4_MAXREAD (30)
  std::optional<uint64_t> maxwrite;                   // FATTR4_MAXWRITE (31)
  std::optional<uint32_t> mode;                       // FATTR4_MODE (33)
};

// Bit numbers of the attributes above.
inline constexpr std::array<uint32_t, 8> k_default_attrs{1, 3, 4, 8, 20, 30, 31, 33};

struct dir_entry {
  uint64_t cookie = 0;
  std::string name;
  std::optional<uint64_t> fileid;
};

// One operation of a COMPOUND, as a value. SEQUENCE is added by the client.
struct op {
  uint32_t num = 0;
  bytes fh{};                                 // PUTFH
  std::string name{}, name2{};                // LOOKUP/REMOVE/OPEN name; RENAME old, new
  stateid4 stateid{};                         // READ/WRITE/CLOSE/SETATTR
  uint64_t offset = 0;                        // READ/WRITE/COMMIT; READDIR cookie
  uint32_t count = 0;                         // READ/COMMIT count; READDIR maxcount
  stable_how stable = stable_how::file_sync;  // WRITE
  std::span<const uint8_t> data{};            // WRITE (borrowed until the call returns)
  bool create = false;                        // OPEN
  bool truncate = false;                      // OPEN create: size 0 (a `>` or O_TRUNC open)
  share_access access = share_access::both;   // OPEN
  uint64_t new_size = 0;                      // SETATTR(size)
  std::array<uint8_t, 8> cookieverf{};        // READDIR
  uint64_t clientid = 0;                      // OPEN owner (filled by the client)

  static op putrootfh() { return {.num = OP_PUTROOTFH}; }
  static op putfh(bytes h) { return {.num = OP_PUTFH, .fh = std::move(h)}; }
  static op lookup(std::string n) { return {.num = OP_LOOKUP, .name = std::move(n)}; }
  static op lookupp() { return {.num = OP_LOOKUPP}; }
  static op getfh() { return {.num = OP_GETFH}; }
  static op getattr() { return {.num = OP_GETATTR}; }
  static op savefh() { return {.num = OP_SAVEFH}; }
  static op open(std::string n, bool create, share_access a, bool truncate = false) {
    return {.num = OP_OPEN, .name = std::move(n), .create = create, .truncate = truncate, .access = a};
  }
  static op close(stateid4 s) { return {.num = OP_CLOSE, .stateid = s}; }
  static op write(stateid4 s, uint64_t off, std::span<const uint8_t> d, stable_how how) {
    return {.num = OP_WRITE, .stateid = s, .offset = off, .stable = how, .data = d};
  }
  static op read(stateid4 s, uint64_t off, uint32_t n) {
    return {.num = OP_READ, .stateid = s, .offset = off, .count = n};
  }
  static op commit(uint64_t off, uint32_t n) { return {.num = OP_COMMIT, .offset = off, .count = n}; }
  static op remove(std::string n) { return {.num = OP_REMOVE, .name = std::move(n)}; }
  // Source directory is the saved fh (SAVEFH), target the current fh.
  static op rename(std::string from, std::string to) {
    return {.num = OP_RENAME, .name = std::move(from), .name2 = std::move(to)};
  }
  static op setattr_size(stateid4 s, uint64_t size) {
    return {.num = OP_SETATTR, .stateid = s, .new_size = size};
  }
  static op readdir(uint64_t cookie, std::array<uint8_t, 8> verf, uint32_t maxcount) {
    return {.num = OP_READDIR, .offset = cookie, .count = maxcount, .cookieverf = verf};
  }
};

// What one op answered. Fields are filled for the op that produces them.
struct op_result {
  uint32_t num = 0;
  uint32_t status = 0;
  bytes fh;                                     // GETFH
  std::optional<attributes> attrs;              // GETATTR
  stateid4 stateid;                             // OPEN, CLOSE
  uint32_t open_rflags = 0;                     // OPEN
  uint32_t delegation_type = 0;                 // OPEN (0 = none)
  bytes data;                                   // READ
  bool eof = false;                             // READ, READDIR
  uint32_t count = 0;                           // WRITE
  stable_how committed = stable_how::unstable;  // WRITE
  std::array<uint8_t, 8> verifier{};            // WRITE, COMMIT; READDIR cookieverf
  std::vector<dir_entry> entries;               // READDIR
};

struct compound_result {
  uint32_t status = 0;         // the COMPOUND's status (that of the last op run)
  std::vector<op_result> ops;  // the caller's ops (SEQUENCE removed)
  [[nodiscard]] bool ok() const { return status == NFS4_OK; }
  // "OPEN: NFS4ERR_NOENT" for the first failed op, or "NFS4_OK".
  [[nodiscard]] std::string describe() const;
};

// ------------------------------------------------------------- client --

struct open_result {
  uint32_t status = 0;
  bytes fh;
  stateid4 stateid;
};

struct write_result {
  uint32_t status = 0;
  uint32_t count = 0;
  stable_how committed = stable_how::unstable;
  std::array<uint8_t, 8> verifier{};
};

struct read_result {
  uint32_t status = 0;
  bytes data;
  bool eof = false;
};

class client {
 public:
  // Connects to server:port (TCP) and sets up a session; throws
  // nfs41_error on failure (with the step and status).
  client(const std::string& server, uint16_t port = 2049,
         std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // shutdown() unless it ran already; never throws.
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // DESTROY_SESSION then DESTROY_CLIENTID, each the sole op of its
  // COMPOUND; returns their statuses. The client cannot be used after.
  // Throws nfs41_error on transport failure.
  struct shutdown_status {
    uint32_t destroy_session = 0;
    uint32_t destroy_clientid = 0;
  };
  [[nodiscard]] shutdown_status shutdown();

  // SEQUENCE + ops. Throws nfs41_error for transport/decoding failures
  // and when SEQUENCE itself fails (then the session is unusable).
  [[nodiscard]] compound_result compound(std::vector<op> ops);

  // ---- conveniences over compound(); each returns the failing status
  // PUTROOTFH; LOOKUP each component of an absolute pseudo path; GETFH.
  [[nodiscard]] std::pair<uint32_t, bytes> lookup_path(const std::string& path);
  [[nodiscard]] std::pair<uint32_t, attributes> getattr(const bytes& fh);
  // OPEN (UNCHECKED4 when create; with truncate, also size 0, which
  // empties a file that exists); GETFH.
  [[nodiscard]] open_result open(const bytes& dir, const std::string& name, bool create,
                                 share_access access = share_access::both, bool truncate = false);
  [[nodiscard]] uint32_t close(const bytes& fh, const stateid4& s);
  // One WRITE (data must fit the server's maxwrite).
  [[nodiscard]] write_result write(const bytes& fh, const stateid4& s, uint64_t offset,
                                   std::span<const uint8_t> data, stable_how how);
  // Any size: split into WRITEs of at most max_io() bytes; stops at the
  // first failure or short write. Returns bytes written and the
  // weakest stability the server committed.
  [[nodiscard]] write_result write_all(const bytes& fh, const stateid4& s, uint64_t offset,
                                       std::span<const uint8_t> data, stable_how how);
  [[nodiscard]] read_result read(const bytes& fh, const stateid4& s, uint64_t offset, uint32_t count);
  // Reads up to `count` bytes in max_io() pieces until eof or count.
  [[nodiscard]] read_result read_all(const bytes& fh, const stateid4& s, uint64_t offset, uint64_t count);
  [[nodiscard]] write_result commit(const bytes& fh, uint64_t offset, uint32_t count);
  [[nodiscard]] uint32_t truncate(const bytes& fh, const stateid4& s, uint64_t size);
  [[nodiscard]] uint32_t remove(const bytes& dir, const std::string& name);
  [[nodiscard]] uint32_t rename(const bytes& from_dir, const std::string& from, const bytes& to_dir,
                                const std::string& to);
  // All names in a directory (READDIR until eof), without "." and "..".
  [[nodiscard]] std::pair<uint32_t, std::vector<dir_entry>> readdir(const bytes& dir);

  // Largest READ/WRITE payload the conveniences send: 1 MiB (what the
  // Linux client uses), lowered to the server's maxread/maxwrite of the
  // pseudo root and to the session limits less room for headers.
  [[nodiscard]] uint32_t max_io() const { return _max_io; }
  // Lowers (or raises, within the session's limits) the READ/WRITE size,
  // e.g. to an export's own maxread/maxwrite.
  void set_max_io(uint32_t n);
  [[nodiscard]] uint64_t clientid() const { return _clientid; }
  [[nodiscard]] const std::array<uint8_t, 16>& sessionid() const { return _sessionid; }
  // Fore-channel limits the server granted in CREATE_SESSION.
  [[nodiscard]] uint32_t max_request_size() const { return _max_request; }
  [[nodiscard]] uint32_t max_response_size() const { return _max_response; }

 private:
  // One RPC: sends args (the COMPOUND body after the RPC header) and
  // returns the reply body after the accepted-reply header.
  bytes call(const xdr_encoder& body);
  // SEQUENCE followed by `n_ops` already-encoded ops; advances the slot.
  compound_result sequenced(const xdr_encoder& ops, uint32_t n_ops);
  void setup_session();

  int _fd = -1;
  uint32_t _next_xid;
  std::chrono::milliseconds _timeout;
  uint64_t _clientid = 0;
  std::array<uint8_t, 16> _sessionid{};
  bool _have_session = false;
  bool _broken = false;    // a transport or sequencing failure happened
  uint32_t _slot_seq = 0;  // last sequence id used on slot 0
  uint32_t _max_request = 0, _max_response = 0;
  uint32_t _max_io = 0;
  std::string _owner;  // client owner and open owner
};

}  // namespace dcache_e2e::nfs41
