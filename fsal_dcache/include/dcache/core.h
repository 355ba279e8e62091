/*
 * The narrow C API between the Ganesha adapter (C, the only code that
 * includes Ganesha headers) and the C++ core (policy, planning, stats) with
 * its I/O layer (the only code that makes syscalls).
 *
 * Rules of the seam:
 *  - plain C types only; no exceptions cross it (every entry point is
 *    noexcept on the C++ side and reports errors as errno values);
 *  - memory allocated by the core is freed by the core (dcache_*_free);
 *  - thread-safety is stated per function.
 */
#ifndef DCACHE_CORE_H
#define DCACHE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- settings ---------------------------------------------------------- */

/* Values mirror knfsd's io_cache_read / io_cache_write numbers; FADVISE and
 * AUTO have no kernel number and are accepted only by name.  AUTO is not a
 * way of doing I/O: each request of an auto export is resolved to buffered
 * or to the export's stream mode (Auto_Read_Stream, Auto_Write_Stream) by
 * the core's auto policy before it is planned. */
enum dcache_mode {
	DCACHE_MODE_BUFFERED = 0,
	DCACHE_MODE_DONTCACHE = 1,
	DCACHE_MODE_DIRECT = 2,
	DCACHE_MODE_DIRECT_DATA_SYNC = 3, /* IO_Cache_Write only */
	DCACHE_MODE_DIRECT_FILE_SYNC = 4, /* IO_Cache_Write only */
	DCACHE_MODE_FADVISE = 100,
	DCACHE_MODE_AUTO = 101,
	/* Auto_Write_Stream only, resolved with the rest of auto: direct while
	 * the export's cached requests are quiet, dontcache while not. */
	DCACHE_MODE_DIRECT_WHEN_QUIET = 102,
};

/* What to do with the direct middle of a WRITE whose payload is not
 * aligned in memory (the usual case for a payload decoded off TCP). */
enum dcache_mem_misaligned {
	DCACHE_MEM_MISALIGNED_BOUNCE = 0,   /* copy the middle to an aligned buffer */
	DCACHE_MEM_MISALIGNED_BUFFERED = 1, /* the kernel's choice: no split */
};

/* How an export submits its I/O (IO_Backend).  Chosen at
 * dcache_export_new; a changed value takes effect at the next
 * restart/re-export (dcache_export_update logs that and keeps the
 * running backend). */
enum dcache_io_backend {
	DCACHE_IO_BACKEND_IO_URING = 0, /* default; falls back to sync if unavailable */
	DCACHE_IO_BACKEND_SYNC = 1,
};

/* What auto does with a WRITE stream while memory is spare
 * (Auto_Write_Spare_Memory; core/auto_policy.h). */
enum dcache_spare_memory {
	/* cache it, unless the machine reports its free memory to a host
	 * (free page reporting): there a page the page cache takes from free
	 * memory costs a fault in the host */
	DCACHE_SPARE_UNLESS_REPORTED = 0,
	DCACHE_SPARE_CACHE = 1,	 /* cache it (written behind) */
	DCACHE_SPARE_STREAM = 2, /* the stream's way all the same */
};

/* Every entry point is noexcept on the C++ side: the definitions must say
 * so too, or they do not compile. */
#ifdef __cplusplus
#define DCACHE_NOEXCEPT noexcept
#else
#define DCACHE_NOEXCEPT
#endif

#ifdef __cplusplus
#define DCACHE_UNSET = nullptr
#else
#define DCACHE_UNSET
#endif

/* Settings exactly as written in the EXPORT { FSAL { ... } } block.  A NULL
 * string means "not set": the default applies. */
