/*
 * The ABI of Debian's nfs-ganesha 6.5-5 binaries, which this build loads
 * into: layouts read off those binaries (with the instruction each was
 * read from: docs/results/2026-12-01-ganesha-6.5-port.md, section 15).
 * The plugin is built against headers from the source package, not
 * against the binaries; a config.h or header set that does not match
 * Debian's build fails here rather than corrupting memory at run time.
 * Included by abi.h only.
 */
#ifndef DCACHE_RELEASE_ABI_H
#define DCACHE_RELEASE_ABI_H

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

#endif /* DCACHE_RELEASE_ABI_H */
