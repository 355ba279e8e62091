/*
 * Ganesha's FSAL statistics over DBus:
 *   dbus-send --system --print-reply --dest=org.ganesha.nfsd \
 *     /org/ganesha/nfsd/ExportMgr org.ganesha.nfsd.exportstats.GetFSALStats \
 *     string:DCACHE
 * (needs NFS_CORE_PARAM { Enable_FSAL_Stats = true; }).  The reply follows
 * FSAL_GPFS's: the FSAL name, then (name, count, average ms, min ms,
 * max ms) entries, then a status message -- except that the entries are an
 * array of structs, a(stddd), where GPFS puts them all in one struct: a
 * struct's type signature grows with every member and D-Bus caps
 * signatures at 255 characters, which DCACHE's per-export counters exceed
 * with a few exports.  Entries are per export: "export_<id>.<op>" with
 * the service times of READ, WRITE and COMMIT, and "export_<id>.<counter>"
 * for every counter of the core (dispositions, bytes, syncs, fallbacks ...)
 * with zero times (the last few are computed when asked: the places taken,
 * the mode in force, ...), and "export_<id>.<op>.le_<us>" (le_inf for the
 * last) with the number of requests of the latency histogram's bucket up
 * to <us> microseconds, for dcache-exporter.  Entries that are zero are
 * left out.
 */
#include "dcache_internal.h"

#include <dbus/dbus.h>
#include <inttypes.h>

#include "gsh_dbus.h"
#include "gsh_list.h"
#include "log.h"

/* Ganesha refuses GetFSALStats for a module whose stats pointer is NULL;
 * the counters themselves live in the core, per export. */
static struct fsal_stats dcache_fsal_stats;

/* Appends one (s t d d d) struct to the array; false when libdbus ran out
 * of memory. */
static bool append_entry(DBusMessageIter *entries, const char *name,
			 uint64_t count, double avg_ms, double min_ms,
			 double max_ms)
{
	DBusMessageIter entry;

	return dbus_message_iter_open_container(entries, DBUS_TYPE_STRUCT, NULL,
						&entry) &&
	       dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING,
					      &name) &&
	       dbus_message_iter_append_basic(&entry, DBUS_TYPE_UINT64,
					      &count) &&
	       dbus_message_iter_append_basic(&entry, DBUS_TYPE_DOUBLE,
					      &avg_ms) &&
	       dbus_message_iter_append_basic(&entry, DBUS_TYPE_DOUBLE,
					      &min_ms) &&
	       dbus_message_iter_append_basic(&entry, DBUS_TYPE_DOUBLE,
					      &max_ms) &&
	       dbus_message_iter_close_container(entries, &entry);
}

/* The non-zero buckets of op's latency histogram; returns the number of
 * entries appended, or -1 when libdbus failed. */
static ssize_t append_buckets(DBusMessageIter *entries,
			      struct dcache_fsal_export *exp, enum dcache_op op)
{
	const uint64_t *bounds;
	size_t nbounds = dcache_stats_latency_bounds(&bounds);
	uint64_t counts[64];
	size_t nbuckets = dcache_stats_latency_buckets(
		exp->core, op, counts, sizeof(counts) / sizeof(counts[0]));
	char name[128];
	ssize_t n = 0;
	size_t b;

	for (b = 0; b < nbuckets && b < sizeof(counts) / sizeof(counts[0]);
	     b++) {
		if (counts[b] == 0)
			continue;
		if (b < nbounds)
			snprintf(name, sizeof(name), "export_%u.%s.le_%" PRIu64,
				 exp->export_id, dcache_op_name(op), bounds[b]);
		else
			snprintf(name, sizeof(name), "export_%u.%s.le_inf",
				 exp->export_id, dcache_op_name(op));
		if (!append_entry(entries, name, counts[b], 0, 0, 0))
			return -1;
		n++;
	}
	return n;
}

