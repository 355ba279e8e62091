// Per-export counters.  The set and order are fixed at build time; the
// names are a stable interface (DBus stats, the stats tool, dashboards).
// Lock-free: relaxed atomics, because each counter is independent and a
// reader only needs eventually-consistent totals.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>

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
	X(read_direct_bytes) X(read_dontcache_bytes) X(read_buffered_bytes)               \
	X(write_direct_bytes) X(write_dontcache_bytes) X(write_buffered_bytes)            \
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
	X(read_auto_small) X(read_auto_no_stream) X(read_auto_memory_free)               \
	X(read_auto_reused) X(read_auto_too_big) X(read_auto_stream)                      \
	X(write_auto_small) X(write_auto_no_stream) X(write_auto_memory_free)            \
	X(write_auto_reused) X(write_auto_too_big) X(write_auto_stream)                   \
	X(auto_write_backs) X(auto_write_behind)                                          \
	X(auto_history_entries) X(auto_history_bytes)                                     \
	X(write_bounced_bytes) X(write_unbounced_bytes)                                   \
	X(read_bounced_bytes) X(read_unbounced_bytes)                                     \
	X(bounce_buffers_reused) X(bounce_buffers_mapped) X(bounce_steps_fixed)         \
	X(rpc_steps_fixed) X(auto_yields) X(auto_yield_us)                                \
	X(read_auto_free_reported) X(write_auto_free_reported)
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

// Values computed when read, not counted: the same index space as
// DCACHE_STATS after it (dcache_stats_name/value), so the DBus statistics
// and the metrics (metrics.def) see them as they see the counters.  The
// sums of the per-operation byte counters, the export's places now, its
// ceiling of boundary pages, and 1 for the mode each operation runs (0 for
// the others).  Computed in metrics.cpp (computed_value).
// clang-format off
#define DCACHE_COMPUTED_STATS(X)                                                          \
	X(direct_bytes) X(dontcache_bytes) X(buffered_bytes)                              \
	X(places) X(places_taken) X(requests_waiting) X(boundary_max_pages)               \
	X(read_mode_buffered) X(read_mode_dontcache) X(read_mode_fadvise)                 \
	X(read_mode_direct) X(read_mode_auto)                                             \
	X(write_mode_buffered) X(write_mode_dontcache) X(write_mode_fadvise)              \
	X(write_mode_direct) X(write_mode_direct_data_sync) X(write_mode_direct_file_sync) \
	X(write_mode_auto)
// clang-format on

enum class computed : std::size_t {
#define DCACHE_STAT_ENUM(n) n,
	DCACHE_COMPUTED_STATS(DCACHE_STAT_ENUM)
#undef DCACHE_STAT_ENUM
		count_
};

inline constexpr std::size_t k_computed_count = static_cast<std::size_t>(computed::count_);

inline constexpr std::array<const char *, k_computed_count> k_computed_names = {
#define DCACHE_STAT_NAME(n) #n,
	DCACHE_COMPUTED_STATS(DCACHE_STAT_NAME)
#undef DCACHE_STAT_NAME
};

// The latency histograms' upper bounds (inclusive) in microseconds, from
// metrics.def; a last bucket holds what is above them all.
inline constexpr std::uint64_t k_latency_bounds_us[] = {
#define DCACHE_METRIC(name, type, labels, help)
#define DCACHE_SOURCE(value, metric, labels)
#define DCACHE_LATENCY_BUCKETS_US(...) __VA_ARGS__
#include "metrics.def"
#undef DCACHE_METRIC
#undef DCACHE_SOURCE
#undef DCACHE_LATENCY_BUCKETS_US
};
inline constexpr std::size_t k_latency_buckets = std::size(k_latency_bounds_us) + 1;

// The bucket of a service time: the first whose bound is >= it.
[[nodiscard]] constexpr std::size_t latency_bucket(std::uint64_t ns) noexcept
{
	std::size_t lo = 0;
	std::size_t hi = std::size(k_latency_bounds_us);
	while (lo < hi) {
		const std::size_t mid = (lo + hi) / 2;
		if (k_latency_bounds_us[mid] * 1000 < ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

// Gauges go up and down (add/sub) and describe the present, so a stats
// reset leaves them alone: zeroing one would make it wrong, and the next
// sub() would wrap it.
[[nodiscard]] constexpr bool is_gauge(stat s) noexcept
{
	return s == stat::boundary_pages_current || s == stat::boundary_bytes_current || s == stat::backend_io_uring ||
	       s == stat::drops_pending || s == stat::auto_history_entries || s == stat::auto_history_bytes;
}

// Service times of one kind of request: count, total, min, max and a
// histogram (k_latency_bounds_us).  min/max are kept with CAS loops; a
// reader may see a count, a total and buckets from slightly different
// moments.
class op_latency {
public:
	void record(std::uint64_t ns) noexcept
	{
		_count.fetch_add(1, std::memory_order_relaxed);
		_total_ns.fetch_add(ns, std::memory_order_relaxed);
		_buckets[latency_bucket(ns)].fetch_add(1, std::memory_order_relaxed);
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
	// Each bucket's own count (not cumulative).
	[[nodiscard]] std::uint64_t bucket(std::size_t i) const noexcept
	{
		return i < k_latency_buckets ? _buckets[i].load(std::memory_order_relaxed) : 0;
	}
	void reset() noexcept
	{
		for (auto &b : _buckets)
			b.store(0, std::memory_order_relaxed);
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
	std::array<std::atomic<std::uint64_t>, k_latency_buckets> _buckets{};
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
	[[nodiscard]] std::uint64_t latency_bucket_count(dcache_op op, std::size_t i) const noexcept
	{
		return op >= 0 && op < DCACHE_OP_COUNT ? _latency[op].bucket(i) : 0;
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
