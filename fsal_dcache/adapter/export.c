/*
 * Exports: the DCACHE settings of an EXPORT's FSAL block (read and checked
 * by settings_block.c, which dcache-check runs too; a refusal is logged
 * here), stacking over the sub-FSAL named in the nested FSAL block, and
 * forwarding the export ops to it.
 *
 *   FSAL {
 *     Name = DCACHE;
 *     IO_Cache_Read = dontcache;  IO_Cache_Write = direct_file_sync; ...
 *     FSAL { Name = VFS; }
 *   }
 */
#include "dcache_internal.h"

#include <string.h>

#include "config_parsing.h"
#include "export_mgr.h"
#include "log.h"
#include "nfs_exports.h"

/* ---- settings ----------------------------------------------------------- */

static uint16_t export_id_of_ctx(void)
{
	return op_ctx->ctx_export ? op_ctx->ctx_export->export_id : 0;
}

static const char *export_path_of_ctx(void)
{
	return op_ctx->ctx_fullpath ? CTX_FULLPATH(op_ctx) : "?";
}

/* One refusal line: the export, what is wrong, and what becomes of it. */
struct refusal {
	const char *refused;
};

static void log_refusal(void *ctx, const char *why)
{
	const struct refusal *r = ctx;

	LogCrit(COMPONENT_CONFIG, "DCACHE: export %u (%s): %s; %s",
		export_id_of_ctx(), export_path_of_ctx(), why, r->refused);
}

/*
 * Reads the FSAL block into *args and *settings (settings_block.c, the
 * checks dcache-check runs too).  On any error logs one line for each
 * thing wrong, naming the export, and returns false: the export is
 * refused while the server keeps serving its other exports.
 */
static bool parse_settings(void *parse_node, struct config_error_type *err_type,
			   struct dcache_export_args *args,
			   struct dcache_settings *settings,
			   const char *refused)
{
	struct refusal r = {.refused = refused};

	return dcache_block_settings(parse_node, err_type, DCACHE_SUBFSAL_LOAD,
				     args, settings, log_refusal, &r);
}

/* Logs the settings in force, on creation and after a live update. */
static void log_settings(const struct dcache_fsal_export *exp, const char *what,
			 const struct dcache_settings *s)
{
	char line[1024];

	(void)dcache_settings_format(s, line, sizeof(line));
	LogEvent(COMPONENT_FSAL, "DCACHE: export %u (%s) %s: %s (running: %s)",
		 exp->export_id, exp->path, what, line,
		 dcache_export_backend_name(exp->core));
}

/* ---- export ops --------------------------------------------------------- */

/* Releases the sub-FSAL's export and the module reference that loading it
 * for our FSAL block took. */
static void release_sub_export(struct fsal_export *sub)
{
	struct fsal_module *sub_fsal = sub->fsal;

	sub->exp_ops.release(sub);
	fsal_put(sub_fsal);
}

static void dcache_export_release(struct fsal_export *exp_hdl)
{
	struct dcache_fsal_export *exp = dcache_export_of(exp_hdl);

	if (dcache_may_release_sub())
		release_sub_export(exp->export.sub_export);
	fsal_detach_export(exp_hdl->fsal, &exp_hdl->exports);
	free_export_ops(exp_hdl);
	dcache_metrics_export_removed(exp);
	dcache_export_put(exp->core);
	gsh_free(exp->path);
	gsh_free(exp);
}

static fsal_status_t dcache_lookup_path(struct fsal_export *exp_hdl,
					const char *path,
					struct fsal_obj_handle **handle,
					struct fsal_attrlist *attrs_out)
{
	struct fsal_obj_handle *sub_handle = NULL;
	fsal_status_t status;

	*handle = NULL;
	{
		DCACHE_SUB_SCOPE(exp_hdl);

		status = exp_hdl->sub_export->exp_ops.lookup_path(
			exp_hdl->sub_export, path, &sub_handle, attrs_out);
	}
	if (FSAL_IS_ERROR(status))
		return status;
	return dcache_wrap_handle(dcache_export_of(exp_hdl), sub_handle,
				  handle);
}