struct dcache_settings_text {
	const char *io_cache_read;
	const char *io_cache_write;
	const char *direct_misaligned_num_pages;
	const char *direct_misaligned_dontcache;
	const char *direct_misaligned_memory;
	/* Shared boundary pages of direct-mode WRITEs (see boundary_tracker.h).
	 * Later fields default to "not set" in C++ too, so code that lists
	 * only the earlier ones stays warning-free. */
	const char *boundary_tracking DCACHE_UNSET;	/* bool, default true */
	const char *boundary_max_pages DCACHE_UNSET;	/* 1 .. 1048576, default 4096 */
	const char *boundary_max_age_ms DCACHE_UNSET;	/* 1 .. 3600000, default 5000 */
	const char *io_backend DCACHE_UNSET;		/* io_uring | sync, default io_uring */
	const char *io_queue_depth DCACHE_UNSET;	/* 1 .. 4096, default 32 */
	const char *cached_read_fast_path DCACHE_UNSET; /* bool, default true */
	const char *io_blocking_max DCACHE_UNSET;	/* 0 .. 1024, default 32 */
	const char *io_workers_max DCACHE_UNSET;	/* 0 .. 4096, default 0 (the kernel's) */
	const char *auto_read_stream DCACHE_UNSET;	/* dontcache | direct, default direct */
	const char *auto_write_stream DCACHE_UNSET;	/* dontcache | direct | direct_when_quiet, default dontcache */
	const char *auto_stream_min_mib DCACHE_UNSET;	/* 1 .. 65536, default 4 */
	const char *auto_stream_yield_ms DCACHE_UNSET;	/* 0 .. 1000 (0: off), default 500 */
	const char *auto_write_spare_memory DCACHE_UNSET; /* unless_reported | cache | stream */
};

/* Every setting of the FSAL block, as X(name in ganesha.conf, field): the
 * field of that name in struct dcache_settings_text and struct
 * dcache_settings.  The one list the adapter's config table is generated
 * from and the core's parser table is checked against (at compile time),
 * so a setting added to one and not the other does not build. */
#define DCACHE_SETTINGS(X)                                            \
	X("IO_Cache_Read", io_cache_read)                             \
	X("IO_Cache_Write", io_cache_write)                           \
	X("Direct_Misaligned_Num_Pages", direct_misaligned_num_pages) \
	X("Direct_Misaligned_Dontcache", direct_misaligned_dontcache) \
	X("Direct_Misaligned_Memory", direct_misaligned_memory)       \
	X("Boundary_Tracking", boundary_tracking)                     \
	X("Boundary_Max_Pages", boundary_max_pages)                   \
	X("Boundary_Max_Age_Ms", boundary_max_age_ms)                 \
	X("IO_Backend", io_backend)                                   \
	X("IO_Queue_Depth", io_queue_depth)                           \
	X("Cached_Read_Fast_Path", cached_read_fast_path)             \
	X("IO_Blocking_Max", io_blocking_max)                         \
	X("IO_Workers_Max", io_workers_max)                           \
	X("Auto_Read_Stream", auto_read_stream)                       \
	X("Auto_Write_Stream", auto_write_stream)                     \
	X("Auto_Stream_Min_MiB", auto_stream_min_mib)                 \
	X("Auto_Stream_Yield_Ms", auto_stream_yield_ms)               \
	X("Auto_Write_Spare_Memory", auto_write_spare_memory)

/* Validated settings. */
struct dcache_settings {
	enum dcache_mode io_cache_read;
	enum dcache_mode io_cache_write;
	uint32_t direct_misaligned_num_pages;
	bool direct_misaligned_dontcache;
	enum dcache_mem_misaligned direct_misaligned_memory;
	/* Direct modes: keep the page two misaligned WRITEs share cached until
	 * both have written it (the first writer's edge goes out without
	 * RWF_DONTCACHE), then write it back and drop it.  false: edges go
	 * out as Direct_Misaligned_Dontcache says, as before. */
	bool boundary_tracking;
	uint32_t boundary_max_pages;  /* pages held per export, at most */
	uint32_t boundary_max_age_ms; /* a held page older than this is released */
	/* Chosen at export creation (see enum dcache_io_backend). */
	enum dcache_io_backend io_backend;
	/* io_uring (IO_Queue_Depth): the export's places, the requests that
	 * may hold a bounce buffer or be in io_uring at once (the memory
	 * bound; the rest wait in line, parked, before they allocate, counter
	 * admission_waits).  The rings are the server's, shared by its
	 * exports (io/dcache_io/backend_factory.h), with 4096 entries each. */
	uint32_t io_queue_depth;
	/* Buffered/DONTCACHE READs on an asynchronous backend try
	 * preadv2(RWF_NOWAIT) inline first: page-cache hits need no hand-off. */
	bool cached_read_fast_path;
	/* On io_uring: how many of the export's requests may wait for the
	 * device in Ganesha's worker threads at once, as plain syscalls (the
	 * cheapest way while workers are plentiful); beyond that they go
	 * through io_uring and free their worker.  0: always io_uring. */
	uint32_t io_blocking_max;
	/* On io_uring: the most io-wq workers the export's ring may have
	 * (threads the kernel starts for requests it cannot issue without
	 * blocking).  0: the kernel's default, min(ring entries, 4 x CPUs). */
	uint32_t io_workers_max;
	/* IO_Cache_Read / IO_Cache_Write = auto: what a READ or WRITE of a
	 * file being streamed becomes (dontcache or direct), and how many MiB
	 * a sequential run must have moved to be a stream. */
	enum dcache_mode auto_read_stream;
	enum dcache_mode auto_write_stream;
	uint32_t auto_stream_min_mib;
	/* auto: the longest a stream's request waits while the export serves
	 * requests auto keeps cached (core/yield_gate.h); 0: never. */
	uint32_t auto_stream_yield_ms;
	/* auto: whether a WRITE stream is cached while memory is spare. */
	enum dcache_spare_memory auto_write_spare_memory;
};

