#include "pattern.hpp"

#include <cstring>

namespace dcache::bench {
namespace {

inline std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t off) {
  return static_cast<std::uint8_t>(pattern_word(seed, off / 8) >> (8 * (off % 8)));
}

}  // namespace

void fill_pattern(std::span<std::byte> buf, std::uint64_t offset, std::uint64_t seed) {
  std::size_t i = 0;
  const std::size_t n = buf.size();
  // unaligned head byte by byte, then whole words (little-endian x86: the
  // word's byte k is file offset 8*index + k), then the tail
  while (i < n && (offset + i) % 8 != 0) {
    buf[i] = std::byte{pattern_byte(seed, offset + i)};
    ++i;
  }
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t w = pattern_word(seed, (offset + i) / 8);
    std::memcpy(buf.data() + i, &w, 8);
  }
  for (; i < n; ++i) buf[i] = std::byte{pattern_byte(seed, offset + i)};
}

std::optional<mismatch> verify_pattern(std::span<const std::byte> buf, std::uint64_t offset,
                                       std::uint64_t seed) {
  std::size_t i = 0;
  const std::size_t n = buf.size();
  auto check_byte = [&](std::size_t k) -> std::optional<mismatch> {
    const auto want = pattern_byte(seed, offset + k);
    const auto got = static_cast<std::uint8_t>(buf[k]);
    if (want != got) return mismatch{offset + k, want, got};
    return std::nullopt;
  };
  while (i < n && (offset + i) % 8 != 0) {
    if (auto m = check_byte(i)) return m;
    ++i;
  }
  for (; i + 8 <= n; i += 8) {
    std::uint64_t got = 0;
    std::memcpy(&got, buf.data() + i, 8);
    if (got != pattern_word(seed, (offset + i) / 8)) {
      for (std::size_t k = i; k < i + 8; ++k)
        if (auto m = check_byte(k)) return m;
    }
  }
  for (; i < n; ++i)
    if (auto m = check_byte(i)) return m;
  return std::nullopt;
}

}  // namespace dcache::bench
