/*
 * The ABI of the packaged Ganesha each build loads into.
 *
 * The plugin is built against headers from the source package, not against
 * the binaries it loads into; these layouts were read off Debian's binaries
 * (docs/architecture.md for 4.3, docs/ganesha-6.5.md section 15 for 6.5,
 * each with the instruction it was read from).  A config.h or header set
 * that does not match Debian's build fails here rather than corrupting
 * memory at run time.  Included by file.c only (with the headers it names).
 */
#ifndef DCACHE_ABI_H
#define DCACHE_ABI_H

#include <stddef.h>

#if DCACHE_GANESHA_6

/* Debian 13, nfs-ganesha 6.5-5.  The FSAL API stayed 13.0 while layouts
 * changed within 6.x (struct fsal_module, struct req_op_context): the
 * offsets below are what tells 6.5 from another 6.x. */
_Static_assert(FSAL_MAJOR_VERSION == 13 && FSAL_MINOR_VERSION == 0,
	       "FSAL API of Ganesha 6.5 expected");
_Static_assert(sizeof(struct state_t) == 0xe0, "state_t size");
_Static_assert(offsetof(struct state_t, state_free) == 0x58,
	       "state_t.state_free offset");
_Static_assert(offsetof(struct state_t, state_type) == 0xb0,
	       "state_t.state_type offset");
_Static_assert(offsetof(struct state_t, stateid_other) == 0xbc,
	       "state_t.stateid_other offset");
_Static_assert(sizeof(struct vfs_state_fd) == 0x1b0, "vfs_state_fd size");
_Static_assert(offsetof(struct vfs_state_fd, vfs_fd.fd) == 0x1a8,
	       "vfs_state_fd.vfs_fd.fd offset");
_Static_assert(sizeof(struct fsal_fd) == 0xc8, "fsal_fd size");
_Static_assert(offsetof(struct fsal_fd, fsal_export) == 0x18,
	       "fsal_fd.fsal_export offset");
_Static_assert(sizeof(struct vfs_fd) == 0xd0, "vfs_fd size");
_Static_assert(offsetof(struct vfs_fd, fd) == 0xc8, "vfs_fd.fd offset");
_Static_assert(offsetof(struct vfs_fsal_module, only_one_user) == 0x320,
	       "vfs_fsal_module.only_one_user offset");
_Static_assert(offsetof(struct fsal_module, fsm_lock) == 0xc8,
	       "fsal_module.fsm_lock offset");
_Static_assert(sizeof(struct export_ops) == 0x110, "export_ops size");
_Static_assert(offsetof(struct fsal_export, owning_export) == 0x140,
	       "fsal_export.owning_export offset");
_Static_assert(offsetof(struct req_op_context, creds) == 0x8,
	       "req_op_context.creds offset");
_Static_assert(offsetof(struct req_op_context, ctx_export) == 0x80,
	       "req_op_context.ctx_export offset");
_Static_assert(offsetof(struct req_op_context, fsal_export) == 0x98,
	       "req_op_context.fsal_export offset");
_Static_assert(offsetof(struct fsal_obj_ops, read2) == 0x150,
	       "fsal_obj_ops.read2 offset");
_Static_assert(offsetof(struct fsal_io_arg, io_amount) == 0x10 &&
		       offsetof(struct fsal_io_arg, info) == 0x18 &&
		       offsetof(struct fsal_io_arg, fsal_resume) == 0x28 &&
		       offsetof(struct fsal_io_arg, end_of_file) == 0x2c &&
		       offsetof(struct fsal_io_arg, state) == 0x30 &&
		       offsetof(struct fsal_io_arg, offset) == 0x38 &&
		       offsetof(struct fsal_io_arg, iov_count) == 0x48 &&
		       offsetof(struct fsal_io_arg, iov) == 0x58,
	       "fsal_io_arg layout");
_Static_assert(offsetof(nfs_parameter_t, core_param.enable_FSALSTATS) == 0x124,
	       "nfs_param.core_param.enable_FSALSTATS offset");

#else

/* Debian 12, nfs-ganesha 4.3-2. */
_Static_assert(FSAL_MAJOR_VERSION == 11 && FSAL_MINOR_VERSION == 0,
	       "FSAL API of Ganesha 4.3 expected");
_Static_assert(sizeof(struct state_t) == 0xd8, "state_t size");
_Static_assert(offsetof(struct state_t, state_type) == 0xa8,
	       "state_t.state_type offset");
_Static_assert(offsetof(struct state_t, stateid_other) == 0xb4,
	       "state_t.stateid_other offset");
_Static_assert(sizeof(struct vfs_state_fd) == 0x120, "vfs_state_fd size");
_Static_assert(offsetof(struct vfs_state_fd, vfs_fd.openflags) == 0xd8,
	       "vfs_state_fd.vfs_fd.openflags offset");
_Static_assert(offsetof(struct vfs_state_fd, vfs_fd.fdlock) == 0xe0,
	       "vfs_state_fd.vfs_fd.fdlock offset");
_Static_assert(offsetof(struct vfs_state_fd, vfs_fd.fd) == 0x118,
	       "vfs_state_fd.vfs_fd.fd offset");
_Static_assert(offsetof(nfs_parameter_t, core_param.enable_FSALSTATS) == 0x113,
	       "nfs_param.core_param.enable_FSALSTATS offset");

#endif

/* Both: the object handles did not move from 4.3 to 6.5. */
_Static_assert(offsetof(struct fsal_obj_handle, fs) == 0x10,
	       "fsal_obj_handle.fs offset");
_Static_assert(offsetof(struct fsal_obj_handle, type) == 0x60,
	       "fsal_obj_handle.type offset");
_Static_assert(offsetof(struct vfs_fsal_obj_handle, handle) == 0xa0,
	       "vfs_fsal_obj_handle.handle offset");
_Static_assert(offsetof(struct vfs_fsal_obj_handle, u.file.share) == 0xb8,
	       "vfs_fsal_obj_handle.u.file.share offset");
_Static_assert(offsetof(struct vfs_fsal_obj_handle, u.file.fd) == 0xd0,
	       "vfs_fsal_obj_handle.u.file.fd offset");
_Static_assert(sizeof(uid_t) == sizeof(uint32_t) &&
		       sizeof(gid_t) == sizeof(uint32_t),
	       "dcache_creds carries uid_t/gid_t as uint32_t");

#endif /* DCACHE_ABI_H */
