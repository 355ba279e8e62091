#include "raw_nfs.hpp"

#include <poll.h>

#include <chrono>
#include <cstring>
#include <functional>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <nfsc/libnfs-raw-nfs4.h>

namespace dcache_e2e {
namespace {

// Bounded so that a wedged server fails the test instead of hanging ctest.
constexpr auto k_call_timeout = std::chrono::seconds(20);

struct pending {
  bool done = false;
  int status = RPC_STATUS_ERROR;
  std::string error;
  std::function<void(void*)> on_success;  // copies the decoded reply out
};

void on_reply(rpc_context*, int status, void* data, void* private_data) {
  auto* p = static_cast<pending*>(private_data);
  p->status = status;
  if (status == RPC_STATUS_SUCCESS) {
    if (p->on_success) p->on_success(data);
  } else if (status == RPC_STATUS_ERROR && data != nullptr) {
    p->error = static_cast<const char*>(data);
  } else {
    p->error = "rpc status " + std::to_string(status);
  }
  p->done = true;
}

bytes copy_bytes(const char* p, unsigned len) {
  return bytes(reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + len);
}

object_attrs from_fattr3(const fattr3& a) {
  return object_attrs{a.fileid, a.fsid, 0, static_cast<uint32_t>(a.type)};
}

uint64_t be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Decodes the attributes we ask for (type, fsid, fileid: all in word 0) in
// the order XDR puts them: ascending attribute number.
std::optional<object_attrs> from_fattr4(const fattr4& f) {
  if (f.attrmask.bitmap4_len < 1) return std::nullopt;
  const uint32_t w0 = f.attrmask.bitmap4_val[0];
  const auto* p = reinterpret_cast<const uint8_t*>(f.attr_vals.attrlist4_val);
  const size_t len = f.attr_vals.attrlist4_len;
  size_t off = 0;
  object_attrs a;
  if (w0 & (1u << FATTR4_TYPE)) {
    if (off + 4 > len) return std::nullopt;
    a.type = be32(p + off);
    off += 4;
  }
  if (w0 & (1u << FATTR4_FSID)) {
    if (off + 16 > len) return std::nullopt;
    a.fsid_major = be64(p + off);
    a.fsid_minor = be64(p + off + 8);
    off += 16;
  }
  if (!(w0 & (1u << FATTR4_FILEID)) || off + 8 > len) return std::nullopt;
  a.fileid = be64(p + off);
  return a;
}

}  // namespace

rpc_session::rpc_session() : _rpc(rpc_init_context()) {}

rpc_session::~rpc_session() {
  if (_rpc != nullptr) rpc_destroy_context(_rpc);
}

template <typename Start>
bool rpc_session::run(Start&& start) {
  _last_error.clear();
  if (_rpc == nullptr) {
    _last_error = "rpc_init_context failed";
    return false;
  }
  pending p;
  if (start(p) != 0) {
    _last_error = std::string("queueing the call failed: ") + rpc_get_error(_rpc);
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + k_call_timeout;
  while (!p.done) {
    if (std::chrono::steady_clock::now() > deadline) {
      _last_error = "timed out waiting for the reply";
      return false;
    }
    pollfd pfd{rpc_get_fd(_rpc), static_cast<short>(rpc_which_events(_rpc)), 0};
    if (poll(&pfd, 1, 100) < 0 && errno != EINTR) {
      _last_error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (rpc_service(_rpc, pfd.revents) < 0) {
      _last_error = std::string("rpc_service: ") + rpc_get_error(_rpc);
      return false;
    }
  }
  if (p.status != RPC_STATUS_SUCCESS) {
    _last_error = p.error;
    return false;
  }
  return true;
}

std::string rpc_session::connect_program(const std::string& server, int program, int version) {
  if (!run([&](pending& p) {
        return rpc_connect_program_async(_rpc, server.c_str(), program, version, on_reply, &p);
      }))
    return "connect to program " + std::to_string(program) + " v" + std::to_string(version) + " on " +
           server + ": " + _last_error;
  return {};
}

std::string rpc_session::connect_port(const std::string& server, int port) {
  if (!run([&](pending& p) { return rpc_connect_async(_rpc, server.c_str(), port, on_reply, &p); }))
    return "connect to " + server + ":" + std::to_string(port) + ": " + _last_error;
  return {};
}

v3_result rpc_session::mount3(const std::string& path) {
  v3_result r;
  std::string arg = path;
  run([&](pending& p) {
    p.on_success = [&](void* data) {
      auto* res = static_cast<mountres3*>(data);
      r.status = res->fhs_status;
      if (res->fhs_status == MNT3_OK) {
        const auto& h = res->mountres3_u.mountinfo.fhandle;
        r.fh = copy_bytes(h.fhandle3_val, h.fhandle3_len);
      }
    };
    return rpc_mount3_mnt_async(_rpc, on_reply, arg.data(), &p);
  });
  return r;
}

v3_result rpc_session::lookup3(const bytes& dir, const std::string& name) {
  v3_result r;
  bytes dir_copy = dir;
  std::string name_copy = name;
  LOOKUP3args args{};
  args.what.dir.data.data_len = static_cast<u_int>(dir_copy.size());
  args.what.dir.data.data_val = reinterpret_cast<char*>(dir_copy.data());
  args.what.name = name_copy.data();
  run([&](pending& p) {
    p.on_success = [&](void* data) {
      auto* res = static_cast<LOOKUP3res*>(data);
      r.status = res->status;
      if (res->status == NFS3_OK) {
        const auto& ok = res->LOOKUP3res_u.resok;
        r.fh = copy_bytes(ok.object.data.data_val, ok.object.data.data_len);
        if (ok.obj_attributes.attributes_follow)
          r.attrs = from_fattr3(ok.obj_attributes.post_op_attr_u.attributes);
      }
    };
    return rpc_nfs3_lookup_async(_rpc, on_reply, &args, &p);
  });
  return r;
}

v3_result rpc_session::getattr3(const bytes& fh) {
  v3_result r;
  bytes fh_copy = fh;
  GETATTR3args args{};
  args.object.data.data_len = static_cast<u_int>(fh_copy.size());
  args.object.data.data_val = reinterpret_cast<char*>(fh_copy.data());
  run([&](pending& p) {
    p.on_success = [&](void* data) {
      auto* res = static_cast<GETATTR3res*>(data);
      r.status = res->status;
      if (res->status == NFS3_OK) r.attrs = from_fattr3(res->GETATTR3res_u.resok.obj_attributes);
    };
    return rpc_nfs3_getattr_async(_rpc, on_reply, &args, &p);
  });
  return r;
}

v3_result rpc_session::readdir3(const bytes& fh) {
  v3_result r;
  bytes fh_copy = fh;
  READDIR3args args{};
  args.dir.data.data_len = static_cast<u_int>(fh_copy.size());
  args.dir.data.data_val = reinterpret_cast<char*>(fh_copy.data());
  args.count = 4096;
  run([&](pending& p) {
    p.on_success = [&](void* data) { r.status = static_cast<READDIR3res*>(data)->status; };
    return rpc_nfs3_readdir_async(_rpc, on_reply, &args, &p);
  });
  return r;
}

v3_listing rpc_session::readdir3_all(const bytes& fh, size_t max_entries) {
  v3_listing out;
  bytes fh_copy = fh;
  uint64_t cookie = 0;
  char verf[NFS3_COOKIEVERFSIZE] = {};
  while (out.entries.size() < max_entries) {
    READDIR3args args{};
    args.dir.data.data_len = static_cast<u_int>(fh_copy.size());
    args.dir.data.data_val = reinterpret_cast<char*>(fh_copy.data());
    args.cookie = cookie;
    std::memcpy(args.cookieverf, verf, sizeof verf);
    args.count = 8192;
    int status = -1;
    bool eof = false;
    size_t got = 0;
    const bool answered = run([&](pending& p) {
      p.on_success = [&](void* data) {
        auto* res = static_cast<READDIR3res*>(data);
        status = res->status;
        if (res->status != NFS3_OK) return;
        const auto& ok = res->READDIR3res_u.resok;
        std::memcpy(verf, ok.cookieverf, sizeof verf);
        for (const entry3* e = ok.reply.entries; e != nullptr; e = e->nextentry) {
          out.entries.push_back({e->name, e->fileid});
          cookie = e->cookie;
          ++got;
        }
        eof = ok.reply.eof != 0;
      };
      return rpc_nfs3_readdir_async(_rpc, on_reply, &args, &p);
    });
    if (!answered || status != NFS3_OK) {
      out.status = status;
      return out;
    }
    out.status = NFS3_OK;
    if (eof) {
      out.complete = true;
      break;
    }
    if (got == 0) break;  // no progress and no eof: do not spin
  }
  return out;
}

v3_result rpc_session::mkdir3(const bytes& dir, const std::string& name) {
  v3_result r;
  bytes dir_copy = dir;
  std::string name_copy = name;
  MKDIR3args args{};
  args.where.dir.data.data_len = static_cast<u_int>(dir_copy.size());
  args.where.dir.data.data_val = reinterpret_cast<char*>(dir_copy.data());
  args.where.name = name_copy.data();
  args.attributes.mode.set_it = 1;
  args.attributes.mode.set_mode3_u.mode = 0755;
  run([&](pending& p) {
    p.on_success = [&](void* data) {
      auto* res = static_cast<MKDIR3res*>(data);
      r.status = res->status;
      if (res->status == NFS3_OK) {
        const auto& ok = res->MKDIR3res_u.resok;
        if (ok.obj.handle_follows)
          r.fh = copy_bytes(ok.obj.post_op_fh3_u.handle.data.data_val,
                            ok.obj.post_op_fh3_u.handle.data.data_len);
        if (ok.obj_attributes.attributes_follow)
          r.attrs = from_fattr3(ok.obj_attributes.post_op_attr_u.attributes);
      }
    };
    return rpc_nfs3_mkdir_async(_rpc, on_reply, &args, &p);
  });
  return r;
}

v4_result rpc_session::compound4(const std::vector<v4_op>& ops, uint32_t minor) {
  v4_result r;
  // Argument storage must outlive the call: copies of every handle and name.
  std::vector<bytes> fhs;
  std::vector<std::string> names;
  fhs.reserve(ops.size());
  names.reserve(ops.size());
  uint32_t attr_mask[1] = {(1u << FATTR4_TYPE) | (1u << FATTR4_FSID) | (1u << FATTR4_FILEID)};
  std::vector<nfs_argop4> argv(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    nfs_argop4& a = argv[i];
    std::memset(&a, 0, sizeof a);
    switch (ops[i].what) {
      case v4_op::kind::putrootfh:
        a.argop = OP_PUTROOTFH;
        break;
      case v4_op::kind::putfh:
        a.argop = OP_PUTFH;
        fhs.push_back(ops[i].fh);
        a.nfs_argop4_u.opputfh.object.nfs_fh4_len = static_cast<u_int>(fhs.back().size());
        a.nfs_argop4_u.opputfh.object.nfs_fh4_val = reinterpret_cast<char*>(fhs.back().data());
        break;
      case v4_op::kind::lookup:
        a.argop = OP_LOOKUP;
        names.push_back(ops[i].name);
        a.nfs_argop4_u.oplookup.objname.utf8string_len = static_cast<u_int>(names.back().size());
        a.nfs_argop4_u.oplookup.objname.utf8string_val = names.back().data();
        break;
      case v4_op::kind::lookupp:
        a.argop = OP_LOOKUPP;
        break;
      case v4_op::kind::getfh:
        a.argop = OP_GETFH;
        break;
      case v4_op::kind::getattr:
        a.argop = OP_GETATTR;
        a.nfs_argop4_u.opgetattr.attr_request.bitmap4_len = 1;
        a.nfs_argop4_u.opgetattr.attr_request.bitmap4_val = attr_mask;
        break;
    }
  }
  COMPOUND4args args{};
  args.minorversion = minor;
  args.argarray.argarray_len = static_cast<u_int>(argv.size());
  args.argarray.argarray_val = argv.data();
  run([&](pending& p) {
    p.on_success = [&](void* data) {
      auto* res = static_cast<COMPOUND4res*>(data);
      r.status = res->status;
      for (u_int i = 0; i < res->resarray.resarray_len; ++i) {
        const nfs_resop4& op = res->resarray.resarray_val[i];
        v4_op_result o;
        o.op = op.resop;
        switch (op.resop) {
          case OP_PUTROOTFH:
            o.status = op.nfs_resop4_u.opputrootfh.status;
            break;
          case OP_PUTFH:
            o.status = op.nfs_resop4_u.opputfh.status;
            break;
          case OP_LOOKUP:
            o.status = op.nfs_resop4_u.oplookup.status;
            break;
          case OP_LOOKUPP:
            o.status = op.nfs_resop4_u.oplookupp.status;
            break;
          case OP_GETFH:
            o.status = op.nfs_resop4_u.opgetfh.status;
            if (o.status == NFS4_OK) {
              const auto& h = op.nfs_resop4_u.opgetfh.GETFH4res_u.resok4.object;
              o.fh = copy_bytes(h.nfs_fh4_val, h.nfs_fh4_len);
            }
            break;
          case OP_GETATTR:
            o.status = op.nfs_resop4_u.opgetattr.status;
            if (o.status == NFS4_OK)
              o.attrs = from_fattr4(op.nfs_resop4_u.opgetattr.GETATTR4res_u.resok4.obj_attributes);
            break;
          default:
            o.status = -1;
            break;
        }
        r.ops.push_back(std::move(o));
      }
    };
    return rpc_nfs4_compound_async(_rpc, on_reply, &args, &p);
  });
  return r;
}

}  // namespace dcache_e2e
