// DCACHE's metrics for Prometheus (docs/monitoring.md): the one table,
// metrics.def, read into the list of series every export publishes, and
// the values behind them.  What a publisher (the adapter, into Ganesha's
// registry) does with them is metrics_cursor.cpp's: the changes since its
// last push.  dcache-exporter reads the same table (tools/dcache_metrics.py
// applies the same rules to the DBus statistics); unit.Metrics* check the
// table and that both read it alike.
//
// Thread-safety: everything may be called from any thread.
#pragma once

#include "dcache/core.h"
#include "stats.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dcache::core {

// The rows of metrics.def, in its order.
struct metric_row {
	std::string_view name;
	std::string_view type; // counter, gauge, histogram
	std::string_view labels;
	std::string_view help;
};
struct source_row {
	std::string_view value;
	std::string_view metric; // empty: left out
	std::string_view labels;
};
[[nodiscard]] std::span<const metric_row> metric_rows() noexcept;
[[nodiscard]] std::span<const source_row> source_rows() noexcept;

// Where one of the core's values goes, by its name (a counter's, a
// computed value's, or latency.<op>): the first source row matching it.
struct resolved {
	enum class outcome : std::uint8_t {
		series,	  // a series of metric_rows()[row]
		left_out, // a row with no metric
		unmatched // no row: a metric of its own (dcache_<name>_total)
	};
	outcome what = outcome::unmatched;
	std::size_t row = 0;
	std::vector<std::pair<std::string, std::string>> labels; // key, value
};
[[nodiscard]] resolved resolve(std::string_view value_name);

// Behind a series: a counter of DCACHE_STATS, a computed value, or an
// operation's latency histogram.
enum class value_kind : std::uint8_t { stored, computed, latency };

struct series {
	std::string value; // the core's name for it (read_dontcache, latency.read, ...)
	std::string name;  // the metric's
	std::string help;
	dcache_metric_type type = DCACHE_METRIC_COUNTER;
	std::vector<std::string> keys;	 // labels besides export, in the metric's order
	std::vector<std::string> values; // and their values
	std::vector<const char *> key_ptrs;
	std::vector<const char *> value_ptrs;
	value_kind kind = value_kind::stored;
	std::size_t index = 0; // into DCACHE_STATS, DCACHE_COMPUTED_STATS or dcache_op
};

// Every series, in the order of the values: DCACHE_STATS, then the
// computed ones, then the latencies.  Built at the first call; empty if
// memory ran out then.
[[nodiscard]] const std::vector<series> &all_series() noexcept;

// The values the rows left out (sums of other series), for the tests.
[[nodiscard]] std::vector<std::string> left_out_values();

[[nodiscard]] std::uint64_t computed_value(const dcache_export &e, computed c) noexcept;
// The computed values that describe the present (all but the byte sums).
[[nodiscard]] bool computed_is_gauge(computed c) noexcept;

// A series' value now (counters and gauges; 0 for a histogram).
[[nodiscard]] std::uint64_t series_value(const dcache_export &e, const series &s) noexcept;

// What a cursor remembers of one latency histogram.
struct histogram_state {
	std::array<std::uint64_t, k_latency_buckets> prev{};
	std::uint64_t prev_total_us = 0;
	std::int64_t carry_us = 0; // what the observed sum still owes the core's
};

// d[b] observations in each bucket b, their values chosen inside it so
// that they sum to target (microseconds) as nearly as the buckets allow:
// sink.observe(series, value, count) for each.  Returns the sum observed.
std::int64_t observe_buckets(const std::array<std::uint64_t, k_latency_buckets> &d, std::int64_t target,
			     const dcache_metrics_sink &sink, std::size_t series) noexcept;

} // namespace dcache::core
