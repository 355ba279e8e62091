/*
 * The data path: read2, write2 and commit2.
 *
 * VFS keeps owning descriptors, share reservations and locks.  For each
 * READ or WRITE the adapter borrows VFS's descriptor the way VFS's own
 * read2/write2 get it (4.3: find_fd() and its locking protocol; 6.x:
 * fsal_start_io/fsal_complete_io), and hands it to the core, which plans
 * and issues the I/O (buffered, DONTCACHE, fadvise, O_DIRECT split) and
 * reports what happened.
 */
#include "dcache_internal.h"

#include <dlfcn.h>
#include <stddef.h>
#include <strings.h>
#include <unistd.h>

#include "export_mgr.h"
#include "gsh_config.h"
#include "log.h"
#include "sal_data.h"
#include "FSAL/FSAL_VFS/vfs_methods.h"

#include "abi.h"

/* ---- VFS's descriptor ----------------------------------------------------- */

#if DCACHE_HAS_START_IO

/*
 * 6.x and later: descriptors are generic (struct fsal_fd inside VFS's struct vfs_fd)
 * and I/O on one is bracketed by fsal_start_io/fsal_complete_io, exported
 * by Ganesha's core, which count the I/O instead of holding locks; VFS's
 * own read2/write2 call them exactly so (FSAL/FSAL_VFS/file.c).  Only VFS's
 * objects are handed to them, so the sub-FSAL must be VFS.
 */
bool dcache_resolve_vfs(struct fsal_module *sub_fsal)
{
	return strcasecmp(sub_fsal->name, "VFS") == 0;
}

/* A descriptor borrowed from VFS for one request, and what must be undone.
 * Not to be copied once borrowed: out may point at tmp. */
struct vfs_borrow {
	int fd;
	struct fsal_obj_handle *sub;
	struct fsal_fd *out; /* set once I/O has started */
	struct vfs_fd tmp;   /* a temporary descriptor, if one is needed */
	struct state_t *state;
	fsal_openflags_t openflags;
};

/*
 * As vfs_read2/vfs_write2 (and, for FSAL_O_ANY, vfs_commit2) do: the
 * state's descriptor, the global one or a temporary one; without a state,
 * fsal_start_io also takes a share reservation for the request, given back
 * in vfs_return_fd.
 */
static fsal_status_t vfs_borrow_fd(struct dcache_obj_handle *h, bool bypass,
				   struct state_t *state,
				   fsal_openflags_t openflags,
				   struct vfs_borrow *b)
{
	struct vfs_fsal_obj_handle *vfs = container_of(
		h->sub_handle, struct vfs_fsal_obj_handle, obj_handle);
	fsal_status_t status;
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	b->fd = -1;
	b->sub = h->sub_handle;
	b->out = NULL;
	b->state = state;
	b->openflags = openflags;
	/* FSAL_FD_INIT records op_ctx->fsal_export: VFS's, in this scope */
	b->tmp = (struct vfs_fd){FSAL_FD_INIT, -1};
	if (openflags == FSAL_O_ANY)
		status = fsal_start_global_io(&b->out, b->sub,
					      &vfs->u.file.fd.fsal_fd,
					      &b->tmp.fsal_fd, FSAL_O_ANY,
					      false, NULL);
	else
		status = fsal_start_io(&b->out, b->sub, &vfs->u.file.fd.fsal_fd,
				       &b->tmp.fsal_fd, state, openflags, false,
				       NULL, bypass, &vfs->u.file.share);
	if (FSAL_IS_ERROR(status)) {
		b->out = NULL;
		return status;
	}
	b->fd = container_of(b->out, struct vfs_fd, fsal_fd)->fd;
	return status;
}

static void vfs_return_fd(struct vfs_borrow *b)
{
	struct vfs_fsal_obj_handle *vfs;
	DCACHE_SUB_SCOPE(op_ctx->fsal_export);

	if (b->out == NULL)
		return;
	(void)fsal_complete_io(b->sub, b->out);
	b->out = NULL;
	if (b->state == NULL && b->openflags != FSAL_O_ANY) {
		vfs = container_of(b->sub, struct vfs_fsal_obj_handle,
				   obj_handle);
		update_share_counters_locked(b->sub, &vfs->u.file.share,
					     b->openflags, FSAL_O_CLOSED);
	}
}

#else

