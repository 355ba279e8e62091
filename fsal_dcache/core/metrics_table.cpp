// metrics.def read into series (metrics.h), and the computed values.
#include "metrics.h"

#include "export_state.h"

#include <iterator>
#include <new>

namespace dcache::core {

namespace {

constexpr metric_row k_metric_rows[] = {
#define DCACHE_METRIC(name, type, labels, help) {name, type, labels, help},
#define DCACHE_SOURCE(value, metric, labels)
#define DCACHE_LATENCY_BUCKETS_US(...)
#include "metrics.def"
#undef DCACHE_METRIC
#undef DCACHE_SOURCE
#undef DCACHE_LATENCY_BUCKETS_US
};

constexpr source_row k_source_rows[] = {
#define DCACHE_METRIC(name, type, labels, help)
#define DCACHE_SOURCE(value, metric, labels) {value, metric, labels},
#define DCACHE_LATENCY_BUCKETS_US(...)
#include "metrics.def"
#undef DCACHE_METRIC
#undef DCACHE_SOURCE
#undef DCACHE_LATENCY_BUCKETS_US
};

// "a,b,c" (or "") split at the commas.
std::vector<std::string_view> split(std::string_view s, char sep)
{
	std::vector<std::string_view> parts;
	while (!s.empty()) {
		const std::size_t at = s.find(sep);
		parts.push_back(s.substr(0, at));
		if (at == s.npos)
			break;
		s.remove_prefix(at + 1);
	}
	return parts;
}

// The rest of name after the row's pattern, or nullopt-like false.
bool matches(std::string_view pattern, std::string_view name, std::string_view &rest)
{
	if (!pattern.empty() && pattern.back() == '*') {
		pattern.remove_suffix(1);
		if (name.size() <= pattern.size() || !name.starts_with(pattern))
			return false;
		rest = name.substr(pattern.size());
		return true;
	}
	rest = {};
	return name == pattern;
}

dcache_metric_type type_of(std::string_view t) noexcept
{
	return t == "gauge" ? DCACHE_METRIC_GAUGE : t == "histogram" ? DCACHE_METRIC_HISTOGRAM : DCACHE_METRIC_COUNTER;
}

void add_series(std::vector<series> &all, std::string_view value, value_kind kind, std::size_t index, bool gauge)
{
	const resolved r = resolve(value);
	if (r.what == resolved::outcome::left_out)
		return;
	series s;
	s.value = value;
	s.kind = kind;
	s.index = index;
	if (r.what == resolved::outcome::series) {
		const metric_row &m = k_metric_rows[r.row];
		s.name = m.name;
		s.help = m.help;
		s.type = type_of(m.type);
		for (const auto &[k, v] : r.labels) {
			s.keys.push_back(k);
			s.values.push_back(v);
		}
	} else {
		s.name = "dcache_" + std::string(value) + (gauge ? "" : "_total");
		s.help = "DCACHE's " + std::string(gauge ? "gauge " : "counter ") + std::string(value) +
			 " (docs/monitoring.md).";
		s.type = gauge ? DCACHE_METRIC_GAUGE : DCACHE_METRIC_COUNTER;
	}
	all.push_back(std::move(s));
}

std::vector<series> build_series()
{
	std::vector<series> all;
	for (std::size_t i = 0; i < k_stat_count; ++i)
		add_series(all, k_stat_names[i], value_kind::stored, i, is_gauge(static_cast<stat>(i)));
	for (std::size_t i = 0; i < k_computed_count; ++i)
		add_series(all, k_computed_names[i], value_kind::computed, i,
			   computed_is_gauge(static_cast<computed>(i)));
	for (int op = 0; op < DCACHE_OP_COUNT; ++op)
		add_series(all, std::string("latency.") + dcache_op_name(static_cast<dcache_op>(op)),
			   value_kind::latency, static_cast<std::size_t>(op), false);
	// The pointers last: the strings no longer move.
	for (series &s : all) {
		for (const std::string &k : s.keys)
			s.key_ptrs.push_back(k.c_str());
		for (const std::string &v : s.values)
			s.value_ptrs.push_back(v.c_str());
	}
	return all;
}

} // namespace

std::span<const metric_row> metric_rows() noexcept
{
	return k_metric_rows;
}

std::span<const source_row> source_rows() noexcept
{
	return k_source_rows;
}

resolved resolve(std::string_view value_name)
{
	resolved r;
	for (const source_row &src : k_source_rows) {
		std::string_view rest;
		if (!matches(src.value, value_name, rest))
			continue;
		if (src.metric.empty()) {
			r.what = resolved::outcome::left_out;
			return r;
		}
		for (std::size_t i = 0; i < std::size(k_metric_rows); ++i)
			if (k_metric_rows[i].name == src.metric)
				r.row = i;
		r.what = resolved::outcome::series;
		for (std::string_view kv : split(src.labels, ',')) {
			const std::size_t eq = kv.find('=');
			std::string v(kv.substr(eq == kv.npos ? kv.size() : eq + 1));
			if (const std::size_t star = v.find('*'); star != v.npos)
				v.replace(star, 1, rest);
			r.labels.emplace_back(std::string(kv.substr(0, eq)), std::move(v));
		}
		return r;
	}
	return r;
}

const std::vector<series> &all_series() noexcept
{
	static const std::vector<series> all = []() noexcept {
		try {
			return build_series();
		} catch (const std::bad_alloc &) {
			return std::vector<series>{};
		}
	}();
	return all;
}

std::vector<std::string> left_out_values()
{
	std::vector<std::string> out;
	auto check = [&](std::string_view v) {
		if (resolve(v).what == resolved::outcome::left_out)
			out.emplace_back(v);
	};
	for (const char *n : k_stat_names)
		check(n);
	for (const char *n : k_computed_names)
		check(n);
	return out;
}

bool computed_is_gauge(computed c) noexcept
{
	return c != computed::direct_bytes && c != computed::dontcache_bytes && c != computed::buffered_bytes;
}

std::uint64_t computed_value(const dcache_export &e, computed c) noexcept
{
	const auto v = [&](stat s) { return e.stats.get(s); };
	const dcache_settings &s = e.settings.current();
	switch (c) {
	case computed::direct_bytes: return v(stat::read_direct_bytes) + v(stat::write_direct_bytes);
	case computed::dontcache_bytes: return v(stat::read_dontcache_bytes) + v(stat::write_dontcache_bytes);
	case computed::buffered_bytes: return v(stat::read_buffered_bytes) + v(stat::write_buffered_bytes);
	case computed::places: return e.places.places();
	case computed::places_taken: return e.places.taken();
	case computed::requests_waiting: return e.places.waiting();
	case computed::boundary_max_pages: return s.boundary_max_pages;
	case computed::read_mode_buffered: return s.io_cache_read == DCACHE_MODE_BUFFERED;
	case computed::read_mode_dontcache: return s.io_cache_read == DCACHE_MODE_DONTCACHE;
	case computed::read_mode_fadvise: return s.io_cache_read == DCACHE_MODE_FADVISE;
	case computed::read_mode_direct: return s.io_cache_read == DCACHE_MODE_DIRECT;
	case computed::write_mode_buffered: return s.io_cache_write == DCACHE_MODE_BUFFERED;
	case computed::write_mode_dontcache: return s.io_cache_write == DCACHE_MODE_DONTCACHE;
	case computed::write_mode_fadvise: return s.io_cache_write == DCACHE_MODE_FADVISE;
	case computed::write_mode_direct: return s.io_cache_write == DCACHE_MODE_DIRECT;
	case computed::write_mode_direct_data_sync: return s.io_cache_write == DCACHE_MODE_DIRECT_DATA_SYNC;
	case computed::write_mode_direct_file_sync: return s.io_cache_write == DCACHE_MODE_DIRECT_FILE_SYNC;
	case computed::count_: break;
	}
	return 0;
}

std::uint64_t series_value(const dcache_export &e, const series &s) noexcept
{
	switch (s.kind) {
	case value_kind::stored: return e.stats.get(s.index);
	case value_kind::computed: return computed_value(e, static_cast<computed>(s.index));
	case value_kind::latency: break;
	}
	return 0;
}

} // namespace dcache::core
