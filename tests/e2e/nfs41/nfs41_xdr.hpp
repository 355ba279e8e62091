// The NFSv4.1 test client's internals, shared by its files and not part of
// its API (that is nfs41_client.hpp): the bounds the decoders apply, the
// XDR of the NFSv4.1 data types (nfs41_xdr.cpp) and of a COMPOUND's ops and
// results (nfs41_compound.cpp), which the session code (nfs41_client.cpp)
// sends and reads. Section numbers refer to RFC 8881.
//
// Thread-safety: free functions over the caller's encoder or decoder; no
// shared state.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nfs41_client.hpp"

namespace dcache_e2e::nfs41 {

// Bounds on what the decoders accept.
inline constexpr size_t k_max_fh = 128;          // NFS4_FHSIZE
inline constexpr size_t k_max_name = 4096;       // generous bound for names/owners
inline constexpr size_t k_max_data = 16u << 20;  // READ payload bound

// Throws nfs41_error(what): a malformed reply, a protocol violation, a
// request the client cannot send.
[[noreturn]] void fail(const std::string& what);

// ------------------------------------------- NFSv4.1 types (nfs41_xdr.cpp) --

void encode_bitmap(xdr_encoder& x, std::span<const uint32_t> attrs);
std::vector<uint32_t> decode_bitmap(xdr_decoder& d);
void encode_stateid(xdr_encoder& x, const stateid4& s);
stateid4 decode_stateid(xdr_decoder& d);
std::array<uint8_t, 8> decode_verifier(xdr_decoder& d);
// fattr4: bitmap + opaque attribute values in ascending bit order (5.2).
attributes decode_fattr(xdr_decoder& d);
void skip_change_info(xdr_decoder& d);
void skip_nfsace(xdr_decoder& d);
void decode_channel_attrs(xdr_decoder& d, uint32_t* max_request, uint32_t* max_response);

// ------------------------------------------ COMPOUND (nfs41_compound.cpp) --

// What CREATE_SESSION and EXCHANGE_ID return; only the client needs these.
struct setup_reply {
  uint64_t clientid = 0;
  uint32_t sequenceid = 0;
  std::array<uint8_t, 16> sessionid{};
  uint32_t max_request = 0, max_response = 0;
  uint32_t seq_status_flags = 0;
};

// A compound's encoded ops plus how many there are.
struct encoded_ops {
  xdr_encoder x;
  uint32_t count = 0;
};

// Encodes one of the public ops (see op's builders).
void encode_op(xdr_encoder& x, const op& o, uint64_t clientid, const std::string& owner);

// COMPOUND4args around already-encoded ops.
xdr_encoder compound_args(const encoded_ops& ops);

// A COMPOUND4res: the ops' results, and what EXCHANGE_ID, CREATE_SESSION
// and SEQUENCE returned.
struct decoded_compound {
  compound_result result;
  setup_reply setup;
};

// Reads the results up to the first failed op (the last one the server ran).
decoded_compound decode_compound(const bytes& body);

}  // namespace dcache_e2e::nfs41
