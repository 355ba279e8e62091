// Per-export counters.  The set and order are fixed at build time; the
// names are a stable interface (DBus stats, the stats tool, dashboards).
// Lock-free: relaxed atomics, because each counter is independent and a
// reader only needs eventually-consistent totals.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dcache/core.h"

namespace dcache::core {

// clang-format off
#define DCACHE_STATS(X)                                                                   \
	X(reads) X(writes) X(read_bytes) X(write_bytes)                                   \
	X(read_buffered) X(read_dontcache) X(read_fadvise) X(read_direct)                 \
	X(read_not_direct_too_small) X(read_not_direct_no_alignment)                      \
	X(read_not_direct_fallback) X(read_bounce_copies)                                 \
	X(write_buffered) X(write_dontcache) X(write_fadvise) X(write_direct)             \
	X(write_split) X(write_not_direct_no_alignment) X(write_not_direct_too_small)     \
	X(write_not_direct_no_middle) X(write_not_direct_mem_misaligned)                  \
	X(write_not_direct_fallback) X(write_bounce_copies)                               \
	X(direct_bytes) X(dontcache_bytes) X(buffered_bytes)                              \
	X(syncs_fsync) X(syncs_fdatasync) X(writes_reply_stable) X(writes_raised_stable)  \
	X(commits) X(fadvise_calls) X(fadvise_errors)                                     \
	X(fallback_no_dontcache) X(fallback_no_odirect) X(fallback_direct_einval)         \
	X(fallback_direct_eio) X(fallback_direct_nospace) X(short_transfers) X(errors)    \
	X(boundary_held) X(boundary_completed) X(boundary_released_by_age)                \
	X(boundary_released_by_ceiling) X(boundary_released_at_close)                     \
	X(boundary_released_by_truncate) X(boundary_kept_at_commit)                       \
	X(boundary_not_held) X(boundary_release_no_fd)                                    \
	X(edge_writebacks) X(edge_writeback_errors)                                       \
	X(boundary_pages_current) X(boundary_bytes_current)                              \
	X(read_nowait_hits) X(read_nowait_partial) X(read_nowait_misses)                  \
	X(fallback_no_nowait) X(fallback_no_io_uring) X(backend_io_uring)                 \
	X(io_deferred) X(io_inline) X(fallback_no_personality) X(write_fence_waits)       \
	X(steps_in_caller) X(steps_blocking_in_caller) X(drops_deferred)            \
	X(admission_waits)                                                                \
	X(dio_align_statx) X(dio_align_xfs_dioinfo) X(dio_align_btrfs)                    \
	X(dio_align_block_device) X(dio_align_none) X(drops_pending)                     \
	X(admission_waits_in_worker)                                                      \
	X(write_bounced_bytes) X(write_unbounced_bytes)                                   \
	X(read_bounced_bytes) X(read_unbounced_bytes)                                     \
	X(bounce_buffers_reused) X(bounce_buffers_mapped) X(bounce_steps_fixed)
// clang-format on

enum class stat : std::size_t {
#define DCACHE_STAT_ENUM(n) n,
	DCACHE_STATS(DCACHE_STAT_ENUM)
#undef DCACHE_STAT_ENUM
		count_
};

inline constexpr std::size_t k_stat_count = static_cast<std::size_t>(stat::count_);

inline constexpr std::array<const char *, k_stat_count> k_stat_names = {
#define DCACHE_STAT_NAME(n) #n,
	DCACHE_STATS(DCACHE_STAT_NAME)
#undef DCACHE_STAT_NAME
};

// Gauges go up and down (add/sub) and describe the present, so a stats
// reset leaves them alone: zeroing one would make it wrong, and the next
// sub() would wrap it.
[[nodiscard]] constexpr bool is_gauge(stat s) noexcept
{
	return s == stat::boundary_pages_current || s == stat::boundary_bytes_current || s == stat::backend_io_uring ||
	       s == stat::drops_pending;
}

// Service times of one kind of request.  min/max are kept with CAS loops;
// a reader may see a count and total from slightly different moments.
class op_latency {
public:
	void record(std::uint64_t ns) noexcept
	{
		_count.fetch_add(1, std::memory_order_relaxed);
		_total_ns.fetch_add(ns, std::memory_order_relaxed);
		std::uint64_t cur = _min_ns.load(std::memory_order_relaxed);
		while (ns < cur && !_min_ns.compare_exchange_weak(cur, ns, std::memory_order_relaxed)) {
		}
		cur = _max_ns.load(std::memory_order_relaxed);
		while (ns > cur && !_max_ns.compare_exchange_weak(cur, ns, std::memory_order_relaxed)) {
		}
	}
	[[nodiscard]] dcache_latency get() const noexcept
	{
		const std::uint64_t count = _count.load(std::memory_order_relaxed);
		const std::uint64_t min = _min_ns.load(std::memory_order_relaxed);
		return {count, _total_ns.load(std::memory_order_relaxed), count != 0 ? min : 0,
			_max_ns.load(std::memory_order_relaxed)};
	}
	void reset() noexcept
	{
		_count.store(0, std::memory_order_relaxed);
		_total_ns.store(0, std::memory_order_relaxed);
		_min_ns.store(UINT64_MAX, std::memory_order_relaxed);
		_max_ns.store(0, std::memory_order_relaxed);
	}

private:
	std::atomic<std::uint64_t> _count{0};
	std::atomic<std::uint64_t> _total_ns{0};
	std::atomic<std::uint64_t> _min_ns{UINT64_MAX};
	std::atomic<std::uint64_t> _max_ns{0};
};

class export_stats {
public:
	void record(dcache_op op, std::uint64_t ns) noexcept
	{
		if (op >= 0 && op < DCACHE_OP_COUNT)
			_latency[op].record(ns);
	}
	[[nodiscard]] dcache_latency latency(dcache_op op) const noexcept
	{
		return op >= 0 && op < DCACHE_OP_COUNT ? _latency[op].get() : dcache_latency{};
	}
	void add(stat s, std::uint64_t n = 1) noexcept
	{
		_values[static_cast<std::size_t>(s)].fetch_add(n, std::memory_order_relaxed);
	}
	// Gauges only (see is_gauge).
	void sub(stat s, std::uint64_t n = 1) noexcept
	{
		_values[static_cast<std::size_t>(s)].fetch_sub(n, std::memory_order_relaxed);
	}
	[[nodiscard]] std::uint64_t get(stat s) const noexcept { return get(static_cast<std::size_t>(s)); }
	[[nodiscard]] std::uint64_t get(std::size_t i) const noexcept
	{
		return i < k_stat_count ? _values[i].load(std::memory_order_relaxed) : 0;
	}
	void reset() noexcept
	{
		for (std::size_t i = 0; i < k_stat_count; ++i)
			if (!is_gauge(static_cast<stat>(i)))
				_values[i].store(0, std::memory_order_relaxed);
		for (auto &l : _latency)
			l.reset();
	}

private:
	std::array<std::atomic<std::uint64_t>, k_stat_count> _values{};
	std::array<op_latency, DCACHE_OP_COUNT> _latency{};
};

} // namespace dcache::core
