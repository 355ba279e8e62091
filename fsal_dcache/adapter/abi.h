/*
 * The ABI of the packaged Ganesha each build loads into: what every release
 * shares, then the release's own fingerprints (compat/X/dcache_abi.h).
 * Included by file.c only (with the headers it names).
 */
#ifndef DCACHE_ABI_H
#define DCACHE_ABI_H

#include <stddef.h>

#include "dcache_abi.h"

/* Every release: the object handles have not moved since 4.3. */
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
