/*
 * The export boundary: nothing a client presents or walks to leads out of
 * the export's tree.  A file handle names an inode, not a path, and
 * Ganesha's own checks stop at the export root only by cache-entry
 * identity; so every way in is checked here, by filesystem id and file id:
 *
 *  - at creation, the identity of the export root and of every directory
 *    above it up to "/" (dcache_capture_root);
 *  - wire_to_host: a handle this export did not hand out is checked once
 *    (check_unknown_handle), then remembered in the core's bounded table;
 *  - create_handle: a directory outside the export is refused as stale;
 *  - lookup: ".." never leaves the export (see dcache_lookup).
 *
 * Only directories matter: they are what a client walks and looks up
 * from.
 */
#include "dcache_internal.h"

#include <string.h>

#include "export_mgr.h"
#include "log.h"

/* ---- identities --------------------------------------------------------- */

static struct dcache_object_id id_of(const struct fsal_obj_handle *obj)
{
	return (struct dcache_object_id){.fsid = obj->fsid,
					 .fileid = obj->fileid};
}

static bool same_object(const struct dcache_object_id *id,
			const struct fsal_obj_handle *obj)
{
	return obj->fileid == id->fileid && obj->fsid.major == id->fsid.major &&
	       obj->fsid.minor == id->fsid.minor;
}

static bool dcache_is_export_root(const struct dcache_fsal_export *exp,
				  const struct fsal_obj_handle *sub_handle)
{
	return sub_handle->type == DIRECTORY &&
	       same_object(&exp->root, sub_handle);
}

static bool dcache_is_above_export(const struct dcache_fsal_export *exp,
				   const struct fsal_obj_handle *sub_handle)
{
	size_t i;

	if (sub_handle->type != DIRECTORY)
		return false;
	for (i = 0; i < exp->n_ancestors; i++)
		if (same_object(&exp->ancestors[i], sub_handle))
			return true;
	return false;
}

/*
 * The sub-FSAL handle of dir's parent directory, or NULL when there is none
 * to walk to: dir is a filesystem's root ("/", whose ".." is itself) or the
 * lookup failed.  op_ctx holds the sub-FSAL's export.
 */
static struct fsal_obj_handle *dcache_parent_dir(struct fsal_obj_handle *dir)
{
	struct fsal_obj_handle *parent = NULL;

	if (FSAL_IS_ERROR(dir->obj_ops->lookup(dir, "..", &parent, NULL)))
		return NULL;
	const struct dcache_object_id self = id_of(dir);

	if (same_object(&self, parent)) {
		parent->obj_ops->release(parent);
		return NULL;
	}
	return parent;
}

/*
 * Is the sub-FSAL directory dir inside this export's tree?  Walks ".." on
 * the sub-FSAL (op_ctx holding the sub-FSAL's export) until it meets the
 * export root (inside), a directory above it, or the top of the filesystem
 * (outside).  Only directories matter: they are what a client walks and
 * looks up from.
 */
#define DCACHE_MAX_DEPTH 1024

static bool dcache_directory_within_export(struct dcache_fsal_export *exp,
					   struct fsal_obj_handle *dir)
{
	struct fsal_obj_handle *cur = dir;
	bool inside = false;
	int depth;

	for (depth = 0; depth < DCACHE_MAX_DEPTH; depth++) {
		struct fsal_obj_handle *parent;

		if (dcache_is_export_root(exp, cur)) {
			inside = true;
			break;
		}
		if (dcache_is_above_export(exp, cur))
			break;
		parent = dcache_parent_dir(cur);
		if (parent == NULL)
			break;
		if (cur != dir)
			cur->obj_ops->release(cur);
		cur = parent;
	}
	if (cur != dir)
		cur->obj_ops->release(cur);
	return inside;
}

/* ---- the export's root, captured at creation --------------------------- */

/*
 * Records the identity of the export root and of every directory above it
 * up to "/" (see dcache_lookup in handle.c).  op_ctx->fsal_export is the
 * sub-FSAL's export here.
 */
fsal_status_t dcache_capture_root(struct dcache_fsal_export *exp)
{
	struct fsal_export *sub = exp->export.sub_export;
	struct fsal_obj_handle *cur = NULL;
	fsal_status_t status;

	status = sub->exp_ops.lookup_path(sub, exp->path, &cur, NULL);
	if (FSAL_IS_ERROR(status))
		return status;
	exp->root = id_of(cur);
	exp->n_ancestors = 0;
	while (exp->n_ancestors < DCACHE_MAX_ANCESTORS) {
		struct fsal_obj_handle *parent = dcache_parent_dir(cur);

		if (parent == NULL)
			break;
		exp->ancestors[exp->n_ancestors++] = id_of(parent);
		cur->obj_ops->release(cur);
		cur = parent;
	}
	cur->obj_ops->release(cur);
	return status;
}

/* ---- file handles from clients ------------------------------------------ */

