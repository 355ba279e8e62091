/*
 * Ganesha 6.5 (Debian 13, trixie: nfs-ganesha 6.5-5), FSAL API 13: what
 * the adapter does differently on this release, one knob a difference
 * (compat/4.3/dcache_compat.h says what each means; docs/ganesha-releases.md
 * has the why, with file:line in each tree).
 */
#ifndef DCACHE_COMPAT_H
#define DCACHE_COMPAT_H

#define DCACHE_GANESHA_RELEASE "6.5"
#define DCACHE_FSAL_API_MAJOR 13

/* Descriptors are generic (struct fsal_fd in VFS's struct vfs_fd); I/O on
 * one is bracketed by fsal_start_io/fsal_complete_io. */
#define DCACHE_HAS_START_IO 1
/* Non-zero fsal_resume asks the caller to call read2/write2 again. */
#define DCACHE_HAS_FSAL_RESUME 1
/* A state carries its own free function; the fd LRU asks the export for
 * the fd's object (export_ops.get_fsal_obj_hdl, no default). */
#define DCACHE_STATE_FREED_BY_EXPORT 0
#define DCACHE_HAS_FS_READDIR_MODE 0
/* Where a WRITE's payload lies (adapter/rpc_buffers.c): in the receive
 * buffer (xdr_io_data), at its end for NFSv3, so aligned when the receive
 * buffer ends on a page. */
#define DCACHE_WRITE_DATA_IN_RECV_BUFFER 1
/* Ganesha asks the FSAL for a READ's buffer (fso_allocate_own_read_buffer:
 * iov[0].iov_base NULL, released through iov_release after the reply). */
#define DCACHE_FSAL_ALLOCATES_READ_BUFFER 1
/* No monitoring registry in Debian's build (USE_MONITORING off: no
 * monitoring symbols in libganesha_nfsd or a library of its): metrics come
 * from dcache-exporter. */
#define DCACHE_HAS_MONITORING 0
/* GetFSALStats (support/export_mgr.c:2694, stats_fsal) looks the module
 * up (lookup_fsal, a reference) and never puts the reference back; its
 * fsal_extract_stats call is the only one, so stats.c puts it back there. */
#define DCACHE_STATS_LOOKUP_KEEPS_REF 1

/* Handles go on the FSAL's list for its destroyer (as FSAL_NULL). */
#define DCACHE_HANDLE_INIT(obj, exp, type) \
	fsal_obj_handle_init(obj, exp, type, true)
#define DCACHE_HANDLE_FINI(obj) fsal_obj_handle_fini(obj, true)
#define DCACHE_FSAL_LOCK(fsal) ((fsal)->fsm_lock)
/* The ops that change a directory report its attributes before and after
 * (both optional): extra parameters, passed through. */
#define DCACHE_DIR_ATTRS_PARAMS(dir)                 \
	, struct fsal_attrlist *dir##_pre_attrs_out, \
		struct fsal_attrlist *dir##_post_attrs_out
#define DCACHE_DIR_ATTRS_ARGS(dir) , dir##_pre_attrs_out, dir##_post_attrs_out
#define DCACHE_READLINK_BUF struct gsh_buffdesc

#define DCACHE_PREREQ_INIT(prog, host, level, path, trace) \
	nfs_prereq_init(prog, host, level, path, trace, 0)

/*
 * The parse tree: every node has its parent at +0x38, before the union
 * (Debian 13's load_config_from_node tests the type at +0x30 and reads the
 * block name at +0x40).
 */
#define DCACHE_NODE_PARENT(node) ((node)->parent)
#define DCACHE_CONFIG_NODE_LAYOUT(X) \
	X(parent, 56)                \
	X(u.term.type, 64)           \
	X(u.term.op_code, 72)        \
	X(u.term.varvalue, 80)       \
	X(u.nterm.name, 64)          \
	X(u.nterm.sub_nodes, 72)

#endif /* DCACHE_COMPAT_H */