/* The defaults (buffered/buffered, 2 pages, DONTCACHE edges, ...). */
struct dcache_settings dcache_settings_default(void) DCACHE_NOEXCEPT;

/* Validate *text into *out.  A value is valid only if its text is exactly
 * one the setting allows (words in any case; numbers in decimal without a
 * sign, a unit or a leading zero).  Returns 0, or EINVAL with a one-line
 * message in why[] naming the setting, the bad value and what is allowed,
 * e.g.
 *   IO_Cache_Read = "fast" is not valid; allowed: buffered, dontcache,
 *   fadvise, direct (or the kernel's numbers 0, 1, 2)
 * Pure; thread-safe. */
int dcache_settings_parse(const struct dcache_settings_text *text, struct dcache_settings *out, char *why,
			  size_t why_len) DCACHE_NOEXCEPT;

/* Takes one line saying what is wrong (worded as dcache_settings_parse's
 * why[]), for the caller to log or print. */
typedef void (*dcache_settings_bad_fn)(void *ctx, const char *why);

/* As dcache_settings_parse, but every setting that is not valid is
 * reported, each with its own line through bad(ctx, why), in the order of
 * DCACHE_SETTINGS (an export with three bad settings: three lines).
 * Returns how many were not valid: 0 with *out set, otherwise *out is
 * untouched.  text or out NULL: one line, counted as one.  Pure;
 * thread-safe. */
size_t dcache_settings_parse_all(const struct dcache_settings_text *text, struct dcache_settings *out,
				 dcache_settings_bad_fn bad, void *ctx) DCACHE_NOEXCEPT;

/* What a setting (its ganesha.conf name, any case) allows, as the error
 * lines say it; NULL for a name that is not a DCACHE setting. */
const char *dcache_settings_allowed(const char *name) DCACHE_NOEXCEPT;

/* value as one log-safe token: in double quotes, with backslash escapes
 * for quotes, backslashes and control bytes (\n, \t, \xNN), cut with
 * ..." when out is too small.  Returns its length. */
size_t dcache_settings_quote(const char *value, char *out, size_t out_len) DCACHE_NOEXCEPT;

/* Every setting of *s as "Name = value, Name = value, ..." in the order of
 * DCACHE_SETTINGS, each value in the words dcache_settings_parse accepts
 * (for the log).  Returns the length it needed, like snprintf. */
size_t dcache_settings_format(const struct dcache_settings *s, char *out, size_t out_len) DCACHE_NOEXCEPT;

/* Canonical name of a mode ("direct_file_sync", ...). */
const char *dcache_mode_name(enum dcache_mode mode) DCACHE_NOEXCEPT;

/* ---- per export -------------------------------------------------------- */

struct dcache_export;

/* name: used in log lines and stats ("export 1 /data").  NULL on ENOMEM. */
struct dcache_export *dcache_export_new(const struct dcache_settings *settings, const char *name) DCACHE_NOEXCEPT;
/* Live reconfiguration: requests already in flight finish with the
 * settings they started with; new ones see the new settings.  Thread-safe. */
