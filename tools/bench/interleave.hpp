// The issue order for misaligned interleaved writers (the boundary-page
// workload): records of `record` bytes tile a file back to back; a page
// holding the boundary between records k and k+1 is written half by each.
// The order alternates, window by window, between "even records first" and
// "odd records first", so half of the shared pages see the lower record
// first and half the upper one, while writers never drift more than one
// window apart (which is what bounds the server's half-written-page table).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace dcache::bench {

// Record indices 0..count-1 in issue order. window >= 2 (rounded up to even).
[[nodiscard]] std::vector<std::uint64_t> interleave_order(std::uint64_t count, std::uint64_t window);

// Number of records of `record` bytes that fit in `size`.
[[nodiscard]] inline std::uint64_t record_count(std::uint64_t size, std::uint64_t record) {
  return record ? size / record : 0;
}

// For each page (of page_size) that is touched by more than one record,
// or only partly by one, how many records touch it. Used by the tests and
// by --dry-run to show the boundary-page structure.
struct boundary_stats {
  std::uint64_t shared_pages = 0;  // pages touched by two or more records
  std::uint64_t pages_touched_by_more_than_two = 0;
  std::uint64_t lower_first = 0;  // shared pages whose lower record is issued first
  std::uint64_t upper_first = 0;  // ... whose upper record is issued first
};
[[nodiscard]] boundary_stats analyse_boundaries(const std::vector<std::uint64_t>& order, std::uint64_t record,
                                                std::uint64_t page_size);

}  // namespace dcache::bench
