// The NFSv4.1 test client's XDR (RFC 4506): the encoder and decoder of
// nfs41_client.hpp, and the NFSv4.1 data types its ops carry (bitmap4,
// stateid4, verifier4, fattr4, change_info4, nfsace4, channel_attrs4).
// Section numbers refer to RFC 8881.
#include "nfs41_xdr.hpp"

#include <algorithm>
#include <string>

namespace dcache_e2e::nfs41 {

[[noreturn]] void fail(const std::string& what) {
  throw nfs41_error(what);
}

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

// ------------------------------------------------------ NFSv4.1 types --

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

}  // namespace dcache_e2e::nfs41