/* Returns the number of entries appended, or -1 when libdbus failed. */
static ssize_t append_export(DBusMessageIter *entries,
			     struct dcache_fsal_export *exp)
{
	char name[128];
	ssize_t n = 0;
	ssize_t buckets;
	size_t i;
	int op;

	for (op = 0; op < DCACHE_OP_COUNT; op++) {
		struct dcache_latency l = dcache_stats_latency(exp->core, op);

		if (l.count == 0)
			continue;
		snprintf(name, sizeof(name), "export_%u.%s", exp->export_id,
			 dcache_op_name(op));
		if (!append_entry(entries, name, l.count,
				  (double)l.total_ns / l.count / 1e6,
				  (double)l.min_ns / 1e6,
				  (double)l.max_ns / 1e6))
			return -1;
		buckets = append_buckets(entries, exp, op);
		if (buckets < 0)
			return -1;
		n += 1 + buckets;
	}
	for (i = 0; i < dcache_stats_count(); i++) {
		uint64_t value = dcache_stats_value(exp->core, i);

		if (value == 0)
			continue;
		snprintf(name, sizeof(name), "export_%u.%s", exp->export_id,
			 dcache_stats_name(i));
		if (!append_entry(entries, name, value, 0, 0, 0))
			return -1;
		n++;
	}
	return n;
}

static void dcache_extract_stats(struct fsal_module *fsal_hdl, void *iter)
{
	DBusMessageIter *reply = iter;
	DBusMessageIter entries;
	const char *message = DCACHE_FSAL_NAME;
	struct glist_head *node;
	ssize_t n = 0;
	bool ok;

	ok = dbus_message_iter_append_basic(reply, DBUS_TYPE_STRING,
					    &message) &&
	     dbus_message_iter_open_container(reply, DBUS_TYPE_ARRAY, "(stddd)",
					      &entries);
	if (!ok) {
		LogCrit(COMPONENT_FSAL,
			"DCACHE: out of memory building the statistics reply");
		goto out;
	}
	PTHREAD_RWLOCK_rdlock(&DCACHE_FSAL_LOCK(fsal_hdl));
	glist_for_each(node, &fsal_hdl->exports)
	{
		ssize_t added = append_export(
			&entries, dcache_export_of(glist_entry(
					  node, struct fsal_export, exports)));

		if (added < 0) {
			n = -1;
			break;
		}
		n += added;
	}
	PTHREAD_RWLOCK_unlock(&DCACHE_FSAL_LOCK(fsal_hdl));
	dbus_message_iter_close_container(reply, &entries);
	message = n < 0 ? "Incomplete: out of memory" : n == 0 ? "None" : "OK";
	dbus_message_iter_append_basic(reply, DBUS_TYPE_STRING, &message);
out:
#if DCACHE_STATS_LOOKUP_KEEPS_REF
	/* Ganesha's GetFSALStats, this hook's only caller, took a reference
	 * on the module to call it (lookup_fsal) and never gives it back: one
	 * per call, each reported when the server stops ("Extra references
	 * (N) hanging around to FSAL DCACHE").  It is given back here, after
	 * the last use it was taken for. */
	fsal_put(fsal_hdl);
#endif
}

static void dcache_reset_stats(struct fsal_module *fsal_hdl)
{
	struct glist_head *node;

	PTHREAD_RWLOCK_rdlock(&DCACHE_FSAL_LOCK(fsal_hdl));
	glist_for_each(node, &fsal_hdl->exports)
	{
		dcache_stats_reset(
			dcache_export_of(
				glist_entry(node, struct fsal_export, exports))
				->core);
	}
	PTHREAD_RWLOCK_unlock(&DCACHE_FSAL_LOCK(fsal_hdl));
}

void dcache_stats_init(struct fsal_module *module)
{
	module->stats = &dcache_fsal_stats;
	module->m_ops.fsal_extract_stats = dcache_extract_stats;
	module->m_ops.fsal_reset_stats = dcache_reset_stats;
}
