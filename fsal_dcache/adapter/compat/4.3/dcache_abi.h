/*
 * The ABI of Debian's nfs-ganesha 4.3-2 binaries, which this build loads
 * into: layouts read off those binaries (beside 6.5's in
 * docs/results/2026-12-01-ganesha-6.5-port.md, section 15).  The plugin
 * is built against headers from the source package, not against the
 * binaries; a config.h or header set that does not match Debian's build
 * fails here rather than corrupting memory at run time.  Included by
 * abi.h only.
 */
#ifndef DCACHE_RELEASE_ABI_H
#define DCACHE_RELEASE_ABI_H

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

#endif /* DCACHE_RELEASE_ABI_H */
