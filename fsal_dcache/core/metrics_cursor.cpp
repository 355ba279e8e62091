// The metrics' C API (dcache/core.h, "metrics"): the series table, and the
// cursor a publisher pushes an export's changes through.
//
// A registry whose counters only go up and whose histograms only take
// observations (Ganesha's) is fed from the core's totals: each push adds
// a counter's increase since the last (the whole value after a drop: a
// stats reset, or a new export under an Export_Id that had one), sets a
// gauge that changed, and observes, for each latency bucket, as many
// values as it gained, chosen inside the bucket so that the observed sum
// follows the core's total (what cannot be placed this time is carried to
// the next push).
#include "metrics.h"

#include "export_state.h"

#include <algorithm>
#include <array>
#include <climits>
#include <new>
#include <vector>

namespace dcache::core {
namespace {

// Bucket b's values, in whole microseconds: (bound[b-1], bound[b]].
std::int64_t bucket_low(std::size_t b) noexcept
{
	return b == 0 ? 0 : static_cast<std::int64_t>(k_latency_bounds_us[b - 1]) + 1;
}

std::int64_t bucket_high(std::size_t b) noexcept
{
	return b + 1 < k_latency_buckets ? static_cast<std::int64_t>(k_latency_bounds_us[b]) : INT64_MAX;
}

} // namespace

std::int64_t observe_buckets(const std::array<std::uint64_t, k_latency_buckets> &d, std::int64_t target,
			     const dcache_metrics_sink &sink, std::size_t series) noexcept
{
	std::int64_t sum = 0;
	for (std::size_t b = 0; b < k_latency_buckets; ++b)
		sum += static_cast<std::int64_t>(d[b]) * bucket_low(b);
	std::int64_t extra = std::max<std::int64_t>(target - sum, 0);
	auto observe = [&](std::int64_t v, std::uint64_t n) {
		if (n > 0)
			sink.observe(sink.ctx, series, v, n);
	};
	// From the top: the last bucket takes any amount.
	for (std::size_t b = k_latency_buckets; b-- > 0;) {
		const std::uint64_t n = d[b];
		if (n == 0)
			continue;
		const std::int64_t lo = bucket_low(b);
		if (b + 1 == k_latency_buckets) {
			const auto count = static_cast<std::int64_t>(n);
			const std::int64_t each = extra / count;
			const auto more = static_cast<std::uint64_t>(extra % count);
			observe(lo + each + 1, more);
			observe(lo + each, n - more);
			sum += extra;
			extra = 0;
			continue;
		}
		const std::int64_t room = bucket_high(b) - lo;
		const auto full = std::min<std::uint64_t>(n, room > 0 ? static_cast<std::uint64_t>(extra / room) : 0);
		observe(lo + room, full);
		extra -= static_cast<std::int64_t>(full) * room;
		sum += static_cast<std::int64_t>(full) * room;
		std::uint64_t left = n - full;
		if (left > 0 && extra > 0) {
			observe(lo + extra, 1);
			sum += extra;
			extra = 0;
			--left;
		}
		observe(lo, left);
	}
	return sum;
}

} // namespace dcache::core

struct dcache_metrics_cursor {
	std::vector<std::uint64_t> prev;		       // counters and gauges
	std::vector<dcache::core::histogram_state> histograms; // by series, used for histograms only
	bool started = false;
};

namespace dcache::core {
namespace {

void push_histogram(histogram_state &h, const dcache_export &e, const series &s, std::size_t i,
		    const dcache_metrics_sink &sink) noexcept
{
	const auto op = static_cast<dcache_op>(s.index);
	std::array<std::uint64_t, k_latency_buckets> cur{};
	bool dropped = false;
	for (std::size_t b = 0; b < k_latency_buckets; ++b) {
		cur[b] = e.stats.latency_bucket_count(op, b);
		dropped = dropped || cur[b] < h.prev[b];
	}
	const std::uint64_t total_us = e.stats.latency(op).total_ns / 1000;
	dropped = dropped || total_us < h.prev_total_us;
	if (dropped)
		h = {};
	std::array<std::uint64_t, k_latency_buckets> d{};
	bool any = false;
	for (std::size_t b = 0; b < k_latency_buckets; ++b) {
		d[b] = cur[b] - h.prev[b];
		any = any || d[b] != 0;
	}
	if (!any)
		return; // the total's share waits for its observations
	const std::int64_t target = static_cast<std::int64_t>(total_us - h.prev_total_us) + h.carry_us;
	h.carry_us = target - observe_buckets(d, target, sink, i);
	h.prev = cur;
	h.prev_total_us = total_us;
}

} // namespace
} // namespace dcache::core

using namespace dcache::core;

extern "C" {

size_t dcache_metrics_count(void) noexcept
{
	return all_series().size();
}

bool dcache_metrics_series(size_t index, struct dcache_metric_series *out) noexcept
{
	const auto &all = all_series();
	if (index >= all.size() || out == nullptr)
		return false;
	const series &s = all[index];
	*out = {s.name.c_str(), s.help.c_str(), s.type, s.keys.size(), s.key_ptrs.data(), s.value_ptrs.data()};
	return true;
}

struct dcache_metrics_cursor *dcache_metrics_cursor_new(void) noexcept
{
	try {
		auto *c = new dcache_metrics_cursor;
		c->prev.resize(all_series().size());
		c->histograms.resize(all_series().size());
		return c;
	} catch (const std::bad_alloc &) {
		return nullptr;
	}
}

void dcache_metrics_cursor_free(struct dcache_metrics_cursor *cursor) noexcept
{
	delete cursor;
}

void dcache_metrics_cursor_push(struct dcache_metrics_cursor *cursor, const struct dcache_export *exp,
				const struct dcache_metrics_sink *sink) noexcept
{
	if (cursor == nullptr || exp == nullptr || sink == nullptr)
		return;
	const auto &all = all_series();
	for (std::size_t i = 0; i < all.size() && i < cursor->prev.size(); ++i) {
		const series &s = all[i];
		std::uint64_t &prev = cursor->prev[i];
		switch (s.type) {
		case DCACHE_METRIC_COUNTER: {
			const std::uint64_t cur = series_value(*exp, s);
			const std::uint64_t delta = cur >= prev ? cur - prev : cur;
			if (delta != 0)
				sink->add(sink->ctx, i, delta);
			prev = cur;
			break;
		}
		case DCACHE_METRIC_GAUGE: {
			const std::uint64_t cur = series_value(*exp, s);
			if (!cursor->started || cur != prev)
				sink->set(sink->ctx, i, static_cast<std::int64_t>(cur));
			prev = cur;
			break;
		}
		case DCACHE_METRIC_HISTOGRAM: push_histogram(cursor->histograms[i], *exp, s, i, *sink); break;
		}
	}
	cursor->started = true;
}

void dcache_metrics_cursor_end(struct dcache_metrics_cursor *cursor, const struct dcache_metrics_sink *sink) noexcept
{
	if (cursor == nullptr || sink == nullptr)
		return;
	const auto &all = all_series();
	for (std::size_t i = 0; i < all.size() && i < cursor->prev.size(); ++i) {
		if (all[i].type == DCACHE_METRIC_GAUGE && cursor->prev[i] != 0)
			sink->set(sink->ctx, i, 0);
		cursor->prev[i] = 0;
		cursor->histograms[i] = {};
	}
	cursor->started = false;
}

} // extern "C"
