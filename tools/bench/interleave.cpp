#include "interleave.hpp"

#include <map>

namespace dcache::bench {

std::vector<std::uint64_t> interleave_order(std::uint64_t count, std::uint64_t window) {
  if (window < 2) window = 2;
  window += window % 2;
  std::vector<std::uint64_t> out;
  out.reserve(count);
  for (std::uint64_t start = 0, w = 0; start < count; start += window, ++w) {
    const std::uint64_t end = start + window < count ? start + window : count;
    const std::uint64_t first_parity = w % 2;  // even windows: even records first
    for (std::uint64_t pass = 0; pass < 2; ++pass) {
      const std::uint64_t parity = (first_parity + pass) % 2;
      for (std::uint64_t r = start; r < end; ++r)
        if (r % 2 == parity) out.push_back(r);
    }
  }
  return out;
}

boundary_stats analyse_boundaries(const std::vector<std::uint64_t>& order, std::uint64_t record,
                                  std::uint64_t page_size) {
  boundary_stats st;
  if (record == 0 || page_size == 0) return st;
  std::map<std::uint64_t, std::uint64_t> position;  // record -> issue position
  for (std::uint64_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  // page -> records touching it
  std::map<std::uint64_t, std::vector<std::uint64_t>> touching;
  for (const auto& [r, pos] : position) {
    (void)pos;
    const std::uint64_t first = r * record / page_size;
    const std::uint64_t last = ((r + 1) * record - 1) / page_size;
    // only the edge pages can be shared; interior pages belong to r alone
    touching[first].push_back(r);
    if (last != first) touching[last].push_back(r);
  }
  for (const auto& [page, recs] : touching) {
    (void)page;
    if (recs.size() < 2) continue;
    ++st.shared_pages;
    if (recs.size() > 2) {
      ++st.pages_touched_by_more_than_two;
      continue;
    }
    const auto lo = recs[0] < recs[1] ? recs[0] : recs[1];
    const auto hi = recs[0] < recs[1] ? recs[1] : recs[0];
    if (position[lo] < position[hi])
      ++st.lower_first;
    else
      ++st.upper_first;
  }
  return st;
}

}  // namespace dcache::bench
