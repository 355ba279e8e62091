/*
 * DCACHE's metrics in Ganesha's own registry (releases built with it:
 * DCACHE_HAS_MONITORING, 9.14), served with Ganesha's on Monitoring_Port
 * (default 9587) when NFS_CORE_PARAM { Enable_Metrics = true; }.  The
 * series are the core's table (core/metrics.def, dcache_metrics_*), each
 * with the label export="export_id=<Export_Id>", the value Ganesha gives
 * its own per-export series.
 *
 * The registry (ntirpc's monitoring.h) has no callback at scrape time and
 * no set for counters, so a thread of the module pushes what changed once
 * a second (METRICS_PERIOD_S), from the counters the core keeps anyway:
 * the request path does no more than it did.
 *
 * Registration never aborts Ganesha: a name registered again with another
 * type would (prometheus-cpp-lite throws through the C wrapper).  Every
 * name is the table's, with one type each (unit.MetricsTable.*), and each
 * Export_Id's series are registered once per process: an export removed
 * and added again, or reloaded, takes the handles it had.  The registry
 * cannot remove a series, so those of a removed export stay, its counters
 * at their last values and its gauges at 0; an export added again under
 * its Export_Id counts on from there.
 */
#include "dcache_internal.h"

#include "log.h"
#include "monitoring.h"

#ifndef USE_MONITORING
#error "DCACHE_HAS_MONITORING without USE_MONITORING in Ganesha's config.h: monitoring.h's calls would do nothing"
#endif

#include <pthread.h>
#include <string.h>
#include <time.h>

#define METRICS_PERIOD_S 1

union metric_handle {
	counter_metric_handle_t counter;
	gauge_metric_handle_t gauge;
	histogram_metric_handle_t histogram;
};

/* One per Export_Id seen since the start. */
struct metrics_export {
	uint16_t export_id;
	struct dcache_export *core; /* NULL while the export is gone */
	struct dcache_metrics_cursor *cursor;
	union metric_handle *handles; /* by series */
};

static struct {
	pthread_mutex_t lock; /* all of it */
	pthread_cond_t wake;
	pthread_t thread;
	bool running;
	bool stopping;
	bool disabled_logged;
	struct metrics_export **exports;
	size_t n_exports;
} metrics = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
};

static void sink_add(void *ctx, size_t series, uint64_t delta)
{
	struct metrics_export *e = ctx;

	monitoring__counter_inc(e->handles[series].counter, (int64_t)delta);
}

static void sink_set(void *ctx, size_t series, int64_t value)
{
	struct metrics_export *e = ctx;

	monitoring__gauge_set(e->handles[series].gauge, value);
}

static void sink_observe(void *ctx, size_t series, int64_t value,
			 uint64_t count)
{
	struct metrics_export *e = ctx;

	while (count-- > 0)
		monitoring__histogram_observe(e->handles[series].histogram,
					      value);
}

static void push(struct metrics_export *e, bool end)
{
	const struct dcache_metrics_sink sink = {
		.ctx = e,
		.add = sink_add,
		.set = sink_set,
		.observe = sink_observe,
	};

	dcache_metrics_cursor_push(e->cursor, e->core, &sink);
	if (end)
		dcache_metrics_cursor_end(e->cursor, &sink);
}

static histogram_buckets_t latency_buckets(void)
{
	static int64_t bounds[64];
	const uint64_t *core_bounds;
	size_t n = dcache_stats_latency_bounds(&core_bounds);
	size_t i;

	if (n > sizeof(bounds) / sizeof(bounds[0]))
		n = sizeof(bounds) / sizeof(bounds[0]);
	for (i = 0; i < n; i++)
		bounds[i] = (int64_t)core_bounds[i];
	return (histogram_buckets_t){.buckets = bounds, .count = n};
}

/* Every series of the table for this Export_Id, in Ganesha's registry. */
static void register_series(struct metrics_export *e)
{
	size_t count = dcache_metrics_count();
	char export_label[32];
	size_t i;

	snprintf(export_label, sizeof(export_label), "export_id=%u",
		 e->export_id);
	for (i = 0; i < count; i++) {
		struct dcache_metric_series s;
		metric_label_t labels[8];
		uint16_t n = 0;
		size_t l;

		if (!dcache_metrics_series(i, &s) ||
		    s.nlabels + 1 > sizeof(labels) / sizeof(labels[0]))
			continue;
		labels[n++] = METRIC_LABEL("export", export_label);
		for (l = 0; l < s.nlabels; l++)
			labels[n++] = METRIC_LABEL(s.label_keys[l],
						   s.label_values[l]);
		switch (s.type) {
		case DCACHE_METRIC_COUNTER:
			e->handles[i].counter = monitoring__register_counter(
				s.name,
				METRIC_METADATA(s.help, METRIC_UNIT_NONE),
				labels, n);
			break;
		case DCACHE_METRIC_GAUGE:
			e->handles[i].gauge = monitoring__register_gauge(
				s.name,
				METRIC_METADATA(s.help, METRIC_UNIT_NONE),
				labels, n);
			break;
		case DCACHE_METRIC_HISTOGRAM:
			e->handles[i].histogram = monitoring__register_histogram(
				s.name,
				METRIC_METADATA(s.help,
						METRIC_UNIT_MICROSECOND),
				labels, n, latency_buckets());
			break;
		}
	}
}

