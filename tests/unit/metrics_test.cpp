// The metrics table (core/metrics.def) and the cursor a publisher pushes
// through: the table's rules hold (Prometheus names, one type per name,
// every label set complete, every value of the core a series or left out
// on purpose, every gauge with a row), the values behind the series, and
// what a push hands the sink.
#include "metrics.h"
#include "request_path.hpp"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace dcache::test;

bool metric_name_ok(std::string_view n)
{
	if (!n.starts_with("dcache_") || n.size() <= 7)
		return false;
	return std::all_of(n.begin(), n.end(),
			   [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool label_key_ok(std::string_view k)
{
	return !k.empty() && !k.starts_with("__") && k != "export" && k != "le" && !(k[0] >= '0' && k[0] <= '9') &&
	       std::all_of(k.begin(), k.end(),
			   [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

std::vector<std::string> keys_of(std::string_view labels)
{
	std::vector<std::string> keys;
	while (!labels.empty()) {
		const std::size_t at = labels.find(',');
		std::string_view kv = labels.substr(0, at);
		keys.emplace_back(kv.substr(0, kv.find('=')));
		if (at == labels.npos)
			break;
		labels.remove_prefix(at + 1);
	}
	return keys;
}

TEST(MetricsTable, names_types_and_labels_follow_prometheus_conventions)
{
	std::set<std::string> names;
	for (const metric_row &m : metric_rows()) {
		const std::string name(m.name);
		EXPECT_TRUE(metric_name_ok(name)) << name;
		EXPECT_TRUE(m.type == "counter" || m.type == "gauge" || m.type == "histogram") << name;
		EXPECT_EQ(m.type == "counter", name.ends_with("_total")) << name << ": _total is for counters only";
		EXPECT_FALSE(m.help.empty()) << name;
		EXPECT_TRUE(names.insert(name).second) << name << " twice";
		for (const std::string &k : keys_of(m.labels))
			EXPECT_TRUE(label_key_ok(k)) << name << ": label " << k;
	}
	// A histogram's series names are taken too (a counter of the same name
	// would be another type under one name: Ganesha's registry aborts).
	for (const metric_row &m : metric_rows()) {
		if (m.type != "histogram")
			continue;
		for (const char *suffix : {"_bucket", "_sum", "_count"})
			EXPECT_FALSE(names.contains(std::string(m.name) + suffix)) << m.name << suffix;
	}
}

TEST(MetricsTable, every_source_row_names_a_metric_and_all_its_labels)
{
	std::map<std::string_view, std::vector<std::string>> keys;
	for (const metric_row &m : metric_rows())
		keys[m.name] = keys_of(m.labels);
	for (const source_row &s : source_rows()) {
		const std::string_view v = s.value;
		const std::size_t star = v.find('*');
		EXPECT_TRUE(star == v.npos || star + 1 == v.size()) << v << ": a * only at the end";
		if (s.metric.empty()) {
			EXPECT_TRUE(s.labels.empty()) << v;
			continue;
		}
		ASSERT_TRUE(keys.contains(s.metric)) << v << ": no metric " << s.metric;
		EXPECT_EQ(keys_of(s.labels), keys[s.metric]) << v << ": labels of " << s.metric;
		EXPECT_EQ(std::string_view(s.labels).find('*') != std::string_view::npos, v.ends_with("*"))
			<< v << ": a * in the labels for a pattern's rest, and only there";
	}
}

// Every value the core has (its counters, computed values, latencies).
std::vector<std::string> all_values()
{
	std::vector<std::string> v;
	for (std::size_t i = 0; i < dcache_stats_count(); ++i)
		v.emplace_back(dcache_stats_name(i));
	for (int op = 0; op < DCACHE_OP_COUNT; ++op)
		v.push_back(std::string("latency.") + dcache_op_name(static_cast<dcache_op>(op)));
	return v;
}

TEST(MetricsTable, gauges_have_rows_of_their_own)
{
	// dcache-exporter publishes every gauge of an export, 0 when the DBus
	// statistics leave it out (they skip zeros): it knows them by name.
	std::set<std::string_view> gauges;
	for (const metric_row &m : metric_rows())
		if (m.type == "gauge")
			gauges.insert(m.name);
	for (const source_row &s : source_rows())
		EXPECT_FALSE(gauges.contains(s.metric) && std::string_view(s.value).ends_with("*"))
			<< s.value << ": a gauge's row names its value";
}

TEST(MetricsTable, every_metric_of_a_value_has_an_exact_row)
{
	// Ganesha's endpoint shows one series of every metric the module
	// registers, zero or not; dcache-exporter serves that one from an exact
	// row (it cannot know what a pattern's rest would be).
	std::set<std::string> with_values;
	for (const series &s : all_series())
		with_values.insert(s.name);
	for (const metric_row &m : metric_rows()) {
		if (!with_values.contains(std::string(m.name)))
			continue;
		bool exact = false;
		for (const source_row &s : source_rows())
			exact = exact || (s.metric == m.name && !std::string_view(s.value).ends_with("*"));
		EXPECT_TRUE(exact) << m.name << ": add a row naming one of its values exactly";
	}
}

TEST(MetricsTable, every_exact_row_names_a_value_of_the_core)
{
	const auto values = all_values();
	for (const source_row &s : source_rows()) {
		if (std::string_view(s.value).ends_with("*"))
			continue; // a pattern may wait for its counters (auto_*)
		EXPECT_NE(std::find(values.begin(), values.end(), std::string(s.value)), values.end())
			<< s.value << ": no such value in the core (a typo?)";
	}
}

TEST(MetricsTable, every_value_is_one_series_of_its_type_or_left_out_on_purpose)
{
	const auto &all = all_series();
	const auto left = left_out_values();
	ASSERT_FALSE(all.empty());
	EXPECT_EQ(all.size() + left.size(), all_values().size());
	std::set<std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>> seen;
	std::map<std::string, dcache_metric_type> type_of;
	for (const series &s : all) {
		EXPECT_TRUE(seen.insert({s.name, s.keys, s.values}).second)
			<< s.name << " from " << s.value << " twice";
		auto [it, fresh] = type_of.emplace(s.name, s.type);
		EXPECT_TRUE(fresh || it->second == s.type) << s.name << ": one name, one type";
		switch (s.kind) {
		case value_kind::stored:
			EXPECT_EQ(s.type, is_gauge(static_cast<dcache::core::stat>(s.index)) ? DCACHE_METRIC_GAUGE
											     : DCACHE_METRIC_COUNTER)
				<< s.value;
			EXPECT_NE(resolve(s.value).what, resolved::outcome::unmatched)
				<< s.value << ": a counter of the core without a row in metrics.def";
			break;
		case value_kind::computed:
			EXPECT_EQ(s.type, computed_is_gauge(static_cast<computed>(s.index)) ? DCACHE_METRIC_GAUGE
											    : DCACHE_METRIC_COUNTER)
				<< s.value;
			break;
		case value_kind::latency: EXPECT_EQ(s.type, DCACHE_METRIC_HISTOGRAM) << s.value; break;
		}
		for (const std::string &v : s.values)
			EXPECT_FALSE(v.empty()) << s.name << " from " << s.value;
	}
	for (const std::string &v : left)
		EXPECT_TRUE(v == "reads" || v == "writes" || v.ends_with("_bytes")) << v << " left out";
}

TEST(MetricsTable, rows_resolve_names_by_the_documented_rules)
{
	auto labels = [](std::string_view v) {
		const resolved r = resolve(v);
		std::string out = r.what == resolved::outcome::series	  ? std::string(metric_rows()[r.row].name)
				  : r.what == resolved::outcome::left_out ? "(left out)"
									  : "(unmatched)";
		for (const auto &[k, val] : r.labels)
			out += " " + k + "=" + val;
		return out;
	};
	EXPECT_EQ(labels("read_dontcache"), "dcache_requests_total op=read disposition=dontcache");
	EXPECT_EQ(labels("write_not_direct_mem_misaligned"),
		  "dcache_requests_total op=write disposition=mem_misaligned");
	EXPECT_EQ(labels("fallback_direct_eio"), "dcache_fallbacks_total reason=direct_eio");
	EXPECT_EQ(labels("boundary_released_at_close"), "dcache_boundary_releases_total reason=close");
	EXPECT_EQ(labels("latency.commit"), "dcache_request_duration_microseconds op=commit");
	EXPECT_EQ(labels("write_mode_direct_file_sync"), "dcache_export_mode op=write mode=direct_file_sync");
	EXPECT_EQ(labels("auto_stream"), "dcache_auto_decisions_total reason=stream") << "counters yet to come";
	EXPECT_EQ(labels("reads"), "(left out)");
	EXPECT_EQ(labels("some_new_counter"), "(unmatched)");
	EXPECT_EQ(labels("fallback_"), "(unmatched)") << "a pattern needs a rest";
}

TEST(MetricsTable, latency_buckets_are_upper_bounds_in_microseconds)
{
	EXPECT_EQ(latency_bucket(0), 0u);
	EXPECT_EQ(latency_bucket(k_latency_bounds_us[0] * 1000), 0u) << "le: inclusive";
	EXPECT_EQ(latency_bucket(k_latency_bounds_us[0] * 1000 + 1), 1u);
	EXPECT_EQ(latency_bucket(k_latency_bounds_us[3] * 1000), 3u);
	EXPECT_EQ(latency_bucket(UINT64_MAX), k_latency_buckets - 1);
	for (std::size_t i = 1; i < std::size(k_latency_bounds_us); ++i)
		EXPECT_LT(k_latency_bounds_us[i - 1], k_latency_bounds_us[i]);
}

// ---- the values and the cursor ------------------------------------------

struct recorded {
	std::map<std::string, std::uint64_t> added;			     // "name{k=v,...}" -> sum of increases
	std::map<std::string, std::int64_t> set;			     // -> last value
	std::map<std::string, std::uint64_t> sets;			     // -> how many sets
	std::map<std::string, std::uint64_t> observed;			     // -> observations
	std::map<std::string, std::int64_t> sum;			     // -> sum observed
	std::map<std::string, std::map<std::size_t, std::uint64_t>> buckets; // -> bucket -> observations
};

std::string key_of(std::size_t i)
{
	dcache_metric_series s{};
	EXPECT_TRUE(dcache_metrics_series(i, &s));
	std::string k = std::string(s.name) + "{";
	for (std::size_t l = 0; l < s.nlabels; ++l)
		k += std::string(l ? "," : "") + s.label_keys[l] + "=" + s.label_values[l];
	return k + "}";
}

dcache_metrics_sink sink_into(recorded &r)
{
	dcache_metrics_sink s{};
	s.ctx = &r;
	s.add = [](void *ctx, std::size_t i, std::uint64_t d) { static_cast<recorded *>(ctx)->added[key_of(i)] += d; };
	s.set = [](void *ctx, std::size_t i, std::int64_t v) {
		auto *rec = static_cast<recorded *>(ctx);
		rec->set[key_of(i)] = v;
		rec->sets[key_of(i)]++;
	};
	s.observe = [](void *ctx, std::size_t i, std::int64_t v, std::uint64_t n) {
		auto *rec = static_cast<recorded *>(ctx);
		const std::string k = key_of(i);
		rec->observed[k] += n;
		rec->sum[k] += v * static_cast<std::int64_t>(n);
		rec->buckets[k][latency_bucket(static_cast<std::uint64_t>(v) * 1000)] += n;
	};
	return s;
}

class metrics_cursor : public request_path {
protected:
	void TearDown() override
	{
		dcache_metrics_cursor_free(cursor);
		request_path::TearDown();
	}
	dcache_metrics_cursor *cursor = dcache_metrics_cursor_new();
};

TEST_F(metrics_cursor, computed_values_say_the_modes_and_the_ceiling)
{
	dcache_settings s = dcache_settings_default();
	s.io_cache_read = DCACHE_MODE_DONTCACHE;
	s.io_cache_write = DCACHE_MODE_DIRECT_FILE_SYNC;
	s.boundary_max_pages = 77;
	make(s);
	EXPECT_EQ(stat_of(exp, "read_mode_dontcache"), 1u);
	EXPECT_EQ(stat_of(exp, "read_mode_buffered"), 0u);
	EXPECT_EQ(stat_of(exp, "write_mode_direct_file_sync"), 1u);
	EXPECT_EQ(stat_of(exp, "write_mode_direct"), 0u);
	EXPECT_EQ(stat_of(exp, "boundary_max_pages"), 77u);
	EXPECT_EQ(stat_of(exp, "places"), s.io_queue_depth);
	EXPECT_EQ(stat_of(exp, "places_taken"), 0u);
	EXPECT_EQ(stat_of(exp, "requests_waiting"), 0u);
	s.io_cache_read = DCACHE_MODE_FADVISE;
	dcache_export_update(exp, &s);
	EXPECT_EQ(stat_of(exp, "read_mode_fadvise"), 1u) << "the settings in force, after an update too";
	EXPECT_EQ(stat_of(exp, "read_mode_dontcache"), 0u);
}

TEST_F(metrics_cursor, a_push_hands_over_what_changed_and_counters_stay_monotonic)
{
	ASSERT_NE(cursor, nullptr);
	modes(DCACHE_MODE_DONTCACHE, DCACHE_MODE_BUFFERED);
	payload p(10000, 0);
	for (int i = 0; i < 3; ++i)
		ASSERT_EQ(write(0, p).error, 0);
	recorded r;
	const dcache_metrics_sink sink = sink_into(r);
	dcache_metrics_cursor_push(cursor, exp, &sink);
	EXPECT_EQ(r.added["dcache_requests_total{op=write,disposition=buffered}"], 3u);
	EXPECT_EQ(r.added["dcache_bytes_total{op=write}"], 30000u);
	EXPECT_EQ(r.added["dcache_io_bytes_total{op=write,path=buffered}"], 30000u);
	EXPECT_FALSE(r.added.contains("dcache_requests_total{op=read,disposition=dontcache}")) << "no zero increases";
	EXPECT_EQ(r.set["dcache_export_mode{op=read,mode=dontcache}"], 1);
	EXPECT_EQ(r.set["dcache_export_mode{op=read,mode=buffered}"], 0) << "every gauge set at the first push";
	EXPECT_EQ(r.observed["dcache_request_duration_microseconds{op=write}"], 3u);
	EXPECT_EQ(r.sum["dcache_request_duration_microseconds{op=write}"],
		  static_cast<std::int64_t>(dcache_stats_latency(exp, DCACHE_OP_WRITE).total_ns / 1000));

	// Nothing new: nothing handed over.
	recorded quiet;
	const dcache_metrics_sink quiet_sink = sink_into(quiet);
	dcache_metrics_cursor_push(cursor, exp, &quiet_sink);
	EXPECT_TRUE(quiet.added.empty());
	EXPECT_TRUE(quiet.set.empty()) << "gauges only when they change";
	EXPECT_TRUE(quiet.observed.empty());

	// A stats reset, then one more WRITE: +1, never a decrease.
	dcache_stats_reset(exp);
	ASSERT_EQ(write(0, p).error, 0);
	recorded after;
	const dcache_metrics_sink after_sink = sink_into(after);
	dcache_metrics_cursor_push(cursor, exp, &after_sink);
	EXPECT_EQ(after.added["dcache_requests_total{op=write,disposition=buffered}"], 1u);
	EXPECT_EQ(after.observed["dcache_request_duration_microseconds{op=write}"], 1u);
}

TEST_F(metrics_cursor, end_zeroes_the_gauges_and_the_next_export_counts_from_its_zero)
{
	modes(DCACHE_MODE_DONTCACHE, DCACHE_MODE_BUFFERED);
	payload p(4096, 0);
	ASSERT_EQ(write(0, p).error, 0);
	ASSERT_EQ(write(0, p).error, 0);
	recorded r;
	const dcache_metrics_sink sink = sink_into(r);
	dcache_metrics_cursor_push(cursor, exp, &sink);
	dcache_metrics_cursor_end(cursor, &sink);
	EXPECT_EQ(r.set["dcache_export_mode{op=read,mode=dontcache}"], 0) << "a removed export runs no mode";
	EXPECT_EQ(r.sets["dcache_export_mode{op=read,mode=buffered}"], 1u) << "a gauge already 0 is left alone";
	// The same Export_Id again: a new export, counting from 0.
	modes(DCACHE_MODE_BUFFERED, DCACHE_MODE_BUFFERED);
	ASSERT_EQ(write(0, p).error, 0);
	dcache_metrics_cursor_push(cursor, exp, &sink);
	EXPECT_EQ(r.added["dcache_requests_total{op=write,disposition=buffered}"], 3u) << "2 + 1";
	EXPECT_EQ(r.set["dcache_export_mode{op=read,mode=buffered}"], 1);
	EXPECT_EQ(r.observed["dcache_request_duration_microseconds{op=write}"], 3u);
}

TEST(MetricsHistogram, observations_fill_each_bucket_and_sum_to_the_total)
{
	recorded r;
	const dcache_metrics_sink sink = sink_into(r);
	std::array<std::uint64_t, k_latency_buckets> d{};
	d[0] = 4;		      // 0 .. 10 us
	d[3] = 2;		      // 51 .. 100 us
	d[k_latency_buckets - 1] = 1; // above the last bound
	const std::int64_t low =
		0 + 2 * 51 + static_cast<std::int64_t>(k_latency_bounds_us[std::size(k_latency_bounds_us) - 1]) + 1;
	const std::size_t i = 0;
	const std::string k = key_of(i);
	EXPECT_EQ(observe_buckets(d, low + 123, sink, i), low + 123);
	EXPECT_EQ(r.buckets[k][0], 4u);
	EXPECT_EQ(r.buckets[k][3], 2u);
	EXPECT_EQ(r.buckets[k][k_latency_buckets - 1], 1u);
	EXPECT_EQ(r.sum[k], low + 123);

	// A sum the buckets cannot hold: every value at its bucket's edge.
	recorded tight;
	const dcache_metrics_sink tight_sink = sink_into(tight);
	std::array<std::uint64_t, k_latency_buckets> two{};
	two[1] = 2; // 11 .. 25 us
	EXPECT_EQ(observe_buckets(two, 1000, tight_sink, i), 50) << "both at 25";
	EXPECT_EQ(observe_buckets(two, 0, tight_sink, i), 22) << "both at 11";
	EXPECT_EQ(tight.buckets[k][1], 4u);
}

} // namespace