/* find_fd is exported by libfsalvfs.so but declared in no header; it is
 * looked up in the already loaded module rather than linked, because
 * linking libfsalvfs.so would run its constructor inside our dlopen. */
typedef fsal_status_t (*vfs_find_fd_fn)(int *fd, struct fsal_obj_handle *obj,
					bool bypass, struct state_t *state,
					fsal_openflags_t openflags,
					bool *has_lock, bool *closefd,
					bool open_for_locks);
static vfs_find_fd_fn vfs_find_fd;

bool dcache_resolve_vfs(struct fsal_module *sub_fsal)
{
	if (vfs_find_fd == NULL && sub_fsal->dl_handle != NULL)
		vfs_find_fd =
			(vfs_find_fd_fn)dlsym(sub_fsal->dl_handle, "find_fd");
	if (vfs_find_fd == NULL)
		LogCrit(COMPONENT_FSAL,
			"DCACHE: FSAL %s does not export find_fd: %s",
			sub_fsal->name, dlerror());
	return vfs_find_fd != NULL;
}

/* A descriptor borrowed from VFS for one request, and what must be undone. */
struct vfs_borrow {
	int fd;
	bool has_lock;		 /* sub handle's obj_lock held for read */
	bool closefd;		 /* a temporary descriptor to close */
	struct vfs_fd *state_fd; /* state's fdlock held for read */
	struct fsal_obj_handle *sub;
};

/*
 * As vfs_read2/vfs_write2 do: a state's fdlock is held for read so that an
 * OPEN upgrade (vfs_reopen2) cannot close the descriptor under us, then
 * find_fd picks the state's descriptor, the global one (returned with
 * obj_lock held for read) or a temporary one.
 */
static fsal_status_t vfs_borrow_fd(struct dcache_obj_handle *h, bool bypass,
				   struct state_t *state,
				   fsal_openflags_t openflags,
				   struct vfs_borrow *b)
{
	fsal_status_t status;

	*b = (struct vfs_borrow){.fd = -1, .sub = h->sub_handle};
	if (state != NULL) {
		b->state_fd =
			&container_of(state, struct vfs_state_fd, state)->vfs_fd;
		PTHREAD_RWLOCK_rdlock(&b->state_fd->fdlock);
	}
	{
		DCACHE_SUB_SCOPE(op_ctx->fsal_export);

		status = vfs_find_fd(&b->fd, b->sub, bypass, state, openflags,
				     &b->has_lock, &b->closefd, false);
	}
	return status;
}

static void vfs_return_fd(struct vfs_borrow *b)
{
	if (b->state_fd != NULL)
		PTHREAD_RWLOCK_unlock(&b->state_fd->fdlock);
	if (b->closefd)
		close(b->fd);
	if (b->has_lock)
		PTHREAD_RWLOCK_unlock(&b->sub->obj_lock);
}

#endif

/* ---- read2 / write2 -------------------------------------------------------- */

/*
 * A READ or WRITE between its start on a Ganesha worker and its reply.
 * With the io_uring backend the core may finish it on its completion
 * thread, after read2/write2 returned: Ganesha 4.3 and 6.5 allow that
 * (done_cb may run from any thread; the protocol layer holds the object,
 * the state and the request until then), and want a fresh op context for
 * it built the way FSAL_MEM does, never the request's own.
 */
struct dcache_pending {
	struct fsal_obj_handle *obj;
	fsal_async_cb done_cb;
	struct fsal_io_arg *arg;
	void *caller_arg;
	struct gsh_export *ctx_export;
	struct fsal_export *fsal_export; /* ours: done_cb goes up from here */
	/* The client's identity: 6.x's done_cb may check access with it
	 * (Read_Access_Check_Policy = post).  groups point into the request,
	 * which outlives its reply. */
	struct user_cred creds;
	bool write;
};

/* Fills Ganesha's io arg from the core's result and replies. */
static void reply(const struct dcache_pending *p, struct dcache_io_result r)
{
	if (p->write) {
		/* A short write is not an error: the reply says how much was
		 * written and the client sends the rest. */
		p->arg->io_amount = r.bytes;
		/* Raised (modes 3/4), never lowered on success. */
		p->arg->fsal_stable = r.error == 0 &&
				      (p->arg->fsal_stable || r.stable);
	} else if (r.error == 0) {
		p->arg->io_amount = r.bytes;
		p->arg->end_of_file = r.eof;
	}
#if DCACHE_HAS_FSAL_RESUME
	/* Non-zero asks the caller to call read2/write2 again; 9P never
	 * clears it (docs/ganesha-releases.md). */
	p->arg->fsal_resume = FSAL_NORESUME;
#endif
	p->done_cb(p->obj, posix2fsal_status(r.error), p->arg, p->caller_arg);
}

