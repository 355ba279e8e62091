/*
 * The verdict on an EXPORT's FSAL { Name = DCACHE; ... } block: every check
 * the plugin makes of it before it creates (or updates) an export, in the
 * plugin's order, each failure worded once.  ganesha.nfsd runs it from
 * export.c, dcache-check runs it offline: the same checks, the same
 * messages.
 *
 *   FSAL {
 *     Name = DCACHE;
 *     IO_Cache_Read = dontcache;  IO_Cache_Write = direct_file_sync; ...
 *     FSAL { Name = VFS; }
 *   }
 */
#include "dcache_config.h"

#include <stdio.h>
#include <string.h>

#include "abstract_mem.h"

/*
 * Every setting is read from the parse tree exactly as written
 * (config_tree.c: Ganesha's items would drop a sign, let a repeated setting
 * win, skip what its grammar dropped) and validated by the core, so each
 * bad value gets the same kind of message: the export, the setting, the
 * value as written and what is allowed.  DCACHE_SETTINGS (core.h) is the
 * one list the config table, the argument struct, its cleanup, the
 * hand-off to the core and the error message are generated from.
 */
#define DCACHE_NAME(name, member) name,
static const char *const setting_names[] = {DCACHE_SETTINGS(DCACHE_NAME)};
#define DCACHE_SETTING_COUNT (sizeof(setting_names) / sizeof(setting_names[0]))

/* For the error message: what may appear in the FSAL block. */
#define DCACHE_SETTING_NAME(name, member) name ", "
#define DCACHE_SETTING_NAMES \
	"Name, " DCACHE_SETTINGS(DCACHE_SETTING_NAME) "FSAL { Name = VFS; }"

/* dcache-check loads no module: the nested block's name is all it takes
 * (dcache_conf_nested_fsal has already refused a block without one). */
static int subfsal_name_only(void *node, void *link_mem, void *self_struct,
			     struct config_error_type *err_type)
{
	struct subfsal_args *subfsal = self_struct;

	if (subfsal->name == NULL || subfsal->name[0] == '\0') {
		err_type->missing = true;
		return 1;
	}
	subfsal->fsal_node = node;
	return 0;
}

/* Known to Ganesha's loader (so not "Unknown parameter"), read by
 * dcache_conf_read. */
#define DCACHE_CONF_ITEM(name, member) CONF_ITEM_NOOP(name),

static struct config_item sub_fsal_params[] = {
	CONF_ITEM_STR("name", 1, 10, NULL, subfsal_args, name), CONFIG_EOL};

/* The FSAL block's table, with the nested block committed by commit, and
 * the block around it.  (Macro bodies clang-format 14 would read as
 * expressions.) */
/* clang-format off */
#define DCACHE_EXPORT_PARAMS(commit)                                           \
	CONF_ITEM_NOOP("name"),                                                \
	DCACHE_SETTINGS(DCACHE_CONF_ITEM)                                      \
	CONF_RELAX_BLOCK("FSAL", sub_fsal_params, noop_conf_init, commit,      \
			 dcache_export_args, subfsal),                         \
	CONFIG_EOL

#define DCACHE_PARAM_BLOCK(table)                                              \
	{                                                                      \
		.dbus_interface_name =                                         \
			"org.ganesha.nfsd.config.fsal.dcache-export%d",        \
		.blk_desc.name = "FSAL",                                       \
		.blk_desc.type = CONFIG_BLOCK,                                 \
		.blk_desc.u.blk.init = noop_conf_init,                         \
		.blk_desc.u.blk.params = table,                                \
		.blk_desc.u.blk.commit = noop_conf_commit,                     \
	}
/* clang-format on */

/* ganesha.nfsd's: the nested block loads the FSAL it names. */
static struct config_item params_loading[] = {
	DCACHE_EXPORT_PARAMS(subfsal_commit)};
static struct config_block block_loading = DCACHE_PARAM_BLOCK(params_loading);

/* dcache-check's: the nested block's name only. */
static struct config_item params_name_only[] = {
	DCACHE_EXPORT_PARAMS(subfsal_name_only)};
static struct config_block block_name_only =
	DCACHE_PARAM_BLOCK(params_name_only);

#define DCACHE_FREE_ARG(name, member) gsh_free(args->member);
void dcache_export_args_free(struct dcache_export_args *args)
{
	if (args->subfsal_ref != NULL)
		fsal_put(args->subfsal_ref);
	gsh_free(args->subfsal.name);
	DCACHE_SETTINGS(DCACHE_FREE_ARG)
	memset(args, 0, sizeof(*args));
}

bool dcache_block_settings(void *block, struct config_error_type *err_type,
			   enum dcache_subfsal subfsal,
			   struct dcache_export_args *args,
			   struct dcache_settings *settings, char *why,
			   size_t why_len)
{
	struct dcache_settings_text text = {0};
	char *values[DCACHE_SETTING_COUNT];
	bool was_bogus, unknown;
	int rc;

	memset(args, 0, sizeof(*args));
	if (!dcache_conf_read(block, setting_names, DCACHE_SETTING_COUNT,
			      values, why, why_len) ||
	    dcache_conf_misplaced(block, setting_names, DCACHE_SETTING_COUNT,
				  why, why_len)) {
		for (size_t i = 0; i < DCACHE_SETTING_COUNT; ++i)
			gsh_free(values[i]);
		return false;
	}
	{
		size_t i = 0;
#define DCACHE_TAKE_VALUE(name, member) args->member = values[i++];
		DCACHE_SETTINGS(DCACHE_TAKE_VALUE)
	}
	/* Before Ganesha's loader reads the nested block, which loads the
	 * module it names: one that is not VFS is refused here, loadable or
	 * not, so ganesha.nfsd and dcache-check say the same. */
	if (!dcache_conf_nested_fsal(block, why, why_len))
		return false;
	/* Ganesha's parser counts an unknown setting as harmless ("bogus")
	 * and carries on; for DCACHE a misspelt setting would silently leave
	 * the default in force, so it refuses the export instead. */
	was_bogus = err_type->bogus;
	err_type->bogus = false;
	rc = load_config_from_node(block,
				   subfsal == DCACHE_SUBFSAL_LOAD
					   ? &block_loading
					   : &block_name_only,
				   args, true, err_type);
	unknown = err_type->bogus;
	err_type->bogus = was_bogus || unknown;
	/* Loading the nested block took a reference on its module: hold on to
	 * it here, so that every path puts it back or hands it on. */
	if (subfsal == DCACHE_SUBFSAL_LOAD && args->subfsal.fsal_node != NULL &&
	    args->subfsal.name != NULL) {
		args->subfsal_ref = lookup_fsal(args->subfsal.name);
		if (args->subfsal_ref != NULL)
			fsal_put(args->subfsal_ref); /* lookup_fsal's own */
	}
	if (rc != 0 || unknown) {
		snprintf(
			why, why_len,
			"%s in the FSAL block (see the configuration error above naming it); allowed settings: %s",
			unknown ? "unknown setting" : "malformed setting",
			DCACHE_SETTING_NAMES);
		return false;
	}
#define DCACHE_TEXT_FIELD(name, member) text.member = args->member;
	DCACHE_SETTINGS(DCACHE_TEXT_FIELD)
	if (dcache_settings_parse(&text, settings, why, why_len) != 0)
		return false;
	if (args->subfsal.name == NULL) {
		snprintf(
			why, why_len,
			"missing the nested FSAL { Name = VFS; } block naming the FSAL to stack on");
		return false;
	}
	return true;
}