void dcache_export_update(struct dcache_export *exp, const struct dcache_settings *settings) DCACHE_NOEXCEPT;
struct dcache_settings dcache_export_settings(const struct dcache_export *exp) DCACHE_NOEXCEPT;
/* The adapter's unexport: releases every held boundary page of the
 * export, then drops the adapter's reference.  The export itself is freed
 * with its last reference (its files hold one each: Ganesha shares file
 * objects among the exports of a filesystem), once no request is in
 * flight. */
void dcache_export_put(struct dcache_export *exp) DCACHE_NOEXCEPT;

/* File handles (the sub-FSAL's keys) known to lie inside the export: the
 * ones it handed out itself and the ones checked on first use.  Bounded;
 * a forgotten key only costs one more check.  Thread-safe. */
bool dcache_export_handle_known(const struct dcache_export *exp, const void *key, size_t len) DCACHE_NOEXCEPT;
void dcache_export_handle_add(struct dcache_export *exp, const void *key, size_t len) DCACHE_NOEXCEPT;

/* ---- per file object --------------------------------------------------- */

struct dcache_file;

/* One per file object of the export; holds the lazily opened O_DIRECT
 * descriptor and the file's probed capabilities. */
struct dcache_file *dcache_file_new(struct dcache_export *exp) DCACHE_NOEXCEPT;
/* Writes back and drops the file's held boundary pages (through the
 * O_DIRECT descriptor), then closes that descriptor (reopened on next use).
 * Thread-safe. */
void dcache_file_close(struct dcache_file *file) DCACHE_NOEXCEPT;
void dcache_file_free(struct dcache_file *file) DCACHE_NOEXCEPT;
/* After the sub-FSAL truncated the file to size: releases (drops) the held
 * boundary pages from the page holding the new EOF on, and auto's history
 * forgets the file's data from there on.  Thread-safe. */
void dcache_file_truncated(struct dcache_file *file, uint64_t size) DCACHE_NOEXCEPT;

/* ---- the data path ----------------------------------------------------- */

/* Who a WRITE runs as: the credentials the caller set on its thread for
 * it.  An asynchronous backend registers them once per identity instead of
 * once per request. */
struct dcache_creds {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	const uint32_t *groups;
};

/* One READ or WRITE.  fd is the sub-FSAL's descriptor for the object, valid
 * (and protected by the sub-FSAL's locks) for the duration of the call. */
struct dcache_io {
	int fd;
	uint64_t offset;
	const struct iovec *iov;
	int iov_count;
	bool stable;			  /* WRITE: the client asked for a stable write */
	const struct dcache_creds *creds; /* WRITE: NULL = unknown (registered per request) */
};

struct dcache_io_result {
	int error;    /* 0 or an errno value */
	size_t bytes; /* bytes transferred (also on a short transfer) */
	bool stable;  /* WRITE: reply FILE_SYNC (never lower than asked) */
	bool eof;     /* READ: end of file reached */
};

/* Blocking (start + wait); thread-safe. */
struct dcache_io_result dcache_read(struct dcache_export *exp, struct dcache_file *file,
				    const struct dcache_io *io) DCACHE_NOEXCEPT;
struct dcache_io_result dcache_write(struct dcache_export *exp, struct dcache_file *file,
				     const struct dcache_io *io) DCACHE_NOEXCEPT;
/* Asynchronous READ/WRITE.
 *
 * Starts the request.  Returns true when it completed inline: the result is
 * in *inline_result and done is NOT called.  Returns false when
 * done(ctx, result) will be called exactly once later, from another thread
 * (the backend's completion thread), possibly before this function has
 * returned to its caller.
 *
 * io->fd need only be valid during this call: for anything that outlives it
 * the core uses descriptors of its own on the same inode (a lazily opened
 * buffered one and the O_DIRECT one), closed only after the last request
 * using them has completed.  The io->iov ARRAY is copied; the BUFFERS it
 * points at must stay valid (and, for a WRITE, unmodified) until
 * completion.  The file must not be freed (dcache_file_free) before
 * completion; dcache_file_close during flight is fine.  done must not block
 * for long (it delays other completions); everything of the core is
 * released before done is called, so done may free the file.
 *
 * The start itself may block the calling thread briefly: a WRITE waits in
 * its file's write fence while another WRITE of the same pages is in
 * flight the other way (buffered against O_DIRECT), and a submission waits
 * for room when the io_uring ring is full.
 *
 * Thread-safe.  Latency is measured from start to completion. */