/* The core's completion thread: no op context of its own yet. */
static void reply_later(void *ctx, struct dcache_io_result r)
{
	struct dcache_pending *p = ctx;
	struct req_op_context op_context;

	get_gsh_export_ref(p->ctx_export);
	init_op_context_simple(&op_context, p->ctx_export, p->fsal_export);
	op_context.creds = p->creds;
	reply(p, r);
	release_op_context();
	gsh_free(p);
}

/*
 * Borrows VFS's descriptor only for the start: the core opens descriptors
 * of its own on the same inode for whatever outlives this call, so no VFS
 * lock is held across the asynchronous boundary (a pthread rwlock may not
 * be unlocked by another thread).  VFS's find_fd still decides whether the
 * request may proceed (share reservations, open mode).
 */
static void start_io(struct fsal_obj_handle *obj, bool bypass,
		     fsal_async_cb done_cb, struct fsal_io_arg *arg,
		     void *caller_arg, bool write)
{
	struct dcache_obj_handle *h = dcache_handle_of(obj);
	struct dcache_fsal_export *exp = dcache_ctx_export();
	struct dcache_pending *p = gsh_malloc(sizeof(*p));
	struct dcache_io_result result;
	struct vfs_borrow b;
	fsal_status_t status;
	bool inline_done;

	*p = (struct dcache_pending){
		.obj = obj,
		.done_cb = done_cb,
		.arg = arg,
		.caller_arg = caller_arg,
		.ctx_export = op_ctx->ctx_export,
		.fsal_export = op_ctx->fsal_export,
		.creds = op_ctx->creds,
		.write = write,
	};
	status = vfs_borrow_fd(h, bypass, arg->state,
			       write ? FSAL_O_WRITE : FSAL_O_READ, &b);
	if (FSAL_IS_ERROR(status))
		goto refused;
	{
		/* The identity vfs_set_credentials gives the thread below. */
		const struct dcache_creds creds = {
			.uid = op_ctx->creds.caller_uid,
			.gid = op_ctx->creds.caller_gid,
			.ngroups = op_ctx->creds.caller_glen,
			.groups = (const uint32_t *)op_ctx->creds.caller_garray,
		};
		struct dcache_io io = {
			.fd = b.fd,
			.offset = arg->offset,
			.iov = arg->iov,
			.iov_count = arg->iov_count,
			.stable = write && arg->fsal_stable,
			.creds = write ? &creds : NULL,
		};

		/* As VFS: the client's identity for quotas and suid clearing;
		 * io_uring takes the submitter's credentials for its workers. */
		if (write &&
		    !vfs_set_credentials(&op_ctx->creds, b.sub->fsal)) {
			status = fsalstat(ERR_FSAL_PERM, EPERM);
			goto refused;
		}
		inline_done =
			write ? dcache_write_start(exp->core, h->file, &io,
						   reply_later, p, &result)
			      : dcache_read_start(exp->core, h->file, &io,
						  reply_later, p, &result);
		if (write)
			vfs_restore_ganesha_credentials(b.sub->fsal);
	}
	vfs_return_fd(&b);
	/* Not inline: p belongs to reply_later, which may have run already. */
	if (inline_done) {
		reply(p, result);
		gsh_free(p);
	}
	return;

refused: /* before the core saw the request */
	vfs_return_fd(&b);
	gsh_free(p);
#if DCACHE_HAS_FSAL_RESUME
	arg->fsal_resume = FSAL_NORESUME;
#endif
	done_cb(obj, status, arg, caller_arg);
}

/*
 * A direct READ lands in the reply's buffer without a bounce copy only if
 * that buffer meets the device's memory alignment (512 bytes on virtio and
 * loop devices).  Large ones are page-aligned here: on 6.x DCACHE allocates
 * the buffer (from the RPC buffer pool, reused, given back through
 * iov_release after the reply); on 4.3 an NFSv3 READ's own buffer (from
 * gsh_malloc, 16 bytes past a page, freed with gsh_free after the reply:
 * nfs3_read.c) is replaced by a page-aligned one freed the same way, for a
 * direct or an auto export (auto sends READ streams direct by default: in
 * Ganesha's own buffer 40-45 % of their bytes took a bounce copy).  NFSv4's
 * READ buffer is page-aligned already; 9P's points into its reply and is
 * left alone.
 */
