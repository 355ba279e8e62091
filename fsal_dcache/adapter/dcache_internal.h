/*
 * Private declarations of the DCACHE adapter: the only code in the project
 * that includes Ganesha's headers.  It stacks over a sub-FSAL (VFS) the way
 * FSAL_NULL does, and hands the data path (read2/write2/commit2) to the C++
 * core through <dcache/core.h>.
 *
 * Threading: Ganesha calls every op on its worker threads with op_ctx set
 * to the calling request; nothing here keeps per-thread state besides
 * op_ctx itself.
 */
#ifndef DCACHE_INTERNAL_H
#define DCACHE_INTERNAL_H

#include "config.h"

#include "fsal.h"
#include "fsal_api.h"
#include "fsal_types.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"
#include "nfs_core.h"

#include <dcache/core.h>

/* The release's knobs (compat/<release>/dcache_compat.h) and the reading of
 * the FSAL block shared with dcache-check. */
#include "dcache_config.h"

struct dcache_fsal_module {
	struct fsal_module module;
	struct fsal_obj_ops handle_ops;
};

extern struct dcache_fsal_module dcache_module;

/* Identity of a directory as the sub-FSAL sees it.  Compared by
 * filesystem id and file id rather than by handle bytes, so that a second
 * encoding of the same directory's handle (which MDCACHE keys as another
 * entry) is still recognised. */
struct dcache_object_id {
	fsal_fsid_t fsid;
	uint64_t fileid;
};

/* Directories between the export root and "/" are few; deeper ones are
 * still caught by the walk in create_handle. */
#define DCACHE_MAX_ANCESTORS 64

struct dcache_fsal_export {
	struct fsal_export export;    /* ours; export.sub_export is VFS's */
	struct dcache_export *core;   /* policy, counters (C++ core) */
	struct dcache_object_id root; /* see dcache_lookup() */
	/* the directories above the root, up to "/" (see dcache_lookup()) */
	struct dcache_object_id ancestors[DCACHE_MAX_ANCESTORS];
	size_t n_ancestors;
	uint16_t export_id;
	char *path; /* export path, for log lines */
};

struct dcache_obj_handle {
	struct fsal_obj_handle obj_handle;
	struct fsal_obj_handle *sub_handle;
	/* Per-object I/O state of the core (O_DIRECT descriptor, probed
	 * alignment); regular files only, NULL otherwise. */
	struct dcache_file *file;
};

static inline struct dcache_fsal_export *
dcache_export_of(struct fsal_export *exp)
{
	return container_of(exp, struct dcache_fsal_export, export);
}

static inline struct dcache_obj_handle *
dcache_handle_of(struct fsal_obj_handle *obj)
{
	return container_of(obj, struct dcache_obj_handle, obj_handle);
}

/*
 * Whether releasing one of our objects may release the sub-FSAL's object
 * under it.  A stopping server first removes every export inside an op
 * context (remove_all_exports): VFS is whole then, and ours release theirs
 * - the VFS export and the reference on the VFS module our FSAL block took
 * - so that no reference is left hanging ("Extra references ... to FSAL
 * VFS").  Then Ganesha's destroyer walks every loaded FSAL, outside any op
 * context, releasing what is left of its handles and exports and unloading
 * it, in load order: VFS's objects may be freed, and VFS unloaded, by the
 * time ours are released there, so those leave the sub-FSAL's objects to
 * the destroyer.
 */
static inline bool dcache_may_release_sub(void)
{
	return !admin_shutdown || op_ctx != NULL;
}

/* op_ctx->fsal_export is ours when Ganesha calls our ops. */
static inline struct dcache_fsal_export *dcache_ctx_export(void)
{
	return dcache_export_of(op_ctx->fsal_export);
}

/*
 * Calling into the sub-FSAL.  The sub-FSAL reads op_ctx->fsal_export and
 * expects its own export there, so every call down swaps it and swaps it
 * back.  DCACHE_SUB_SCOPE(ours) does that for the rest of the enclosing
 * block, restored by the compiler's cleanup attribute on every exit path,
 * so no op can forget the restore (FSAL_NULL writes ~60 pairs by hand).
 */
static inline struct fsal_export *dcache_enter_sub(struct fsal_export *ours)
{
	struct fsal_export *saved = op_ctx->fsal_export;

	op_ctx->fsal_export = ours->sub_export;
	return saved;
}

