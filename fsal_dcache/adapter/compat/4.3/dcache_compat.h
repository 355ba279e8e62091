/*
 * Ganesha 4.3 (Debian 12, bookworm: nfs-ganesha 4.3-2), FSAL API 11: what
 * the adapter does differently on this release, one knob a difference.
 * The build picks this directory by Ganesha_VERSION; the same knobs are
 * defined for every release (compat/X/dcache_compat.h), and
 * docs/ganesha-releases.md has the why, with file:line in each tree.
 */
#ifndef DCACHE_COMPAT_H
#define DCACHE_COMPAT_H

#define DCACHE_GANESHA_RELEASE "4.3"
#define DCACHE_FSAL_API_MAJOR 11

/* I/O on VFS's descriptor: find_fd (dlsym'd) under VFS's locks, not
 * fsal_start_io/fsal_complete_io. */
#define DCACHE_HAS_START_IO 0
/* struct fsal_io_arg has no fsal_resume. */
#define DCACHE_HAS_FSAL_RESUME 0
/* A state is freed through its export (export_ops.free_state); the fd LRU
 * goes through the stack, so there is no get_fsal_obj_hdl. */
#define DCACHE_STATE_FREED_BY_EXPORT 1
/* No export_ops.fs_readdir_mode. */
#define DCACHE_HAS_FS_READDIR_MODE 0
/* Where a WRITE's payload lies (adapter/rpc_buffers.c): copied out of the
 * receive buffer into a buffer of its own, of the data's size (xdr_bytes),
 * so aligned when that buffer starts on a page. */
#define DCACHE_WRITE_DATA_IN_RECV_BUFFER 0
/* Ganesha allocates a READ's buffer itself: NFSv3's with gsh_malloc (16
 * bytes past a page), freed with gsh_free after the reply (nfs3_read.c). */
#define DCACHE_FSAL_ALLOCATES_READ_BUFFER 0
/* Ganesha's monitoring registry (monitoring__register_counter ...): none
 * in Debian's build, so the module registers no metrics (adapter/metrics.c
 * is not built); dcache-exporter serves them from the DBus statistics. */
#define DCACHE_HAS_MONITORING 0

/* GetFSALStats (support/export_mgr.c:2811, stats_fsal) looks the module
 * up (lookup_fsal, a reference) and never puts the reference back; its
 * fsal_extract_stats call is the only one, so stats.c puts it back there. */
#define DCACHE_STATS_LOOKUP_KEEPS_REF 1

/* Handles are not put on the FSAL's list. */
#define DCACHE_HANDLE_INIT(obj, exp, type) fsal_obj_handle_init(obj, exp, type)
#define DCACHE_HANDLE_FINI(obj) fsal_obj_handle_fini(obj)
/* The lock of struct fsal_module. */
#define DCACHE_FSAL_LOCK(fsal) ((fsal)->lock)
/* The ops that change a directory report no attributes of it. */
#define DCACHE_DIR_ATTRS_PARAMS(dir)
#define DCACHE_DIR_ATTRS_ARGS(dir)
/* What readlink fills. */
#define DCACHE_READLINK_BUF struct gsh_buffdesc

/* nfs_prereq_init (dcache-check's start of Ganesha's logging) takes no
 * stack size. */
#define DCACHE_PREREQ_INIT(prog, host, level, path, trace) \
	nfs_prereq_init(prog, host, level, path, trace)

/*
 * The parse tree (config_parsing/analyse.h): only blocks have a parent,
 * inside the union.  Offsets as Debian 12's libganesha_nfsd.so.4.3 reads
 * them (config_GetBlockNode reads the name at +0x38 through the blocks
 * list at +0x10; load_config_from_node tests the type at +0x30 against
 * TYPE_BLOCK = 2).
 */
#define DCACHE_NODE_PARENT(node) ((node)->u.nterm.parent)
#define DCACHE_CONFIG_NODE_LAYOUT(X) \
	X(u.term.type, 56)           \
	X(u.term.op_code, 64)        \
	X(u.term.varvalue, 72)       \
	X(u.nterm.name, 56)          \
	X(u.nterm.parent, 64)        \
	X(u.nterm.sub_nodes, 72)

#endif /* DCACHE_COMPAT_H */
