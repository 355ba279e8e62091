/*
 * Object handles: each DCACHE handle wraps the sub-FSAL's handle and
 * forwards every metadata op to it.  Wire handles and keys stay the
 * sub-FSAL's, byte for byte, so a client sees the same file handles as from
 * a plain VFS export.  The data path lives in file.c, lookup and the rest
 * of the export boundary in escape_guard.c.
 */
#include "dcache_internal.h"

#include <string.h>

#include "export_mgr.h"
#include "log.h"

/* ---- wrapping ----------------------------------------------------------- */

fsal_status_t dcache_wrap_handle(struct dcache_fsal_export *exp,
				 struct fsal_obj_handle *sub_handle,
				 struct fsal_obj_handle **out)
{
	struct dcache_obj_handle *h = gsh_calloc(1, sizeof(*h));
	struct gsh_buffdesc key;

	DCACHE_HANDLE_INIT(&h->obj_handle, &exp->export, sub_handle->type);
	h->obj_handle.obj_ops = &dcache_module.handle_ops;
	h->obj_handle.fsid = sub_handle->fsid;
	h->obj_handle.fileid = sub_handle->fileid;
	h->obj_handle.fs = sub_handle->fs;
	h->obj_handle.state_hdl = sub_handle->state_hdl;
	h->sub_handle = sub_handle;
	if (sub_handle->type == REGULAR_FILE)
		h->file = dcache_file_new(exp->core);
	/* Reached through this export: its handle needs no check later
	 * (see dcache_wire_to_host). */
	sub_handle->obj_ops->handle_to_key(sub_handle, &key);
	dcache_export_handle_add(exp->core, key.addr, key.len);
	*out = &h->obj_handle;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* Wraps *out in place when the sub-FSAL call that produced it succeeded. */
static fsal_status_t wrap_result(fsal_status_t status,
				 struct fsal_obj_handle **out)
{
	if (FSAL_IS_ERROR(status) || *out == NULL)
		return status;
	return dcache_wrap_handle(dcache_ctx_export(), *out, out);
}

static struct fsal_obj_handle *sub_of(struct fsal_obj_handle *obj)
{
	return obj ? dcache_handle_of(obj)->sub_handle : NULL;
}

static void dcache_release(struct fsal_obj_handle *obj)
{
	struct dcache_obj_handle *h = dcache_handle_of(obj);

	if (dcache_may_release_sub()) {
		DCACHE_SUB_SCOPE(op_ctx->fsal_export);

		h->sub_handle->obj_ops->release(h->sub_handle);
	}
	if (h->file)
		dcache_file_free(h->file);
	DCACHE_HANDLE_FINI(obj);
	gsh_free(h);
}

static fsal_status_t dcache_merge(struct fsal_obj_handle *orig,
				  struct fsal_obj_handle *dupe)
{
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	return sub_of(orig)->obj_ops->merge(sub_of(orig), sub_of(dupe));
}

/* ---- directories -------------------------------------------------------- */

struct dcache_readdir_state {
	fsal_readdir_cb upper_cb;
	void *upper_state;
	struct dcache_fsal_export *exp;
};

/* Called by the sub-FSAL (op_ctx holds its export) for each entry. */
static enum fsal_dir_result dcache_readdir_cb(const char *name,
					      struct fsal_obj_handle *sub_obj,
					      struct fsal_attrlist *attrs,
					      void *dir_state,
					      fsal_cookie_t cookie)
{
	struct dcache_readdir_state *state = dir_state;
	struct fsal_obj_handle *obj;

	(void)dcache_wrap_handle(state->exp, sub_obj, &obj);
	DCACHE_UPPER_SCOPE(&state->exp->export);

	return state->upper_cb(name, obj, attrs, state->upper_state, cookie);
}

static fsal_status_t dcache_readdir(struct fsal_obj_handle *dir,
				    fsal_cookie_t *whence, void *dir_state,
				    fsal_readdir_cb cb, attrmask_t attrmask,
				    bool *eof)
{
	struct dcache_readdir_state state = {
		.upper_cb = cb,
		.upper_state = dir_state,
		.exp = dcache_ctx_export(),
	};
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	return sub_of(dir)->obj_ops->readdir(sub_of(dir), whence, &state,
					     dcache_readdir_cb, attrmask, eof);
}

static fsal_cookie_t dcache_compute_readdir_cookie(struct fsal_obj_handle *dir,
						   const char *name)
{
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	return sub_of(dir)->obj_ops->compute_readdir_cookie(sub_of(dir), name);
}

static int dcache_dirent_cmp(struct fsal_obj_handle *dir, const char *name1,
			     fsal_cookie_t cookie1, const char *name2,
			     fsal_cookie_t cookie2)
{
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	return sub_of(dir)->obj_ops->dirent_cmp(sub_of(dir), name1, cookie1,
						name2, cookie2);
}

/* ---- creating objects --------------------------------------------------- */

/*
 * The ops that create an object: forwarded like the plain ones below, and
 * the sub-FSAL's new handle wrapped in ours (open2, which may create one,
 * is with the size changes below).
 */
/* The parameter lists below are macro arguments, which clang-format 14
 * would read as expressions. */
/* clang-format off */
#define DCACHE_FORWARD_CREATE(op, params, ...)                                \
	static fsal_status_t dcache_##op params                               \
	{                                                                     \
		fsal_status_t status;                                         \
									      \
		*new_obj = NULL;                                              \
		{                                                             \
			DCACHE_SUB_SCOPE(op_ctx->fsal_export);                \
									      \
			status = sub_of(obj)->obj_ops->op(sub_of(obj),        \
							  ##__VA_ARGS__);     \
		}                                                             \
		return wrap_result(status, new_obj);                          \
	}

DCACHE_FORWARD_CREATE(mkdir,
		      (struct fsal_obj_handle *obj, const char *name,
		       struct fsal_attrlist *attrs_in,
		       struct fsal_obj_handle **new_obj,
		       struct fsal_attrlist *attrs_out
		       DCACHE_DIR_ATTRS_PARAMS(parent)),
		      name, attrs_in, new_obj, attrs_out
		      DCACHE_DIR_ATTRS_ARGS(parent))
DCACHE_FORWARD_CREATE(mknode,
		      (struct fsal_obj_handle *obj, const char *name,
		       object_file_type_t nodetype,
		       struct fsal_attrlist *attrs_in,
		       struct fsal_obj_handle **new_obj,
		       struct fsal_attrlist *attrs_out
		       DCACHE_DIR_ATTRS_PARAMS(parent)),
		      name, nodetype, attrs_in, new_obj, attrs_out
		      DCACHE_DIR_ATTRS_ARGS(parent))
DCACHE_FORWARD_CREATE(symlink,
		      (struct fsal_obj_handle *obj, const char *name,
		       const char *link_path, struct fsal_attrlist *attrs_in,
		       struct fsal_obj_handle **new_obj,
		       struct fsal_attrlist *attrs_out
		       DCACHE_DIR_ATTRS_PARAMS(parent)),
		      name, link_path, attrs_in, new_obj, attrs_out
		      DCACHE_DIR_ATTRS_ARGS(parent))
/* clang-format on */

/* ---- size changes: setattr2, open2, reopen2 ------------------------------ */

/*
 * Each forwarded; a size change (truncate up or down) then tells the core,
 * which lets go of the held boundary pages the new EOF crosses and cuts the
 * file's span in auto's history.  It comes as a SETATTR of the size, or with
 * an open: fsal_open2 turns an OPEN (or NFSv3 CREATE) UNCHECKED with size 0
 * into FSAL_O_TRUNC, and MDCACHE opens a file it finds by handle (name
 * NULL), an open upgrade through reopen2.
 */
static void file_resized(struct fsal_obj_handle *obj, uint64_t size)
{
	struct dcache_obj_handle *h = dcache_handle_of(obj);

	if (h->file != NULL)
		dcache_file_truncated(h->file, size);
}

static fsal_status_t dcache_setattr2(struct fsal_obj_handle *obj, bool bypass,
				     struct state_t *state,
				     struct fsal_attrlist *attrib_set)
{
	fsal_status_t status;

	{
		DCACHE_SUB_SCOPE(op_ctx->fsal_export);
		status = sub_of(obj)->obj_ops->setattr2(sub_of(obj), bypass,
							state, attrib_set);
	}
	if (!FSAL_IS_ERROR(status) &&
	    FSAL_TEST_MASK(attrib_set->valid_mask, ATTR_SIZE))
		file_resized(obj, attrib_set->filesize);
	return status;
}

/* A file created by name is new, with nothing to let go of: only an open
 * by handle truncates what the core knows.  (The parameter list ends in a
 * macro, which clang-format 14 would read as an expression.) */
/* clang-format off */
static fsal_status_t dcache_open2(struct fsal_obj_handle *obj,
				  struct state_t *state,
				  fsal_openflags_t openflags,
				  enum fsal_create_mode createmode,
				  const char *name,
				  struct fsal_attrlist *attrs_in,
				  fsal_verifier_t verifier,
				  struct fsal_obj_handle **new_obj,
				  struct fsal_attrlist *attrs_out,
				  bool *caller_perm_check
				  DCACHE_DIR_ATTRS_PARAMS(parent))
/* clang-format on */
{
	fsal_status_t status;

	*new_obj = NULL;
	{
		DCACHE_SUB_SCOPE(op_ctx->fsal_export);

		status = sub_of(obj)->obj_ops->open2(
			sub_of(obj), state, openflags, createmode, name,
			attrs_in, verifier, new_obj, attrs_out,
			caller_perm_check DCACHE_DIR_ATTRS_ARGS(parent));
	}
	if (!FSAL_IS_ERROR(status) && name == NULL &&
	    (openflags & FSAL_O_TRUNC))
		file_resized(obj, 0);
	return wrap_result(status, new_obj);
}

static fsal_status_t dcache_reopen2(struct fsal_obj_handle *obj,
				    struct state_t *state,
				    fsal_openflags_t openflags)
{
	fsal_status_t status;

	{
		DCACHE_SUB_SCOPE(op_ctx->fsal_export);
		status = sub_of(obj)->obj_ops->reopen2(sub_of(obj), state,
						       openflags);
	}
	if (!FSAL_IS_ERROR(status) && (openflags & FSAL_O_TRUNC))
		file_resized(obj, 0);
	return status;
}

/* ---- plain forwards ----------------------------------------------------- */

/*
 * Each of these unwraps its handle arguments and calls the same op of the
 * sub-FSAL inside DCACHE_SUB_SCOPE; the macro keeps the ~30 forwards
 * identical in shape, so a reviewer checks the pattern once.
 */
/* The parameter lists below are macro arguments, which clang-format 14
 * would read as expressions. */
/* clang-format off */
#define DCACHE_FORWARD(ret, op, params, ...)                                  \
	static ret dcache_##op params                                         \
	{                                                                     \
		DCACHE_SUB_SCOPE(op_ctx->fsal_export);                        \
		return sub_of(obj)->obj_ops->op(sub_of(obj), ##__VA_ARGS__);  \
	}

DCACHE_FORWARD(fsal_status_t, readlink,
	       (struct fsal_obj_handle *obj, DCACHE_READLINK_BUF *link_content,
		bool refresh),
	       link_content, refresh)
DCACHE_FORWARD(fsal_status_t, getattrs,
	       (struct fsal_obj_handle *obj, struct fsal_attrlist *attrs_out),
	       attrs_out)
DCACHE_FORWARD(fsal_status_t, link,
	       (struct fsal_obj_handle *obj, struct fsal_obj_handle *destdir,
		const char *name DCACHE_DIR_ATTRS_PARAMS(destdir)),
	       sub_of(destdir), name DCACHE_DIR_ATTRS_ARGS(destdir))
DCACHE_FORWARD(fsal_status_t, rename,
	       (struct fsal_obj_handle *obj, struct fsal_obj_handle *olddir,
		const char *old_name, struct fsal_obj_handle *newdir,
		const char *new_name DCACHE_DIR_ATTRS_PARAMS(olddir)
		DCACHE_DIR_ATTRS_PARAMS(newdir)),
	       sub_of(olddir), old_name, sub_of(newdir), new_name
	       DCACHE_DIR_ATTRS_ARGS(olddir) DCACHE_DIR_ATTRS_ARGS(newdir))
DCACHE_FORWARD(fsal_status_t, fallocate,
	       (struct fsal_obj_handle *obj, struct state_t *state,
		uint64_t offset, uint64_t length, bool allocate),
	       state, offset, length, allocate)
DCACHE_FORWARD(fsal_status_t, list_ext_attrs,
	       (struct fsal_obj_handle *obj, unsigned int cookie,
		struct fsal_xattrent *xattrs_tab, unsigned int xattrs_tabsize,
		unsigned int *nb_returned, int *end_of_list),
	       cookie, xattrs_tab, xattrs_tabsize, nb_returned, end_of_list)
DCACHE_FORWARD(fsal_status_t, getextattr_id_by_name,
	       (struct fsal_obj_handle *obj, const char *xattr_name,
		unsigned int *xattr_id),
	       xattr_name, xattr_id)
DCACHE_FORWARD(fsal_status_t, getextattr_value_by_name,
	       (struct fsal_obj_handle *obj, const char *xattr_name,
		void *buffer_addr, size_t buffer_size, size_t *output_size),
	       xattr_name, buffer_addr, buffer_size, output_size)
DCACHE_FORWARD(fsal_status_t, getextattr_value_by_id,
	       (struct fsal_obj_handle *obj, unsigned int xattr_id,
		void *buffer_addr, size_t buffer_size, size_t *output_size),
	       xattr_id, buffer_addr, buffer_size, output_size)
DCACHE_FORWARD(fsal_status_t, setextattr_value,
	       (struct fsal_obj_handle *obj, const char *xattr_name,
		void *buffer_addr, size_t buffer_size, int create),
	       xattr_name, buffer_addr, buffer_size, create)
DCACHE_FORWARD(fsal_status_t, setextattr_value_by_id,
	       (struct fsal_obj_handle *obj, unsigned int xattr_id,
		void *buffer_addr, size_t buffer_size),
	       xattr_id, buffer_addr, buffer_size)
DCACHE_FORWARD(fsal_status_t, remove_extattr_by_id,
	       (struct fsal_obj_handle *obj, unsigned int xattr_id), xattr_id)
DCACHE_FORWARD(fsal_status_t, remove_extattr_by_name,
	       (struct fsal_obj_handle *obj, const char *xattr_name),
	       xattr_name)
DCACHE_FORWARD(void, handle_to_key,
	       (struct fsal_obj_handle *obj, struct gsh_buffdesc *fh_desc),
	       fh_desc)
DCACHE_FORWARD(bool, check_verifier,
	       (struct fsal_obj_handle *obj, fsal_verifier_t verifier),
	       verifier)
DCACHE_FORWARD(fsal_openflags_t, status2,
	       (struct fsal_obj_handle *obj, struct state_t *state), state)
DCACHE_FORWARD(fsal_status_t, seek2,
	       (struct fsal_obj_handle *obj, struct state_t *state,
		struct io_info *info),
	       state, info)
DCACHE_FORWARD(fsal_status_t, io_advise2,
	       (struct fsal_obj_handle *obj, struct state_t *state,
		struct io_hints *hints),
	       state, hints)
DCACHE_FORWARD(fsal_status_t, lock_op2,
	       (struct fsal_obj_handle *obj, struct state_t *state, void *owner,
		fsal_lock_op_t lock_op, fsal_lock_param_t *request_lock,
		fsal_lock_param_t *conflicting_lock),
	       state, owner, lock_op, request_lock, conflicting_lock)
DCACHE_FORWARD(bool, is_referral,
	       (struct fsal_obj_handle *obj, struct fsal_attrlist *attrs,
		bool cache_attrs),
	       attrs, cache_attrs)
/* clang-format on */

static fsal_status_t dcache_handle_to_wire(const struct fsal_obj_handle *obj,
					   fsal_digesttype_t output_type,
					   struct gsh_buffdesc *fh_desc)
{
	struct fsal_obj_handle *sub =
		dcache_handle_of((struct fsal_obj_handle *)obj)->sub_handle;
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	return sub->obj_ops->handle_to_wire(sub, output_type, fh_desc);
}

static fsal_status_t
dcache_unlink(struct fsal_obj_handle *dir, struct fsal_obj_handle *obj,
	      const char *name DCACHE_DIR_ATTRS_PARAMS(parent))
{
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	return sub_of(dir)->obj_ops->unlink(sub_of(dir), sub_of(obj),
					    name DCACHE_DIR_ATTRS_ARGS(parent));
}

/* ---- open and close ----------------------------------------------------- */

/* The O_DIRECT descriptor the core keeps beside VFS's follows VFS's global
 * descriptor: closed whenever VFS closes its own. */
static fsal_status_t dcache_close(struct fsal_obj_handle *obj)
{
	struct dcache_obj_handle *h = dcache_handle_of(obj);
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	if (h->file)
		dcache_file_close(h->file);
	return h->sub_handle->obj_ops->close(h->sub_handle);
}

static fsal_status_t dcache_close2(struct fsal_obj_handle *obj,
				   struct state_t *state)
{
	struct dcache_obj_handle *h = dcache_handle_of(obj);
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	if (h->file)
		dcache_file_close(h->file);
	return h->sub_handle->obj_ops->close2(h->sub_handle, state);
}

void dcache_handle_ops_init(struct fsal_obj_ops *ops)
{
	fsal_default_obj_ops_init(ops);

	ops->release = dcache_release;
	ops->merge = dcache_merge;
	ops->lookup = dcache_lookup;
	ops->readdir = dcache_readdir;
	ops->compute_readdir_cookie = dcache_compute_readdir_cookie;
	ops->dirent_cmp = dcache_dirent_cmp;
	ops->mkdir = dcache_mkdir;
	ops->mknode = dcache_mknode;
	ops->symlink = dcache_symlink;
	ops->readlink = dcache_readlink;
	ops->getattrs = dcache_getattrs;
	ops->link = dcache_link;
	ops->rename = dcache_rename;
	ops->unlink = dcache_unlink;
	ops->close = dcache_close;
	ops->fallocate = dcache_fallocate;
	ops->list_ext_attrs = dcache_list_ext_attrs;
	ops->getextattr_id_by_name = dcache_getextattr_id_by_name;
	ops->getextattr_value_by_name = dcache_getextattr_value_by_name;
	ops->getextattr_value_by_id = dcache_getextattr_value_by_id;
	ops->setextattr_value = dcache_setextattr_value;
	ops->setextattr_value_by_id = dcache_setextattr_value_by_id;
	ops->remove_extattr_by_id = dcache_remove_extattr_by_id;
	ops->remove_extattr_by_name = dcache_remove_extattr_by_name;
	ops->handle_to_wire = dcache_handle_to_wire;
	ops->handle_to_key = dcache_handle_to_key;
	ops->open2 = dcache_open2;
	ops->check_verifier = dcache_check_verifier;
	ops->status2 = dcache_status2;
	ops->reopen2 = dcache_reopen2;
	ops->read2 = dcache_read2;
	ops->write2 = dcache_write2;
	ops->seek2 = dcache_seek2;
	ops->io_advise2 = dcache_io_advise2;
	ops->commit2 = dcache_commit2;
	ops->lock_op2 = dcache_lock_op2;
	ops->setattr2 = dcache_setattr2;
	ops->close2 = dcache_close2;
	ops->is_referral = dcache_is_referral;
}
