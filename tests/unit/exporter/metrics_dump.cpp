// The core's reading of core/metrics.def, as JSON on standard output: every
// series (the core's value behind it, the metric, its type and labels),
// the values left out and the latency bounds.  exporter_test.py compares
// dcache-exporter's reading of the same table with it.
#include "metrics.h"

#include <cstdio>
#include <string>

namespace {

std::string quoted(const std::string &s)
{
	std::string out = "\"";
	for (const char c : s) {
		if (c == '"' || c == '\\')
			out += '\\';
		out += c;
	}
	return out + "\"";
}

const char *type_name(dcache_metric_type t)
{
	return t == DCACHE_METRIC_GAUGE ? "gauge" : t == DCACHE_METRIC_HISTOGRAM ? "histogram" : "counter";
}

} // namespace

int main()
{
	using namespace dcache::core;
	std::string out = "{\"series\": [";
	const char *sep = "";
	for (const series &s : all_series()) {
		out += sep;
		sep = ", ";
		out += "{\"value\": " + quoted(s.value) + ", \"name\": " + quoted(s.name) + ", \"type\": \"" +
		       type_name(s.type) + "\", \"labels\": [";
		for (std::size_t i = 0; i < s.keys.size(); ++i)
			out += (i ? ", [" : "[") + quoted(s.keys[i]) + ", " + quoted(s.values[i]) + "]";
		out += "]}";
	}
	out += "], \"left_out\": [";
	sep = "";
	for (const std::string &v : left_out_values()) {
		out += sep + quoted(v);
		sep = ", ";
	}
	out += "], \"bounds_us\": [";
	sep = "";
	for (const std::uint64_t b : k_latency_bounds_us) {
		out += sep + std::to_string(b);
		sep = ", ";
	}
	out += "]}\n";
	std::fputs(out.c_str(), stdout);
	return 0;
}