typedef void (*dcache_io_done_fn)(void *ctx, struct dcache_io_result result);
bool dcache_read_start(struct dcache_export *exp, struct dcache_file *file, const struct dcache_io *io,
		       dcache_io_done_fn done, void *ctx, struct dcache_io_result *inline_result) DCACHE_NOEXCEPT;
bool dcache_write_start(struct dcache_export *exp, struct dcache_file *file, const struct dcache_io *io,
			dcache_io_done_fn done, void *ctx, struct dcache_io_result *inline_result) DCACHE_NOEXCEPT;

/* The backend the export actually runs ("io_uring", "sync"); static
 * string.  Thread-safe. */
const char *dcache_export_backend_name(const struct dcache_export *exp) DCACHE_NOEXCEPT;

/* Called after the sub-FSAL's COMMIT succeeded on [offset, offset+len)
 * (len 0: to end of file), which took sync_ns; counts it and does the
 * mode's post-COMMIT work, e.g. POSIX_FADV_DONTNEED in fadvise mode (on an
 * asynchronous backend submitted and not waited for: its error is only
 * counted).  Held
 * boundary pages in the range stay held (the COMMIT made them durable).
 * Returns 0 or an errno value. */
int dcache_after_commit(struct dcache_export *exp, struct dcache_file *file, int fd, uint64_t offset, uint64_t len,
			uint64_t sync_ns) DCACHE_NOEXCEPT;

/* ---- statistics -------------------------------------------------------- */

/* Counters are kept per export, lock-free.  The set is fixed at build time:
 * index 0 .. dcache_stats_count()-1, each with a stable snake_case name.
 * The last few are computed when read (gauges: places taken, the mode in
 * force, ...; core/stats.h, DCACHE_COMPUTED_STATS). */
size_t dcache_stats_count(void) DCACHE_NOEXCEPT;
const char *dcache_stats_name(size_t index) DCACHE_NOEXCEPT;
uint64_t dcache_stats_value(const struct dcache_export *exp, size_t index) DCACHE_NOEXCEPT;
void dcache_stats_reset(struct dcache_export *exp) DCACHE_NOEXCEPT;

/* Service time of READ, WRITE and COMMIT as the plugin saw them (from the
 * plugin's entry to its reply), for Ganesha's GetFSALStats. */
enum dcache_op { DCACHE_OP_READ, DCACHE_OP_WRITE, DCACHE_OP_COMMIT, DCACHE_OP_COUNT };
struct dcache_latency {
	uint64_t count;
	uint64_t total_ns;
	uint64_t min_ns;
	uint64_t max_ns;
};
struct dcache_latency dcache_stats_latency(const struct dcache_export *exp, enum dcache_op op) DCACHE_NOEXCEPT;
const char *dcache_op_name(enum dcache_op op) DCACHE_NOEXCEPT;
/* The same service times as a histogram: counts[i] is the number of
 * requests that took at most bounds_us[i] microseconds and more than
 * bounds_us[i-1]; the last bucket, counts[nbounds], holds the rest.
 * Copies min(n, nbounds + 1) counts; returns nbounds + 1. */
size_t dcache_stats_latency_buckets(const struct dcache_export *exp, enum dcache_op op, uint64_t *counts,
				    size_t n) DCACHE_NOEXCEPT;
/* The histogram's bounds (static); returns their number. */
size_t dcache_stats_latency_bounds(const uint64_t **bounds_us) DCACHE_NOEXCEPT;

/* ---- metrics ----------------------------------------------------------- */

/* The Prometheus series of an export (docs/monitoring.md), from the one
 * table core/metrics.def: the same list, index 0 .. dcache_metrics_count()
 * - 1, for every export.  Each series is one of a metric's label sets; its
 * labels here are those besides `export`, which the publisher adds
 * (Ganesha's own per-export value, "export_id=<Export_Id>").  Strings are
 * static.  Thread-safe. */
