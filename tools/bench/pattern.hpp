// Checksummed data patterns: every byte's value is a function of the
// pattern seed and its absolute file offset, so any block (aligned or not,
// written by any writer, in any order) carries its offset and seed, and a
// READ of any range can be verified without knowing who wrote it.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace dcache::bench {

// The 8-byte word covering file offsets [8*index, 8*index+8).
[[nodiscard]] inline std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t index) {
  // splitmix64 finaliser: cheap, and a wrong offset or seed changes every bit
  std::uint64_t z = index * 0x9E3779B97F4A7C15ULL + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Fills buf with the pattern for file range [offset, offset + buf.size()).
void fill_pattern(std::span<std::byte> buf, std::uint64_t offset, std::uint64_t seed);

// Where the first mismatch is, if any.
struct mismatch {
  std::uint64_t offset;  // absolute file offset of the first bad byte
  std::uint8_t expected;
  std::uint8_t actual;
};

// Checks buf against the pattern for [offset, offset + buf.size()).
[[nodiscard]] std::optional<mismatch> verify_pattern(std::span<const std::byte> buf, std::uint64_t offset,
                                                     std::uint64_t seed);

// The seed of file number `file_index` of a job with seed `job_seed`.
[[nodiscard]] inline std::uint64_t file_seed(std::uint64_t job_seed, std::uint64_t file_index) {
  return pattern_word(job_seed, 0xF11E0000ULL + file_index);
}

}  // namespace dcache::bench
