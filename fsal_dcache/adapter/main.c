/*
 * Module registration: ganesha.nfsd dlopen()s libfsaldcache.so from
 * Plugins_Dir when an EXPORT names FSAL DCACHE; the constructor registers
 * the module, the destructor unregisters it.
 */
#include "dcache_internal.h"

#include "FSAL/fsal_init.h"
#include "log.h"

/* Every fs_* export op is delegated to the sub-FSAL, so these module-wide
 * values are only what Ganesha shows before an export exists. */
struct dcache_fsal_module dcache_module = {
	.module =
		{
			.fs_info =
				{
					.maxfilesize = UINT64_MAX,
					.maxlink = _POSIX_LINK_MAX,
					.maxnamelen = 1024,
					.maxpathlen = 1024,
					.no_trunc = true,
					.chown_restricted = true,
					.case_preserving = true,
					.link_support = true,
					.symlink_support = true,
					.lock_support = true,
					.named_attr = true,
					.unique_handles = true,
					.acl_support = FSAL_ACLSUPPORT_ALLOW,
					.cansettime = true,
					.homogenous = true,
					.supported_attrs = ALL_ATTRIBUTES,
					.maxread = FSAL_MAXIOSIZE,
					.maxwrite = FSAL_MAXIOSIZE,
					.link_supports_permission_checks = true,
					.expire_time_parent = -1,
				},
		},
};

/* The core logs through Ganesha's logger, under COMPONENT_FSAL. */
static void dcache_log(enum dcache_log_level level, const char *message)
{
	switch (level) {
	case DCACHE_LOG_ERROR:
		LogCrit(COMPONENT_FSAL, "DCACHE: %s", message);
		break;
	case DCACHE_LOG_WARN:
		LogWarn(COMPONENT_FSAL, "DCACHE: %s", message);
		break;
	case DCACHE_LOG_INFO:
		LogInfo(COMPONENT_FSAL, "DCACHE: %s", message);
		break;
	case DCACHE_LOG_DEBUG:
		LogDebug(COMPONENT_FSAL, "DCACHE: %s", message);
		break;
	}
}

/* The module has no global settings of its own: everything is per export. */
static fsal_status_t dcache_init_config(struct fsal_module *module,
					config_file_t config_struct,
					struct config_error_type *err_type)
{
	(void)config_struct;
	(void)err_type;
	LogInfo(COMPONENT_FSAL, "DCACHE: module loaded (FSAL API %d.%d)",
		FSAL_MAJOR_VERSION, FSAL_MINOR_VERSION);
	LogInfo(COMPONENT_FSAL, "DCACHE: RPC buffers of %zu KiB and more %s%s",
		DCACHE_RPC_BUFFER_MIN >> 10,
		dcache_rpc_buffers_installed()
			? "page-aligned and reused, "
			: "left to Ganesha (DCACHE_RPC_BUFFERS=0, or no ntirpc table)",
		dcache_rpc_buffers_installed() ? dcache_rpc_registered() : "");
	LogInfo(COMPONENT_FSAL, "DCACHE: READ reply buffers: %s",
		dcache_rpc_read_buffers());
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

MODULE_INIT void dcache_module_init(void)
{
	struct fsal_module *module = &dcache_module.module;

	if (register_fsal(module, DCACHE_FSAL_NAME, FSAL_MAJOR_VERSION,
			  FSAL_MINOR_VERSION, FSAL_ID_NO_PNFS) != 0) {
		fprintf(stderr, "DCACHE: failed to register the FSAL module\n");
		return;
	}
	module->m_ops.init_config = dcache_init_config;
	module->m_ops.create_export = dcache_create_export;
	module->m_ops.update_export = dcache_update_export;
	dcache_handle_ops_init(&dcache_module.handle_ops);
	dcache_stats_init(module);
	dcache_set_log(dcache_log);
	dcache_rpc_buffers_install();
}

MODULE_FINI void dcache_module_fini(void)
{
	dcache_metrics_shutdown();
	dcache_rpc_buffers_remove();
	if (unregister_fsal(&dcache_module.module) != 0)
		fprintf(stderr,
			"DCACHE: failed to unregister the FSAL module\n");
}