enum dcache_metric_type { DCACHE_METRIC_COUNTER, DCACHE_METRIC_GAUGE, DCACHE_METRIC_HISTOGRAM };
struct dcache_metric_series {
	const char *name; /* the metric's: dcache_..._total, ... */
	const char *help;
	enum dcache_metric_type type;
	size_t nlabels;
	const char *const *label_keys;
	const char *const *label_values;
};
size_t dcache_metrics_count(void) DCACHE_NOEXCEPT;
/* false for an index out of range. */
bool dcache_metrics_series(size_t index, struct dcache_metric_series *out) DCACHE_NOEXCEPT;

/* Where a publisher takes what changed: a counter's increase, a gauge's
 * value, or count observations of one value (microseconds) for a
 * histogram.  Called with the series' index. */
struct dcache_metrics_sink {
	void *ctx;
	void (*add)(void *ctx, size_t series, uint64_t delta);
	void (*set)(void *ctx, size_t series, int64_t value);
	void (*observe)(void *ctx, size_t series, int64_t value_us, uint64_t count);
};

/* What a publisher has pushed of one export so far: each push hands the
 * sink what changed since the last (counters as increases, so a stats
 * reset or an export re-created under the same Export_Id keeps the
 * published counters monotonic; histogram observations chosen so that
 * the buckets and the sum match the export's).  Not thread-safe: one
 * cursor, one publisher thread at a time.  NULL on ENOMEM. */
struct dcache_metrics_cursor;
struct dcache_metrics_cursor *dcache_metrics_cursor_new(void) DCACHE_NOEXCEPT;
void dcache_metrics_cursor_free(struct dcache_metrics_cursor *cursor) DCACHE_NOEXCEPT;
void dcache_metrics_cursor_push(struct dcache_metrics_cursor *cursor, const struct dcache_export *exp,
				const struct dcache_metrics_sink *sink) DCACHE_NOEXCEPT;
/* The export is gone: its gauges to 0; the next push (an export of the
 * same Export_Id) counts from that export's zero. */
void dcache_metrics_cursor_end(struct dcache_metrics_cursor *cursor,
			       const struct dcache_metrics_sink *sink) DCACHE_NOEXCEPT;

/* ---- the server's RPC buffers ------------------------------------------ */

/* Large buffers of the server's RPC library (a request's receive buffer, a
 * WRITE's decoded payload), page-aligned and kept for reuse: a WRITE's
 * payload then meets the direct-I/O memory alignment and is written from
 * where it lies, and is not faulted in again for every request
 * (io/dcache_io/rpc_buffers.h).  START: the buffer starts on a page (a
 * glibc chunk: free() of it is harmless); END: it ends on a page (only
 * dcache_rpc_buffer_put may free it); READ: placed as START, for a READ's
 * reply buffer that only dcache_rpc_buffer_put frees (END and READ buffers
 * are the ones registered with the io_uring rings, below).  get: NULL when
 * not served here
 * (size below DCACHE_RPC_BUFFER_MIN or too large, no memory); put: false
 * when p is not one of these (nothing done); size: the bytes p may hold if
 * it is one of these, else 0.  Thread-safe. */
enum dcache_rpc_place { DCACHE_RPC_START, DCACHE_RPC_END, DCACHE_RPC_READ };
#define DCACHE_RPC_BUFFER_MIN (64UL << 10) /* bytes: 64 KiB */
void *dcache_rpc_buffer_get(size_t size, enum dcache_rpc_place place) DCACHE_NOEXCEPT;
bool dcache_rpc_buffer_put(void *p) DCACHE_NOEXCEPT;
size_t dcache_rpc_buffer_size(const void *p) DCACHE_NOEXCEPT;
/* On: the END and READ buffers made from now on are registered with the
 * io_uring rings, so direct READs and WRITEs into and from them pin no
 * pages per request.  Only where every END and READ buffer handed out
 * comes back through dcache_rpc_buffer_put (io/dcache_io/rpc_buffers.h
 * says why). */
void dcache_rpc_buffers_register(bool on) DCACHE_NOEXCEPT;

/* ---- logging ----------------------------------------------------------- */

/* The core logs through the adapter (which uses Ganesha's log). */
enum dcache_log_level { DCACHE_LOG_ERROR, DCACHE_LOG_WARN, DCACHE_LOG_INFO, DCACHE_LOG_DEBUG };
typedef void (*dcache_log_fn)(enum dcache_log_level level, const char *message);
void dcache_set_log(dcache_log_fn fn) DCACHE_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* DCACHE_CORE_H */