static inline void dcache_leave_scope(struct fsal_export **saved)
{
	op_ctx->fsal_export = *saved;
}

#define DCACHE_SUB_SCOPE(ours)                                         \
	struct fsal_export *dcache_saved_export_                       \
		__attribute__((cleanup(dcache_leave_scope), unused)) = \
			dcache_enter_sub(ours)

/*
 * The way back up: a callback the sub-FSAL calls (op_ctx holding its
 * export) that calls into the layer above (readdir's) puts our export
 * back for the rest of the enclosing block, and the sub-FSAL's after.
 */
static inline struct fsal_export *dcache_enter_upper(struct fsal_export *ours)
{
	struct fsal_export *saved = op_ctx->fsal_export;

	op_ctx->fsal_export = ours;
	return saved;
}

#define DCACHE_UPPER_SCOPE(ours)                                       \
	struct fsal_export *dcache_saved_export_                       \
		__attribute__((cleanup(dcache_leave_scope), unused)) = \
			dcache_enter_upper(ours)

/* export.c */
void dcache_export_ops_init(struct export_ops *ops);
fsal_status_t dcache_create_export(struct fsal_module *fsal_hdl,
				   void *parse_node,
				   struct config_error_type *err_type,
				   const struct fsal_up_vector *up_ops);
fsal_status_t dcache_update_export(struct fsal_module *fsal_hdl,
				   void *parse_node,
				   struct config_error_type *err_type,
				   struct fsal_export *original,
				   struct fsal_module *updated_super);

/* handle.c */
void dcache_handle_ops_init(struct fsal_obj_ops *ops);
fsal_status_t dcache_wrap_handle(struct dcache_fsal_export *exp,
				 struct fsal_obj_handle *sub_handle,
				 struct fsal_obj_handle **out);

/* escape_guard.c: the export boundary.  dcache_capture_root runs at
 * creation with op_ctx holding the sub-FSAL's export; the others are our
 * export and handle ops. */
fsal_status_t dcache_capture_root(struct dcache_fsal_export *exp);
fsal_status_t dcache_wire_to_host(struct fsal_export *exp_hdl,
				  fsal_digesttype_t in_type,
				  struct gsh_buffdesc *fh_desc, int flags);
fsal_status_t dcache_create_handle(struct fsal_export *exp_hdl,
				   struct gsh_buffdesc *fh_desc,
				   struct fsal_obj_handle **handle,
				   struct fsal_attrlist *attrs_out);
fsal_status_t dcache_lookup(struct fsal_obj_handle *parent, const char *name,
			    struct fsal_obj_handle **handle,
			    struct fsal_attrlist *attrs_out);

/* stats.c */
void dcache_stats_init(struct fsal_module *module);

/* rpc_buffers.c: the RPC library's large buffers from the core's pool
 * while the module is loaded. */
void dcache_rpc_buffers_install(void);
bool dcache_rpc_buffers_installed(void);
/* Where an NFSv3 READ's reply buffer comes from and how it is kept (the log). */
const char *dcache_rpc_read_buffers(void);
const char *dcache_rpc_registered(void);
void dcache_rpc_buffers_remove(void);

/* metrics.c: the export's series in Ganesha's monitoring registry (only
 * where it has one; elsewhere nothing). */
#if DCACHE_HAS_MONITORING
void dcache_metrics_export_added(struct dcache_fsal_export *exp);
void dcache_metrics_export_removed(struct dcache_fsal_export *exp);
void dcache_metrics_shutdown(void);
#else
static inline void dcache_metrics_export_added(struct dcache_fsal_export *exp)
{
	(void)exp;
}
static inline void dcache_metrics_export_removed(struct dcache_fsal_export *exp)
{
	(void)exp;
}
static inline void dcache_metrics_shutdown(void) {}
#endif

/* file.c: the data path and the open/close ops around it */
void dcache_read2(struct fsal_obj_handle *obj, bool bypass,
		  fsal_async_cb done_cb, struct fsal_io_arg *arg,
		  void *caller_arg);
void dcache_write2(struct fsal_obj_handle *obj, bool bypass,
		   fsal_async_cb done_cb, struct fsal_io_arg *arg,
		   void *caller_arg);
fsal_status_t dcache_commit2(struct fsal_obj_handle *obj, off_t offset,
			     size_t len);
bool dcache_resolve_vfs(struct fsal_module *sub_fsal);

#endif /* DCACHE_INTERNAL_H */
