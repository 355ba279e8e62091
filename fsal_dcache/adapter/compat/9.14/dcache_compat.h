/*
 * Ganesha 9.14 (Debian 13 backports, and forky: nfs-ganesha 9.14-1~bpo13+1,
 * 9.14-2), FSAL API 14: what the adapter does differently on this release,
 * one knob a difference (compat/4.3/dcache_compat.h says what each means;
 * docs/ganesha-releases.md has the why, with file:line in each tree).
 * FSAL API 14.0 does not name a layout: 15.2 keeps 14.0 with two more
 * object ops, so a 9.14 build checks GANESHA_VERSION_MAJOR too (below).
 */
#ifndef DCACHE_COMPAT_H
#define DCACHE_COMPAT_H

#define DCACHE_GANESHA_RELEASE "9.14"
#define DCACHE_FSAL_API_MAJOR 14

#define DCACHE_HAS_START_IO 1
#define DCACHE_HAS_FSAL_RESUME 1
#define DCACHE_STATE_FREED_BY_EXPORT 0
/* export_ops.fs_readdir_mode: its default reads the DCACHE module's
 * fs_info, so it is forwarded to VFS (as FSAL_NULL does). */
#define DCACHE_HAS_FS_READDIR_MODE 1
/* Where a WRITE's payload lies (adapter/rpc_buffers.c): in the receive
 * buffer (xdr_io_data), at its end for NFSv3, so aligned when the receive
 * buffer ends on a page. */
#define DCACHE_WRITE_DATA_IN_RECV_BUFFER 1
/* Ganesha asks the FSAL for a READ's buffer (fso_allocate_own_read_buffer:
 * iov[0].iov_base NULL, released through iov_release after the reply). */
#define DCACHE_FSAL_ALLOCATES_READ_BUFFER 1
/* Ganesha's monitoring registry, in libntirpcmonitoring.so.7.2 (ntirpc's
 * monitoring.h, handles of one pointer): the module registers its metrics
 * there (adapter/metrics.c), served on Monitoring_Port with Enable_Metrics. */
#define DCACHE_HAS_MONITORING 1
/* GetFSALStats (support/export_mgr.c:2695, stats_fsal) looks the module
 * up (lookup_fsal, a reference) and never puts the reference back; its
 * fsal_extract_stats call is the only one, so stats.c puts it back there. */
#define DCACHE_STATS_LOOKUP_KEEPS_REF 1

#define DCACHE_HANDLE_INIT(obj, exp, type) \
	fsal_obj_handle_init(obj, exp, type, true)
#define DCACHE_HANDLE_FINI(obj) fsal_obj_handle_fini(obj, true)
#define DCACHE_FSAL_LOCK(fsal) ((fsal)->fsm_lock)
#define DCACHE_DIR_ATTRS_PARAMS(dir)                 \
	, struct fsal_attrlist *dir##_pre_attrs_out, \
		struct fsal_attrlist *dir##_post_attrs_out
#define DCACHE_DIR_ATTRS_ARGS(dir) , dir##_pre_attrs_out, dir##_post_attrs_out
/* readlink fills a utf8string (fsal_api.h:1970). */
#define DCACHE_READLINK_BUF utf8string

#define DCACHE_PREREQ_INIT(prog, host, level, path, trace) \
	nfs_prereq_init(prog, host, level, path, trace, 0)

/* The parse tree is 6.5's (config_parsing/analyse.h unchanged; Debian's
 * 9.14 load_config_from_node reads the type at +0x30, the name at +0x40). */
#define DCACHE_NODE_PARENT(node) ((node)->parent)
#define DCACHE_CONFIG_NODE_LAYOUT(X) \
	X(parent, 56)                \
	X(u.term.type, 64)           \
	X(u.term.op_code, 72)        \
	X(u.term.varvalue, 80)       \
	X(u.nterm.name, 64)          \
	X(u.nterm.sub_nodes, 72)

#endif /* DCACHE_COMPAT_H */