#if DCACHE_FSAL_ALLOCATES_READ_BUFFER
static void read_buffer_release(void *p)
{
	if (!dcache_rpc_buffer_put(p))
		gsh_free(p);
}

static void read_buffer(struct dcache_fsal_export *exp, struct fsal_io_arg *arg)
{
	size_t len;
	void *p = NULL;

	(void)exp;
	if (arg->iov_count != 1 || arg->iov[0].iov_base != NULL)
		return; /* the caller's own */
	len = arg->iov[0].iov_len;
	if (len >= DCACHE_RPC_BUFFER_MIN)
		p = dcache_rpc_buffer_get(len, DCACHE_RPC_READ);
	if (p == NULL)
		p = gsh_malloc_aligned(4096, len > 0 ? len : 1);
	arg->iov[0].iov_base = p;
	arg->iov_release = read_buffer_release;
	arg->release_data = p;
}
#else
static void read_buffer(struct dcache_fsal_export *exp, struct fsal_io_arg *arg)
{
	size_t len;
	void *p;
	enum dcache_mode mode;

	if (op_ctx->req_type != NFS_REQUEST || op_ctx->nfs_vers != NFS_V3 ||
	    arg->iov_count != 1)
		return;
	len = arg->iov[0].iov_len;
	if (len < DCACHE_RPC_BUFFER_MIN ||
	    ((uintptr_t)arg->iov[0].iov_base & 4095) == 0)
		return;
	mode = dcache_export_settings(exp->core).io_cache_read;
	if (mode != DCACHE_MODE_DIRECT && mode != DCACHE_MODE_AUTO)
		return;
	p = gsh_malloc_aligned(4096, (len + 3) & ~(size_t)3);
	gsh_free(arg->iov[0].iov_base);
	arg->iov[0].iov_base = p;
}
#endif

void dcache_read2(struct fsal_obj_handle *obj, bool bypass,
		  fsal_async_cb done_cb, struct fsal_io_arg *arg,
		  void *caller_arg)
{
	/* READ_PLUS: Ganesha 4.3 never passes io_info (docs/configuration.md);
	 * 6.5 does, but builds its reply from a copy the FSAL never sees, so
	 * the only right answer is VFS's: not supported, at once. */
	if (arg->info != NULL) {
#if DCACHE_HAS_FSAL_RESUME
		arg->fsal_resume = FSAL_NORESUME;
#endif
		done_cb(obj, fsalstat(ERR_FSAL_NOTSUPP, 0), arg, caller_arg);
		return;
	}
	read_buffer(dcache_ctx_export(), arg);
	start_io(obj, bypass, done_cb, arg, caller_arg, false);
}

void dcache_write2(struct fsal_obj_handle *obj, bool bypass,
		   fsal_async_cb done_cb, struct fsal_io_arg *arg,
		   void *caller_arg)
{
	start_io(obj, bypass, done_cb, arg, caller_arg, true);
}

/* ---- commit2 ------------------------------------------------------------- */

fsal_status_t dcache_commit2(struct fsal_obj_handle *obj, off_t offset,
			     size_t len)
{
	struct dcache_obj_handle *h = dcache_handle_of(obj);
	struct dcache_fsal_export *exp = dcache_ctx_export();
	fsal_status_t status;
	struct vfs_borrow b;
	struct timespec start, end;

	now(&start);
	{
		DCACHE_SUB_SCOPE(&exp->export);

		status = h->sub_handle->obj_ops->commit2(h->sub_handle, offset,
							 len);
	}
	now(&end);
	if (FSAL_IS_ERROR(status) || h->file == NULL)
		return status;
	/* The COMMIT is durable now; what follows is the mode's page-cache
	 * work (DONTNEED in fadvise mode), which must not fail the COMMIT. */
	if (!FSAL_IS_ERROR(vfs_borrow_fd(h, true, NULL, FSAL_O_ANY, &b)))
		(void)dcache_after_commit(exp->core, h->file, b.fd, offset, len,
					  timespec_diff(&start, &end));
	vfs_return_fd(&b);
	return status;
}