/* Logs a client's handle of a directory outside the export, refused. */
static void log_refused_outside(const struct dcache_fsal_export *exp,
				const struct fsal_obj_handle *sub_handle)
{
	LogWarn(COMPONENT_FSAL,
		"DCACHE: export %u (%s): refused a file handle of a directory outside the export (fileid %" PRIu64
		")",
		exp->export_id, exp->path, sub_handle->fileid);
}

/*
 * Checks a file handle this export did not hand out itself: the object
 * must exist and, for a directory, lie inside the export's tree.  Records
 * it as known when it passes.  op_ctx holds our export.
 */
static fsal_status_t check_unknown_handle(struct dcache_fsal_export *exp,
					  const struct gsh_buffdesc *fh_desc)
{
	struct fsal_export *sub = exp->export.sub_export;
	struct fsal_obj_handle *sub_handle = NULL;
	char copy[NFS4_FHSIZE];
	struct gsh_buffdesc desc = {copy, fh_desc->len};
	fsal_status_t status;
	bool inside;

	if (fh_desc->len > sizeof(copy))
		return fsalstat(ERR_FSAL_BADHANDLE, EINVAL);
	memcpy(copy, fh_desc->addr, fh_desc->len);
	DCACHE_SUB_SCOPE(&exp->export);

	status = sub->exp_ops.create_handle(sub, &desc, &sub_handle, NULL);
	if (FSAL_IS_ERROR(status))
		return status;
	inside = sub_handle->type != DIRECTORY ||
		 dcache_directory_within_export(exp, sub_handle);
	if (inside) {
		struct gsh_buffdesc key;

		sub_handle->obj_ops->handle_to_key(sub_handle, &key);
		dcache_export_handle_add(exp->core, key.addr, key.len);
	} else {
		log_refused_outside(exp, sub_handle);
	}
	sub_handle->obj_ops->release(sub_handle);
	return inside ? status : fsalstat(ERR_FSAL_STALE, ESTALE);
}

/*
 * wire_to_host sees every file handle a client presents (PUTFH, and each
 * NFSv3 call).  MDCACHE shares its entries among the exports of one FSAL
 * on one filesystem and serves a cached entry without asking the FSAL, so
 * a directory handle of a sibling export, relabelled with this export's
 * id, would otherwise be served here.  Handles this export handed out (or
 * has checked) pass with one lookup in a bounded table; any other is
 * checked once (check_unknown_handle).
 */
fsal_status_t dcache_wire_to_host(struct fsal_export *exp_hdl,
				  fsal_digesttype_t in_type,
				  struct gsh_buffdesc *fh_desc, int flags)
{
	struct dcache_fsal_export *exp = dcache_export_of(exp_hdl);
	struct fsal_export *sub = exp_hdl->sub_export;
	char key_bytes[NFS4_FHSIZE];
	struct gsh_buffdesc key;
	fsal_status_t status;

	{
		DCACHE_SUB_SCOPE(exp_hdl);

		status =
			sub->exp_ops.wire_to_host(sub, in_type, fh_desc, flags);
		if (FSAL_IS_ERROR(status))
			return status;
		if (fh_desc->len > sizeof(key_bytes))
			return fsalstat(ERR_FSAL_BADHANDLE, EINVAL);
		memcpy(key_bytes, fh_desc->addr, fh_desc->len);
		key = (struct gsh_buffdesc){key_bytes, fh_desc->len};
		status = sub->exp_ops.host_to_key(sub, &key);
		if (FSAL_IS_ERROR(status))
			return status;
	}
	if (dcache_export_handle_known(exp->core, key.addr, key.len))
		return status;
	return check_unknown_handle(exp, fh_desc);
}

/*
 * create_handle turns a client's file handle into an object when MDCACHE
 * does not hold it.  A file handle names an inode, not a path, so a forged
 * or leaked handle of a directory above the export (or in a sibling export
 * on the same filesystem) would otherwise be served with this export's
 * access rights; such directories are refused as stale.
 */
fsal_status_t dcache_create_handle(struct fsal_export *exp_hdl,
				   struct gsh_buffdesc *fh_desc,
				   struct fsal_obj_handle **handle,
				   struct fsal_attrlist *attrs_out)
{
	struct dcache_fsal_export *exp = dcache_export_of(exp_hdl);
	struct fsal_obj_handle *sub_handle = NULL;
	fsal_status_t status;

	*handle = NULL;
	{
		DCACHE_SUB_SCOPE(exp_hdl);

		status = exp_hdl->sub_export->exp_ops.create_handle(
			exp_hdl->sub_export, fh_desc, &sub_handle, attrs_out);
		if (!FSAL_IS_ERROR(status) && sub_handle->type == DIRECTORY &&
		    !dcache_directory_within_export(exp, sub_handle)) {
			log_refused_outside(exp, sub_handle);
			sub_handle->obj_ops->release(sub_handle);
			return fsalstat(ERR_FSAL_STALE, ESTALE);
		}
	}
	if (FSAL_IS_ERROR(status))
		return status;
	return dcache_wrap_handle(exp, sub_handle, handle);
}

