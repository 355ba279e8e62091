// Minimal synchronous wrapper over libnfs's raw RPC API for the escape tests.
//
// The high-level libnfs API normalises paths and cannot send ".." or a
// hand-crafted file handle, so these tests speak MOUNT3/NFS3/NFS4 COMPOUND
// directly. Every call blocks in a small poll() loop until its reply (or a
// timeout) arrives; the reply is copied out inside libnfs's callback because
// libnfs frees the decoded reply when the callback returns.
//
// Thread-safety: an rpc_session is used from one thread at a time.
// Ownership: rpc_session owns its rpc_context; results own their bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct rpc_context;

namespace dcache_e2e {

using bytes = std::vector<uint8_t>;

// What GETATTR (v3 fattr3 or v4 fileid/fsid/type) told us about an object.
struct object_attrs {
  uint64_t fileid = 0;
  uint64_t fsid_major = 0;  // v3: fattr3.fsid; v4: fsid.major
  uint64_t fsid_minor = 0;  // v4 only
  uint32_t type = 0;        // v3 ftype3 / v4 nfs_ftype4 (2 = directory in both)
};

struct v3_result {
  int status = -1;  // nfsstat3 (0 = NFS3_OK)
  bytes fh;         // LOOKUP/MNT/MKDIR: resulting handle
  std::optional<object_attrs> attrs;
};

// One directory entry as READDIR3 returns it.
struct dir_entry {
  std::string name;
  uint64_t fileid = 0;
};

struct v3_listing {
  int status = -1;  // nfsstat3 of the first failing page, or NFS3_OK
  std::vector<dir_entry> entries;
  bool complete = false;  // eof seen (false: stopped at max_entries or an error)
};

// One operation of a v4 COMPOUND, described as a value.
struct v4_op {
  enum class kind { putrootfh, putfh, lookup, lookupp, getfh, getattr } what;
  bytes fh;          // putfh
  std::string name;  // lookup
  static v4_op putrootfh() { return {kind::putrootfh, {}, {}}; }
  static v4_op putfh(bytes h) { return {kind::putfh, std::move(h), {}}; }
  static v4_op lookup(std::string n) { return {kind::lookup, {}, std::move(n)}; }
  static v4_op lookupp() { return {kind::lookupp, {}, {}}; }
  static v4_op getfh() { return {kind::getfh, {}, {}}; }
  static v4_op getattr() { return {kind::getattr, {}, {}}; }
};

struct v4_op_result {
  int op = 0;                         // nfs_opnum4
  int status = -1;                    // nfsstat4
  bytes fh;                           // GETFH
  std::optional<object_attrs> attrs;  // GETATTR (fileid, fsid, type)
};

struct v4_result {
  int status = -1;  // overall nfsstat4
  std::vector<v4_op_result> ops;
};

class rpc_session {
 public:
  rpc_session();
  ~rpc_session();
  rpc_session(const rpc_session&) = delete;
  rpc_session& operator=(const rpc_session&) = delete;

  // Connects through the portmapper (MOUNT) or straight to a port (NFS).
  // Returns an empty string on success, else the error text.
  [[nodiscard]] std::string connect_program(const std::string& server, int program, int version);
  [[nodiscard]] std::string connect_port(const std::string& server, int port);

  // MOUNT3 MNT; status is the mountstat3.
  [[nodiscard]] v3_result mount3(const std::string& path);
  [[nodiscard]] v3_result lookup3(const bytes& dir, const std::string& name);
  [[nodiscard]] v3_result getattr3(const bytes& fh);
  [[nodiscard]] v3_result readdir3(const bytes& fh);  // first page, status only
  // Every page of READDIR3 (cookie and verifier carried over), up to
  // max_entries entries.
  [[nodiscard]] v3_listing readdir3_all(const bytes& fh, size_t max_entries = 100000);
  // MKDIR3 with mode 0755; fh set when the server returned one.
  [[nodiscard]] v3_result mkdir3(const bytes& dir, const std::string& name);
  [[nodiscard]] v4_result compound4(const std::vector<v4_op>& ops, uint32_t minor = 0);

  // Transport-level failure of the last call ("" when the RPC itself worked).
  [[nodiscard]] const std::string& last_rpc_error() const { return _last_error; }

 private:
  template <typename Start>
  bool run(Start&& start);

  rpc_context* _rpc;
  std::string _last_error;
};

}  // namespace dcache_e2e