static struct metrics_export *find_export(uint16_t export_id)
{
	size_t i;

	for (i = 0; i < metrics.n_exports; i++)
		if (metrics.exports[i]->export_id == export_id)
			return metrics.exports[i];
	return NULL;
}

static struct metrics_export *new_export(uint16_t export_id)
{
	struct metrics_export *e;
	struct dcache_metrics_cursor *cursor = dcache_metrics_cursor_new();

	if (cursor == NULL)
		return NULL;
	e = gsh_calloc(1, sizeof(*e));
	e->export_id = export_id;
	e->cursor = cursor;
	e->handles =
		gsh_calloc(dcache_metrics_count() + 1, sizeof(*e->handles));
	register_series(e);
	metrics.exports =
		gsh_realloc(metrics.exports,
			    (metrics.n_exports + 1) * sizeof(*metrics.exports));
	metrics.exports[metrics.n_exports++] = e;
	return e;
}

static void *metrics_thread(void *arg)
{
	struct timespec until;
	size_t i;

	(void)arg;
	SetNameFunction("dcache_metrics");
	(void)pthread_setname_np(pthread_self(), "dcache_metrics");
	PTHREAD_MUTEX_lock(&metrics.lock);
	while (!metrics.stopping) {
		for (i = 0; i < metrics.n_exports; i++)
			if (metrics.exports[i]->core != NULL)
				push(metrics.exports[i], false);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += METRICS_PERIOD_S;
		(void)pthread_cond_timedwait(&metrics.wake, &metrics.lock,
					     &until);
	}
	PTHREAD_MUTEX_unlock(&metrics.lock);
	return NULL;
}

void dcache_metrics_export_added(struct dcache_fsal_export *exp)
{
	struct metrics_export *e;

	PTHREAD_MUTEX_lock(&metrics.lock);
	if (!nfs_param.core_param.enable_metrics) {
		if (!metrics.disabled_logged)
			LogInfo(COMPONENT_FSAL,
				"DCACHE: metrics not registered: NFS_CORE_PARAM Enable_Metrics is false");
		metrics.disabled_logged = true;
		goto out;
	}
	e = find_export(exp->export_id);
	if (e == NULL)
		e = new_export(exp->export_id);
	if (e == NULL) {
		LogCrit(COMPONENT_FSAL,
			"DCACHE: export %u: no memory for its metrics; served without them",
			exp->export_id);
		goto out;
	}
	e->core = exp->core;
	push(e, false);
	if (!metrics.running && !metrics.stopping) {
		int rc = pthread_create(&metrics.thread, NULL, metrics_thread,
					NULL);

		if (rc == 0)
			metrics.running = true;
		else
			LogCrit(COMPONENT_FSAL,
				"DCACHE: no thread for the metrics (%s): they stay as at registration",
				strerror(rc));
	}
out:
	PTHREAD_MUTEX_unlock(&metrics.lock);
}

void dcache_metrics_export_removed(struct dcache_fsal_export *exp)
{
	struct metrics_export *e;

	PTHREAD_MUTEX_lock(&metrics.lock);
	e = find_export(exp->export_id);
	if (e != NULL && e->core == exp->core) {
		push(e, true); /* its last changes, then gauges to 0 */
		e->core = NULL;
	}
	PTHREAD_MUTEX_unlock(&metrics.lock);
}

void dcache_metrics_shutdown(void)
{
	bool running;
	size_t i;

	PTHREAD_MUTEX_lock(&metrics.lock);
	metrics.stopping = true;
	running = metrics.running;
	metrics.running = false;
	pthread_cond_signal(&metrics.wake);
	PTHREAD_MUTEX_unlock(&metrics.lock);
	if (running)
		pthread_join(metrics.thread, NULL);
	/* The registry keeps the series; only our side of them goes. */
	for (i = 0; i < metrics.n_exports; i++) {
		dcache_metrics_cursor_free(metrics.exports[i]->cursor);
		gsh_free(metrics.exports[i]->handles);
		gsh_free(metrics.exports[i]);
	}
	gsh_free(metrics.exports);
	metrics.exports = NULL;
	metrics.n_exports = 0;
}
