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

/*
 * Ganesha's loader over the block: unknown settings (Ganesha's parser
 * counts one as harmless, "bogus", and carries on; for DCACHE a misspelt
 * setting would silently leave the default in force, so the export is
 * refused instead) and the nested block, whose module it loads when the
 * block names VFS.  Returns 1 when it reported a problem.
 */
static size_t load_block(void *block, struct config_error_type *err_type,
			 enum dcache_subfsal subfsal, enum dcache_nested nested,
			 struct dcache_export_args *args,
			 dcache_settings_bad_fn refuse, void *ctx)
{
	const bool load = subfsal == DCACHE_SUBFSAL_LOAD &&
			  nested == DCACHE_NESTED_VFS;
	const bool was_bogus = err_type->bogus;
	bool unknown;
	char why[1024];
	int rc;

	err_type->bogus = false;
	rc = load_config_from_node(block,
				   load ? &block_loading : &block_name_only,
				   args, true, err_type);
	unknown = err_type->bogus;
	err_type->bogus = was_bogus || unknown;
	/* Loading the nested block took a reference on its module: hold on to
	 * it here, so that every path puts it back or hands it on. */
	if (load && args->subfsal.fsal_node != NULL &&
	    args->subfsal.name != NULL) {
		args->subfsal_ref = lookup_fsal(args->subfsal.name);
		if (args->subfsal_ref != NULL)
			fsal_put(args->subfsal_ref); /* lookup_fsal's own */
	}
	if (rc == 0 && !unknown)
		return 0;
	snprintf(
		why, sizeof(why),
		"%s in the FSAL block (see the configuration error above naming it); allowed settings: %s",
		unknown ? "unknown setting" : "malformed setting",
		DCACHE_SETTING_NAMES);
	refuse(ctx, why);
	return 1;
}

bool dcache_block_in_export_block(void *block)
{
	return dcache_conf_in_export_block(block, setting_names,
					   DCACHE_SETTING_COUNT) > 0;
}

bool dcache_block_settings(void *block, struct config_error_type *err_type,
			   enum dcache_subfsal subfsal,
			   struct dcache_export_args *args,
			   struct dcache_settings *settings,
			   dcache_settings_bad_fn refuse, void *ctx)
{
	struct dcache_settings_text text = {0};
	char *values[DCACHE_SETTING_COUNT];
	size_t problems, several;
	enum dcache_nested nested;

	memset(args, 0, sizeof(*args));
	/* Every problem is reported, each once: an operator fixes them all
	 * in one go.  A setting the tree reading reports is not checked
	 * again below (its value is left out). */
	problems = dcache_conf_read(block, setting_names, DCACHE_SETTING_COUNT,
				    values, &several, refuse, ctx);
	problems += dcache_conf_misplaced(block, setting_names,
					  DCACHE_SETTING_COUNT, refuse, ctx);
	{
		size_t i = 0;
#define DCACHE_TAKE_VALUE(name, member) args->member = values[i++];
		DCACHE_SETTINGS(DCACHE_TAKE_VALUE)
	}
	/* Before Ganesha's loader reads the nested block, which loads the
	 * module it names: one that is not VFS is refused here, loadable or
	 * not, so ganesha.nfsd and dcache-check say the same. */
	nested = dcache_conf_nested_fsal(block, refuse, ctx);
	problems += nested != DCACHE_NESTED_VFS;
	/* Ganesha's loader, for unknown settings and the nested block's name
	 * (which it loads, unless it is not VFS's: refused whatever it is,
	 * loadable or not).  Not where a DCACHE setting is given several
	 * values (reported above): the loader would count that as an error
	 * of Ganesha's own ("can have only one option"), which makes Ganesha
	 * treat the whole block as invalid. */
	if (several == 0)
		problems += load_block(block, err_type, subfsal, nested, args,
				       refuse, ctx);
#define DCACHE_TEXT_FIELD(name, member) text.member = args->member;
	DCACHE_SETTINGS(DCACHE_TEXT_FIELD)
	problems += dcache_settings_parse_all(&text, settings, refuse, ctx);
	return problems == 0;
}
