// The NFSv4.1 test client's COMPOUNDs (RFC 8881): each op's arguments and
// result body in XDR, the COMPOUND4args around the ops and the COMPOUND4res
// they come back in, and the names of ops and statuses for messages.
#include "nfs41_xdr.hpp"

#include <algorithm>
#include <string>

namespace dcache_e2e::nfs41 {
namespace {

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

}  // namespace

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
        // createattrs: size (4) when truncating, then mode (33), in
        // attribute order
        xdr_encoder values;
        if (o.truncate) {
          const uint32_t attrs[] = {4, 33};
          encode_bitmap(x, attrs);
          values.u64(0);
        } else {
          const uint32_t attrs[] = {33};
          encode_bitmap(x, attrs);
        }
        values.u32(0644);
        x.opaque_var(values.buffer());
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

}  // namespace dcache_e2e::nfs41