/* ---- lookup ------------------------------------------------------------ */

/*
 * A new handle of the same object: the caller of lookup owns (and
 * releases) what it gets back, so the directory's own handle cannot be
 * handed out twice.  The sub-FSAL makes one from the object's key, as
 * MDCACHE does when it re-creates an evicted entry.
 */
static fsal_status_t new_handle_of(struct dcache_fsal_export *exp,
				   struct fsal_obj_handle *sub,
				   struct fsal_obj_handle **out,
				   struct fsal_attrlist *attrs_out)
{
	struct fsal_export *sub_export = exp->export.sub_export;
	struct fsal_obj_handle *copy = NULL;
	char key_bytes[NFS4_FHSIZE];
	struct gsh_buffdesc key;
	fsal_status_t status;

	{
		DCACHE_SUB_SCOPE(&exp->export);

		sub->obj_ops->handle_to_key(sub, &key);
		if (key.len > sizeof(key_bytes))
			return fsalstat(ERR_FSAL_FAULT, EINVAL);
		memcpy(key_bytes, key.addr, key.len);
		key.addr = key_bytes;
		status = sub_export->exp_ops.create_handle(sub_export, &key,
							   &copy, attrs_out);
	}
	if (FSAL_IS_ERROR(status))
		return status;
	return dcache_wrap_handle(exp, copy, out);
}

/*
 * lookup: ".." never leaves the export.
 *
 * Ganesha's core stops ".." at an export's root only when the directory is
 * the very cache entry it holds as the export root (fsal_lookupp compares
 * pointers).  Whenever that identity misses -- a second encoding of the
 * root directory's file handle, which MDCACHE keys as another entry; a root
 * entry replaced after it went stale; entries shared by two exports on one
 * filesystem -- the core hands ".." down the stack and VFS resolves it on
 * the real filesystem, which knows nothing of where the export begins: the
 * client gets a handle above the export, with the export's access rights.
 * The plugin therefore checks for itself, by filesystem id and file id
 * (not by handle bytes):
 *  - ".." of the export root is the root, as the core intends;
 *  - ".." that lands on a directory outside the export's tree is refused:
 *    above the root (reachable only from a directory that was not inside
 *    this export to begin with), or elsewhere (a directory moved out of
 *    the export on the server while a client held its handle).
 *
 * While the export is being created, MDCACHE asks for the parent of the
 * new root entry before the export holds it as its root, and caches the
 * answer in the entry.  Entries are shared by the exports of a filesystem:
 * for a nested export, that entry is also an ordinary directory of the
 * enclosing export, whose LOOKUPP must find the real parent.  So the root
 * rule applies only once the export's root is established; the core's own
 * check covers the root entry from then on, and ours every other entry.
 */
static bool export_root_established(void)
{
	return op_ctx->ctx_export != NULL &&
	       op_ctx->ctx_export->exp_root_obj != NULL;
}

fsal_status_t dcache_lookup(struct fsal_obj_handle *parent, const char *name,
			    struct fsal_obj_handle **handle,
			    struct fsal_attrlist *attrs_out)
{
	struct dcache_fsal_export *exp = dcache_ctx_export();
	struct fsal_obj_handle *sub_parent =
		dcache_handle_of(parent)->sub_handle;
	bool dotdot = strcmp(name, "..") == 0;
	fsal_status_t status;

	*handle = NULL;
	if (dotdot && export_root_established() &&
	    dcache_is_export_root(exp, sub_parent)) {
		LogDebug(
			COMPONENT_FSAL,
			"DCACHE: export %u: \"..\" of the export root stays at the root",
			exp->export_id);
		return new_handle_of(exp, sub_parent, handle, attrs_out);
	}
	{
		DCACHE_SUB_SCOPE(&exp->export);

		status = sub_parent->obj_ops->lookup(sub_parent, name, handle,
						     attrs_out);
		if (!FSAL_IS_ERROR(status) && dotdot &&
		    !dcache_is_export_root(exp, *handle) &&
		    !dcache_directory_within_export(exp, *handle)) {
			/* Expected once per export at start-up (MDCACHE's
			 * probe of the new root's parent); a warning later. */
			LogAtLevel(
				COMPONENT_FSAL,
				export_root_established() ? NIV_WARN
							  : NIV_DEBUG,
				"DCACHE: export %u (%s): refused \"..\" from directory fileid %" PRIu64
				" to fileid %" PRIu64 " outside the export",
				exp->export_id, exp->path, sub_parent->fileid,
				(*handle)->fileid);
			(*handle)->obj_ops->release(*handle);
			*handle = NULL;
			return fsalstat(ERR_FSAL_ACCESS, EACCES);
		}
	}
	if (FSAL_IS_ERROR(status))
		return status;
	return dcache_wrap_handle(exp, *handle, handle);
}