static fsal_status_t dcache_get_fs_dynamic_info(struct fsal_export *exp_hdl,
						struct fsal_obj_handle *obj,
						fsal_dynamicfsinfo_t *info)
{
	DCACHE_SUB_SCOPE(exp_hdl);

	return exp_hdl->sub_export->exp_ops.get_fs_dynamic_info(
		exp_hdl->sub_export, dcache_handle_of(obj)->sub_handle, info);
}

/* Forwards an export op whose first argument is the export itself. */
/* The parameter lists below are macro arguments, which clang-format 14
 * would read as expressions. */
/* clang-format off */
#define DCACHE_EXPORT_FORWARD(ret, op, params, ...)                           \
	static ret dcache_##op params                                         \
	{                                                                     \
		DCACHE_SUB_SCOPE(exp_hdl);                                    \
		return exp_hdl->sub_export->exp_ops.op(exp_hdl->sub_export,   \
						       ##__VA_ARGS__);        \
	}

DCACHE_EXPORT_FORWARD(void, prepare_unexport, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(fsal_status_t, host_to_key,
		      (struct fsal_export *exp_hdl,
		       struct gsh_buffdesc *fh_desc),
		      fh_desc)
/* VFS's answers, and (6.x) that DCACHE allocates a READ's buffer itself
 * (file.c, read_buffer). */
static bool dcache_fs_supports(struct fsal_export *exp_hdl,
			       fsal_fsinfo_options_t option)
{
#if DCACHE_FSAL_ALLOCATES_READ_BUFFER
	if (option == fso_allocate_own_read_buffer)
		return true;
#endif
	{
		DCACHE_SUB_SCOPE(exp_hdl);
		return exp_hdl->sub_export->exp_ops.fs_supports(
			exp_hdl->sub_export, option);
	}
}
DCACHE_EXPORT_FORWARD(uint64_t, fs_maxfilesize, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(uint32_t, fs_maxread, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(uint32_t, fs_maxwrite, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(uint32_t, fs_maxlink, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(uint32_t, fs_maxnamelen, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(uint32_t, fs_maxpathlen, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(fsal_aclsupp_t, fs_acl_support,
		      (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(attrmask_t, fs_supported_attrs,
		      (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(uint32_t, fs_umask, (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(int32_t, fs_expiretimeparent,
		      (struct fsal_export *exp_hdl))
DCACHE_EXPORT_FORWARD(fsal_status_t, check_quota,
		      (struct fsal_export *exp_hdl, const char *filepath,
		       int quota_type),
		      filepath, quota_type)
DCACHE_EXPORT_FORWARD(fsal_status_t, get_quota,
		      (struct fsal_export *exp_hdl, const char *filepath,
		       int quota_type, int quota_id, fsal_quota_t *quota),
		      filepath, quota_type, quota_id, quota)
DCACHE_EXPORT_FORWARD(fsal_status_t, set_quota,
		      (struct fsal_export *exp_hdl, const char *filepath,
		       int quota_type, int quota_id, fsal_quota_t *quota,
		       fsal_quota_t *resquota),
		      filepath, quota_type, quota_id, quota, resquota)
/* VFS allocates its state with its descriptor behind it (vfs_state_fd);
 * the default alloc_state would allocate a bare state_t that VFS then
 * reads past. */
DCACHE_EXPORT_FORWARD(struct state_t *, alloc_state,
		      (struct fsal_export *exp_hdl, enum state_type state_type,
		       struct state_t *related_state),
		      state_type, related_state)
#if DCACHE_STATE_FREED_BY_EXPORT
/* 4.3 frees a state through its export (6.x on: through the state itself). */
DCACHE_EXPORT_FORWARD(void, free_state,
		      (struct fsal_export *exp_hdl, struct state_t *state),
		      state)
#else
/* 6.x's descriptor LRU asks the export an fd carries for the fd's object;
 * VFS's fds carry VFS's export (its handles and states are made under
 * DCACHE_SUB_SCOPE), so this is a safety net, and it has no default. */
DCACHE_EXPORT_FORWARD(void, get_fsal_obj_hdl,
		      (struct fsal_export *exp_hdl, struct fsal_fd *fd,
		       struct fsal_obj_handle **handle),
		      fd, handle)
#endif
#if DCACHE_HAS_FS_READDIR_MODE
/* Its default reads the DCACHE module's fs_info: VFS's answer instead. */
DCACHE_EXPORT_FORWARD(enum fsal_readdir_mode, fs_readdir_mode,
		      (struct fsal_export *exp_hdl))
#endif
DCACHE_EXPORT_FORWARD(bool, is_superuser,
		      (struct fsal_export *exp_hdl,
		       const struct user_cred *creds),
		      creds)
/* clang-format on */

void dcache_export_ops_init(struct export_ops *ops)
{
	ops->release = dcache_export_release;
	ops->prepare_unexport = dcache_prepare_unexport;
	ops->lookup_path = dcache_lookup_path;
	ops->wire_to_host = dcache_wire_to_host;
	ops->host_to_key = dcache_host_to_key;
	ops->create_handle = dcache_create_handle;
	ops->get_fs_dynamic_info = dcache_get_fs_dynamic_info;
	ops->fs_supports = dcache_fs_supports;
	ops->fs_maxfilesize = dcache_fs_maxfilesize;
	ops->fs_maxread = dcache_fs_maxread;
	ops->fs_maxwrite = dcache_fs_maxwrite;
	ops->fs_maxlink = dcache_fs_maxlink;
	ops->fs_maxnamelen = dcache_fs_maxnamelen;
	ops->fs_maxpathlen = dcache_fs_maxpathlen;
	ops->fs_acl_support = dcache_fs_acl_support;
	ops->fs_supported_attrs = dcache_fs_supported_attrs;
	ops->fs_umask = dcache_fs_umask;
	ops->fs_expiretimeparent = dcache_fs_expiretimeparent;
	ops->check_quota = dcache_check_quota;
	ops->get_quota = dcache_get_quota;
	ops->set_quota = dcache_set_quota;
	ops->alloc_state = dcache_alloc_state;
#if DCACHE_STATE_FREED_BY_EXPORT
	ops->free_state = dcache_free_state;
#else
	ops->get_fsal_obj_hdl = dcache_get_fsal_obj_hdl;
#endif
#if DCACHE_HAS_FS_READDIR_MODE
	ops->fs_readdir_mode = dcache_fs_readdir_mode;
#endif
	ops->is_superuser = dcache_is_superuser;
}

/* ---- create / update ---------------------------------------------------- */

fsal_status_t dcache_create_export(struct fsal_module *fsal_hdl,
				   void *parse_node,
				   struct config_error_type *err_type,
				   const struct fsal_up_vector *up_ops)
{
	struct dcache_export_args args;
	struct dcache_settings settings;
	struct dcache_fsal_export *exp = NULL; /* freed on error */
	struct fsal_export *sub = NULL;	       /* released on error */
	struct fsal_module *sub_fsal;
	fsal_status_t status = fsalstat(ERR_FSAL_INVAL, EINVAL);
	char name[64];

	if (!parse_settings(parse_node, err_type, &args, &settings,
			    "export refused"))
		goto out;
	sub_fsal = lookup_fsal(args.subfsal.name);
	if (sub_fsal == NULL) {
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): cannot stack on FSAL %s: it is not loaded (is libfsal%s.so in Plugins_Dir?); export refused",
			export_id_of_ctx(), export_path_of_ctx(),
			args.subfsal.name, args.subfsal.name);
		goto out;
	}
	status = sub_fsal->m_ops.create_export(sub_fsal, args.subfsal.fsal_node,
					       err_type, up_ops);
	fsal_put(sub_fsal);
	if (FSAL_IS_ERROR(status)) {
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): FSAL %s refused the export: %s",
			export_id_of_ctx(), export_path_of_ctx(),
			args.subfsal.name, msg_fsal_err(status.major));
		goto out;
	}
	sub = op_ctx->fsal_export;
	/* The data path uses VFS's descriptors (find_fd), so only VFS will do;
	 * Ganesha matches FSAL names without regard to case. */
	if (strcasecmp(args.subfsal.name, "VFS") != 0 ||
	    !dcache_resolve_vfs(sub->fsal)) {
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): DCACHE stacks only on FSAL VFS (got %s); export refused",
			export_id_of_ctx(), export_path_of_ctx(),
			args.subfsal.name);
		status = fsalstat(ERR_FSAL_INVAL, EINVAL);
		goto out;
	}

	exp = gsh_calloc(1, sizeof(*exp));
	exp->export_id = export_id_of_ctx();
	exp->path = gsh_strdup(export_path_of_ctx());
	fsal_export_stack(sub, &exp->export);
	status = dcache_capture_root(exp);
	if (FSAL_IS_ERROR(status)) {
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): cannot look up the export root: %s; export refused",
			exp->export_id, exp->path, msg_fsal_err(status.major));
		goto out;
	}
	snprintf(name, sizeof(name), "export %u (%s)", exp->export_id,
		 exp->path);
	exp->core = dcache_export_new(&settings, name);
	if (exp->core == NULL) {
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): no memory for the export's state; export refused",
			exp->export_id, exp->path);
		status = fsalstat(ERR_FSAL_NOMEM, ENOMEM);
		goto out;
	}
	fsal_export_init(&exp->export);
	dcache_export_ops_init(&exp->export.exp_ops);
	exp->export.up_ops = up_ops;
	exp->export.fsal = fsal_hdl;
	fsal_attach_export(fsal_hdl, &exp->export.exports);
	/* MDCACHE stacks itself on whatever export is left here. */
	op_ctx->fsal_export = &exp->export;

	log_settings(exp, "created over VFS", &settings);
	dcache_metrics_export_added(exp);
	exp = NULL; /* Ganesha's now: its release op frees it */
	sub = NULL;
	/* the module reference is the export's now (release_sub_export) */
	args.subfsal_ref = NULL;
out:
	if (sub != NULL) {
		/* its module reference goes with it */
		args.subfsal_ref = NULL;
		release_sub_export(sub);
	}
	if (exp != NULL) {
		gsh_free(exp->path);
		gsh_free(exp);
	}
	dcache_export_args_free(&args);
	return status;
}

/*
 * Live reconfiguration (SIGHUP or DBus UpdateExport): the new settings are
 * validated first, then the sub-FSAL is asked, and only when both agree are
 * they published to the core; requests in flight keep the settings they
 * started with.
 */
fsal_status_t dcache_update_export(struct fsal_module *fsal_hdl,
				   void *parse_node,
				   struct config_error_type *err_type,
				   struct fsal_export *original,
				   struct fsal_module *updated_super)
{
	struct dcache_fsal_export *exp = dcache_export_of(original);
	struct dcache_export_args args;
	struct dcache_settings settings;
	struct fsal_module *sub_fsal;
	fsal_status_t status;

	/* The default rejects any change of the FSAL stack. */
	status = update_export(fsal_hdl, parse_node, err_type, original,
			       updated_super);
	if (FSAL_IS_ERROR(status))
		return status;
	/* An export whose EXPORT block holds a DCACHE setting is not kept:
	 * Ganesha refuses that block itself (a parameter it does not know)
	 * and removes the export at the end of this reload, whatever the
	 * refusal here says, so the lines say that instead. */
	if (!parse_settings(
		    parse_node, err_type, &args, &settings,
		    dcache_block_in_export_block(parse_node)
			    ? "update refused, and Ganesha refuses this EXPORT block itself (a parameter it does not know there): the export is removed at the end of this reload"
			    : "update refused, the export keeps its current settings")) {
		dcache_export_args_free(&args);
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	}
	sub_fsal = lookup_fsal(args.subfsal.name);
	if (sub_fsal == NULL) {
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): FSAL %s is not loaded; update refused, the export keeps its current settings",
			exp->export_id, exp->path, args.subfsal.name);
		dcache_export_args_free(&args);
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	}
	status = sub_fsal->m_ops.update_export(sub_fsal, args.subfsal.fsal_node,
					       err_type, original->sub_export,
					       fsal_hdl);
	fsal_put(sub_fsal);
	if (!FSAL_IS_ERROR(status)) {
		dcache_export_update(exp->core, &settings);
		log_settings(exp, "updated", &settings);
	} else {
		/* VFS refuses what it applies only at a start (fsid_type,
		 * async_hsm_restore changed in its block); dcache-check cannot
		 * know what the export started with. Say so in DCACHE's words,
		 * so that every refusal of an update ends in the same line. */
		LogCrit(COMPONENT_CONFIG,
			"DCACHE: export %u (%s): FSAL %s refused the update (see its message above); update refused, the export keeps its current settings",
			exp->export_id, exp->path, args.subfsal.name);
	}
	dcache_export_args_free(&args);
	return status;
}
